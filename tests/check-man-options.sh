#!/bin/bash
# SPDX-License-Identifier: MIT
# The documents against the programs, both ways:
# - every command that a program's --help lists ("Commands:") has its entry in its man page
#   (man/*.scd), every option of its --help and of each command's own --help is described
#   there, and every option the page names ("*--name*") is one of those (or of a load
#   generator's, for rtsoak-load); every load generator with each of its options is in
#   rtsoak-load(1);
# - every configuration key that rtsoakd and rtsoak-server take is documented, and every
#   documented key is one they take.  What a program takes is what it lists itself when it
#   refuses an unknown section (every section) or an unknown key (every key of the section);
#   rtsoakd's list is also held against its --check-config.  The documents: the key
#   reference (man/rtsoakd.conf.5.scd, man/rtsoak-server.conf.5.scd: "# [Section] SECTION"
#   and "*Key=*" items), the installed examples (etc/*.conf: "[Section]" and "#Key=" lines),
#   every Markdown table of keys in README.md and docs/*.md (a table whose first column is
#   "key", under a line or in a header naming its `[Section]`: all the section's keys), and
#   every mention "[Section] Key=" anywhere in those files and the man pages.
#
# Usage: check-man-options.sh SRCDIR BINARY PAGE [BINARY PAGE]...
set -u
src=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
        n=$((n + 1))
        failed=1
        echo "not ok $n - $1"
        [ -n "${2:-}" ] && printf '%s\n' "$2" | head -40 | sed 's/^/# /'
}

# ---- options --------------------------------------------------------------------------------

# The commands of a program's --help: the first word of each entry of its "Commands:" block
# (indented by two), and a word after " | " ("admin-token NAME | admin-revoke NAME").
commands() { # binary
        "$1" --help 2>&1 | awk '/^Commands:/ { on = 1; next }
                on && /^$/ { exit }
                on && /^  [a-z]/ { print $1; for (i = 2; i < NF; i++) if ($i == "|") print $(i + 1) }' |
                sort -u
}

# Every option a program shows: its --help, each command's --help (a command without one of
# its own shows the program's), and for rtsoak-load each generator's.
shown_options() { # binary
        {
                "$1" --help 2>&1
                for c in $(commands "$1"); do "$1" "$c" --help 2>&1; done
                if [ "$(basename "$1")" = rtsoak-load ]; then
                        for g in $("$1" --list | awk '{ print $1 }'); do "$1" "$g" --help 2>&1; done
                fi
        } | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
}

config_programs=()
while [ $# -ge 2 ]; do
        bin=$1 page=$2
        shift 2
        prog=$(basename "$bin")
        shown_options "$bin" >"$tmp/$prog.options"
        missing=""
        # An entry: a line that starts with a command in bold (several on one line are
        # "*admin-token* NAME, *admin-revoke* NAME"), not the synopsis' "*program* ...".
        for c in $(commands "$bin"); do
                grep -v -- "^\*$prog\*" "$src/man/$page.scd" |
                        grep -qE -- "^\*[a-z].*(^|[ ,])\*$c( |\*)|^\*$c( |\*)" || missing+=" $c"
        done
        if [ -z "$missing" ]; then
                ok "man/$page.scd has an entry for every command of $prog --help"
        else
                not_ok "man/$page.scd has no entry for the commands:$missing"
        fi
        missing=""
        while read -r o; do
                [ "$prog" = rtsoak-load ] && "$bin" --list | awk '{ print "--" $1 }' | grep -qx -- "$o" &&
                        continue
                grep -qE -- "(\*|, )$o(\*|,|=)" "$src/man/$page.scd" || missing+=" $o"
        done <"$tmp/$prog.options"
        if [ -z "$missing" ]; then
                ok "man/$page.scd describes every option of $prog --help and its commands' --help"
        else
                not_ok "man/$page.scd lacks$missing"
        fi
        # "--name", "--name=yes" and "--no-name" are the page's notation of a yes/no option;
        # "--no-X" is option X switched off.
        unknown=""
        for o in $(grep -oE -- '\*--[a-z][a-z0-9-]*(\*|=)' "$src/man/$page.scd" | tr -d '*=' | sort -u); do
                [ "$o" = --name ] || [ "$o" = --no-name ] && continue
                grep -qx -- "$o" "$tmp/$prog.options" && continue
                [[ $o == --no-* ]] && grep -qx -- "--${o#--no-}" "$tmp/$prog.options" && continue
                unknown+=" $o"
        done
        if [ -z "$unknown" ]; then
                ok "every option man/$page.scd names is one $prog shows"
        else
                not_ok "man/$page.scd names options $prog does not show:$unknown"
        fi
        case $(basename "$bin") in
        rtsoakd | rtsoak-server) config_programs+=("$bin") ;;
        rtsoak-load)
                # Each generator of --list has its entry under GENERATORS ("*NAME*", then
                # tab-indented text) naming every option of "rtsoak-load NAME --help".
                bad=""
                for g in $("$bin" --list | awk '{ print $1 }'); do
                        entry=$(awk -v g="*$g*" '/^# / { in_gen = ($0 == "# GENERATORS") }
                                in_gen && $0 == g { on = 1; next }
                                on && !/^(\t|$)/ { exit }
                                on' "$src/man/$page.scd")
                        [ -n "$entry" ] || { bad+=" $g (no entry)"; continue; }
                        for o in $("$bin" "$g" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
                                [ "$o" = --help ] && continue
                                grep -qF -- "*$o*" <<<"$entry" || bad+=" $g $o"
                        done
                done
                if [ -z "$bad" ]; then
                        ok "man/$page.scd describes every generator and its options"
                else
                        not_ok "man/$page.scd lacks:$bad"
                fi
                ;;
        esac
done

# ---- configuration keys ---------------------------------------------------------------------

# The error of one --set assignment, with an empty configuration file.
refusal() { # binary assignment
        case $(basename "$1") in
        rtsoakd) "$1" --config /dev/null --set "$2" --check-config 2>&1 >/dev/null ;;
        *) "$1" --config /dev/null --set "$2" --help 2>&1 >/dev/null ;;
        esac
}

# "Section.Key" lines of what a program takes, dynamic sections as "Prefix.NAME"; the sections
# it takes in $tmp/PROG.sections.  Fails naming what it could not read.
program_keys() { # binary prog
        local bin=$1 prog=$2 msg s dyn
        msg=$(refusal "$bin" "Zz.Zz=")
        if [[ $msg != *"unknown section [Zz]; the sections: "* ]]; then
                echo "$prog: no list of sections in: $msg" >&2
                return 1
        fi
        printf '%s\n' "${msg#*the sections: }" | grep -o '\[[A-Za-z0-9.]*\]' | tr -d '[]' \
                >"$tmp/$prog.sections"
        while read -r s; do
                if [[ $s == *.NAME ]]; then
                        dyn=${s%NAME}
                        msg=$(refusal "$bin" "${dyn}x.Zz=")
                        [[ $msg == *"unknown key"* ]] || { echo "$prog: [$s]: $msg" >&2; return 1; }
                        printf '%s\n' "${msg#*unknown key}" | grep -o '[A-Za-z][A-Za-z0-9]*=' |
                                tr -d = | grep -vx Zz | sed "s/^/$s./"
                else
                        msg=$(refusal "$bin" "$s.Zz=")
                        [[ $msg == *"; [$s] takes "* ]] || { echo "$prog: [$s]: $msg" >&2; return 1; }
                        printf '%s\n' "${msg#*; \[$s\] takes }" | grep -o '[A-Za-z][A-Za-z0-9]*=' |
                                tr -d = | sed "s/^/$s./"
                fi
        done <"$tmp/$prog.sections"
}

# A section as the program names it: "Scenario.mixed" is "Scenario.NAME" (in order, one
# line for each line read).
normalize_each() { # prog  (stdin: Section.Key lines)
        awk -v list="$tmp/$1.sections" '
                BEGIN { while ((getline s < list) > 0) if (s ~ /\.NAME$/) dyn[substr(s, 1, length(s) - 4)] = 1 }
                {
                        dot = 0
                        for (p in dyn)
                                if (index($0, p) == 1 && index(substr($0, length(p) + 1), ".") > 0) {
                                        rest = substr($0, length(p) + 1)
                                        sub(/^.*\./, "", rest)
                                        print p "NAME." rest
                                        dot = 1
                                        break
                                }
                        if (!dot) print
                }'
}
normalize() { normalize_each "$1" | sort -u; }

# The reference page: "# [Section] SECTION(S)" headings, "*Key=*" items at the line start.
man_keys() { # page
        awk '
                /^# / { section = ""; if (match($0, /^# \[[^]]*\] SECTIONS?$/)) section = substr($0, 4, index($0, "]") - 4); next }
                section != "" && /^\*[A-Za-z][A-Za-z0-9]*=\*/ {
                        line = $0
                        while (match(line, /\*[A-Za-z][A-Za-z0-9]*=\*/)) {
                                print section "." substr(line, RSTART + 1, RLENGTH - 3)
                                line = substr(line, RSTART + RLENGTH)
                        }
                }' "$1"
}

# An installed example: "[Section]" or "#[Section]" lines, then "Key=" or "#Key=" lines.
etc_keys() { # file
        awk '
                /^#?\[[^] ]+\]$/ { section = $0; sub(/^#?\[/, "", section); sub(/\]$/, "", section); next }
                section != "" && /^#?[A-Za-z][A-Za-z0-9]*=/ { key = $0; sub(/^#/, "", key); sub(/=.*/, "", key); print section "." key }' "$1"
}

# Markdown tables of keys: "FILE<TAB>Section<TAB>Key" for every row of a table whose first
# header cell is "key", with its section named in that cell or in the last text line before it.
md_table_keys() { # files...
        awk -v OFS='\t' '
                function section_of(text,   s) {
                        if (!match(text, /`\[[A-Za-z][A-Za-z0-9.]*\]`/)) return ""
                        s = substr(text, RSTART + 2, RLENGTH - 4)
                        return s
                }
                FNR == 1 { intable = 0; last = "" }
                /^\|/ {
                        if (!intable) {
                                intable = 1
                                head = $0
                                split(head, cell, "|")
                                first = tolower(cell[2]); gsub(/^ +| +$/, "", first)
                                keys = (first ~ /(^|` )key$/)
                                section = section_of(cell[2])
                                if (section == "") section = section_of(last)
                                if (keys && section == "") print FILENAME, "?", "(a table of keys under no [Section]: " FNR ")"
                                next
                        }
                        if (!keys || section == "" || $0 ~ /^\|[- |:]*$/) next
                        split($0, cell, "|")
                        c = cell[2]
                        while (match(c, /`(\[[A-Za-z][A-Za-z0-9.]*\] )?[A-Za-z][A-Za-z0-9]*=`/)) {
                                k = substr(c, RSTART + 1, RLENGTH - 3)
                                s = section
                                if (k ~ /^\[/) { s = substr(k, 2, index(k, "]") - 2); k = substr(k, index(k, "]") + 2) }
                                print FILENAME, s, k
                                c = substr(c, RSTART + RLENGTH)
                        }
                        next
                }
                { intable = 0; if ($0 !~ /^[ \t]*$/) last = $0 }' "$@"
}

# Every "[Section] Key=" mention: "FILE<TAB>Section.Key".
mentions() { # files...
        grep -o -H '\[[A-Za-z][A-Za-z0-9._-]*\] [A-Za-z][A-Za-z0-9]*=' "$@" |
                sed 's/:\[\([^]]*\)\] \(.*\)=$/\t\1.\2/'
}

# The documents of each program: its reference page and its installed example.
declare -A ref_page=([rtsoakd]=rtsoakd.conf.5 [rtsoak-server]=rtsoak-server.conf.5)
docs=("$src/README.md" "$src"/docs/*.md)
md_table_keys "${docs[@]}" >"$tmp/tables"
mentions "${docs[@]}" "$src"/man/*.scd "$src"/etc/*.conf >"$tmp/mentions"
for bin in "${config_programs[@]}"; do
        prog=$(basename "$bin")
        if ! program_keys "$bin" "$prog" >"$tmp/$prog.raw" 2>"$tmp/$prog.err"; then
                not_ok "$prog lists the sections and keys it takes" "$(cat "$tmp/$prog.err")"
                continue
        fi
        sort -u "$tmp/$prog.raw" >"$tmp/$prog.keys"
        if [ "$(wc -l <"$tmp/$prog.keys")" -lt 10 ]; then
                not_ok "$prog lists the sections and keys it takes" "$(cat "$tmp/$prog.keys")"
                continue
        fi
        ok "$prog lists $(wc -l <"$tmp/$prog.keys") keys in $(wc -l <"$tmp/$prog.sections") sections"

        # rtsoakd prints its whole configuration: the same keys.
        if [ "$prog" = rtsoakd ]; then
                printed=$("$bin" --config /dev/null --check-config | etc_keys /dev/stdin | normalize "$prog")
                if [ "$printed" = "$(cat "$tmp/$prog.keys")" ]; then
                        ok "rtsoakd's refusals list what its --check-config prints"
                else
                        not_ok "rtsoakd's refusals list other keys than its --check-config prints" \
                                "$(diff <(echo "$printed") "$tmp/$prog.keys")"
                fi
        fi

        compare() { # what documented-keys-file
                local d
                d=$(diff "$tmp/$prog.keys" "$2" | sed -n 's/^< /not documented: /p; s/^> /not a key of '"$prog"': /p')
                if [ -z "$d" ]; then
                        ok "$1 documents exactly the keys $prog takes"
                else
                        not_ok "$1 and $prog differ" "$d"
                fi
        }
        man_keys "$src/man/${ref_page[$prog]}.scd" | normalize "$prog" >"$tmp/man"
        compare "man/${ref_page[$prog]}.scd" "$tmp/man"
        etc_keys "$src/etc/$prog.conf" | normalize "$prog" >"$tmp/etc"
        compare "etc/$prog.conf" "$tmp/etc"

        # Each table of keys of one of its sections holds that section's keys, all of them.
        while IFS=$'\t' read -r file section; do
                name=${file#"$src"/}
                awk -F'\t' -v f="$file" -v s="$section" '$1 == f && $2 == s { print $2 "." $3 }' \
                        "$tmp/tables" | normalize "$prog" >"$tmp/table"
                section=$(echo "$section.x" | normalize "$prog")
                section=${section%.x}
                grep -qx "$section" "$tmp/$prog.sections" || continue
                grep "^$(printf '%s' "$section" | sed 's/[.[]/\\&/g')\." "$tmp/$prog.keys" >"$tmp/want"
                d=$(diff "$tmp/want" "$tmp/table" | sed -n 's/^< /not in the table: /p; s/^> /not a key of '"$prog"': /p')
                if [ -z "$d" ]; then
                        ok "$name: its table of [$section] holds every key of the section"
                else
                        not_ok "$name: its table of [$section] and $prog differ" "$d"
                fi
        done < <(cut -f1,2 "$tmp/tables" | sort -u)

        # Every "[Section] Key=" written anywhere, for a section of this program, is a key.
        bad=$(cut -f2 "$tmp/mentions" | normalize_each "$prog" | paste "$tmp/mentions" - |
                awk -F'\t' -v sections="$tmp/$prog.sections" -v keys="$tmp/$prog.keys" '
                        BEGIN {
                                while ((getline l < sections) > 0) known[l] = 1
                                while ((getline l < keys) > 0) taken[l] = 1
                        }
                        { s = $3; sub(/\.[^.]*$/, "", s) }
                        (s in known) && !($3 in taken) { print $1 ": " $2 }' | sed "s|^$src/||" | sort -u)
        if [ -z "$bad" ]; then
                ok "every \"[Section] Key=\" of $prog's sections in the documents is a key it takes"
        else
                not_ok "documents name keys $prog does not take" "$(printf '%s' "$bad" | sort -u)"
        fi
done
# A table of keys must say whose.
if grep -q $'\t?\t' "$tmp/tables"; then
        not_ok "every table of keys names its section" \
                "$(grep $'\t?\t' "$tmp/tables" | sed "s|^$src/||")"
fi
echo "1..$n"
exit $failed
