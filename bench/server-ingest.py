#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Measures how many summaries per second rtsoak-server stores, with bench/ingest-load.

The machines are enrolled once, with `rtsoak-server --db DB enroll ID` for each, into a template
database.  Every run copies that template into a temporary directory, starts the real
rtsoak-server on it (default options, except a rate limit high enough not to throttle the
benchmark), lets ingest-load post its pre-encoded summaries over loopback with the tokens,
stops the server with SIGTERM and then counts the rows in the database: every summary answered
"stored" must be there exactly once (intervals, uploads, 8 CPU rows and 2 events each).

By default the farm has 10,000 machines and each run sends 30,000 summaries, three per
machine: the first upload of each machine also creates its run (in a real farm a run lasts
days, so that is rarer than here), and every token check looks among 10,000 machines.

A summary is one one-minute interval of an 8-CPU machine (300,000 samples per CPU in a
histogram of tens of buckets, a few outliers, three loads with metrics, two events), about
4.9 KB of JSON.  The rate is summaries answered 200 "stored" divided by the time from the first
request to the last answer.  The server's CPU time is utime+stime from /proc/PID/stat read by
ingest-load right before the first request and right after the last answer.  The target is
1,000 summaries/s: 10,000 machines reporting every minute (167/s) with 6x headroom.

Usage (from the source tree after building into build/):
    bench/server-ingest.py [--runs 5] [--machines 10000] [--connections 16] [--count 30000]
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_model, start_server  # noqa: E402
BUILD = os.path.join(HERE, "..", "build")
SERVER = os.path.join(BUILD, "server", "rtsoak-server")
LOAD = os.path.join(BUILD, "bench", "ingest-load")
RESULTS = os.path.join(HERE, "results-server-ingest.txt")
TARGET = 1000.0
# High enough that no machine is ever throttled: the benchmark measures the storage path.
RATE_OPTS = ["--rate", "1000000", "--burst", "1000000"]


def mem_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) // 1024} MiB"
    except OSError:
        pass
    return "?"


def filesystem_of(path):
    """(device, type, mount point) of the file system holding path, from /proc/mounts."""
    best = ("?", "?", "")
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                best = (dev, fstype, mnt)
    return best


def count_rows(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("machines", "runs", "uploads", "intervals", "interval_cpus",
                          "interval_loads", "interval_load_metrics", "events")}
    finally:
        con.close()


def enroll_all(server, db, n, tokens_path):
    """Enrolls n machines into db, one enroll command each; writes "ID TOKEN" lines."""
    with open(tokens_path, "w") as out:
        for i in range(n):
            mid = "be4c%028d" % i
            res = subprocess.run([server, "--db", db, "enroll", mid], capture_output=True,
                                 text=True)
            token = res.stdout.strip()
            if res.returncode != 0 or len(token) != 64:
                sys.exit(f"{server} --db {db} enroll {mid} failed: {res.stderr}")
            out.write(f"{mid} {token}\n")


def one_run(a, tmp, template, tokens):
    db = os.path.join(tmp, "farm.db")
    log = os.path.join(tmp, "server.log")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(template + suffix):
            shutil.copyfile(template + suffix, db + suffix)
    proc, url, server_argv = start_server(a.server, db, log, RATE_OPTS + a.server_opt)
    load_argv = [a.load, "--url", url, "--tokens", tokens,
                 "--machines", str(a.machines), "--connections", str(a.connections),
                 "--count", str(a.count), "--server-pid", str(proc.pid), "--json"]
    if a.duration:
        load_argv += ["--duration", str(a.duration)]
    res = subprocess.run(load_argv, capture_output=True, text=True)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        sys.exit("rtsoak-server did not stop within 30 s of SIGTERM")
    if not res.stdout.strip():
        sys.exit(f"ingest-load failed ({res.returncode}): {res.stderr}")
    j = json.loads(res.stdout.strip().splitlines()[-1])
    with open(log, errors="replace") as f:
        text = f.read()
    m = re.search(r"Stored (\d+) uploads in (\d+) commits", text)
    j["commits"] = int(m.group(2)) if m else None
    j["logged_200"] = len(re.findall(r"path=/api/v1/summaries status=200 ", text))
    j["server_exit"] = code
    j["rows"] = count_rows(db)
    j["load_exit"] = res.returncode
    j["load_stderr"] = res.stderr.strip()
    return j, server_argv, load_argv


def check(j):
    """What is wrong with a run's database and answers, if anything."""
    n, rows, bad = j["stored"], j["rows"], []
    want = {"intervals": n, "uploads": n, "interval_cpus": 8 * n, "interval_loads": 3 * n,
            "interval_load_metrics": 6 * n, "events": 2 * n, "machines": j["machines"]}
    for table, count in want.items():
        if rows[table] != count:
            bad.append(f"{table} {rows[table]} != {count}")
    if j["stored"] != j["sent"] or j["transport_errors"] or j["duplicate"]:
        bad.append(f"sent {j['sent']}, stored {j['stored']}, duplicate {j['duplicate']}, "
                   f"transport errors {j['transport_errors']}, status {j['status']}")
    if j["logged_200"] != j["sent"]:
        bad.append(f"{j['logged_200']} request log lines with status=200 for {j['sent']} sent")
    if j["server_exit"] != 0:
        bad.append(f"rtsoak-server exited with {j['server_exit']}")
    return bad


def report_run(a, i, j, server_argv, load_argv, runs, say):
    if i == 0:
        say(f"server: {' '.join(server_argv)}")
        say(f"load:   {' '.join(load_argv)}")
        say(f"        (paths and port differ per run; body {j['body_bytes_avg']:.0f} bytes "
            f"on average)")
        say()
    bad = check(j)
    runs.append(j)
    commits = (f"{j['commits']} commits ({j['stored'] / j['commits']:.2f} uploads each)"
               if j.get("commits") else "commits not logged")
    say(f"run {i + 1}: {j['rate']:8.1f} summaries/s ({j['stored']} stored in "
        f"{j['elapsed_s']:.3f} s), server CPU {j['server_cpu_us_per_summary']:5.0f} us/summary "
        f"({j['server_cpu_s']:.2f} s), latency p50 {j['p50_ms']:.2f} ms p90 "
        f"{j['p90_ms']:.2f} p99 {j['p99_ms']:.2f} max {j['max_ms']:.2f}, "
        f"{commits}, client CPU {j['client_cpu_s']:.2f} s")
    say(f"       rows: " + ", ".join(f"{k} {v}" for k, v in j["rows"].items()) +
        ("  OK" if not bad else "  MISMATCH: " + "; ".join(bad)))
    if j["load_stderr"]:
        say("       ingest-load: " + j["load_stderr"].replace("\n", "\n       ingest-load: "))



def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--machines", type=int, default=10000)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--count", type=int, default=30000, help="summaries per run")
    p.add_argument("--duration", type=float, default=0, help="stop a run after this many s")
    p.add_argument("--server", default=SERVER)
    p.add_argument("--load", default=LOAD)
    p.add_argument("--server-opt", action="append", default=[],
                   help="extra rtsoak-server option (repeat; e.g. --server-opt=--threads=8)")
    p.add_argument("--results", default=RESULTS)
    p.add_argument("--label", default="", help="a note for the header of the results")
    a = p.parse_args()
    for exe in (a.server, a.load):
        if not os.access(exe, os.X_OK):
            sys.exit(f"need {exe}: build first (ninja -C build)")

    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    tmp_root = tempfile.gettempdir()
    dev, fstype, mnt = filesystem_of(tmp_root)
    say("rtsoak-server ingest: bench/ingest-load against the real server on loopback")
    if a.label:
        say(f"label:   {a.label}")
    say(f"date:    {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"kernel:  {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs "
        f"({cpu_model()}), {mem_total()}")
    say(f"storage: {tmp_root} on {dev} ({fstype}, mounted on {mnt}); SQLite "
        f"{sqlite3.sqlite_version} (Python's; the server links the system library)")
    say(f"load:    {a.count} summaries per run from {a.machines} machines over "
        f"{a.connections} keep-alive connections; each run on a fresh copy of a database "
        f"with just the machines enrolled")
    say("rate:    summaries answered 200 \"stored\" / seconds from the first request to the "
        "last answer")
    say("CPU:     the server's utime+stime (/proc/PID/stat) over the same window, per summary")
    say()

    runs = []
    setup = tempfile.mkdtemp(prefix="rtsoak-ingest-template-")
    try:
        template = os.path.join(setup, "farm.db")
        tokens = os.path.join(setup, "tokens.txt")
        start = time.monotonic()
        enroll_all(a.server, template, a.machines, tokens)
        say(f"enrolled {a.machines} machines in {time.monotonic() - start:.1f} s "
            f"({a.server} --db DB enroll ID, one at a time)")
        for i in range(a.runs):
            tmp = tempfile.mkdtemp(prefix="rtsoak-ingest-")
            try:
                j, server_argv, load_argv = one_run(a, tmp, template, tokens)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            report_run(a, i, j, server_argv, load_argv, runs, say)
    finally:
        shutil.rmtree(setup, ignore_errors=True)


    med = lambda key: statistics.median(r[key] for r in runs)
    rate = med("rate")
    say()
    say(f"median of {len(runs)} runs: {rate:.1f} summaries/s (range "
        f"{min(r['rate'] for r in runs):.1f}-{max(r['rate'] for r in runs):.1f}), "
        f"server CPU {med('server_cpu_us_per_summary'):.0f} us/summary, latency p50 "
        f"{med('p50_ms'):.2f} ms, p99 {med('p99_ms'):.2f} ms")
    failed = [i + 1 for i, r in enumerate(runs) if check(r)]
    say(f"database check: {'every run stored every accepted summary exactly once' if not failed else 'FAILED in runs ' + str(failed)}")
    say(f"target {TARGET:.0f} summaries/s: {'met' if rate >= TARGET else 'NOT met'}")
    with open(a.results, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {a.results}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
