#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The intervals query of two server builds on one farm, alternating, on SQLite and PostgreSQL.

Fills one farm per store with bench/query-fill (N machines x C CPUs x D days of one-minute
intervals), then serves it with both builds' rtsoak-server at once (the histogram cache's
warming off) and asks each, in turn, for machine 1's whole window at step=5min (one page of
up to 10,000 steps), with cpu=3, and at step=1h.  Every answer of the two builds must be
the same bytes.  Figures: the median wall time over loopback (range), and the server's CPU per
query from /proc; the load average before and after.

Usage (from the source tree):
    bench/intervals-query.py --before OLD_BUILD [--after build] [--days 30] [--cpus 8]
                             [--runs 15] [--pg postgresql://...] [--results FILE]
"""
import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_model, proc_cpu_s, start_server, timed_get as get  # noqa: E402

DAY_NS = 86400 * 10**9


def fill(build, target, args):
    t = time.monotonic()
    subprocess.run([os.path.join(build, "bench", "query-fill"), "--db", target, "--machines",
                    str(args.machines), "--days", str(args.days), "--cpus", str(args.cpus)],
                   check=True, stderr=subprocess.DEVNULL)
    return time.monotonic() - t


def window(base):
    """The machine's whole window, from its runs' first and last interval."""
    _, body = get(f"{base}/api/v1/machines/{'%032x' % 1}/runs")
    import json
    runs = json.loads(body)["runs"]
    first = min(r["first_data_ns"] for r in runs if r["first_data_ns"] is not None)
    last = max(r["last_data_ns"] for r in runs if r["last_data_ns"] is not None)
    return first, last


def compare(store, servers, queries, runs, out):
    """Alternates the builds' servers on each query; the answers must be equal."""
    for name, path in queries:
        times = {b: [] for b in servers}
        cpu = {b: 0.0 for b in servers}
        answers = {}
        for i in range(runs):
            order = list(servers) if i % 2 == 0 else list(reversed(list(servers)))
            for b in order:
                proc, base = servers[b]
                c0 = proc_cpu_s(proc.pid)
                dt, body = get(base + path)
                cpu[b] += proc_cpu_s(proc.pid) - c0
                times[b].append(dt * 1000)
                answers.setdefault(b, body)
                if body != answers[b]:
                    sys.exit(f"{store} {b}: {name}: the answer changed between runs")
        same = len(set(answers.values())) == 1
        meds = {b: statistics.median(times[b]) for b in servers}
        line = f"{store:10s} {name:34s}"
        for b in servers:
            line += (f" | {b}: median {meds[b]:7.1f} ms ({min(times[b]):.1f}-"
                     f"{max(times[b]):.1f}), server CPU {cpu[b] * 1000 / runs:6.1f} ms")
        line += (f" | after/before {meds['after'] / meds['before']:.2f}x, answers "
                 f"{'identical' if same else 'DIFFER'} ({len(answers['after'])} bytes)")
        print(line, flush=True)
        out.append(line)
        if not same:
            sys.exit("the two builds answer differently")


def run_store(store, target, args, out):
    tmp = tempfile.mkdtemp(prefix="rtsoak-iq-")
    servers = {}
    try:
        for b, build in (("before", args.before), ("after", args.after)):
            proc, base, _ = start_server(os.path.join(build, "server", "rtsoak-server"), target,
                                         os.path.join(tmp, f"{b}.log"),
                                         ["--cache-warming", "no"], timeout_s=600)
            servers[b] = (proc, base)
        first, last = window(servers["after"][1])
        m = f"/api/v1/machines/{'%032x' % 1}/intervals?from={first}&to={last}"
        queries = [("whole window, step=5min", f"{m}&step=5min&limit=10000"),
                   ("whole window, step=5min, cpu=3", f"{m}&step=5min&cpu=3&limit=10000"),
                   ("whole window, step=1h", f"{m}&step=1h&limit=10000")]
        for _, path in queries:  # the database's pages read once before timing
            get(servers["after"][1] + path)
            get(servers["before"][1] + path)
        compare(store, servers, queries, args.runs, out)
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait()
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the build directory of the old server")
    ap.add_argument("--after", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--machines", type=int, default=1)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--pg", help="a PostgreSQL database URI to fill as well (emptied first)")
    ap.add_argument("--results", default=os.path.join(HERE, "results-intervals-query.txt"))
    args = ap.parse_args()

    load0 = os.getloadavg()
    out = []
    tmp = tempfile.mkdtemp(prefix="rtsoak-iq-farm-")
    try:
        db = os.path.join(tmp, "farm.db")
        out.append(f"SQLite filled in {fill(args.after, db, args):.0f} s "
                   f"({os.path.getsize(db) / 2**20:.0f} MiB)")
        stores = [("SQLite", db)]
        if args.pg:
            out.append(f"PostgreSQL filled in {fill(args.after, args.pg, args):.0f} s")
            stores.append(("PostgreSQL", args.pg))
        for store, target in stores:
            run_store(store, target, args, out)
    finally:
        shutil.rmtree(tmp)
    load1 = os.getloadavg()
    head = [
        f"# bench/intervals-query.py --machines {args.machines} --days {args.days} --cpus "
        f"{args.cpus} --runs {args.runs}",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {cpu_model()}, {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
        f"{load1[0]:.2f} after",
    ]
    with open(args.results, "a") as f:
        f.write("\n".join(head + out) + "\n\n")
    print("\n".join(head))


if __name__ == "__main__":
    main()
