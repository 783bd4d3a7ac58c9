#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A machine's dashboard page and its 30-day intervals while the farm's ingest runs, without
the histogram cache's warming thread.

The farm: one machine x 8 CPUs x 30 days of one-minute intervals (bench/query-fill), and 100
more machines enrolled by bench/ingest-load, which posts their summaries (one one-minute
interval of 8 CPUs each) at 100 machines' rate (100 a minute) during the measurement, then
again as fast as the server answers (the most it takes: a farm catching up after an outage).
The real rtsoak-server runs with --cache-warming no; its first page view after the start is
reported by itself (nothing was merged before it), then each request is timed --runs times:
the machine page (/machines/ID, the last 30 days) and the intervals query of the month at
5-minute steps, first page (1,000 steps) and whole (8,640 steps, one page).  Medians (range),
the server's CPU per request (its own, not the database's), the load average before and
after.

With --pg URI (a PostgreSQL server for benchmarks) the farm is a database "page_bench" made
there instead of an SQLite file.  With --server PATH another build's rtsoak-server runs (its
bench/query-fill and bench/ingest-load beside it fill and load the farm, in its schema), e.g.
the build before a change, so that both are measured in one session.

Usage (from the source tree after building into build/):
    bench/page-beside-ingest.py [--runs 15] [--pg URI] [--server PATH] [--results FILE]
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
from benchlib import (BUILD, cpu_model, farm_database, proc_cpu_s, start_server,  # noqa: E402
                      timed_get)

SERVER = os.path.join(BUILD, "server", "rtsoak-server")
DAY_NS = 86400 * 10**9


def get(url):
    """Milliseconds of a GET of url (200 or exit)."""
    return timed_get(url)[0] * 1000


def measure(base, runs, label, out, pid):
    mid = "%032x" % 1
    to = (time.time_ns() // DAY_NS) * DAY_NS
    frm = to - 30 * DAY_NS
    queries = [("machine page, 30 days", f"/machines/{mid}?from={frm}&to={to}"),
               ("intervals 30 d, 5 min, first 1,000 steps",
                f"/api/v1/machines/{mid}/intervals?from={frm}&to={to}&step=5min&limit=1000"),
               ("intervals 30 d, 5 min, all 8,640 steps",
                f"/api/v1/machines/{mid}/intervals?from={frm}&to={to}&step=5min&limit=10000")]
    for name, path in queries:
        cpu0 = proc_cpu_s(pid)
        times = [get(base + path) for _ in range(runs)]
        cpu = (proc_cpu_s(pid) - cpu0) * 1000 / runs
        line = (f"{label:28s} {name:42s} median {statistics.median(times):7.1f} ms "
                f"({min(times):.1f}-{max(times):.1f}), {runs} runs, server CPU {cpu:.0f} ms each")
        print(line, flush=True)
        out.append(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--results", default=os.path.join(HERE, "results-page-beside-ingest.txt"))
    ap.add_argument("--pg", default="", help="PostgreSQL server, e.g. "
                    "postgresql://postgres@/?host=/var/tmp/pgb")
    ap.add_argument("--server", default=SERVER, help="the rtsoak-server to measure")
    args = ap.parse_args()
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.server)))
    fill, ingest_load = (os.path.join(build, "bench", x) for x in ("query-fill", "ingest-load"))
    load0 = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="rtsoak-page-")
    out = [f"server: {args.server}, store: {'PostgreSQL' if args.pg else 'SQLite'}"]
    proc = load = None
    try:
        db = farm_database(args.pg, "page_bench", tmp)
        start = time.monotonic()
        subprocess.run([fill, "--db", db, "--machines", "1", "--days", "30", "--cpus", "8"],
                       check=True, stderr=subprocess.DEVNULL)
        out.append(f"filled in {time.monotonic() - start:.0f} s")
        proc, base, _ = start_server(args.server, db, os.path.join(tmp, "server.log"),
                                     ["--cache-warming", "no", "--rate", "1000000", "--burst",
                                      "1000000"], timeout_s=600)
        mid = "%032x" % 1
        to = (time.time_ns() // DAY_NS) * DAY_NS
        first = get(f"{base}/machines/{mid}?from={to - 30 * DAY_NS}&to={to}")
        out.append(f"the first machine page after the start (nothing merged before): "
                   f"{first:.0f} ms")
        print(out[-1], flush=True)
        measure(base, args.runs, "quiet", out, proc.pid)
        for label, rate in (("beside 100 machines' rate", "1.6667"), ("beside ingest flat out", "")):
            argv = [ingest_load, "--url", base, "--enroll", args.server, "--db", db, "--machines",
                    "100",
                    "--connections", "1" if rate else "16", "--count", "1000000", "--duration",
                    "3600", "--run-id", "7"] + (["--rate", rate] if rate else [])
            load = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(15)  # enrolled, and posting
            measure(base, args.runs, label, out, proc.pid)
            load.send_signal(signal.SIGKILL)
            load.wait()
            load = None
    finally:
        if load:
            load.kill()
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
        shutil.rmtree(tmp)
    load1 = os.getloadavg()
    head = [f"# bench/page-beside-ingest.py --runs {args.runs}"
            + (f" --pg {args.pg}" if args.pg else "")
            + (f" --server {args.server}" if args.server != SERVER else ""),
            f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
            f"host: {cpu_model()}, {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
            f"{load1[0]:.2f} after"]
    with open(args.results, "a") as f:
        f.write("\n".join(head + out) + "\n\n")
    print("\n".join(head))


if __name__ == "__main__":
    main()
