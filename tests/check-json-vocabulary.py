#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One JSON vocabulary for rtsoak and rtsoak-server.

Fills a farm with rtsoak-replay (a spike, a gap, an unclean end, a generator down, a waiver)
and a local database with a short run of the real rtsoakd, then reads every JSON answer of the
server's GET API and every --json output of the rtsoak command, and checks:
  - every time in nanoseconds ("NAME_ns" holding a moment after 1973) has its RFC 3339 twin
    "NAME" beside it, naming the same nanosecond;
  - the CLI's histogram and report use the server's names for the same things: p50_ns, p99_ns,
    p99_9_ns (percentiles), overflow (samples at or above the exact range), limit_us,
    buckets, max_ns, max_time_ns, samples, violations.
Usage: check-json-vocabulary.py.  Binaries from $RTSOAKD, $RTSOAK, $RTSOAK_SERVER,
$RTSOAK_REPLAY.  TAP output.
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import farmlib

SERVER = os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server")
REPLAY = os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay")
RTSOAK = os.environ.get("RTSOAK", "build/cli/rtsoak")
RTSOAKD = os.environ.get("RTSOAKD", "build/daemon/rtsoakd")
MACHINE = "b1000000000000000000000000000021"
KERNEL = "6.6.9-rt9"
TIME_MIN_NS = 10**17  # 1973: smaller "_ns" values are durations

results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what, detail))
    return ok


def rfc3339_ns(text):
    """Nanoseconds since the epoch of an RFC 3339 UTC text with up to 9 decimals."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z", text or "")
    if not m:
        return None
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc)
    frac = int((m.group(2) or "0").ljust(9, "0"))
    return int(base.timestamp()) * 10**9 + frac


def twins(doc, where, path="", bad=None, seen=None):
    """Every NAME_ns moment in doc without its twin NAME (the same nanosecond)."""
    bad = [] if bad is None else bad
    seen = [0] if seen is None else seen
    if isinstance(doc, dict):
        for k, v in doc.items():
            if (k.endswith("_ns") and isinstance(v, int) and not isinstance(v, bool)
                    and v >= TIME_MIN_NS):
                seen[0] += 1
                twin = k[:-3]
                if twin not in doc:
                    bad.append(f"{where}: {path}.{k} has no {twin}")
                elif rfc3339_ns(doc[twin]) != v:
                    bad.append(f"{where}: {path}.{twin} = {doc[twin]!r} is not {k} = {v}")
            twins(v, where, f"{path}.{k}", bad, seen)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:50]):
            twins(v, where, f"{path}[{i}]", bad, seen)
    return bad, seen[0]


def get(url, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        return json.load(r)


def run(args, check_status=True):
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if check_status and p.returncode != 0:
        raise RuntimeError(f"{args} exited {p.returncode}: {p.stderr}")
    return p


def farm(f):
    token = f.cli("enroll", MACHINE).stdout.strip()
    f.start()
    run([REPLAY, "--server", f.url, "--machine", MACHINE, "--token", token, "--kernel", KERNEL,
         "--days", "2", "--quiet", "--batch", "1000", "--rotation", "mixed 1h",
         "--spike", "20h ago,1,500us", "--gap", "30h ago,29h ago", "--unclean", "10h ago",
         "--load-down", "5h ago,30min,cpu"])
    return f.url, f.staff


def server_documents(url, staff):
    m = f"/api/v1/machines/{MACHINE}"
    paths = ["/api/v1/machines", m, f"{m}/intervals?from=2d ago&step=1h",
             f"{m}/histogram?from=2d ago", f"{m}/events?from=2d ago", f"{m}/runs",
             f"{m}/settings", f"{m}/maintenance", "/api/v1/kernels",
             f"/api/v1/kernels/{KERNEL}/verdict", f"/api/v1/kernels/{KERNEL}/waivers",
             f"/api/v1/kernels/{KERNEL}/compare?with={KERNEL}&days=7",
             "/api/v1/series", "/api/v1/audit", "/api/v1/maintenance", "/api/v1/waivers"]
    # A waiver, so that the waiver lists and the audit trail hold one.
    verdict = get(url + f"/api/v1/kernels/{KERNEL}/verdict", staff)
    problems = verdict.get("problems") or []
    if problems:
        body = json.dumps({"problem": problems[0]["id"], "reason": "vocabulary"}).encode()
        req = urllib.request.Request(url + f"/api/v1/kernels/{KERNEL}/waivers", data=body,
                                     headers={"Authorization": f"Bearer {staff}",
                                              "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30).read()
        except urllib.error.HTTPError:
            pass
    docs = {}
    for p in paths:
        try:
            # As staff: the audit trail is for staff only.
            docs["GET " + p] = get(url + urllib.parse.quote(p, safe="/?=&"), staff)
        except Exception as e:  # a path this server does not have is reported, not skipped
            docs["GET " + p] = {"__error__": str(e)}
    return docs


def local_documents(tmp, url):
    db = os.path.join(tmp, "local.db")
    extra = os.environ.get("RTSOAKD_TEST_SET")
    # Without the flight recorder: on this machine's own mounts rtsoakd would mount tracefs
    # where it is not mounted (test-trace.c runs it in mount namespaces of its own).
    args = [RTSOAKD, "--config", "/dev/null", "--set", f"Storage.Path={db}",
            "--set", "Storage.Interval=1s", "--set", "Schedule.Rotation=idle 1h",
            "--set", "Trace.Enabled=no", "--duration", "3s"]
    if extra:
        args += ["--set", extra]
    run(args)
    docs = {}
    for cmd in (["status"], ["report"], ["report", "--by-scenario"],
                ["histogram", "--format", "json"], ["events"]):
        docs["rtsoak " + " ".join(cmd)] = json.loads(
            run([RTSOAK, "--db", db, *cmd, "--json"]).stdout)
    p = run([RTSOAK, "verdict", "--server", url, "--json", KERNEL], check_status=False)
    docs["rtsoak verdict"] = json.loads(p.stdout) if p.stdout.strip() else {}
    return docs


def vocabulary(docs):
    cli = docs["rtsoak histogram --format json"]["cpus"][0]
    rep = docs["rtsoak report"]["cpus"][0]
    srv = docs[f"GET /api/v1/machines/{MACHINE}/histogram?from=2d ago"]["cpus"][0]
    want = ["samples", "min_ns", "max_ns", "max_time_ns", "max_time", "violations",
            "limit_us", "overflow", "buckets"]
    pct = ["p50_ns", "p99_ns", "p99_9_ns"]
    missing = [f"server histogram: {k}" for k in want if k not in srv]
    missing += [f"server histogram: percentiles.{k}" for k in pct
                if k not in (srv.get("percentiles") or {})]
    missing += [f"rtsoak histogram --json: {k}" for k in want + pct if k not in cli]
    missing += [f"rtsoak report --json: {k}" for k in pct + ["max_time_ns", "max_time"]
                if k not in rep]
    check(not missing, "the CLI's histogram and report use the server's names (percentiles "
          "p50_ns/p99_ns/p99_9_ns, overflow, limit_us, buckets, max_time_ns)", missing)
    # The same thing, the same value: overflow counts what lies at or above limit_us.
    total = sum(b[1] for b in srv["buckets"]) + srv["overflow"]
    check(total == srv["samples"], "server: exact buckets plus overflow add up to the samples",
          f"{total} != {srv['samples']}")
    ctotal = sum(b[1] for b in cli["buckets"]) + cli["overflow"]
    check(ctotal == cli["samples"], "rtsoak: exact buckets plus overflow add up to the samples",
          f"{ctotal} != {cli['samples']}")


def main():
    tmp = tempfile.mkdtemp(prefix="rtsoak-vocabulary-")
    f = farmlib.Farm("vocabulary")
    try:
        url, staff = farm(f)
        docs = server_documents(url, staff)
        docs.update(local_documents(tmp, url))
        errors = [f"{w}: {d['__error__']}" for w, d in docs.items() if "__error__" in d]
        check(not errors, f"every answer read ({len(docs)})", errors)
        total = 0
        for where, doc in docs.items():
            bad, n = twins(doc, where)
            total += n
            check(not bad, f"{where}: every moment in ns has its RFC 3339 twin ({n} seen)",
                  "\n".join(bad[:20]))
        check(total > 50, f"moments checked across the answers: {total}")
        vocabulary(docs)
    except Exception as e:  # a failure of the set-up is a failure, never a pass
        check(False, "the vocabulary test ran to its end", repr(e))
    finally:
        f.stop()
        shutil.rmtree(f.dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{len(results)}")
    for i, (ok, what, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok and detail:
            for line in str(detail).splitlines()[:30]:
                print(f"# {line}")
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == "__main__":
    import urllib.error
    import urllib.parse
    sys.exit(main())
