#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks what "meson install" puts where: installs this build with --destdir into a temporary
# directory and looks for every file at the path the build's options give; then configures
# the sources the way Debian builds them (--prefix=/usr) and checks the paths meson would
# install to there.  Usage: check-install.sh SRCDIR BUILDDIR
set -u
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() {
        n=$((n + 1))
        echo "ok $n - $1"
}
not_ok() {
        n=$((n + 1))
        failed=1
        echo "not ok $n - $1"
        [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/# /'
}

man=yes
[ -e "$build/man/rtsoakd.8" ] || man=no
echo "1..3"

# 1: a real install of this build.
opt() {
        meson introspect --buildoptions "$build" |
                python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']==sys.argv[1]][0])" "$1"
}
prefix=$(opt prefix)
abs() {
        case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac
}
bindir=$(abs "$(opt bindir)")
sbindir=$(abs "$(opt sbindir)")
sysconfdir=$(abs "$(opt sysconfdir)")
mandir=$(abs "$(opt mandir)")
if out=$(meson install -C "$build" --no-rebuild --destdir "$tmp/root" 2>&1); then
        missing=""
        want=("$sbindir/rtsoakd" "$sbindir/rtsoak-server" "$bindir/rtsoak" "$bindir/rtsoak-load"
              "$sysconfdir/rtsoak/rtsoakd.conf" "$sysconfdir/rtsoak/rtsoak-server.conf"
              "$sysconfdir/rtsoak/rtsoak-alerts.yml"
              "$sysconfdir/rtsoak/rtsoakd.conf.d/" "$sysconfdir/rtsoak/rtsoak-server.conf.d/")
        # The unit directory comes from systemd.pc (or its fallback): find it in the log.
        unit=$(printf '%s\n' "$out" | sed -n 's|.*Installing .*rtsoakd.service to ||p' | head -1)
        [ -n "$unit" ] || missing+=" (no rtsoakd.service in the install log)"
        want+=("${unit#"$tmp/root"}/rtsoakd.service" "${unit#"$tmp/root"}/rtsoak-server.service")
        if [ "$man" = yes ]; then
                want+=("$mandir/man8/rtsoakd.8" "$mandir/man5/rtsoakd.conf.5" "$mandir/man1/rtsoak.1"
                       "$mandir/man1/rtsoak-load.1" "$mandir/man8/rtsoak-server.8"
                       "$mandir/man5/rtsoak-server.conf.5" "$mandir/man1/rtsoak-replay.1")
        fi
        for f in "${want[@]}"; do
                [ -e "$tmp/root$f" ] || missing+=" $f"
        done
        for f in "$sbindir/rtsoakd" "$sbindir/rtsoak-server" "$bindir/rtsoak" "$bindir/rtsoak-load"; do
                [ -x "$tmp/root$f" ] || missing+=" $f(not executable)"
        done
        if [ -z "$missing" ]; then
                ok "meson install --destdir puts every file in place"
        else
                not_ok "meson install --destdir: missing:$missing" "$out"
        fi
else
        not_ok "meson install --destdir failed" "$out"
fi

# 2: the installed man pages are man pages (roff with a title line).
if [ "$man" = no ]; then
        echo "ok 2 # SKIP scdoc is not installed: no man pages built"
        n=2
else
        bad=""
        for f in "$tmp/root$mandir"/man*/*; do
                head -c 4000 "$f" | grep -q '^\.TH' || bad+=" $f"
        done
        [ -z "$bad" ] && ok "installed man pages are roff" || not_ok "not roff:$bad"
fi

# 3: configured as Debian builds it, the files go where Debian expects them.
if out=$(meson setup "$tmp/deb" "$src" --prefix=/usr -Dtests=false 2>&1) &&
        installed=$(meson introspect --installed "$tmp/deb" 2>&1); then
        want=(/usr/sbin/rtsoakd /usr/sbin/rtsoak-server /usr/bin/rtsoak /usr/bin/rtsoak-load
              /etc/rtsoak/rtsoakd.conf /etc/rtsoak/rtsoak-server.conf /etc/rtsoak/rtsoak-alerts.yml
              /lib/systemd/system/rtsoakd.service /lib/systemd/system/rtsoak-server.service)
        if [ "$man" = yes ]; then
                want+=(/usr/share/man/man8/rtsoakd.8 /usr/share/man/man5/rtsoakd.conf.5
                       /usr/share/man/man1/rtsoak.1 /usr/share/man/man1/rtsoak-load.1
                       /usr/share/man/man8/rtsoak-server.8 /usr/share/man/man5/rtsoak-server.conf.5
                       /usr/share/man/man1/rtsoak-replay.1)
        fi
        missing=""
        for f in "${want[@]}"; do
                printf '%s' "$installed" | grep -q "\"$f\"" || missing+=" $f"
        done
        if [ -z "$missing" ]; then
                ok "with --prefix=/usr every file goes to Debian's place"
        else
                not_ok "with --prefix=/usr, not installed to:$missing" "$installed"
        fi
else
        not_ok "meson setup --prefix=/usr failed" "$out"
fi
exit $failed
