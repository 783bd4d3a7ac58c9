#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times the verdict and the dashboard queries on a simulated farm.

The farm (by default 200 machines x 8 CPUs x 30 days of 1-minute intervals under the built-in
six-scenario rotation, 8.64 million intervals, two machines with a latency spike) is made once
by bench/farm-fill through the server's own storage path, into --db (kept between runs: filling
takes the better part of an hour on a 2-CPU VM).  Then the real rtsoak-server serves that
database on loopback and each request is timed from the client, over HTTP, N times:

  - the verdict of the release (GET /api/v1/kernels/REL/verdict?at=END+1min, and as known
    then, ?known_at=): target < 200 ms;
  - a 30-day interval query at 5-minute steps for one machine
    (GET /api/v1/machines/ID/intervals?from=&to=&step=5min, every page): target < 100 ms;
  - the same machine's 30-day merged histogram, and the kernel list.

The first request of each kind runs on a cold page cache for that part of the file (the
filling wrote other parts last), so the median and the maximum are both reported.  The
database size is the main file plus the WAL.

--db may be given more than once, for the same farm in several stores (an SQLite file and the
PostgreSQL database that rtsoak-server migrate copied it into): each is measured in turn, in
the same run, and reported under its store.

--only QUERY (repeatable) measures just those queries, e.g. the intervals query on both stores
in turn: --db FILE --db URI --db FILE --db URI --only intervals.

Usage (from the source tree after building into build/):
    bench/farm-queries.py --db /var/tmp/rtsoak-bench/farm.db [--db postgresql://...] [--runs 7]
                          [--only intervals] [--fill]
"""
import argparse
import datetime
import json
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, proc_cpu_s, start_server  # noqa: E402
SERVER = os.path.join(BUILD, "server", "rtsoak-server")
FILL = os.path.join(BUILD, "bench", "farm-fill")
RESULTS = os.path.join(HERE, "results-farm-queries.txt")
END_S = 1796256000  # 2026-12-03T00:00:00Z: the simulated month ends here
RELEASE = "6.1.0-rt-bench"


def timed_get(url):
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.monotonic() - t, json.loads(body)


def timed_pages(url):
    """Every page of a paginated answer; the time of all of them together."""
    total, pages, items = 0.0, 0, 0
    base = url.split("/api/")[0]
    while url:
        dt, j = timed_get(url)
        total += dt
        pages += 1
        items += len(j.get("steps") or j.get("intervals") or [])
        nxt = j.get("next")
        url = (base + nxt if nxt and nxt.startswith("/") else nxt) if nxt else None
    return total, pages, items


def summary(name, times, target=None):
    med = statistics.median(times)
    line = "%-44s median %8.1f ms   min %8.1f   max %8.1f   (n=%d)" % (
        name, med * 1000, min(times) * 1000, max(times) * 1000, len(times))
    if target:
        line += "   target < %g ms: %s" % (target * 1000, "met" if med < target else "MISSED")
    return line


BASELINE = "6.1.0-rt-bench"   # clean, the month before: the newer release's baseline
NEWER = "6.1.1-rt-bench"      # the month after, two spikes


def baseline(args):
    """The verdict of a release that has a baseline, and the comparison of the two: the farm
    runs BASELINE for --days, then NEWER for --days, on the same machines (--db is filled with
    both when missing).  The verdict of NEWER finds BASELINE qualified and compares every
    machine and scenario of both from the day histograms ingest keeps, as does the comparison
    (/api/v1/kernels/NEWER/compare?with=BASELINE, its first page).  Each is
    timed first right after the server's start, then --runs times."""
    if not os.path.exists(args.db):
        t = time.monotonic()
        span = args.days * 86400
        subprocess.run([FILL, args.db, str(args.machines), str(args.cpus), str(args.days), "60",
                        str(END_S - span), BASELINE, "1", "no"], check=True)
        subprocess.run([FILL, args.db, str(args.machines), str(args.cpus), str(args.days), "60",
                        str(END_S), NEWER, "2", "yes"], check=True)
        print("filled in %.0f s" % (time.monotonic() - t))
    size = sum(os.path.getsize(args.db + s) for s in ("", "-wal") if os.path.exists(args.db + s))
    shape = farm_shape(args.db)
    log = args.db + ".server.log"
    proc, url, _ = start_server(SERVER, args.db, log, timeout_s=1800)
    at = (END_S + 60) * 10**9
    verdict_url = "%s/api/v1/kernels/%s/verdict?at=%d" % (url, NEWER, at)
    compare_url = "%s/api/v1/kernels/%s/compare?with=%s" % (url, NEWER, BASELINE)
    try:
        first, last = timed_get(verdict_url)
        warm = [timed_get(verdict_url)[0] for _ in range(args.runs)]
        cfirst, cmp = timed_get(compare_url)
        compare = [timed_get(compare_url)[0] for _ in range(args.runs)]
        # The same bounded to each release's newest days (alternating with the whole, so
        # that both see the same machine).
        window, whole = [], []
        for _ in range(args.runs if args.compare_days else 0):
            dt, wcmp = timed_get("%s&days=%d" % (compare_url, args.compare_days))
            window.append(dt)
            whole.append(timed_get(compare_url)[0])
        kernels = [timed_get("%s/api/v1/kernels?at=%d" % (url, at))[0]
                   for _ in range(args.runs)]
        cpu_s = proc_cpu_s(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    lines = [
        "%s  %s, %d CPUs, %s, load average %.2f" % (
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            cpu_model(), os.cpu_count(), platform.release(), os.getloadavg()[0]),
        "farm: %s: %s then %s, database %.2f GiB" % (shape_text(shape), BASELINE, NEWER,
                                                     size / 2**30),
        "verdict of %s: %s, baseline %s, %d problem(s) (%d regressions)%s" % (
            NEWER, last["verdict"], last["baseline"], last["problems_total"],
            last["problem_counts"]["regression"],
            "" if last["baseline"] else ": judged without the regression check (%s did not "
            "qualify: the rule's Period= is longer than its data)" % BASELINE),
        "first verdict after the start %.3f s, first comparison %.3f s (%d of %d comparisons "
        "on its page, %d regressions)" % (first, cfirst, len(cmp["comparisons"]), cmp["total"],
                                          cmp["regressions"]),
        summary("verdict of %s" % NEWER, warm, 0.2),
        summary("comparison with the baseline, first page", compare),
        summary("kernel list with verdicts", kernels),
    ]
    if args.compare_days:
        lines += [
            summary("comparison, days=%d (%d comparisons)" % (args.compare_days,
                                                             wcmp["total"]), window),
            summary("comparison, all days, alternating with it", whole),
        ]
    lines += [
        "server CPU for all of it: %.0f s" % cpu_s,
    ]
    out = "\n".join(lines) + "\n"
    print(out, end="")
    with open(args.results, "a") as f:
        f.write(out + "\n")


# What a farm holds, read from it: the same SQL on both stores (the day rollups, not the
# intervals, so that it takes no longer than a query of the benchmark).
SHAPE_SQL = ("SELECT (SELECT count(*) FROM machines), (SELECT min(cpus) FROM machines), "
             "(SELECT max(cpus) FROM machines), (SELECT sum(intervals) FROM run_days), "
             "(SELECT min(first_start_ns) FROM run_days), (SELECT max(last_end_ns) FROM run_days)")


def farm_shape(db):
    """The farm in db as it is (not as --machines, --cpus and --days would have filled it):
    machines, their CPUs ("8", or "2-8" when they differ), intervals and the days they span."""
    if db.startswith("postgres"):
        out = subprocess.run(["psql", "-At", "-F", "|", db, "-c", SHAPE_SQL],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("%s: cannot read the farm: %s" % (db.split("?")[0],
                                                                out.stderr.strip()))
        vals = out.stdout.strip().split("|")
    else:
        if not os.path.exists(db):
            raise SystemExit("%s: no such farm database (--fill makes one)" % db)
        try:
            con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
            vals = con.execute(SHAPE_SQL).fetchone()
            con.close()
        except sqlite3.Error as e:
            raise SystemExit("%s: cannot read the farm: %s" % (db, e))
    machines, cmin, cmax, intervals, first, last = (int(v) if v not in (None, "") else 0
                                                    for v in vals)
    return {"machines": machines, "cpus": str(cmin) if cmin == cmax else "%d-%d" % (cmin, cmax),
            "intervals": intervals, "days": (last - first) / 86400e9 if last > first else 0.0}


def shape_text(s):
    return "%d machines x %s CPUs, %.1f days of data (%d intervals)" % (
        s["machines"], s["cpus"], s["days"], s["intervals"])


def timed_get_text(url):
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.monotonic() - t, len(body)


def db_size(db):
    if db.startswith("postgres"):
        out = subprocess.run(["psql", "-At", db, "-c", "SELECT pg_database_size(current_database())"],
                             capture_output=True, text=True)
        return int(out.stdout.strip() or 0)
    return sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))


def measure(args, db, server=SERVER):
    """The lines of one store's measurements (with the rtsoak-server binary server)."""
    shape = farm_shape(db)
    size = db_size(db)
    shown = db.split("?")[0]
    # The start checks the database (quick_check up to 1 GiB): minutes for a big farm.
    log = (db if not db.startswith("postgres") else "/tmp/rtsoak-farm-queries-pg") + ".server.log"
    proc, url, _ = start_server(server, db, log, ["--cache-warming", "no"], timeout_s=1800)
    lines = []
    try:
        at = (END_S + 60) * 10**9
        verdict_times, kernels_times, iv_times, hist_times = [], [], [], []
        known_times, series_times = [], []
        last = None
        want = lambda name: not args.only or name in args.only  # noqa: E731
        for _ in range(args.runs if want("verdict") else 0):
            dt, last = timed_get("%s/api/v1/kernels/%s/verdict?at=%d" % (url, RELEASE, at))
            verdict_times.append(dt)
        for _ in range(args.runs if want("verdict") else 0):
            dt, _ = timed_get("%s/api/v1/kernels/%s/verdict?known_at=%d" % (url, RELEASE, at))
            known_times.append(dt)
        for _ in range(args.runs if want("series") else 0):
            dt, _ = timed_get("%s/api/v1/series?at=%d" % (url, at))
            series_times.append(dt)
        machine = "f%031x" % 7
        frm, to = (END_S - args.days * 86400) * 10**9, END_S * 10**9
        iv_url = "%s/api/v1/machines/%s/intervals?from=%d&to=%d&step=5min&limit=10000" % (
            url, machine, frm, to)
        steps = pages = None
        try:
            for _ in range(args.runs if want("intervals") else 0):
                dt, pages, steps = timed_pages(iv_url)
                iv_times.append(dt)
            for _ in range(args.runs if want("histogram") else 0):
                dt, _ = timed_get("%s/api/v1/machines/%s/histogram?from=%d&to=%d" % (
                    url, machine, frm, to))
                hist_times.append(dt)
        except urllib.error.HTTPError as e:
            lines.append("interval/histogram queries not available: %s" % e)
        for _ in range(args.runs if want("kernels") else 0):
            dt, _ = timed_get("%s/api/v1/kernels?at=%d" % (url, at))
            kernels_times.append(dt)
        cpu = proc_cpu_s(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    head = [
        "store: %s" % shown + ("" if server == SERVER else " (server %s)" % server),
        "farm: %s, database %.2f GiB (%.0f bytes per interval)" % (
            shape_text(shape), size / 2**30, size / max(shape["intervals"], 1)),
    ]
    if verdict_times:
        head += [
            "verdict: %s, %d problem(s), %d gating machines" % (
                last["verdict"], last["problems_total"], last["gating_machines"]),
            summary("verdict (GET .../verdict?at=)", verdict_times, 1.0),
            summary("verdict as known then (?known_at=)", known_times, 1.0),
        ]
    if series_times:
        head.append(summary("series and their latest stable", series_times))
    if iv_times:
        head.append(summary("intervals, 30 days at 5 min (%d steps, %d pages)" % (steps, pages),
                            iv_times, 0.1))
    if hist_times:
        head.append(summary("histogram, 30 days, one machine", hist_times))
    if kernels_times:
        head.append(summary("kernel list with verdicts", kernels_times))
    head.append("server CPU over all of these: %.1f s" % cpu)
    return head + lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", action="append", default=[],
                    help="the farm (repeat: the same farm in other stores)")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--server", action="append", default=[],
                    help="rtsoak-server binary (repeat: each store measured with each in turn)")
    ap.add_argument("--only", action="append", default=[],
                    choices=["verdict", "series", "intervals", "histogram", "kernels"],
                    help="measure only these queries (repeat; default: all)")
    ap.add_argument("--fill", action="store_true", help="make the farm first (takes long)")
    # The shape of a farm --fill makes; the results state the farm as it is, read from it.
    ap.add_argument("--machines", type=int, default=200, help="machines (with --fill)")
    ap.add_argument("--cpus", type=int, default=8, help="CPUs per machine (with --fill)")
    ap.add_argument("--days", type=int, default=30,
                    help="days of intervals (with --fill; the queries ask for this many)")
    ap.add_argument("--results", default=RESULTS,
                    help="the file the results are appended to (default: %(default)s)")
    ap.add_argument("--baseline", action="store_true",
                    help="measure the verdict of a release with a baseline and the comparison "
                    "of the two instead (two releases of --days each)")
    ap.add_argument("--compare-days", type=int, default=0, metavar="N",
                    help="with --baseline: also time the comparison with days=N")
    args = ap.parse_args()
    args.db = args.db or ["/var/tmp/rtsoak-bench/farm.db"]
    if args.baseline:
        args.db = args.db[0]
        return baseline(args)

    if args.fill:
        if os.path.exists(args.db[0]):
            raise SystemExit("%s exists; remove it to fill anew" % args.db[0])
        t = time.monotonic()
        subprocess.run([FILL, args.db[0], str(args.machines), str(args.cpus), str(args.days),
                        "60", str(END_S), RELEASE], check=True)
        print("filled in %.0f s" % (time.monotonic() - t))

    out = ["%s  %s, %d CPUs, %s" % (datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC"), cpu_model(), os.cpu_count(), platform.release())]
    for db in args.db:
        for server in args.server or [SERVER]:
            out += measure(args, db, server)
    text = "\n".join(out) + "\n"
    print(text, end="")
    with open(args.results, "a") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
