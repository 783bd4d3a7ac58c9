#!/bin/bash
# SPDX-License-Identifier: MIT
# The Debian packages: "dpkg-buildpackage -us -uc -b" builds rtsoak and rtsoak-server (through
# build-debs.sh), lintian finds no error and no warning (overrides only with a reason), each
# file is at Debian's path, the units start binaries that their package installs, the
# packaged rtsoakd's defaults are the ones its configuration file states (the load helper at
# /usr/bin, the load generators' user the one sysusers.d creates), and postinst creates that
# user before it starts the daemon.  Usage: check-package.sh SRCDIR BUILDDIR.  TAP output.
set -u
src=$1
build=$2
for tool in dpkg-buildpackage dh lintian; do
        if ! command -v $tool >/dev/null; then
                echo "1..0 # SKIP $tool is missing (apt-get install dpkg-dev debhelper lintian)"
                exit 77
        fi
done
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
echo "1..12"

start=$(date +%s)
if ! debs=$(bash "$src/tests/build-debs.sh" "$src" "$build/tests" 2>"$tmp/err"); then
        not_ok "dpkg-buildpackage -us -uc -b" "$(cat "$tmp/err")"
        exit 1
fi
ok "dpkg-buildpackage -us -uc -b builds the packages ($(($(date +%s) - start)) s, or reused)"
version=$(sed -n '1s/^rtsoak (\([^)]*\)).*/\1/p' "$src/debian/changelog")
deb=$debs/rtsoak_${version}_amd64.deb
sdeb=$debs/rtsoak-server_${version}_amd64.deb
arch=$(dpkg --print-architecture)
deb=${deb/_amd64/_$arch}
sdeb=${sdeb/_amd64/_$arch}

# Lintian: no error and no warning; the remaining tags (information) are listed.
out=$(lintian --pedantic -I "$debs"/rtsoak_*.changes 2>&1 | grep -v 'running with root privileges')
bad=$(printf '%s\n' "$out" | grep -E '^[EW]: ')
unexplained=""
for f in "$src"/debian/*lintian-overrides; do
        [ -e "$f" ] || continue
        unexplained+=$(awk '/^[^#[:space:]]/ && prev !~ /^#/ { print FILENAME ": " $0 } { prev = $0 }' "$f")
done
if [ -z "$bad" ] && [ -z "$unexplained" ]; then
        ok "lintian: no error, no warning, no override without a reason"
        printf '%s\n' "$out" | grep -v '^$' | sed 's/^/# /'
else
        not_ok "lintian: no error, no warning, no override without a reason" "$bad$unexplained"
fi

# An in-tree "dpkg-buildpackage -us -uc -b" (the README's) leaves nothing that git shows as
# untracked: debian/.gitignore and .gitignore cover what debhelper writes.
untracked=$(cat "$debs/untracked" 2>/dev/null)
if ! command -v git >/dev/null; then
        ok "# SKIP the in-tree build's untracked paths: git is missing"
elif [ -f "$debs/untracked" ] && [ -z "$untracked" ]; then
        ok "the in-tree build leaves no untracked path"
else
        not_ok "the in-tree build leaves untracked paths (add them to debian/.gitignore)" \
                "${untracked:-no list of untracked paths (tests/build-debs.sh)}"
fi

# Debian's paths.
want_rtsoak="./usr/sbin/rtsoakd ./usr/bin/rtsoak ./usr/bin/rtsoak-load ./etc/rtsoak/rtsoakd.conf
./etc/rtsoak/rtsoakd.conf.d/ ./lib/systemd/system/rtsoakd.service ./usr/lib/sysusers.d/rtsoak.conf
./usr/share/man/man8/rtsoakd.8.gz ./usr/share/man/man5/rtsoakd.conf.5.gz
./usr/share/man/man1/rtsoak.1.gz ./usr/share/man/man1/rtsoak-load.1.gz"
want_server="./usr/sbin/rtsoak-server ./usr/bin/rtsoak-replay ./etc/rtsoak/rtsoak-server.conf
./etc/rtsoak/rtsoak-server.conf.d/ ./etc/rtsoak/rtsoak-alerts.yml ./lib/systemd/system/rtsoak-server.service
./usr/share/man/man8/rtsoak-server.8.gz ./usr/share/man/man5/rtsoak-server.conf.5.gz
./usr/share/man/man1/rtsoak-replay.1.gz"
missing=""
for pair in "$deb:$want_rtsoak" "$sdeb:$want_server"; do
        d=${pair%%:*}
        list=$(dpkg-deb -c "$d" | awk '{print $NF}')
        for f in ${pair#*:}; do
                printf '%s\n' "$list" | grep -qx "$f" || missing+=" $(basename "$d"):$f"
        done
        printf '%s\n' "$list" | grep -q '^\./usr/local' && missing+=" $(basename "$d"): /usr/local"
done
[ -z "$missing" ] && ok "every file at Debian's path" || not_ok "files missing or misplaced:$missing"

# The units start what their package installs, and document it with its man pages.
mkdir -p "$tmp/rtsoak" "$tmp/server"
dpkg-deb -x "$deb" "$tmp/rtsoak"
dpkg-deb -x "$sdeb" "$tmp/server"
bad=""
for root in "$tmp/rtsoak" "$tmp/server"; do
        for u in "$root"/lib/systemd/system/*.service; do
                for exe in $(sed -n 's/^Exec[A-Za-z]*=[-+!@:]*\([^ ]*\).*/\1/p' "$u"); do
                        [ "$exe" = /bin/kill ] && continue
                        [ -x "$root$exe" ] || bad+=" $(basename "$u"): $exe not in its package"
                done
                for page in $(sed -n 's/^Documentation=//p' "$u"); do
                        p=${page#man:}
                        name=${p%(*}
                        sec=${p#*(}
                        sec=${sec%)}
                        [ -e "$root/usr/share/man/man$sec/$name.$sec.gz" ] ||
                                bad+=" $(basename "$u"): $page not in its package"
                done
        done
done
[ -z "$bad" ] && ok "the units start binaries and name man pages that their packages install" ||
        not_ok "units and packages disagree:$bad"

# The shipped rtsoakd.conf states the packaged rtsoakd's true defaults.
rtsoakd=$tmp/rtsoak/usr/sbin/rtsoakd
sed 's/^#\([A-Za-z]\+=\)/\1/' "$tmp/rtsoak/etc/rtsoak/rtsoakd.conf" >"$tmp/uncommented.conf"
defaults=$("$rtsoakd" --config /dev/null --check-config 2>&1 | grep -v '^# ')
documented=$("$rtsoakd" --config "$tmp/uncommented.conf" --check-config 2>&1 | grep -v '^# ')
if [ "$defaults" = "$documented" ] && printf '%s\n' "$defaults" | grep -qx 'Helper=/usr/bin/rtsoak-load'; then
        ok "/etc/rtsoak/rtsoakd.conf states the packaged defaults (Helper=/usr/bin/rtsoak-load)"
else
        not_ok "/etc/rtsoak/rtsoakd.conf states the packaged defaults" \
                "$(diff <(printf '%s\n' "$defaults") <(printf '%s\n' "$documented"))"
fi

# The load generators' user: rtsoakd's default, created by the sysusers.d file of the package.
user=$(printf '%s\n' "$defaults" | sed -n 's/^User=//p')
sysuser=$(awk '$1 == "u" {print $2}' "$tmp/rtsoak/usr/lib/sysusers.d/rtsoak.conf")
if [ -n "$user" ] && [ "$user" != root ] && [ "$user" = "$sysuser" ]; then
        ok "the load generators run as $user by default, the system user sysusers.d creates"
else
        not_ok "[Load] User= default '$user' and sysusers.d user '$sysuser' disagree"
fi

# postinst: the user first, then the daemon is started.
dpkg-deb -e "$deb" "$tmp/ctl"
u_line=$(grep -n 'systemd-sysusers' "$tmp/ctl/postinst" | head -1 | cut -d: -f1)
s_line=$(grep -n "deb-systemd-invoke .*rtsoakd.service" "$tmp/ctl/postinst" | head -1 | cut -d: -f1)
if [ -n "$u_line" ] && [ -n "$s_line" ] && [ "$u_line" -lt "$s_line" ]; then
        ok "postinst creates the user (line $u_line) before it starts rtsoakd (line $s_line)"
else
        not_ok "postinst order: systemd-sysusers at '${u_line:-none}', start at '${s_line:-none}'" \
                "$(cat "$tmp/ctl/postinst")"
fi

# Configuration files are conffiles: an upgrade keeps what the administrator changed.
dpkg-deb -e "$sdeb" "$tmp/sctl"
if grep -qx /etc/rtsoak/rtsoakd.conf "$tmp/ctl/conffiles" &&
        grep -qx /etc/rtsoak/rtsoak-server.conf "$tmp/sctl/conffiles" &&
        grep -qx /etc/rtsoak/rtsoak-alerts.yml "$tmp/sctl/conffiles"; then
        ok "the configuration files and the alert rules are conffiles"
else
        not_ok "conffiles" "$(cat "$tmp/ctl/conffiles" "$tmp/sctl/conffiles")"
fi

# PostgreSQL is optional: rtsoak-server links libpq (libpq5) and only suggests the database
# server; the lab machines' package needs neither.
sdepends=$(dpkg-deb -f "$sdeb" Depends)
ssuggests=$(dpkg-deb -f "$sdeb" Suggests)
ldepends=$(dpkg-deb -f "$deb" Depends)
if printf '%s' "$sdepends" | grep -q 'libpq5' && ! printf '%s' "$sdepends" | grep -q 'postgresql' &&
        printf '%s' "$ssuggests" | grep -qw postgresql && ! printf '%s' "$ldepends" | grep -q 'libpq'; then
        ok "rtsoak-server depends on libpq5 and suggests postgresql; rtsoak needs neither"
else
        not_ok "PostgreSQL dependencies" "rtsoak-server: Depends: $sdepends; Suggests: $ssuggests"$'\n'"rtsoak: Depends: $ldepends"
fi

# The README's package build line installs every build dependency (and build-essential, which
# dpkg-buildpackage requires of every build).
readme_pkgs=$(awk '/^apt-get install build-essential/ { on = 1 } on { print; if (!/\\$/) exit }' \
        "$src/README.md" | tr -s ' \\\n' '\n' | grep -v '^apt-get$\|^install$\|^$' | sort -u)
build_deps=$(sed -n '/^Build-Depends:/,/^[A-Z][a-zA-Z-]*:/p' "$src/debian/control" |
        sed -e 's/^Build-Depends://' -e '/^[A-Z][a-zA-Z-]*:/d' | tr ',' '\n' |
        sed -e 's/(.*)//' -e 's/^ *//' -e 's/ *$//' -e 's/^debhelper-compat$/debhelper/' |
        grep -v '^$' | sort -u)
absent=$(comm -13 <(printf '%s\n' "$readme_pkgs") <(printf '%s\n' $build_deps build-essential | sort -u))
if [ -n "$readme_pkgs" ] && [ -z "$absent" ]; then
        ok "the README's apt-get line installs every Build-Depends of debian/control"
else
        not_ok "README.md's apt-get line lacks:$(echo $absent)" "README: $(echo $readme_pkgs)"
fi

# One version: debian/changelog and meson.build.
mver=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$src/meson.build" | head -1)
if [ "$version" = "$mver" ] || [[ "$version" == "$mver"-* ]]; then
        ok "debian/changelog's version $version is meson.build's $mver"
else
        not_ok "debian/changelog says $version, meson.build $mver"
fi
exit $failed
