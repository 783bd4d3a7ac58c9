#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every route of the real rtsoak-server against hostile parameters, on a farm with late data.

The routes come from the server's own table (server/api/routes.c, printed by tests/dump-routes:
methods, path pattern, access class, typed query parameters, the format of its answers), which
is held against docs/api.md both ways: a route or a method of one that the other lacks fails,
and so does a parameter that the server takes but the route's documentation does not name, one
that the documentation names but the table lacks, or one that the server's own refusal of an
unknown parameter does not list.

The farm: lab-late's history stamped days ago but posted now (data that arrives after moments
it is stamped before, as from a replayed history or an outbox catching up), with a violation
and its trace capture, a gap, an unclean end and a generator down; lab-ahead, whose clock runs a
year ahead for its last two hours (under a release with '/' and '+' in its name); a machine
enrolled without data; a waiver, a maintenance window, a settings change.

Then each route is asked with each path placeholder set to hostile values (unknown and
malformed ids, names at their length limits, bad escapes), and each of its parameters alone set
to hostile values (far past, the epoch, far future, moments inside the late data, negative,
huge, empty, repeated, bad encodings, unknown releases, machines and series), and the pairs that
make sense together (at after known_at, windows upside down).  Every answer must be below 500
and in the route's documented format: JSON {"error": ...} or an HTML page with its error;
a 400 for one parameter must name it; a 405 must say in Allow what the table says.  And the
kernel list, asked about moments before the late data arrived, lists only releases whose
verdict the same question answers.

Usage: test-routes.py.  Binaries from $RTSOAK_SERVER and $RTSOAK_REPLAY; on PostgreSQL when
$RTSOAK_TEST_PG is set (tests/pg-run.sh).  TAP output.
"""
import concurrent.futures
import http.client
import html
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import farmlib  # noqa: E402
from farmlib import DAY, HOUR, MIN, SEC, check, now_ns, rfc3339, tap  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPLAY = os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay")
K_LATE, K_AHEAD, K_OTHER = "6.6.1-rt1", "6.6.2-rt2:x+y", "6.9.0-rt0"


def q(s):
    return urllib.parse.quote(s, safe="")


# ---- the routes: the server's table and the documentation --------------------------------


def server_routes():
    """The server's route table (server/api/routes.c), as tests/dump-routes prints it: methods,
    pattern, access class, format and typed parameters."""
    dump = os.environ.get("RTSOAK_DUMP_ROUTES", "build/tests/dump-routes")
    rows = []
    for line in subprocess.run([dump], capture_output=True, text=True, check=True).stdout.splitlines():
        r = json.loads(line)
        rows.append(dict(r, methods=r["methods"].split(), params=[p["name"] for p in r["params"]],
                         types={p["name"]: p for p in r["params"]}))
    return rows


def doc_routes():
    """What docs/api.md and docs/farm-server.md document: {pattern: {methods}}, and per pattern
    the text of the sections that document it."""
    routes, sections = {}, {}
    for name in ("api.md", "farm-server.md"):
        text = open(os.path.join(SRC, "docs", name)).read()
        parts = re.split(r"(?m)^(?=#{2,4} )", text)
        for part in parts:
            found = set()
            for m, path in re.findall(r"\b(GET|POST) (/[^\s`?,)]*)", part):
                found.add((m, path))
            if name == "api.md":
                for path in re.findall(r"(?m)^\| `(/[^`]*)`", part):
                    found.add(("GET", path))
            for m, path in found:
                segs = path.split("/")[1:]
                # Examples name a machine or a release: a documented route names placeholders.
                if any(re.search(r"\d", s) and s != "v1" and not s.startswith("{") for s in segs):
                    continue
                routes.setdefault(path, set()).add(m)
                sections.setdefault(path, []).append(part)
        # The trace download of the dashboard is named in a row of the pages' table.
        for path in re.findall(r"`(/traces/\{id\}\.txt)`", text):
            routes.setdefault(path, set()).add("GET")
            sections.setdefault(path, []).append(text[text.find(path) - 2000:text.find(path) + 500])
    return routes, sections


def test_table_against_docs(table):
    routes, sections = doc_routes()
    served = {r["pattern"]: set(r["methods"]) for r in table}
    check(not set(served) - set(routes),
          "every route of the server's table is documented (docs/api.md, docs/farm-server.md)",
          sorted(set(served) - set(routes)))
    check(not set(routes) - set(served), "every documented route is in the server's table",
          sorted(set(routes) - set(served)))
    wrong = [(p, sorted(served[p]), sorted(routes[p])) for p in served
             if p in routes and served[p] != routes[p]]
    check(not wrong, "the documented methods of every route are the server's", wrong)
    undocumented = []
    for r in table:
        text = "\n".join(sections.get(r["pattern"], []))
        # Plots take "as /machines/{id}" the page's parameters.
        if re.search(r"\| as `(/[^`]*)`", text):
            text += "\n".join(sections.get(re.search(r"\| as `(/[^`]*)`", text).group(1), []))
        for p in r["params"]:
            if not re.search(rf"(`{p}`|`{p}=|[?&]{p}=|`{p},)", text):
                undocumented.append(f"{r['pattern']}: {p}")
    check(not undocumented, "every parameter the server takes is named where its route is "
          "documented", undocumented)
    unknown = []
    for r in table:
        if r["pattern"] not in sections:
            continue
        for p in sorted(documented_params(r["pattern"], sections[r["pattern"]]) - set(r["params"])):
            unknown.append(f"{r['pattern']}: {p}")
    check(not unknown, "every parameter documented for a route is in the server's table",
          unknown)


def documented_params(pattern, parts):
    """The parameters docs/api.md names for a route: the first column of its sections'
    parameter tables, and the ?name= of its request lines."""
    names = set()
    for part in parts:
        lines = part.splitlines()
        head = lines[0] if lines else ""
        # A section about this route alone: its heading names it.
        if pattern not in head.split("?")[0].split() and f"`{pattern}" not in head and \
                f"{pattern}`" not in head and not head.rstrip().endswith(pattern):
            continue
        for q in re.findall(r"\b(?:GET|POST) " + re.escape(pattern) + r"\?([^\s`]*)", part):
            names |= {kv.split("=")[0] for kv in q.split("&") if kv}
        in_table = False
        for line in lines:
            if re.match(r"\| parameter \|", line):
                in_table = True
            elif in_table and line.startswith("|"):
                names |= set(re.findall(r"`(\w+)`", line.split("|")[1]))
            else:
                in_table = False
    return names


# ---- the farm ----------------------------------------------------------------------------


class Farm(farmlib.Farm):
    def replay(self, machine, kernel, *args):
        p = subprocess.run([REPLAY, "--server", self.url, "--quiet", "--batch", "1000",
                            "--machine", machine.id, "--token", machine.token,
                            "--hostname", machine.hostname, "--kernel", kernel, *args],
                           capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            raise farmlib.FarmError(f"rtsoak-replay {machine.hostname}: {p.stderr[-800:]}")


def make_farm():
    farm = Farm("routes-" + str(os.getpid()))
    late = farm.enroll("lab-late")
    ahead = farm.enroll("lab-ahead")
    empty = farm.enroll("lab-empty")
    other = farm.enroll("lab-other", "--gating", "no")
    farm.start()
    # Stamped four to two days ago, posted now: every moment in between has data stamped
    # before it that arrived after it.
    farm.replay(late, K_LATE, "--from", "4d ago", "--to", "2d ago", "--interval", "10min",
                "--spike", "3d ago,1,500us,kworker/1:2", "--gap", "3d 6h ago,3d 5h ago",
                "--unclean", "2d 12h ago", "--load-down", "3d 12h ago,30min,cpu",
                "--rotation", "cpu 1h, mixed 1h")
    # Named by run.release (rtsoakd's [Upload] Release=), not by its uname -r.
    farm.replay(ahead, "6.6.2-rt2", "--release", K_AHEAD, "--from", "1d ago", "--to", "now",
                "--interval", "10min", "--clock-ahead", "365d,2h ago")
    farm.replay(other, K_OTHER, "--from", "1d ago", "--to", "now", "--interval", "30min")
    verdict = farm.verdict(K_LATE)
    problems = [p["id"] for p in verdict.get("problems") or []]
    if problems:
        farm.waive(K_LATE, problems[0], "known <and> accepted")
    farm.maintenance(other, now_ns() + HOUR, now_ns() + 2 * HOUR, "rack move")
    farm.settings(other, "moved", groups=["rack-a"])
    return farm, {"late": late, "ahead": ahead, "empty": empty, "other": other}


# ---- hostile values ----------------------------------------------------------------------


def time_values(t_late):
    return ["1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "@0", "@-1", "0", "-1",
            "1000000000000000", "-1000000000000000", "9223372036854775807",
            "-9223372036854775808", "92233720368547758070", "2199-12-31T23:59:59.999999999Z",
            "2200-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "now", "1s%20ago", "3650d%20ago",
            "100000d%20ago", "", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00%2B99:00", "%FF", "now%C3%A9", rfc3339(t_late), str(t_late),
            str(t_late - 2 * DAY), rfc3339(now_ns() + DAY), str(now_ns() + 400 * DAY)]


SPANS = ["0", "1ns", "1", "-1s", "1h", "10y", "3651d", "99999999999999999999d", "1.5h", "",
         "%FF", "1e3s", "nan", "inf", "1us"]
NUMBERS = ["0", "1", "-1", "2", "1000", "1001", "10000", "10001", "8191", "8192",
           "9007199254740992", "9007199254740993", "18446744073709551615",
           "18446744073709551616", "", "0x10", "1e3", "%2B1", "%201", "%FF", "1.5"]
NAMES = ["", "a", "x" * 32, "x" * 64, "x" * 65, "x" * 256, "x" * 257, "unknown", "..", "%2F",
         "a%2Fb", "%FF", "%C3%A9", "%C3", "%C0%AF", "%E2%80%AE", "%3Cb%3E", "%00", "idle", "violation", "NULL", "%27", "%22", "A-Z"]


def param_values(name, ctx):
    if name in ("from", "to", "at", "known_at", "hl_from", "hl_to"):
        return ctx["times"]
    if name in ("step", "min_difference"):
        return SPANS
    if name in ("limit", "offset", "cpu", "days"):
        return NUMBERS
    if name in ("scenario", "type", "kind", "state"):
        return NAMES + ["pending", "sent", "failed", "silence", "unclean_end"]
    if name == "machine":
        return ctx["machines"] + ["", "zz", "0" * 31, "0" * 33, "A" * 32, "g" * 32, "%00"]
    if name in ("release", "with", "compare"):
        return ctx["releases"] + ["", "x" * 256, "x" * 257, "%FF", "a%2F..%2Fb"]
    if name == "window":
        return ["1d", "30d", "kernel:", "kernel:" + q(K_LATE), "kernel:" + q(K_AHEAD),
                "kernel:unknown", "kernel:" + "x" * 300, "7y", "", "%FF", "1d%0A"]
    if name == "origin":
        return ["rtsoak", "lab_farm", "", "Lab", "a-b", "a:b", "x" * 64, "x" * 65, "%FF", "%00",
                "a%0A"]
    if name == "tolerance":
        return ["10", "10%25", "0", "1000", "1001", "-1", "1.5", "nan", "", "%FF",
                "99999999999999999999", "10%25%25"]
    return None


def placeholder_values(route, name, ctx):
    p = route["pattern"]
    if name == "id" and ("/machines/" in p):
        return ctx["machines"] + ["zz", "0" * 31, "0" * 33, "A" * 32, "..", "%2F", "%FF",
                                  "x" * 300]
    if name == "id":  # traces, waivers, maintenance windows
        return ctx["ids"] + ["0", "-1", "abc", "99999999999999999999", "1e3", "%FF", "x" * 300]
    if name == "release":
        return ctx["releases"] + ["unknown", "x" * 255, "x" * 256, "x" * 257, "%FF", "..",
                                  "a%2F..%2Fb", "%2F"]
    if name == "series":
        return ctx["series"] + ["unknown", "x" * 63, "x" * 64, "x" * 300, "%FF", "%2F"]
    return None


def required(route, ctx):
    """The parameters a route cannot answer without, at good values: the others are mutated
    around them."""
    return {"/api/v1/kernels/{release}/compare": {"with": ctx["releases"][2]},
            "/api/v1/traces": {"machine": ctx["machines"][0]}}.get(route["pattern"], {})


def fill(pattern, values):
    def sub(m):
        return values.get(m.group(1), m.group(0))
    return re.sub(r"\{(\w+)\}", sub, pattern)


# ---- asking -------------------------------------------------------------------------------


class Client:
    """One keep-alive connection per thread, requests sent as they are written (bad escapes
    and all)."""

    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.token = u.hostname, u.port, token
        self.local = threading.local()

    def ask(self, method, target, body=None):
        for attempt in range(2):
            c = getattr(self.local, "conn", None)
            if c is None:
                c = self.local.conn = http.client.HTTPConnection(self.host, self.port,
                                                                 timeout=120)
            try:
                headers = {"Authorization": f"Bearer {self.token}"}
                if body is not None:
                    headers["Content-Type"] = "application/json"
                c.request(method, target, body=body, headers=headers)
                r = c.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    c.close()
                    self.local.conn = None
                return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
            except (http.client.HTTPException, OSError):
                c.close()
                self.local.conn = None
                if attempt:
                    raise
        return None


def error_text(route, status, headers, data):
    """The message of an error answer, or None when it is not in the route's format."""
    ctype = headers.get("content-type", "")
    text = data.decode("utf-8", "replace")
    if route["format"] == "json" or status == 401:
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        if ctype.startswith("application/json") and isinstance(obj, dict) \
                and isinstance(obj.get("error"), str) and obj["error"]:
            return obj["error"]
        return None
    m = re.search(r'<p class="error" id="error">(.*?)</p>', text, re.S)
    if ctype.startswith("text/html") and text.startswith("<!DOCTYPE html>") and m:
        return re.sub(r"&(lt|gt|amp|quot|#39);", lambda e: {"lt": "<", "gt": ">", "amp": "&",
                                                             "quot": '"', "#39": "'"}[e.group(1)],
                      m.group(1))
    return None


def success_ok(route, target, headers, data):
    ctype = headers.get("content-type", "")
    path = target.split("?")[0]
    if path.endswith(".svg"):
        try:
            ET.fromstring(data)
        except ET.ParseError as e:
            return f"not XML: {e}"
        return None if ctype.startswith("image/svg+xml") else f"content type {ctype}"
    if route["format"] == "html":
        return None if ctype.startswith("text/html") else f"content type {ctype}"
    if path == "/metrics" or path.endswith("/raw") or path.endswith(".txt"):
        return None if ctype.startswith("text/plain") else f"content type {ctype}"
    try:
        obj = json.loads(data)
    except ValueError as e:
        return f"not JSON: {e}"
    return None if isinstance(obj, dict) and ctype.startswith("application/json") \
        else f"not a JSON object ({ctype})"


def judge(route, method, target, answer, param=None):
    """What is wrong with an answer (None: nothing).  param: the parameter the request set to a
    hostile value; "!name" when the request must be refused for it (400 naming it: a parameter
    the route does not take, one given twice, or a value not of its type); "#405" when it must
    be refused for its method."""
    status, headers, data = answer
    if param == "#405":
        if status != 405:
            return f"{status} (not 405 for {method}): {data[:200]!r}"
        param = None
    refuse = bool(param) and param.startswith("!")
    param = param.lstrip("!") if param else param
    if refuse and status != 400 and method != "HEAD":
        return f"{status} (not 400 for {param}): {data[:200]!r}"
    if status >= 500:
        return f"{status}: {data[:300]!r}"
    if method == "HEAD":
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{status}, not UTF-8: {e}: {data[:200]!r}"
    if status < 300:
        return success_ok(route, target, headers, data)
    msg = error_text(route, status, headers, data)
    if msg is None:
        return f"{status} not in the route's format ({headers.get('content-type')}): " \
               f"{data[:200]!r}"
    if status == 405:
        allow = {m.strip() for m in headers.get("allow", "").split(",")}
        want = set(route["methods"]) | ({"HEAD"} if "GET" in route["methods"] else set())
        if allow != want:
            return f"405 with Allow: {headers.get('allow')} (the table says {sorted(want)})"
    if status == 400 and param and not re.search(rf"\b{re.escape(param)}\b", msg):
        return f"400 does not name {param}: {msg[:200]}"
    return None


def plan(table, ctx):
    """Every request of the fuzz: (route, method, target, body, the parameter mutated)."""
    jobs = []
    for route in table:
        names = re.findall(r"\{(\w+)\}", route["pattern"])
        base = {n: (placeholder_values(route, n, ctx) or ["x"])[0] for n in names}
        get = "GET" in route["methods"]
        # Each placeholder alone, on every method.
        for n in names:
            for v in placeholder_values(route, n, ctx) or []:
                path = fill(route["pattern"], dict(base, **{n: v}))
                for m in route["methods"]:
                    jobs.append((route, m, path, "{}" if m == "POST" else None, None))
        paths = [fill(route["pattern"], base)]
        # Machine routes on every kind of machine: late data, a clock ahead, none at all.
        if "id" in names and "/machines/" in route["pattern"]:
            paths = [fill(route["pattern"], dict(base, id=v)) for v in ctx["machines"][:3]]
        for path in paths:
            for m in route["methods"]:
                jobs.append((route, m, path, "{}" if m == "POST" else None, None))
                if m != "POST":
                    jobs.append((route, m, path + "?colour=red", None, "!colour"))
            jobs.append((route, "DELETE", path, None, None))
            if get:
                jobs.append((route, "HEAD", path, None, None))
            need = required(route, ctx)
            base_q = "".join(f"&{k}={v}" for k, v in need.items())
            for p in route["params"]:
                vals = param_values(p, ctx)
                if vals is None:
                    check(False, f"{route['pattern']}: the fuzz knows parameter {p}",
                          "add its hostile values to param_values()")
                    continue
                rest = "".join(f"&{k}={v}" for k, v in need.items() if k != p)
                for v in vals:
                    jobs.append((route, "GET", f"{path}?{p}={v}{rest}", None, p))
                jobs.append((route, "GET", f"{path}?{p}={vals[0]}&{p}={vals[0]}{rest}", None,
                             "!" + p))
                jobs.append((route, "GET", f"{path}?{p}{rest}", None, p))
            jobs += [(route, "GET", f"{path}?{pair}{base_q}", None, None)
                     for pair in pairs(route["params"], ctx)]
            if route["methods"] == ["POST"] or route["params"] == []:
                jobs.append((route, "GET" if get else "POST", path + "?x=1",
                             None if get else "{}", "!x"))
        jobs += before_handlers(route, names, get)
    return jobs


# Placeholder values that route (the path matches the pattern) but name nothing a route could
# find: malformed ids, a release longer than any, a series name too long.
MALFORMED = {"id": ["zz", "0" * 33, "abc", "x" * 300], "release": ["x" * 257],
             "series": ["x" * 300]}
# A value of the wrong type, for each type of parameter of the table.
WRONG_TYPE = {"time": "yesterday-ish", "uint": "-1", "span": "0s", "percent": "ten"}


def before_handlers(route, names, get):
    """The refusals the route table makes before any handler runs, whatever the path names: a
    method the route does not take is 405 (with its Allow), and a parameter of the wrong type
    is 400 naming it, even where the path names nothing there is."""
    jobs = []
    for n in names:
        for v in MALFORMED.get(n, []):
            path = fill(route["pattern"], {k: v if k == n else "x" for k in names})
            jobs.append((route, "DELETE", path, None, "#405"))
            if not get:
                jobs.append((route, "GET", path, None, "#405"))
            for p, d in route["types"].items():
                if d["type"] in WRONG_TYPE:
                    jobs.append((route, "GET", f"{path}?{p}={WRONG_TYPE[d['type']]}", None,
                                 "!" + p))
    return jobs


def pairs(params, ctx):
    """Parameters that mean something together: at after known_at, a window upside down or
    inside the late data, a highlight outside the window."""
    t, n = ctx["t_late"], now_ns()
    out = []
    if "at" in params and "known_at" in params:
        out += [f"at={t - HOUR}&known_at={t}", f"at={t}&known_at={t}",
                f"at={t + HOUR}&known_at={t}", f"at=1970-01-01T00:00:00Z&known_at={t}",
                f"at={t}&known_at=1970-01-01T00:00:00Z", f"at={n - SEC}&known_at={t}",
                f"at=@0&known_at=@0", f"at={t - 10 * DAY}&known_at={t - 9 * DAY}"]
    if "from" in params and "to" in params:
        out += [f"from={t}&to={t - HOUR}", f"from={t}&to={t}", f"from={t - DAY}&to={t}",
                "from=1970-01-01T00:00:00Z&to=1970-01-01T00:00:01Z",
                "from=2199-12-31T00:00:00Z&to=2200-01-01T00:00:00Z",
                f"from=1970-01-01T00:00:00Z&to={n}", f"from={n + 300 * DAY}&to={n + 400 * DAY}"]
    if "hl_from" in params:
        out += [f"hl_from={t}&hl_to={t - HOUR}", f"hl_from={t}&hl_to={t + HOUR}",
                f"from={t - HOUR}&to={t}&hl_from=@0&hl_to=@1",
                "hl_from=1970-01-01T00:00:00Z&hl_to=2199-12-31T00:00:00Z",
                f"window=1d&hl_from={t}&hl_to={t + MIN}"]
    if "step" in params:
        out += [f"from=1970-01-01T00:00:00Z&to={n}&step=1ns", f"from={t - DAY}&to={t}&step=1us",
                f"step=10y&from=@0&to=2199-12-31T00:00:00Z", "cpu=0&scenario=idle&step=1min"]
    # Every pairing of a few telling moments: the epoch, inside and around the late data, now,
    # the last moment taken, beyond it.
    moments = ["@0", str(t - 2 * DAY), str(t), str(t + HOUR), "now", str(n + 400 * DAY),
               "2199-12-31T23:59:59Z", "-1", ""]
    for a, b in (("at", "known_at"), ("from", "to"), ("hl_from", "hl_to")):
        if a in params:
            out += [f"{a}={x}&{b}={y}" for x in moments for y in moments]
    if "limit" in params and "offset" in params:
        out += ["limit=1&offset=9007199254740992", "limit=1000&offset=0", "limit=1&offset=1"]
    if "with" in params:
        out += [f"with={q(r)}&tolerance=0&min_difference=1ns" for r in ctx["releases"]]
    return out


def test_fuzz(farm, table, ctx):
    client = Client(farm.url, farm.staff)
    jobs = plan(table, ctx)
    started = time.monotonic()
    bad = {}

    def one(job):
        route, method, target, body, param = job
        try:
            answer = client.ask(method, target, body)
        except Exception as e:  # a dropped connection is as bad as a 500
            return route, f"{method} {target}: no answer: {e!r}"
        why = judge(route, method, target, answer, param)
        return route, f"{method} {target}: {why}" if why else None

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for route, why in pool.map(one, jobs):
            key = route["pattern"]
            bad.setdefault(key, [])
            if why:
                bad[key].append(why)
    took = time.monotonic() - started
    print(f"# {len(jobs)} requests in {took:.1f} s", file=sys.stderr)
    for route in table:
        found = bad.get(route["pattern"], [])
        n = sum(1 for j in jobs if j[0] is route)
        check(not found, f"{' '.join(route['methods'])} {route['pattern']}: {n} hostile "
              "requests, none answered 5xx or outside the route's format",
              "\n".join(found[:25]) + (f"\n... and {len(found) - 25} more" if len(found) > 25
                                       else ""))
    log = farm.log_tail(10 ** 7)
    failures = re.findall(r"^.*status=5\d\d.*$", log, re.M)
    check(not failures, "the server's log has no request answered 5xx", "\n".join(failures[:10]))
    check(farm.sanitizer_report() is None, "no sanitizer report in the server's log",
          farm.sanitizer_report())


def test_late_questions(farm, ctx):
    """The kernel list and the series, asked about moments the late data had not arrived by:
    every release they list has a verdict for the same question."""
    t = ctx["t_late"]
    for question in (f"known_at={t}", f"at={t - HOUR}&known_at={t}", f"at={t}",
                     f"known_at={now_ns() - SEC}", f"at={t}&known_at={now_ns() - SEC}"):
        status, text, obj = farm.http("GET", f"/api/v1/kernels?{question}")
        listed = [k.get("release") for k in (obj or {}).get("kernels") or []]
        answers = {r: farm.http("GET", f"/api/v1/kernels/{q(r)}/verdict?{question}")[0]
                   for r in listed}
        check(status == 200 and all(s == 200 for s in answers.values()),
              f"/api/v1/kernels?{question}: 200, and every release it lists has a verdict for "
              "the same question", f"{status} {text[:300]} {answers}")
        status, text, obj = farm.http("GET", f"/api/v1/series?{question}")
        series = [s.get("series") for s in (obj or {}).get("series") or []]
        answers = {s: farm.http("GET", f"/api/v1/series/{q(s)}/latest-stable?{question}")[0]
                   for s in series}
        check(status == 200 and all(s == 200 for s in answers.values()),
              f"/api/v1/series?{question}: 200, and every series it lists has an answer",
              f"{status} {text[:300]} {answers}")
    # Every machine a kernel's page links to answers, also for a release named by run.release
    # (the link's window=kernel:RELEASE is the release, not the machine's uname -r).
    for rel in (K_LATE, K_AHEAD):
        page = farm.http("GET", f"/kernels/{q(rel)}")[1]
        links = sorted(set(html.unescape(x) for x in
                           re.findall(r'href="(/machines/[0-9a-f]{32}\?window=kernel:[^"]*)"',
                                      page)))
        answers = {link: farm.http("GET", link)[0] for link in links}
        check(links and all(st == 200 for st in answers.values()),
              f"/kernels/{rel}: every machine it links to answers 200", answers or page[:300])
    # Before the late data arrived the server knew of no run of its release: asked then, it
    # says no machine had run it.
    k = farm.get_json(f"/api/v1/kernels?known_at={t}")
    check(K_LATE not in [x.get("release") for x in k.get("kernels") or []],
          "the kernel list known at a moment before the late data arrived lacks its release",
          k)


def main():
    table = server_routes()
    check(len(table) >= 30, "the server's route table is read from server/api/routes.c",
          len(table))
    test_table_against_docs(table)
    farm = None
    try:
        farm, machines = make_farm()
        t_late = now_ns() - 3 * DAY  # inside lab-late's history, before it arrived
        traces = farm.get_json(f"/api/v1/traces?machine={machines['late'].id}")["traces"]
        waivers = farm.get_json("/api/v1/waivers").get("waivers") or []
        windows = farm.get_json("/api/v1/maintenance").get("windows") or []
        series = [s["series"] for s in farm.get_json("/api/v1/series").get("series") or []]
        ctx = {"t_late": t_late, "times": time_values(t_late),
               "machines": [machines[k].id for k in ("late", "ahead", "empty")] + ["f" * 32],
               "releases": [q(K_LATE), q(K_AHEAD), q(K_OTHER)],
               "series": [q(s) for s in series],
               "ids": [str(x["id"]) for x in traces[:1] + waivers[:1] + windows[:1]]}
        test_fuzz(farm, table, ctx)
        test_late_questions(farm, ctx)
    except Exception as e:  # a failure of the set-up is a failure, never a pass
        check(False, "the fuzz ran to its end", repr(e))
    finally:
        if farm:
            farm.cleanup()
    return tap()


if __name__ == "__main__":
    sys.exit(main())
