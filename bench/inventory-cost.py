#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the machine inventory costs rtsoakd: the daemon run with the periodic check off
([Inventory] Check=0) and on (every --check, far more often than the 5 min default), in turns,
for --seconds each.  Reported per variant: the CPU time of the main thread (where a check
runs) and of the whole process, from the scheduler's accounting just before the stop; the CPU
time one check costs (the difference of the main thread's, over the number of checks); and the
size of one inventory version (its JSON, as the summary carries it) on this machine."""

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def task_cpu_s(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(rtsoakd, check, seconds, workdir, n):
    db = os.path.join(workdir, f"run{n}.db")
    argv = [rtsoakd, "--config", "/dev/null", "--set", f"Storage.Path={db}",
            "--set", "Schedule.Rotation=idle 1h", "--set", "Trace.Enabled=no",
            "--set", 'Forensics.FlightRecorder=""', "--set", f"Inventory.Check={check}"]
    err = open(os.path.join(workdir, f"run{n}.err"), "wb")
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    time.sleep(seconds)
    main_s = task_cpu_s(p.pid, p.pid)
    all_s = benchlib.proc_cpu_s(p.pid)
    p.send_signal(signal.SIGTERM)
    if p.wait(timeout=30) != 0:
        sys.exit(f"rtsoakd exited {p.returncode}")
    con = sqlite3.connect(db)
    versions = con.execute("SELECT count(*), max(length(fields)) FROM inventory").fetchone()
    fields = con.execute("SELECT fields FROM inventory ORDER BY version DESC LIMIT 1").fetchone()
    con.close()
    return main_s, all_s, versions[0], versions[1], len(json.loads(fields[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--check", default="1s", help="the period of the 'on' variant")
    a = ap.parse_args()
    rtsoakd = os.path.join(benchlib.BUILD, "daemon", "rtsoakd")
    period_s = {"s": 1, "min": 60}[a.check.lstrip("0123456789")] * int(
        a.check.rstrip("smin"))
    print(f"# {benchlib.cpu_model()}, {os.cpu_count()} CPUs; {a.rounds} round(s) of "
          f"{a.seconds:.0f} s per variant; 'on' checks every {a.check}")
    with tempfile.TemporaryDirectory(prefix="rtsoak-inventory-bench-") as workdir:
        n = 0
        for r in range(a.rounds):
            res = {}
            order = ["0", a.check] if r % 2 == 0 else [a.check, "0"]
            for check in order:
                n += 1
                res[check] = run(rtsoakd, check, a.seconds, workdir, n)
            off, on = res["0"], res[a.check]
            checks = a.seconds / period_s
            print(f"round {r + 1}: main thread {off[0]:.2f} s off, {on[0]:.2f} s on; "
                  f"process {off[1]:.2f} s off, {on[1]:.2f} s on; "
                  f"{(on[0] - off[0]) / checks * 1000:.2f} ms of CPU per check "
                  f"({checks:.0f} checks); "
                  f"inventory: {on[4]} fields, {on[3]} bytes per version, "
                  f"{on[2]} version(s) in the 'on' run")


if __name__ == "__main__":
    main()
