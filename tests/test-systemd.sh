#!/bin/bash
# SPDX-License-Identifier: MIT
# rtsoak under a real systemd: boots this machine's Debian in a container with systemd-nspawn
# (systemd as PID 1, the container's /usr, /etc and /var as overlays on the host's, kept from
# one boot to the next), installs the Debian packages built from this tree and runs
# systemd-driver.sh inside, as a service, in two boots: the second after the first died
# without stopping anything.  Then repacks the packages as a newer version for the upgrade.
# Usage: test-systemd.sh SRCDIR BUILDDIR.  TAP output; exit 77 only where no container can run.
set -u
src=$(realpath "$1")
build=$(realpath "$2")
skip() {
        echo "1..0 # SKIP $1"
        exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root to boot a container"
command -v systemd-nspawn >/dev/null || skip "systemd-nspawn is missing (apt-get install systemd-container)"
[ -x /lib/systemd/systemd ] || skip "systemd is not installed in this OS tree"
for tool in dpkg-buildpackage dh; do
        command -v $tool >/dev/null || skip "$tool is missing (apt-get install dpkg-dev debhelper)"
done

if ! debs=$(bash "$src/tests/build-debs.sh" "$src" "$build/tests" 2>&1 | tail -1) ||
        ! ls "$debs"/rtsoak_*.deb >/dev/null 2>&1; then
        echo "1..1"
        echo "not ok 1 - the packages build"
        printf '%s\n' "$debs" | sed 's/^/# /'
        exit 1
fi

# /var/tmp: the overlays' upper directories must be on a file system that supports them.
tmp=$(mktemp -d /var/tmp/rtsoak-systemd.XXXXXX)
machine=rtsoak-sd-$$
cleanup() {
        machinectl terminate "$machine" >/dev/null 2>&1
        # A trace instance that a failed run left in the kernel (instances are the kernel's,
        # not the container's): removed in a mount namespace of its own.
        local inst
        inst=$(sed -n 's/^Instance=//p' "$tmp/etc/rtsoak/rtsoakd.conf.d/20-trace.conf" 2>/dev/null)
        [ -n "$inst" ] && unshare -m sh -c "mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null;
                [ -d /sys/kernel/tracing/instances/$inst ] && rmdir /sys/kernel/tracing/instances/$inst" 2>/dev/null
        [ -n "${RTSOAK_TEST_KEEP:-}" ] && echo "# kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp"/{usr,etc,var,units,out,debs/upgrade}
# Not what the packages test: man-db's trigger would rebuild the whole system's manual index
# at each install, upgrade and purge (13 of this test's 49 CPU seconds).  An overlay
# whiteout hides the host's /var/lib/man-db/auto-update from the container, as
# "man-db/auto-update false" in debconf does.
mkdir -p "$tmp/var/lib/man-db"
mknod "$tmp/var/lib/man-db/auto-update" c 0 0
cp "$debs"/rtsoak_*.deb "$debs"/rtsoak-server_*.deb "$tmp/debs/"

# The upgrade: the same packages as a newer version.
for d in "$tmp"/debs/rtsoak_*.deb "$tmp"/debs/rtsoak-server_*.deb; do
        x=$tmp/repack
        rm -rf "$x"
        dpkg-deb -R "$d" "$x"
        v=$(sed -n 's/^Version: //p' "$x/DEBIAN/control")
        sed -i "s/^Version: .*/Version: $v+upgrade1/" "$x/DEBIAN/control"
        dpkg-deb --root-owner-group -b "$x" "$tmp/debs/upgrade/" >/dev/null
done
rm -rf "$tmp/repack"

# The probes hold /dev/cpu_dma_latency, as on a real machine (nspawn's /dev lacks it).
dma=""
[ -c /dev/cpu_dma_latency ] && dma=--bind=/dev/cpu_dma_latency

boot() { # phase
        cat >"$tmp/units/rtsoak-test.service" <<EOF
[Unit]
Description=rtsoak container test, phase $1
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/bash /rtsoak-tests/systemd-driver.sh $1
TimeoutStartSec=infinity
EOF
        mkdir -p "$tmp/units/multi-user.target.wants"
        ln -sf ../rtsoak-test.service "$tmp/units/multi-user.target.wants/rtsoak-test.service"
        # CAP_IPC_LOCK: root on a real machine has it (mlockall); nspawn leaves it out by
        # default.  rtsoakd's unit keeps it in its bounding set.
        timeout -k 10 400 systemd-nspawn -q -D / --volatile=yes --capability=CAP_IPC_LOCK \
                --overlay="/usr:$tmp/usr:/usr" --overlay="/etc:$tmp/etc:/etc" \
                --overlay="/var:$tmp/var:/var" --register=no --keep-unit -M "$machine" \
                --bind="$tmp/out:/out" --bind="$tmp/units:/etc/systemd/system" $dma \
                --bind-ro="$src/tests:/rtsoak-tests" --bind-ro="$tmp/debs:/debs" \
                -b -- systemd.firstboot=off >"$tmp/out/console-$1.log" 2>&1
}

t0=$(date +%s)
boot 1
t1=$(date +%s)
[ -n "${RTSOAK_TEST_ONLY1:-}" ] || boot 2
t2=$(date +%s)

results=()
for p in 1 2; do
        [ -f "$tmp/out/tap-$p" ] && mapfile -t -O "${#results[@]}" results <"$tmp/out/tap-$p"
done
[ -f "$tmp/out/phase1-done" ] || results+=("not ok - phase 1 ran to its end")
[ -f "$tmp/out/phase2-done" ] || results+=("not ok - phase 2 ran to its end")
n=0
failed=0
count=$(printf '%s\n' "${results[@]}" | grep -c '^\(not \)\?ok')
echo "1..$count"
for line in "${results[@]}"; do
        case $line in
        ok*) n=$((n + 1)); echo "ok $n ${line#ok }" ;;
        "not ok"*) n=$((n + 1)); failed=1; echo "not ok $n ${line#not ok }" ;;
        *) echo "$line" ;;
        esac
done
echo "# boot 1 with its checks: $((t1 - t0)) s, boot 2: $((t2 - t1)) s"
if [ $failed -ne 0 ]; then
        for p in 1 2; do
                echo "# ---- log of phase $p"
                tail -60 "$tmp/out/log-$p" 2>/dev/null | sed 's/^/# /'
                echo "# ---- console of boot $p"
                grep -v '^\s*$' "$tmp/out/console-$p.log" 2>/dev/null | tail -15 | sed 's/^/# /'
        done
fi
exit $failed
