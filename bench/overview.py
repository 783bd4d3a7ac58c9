#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The overview page (/) and the kernel list (/api/v1/kernels) of a farm with many machines and
releases, two builds alternating on the same database.

The farm is one that exists (bench/watch-pass.py's fill: 200 machines x 2 CPUs, 20 releases
of a day): a SQLite file or a postgresql:// URI.  For each round and each build (--before's
first, then this tree's build/), the real rtsoak-server is started on it, asked once to warm
up, then --requests times for each page (wall time to the last byte, curl-like).  The kernel
list is asked about the moment the script started (?at=), so that the builds' answers must be
the same bytes (compared); the overview is about now, whose silences grow by the minute on a
farm filled to end at its filling (timed, not compared: the golden corpus compares pages).  On PostgreSQL with pg_stat_statements loaded, the statements' calls and time in
the database during each build's timed requests are summed, with the three costliest.

Usage (from the source tree after building into build/):
    bench/overview.py --db FILE|postgresql://... [--before OLD/build] [--rounds 2]
        [--requests 5] [--results FILE]
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, start_server, timed_get, write_results  # noqa: E402

AT = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
PAGES = [("overview", "/"), ("kernels", "/api/v1/kernels?at=" + AT)]


def psql(uri, sql):
    r = subprocess.run(["psql", "-XAtq", "-F", "\t", uri, "-c", sql], capture_output=True,
                       text=True)
    return r.stdout if r.returncode == 0 else None


def statements(uri):
    """(calls, ms in the database, the three costliest as text) since the last reset, or None."""
    out = psql(uri, "SELECT calls, total_exec_time, left(regexp_replace(query, '\\s+', ' ', 'g'), "
                    "90) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' "
                    "ORDER BY total_exec_time DESC")
    if out is None:
        return None
    rows = [line.split("\t") for line in out.splitlines() if line]
    calls = sum(int(r[0]) for r in rows)
    ms = sum(float(r[1]) for r in rows)
    top = "; ".join(f"{float(r[1]):.0f} ms/{r[0]} calls: {r[2]}" for r in rows[:3])
    return calls, ms, top


def one_build(label, build, db, requests, tmp, out):
    server = os.path.join(build, "server", "rtsoak-server")
    proc, base, _ = start_server(server, db, os.path.join(tmp, f"{label}.log"), timeout_s=120)
    bodies = {}
    try:
        for name, path in PAGES:
            timed_get(base + path)
            pg = db.startswith("postgres") and psql(db, "SELECT pg_stat_statements_reset()")
            times = []
            for _ in range(requests):
                t, body = timed_get(base + path)
                times.append(t)
            bodies[name] = body
            st = statements(db) if pg is not None and pg is not False else None
            line = (f"{label}: {name} median {statistics.median(times):.3f} s "
                    f"({' '.join(f'{t:.3f}' for t in sorted(times))}), {len(body)} bytes")
            if st:
                line += (f"; database per request: {st[0] / requests:.0f} statements, "
                         f"{st[1] / requests:.0f} ms; costliest: {st[2]}")
            print(line, flush=True)
            out.append(line)
    finally:
        proc.terminate()
        proc.wait()
    return bodies


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a farm's SQLite file or postgresql:// URI")
    ap.add_argument("--before", help="another build directory, measured first in each round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--results", default=os.path.join(HERE, "results-overview.txt"))
    args = ap.parse_args()
    builds = ([("before", args.before)] if args.before else []) + [("after", BUILD)]
    out = [f"# bench/overview.py --db {'PostgreSQL' if args.db.startswith('postgres') else 'SQLite'}"
           f" --requests {args.requests}{' --before ' + args.before if args.before else ''}",
           f"# date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}"
           f", CPU: {cpu_model()}, load average before: {os.getloadavg()}"]
    print("\n".join(out), flush=True)
    differ, ref = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            seen = [one_build(label, build, args.db, args.requests, tmp, out)
                    for label, build in builds]
            ref = ref or seen[0]["kernels"]
            differ += [s["kernels"] != ref for s in seen]
    write_results(out, args.results, f"# the kernel lists at {AT} of the builds and rounds: "
                  f"{'differ' if any(differ) else 'the same bytes'}")


if __name__ == "__main__":
    main()
