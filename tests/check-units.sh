#!/bin/bash
# SPDX-License-Identifier: MIT
# Checks the systemd unit files: systemd-analyze verify with ExecStart= pointing at the freshly
# built binaries (and Documentation= at the built man pages), that rtsoakd.service keeps what
# the daemon needs to measure at all, and that the exposure scores of "systemd-analyze security
# --offline=true" are the ones docs/systemd.md states.  Usage: check-units.sh SRCDIR BUILDDIR
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
echo "1..$((2 * ${#units[@]} + 4))"
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

# Documentation=man:... is checked against the pages of this build, when scdoc built them.
man_opt=(--man=no)
if ls "$build"/man/*.[0-9] >/dev/null 2>&1; then
        for page in "$build"/man/*.[0-9]; do
                mkdir -p "$tmp/man/man${page##*.}"
                cp "$page" "$tmp/man/man${page##*.}/"
        done
        export MANPATH=$tmp/man
        man_opt=()
fi

for u in "${units[@]}"; do
        name=$(basename "$u")
        sed -e "s|/usr/sbin/rtsoakd|$build/daemon/rtsoakd|" \
            -e "s|/usr/sbin/rtsoak-server|$build/server/rtsoak-server|" "$u" > "$tmp/$name"
        if out=$(systemd-analyze verify "${man_opt[@]}" "$tmp/$name" 2>&1) && [ -z "$out" ]; then
                ok "$name: systemd-analyze verify"
        else
                not_ok "$name: systemd-analyze verify" "$out"
        fi
        # "→ Overall exposure level for NAME: 2.9 OK"
        score=$(systemd-analyze security --offline=true "$tmp/$name" 2>&1 |
                sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
        if [ -z "$score" ]; then
                not_ok "$name: no exposure level from systemd-analyze security"
        elif grep -q "^| \`$name\` | $score |" "$src/docs/systemd.md"; then
                ok "$name: exposure $score, as docs/systemd.md says"
        else
                not_ok "$name: exposure is $score; docs/systemd.md's table says otherwise" \
                        "$(grep "^| \`$name\`" "$src/docs/systemd.md")"
        fi
done

# Sandboxing must not take away what rtsoakd measures with.
u=$src/systemd/rtsoakd.service
missing=""
for line in "Type=notify" "NotifyAccess=main" "WatchdogSec=" "ExecReload=" \
            "DeviceAllow=/dev/cpu_dma_latency rw" "DeviceAllow=/dev/pmsg0 w" \
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK" \
            "LimitRTPRIO=" "LimitMEMLOCK=infinity" \
            "RestartPreventExitStatus=64 69 78" "StartLimitBurst=" "StartLimitIntervalSec=" \
            "ProtectKernelTunables=yes" "ReadWritePaths=-/sys/kernel/tracing/instances"; do
        grep -q "^$line" "$u" || missing+=" $line"
done
# SCHED_FIFO, /dev/cpu_dma_latency, the load generators under [Load] User= (found in /proc)
# and stopped by signal.
# CPU accounting or weights would put rtsoakd in a cpu cgroup of its own, which under
# CONFIG_RT_GROUP_SCHED (cgroup v1) starts with no real-time budget: SCHED_FIFO refused.
for line in "PrivateDevices=yes" "RestrictRealtime=yes" "ProtectProc=invisible" \
            "ProcSubset=pid" "PrivateUsers=yes" "DynamicUser=yes" "CPUAccounting=yes" \
            "CPUWeight=" "StartupCPUWeight=" "CPUQuota=" "CPUShares="; do
        grep -q "^$line" "$u" && missing+=" (must not have $line)"
done
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$u")
for cap in CAP_SYS_NICE CAP_IPC_LOCK CAP_SETUID CAP_SETGID CAP_KILL; do
        [[ " $caps " == *" $cap "* ]] || missing+=" $cap"
done
if [ -z "$missing" ]; then
        ok "rtsoakd.service keeps what the probes and the loads need"
else
        not_ok "rtsoakd.service:$missing"
fi

# The trace flight recorder gets its tracefs instances and the record-cmd option (switched
# off while it creates its instance) and nothing more: no other writable path under /sys, no
# capability that would open the rest of tracefs (or the kernel's tracing
# by other means) to it.
extra=""
while read -r path; do
        case "$path" in
        -/sys/kernel/tracing/instances | -/sys/kernel/tracing/options/record-cmd) ;;
        *) extra+=" ReadWritePaths=$path" ;;
        esac
done < <(sed -n 's/^ReadWritePaths=//p' "$u" | tr ' ' '\n' | grep '/sys\|^-\?/proc')
for cap in CAP_SYS_ADMIN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_PERFMON CAP_BPF CAP_SYS_RAWIO; do
        [[ " $caps " == *" $cap "* ]] && extra+=" $cap"
done
grep -q '^ProtectKernelTunables=yes' "$u" || extra+=" (ProtectKernelTunables=yes is missing)"
if [ -z "$extra" ]; then
        ok "rtsoakd.service may write only its tracefs instances and options/record-cmd in /sys"
else
        not_ok "rtsoakd.service grants more than the flight recorder needs:$extra"
fi

# The configuration file is the place for settings: an option in ExecStart= would override
# it silently (the server's --db once hid Database=).
over=""
for u in "${units[@]}"; do
        exec_line=$(sed -n 's/^ExecStart=//p' "$u")
        for opt in --db --listen --cert --key --threads --rate --burst --max-body --cache-warming \
                   --config --set; do
                [[ " $exec_line " == *" $opt"[\ =]* ]] && over+=" $(basename "$u"): $opt"
        done
done
if [ -z "$over" ]; then
        ok "ExecStart= passes no option that overrides the configuration file"
else
        not_ok "ExecStart= overrides the configuration file:$over"
fi

# Memory limits in both units, and the TLS key through a credential (by name: a missing one
# does not fail the unit, a server without TLS speaks HTTP).
missing=""
for u in "$src"/systemd/rtsoakd.service "$src"/systemd/rtsoak-server.service; do
        for line in "MemoryHigh=" "MemoryMax="; do
                grep -q "^$line" "$u" || missing+=" $(basename "$u"): $line"
        done
done
for line in "LoadCredential=rtsoak-server.crt" "LoadCredential=rtsoak-server.key"; do
        grep -qx "$line" "$src/systemd/rtsoak-server.service" || missing+=" $line"
done
if [ -z "$missing" ]; then
        ok "memory limits in both units, the server's TLS key as a credential"
else
        not_ok "missing:$missing"
fi
exit $failed
