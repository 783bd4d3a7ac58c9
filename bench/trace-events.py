#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the trace flight recorder's events cost the probe: rtsoakd alone, with the recorder off
and with sets of [Trace] Events=, in short runs of rotating order, compared by the mean of the
samples below 40 us (the typical wake-up, without the VM's stalls, exact to a fraction of a
microsecond where p50 moves in whole microseconds) and by the paired difference per round.

Usage (as root, from the source tree after building; mounts tracefs in a mount namespace of its
own where it is not mounted):
    bench/trace-events.py [--rounds 16] [--duration 4] [--sets off,default,minimal]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD  # noqa: E402
SETS = {
    "off": None,
    "default": "",  # rtsoakd's own default
    "vectors": "sched:sched_switch sched:sched_wakeup sched:sched_wakeup_new "
               "irq:irq_handler_entry irq:irq_handler_exit irq:softirq_entry irq:softirq_exit "
               "timer:hrtimer_expire_entry timer:hrtimer_expire_exit ipi:ipi_send_cpu "
               "ipi:ipi_send_cpumask ?irq_vectors:local_timer_entry ?irq_vectors:local_timer_exit",
    "minimal": "sched:sched_switch sched:sched_wakeup timer:hrtimer_expire_entry",
    "rare": "irq:softirq_entry",
}


def run(variant, duration, tmp):
    db = os.path.join(tmp, f"{variant}.db")
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    argv = [os.path.join(BUILD, "daemon", "rtsoakd"), "--config", "/dev/null",
            "--set", f"Storage.Path={db}", "--set", "Schedule.Rotation=idle 1h",
            "--set", "Forensics.FlightRecorder=", "--duration", f"{duration}s"]
    if SETS[variant] is None:
        argv += ["--set", "Trace.Enabled=no"]
    elif SETS[variant]:
        argv += ["--set", f"Trace.Events={SETS[variant]}"]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"rtsoakd failed: {p.stderr}")
    h = json.loads(subprocess.run([os.path.join(BUILD, "cli", "rtsoak"), "--db", db, "histogram",
                                   "--format", "json"], check=True, capture_output=True,
                                  text=True).stdout)
    n = total = 0
    for c in h["cpus"]:
        for b in c["buckets"]:
            if b["upper_ns"] is not None and b["lower_ns"] < 40000:
                n += b["count"]
                total += b["count"] * (b["lower_ns"] + 500) / 1000
    return total / n


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=16)
    p.add_argument("--duration", type=int, default=4, help="seconds per run")
    p.add_argument("--sets", default="off,default,minimal")
    args = p.parse_args()
    sets = args.sets.split(",")
    for s in sets:
        if s not in SETS:
            sys.exit(f"--sets: unknown {s!r} (known: {', '.join(SETS)})")
    if os.geteuid() != 0:
        sys.exit("run as root")
    if not os.path.isdir("/sys/kernel/tracing/instances"):
        os.execvp("unshare", ["unshare", "-m", "sh", "-c",
                              'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"', "sh",
                              sys.executable, *sys.argv])
    tmp = f"/tmp/rtsoak-trace-events-{os.getpid()}"
    os.makedirs(tmp)
    res = {s: [] for s in sets}
    with open("/proc/loadavg") as f:
        print(f"# {args.rounds} rounds of {args.duration} s, sets {', '.join(sets)}; mean of the "
              f"samples below 40 us, in us; load average {' '.join(f.read().split()[:3])}")
    for r in range(args.rounds):
        order = sets[r % len(sets):] + sets[:r % len(sets)]
        for s in order:
            res[s].append(run(s, args.duration, tmp))
        print(f"round {r + 1}: " + "  ".join(f"{s} {res[s][-1]:.2f}" for s in sets), flush=True)
    subprocess.run(["rm", "-rf", tmp])
    for s in sets:
        print(f"{s:8s} median {statistics.median(res[s]):.2f} us")
    for s in sets[1:]:
        d = [res[s][i] - res[sets[0]][i] for i in range(args.rounds)]
        print(f"{s} minus {sets[0]}: paired difference median {statistics.median(d):+.2f} us, "
              f"mean {statistics.mean(d):+.2f} us, above in {sum(x > 0 for x in d)} of "
              f"{len(d)} rounds")


if __name__ == "__main__":
    main()
