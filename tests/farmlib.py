# SPDX-License-Identifier: MIT
"""A farm for tests: the real rtsoak-server on loopback with a temporary farm database and
its own configuration, machines enrolled with its command line, and rtsoak.summary/1
documents crafted interval by interval (histograms in their stored form) and posted to
POST /api/v1/summaries with the machine's token.  Standard library only.

The binaries come from the environment, as meson sets it for the integration tests:
RTSOAK_SERVER (rtsoak-server) and RTSOAK (the rtsoak command line).
"""
import base64
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

SERVER = os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server")
RTSOAK = os.environ.get("RTSOAK", "build/cli/rtsoak")

NS = 1
US = 1000
MS = 1000 * US
SEC = 1000 * MS
MIN = 60 * SEC
HOUR = 60 * MIN
DAY = 24 * HOUR

SCENARIO_LOADS = {"cpu": ["cpu"], "io": ["fileio"], "net": ["network"],
                  "hackbench": ["hackbench"], "mixed": ["cpu", "fileio", "memory", "network"]}
ROTATION = ("idle", "cpu", "io")


def now_ns():
    return time.time_ns()


def rfc3339(ns):
    s, frac = divmod(ns, SEC)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{frac:09d}Z"


def hourly_rotation(start_ns):
    """The scenario of an interval starting at start_ns: idle, cpu, io, an hour each, aligned
    to the epoch."""
    return ROTATION[(start_ns // HOUR) % len(ROTATION)]


# ---- histograms in their stored form (common/hist.h) ---------------------------------------


def leb128(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def hist_octaves(limit_us):
    limit_ns = limit_us * 1000
    room = 64 - limit_ns.bit_length()
    return min(room, 40)


def hist_nbuckets(limit_us):
    return limit_us + hist_octaves(limit_us) * 8


def hist_index(limit_us, ns):
    us = ns // 1000
    if us < limit_us:
        return us
    limit_ns = limit_us * 1000
    octave = (ns // limit_ns).bit_length() - 1
    if octave >= hist_octaves(limit_us):
        return hist_nbuckets(limit_us) - 1
    base = limit_ns << octave
    sub = (ns - base) // (base // 8)
    return limit_us + octave * 8 + sub


def hist_encode(limit_us, counts):
    """counts: {bucket index: count}.  A version byte, the limit, then (index delta, count)
    pairs, the first index as is."""
    out = bytearray([1]) + leb128(limit_us)
    prev = None
    for i in sorted(counts):
        if counts[i] <= 0:
            continue
        out += leb128(i if prev is None else i - prev)
        out += leb128(counts[i])
        prev = i
    return base64.b64encode(bytes(out)).decode()


def cpu_entry(cpu, start_ns, length_ns, period_ns, *, samples=None, missed=0, min_ns=4 * US,
              typical_ns=10 * US, max_ns=30 * US, tail=None, span=None, limit_us=1000):
    """One CPU of an interval.  By default it delivers every wake-up its period allows over
    its span (the interval's, or span=(start, length)): floor(span / period) - missed.  The
    histogram holds one sample at min_ns, one at max_ns, `tail` = (ns, count) if given, and
    the rest at typical_ns."""
    s0, sl = span if span else (start_ns, length_ns)
    if samples is None:
        samples = (sl // period_ns if period_ns else 600000) - missed
    samples = max(0, samples)
    e = {"cpu": cpu, "samples": samples, "missed": missed, "violations": 0,
         "hist_limit_us": limit_us}
    if samples == 0:
        e.update(min_ns=0, avg_ns=0, max_ns=0, max_time_ns=start_ns,
                 hist=hist_encode(limit_us, {}))
    else:
        counts = {}
        vals = []
        if samples == 1:
            min_ns = max_ns
            vals = [(max_ns, 1)]
        else:
            rest = samples - 2
            vals = [(min_ns, 1), (max_ns, 1)]
            if tail and rest > 0:
                n = min(tail[1], rest)
                vals.append((tail[0], n))
                rest -= n
            if rest > 0:
                vals.append((typical_ns, rest))
        for ns, n in vals:
            i = hist_index(limit_us, ns)
            counts[i] = counts.get(i, 0) + n
        avg = sum(ns * n for ns, n in vals) // samples
        avg = min(max(avg, min_ns), max_ns)
        e.update(min_ns=min_ns, avg_ns=avg, max_ns=max_ns,
                 max_time_ns=s0 + sl // 2, hist=hist_encode(limit_us, counts))
    if span:
        e["start_ns"], e["length_ns"] = span
    return e


def load_entry(generator, up_ns, value=100.0, starts=1, exits=0):
    return {"generator": generator, "up_ns": up_ns, "starts": starts, "exits": exits,
            "metrics": [{"name": "ops", "unit": "ops/s", "value": value}]}


# ---- machines and runs ---------------------------------------------------------------------


class Run:
    """One daemon lifetime of a machine: its summary header, and the intervals it sends."""

    def __init__(self, machine, run_id, kernel_release, *, kernel_version="#1 SMP PREEMPT_RT",
                 release=None, start_ns=None, probe_ns=MS, interval_ns=10 * MIN,
                 probed=True, threshold_ns=100 * US):
        self.machine = machine
        self.id = run_id
        self.kernel_release = kernel_release
        self.kernel_version = kernel_version
        self.release = release
        self.start_ns = start_ns if start_ns is not None else now_ns()
        self.probe_ns = probe_ns
        self.interval_ns = interval_ns
        self.threshold_ns = threshold_ns
        # probed: True for run.cpus = every CPU of the machine, None for no run.cpus, or a list
        self.cpus = list(range(machine.cpus)) if probed is True else probed
        self.boot_id = hashlib.md5(f"{machine.id}:{run_id}".encode()).hexdigest()
        self.next_seq = 1
        self.upload_seq = 0

    def header(self):
        r = {"id": self.id, "boot_id": self.boot_id, "kernel_release": self.kernel_release,
             "kernel_version": self.kernel_version, "kernel_cmdline": "quiet",
             "preempt_model": "PREEMPT_RT", "daemon_version": "0.1.0",
             "config_digest": hashlib.sha256(b"rtsoak test").hexdigest(),
             "start_ns": self.start_ns, "threshold_ns": self.threshold_ns,
             "probe_interval_ns": self.probe_ns, "interval_ns": self.interval_ns}
        if self.release:
            r["release"] = self.release
        if self.cpus is not None:
            r["cpus"] = self.cpus
        return r

    def interval(self, start_ns, length_ns, scenario="auto", *, seq=None, cpus=None,
                 loads="auto", cpu=None, per_cpu=None):
        """An interval of every probed CPU (or `cpus`), measuring in full unless cpu= (keyword
        arguments for every CPU) or per_cpu={cpu: keyword arguments} say otherwise; `loads`
        by default those its scenario needs, up and with throughput for the whole interval."""
        if scenario == "auto":
            scenario = hourly_rotation(start_ns)
        if seq is None:
            seq = self.next_seq
        self.next_seq = max(self.next_seq, seq + 1)
        if cpus is None:
            cpus = self.cpus if self.cpus is not None else list(range(self.machine.cpus))
        entries = []
        for c in cpus:
            kw = dict(cpu or {})
            kw.update((per_cpu or {}).get(c, {}))
            entries.append(cpu_entry(c, start_ns, length_ns, self.probe_ns, **kw))
        if loads == "auto":
            loads = [load_entry(g, length_ns) for g in SCENARIO_LOADS.get(scenario, [])]
        return {"seq": seq, "start_ns": start_ns, "length_ns": length_ns,
                "scenario": scenario, "cpus": entries, "loads": loads}

    def history(self, start_ns, end_ns, step_ns=10 * MIN, tweak=None, **kw):
        """Contiguous intervals of step_ns from start_ns to end_ns (the last one shorter);
        tweak(index, start, length) returns keyword arguments for interval() or None."""
        out = []
        t, i = start_ns, 0
        while t < end_ns:
            length = min(step_ns, end_ns - t)
            args = dict(kw)
            if tweak:
                args.update(tweak(i, t, length) or {})
            out.append(self.interval(t, length, **args))
            t += length
            i += 1
        return out

    def doc(self, intervals, events=(), seq=None):
        if seq is None:
            self.upload_seq += 1
            seq = self.upload_seq
        m = self.machine
        return {"schema": "rtsoak.summary/1",
                "machine": {"id": m.id, "hostname": m.hostname, "cpu_model": "test CPU",
                            "cpus": m.cpus},
                "run": self.header(), "seq": seq, "intervals": list(intervals),
                "events": list(events)}

    def post(self, intervals, events=(), expect=200):
        """Posts in uploads of at most 1000 intervals; returns the answers."""
        answers = []
        intervals = list(intervals)
        chunks = [intervals[i:i + 1000] for i in range(0, len(intervals), 1000)] or [[]]
        for n, chunk in enumerate(chunks):
            evs = list(events) if n == len(chunks) - 1 else []
            if not chunk and not evs:
                continue
            answers.append(self.machine.post_doc(self.doc(chunk, evs), expect))
        return answers


class Machine:
    def __init__(self, farm, mid, token, hostname, cpus):
        self.farm, self.id, self.token, self.hostname, self.cpus = farm, mid, token, hostname, cpus

    def run(self, run_id, kernel_release, **kw):
        return Run(self, run_id, kernel_release, **kw)

    def post_doc(self, doc, expect=200):
        status, text, obj = self.farm.http("POST", "/api/v1/summaries", doc, token=self.token)
        if expect is not None and status != expect:
            raise FarmError(f"upload of {self.hostname} answered {status} (expected {expect}): "
                            f"{text[:500]}")
        return status, obj

    def info(self):
        return self.farm.get_json(f"/api/v1/machines/{self.id}")


class FarmError(Exception):
    pass


# ---- the server ----------------------------------------------------------------------------


def config_text(verdict=None, series=None, extra=""):
    """The server's configuration: [Verdict] keys, [Series.NAME] sections, and extra text
    (other sections) at the end."""
    lines = ["[Verdict]"]
    for k, v in (verdict or {}).items():
        lines.append(f"{k}={v}")
    for name, keys in (series or {}).items():
        lines.append("")
        lines.append(f"[Series.{name}]")
        for k, v in keys.items():
            lines.append(f"{k}={v}")
    return "\n".join(lines) + "\n" + (f"\n{extra}\n" if extra else "")


def _psql(sql):
    bindir = os.environ.get("RTSOAK_TEST_PG_BIN", "/usr/bin")
    subprocess.run([os.path.join(bindir, "psql"), "-q", "-v", "ON_ERROR_STOP=1",
                    os.environ["RTSOAK_TEST_PG"], "-c", sql],
                   check=True, capture_output=True, text=True, timeout=60)


def farm_database(directory):
    """The --db of a new farm: an SQLite file in directory, or, when the test runs on
    PostgreSQL (tests/pg-run.sh sets RTSOAK_TEST_PG), a new database of that server named
    after directory."""
    pg = os.environ.get("RTSOAK_TEST_PG")
    if not pg:
        return os.path.join(directory, "farm.db")
    name = re.sub(r"[^a-z0-9_]", "_", os.path.basename(directory.rstrip("/")).lower())
    # FILE_COPY: PostgreSQL 15's default copies the template through the WAL (55-180 ms a
    # database on a test's cluster, against 15 ms; the suite makes hundreds).
    _psql(f'CREATE DATABASE "{name}" STRATEGY FILE_COPY')
    return f"postgresql://postgres@/{name}?{pg.partition('?')[2]}"


def drop_farm_database(target):
    """Drops a database made by farm_database() (an SQLite file goes with its directory)."""
    m = re.match(r"postgresql://postgres@/([a-z0-9_]+)\?", target)
    if m:
        _psql(f'DROP DATABASE IF EXISTS "{m.group(1)}" WITH (FORCE)')


class Farm:
    """A real rtsoak-server on 127.0.0.1:0 with a temporary farm database."""

    def __init__(self, name, verdict=None, series=None, extra=""):
        self.name = name
        self.extra = extra
        self.dir = tempfile.mkdtemp(prefix=f"rtsoak-{name}-")
        self.db = farm_database(self.dir)
        self.conf = os.path.join(self.dir, "rtsoak-server.conf")
        self.log = os.path.join(self.dir, "server.log")
        self.proc = None
        self.url = None
        self.staff = None
        self.write_config(verdict, series)

    def write_config(self, verdict=None, series=None):
        with open(self.conf, "w") as f:
            f.write(config_text(verdict, series, self.extra))

    def cli(self, *args, check=True, timeout=60):
        """rtsoak-server --db DB --config CONF ARGS..."""
        p = subprocess.run([SERVER, f"--db={self.db}", f"--config={self.conf}", *args],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise FarmError(f"rtsoak-server {' '.join(args)} exited {p.returncode}: "
                            f"{p.stderr.strip()[:800]}")
        return p

    def enroll(self, hostname, *extra, cpus=2):
        """Enrols a machine named after the farm and hostname; extra: enroll's options."""
        mid = hashlib.sha256(f"{self.name}/{hostname}".encode()).hexdigest()[:32]
        token = self.cli("enroll", mid, *extra).stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{64}", token):
            raise FarmError(f"enroll {hostname}: no token on stdout: {token!r}")
        return Machine(self, mid, token, hostname, cpus)

    def start(self, env=None):
        if self.staff is None:
            self.staff = self.cli("admin-token", "staff-test").stdout.strip()
        self.logf = open(self.log, "a")
        offset = self.logf.tell()  # before the start: its line may come at once
        self.proc = subprocess.Popen([SERVER, f"--config={self.conf}", f"--db={self.db}",
                                      "--listen", "127.0.0.1:0", "--rate", "1000000",
                                      "--burst", "1000000", "--threads", "2"],
                                     stdout=subprocess.DEVNULL, stderr=self.logf,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(self.log) as f:
                f.seek(offset)
                m = re.search(r"Listening on (http://\S+)", f.read())
            if m:
                self.url = m.group(1)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise FarmError(f"the server did not start (exit {self.proc.poll()}): "
                        f"{self.log_tail()}")

    def log_tail(self, n=2000):
        try:
            with open(self.log) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def logged_status(self, release):
        """The last status of release that the server's verdict log recorded (its log line)."""
        found = re.findall(rf"Release {re.escape(release)} is now (\w+)", self.log_tail(10 ** 7))
        return found[-1] if found else None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "logf", None):
            self.logf.close()
            self.logf = None

    def restart(self, verdict=None, series=None):
        """Stops the server, and starts it again on the same database with a new rule."""
        self.stop()
        if verdict is not None or series is not None:
            self.write_config(verdict, series)
        return self.start()

    def raw_twin_differences(self):
        """Asks every release's verdict, at one moment as known then, of this server and of a
        second one on the same database that reads every day interval by interval
        (RTSOAK_VERDICT_RAW=1), in chunks of 3 rows (RTSOAK_VERDICT_CHUNK=3: the chunks'
        boundaries fall everywhere), instead of from the day rollups: the answers must be the
        same but for asked_at, and 200.  Returns how many releases were compared, the
        differences, and what a sanitizer said in the second server's log (None: nothing)."""
        twin = Farm.__new__(Farm)
        twin.__dict__.update(self.__dict__)
        twin.proc = twin.logf = None
        twin.log = self.log + ".raw"
        T = now_ns() - MS
        diffs, kernels = [], []
        try:
            twin.start(env={"RTSOAK_VERDICT_RAW": "1", "RTSOAK_VERDICT_CHUNK": "3"})
            kernels = self.get_json("/api/v1/kernels?limit=1000").get("kernels") or []
            for rel in sorted(k.get("release") for k in kernels):
                a = self.verdict_raw(rel, at=str(T), known_at=str(T))
                b = twin.verdict_raw(rel, at=str(T), known_at=str(T))
                if a[0] != 200:
                    diffs.append(f"{rel}: ?at=T&known_at=T answered {a[0]}, not 200: "
                                 f"{a[1][:300]}")
                ta, tb = (re.sub(r'"asked_at(_ns)?":("[^"]*"|\d+)', "", x[1]) for x in (a, b))
                if a[0] != b[0] or ta != tb:
                    i = next((k for k, (x, y) in enumerate(zip(ta, tb)) if x != y),
                             min(len(ta), len(tb)))
                    diffs.append(f"{rel}: rollups {a[0]} ...{ta[max(0, i - 150):i + 150]}... "
                                 f"vs intervals {b[0]} ...{tb[max(0, i - 150):i + 150]}...")
        finally:
            twin.stop()
        return len(kernels), diffs, twin.sanitizer_report()

    def cleanup(self):
        self.stop()
        drop_farm_database(self.db)
        shutil.rmtree(self.dir, ignore_errors=True)

    def sanitizer_report(self):
        """What AddressSanitizer or UBSan printed into the server's log, if anything."""
        text = self.log_tail(10 ** 7)
        found = re.findall(r"^.*(?:==\d+==ERROR: \w+Sanitizer|runtime error:).*$", text, re.M)
        return "\n".join(sorted(set(found)))[:1500] if found else None

    # -- HTTP --

    def http(self, method, path, body=None, token=None):
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        return status, text, obj

    def get_json(self, path):
        status, text, obj = self.http("GET", path)
        if status != 200 or obj is None:
            raise FarmError(f"GET {path} answered {status}: {text[:500]}")
        return obj

    def verdict_raw(self, release, **params):
        q = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        path = f"/api/v1/kernels/{urllib.parse.quote(release, safe='')}/verdict"
        return self.http("GET", path + (f"?{q}" if q else ""))

    def verdict(self, release, **params):
        status, text, obj = self.verdict_raw(release, **params)
        if status != 200 or obj is None:
            raise FarmError(f"verdict of {release} {params} answered {status}: {text[:500]}")
        return obj

    def waive(self, release, problem, reason="known and accepted"):
        return self.http("POST", f"/api/v1/kernels/{urllib.parse.quote(release, safe='')}/waivers",
                         {"problem": problem, "reason": reason}, token=self.staff)

    def settings(self, machine, reason, **fields):
        body = dict(fields)
        body["reason"] = reason
        return self.http("POST", f"/api/v1/machines/{machine.id}/settings", body,
                         token=self.staff)

    def maintenance(self, machine, from_ns, to_ns, reason):
        return self.http("POST", f"/api/v1/machines/{machine.id}/maintenance",
                         {"from": rfc3339(from_ns), "to": rfc3339(to_ns), "reason": reason},
                         token=self.staff)

    def rtsoak(self, *args, timeout=60):
        """The rtsoak command line against this server."""
        return subprocess.run([RTSOAK, *args], capture_output=True, text=True, timeout=timeout)


# ---- TAP -----------------------------------------------------------------------------------

results = []


def check(ok, what, detail=""):
    """One test point; a failure is also told on stderr at once, with its detail."""
    results.append((bool(ok), what, detail))
    if not ok:
        print(f"# FAILED: {what}: {detail}"[:3000], file=sys.stderr)
    return ok


def tap():
    """Prints the test points as TAP; the exit status (1 when one failed)."""
    print(f"1..{len(results)}")
    for i, (ok, what, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok and detail:
            for line in str(detail)[:6000].splitlines():
                print(f"# {line}")
    return 0 if all(ok for ok, _, _ in results) else 1


# ---- reading answers -----------------------------------------------------------------------


def problems_by_id(v, key="problems"):
    return {p.get("id"): p for p in (v.get(key) or [])}


def machine_of(v, m):
    for x in v.get("machines") or []:
        if x.get("id") == m.id:
            return x
    return None


def scenario_of(mv, name):
    for s in (mv or {}).get("scenarios") or []:
        if s.get("name") == name:
            return s
    return None


def covered_by_scenario(intervals):
    """Per scenario, the time of the intervals (all measuring, no overlap): what the server
    must count when every interval is clean."""
    out = {}
    for iv in intervals:
        s = iv["scenario"]
        out[s] = out.get(s, 0) + iv["length_ns"]
    return out
