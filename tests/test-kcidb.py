#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtsoak-server kcidb: a release's verdict as a KCIDB v5.3 report (docs/kcidb.md), for a
qualified, a failed and a pending release and one with two kernel builds, through the real
server and the real command on the farm database.

Each report is validated against KCIDB's official I/O schema (KCIDB_SCHEMA, or
../shared/kcidb/kcidb-v5.3.schema.json beside the source tree) with python3-jsonschema; where
the schema is absent those checks are skipped with the reason, the mapping checks still run.
The mapping is checked against the verdict the API gives for the same moment: statuses per
machine and scenario, the problem ids, the worst case as the number, and ids that stay the
same from one call to the next and differ between releases.  TAP output."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farmlib import HOUR, MIN, MS, SEC, SERVER, US, Farm, check, now_ns, tap  # noqa: E402

GIT_URL = "https://git.kernel.org/pub/scm/linux/kernel/git/rt/linux-stable-rt.git"
GIT_COMMIT = "0123456789abcdef0123456789abcdef01234567"
RULE = {"Period": "1d", "Scenarios": "idle 3h, cpu 3h, io 3h", "Watch": "0", "Regression": "no"}
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.environ.get("KCIDB_SCHEMA") or os.path.join(
    os.path.dirname(SRC), "shared", "kcidb", "kcidb-v5.3.schema.json")


def validate(doc, what):
    if not os.path.exists(SCHEMA):
        check(True, f"{what}: valid against KCIDB's v5.3 schema # SKIP the schema is not at "
                    f"{SCHEMA} (set KCIDB_SCHEMA)")
        return
    try:
        import jsonschema
    except ImportError:
        check(True, f"{what}: valid against KCIDB's v5.3 schema # SKIP python3-jsonschema is "
                    "not installed")
        return
    with open(SCHEMA) as f:
        schema = json.load(f)
    try:
        jsonschema.validate(doc, schema, format_checker=jsonschema.FormatChecker())
        check(True, f"{what}: valid against KCIDB's v5.3 schema")
    except jsonschema.ValidationError as e:
        check(False, f"{what}: valid against KCIDB's v5.3 schema",
              f"{e.message} at {list(e.absolute_path)}")


def report(f, release, at, *extra):
    p = f.cli("kcidb", release, "--at", str(at), *extra)
    return json.loads(p.stdout)


def clean(m, kernel, start, end, tweak=None, run_id=1, **kw):
    r = m.run(run_id, kernel, start_ns=start, **kw)
    r.post(r.history(start, end, 10 * MIN, tweak))


def tests_of(doc, machine=None, path=None):
    return [t for t in doc.get("tests", [])
            if (machine is None or (t.get("environment") or {}).get("misc", {}).get("machine")
                == machine)
            and (path is None or t.get("path") == path)]


def statuses(doc, m):
    return {t["path"]: t.get("status") for t in tests_of(doc, m.id)}


def common_checks(doc, what, verdict):
    """What every report holds: one checkout, builds of it, tests of the builds, and the
    verdict's test under each build with the verdict's status."""
    check(doc.get("version") == {"major": 5, "minor": 3}, f"{what}: version 5.3",
          doc.get("version"))
    cks = doc.get("checkouts") or []
    check(len(cks) == 1 and cks[0].get("misc", {}).get("verdict") == verdict["verdict"],
          f"{what}: one checkout, with the verdict", cks)
    bids = {b.get("id") for b in doc.get("builds") or []}
    check(all(b.get("checkout_id") == cks[0].get("id") for b in doc.get("builds") or []),
          f"{what}: every build is of the checkout")
    check(all(t.get("build_id") in bids for t in doc.get("tests") or []),
          f"{what}: every test is of a build of the report")
    want = {"qualified": "PASS", "failed": "FAIL", "pending": "MISS"}[verdict["verdict"]]
    top = tests_of(doc, path="rtsoak")
    check(len(top) == len(bids) and all(t.get("status") == want for t in top),
          f"{what}: the verdict's test under each build is {want}",
          [(t.get("build_id"), t.get("status")) for t in top])
    ids = [x.get("id") for k in ("checkouts", "builds", "tests") for x in doc.get(k) or []]
    check(len(ids) == len(set(ids)) and all(i.startswith("rtsoak:") for i in ids),
          f"{what}: every id is the origin's and unique")


def test_qualified_and_stable_ids():
    f = Farm("kcidb-qualified", RULE)
    try:
        a, b = f.enroll("lab-a"), f.enroll("lab-b")
        f.start()
        end = now_ns() - SEC
        for m in (a, b):
            clean(m, "6.6.30-rt31", end - 25 * HOUR, end)
        clean(a, "6.6.31-rt32", end - 28 * HOUR, end - 26 * HOUR, run_id=2)
        # lab-a's inventory, as its rtsoakd sends the run's first version; lab-b sends none.
        r = a.run(1, "6.6.30-rt31", start_ns=end - 25 * HOUR)
        doc = r.doc([], [{"id": 1, "time_ns": end - 25 * HOUR, "type": "inventory", "cpu": None,
                          "value": None, "message": "version 1, 3 fields"}])
        doc["inventory"] = [{"version": 1, "time_ns": end - 25 * HOUR,
                             "fields": {"uname.machine": "x86_64", "dmi.bios_version": "1.2.3",
                                        "modules.count": "42", "kernel.git_url": GIT_URL,
                                        "kernel.git_commit": GIT_COMMIT}}]
        a.post_doc(doc)
        # The same version sent again with another BIOS: the first stays, the log says so.
        again_doc = json.loads(json.dumps(doc))
        again_doc["inventory"][0]["fields"]["dmi.bios_version"] = "9.9.9"
        a.post_doc(again_doc)
        check("inventory version 1 sent again with other fields" in f.log_tail(),
              "a version sent again with other fields is kept as first stored, and said",
              f.log_tail()[-600:])
        at = end
        v = f.verdict("6.6.30-rt31", at=str(at))
        doc = report(f, "6.6.30-rt31", at)
        validate(doc, "qualified")
        common_checks(doc, "qualified", v)
        for m in (a, b):
            st = statuses(doc, m)
            check(st == {"rtsoak.soak": "PASS", "rtsoak.soak.idle": "PASS",
                         "rtsoak.soak.cpu": "PASS", "rtsoak.soak.io": "PASS"},
                  f"qualified: {m.hostname} passes as a whole and in each scenario", st)
        t = tests_of(doc, a.id, "rtsoak.soak")[0]
        check(t.get("number") == {"value": 30 * US / 1e9, "unit": "s", "prefix": "metric"}
              and t["misc"].get("worst_ns") == 30 * US,
              "qualified: the worst case (30 us) is the machine's number", t.get("number"))
        check(t.get("duration") == 25 * HOUR / 1e9,
              "qualified: a machine's duration is its covered time", t.get("duration"))
        check([b.get("architecture") for b in doc["builds"]] == ["x86_64"],
              "qualified: the build's architecture from its machines' inventory",
              [b.get("architecture") for b in doc["builds"]])
        inv = t["environment"]["misc"].get("inventory") or {}
        ck = doc["checkouts"][0]
        check(ck.get("git_repository_url") == GIT_URL and ck.get("git_commit_hash") == GIT_COMMIT,
              "qualified: the checkout names the tree the machines' inventories declare",
              {k: ck.get(k) for k in ("git_repository_url", "git_commit_hash")})
        check(inv.get("fields") == {"uname.machine": "x86_64", "dmi.bios_version": "1.2.3"}
              and len(inv.get("digest", "")) == 64 and inv.get("run") == 1,
              "qualified: a test's environment summarises its machine's inventory", inv)
        tb = tests_of(doc, b.id, "rtsoak.soak")[0]
        check(tb["environment"]["misc"].get("inventory", "absent") is None,
              "qualified: a machine that sent no inventory has none", tb["environment"])
        again = report(f, "6.6.30-rt31", at)
        check(again == doc, "the same question gives the same report, ids and all")
        other = report(f, "6.6.31-rt32", at)
        ids = {x["id"] for k in ("checkouts", "builds", "tests") for x in doc[k]}
        oids = {x["id"] for k in ("checkouts", "builds", "tests") for x in other[k]}
        check(not ids & oids, "another release's report shares no id", sorted(ids & oids)[:3])
        origin = report(f, "6.6.30-rt31", at, "--origin", "lab_farm")
        check(all(x["id"].startswith("lab_farm:") and x["origin"] == "lab_farm"
                  for k in ("checkouts", "builds", "tests") for x in origin[k]),
              "--origin names every id and origin")
        bad = f.cli("kcidb", "6.6.30-rt31", "--origin", "Lab-Farm", check=False)
        check(bad.returncode == 64 and "--origin" in bad.stderr,
              "an origin KCIDB does not take is refused, naming --origin",
              (bad.returncode, bad.stderr))
        api = f.get_json(f"/api/v1/kernels/6.6.30-rt31/kcidb?at={at}")
        check(api == doc, "GET /api/v1/kernels/RELEASE/kcidb answers the command's report")
        st, body = f.http("GET", f"/api/v1/kernels/6.6.30-rt31/kcidb?at={at}&origin=a-b")[:2]
        check(st == 400 and "origin" in str(body), "the API refuses a bad origin, naming it",
              (st, body))
        # lab-b declares another commit: which tree is the release? Each machine's in misc.
        r = b.run(1, "6.6.30-rt31", start_ns=end - 25 * HOUR)
        d = r.doc([], [{"id": 1, "time_ns": end - 25 * HOUR, "type": "inventory", "cpu": None,
                        "value": None, "message": "version 1, 2 fields"}])
        d["inventory"] = [{"version": 1, "time_ns": end - 25 * HOUR,
                           "fields": {"kernel.git_url": GIT_URL, "kernel.git_commit": "f" * 40}}]
        b.post_doc(d)
        two = report(f, "6.6.30-rt31", at)
        validate(two, "two trees")
        ck = two["checkouts"][0]
        check("git_commit_hash" not in ck and sorted(
                  x["commit"] for x in ck["misc"].get("git_disagree", [])) == [GIT_COMMIT, "f" * 40],
              "two trees declared: no commit in the checkout, each machine's in misc", ck)
        none = f.cli("kcidb", "9.9.9", check=False)
        check(none.returncode == 3, "a release no machine ran: exit status 3",
              (none.returncode, none.stderr))
    finally:
        f.stop()
        f.cleanup()


def test_failed_pending_and_two_builds():
    f = Farm("kcidb-failed", RULE)
    try:
        a, b, c = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
        f.start()
        end = now_ns() - SEC
        start = end - 25 * HOUR
        spike = {}

        def tweak(i, t, n):
            # One interval of the cpu scenario with a 400 us wake-up on CPU 0 of lab-b.
            if not spike and (t // HOUR) % 3 == 1:
                spike["t"] = t
                return {"per_cpu": {0: {"max_ns": 400 * US}}}
            return None
        clean(a, "6.6.30-rt31", start, end)
        clean(b, "6.6.30-rt31", start, end, tweak=tweak, kernel_version="#2 SMP PREEMPT_RT")
        clean(c, "6.6.30-rt31", end - 2 * HOUR, end)
        at = end
        v = f.verdict("6.6.30-rt31", at=str(at))
        doc = report(f, "6.6.30-rt31", at)
        validate(doc, "failed")
        common_checks(doc, "failed", v)
        check(v["verdict"] == "failed", "the farm's verdict is failed", v["verdict"])
        builds = {x["misc"]["kernel_version"]: x for x in doc["builds"]}
        check(sorted(builds) == ["#1 SMP PREEMPT_RT", "#2 SMP PREEMPT_RT"],
              "a build per kernel build (uname -v)", sorted(builds))
        b2 = builds.get("#2 SMP PREEMPT_RT", {}).get("id")
        check({t["build_id"] for t in tests_of(doc, b.id)} == {b2},
              "lab-b's tests are under the build it ran")
        st = statuses(doc, b)
        viol = [p["id"] for p in v["problems"] if p["kind"] == "violation"]
        check(st.get("rtsoak.soak") == "FAIL" and st.get("rtsoak.soak.cpu") == "FAIL"
              and st.get("rtsoak.soak.idle") == "PASS" and st.get("rtsoak.soak.io") == "PASS",
              "failed: lab-b fails as a whole and in cpu, passes idle and io", st)
        t = tests_of(doc, b.id, "rtsoak.soak.cpu")[0]
        check(viol and t["misc"].get("problem_ids") == viol
              and t["misc"].get("worst_ns") == 400 * US,
              "failed: the cpu test names the violation and its 400 us",
              (t["misc"], viol))
        st = statuses(doc, c)
        check(st.get("rtsoak.soak") == "MISS"
              and all(st.get(f"rtsoak.soak.{s}") == "MISS" for s in ("idle", "cpu", "io")),
              "pending: lab-c, two hours of a day, is missing as a whole and per scenario", st)
        ma = [x for x in v["machines"] if x["id"] == a.id]
        want = {"complete": "PASS", "failed": "FAIL", "pending": "MISS"}[ma[0]["status"]]
        check(statuses(doc, a).get("rtsoak.soak") == want,
              f"lab-a, {ma[0]['status']} in the verdict, is {want}",
              (statuses(doc, a), [p["id"] for p in v["problems"] if p["machine"] == a.id]))
        # A release only lab-c ran, asked an hour into its run: pending; lab-a and lab-b did not run it,
        # their results are missing under its build.
        clean(c, "6.6.32-rt33", end - 28 * HOUR, end - 26 * HOUR, run_id=2)
        pat = end - 27 * HOUR
        pv = f.verdict("6.6.32-rt33", at=str(pat))
        pdoc = report(f, "6.6.32-rt33", pat)
        validate(pdoc, "pending")
        check(pv["verdict"] == "pending", "a release run for two hours is pending", pv["verdict"])
        common_checks(pdoc, "pending", pv)
        check(statuses(pdoc, c).get("rtsoak.soak") == "MISS", "pending: lab-c is missing",
              statuses(pdoc, c))
        # Enrolled after that moment, with nothing stamped by then: not gating then.
        check(sorted(x["id"] for x in pv["machines"]) == [c.id]
              and not tests_of(pdoc, a.id) and not tests_of(pdoc, b.id),
              "pending: the report's machines are the verdict's", pv["machines"])
    finally:
        f.stop()
        f.cleanup()


def wait_for(what, timeout=30):
    """what() until it is true (its value), or None after timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = what()
        if v:
            return v
        time.sleep(0.2)
    return None


def read_report(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def test_watch():
    """kcidb --watch DIR: a report per release when the verdict log records its change, each
    file replaced whole; a restart goes on after the last row it wrote for; bad uses refused."""
    f = Farm("kcidb-watch", dict(RULE, Watch="1s"))
    out = tempfile.mkdtemp(prefix="rtsoak-kcidb-watch-")
    watcher = None
    try:
        a = f.enroll("lab-a")
        f.start()
        end = now_ns() - SEC
        clean(a, "6.6.30-rt31", end - 25 * HOUR, end)
        cmd = [SERVER, f"--db={f.db}", f"--config={f.conf}", "kcidb", "--watch", out]
        watcher = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        path = os.path.join(out, "6.6.30-rt31.json")
        doc = wait_for(lambda: read_report(path))
        check(doc is not None, "--watch writes the report of a release the log judged",
              os.listdir(out))
        if doc:
            validate(doc, "--watch's report")
            check(doc["checkouts"][0]["misc"]["verdict"] == "qualified",
                  "--watch's report has the logged verdict", doc["checkouts"][0]["misc"])
        # A release whose name, escaped, is too long for a file name: cut, made unique with a
        # digest, and the others are not held back by it.
        long_rel = "6.6.30-rt31-" + ":" * 90
        clean(a, long_rel, end - 28 * HOUR, end - 26 * HOUR, run_id=2)
        named = wait_for(lambda: [n for n in os.listdir(out)
                                  if n.startswith("6.6.30-rt31-%3A") and n.endswith(".json")])
        check(named and len(named[0]) <= 255 and (read_report(os.path.join(out, named[0])) or {})
              .get("checkouts", [{}])[0].get("misc", {}).get("release") == long_rel,
              "a release too long for a file name gets a cut name with its report", named)
        # The run ended uncleanly: the log records the change, and the file follows it.
        r = a.run(1, "6.6.30-rt31", start_ns=end - 25 * HOUR)
        r.post([], [{"id": 9999, "time_ns": end - HOUR, "type": "unclean_end", "cpu": None,
                     "value": None, "message": "run 1 did not end cleanly"}])
        doc = wait_for(lambda: (read_report(path) or {}).get("checkouts", [{}])[0]
                       .get("misc", {}).get("verdict") == "failed" and read_report(path))
        check(doc is not None, "--watch replaces the report when the verdict changes")
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=20)
        check(not [n for n in os.listdir(out) if n.endswith(".tmp")],
              "no file is left half written", os.listdir(out))
        check(watcher.returncode == 0 and "Stopping on a signal" in err,
              "--watch stops on SIGTERM with status 0", (watcher.returncode, err[-500:]))
        # Started again: nothing changed since the last row, nothing written.
        before = os.stat(path).st_mtime_ns
        watcher = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=20)
        check(os.stat(path).st_mtime_ns == before and "written" not in err,
              "a restart goes on after the last row it wrote for", err[-500:])
        watcher = None
        for args, what in ((["kcidb"], "a RELEASE, or --watch"),
                           (["kcidb", "6.6.30-rt31", "--watch", out], "a RELEASE, or --watch"),
                           (["kcidb", "--watch", out, "--at", "now"], "no --at"),
                           (["kcidb", "--watch", os.path.join(out, "none")], "not a directory")):
            p = f.cli(*args, check=False)
            check(p.returncode == 64 and what in p.stderr,
                  f"kcidb {' '.join(args[1:])}: refused, saying so", (p.returncode, p.stderr))
    finally:
        if watcher:
            watcher.kill()
            watcher.wait()
        f.stop()
        f.cleanup()
        for n in os.listdir(out):
            os.unlink(os.path.join(out, n))
        os.rmdir(out)


def main():
    for t in (test_qualified_and_stable_ids, test_failed_pending_and_two_builds, test_watch):
        try:
            t()
        except Exception as e:  # a crash of the test is a failed check, with its cause
            check(False, t.__name__, repr(e))
    return tap()


if __name__ == "__main__":
    sys.exit(main())
