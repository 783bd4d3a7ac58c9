#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The ingest rate of two rtsoak-server builds side by side, run after run alternately on the
same machine: bench/server-ingest.py's load (ingest-load posting one-minute 8-CPU summaries
over connections) against this build and a reference (e.g. the code before the
request checks, limits and escaping), each on a fresh copy of the same enrolled database.

Runs alternate (reference, this, reference, this, ...) so that both see the same background
load; the result is the median of each and their ratio, for the rate and for the server's CPU
time per summary (which a busy machine disturbs less than the rate).

Usage (from the source tree after building into build/):
    bench/ingest-before-after.py --reference PATH/rtsoak-server [--pairs 5] [--machines 2000]
"""
import argparse
import datetime
import importlib.util
import os
import platform
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("server_ingest",
                                              os.path.join(HERE, "server-ingest.py"))
ingest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ingest)
RESULTS = os.path.join(HERE, "results-ingest-before-after.txt")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reference", required=True)
    p.add_argument("--server", default=ingest.SERVER)
    p.add_argument("--load", default=ingest.LOAD)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--machines", type=int, default=2000)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--count", type=int, default=20000)
    p.add_argument("--results", default=RESULTS)
    a = p.parse_args()
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("rtsoak-server ingest, two builds alternately: bench/ingest-load on loopback")
    say(f"date:    {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"kernel:  {platform.release()} ({platform.machine()}), {os.cpu_count()} CPUs "
        f"({ingest.cpu_model()})")
    say(f"load:    {a.count} summaries per run from {a.machines} machines over "
        f"{a.connections} connections at a time, fresh copy of one enrolled database")
    say(f"this:      {a.server}")
    say(f"reference: {a.reference}")
    say()
    builds = {"reference": a.reference, "this": a.server}
    runs = {k: [] for k in builds}
    setup = tempfile.mkdtemp(prefix="rtsoak-ingest-ab-")
    try:
        template = os.path.join(setup, "farm.db")
        tokens = os.path.join(setup, "tokens.txt")
        ingest.enroll_all(a.reference, template, a.machines, tokens)
        for i in range(a.pairs):
            for name, exe in builds.items():
                ns = argparse.Namespace(server=exe, load=a.load, server_opt=[],
                                        machines=a.machines, connections=a.connections,
                                        count=a.count, duration=0, sync=False, compare="",
                                        pg="", pg_log="", pg_pid=0)
                tmp = tempfile.mkdtemp(prefix="rtsoak-ingest-")
                try:
                    j, _, _ = ingest.one_run(ns, tmp, "sqlite", template, tokens, i)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                bad = ingest.check(j)
                runs[name].append(j)
                say(f"pair {i + 1} {name:>9}: {j['rate']:8.1f} summaries/s, server CPU "
                    f"{j['server_cpu_us_per_summary']:5.0f} us/summary, p50 {j['p50_ms']:.2f} "
                    f"ms, p99 {j['p99_ms']:.2f} ms" + ("  OK" if not bad else "  " + str(bad)))
    finally:
        shutil.rmtree(setup, ignore_errors=True)
    say()
    med = {k: (statistics.median(r["rate"] for r in v),
               statistics.median(r["server_cpu_us_per_summary"] for r in v))
           for k, v in runs.items()}
    for k, (rate, cpu) in med.items():
        say(f"median {k:>9}: {rate:8.1f} summaries/s, server CPU {cpu:.0f} us/summary")
    ratio = med["this"][0] / med["reference"][0]
    cpu_ratio = med["this"][1] / med["reference"][1]
    say(f"this / reference: rate {ratio:.3f} ({(ratio - 1) * 100:+.1f} %), server CPU per "
        f"summary {cpu_ratio:.3f} ({(cpu_ratio - 1) * 100:+.1f} %)")
    say(f"target, at most 5 % slower: {'met' if ratio >= 0.95 else 'NOT met'}")
    with open(a.results, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {a.results}")


if __name__ == "__main__":
    main()
