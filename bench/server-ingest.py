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

With --sync every run begins with sync(2), after its database was copied: what the run before it
wrote is then on the disk, and its commits do not wait for that writeback (on one file system
the store measured after SQLite's run otherwise pays for SQLite's dirty pages).

With --compare PATH (another rtsoak-server binary, e.g. a build of the previous commit) one server
of it on PostgreSQL is run too, in turn with the others, so that a change is measured against
the same load of a shared machine.

With --pg URI (a PostgreSQL server for benchmarks, e.g. "postgresql://postgres@/?host=DIR"),
every run is made three times in turn on the same summaries: one server on SQLite, one on a
PostgreSQL database, and two servers on one PostgreSQL database with the connections spread over
both.  Each PostgreSQL run gets a database copied from a template with the machines enrolled.
The database's CPU is that of the postmaster (--pg-pid, else read from its postmaster.pid) and
its children, and lock waits are counted from the PostgreSQL log (log_lock_waits with a
deadlock_timeout of 10 ms, set here with ALTER SYSTEM on that server) and pg_stat_database.

Usage (from the source tree after building into build/):
    bench/server-ingest.py [--runs 5] [--machines 10000] [--connections 16] [--count 30000]
                           [--pg URI --pg-log FILE] [--compare OLD-rtsoak-server]
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
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, start_server  # noqa: E402
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


TABLES = ("machines", "runs", "uploads", "intervals", "interval_cpus", "interval_loads",
          "interval_load_metrics", "events")


def psql(uri, sql):
    out = subprocess.run(["psql", "-At", "-v", "ON_ERROR_STOP=1", uri, "-c", sql],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"psql {sql}: {out.stderr}")
    return out.stdout.strip()


def pg_uri(base, name):
    """The URI of database name on the server of URI base."""
    u = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, ""))


def count_rows(db):
    if db.startswith("postgresql:"):
        return {t: int(psql(db, f"SELECT count(*) FROM {t}")) for t in TABLES}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        con.close()


def lock_waits(log, offset):
    """Lock waits the PostgreSQL log reported since offset (log_lock_waits)."""
    if not log:
        return None
    with open(log, errors="replace") as f:
        f.seek(offset)
        return len(re.findall(r"still waiting for", f.read()))


def log_size(log):
    return os.path.getsize(log) if log and os.path.exists(log) else 0


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


def farm_for_run(a, tmp, store, template, n):
    """The run's farm: a copy of the SQLite template, or a PostgreSQL database copied from the
    template database."""
    if store == "sqlite":
        db = os.path.join(tmp, "farm.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(template + suffix):
                shutil.copyfile(template + suffix, db + suffix)
        return db
    name = f"ingest_run_{n}"
    psql(a.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    source = "ingest_template_ref" if store == "pg1ref" else "ingest_template"
    psql(a.pg, f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return pg_uri(a.pg, name)


def one_run(a, tmp, store, template, tokens, n):
    db = farm_for_run(a, tmp, store, template, n)
    if a.sync:
        # What the run before wrote (and the copy of the template) reaches the disk now, not
        # during this run, where a commit's flush would wait for it.
        os.sync()
    servers = []
    server = a.compare if store == "pg1ref" else a.server
    for k in range(2 if store == "pg2" else 1):
        log = os.path.join(tmp, f"server{k}.log")
        proc, url, server_argv = start_server(server, db, log, RATE_OPTS + a.server_opt)
        servers.append((proc, url, log))
    load_argv = [a.load, "--tokens", tokens, "--machines", str(a.machines), "--connections",
                 str(a.connections), "--count", str(a.count), "--json"]
    for proc, url, _ in servers:
        load_argv += ["--url", url, "--server-pid", str(proc.pid)]
    if store != "sqlite":
        load_argv += ["--db-pid", str(a.pg_pid)]
        stat0 = psql(db, "SELECT deadlocks FROM pg_stat_database WHERE datname = "
                         "current_database()")
    if a.duration:
        load_argv += ["--duration", str(a.duration)]
    offset = log_size(a.pg_log)
    res = subprocess.run(load_argv, capture_output=True, text=True)
    codes, text = [], ""
    for proc, _, log in servers:
        proc.send_signal(signal.SIGTERM)
        try:
            codes.append(proc.wait(timeout=30))
        except subprocess.TimeoutExpired:
            proc.kill()
            sys.exit("rtsoak-server did not stop within 30 s of SIGTERM")
        with open(log, errors="replace") as f:
            text += f.read()
    if not res.stdout.strip():
        sys.exit(f"ingest-load failed ({res.returncode}): {res.stderr}")
    j = json.loads(res.stdout.strip().splitlines()[-1])
    commits = [int(m.group(2)) for m in re.finditer(r"Stored (\d+) uploads in (\d+) commits",
                                                     text)]
    j["store"] = store
    j["commits"] = sum(commits) if commits else None
    j["logged_200"] = len(re.findall(r"path=/api/v1/summaries status=200 ", text))
    j["server_exit"] = max(codes)
    j["rows"] = count_rows(db)
    j["load_exit"] = res.returncode
    j["load_stderr"] = res.stderr.strip()
    if store != "sqlite":
        j["lock_waits"] = lock_waits(a.pg_log, offset)
        j["deadlocks"] = int(psql(db, "SELECT deadlocks FROM pg_stat_database WHERE datname = "
                                      "current_database()")) - int(stat0)
        psql(a.pg, f'DROP DATABASE IF EXISTS "ingest_run_{n}" WITH (FORCE)')
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


NAMES = {"sqlite": "SQLite, 1 server", "pg1": "PostgreSQL, 1 server",
         "pg2": "PostgreSQL, 2 servers", "pg1ref": "PostgreSQL, 1 server of --compare"}


def report_run(a, i, j, server_argv, load_argv, runs, say):
    if i == 0 and j["store"] == "sqlite":
        say(f"server: {' '.join(server_argv)}")
        say(f"load:   {' '.join(load_argv)}")
        say(f"        (paths and port differ per run; body {j['body_bytes_avg']:.0f} bytes "
            f"on average)")
        say()
    bad = check(j)
    runs.append(j)
    commits = (f"{j['commits']} commits ({j['stored'] / j['commits']:.2f} uploads each)"
               if j.get("commits") else "commits not logged")
    db = (f", database CPU {j['db_cpu_us_per_summary']:5.0f} us/summary, lock waits over 10 ms "
          f"{j['lock_waits']}, deadlocks {j['deadlocks']}" if j["store"] != "sqlite" else "")
    say(f"run {i + 1} {NAMES[j['store']]}: {j['rate']:8.1f} summaries/s ({j['stored']} stored in "
        f"{j['elapsed_s']:.3f} s), server CPU {j['server_cpu_us_per_summary']:5.0f} us/summary "
        f"({j['server_cpu_s']:.2f} s){db}, latency p50 {j['p50_ms']:.2f} ms p90 "
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
    p.add_argument("--pg", default="", help="PostgreSQL server: also runs on it (one and two "
                   "servers), e.g. postgresql://postgres@/?host=/var/tmp/rtsoak-pgbench")
    p.add_argument("--pg-log", default="", help="that server's log file (lock waits)")
    p.add_argument("--pg-pid", type=int, default=0, help="its postmaster's pid")
    p.add_argument("--sync", action="store_true", help="sync(2) before each run, so that no "
                   "run's commits wait for the writeback of the run before it")
    p.add_argument("--compare", default="", help="another rtsoak-server binary (an earlier "
                   "build): also runs one server of it on PostgreSQL, in turn with the others")
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
        f"{a.connections} connections at a time; each run on a fresh copy of a database "
        f"with just the machines enrolled")
    say("rate:    summaries answered 200 \"stored\" / seconds from the first request to the "
        "last answer")
    if a.sync:
        say("sync:    sync(2) before each run (after its database was copied)")
    say("CPU:     the server's utime+stime (/proc/PID/stat) over the same window, per summary")
    say()

    stores = ["sqlite"] + (["pg1", "pg2"] if a.pg else []) + (["pg1ref"] if a.compare else [])
    if a.compare and not a.pg:
        sys.exit("--compare needs --pg")
    if a.compare:
        say(f"compare: {a.compare} (one server on PostgreSQL)")
    if a.pg:
        say(f"PostgreSQL: {psql(a.pg, 'SHOW server_version')} at {a.pg} (synchronous_commit "
            f"{psql(a.pg, 'SHOW synchronous_commit')}, fsync {psql(a.pg, 'SHOW fsync')}); the "
            f"same file system")
        psql(a.pg, "ALTER SYSTEM SET log_lock_waits = on")
        psql(a.pg, "ALTER SYSTEM SET deadlock_timeout = '10ms'")
        psql(a.pg, "SELECT pg_reload_conf()")
        if not a.pg_pid:
            datadir = psql(a.pg, "SHOW data_directory")
            with open(os.path.join(datadir, "postmaster.pid")) as f:
                a.pg_pid = int(f.readline())
    say()
    runs = {s: [] for s in stores}
    setup = tempfile.mkdtemp(prefix="rtsoak-ingest-template-")
    try:
        template = os.path.join(setup, "farm.db")
        tokens = os.path.join(setup, "tokens.txt")
        start = time.monotonic()
        enroll_all(a.server, template, a.machines, tokens)
        say(f"enrolled {a.machines} machines in {time.monotonic() - start:.1f} s "
            f"({a.server} --db DB enroll ID, one at a time)")
        tokens_ref = os.path.join(setup, "tokens-ref.txt")
        if a.compare:
            # Its own machines and tokens, in the schema it knows (an earlier build does not
            # open a database of a later schema).
            enroll_all(a.compare, os.path.join(setup, "ref.db"), a.machines, tokens_ref)
        for name, exe, db in (("ingest_template", a.server, template),
                              ("ingest_template_ref", a.compare, os.path.join(setup, "ref.db"))):
            if not a.pg or not exe:
                continue
            # The same machines and tokens in the PostgreSQL template: copied by migrate.
            psql(a.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            psql(a.pg, f'CREATE DATABASE "{name}"')
            res = subprocess.run([exe, "migrate", "--from", db, "--to", pg_uri(a.pg, name)],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit(f"migrate into the template failed: {res.stderr}")
        for i in range(a.runs):
            for store in stores:
                tmp = tempfile.mkdtemp(prefix="rtsoak-ingest-")
                try:
                    j, server_argv, load_argv = one_run(a, tmp, store, template,
                                                        tokens_ref if store == "pg1ref" else tokens,
                                                        i)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                report_run(a, i, j, server_argv, load_argv, runs[store], say)
    finally:
        shutil.rmtree(setup, ignore_errors=True)
        if a.pg:
            for name in ("ingest_template", "ingest_template_ref"):
                psql(a.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    say()
    failed = []
    medians = {}
    for store in stores:
        rs = runs[store]
        med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
        medians[store] = med("rate")
        db = (f", database CPU {med('db_cpu_us_per_summary'):.0f} us/summary, lock waits "
              f"{sum(r['lock_waits'] or 0 for r in rs)} in all runs, deadlocks "
              f"{sum(r['deadlocks'] for r in rs)}" if store != "sqlite" else "")
        say(f"{NAMES[store]}: median of {len(rs)} runs {medians[store]:.1f} summaries/s (range "
            f"{min(r['rate'] for r in rs):.1f}-{max(r['rate'] for r in rs):.1f}), server CPU "
            f"{med('server_cpu_us_per_summary'):.0f} us/summary{db}, latency p50 "
            f"{med('p50_ms'):.2f} ms, p99 {med('p99_ms'):.2f} ms")
        failed += [f"{store} run {i + 1}" for i, r in enumerate(rs) if check(r)]
    say(f"database check: {'every run stored every accepted summary exactly once' if not failed else 'FAILED in ' + ', '.join(failed)}")
    say(f"target {TARGET:.0f} summaries/s on SQLite: "
        f"{'met' if medians['sqlite'] >= TARGET else 'NOT met'}")
    if a.pg:
        ratio = medians["pg1"] / medians["sqlite"]
        say(f"PostgreSQL with one server against SQLite: {ratio:.2f}x (target 0.8x: "
            f"{'met' if ratio >= 0.8 else 'NOT met'}); two servers: "
            f"{medians['pg2'] / medians['sqlite']:.2f}x")
        ratios = sorted(p / q["rate"] for p, q in zip((r["rate"] for r in runs["pg1"]),
                                                          runs["sqlite"]))
        say(f"median of the runs' own ratios (PostgreSQL 1 server / SQLite in the same run): "
            f"{statistics.median(ratios):.2f}x (" + ", ".join(f"{x:.2f}" for x in ratios) + ")")
    if a.compare:
        say(f"--compare build, one server on PostgreSQL against SQLite: "
            f"{medians['pg1ref'] / medians['sqlite']:.2f}x; this build against it: "
            f"{medians['pg1'] / medians['pg1ref']:.2f}x")
    with open(a.results, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {a.results}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
