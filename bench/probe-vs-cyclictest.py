#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs rtsoakd's probe and rt-tests' cyclictest alternately with the same CPUs, priority and
interval, idle and under hackbench load, and compares median (p50), p99 and p99.9 latency, the
mean, and the CPU time each process used (all threads): over the whole run, and in steady
state (from 3 s after the start to 2 s before the end, so without what starting and stopping
cost).

Both tools count latencies in 1 us buckets; both are reduced here with the same rule (the upper
edge of the bucket holding the rank-ceil(q*N) sample), so the comparison is like for like.

Variants (--variants, run in a rotating order within each round so that slow drift favours
none of them):
  cyclictest        cyclictest -m -Sp95 -i200 -q -h1000
  rtsoakd           rtsoakd with no load scenario ("idle" rotation), the trace flight
                    recorder off
  rtsoakd-trace     the same with the trace flight recorder on (needs a writable tracefs)
  cyclictest-trace  cyclictest while a tracefs instance of this benchmark records what
                    rtsoakd-trace records: rtsoakd's default [Trace] Events=, the same
                    buffer size, trace clock and wake-up filter (with cyclictest's name for the
                    probes'): what recording those events costs any tool
  rtsoakd-defaults  rtsoakd as this benchmark ran it before 2026-12-04: the built-in rotation,
                    so it starts the load generators of the hour's scenario (or, where
                    rtsoak-load is not installed, retries starting them and stores an event
                    for each failure)

Usage (as root, from the source tree after building):
    bench/probe-vs-cyclictest.py [--pairs 5] [--duration 30] [--interval 200] [--priority 95]
                                 [--loads idle,hackbench] [--variants cyclictest,rtsoakd]
e.g. --variants cyclictest,rtsoakd,rtsoakd-trace,cyclictest-trace: the cost of tracing for the
probe against its cost for cyclictest, in one run
"""
import argparse
import json
import math
import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import BUILD  # noqa: E402
STEADY_SKIP, STEADY_TAIL = 3.0, 2.0
VARIANTS = ("cyclictest", "rtsoakd", "rtsoakd-trace", "cyclictest-trace", "rtsoakd-defaults")
TRACEFS = "/sys/kernel/tracing"
BENCH_INSTANCE = TRACEFS + "/instances/rtsoak-bench"


def setting(check_config, key):
    """A key's value in rtsoakd's --check-config output (None when it has none)."""
    return next((l[len(key) + 1:] for l in check_config.splitlines()
                 if l.startswith(key + "=")), None)


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def rtsoakd_argv(*extra):
    """rtsoakd with no configuration file and no load scenario.  rtsoakd checks at start that
    the user its load generators run as ([Load] User=rtsoak, which the rtsoak package creates)
    exists when its rotation runs loads: without loads it needs none, and the benchmark runs
    where the package is not installed."""
    return [os.path.join(BUILD, "daemon", "rtsoakd"), "--config", "/dev/null",
            "--set", "Schedule.Rotation=idle 1h"] + list(extra)


def check_output(argv):
    """argv's standard output; its error and exit status instead of a traceback when it
    fails."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def task_runtime_ns(pid):
    """CPU time of every thread pid has now (the scheduler's own clock, in ns)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    return total


def sample_steady(pid, duration, out):
    """Steady-state CPU use of pid: its threads' CPU time between STEADY_SKIP s after the start
    and STEADY_TAIL s before the end, per second.  What starting and stopping cost (for
    rtsoakd with tracing on, mostly the kernel patching its code to enable and disable the trace
    events: tens of ms on this VM, whatever the length of the run) is left out here and kept
    in the whole-process figure."""
    t0 = time.monotonic()
    end = t0 + duration - STEADY_TAIL
    if end - (t0 + STEADY_SKIP) < 2:
        return
    time.sleep(STEADY_SKIP)
    a_t, a = time.monotonic(), task_runtime_ns(pid)
    time.sleep(max(0.0, end - time.monotonic()))
    b_t, b = time.monotonic(), task_runtime_ns(pid)
    if a is not None and b is not None and b >= a:
        out.append((b - a) / 1e6 / (b_t - a_t))


def run_measured(argv, duration):
    """Runs argv to completion; returns (CPU seconds of the process and the children it
    waited for, maximum RSS in KiB, what it wrote on stderr, steady-state CPU ms per s or
    None)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    steady = []
    sampler = threading.Thread(target=sample_steady, args=(proc.pid, duration, steady))
    sampler.start()
    err = proc.stderr.read().decode(errors="replace")
    sampler.join()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} failed ({code}): {err}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, err, (steady or [None])[0]


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


def rtsoakd_run(args, tmp, variant):
    db = os.path.join(tmp, "bench.db")
    for suffix in ("", "-wal", "-shm", ".lock"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    argv = [os.path.join(BUILD, "daemon", "rtsoakd"), "--config", "/dev/null",
            "--set", f"Storage.Path={db}",
            "--set", f"Probe.Interval={args.interval}us",
            "--set", f"Probe.Priority={args.priority}",
            "--duration", f"{args.duration}s"]
    if variant != "rtsoakd-defaults":
        argv += ["--set", "Schedule.Rotation=idle 1h", "--set", "Forensics.FlightRecorder="]
        if args.has_trace:
            argv += ["--set", "Trace.Enabled=" + ("yes" if variant == "rtsoakd-trace" else "no")]
    cpu, rss, err, steady = run_measured(argv, args.duration)
    trace_kib = None
    m = re.search(r"Trace flight recorder on: .*?(\d+) KiB of kernel memory", err)
    if m:
        trace_kib = int(m.group(1))
    elif variant == "rtsoakd-trace":
        sys.exit("rtsoakd-trace: the flight recorder did not start:\n" + err)
    out = check_output([os.path.join(BUILD, "cli", "rtsoak"), "--db", db, "histogram",
                        "--format", "json"])
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
    rep = json.loads(check_output([os.path.join(BUILD, "cli", "rtsoak"), "--db", db, "report",
                                   "--json"]))
    mean_us = rep["total"]["avg_ns"] / 1000
    return counts, overflow, cpu, rss, mean_us, trace_kib, steady


def cyclictest_run(args, tmp):
    js = os.path.join(tmp, "cyclictest.json")
    cpu, rss, _, steady = run_measured([
        "cyclictest", "-m", f"-Sp{args.priority}", f"-i{args.interval}", "-q",
        f"-D{args.duration}", "-h1000", f"--json={js}",
    ], args.duration)
    with open(js) as f:
        data = json.load(f)
    counts, overflow = {}, []
    cycles = weighted = 0
    for t in data["thread"].values():
        in_hist = 0
        for b, n in t["histogram"].items():
            counts[int(b)] = counts.get(int(b), 0) + n
            in_hist += n
        # cyclictest's histogram stops at -h; the rest is only counted. Place it at the max.
        if t["cycles"] > in_hist:
            overflow.append((t["max"] + 1, t["cycles"] - in_hist))
        cycles += t["cycles"]
        weighted += t["avg"] * t["cycles"]
    return counts, overflow, cpu, rss, weighted / max(cycles, 1), None, steady


def default_events(args):
    """rtsoakd's default [Trace] Events=, as its --check-config prints them."""
    return (setting(args.check_config, "Events") or "").split()


def instance_write(rel, value, optional=False):
    try:
        with open(os.path.join(BENCH_INSTANCE, rel), "w") as f:
            f.write(value)
    except OSError:
        if not optional:
            raise


def cyclictest_traced_run(args, tmp):
    """cyclictest with an instance recording what rtsoakd's flight recorder records (656 KiB
    per CPU, as rtsoakd sizes a 20 ms look-back; trace clock mono; overwrite)."""
    if os.path.isdir(BENCH_INSTANCE):
        os.rmdir(BENCH_INSTANCE)
    os.mkdir(BENCH_INSTANCE)
    try:
        instance_write("buffer_size_kb", "656")
        instance_write("trace_clock", "mono")
        for spec in default_events(args):
            optional = spec.startswith("?")
            system, event = spec.lstrip("?").split(":")
            if event.startswith("sched_wakeup"):
                instance_write(f"events/{system}/{event}/filter",
                               'prio < 100 || comm ~ "cyclictest*"', optional)
            instance_write(f"events/{system}/{event}/enable", "1", optional)
        return cyclictest_run(args, tmp)
    finally:
        instance_write("tracing_on", "0")
        os.rmdir(BENCH_INSTANCE)


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


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def report(results, pools, variants, ref, pairs_of):
    # idx: 0 p50, 1 p99, 2 p999, 3 mean, 4 cpu, 6 cpu per 100k wake-ups (a run that the
    # machine's load made stop late measured longer), 7 steady-state CPU ms per s
    names = ((0, "p50 us", "{:9.0f}"), (1, "p99 us", "{:9.0f}"), (2, "p99.9 us", "{:9.0f}"),
             (3, "mean us", "{:9.2f}"), (4, "CPU s", "{:9.2f}"), (6, "CPU ms/100k", "{:9.1f}"))
    if all(r[v][7] is not None for rows in results.values() for r in rows for v in variants):
        names += ((7, "steady ms/s", "{:9.1f}"),)
    print()
    print("Medians over the rounds (range); ratios against " + ref)
    for load, rows in results.items():
        for idx, name, fmt in names:
            line = f"{load:9s} {name:11s}"
            ref_med = statistics.median(r[ref][idx] for r in rows)
            for v in variants:
                vals = [r[v][idx] for r in rows]
                med = statistics.median(vals)
                line += f" | {v} {fmt.format(med).strip()} ({min(vals):g}-{max(vals):g})"
                if v != ref:
                    line += f" x{med / ref_med if ref_med else float('nan'):.3f}"
            print(line)
        for a, b in pairs_of:
            for idx, name, _ in names:
                worse = sum(1 for r in rows if r[a][idx] > r[b][idx])
                ratios = [r[a][idx] / r[b][idx] for r in rows if r[b][idx]]
                print(f"{load:9s} {name:11s} {a} above {b} in {worse} of {len(rows)} rounds; "
                      f"median of the rounds' ratios {statistics.median(ratios):.3f}")
    print()
    print("Pooled: every sample of every round per variant; ratios against " + ref)
    for load in results:
        for q, name in ((0.5, "p50 us"), (0.99, "p99 us"), (0.999, "p99.9 us")):
            refv = quantile_us(*pools[(load, ref)], q)
            line = f"{load:9s} {name:9s}"
            for v in variants:
                val = quantile_us(*pools[(load, v)], q)
                line += f" | {v} {val:g}"
                if v != ref:
                    line += f" x{val / refv:.3f}"
            print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5, help="rounds (each runs every variant once)")
    p.add_argument("--duration", type=int, default=30, help="seconds per run")
    p.add_argument("--interval", type=int, default=200, help="microseconds")
    p.add_argument("--priority", type=int, default=95)
    p.add_argument("--loads", default="idle,hackbench")
    p.add_argument("--variants", default="cyclictest,rtsoakd",
                   help="comma-separated, of " + ", ".join(VARIANTS))
    args = p.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"--variants: unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    # A build from before the flight recorder has no [Trace] section.
    args.check_config = check_output(rtsoakd_argv("--check-config"))
    args.has_trace = "[Trace]" in args.check_config
    if "rtsoakd-trace" in variants and not args.has_trace:
        sys.exit("rtsoakd-trace: this build of rtsoakd has no [Trace] section")
    ref = "cyclictest" if "cyclictest" in variants else variants[0]
    pairs_of = [(v, ref) for v in variants if v != ref]
    if "rtsoakd-trace" in variants and "rtsoakd" in variants and ref != "rtsoakd":
        pairs_of.append(("rtsoakd-trace", "rtsoakd"))
    if "rtsoakd-trace" in variants and "cyclictest-trace" in variants:
        pairs_of.append(("rtsoakd-trace", "cyclictest-trace"))

    if os.geteuid() != 0:
        sys.exit("run as root (SCHED_FIFO, mlockall)")
    user = setting(args.check_config, "User")
    if "rtsoakd-defaults" in variants and user and not user_exists(user):
        sys.exit(f"rtsoakd-defaults starts load generators as the user {user} ([Load] User=), "
                 f"which does not exist here: create it with \"systemd-sysusers "
                 f"systemd/rtsoak.sysusers\" (or install the rtsoak package)")
    traced = "rtsoakd-trace" in variants or "cyclictest-trace" in variants
    if traced and not os.path.isdir(TRACEFS + "/instances"):
        # tracefs is not mounted here: run in a mount namespace of our own that has it.
        os.execvp("unshare", ["unshare", "-m", "sh", "-c",
                              'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"', "sh",
                              sys.executable, *sys.argv])
    for tool in ("cyclictest", "hackbench"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install rt-tests")

    print(f"# {args.pairs} rounds of {args.duration} s runs of {', '.join(variants)}, interval "
          f"{args.interval} us, SCHED_FIFO {args.priority}, all CPUs ({os.cpu_count()}); "
          f"latencies in us; CPU = user+system seconds of the whole process; steady = CPU ms "
          f"per s of all its threads from {STEADY_SKIP:g} s after the start to {STEADY_TAIL:g} s "
          f"before the end; "
          f"load average at start {loadavg()}")
    results, pools, trace_kib, rss = {}, {}, [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for load in args.loads.split(","):
            proc = start_load(load)
            time.sleep(2)
            rows = []
            for i in range(args.pairs):
                # Rotate the order so that slow drift favours no variant.
                order = variants[i % len(variants):] + variants[:i % len(variants)]
                row = {}
                for v in order:
                    if v == "cyclictest":
                        res = cyclictest_run(args, tmp)
                    elif v == "cyclictest-trace":
                        res = cyclictest_traced_run(args, tmp)
                    else:
                        res = rtsoakd_run(args, tmp, v)
                    counts, overflow, cpu, maxrss, mean_us, tkib, steady = res
                    if tkib is not None:
                        trace_kib.append(tkib)
                    rss.setdefault(v, []).append(maxrss)
                    samples = sum(counts.values()) + sum(n for _, n in overflow)
                    row[v] = (quantile_us(counts, overflow, 0.5),
                              quantile_us(counts, overflow, 0.99),
                              quantile_us(counts, overflow, 0.999), mean_us, cpu, samples,
                              cpu * 1e8 / max(samples, 1), steady)
                    pooled = pools.setdefault((load, v), ({}, []))
                    for b, n in counts.items():
                        pooled[0][b] = pooled[0].get(b, 0) + n
                    pooled[1].extend(overflow)
                rows.append(row)
                print(f"{load:9s} round {i + 1} (load average {loadavg()}): " + " | ".join(
                    f"{v} p50 {row[v][0]} p99 {row[v][1]} p99.9 {row[v][2]} mean "
                    f"{row[v][3]:.2f} cpu {row[v][4]:.2f}s"
                    + (f" steady {row[v][7]:.1f} ms/s" if row[v][7] is not None else "")
                    + f" ({row[v][5]} samples)"
                    for v in variants), flush=True)
            stop_load(proc)
            results[load] = rows

    report(results, pools, variants, ref, pairs_of)
    print()
    for v in variants:
        print(f"maximum RSS of {v}: median {statistics.median(rss[v]) / 1024:.1f} MiB")
    if trace_kib:
        print(f"trace buffers of rtsoakd-trace: {statistics.median(trace_kib):g} KiB of kernel "
              f"memory (as the instance's buffer_total_size_kb reads)")
    print(f"# load average at the end {loadavg()}")


if __name__ == "__main__":
    main()
