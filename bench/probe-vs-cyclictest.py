#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs rtsoakd's probe and rt-tests' cyclictest alternately with the same CPUs, priority and
interval, idle and under hackbench load, and compares median (p50) and p99 latency and the CPU
time each process used (all threads).

Both tools count latencies in 1 us buckets; both are reduced here with the same rule (the upper
edge of the bucket holding the rank-ceil(q*N) sample), so the comparison is like for like.

Usage (as root, from the source tree after building):
    bench/probe-vs-cyclictest.py [--pairs 5] [--duration 30] [--interval 200] [--priority 95]
"""
import argparse
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build")


def run_measured(argv):
    """Runs argv to completion; returns (exit status, CPU seconds of the process)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} failed ({code}): {err}")
    return usage.ru_utime + usage.ru_stime


def quantile_us(counts, overflow_values, q):
    """counts: {bucket_us: n}; overflow_values: list of (value_us, n) above the exact range.
    The upper edge of the bucket holding the ceil(q*N)-th sample."""
    total = sum(counts.values()) + sum(n for _, n in overflow_values)
    rank = max(1, math.ceil(q * total))
    cum = 0
    for b in sorted(counts):
        cum += counts[b]
        if cum >= rank:
            return b + 1
    for v, n in sorted(overflow_values):
        cum += n
        if cum >= rank:
            return v
    return float("nan")


def rtsoakd_run(args, tmp):
    db = os.path.join(tmp, "bench.db")
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    cpu = run_measured([
        os.path.join(BUILD, "daemon", "rtsoakd"), "--config", "/dev/null",
        "--set", f"Storage.Path={db}",
        "--set", f"Probe.Interval={args.interval}us",
        "--set", f"Probe.Priority={args.priority}",
        "--duration", f"{args.duration}s",
    ])
    out = subprocess.run([os.path.join(BUILD, "cli", "rtsoak"), "--db", db, "histogram",
                          "--format", "json"], check=True, capture_output=True).stdout
    counts, overflow = {}, []
    for c in json.loads(out)["cpus"]:
        for b in c["all_buckets"]:
            lo = b["lower_ns"] // 1000
            if b["upper_ns"] is not None and b["upper_ns"] - b["lower_ns"] == 1000:
                counts[lo] = counts.get(lo, 0) + b["count"]
            else:
                # Above the exact range: count the bucket at the CPU's true maximum at most.
                hi = (b["upper_ns"] or c["max_ns"] + 1000) // 1000
                overflow.append((min(hi, c["max_ns"] // 1000 + 1), b["count"]))
    return counts, overflow, cpu


def cyclictest_run(args, tmp):
    js = os.path.join(tmp, "cyclictest.json")
    cpu = run_measured([
        "cyclictest", "-m", f"-Sp{args.priority}", f"-i{args.interval}", "-q",
        f"-D{args.duration}", "-h1000", f"--json={js}",
    ])
    with open(js) as f:
        data = json.load(f)
    counts, overflow = {}, []
    for t in data["thread"].values():
        in_hist = 0
        for b, n in t["histogram"].items():
            counts[int(b)] = counts.get(int(b), 0) + n
            in_hist += n
        # cyclictest's histogram stops at -h; the rest is only counted. Place it at the max.
        if t["cycles"] > in_hist:
            overflow.append((t["max"] + 1, t["cycles"] - in_hist))
    return counts, overflow, cpu


def start_load(kind):
    if kind == "idle":
        return None
    # rt-tests' hackbench, restarted for as long as the phase lasts.
    cmd = "while :; do hackbench -P -g 4 -f 10 -l 20000 -s 512 >/dev/null 2>&1; done"
    return subprocess.Popen(["sh", "-c", cmd], start_new_session=True)


def stop_load(proc):
    if proc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--duration", type=int, default=30, help="seconds per run")
    p.add_argument("--interval", type=int, default=200, help="microseconds")
    p.add_argument("--priority", type=int, default=95)
    p.add_argument("--loads", default="idle,hackbench")
    args = p.parse_args()

    if os.geteuid() != 0:
        sys.exit("run as root (SCHED_FIFO, mlockall)")
    for tool in ("cyclictest", "hackbench"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install rt-tests")

    print(f"# {args.pairs} pairs of {args.duration} s runs, interval {args.interval} us, "
          f"SCHED_FIFO {args.priority}, all CPUs ({os.cpu_count()}); latencies in us; "
          f"CPU = user+system seconds of the whole process")
    results = {}
    pools = {}
    with tempfile.TemporaryDirectory() as tmp:
        for load in args.loads.split(","):
            proc = start_load(load)
            time.sleep(2)
            rows = []
            for i in range(args.pairs):
                # Alternate the order so that slow drift favours neither tool.
                order = ("rtsoakd", "cyclictest") if i % 2 == 0 else ("cyclictest", "rtsoakd")
                pair = {}
                for tool in order:
                    counts, overflow, cpu = (rtsoakd_run if tool == "rtsoakd"
                                             else cyclictest_run)(args, tmp)
                    pair[tool] = (quantile_us(counts, overflow, 0.5),
                                  quantile_us(counts, overflow, 0.99), cpu,
                                  sum(counts.values()) + sum(n for _, n in overflow))
                    pooled = pools.setdefault((load, tool), ({}, []))
                    for b, n in counts.items():
                        pooled[0][b] = pooled[0].get(b, 0) + n
                    pooled[1].extend(overflow)
                rows.append(pair)
                r, c = pair["rtsoakd"], pair["cyclictest"]
                print(f"{load:9s} pair {i + 1}: rtsoakd p50 {r[0]:4d} p99 {r[1]:5} cpu {r[2]:6.2f}s "
                      f"({r[3]} samples) | cyclictest p50 {c[0]:4d} p99 {c[1]:5} cpu {c[2]:6.2f}s "
                      f"({c[3]} samples)", flush=True)
            stop_load(proc)
            results[load] = rows

    print()
    print(f"{'load':9s} {'metric':14s} {'rtsoakd':>9s} {'cyclictest':>11s} {'ratio':>7s}   "
          f"range over pairs (rtsoakd | cyclictest)")
    for load, rows in results.items():
        for idx, name in ((0, "p50 us"), (1, "p99 us"), (2, "CPU s")):
            ours_all = [p["rtsoakd"][idx] for p in rows]
            ref_all = [p["cyclictest"][idx] for p in rows]
            ours, ref = statistics.median(ours_all), statistics.median(ref_all)
            ratio = ours / ref if ref else float("nan")
            fmt = "{:9.2f}" if idx == 2 else "{:9.1f}"
            spread = (f"{min(ours_all):g}-{max(ours_all):g} | "
                      f"{min(ref_all):g}-{max(ref_all):g}")
            print(f"{load:9s} {name + ' median':14s} {fmt.format(ours)} "
                  f"{fmt.format(ref):>11s} {ratio:7.3f}   {spread}")
        # All samples of all pairs together: the steadiest estimate of each distribution.
        for q, name in ((0.5, "p50 us pooled"), (0.99, "p99 us pooled"),
                        (0.999, "p99.9 us pooled")):
            ours = quantile_us(*pools[(load, "rtsoakd")], q)
            ref = quantile_us(*pools[(load, "cyclictest")], q)
            print(f"{load:9s} {name:14s} {ours:9.1f} {ref:11.1f} {ours / ref:7.3f}")


if __name__ == "__main__":
    main()
