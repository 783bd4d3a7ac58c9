#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An accelerated soak of rtsoakd: 1-second intervals, probes at 5 kHz per CPU (200 us), the
`mixed` scenario, uploading to a local rtsoak-server, for --minutes (default 32).

It measures what decides whether rtsoakd can run for months:
  - rtsoakd's resident memory (VmRSS) every minute, and its growth from minute 5 to the end;
  - the database (file + WAL) bytes per CPU-hour, from minute 5 to the end;
  - the CPU time of rtsoakd's threads other than the probes (SCHED_FIFO threads are the
    probes), from /proc/PID/task/TID/stat utime+stime, as a share of one CPU.
The load generators are separate processes and not counted; neither is the server.

Usage (as root, from the source tree after building):
    nohup bench/soak.py [--minutes 32] [--out bench/results-soak.txt] &
"""
import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD  # noqa: E402
CLK_TCK = os.sysconf("SC_CLK_TCK")


def threads(pid):
    """{tid: (comm, policy, cpu_seconds)} of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[0] is field 3 (state): utime is field 14, stime 15, policy 41.
        utime, stime, policy = int(fields[11]), int(fields[12]), int(fields[38])
        out[int(tid)] = (comm, policy, (utime + stime) / CLK_TCK)
    return out


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def db_bytes(db):
    return sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))


def db_used(db):
    """Bytes in pages that hold data (the files also hold free pages and the WAL)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
        con.close()
        return (pages - free) * size
    except sqlite3.Error:
        return 0


def snapshot(pid, db, t0):
    th = threads(pid)
    return {
        "t": time.monotonic() - t0,
        "rss": rss_kib(pid),
        "db": db_bytes(db),
        "used": db_used(db),
        "probe_cpu": sum(c for _, p, c in th.values() if p == 1),
        "other_cpu": sum(c for _, p, c in th.values() if p != 1),
        "threads": th,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=32)
    ap.add_argument("--out", default=os.path.join(HERE, "results-soak.txt"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (SCHED_FIFO, locked memory)")

    tmp = tempfile.mkdtemp(prefix="rtsoak-soak-")
    # Copies, so that a rebuild during the soak does not change what runs.
    bins = {}
    for name, rel in [("rtsoakd", "daemon/rtsoakd"), ("rtsoak-load", "loadgen/rtsoak-load"),
                      ("rtsoak-server", "server/rtsoak-server")]:
        bins[name] = os.path.join(tmp, name)
        shutil.copy2(os.path.join(BUILD, rel), bins[name])
    db, farm = os.path.join(tmp, "rtsoak.db"), os.path.join(tmp, "farm.db")
    with open("/etc/machine-id") as f:
        machine = f.read().strip()
    token = subprocess.run([bins["rtsoak-server"], "--db", farm, "enroll", machine],
                           check=True, capture_output=True, text=True).stdout.split()[-1]
    token_file = os.path.join(tmp, "token")
    with open(token_file, "w") as f:
        f.write(token + "\n")
    server_log = open(os.path.join(tmp, "server.log"), "w+")
    server = subprocess.Popen([bins["rtsoak-server"], "--db", farm, "--listen", "127.0.0.1:0"],
                              stdout=server_log, stderr=subprocess.STDOUT)
    url = None
    for _ in range(100):
        time.sleep(0.1)
        server_log.seek(0)
        for line in server_log.read().splitlines():
            if "Listening on " in line:
                url = line.split("Listening on ")[1].split()[0]
        if url:
            break
    if not url:
        server.kill()
        sys.exit("rtsoak-server did not say where it listens")

    sets = ["Storage.Path=" + db, "Storage.Interval=1s", "Probe.Interval=200us",
            "Schedule.Rotation=mixed 1h", "Load.Helper=" + bins["rtsoak-load"],
            "Upload.Server=" + url, "Upload.TokenFile=" + token_file, "Upload.Batch=60",
            # The flight recorder's cost without a pmsg device: the same line, to /dev/null.
            "Forensics.FlightRecorder=/dev/null"]
    argv = [bins["rtsoakd"], "--config", "/dev/null"]
    for s in sets:
        argv += ["--set", s]
    log = open(os.path.join(tmp, "rtsoakd.log"), "w")
    daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    snaps = []
    try:
        end = args.minutes * 60
        minute = 0
        while True:
            next_t = minute * 60
            while time.monotonic() - t0 < next_t:
                if daemon.poll() is not None:
                    sys.exit(f"rtsoakd exited early ({daemon.returncode}); see {log.name}")
                time.sleep(1)
            snaps.append(snapshot(daemon.pid, db, t0))
            s = snaps[-1]
            print(f"min {minute:3d}: RSS {s['rss']} KiB, db {s['db']} B, "
                  f"other threads {s['other_cpu']:.2f} s CPU", flush=True)
            minute += 1
            if next_t >= end:
                break
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    ncpus = len([t for t in snaps[-1]["threads"].values() if t[1] == 1])
    # Minute 5 is the base (after start-up and the first allocations); --minutes under 6
    # (a trial of the script) uses minute 1.
    base = 5 if args.minutes >= 6 else 1
    m5 = next(s for s in snaps if s["t"] >= base * 60 - 1)
    last = snaps[-1]
    span_h = (last["t"] - m5["t"]) / 3600
    rss_growth = (last["rss"] - m5["rss"]) / m5["rss"] * 100
    db_per_cpu_h = (last["used"] - m5["used"]) / (ncpus * span_h)
    other_share = (last["other_cpu"] - m5["other_cpu"]) / (last["t"] - m5["t"]) * 100
    probe_share = (last["probe_cpu"] - m5["probe_cpu"]) / (last["t"] - m5["t"]) * 100
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    intervals = con.execute("SELECT count(*) FROM intervals").fetchone()[0]
    pending = con.execute("SELECT count(*) FROM outbox WHERE state = 'pending'").fetchone()[0]
    con.close()
    per_thread = {}
    for tid, (comm, pol, cpu) in last["threads"].items():
        before = m5["threads"].get(tid, (comm, pol, 0.0))[2]
        key = f"thread {tid} {comm} ({'SCHED_FIFO probe' if pol == 1 else 'normal'})"
        per_thread.setdefault(key, 0.0)
        per_thread[key] += cpu - before

    lines = [
        "rtsoakd accelerated soak (bench/soak.py)",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"kernel: {os.uname().release}; CPUs probed: {ncpus}",
        "setup: 1 s intervals, 200 us probe interval (5 kHz per CPU), scenario mixed "
        "(cpu 40 %, network 1 Mbit/s, fileio 1 MB/s, memory 1 MB/s), uploading to a local "
        "rtsoak-server (batch 60), flight recorder to /dev/null",
        f"duration: {last['t'] / 60:.1f} min; intervals stored: {intervals}; "
        f"outbox still pending at the end: {pending}",
        "",
        f"RSS at minute {base}:      {m5['rss']} KiB",
        f"RSS at minute {last['t'] / 60:.0f}:     {last['rss']} KiB",
        f"RSS growth:           {rss_growth:+.2f} % (target: under 1 %)",
        f"database files (db+WAL): {m5['db']} B at minute {base}, {last['db']} B at the end",
        f"database pages in use:   {m5['used']} B at minute {base}, {last['used']} B at the end",
        f"database per CPU-hour: {db_per_cpu_h / 1024:.0f} KiB of pages in use (1 s intervals; "
        f"60 s intervals store 60x fewer rows)",
        f"CPU of non-probe threads: {other_share:.3f} % of one CPU (target: under 1 %)",
        f"CPU of probe threads:     {probe_share:.3f} % of one CPU (all {ncpus} together)",
        "",
        f"per thread, minute {base} to the end (CPU seconds):",
    ]
    for k in sorted(per_thread):
        lines.append(f"  {k}: {per_thread[k]:.2f}")
    lines += ["", "minute, RSS (KiB), database files (B), pages in use (B), non-probe CPU (s):"]
    for i, s in enumerate(snaps):
        lines.append(f"  {i:3d} {s['rss']:8d} {s['db']:12d} {s['used']:12d} {s['other_cpu']:8.2f}")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
