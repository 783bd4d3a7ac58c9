#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtsoak-load fileio against stress-ng --hdd: write throughput in alternating pairs.

Usage: bench/fileio-vs-stress-ng.py [--load PATH] [--dir DIR] [--pairs N] [--seconds S]
                                     [--out FILE]

Both tools write and read back files of the same size with the same block size and worker
count, in the same directory, one after the other (the order flips every pair so that drift
on a shared machine does not favour either).  The figure compared is wall-clock write
throughput: bytes written / run time.

stress-ng's own "MB/sec write rate" divides by the time spent inside write() only (not the
reads, not the unlinks), so it is shown for information but not compared.  Its bytes written
are derived from its bogo-ops, which count every write and every read of write-size bytes:
per file, N = hdd-bytes / write-size writes then N reads.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

MiB = 1024 * 1024

# (name, our options, stress-ng --hdd-opts, what could not be matched)
CONFIGS = [
    ("buffered",
     ["--no-fsync", "--no-verify"],
     "wr-seq,rd-seq",
     "rtsoak fileio always calls posix_fadvise(DONTNEED) after writing a file, which starts "
     "writeback of its dirty pages; stress-ng leaves them to be discarded on unlink. stress-ng "
     "unlinks each file right after creating it, rtsoak after reading it back."),
    ("direct",
     ["--direct", "--no-fsync", "--no-verify"],
     "direct,wr-seq,rd-seq",
     "none beyond the unlink timing above (both use O_DIRECT for writes and reads)."),
]
NOT_MATCHED_FSYNC = (
    "fsync: rtsoak fileio fsyncs once per file (its default); stress-ng's 'fsync' hdd option "
    "fsyncs after every write, so the two cannot be matched and both runs here are without "
    "fsync. Verification: off on both sides (stress-ng checks data only with --verify).")


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "?"


def machine_facts(directory):
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    # The mount the directory is on, from /proc/mounts ("stat -f" calls ext4 "ext2/ext3").
    dev, fs, best = "?", "?", ""
    real = os.path.realpath(directory)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                src, mnt, typ = line.split()[:3]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    dev, fs, best = src, typ, mnt
    except OSError:
        pass
    return [
        f"date:        {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"kernel:      {platform.release()} ({platform.machine()})",
        f"cpu:         {cpu}, {os.cpu_count()} online",
        f"memory:      {mem}",
        f"directory:   {directory} on {dev} ({fs})",
        f"stress-ng:   {sh(['stress-ng', '--version'])}",
        f"rtsoak:      {sh(['git', '-C', os.path.dirname(os.path.abspath(__file__)), 'describe', '--always', '--dirty'])}",
    ]


def run_ours(load, directory, seconds, common, extra):
    cmd = [load, "--json", "-d", f"{seconds}s", "fileio", "--dir", directory] + common + extra
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    j = json.loads(p.stdout)
    count = next(m["count"] for m in j["metrics"] if m["name"] == "write")
    return cmd, count / j["seconds"] / MiB, None


def run_ref(directory, seconds, workers, file_size, block, hdd_opts):
    with tempfile.NamedTemporaryFile(suffix=".yaml", delete=False) as y:
        yaml_path = y.name
    cmd = ["stress-ng", "--hdd", str(workers), "--hdd-bytes", f"{file_size // MiB}m",
           "--hdd-write-size", f"{block // 1024}k", "--hdd-opts", hdd_opts,
           "--temp-path", directory, "-t", str(seconds), "--metrics", "--yaml", yaml_path]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    with open(yaml_path) as f:
        text = f.read()
    os.unlink(yaml_path)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")

    def field(name):
        m = re.search(rf"^\s*{name}:\s*([0-9.eE+-]+)", text, re.M)
        if not m:
            sys.exit(f"no {name} in stress-ng's YAML:\n{text}")
        return float(m.group(1))

    ops, wall, own = field("bogo-ops"), field("wall-clock-time"), field("mbsec-write-rate")
    # Per worker and file: n writes, then n reads.  Split the ops of all workers evenly.
    n = file_size // block
    per_worker = ops / workers
    files, rest = divmod(per_worker, 2 * n)
    writes = (files * n + min(rest, n)) * workers
    return cmd, writes * block / wall / MiB, own


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", default=os.path.join(here, "..", "build", "loadgen", "rtsoak-load"))
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--block-size", type=int, default=64 * 1024)
    ap.add_argument("--file-size", type=int, default=64 * MiB)
    ap.add_argument("--out", default=os.path.join(here, "results-fileio-vs-stress-ng.txt"))
    a = ap.parse_args()
    if not shutil.which("stress-ng"):
        sys.exit("stress-ng is not installed")

    work = tempfile.mkdtemp(prefix="rtsoak-bench-fileio.", dir=a.dir)
    common = ["--block-size", f"{a.block_size // 1024}K", "--file-size",
              f"{a.file_size // MiB}M", "--workers", str(a.workers)]
    lines = ["rtsoak-load fileio vs stress-ng --hdd: wall-clock write throughput (MiB/s)", ""]
    lines += machine_facts(work)
    lines += ["", f"{a.pairs} alternating pairs of {a.seconds} s runs per configuration; "
              f"block {a.block_size // 1024} KiB, file {a.file_size // MiB} MiB, "
              f"{a.workers} worker(s).", "Not matched: " + NOT_MATCHED_FSYNC, ""]
    print("\n".join(lines), flush=True)
    summary = []
    try:
        for name, ours_extra, hdd_opts, unmatched in CONFIGS:
            block = [f"== {name} ==", f"Not matched: {unmatched}"]
            ours, ref = [], []
            for i in range(a.pairs):
                order = ["ours", "ref"] if i % 2 == 0 else ["ref", "ours"]
                for who in order:
                    if who == "ours":
                        cmd, mibs, _ = run_ours(a.load, work, a.seconds, common, ours_extra)
                        ours.append(mibs)
                        line = f"pair {i + 1}  rtsoak    {mibs:8.1f} MiB/s"
                    else:
                        cmd, mibs, own = run_ref(work, a.seconds, a.workers, a.file_size,
                                                 a.block_size, hdd_opts)
                        ref.append(mibs)
                        line = (f"pair {i + 1}  stress-ng {mibs:8.1f} MiB/s   "
                                f"(its own in-write() rate: {own:.1f} MB/s)")
                    if i == 0:
                        block.append("command: " + " ".join(cmd))
                    block.append(line)
                    print(block[-1], flush=True)
            mo, mr = statistics.median(ours), statistics.median(ref)
            block += [f"median: rtsoak {mo:.1f} MiB/s, stress-ng {mr:.1f} MiB/s, "
                      f"ratio rtsoak/stress-ng {mo / mr:.2f}", ""]
            summary.append(f"{name:9s} rtsoak {mo:8.1f}  stress-ng {mr:8.1f}  ratio {mo / mr:.2f}")
            print(block[-2], flush=True)
            lines += block
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines += ["Summary (medians, MiB/s written per second of wall-clock time):"] + summary
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(summary))
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
