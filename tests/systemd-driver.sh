#!/bin/bash
# SPDX-License-Identifier: MIT
# The container side of test-systemd.sh: runs as a service inside a container booted by
# systemd-nspawn, with systemd 252 as PID 1, and checks the packages under the units they ship.
#   phase 1: install the packages; READY with every probe at SCHED_FIFO; the load generators
#            as the user rtsoak in the service's cgroup; rtsoak-server (DynamicUser) with its
#            Database=; the upload after a reload; the watchdog catching a hang; kill -9; a bad
#            configuration (exit 78, not restarted, file:line in systemctl status); a reload;
#            a clean stop leaving no load generator; journal priorities; then the machine dies
#            (reboot(2) at once) while rtsoakd runs.
#   phase 2: the next boot records the unclean end with the dead boot's journal; an upgrade
#            keeps the configuration and the databases; a purge removes what the packages made.
# TAP lines go to /out/tap-PHASE (numbered by test-systemd.sh), a log to /out/log-PHASE.
set -u
phase=$1
tap=/out/tap-$phase
log=/out/log-$phase
: >"$tap"
exec >>"$log" 2>&1
export LC_ALL=C.UTF-8 SYSTEMD_PAGER= DEBIAN_FRONTEND=noninteractive
machine=$(cat /etc/machine-id)
nproc=$(nproc)

ok() { echo "ok - $1" >>"$tap"; echo "OK: $1"; }
not_ok() {
        echo "not ok - $1" >>"$tap"
        echo "FAILED: $1"
        [ -n "${2:-}" ] && printf '%s\n' "$2" | head -30 | sed 's/^/# /' | tee -a "$tap"
}
check() { # description command...
        local what=$1
        shift
        local out
        if out=$("$@" 2>&1); then ok "$what"; else not_ok "$what" "$out"; fi
}
# Waits up to $1 seconds for a command to succeed.
wait_for() {
        local deadline=$(($(date +%s) + $1))
        shift
        until "$@" >/dev/null 2>&1; do
                [ "$(date +%s)" -ge "$deadline" ] && return 1
                sleep 0.5
        done
}
prop() { systemctl show -P "$2" "$1"; }
active() { [ "$(prop "$1" ActiveState)" = active ]; }
count_events() {
        local n
        n=$(rtsoak events --type "$1" --json 2>/dev/null | python_count 2>/dev/null)
        echo "${n:-0}"
}
python_count() { /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["events"]))'; }
# A field of "rtsoak status --json" (the latest run, or --run N given after the field).
status_field() {
        local f=$1
        shift
        rtsoak status "$@" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1]))' "$f"
}
probe_threads() { ps -L -o tid=,cls=,rtprio=,comm= -p "$(prop rtsoakd MainPID)" | grep 'rtsoak-cpu'; }
load_pids() { pgrep -f '^/usr/bin/rtsoak-load ' || true; }
journal_has() { journalctl -b -u "$1" -o cat --no-pager | grep -q -- "$2"; }
# The priority journald recorded for rtsoakd's first message containing $1 in this boot.
priority_of() {
        journalctl -b -u rtsoakd -o json --no-pager --output-fields=MESSAGE,PRIORITY |
                /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    m = e.get("MESSAGE")
    if isinstance(m, str) and sys.argv[1] in m:
        print(e.get("PRIORITY")); break' "$1"
}

# The trace flight recorder, where the packaged rtsoakd has one ([Trace] in its configuration
# file).  tracefs is mounted as systemd mounts it at boot on a real machine (its mount unit is
# skipped in this container: nspawn withholds CAP_SYS_RAWIO).  The kernel's trace instances
# are shared with the host and other containers, so this rtsoakd's instance has a name of its
# own, kept in a drop-in from one boot to the next.
trace=off
trace_conf=/etc/rtsoak/rtsoakd.conf.d/20-trace.conf
has_trace() {
        dpkg-deb --fsys-tarfile "$(ls /debs/rtsoak_*.deb | head -1)" |
                tar -xOf - ./etc/rtsoak/rtsoakd.conf | grep -q '^\[Trace\]'
}
trace_instance() { sed -n 's/^Instance=//p' "$trace_conf" 2>/dev/null; }
trace_setup() {
        has_trace || return 0
        mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing || return 0
        [ -f "$trace_conf" ] ||
                printf '[Trace]\nInstance=rtsoak-ct-%s\n' "$(od -An -tx1 -N4 /dev/urandom | tr -d ' \n')" >"$trace_conf"
        trace=on
}
trace_left() { [ "$trace" = on ] && [ -d "/sys/kernel/tracing/instances/$(trace_instance)" ]; }

# Notifications, where the packaged server has them: a webhook channel whose SecretFile= is a
# file only root reads.  Named directly, the server's dynamic user cannot open it: exit 78 at
# start, not restarted, the error naming the file and the way out.  Passed as a credential
# (LoadCredential= in a drop-in, docs/notifications.md), `rtsoak-server notifications test`
# reaches a receiver on loopback, signed with that secret.
notify_check() {
        grep -q '^\[Notifications\]' /etc/rtsoak/rtsoak-server.conf || return 0
        local dir=/run/rtsoak-hook
        rm -rf "$dir"
        mkdir -p "$dir"
        /usr/bin/python3 - "$dir" <<'PY' &
import http.server, os, sys
d = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    n = 0
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        H.n += 1
        with open(f"{d}/headers-{H.n}", "w") as f:
            f.write("".join(f"{k}: {v}\n" for k, v in self.headers.items()))
        with open(f"{d}/body-{H.n}", "wb") as f:
            f.write(body)
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
with open(d + "/port.tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(d + "/port.tmp", d + "/port")
s.serve_forever()
PY
        local hook=$! status direct port
        wait_for 10 test -s "$dir/port"
        port=$(cat "$dir/port")
        install -m 0600 -o root -g root /dev/null /etc/rtsoak/webhook.secret
        openssl rand -hex 32 >/etc/rtsoak/webhook.secret
        mkdir -p /etc/rtsoak/rtsoak-server.conf.d /etc/systemd/system/rtsoak-server.service.d
        printf '[Notify.hook]\nWebhook=http://127.0.0.1:%s/hook\nSecretFile=/etc/rtsoak/webhook.secret\n' \
                "$port" >/etc/rtsoak/rtsoak-server.conf.d/50-hook.conf
        local restarts
        systemctl restart rtsoak-server
        restarts=$(prop rtsoak-server NRestarts)
        wait_for 20 test "$(prop rtsoak-server ActiveState)" = failed
        sleep 6 # longer than RestartSec=
        status=$(prop rtsoak-server ExecMainStatus)
        direct=$(journalctl -b -u rtsoak-server -o cat --no-pager | grep -F '50-hook.conf:3: [Notify.hook] SecretFile=/etc/rtsoak/webhook.secret: Permission denied' | tail -1)
        [ "$(prop rtsoak-server ActiveState)" = failed ] && [ "$(prop rtsoak-server NRestarts)" = "$restarts" ] ||
                status="$status (restarted)"
        # The way docs/notifications.md gives: the secret as a credential.
        printf '[Service]\nLoadCredential=webhook.secret:/etc/rtsoak/webhook.secret\n' \
                >/etc/systemd/system/rtsoak-server.service.d/webhook.conf
        sed -i 's|^SecretFile=.*|SecretFile=/run/credentials/rtsoak-server.service/webhook.secret|' \
                /etc/rtsoak/rtsoak-server.conf.d/50-hook.conf
        systemctl daemon-reload
        systemctl reset-failed rtsoak-server
        systemctl restart rtsoak-server
        wait_for 20 curl -sf http://127.0.0.1:8470/api/v1/machines
        rtsoak-server notifications test hook
        # Signed as docs/notifications.md tells a receiver to check it, with the secret.
        local signed=""
        hook_signed() {
                /usr/bin/python3 - "$dir" /etc/rtsoak/webhook.secret <<'PY'
import glob, hashlib, hmac, json, sys
d, secret = sys.argv[1], open(sys.argv[2], "rb").read().split(b"\n")[0]
for hf in sorted(glob.glob(d + "/headers-*")):
    h = dict(l.split(": ", 1) for l in open(hf).read().splitlines() if ": " in l)
    h = {k.lower(): v for k, v in h.items()}
    body = open(hf.replace("headers-", "body-"), "rb").read()
    ts = h.get("x-rtsoak-timestamp", "")
    mac = "sha256=" + hmac.new(secret, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    if json.loads(body).get("kind") == "test":
        print("valid" if hmac.compare_digest(mac, h.get("x-rtsoak-signature", "")) else "invalid")
        sys.exit(0)
sys.exit(1)
PY
        }
        wait_for 60 hook_signed && signed=$(hook_signed)
        if [ "$status" = 78 ] && [ -n "$direct" ] && [ "$signed" = valid ] && active rtsoak-server; then
                ok "a webhook's SecretFile= of root's: named directly exit 78, not restarted, the error names the file; as a credential the test notification arrives, signed"
        else
                not_ok "notifications under the unit: named directly exit '$status', error '${direct:-none}', signature '${signed:-none}'" \
                        "$(journalctl -b -u rtsoak-server -o cat --no-pager | tail -8; cat "$dir"/headers-* 2>/dev/null | head -20)"
        fi
        kill "$hook" 2>/dev/null
        rm -f /etc/rtsoak/rtsoak-server.conf.d/50-hook.conf
        systemctl restart rtsoak-server
        wait_for 20 curl -sf http://127.0.0.1:8470/api/v1/machines
}

phase1() {
        # Configuration that an administrator may put in place before installing: a light
        # load scenario with two generators and 2-second intervals, so that this test is
        # quick and leaves the machine to the other tests.
        mkdir -p /etc/rtsoak/rtsoakd.conf.d
        cat >/etc/rtsoak/rtsoakd.conf.d/10-test.conf <<'EOF'
[Storage]
Interval=2s
[Schedule]
Rotation=light 1h
[Scenario.light]
Load=cpu --workers 1 --load 5%
Load=network --proto tcp --rate 1Mbit
EOF
        # This machine's image forbids maintainer scripts to start services (a policy-rc.d
        # made for image builds); a Debian installation has none.
        rm -f /usr/sbin/policy-rc.d
        trace_setup
        check "dpkg -i installs both packages" dpkg -i /debs/rtsoak_*.deb /debs/rtsoak-server_*.deb
        check "postinst created the system user rtsoak" getent passwd rtsoak
        wait_for 30 active rtsoakd
        check "rtsoakd.service is active (READY=1 was sent): Type=notify" active rtsoakd

        # READY only once every probe runs at SCHED_FIFO: read back from the kernel.
        local threads fifo
        threads=$(probe_threads)
        fifo=$(printf '%s\n' "$threads" | awk '$2 == "FF" && $3 == 95' | wc -l)
        if [ "$fifo" -eq "$nproc" ] && [ "$(printf '%s\n' "$threads" | wc -l)" -eq "$nproc" ]; then
                ok "every probe thread ($fifo of $nproc CPUs) runs at SCHED_FIFO 95 under the unit"
        else
                not_ok "probe threads at SCHED_FIFO 95: $fifo of $nproc" "$threads"
        fi
        # This kernel has CONFIG_RT_GROUP_SCHED: a cpu cgroup without a budget would refuse
        # SCHED_FIFO.  The unit enables no CPU controller, so rtsoakd stays in the root cpu
        # group, whose budget is the kernel's (sched_rt_runtime_us).
        local cg rtgroup=no
        [ -e /sys/fs/cgroup/cpu/cpu.rt_runtime_us ] && rtgroup=yes
        cg=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}:\(.*\)/\3/p' \
                /proc/"$(prop rtsoakd MainPID)"/cgroup | head -1)
        if [ "$rtgroup" = no ] || [ "$cg" = / ]; then
                ok "RT group scheduling ($rtgroup): rtsoakd's cpu cgroup is '${cg:-none}', with the kernel's real-time budget"
        else
                not_ok "rtsoakd runs in cpu cgroup $cg under CONFIG_RT_GROUP_SCHED"
        fi

        # The machine's inventory is read under the unit's sandbox (ProtectKernelTunables=,
        # ProtectSystem=strict): version 1 of the run, with the fields the kernel shows here.
        local inv
        inv=$(rtsoak inventory --json 2>&1 | /usr/bin/python3 -c '
import json, os, sys
d = json.load(sys.stdin)
f = d["fields"]
want = {"cpu.online": "/sys/devices/system/cpu/online",
        "thp.enabled": "/sys/kernel/mm/transparent_hugepage/enabled",
        "sysctl.kernel.sched_rt_runtime_us": "/proc/sys/kernel/sched_rt_runtime_us"}
bad = [k for k, p in want.items() if os.access(p, os.R_OK) != (k in f)]
v = d["version"]
print(f"version {v}, {len(f)} fields" + (f"; wrong: {bad}" if bad else ""))
sys.exit(1 if bad or v < 1 else 0)' 2>&1)
        if [ $? -eq 0 ]; then
                ok "rtsoakd read the machine's inventory under the unit's sandbox: $inv"
                rtsoak inventory 2>&1 | sed 's/^/# /' >>"$tap"
        else
                not_ok "the machine's inventory under the unit" "$inv"
        fi

        # The trace flight recorder makes its tracefs instance under the unit's sandbox
        # (ProtectKernelTunables= with ReadWritePaths= for tracefs's instances and the
        # record-cmd option it switches off while it creates the instance).
        if [ "$trace" = on ]; then
                if wait_for 15 test -d "/sys/kernel/tracing/instances/$(trace_instance)" &&
                        wait_for 15 journal_has rtsoakd "Trace flight recorder on:" &&
                        ! journal_has rtsoakd "comm cache upkeep is on" &&
                        [ "$(cat /sys/kernel/tracing/options/record-cmd)" = 1 ]; then
                        ok "the trace flight recorder runs under the unit's sandbox: its tracefs instance $(trace_instance) is there, made without the kernel's comm cache upkeep"
                else
                        not_ok "the trace flight recorder under the unit" \
                                "$(rtsoak status 2>&1 | grep -i trace; journalctl -b -u rtsoakd -o cat --no-pager | grep -i trace | tail -5)"
                fi
        elif has_trace; then
                ok "# SKIP the trace flight recorder: tracefs cannot be mounted in this container"
        fi

        # The load generators: the unprivileged user, inside the service's own cgroup.
        wait_for 20 test "$(load_pids | wc -l)" -ge 2
        local pids bad="" p
        pids=$(load_pids)
        for p in $pids; do
                [ "$(stat -c %U /proc/"$p")" = rtsoak ] || bad+=" $p:user=$(stat -c %U /proc/"$p")"
                grep -q '^0::/system.slice/rtsoakd.service$' /proc/"$p"/cgroup ||
                        bad+=" $p:cgroup=$(grep '^0::' /proc/"$p"/cgroup)"
        done
        if [ -n "$pids" ] && [ -z "$bad" ]; then
                ok "the load generators ($(echo $pids)) run as rtsoak inside rtsoakd.service's cgroup"
        else
                not_ok "load generators as rtsoak in the service's cgroup:$bad" "$(ps -ef)"
        fi

        # rtsoak-server: a dynamic user, its database where Database= says.
        sed -i 's|^#Database=.*|Database=/var/lib/rtsoak-server/lab.db|' /etc/rtsoak/rtsoak-server.conf
        systemctl restart rtsoak-server
        wait_for 20 curl -sf http://127.0.0.1:8470/api/v1/machines
        local suser
        suser=$(ps -o user= -p "$(prop rtsoak-server MainPID)")
        if [ -f /var/lib/private/rtsoak-server/lab.db ] && [ "$suser" = rtsoak-server ] &&
                journal_has rtsoak-server "database /var/lib/rtsoak-server/lab.db"; then
                ok "rtsoak-server runs as the dynamic user $suser on Database= of its file (lab.db)"
        else
                not_ok "rtsoak-server as a dynamic user on lab.db (user $suser)" \
                        "$(ls -la /var/lib/private/rtsoak-server; journalctl -b -u rtsoak-server -n 5 --no-pager)"
        fi
        install -m 0600 /dev/null /etc/rtsoak/token
        rtsoak-server enroll "$machine" >/etc/rtsoak/token
        cat >/etc/rtsoak/rtsoakd.conf.d/20-upload.conf <<'EOF'
[Upload]
Server=http://127.0.0.1:8470
EOF
        local pid0
        pid0=$(prop rtsoakd MainPID)
        systemctl reload rtsoakd
        if wait_for 30 server_has_intervals && [ "$(prop rtsoakd MainPID)" = "$pid0" ]; then
                ok "systemctl reload applies [Upload] Server=: rtsoak-server.service receives rtsoakd's intervals, same process"
        else
                not_ok "uploads reach rtsoak-server after a reload" \
                        "$(journalctl -b -u rtsoakd -n 20 --no-pager)"
        fi
        notify_check

        # The watchdog: the collector made to hang; systemd kills and restarts rtsoakd, and the
        # next run records the unclean end and the stall.
        local restarts unclean
        restarts=$(prop rtsoakd NRestarts)
        unclean=$(count_events unclean_end)
        mkdir -p /etc/systemd/system/rtsoakd.service.d
        # A shorter watchdog than the unit's 30 s: the same mechanism, 24 s less waiting.
        printf '[Service]\nEnvironment=RTSOAKD_TEST_HANG=collector RTSOAKD_TEST_HANG_AFTER=2s\nWatchdogSec=6s\n' \
                >/etc/systemd/system/rtsoakd.service.d/hang.conf
        systemctl daemon-reload
        systemctl restart rtsoakd
        if wait_for 90 journal_has rtsoakd "Watchdog timeout"; then
                rm /etc/systemd/system/rtsoakd.service.d/hang.conf
                systemctl daemon-reload
                if wait_for 30 restarted_since "$restarts"; then
                        wait_for 20 test "$(count_events unclean_end)" -gt "$unclean"
                        if [ "$(count_events unclean_end)" -gt "$unclean" ] &&
                                [ "$(count_events watchdog_stall)" -ge 1 ]; then
                                ok "a hang: the watchdog fires, systemd restarts rtsoakd, the next run records the unclean end and the stall"
                        else
                                not_ok "after the watchdog restart: unclean_end and watchdog_stall events" \
                                        "$(rtsoak events --limit 10)"
                        fi
                else
                        not_ok "restart after the watchdog" "$(systemctl status rtsoakd --no-pager)"
                fi
        else
                rm -f /etc/systemd/system/rtsoakd.service.d/hang.conf
                systemctl daemon-reload
                not_ok "the watchdog catches the hang" "$(journalctl -b -u rtsoakd -n 30 --no-pager)"
        fi

        # kill -9: restarted, the unclean end recorded, the old generators gone with it.
        wait_for 30 active rtsoakd
        restarts=$(prop rtsoakd NRestarts)
        unclean=$(count_events unclean_end)
        wait_for 20 test "$(load_pids | wc -l)" -ge 2
        local old
        old=$(load_pids)
        systemctl kill -s KILL --kill-who=main rtsoakd
        if wait_for 30 restarted_since "$restarts" &&
                wait_for 20 test "$(count_events unclean_end)" -gt "$unclean"; then
                local left=""
                for p in $old; do [ -d /proc/"$p" ] && left+=" $p"; done
                [ -z "$left" ] && ok "kill -9: restarted, the unclean end recorded, no old generator left" ||
                        not_ok "generators of the killed rtsoakd still running:$left"
        else
                not_ok "kill -9 is followed by a restart and an unclean_end event" \
                        "$(systemctl status rtsoakd --no-pager)"
        fi

        # A bad configuration: exit 78, not restarted, the file and line in systemctl status.
        wait_for 30 active rtsoakd
        printf '[Probe]\nPriority=500\n' >/etc/rtsoak/rtsoakd.conf.d/50-bad.conf
        systemctl restart rtsoakd 2>/dev/null
        # Settled on the configuration's exit status; the count from then on must not move.
        # (A manual restart resets it: a start before that failed another way was restarted,
        # which the journal shows.)
        wait_for 30 failed_with 78
        restarts=$(prop rtsoakd NRestarts)
        [ "$restarts" = 0 ] || printf '%s\n' "restarted $restarts time(s) before the exit 78:" \
                "$(journalctl -b -n 30 --no-pager -o short-precise _SYSTEMD_UNIT=rtsoakd.service + UNIT=rtsoakd.service)" |
                sed 's/^/# /' | tee -a "$tap"
        sleep 8 # longer than RestartSec=5s
        local status
        status=$(systemctl status rtsoakd --no-pager -n 20 2>&1)
        if [ "$(prop rtsoakd ExecMainStatus)" = 78 ] && [ "$(prop rtsoakd ActiveState)" = failed ] &&
                [ "$(prop rtsoakd NRestarts)" = "$restarts" ] &&
                printf '%s\n' "$status" | grep -q 'rtsoakd.conf.d/50-bad.conf:2: \[Probe\] Priority=500'; then
                ok "a bad configuration: exit 78, not restarted, systemctl status shows 50-bad.conf:2"
        else
                not_ok "bad configuration: status $(prop rtsoakd ExecMainStatus), $(prop rtsoakd ActiveState), restarts $(prop rtsoakd NRestarts) (was $restarts)" \
                        "$(journalctl -b -n 25 --no-pager -o short-precise _SYSTEMD_UNIT=rtsoakd.service + UNIT=rtsoakd.service)"
        fi
        rm /etc/rtsoak/rtsoakd.conf.d/50-bad.conf
        systemctl reset-failed rtsoakd
        systemctl start rtsoakd || journalctl -b -u rtsoakd -n 20 --no-pager

        # A reload applies a change without a restart.
        local reloaded
        reloaded=$(count_events config_reloaded)
        pid0=$(prop rtsoakd MainPID)
        sed -i 's/^\[Storage\]$/[Probe]\nThreshold=150us\n[Storage]/' /etc/rtsoak/rtsoakd.conf.d/10-test.conf
        systemctl reload rtsoakd
        if wait_for 20 test "$(count_events config_reloaded)" -gt "$reloaded" &&
                rtsoak events --type config_reloaded | tail -1 | grep -q 'Probe.Threshold' &&
                [ "$(prop rtsoakd MainPID)" = "$pid0" ] && active rtsoakd; then
                ok "systemctl reload applies [Probe] Threshold= in the same process"
        else
                not_ok "reload of Threshold=" "$(rtsoak events --type config_reloaded)"
        fi

        # A clean stop: the run ends cleanly and no load generator is left anywhere.
        wait_for 20 test "$(load_pids | wc -l)" -ge 2
        systemctl stop rtsoakd
        local last_end
        last_end=$(status_field end_reason)
        if [ -z "$(load_pids)" ] && [ "$(prop rtsoakd Result)" = success ] &&
                [ "$last_end" = clean ] && ! trace_left; then
                ok "systemctl stop: the run ends cleanly ($last_end), no load generator (nor trace instance) is left"
        else
                not_ok "clean stop: result $(prop rtsoakd Result), end '$last_end', loads '$(load_pids)', trace instance left: $(trace_left && echo yes || echo no)" "$(ps -ef)"
        fi

        # The journal holds rtsoakd's messages at their priorities.
        local p_ready p_warn p_err
        p_ready=$(priority_of "Ready: ")
        p_warn=$(priority_of "did not end cleanly")
        p_err=$(priority_of "50-bad.conf:2")
        if [ "$p_ready" = 6 ] && [ "$p_warn" = 4 ] && [ "$p_err" = 3 ]; then
                ok "journal priorities: Ready info (6), unclean earlier run warning (4), bad configuration error (3)"
        else
                not_ok "journal priorities: ready '$p_ready', warning '$p_warn', error '$p_err'"
        fi

        # The machine dies while rtsoakd measures: reboot(2) at once, nothing stopped.
        systemctl start rtsoakd
        wait_for 30 active rtsoakd
        local run
        run=$(status_field run)
        echo "$run" >/out/crashed-run
        wait_for 10 test "$(rtsoak report --run "$run" --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["intervals"])' 2>/dev/null || echo 0)" -ge 1
        echo "crash" >/out/phase1-done
        sync
        systemctl poweroff --force --force
}

server_has_intervals() {
        curl -sf "http://127.0.0.1:8470/api/v1/machines/$machine" | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
sys.exit(0 if (m.get("intervals") or 0) > 0 else 1)'
}

failed_with() {
        [ "$(prop rtsoakd ActiveState)" = failed ] && [ "$(prop rtsoakd ExecMainStatus)" = "$1" ]
}

restarted_since() {
        [ "$(prop rtsoakd NRestarts)" -gt "$1" ] && active rtsoakd
}

phase2() {
        wait_for 30 active rtsoakd
        # tracefs again: the instance that the crashed rtsoakd left is removed by the next
        # start (the upgrade's), and the purge's stop removes that one's.
        [ -f "$trace_conf" ] && trace_setup
        local run ev
        run=$(cat /out/crashed-run 2>/dev/null)
        wait_for 20 test "$(count_events unclean_end)" -ge 3
        # The kernel did not reboot (a container's boot), so the run's boot ID (the kernel's)
        # is the current one; the journal names its boots itself, and the lines must come from
        # the container's previous boot, the one that died.
        local this_boot
        this_boot=$(tr -d - </proc/sys/kernel/random/boot_id)
        ev=$(rtsoak events --type unclean_end --json | /usr/bin/python3 -c '
import json, sys
run, now = int(sys.argv[1]), sys.argv[2]
for e in json.load(sys.stdin)["events"]:
    if e.get("run") == run:
        d = e.get("details") or {}
        k = d.get("kernel") if isinstance(d.get("kernel"), dict) else {}
        j = k.get("journal") if isinstance(k.get("journal"), dict) else {}
        lines = j.get("lines") or []
        jb = j.get("journal_boot_id") or j.get("boot_id")
        print(bool(jb) and jb != now, len(lines), any("Ready: " in l for l in lines))' \
                "${run:-0}" "$this_boot" 2>&1)
        if [ "$(echo $ev | awk '{print $1}')" = True ] && [ "$(echo $ev | awk '{print $2}')" -gt 0 ] &&
                [ "$(echo $ev | awk '{print $3}')" = True ]; then
                ok "after the crash: run $run's unclean_end holds the previous boot's journal ($(echo $ev | awk '{print $2}') lines, its Ready message among them)"
        else
                not_ok "unclean_end of the crashed run $run with the previous boot's journal: $ev" \
                        "$(rtsoak events --type unclean_end --json | head -c 3000)"
        fi

        # Upgrade: the administrator's edit of a conffile and both databases stay.
        echo "# edited by the administrator" >>/etc/rtsoak/rtsoakd.conf
        local runs_before intervals_before pid0
        runs_before=$(status_field run)
        pid0=$(prop rtsoakd MainPID)
        if dpkg -i /debs/upgrade/rtsoak_*.deb /debs/upgrade/rtsoak-server_*.deb; then
                wait_for 30 active rtsoakd
                wait_for 20 curl -sf http://127.0.0.1:8470/api/v1/machines
                local ended version
                ended=$(status_field end_reason --run "$runs_before")
                version=$(dpkg-query -W -f '${Version}' rtsoak)
                if grep -q '^# edited by the administrator' /etc/rtsoak/rtsoakd.conf &&
                        [ -f /etc/rtsoak/rtsoakd.conf.d/10-test.conf ] && [ "$ended" = clean ] &&
                        [ "$(prop rtsoakd MainPID)" != "$pid0" ] &&
                        curl -sf "http://127.0.0.1:8470/api/v1/machines/$machine" >/dev/null &&
                        [ -f /var/lib/private/rtsoak-server/lab.db ]; then
                        ok "upgrade to $version: the edited conffile, the drop-ins and both databases stay; rtsoakd restarted after a clean stop of run $runs_before"
                else
                        not_ok "upgrade keeps configuration and databases (run $runs_before ended '$ended')" \
                                "$(tail -3 /etc/rtsoak/rtsoakd.conf; ls -la /var/lib/rtsoak /var/lib/private/rtsoak-server)"
                fi
        else
                not_ok "dpkg -i of the upgrade"
        fi

        # Purge removes what the packages made, and only that.
        check "dpkg --purge rtsoak rtsoak-server" dpkg --purge rtsoak rtsoak-server
        local left=""
        for f in /var/lib/rtsoak /var/lib/private/rtsoak-server /var/lib/rtsoak-server \
                 /etc/rtsoak/rtsoakd.conf /etc/rtsoak/rtsoak-server.conf /etc/rtsoak/rtsoak-alerts.yml \
                 /usr/sbin/rtsoakd \
                 /lib/systemd/system/rtsoakd.service; do
                [ -e "$f" ] || [ -L "$f" ] && left+=" $f"
        done
        pgrep -f 'rtsoakd|rtsoak-server|rtsoak-load' >/dev/null && left+=" (processes)"
        trace_left && left+=" /sys/kernel/tracing/instances/$(trace_instance)"
        if [ -z "$left" ] && [ -f /etc/rtsoak/token ] && [ -f /etc/rtsoak/rtsoakd.conf.d/10-test.conf ] &&
                getent passwd rtsoak >/dev/null; then
                ok "purge removes the packages' files, state directories and processes; the administrator's token and drop-ins and the system user stay"
        else
                not_ok "purge: left behind:$left" "$(ls -la /etc/rtsoak /var/lib)"
        fi
        echo "done" >/out/phase2-done
        systemctl poweroff
}

"phase$phase"
