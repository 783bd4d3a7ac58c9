#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The verdict over a day that is read interval by interval, of a machine with many CPUs that
did not measure: its time and the server's peak memory, two builds alternating.

One machine x --cpus CPUs x one day of one-minute intervals, each CPU delivering half the
wake-ups its span allows (rtsoak-replay --samples-share 50), posted to the real rtsoak-server;
then for each round and each build (--before's first, then this tree's build/), a server is
started on the farm, asked the release's verdict --requests times (about noon of that day,
wall time to the last byte), and its peak RSS (VmHWM, which includes the verdict log's first
pass over the same release) read before it stops.  The verdicts of the builds must be the same
bytes but for asked_at (compared).

Usage (from the source tree after building into build/):
    bench/raw-day.py [--pg postgresql://...] [--before OLD/build] [--cpus 256] [--rounds 2]
        [--requests 5] [--results FILE]
"""
import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import (BUILD, cpu_model, farm_database, start_server, timed_get,  # noqa: E402
                      write_results)

MACHINE = "%032x" % 7
RELEASE = "6.6.99-rt1"


def fill(build, db, cpus, tmp):
    server = os.path.join(build, "server", "rtsoak-server")
    token = subprocess.run([server, "--db", db, "enroll", MACHINE], check=True,
                           capture_output=True, text=True).stdout.split()[-1]
    proc, url, _ = start_server(server, db, os.path.join(tmp, "fill.log"),
                                ["--cache-warming", "no", "--rate", "1000000", "--burst",
                                 "1000000"])
    day = datetime.date.today() - datetime.timedelta(days=2)
    try:
        subprocess.run([os.path.join(build, "tools", "rtsoak-replay"), "--server", url,
                        "--token", token, "--machine", MACHINE, "--kernel", RELEASE,
                        "--from", f"{day}T00:00:00Z", "--to",
                        f"{day + datetime.timedelta(days=1)}T00:00:00Z", "--cpus", str(cpus),
                        "--samples-share", "50", "--batch", "20", "--quiet"], check=True)
    finally:
        proc.terminate()
        proc.wait()
    return f"{day}T12:00:00Z"


def measure(build, db, at, requests, tmp):
    server = os.path.join(build, "server", "rtsoak-server")
    proc, url, _ = start_server(server, db, os.path.join(tmp, "server.log"),
                                ["--cache-warming", "no"])
    try:
        times, body = [], b""
        for _ in range(requests):
            t, body = timed_get(f"{url}/api/v1/kernels/{RELEASE}/verdict?at={at}")
            times.append(t)
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
    finally:
        proc.terminate()
        proc.wait()
    return times, hwm, re.sub(rb'"asked_at(_ns)?":("[^"]*"|\d+)', b"", body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pg", default="", help="PostgreSQL server, e.g. "
                    "postgresql://postgres@/?host=/var/tmp/pgb (a database raw_day_bench made)")
    ap.add_argument("--before", default="", help="another build directory, measured first")
    ap.add_argument("--cpus", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--results", default=os.path.join(HERE, "results-raw-day.txt"))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rtsoak-raw-day-")
    db = farm_database(a.pg, "raw_day_bench", tmp)
    out = [f"# bench/raw-day.py --cpus {a.cpus} --requests {a.requests}"
           f"{' --pg' if a.pg else ''}{' --before ' + a.before if a.before else ''}",
           f"# date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"
           f", CPU: {cpu_model()}, load average before: {os.getloadavg()}"]
    at = fill(BUILD, db, a.cpus, tmp)
    builds = ([("before", a.before)] if a.before else []) + [("after", BUILD)]
    bodies = set()
    for _ in range(a.rounds):
        for name, build in builds:
            times, hwm, body = measure(build, db, at, a.requests, tmp)
            bodies.add(body)
            line = (f"{name}: verdict median {statistics.median(times) * 1000:.0f} ms "
                    f"({' '.join(f'{t * 1000:.0f}' for t in sorted(times))}), "
                    f"peak RSS {hwm / 1024:.1f} MiB, {'PostgreSQL' if a.pg else 'SQLite'}")
            print(line, flush=True)
            out.append(line)
    write_results(out, a.results, f"# the verdicts of the builds and rounds: "
                  f"{'the same bytes' if len(bodies) == 1 else 'DIFFERENT'}")
    if len(bodies) != 1:
        sys.exit("the builds' verdicts differ")


if __name__ == "__main__":
    main()
