#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The benchmark scripts of bench/ run where a reader runs them, on the build under test
(RTSOAK_BUILD): probe-vs-cyclictest on a machine without the user rtsoak (a mount namespace
whose /etc/passwd lacks it) measures, or, for the variant that needs the user, says how to
create it, never with a traceback; farm-queries states the farm it measured as the farm holds
it, not as its options would have filled one, and writes its results where it is told.
Usage: test-bench.py SRCDIR.  TAP output.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(sys.argv[1])
BUILD = os.environ["RTSOAK_BUILD"]
ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
results = []


def case(name, fn):
    try:
        skip = fn()
    except AssertionError as e:
        results.append(("not ok", name, str(e)))
        return
    results.append(("ok", name, f"# SKIP {skip}" if skip else ""))


def without_rtsoak_user(tmp, argv):
    """argv in a mount namespace whose /etc/passwd has no user rtsoak: (status, out, err)."""
    script = ('grep -v "^rtsoak:" /etc/passwd >"$0/passwd" && '
              'mount --bind "$0/passwd" /etc/passwd && ! getent passwd rtsoak >/dev/null && '
              'exec "$@"')
    p = subprocess.run(["unshare", "-m", "sh", "-c", script, tmp, *argv], capture_output=True,
                       text=True, env=ENV, timeout=300)
    return p.returncode, p.stdout, p.stderr


def probe_without_user():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return "needs root and unshare (SCHED_FIFO, a mount namespace)"
    if not shutil.which("cyclictest"):
        return "cyclictest is not installed (Debian package rt-tests)"
    bench = os.path.join(SRC, "bench", "probe-vs-cyclictest.py")
    with tempfile.TemporaryDirectory() as tmp:
        st, out, err = without_rtsoak_user(tmp, [
            sys.executable, bench, "--pairs", "1", "--duration", "2", "--loads", "idle",
            "--variants", "cyclictest,rtsoakd"])
        assert st == 0 and "Medians over the rounds" in out and "Traceback" not in err, \
            f"without the user rtsoak: exit {st}\n{out}\n{err}"
        st, out, err = without_rtsoak_user(tmp, [
            sys.executable, bench, "--pairs", "1", "--duration", "2", "--loads", "idle",
            "--variants", "rtsoakd-defaults"])
        assert st == 1 and "the user rtsoak" in err and "systemd-sysusers" in err and \
            "Traceback" not in err, f"rtsoakd-defaults without the user: exit {st}\n{err}"
    return None


def farm_queries_reads_the_farm():
    bench = os.path.join(SRC, "bench", "farm-queries.py")
    committed = os.path.join(SRC, "bench", "results-farm-queries.txt")
    before = hashlib.sha256(open(committed, "rb").read()).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        db, res = os.path.join(tmp, "farm.db"), os.path.join(tmp, "results.txt")
        # 3 machines x 2 CPUs x 1 day of 1-minute intervals; the script's defaults say 200 x 8
        # x 30.
        subprocess.run([os.path.join(BUILD, "bench", "farm-fill"), db, "3", "2", "1", "60",
                        "1796256000", "6.1.0-rt-bench"], check=True, capture_output=True,
                       timeout=300)
        p = subprocess.run([sys.executable, bench, "--db", db, "--runs", "1", "--only",
                            "verdict", "--results", res], capture_output=True, text=True,
                           env=ENV, timeout=300)
        want = "farm: 3 machines x 2 CPUs, 1.0 days of data (4320 intervals)"
        assert p.returncode == 0 and want in p.stdout, \
            f"exit {p.returncode}, expected {want!r}:\n{p.stdout}\n{p.stderr}"
        assert want in open(res).read(), "the results file lacks the farm's line"
        p = subprocess.run([sys.executable, bench, "--db", os.path.join(tmp, "none.db"),
                            "--results", res], capture_output=True, text=True, env=ENV,
                           timeout=60)
        assert p.returncode == 1 and "none.db: no such farm database" in p.stderr and \
            "Traceback" not in p.stderr, f"a missing farm: exit {p.returncode}: {p.stderr}"
    after = hashlib.sha256(open(committed, "rb").read()).hexdigest()
    assert before == after, "bench/results-farm-queries.txt was written"
    return None


case("probe-vs-cyclictest runs without the user rtsoak", probe_without_user)
case("farm-queries states the farm it reads", farm_queries_reads_the_farm)
print(f"1..{len(results)}")
failed = False
for i, (status, name, note) in enumerate(results, 1):
    if status == "ok":
        print(f"ok {i} - {name} {note}".rstrip())
    else:
        failed = True
        print(f"not ok {i} - {name}")
        for line in note.splitlines()[-40:]:
            print(f"# {line}")
sys.exit(1 if failed else 0)
