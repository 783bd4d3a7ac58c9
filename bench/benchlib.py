# SPDX-License-Identifier: MIT
"""What the farm-server benchmarks share: the host's CPU model for the results header, and
rtsoak-server started on a loopback port the kernel picks, its log in a file."""

import os
import platform
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

# The build directory whose programs the benchmarks run: build/ in the source tree, or
# RTSOAK_BUILD (the tests run the scripts on the build they test).
BUILD = os.environ.get("RTSOAK_BUILD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "build")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def start_server(server, db, log, extra=(), timeout_s=10):
    """rtsoak-server --db DB --listen 127.0.0.1:0 EXTRA..., stderr into log (a pipe would fill
    up with the request log and stall the server).  Returns (process, base URL, argv); exits
    with the log when it does not say where it listens within timeout_s (the start checks the
    database: give a farm of gigabytes minutes)."""
    argv = [server, "--db", db, "--listen", "127.0.0.1:0"] + list(extra)
    with open(log, "wb") as errf:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errf)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log, errors="replace") as f:
            m = re.search(r"Listening on (\S+)", f.read())
        if m:
            url = m.group(1)
            return proc, url if url.startswith("http") else "http://" + url, argv
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    with open(log, errors="replace") as f:
        sys.exit(f"rtsoak-server did not start: {f.read()}")


def proc_cpu_s(pid):
    """User + system CPU seconds of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_get(url, timeout_s=600):
    """GET url: (seconds from the request to the answer's last byte, the body); exits naming
    the URL for an answer other than 200."""
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        body = r.read()
        if r.status != 200:
            sys.exit(f"{url}: {r.status}")
    return time.perf_counter() - t, body


def farm_database(pg, name, tmp):
    """A farm for a benchmark: the database name made afresh on the PostgreSQL server of the
    URI pg (its URI returned), or without pg a SQLite file in tmp."""
    if not pg:
        return os.path.join(tmp, "farm.db")
    subprocess.run(["psql", "-q", "-d", pg, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)",
                    "-c", f"CREATE DATABASE {name}"], check=True)
    u = urllib.parse.urlsplit(pg)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, ""))


def write_results(out, path, last_line):
    """Ends a run's lines out with last_line and the load average, prints those two and
    appends every line to the results file path."""
    out.append(last_line)
    out.append(f"# load average after: {os.getloadavg()}")
    print("\n".join(out[-2:]))
    with open(path, "a") as f:
        f.write("\n".join(out) + "\n\n")
