#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""One vocabulary of exit statuses for the five programs.

Runs rtsoakd, rtsoak-load, rtsoak, rtsoak-server and rtsoak-replay with each kind of bad
usage, bad configuration, a machine that does not let them run and a failure at run time, and
checks every exit status against the shared rule: 64 bad usage, 78 bad configuration, 69
cannot run here, 1 runtime failure (rtsoak verdict's 0/1/2/3 are the exception), with a message
that names the problem.  The table of what each did is written to $EXIT_TABLE (Markdown).
Binaries from $RTSOAKD, $RTSOAK_LOAD, $RTSOAK, $RTSOAK_SERVER, $RTSOAK_REPLAY.  TAP output.
"""
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

import farmlib

BIN = {
    "rtsoakd": os.environ.get("RTSOAKD", "build/daemon/rtsoakd"),
    "rtsoak-load": os.environ.get("RTSOAK_LOAD", "build/loadgen/rtsoak-load"),
    "rtsoak": os.environ.get("RTSOAK", "build/cli/rtsoak"),
    "rtsoak-server": os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server"),
    "rtsoak-replay": os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay"),
}
MACHINE = "c1000000000000000000000000000031"
rows, results = [], []


def case(prog, kind, args, want, needle, preexec=None, env=None):
    """Runs prog with args; records the row and whether status and message are as wanted."""
    p = subprocess.run([BIN[prog], *args], capture_output=True, text=True, timeout=120,
                       preexec_fn=preexec, env=env)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    hit = [l for l in lines if needle in l]
    message = (hit or lines or [""])[0]
    message = re.sub(r"^<\d>", "", message)
    ok = p.returncode == want and bool(hit)
    shown = " ".join(a if " " not in a else f"'{a}'" for a in args)
    rows.append((prog, kind, shown, p.returncode, message))
    results.append((ok, f"{prog} {shown}: exit {p.returncode} (want {want}), '{needle}'",
                    "" if ok else f"stderr: {p.stderr[-1500:]}"))


def main():
    tmp = tempfile.mkdtemp(prefix="rtsoak-exit-")
    os.chmod(tmp, 0o777)
    server = None
    try:
        bad_conf = os.path.join(tmp, "bad.conf")
        open(bad_conf, "w").write("[Probe]\n# too high\nPriority=500\n")
        junk = os.path.join(tmp, "junk.db")
        open(junk, "w").write("this is not a database " * 200)
        db = os.path.join(tmp, "local.db")
        set_db = f"Storage.Path={db}"
        extra = os.environ.get("RTSOAKD_TEST_SET")
        sets = ["--set", extra] if extra else []

        # A local database of one short run, for the filters of rtsoak.
        subprocess.run([BIN["rtsoakd"], "--config", "/dev/null", "--set", set_db, *sets,
                        "--set", "Storage.Interval=1s", "--set", "Schedule.Rotation=idle 1h",
                        "--duration", "2s"], capture_output=True, timeout=60, check=True)

        # rtsoakd
        d = ["--config", "/dev/null", "--set", set_db, *sets]
        case("rtsoakd", "unknown option", ["--bogus"], 64, "--bogus: unknown option")
        case("rtsoakd", "missing value", ["--duration"], 64, "--duration: requires an argument")
        case("rtsoakd", "malformed value", ["--duration", "soon"], 64, "--duration soon")
        case("rtsoakd", "unexpected argument", ["extra"], 64, "Unexpected argument 'extra'")
        case("rtsoakd", "bad configuration file", ["--config", bad_conf, "--check-config"], 78,
             "bad.conf:3: [Probe] Priority=500")
        case("rtsoakd", "unknown key (--set)", [*d, "--set", "Probe.Nope=1"], 78,
             "unknown key Nope=")
        case("rtsoakd", "configuration file missing", ["--config", "/nonexistent.conf"], 78,
             "/nonexistent.conf")
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")

            def as_nobody():
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)

            case("rtsoakd", "cannot run here (SCHED_FIFO refused)",
                 ["--config", "/dev/null", "--set", f"Storage.Path={tmp}/nobody.db",
                  "--set", "Probe.LockMemory=no", "--set", "Probe.CpuDmaLatency=off",
                  "--set", "Schedule.Rotation=idle 1h", "--duration", "2s"], 69,
                 "SCHED_FIFO priority 95 refused", preexec=as_nobody)
        case("rtsoakd", "runtime failure (not a database)",
             ["--config", "/dev/null", "--set", f"Storage.Path={junk}", *sets, "--duration",
              "1s"], 1, "junk.db")

        # rtsoak-load
        case("rtsoak-load", "unknown option", ["--bogus", "cpu"], 64, "--bogus: unknown option")
        case("rtsoak-load", "missing value", ["--duration"], 64,
             "requires an argument")
        case("rtsoak-load", "no generator", [], 64, "No load generator given")
        case("rtsoak-load", "unknown generator", ["nosuch"], 64, "nosuch")
        case("rtsoak-load", "malformed value", ["--duration", "soon", "cpu"], 64, "--duration")
        case("rtsoak-load", "option out of bounds", ["cpu", "--load", "200%"], 64,
             "--load=200%")
        case("rtsoak-load", "cannot run here (no such directory)",
             ["--duration", "1s", "fileio", "--dir", "/nonexistent/dir"], 69, "cannot run here")

        # rtsoak
        r = ["--db", db]
        case("rtsoak", "unknown option", ["--bogus", "status"], 64, "--bogus: unknown option")
        case("rtsoak", "unknown command", [*r, "frobnicate"], 64, "Unknown command 'frobnicate'")
        case("rtsoak", "malformed value", [*r, "report", "--since", "yesterday"], 64,
             "--since yesterday")
        case("rtsoak", "option of another command", [*r, "status", "--type", "violation"], 64,
             "--type does not apply")
        case("rtsoak", "unknown run", [*r, "report", "--run", "99"], 64, "runs 1 to 1")
        case("rtsoak", "unknown CPU", [*r, "report", "--cpu", "999"], 64, "probed CPUs:")
        case("rtsoak", "unknown scenario", [*r, "report", "--scenario", "nosuch"], 64,
             "scenarios: idle")
        case("rtsoak", "unknown event type", [*r, "events", "--type", "nosuch"], 64,
             "known: ")
        case("rtsoak", "unknown format", [*r, "histogram", "--format", "svg"], 64,
             "--format svg")
        case("rtsoak", "runtime failure (no database)",
             ["--db", f"{tmp}/missing.db", "report"], 1, "missing.db")
        case("rtsoak", "runtime failure (not a database)", ["--db", junk, "report"], 1,
             "junk.db")
        case("rtsoak", "verdict: unknown option", ["verdict", "--bogus"], 64,
             "--bogus: unknown option")
        case("rtsoak", "verdict: missing release", ["verdict", "--server", "http://127.0.0.1:9"],
             64, "RELEASE")
        case("rtsoak", "verdict: server unreachable (the exception: 3)",
             ["verdict", "--server", "http://127.0.0.1:9", "--timeout", "5", "6.6-rt"], 3,
             "127.0.0.1:9")

        # rtsoak-server, and a server for rtsoak-replay
        farm = os.path.join(tmp, "farm.db")
        sconf = os.path.join(tmp, "server.conf")
        open(sconf, "w").write("[Server]\n# one key misspelt\nThreds=2\n")
        case("rtsoak-server", "unknown option", [f"--db={farm}", "--bogus"], 64,
             "--bogus: unknown option")
        case("rtsoak-server", "unknown command", [f"--db={farm}", "frobnicate"], 64,
             "Unknown command 'frobnicate'")
        case("rtsoak-server", "missing argument", [f"--db={farm}", "enroll"], 64, "enroll")
        case("rtsoak-server", "option of a command while serving", [f"--db={farm}", "--gating",
                                                                     "yes"], 64,
             "--gating belongs to a command")
        case("rtsoak-server", "bad configuration file", [f"--config={sconf}"], 78,
             "server.conf:3: unknown key Threds=")
        case("rtsoak-server", "unreadable certificate",
             [f"--db={farm}", "--listen=127.0.0.1:0", "--cert=/nonexistent/c.pem",
              "--key=/nonexistent/k.pem"], 78, "/nonexistent/c.pem")
        f = farmlib.Farm("exit-statuses")
        f.cli("enroll", MACHINE)
        server = f.start()
        url = f.url
        case("rtsoak-server", "cannot run here (address in use)",
             [f"--db={tmp}/other.db", f"--listen={url[len('http://'):]}"], 69,
             "Address already in use")
        case("rtsoak-server", "runtime failure (not a database)",
             ["--db=" + junk, "enroll", MACHINE], 1, "farm database")

        # rtsoak-replay
        case("rtsoak-replay", "unknown option", ["--bogus"], 64, "--bogus: unknown option")
        case("rtsoak-replay", "missing value", ["--server"], 64,
             "--server: requires an argument")
        case("rtsoak-replay", "missing option", ["--machine", MACHINE, "--token", "x"], 64,
             "--server")
        case("rtsoak-replay", "malformed value", ["--server", url, "--machine", MACHINE,
                                                  "--token", "x", "--days", "abc"], 64, "--days")
        case("rtsoak-replay", "runtime failure (refused: wrong token)",
             ["--server", url, "--machine", MACHINE, "--token", "0" * 64, "--days", "1",
              "--quiet"], 1, "401")
    except Exception as e:  # a failure of the set-up is a failure, never a pass
        results.append((False, "the exit status test ran to its end", repr(e)))
    finally:
        if server:
            server.stop()
            shutil.rmtree(server.dir, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)

    table = ["| program | bad usage or failure | arguments | exit | message |",
             "|---|---|---|---:|---|"]
    for prog, kind, shown, status, message in rows:
        esc = lambda t: t.replace("|", "\\|").replace(tmp, "$TMP")
        table.append(f"| {prog} | {kind} | `{esc(shown)}` | {status} | {esc(message)[:200]} |")
    path = os.environ.get("EXIT_TABLE")
    if path:
        open(path, "w").write("\n".join(table) + "\n")
    print(f"1..{len(results)}")
    for i, (ok, what, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok and detail:
            for line in detail.splitlines()[:20]:
                print(f"# {line}")
    for line in table:
        print(f"# {line}")
    return 0 if all(ok for ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
