#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Measures the query API of rtsoak-server on a filled farm.

bench/query-fill (built with the rest) fills a farm database through the server's own store
path: N machines, each with D days of one-minute intervals of C CPUs (300,000 samples per CPU
and interval in a histogram of about 20 buckets, rare outliers), the scenario changing every
hour among six, the first half of the days under kernel 6.6.30-rt30 and the rest under
6.6.40-rt36.  The days end at the last UTC midnight, so every day is a whole past day that the
histogram cache may hold.

Then the real rtsoak-server serves that database on loopback and each query is timed from the
request to the last byte of the answer, repeated; the figures are the medians (and the range).
"cold" means with the histogram cache emptied before each repetition (DELETE FROM hist_days
while the server runs), "warm" with the cache as the previous repetition left it.

Usage (from the source tree after building into build/):
    bench/query.py [--machines 1] [--days 30] [--cpus 8] [--runs 9] [--db PATH] [--keep]
"""
import argparse
import datetime
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, start_server  # noqa: E402
from benchlib import timed_get as benchlib_get  # noqa: E402
SERVER = os.path.join(BUILD, "server", "rtsoak-server")
FILL = os.path.join(BUILD, "bench", "query-fill")
DAY_NS = 86400 * 10**9


def timed_get(url):
    """(seconds, bytes) of a GET of url (200 or exit)."""
    dt, body = benchlib_get(url)
    return dt, len(body)


def clear_cache(db):
    c = sqlite3.connect(db, timeout=60)
    c.execute("DELETE FROM hist_days")
    c.commit()
    c.close()


SERVER_PID = None
TICK = os.sysconf("SC_CLK_TCK")


def server_cpu_ms():
    """utime + stime of the server so far, from /proc/PID/stat."""
    with open(f"/proc/{SERVER_PID}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def measure(name, url, runs, before=None):
    times = []
    size = 0
    cpu = 0
    for _ in range(runs):
        if before:
            before()
        c0 = server_cpu_ms()
        dt, size = timed_get(url)
        cpu += server_cpu_ms() - c0
        times.append(dt * 1000)
    med = statistics.median(times)
    line = (f"{name:52s} median {med:8.1f} ms (range {min(times):.1f}-{max(times):.1f}), "
            f"server CPU {cpu / runs:7.1f} ms/query, {runs} runs, {size} bytes")
    print(line, flush=True)
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machines", type=int, default=1)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--db", help="use (or fill, when missing) this database")
    ap.add_argument("--keep", action="store_true", help="keep the temporary database")
    ap.add_argument("--results", default=os.path.join(HERE, "results-query.txt"))
    ap.add_argument("--append", action="store_true", help="append to the results file")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="rtsoak-query-")
    db = args.db or os.path.join(tmp, "farm.db")
    out = []
    if not os.path.exists(db):
        t = time.monotonic()
        subprocess.run([FILL, "--db", db, "--machines", str(args.machines), "--days",
                        str(args.days), "--cpus", str(args.cpus)], check=True,
                       stderr=subprocess.DEVNULL)
        out.append(f"filled in {time.monotonic() - t:.0f} s with {FILL}")
    c = sqlite3.connect(db)
    nint = c.execute("SELECT count(*) FROM intervals").fetchone()[0]
    ncpu = c.execute("SELECT count(*) FROM interval_cpus").fetchone()[0]
    nmach = c.execute("SELECT count(*) FROM machines").fetchone()[0]
    first, last = c.execute("SELECT min(start_ns), max(start_ns) FROM intervals").fetchone()
    c.close()
    size = os.path.getsize(db)
    out.append(f"farm: {nmach} machines, {nint} intervals, {ncpu} interval_cpus rows, "
               f"database {size / 2**20:.0f} MiB")

    log = os.path.join(tmp, "server.log")
    t = time.monotonic()
    # The start checks the database (quick_check): minutes for a farm of gigabytes.
    # The cache is filled by the queries themselves ("cold" is measured), not in the background.
    proc, base, _ = start_server(SERVER, db, log, ["--cache-warming", "no"], timeout_s=1800)
    out.append(f"server started in {time.monotonic() - t:.1f} s (quick_check of the database)")
    global SERVER_PID
    SERVER_PID = proc.pid
    try:
        mid = "%032x" % 1
        frm, to = first, last + 1
        days = (to - frm + DAY_NS - 1) // DAY_NS
        m = f"{base}/api/v1/machines/{mid}"
        r = args.runs
        out.append(f"machine {mid}: {days} days from {frm} to {to}")
        # Warm the page cache of the database file once: the figures are for a server that
        # has been running, not for the first read from disk.
        timed_get(f"{m}/intervals?from={frm}&to={to}&step=1h&limit=1000")
        out.append(measure(f"intervals {days} d, step=5min, first page (1000 steps)",
                           f"{m}/intervals?from={frm}&to={to}&step=5min&limit=1000", r))
        def all_pages():
            url = f"{m}/intervals?from={frm}&to={to}&step=5min&limit=1000"
            n = 0
            while url:
                with urllib.request.urlopen(url) as resp:
                    import json
                    j = json.loads(resp.read())
                n += len(j["steps"])
                url = base + j["next"] if j["next"] else None
            return n
        times = []
        c0 = server_cpu_ms()
        for _ in range(r):
            t = time.perf_counter()
            n = all_pages()
            times.append((time.perf_counter() - t) * 1000)
        cpu = (server_cpu_ms() - c0) / r
        line = (f"{f'intervals {days} d, step=5min, all {n} steps (pages)':52s} median "
                f"{statistics.median(times):8.1f} ms (range {min(times):.1f}-{max(times):.1f}), "
                f"server CPU {cpu:7.1f} ms/query, {r} runs")
        print(line, flush=True)
        out.append(line)
        out.append(measure(f"intervals {days} d, step=5min, cpu=3, first page",
                           f"{m}/intervals?from={frm}&to={to}&step=5min&cpu=3&limit=1000", r))
        out.append(measure("intervals last 24 h, default step (each interval), 1000",
                           f"{m}/intervals?limit=1000", r))
        out.append(measure(f"histogram {days} d, cold (cache emptied each time)",
                           f"{m}/histogram?from={frm}&to={to}", r, lambda: clear_cache(db)))
        out.append(measure(f"histogram {days} d, warm",
                           f"{m}/histogram?from={frm}&to={to}", r))
        out.append(measure(f"histogram {days} d, scenario=io, cpu=3, warm",
                           f"{m}/histogram?from={frm}&to={to}&scenario=io&cpu=3", r))
        cmp = f"{base}/api/v1/kernels/6.6.40-rt36/compare?with=6.6.30-rt30&limit=1000"
        out.append(measure("compare 6.6.40-rt36 with 6.6.30-rt30, cold", cmp, max(1, r // 3),
                           lambda: clear_cache(db)))
        out.append(measure("compare 6.6.40-rt36 with 6.6.30-rt30, warm", cmp, r))
        out.append(measure("metrics", f"{base}/metrics", r))
        out.append(measure("runs", f"{m}/runs", r))
        out.append(measure("events (none stored)", f"{m}/events", r))
        out.append(measure("machines, first page", f"{base}/api/v1/machines", r))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        if not args.keep and not args.db:
            shutil.rmtree(tmp)

    head = [
        f"# bench/query.py --machines {args.machines} --days {args.days} --cpus {args.cpus} "
        f"--runs {args.runs}",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} "
        f"at the end (the machine is shared: figures are medians)",
    ]
    with open(args.results, "a" if args.append else "w") as f:
        f.write("\n".join(head + out) + "\n\n")


if __name__ == "__main__":
    main()
