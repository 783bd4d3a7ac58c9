#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Loopback throughput of rtsoak-load network against stress-ng's sock (TCP) and udp stressors,
# in alternating pairs, with matched message sizes and one stream each.
#
# What stress-ng 0.15 counts (stress-sock.c, stress-udp.c):
#   --sock: one bogo op is one TCP connection; on each the server sends 511 messages of
#           16, 32, ... 8176 bytes (2,093,056 bytes, 4096 bytes on average), the client reads
#           them all.  Bytes = bogo ops * 2093056.  We send 4 KiB messages on one connection.
#   --udp:  one bogo op is one datagram received by the server; the client sends datagrams of
#           16, 32, ... 1008 bytes (512 bytes on average).  We send 512-byte datagrams.
# Compared: bytes received per second (TCP) and datagrams received per second (UDP).
#
# Usage: bench/network-vs-stress-ng.py [RTSOAK_LOAD] [--pairs N] [--seconds S]
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile

SOCK_BYTES_PER_OP = 16 * sum(range(1, 512))  # 2,093,056
UDP_MEAN_SIZE = 512


def run_ours(load, proto, size, seconds):
    cmd = [load, "--json", "-d", f"{seconds}s", "network", "--proto", proto, "--size", str(size),
           "--streams", "1"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    m = {x["name"]: x for x in j["metrics"]}
    secs = j["seconds"]
    return cmd, {
        "mbit": m["rx"]["count"] * 8 / secs / 1e6,
        "msgs": m["rx_packets"]["count"] / secs,
    }


def parse_yaml_metrics(path):
    # Just enough YAML for stress-ng's flat "metrics:" list.
    vals = {}
    for line in open(path):
        line = line.strip().lstrip("- ")
        if ":" in line:
            k, v = line.split(":", 1)
            vals[k.strip()] = v.strip()
    return int(vals["bogo-ops"]), float(vals["wall-clock-time"])


def run_stress_ng(stressor, seconds, tmp):
    yaml = os.path.join(tmp, f"{stressor}.yaml")
    cmd = ["stress-ng", f"--{stressor}", "1", "-t", f"{seconds}s", "--metrics", "--yaml", yaml]
    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp)
    ops, secs = parse_yaml_metrics(yaml)
    if stressor == "sock":
        return cmd, {"mbit": ops * SOCK_BYTES_PER_OP * 8 / secs / 1e6,
                     "msgs": ops * 511 / secs}
    return cmd, {"mbit": ops * UDP_MEAN_SIZE * 8 / secs / 1e6, "msgs": ops / secs}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("load", nargs="?",
                    default=os.path.join(here, "..", "build", "loadgen", "rtsoak-load"))
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(here, "results-network-vs-stress-ng.txt"))
    a = ap.parse_args()

    cases = [
        ("TCP", "tcp", 4096, "sock", "mbit", "Mbit/s received"),
        ("UDP", "udp", UDP_MEAN_SIZE, "udp", "msgs", "datagrams/s received"),
    ]
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("rtsoak-load network vs stress-ng, loopback, one stream each")
    say(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    say(f"kernel: {platform.release()} ({platform.version()})")
    say(f"cpus: {os.cpu_count()}")
    ver = subprocess.run(["stress-ng", "--version"], capture_output=True, text=True).stdout.strip()
    say(f"stress-ng: {ver}")
    say(f"pairs: {a.pairs}, {a.seconds} s per run, order alternating within each pair")
    say()
    with tempfile.TemporaryDirectory() as tmp:
        for name, proto, size, stressor, key, unit in cases:
            ours, ref = [], []
            for i in range(a.pairs):
                order = ["ours", "ref"] if i % 2 == 0 else ["ref", "ours"]
                for who in order:
                    if who == "ours":
                        cmd, r = run_ours(a.load, proto, size, a.seconds)
                        ours.append(r)
                    else:
                        cmd, r = run_stress_ng(stressor, a.seconds, tmp)
                        ref.append(r)
                    if i == 0:
                        say(f"{name} {who}: {' '.join(cmd)}")
            say(f"{name}: {unit}")
            say(f"  {'pair':>4} {'rtsoak-load':>14} {'stress-ng':>14} {'ratio':>7}"
                f"   (Mbit/s: ours / stress-ng)")
            for i, (o, r) in enumerate(zip(ours, ref)):
                say(f"  {i + 1:>4} {o[key]:>14.0f} {r[key]:>14.0f} {o[key] / r[key]:>7.2f}"
                    f"   ({o['mbit']:.0f} / {r['mbit']:.0f})")
            mo = statistics.median(x[key] for x in ours)
            mr = statistics.median(x[key] for x in ref)
            say(f"  median {mo:>12.0f} {mr:>14.0f} {mo / mr:>7.2f}")
            say()
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
