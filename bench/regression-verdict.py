#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The verdict of a release with a baseline (the regression check, docs/verdict.md invariant 9),
before and after the day histograms kept at ingest, on one farm in one run.

The farm: MACHINES x CPUS, a month of one-minute intervals of BASELINE (clean), then a month of
NEWER on the same machines (two latency spikes), made by the *before* build's bench/farm-fill
through its own ingest, so that the before server can open it.  Then, on that file:

  1. the before server (schema 9): the verdict log's first pass (a new farm has logged
     nothing: the pass qualifies BASELINE and judges NEWER against it, merging the days it needs
     into the per-CPU cache: the cold cost), then NEWER's verdict N+1 times; SIGTERM;
  2. the after server opens the same file (migration 9 -> 10 merges every stored day once:
     timed from start to "Listening"), its first log pass, NEWER's verdict N+1 times; SIGTERM;
  3. the after server started again: its first verdict timed from the start of the process
     (a restarted server's first answer, beside its log's first pass), and N more.

Both servers run with --cache-warming no, so that nothing merges in the background and each
figure is the cost of the request itself.  Every verdict answer of NEWER must be the same in
both (status, baseline, problem ids): checked, and a difference ends the run.

Usage: bench/regression-verdict.py --before-build OLD/build --after-build build
           --db FILE|postgresql://... [--log-prefix PATH] [--machines 200] [--cpus 8]
           [--days 30] [--runs 7]
"""
import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_model, proc_cpu_s, start_server  # noqa: E402

END_S = 1796256000  # 2026-12-03T00:00:00Z: the second month ends here
BASELINE = "6.1.0-rt-bench"
NEWER = "6.1.1-rt-bench"
RESULTS = os.path.join(HERE, "results-regression-verdict.txt")


def get(url, timeout=3600):
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read()
    return time.monotonic() - t, json.loads(body)


def essence(v):
    """What must not change: the verdict, its baseline and the problems it names."""
    return (v["verdict"], v.get("baseline"), v["problems_total"],
            sorted(p["id"] for p in v.get("problems", [])))


def fill(args):
    fill_bin = os.path.join(args.before_build, "bench", "farm-fill")
    month = args.days * 86400
    t = time.monotonic()
    subprocess.run([fill_bin, args.db, str(args.machines), str(args.cpus), str(args.days), "60",
                    str(END_S - month), BASELINE, "1", "no"], check=True)
    subprocess.run([fill_bin, args.db, str(args.machines), str(args.cpus), str(args.days), "60",
                    str(END_S), NEWER, "2", "yes"], check=True)
    return time.monotonic() - t


def measure(label, build, args, lines, want, wait_pass):
    server = os.path.join(build, "server", "rtsoak-server")
    log = "%s.%s.log" % (args.log_prefix or args.db,
                         "-".join("".join(c if c.isalnum() else " " for c in label).split()))
    # Judged now: the baseline is the release the log had qualified by the moment judged, and
    # the log qualifies BASELINE when its first pass runs, after the simulated months.
    url_of = lambda base: "%s/api/v1/kernels/%s/verdict" % (base, NEWER)
    t0 = time.monotonic()
    proc, base, _ = start_server(server, args.db, log, ["--cache-warming", "no"],
                                 timeout_s=7200)
    started = time.monotonic() - t0
    try:
        # The baseline is read from the verdict log: the first pass of a farm that has none
        # logs it (and judges both releases, the first verdicts' cost); a farm whose log holds
        # it answers its first verdict with the baseline at once.
        if wait_pass:
            while not any("first pass done" in l for l in open(log, errors="replace")):
                if proc.poll() is not None or time.monotonic() - t0 > 7200:
                    raise SystemExit("%s: no first pass of the verdict log" % label)
                time.sleep(1)
        first, v = get(url_of(base))
        first_from_start = time.monotonic() - t0
        times = []
        for _ in range(args.runs):
            dt, v2 = get(url_of(base))
            times.append(dt)
            if essence(v2) != essence(v):
                raise SystemExit("%s: the verdict changed between requests" % label)
        cpu = proc_cpu_s(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    passes = [l.strip() for l in open(log, errors="replace") if "first pass done" in l]
    if want and essence(v) != want:
        raise SystemExit("%s answers %s, before: %s" % (label, essence(v), want))
    lines.append("%s: started in %.1f s; first verdict %.2f s (%.1f s after the start); "
                 "then median %.1f ms, min %.1f, max %.1f (n=%d); server CPU %.0f s; %s" % (
                     label, started, first, first_from_start, statistics.median(times) * 1e3,
                     min(times) * 1e3, max(times) * 1e3, len(times), cpu,
                     passes[0].split("Verdict log: ")[-1] if passes else "no log pass logged"))
    print(lines[-1], flush=True)
    return essence(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before-build", required=True)
    ap.add_argument("--after-build", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--machines", type=int, default=200)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--results", default=RESULTS)
    ap.add_argument("--log-prefix", help="the servers' logs (default: next to --db)")
    ap.add_argument("--reuse", action="store_true",
                    help="measure the farm already in --db (schema 9, filled by this script)")
    args = ap.parse_args()
    lines = ["%s  %s, %d CPUs, %s, load average at start %.2f" % (
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), cpu_model(),
        os.cpu_count(), platform.release(), os.getloadavg()[0])]
    pg = args.db.startswith("postgresql:")
    if not pg and os.path.exists(args.db) and not args.reuse:
        raise SystemExit("%s exists: the run fills a farm of its own (--reuse: measure it)"
                         % args.db)
    filled = 0 if args.reuse else fill(args)
    size = "" if pg else ", %.2f GiB" % (os.path.getsize(args.db) / 2**30)
    lines.append("farm on %s: %d machines x %d CPUs, %d days of %s then %d of %s, one-minute "
                 "intervals (%d), filled by the before build%s%s" % (
                     "PostgreSQL" if pg else "SQLite", args.machines, args.cpus, args.days,
                     BASELINE, args.days, NEWER, 2 * args.machines * args.days * 1440,
                     " in %.0f s" % filled if filled else " (reused)",
                     size))
    print(lines[-1], flush=True)
    want = measure("before", args.before_build, args, lines, None, True)
    if want[1] is None:
        raise SystemExit("no baseline: the regression check did not run")
    measure("after (migrating)", args.after_build, args, lines, want, True)
    measure("after (restarted)", args.after_build, args, lines, want, False)
    lines.append("verdict of %s: %s, baseline %s, %d problem(s); load average at end %.2f" % (
        NEWER, want[0], want[1], want[2], os.getloadavg()[0]))
    out = "\n".join(lines) + "\n"
    print(lines[-1])
    with open(args.results, "a") as f:
        f.write(out + "\n")


if __name__ == "__main__":
    main()
