#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The verdict log's watch pass on a farm with many active releases: its CPU per minute.

The farm (bench/farm-fill, through the server's own ingest): MACHINES x CPUS, RELEASES
releases of one series one after the other on every machine, each for DAYS days of intervals
of INTERVAL seconds, the last one ending now: every release has data within the rule's period
and a day, so that every pass judges all of them again (the "active" releases of the watch);
--period sets the rule's Period= (default: the server's, 30 days, within which every
release's data lies); --watch the rule's Watch= (default: the server's, a pass a minute), e.g.
1s to see what a farm whose passes take longer than a twentieth of Watch= costs.  RTSOAK_BUILD
selects another build (its rtsoak-server and bench/farm-fill), to compare two in one session.

Then the real rtsoak-server serves it with its default watch (a pass a minute) and the
histogram cache's warming off; after the log's first pass, the server does nothing but its
passes for --minutes: its process CPU over that time (utime + stime from /proc) per minute,
and the verdict-log thread's own where the kernel names it, as a share of one CPU (on
PostgreSQL also the database's: the postmaster and its children).  The load
average before and after.

Usage (from the source tree after building into build/):
    bench/watch-pass.py [--db FILE|postgresql://...] [--machines 200] [--cpus 2]
        [--releases 20] [--days 1] [--interval 300] [--minutes 5] [--period P] [--watch W]
        [--results FILE]
"""
import argparse
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD, cpu_model, proc_cpu_s, start_server  # noqa: E402

SERVER = os.path.join(BUILD, "server", "rtsoak-server")
FILL = os.path.join(BUILD, "bench", "farm-fill")
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu_s(pid, name):
    """CPU seconds of pid's threads called name (their comm), or None when none is."""
    total, found = 0, False
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found = True
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total if found else None


def postmaster_pid(uri):
    """The postmaster of the PostgreSQL server of uri, from its data directory's pid file."""
    out = subprocess.run(["psql", uri, "-Atc", "SHOW data_directory"], check=True,
                         capture_output=True, text=True).stdout.strip()
    with open(os.path.join(out, "postmaster.pid")) as f:
        return int(f.readline())


def db_cpu_s(postmaster):
    """CPU seconds of the postmaster and its children (the backends of the server's pooled
    connections live as long as they do)."""
    total = 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(d) == postmaster or int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def pg_farm_filled(uri):
    """Whether the PostgreSQL database of uri holds a farm already (its machines)."""
    if not uri.startswith("postgres"):
        return False
    out = subprocess.run(["psql", uri, "-Atc", "SELECT count(*) FROM machines"],
                         capture_output=True, text=True)
    return out.returncode == 0 and int(out.stdout.strip() or 0) > 0


def fill(args, db, now_s):
    t = time.monotonic()
    span = args.days * 86400
    for i in range(args.releases):
        end = now_s - (args.releases - 1 - i) * span
        end -= end % args.interval
        subprocess.run([FILL, db, str(args.machines), str(args.cpus), str(args.days),
                        str(args.interval), str(end), f"6.6.{i + 1}-rt{i + 1}", str(i + 1), "no"],
                       check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", help="SQLite file or postgresql:// URI (default: a temporary file); "
                    "a file that exists, or a database that holds machines, is used as it is")
    ap.add_argument("--machines", type=int, default=200)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--releases", type=int, default=20)
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--interval", type=int, default=300)
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--period", default="", help="the rule's Period= (default: the server's)")
    ap.add_argument("--watch", default="", help="the rule's Watch= (default: the server's)")
    ap.add_argument("--results", default=os.path.join(HERE, "results-watch-pass.txt"))
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="rtsoak-watch-")
    db = args.db or os.path.join(tmp, "farm.db")
    load0 = os.getloadavg()
    out = []
    now_s = int(time.time())
    if args.db and (os.path.exists(args.db) or pg_farm_filled(args.db)):
        out.append(f"the farm of {args.db} as it is (filled before: the options describe it)")
    else:
        out.append(f"filled in {fill(args, db, now_s):.0f} s: {args.machines} machines x "
                   f"{args.cpus} CPUs, {args.releases} releases of {args.days} d each at "
                   f"{args.interval} s intervals, the last ending now")
    conf = os.path.join(tmp, "server.conf")
    with open(conf, "w") as f:
        f.write("[Verdict]\n")
        if args.period:
            f.write(f"Period={args.period}\n")
        if args.watch:
            f.write(f"Watch={args.watch}\n")
    log = os.path.join(tmp, "server.log")
    t0 = time.monotonic()
    proc, base, _ = start_server(SERVER, db, log, ["--config", conf, "--cache-warming", "no"],
                                 timeout_s=1800)
    try:
        while not any("first pass done" in l for l in open(log, errors="replace")):
            if proc.poll() is not None or time.monotonic() - t0 > 3600:
                sys.exit("no first pass of the verdict log:\n" + open(log).read()[-2000:])
            time.sleep(0.5)
        first = [l.strip() for l in open(log, errors="replace") if "first pass done" in l][0]
        out.append(f"first pass after {time.monotonic() - t0:.1f} s from the start ({first})")
        with urllib.request.urlopen(f"{base}/api/v1/kernels?limit=100", timeout=600) as r:
            body = r.read().decode()
        listed, qualified = body.count('"release"'), body.count('"qualified"')
        out.append(f"releases listed: {listed}; qualified: {qualified}")
        pg = postmaster_pid(db) if db.startswith("postgres") else None
        d0 = db_cpu_s(pg) if pg else None
        c0, th0, w0 = proc_cpu_s(proc.pid), thread_cpu_s(proc.pid, "verdict-log"), time.monotonic()
        time.sleep(args.minutes * 60)
        c1, th1, w1 = proc_cpu_s(proc.pid), thread_cpu_s(proc.pid, "verdict-log"), time.monotonic()
        d1 = db_cpu_s(pg) if pg else None
        minutes = (w1 - w0) / 60
        per_min = (c1 - c0) / minutes
        line = (f"server CPU over {minutes:.1f} min of passes: {c1 - c0:.2f} s, {per_min:.2f} s "
                f"per minute = {per_min / 60 * 100:.2f} % of one CPU")
        if th0 is not None and th1 is not None:
            line += (f"; the verdict-log thread {(th1 - th0) / minutes:.2f} s per minute "
                     f"({(th1 - th0) / minutes / 60 * 100:.2f} %)")
        if pg:
            line += (f"; the database {(d1 - d0) / minutes:.2f} s per minute "
                     f"({(d1 - d0) / minutes / 60 * 100:.2f} %)")
        out.append(line)
        spacing = [l.strip() for l in open(log, errors="replace") if "Verdict log: a pass took" in l]
        if spacing:
            out.append(f"the server spaced its passes out ({len(spacing)} notice(s)); the first: "
                       f"{spacing[0]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        if not args.db:
            shutil.rmtree(tmp)
    load1 = os.getloadavg()
    head = [f"# bench/watch-pass.py --machines {args.machines} --cpus {args.cpus} --releases "
            f"{args.releases} --days {args.days} --interval {args.interval} --minutes "
            f"{args.minutes}{' --watch ' + args.watch if args.watch else ''} on "
            f"{'PostgreSQL' if db.startswith('postgres') else 'SQLite'}",
            f"server: {SERVER}",
            f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
            f"host: {cpu_model()}, {os.cpu_count()} CPUs, load average {load0[0]:.2f} before, "
            f"{load1[0]:.2f} after"]
    print("\n".join(head + out))
    with open(args.results, "a") as f:
        f.write("\n".join(head + out) + "\n\n")


if __name__ == "__main__":
    main()
