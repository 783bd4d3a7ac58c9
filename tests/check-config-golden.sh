#!/bin/bash
# SPDX-License-Identifier: MIT
# Golden tests of rtsoakd's configuration: every tests/config/valid-*.conf must print exactly
# its .out with --check-config; every invalid-*.conf must exit 78 with exactly its .err.  A
# FILE.args next to a case holds extra arguments, one per line.  Also checks that
# etc/rtsoakd.conf documents every key with its true default.
#
# Usage: check-config-golden.sh RTSOAKD SRCDIR ETC_CONF [--update]
# (ETC_CONF: etc/rtsoakd.conf as the build installs it, with the build's paths filled in)
set -u
rtsoakd=$1
src=$2
etc_conf=$3
update=${4:-}
dir=$src/tests/config
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
        n=$((n + 1)); failed=1
        echo "not ok $n - $1"
        shift
        printf '%s\n' "$@" | sed 's/^/# /'
}

run_case() { # file -> sets out, err, status
        local f=$1 args=()
        if [ -f "$f.args" ]; then
                mapfile -t args < "$f.args"
        fi
        local tmp
        tmp=$(mktemp -d)
        (cd "$dir" && "$rtsoakd" --config "$(basename "$f")" "${args[@]}" --check-config \
                >"$tmp/out" 2>"$tmp/err")
        status=$?
        out=$(cat "$tmp/out")
        err=$(cat "$tmp/err")
        rm -rf "$tmp"
}

cases=("$dir"/valid-*.conf "$dir"/invalid-*.conf)
echo "1..$(( ${#cases[@]} + 2 ))"

for f in "${cases[@]}"; do
        name=$(basename "$f" .conf)
        run_case "$f"
        if [[ $name == valid-* ]]; then
                golden=$dir/$name.out
                actual=$out
                want_status=0
        else
                golden=$dir/$name.err
                actual=$err
                want_status=78
        fi
        if [ "$update" = --update ]; then
                printf '%s\n' "$actual" > "$golden"
        fi
        expected=$(cat "$golden" 2>/dev/null || echo "(no golden file $golden)")
        if [ "$status" -ne "$want_status" ]; then
                not_ok "$name" "exit status $status, expected $want_status" "stderr: $err"
        elif [ "$actual" != "$expected" ]; then
                not_ok "$name" "output differs from $(basename "$golden"):" \
                        "$(diff <(printf '%s\n' "$expected") <(printf '%s\n' "$actual"))"
        else
                ok "$name"
        fi
done

# etc/rtsoakd.conf: with every "#Key=Value" line uncommented, the effective configuration is
# the built-in default one...
tmp=$(mktemp -d)
sed 's/^#\([A-Za-z]\+=\)/\1/' "$etc_conf" > "$tmp/uncommented.conf"
defaults=$("$rtsoakd" --config /dev/null --check-config | grep -v '^# ')
documented=$("$rtsoakd" --config "$tmp/uncommented.conf" --check-config 2>&1 | grep -v '^# ')
if [ "$defaults" = "$documented" ]; then
        ok "etc/rtsoakd.conf states the true defaults"
else
        not_ok "etc/rtsoakd.conf states the true defaults" \
                "$(diff <(printf '%s\n' "$defaults") <(printf '%s\n' "$documented"))"
fi
# ...and every key is documented there, in its section.
keys() { awk '/^\[/ { s = $0 } /^#?[A-Za-z]+=/ { sub(/^#/, ""); sub(/=.*/, ""); print s "." $0 }' "$@" | sort; }
all=$(printf '%s\n' "$defaults" | keys)
doc=$(keys "$src/etc/rtsoakd.conf")
if [ "$all" = "$doc" ]; then
        ok "etc/rtsoakd.conf documents every key"
else
        not_ok "etc/rtsoakd.conf documents every key" "$(diff <(echo "$all") <(echo "$doc"))"
fi
rm -rf "$tmp"
exit $failed
