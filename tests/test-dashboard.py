#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The farm dashboard of the real rtsoak-server, on a farm posted with rtsoak-replay.

  test-dashboard.py http     every page and plot over HTTP: status, content type, SVG that
                             parses as XML, HTML escaping, the 400/404/405 answers
  test-dashboard.py intervals  intervals longer than the plot's step and than the coverage
                             bars' bins (no false silences, no holes), colours by scenario
  test-dashboard.py clock    times a machine stamps ahead of the server's clock: an interval a
                             year ahead and one just inside ClockTolerance=, on the pages, the
                             API and /metrics
  test-dashboard.py browser  the pages in headless Chromium: what a person sees (the silent
                             machine flagged, the failed kernel's reason, one curve per CPU on
                             a log axis, the evidence link zoomed on the interval); screenshots
                             are left in $DASHBOARD_ARTEFACT_DIR

The farm: lab-clean (4 CPUs, kernel K1, reporting, an hour-long hole), a machine named lab<&">fail (kernel K2, one
interval at 500 us on CPU 1), lab-silent (K1, its history ends two days ago), a machine enrolled
without data, and a machine outside the gating set that alone ran kernel K3.  TAP output; exit
77 (skipped) only when the chromium binary is missing for the browser part.
"""
import concurrent.futures
import html.parser
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
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import farmlib  # noqa: E402
from farmlib import check, drop_farm_database, farm_database, tap  # noqa: E402

SERVER = os.environ.get("RTSOAK_SERVER", "build/server/rtsoak-server")
REPLAY = os.environ.get("RTSOAK_REPLAY", "build/tools/rtsoak-replay")
ARTEFACTS = os.environ.get("DASHBOARD_ARTEFACT_DIR", ".")

CLEAN = "a0000000000000000000000000000001"
FAIL = "b0000000000000000000000000000002"
SILENT = "c0000000000000000000000000000003"
EMPTY = "d0000000000000000000000000000004"
OTHER = "e0000000000000000000000000000005"
UNKNOWN = "f0000000000000000000000000000006"
K1, K2, K3 = "6.6.1-rt1", "6.6.2-rt2", "6.9.0-rt0"
BAD_HOST = 'lab<&">fail'
CULPRIT = "thread kworker/1:2 (pid 4242, SCHED_FIFO 50) ran 475 µs of the 500 µs"
SVG_NS = "{http://www.w3.org/2000/svg}"
# A value of the clean machine's inventory that is markup: the page shows it as text.  The
# field is one the default rule does not count: the machine stays clean.
HUGEPAGES_MARKUP = "<i>64</i>"


class Farm:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rtsoak-dashboard-")
        self.db = farm_database(self.dir)
        self.log = os.path.join(self.dir, "server.log")
        self.proc = None
        self.url = None

    def enroll(self, mid, *extra):
        out = subprocess.run([SERVER, f"--db={self.db}", "enroll", mid, *extra],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return out.strip()

    def start(self):
        tokens = {m: self.enroll(m) for m in (CLEAN, FAIL, SILENT, EMPTY)}
        tokens[OTHER] = self.enroll(OTHER, "--gating", "no")
        self.proc = subprocess.Popen([SERVER, f"--db={self.db}", "--listen", "127.0.0.1:0",
                                      "--rate", "1000000", "--burst", "1000000"],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        for _ in range(500):
            m = re.search(r"Listening on (http://\S+)", open(self.log).read())
            if m:
                self.url = m.group(1)
                break
            time.sleep(0.02)
        if not self.url:
            raise RuntimeError("the server did not start: " + open(self.log).read())
        common = ["--server", self.url, "--quiet", "--batch", "1000", "--interval", "1min"]
        jobs = [
            [CLEAN, K1, "--days", "2", "--cpus", "4", "--hostname", "lab-clean", "--to", "now",
             "--gap", "20h ago,19h ago", "--inventory", "dmi.bios_version=1.2.3",
             "--inventory", "memory.hugepages=0",
             "--inventory-change", "12h ago,memory.hugepages=" + HUGEPAGES_MARKUP],
            [FAIL, K2, "--days", "2", "--cpus", "2", "--hostname", BAD_HOST, "--to", "now",
             "--spike", "6h ago,1,500us,kworker/1:2"],
            [SILENT, K1, "--days", "2", "--cpus", "2", "--hostname", "lab-silent",
             "--to", "2d ago"],
            [OTHER, K3, "--days", "1", "--cpus", "2", "--hostname", "lab-other", "--to", "now"],
        ]
        procs = [subprocess.Popen([REPLAY, *common, "--machine", j[0], "--token", tokens[j[0]],
                                   "--kernel", j[1], *j[2:]], stderr=subprocess.PIPE, text=True)
                 for j in jobs]
        for p in procs:
            _, err = p.communicate(timeout=240)
            if p.returncode != 0:
                raise RuntimeError("rtsoak-replay failed: " + err)

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        drop_farm_database(self.db)
        shutil.rmtree(self.dir, ignore_errors=True)

    def get(self, path, method="GET"):
        req = urllib.request.Request(self.url + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def q(s):
    return urllib.parse.quote(s, safe="")


class Text(html.parser.HTMLParser):
    """The visible text of an HTML page, and its links."""

    def __init__(self):
        super().__init__()
        self.text, self.links, self.skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "title"):
            self.skip += 1
        if tag == "a":
            self.links.append(dict(attrs))

    def handle_endtag(self, tag):
        if tag in ("script", "style", "title"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.text.append(data)


def visible(page):
    t = Text()
    t.feed(page)
    return " ".join(" ".join(t.text).split()), t.links


def svg_root(body, what):
    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        check(False, f"{what} parses as XML", str(e))
        return None
    check(root.tag == SVG_NS + "svg", f"{what} is an SVG document", root.tag)
    return root


def curves(root):
    return [e for e in root.iter(SVG_NS + "path") if "curve" in (e.get("class") or "").split()]


def y_labels(root):
    return [e.text for e in root.iter(SVG_NS + "text") if e.get("class") == "y-label"]


# ---- over HTTP ----------------------------------------------------------------------------


def test_http(farm):
    pages = ["/", f"/machines/{CLEAN}", f"/machines/{FAIL}", f"/machines/{SILENT}",
             f"/machines/{EMPTY}", f"/machines/{CLEAN}?window=30d",
             f"/machines/{SILENT}?window=kernel:{q(K1)}", f"/kernels/{K1}", f"/kernels/{K2}",
             f"/kernels/{K3}", f"/kernels/{K2}?compare={q(K1)}"]
    for p in pages:
        status, ctype, body = farm.get(p)
        check(status == 200 and ctype.startswith("text/html"), f"GET {p}: 200 text/html",
              f"{status} {ctype} {body[:300]}")
        check(body.startswith("<!DOCTYPE html>") and "http://" not in body.replace(
            "http://www.w3.org/2000/svg", ""), f"GET {p}: a page with no external resource")
        check(BAD_HOST not in body, f"GET {p}: the hostname <&\"> never appears unescaped")

    plots = [f"/plots/machines/{CLEAN}/histogram.svg", f"/plots/machines/{CLEAN}/longterm.svg",
             f"/plots/machines/{FAIL}/longterm.svg?window=30d",
             f"/plots/machines/{EMPTY}/histogram.svg", f"/plots/machines/{EMPTY}/longterm.svg",
             f"/plots/kernels/{K1}/coverage.svg", f"/plots/kernels/{K2}/coverage.svg",
             f"/plots/kernels/{K3}/coverage.svg"]
    roots = {}
    for p in plots:
        status, ctype, body = farm.get(p)
        check(status == 200 and ctype.startswith("image/svg+xml"),
              f"GET {p}: 200 image/svg+xml", f"{status} {ctype} {body[:300]}")
        roots[p] = svg_root(body, p)

    r = roots[f"/plots/machines/{CLEAN}/histogram.svg"]
    if r is not None:
        cpus = sorted(e.get("data-cpu") for e in curves(r))
        check(cpus == ["0", "1", "2", "3"], "the histogram of a 4-CPU machine: one curve per CPU",
              cpus)
        labels = y_labels(r)
        check({"1", "10", "100", "1k"} <= set(labels), "the histogram's count axis is logarithmic",
              labels)
    r = roots[f"/plots/machines/{FAIL}/longterm.svg?window=30d"]
    if r is not None:
        viol = [e for e in r.iter() if e.get("class") == "violation"]
        check(len(viol) == 1, "the long-term plot of the failed machine marks one violation",
              len(viol))
    for p in (f"/plots/machines/{EMPTY}/histogram.svg", f"/plots/machines/{EMPTY}/longterm.svg"):
        r = roots[p]
        if r is not None:
            check(any(e.get("class") == "no-data" for e in r.iter()),
                  f"{p}: a machine without data says so")

    # Without JavaScript a time reads in UTC, and UTC is on hover either way.
    body = farm.get(f"/machines/{CLEAN}")[2]
    m = re.search(r'<time data-ns="(\d+)" datetime="([^"]+)" title="([^"]+ UTC)">([^<]+ UTC)</time>',
                  body)
    check(m and m.group(3) == m.group(4), "times are shown in UTC without JavaScript",
          m.group(0) if m else body[:300])

    # Silences: the hour-long hole of lab-clean, and lab-silent's ongoing silence.
    body = farm.get(f"/machines/{CLEAN}")[2]
    rows = re.findall(r'<table class="silences">(.*?)</table>', body, re.S)
    check(rows and rows[0].count("<tr") == 2 and "zoom" in rows[0],
          "the machine page lists the hour-long hole under Silences", rows)
    body = farm.get(f"/machines/{SILENT}")[2]
    text, _ = visible(body)
    check("still silent" in text and 'id="silent"' in body,
          "the silent machine's page says it is silent, at the top and under Silences",
          text[:600])

    # A waived problem: who, when and why, escaped.
    import json
    verdict = json.loads(farm.get(f"/api/v1/kernels/{K1}/verdict")[2])
    gap = [p["id"] for p in verdict["problems"] if p["machine"] == CLEAN and p["kind"] == "gap"]
    check(len(gap) == 1, "lab-clean's hole is a problem of its kernel", verdict["problems"])
    if gap:
        subprocess.run([SERVER, f"--db={farm.db}", "waive", K1, gap[0], "--reason",
                        "lab power cut <b>ticket 42</b>", "--by", "alice"],
                       capture_output=True, text=True, timeout=30, check=True)
        body = farm.get(f"/kernels/{K1}")[2]
        text, _ = visible(body)
        m = re.search(r'<table class="waived">(.*?)</table>', body, re.S)
        check(m and "alice" in m.group(1) and
              "lab power cut &lt;b&gt;ticket 42&lt;/b&gt;" in m.group(1) and "evidence" in m.group(1),
              "the kernel page lists the waived problem with who and why, escaped",
              m.group(1) if m else text[:800])
        check("Waived problems (1)" in text, "one waived problem", text[:800])
        # Clean coverage on the overview: all of lab-clean's once its one problem is waived;
        # the failed machine's counts again from the end of its violation.
        body = farm.get("/")[2]
        rows = {m: r for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
                for m in (CLEAN, FAIL) if f"/machines/{m}" in r}
        check(CLEAN in rows and "all clean" in rows[CLEAN],
              "the overview: a machine without an unwaived problem is all clean", rows.get(CLEAN))
        check(FAIL in rows and re.search(r"[0-9.]+ d clean since <time", rows[FAIL]),
              "the overview: the failed machine is clean only since its violation",
              rows.get(FAIL))

    # The flight recorder's capture of the failed machine's violation: listed with its
    # culprit, explained, its raw events downloadable, and named in the violation's row.
    status, ctype, body = farm.get(f"/api/v1/traces?machine={FAIL}")
    traces = json.loads(body).get("traces", []) if status == 200 else []
    check(len(traces) == 1 and traces[0]["summary"] == CULPRIT and
          traces[0]["culprit"] == {"kind": "thread", "name": "kworker/1:2", "pid": 4242,
                                   "duration_ns": 475000} and traces[0]["cpu"] == 1,
          "the API lists the failed machine's capture with its culprit", body[:600])
    tid = traces[0]["id"] if traces else 0
    status, ctype, body = farm.get(f"/api/v1/traces/{tid}")
    check(status == 200 and json.loads(body).get("analysis", {}).get("sched_ns") == 497000,
          "the API answers one capture with its analysis", body[:400])
    status, ctype, body = farm.get(f"/api/v1/traces/{tid}/raw")
    check(status == 200 and ctype.startswith("text/plain") and "kworker/1:2" in body and
          "sched_switch" in body, "the capture's raw events download as text",
          f"{status} {ctype} {body[:300]}")
    page = farm.get(f"/traces/{tid}.txt")
    check(page[0] == 200 and page[2] == body, "the same raw events at the dashboard's path",
          f"{page[0]} {page[2][:300]}")
    for bad, code in (("/api/v1/traces/999999", 404), ("/api/v1/traces/abc", 404),
                      (f"/api/v1/traces/{tid}/cooked", 404), (f"/traces/{tid}", 404),
                      (f"/traces/{tid}.txt/", 404), ("/traces/0.txt", 404),
                      (f"/traces/{tid}.txt?x=1", 400), ("/api/v1/traces?machine=zz", 400),
                      (f"/api/v1/traces?machine={FAIL}&colour=red", 400),
                      (f"/api/v1/traces?machine={FAIL}&from=yesterday-ish", 400)):
        status, _, body = farm.get(bad)
        check(status == code and "error" in json.loads(body), f"GET {bad}: {code} with why",
              f"{status} {body[:200]}")
    check(farm.get(f"/api/v1/traces/{tid}", method="DELETE")[0] == 405,
          "a capture cannot be deleted over the API (405)")
    body = farm.get(f"/machines/{FAIL}")[2]
    m = re.search(r'<table class="violations">(.*?)</table>', body, re.S)
    check(m and "culprit: " + CULPRIT in m.group(1) and f'href="/traces/{tid}.txt"' in m.group(1),
          "the machine page's violation row names the culprit and links its raw trace",
          m.group(1)[:800] if m else body[:300])

    # The machine without data: a page that says so.
    text, _ = visible(farm.get(f"/machines/{EMPTY}")[2])
    check("No run reported yet" in text and "no data yet" in text,
          "the page of a machine without data says it has none", text[:500])
    # A kernel that no gating machine ran: pending, with whom it waits for.
    text, _ = visible(farm.get(f"/kernels/{K3}")[2])
    check("PENDING" in text and "lab-other" in text and "has not run" in text,
          "the page of a kernel no gating machine ran", text[:800])
    # The escaped hostname, in the text, the title and the plots' labels.
    status, _, body = farm.get(f"/machines/{FAIL}")
    check("lab&lt;&amp;&quot;&gt;fail" in body, "the hostname is HTML-escaped")
    text, _ = visible(body)
    check(BAD_HOST in text, "the hostname reads as it is", text[:200])
    # The comparison.
    text, _ = visible(farm.get(f"/kernels/{K2}?compare={q(K1)}")[2])
    check("regression" in text and "only in" in text, "the comparison with an earlier kernel",
          text[-800:])

    # Errors: 400 names the parameter, 404 the unknown thing, 405 for writes.
    errors = [
        ("/?x=1", 400, "x: unknown parameter"),
        (f"/machines/{CLEAN}?form=1", 400, "form: unknown parameter"),
        (f"/machines/{CLEAN}?from=yesterday-ish", 400, "from"),
        (f"/machines/{CLEAN}?window=7y", 400, "window=7y"),
        (f"/machines/{CLEAN}?window=1d&from=now", 400, "window=1d"),
        (f"/machines/{CLEAN}?window=kernel:{K2}", 400, "window=kernel:"),
        (f"/machines/{CLEAN}?hl_from=now", 400, "hl_from"),
        (f"/machines/{CLEAN}?from=now&to=2h%20ago", 400, "not before to"),
        (f"/machines/{CLEAN}?window=1d&window=30d", 400, "window: given more than once"),
        (f"/kernels/{K1}?compare=9.9-nope", 400, "compare=9.9-nope"),
        (f"/kernels/{K1}?at=now", 400, "at: unknown parameter"),
        (f"/plots/machines/{CLEAN}/histogram.svg?to=soon", 400, "to"),
        (f"/plots/machines/{CLEAN}/longterm.svg?zoom=2", 400, "zoom: unknown parameter"),
        (f"/plots/kernels/{K1}/coverage.svg?x=1", 400, "x: unknown parameter"),
        (f"/machines/{UNKNOWN}", 404, "no such machine"),
        ("/machines/not-a-machine", 404, "no such machine"),
        (f"/plots/machines/{UNKNOWN}/histogram.svg", 404, "no such machine"),
        (f"/plots/machines/{UNKNOWN}/longterm.svg", 404, "no such machine"),
        ("/kernels/9.9-nope", 404, "no such kernel release"),
        ("/plots/kernels/9.9-nope/coverage.svg", 404, "no such kernel release"),
    ]
    for path, want, words in errors:
        status, ctype, body = farm.get(path)
        text, _ = visible(body)
        check(status == want and ctype.startswith("text/html") and words in text,
              f"GET {path}: {want} page saying \"{words}\"", f"{status} {ctype} {text[:400]}")
    status, ctype, body = farm.get("/", method="POST")
    check(status == 405 and ctype.startswith("text/html"), "POST /: 405", status)
    status, _, _ = farm.get("/plots/machines/x/other.svg")
    check(status == 404, "an unknown plot: 404", status)

    # The violations table lists the first 200 steps over the bound and counts the rest: the
    # other machine's bound lowered to 1 us (last: its pages above were asked with its own).
    subprocess.run([SERVER, f"--db={farm.db}", "machine", "set", OTHER, "--bound", "1us",
                    "--reason", "every step a violation"], check=True, capture_output=True)
    status, _, body = farm.get(f"/machines/{OTHER}?window=1d")
    sec = body[body.find('id="violations"'):]
    sec = sec[:sec.find("</table>") + len("</table>") + 200]
    m = re.search(r"Violations \((\d+) steps over the bound of 1(?:\.0)? µs\)", sec)
    n = int(m.group(1)) if m else 0
    rows = sec.count(">zoom</a></td></tr>")
    check(status == 200 and n > 200 and rows == 200
          and f"and {n - 200} more; narrow the window." in sec,
          "a machine page with more than 200 steps over the bound lists the first 200 and "
          "counts the rest", f"{status} {n} steps, {rows} rows: {sec[:300]}")


# ---- in Chromium --------------------------------------------------------------------------


def chromium(args, url, timeout=120):
    profile = tempfile.mkdtemp(prefix="profile-", dir=PROFILE)
    cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-dev-shm-usage", "--disable-extensions",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-default-apps", "--user-data-dir=" + profile, *args, url]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return p.returncode, p.stdout, p.stderr


def load(job):
    """The DOM of a page after its scripts ran, and its screenshot (one start of Chromium,
    which is slow on a small machine)."""
    url, name, size = job
    path = os.path.join(ARTEFACTS, f"dashboard-{name}.png")
    if os.path.exists(path):
        os.unlink(path)
    rc, out, err = chromium(["--dump-dom",
                             f"--screenshot={path}", f"--window-size={size}"], url)
    check(rc == 0 and "<html" in out, f"chromium loads {url}", err[-600:])
    check(os.path.exists(path) and os.path.getsize(path) > 10000,
          f"screenshot of {url} in {path}", err[-600:])
    return out


def test_browser(farm):
    base = farm.url
    jobs = [(base + "/", "overview", "1400,1000"),
            (base + f"/kernels/{K2}?compare={q(K1)}", "kernel", "1400,1800"),
            (base + f"/machines/{CLEAN}", "machine", "1400,2000"),
            (base + "/", "overview-wall", "2560,1440")]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        overview, kernel, machine, _ = pool.map(load, jobs)

    # The overview: the silent machine cannot be missed.
    page = overview
    text, links = visible(page)
    m = re.search(r'<div class="alert" id="silent">(.*?)</div>', page, re.S)
    check(m and "lab-silent" in m.group(1) and "SILENT" in m.group(1),
          "the overview flags the silent machine at the top, in words", page[:1500])
    check(m and "lab-clean" not in m.group(1), "a reporting machine is not flagged",
          m.group(1) if m else "")
    check(page.find('id="silent"') < page.find('id="machines"'),
          "the silent banner comes before the machine table")
    check(re.search(r'<tr class="silent">.*?lab-silent.*?SILENT', page, re.S),
          "the silent machine's row says SILENT")
    check("FAILED" in text and "PENDING" in text, "the overview shows each kernel's verdict")
    check("has not run" in text, "the overview says what a kernel still waits for")
    check('data-local="1"' in page, "times are shown in the viewer's time zone (script ran)")

    # The failed kernel: its reason is visible, with a link to the evidence.
    text, links = visible(kernel)
    check("FAILED" in text, "the failed kernel's page says FAILED", text[:300])
    check(re.search(r"CPU 1: latency 500us over the bound of 100us", text),
          "the failed kernel's reason is visible", text[:1500])
    check("culprit: " + CULPRIT in text, "the failed kernel's problem names the culprit",
          text[:2000])
    check("regression" in text, "the comparison is on the kernel's page", text[-500:])
    ev = [a["href"] for a in links if a.get("class") == "evidence"]
    check(len(ev) >= 1, "the problem has an evidence link", links)

    # The evidence: the machine page zoomed on the interval, which is highlighted.
    if ev:
        href = ev[0].replace("&amp;", "&")
        u = urllib.parse.urlsplit(href)
        qs = dict(urllib.parse.parse_qsl(u.query))
        check(u.path == f"/machines/{FAIL}", "the evidence link leads to the machine's page",
              href)
        span = int(qs.get("to", 0)) - int(qs.get("from", 0))
        check(0 < span <= 12 * 3600 * 10**9, "the evidence link is zoomed (at most 12 h)", qs)
        check(int(qs.get("from", 0)) <= int(qs.get("hl_from", -1)) < int(qs.get("hl_to", -1))
              <= int(qs.get("to", 0)), "the interval lies in the window", qs)
        page = load((base + href, "evidence", "1400,1800"))
        check('id="highlight"' in page and 'class="highlight"' in page,
              "the machine page highlights the interval (note and plot)")
        check(re.search(r'<tr class="hl">.*?500 µs', page, re.S),
              "the violation's row is highlighted")
        row = re.search(r'<tr class="hl">(.*?)</tr>', page, re.S)
        row_text = visible(row.group(1))[0] if row else ""
        check(CULPRIT in row_text, "the violation's row names the culprit", row_text)
        raw = re.search(r'<a class="trace" href="([^"]+)"', row.group(1) if row else "")
        status, ctype, body = farm.get(raw.group(1)) if raw else (0, "", "")
        check(status == 200 and ctype.startswith("text/plain") and "sched_switch" in body,
              "the violation's raw trace downloads from the machine page",
              f"{status} {ctype} {body[:200]}")

    # The machine page: one curve per CPU on a log axis, and the long-term plot.
    page = machine
    svgs = re.findall(r"<svg .*?</svg>", page, re.S)
    hist = [s for s in svgs if "rtsoak-plot histogram" in s]
    check(len(svgs) >= 2 and hist, "the machine page has its plots inline", len(svgs))
    if hist:
        cpus = sorted(set(re.findall(r'<path[^>]*class="curve[^"]*"[^>]*data-cpu="(\d+)"',
                                     hist[0]) + re.findall(
            r'<path[^>]*data-cpu="(\d+)"[^>]*class="curve', hist[0])))
        check(cpus == ["0", "1", "2", "3"], "the histogram has one curve per CPU", cpus)
        labels = re.findall(r'class="y-label"[^>]*>([^<]*)<', hist[0])
        check({"1", "10", "100", "1k"} <= set(labels), "the histogram's axis is logarithmic",
              labels)
    check('class="worst-line"' in page and 'class="bound"' in page,
          "the long-term plot shows the worst case and the bound")

    # Its inventory: what it is now, and the change, a value of markup shown as text.
    sec = re.search(r'<h2 id="inventory">.*?(?=<h2 id="runs")', page, re.S)
    text = visible(sec.group(0))[0] if sec else ""
    check(f"memory.hugepages 0 → {HUGEPAGES_MARKUP}" in text,
          "the machine page shows the inventory's change, old and new", text[:1500])
    check(re.search(r"Changes \(1\)", text) and "2 fields" in text,
          "the machine page counts the changes and the current fields", text[:600])
    check(sec and "<i>" not in sec.group(0),
          "an inventory value is text on the page, not markup", sec.group(0)[:1500] if sec else "")


# ---- intervals longer than the plot's step, scenario colours --------------------------------

HOURLY = "a1000000000000000000000000000011"   # hour-long intervals, then one-minute ones
SLOW = "a2000000000000000000000000000012"     # 90-minute intervals, reporting
ORDER_A = "a3000000000000000000000000000013"  # rotation idle, cpu
ORDER_B = "a4000000000000000000000000000014"  # rotation cpu, idle
KH, KS = "6.6.7-rt7", "6.6.8-rt8"


class IntervalFarm(Farm):
    """A farm whose verdict period is one day (coverage bars of 4.8-minute bins) with machines
    whose intervals are longer than that, and two machines that ran the same scenarios in
    opposite orders."""

    def start(self):
        conf = os.path.join(self.dir, "server.conf")
        with open(conf, "w") as f:
            f.write("[Verdict]\nPeriod=1d\nScenarios=none\n")
        tokens = {m: self.enroll(m) for m in (HOURLY, SLOW, ORDER_A, ORDER_B)}
        self.proc = subprocess.Popen([SERVER, f"--config={conf}", f"--db={self.db}",
                                      "--listen", "127.0.0.1:0", "--rate", "1000000",
                                      "--burst", "1000000"],
                                     stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        for _ in range(500):
            m = re.search(r"Listening on (http://\S+)", open(self.log).read())
            if m:
                self.url = m.group(1)
                break
            time.sleep(0.02)
        if not self.url:
            raise RuntimeError("the server did not start: " + open(self.log).read())
        common = ["--server", self.url, "--quiet", "--batch", "1000", "--cpus", "2"]
        # The hour-long run ends where the one-minute run begins: an hour boundary a day ago
        # (with "1d ago" for both, the two replays' moments would leave a hole between them).
        switch = (int(time.time()) // 3600 - 24) * 3600
        switch_text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(switch))
        jobs = [
            [HOURLY, "--kernel", KH, "--from", "3d ago", "--to", switch_text, "--interval", "1h",
             "--run-id", "1"],
            [SLOW, "--kernel", KS, "--days", "2", "--interval", "90min", "--to", "now"],
            [ORDER_A, "--days", "1", "--interval", "1min", "--to", "now",
             "--rotation", "idle 1h, cpu 1h"],
            [ORDER_B, "--days", "1", "--interval", "1min", "--to", "now",
             "--rotation", "cpu 1h, idle 1h"],
        ]
        later = [HOURLY, "--kernel", KH, "--from", switch_text, "--to", "now", "--interval",
                 "1min", "--run-id", "2"]
        procs = [subprocess.Popen([REPLAY, *common, "--machine", j[0], "--token", tokens[j[0]],
                                   *j[1:]], stderr=subprocess.PIPE, text=True) for j in jobs]
        for p in procs:
            _, err = p.communicate(timeout=240)
            if p.returncode != 0:
                raise RuntimeError("rtsoak-replay failed: " + err)
        p = subprocess.run([REPLAY, *common, "--machine", HOURLY, "--token", tokens[HOURLY],
                            *later[1:]], capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            raise RuntimeError("rtsoak-replay failed: " + p.stderr)


def band_colours(root):
    colours = {}
    for r in root.iter(SVG_NS + "rect"):
        if r.get("class") == "band":
            name = r.find(SVG_NS + "title").text.split(":")[0]
            colours.setdefault(name, set()).add(r.get("fill"))
    return colours


def test_intervals(farm):
    # Scenario colours by name, the same on every machine's page.
    seen = {}
    for mid in (ORDER_A, ORDER_B):
        status, _, body = farm.get(f"/plots/machines/{mid}/longterm.svg")
        root = svg_root(body, f"long-term plot of {mid}") if status == 200 else None
        seen[mid] = band_colours(root) if root is not None else {}
    a, b = seen[ORDER_A], seen[ORDER_B]
    check(a.get("idle") and a.get("idle") == b.get("idle") and a.get("cpu") == b.get("cpu")
          and len(a.get("idle", ())) == 1 and a.get("idle") != a.get("cpu"),
          "each scenario has one colour, the same on two machines that ran them in other orders",
          f"{a} / {b}")

    # Hour-long intervals, then one-minute ones: no hour of the window is a silence.
    for window in ("?window=30d", "?window=1d", ""):
        status, _, body = farm.get(f"/machines/{HOURLY}{window}")
        text, _ = visible(body)
        sil = text[text.find("Silences"):text.find("Events (")]
        check(status == 200 and "None in this window" in sil and "SILENT" not in text,
              f"/machines/{HOURLY}{window}: hour-long intervals leave no silence", sil[:600])
    # A machine reporting every 90 minutes is not silent between its reports.
    status, _, body = farm.get(f"/machines/{SLOW}")
    text, _ = visible(body)
    sil = text[text.find("Silences"):text.find("Events (")]
    check(status == 200 and "None in this window" in sil and "SILENT" not in text,
          "a machine with 90-minute intervals is not silent between two reports", sil[:600])

    # The coverage bars say what the table says: covered wherever the intervals are, with the
    # verdict's figure beside each bar.
    for release, mid in ((KH, HOURLY), (KS, SLOW)):
        coverage_bar(farm, release, mid)


def coverage_bar(farm, release, machine):
    _, _, vj = farm.get(f"/api/v1/kernels/{release}/verdict")
    verdict = {m["id"]: m for m in json.loads(vj)["machines"]}
    status, _, body = farm.get(f"/plots/kernels/{release}/coverage.svg")
    root = svg_root(body, f"coverage plot of {release}") if status == 200 else None
    if root is None:
        check(False, f"the coverage plot of {release}", f"{status}")
        return
    for g in root.iter(SVG_NS + "g"):
        if g.get("class") != "machine":
            continue
        rects = [r for r in g.iter(SVG_NS + "rect") if r.get("class") in
                 ("covered", "missing", "problem")]
        label = [t for t in g.iter(SVG_NS + "text") if t.get("class") == "coverage"]
        href = [a.get("href") for a in g.iter(SVG_NS + "a")]
        mid = href[0].rsplit("/", 1)[-1] if href else "?"
        if mid != machine:
            continue
        covered = [(int(r.get("data-start-ns")), int(r.get("data-end-ns"))) for r in rects
                   if r.get("class") == "covered"]
        holes = [r for r in rects if r.get("class") != "covered" and covered
                 and covered[0][0] < int(r.get("data-start-ns")) < covered[-1][1]]
        check(covered and not holes,
              f"coverage bar of {mid}: covered from its first to its last interval, no hole",
              [(r.get("class"), r.get("data-start-ns"), r.get("data-end-ns")) for r in holes][:5])
        want = verdict.get(mid, {}).get("covered_ns")
        got = int(label[0].get("data-covered-ns")) if label else None
        check(want is not None and got == want,
              f"coverage bar of {mid} states the verdict's covered time", f"{got} != {want}")


# ---- a clock ahead of the server's ------------------------------------------------------------

YEAR = 365 * farmlib.DAY
TOLERANCE = 2 * farmlib.MIN  # ClockTolerance='s default


class ClockFarm:
    """lab-ahead: a run ending an hour ago, then a run stamped a year ahead whose one
    interval arrives now, and nothing after (it must be silent a few seconds later: MaxGap=3s,
    one-second intervals); lab-inside: reporting, its latest interval stamped a minute ahead
    of its arrival (inside the tolerance: shown as stamped); lab-jump: one interval a year
    ahead at its worst of 777 us, then a plain one of 33 us that began after it arrived; lab-steady: plain minute-long
    intervals up to now."""

    def start(self):
        self.farm = farmlib.Farm("dash-clock", verdict={"MaxGap": "3s"})
        f = self.farm
        self.ahead, self.inside = f.enroll("lab-ahead"), f.enroll("lab-inside")
        self.jump, self.steady = f.enroll("lab-jump"), f.enroll("lab-steady")
        f.start()
        self.url = f.url
        now = farmlib.now_ns()
        S = farmlib.SEC
        old = self.ahead.run(1, K1, start_ns=now - farmlib.HOUR - 60 * S, interval_ns=S)
        old.post(old.history(now - farmlib.HOUR - 30 * S, now - farmlib.HOUR, step_ns=S))
        new = self.ahead.run(2, K1, start_ns=now + YEAR, interval_ns=S)
        new.post([new.interval(now + YEAR, S, seq=1)])
        self.ahead_received = farmlib.now_ns()
        run = self.inside.run(1, K1, start_ns=now - 10 * farmlib.MIN, interval_ns=S)
        run.post(run.history(now - 20 * S, now, step_ns=S))
        self.inside_end = farmlib.now_ns() + farmlib.MIN
        run.post([run.interval(self.inside_end - S, S)])
        steady = self.steady.run(1, K1, start_ns=now - farmlib.HOUR, interval_ns=farmlib.MIN)
        steady.post(steady.history(now - 30 * farmlib.MIN, now, step_ns=farmlib.MIN))
        jump = self.jump.run(1, K1, start_ns=now - farmlib.HOUR, interval_ns=farmlib.MIN)
        jump.post(jump.history(now - 30 * farmlib.MIN, now - farmlib.MIN,
                               step_ns=farmlib.MIN))
        jump.post([jump.interval(now + YEAR, farmlib.MIN, cpu={"max_ns": 777 * farmlib.US})])
        # The clock set right: the next interval, a second long, sent once it ended.
        t = farmlib.now_ns()
        time.sleep(1.1)
        jump.post([jump.interval(t, S, cpu={"max_ns": 33 * farmlib.US}, seq=1000)])
        # lab-ahead's one-second interval and MaxGap=3s: silent from 4 s after its arrival.
        time.sleep(max(0, (self.ahead_received + 5 * S - farmlib.now_ns()) / S))

    def stop(self):
        self.farm.cleanup()

    def get(self, path, method="GET"):
        status, text, _ = self.farm.http(method, path)
        return status, "", text


def future_times_unmarked(page, now):
    """The times a page shows later than now and the tolerance, outside the marks of data
    stamped ahead of its arrival."""
    marked = re.sub(r'<span class="clock-ahead">.*?</span></span>|<span class="clock-ahead">'
                    r'.*?\)</span>', "", page, flags=re.S)
    return [int(t) for t in re.findall(r'<time data-ns="(-?\d+)"', marked)
            if int(t) > now + TOLERANCE]


def test_clock(cf):
    f = cf.farm
    now = farmlib.now_ns()
    ahead = f.get_json(f"/api/v1/machines/{cf.ahead.id}")
    inside = f.get_json(f"/api/v1/machines/{cf.inside.id}")
    listed = {m["id"]: m for m in f.get_json("/api/v1/machines").get("machines", [])}
    for name, m in (("GET /api/v1/machines/{id}", ahead),
                    ("GET /api/v1/machines", listed.get(cf.ahead.id, {}))):
        check(m.get("last_report_ns") is not None and
              cf.ahead_received - farmlib.SEC <= m["last_report_ns"] <= now,
              f"{name}: a year ahead: last_report_ns is when its upload arrived",
              m.get("last_report_ns"))
        check(m.get("last_data_ns") is not None and m["last_data_ns"] <= now and
              m["last_data_ns"] <= m["last_report_ns"],
              f"{name}: a year ahead: last_data_ns is its arrival, not the stamp a year ahead",
              {k: m.get(k) for k in ("last_data_ns", "last_data", "last_report_ns")})
        check(m.get("silent") is True,
              f"{name}: a year ahead, then silent for longer than MaxGap=: silent",
              m.get("silent"))
        check((m.get("clock_ahead_ns") or 0) > YEAR - farmlib.DAY,
              f"{name}: a year ahead: clock_ahead_ns says by how much", m.get("clock_ahead_ns"))
    lr = ahead.get("latest_run") or {}
    check(lr.get("id") == 2 and lr.get("start_ns", 0) > now + YEAR - farmlib.DAY and
          (lr.get("clock_ahead_ns") or 0) > YEAR - farmlib.DAY and
          lr.get("first_report_ns", now + 1) <= now,
          "latest_run: its start as stamped, flagged with clock_ahead_ns, and when it arrived",
          lr)
    check(inside.get("last_data_ns") == cf.inside_end and inside.get("clock_ahead_ns") is None
          and inside.get("silent") is False,
          "a minute ahead (inside ClockTolerance=): last_data_ns as stamped, not flagged",
          {k: inside.get(k) for k in ("last_data_ns", "clock_ahead_ns", "silent")})
    runs = f.get_json(f"/api/v1/machines/{cf.ahead.id}/runs")["runs"]
    r2, r1 = (runs + [{}, {}])[:2]
    check([r.get("id") for r in runs] == [2, 1] and
          (r2.get("clock_ahead_ns") or 0) > YEAR - farmlib.DAY and
          r2.get("last_data_ns", 0) > now + YEAR - farmlib.DAY and
          r2.get("last_received_ns", now + 1) <= now and r1.get("clock_ahead_ns", 0) is None and
          r1.get("last_received_ns", now + 1) <= now and r1.get("first_report_ns", now + 1) <= now,
          "runs: the stamps as sent, the run a year ahead flagged, each with its arrival", runs)
    runs = f.get_json(f"/api/v1/machines/{cf.inside.id}/runs")["runs"]
    check(runs and runs[0].get("clock_ahead_ns", 0) is None and
          runs[0].get("last_data_ns") == cf.inside_end,
          "runs: a minute ahead is as stamped, not flagged", runs)

    # The pages: lab-ahead is silent and flagged, no time a year ahead shows unmarked.
    status, _, page = cf.get(f"/machines/{cf.ahead.id}")
    text, _ = visible(page)
    check(status == 200 and 'id="silent"' in page and "SILENT" in text,
          "the machine page of a clock a year ahead, silent since its upload: SILENT",
          text[:600])
    check("clock ahead" in text and "stamped 365 d after it arrived" in text,
          "the machine page marks the clock ahead, and the run's stamps a year ahead",
          text[:3000])
    m = re.search(r'<td id="last-report">(.*?)</td>', page, re.S)
    t = re.findall(r'data-ns="(\d+)"', m.group(1)) if m else []
    check(t and cf.ahead_received - farmlib.SEC <= int(t[0]) <= now,
          "the machine page's last report is when the upload arrived", m.group(0) if m else "")
    check(not future_times_unmarked(page, now),
          "the machine page shows no time a year ahead without its mark",
          future_times_unmarked(page, now))
    status, _, page = cf.get(f"/machines/{cf.inside.id}")
    text, _ = visible(page)
    check(status == 200 and "reporting" in text and "clock ahead" not in text and
          'class="clock-ahead"' not in page,
          "a minute ahead: the machine page shows it as stamped, reporting, unmarked",
          text[:1500])
    status, _, page = cf.get("/")
    text, _ = visible(page)
    banner = re.search(r'<div class="alert" id="silent">(.*?)</div>', page, re.S)
    check(banner and "lab-ahead" in banner.group(1) and "lab-inside" not in banner.group(1)
          and "lab-steady" not in banner.group(1) and "lab-jump" not in banner.group(1),
          "the overview lists the machine a year ahead, and only it, as silent",
          banner.group(1) if banner else text[:800])
    rows = {n: r for r in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
            for n in ("lab-ahead", "lab-inside", "lab-jump", "lab-steady") if f">{n}<" in r}
    check("clock ahead" in rows.get("lab-ahead", "") and "clock ahead" in rows.get("lab-jump", "")
          and "clock ahead" not in rows.get("lab-inside", "x clock ahead")
          and "clock ahead" not in rows.get("lab-steady", "x clock ahead"),
          "the overview marks the clocks a year ahead, not the one inside the tolerance",
          rows)
    check(not future_times_unmarked(page, now),
          "the overview shows no time a year ahead without its mark",
          future_times_unmarked(page, now))

    # The latest interval is the one that arrived last, not the one stamped latest: /metrics'
    # last worst case, and the 24 hours the intervals query shows by default.
    status, metrics, _ = f.http("GET", "/metrics")

    def sample(family, mid):
        m = re.search(rf'^{family}{{machine="{mid}",[^}}]*}} (\S+)$', metrics, re.M)
        return float(m.group(1)) if m else None
    worst = sample("rtsoak_machine_last_worst_latency_seconds", cf.jump.id)
    check(worst is not None and abs(worst - 33e-6) < 1e-9,
          "/metrics: the last worst case is the interval that arrived last (33 us), not the one "
          "stamped a year ahead (777 us)", worst)
    for m in (cf.ahead, cf.jump):
        seen = sample("rtsoak_machine_last_report_timestamp_seconds", m.id)
        check(seen is not None and seen <= now / 1e9,
              f"/metrics: {m.hostname}'s last report is when its upload arrived", seen)
    iv = f.get_json(f"/api/v1/machines/{cf.jump.id}/intervals")
    check(iv["to_ns"] <= now + TOLERANCE and any(s["max_ns"] == 33 * farmlib.US
                                                for s in iv["steps"]),
          "the intervals query's default window ends at the data that arrived last",
          {k: iv.get(k) for k in ("from", "to")})


def main():
    global CHROMIUM, PROFILE
    mode = sys.argv[1] if len(sys.argv) > 1 else "http"
    if mode == "browser":
        CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
        if not CHROMIUM:
            print("1..0 # SKIP the chromium binary is missing (apt-get install chromium)")
            return 77
        PROFILE = tempfile.mkdtemp(prefix="rtsoak-chromium-")
    farm = {"intervals": IntervalFarm, "clock": ClockFarm}.get(mode, Farm)()
    tests = {"browser": test_browser, "intervals": test_intervals, "clock": test_clock}
    try:
        farm.start()
        tests.get(mode, test_http)(farm)
    except Exception as e:  # a failure of the set-up is a failure, never a pass
        check(False, f"{mode} test ran to its end", repr(e))
    finally:
        farm.stop()
        if mode == "browser":
            shutil.rmtree(PROFILE, ignore_errors=True)
    return tap()


if __name__ == "__main__":
    sys.exit(main())
