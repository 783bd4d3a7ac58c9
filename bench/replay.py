#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Measures how fast rtsoak-replay posts a month of farm history to a real rtsoak-server.

Each case enrolls its machines into a fresh farm database in a temporary directory, starts
the real rtsoak-server on loopback (default options, except a rate limit high enough not to
throttle: the benchmark measures posting and storing, not the limiter), runs rtsoak-replay
--json with 30 days of 1-minute intervals of 8 CPUs per machine (60 intervals per upload,
the default, and then 1000, the most a summary may hold) and then counts the stored intervals in the database: all of them must be there
exactly once.  The load average before and after each case is shown: on a shared machine
the rate follows what else runs.  The rate is stored intervals divided by rtsoak-replay's own wall time; the CPU
time of both processes is shown beside it (the server's from /proc/PID/stat).

Cases: one machine; ten machines with --jobs 2; each with --batch 60 and --batch 1000.

Usage (from the source tree after building into build/):
    bench/replay.py [--days 30] [--cpus 8] [--machines 10] [--jobs 2] [--batch 1000]
"""
import argparse
import datetime
import json
import os
import platform
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, proc_cpu_s, start_server  # noqa: E402
SERVER = os.path.join(BUILD, "server", "rtsoak-server")
REPLAY = os.path.join(BUILD, "tools", "rtsoak-replay")
RESULTS = os.path.join(HERE, "results-replay.txt")
RATE_OPTS = ["--rate", "1000000", "--burst", "1000000"]
TO = "2026-11-01T00:00:00Z"


def run_case(tmp, machines, jobs, days, cpus, batch):
    db = os.path.join(tmp, "farm.db")
    log = os.path.join(tmp, "server.log")
    tokens = os.path.join(tmp, "tokens")
    ids = [f"{0xbe00 + i:032x}" for i in range(machines)]
    with open(tokens, "w") as f:
        for i in ids:
            tok = subprocess.run([SERVER, f"--db={db}", "enroll", i], check=True,
                                 capture_output=True, text=True).stdout.strip()
            f.write(f"{i} {tok}\n")
    srv, url, _ = start_server(SERVER, db, log, RATE_OPTS)
    load0 = os.getloadavg()[0]
    srv_cpu0 = proc_cpu_s(srv.pid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [REPLAY, "--server", url, "--tokens", tokens, "--jobs", str(jobs), "--to", TO,
           "--days", str(days), "--cpus", str(cpus), "--batch", str(batch), "--json", "--quiet"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load1 = os.getloadavg()[0]
    srv_cpu = proc_cpu_s(srv.pid) - srv_cpu0
    srv.send_signal(signal.SIGTERM)
    srv.wait(30)
    stats = json.loads(out)
    con = sqlite3.connect(db)
    stored = con.execute("SELECT count(*) FROM intervals").fetchone()[0]
    cpu_rows = con.execute("SELECT count(*) FROM interval_cpus").fetchone()[0]
    con.close()
    expected = machines * days * 1440
    if stored != expected or stats["intervals"] != expected or cpu_rows != expected * cpus:
        sys.exit(f"stored {stored} intervals ({cpu_rows} CPU rows), replay says "
                 f"{stats['intervals']}, expected {expected}")
    replay_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return stats, replay_cpu, srv_cpu, os.path.getsize(db), (load0, load1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--machines", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1000,
                    help="also measure with this many intervals per upload (60: only the default)")
    args = ap.parse_args()
    for p in (SERVER, REPLAY):
        if not os.path.exists(p):
            sys.exit(f"{p} is missing: build first (meson setup build && ninja -C build)")

    lines = [
        "rtsoak-replay: a month of farm history posted to the real rtsoak-server on loopback",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {cpu_model()}, {os.cpu_count()} CPUs, {platform.release()}",
        f"history: {args.days} days x 1-min intervals x {args.cpus} CPUs per machine, "
        "default rotation (loads with metrics), server with "
        "default options except --rate/--burst 1000000",
        "",
        f"{'case':<38} {'intervals':>9} {'uploads':>7} {'wall s':>8} {'intervals/s':>11} "
        f"{'replay CPU s':>12} {'server CPU s':>12} {'DB MiB':>7} load before/after",
    ]
    cases = [(1, 1, 60), (args.machines, args.jobs, 60)]
    if args.batch != 60:
        cases += [(1, 1, args.batch), (args.machines, args.jobs, args.batch)]
    for machines, jobs, batch in cases:
        with tempfile.TemporaryDirectory(prefix="rtsoak-bench-replay-") as tmp:
            stats, rcpu, scpu, size, load = run_case(tmp, machines, jobs, args.days, args.cpus, batch)
        name = f"{machines} machine{'s' if machines > 1 else ''}, --jobs {jobs}, --batch {batch}"
        line = (f"{name:<38} {stats['intervals']:>9} {stats['uploads']:>7} "
                f"{stats['seconds']:>8.1f} {stats['intervals_per_second']:>11.0f} "
                f"{rcpu:>12.1f} {scpu:>12.1f} {size / 1048576:>7.0f} {load[0]:>5.1f}/{load[1]:<5.1f}")
        print(line, flush=True)
        lines.append(line)
    with open(RESULTS, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
