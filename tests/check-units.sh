#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks the systemd unit files with systemd-analyze verify, pointing ExecStart= at the
# freshly built binaries.  Usage: check-units.sh SRCDIR BUILDDIR
set -u
src=$1
build=$2
if ! command -v systemd-analyze >/dev/null; then
        echo "1..0 # SKIP systemd-analyze is not installed"
        exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
units=("$src"/systemd/*.service)
echo "1..${#units[@]}"
n=0
failed=0
for u in "${units[@]}"; do
        n=$((n + 1))
        name=$(basename "$u")
        sed -e "s|/usr/sbin/rtsoakd|$build/daemon/rtsoakd|" \
            -e "s|/usr/sbin/rtsoak-server|$build/server/rtsoak-server|" "$u" > "$tmp/$name"
        if out=$(systemd-analyze verify "$tmp/$name" 2>&1) && [ -z "$out" ]; then
                echo "ok $n - $name"
        else
                failed=1
                echo "not ok $n - $name"
                printf '%s\n' "$out" | sed 's/^/# /'
        fi
done
exit $failed
