#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtsoak-server migrate: an SQLite farm copied into PostgreSQL (the server of pg-run.sh) and
verified; kill -9 in the middle of the copy and the copy run again ends the same; the servers on
both stores give the same answers; a target that holds another farm is refused.  TAP output."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farmlib import drop_farm_database, farm_database  # noqa: E402

SERVER = os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server")
REPLAY = os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay")
MACHINES = ["d1" + "0" * 30, "d2" + "0" * 30]
RELEASE = "6.6.30-rt31"
STAFF = None  # a staff token of the farm, for the staff-only answers
results = []


def check(what, ok, detail=""):
    results.append((ok, what, detail))


def run(*args, timeout=300):
    return subprocess.run([SERVER, *args], capture_output=True, text=True, timeout=timeout)


class Server:
    def __init__(self, db, log):
        self.log = log
        self.proc = subprocess.Popen([SERVER, f"--db={db}", "--listen", "127.0.0.1:0", "--rate",
                                      "1000000", "--burst", "1000000", "--cache-warming", "no"],
                                     stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        self.url = None
        for _ in range(600):
            text = open(log).read()
            if "Listening on " in text:
                self.url = text.split("Listening on ")[1].split()[0]
                break
            time.sleep(0.05)
        if not self.url:
            raise RuntimeError("the server did not start: " + open(log).read())

    def get(self, path):
        rq = urllib.request.Request(self.url + path)
        if path.startswith("/api/v1/notifications"):
            rq.add_header("Authorization", f"Bearer {STAFF}")
        with urllib.request.urlopen(rq, timeout=60) as r:
            return json.load(r)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def make_farm(d, db):
    tokens = {}
    for m in MACHINES:
        tokens[m] = run(f"--db={db}", "enroll", m).stdout.strip()
    srv = Server(db, os.path.join(d, "sqlite.log"))
    try:
        for i, m in enumerate(MACHINES):
            p = subprocess.run([REPLAY, "--server", srv.url, "--token", tokens[m], "--machine", m,
                                "--kernel", RELEASE, "--days", "2", "--to", "1h ago", "--cpus",
                                "2", "--batch", "1000", "--quiet", "--spike",
                                f"{30 - 10 * i}h ago,1,400us,kworker/1:{i}", "--gap", "20h ago,19h ago",
                                "--unclean", "10h ago"], capture_output=True, text=True,
                               timeout=300)
            if p.returncode != 0:
                raise RuntimeError("rtsoak-replay: " + p.stderr)
        # The histogram cache, a waiver, a window, settings, the spikes' trace captures, a
        # notification: every table but the notifier's state has rows.
        srv.get(f"/api/v1/machines/{MACHINES[0]}/histogram?from=2d%20ago&to=now")
    finally:
        srv.stop()
    run(f"--db={db}", "machine", "set", MACHINES[1], "--groups", "lab", "--reason", "moved")
    run(f"--db={db}", "maintenance", "add", MACHINES[0], "--from", "+1h", "--to", "+2h",
        "--reason", "kernel upgrade")
    global STAFF
    STAFF = run(f"--db={db}", "admin-token", "alice").stdout.strip()
    # A notification queued for a channel that nobody serves: its delivery stays pending.
    conf = os.path.join(d, "notify.conf")
    with open(conf, "w") as f:
        f.write("[Notify.lab]\nWebhook=http://127.0.0.1:9/hook\n")
    p = run(f"--config={conf}", f"--db={db}", "notifications", "test", "lab", "--by", "alice")
    if p.returncode != 0:
        raise RuntimeError("notifications test: " + p.stderr)


def count(target, table):
    bindir = os.environ.get("RTSOAK_TEST_PG_BIN", "/usr/bin")
    out = subprocess.run([os.path.join(bindir, "psql"), "-At", target, "-c",
                          f"SELECT count(*) FROM {table}"], capture_output=True, text=True)
    return int(out.stdout.strip() or 0) if out.returncode == 0 else 0


def test_interrupted_copy(db, target):
    with sqlite3.connect(db) as c:
        total = c.execute("SELECT count(*) FROM intervals").fetchone()[0]
    p = subprocess.Popen([SERVER, "migrate", "--from", db, "--to", target, "--chunk", "50"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    copied = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        copied = count(target, "intervals")
        if copied > 0:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    check("kill -9 in the middle of the copy", 0 < copied < total,
          f"{copied} of {total} intervals copied at the kill")
    again = run("migrate", "--from", db, "--to", target)
    check("the copy run again goes on and verifies", again.returncode == 0 and
          "going on after interval" in again.stderr and "Verified:" in again.stderr,
          again.stderr[-2000:])
    third = run("migrate", "--from", db, "--to", target)
    check("a third run copies nothing and verifies", third.returncode == 0 and
          "rows copied" not in third.stderr and "Verified:" in third.stderr, third.stderr[-2000:])
    check("the trace captures copied with their raw events", count(
        target, "traces WHERE raw IS NOT NULL AND culprit_name LIKE 'kworker/1:_'") == 2,
          str(count(target, "traces")))


def strip(v, drop=("asked_at", "asked_at_ns")):
    """An answer without the moment it was asked (and the other keys of drop)."""
    if isinstance(v, dict):
        return {k: strip(x, drop) for k, x in v.items() if k not in drop}
    if isinstance(v, list):
        return [strip(x, drop) for x in v]
    return v


def difference(x, y, at="$"):
    """Where two answers first differ, and how: the path of the key and both values."""
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if x.get(k, "<absent>") != y.get(k, "<absent>"):
                return difference(x.get(k, "<absent>"), y.get(k, "<absent>"), f"{at}.{k}")
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (a, b) in enumerate(zip(x, y)):
            if a != b:
                return difference(a, b, f"{at}[{i}]")
    return f"{at}: SQLite {json.dumps(x)[:600]}\nPostgreSQL {json.dumps(y)[:600]}"


def test_same_answers(d, db, target):
    a = Server(db, os.path.join(d, "a.log"))
    b = Server(target, os.path.join(d, "b.log"))
    now = time.time_ns()
    paths = ["/api/v1/machines", f"/api/v1/kernels/{RELEASE}/verdict?at={now}",
             f"/api/v1/kernels/{RELEASE}/verdict?at={now - 86400 * 10**9}&known_at={now}",
             f"/api/v1/kernels/{RELEASE}/compare?with={RELEASE}", f"/api/v1/kernels?at={now}",
             f"/api/v1/series?at={now}", "/api/v1/maintenance", "/api/v1/waivers",
             "/api/v1/notifications?kind=test"]  # (each server tells its own verdict changes)
    for m in MACHINES:
        paths += [f"/api/v1/machines/{m}/intervals?from={now - 2 * 86400 * 10**9}&to={now}"
                  "&step=1h", f"/api/v1/machines/{m}/histogram?from={now - 2 * 86400 * 10**9}"
                  f"&to={now}", f"/api/v1/machines/{m}/events", f"/api/v1/machines/{m}/runs",
                  f"/api/v1/machines/{m}/settings", f"/api/v1/traces?machine={m}"]
    try:
        for path in paths:
            # Each server fails the delivery to the channel it does not have, at its start.
            drop = ("asked_at", "asked_at_ns") + (("done",) if "notifications" in path else ())
            x, y = strip(a.get(path), drop), strip(b.get(path), drop)
            check(f"the same answer on both stores: {path.split('?')[0]}", x == y,
                  "" if x == y else difference(x, y))
    finally:
        a.stop()
        b.stop()


def test_other_farm_refused(d, db):
    other = farm_database(os.path.join(d, "other"))
    try:
        run(f"--db={other}", "enroll", "e" * 32)
        p = run("migrate", "--from", db, "--to", other)
        check("a target holding another farm is refused", p.returncode == 1 and
              "not an interrupted copy" in p.stderr, p.stderr[-1000:])
    finally:
        drop_farm_database(other)


def main():
    if not os.environ.get("RTSOAK_TEST_PG"):
        print("1..0 # SKIP migrate copies into PostgreSQL: run by pg-run.sh")
        return 0
    d = tempfile.mkdtemp(prefix="rtsoak-migrate-")
    db = os.path.join(d, "farm.db")
    target = farm_database(d)
    try:
        make_farm(d, db)
        test_interrupted_copy(db, target)
        test_same_answers(d, db, target)
        test_other_farm_refused(d, db)
    except Exception as e:  # a broken step fails the test with what happened
        check("the test ran", False, repr(e))
    finally:
        drop_farm_database(target)
        shutil.rmtree(d, ignore_errors=True)
    print(f"1..{len(results)}")
    for i, (ok, what, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok and detail:
            for line in str(detail).splitlines():
                print(f"# {line}")
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
