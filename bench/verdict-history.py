#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times the verdict and the farm-wide pages against the number of releases a farm holds.

A farm's history of releases must not make any request slow: the newest release's verdict
with 1, 8, 12, 50 and 500 earlier releases in its series, and the overview (/), /metrics,
/api/v1/kernels and /api/v1/series with 500 releases in one series and with 50 series of 10.
Each release is one run of a few 1-minute intervals from one enrolled machine (posted with
rtsoak-replay), too short to qualify: no release of the series qualifies, which is the case
where a baseline search that judges the older releases costs the most.

Every --server BINARY given (label=path) gets a farm of its own, filled the same way and
measured in the same run, one after the other for each farm size: a before/after comparison
of two builds.  After the server starts, the benchmark waits for its verdict log's first pass
(the log line "Verdict log: first pass ..." or, for a server that does not write it, until the
log has a row for every release or --timeout passes) and reports how long that took; then each
request is timed from the client --repeat times (median and maximum; a request that takes
longer than --timeout is reported as such).  Last, SIGTERM: how long the server takes to exit
(SIGKILL after 60 s).

Usage (from the source tree after building into build/):
    bench/verdict-history.py [--server after=build/server/rtsoak-server]
        [--server before=/path/to/old/rtsoak-server] [--sizes 1,8,12,50,500] [--repeat 5]
        [--timeout 60] [--pg postgresql://...]   # or run it under tests/pg-run.sh
"""
import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchlib import cpu_model, proc_cpu_s, start_server  # noqa: E402

BUILD = os.path.join(HERE, "..", "build")
MACHINE = "0123456789abcdef0123456789abcdef"


def psql(uri, sql):
    return subprocess.run(["psql", "-XAtq", uri, "-c", sql], check=True, capture_output=True,
                          text=True).stdout.strip()


class Farm:
    """A farm database of its own: an SQLite file in tmp, or a PostgreSQL database."""

    def __init__(self, a, tmp, name):
        self.pg = a.pg
        if a.pg:
            psql(a.pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            psql(a.pg, f'CREATE DATABASE "{name}"')
            base, _, query = a.pg.partition("?")
            self.db = base.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
            self.name = name
        else:
            self.db = os.path.join(tmp, name + ".db")

    def drop(self):
        if self.pg:
            psql(self.pg, f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def releases(shape, n):
    """(release, series) names: n releases of one series, or n series of 10 releases."""
    if shape == "one series":
        return [f"6.6.{k}-rt1" for k in range(1, n + 1)]
    return [f"5.{s}.{k}-rt1" for s in range(1, n + 1) for k in range(1, 11)]


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def fill(a, server, farm, names, tmp):
    """One machine, one run of three 1-minute intervals per release, one after the other,
    ending an hour ago."""
    res = subprocess.run([server, "--db", farm.db, "enroll", MACHINE], capture_output=True,
                         text=True)
    if res.returncode != 0:
        sys.exit(f"enroll failed: {res.stderr}")
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write(res.stdout.strip().splitlines()[-1] + "\n")
    proc, url, _ = start_server(server, farm.db, os.path.join(tmp, "fill.log"),
                                ["--set", "Verdict.Watch=0", "--set", "Verdict.Regression=no"])
    end = int(time.time()) - 3600
    try:
        for i, rel in enumerate(names):
            start = end - (len(names) - i) * 240
            cmd = [a.replay, "--server", url, "--token-file", token, "--machine", MACHINE,
                   "--release", rel, "--kernel", rel, "--from", iso(start),
                   "--to", iso(start + 180), "--interval", "1min", "--cpus", "2",
                   "--run-id", str(i + 1), "--rotation", "idle 1h", "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"replay of {rel} failed: {r.stderr}")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(url, timeout):
    t = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except (TimeoutError, urllib.error.URLError, OSError):
        return None, "timeout"
    return time.monotonic() - t, status


def first_pass(log, proc, n, timeout):
    """Seconds until the verdict log's first pass is over (None: not within timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        with open(log, errors="replace") as f:
            text = f.read()
        if "Verdict log: first pass" in text or text.count(" is now ") >= n:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def stop_time(proc):
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
        return time.monotonic() - t
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def fmt(times, timeouts, timeout):
    if not times:
        return f"> {timeout:.0f} s (all {timeouts} timed out)"
    s = "median %8.1f ms  max %8.1f ms" % (statistics.median(times) * 1000, max(times) * 1000)
    return s + (f"  ({timeouts} timed out)" if timeouts else "")


def measure(a, label, server, shape, n, tmp, say):
    names = releases(shape, n)
    farm = Farm(a, tmp, f"vh_{label}_{shape.replace(' ', '_')}_{n}")
    t = time.monotonic()
    fill(a, server, farm, names, tmp)
    say(f"  [{label}] {len(names)} releases posted in {time.monotonic() - t:.1f} s")
    log = os.path.join(tmp, f"{label}-{n}.log")
    proc, url, _ = start_server(server, farm.db, log, timeout_s=120)
    passed = first_pass(log, proc, len(names), a.timeout)
    say(f"  [{label}] the verdict log's first pass: " +
        (f"{passed:.2f} s" if passed is not None else f"not over after {a.timeout:.0f} s"))
    newest = names[-1] if shape == "one series" else names[-1]
    routes = [("verdict of the newest", f"/api/v1/kernels/{newest}/verdict")]
    if shape != "one series" or n >= 50:
        routes += [("overview /", "/"), ("/metrics", "/metrics"),
                   ("/api/v1/kernels", "/api/v1/kernels"), ("/api/v1/series", "/api/v1/series")]
    cpu0 = proc_cpu_s(proc.pid)
    for what, path in routes:
        times, timeouts = [], 0
        for _ in range(a.repeat):
            dt, status = get(url + path, a.timeout)
            if dt is None:
                timeouts += 1
                if timeouts >= 2:
                    break
                continue
            if status != 200:
                sys.exit(f"{path}: {status}")
            times.append(dt)
        say(f"  [{label}] {what:24s} {fmt(times, timeouts, a.timeout)}")
    say(f"  [{label}] server CPU while asked: {proc_cpu_s(proc.pid) - cpu0:.2f} s")
    st = stop_time(proc)
    say(f"  [{label}] SIGTERM to exit: " + (f"{st:.2f} s" if st is not None else
                                           "still running after 60 s (SIGKILL)"))
    farm.drop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", action="append", default=[],
                   help="LABEL=BINARY (repeatable; default after=build/server/rtsoak-server)")
    p.add_argument("--replay", default=os.path.join(BUILD, "tools", "rtsoak-replay"))
    p.add_argument("--sizes", default="1,8,12,50,500")
    p.add_argument("--series", type=int, default=50, help="series of 10 releases (0: none)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--pg", default=os.environ.get("RTSOAK_TEST_PG", ""))
    p.add_argument("--out", default="")
    a = p.parse_args()
    servers = [s.split("=", 1) for s in a.server] or [
        ["after", os.path.join(BUILD, "server", "rtsoak-server")]]
    out = open(a.out, "a") if a.out else None

    def say(s=""):
        print(s, flush=True)
        if out:
            out.write(s + "\n")
            out.flush()

    say(f"== bench/verdict-history.py on {platform.node()}, {cpu_model()}, "
        f"{os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    say(f"store: {'PostgreSQL ' + psql(a.pg, 'SHOW server_version') if a.pg else 'SQLite'}; "
        f"servers: {', '.join(f'{k}={v}' for k, v in servers)}")
    cases = [("one series", int(n)) for n in a.sizes.split(",")]
    if a.series:
        cases.append(("series of 10", a.series))
    with tempfile.TemporaryDirectory(prefix="rtsoak-vh.") as tmp:
        for shape, n in cases:
            say(f"-- {n} {'releases in one series' if shape == 'one series' else 'series of 10 releases'}"
                f" (load average {' '.join(open('/proc/loadavg').read().split()[:3])})")
            for label, server in servers:
                measure(a, label, server, shape, n, tmp, say)
    say()


if __name__ == "__main__":
    main()
