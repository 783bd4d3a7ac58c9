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
import http.server
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

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
shown_as = []  # (directory, how the table shows it)


def case(prog, kind, args, want, needle, preexec=None, env=None):
    """Runs prog with args; records the row and whether status and message are as wanted."""
    p = subprocess.run([BIN[prog], *args], capture_output=True, text=True, timeout=120,
                       preexec_fn=preexec, env=env)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    # The message is on standard error; a verdict told (the exception's 0/1/2) on output.
    hit = [l for l in lines + p.stdout.splitlines() if needle in l]
    message = (hit or lines or [""])[0]
    message = re.sub(r"^<\d>", "", message)
    ok = p.returncode == want and bool(hit)
    shown = " ".join(a if " " not in a else f"'{a}'" for a in args)
    rows.append((prog, kind, shown, p.returncode, message))
    results.append((ok, f"{prog} {shown}: exit {p.returncode} (want {want}), '{needle}'",
                    "" if ok else f"stderr: {p.stderr[-1500:]}\nstdout: {p.stdout[-500:]}"))


class RewritingProxy:
    """An HTTP proxy on loopback that forwards each GET to target with parts of its path
    replaced (a misconfigured reverse proxy)."""

    def __init__(self, target, replace):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path
                for a, b in replace.items():
                    path = path.replace(a, b)
                try:
                    with urllib.request.urlopen(target + path, timeout=30) as r:
                        status, body = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, body = e.code, e.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        proxy.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def reachable_by_others(path):
    """Whether a user other than the owner may run path: every directory above it searchable
    and the file executable by others."""
    path = os.path.abspath(path)
    if not os.stat(path).st_mode & 0o001:
        return False
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & 0o001:
            return False
        if d == "/":
            return True
        d = os.path.dirname(d)


def main():
    tmp = tempfile.mkdtemp(prefix="rtsoak-exit-")
    shown_as.append((tmp, "$TMP"))
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

        # A local database of one short run, for the filters of rtsoak (without the flight
        # recorder, which would mount tracefs on this machine where it is not mounted).
        subprocess.run([BIN["rtsoakd"], "--config", "/dev/null", "--set", set_db, *sets,
                        "--set", "Storage.Interval=1s", "--set", "Schedule.Rotation=idle 1h",
                        "--set", "Trace.Enabled=no", "--duration", "2s"], capture_output=True,
                       timeout=60, check=True)

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
        # What --check-config used to pass and the run then failed on (or retried forever).
        up = os.path.join(tmp, "upload.conf")
        for bad, why in (("http://[::1", "not a valid URL"),
                         ("http://127.0.0.1:99999", "not a valid URL"),
                         ("http://127.0.0.1/\x1b[31mRED", "a control character"),
                         ("http://127.0.0.1:8470/?x=1", "a query or fragment")):
            open(up, "w").write(f"[Upload]\nServer={bad}\n")
            case("rtsoakd", f"[Upload] Server= with {why}", ["--config", up, "--check-config"],
                 78, "upload.conf:2: [Upload] Server=")
            results.append((why in rows[-1][4] and "\x1b" not in rows[-1][4],
                            f"rtsoakd: [Upload] Server={bad!r}: the message says '{why}', "
                            "escaped", rows[-1][4]))
        lu = os.path.join(tmp, "user.conf")
        open(lu, "w").write("[Load]\nUser=nosuchuser-rtsoak\n[Schedule]\nRotation=cpu 1h\n")
        case("rtsoakd", "[Load] User= that does not exist", ["--config", lu, "--check-config"],
             78, "user.conf:2: [Load] User=nosuchuser-rtsoak: no such user")
        as_nobody = None  # set where the programs can run as nobody
        if os.geteuid() == 0 and not reachable_by_others(BIN["rtsoakd"]):
            results.append((True, "rtsoakd as nobody not tried: a directory above "
                            f"{BIN['rtsoakd']} is closed to other users", ""))
        elif os.geteuid() == 0:
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
        case("rtsoak-load", "malformed number", ["--nice", "x", "cpu"], 64,
             "--nice: not a valid number: x")
        case("rtsoak-load", "--user outside supervised mode", ["--user", "nobody", "cpu"], 64,
             "--user is only for supervised mode")
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
        case("rtsoak", "verdict after --db", [*r, "verdict", "6.6.30-rt31"], 64,
             "verdict asks a farm server, not a local database")
        case("rtsoak", "options that exclude each other", [*r, "trace", "1", "--raw", "--json"],
             64, "--raw and --json exclude each other")
        case("rtsoak", "--limit out of the data's range", [*r, "histogram", "--limit", "0"], 64,
             "--limit 0: must be between 1 and")
        case("rtsoak", "runtime failure (a directory as --db)", ["--db", tmp, "report"], 1,
             "a directory, not a database file")
        case("rtsoak", "unknown run", [*r, "report", "--run", "99"], 64, "runs 1 to 1")
        case("rtsoak", "unknown CPU", [*r, "report", "--cpu", "999"], 64, "probed CPUs:")
        case("rtsoak", "unknown scenario", [*r, "report", "--scenario", "nosuch"], 64,
             "scenarios: idle")
        case("rtsoak", "unknown event type", [*r, "events", "--type", "nosuch"], 64,
             "known: ")
        case("rtsoak", "unknown format", [*r, "histogram", "--format", "svg"], 64,
             "--format svg")
        case("rtsoak", "unknown trace capture", [*r, "trace", "99"], 64,
             "trace 99: no such capture")
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
        # The files the command reads are part of its command line: found before the server
        # is asked (a gating job that names a wrong file must not "retry later").
        case("rtsoak", "verdict: --ca missing",
             ["verdict", "--server", "https://127.0.0.1:9", "--ca", "/nonexistent/ca.pem",
              "6.6-rt"], 64, "--ca /nonexistent/ca.pem: cannot read")
        not_pem = os.path.join(tmp, "not-a-ca.pem")
        open(not_pem, "w").write("not a certificate\n")
        case("rtsoak", "verdict: --ca not PEM certificates",
             ["verdict", "--server", "https://127.0.0.1:9", "--ca", not_pem, "6.6-rt"], 64,
             "not a file of PEM certificates")
        case("rtsoak", "verdict: --token-file missing",
             ["verdict", "--server", "http://127.0.0.1:9", "--token-file",
              "/nonexistent/token", "6.6-rt"], 64, "--token-file")
        case("rtsoak", "latest-stable: --ca missing",
             ["latest-stable", "--server", "https://127.0.0.1:9", "--ca",
              "/nonexistent/ca.pem", "6.6-rt"], 64, "--ca /nonexistent/ca.pem")

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
        case("rtsoak-server", "a Host list that removes what it does not hold",
             [f"--db={farm}", "--listen=127.0.0.1:0", "--set=Access.Hosts=farm.lab -farm.example"],
             78, "[Access] Hosts=farm.lab -farm.example: -farm.example removes a name")
        case("rtsoak-server", "an inventory pattern with a character no field name holds",
             [f"--db={farm}", "--listen=127.0.0.1:0", "--set=Verdict.InventoryFields=dmi.* a/b"],
             78, "[Verdict] InventoryFields=: 'a/b' is not a pattern of field names")
        case("rtsoak-server", "unreadable certificate",
             [f"--db={farm}", "--listen=127.0.0.1:0", "--cert=/nonexistent/c.pem",
              "--key=/nonexistent/k.pem"], 78, "/nonexistent/c.pem")
        f = farmlib.Farm("exit-statuses")
        shown_as.append((f.dir, "$FARM"))
        f.cli("enroll", MACHINE)
        server = f.start()
        url = f.url
        case("rtsoak-server", "cannot run here (address in use)",
             [f"--db={tmp}/other.db", f"--listen={url[len('http://'):]}"], 69,
             "Address already in use")
        case("rtsoak-server", "runtime failure (not a database)",
             ["--db=" + junk, "enroll", MACHINE], 1, "farm database")

        # Notifications: the commands, and the channels' configuration at start.
        fc = [f"--db={f.db}", f"--config={f.conf}"]
        case("rtsoak-server", "notifications: malformed value",
             [*fc, "notifications", "--state", "bogus"], 64, "Invalid --state 'bogus'")
        case("rtsoak-server", "notifications: unknown subcommand",
             [*fc, "notifications", "frobnicate"], 64, "notifications")
        case("rtsoak-server", "notifications retry: malformed id",
             [*fc, "notifications", "retry", "abc"], 64, "Invalid delivery 'abc'")
        case("rtsoak-server", "notifications test: unknown channel",
             [*fc, "notifications", "test", "nosuch"], 64, "nosuch")
        case("rtsoak-server", "notifications retry: not a failed delivery",
             [*fc, "notifications", "retry", "999"], 1, "Delivery 999 is not a failed one")
        nconf = os.path.join(tmp, "notify.conf")
        open(nconf, "w").write("[Notify.hook]\nWebhook=ftp://127.0.0.1/hook\n")
        case("rtsoak-server", "bad channel configuration",
             [f"--config={nconf}", f"--db={tmp}/notify.db", "--listen=127.0.0.1:0"], 78,
             "notify.conf:2")
        # A secret the server's user may not read (the packaged unit's dynamic user and a file
        # of root's): named, with the way out.
        secret = os.path.join(tmp, "webhook.secret")
        with open(secret, "w") as sf:
            sf.write("0123456789abcdef0123456789abcdef\n")
        sconf2 = os.path.join(tmp, "secret.conf")
        open(sconf2, "w").write("[Notify.hook]\nWebhook=http://127.0.0.1:9/hook\n"
                                f"SecretFile={secret}\n")
        if os.geteuid() == 0:
            os.chmod(secret, 0o600)
            as_other = as_nobody
        else:
            os.chmod(secret, 0o000)
            as_other = None
        if os.geteuid() == 0 and as_other is None:
            results.append((True, "a secret rtsoak-server may not read not tried: the programs "
                            "cannot run as nobody here (a directory above them is closed)", ""))
        else:
            case("rtsoak-server", "webhook secret it may not read",
                 [f"--config={sconf2}", f"--db={tmp}/secret.db", "--listen=127.0.0.1:0"], 78,
                 "secret.conf:3: [Notify.hook] SecretFile=", preexec=as_other)
        os.chmod(secret, 0o600)

        # rtsoak verdict --junit: a file that cannot be written once the verdict is known.
        lab = f.enroll("lab")
        now = farmlib.now_ns()
        run = lab.run(1, "6.6.30-rt31")
        run.post(run.history(now - 3600 * 10**9, now))
        case("rtsoak", "verdict: pending (the exception: 2)",
             ["verdict", "--server", url, "6.6.30-rt31"], 2, "still")
        case("rtsoak", "verdict: --junit file cannot be written (the exception: 3)",
             ["verdict", "--server", url, "--junit", "/nonexistent/dir/verdict.xml",
              "6.6.30-rt31"], 3, "/nonexistent/dir/verdict.xml")
        # A --server that would make the API's path its own query or fragment: the answer
        # would be another release's.
        case("rtsoak", "verdict: --server with a fragment",
             ["verdict", "--server", f"{url}/api/v1/kernels/6.6.30-rt31/verdict#",
              "6.6.31-rt32"], 64, "without a query or fragment")
        case("rtsoak", "latest-stable: --server with a query",
             ["latest-stable", "--server", f"{url}/?x=", "6.6-rt"], 64,
             "without a query or fragment")
        # A proxy in front of the farm that sends every question to another release's or
        # series' page: its answer is not taken for the one asked about.
        with RewritingProxy(url, {"6.6.31-rt32": "6.6.30-rt31", "/6.7-rt/": "/6.6-rt/"}) as px:
            case("rtsoak", "verdict: the answer is another release's (the exception: 3)",
                 ["verdict", "--server", px.url, "6.6.31-rt32"], 3,
                 "answered about release 6.6.30-rt31")
            case("rtsoak", "latest-stable: the answer is another series' (the exception: 3)",
                 ["latest-stable", "--server", px.url, "6.7-rt"], 3,
                 "answered about series 6.6-rt")

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
        def esc(t):
            for d, name in shown_as:
                t = t.replace(d, name)
            return t.replace("|", "\\|")
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
