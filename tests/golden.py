#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The golden corpus: every answer of the farm server for one fixed farm, kept to prove that a
change of the server's code changed no answer.

The farm is built the same way every time: machines enrolled, settings changed, waivers and
maintenance windows given, histories posted with rtsoak-replay with fixed seeds, in phases, each
with the server's clock held at a fixed moment (libfaketime, frozen: what the server stamps on
receipt is the same at every build).  Then, with the clock held at the moment the questions are
asked, every route of the API, every page and plot (with their parameters: `?at=`/`?known_at=`
fixed moments, windows, steps, CPUs, scenarios, errors) and the `rtsoak-server` commands that
read the farm are asked, and their status, content type and body kept.

  golden.py record CORPUS    build the farm, ask, write the corpus (gzip'ed JSON lines)
  golden.py check CORPUS     build the farm, ask, compare with the corpus (TAP: one line per
                             answer that differs, with the first difference)
  golden.py list             the questions asked

The farm goes to an SQLite file, or, under tests/pg-run.sh, to a PostgreSQL database; each store
has its corpus (tests/golden/corpus-sqlite.jsonl.gz, corpus-pg.jsonl.gz).  Environment:
RTSOAK_SERVER, RTSOAK_REPLAY, RTSOAK (the binaries), GOLDEN_KEEP=1 keeps the farm's directory.
Without libfaketime the test is skipped, saying why.
"""
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farmlib import drop_farm_database, farm_database  # noqa: E402

FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1")
SERVER = os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server")
REPLAY = os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay")
RTSOAK = os.environ.get("RTSOAK", "build/cli/rtsoak")

SEC = 10 ** 9
MIN, HOUR, DAY = 60 * SEC, 3600 * SEC, 86400 * SEC
# The phases: the server's clock at each (UTC).
P1 = "2026-11-05T00:00:00Z"  # enrolment, and the history of the month before, replayed
P2 = "2026-11-12T06:00:00Z"  # more data, late data, waivers, windows, settings changed
P3 = "2026-11-16T00:00:00Z"  # the newest data
Q = "2026-11-16T12:00:00Z"   # the questions

RULE = """[Verdict]
Period=3d
Scenarios=idle 12h, cpu 12h
ScenarioLoads=cpu: cpu
MaxGap=15min
Watch=1h
Regression=yes

[Series.lab]
Releases=*-lab*
Group=rack-a

# Its checker and the verdict log's pass would race to number the notifications: their
# words are tests/test-notifications.py's to check.
[Notifications]
Enabled=no
"""

MACHINES = {  # name: (id, enroll options)
    "lab-a": ("a0000000000000000000000000000001", []),
    "lab-b": ("b0000000000000000000000000000002", []),
    "lab-c": ("c0000000000000000000000000000003", ["--gating", "no"]),
    "lab-d": ("d0000000000000000000000000000004", ["--groups", "rack-a"]),
    "lab-e": ("e0000000000000000000000000000005", ["--bound", "200us"]),
    "lab-f": ("f0000000000000000000000000000006", ["--groups", "rack-z"]),
}
ROT = "idle 1h, cpu 1h"


def ns(text):
    """Unix nanoseconds of an RFC 3339 UTC time."""
    return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone) * SEC


def iso(t_ns):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_ns // SEC))


class Farm:
    def __init__(self, d):
        self.dir = d
        self.db = farm_database(d)
        self.conf = os.path.join(d, "server.conf")
        with open(self.conf, "w") as f:
            f.write(RULE)
        self.proc = self.url = None
        self.tokens = {}
        self.staff = None
        self.lib = next((x for x in FAKETIME_LIBS if os.path.exists(x)), None)

    def env(self, clock):
        return dict(os.environ, LD_PRELOAD=self.lib, FAKETIME=clock.replace("T", " ").rstrip("Z"),
                    FAKETIME_DONT_FAKE_MONOTONIC="1", FAKETIME_FORCE_MONOTONIC_FIX="0",
                    FAKETIME_NO_CACHE="1", TZ="UTC")

    def cli(self, clock, *args, check=True):
        p = subprocess.run([SERVER, f"--db={self.db}", f"--config={self.conf}", *args],
                           capture_output=True, text=True, timeout=120, env=self.env(clock))
        if check and p.returncode != 0:
            raise RuntimeError(f"rtsoak-server {' '.join(args)}: {p.returncode} {p.stderr}")
        return p

    def start(self, clock):
        log = os.path.join(self.dir, "server.log")
        self.logf = open(log, "a")
        offset = self.logf.tell()
        self.proc = subprocess.Popen(
            [SERVER, f"--db={self.db}", f"--config={self.conf}", "--listen", "127.0.0.1:0",
             "--rate", "1000000", "--burst", "1000000", "--threads", "2", "--cache-warming",
             "no"], stdout=subprocess.DEVNULL, stderr=self.logf, env=self.env(clock))
        deadline = time.monotonic() + 60
        url = passed = None
        while time.monotonic() < deadline and not (url and passed):
            with open(log) as f:
                f.seek(offset)
                text = f.read()
            m = re.search(r"Listening on (http://\S+)", text)
            url = m and m.group(1)
            passed = "Verdict log: first pass done" in text
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server stopped: {text[-2000:]}")
            time.sleep(0.02)
        if not (url and passed):
            raise RuntimeError("the server did not start or its verdict log did not pass")
        self.url = url

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
            self.logf.close()
            self.proc = None

    def replay(self, name, release, start, end, run_id, *extra, seed=1):
        mid = MACHINES[name][0]
        cmd = [REPLAY, "--server", self.url, "--token", self.tokens[name], "--machine", mid,
               "--hostname", name, "--release", release, "--kernel", release.split("-lab")[0],
               "--from", start, "--to", end, "--interval", "10min", "--cpus", "2",
               "--run-id", str(run_id), "--rotation", ROT, "--seed", str(seed), "--quiet",
               *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"replay {name} {release}: {p.stderr}")

    def post(self, path, body, token):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     method="POST", headers={
                                         "Content-Type": "application/json",
                                         "Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


def build(f):
    """The farm, phase by phase."""
    for name, (mid, opts) in MACHINES.items():
        f.tokens[name] = f.cli(P1, "enroll", mid, *opts, "--reason", "golden farm",
                               "--by", "golden").stdout.strip()
    f.staff = f.cli(P1, "admin-token", "golden-staff").stdout.strip()
    f.cli(P1, "read-token", "golden-reader")
    # Phase 1: a month of history, replayed.
    f.start(P1)
    for name in ("lab-a", "lab-b", "lab-d", "lab-e"):
        f.replay(name, "6.6.29-rt30", "2026-10-20T00:00:00Z", "2026-10-24T00:00:00Z", 1)
    f.replay("lab-a", "6.6.30-rt31", "2026-10-24T00:10:00Z", "2026-10-28T00:00:00Z", 2,
             "--spike", "2026-10-25T03:05:00Z,1,150us")
    f.replay("lab-b", "6.6.30-rt31", "2026-10-24T00:10:00Z", "2026-10-28T00:00:00Z", 2,
             "--latency", "60us")
    f.replay("lab-d", "6.6.30-rt31", "2026-10-24T00:10:00Z", "2026-10-28T00:00:00Z", 2,
             "--gap", "2026-10-26T10:00:00Z,2026-10-26T11:30:00Z")
    f.replay("lab-e", "6.6.30-rt31", "2026-10-24T00:10:00Z", "2026-10-28T00:00:00Z", 2,
             "--unclean", "2026-10-26T04:00:00Z")
    f.replay("lab-c", "6.6.30-rt31", "2026-10-24T00:10:00Z", "2026-10-28T00:00:00Z", 1,
             "--spike", "2026-10-25T06:05:00Z,0,450us,kworker/0:1")
    f.replay("lab-f", "6.1.90-rt40", "2026-10-20T00:00:00Z", "2026-10-23T12:00:00Z", 1,
             "--load-down", "2026-10-21T01:00:00Z,30min,cpu")
    f.stop()
    # Phase 2: the next release, a machine's clock ahead, data that arrives late, staff work.
    f.start(P2)
    # The machines' inventories: lab-a's THP changed while its run was up, lab-d's BIOS
    # updated in its maintenance window (its next run, in phase 3, finds the new version).
    inventory = ["--inventory", "dmi.bios_version=1.2.3", "--inventory", "cmdline.isolcpus=1"]
    phase2_inventory = {
        "lab-a": inventory + ["--inventory", "thp.enabled=never", "--inventory-change",
                              "2026-11-10T12:00:00Z,thp.enabled=always"],
        "lab-b": [],
        "lab-d": inventory + ["--inventory", "thp.enabled=never"],
    }
    for name in ("lab-a", "lab-b", "lab-d"):
        f.replay(name, "6.6.31-rt32", "2026-11-08T00:00:00Z", "2026-11-12T00:00:00Z", 10,
                 "--spike", "2026-11-09T02:05:00Z,0,300us,irq/24-eth0", *phase2_inventory[name],
                 seed=2)
    f.replay("lab-e", "6.6.31-rt32", "2026-11-08T00:00:00Z", "2026-11-10T00:00:00Z", 10,
             "--probe-down", "1,2026-11-09T00:00:00Z,2026-11-09T01:00:00Z", seed=2)
    f.replay("lab-f", "6.1.91-rt41-lab1", "2026-11-10T00:00:00Z", "2026-11-12T05:00:00Z", 10,
             "--clock-ahead", "2h,2026-11-12T00:00:00Z", seed=2)
    st, text = f.post("/api/v1/machines/" + MACHINES["lab-b"][0] + "/settings",
                      {"bound_ns": 150000, "labels": {"room": "b2"},
                       "reason": "the board was replaced"}, f.staff)
    assert st == 201, (st, text)
    st, text = f.post("/api/v1/machines/" + MACHINES["lab-d"][0] + "/maintenance",
                      {"from": "2026-11-12T07:00:00Z", "to": "2026-11-12T09:00:00Z",
                       "reason": "BIOS update"}, f.staff)
    assert st == 201, (st, text)
    f.stop()
    v = json.loads(f.cli(P2, "verdict", "6.6.30-rt31", check=False).stdout)
    spike = [p["id"] for p in v["problems"]
             if p["kind"] == "violation" and p["machine"] == MACHINES["lab-a"][0]]
    assert len(spike) == 1, v["problems"]
    f.cli(P2, "waive", "6.6.30-rt31", spike[0], "--reason", "hypervisor stall, lab ticket 42",
          "--by", "golden")
    f.cli(P2, "machine", "set", MACHINES["lab-e"][0], "--gating", "no", "--reason",
          "repairs", "--by", "golden")
    # Phase 3: the newest data; a late upload of data stamped before phase 2.
    f.start(P3)
    f.replay("lab-a", "6.6.31-rt32", "2026-11-12T00:00:00Z", "2026-11-15T23:00:00Z", 20,
             "--inventory", "dmi.bios_version=1.2.3", "--inventory", "cmdline.isolcpus=1",
             "--inventory", "thp.enabled=always", seed=3)
    f.replay("lab-b", "6.6.31-rt32", "2026-11-12T00:00:00Z", "2026-11-15T23:00:00Z", 20,
             seed=3)
    f.replay("lab-d", "6.6.31-rt32", "2026-11-12T09:10:00Z", "2026-11-15T23:00:00Z", 20,
             "--inventory", "dmi.bios_version=1.2.5", "--inventory", "cmdline.isolcpus=1",
             "--inventory", "thp.enabled=never", seed=3)
    f.replay("lab-c", "6.6.31-rt32", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", 20,
             seed=3)
    f.stop()


def questions():
    """(kind, what): "GET" paths, "CLI" argument lists of rtsoak-server, "RTSOAK" of rtsoak."""
    ids = {n: m[0] for n, (m) in ((n, v) for n, v in MACHINES.items())}
    a, b, c, e = ids["lab-a"], ids["lab-b"], ids["lab-c"], ids["lab-e"]
    rels = ["6.6.29-rt30", "6.6.30-rt31", "6.6.31-rt32", "6.1.90-rt40", "6.1.91-rt41-lab1"]
    moments = ["2026-10-27T12:00:00Z", "2026-11-10T00:00:00Z", str(ns(P2)), Q]
    qs = []
    g = lambda p: qs.append(("GET", p))  # noqa: E731
    g("/api/v1/machines")
    g("/api/v1/machines?limit=2")
    g("/api/v1/machines?limit=2&offset=2")
    for mid in ids.values():
        g(f"/api/v1/machines/{mid}")
        g(f"/api/v1/machines/{mid}/runs")
        g(f"/api/v1/machines/{mid}/inventory")
        g(f"/api/v1/machines/{mid}/events")
        g(f"/api/v1/machines/{mid}/settings")
        g(f"/api/v1/machines/{mid}/maintenance")
        g(f"/api/v1/machines/{mid}/intervals?from=2026-10-24T00:00:00Z&to=2026-10-25T00:00:00Z"
          "&step=1h")
        g(f"/api/v1/machines/{mid}/histogram?from=2026-10-20T00:00:00Z&to=2026-11-16T00:00:00Z")
        g(f"/traces?machine={mid}".replace("/traces", "/api/v1/traces"))
        g(f"/machines/{mid}")
        g(f"/machines/{mid}?window=30d")
        g(f"/plots/machines/{mid}/histogram.svg?window=30d")
        g(f"/plots/machines/{mid}/longterm.svg?window=30d")
    g(f"/api/v1/machines/{a}/intervals?from=2026-10-25T00:00:00Z&to=2026-10-25T06:00:00Z")
    g(f"/api/v1/machines/{a}/intervals?from=2026-10-25T00:00:00Z&to=2026-10-25T06:00:00Z"
      "&step=5min&limit=10")
    g(f"/api/v1/machines/{a}/intervals?from=2026-10-20T00:00:00Z&to=2026-11-16T00:00:00Z"
      "&step=1d&scenario=cpu")
    g(f"/api/v1/machines/{a}/histogram?from=2026-10-24T00:00:00Z&to=2026-10-28T00:00:00Z"
      "&cpu=1&scenario=idle")
    g(f"/api/v1/machines/{a}/events?type=violation&limit=1")
    g(f"/api/v1/machines/{b}/runs?limit=1&offset=1")
    g(f"/api/v1/machines/{a}/inventory?limit=1&offset=1")
    g(f"/api/v1/traces?machine={c}&cpu=0")
    g(f"/api/v1/traces?machine={a}&from=2026-11-09T00:00:00Z&to=2026-11-10T00:00:00Z")
    for tid in (1, 2, 3, 4, 99):
        g(f"/api/v1/traces/{tid}")
        g(f"/api/v1/traces/{tid}/raw")
        g(f"/traces/{tid}.txt")
    g("/api/v1/kernels")
    g("/api/v1/kernels?limit=2&offset=1")
    for t in moments:
        g(f"/api/v1/kernels?at={t}")
        g(f"/api/v1/series?at={t}")
        for rel in rels:
            g(f"/api/v1/kernels/{urllib.parse.quote(rel)}/verdict?at={t}")
    g(f"/api/v1/kernels?known_at={ns(P2)}")
    g(f"/api/v1/kernels?at=2026-11-10T00:00:00Z&known_at={ns(P2)}")
    for rel in rels:
        r = urllib.parse.quote(rel)
        g(f"/api/v1/kernels/{r}/verdict")
        g(f"/api/v1/kernels/{r}/verdict?known_at={ns(P2)}")
        g(f"/api/v1/kernels/{r}/verdict?at=2026-11-10T00:00:00Z&known_at={ns(P2)}")
        g(f"/api/v1/kernels/{r}/waivers")
        g(f"/api/v1/kernels/{r}/kcidb")
        g(f"/kernels/{r}")
        g(f"/plots/kernels/{r}/coverage.svg")
    g("/api/v1/kernels/6.6.31-rt32/compare?with=6.6.30-rt31")
    g("/api/v1/kernels/6.6.31-rt32/compare?with=6.6.29-rt30&tolerance=50&min_difference=20us")
    g(f"/api/v1/machines/{a}/events?from=2026-10-25T00:00:00Z&to=2026-10-26T00:00:00Z")
    g(f"/api/v1/machines/{e}/events?type=unclean_end")
    g(f"/api/v1/machines/{b}/settings?limit=1&offset=1")
    g("/api/v1/kernels/6.6.30-rt31/waivers?limit=1")
    g("/api/v1/waivers?offset=1")
    g("/api/v1/maintenance?limit=1")
    g("/api/v1/kernels/6.6.30-rt31/compare?with=6.6.29-rt30&limit=1")
    g("/kernels/6.6.31-rt32?compare=6.6.29-rt30")
    g("/api/v1/series")
    for s in ("6.6-rt", "6.1-rt", "lab"):
        g(f"/api/v1/series/{s}/latest-stable")
        g(f"/api/v1/series/{s}/latest-stable?at=2026-11-10T00:00:00Z")
    g("/api/v1/waivers")
    g("/api/v1/maintenance")
    g("/api/v1/maintenance?machine=" + ids["lab-d"])
    qs.append(("STAFF", "/api/v1/notifications"))
    qs.append(("STAFF", "/api/v1/notifications?state=failed"))
    qs.append(("STAFF", "/api/v1/audit"))
    qs.append(("STAFF", "/api/v1/audit?limit=3&offset=2"))
    g("/")
    g(f"/machines/{a}?window=kernel:6.6.30-rt31")
    g(f"/machines/{a}?from=2026-10-25T00:00:00Z&to=2026-10-25T12:00:00Z"
      "&hl_from=2026-10-25T03:00:00Z&hl_to=2026-10-25T04:00:00Z")
    g(f"/plots/machines/{a}/longterm.svg?from=2026-10-25T00:00:00Z&to=2026-10-25T12:00:00Z")
    g(f"/plots/machines/{e}/histogram.svg?window=kernel:6.6.31-rt32")
    # Errors.
    for p in ("/api/v1/machines/00000000000000000000000000000042", "/api/v1/machines/xyz",
              "/api/v1/kernels/9.9.9/verdict", "/api/v1/kernels/6.6.31-rt32/verdict?at=bad",
              "/api/v1/kernels/6.6.31-rt32/verdict?at=2030-01-01T00:00:00Z",
              f"/api/v1/machines/{a}/intervals?from=2026-10-25T00:00:00Z",
              f"/api/v1/machines/{a}/intervals?from=2026-10-25T00:00:00Z&to=2026-10-24T00:00:00Z",
              f"/api/v1/machines/{a}/histogram?cpu=-1", "/api/v1/kernels?limit=0",
              "/api/v1/nothing", f"/machines/{a}?window=7x", "/kernels/9.9.9",
              f"/machines/{a}?x=1", "/nothing", "/api/v1/series/none/latest-stable"):
        g(p)
    g("/metrics")  # last: it counts the requests before it
    for rel in rels:
        qs.append(("CLI", ["verdict", rel, "--at", Q]))
        qs.append(("RTSOAK", ["verdict", rel]))
    qs.append(("CLI", ["verdict", "6.6.31-rt32", "--at", "2026-11-10T00:00:00Z",
                       "--known-at", str(ns(P2))]))
    for mid in ids.values():
        qs.append(("CLI", ["machine", "show", mid]))
        qs.append(("CLI", ["machine", "show", mid, "--json"]))
    qs.append(("CLI", ["maintenance", "list"]))
    qs.append(("CLI", ["maintenance", "list", "--json"]))
    qs.append(("CLI", ["waivers"]))
    qs.append(("CLI", ["notifications", "--json"]))
    qs.append(("RTSOAK", ["latest-stable", "6.6-rt"]))
    return qs


def ask(f, qs):
    out = []
    for kind, what in qs:
        if kind in ("GET", "STAFF"):
            req = urllib.request.Request(f.url + what, headers={
                "Authorization": f"Bearer {f.staff}"} if kind == "STAFF" else {})
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    st, ct, body = r.status, r.headers.get("Content-Type"), r.read()
            except urllib.error.HTTPError as e:
                st, ct, body = e.code, e.headers.get("Content-Type"), e.read()
            out.append({"q": f"{kind} {what}", "status": st, "type": ct,
                        "body": body.decode("utf-8", "replace")})
        elif kind == "CLI":
            p = f.cli(Q, *what, check=False)
            out.append({"q": "rtsoak-server " + " ".join(what), "status": p.returncode,
                        "type": "text", "body": p.stdout + "\n--stderr--\n" + p.stderr})
        else:
            p = subprocess.run([RTSOAK, *what, "--server", f.url], capture_output=True,
                               text=True, timeout=120, env=f.env(Q))
            out.append({"q": "rtsoak " + " ".join(what), "status": p.returncode,
                        "type": "text", "body": p.stdout + "\n--stderr--\n" + p.stderr})
    return out


def normalize(ans, f):
    """What differs between two builds of the same farm and is no answer of the server: the
    loopback port, the temporary directory, a PostgreSQL database's name."""
    body = ans["body"].replace(f.url, "http://SERVER").replace(f.dir, "DIR")
    body = re.sub(r"(request time=\S+ remote=127\.0\.0\.1:)\d+", r"\1PORT", body)
    if f.db.startswith("postgresql:"):
        body = body.replace(f.db, "DB")
    return dict(ans, body=body)


def run():
    d = tempfile.mkdtemp(prefix="rtsoak-golden-")
    f = Farm(d)
    try:
        build(f)
        f.start(Q)
        answers = [normalize(x, f) for x in ask(f, questions())]
        f.stop()
        return answers
    finally:
        f.stop()
        if os.environ.get("GOLDEN_KEEP") != "1":
            drop_farm_database(f.db)
            shutil.rmtree(d, ignore_errors=True)
        else:
            print(f"# farm kept in {d}", file=sys.stderr)


def first_difference(a, b):
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at {i}: ...{a[max(0, i - 120):i + 120]!r}... became ...{b[max(0, i - 120):i + 120]!r}..."


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("record", "check", "list"):
        sys.exit(__doc__)
    if sys.argv[1] == "list":
        for kind, what in questions():
            print(kind, what if isinstance(what, str) else " ".join(what))
        return 0
    if not any(os.path.exists(x) for x in FAKETIME_LIBS):
        print("1..0 # SKIP libfaketime is not installed (Debian: apt-get install faketime)")
        return 0
    path = sys.argv[2]
    answers = run()
    if sys.argv[1] == "record":
        with gzip.open(path, "wt") as out:
            for x in answers:
                out.write(json.dumps(x, sort_keys=True) + "\n")
        print(f"{len(answers)} answers recorded in {path}")
        return 0
    with gzip.open(path, "rt") as inp:
        want = [json.loads(line) for line in inp]
    print(f"1..{max(len(want), len(answers))}")
    failed = 0
    got = {x["q"]: x for x in answers}
    for i, w in enumerate(want, 1):
        x = got.get(w["q"])
        if x is None:
            print(f"not ok {i} - {w['q']}: no longer asked")
            failed += 1
        elif x == w:
            print(f"ok {i} - {w['q']}")
        else:
            failed += 1
            what = [k for k in ("status", "type") if x[k] != w[k]]
            print(f"not ok {i} - {w['q']}: " + (", ".join(f"{k} {w[k]} became {x[k]}"
                                                       for k in what) or
                                                "body " + first_difference(w["body"], x["body"])))
    for k, x in enumerate(a for a in answers if a["q"] not in {w["q"] for w in want}):
        print(f"not ok {len(want) + k + 1} - {x['q']}: not in the corpus (record it again)")
        failed += 1
    digest = hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest()[:16]
    print(f"# {len(answers)} answers, digest {digest}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
