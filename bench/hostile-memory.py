#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Peak memory of rtsoak-server's requests against the worst upload it accepts, side by side
for two builds (this one and a reference, e.g. the code before the limits).

The upload: one interval of 1024 CPUs (the schema's most), each with a 100 ms exact range
(merged, 800 KiB) and 5,000 non-empty buckets: 13.8 MB of JSON, under the default 16 MiB body
limit.  Then 256 scenarios of one CPU each (four uploads of 64, the most one summary may hold)
under the same kernel, and 64 under a second kernel to compare with.  Each request's peak is
the server's VmHWM after it minus its VmRSS before (VmHWM reset with /proc/PID/clear_refs);
requests run one at a time on an otherwise idle server.

Usage (from the source tree after building into build/):
    bench/hostile-memory.py [--reference PATH/rtsoak-server] [--runs 3]
"""
import argparse
import base64
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_model, start_server  # noqa: E402
SERVER = os.path.join(HERE, "..", "build", "server", "rtsoak-server")
RESULTS = os.path.join(HERE, "results-hostile-memory.txt")
ID = "b0000000000000000000000000000002"
T0 = 1796300000 * 10**9
LIMIT = 100000
WINDOW = "from=@1796300000&to=@1796400000"
REQUESTS = [
    f"/api/v1/machines/{ID}/histogram?{WINDOW}",
    f"/api/v1/machines/{ID}/histogram?{WINDOW}&limit=1000",
    f"/plots/machines/{ID}/histogram.svg?{WINDOW}",
    f"/machines/{ID}?{WINDOW}",
    "/api/v1/kernels/9.9-hostile/compare?with=9.8-base",
    "/kernels/9.9-hostile?compare=9.8-base",
    "/api/v1/kernels/9.9-hostile/verdict",
]


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return out


def hist(buckets):
    """hist_encode() form of {index: count} with the 100 ms limit."""
    out = bytearray([1]) + varint(LIMIT)
    prev = None
    for i in sorted(buckets):
        out += varint(i if prev is None else i - prev) + varint(buckets[i])
        prev = i
    return base64.b64encode(bytes(out)).decode()


def cpu(c, nbuckets, start):
    step = LIMIT // nbuckets
    idx = sorted({(k * step + c) % LIMIT for k in range(nbuckets)})
    return {"cpu": c, "samples": len(idx), "min_ns": idx[0] * 1000, "avg_ns": idx[0] * 1000,
            "max_ns": idx[-1] * 1000, "max_time_ns": start + 5, "violations": 0, "missed": 0,
            "hist_limit_us": LIMIT, "hist": hist({i: 1 for i in idx})}


def summary(run, kernel, seq, intervals):
    return json.dumps({
        "schema": "rtsoak.summary/1",
        "machine": {"id": ID, "hostname": "hostile", "cpu_model": "x", "cpus": 1024},
        "run": {"id": run, "boot_id": "fedcba9876543210fedcba9876543210",
                "kernel_release": kernel, "kernel_version": "#1", "kernel_cmdline": "",
                "preempt_model": "PREEMPT_RT", "daemon_version": "0.1.0",
                "config_digest": "00112233445566778899aabbccddeeff" * 2, "start_ns": T0,
                "threshold_ns": 100000, "probe_interval_ns": 200000,
                "interval_ns": 60 * 10**9},
        "seq": seq, "intervals": intervals, "events": []})


def interval(seq, scenario, cpus):
    start = T0 + seq * 60 * 10**9
    return {"seq": seq, "start_ns": start, "length_ns": 60 * 10**9, "scenario": scenario,
            "cpus": cpus, "loads": []}


def uploads():
    start = T0 + 0 * 60 * 10**9
    yield summary(1, "9.9-hostile", 0,
                  [interval(0, "idle", [cpu(c, 5000, start) for c in range(1024)])])
    for k in range(4):
        ivs = [interval(1 + 64 * k + i, f"s{1 + 64 * k + i:03d}",
                        [cpu(0, 2000, T0 + (1 + 64 * k + i) * 60 * 10**9)]) for i in range(64)]
        yield summary(2, "9.9-hostile", 1 + 64 * k, ivs)
    ivs = [interval(1 + i, f"s{1 + i:03d}", [cpu(0, 2000, T0 + (1 + i) * 60 * 10**9)])
           for i in range(64)]
    yield summary(3, "9.8-base", 1, ivs)


def kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def measured(pid, fn):
    """(peak MiB above the RSS before, seconds) of fn()."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    before = kib(pid, "VmRSS:")
    t = time.monotonic()
    status = fn()
    return (kib(pid, "VmHWM:") - before) / 1024, time.monotonic() - t, status


def http(url, data=None, token=None):
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def serve(server, db, log):
    return start_server(server, db, log, ["--rate", "1000000", "--burst", "1000000",
                                          "--cache-warming", "no"])


def stop(proc):
    proc.terminate()
    proc.wait(timeout=120)


def one_run(server, texts):
    """The uploads on a fresh server, then each request on a fresh server of its own over a
    copy of that database: a request's peak is not hidden by memory an earlier one left."""
    tmp = tempfile.mkdtemp(prefix="rtsoak-hostile-bench-")
    try:
        db = os.path.join(tmp, "farm.db")
        token = subprocess.run([server, "--db", db, "enroll", ID], check=True,
                               capture_output=True, text=True).stdout.strip()
        proc, url, _ = serve(server, db, os.path.join(tmp, "log"))
        out = {}
        try:
            for i, t in enumerate(texts):
                mib, s, st = measured(proc.pid, lambda: http(url + "/api/v1/summaries",
                                                             t.encode(), token))
                if st != 200:
                    sys.exit(f"upload {i}: HTTP {st}")
                if i == 0:
                    out["POST the 1024-CPU upload"] = (mib, s)
        finally:
            stop(proc)
        for path in REQUESTS:
            copy = os.path.join(tmp, "copy.db")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    shutil.copyfile(db + suffix, copy + suffix)
            proc, url, _ = serve(server, copy, os.path.join(tmp, "log2"))
            try:
                mib, s, st = measured(proc.pid, lambda: http(url + path))
                out[path] = (mib, s) if st == 200 else (mib, s, st)
            finally:
                stop(proc)
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(copy + suffix):
                    os.unlink(copy + suffix)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", default=SERVER)
    p.add_argument("--reference", help="another rtsoak-server to measure side by side")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--results", default=RESULTS)
    a = p.parse_args()
    texts = list(uploads())
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("rtsoak-server peak memory per request against the worst accepted upload")
    say(f"date:    {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"kernel:  {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs "
        f"({cpu_model()})")
    say(f"upload:  1024 CPUs x 5,000 buckets of a 100 ms range: {len(texts[0])} bytes; then "
        f"4 x 64 scenarios, and 64 under a second kernel")
    say("peak:    VmHWM after the request - VmRSS before it (MiB), each request on a fresh "
        "server over a copy of the database; median of the runs, and the seconds it took")
    say(f"         ID = {ID}, WINDOW = {WINDOW}")
    builds = [("this build", a.server)] + ([("reference", a.reference)] if a.reference else [])
    for name, exe in builds:
        say(f"{name}: {exe}")
    say()
    results = {name: [] for name, _ in builds}
    for r in range(a.runs):
        for name, exe in builds:
            results[name].append(one_run(exe, texts))
            print(f"run {r + 1} {name} done", flush=True)
    keys = list(results[builds[0][0]][0].keys())
    header = "".join(f"{n:>26}" for n, _ in builds)
    say(f"{'request':<58}{header}")
    worst = {}
    for k in keys:
        row = f"{k.replace(ID, 'ID').replace(WINDOW, 'WINDOW'):<58}"
        for name, _ in builds:
            vals = [run[k] for run in results[name]]
            mib = statistics.median(v[0] for v in vals)
            sec = statistics.median(v[1] for v in vals)
            bad = [v[2] for v in vals if len(v) > 2]
            cell = f"{mib:8.0f} MiB {sec:7.2f} s" + (f" HTTP {bad[0]}" if bad else "")
            row += f"{cell:>26}"
            if k.startswith("/"):
                worst[name] = max(worst.get(name, 0), mib)
        say(row)
    say()
    for name, _ in builds:
        say(f"worst request, {name}: {worst[name]:.0f} MiB")
    with open(a.results, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {a.results}")


if __name__ == "__main__":
    main()
