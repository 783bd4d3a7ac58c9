#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs rtsoak-load's hackbench generator and rt-tests' hackbench alternately with the same
groups, fds, loops, message size and mode, and compares the messages per second each delivers.

Both sides deliver groups x fds x fds x loops messages (rtsoak-load: one round, --rounds 1; its
JSON count is checked against that number).  Both are timed the same way, as whole processes:
wall time from the start of the program to its exit, measured here, so it includes creating and
reaping every worker on both sides, and on ours also the runner's start-up and up to 50 ms until
it notices the generator has finished.  hackbench's own "Time:" (which starts after its workers
are created) is listed too, for information.  CPU time is that of the whole process tree (wait4).

Usage (from the source tree after building into build/):
    bench/hackbench-vs-rt-tests.py [--pairs 5] [--groups 10] [--fds 20] [--datasize 100]
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD  # noqa: E402
RTSOAK_LOAD = os.path.join(BUILD, "loadgen", "rtsoak-load")
HACKBENCH = "/usr/bin/hackbench"
RESULTS = os.path.join(HERE, "results-hackbench-vs-rt-tests.txt")

# (name, pipe, threads, loops): loops chosen so that one run takes a second or two here.
CONFIGS = [
    ("socket+process", False, False, 300),
    ("pipe+thread", True, True, 1000),
    ("socket+thread", False, True, 300),
    ("pipe+process", True, False, 1000),
]


def run_timed(argv):
    """Runs argv to completion; returns (wall seconds, CPU seconds of the tree, stdout)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.stdout.close()
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(argv)} failed ({code}): {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime, out.decode(errors="replace")


def ours_argv(a, pipe, threads, loops):
    argv = [RTSOAK_LOAD, "--json", "hackbench", "--rounds", "1", "--groups", str(a.groups),
            "--fds", str(a.fds), "--loops", str(loops), "--datasize", str(a.datasize)]
    if pipe:
        argv.append("--pipe")
    if threads:
        argv.append("--threads")
    return argv


def ref_argv(a, pipe, threads, loops):
    argv = [HACKBENCH, "--groups", str(a.groups), "--fds", str(a.fds), "--loops", str(loops),
            "--datasize", str(a.datasize)]
    if pipe:
        argv.append("--pipe")
    argv.append("--threads" if threads else "--process")
    return argv


def run_ours(argv, messages):
    wall, cpu, out = run_timed(argv)
    j = json.loads(out)
    counts = {m["name"]: m["count"] for m in j["metrics"]}
    if counts.get("messages") != messages or counts.get("rounds") != 1:
        sys.exit(f"rtsoak-load delivered {counts}, expected {messages} messages in 1 round")
    return {"rate": messages / wall, "wall": wall, "cpu": cpu}


def run_ref(argv, messages):
    wall, cpu, out = run_timed(argv)
    m = re.search(r"^Time:\s*([0-9.]+)", out, re.M)
    if not m:
        sys.exit(f"no 'Time:' in hackbench's output: {out}")
    t = float(m.group(1))
    return {"rate": messages / wall, "wall": wall, "cpu": cpu,
            "own_rate": messages / t if t > 0 else float("nan")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--fds", type=int, default=20)
    p.add_argument("--datasize", type=int, default=100)
    p.add_argument("--loops-scale", type=float, default=1.0,
                   help="multiply every configuration's loops by this")
    a = p.parse_args()
    if not os.access(RTSOAK_LOAD, os.X_OK) or not os.access(HACKBENCH, os.X_OK):
        sys.exit(f"need {RTSOAK_LOAD} (build first) and {HACKBENCH} (rt-tests)")

    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    ver = subprocess.run([HACKBENCH, "--help"], capture_output=True, text=True)
    ver = (ver.stdout + ver.stderr).splitlines()[0] if (ver.stdout + ver.stderr) else "?"
    say("hackbench generator (rtsoak-load) vs rt-tests hackbench")
    say(f"date:   {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"kernel: {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs")
    say(f"reference: {ver}")
    say("timing: whole processes (start to exit, wall clock), the same for both sides;")
    say("        messages/s = groups*fds*fds*loops / wall seconds.  Pairs alternate which side")
    say("        runs first.  'hb Time' is hackbench's own figure (excludes forking workers).")
    say()

    summary = []
    for name, pipe, threads, loops in CONFIGS:
        loops = max(1, int(loops * a.loops_scale))
        messages = a.groups * a.fds * a.fds * loops
        oa, ra = ours_argv(a, pipe, threads, loops), ref_argv(a, pipe, threads, loops)
        say(f"== {name}: {messages} messages per run")
        say(f"   ours: {' '.join(oa)}")
        say(f"   ref:  {' '.join(ra)}")
        ours, ref = [], []
        for i in range(a.pairs):
            if i % 2 == 0:
                o = run_ours(oa, messages)
                r = run_ref(ra, messages)
            else:
                r = run_ref(ra, messages)
                o = run_ours(oa, messages)
            ours.append(o)
            ref.append(r)
            say(f"   pair {i + 1}: ours {o['rate']:10.0f} msg/s ({o['wall']:.3f} s, cpu "
                f"{o['cpu']:.2f} s) | ref {r['rate']:10.0f} msg/s ({r['wall']:.3f} s, cpu "
                f"{r['cpu']:.2f} s; hb Time {r['own_rate']:.0f} msg/s)")
        mo = statistics.median(x["rate"] for x in ours)
        mr = statistics.median(x["rate"] for x in ref)
        mh = statistics.median(x["own_rate"] for x in ref)
        ratio = mo / mr
        summary.append((name, mo, mr, ratio))
        say(f"   median: ours {mo:.0f} msg/s, ref {mr:.0f} msg/s (hb Time {mh:.0f} msg/s), "
            f"ratio ours/ref {ratio:.3f}")
        say()

    say("summary (median messages/s over whole-process wall time)")
    for name, mo, mr, ratio in summary:
        say(f"   {name:15s} ours {mo:10.0f}  ref {mr:10.0f}  ratio {ratio:.3f}"
            f"{'' if ratio >= 0.9 else '  (below 0.9)'}")
    with open(RESULTS, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
