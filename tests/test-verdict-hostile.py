#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile histories against the "latest stable" verdict (docs/verdict.md), through the real
rtsoak-server and its HTTP API.

Each test is one invariant of docs/verdict.md and one attack on it: a farm history crafted so
that a verdict that does not hold the invariant says "qualified" (or a false "failed" or
"pending").  Every test checks the fields that prove the rule (verdict, problem kinds and ids,
coverage computed here from the history posted), not only "not qualified".  Controls: a clean
history that must qualify, and histories that must NOT fail or stay pending.

Each test starts its own server (tests/farmlib.py) with a short rule (a day's period,
10-minute intervals; seconds for the tests that run live), so that the tests run side by side.
TAP output, one line per test.  VERDICT_TESTS=REGEX runs only the tests whose name matches.
"""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farmlib import (DAY, HOUR, MIN, MS, SEC, US, Farm, FarmError,  # noqa: E402
                     covered_by_scenario, load_entry, machine_of, now_ns, problems_by_id,
                     rfc3339, scenario_of)

R = "6.6.30-rt31"
# No verdict log (Watch=0), and so no regression check (the baselines come from the log):
# the tests of invariants 9 and 10 turn both on (LOGGED).
STD = {"Period": "1d", "Scenarios": "idle 3h, cpu 3h, io 3h", "Watch": "0", "Regression": "no"}
LOGGED = {"Watch": "1s", "Regression": "yes"}
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


class Case:
    """The checks of one test: each failed check is kept with what was expected and seen."""

    def __init__(self, name):
        self.name = name
        self.failures = []
        self.checks = 0
        self.farms = []

    def farm(self, verdict=None, series=None, name=None, extra=""):
        f = Farm(name or self.name[5:30], STD if verdict is None else verdict, series, extra)
        self.farms.append(f)
        return f

    def check(self, ok, what, detail=""):
        self.checks += 1
        if not ok:
            self.failures.append(f"{what}: {detail}" if detail != "" else what)
        return bool(ok)

    def eq(self, actual, expected, what):
        return self.check(actual == expected, what, f"expected {expected!r}, got {actual!r}")

    def problem(self, v, pid, kind=None, key="problems", **fields):
        """The problem pid of v[key], checked for its kind and fields; None if absent."""
        p = problems_by_id(v, key).get(pid)
        listed = sorted(problems_by_id(v, key))
        if not self.check(p is not None, f"{key} holds {pid}", f"{key}: {listed[:20]}"):
            return None
        if kind:
            self.eq(p.get("kind"), kind, f"{pid}: kind")
        for k, want in fields.items():
            self.eq(p.get(k), want, f"{pid}: {k}")
        return p

    def no_kind(self, v, kind, machine=None, key="problems"):
        bad = [p.get("id") for p in v.get(key) or []
               if p.get("kind") == kind and (machine is None or p.get("machine") == machine.id)]
        return self.eq(bad, [], f"no {kind} problem{' of ' + machine.hostname if machine else ''}"
                                f" in {key}")

    def ids(self, v, kind=None, machine=None, key="problems"):
        every = [p.get("id") for p in v.get(key) or []]
        if len(set(every)) != len(every):
            self.check(False, f"every id in {key} names one problem",
                       sorted(x for x in set(every) if every.count(x) > 1)[:5])
        return sorted(p.get("id") for p in v.get(key) or []
                      if (kind is None or p.get("kind") == kind)
                      and (machine is None or p.get("machine") == machine.id))

    def machine(self, v, m, **fields):
        mv = machine_of(v, m)
        if not self.check(mv is not None, f"machines lists {m.hostname}",
                          [x.get("hostname") for x in v.get("machines") or []]):
            return {}
        for k, want in fields.items():
            self.eq(mv.get(k), want, f"{m.hostname}: {k}")
        return mv

    def same_in_list(self, f, v):
        """The kernel list (GET /api/v1/kernels) says what the verdict says."""
        rel = v.get("release")
        k = [x for x in f.get_json("/api/v1/kernels?limit=1000").get("kernels") or []
             if x.get("release") == rel]
        self.eq([(x.get("verdict"), x.get("problems")) for x in k],
                [(v.get("verdict"), v.get("problems_total"))],
                f"GET /api/v1/kernels agrees with the verdict of {rel}")
        # What is missing and why: the verdict's first 20 and how many (docs/api.md).
        for key in ("missing", "reasons"):
            full = v.get(key) or []
            self.eq([(x.get(key), x.get(key + "_total")) for x in k], [(full[:20], len(full))],
                    f"GET /api/v1/kernels: {key} of {rel}, the verdict's first 20 and its count")

    def missing(self, v, what, m=None):
        return [x for x in v.get("missing") or [] if x.get("what") == what
                and (m is None or x.get("machine") == m.id)]


def clean(m, kernel, start, end, run_id=1, step=10 * MIN, tweak=None, post=True, **run_kw):
    """A run of machine m (uname -r `kernel`) with contiguous clean intervals from start to
    end; run_kw: Run()'s keyword arguments (release=, probed=, probe_ns=, ...)."""
    r = m.run(run_id, kernel, start_ns=start, **run_kw)
    ivs = r.history(start, end, step, tweak)
    if post:
        r.post(ivs)
    return r, ivs


def span_sum(ivs):
    return sum(iv["length_ns"] for iv in ivs)


def stretches(ivs, pred):
    """Maximal runs of consecutive intervals (by seq) for which pred holds."""
    out, cur = [], []
    for iv in ivs:
        if pred(iv):
            cur.append(iv)
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def end_of_history():
    """The end of a history posted now: a second ago, so that the verdict at "now" judges all
    of it and the silence after it is far below any MaxGap."""
    return now_ns() - SEC


# ---- controls ------------------------------------------------------------------------------


@test
def test_control_clean_history_qualifies(c):
    """Positive control (all invariants): two gating machines (2 and 4 CPUs) with 49 h of clean,
    fully measured data of one release, every required scenario with its load running, must
    qualify with exactly the time they measured, no problem, nothing missing; `rtsoak verdict`
    exits 0.  A suite in which every verdict comes out failed or pending cannot pass this."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b", cpus=4)
    f.start()
    E = end_of_history()
    S = E - 49 * HOUR  # holds a whole UTC day (the day rollups), wherever now is
    ivs = {m: clean(m, R, S, E)[1] for m in (a, b)}
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict")
    c.eq(v.get("problems"), [], "problems")
    c.eq(v.get("problems_total"), 0, "problems_total")
    c.eq(v.get("missing"), [], "missing")
    c.eq((v.get("gating_machines"), v.get("machines_ran")), (2, 2), "gating_machines, machines_ran")
    c.eq(v.get("series"), "6.6-rt", "series (major.minor and -rt)")
    c.eq((v.get("group"), v.get("group_source")), ("default", "default"),
         "group: no machine is in group 6.6-rt, so the group default judges")
    c.eq(v.get("late"), {"intervals": 0, "events": 0, "covered_ns": 0}, "late")
    c.same_in_list(f, v)
    for m in (a, b):
        mv = c.machine(v, m, covered_ns=49 * HOUR, clean_ns=49 * HOUR, missing_ns=0,
                       status="complete", ran=True)
        for name, ns in covered_by_scenario(ivs[m]).items():
            s = scenario_of(mv, name)
            c.eq(s and s.get("covered_ns"), ns, f"{m.hostname}: scenario {name} covered_ns")
            c.eq(s and s.get("required_ns"), 3 * HOUR, f"{m.hostname}: scenario {name} required_ns")
    # Asked about moments inside the history (one of them a UTC midnight, where the day
    # rollups meet): exactly the intervals that had ended count, all of them received late.
    midnight = (S // DAY + 1) * DAY
    edge = ivs[a][30]["start_ns"] + ivs[a][30]["length_ns"]  # an interval ends exactly then
    for T in (S + 13 * HOUR + 5 * MIN, edge, midnight, midnight + 7 * MIN,
              midnight + DAY + 3 * MIN):
        got = [iv for iv in ivs[a] if iv["start_ns"] + iv["length_ns"] <= T]
        w = f.verdict(R, at=str(T))
        c.eq(w.get("verdict"), "pending" if span_sum(got) < DAY else "qualified",
             f"verdict at {T}")
        for m in (a, b):
            c.machine(w, m, covered_ns=span_sum(got), missing_ns=max(0, DAY - span_sum(got)))
        c.eq(w.get("late"), {"intervals": 2 * len(got), "events": 0,
                             "covered_ns": 2 * span_sum(got)}, f"late at {T}")
        c.eq(c.ids(w), [], f"no problem at {T}")
    p = f.rtsoak("verdict", "--server", f.url, R)
    c.eq(p.returncode, 0, f"rtsoak verdict exit status ({p.stdout.strip()[:200]})")
    p = f.cli("verdict", R, check=False)
    c.eq(p.returncode, 0, f"rtsoak-server verdict exit status ({p.stderr.strip()[:200]})")


# ---- 1. Coverage is time measured, not time claimed ---------------------------------------


@test
def test_inv1_probe_stops_counting(c):
    """Invariant 1.  Attack: the daemon keeps uploading every 10 minutes, but CPU 1's probe
    delivers no wake-up for 3 hours (samples 0, the CPU still listed).  Those 3 hours are not
    coverage and not silence: one probe_down problem for the stretch, naming the machine, run,
    first interval and CPU, 3 h long; the machine's coverage is 22 h, so it cannot qualify."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    _, ivs = clean(b, R, S, E, tweak=lambda i, t, n: {"per_cpu": {1: {"samples": 0}}}
                   if 60 <= i < 78 else None)
    seq0 = ivs[60]["seq"]
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"probe_down:{b.id}:1:{seq0}:1", "probe_down", cpu=1, run=1,
              machine=b.id, value_ns=3 * HOUR)
    c.eq(c.ids(v, "probe_down"), [f"probe_down:{b.id}:1:{seq0}:1"],
         "one probe_down problem for one stretch")
    c.no_kind(v, "gap")
    c.machine(v, b, covered_ns=22 * HOUR, status="failed")
    c.same_in_list(f, v)
    c.machine(v, a, covered_ns=25 * HOUR, status="complete")
    miss = c.missing(v, "coverage", b)
    c.eq([x.get("missing_ns") for x in miss], [2 * HOUR], "lab-b misses 2 h of coverage")
    p = f.rtsoak("verdict", "--server", f.url, R)
    c.eq(p.returncode, 1, f"rtsoak verdict exit status ({p.stdout.strip()[:200]})")


@test
def test_inv1_cpu_absent_from_intervals(c):
    """Invariant 1.  Attacks: (b) a CPU of run.cpus missing from 12 intervals (the daemon uploads
    CPU 0 alone for 2 h); (c) a daemon that does not send run.cpus on a 4-CPU machine but
    uploads CPUs 0 and 1 only: CPUs 2 and 3 are taken as probed and never measured, so the
    machine measured nothing.  Control (d): a daemon that declares run.cpus=[0,1] on a 4-CPU
    machine and uploads those two measured in full: covered, no problem."""
    f = c.farm()
    a, b, cm, d = (f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c", cpus=4),
                   f.enroll("lab-d", cpus=4))
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    _, ivs = clean(b, R, S, E, tweak=lambda i, t, n: {"cpus": [0]} if 30 <= i < 42 else None)
    _, civs = clean(cm, R, S, E, probed=None, tweak=lambda i, t, n: {"cpus": [0, 1]})
    clean(d, R, S, E, probed=[0, 1])
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"probe_down:{b.id}:1:{ivs[30]['seq']}:1", "probe_down", cpu=1,
              value_ns=2 * HOUR)
    for cpu in (2, 3):
        c.problem(v, f"probe_down:{cm.id}:1:{civs[0]['seq']}:{cpu}", "probe_down", cpu=cpu,
                  value_ns=25 * HOUR)
    c.machine(v, b, covered_ns=23 * HOUR)
    c.machine(v, cm, covered_ns=0)
    c.machine(v, d, covered_ns=25 * HOUR, status="complete", problems=0)
    c.eq(c.ids(v, machine=d), [], "lab-d (run.cpus=[0,1] of 4 CPUs) has no problem")


@test
def test_inv1_share_below_minimum_and_impossible_counts(c):
    """Invariant 1.  Attacks: CPU 0 delivers 85 % of its wake-ups for an hour (below MinSamples=90
    %): not coverage, and a probe_down of 6 x 90 s of missing wake-ups; CPU 1 reports twice the
    wake-ups its 1 ms period allows for an hour (a count no probe can produce): not coverage
    either, and a problem.  An interval at exactly 90 % is coverage, but its 60 s of missing
    wake-ups exceed ProbeDownMax=1s: a problem too."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    full = 10 * MIN // MS

    def tweak(i, t, n):
        if 20 <= i < 26:
            return {"per_cpu": {0: {"samples": full * 85 // 100}}}
        if 80 <= i < 86:
            return {"per_cpu": {1: {"samples": 2 * full}}}
        if i == 100:
            return {"per_cpu": {0: {"samples": full * 90 // 100}}}
        return None
    _, ivs = clean(b, R, S, E, tweak=tweak)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"probe_down:{b.id}:1:{ivs[20]['seq']}:0", "probe_down", cpu=0,
              value_ns=6 * (full - full * 85 // 100) * MS)
    c.problem(v, f"probe_down:{b.id}:1:{ivs[100]['seq']}:0", "probe_down", cpu=0,
              value_ns=(full - full * 90 // 100) * MS)
    over = [p for p in v.get("problems") or [] if p.get("machine") == b.id and p.get("cpu") == 1]
    c.check(len(over) >= 1, "a problem for CPU 1's impossible counts",
            c.ids(v, machine=b))
    c.machine(v, b, covered_ns=25 * HOUR - 2 * HOUR, status="failed")
    # The stored facts do not depend on the rule's numbers: with MinSamples=80% the 85 % hour
    # is coverage, with ProbeDownMax=30min its 540 s of losses are no problem (the hour of
    # impossible counts still is); asked about a moment before the new rule, the old numbers
    # hold.
    before = now_ns()
    f.restart(dict(STD, MinSamples="80%", ProbeDownMax="30min"))
    v = f.verdict(R)
    c.machine(v, b, covered_ns=25 * HOUR - HOUR)
    c.eq(c.ids(v, "probe_down", b), [f"probe_down:{b.id}:1:{ivs[80]['seq']}:1"],
         "with the new rule only the hour of impossible counts is a problem")
    v = f.verdict(R, at=str(before))
    c.machine(v, b, covered_ns=25 * HOUR - 2 * HOUR)
    c.eq((v.get("rule") or {}).get("min_samples_permille"), 900, "the rule in force before")


@test
def test_inv1_spans_shrunk_mid_run(c):
    """Invariant 1.  Attack: for 3 hours in the middle of a run, CPU 1 claims a span of only the
    second half of each interval (samples matching that half): as if its probe restarted in
    every interval.  Only the intersection of the spans is coverage (26 h - 1.5 h = 24.5 h,
    still over the 24 h period), but the halves the probe did not measure are a probe that
    stopped counting, mid-run: probe_down, 1.5 h, so the release fails rather than qualifies on
    the strength of what the daemon chose to call its span."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 26 * HOUR
    clean(a, R, S, E)
    _, ivs = clean(b, R, S, E, tweak=lambda i, t, n: {
        "per_cpu": {1: {"span": (t + n // 2, n - n // 2)}}} if 60 <= i < 78 else None)
    v = f.verdict(R)
    c.machine(v, b, covered_ns=26 * HOUR - 18 * 5 * MIN)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"probe_down:{b.id}:1:{ivs[60]['seq']}:1", "probe_down", cpu=1,
              value_ns=18 * 5 * MIN)


@test
def test_inv1_probe_period_unknown_or_too_long(c):
    """Invariant 1.  Attack: full sample counts from a run whose probe period is unknown (0), and
    from a run probing every 20 ms (longer than MaxProbeInterval=10ms).  Neither measures
    anything: one probe_down per run for CPU `all`, and no coverage at all."""
    f = c.farm()
    a, d, e = f.enroll("lab-a"), f.enroll("lab-d"), f.enroll("lab-e")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    _, divs = clean(d, R, S, E, probe_ns=0)
    _, eivs = clean(e, R, S, E, probe_ns=20 * MS)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"probe_down:{d.id}:1:{divs[0]['seq']}:all", "probe_down")
    c.problem(v, f"probe_down:{e.id}:1:{eivs[0]['seq']}:all", "probe_down")
    c.eq(len(c.ids(v, "probe_down", d)) + len(c.ids(v, "probe_down", e)), 2,
         "one probe_down per run that measures nothing")
    c.machine(v, d, covered_ns=0)
    c.machine(v, e, covered_ns=0)


@test
def test_control_vm_stall_and_partial_first_interval(c):
    """Control, invariant 1 (no false failed).  Once an hour a 20 ms hypervisor stall on CPU 1 (one
    20 ms sample, 19 periods missed), and the first interval of each of two runs has probes
    starting 1 s and 2 s into it (per-CPU spans, samples matching them); the second run starts
    exactly where the first ended.  None of this is probe_down nor overlap; coverage is the
    spans' intersection (25 h - 2 x 2 s).  The stalls are violations of the 100 us bound: once
    each is waived, the release qualifies."""
    f = c.farm()
    a = f.enroll("lab-vm")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    M = S + 12 * HOUR

    def tweak(i, start, n):
        if i == 0:
            return {"per_cpu": {0: {"span": (start + SEC, n - SEC)},
                                1: {"span": (start + 2 * SEC, n - 2 * SEC)}}}
        if i % 6 == 3:
            return {"per_cpu": {1: {"missed": 19, "max_ns": 20 * MS}}}
        return None
    _, ivs1 = clean(a, R, S, M, run_id=1, tweak=tweak)
    _, ivs2 = clean(a, R, M, E, run_id=2, tweak=tweak)
    stalls = [(1, iv["seq"]) for i, iv in enumerate(ivs1) if i % 6 == 3] + \
             [(2, iv["seq"]) for i, iv in enumerate(ivs2) if i % 6 == 3]
    want = sorted(f"violation:{a.id}:{r}:{s}:1" for r, s in stalls)
    v = f.verdict(R)
    c.no_kind(v, "probe_down")
    c.no_kind(v, "overlap")
    c.eq(c.ids(v, "violation"), want, "one violation per stall, on CPU 1")
    c.machine(v, a, covered_ns=25 * HOUR - 4 * SEC)
    for pid in c.ids(v, "violation"):
        st, text, _ = f.waive(R, pid, "hypervisor stall, known on this VM")
        c.eq(st, 201, f"waiver of {pid} ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict once the stalls are waived")
    c.eq(sorted(p.get("id") for p in v.get("waived") or []), want, "waived")
    c.machine(v, a, covered_ns=25 * HOUR - 4 * SEC, clean_ns=25 * HOUR - 4 * SEC,
              status="complete")


@test
def test_control_honest_counts_of_a_real_probe(c):
    """Control, invariant 1 (no false failed). rtsoakd's probe wakes up every 700 us on its own
    phase and counts each wake-up in the interval it was due in (daemon/probe.c), so a 10-minute
    interval, 857142.86 periods long, holds 857142 or 857143 wake-ups, alternately.  Both are
    what the period allows: coverage in full, no probe_down."""
    f = c.farm()
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    period = 700 * US
    _, ivs = clean(a, R, E - 25 * HOUR, E, probe_ns=period,
                   tweak=lambda i, t, n: {"cpu": {"samples": n // period + (i % 2)}})
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict")
    c.no_kind(v, "probe_down")
    c.machine(v, a, covered_ns=25 * HOUR, status="complete")


@test
def test_inv1_machine_missing_a_scenario_is_pending(c):
    """Invariant 1: the period under every required scenario.  lab-a measured 25 h, more than
    Period=1d, all of it idle: cpu and io never ran.  The release is pending and so is lab-a
    itself (its status is what `rtsoak verdict --junit` and the dashboard show per machine), not
    complete; lab-b, complete, is the control."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E, tweak=lambda i, t, n: {"scenario": "idle"})
    clean(b, R, S, E)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "verdict")
    c.machine(v, a, covered_ns=25 * HOUR, missing_ns=0, status="pending")
    c.machine(v, b, status="complete")
    c.eq(sorted(x.get("scenario") for x in c.missing(v, "scenario", a)), ["cpu", "io"],
         "missing: lab-a's scenarios cpu and io")


# ---- 2. Time is counted once ---------------------------------------------------------------


@test
def test_inv2_same_time_sent_twice(c):
    """Invariant 2.  Attack: 13 h of real data sent twice under other sequence numbers of the same
    run (26 h claimed), one upload replayed verbatim, and on a second machine 13 h sent as two
    copies shifted by 5 minutes.  Coverage is the union: 13 h each, so the release is pending
    (11 h missing per machine), and not failed: no problem at all."""
    f = c.farm()
    a, b, cm = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    rb, ivs = clean(b, R, E - 13 * HOUR, E, post=False)
    first = rb.doc(ivs[:40])
    b.post_doc(first)
    rb.post(ivs[40:])
    rb.post([dict(iv, seq=iv["seq"] + 1000) for iv in ivs])
    st, ans = b.post_doc(first)
    c.eq(ans and ans.get("status"), "duplicate", "a replayed upload is a duplicate")
    rc = cm.run(1, R, start_ns=E - 13 * HOUR)
    rc.post(rc.history(E - 13 * HOUR, E - 5 * MIN))
    rc.post([dict(iv, seq=iv["seq"] + 1000) for iv in rc.history(E - 13 * HOUR + 5 * MIN, E)])
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "verdict")
    c.eq(v.get("problems_total"), 0, "problems_total")
    p = f.rtsoak("verdict", "--server", f.url, R)
    c.eq(p.returncode, 2, f"rtsoak verdict exit status ({p.stdout.strip()[:200]})")
    for m in (b, cm):
        c.machine(v, m, covered_ns=13 * HOUR, missing_ns=11 * HOUR, status="pending")
        c.eq([x.get("missing_ns") for x in c.missing(v, "coverage", m)], [11 * HOUR],
             f"{m.hostname}: missing coverage")
    mv = machine_of(v, b) or {}
    for name, ns in covered_by_scenario(ivs).items():
        s = scenario_of(mv, name)
        c.eq(s and s.get("covered_ns"), ns, f"lab-b: scenario {name} counted once")


@test
def test_inv2_two_runs_at_once(c):
    """Invariant 2.  Attack: a second daemon (run 9) on lab-b measures 6 h while run 7 keeps
    running: 31 h claimed, 25 h of time, and two probes on one machine disturb each other.  An
    overlap problem overlap:MACHINE:7:9 over exactly those 6 h, coverage 25 h.  On lab-c a run
    of another release overlaps 2 h of the release's run: the overlap is a problem of both
    releases."""
    f = c.farm()
    a, b, cm = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    R2 = "6.6.31-rt32"
    clean(a, R, S, E)
    clean(b, R, S, E, run_id=7)
    clean(b, R, E - 12 * HOUR, E - 6 * HOUR, run_id=9)
    clean(cm, R, S, E, run_id=3)
    clean(cm, R2, E - 5 * HOUR, E - 3 * HOUR, run_id=4)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, f"overlap:{b.id}:7:9", "overlap", time_ns=E - 12 * HOUR, end_ns=E - 6 * HOUR)
    c.problem(v, f"overlap:{cm.id}:3:4", "overlap", time_ns=E - 5 * HOUR, end_ns=E - 3 * HOUR)
    c.machine(v, b, covered_ns=25 * HOUR)
    c.machine(v, cm, covered_ns=25 * HOUR)
    v2 = f.verdict(R2)
    c.problem(v2, f"overlap:{cm.id}:3:4", "overlap")
    c.eq(v2.get("verdict"), "failed", f"verdict of {R2}")
    c.machine(v2, cm, covered_ns=0)
    for pid in (f"overlap:{b.id}:7:9", f"overlap:{cm.id}:3:4"):
        st, text, _ = f.waive(R, pid, "a second daemon by mistake, measured nothing else")
        c.eq(st, 201, f"waiver of {pid} for {R} ({text[:200]})")
    c.eq(f.verdict(R).get("verdict"), "qualified", f"verdict of {R} once both are waived")
    v2 = f.verdict(R2)
    c.problem(v2, f"overlap:{cm.id}:3:4", "overlap")
    c.eq(v2.get("waived"), [], f"a waiver of {R} waives nothing of {R2}")


# ---- 3. The server's clock judges the machine's --------------------------------------------


@test
def test_inv3_clock_ahead(c):
    """Invariant 3.  Attacks: lab-b's clock jumps 2 h ahead and it uploads an hour stamped [now+1h,
    now+2h): a clock problem clock:MACHINE:RUN with that skew, and no coverage from it.  lab-d
    goes silent 3 h ago, then sends one interval stamped 30 minutes ahead: that interval does
    not end the silence (the gap stays ongoing). lab-g sends an event stamped an hour ahead: a
    clock problem too.  lab-h reboots with its clock 2 h ahead: its second run's start and
    interval are stamped then, after the moment asked, yet arrived before it: a clock problem of
    that run.  ?at= an hour ahead of the server is refused with 400.  Control: lab-f's last
    interval ends 60 s after its arrival (within ClockTolerance=2min): no clock problem."""
    f = c.farm()
    a, b, d, ff, g, h = (f.enroll(x) for x in ("lab-a", "lab-b", "lab-d", "lab-f", "lab-g",
                                                "lab-h"))
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    rb, _ = clean(b, R, S, E)
    t = now_ns()
    ahead = [rb.interval(t + HOUR + k * 10 * MIN, 10 * MIN) for k in range(6)]
    before = now_ns()
    rb.post(ahead)
    after = now_ns()
    rd, _ = clean(d, R, S - 2 * HOUR, E - 3 * HOUR)
    rd.post([rd.interval(now_ns() + 30 * MIN, 10 * MIN)])
    future_end = now_ns() + 60 * SEC
    clean(ff, R, future_end - 26 * HOUR, future_end)
    rg, _ = clean(g, R, S, E)
    rg.post([], [{"id": 1, "time_ns": now_ns() + HOUR, "type": "scenario", "cpu": None,
                  "value": None, "message": "scenario io started"}])
    clean(h, R, S, E)
    rh = h.run(2, R, start_ns=now_ns() + 2 * HOUR)
    rh.post([rh.interval(rh.start_ns, 10 * MIN)])
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    p = c.problem(v, f"clock:{b.id}:1", "clock", machine=b.id)
    if p:
        skew = p.get("value_ns") or 0
        lo, hi = t + 2 * HOUR - after, t + 2 * HOUR - before
        c.check(lo - SEC <= skew <= hi + SEC, "lab-b's skew is that of its latest stamp",
                f"{skew} not in [{lo}, {hi}]")
    c.machine(v, b, covered_ns=25 * HOUR)
    c.problem(v, f"gap:{d.id}:{E - 3 * HOUR}:ongoing", "gap", ongoing=True)
    c.problem(v, f"clock:{d.id}:1", "clock")
    c.problem(v, f"clock:{g.id}:1", "clock", machine=g.id)
    c.problem(v, f"clock:{h.id}:2", "clock", machine=h.id)
    c.eq([x for x in c.ids(v) + c.ids(v, key="not_counted") if x.startswith(f"clock:{ff.id}")],
         [], "no clock problem within the tolerance")
    vb = f.verdict(R, at=str(before))
    c.eq([x for x in c.ids(vb) if x.startswith("clock:" + b.id)], [],
         "no clock problem of lab-b before its skewed data arrived")
    st, text, obj = f.verdict_raw(R, at=str(now_ns() + HOUR))
    c.eq(st, 400, "?at= an hour ahead is refused")
    err = (obj or {}).get("error", "")
    c.check(err.startswith("at=") and "in the future" in err, "the error names at= and the future",
            err)


# ---- 4. A past verdict never changes behind anyone's back ----------------------------------

REPLAY_RULE = {"Period": "10s", "Scenarios": "none", "MaxGap": "4s", "ProbeDownMax": "1s"}
ASKED = re.compile(r'"asked_at(_ns)?":("[^"]*"|-?\d+|null)')


def without_asked(text):
    return ASKED.sub(r'"asked_at\1":~', text)


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            lo = max(0, i - 120)
            return f"at byte {i}: ...{a[lo:i + 80]}... vs ...{b[lo:i + 80]}..."
    return f"lengths {len(a)} and {len(b)}"


def replay_model(T, ivs_by_machine, period, max_gap, violations=()):
    """What the verdict at T must be from the intervals given (those judged at T): failed
    when an interval of `violations` is among them or a machine has been silent longer than
    MaxGap, else qualified when every machine has measured the period, else pending.  None
    where a number is within 100 ms of its limit (the model and the server may then differ
    by rounding)."""
    unsure = silent = short = bad = False
    for ivs in ivs_by_machine.values():
        got = [iv for iv in ivs if iv["start_ns"] + iv["length_ns"] <= T]
        cov = span_sum(got)
        end = max(iv["start_ns"] + iv["length_ns"] for iv in got)
        unsure |= abs((T - end) - max_gap) < 100 * MS or abs(cov - period) < 100 * MS
        silent |= T - end > max_gap
        short |= cov < period
        bad |= any(id(iv) in {id(x) for x in violations} for iv in got)
    if unsure:
        return None
    return "failed" if silent or bad else "pending" if short else "qualified"


class LiveRun:
    """The recorded run of test_inv4_replay_and_ask_again: three machines upload an interval
    every ~1.2 s; lab-b's uploads stay in its outbox from round OUTAGE on, one of them with a
    violation (round VIOLATION) and its event."""
    ROUNDS, OUTAGE, VIOLATION = 18, 11, 13

    def __init__(self, c, f):
        self.c, self.f = c, f
        self.ms = [f.enroll(h) for h in ("lab-a", "lab-b", "lab-c")]
        self.a, self.b, self.cm = self.ms
        f.start()
        start = max(m.info()["enrolled_ns"] for m in self.ms) + MS
        self.runs = {m: m.run(1, R, start_ns=start, interval_ns=SEC) for m in self.ms}
        self.last = {m: start for m in self.ms}
        self.posted = {m: [] for m in self.ms}
        self.backlog, self.events, self.recorded = [], [], []

    def round(self, k):
        t = now_ns() - 50 * MS
        for m in self.ms:
            r = self.runs[m]
            spike = m is self.b and k == self.VIOLATION
            kw = {"per_cpu": {0: {"max_ns": 400 * US}}} if spike else {}
            iv = r.interval(self.last[m], t - self.last[m], None, loads=[], **kw)
            self.last[m] = t
            if m is self.b and k >= self.OUTAGE:
                self.backlog.append(iv)
                if k == self.VIOLATION:
                    self.violation_iv = iv
                    self.events.append({"id": 1, "time_ns": iv["start_ns"] + iv["length_ns"] // 2,
                                        "type": "violation", "cpu": 0, "value": 400 * US,
                                        "message": "latency over the threshold"})
                continue
            r.post([iv])
            self.posted[m].append((k, iv))
        st, text, obj = self.f.verdict_raw(R)
        if not self.c.check(st == 200 and obj, f"round {k}: the verdict answers",
                            f"{st} {text[:300]}"):
            return False
        self.recorded.append({"k": k, "text": text, "at_ns": obj.get("at_ns"),
                              "asked_at_ns": obj.get("asked_at_ns"), "verdict": obj.get("verdict")})
        return True

    def check_recorded(self):
        """The answers given during the run follow the rule."""
        c, seen = self.c, [r["verdict"] for r in self.recorded]
        for rec in self.recorded:
            want = replay_model(rec["at_ns"], {m: [iv for k, iv in self.posted[m] if k <= rec["k"]]
                                               for m in self.ms}, 10 * SEC, 4 * SEC)
            if want:
                c.eq(rec["verdict"], want, f"round {rec['k']}: the verdict given then")
        c.check({"pending", "qualified", "failed"} <= set(seen),
                "the run went through pending, qualified and failed", seen)
        c.check(all(r["at_ns"] == r["asked_at_ns"] for r in self.recorded),
                "a verdict asked without at= judges the moment it was asked",
                [(r["at_ns"], r["asked_at_ns"]) for r in self.recorded][:3])
        iv = self.posted[self.b][-1][1]
        b_end = iv["start_ns"] + iv["length_ns"]
        gap_id = f"gap:{self.b.id}:{b_end}:ongoing"
        silent = [json.loads(r["text"]) for r in self.recorded
                  if r["at_ns"] - b_end > 4 * SEC + 100 * MS]
        c.check(silent and all(gap_id in problems_by_id(x) for x in silent),
                f"the answers given while lab-b was silent name {gap_id}",
                [c.ids(x) for x in silent][:2])

    def behind_their_back(self):
        """Late data, settings changed, a waiver, a new hostname, another rule."""
        c, f, a = self.c, self.f, self.a
        self.runs[self.b].post(self.backlog, self.events)
        self.viol = f"violation:{self.b.id}:1:{self.violation_iv['seq']}:0"
        st, text, _ = f.settings(a, "narrowed after the run", bound_ns=20 * US)
        c.check(st in (200, 201), f"settings of lab-a ({text[:200]})", st)
        st, text, _ = f.settings(self.cm, "taken out of the gating group", gating=False)
        c.check(st in (200, 201), f"settings of lab-c ({text[:200]})", st)
        st, text, _ = f.waive(R, self.viol, "reproduced, harmless")
        c.eq(st, 201, f"waiver of {self.viol} ({text[:200]})")
        a.hostname = "lab-a-renamed"
        ra2 = a.run(2, R, start_ns=now_ns(), interval_ns=SEC)
        time.sleep(0.3)
        ra2.post([ra2.interval(ra2.start_ns, now_ns() - ra2.start_ns - MS, None, loads=[])])
        f.restart(dict(REPLAY_RULE, MaxGap="6s"))

    def ask_known_at(self):
        """?known_at=: what was said then, byte for byte."""
        for rec in self.recorded:
            st, text, obj = self.f.verdict_raw(R, known_at=str(rec["asked_at_ns"]))
            if self.c.check(st == 200 and obj, f"round {rec['k']}: ?known_at= answers",
                            f"{st} {text[:300]}"):
                a1, a2 = without_asked(rec["text"]), without_asked(text)
                self.c.check(a1 == a2, f"round {rec['k']}: ?known_at= repeats the answer given "
                             "then", first_difference(a1, a2))

    def ask_at(self):
        """?at=: the same answer unless data stamped before the moment arrived after it."""
        c = self.c
        for rec in self.recorded:
            T = rec["at_ns"]
            st, text, obj = self.f.verdict_raw(R, at=str(T))
            if not c.check(st == 200 and obj, f"round {rec['k']}: ?at= answers",
                           f"{st} {text[:300]}"):
                continue
            late = [iv for iv in self.backlog if iv["start_ns"] + iv["length_ns"] <= T]
            want = {"intervals": len(late), "events": sum(e["time_ns"] <= T for e in self.events),
                    "covered_ns": span_sum(late)}
            c.eq(obj.get("late"), want, f"round {rec['k']}: late")
            c.eq((obj.get("rule") or {}).get("max_gap_ns"), 4 * SEC,
                 f"round {rec['k']}: the rule in force then")
            if not late:
                a1, a2 = without_asked(rec["text"]), without_asked(text)
                c.check(a1 == a2, f"round {rec['k']}: ?at= asked again gives the same answer",
                        first_difference(a1, a2))
                continue
            everything = {m: [iv for _, iv in self.posted[m]] for m in self.ms}
            everything[self.b] = everything[self.b] + self.backlog
            want = replay_model(T, everything, 10 * SEC, 4 * SEC, [self.violation_iv])
            if want:
                c.eq(obj.get("verdict"), want, f"round {rec['k']}: ?at= with the outage delivered")
            c.eq([x for x in c.ids(obj) if x.startswith(f"gap:{self.b.id}")], [],
                 f"round {rec['k']}: lab-b's silence is filled")
            if self.violation_iv in late:
                c.problem(obj, self.viol, "violation")

    def ask_at_known_at(self):
        """?at=T&known_at=K: what was known at K about T.  Nothing stamped by round 5 arrived
        after it, so round 10 knew the same; the outage was not known yet at round 15."""
        for kt, kk in ((5, 10), (12, 15)):
            rec, known = self.recorded[kt], self.recorded[kk]
            st, text, _ = self.f.verdict_raw(R, at=str(rec["at_ns"]),
                                             known_at=str(known["asked_at_ns"]))
            if self.c.check(st == 200, f"?at= round {kt} &known_at= round {kk} answers",
                            text[:300]):
                a1, a2 = without_asked(rec["text"]), without_asked(text)
                self.c.check(a1 == a2, f"?at= round {kt} as known at round {kk} is the answer "
                             "given then", first_difference(a1, a2))

    def ask_now(self):
        """Now: the waiver holds, the rule is the new one, lab-c no longer gates; and the
        questions that cannot be answered."""
        c, f = self.c, self.f
        v = f.verdict(R)
        c.check(self.viol in problems_by_id(v, "waived"), "the violation is waived now",
                c.ids(v, key="waived"))
        c.eq((v.get("rule") or {}).get("max_gap_ns"), 6 * SEC, "the rule in force now")
        c.check(machine_of(v, self.cm) is None, "lab-c does not gate now",
                [x.get("hostname") for x in v.get("machines") or []])
        T0 = self.recorded[0]["at_ns"]
        st, _, _ = f.verdict_raw(R, known_at=str(now_ns() + HOUR))
        c.eq(st, 400, "?known_at= in the future is refused")
        st, _, _ = f.verdict_raw(R, at=str(T0 + SEC), known_at=str(T0))
        c.eq(st, 400, "?at= after ?known_at= is refused")


@test
def test_inv4_replay_and_ask_again(c):
    """Invariant 4, and 5 and 6 through it.  A run recorded live: three machines upload an interval
    every ~1.2 s for 18 rounds (period 10 s, MaxGap 4 s) and the verdict is asked after each;
    lab-b's network fails after round 10 (its outbox keeps the intervals).  Then, behind the
    recorded answers' back: lab-b's outbox delivers the outage (with a 400 us violation and its
    event), lab-a's bound is narrowed below its data, lab-c is un-gated, the violation is
    waived, lab-a comes back under a new hostname, and the server restarts with another rule
    (MaxGap 6 s).  Asked again, ?known_at= of each recorded moment must give the recorded answer
    byte for byte (but for asked_at/asked_at_ns); ?at= of each moment before the outage the same
    answer with late all 0, and of each moment after it late counts of exactly the outage's
    intervals, event and time received late.  The recorded answers themselves follow the rule:
    pending, then qualified, then failed (lab-b silent)."""
    run = LiveRun(c, c.farm(REPLAY_RULE))
    for k in range(run.ROUNDS):
        time.sleep(1.2)
        if not run.round(k):
            return
    run.check_recorded()
    run.behind_their_back()
    run.ask_known_at()
    run.ask_at()
    run.ask_at_known_at()
    run.ask_now()


@test
def test_inv4_data_stamped_at_the_moment_asked(c):
    """Invariant 4: the data stamped up to the moment asked counts, that moment included.  lab-a's
    last interval measured 150 us and ends at E: asked at E, it is a violation (and its time
    coverage); asked a nanosecond before, neither.  lab-b's daemon reported an unclean end at T:
    asked at T it is a problem, asked a nanosecond before it is not yet."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    _, ivs = clean(a, R, S, E, tweak=lambda i, t, n: {"per_cpu": {0: {"max_ns": 150 * US}}}
                   if t + n == E else None)
    rb, _ = clean(b, R, S, E)
    T = E - HOUR
    rb.post([], [{"id": 9999, "time_ns": T, "type": "unclean_end", "cpu": None, "value": None,
                  "message": "the daemon found its last run ended uncleanly"}])
    viol = f"violation:{a.id}:1:{ivs[-1]['seq']}:0"
    v = f.verdict(R, at=str(E))
    c.eq(c.ids(v, "violation"), [viol], "asked at the end of the violating interval")
    c.eq(v.get("verdict"), "failed", "verdict at E")
    c.machine(v, a, covered_ns=25 * HOUR)
    v = f.verdict(R, at=str(E - 1))
    c.eq(c.ids(v, "violation"), [], "asked a nanosecond before its end")
    c.machine(v, a, covered_ns=25 * HOUR - 10 * MIN)
    v = f.verdict(R, at=str(T))
    c.eq(len(c.ids(v, "unclean_end", b)), 1, "asked at the moment of the unclean end")
    c.eq(v.get("verdict"), "failed", "verdict at T")
    v = f.verdict(R, at=str(T - 1))
    c.eq(c.ids(v, "unclean_end"), [], "asked a nanosecond before it")


@test
def test_inv4_late_data_in_a_whole_day(c):
    """Invariant 4, on the day rollups.  lab-b's 49 h (a whole UTC day inside) miss 2 hours in the
    middle of that day: the verdict is failed (a gap).  Then the outage's intervals arrive late,
    lab-a's bound is narrowed below its data, and the server restarts with another MaxGap.
    ?known_at= of the first answer repeats it byte for byte (the day's rollup, which now holds
    the late intervals, must not be read for it); ?at= of it now qualifies, with late counting
    exactly the 12 intervals and their 2 hours."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 49 * HOUR
    clean(a, R, S, E)
    rb = b.run(1, R, start_ns=S)
    ivs = rb.history(S, E)
    noon = (S // DAY + 1) * DAY + 12 * HOUR
    out = [iv for iv in ivs if noon <= iv["start_ns"] < noon + 2 * HOUR]
    rb.post([iv for iv in ivs if iv not in out])
    st, first, v1 = f.verdict_raw(R)
    c.eq(st, 200, "the first verdict")
    v1 = v1 or {}
    gap = f"gap:{b.id}:{out[0]['start_ns']}:{out[-1]['start_ns'] + out[-1]['length_ns']}"
    c.eq((v1.get("verdict"), c.ids(v1)), ("failed", [gap]), "the first verdict: the outage's gap")
    time.sleep(0.05)
    rb.post(out)
    st, text, _ = f.settings(a, "narrowed", bound_ns=10 * US)
    c.check(st in (200, 201), f"lab-a's bound narrowed ({text[:200]})", st)
    f.restart(dict(STD, MaxGap="30min"))
    st, text, obj = f.verdict_raw(R, known_at=str(v1.get("asked_at_ns")))
    a1, a2 = without_asked(first), without_asked(text)
    c.check(st == 200 and a1 == a2, "?known_at= repeats the first answer",
            f"{st} {first_difference(a1, a2)}")
    w = f.verdict(R, at=str(v1.get("at_ns")))
    c.eq(w.get("verdict"), "qualified", "?at= the first moment, with the outage delivered")
    c.eq(w.get("late"), {"intervals": len(out), "events": 0, "covered_ns": span_sum(out)}, "late")
    c.eq((w.get("rule") or {}).get("max_gap_ns"), 15 * MIN, "the rule in force then")
    c.machine(w, b, covered_ns=49 * HOUR)
    # The command lines, for gating scripts: what was said then (failed), and now (qualified).
    k = str(v1.get("asked_at_ns"))
    p = f.rtsoak("verdict", "--server", f.url, "--known-at", k, R)
    c.eq(p.returncode, 1, f"rtsoak verdict --known-at: exit status ({p.stdout.strip()[:200]})")
    p = f.cli("verdict", R, "--known-at", k, check=False)
    c.eq(p.returncode, 1, f"rtsoak-server verdict --known-at: exit status ({p.stderr[:200]})")
    p = f.rtsoak("verdict", "--server", f.url, R)
    c.eq(p.returncode, 0, f"rtsoak verdict now: exit status ({p.stdout.strip()[:200]})")


@test
def test_inv4_machine_enrolled_afterwards(c):
    """Invariant 4.  A release qualifies ?at=T on lab-a and lab-b.  Attack: lab-n is enrolled
    after T and has sent nothing (it had no settings at T): ?at=T must still say qualified with
    two gating machines, not pending because lab-n "has not run" it.  Control: lab-r, also
    enrolled after T, replays a history of another release stamped before T: its own data
    counts, so at T it gated and had not run the release (pending)."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    for m in (a, b):
        clean(m, R, S, E)
    T = E + MS
    wait_until(T + MS)
    v = f.verdict(R, at=str(T))
    c.eq((v.get("verdict"), v.get("gating_machines")), ("qualified", 2), "at T, before lab-n")
    n = f.enroll("lab-n")
    v = f.verdict(R, at=str(T))
    c.eq((v.get("verdict"), v.get("gating_machines")), ("qualified", 2),
         f"at T, after lab-n was enrolled with nothing of that time ({v.get('reasons')})")
    c.check(n.id not in [x.get("id") for x in v.get("machines") or []],
            "lab-n is not among the gating machines at T", v.get("machines"))
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "now: lab-n gates and has not run it")
    r = f.enroll("lab-r")
    clean(r, "6.6.29-rt30", S, E - 20 * HOUR, run_id=1)
    v = f.verdict(R, at=str(T))
    c.eq(v.get("verdict"), "pending", "at T with lab-r's replayed history of that time")
    c.eq(c.missing(v, "not_run", r) != [], True, "lab-r has not run the release by T")


@test
def test_inv4_at_equal_to_known_at(c):
    """Invariant 4: ?at=T&known_at=T (the moment asked not after the moment known: allowed)
    answers as ?known_at=T does, and `rtsoak verdict --at T --known-at T` gates on it."""
    f = c.farm()
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    clean(a, R, E - 25 * HOUR, E)
    T = now_ns() - MS  # after every upload: all of it known then
    st, text, _ = f.verdict_raw(R, at=str(T), known_at=str(T))
    c.eq(st, 200, f"?at=T&known_at=T answers ({text[:200]})")
    st2, text2, _ = f.verdict_raw(R, known_at=str(T))

    def strip(x):
        return re.sub(r'"asked_at(_ns)?":("[^"]*"|[0-9]+)', "", x)
    c.check(st2 == 200 and strip(text) == strip(text2), "the same answer as ?known_at=T")
    p = f.rtsoak("verdict", "--server", f.url, "--at", rfc3339(T), "--known-at", rfc3339(T), R)
    c.eq(p.returncode, 0, f"rtsoak verdict --at T --known-at T: qualified "
                          f"({p.stderr.strip()[:200]})")


# ---- 5. Machine settings have a history ----------------------------------------------------


def wait_until(ns):
    while now_ns() < ns:
        time.sleep(max(0.01, min(1.0, (ns - now_ns()) / SEC)))


@test
def test_inv5_settings_changed_afterwards(c):
    """Invariant 5.  Attack: lab-a (bound 100 us) measures 150 us after its enrolment; then its
    bound is widened to 200 us, it is un-gated (staff API), and revoked.  The violation, judged
    with the bound of its time, stays a problem of the release through all three (not moved to
    not_counted); only a waiver removes it.  The same for lab-d's violation after lab-d is moved
    to another group.  Changing settings does not change the token (uploads still accepted), and
    the history keeps who, when and why.  Control: lab-c, enrolled with a 200 us bound, measures
    150 us and is later narrowed to 100 us: no violation, ever."""
    f = c.farm()
    a, b, d = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-d")
    cm = f.enroll("lab-c", "--bound", "200us")
    f.start()
    enrolled = max(m.info()["enrolled_ns"] for m in (a, b, cm, d))
    wait_until(enrolled + 1500 * MS)
    E = enrolled
    runs, vseq, ends = {}, {}, {}
    for m in (a, b, cm, d):
        r, _ = clean(m, R, E - 25 * HOUR, E)
        runs[m] = r
        kw = {"per_cpu": {0: {"max_ns": 150 * US}}} if m is not b else {}
        iv = r.interval(E + 100 * MS, now_ns() - E - 200 * MS, "idle", **kw)
        r.post([iv])
        vseq[m] = iv["seq"]
        ends[m] = iv["start_ns"] + iv["length_ns"]
    viol = f"violation:{a.id}:1:{vseq[a]}:0"
    dviol = f"violation:{d.id}:1:{vseq[d]}:0"

    def still(v, when):
        c.eq(v.get("verdict"), "failed", f"verdict {when}")
        c.problem(v, viol, "violation", threshold_ns=100 * US, value_ns=150 * US, cpu=0)
        c.problem(v, dviol, "violation")
        c.eq([x for x in c.ids(v, "violation") if x not in (viol, dviol)], [],
             f"no other violation {when} (lab-c's 150 us was within its 200 us)")

    still(f.verdict(R), "at first")
    f.cli("machine", "set", a.id, "--bound", "200us", "--reason", "widened after the fact",
          "--by", "alice")
    f.cli("machine", "set", cm.id, "--bound", "100us", "--reason", "narrowed later", "--by", "bob")
    f.cli("machine", "set", d.id, "--groups", "rack-z", "--reason", "moved to another rack",
          "--by", "carol")
    still(f.verdict(R), "after lab-a's bound was widened")
    t = now_ns() - 10 * MS
    for m in (a, cm):
        iv = runs[m].interval(ends[m], t - ends[m], "idle")
        st, ans = m.post_doc(runs[m].doc([iv]), expect=None)
        c.eq(st, 200, f"{m.hostname}'s token still uploads after its settings changed")
    st, text, _ = f.settings(a, "out of the gating group", gating=False)
    c.check(st in (200, 201), f"staff API: un-gate lab-a ({text[:200]})", st)
    v = f.verdict(R)
    still(v, "after lab-a was un-gated")
    c.eq(v.get("gating_machines"), 2, "gating_machines after lab-a was un-gated")
    f.cli("revoke", a.id)
    still(f.verdict(R), "after lab-a was revoked")
    st, text, _ = f.waive(R, viol, "bound mis-set on lab-a, ticket 7")
    c.eq(st, 201, f"waiver ({text[:200]})")
    c.eq(f.verdict(R).get("verdict"), "failed", "verdict with lab-d's violation unwaived")
    st, text, _ = f.waive(R, dviol, "lab-d's spike, ticket 8")
    c.eq(st, 201, f"waiver of lab-d's violation ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict once waived (lab-b and lab-c gate, clean)")
    c.check(viol in problems_by_id(v, "waived"), "the violation is listed as waived",
            c.ids(v, key="waived"))
    st, text, obj = f.http("GET", f"/api/v1/machines/{a.id}/settings")
    c.eq(st, 200, "GET the settings of lab-a")
    for word in ("widened after the fact", "alice", "out of the gating group"):
        c.check(word in text, f"the settings history of lab-a holds {word!r}", text[:600])
    st, text, _ = f.http("GET", "/api/v1/audit?limit=1000")
    c.eq(st, 401, "the audit trail names staff: not read without a staff token")
    st, text, _ = f.http("GET", "/api/v1/audit?limit=1000", token=f.staff)
    c.check("widened after the fact" in text and "narrowed later" in text,
            "the audit trail holds the settings changes", text[:600])


def history_with_one_violation(f, bad, good, cpu):
    """Starts farm f; machines bad and good each run R for 25 h up to their enrolment and an
    interval after it, bad's with 150 us on cpu: that violation's id."""
    f.start()
    E = max(m.info()["enrolled_ns"] for m in (bad, good))
    wait_until(E + 1500 * MS)
    seq = {}
    for m in (bad, good):
        r, _ = clean(m, R, E - 25 * HOUR, E)
        kw = {"per_cpu": {cpu: {"max_ns": 150 * US}}} if m is bad else {}
        iv = r.interval(E + 100 * MS, now_ns() - E - 200 * MS, "idle", **kw)
        r.post([iv])
        seq[m] = iv["seq"]
    return f"violation:{bad.id}:1:{seq[bad]}:{cpu}"


@test
def test_inv5_series_group_emptied_afterwards(c):
    """Invariant 5 and the gating group (Terms).  Attack: lab-s, the only machine of the series'
    group 6.6-rt, measures 150 us; then it is moved to another group, which leaves 6.6-rt
    without a member, while lab-d (group default) ran the release cleanly.  The group that
    judges stays 6.6-rt (it had a member), lab-s's violation stays counted (it gated when it
    measured), and once waived the release is pending (no machine gates 6.6-rt), never
    qualified by lab-d."""
    f = c.farm()
    s, d = f.enroll("lab-s", "--groups", "6.6-rt"), f.enroll("lab-d")
    viol = history_with_one_violation(f, s, d, 0)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict while lab-s is in 6.6-rt")
    c.problem(v, viol, "violation")
    f.cli("machine", "set", s.id, "--groups", "rack-b", "--reason", "moved to rack B")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict after lab-s left 6.6-rt (its only member)")
    c.problem(v, viol, "violation")
    c.check(viol not in problems_by_id(v, "not_counted"),
            "lab-s's violation is not moved to not_counted", c.ids(v, key="not_counted"))
    c.eq((v.get("group"), v.get("group_source")), ("6.6-rt", "series"),
         "the series' group still judges")
    st, text, _ = f.waive(R, viol, "lab-s's spike, ticket 9")
    c.eq(st, 201, f"waiver ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "waived, with no machine in 6.6-rt: pending")
    c.eq(v.get("gating_machines"), 0, "no machine gates 6.6-rt")


@test
def test_inv5_series_group_made_afterwards(c):
    """Invariant 5 and the gating group (Terms).  Attack: the release runs on lab-e and lab-n,
    both of group default (the series' group 6.6-rt has no member), and lab-e measures 150 us;
    then lab-n is moved into 6.6-rt.  The new group judges from then on, "default" the time
    before: lab-e's violation, measured while it gated under default, stays counted."""
    f = c.farm()
    e, n = f.enroll("lab-e"), f.enroll("lab-n")
    viol = history_with_one_violation(f, e, n, 1)
    v = f.verdict(R)
    c.eq((v.get("verdict"), v.get("group_source")), ("failed", "default"),
         "verdict while 6.6-rt has no member")
    c.problem(v, viol, "violation")
    f.cli("machine", "set", n.id, "--groups", "6.6-rt", "--reason", "the series' rack")
    v = f.verdict(R)
    c.eq((v.get("group"), v.get("group_source")), ("6.6-rt", "series"),
         "6.6-rt judges once it has a member")
    c.eq(v.get("verdict"), "failed", "verdict after lab-n joined 6.6-rt")
    c.problem(v, viol, "violation")
    c.check(viol not in problems_by_id(v, "not_counted"),
            "lab-e's violation is not moved to not_counted", c.ids(v, key="not_counted"))


@test
def test_inv5_series_group_enrolled_afterwards(c):
    """Invariant 5, 4 and the gating group (Terms).  Attack: lab-a and lab-b (group default) run
    the release, lab-a measures 150 us; then lab-c is enrolled straight into the series' group
    6.6-rt and replays a clean history of the release from before.  The group judges from
    lab-c's enrolment on: lab-a's violation, measured while default judged, stays counted, and
    ?known_at= a moment before the enrolments (lab-e's too, of group default, without data)
    still gives the answer given then."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    viol = history_with_one_violation(f, a, b, 0)
    said = f.verdict_raw(R)[1]
    c.eq((json.loads(said).get("verdict"), json.loads(said).get("group")),
         ("failed", "default"), "verdict before lab-c")
    time.sleep(0.05)
    cm = f.enroll("lab-c", "--groups", "6.6-rt")
    f.enroll("lab-e")  # of group default, no data: changes no past answer either
    E = cm.info()["enrolled_ns"]
    clean(cm, R, E - 25 * HOUR, E)
    v = f.verdict(R)
    c.eq((v.get("group"), v.get("group_source")), ("6.6-rt", "series"), "6.6-rt judges now")
    c.eq(v.get("verdict"), "failed", "verdict after lab-c was enrolled into 6.6-rt")
    c.problem(v, viol, "violation")
    c.check(viol not in problems_by_id(v, "not_counted"),
            "lab-a's violation is not moved to not_counted", c.ids(v, key="not_counted"))
    st, text, _ = f.verdict_raw(R, known_at=str(json.loads(said)["asked_at_ns"]))
    a1, a2 = without_asked(said), without_asked(text)
    c.check(st == 200 and a1 == a2, "?known_at= before lab-c's enrolment repeats the answer "
            "given then", first_difference(a1, a2))


@test
def test_inv4_retention_keeps_the_evidence(c):
    """Invariants 1 and 4 under retention.  Attack: four months ago lab-a ran release A and
    measured 150 us once, lab-b ran release B with CPU 1 delivering no wake-up for 3 hours, and
    lab-c ran release C (of another series) cleanly; then `rtsoak-server prune` drops those months.  A and B stay
    failed with the same problems (ids and all), now and asked ?known_at= a moment before the
    prune (byte for byte as then); C stays qualified (its coverage from the day rollups).  A
    --before in the future is refused.  And a rule made stricter afterwards, which would read a
    dropped day of C interval by interval, finds a "dropped" problem there, not a clean day; so
    does one of lab-d's release D, whose dropped day held a single interval."""
    f = c.farm(verdict={"Period": "1d", "Scenarios": "none", "Watch": "0", "MaxGap": "365d", "Regression": "no"})
    a, b = f.enroll("lab-a", "--groups", "9.1-rt"), f.enroll("lab-b", "--groups", "9.1-rt")
    cm = f.enroll("lab-c", "--groups", "9.2-rt")
    dm = f.enroll("lab-d", "--groups", "9.3-rt")
    f.start()
    S = (now_ns() - 130 * DAY) // DAY * DAY
    _, ivs_a = clean(a, "9.1.0-rt1", S, S + 25 * HOUR,
                     tweak=lambda i, t, n: {"per_cpu": {0: {"max_ns": 150 * US}}}
                     if i == 77 else None)
    _, ivs_b = clean(b, "9.1.0-rt2", S, S + 25 * HOUR,
                     tweak=lambda i, t, n: {"per_cpu": {1: {"samples": 0}}}
                     if 60 <= i < 78 else None)
    # C's CPU 0 missed 0.9 s of one interval's 600,000 wake-ups: clean by MinSamples=90 % and
    # ProbeDownMax=1s.
    clean(cm, "9.2.0-rt3", S, S + 25 * HOUR,
          tweak=lambda i, t, n: {"per_cpu": {0: {"samples": 599100}}} if i == 30 else None)
    # D's second day holds one interval, whose CPU 0 missed 0.9 s of its wake-ups (clean too).
    clean(dm, "9.3.0-rt1", S, S + 24 * HOUR + 10 * MIN,
          tweak=lambda i, t, n: {"per_cpu": {0: {"samples": 599100}}} if t >= S + DAY else None)
    viol = f"violation:{a.id}:1:{ivs_a[77]['seq']}:0"
    down = f"probe_down:{b.id}:1:{ivs_b[60]['seq']}:1"
    before = {}
    for rel in ("9.1.0-rt1", "9.1.0-rt2", "9.2.0-rt3"):
        before[rel] = f.verdict_raw(rel)[1]
    c.eq([json.loads(before[r])["verdict"] for r in sorted(before)],
         ["failed", "failed", "qualified"], "A, B and C before the prune")
    # The rollups against the intervals, while there are intervals to read.
    n, d, _ = f.raw_twin_differences()
    c.check(n > 0 and not d, "before the prune, the rollups and the intervals agree", d)
    f.raw_twin = False
    time.sleep(0.05)
    p = f.cli("prune", "--before=2100-01-01T00:00:00Z", check=False)
    c.eq(p.returncode, 64, f"prune --before in the future is refused ({p.stderr.strip()[:200]})")
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((now_ns() - 70 * DAY) // SEC))
    p = f.cli("prune", f"--before={cutoff}")
    m = re.search(r"(\d+) intervals", p.stderr)
    c.check(m and int(m.group(1)) > len(ivs_a), f"prune --before={cutoff} dropped intervals",
            p.stderr.strip()[:300])
    v = f.verdict("9.1.0-rt1")
    c.eq(v.get("verdict"), "failed", "A after the prune")
    c.problem(v, viol, "violation", value_ns=150 * US)
    v = f.verdict("9.1.0-rt2")
    c.eq(v.get("verdict"), "failed", "B after the prune")
    c.problem(v, down, "probe_down", value_ns=3 * HOUR)
    v = f.verdict("9.2.0-rt3")
    c.eq(v.get("verdict"), "qualified", "C after the prune (coverage from the day rollups)")
    for rel in ("9.1.0-rt1", "9.1.0-rt2", "9.2.0-rt3"):
        st, text, _ = f.verdict_raw(rel, known_at=str(json.loads(before[rel])["asked_at_ns"]))
        a1, a2 = without_asked(before[rel]), without_asked(text)
        c.check(st == 200 and a1 == a2, f"{rel}: ?known_at= before the prune repeats the answer "
                "given then", first_difference(a1, a2))
    # A rule made stricter afterwards would read C's first day interval by interval, and its
    # intervals are gone: a "dropped" problem, not a day taken for clean.
    f.restart({"Period": "1d", "Scenarios": "none", "Watch": "0", "Regression": "no",
               "MaxGap": "365d",
               "MinSamples": "99.9%"})
    v = f.verdict("9.2.0-rt3")
    dropped = f"dropped:{cm.id}:1:{S // DAY * DAY}"
    c.eq(v.get("verdict"), "failed", "C under MinSamples=99.9 % after the prune")
    c.problem(v, dropped, "dropped", run=1)
    st, text, _ = f.waive("9.2.0-rt3", dropped, "known: retention, and the rule changed")
    c.eq(st, 201, f"the dropped day can be waived ({text[:200]})")
    c.eq(f.verdict("9.2.0-rt3").get("verdict"), "pending",
         "waived, C lacks that day's coverage: pending, not qualified")
    # A dropped day of a single interval is as dropped as one of many.
    v = f.verdict("9.3.0-rt1")
    c.eq(c.ids(v, "dropped"), [f"dropped:{dm.id}:1:{S + DAY}"], "D's day of one interval")
    c.eq(v.get("verdict"), "failed", "D under MinSamples=99.9 % after the prune")


GATE_RULE = {"Period": "10s", "Scenarios": "none", "MaxGap": "1min"}


@test
def test_inv5_coverage_only_while_gating(c):
    """Invariant 5.  Attack: lab-x measures 8 s while not gating (enrolled --gating no), is then
    made gating and measures 4 s more: 12 s measured, over the 10 s period, but only 4 s while
    gating.  Its coverage is 4 s and the release is pending, not qualified.  lab-y, gating
    throughout, has all its time counted."""
    f = c.farm(GATE_RULE)
    x, y = f.enroll("lab-x", "--gating", "no"), f.enroll("lab-y")
    f.start()
    start = max(m.info()["enrolled_ns"] for m in (x, y)) + MS
    runs = {m: m.run(1, R, start_ns=start, interval_ns=SEC) for m in (x, y)}

    def post(m, t0, t1):
        r = runs[m]
        r.post([r.interval(t, min(SEC, t1 - t), None, loads=[]) for t in range(t0, t1, SEC)])
    wait_until(start + 8 * SEC + 200 * MS)
    for m in (x, y):
        post(m, start, start + 8 * SEC)
    st, text, _ = f.settings(x, "joins the gating group", gating=True)
    c.check(st in (200, 201), f"make lab-x gating ({text[:200]})", st)
    u = now_ns() + 100 * MS
    end = u + 4 * SEC
    wait_until(end + 200 * MS)
    post(x, u, end)
    post(y, start + 8 * SEC, end)
    v = f.verdict(R, at=str(end + 100 * MS))
    c.eq(v.get("verdict"), "pending", "verdict")
    c.machine(v, x, covered_ns=4 * SEC, missing_ns=6 * SEC, status="pending")
    c.machine(v, y, covered_ns=end - start, status="complete")
    c.eq(c.ids(v), [], "no problem")


@test
def test_inv5_gating_again_the_same_day(c):
    """Invariant 5.  Attack: lab-x measures 4 s while gating, is made non-gating and measures 4 s
    more, then is made gating again, all on one UTC day: the day's data spans the moment it
    stopped gating, so the day's totals cannot be taken whole.  Its coverage is 4 s, not 8."""
    f = c.farm(GATE_RULE)
    x = f.enroll("lab-x")
    f.start()
    start = x.info()["enrolled_ns"] + MS
    run = x.run(1, R, start_ns=start, interval_ns=SEC)

    def post(t0, t1):
        run.post([run.interval(t, min(SEC, t1 - t), None, loads=[]) for t in range(t0, t1, SEC)])
    wait_until(start + 4 * SEC + 200 * MS)
    post(start, start + 4 * SEC)
    st, text, _ = f.settings(x, "leaves the gating group", gating=False)
    c.check(st in (200, 201), f"make lab-x non-gating ({text[:200]})", st)
    u = now_ns() + 100 * MS
    wait_until(u + 4 * SEC + 200 * MS)
    post(u, u + 4 * SEC)
    st, text, _ = f.settings(x, "joins it again", gating=True)
    c.check(st in (200, 201), f"make lab-x gating again ({text[:200]})", st)
    time.sleep(0.3)
    v = f.verdict(R, at=str(now_ns() - 50 * MS))
    c.machine(v, x, covered_ns=4 * SEC)


# ---- 6. Silence is a problem unless it is explained -----------------------------------------


@test
def test_inv6_other_release_excuses_only_its_time(c):
    """Invariant 6.  Attack: lab-b runs the release for 10 h, goes silent, runs another release for
    3 h inside a 10 h hole, goes silent again, then runs the release for 24 h.  Only the 3 h of
    the other release are excused: the silences before (3 h) and after (4 h) them are two gaps
    with their start and end.  The other release, judged alone, has no gap (the machine ran the
    first one around it): pending, not failed."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    R2 = "6.6.31-rt32"
    clean(a, R, E - 25 * HOUR, E)
    clean(b, R, E - 44 * HOUR, E - 34 * HOUR, run_id=1)
    clean(b, R2, E - 31 * HOUR, E - 28 * HOUR, run_id=2)
    clean(b, R, E - 24 * HOUR, E, run_id=3)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    g1 = f"gap:{b.id}:{E - 34 * HOUR}:{E - 31 * HOUR}"
    g2 = f"gap:{b.id}:{E - 28 * HOUR}:{E - 24 * HOUR}"
    c.problem(v, g1, "gap", end_ns=E - 31 * HOUR, time_ns=E - 34 * HOUR)
    c.problem(v, g2, "gap", end_ns=E - 24 * HOUR, time_ns=E - 28 * HOUR)
    c.eq(c.ids(v, "gap"), sorted([g1, g2]), "exactly these two gaps")
    c.machine(v, b, covered_ns=34 * HOUR)
    c.same_in_list(f, v)
    v2 = f.verdict(R2)
    c.eq(v2.get("verdict"), "pending", f"verdict of {R2}")
    c.eq(c.ids(v2), [], f"no problem for {R2}")


@test
def test_inv6_other_release_at_the_release_start(c):
    """Invariant 6.  Edge: the other release's run ends 50 minutes after the release's first
    data anywhere (lab-b's own), inside the first hour: lab-b runs the release for 20 minutes,
    another release for 30, then the release again.  Those 30 minutes are excused like any
    other: no gap.  Control: lab-c, the same without the other release, has its gap."""
    f = c.farm()
    a, b, cc = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
    f.start()
    E = end_of_history()
    S = E - 26 * HOUR
    R2 = "6.6.31-rt32"
    clean(a, R, S + 10 * MIN, E)
    clean(b, R, S, S + 20 * MIN, run_id=1)
    clean(b, R2, S + 20 * MIN, S + 50 * MIN, run_id=2)
    clean(b, R, S + 50 * MIN, E, run_id=3)
    clean(cc, R, S, S + 20 * MIN, run_id=1)
    clean(cc, R, S + 50 * MIN, E, run_id=3)
    v = f.verdict(R)
    c.eq(c.ids(v, "gap"), [f"gap:{cc.id}:{S + 20 * MIN}:{S + 50 * MIN}"],
         "only lab-c's hole is a gap: lab-b ran another release in its")


@test
def test_inv6_other_release_interval_unfinished_at_the_moment_asked(c):
    """Invariant 6.  lab-b ran the release until E-10h, then another release from T-5min on, in
    10-minute intervals (T = E-5h).  Asked at T, the other release's first interval [T-5min,
    T+5min) has not ended: it excuses nothing, and lab-b has been silent since E-10h (ongoing).
    Asked at T+5min it has ended: lab-b reported since, under another release (no gap)."""
    R2 = "6.6.31-rt32"
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    T = E - 5 * HOUR
    clean(a, R, E - 25 * HOUR, E)
    clean(b, R, E - 25 * HOUR, E - 10 * HOUR, run_id=1)
    clean(b, R2, T - 5 * MIN, E, run_id=2)
    v = f.verdict(R, at=str(T))
    c.eq(c.ids(v, "gap", b), [f"gap:{b.id}:{E - 10 * HOUR}:ongoing"],
         "at T: lab-b silent since E-10h, the other release's unfinished interval excuses nothing")
    v = f.verdict(R, at=str(T + 5 * MIN))
    c.eq(c.ids(v, "gap", b), [], "at T+5min: lab-b reported since, under another release")


@test
def test_inv6_other_release_data_not_yet_received_at_known_at(c):
    """Invariants 4 and 6.  lab-b ran the release until E-10h and again from E-3h; in the hole it
    ran another release from E-9h to E-3h, but only that run's intervals from E-6h had arrived
    by K (its outbox delivered the first three hours after K).  ?known_at=K, what the server said
    at K: the gap from E-10h to E-6h.  Asked now: the gap from E-10h to E-9h."""
    R2 = "6.6.31-rt32"
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    clean(a, R, E - 25 * HOUR, E)
    clean(b, R, E - 25 * HOUR, E - 10 * HOUR, run_id=1)
    clean(b, R, E - 3 * HOUR, E, run_id=3)
    r2 = b.run(2, R2, start_ns=E - 9 * HOUR)
    early = r2.history(E - 9 * HOUR, E - 6 * HOUR)
    r2.post(r2.history(E - 6 * HOUR, E - 3 * HOUR))
    time.sleep(0.05)
    K = now_ns()
    time.sleep(0.05)
    r2.post(early)
    v = f.verdict(R, known_at=str(K))
    c.eq(c.ids(v, "gap", b), [f"gap:{b.id}:{E - 10 * HOUR}:{E - 6 * HOUR}"],
         "known_at=K: the other release's hours received after K excuse nothing")
    v = f.verdict(R)
    c.eq(c.ids(v, "gap", b), [f"gap:{b.id}:{E - 10 * HOUR}:{E - 9 * HOUR}"], "now: one hour")


@test
def test_inv6_other_release_interval_straddling_the_end_of_data(c):
    """Invariant 6 (control: no false gap).  lab-b's run of the release ends at E-10h; its run of
    another release, in 1-hour intervals, began half an hour before that ([E-10h30, E-9h30), ...
    up to E-5h30), and it ran the release again from E-5h30.  The hour that straddles the end of
    lab-b's data is time it reported: no gap in [E-10h, E-5h30).  lab-c, the same with its other
    release starting at E-9h30, has a gap of 30 min."""
    R2 = "6.6.31-rt32"
    f = c.farm()
    a, b, cm = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
    f.start()
    E = end_of_history()
    clean(a, R, E - 25 * HOUR, E)
    for m in (b, cm):
        clean(m, R, E - 25 * HOUR, E - 10 * HOUR, run_id=1)
    clean(b, R2, E - 10 * HOUR - 30 * MIN, E - 5 * HOUR - 30 * MIN, run_id=2, step=HOUR,
          interval_ns=HOUR)
    clean(cm, R2, E - 9 * HOUR - 30 * MIN, E - 5 * HOUR - 30 * MIN, run_id=2, step=HOUR,
          interval_ns=HOUR)
    for m in (b, cm):
        clean(m, R, E - 5 * HOUR - 30 * MIN, E, run_id=3)
    v = f.verdict(R)
    c.eq(c.ids(v, "gap", b), [], "lab-b: no gap")
    c.eq(c.ids(v, "gap", cm), [f"gap:{cm.id}:{E - 10 * HOUR}:{E - 9 * HOUR - 30 * MIN}"],
         "lab-c: the half hour before its other release")


@test
def test_inv6_hole_in_a_history_posted_out_of_order(c):
    """Invariant 6 (and 2).  Attack on the day rollups: lab-b's 49 h, with a 20-minute hole in the
    middle of a whole UTC day, arrive out of order (uploads of 7 intervals, every other one,
    newest first, then the rest), and a third of them twice under other sequence numbers.  The
    hole is still exactly one gap, gap:MACHINE:START:END, and the coverage is counted once."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 49 * HOUR  # holds a whole UTC day, wherever now is
    clean(a, R, S, E)
    rb = b.run(1, R, start_ns=S)
    ivs = rb.history(S, E)
    midday = (S // DAY + 1) * DAY + 12 * HOUR
    hole = [iv for iv in ivs if midday <= iv["start_ns"] < midday + 20 * MIN]
    h0 = max(iv["start_ns"] + iv["length_ns"] for iv in ivs if iv["start_ns"] < midday)
    h1 = min(iv["start_ns"] for iv in ivs if iv["start_ns"] >= midday + 20 * MIN)
    keep = [iv for iv in ivs if iv not in hole]
    batches = [keep[i:i + 7] for i in range(0, len(keep), 7)]
    for batch in batches[1::2][::-1] + batches[::2][::-1]:
        rb.post(batch)
    rb.post([dict(iv, seq=iv["seq"] + 5000) for iv in keep[::3]])
    v = f.verdict(R)
    c.eq(c.ids(v), [f"gap:{b.id}:{h0}:{h1}"], "one gap, the hole")
    c.machine(v, b, covered_ns=span_sum(keep))
    c.eq(v.get("verdict"), "failed", "verdict")


MAINT_RULE = {"Period": "1d", "Scenarios": "none", "MaxGap": "3s", "Watch": "0", "Regression": "no"}


@test
def test_inv6_maintenance_window(c):
    """Invariant 6 (control and attacks), and 4. lab-m has a maintenance window declared before it
    starts (now+5s to now+13s) and is silent exactly then: no gap, and the window is not
    coverage.  lab-n, silent at the same time without a window: gap:MACHINE:START:END. lab-k's
    window is cancelled before it starts: its silence is a gap.  lab-c's window (now+5s to
    now+25s) is cancelled at now+9s: the silence after the cancellation is a gap of its own.
    lab-q has been silent for 50 s when its window is declared starting then (within the minute
    allowed): the 50 s up to the declaration stay a gap (the window excuses from its declaration
    on), and asked about a moment before the declaration, the silence is not excused at all.  A window
    starting two hours ago is refused."""
    f = c.farm(MAINT_RULE)
    mm, nn, kk, cc, qq = (f.enroll(h) for h in ("lab-m", "lab-n", "lab-k", "lab-c", "lab-q"))
    f.start()
    t0 = now_ns()
    w0, w1, end = t0 + 5 * SEC, t0 + 13 * SEC, t0 + 29 * SEC
    q0 = t0 - 50 * SEC
    history = {}
    for m in (mm, nn, kk, cc, qq):
        history[m] = clean(m, R, t0 - HOUR, q0 if m is qq else w0,
                           tweak=lambda i, t, n: {"scenario": None, "loads": []})[0]
    q_before = now_ns()
    st, text, _ = f.maintenance(qq, q0, w1, "lab-q's switch replaced")
    q_after = now_ns()
    c.check(st in (200, 201), f"window for lab-q from 50 s ago ({st} {text[:200]})")
    st, text, _ = f.maintenance(mm, w0, w1, "firmware update")
    c.check(st in (200, 201), f"window for lab-m ({st} {text[:200]})")
    st, text, obj = f.maintenance(kk, w0, w1, "cancelled later")
    c.check(st in (200, 201), f"window for lab-k ({st} {text[:200]})")
    st, text, _ = f.http("POST", f"/api/v1/maintenance/{(obj or {}).get('id')}/cancel",
                         {"reason": "not needed"}, token=f.staff)
    c.eq(st, 200, f"cancel lab-k's window ({text[:200]})")
    st, text, cobj = f.maintenance(cc, w0, t0 + 25 * SEC, "cut short")
    c.check(st in (200, 201), f"window for lab-c ({st} {text[:200]})")
    st, text, _ = f.maintenance(mm, t0 - 2 * HOUR, t0 - HOUR, "excusing the past")
    c.eq(st, 400, f"a window starting 2 h ago is refused ({text[:200]})")
    for m in (mm, nn, kk, qq):
        r = history[m]
        r.post([r.interval(t, 2 * SEC, None, loads=[]) for t in range(w1, end, 2 * SEC)])
    wait_until(t0 + 9 * SEC)
    before = now_ns()
    st, text, _ = f.http("POST", f"/api/v1/maintenance/{(cobj or {}).get('id')}/cancel",
                         {"reason": "done early"}, token=f.staff)
    after = now_ns()
    c.eq(st, 200, f"cancel lab-c's window at now+9s ({text[:200]})")
    r = history[cc]
    r.post([r.interval(t, 2 * SEC, None, loads=[]) for t in range(t0 + 25 * SEC, end, 2 * SEC)])
    at = end + 500 * MS
    wait_until(at + 200 * MS)
    v = f.verdict(R, at=str(at))
    c.eq(c.ids(v, "gap", mm), [], "lab-m: no gap inside its window")
    c.eq(c.ids(v, "gap", nn), [f"gap:{nn.id}:{w0}:{w1}"], "lab-n: the silence is a gap")
    c.eq(c.ids(v, "gap", kk), [f"gap:{kk.id}:{w0}:{w1}"],
         "lab-k: a cancelled window excuses nothing")
    # A window started up to a minute ago excuses from its declaration on (docs/verdict.md):
    # the 50 s before it stay a gap, which ends when the window was declared.
    gq = c.ids(v, "gap", qq)
    c.check(len(gq) == 1 and gq[0].startswith(f"gap:{qq.id}:{q0}:") and
            q_before <= int(gq[0].split(":")[3]) <= q_after,
            "lab-q: silent until its window was declared, not before", (gq, q_before, q_after))
    gaps = c.ids(v, "gap", cc)
    ok = len(gaps) == 1 and gaps[0].endswith(f":{t0 + 25 * SEC}") and \
        before <= int(gaps[0].split(":")[2]) <= after
    c.check(ok, "lab-c: one gap, from the cancellation to its data", (gaps, before, after))
    for m in (mm, nn):
        c.machine(v, m, covered_ns=HOUR + 5 * SEC + (end - w1))
    v = f.verdict(R, at=str(t0 - 10 * SEC))
    c.eq(c.ids(v, "gap", qq), [f"gap:{qq.id}:{q0}:ongoing"],
         "lab-q, 10 s before its window was declared: silent, not excused")
    st, text, obj = f.http("GET", "/api/v1/maintenance")
    c.check(st == 200 and "firmware update" in text, "GET /api/v1/maintenance lists the window",
            f"{st} {text[:300]}")


@test
def test_inv6_ungating_ends_an_ongoing_silence(c):
    """Invariant 6 and 11.  Attack: lab-m stopped reporting 2 h ago.  Its silence is ongoing
    (gap:MACHINE:START:ongoing) and cannot be waived: a waiver of it would waive the future.
    Un-gating lab-m ends its silence then: the gap gets an end (when the settings changed), is
    still a problem, and once that gap is waived the release qualifies on lab-a alone, with
    lab-m among other_machines.  Made gating again while still silent, its silence counts
    again from then (MaxGap is 5 s here): the waiver of the old gap does not cover it."""
    f = c.farm(dict(STD, MaxGap="5s"))
    a, mm = f.enroll("lab-a"), f.enroll("lab-m")
    f.start()
    E = end_of_history()
    # lab-a reports every second up to a minute and a half from now (within ClockTolerance):
    # whenever asked in that time, it is not silent.
    ra, _ = clean(a, R, E - 25 * HOUR, E)
    ra.post(ra.history(E, E + 90 * SEC, SEC, scenario=None, loads=[]))
    clean(mm, R, E - 27 * HOUR, E - 2 * HOUR)
    ongoing = f"gap:{mm.id}:{E - 2 * HOUR}:ongoing"
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.problem(v, ongoing, "gap", ongoing=True)
    st, text, _ = f.waive(R, ongoing, "trying to waive the future")
    c.check(400 <= st < 500, f"an ongoing silence cannot be waived ({st} {text[:200]})")
    before = now_ns()
    st, text, _ = f.settings(mm, "retired", gating=False)
    after = now_ns()
    c.check(st in (200, 201), f"un-gate lab-m ({text[:200]})", st)
    v = f.verdict(R)
    gaps = [p for p in v.get("problems") or [] if p.get("id", "").startswith(f"gap:{mm.id}:")]
    c.eq(len(gaps), 1, "one gap of lab-m")
    if gaps:
        end = gaps[0]["id"].rsplit(":", 1)[1]
        c.check(end.isdigit() and before <= int(end) <= after,
                "the gap ends when lab-m stopped gating", f"{gaps[0]['id']} ({before}..{after})")
        c.eq(gaps[0].get("ongoing"), False, "the gap is no longer ongoing")
        st, text, _ = f.waive(R, gaps[0]["id"], "machine retired")
        c.eq(st, 201, f"waiver of the ended gap ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict")
    c.check(machine_of(v, mm) is None and any(x.get("id") == mm.id for x in
                                                v.get("other_machines") or []),
            "lab-m is among other_machines", v.get("other_machines"))
    # Gating again while still silent: the silence counts again, from then.
    before = now_ns()
    st, text, _ = f.settings(mm, "back in service", gating=True)
    after = now_ns()
    c.check(st in (200, 201), f"lab-m gating again ({text[:200]})", st)
    c.eq(f.verdict(R).get("verdict"), "qualified", "verdict just after: silent for less than "
         "MaxGap since it gates again")
    wait_until(after + 6 * SEC)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict with lab-m silent and gating again for 6 s")
    again = [x for x in c.ids(v, "gap", mm) if x.endswith(":ongoing")]
    c.check(len(again) == 1 and before <= int(again[0].split(":")[2]) <= after,
            "a new ongoing silence of lab-m, from when it gated again", (again, before, after))


# ---- 7. A load scenario counts only while its load ran -------------------------------------


def io_stretches(ivs):
    return stretches(ivs, lambda iv: iv["scenario"] == "io")


@test
def test_inv7_scenario_without_its_load(c):
    """Invariant 7.  Attacks: lab-b's io intervals carry a fileio generator that is up but reports
    zero throughput; lab-c's io intervals carry no fileio at all (a cpu generator instead).
    Neither is io coverage (0 for the scenario, the time still measured), and each io stretch
    longer than LoadDownMax=10min is a load_down of fileio, and so is the total.  Control lab-d:
    fileio running, plus an extra generator that is idle (not required by io): counts in full,
    no problem."""
    f = c.farm()
    a, b, cm, d = (f.enroll(h) for h in ("lab-a", "lab-b", "lab-c", "lab-d"))
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)

    def loads(kind):
        def t(i, start, n):
            if kind == "zero":
                return {"loads": [dict(load_entry("fileio", n, value=0.0))]}
            if kind == "absent":
                return {"loads": [load_entry("cpu", n)]}
            return {"loads": [load_entry("fileio", n), load_entry("memory", n, value=0.0)]}
        return lambda i, start, n: t(i, start, n) if (start // HOUR) % 3 == 2 else None
    ivs = {m: clean(m, R, S, E, tweak=loads(k))[1] for m, k in ((b, "zero"), (cm, "absent"),
                                                                (d, "extra"))}
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    for m in (b, cm):
        st = io_stretches(ivs[m])
        want = sorted([f"load_down:{m.id}:1:{s[0]['seq']}:fileio" for s in st
                       if span_sum(s) > 10 * MIN] + [f"load_down:{m.id}:total:fileio"])
        c.eq(c.ids(v, "load_down", m), want, f"{m.hostname}: load_down problems")
        mv = c.machine(v, m, covered_ns=25 * HOUR)
        sc = scenario_of(mv, "io")
        c.eq(sc and sc.get("covered_ns"), 0, f"{m.hostname}: io covered_ns")
        sc = scenario_of(mv, "cpu")
        c.eq(sc and sc.get("covered_ns"), covered_by_scenario(ivs[m])["cpu"],
             f"{m.hostname}: cpu covered_ns")
    mv = c.machine(v, d, covered_ns=25 * HOUR, status="complete")
    sc = scenario_of(mv, "io")
    c.eq(sc and sc.get("covered_ns"), covered_by_scenario(ivs[d])["io"], "lab-d: io covered_ns")
    c.eq(c.ids(v, machine=d), [], "lab-d: no problem")


@test
def test_inv7_load_down_in_total(c):
    """Invariant 7.  Attack: in every io hour of lab-b, two non-adjacent intervals have fileio up
    only 4 of their 10 minutes: never 10 minutes in a row, but over 1 h in total over the
    release: load_down:MACHINE:total:fileio, and io counts only the time fileio ran.  Control
    lab-c: one such interval per io hour stays under the total (no problem)."""
    f = c.farm()
    a, b, cm = (f.enroll(h) for h in ("lab-a", "lab-b", "lab-c"))
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)

    def down_at(which):
        def t(i, start, n):
            if (start // HOUR) % 3 == 2 and ((start % HOUR) // (10 * MIN)) in which:
                return {"loads": [load_entry("fileio", 4 * MIN)]}
            return None
        return t
    _, bivs = clean(b, R, S, E, tweak=down_at((0, 3)))
    _, civs = clean(cm, R, S, E, tweak=down_at((2,)))

    def down(ivs):
        return sum(iv["length_ns"] - iv["loads"][0]["up_ns"] for iv in ivs
                   if iv["scenario"] == "io")
    c.check(down(bivs) > HOUR and down(civs) < HOUR, "the history is as meant",
            (down(bivs), down(civs)))
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.eq(c.ids(v, "load_down", b), [f"load_down:{b.id}:total:fileio"], "lab-b: load_down")
    c.eq(c.ids(v, "load_down", cm), [], "lab-c: no load_down")
    for m, ivs in ((b, bivs), (cm, civs)):
        sc = scenario_of(machine_of(v, m), "io")
        c.eq(sc and sc.get("covered_ns"), covered_by_scenario(ivs)["io"] - down(ivs),
             f"{m.hostname}: io counts the time fileio ran")


@test
def test_inv7_several_generators_down_add_up(c):
    """Invariant 7.  Attack on the scenario mixed (cpu, fileio, memory, network): in one interval
    of every four, cpu runs 7 of its 10 minutes and memory 6.  When they were down is not known,
    so the scenario counts 10 - 3 - 4 = 3 minutes of such an interval, not the 6 minutes of the
    least-up generator.  (Never 10 minutes down in a row, and under 1 h in total: no load_down.)"""
    f = c.farm({"Period": "1d", "Scenarios": "mixed 20h", "Watch": "0", "Regression": "no"})
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    part = {"cpu": 7 * MIN, "memory": 6 * MIN}

    def tweak(i, t, n):
        up = part if i % 4 == 1 and i < 40 else {}
        return {"scenario": "mixed",
                "loads": [load_entry(g, up.get(g, n)) for g in ("cpu", "fileio", "memory",
                                                                 "network")]}
    _, ivs = clean(a, R, S, E, tweak=tweak)
    partial = sum(1 for i in range(len(ivs)) if i % 4 == 1 and i < 40)
    v = f.verdict(R)
    sc = scenario_of(machine_of(v, a), "mixed")
    c.eq(sc and sc.get("covered_ns"), 25 * HOUR - partial * 7 * MIN, "mixed covered_ns")
    c.no_kind(v, "load_down")
    c.eq(v.get("verdict"), "qualified", "verdict")


@test
def test_inv7_generator_named_like_a_required_one(c):
    """Invariant 7.  Attack: lab-a's cpu intervals carry a generator named "cpufreq", up and
    working, and no "cpu": a name that begins with the required one is not it, on a whole day
    (read from its rollup) as on the partial ones.  No cpu coverage, a load_down of cpu."""
    f = c.farm()
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    S = E - 49 * HOUR  # a whole UTC day inside
    clean(a, R, S, E, tweak=lambda i, t, n: {"loads": [load_entry("cpufreq", n)]}
          if (t // HOUR) % 3 == 1 else None)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    c.check(any(x.endswith(":cpu") for x in c.ids(v, "load_down", a)), "a load_down of cpu",
            c.ids(v))
    sc = scenario_of(machine_of(v, a), "cpu")
    c.eq(sc and sc.get("covered_ns"), 0, "cpu covered_ns")


@test
def test_control_limits_reached_not_exceeded(c):
    """Control, invariants 1 and 7 (no false failure at the documented limits, which are
    inclusive).  lab-a: in six io hours, one interval each with fileio up none of its 10 minutes:
    each stretch exactly LoadDownMax=10min, 1 h in all, exactly LoadDownTotal=1h.  lab-b: a
    probe period of 10 ms, exactly MaxProbeInterval=.  Neither is a problem; the release
    qualifies, lab-a's io coverage without those hours' 10 minutes."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    hit = set()

    def down(i, t, n):
        hour = t // HOUR
        if len(hit) < 6 and hour % 3 == 2 and n == 10 * MIN and hour not in hit:
            hit.add(hour)
            return {"loads": [load_entry("fileio", 0)]}
        return None
    _, ivs = clean(a, R, S, E, tweak=down)
    clean(b, R, S, E, probe_ns=10 * MS)
    c.eq(len(hit), 6, "six io hours with fileio down 10 minutes")
    v = f.verdict(R)
    c.eq(c.ids(v), [], "no problem")
    c.eq(c.ids(v, key="not_counted"), [], "nothing not counted")
    c.eq(v.get("verdict"), "qualified", "verdict")
    sc = scenario_of(machine_of(v, a), "io")
    c.eq(sc and sc.get("covered_ns"), covered_by_scenario(ivs)["io"] - HOUR,
         "lab-a: io covered_ns")
    c.machine(v, b, covered_ns=25 * HOUR)


@test
def test_inv7_scenario_named_by_a_prefix_or_none_covers_nothing(c):
    """Invariants 1 and 7.  Attack: lab-a's intervals name no scenario (null); lab-b's are named
    "i" and "c", the beginnings of the required idle, io and cpu.  Neither covers any required
    scenario: pending, each scenario missing with 0 covered, though 25 h were measured."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E, tweak=lambda i, t, n: {"scenario": None})
    clean(b, R, S, E, tweak=lambda i, t, n: {"scenario": "ic"[(t // HOUR) % 2]})
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "verdict")
    for m in (a, b):
        mv = c.machine(v, m, covered_ns=25 * HOUR, status="pending")
        for name in ("idle", "cpu", "io"):
            sc = scenario_of(mv, name)
            c.eq(sc and sc.get("covered_ns"), 0, f"{m.hostname}: {name} covered_ns")
        c.eq(sorted(x.get("scenario") for x in c.missing(v, "scenario", m)),
             ["cpu", "idle", "io"], f"missing: {m.hostname}'s scenarios")


# ---- 8. Gating groups per release series ---------------------------------------------------

SERIES = {"6.6-rt": {"Releases": "6.6.*-rt*", "Group": "rack-a"},
          "6.1-rt": {"Releases": "6.1.*-rt*", "Group": "rack-b"}}


@test
def test_inv8_other_series_does_not_block(c):
    """Control, invariant 8 (no false failed or pending). rack-a tests 6.6-rt, rack-b tests 6.1-rt.
    lab-b1 (rack-b) runs 6.1.90-rt40 with a violation and never runs 6.6.30-rt31: it neither
    blocks nor appears in the 6.6 release's verdict, which qualifies on rack-a; the 6.1 release
    fails on its own group."""
    f = c.farm(STD, SERIES)
    a1, a2 = f.enroll("lab-a1", "--groups", "rack-a"), f.enroll("lab-a2", "--groups", "rack-a")
    b1 = f.enroll("lab-b1", "--groups", "rack-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    for m in (a1, a2):
        clean(m, R, S, E)
    _, bivs = clean(b1, "6.1.90-rt40", S, E, tweak=lambda i, t, n: {
        "per_cpu": {0: {"max_ns": 300 * US}}} if i == 50 else None)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict of 6.6.30-rt31")
    c.eq((v.get("series"), v.get("group"), v.get("group_source")),
         ("6.6-rt", "rack-a", "configured"), "series, group, group_source")
    c.eq(v.get("gating_machines"), 2, "gating_machines")
    c.check(b1.id not in json.dumps(v),
            "lab-b1 does not appear in the 6.6 release's verdict")
    v = f.verdict("6.1.90-rt40")
    c.eq(v.get("verdict"), "failed", "verdict of 6.1.90-rt40")
    c.eq((v.get("series"), v.get("group"), v.get("gating_machines")), ("6.1-rt", "rack-b", 1),
         "series, group, gating_machines of 6.1.90-rt40")
    c.eq(c.ids(v), [f"violation:{b1.id}:1:{bivs[50]['seq']}:0"], "problems of 6.1.90-rt40")


@test
def test_inv8_unrun_member_and_mixed_builds(c):
    """Invariant 8.  Attacks: lab-a and lab-b run 6.6.30-rt31 cleanly but as two different builds
    (same uname -r, different uname -v); lab-c, of the same gating group, has not run it.  Two
    builds on gating machines are one mixed_builds problem (which data is the release?), both
    builds are listed, and lab-c's absence is missing (not_run): "every machine that ran it is
    fine" is not "qualified".  Once the two builds are waived, lab-c runs a third build: a new
    mixed_builds problem (its id is of the set of builds), which the waiver does not cover."""
    f = c.farm()
    a, b, cm = f.enroll("lab-a"), f.enroll("lab-b"), f.enroll("lab-c")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    v1, v2 = "#1 SMP PREEMPT_RT Mon Nov 2 2026", "#2 SMP PREEMPT_RT Tue Nov 3 2026"
    clean(a, R, S, E, kernel_version=v1)
    clean(b, R, S, E, kernel_version=v2)
    clean(cm, "6.6.29-rt30", S, E - 2 * HOUR)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    mixed = c.ids(v, "mixed_builds")
    c.check(len(mixed) == 1 and mixed[0].startswith(f"mixed_builds:{R}:"),
            "one mixed_builds problem", mixed)
    builds = v.get("builds") or []
    c.check(isinstance(builds, list) and all(isinstance(x, dict) for x in builds),
            "builds is a list of {kernel_version, machines}", builds)
    kvs = sorted(builds) if isinstance(builds, dict) else \
        sorted(x.get("kernel_version") if isinstance(x, dict) else x for x in builds)
    c.eq(kvs, [v1, v2], "the builds")
    c.eq([x.get("machine") for x in c.missing(v, "not_run")], [cm.id], "missing: not_run")
    c.eq((v.get("gating_machines"), v.get("machines_ran")), (3, 2), "gating_machines, machines_ran")
    if len(mixed) == 1:
        st, text, _ = f.waive(R, mixed[0], "both builds are the release, same sources")
        c.eq(st, 201, f"waiver of {mixed[0]} ({text[:200]})")
        v = f.verdict(R)
        c.eq(v.get("verdict"), "pending", "verdict once the two builds are waived (lab-c missing)")
        clean(cm, R, E - 2 * HOUR, E, run_id=2, kernel_version="#3 SMP PREEMPT_RT Wed Nov 4 2026")
        v = f.verdict(R)
        again = c.ids(v, "mixed_builds")
        c.check(len(again) == 1 and again[0] != mixed[0] and
                again[0].startswith(f"mixed_builds:{R}:"),
                "a third build is a new mixed_builds problem, not covered by the waiver",
                (mixed, again))
        c.eq(v.get("verdict"), "failed", "verdict with a third build")


@test
def test_inv8_debian_rt_kernel_is_its_own_series(c):
    """Invariant 8 (and 9, 10).  Debian's kernels: 6.1.0-18-amd64 and the PREEMPT_RT build of the
    same sources, 6.1.0-18-rt-amd64 (an "-rt" part without a number).  They are different
    branches: they must not be one series, or the RT kernel's regressions and latest stable are
    judged against a kernel that is not real-time at all."""
    f = c.farm(dict(STD, **LOGGED))
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    for m in (a, b):
        clean(m, "6.1.0-18-amd64", E - 50 * HOUR, E - 25 * HOUR, run_id=1,
              tweak=lambda i, t, n: {"cpu": {"max_ns": 3 * US + 1, "min_ns": 2 * US,
                                             "typical_ns": 3 * US}})
        clean(m, "6.1.0-18-rt-amd64", E - 25 * HOUR, E, run_id=2)
    deadline = time.monotonic() + 60  # the log has the non-RT kernel qualified
    while f.logged_status("6.1.0-18-amd64") != "qualified" and time.monotonic() < deadline:
        time.sleep(0.2)
    v1, v2 = f.verdict("6.1.0-18-amd64"), f.verdict("6.1.0-18-rt-amd64")
    c.check(v1.get("series") != v2.get("series"), "two series",
            (v1.get("series"), v2.get("series")))
    c.eq((v2.get("rule") or {}).get("baseline"), None, "the RT kernel has no non-RT baseline")
    c.no_kind(v2, "regression")


@test
def test_inv8_release_named_explicitly(c):
    """Control, invariant 8.  Two labs build the same uname -r differently and name their releases
    explicitly ([Upload] Release=, run.release): each named release is judged on its own series
    and group, qualifies, and has one build; no mixed_builds."""
    series = {"lab1": {"Releases": "*-lab1", "Group": "lab1"},
              "lab2": {"Releases": "*-lab2", "Group": "lab2"}}
    f = c.farm(STD, series)
    x, y = f.enroll("lab-x", "--groups", "lab1"), f.enroll("lab-y", "--groups", "lab2")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(x, R, S, E, release=R + "-lab1", kernel_version="#1 lab1")
    clean(y, R, S, E, release=R + "-lab2", kernel_version="#7 lab2")
    for rel, grp, kv in ((R + "-lab1", "lab1", "#1 lab1"), (R + "-lab2", "lab2", "#7 lab2")):
        v = f.verdict(rel)
        c.eq(v.get("verdict"), "qualified", f"verdict of {rel}")
        c.eq((v.get("series"), v.get("group"), v.get("group_source")), (grp, grp, "configured"),
             f"{rel}: series, group, group_source")
        c.eq([b if isinstance(v.get("builds"), dict) else b.get("kernel_version")
              for b in v.get("builds") or []], [kv], f"{rel}: one build")
        c.no_kind(v, "mixed_builds")


@test
def test_inv8_group_member_from_the_moment_of_enrolment(c):
    """Invariant 8.  lab-d (group default) ran the release cleanly for 25 h; then lab-a is
    enrolled straight into the series' group 6.6-rt and runs nothing.  Asked at the nanosecond of
    lab-a's enrolment, the group 6.6-rt judges (a machine is a member from that moment on), lab-a
    gates and has not run the release: pending, not qualified on lab-d alone.  A nanosecond
    before, default judges and the release qualifies (control)."""
    f = c.farm()
    d = f.enroll("lab-d")
    f.start()
    E = end_of_history()
    clean(d, R, E - 25 * HOUR, E)
    a = f.enroll("lab-a", "--groups", "6.6-rt")
    T = a.info()["enrolled_ns"]
    v = f.verdict(R, at=str(T))
    c.eq((v.get("group"), v.get("group_source")), ("6.6-rt", "series"), "group at T")
    c.eq(v.get("gating_machines"), 1, "gating_machines at T")
    c.eq(v.get("verdict"), "pending", "verdict at T")
    c.eq([x.get("machine") for x in c.missing(v, "not_run")], [a.id], "missing at T: lab-a")
    w = f.verdict(R, at=str(T - 1))
    c.eq((w.get("group"), w.get("verdict")), ("default", "qualified"), "at T - 1 ns")


@test
def test_inv8_mixed_builds_filed_against_the_other_build(c):
    """Invariant 8.  The first machine (by id) runs build #1, the other build #2 from an hour
    later: the mixed_builds problem is filed against the machine of the other build (the first
    gating machine that ran a build other than the first), at its first data; the first machine
    stays complete."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    first, other = sorted((a, b), key=lambda m: m.id)
    clean(first, R, S, E, kernel_version="#1 SMP PREEMPT_RT one")
    clean(other, R, S + HOUR, E, kernel_version="#2 SMP PREEMPT_RT two")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict")
    mixed = [p for p in v.get("problems") or [] if p.get("kind") == "mixed_builds"]
    c.eq([(p.get("machine"), p.get("hostname"), p.get("time_ns")) for p in mixed],
         [(other.id, other.hostname, S + HOUR)],
         "mixed_builds filed against the machine of the other build, at its first data")
    c.machine(v, first, status="complete", problems=0)
    c.machine(v, other, status="failed", problems=1)


# ---- 9. No regressions ---------------------------------------------------------------------


def wait_baseline(f, release, baseline, timeout_s=60):
    """Until release's verdict compares it with baseline: the verdict log (Watch=1s) has judged
    the older releases (the baselines are read from it), whatever it judged on the way while the
    history was being posted."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (f.verdict(release).get("rule") or {}).get("baseline") == baseline:
            return
        time.sleep(0.2)
    raise FarmError(f"the verdict log did not give {release} the baseline {baseline} within "
                    f"{timeout_s} s")

BASE, CAND, NEXT = "6.6.29-rt30", "6.6.30-rt31", "6.6.31-rt32"


def regression_farm(c, rule):
    """lab-a and lab-b run 6.6.29-rt30, then 6.6.30-rt31, then 6.6.31-rt32, 25 h each, all
    within the 100 us bound.  6.6.30-rt31 is worse: lab-a's worst case under cpu 80 us instead
    of 30 us, lab-b's p99.9 under io 30 us instead of 11 us (0.5 % of samples at 30 us).
    6.6.31-rt32's worst case is 32 us everywhere (+2 us: within the tolerance)."""
    f = c.farm(rule)
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    for m in (a, b):
        clean(m, BASE, E - 75 * HOUR, E - 50 * HOUR, run_id=1)

        def worse(i, t, n, m=m):
            scen = (t // HOUR) % 3
            if m is a and scen == 1:
                return {"cpu": {"max_ns": 80 * US}}
            if m is b and scen == 2:
                return {"cpu": {"tail": (30 * US, (n // MS) // 200)}}
            return None
        clean(m, CAND, E - 50 * HOUR, E - 25 * HOUR, run_id=2, tweak=worse)
        clean(m, NEXT, E - 25 * HOUR, E, run_id=3,
              tweak=lambda i, t, n: {"cpu": {"max_ns": 32 * US}})
    return f, a, b


@test
def test_inv9_regression_against_latest_stable(c):
    """Invariant 9.  Attack: a release that stays within the bound everywhere but is clearly worse
    than the series' latest stable on two machines and scenarios.  It fails with
    regression:MACHINE:SCENARIO:BASELINE for exactly those two; the baseline is named in the
    rule.  The next release, worse than the baseline by less than the tolerance, qualifies,
    compared with 6.6.29-rt30 (the failed release is no baseline)."""
    f, a, b = regression_farm(c, dict(STD, **LOGGED))
    wait_baseline(f, CAND, BASE)
    wait_baseline(f, NEXT, BASE)
    v = f.verdict(BASE)
    c.eq(v.get("verdict"), "qualified", f"verdict of {BASE}")
    v = f.verdict(CAND)
    c.eq(v.get("verdict"), "failed", f"verdict of {CAND}")
    c.eq(c.ids(v), sorted([f"regression:{a.id}:cpu:{BASE}", f"regression:{b.id}:io:{BASE}"]),
         f"problems of {CAND}")
    c.eq((v.get("rule") or {}).get("baseline"), BASE, f"baseline of {CAND}")
    p = problems_by_id(v).get(f"regression:{a.id}:cpu:{BASE}") or {}
    c.eq((p.get("kind"), p.get("scenario"), p.get("baseline")), ("regression", "cpu", BASE),
         "the regression names its scenario and baseline")
    v = f.verdict(NEXT)
    c.eq(v.get("verdict"), "qualified", f"verdict of {NEXT}")
    c.eq((v.get("rule") or {}).get("baseline"), BASE, f"baseline of {NEXT}")


@test
def test_control_regression_off(c):
    """Control, invariant 9 (no false failed).  The same farm with Regression=no: 6.6.30-rt31,
    within its bound everywhere, qualifies; and with Regression=yes but a tolerance of 200 % and
    a minimum difference of 60 us, it qualifies too."""
    f, a, b = regression_farm(c, dict(STD, Regression="no"))
    v = f.verdict(CAND)
    c.eq(v.get("verdict"), "qualified", "verdict with Regression=no")
    c.no_kind(v, "regression")
    f.restart(dict(STD, RegressionTolerance="200%", RegressionMinDifference="60us", **LOGGED))
    wait_baseline(f, CAND, BASE)
    v = f.verdict(CAND)
    c.eq((v.get("rule") or {}).get("baseline"), BASE, f"baseline of {CAND}")
    c.eq(v.get("verdict"), "qualified", "verdict with a 200 % tolerance and 60 us")


@test
def test_inv9_late_data_in_the_last_whole_day(c):
    """Invariant 9, on the statistics that verdicts remember.  lab-a runs 6.6.29-rt30 for 50 h,
    then 6.6.30-rt31 for 50 h up to now, alike, but one interval of 6.6.30-rt31 in the last whole
    UTC day is held back: at T, 6.6.30-rt31 qualifies against 6.6.29-rt30 (its statistics
    remembered), though its intervals of today have a worst case of 80 us (the current day joins
    the comparison when it is over).  Then the held interval arrives late with a worst
    case of 80 us (against 30 us): known as at the first answer, qualified again (the late
    interval unknown then, though the days it is read from are the same); at T again, the
    regression under its scenario."""
    f = c.farm(dict(STD, **LOGGED))
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    clean(a, BASE, E - 100 * HOUR, E - 50 * HOUR, run_id=1)
    today = E // DAY * DAY
    rc, ivs = clean(a, CAND, E - 50 * HOUR, E, run_id=2, post=False,
                    tweak=lambda i, t, n: {"cpu": {"max_ns": 80 * US}} if t >= today else None)
    noon = today - 12 * HOUR
    held = next(iv for iv in ivs if iv["start_ns"] >= noon)
    rc.post([iv for iv in ivs if iv is not held])
    wait_baseline(f, CAND, BASE)
    T = now_ns()
    v1 = f.verdict(CAND, at=str(T))
    c.eq((v1.get("verdict"), (v1.get("rule") or {}).get("baseline")), ("qualified", BASE),
         "at T, the interval held back")
    time.sleep(0.05)
    rc.post([rc.interval(held["start_ns"], held["length_ns"], held["scenario"], seq=held["seq"],
                         cpu={"max_ns": 80 * US})])
    # Known as before first: its statistics, made without the late interval, are not to be
    # remembered for the days' rows as they are now.
    v_then = f.verdict(CAND, at=str(T), known_at=str(v1.get("asked_at_ns")))
    c.eq((v_then.get("verdict"), c.ids(v_then)), ("qualified", []), "at T, known as at the first answer")
    v_late = f.verdict(CAND, at=str(T))
    c.eq((v_late.get("verdict"), c.ids(v_late)),
         ("failed", [f"regression:{a.id}:{held['scenario']}:{BASE}"]),
         "at T, the interval arrived late")


# ---- 10. "Which release is latest stable?" has an answer -----------------------------------

def latest(answer):
    """The release of a latest-stable answer (its field is not named by the spec)."""
    a = answer or {}
    return a.get("latest_stable", a.get("release"))


LADDER = ["6.6.10-rc3-rt20", "6.6.10-rt2", "6.6.10-rt12", "6.6.11-rt1", "6.6.9-rt5"]


@test
def test_inv10_latest_stable_by_version_order(c):
    """Invariant 10.  Attack on the order: lab-a and lab-b run, 25 h each and in this order of
    time, 6.6.10-rc3-rt20, 6.6.10-rt2, 6.6.10-rt12, 6.6.11-rt1 (a violation: failed) and
    6.6.9-rt5, after lab-a alone ran 6.1.90-rt40 (pending).  The latest stable of 6.6-rt is
    6.6.10-rt12: not the newest in time (6.6.9-rt5, which a string order also picks), not rt2 or
    rc3-rt20 (which a string order of -rtN picks), not the failed 6.6.11-rt1. 60 h ago none
    (rt12, the newest then, was pending, and the verdict log holds nothing of that time).
    6.1-rt has none: `rtsoak latest-stable` exits 2.  The
    dashboard's overview names both."""
    f = c.farm(dict(STD, **LOGGED))
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    posted = now_ns()
    clean(a, "6.1.90-rt40", E - 150 * HOUR, E - 125 * HOUR, run_id=1)
    for m in (a, b):
        for k, rel in enumerate(LADDER):
            t0 = E - (125 - 25 * k) * HOUR
            tweak = (lambda i, t, n: {"per_cpu": {0: {"max_ns": 500 * US}}} if i == 40 else None) \
                if rel == "6.6.11-rt1" and m is a else None
            clean(m, rel, t0, t0 + 25 * HOUR, run_id=k + 2, tweak=tweak)
    want = {"6.6.10-rc3-rt20": "qualified", "6.6.10-rt2": "qualified", "6.6.10-rt12": "qualified",
            "6.6.11-rt1": "failed", "6.6.9-rt5": "qualified", "6.1.90-rt40": "pending"}
    for rel, w in want.items():
        c.eq(f.verdict(rel).get("verdict"), w, f"verdict of {rel}")
    # "When" comes from the verdict log, which a thread keeps (Watch=1s here).
    deadline = time.monotonic() + 30
    while True:
        st, text, obj = f.http("GET", "/api/v1/series/6.6-rt/latest-stable")
        if latest(obj) == "6.6.10-rt12" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    c.eq((st, latest(obj)), (200, "6.6.10-rt12"), f"latest stable of 6.6-rt ({text[:300]})")
    since = (obj or {}).get("since_ns")
    c.check(isinstance(since, int) and posted <= since <= now_ns(),
            "since when: the moment the verdict log first saw it qualified", text[:1500])
    # 60 h ago 6.6.10-rt12, the newest release then, was pending; which older one qualified
    # then is what the verdict log recorded then, and it did not exist (a history posted now):
    # none, rather than judging every older release at every question.
    st, text, obj = f.http("GET", f"/api/v1/series/6.6-rt/latest-stable?at={E - 60 * HOUR}")
    c.eq((st, latest(obj), (obj or {}).get("newest_verdict")), (200, None, "pending"),
         f"latest stable 60 h ago ({text[:300]})")
    st, text, obj = f.http("GET", "/api/v1/series")
    c.check(st == 200 and "6.6-rt" in text and "6.1-rt" in text and "6.6.10-rt12" in text,
            "GET /api/v1/series lists both series and the latest stable", f"{st} {text[:400]}")
    p = f.rtsoak("latest-stable", "6.6-rt", "--server", f.url)
    c.eq((p.returncode, "6.6.10-rt12" in p.stdout), (0, True),
         f"rtsoak latest-stable 6.6-rt ({p.stdout.strip()[:200]} {p.stderr.strip()[:200]})")
    p = f.rtsoak("latest-stable", "6.1-rt", "--server", f.url)
    c.eq(p.returncode, 2, f"rtsoak latest-stable 6.1-rt ({p.stderr.strip()[:200]})")
    st, text, _ = f.http("GET", "/")
    c.check(st == 200 and "6.6-rt" in text and "6.6.10-rt12" in text,
            "the dashboard's overview has a headline for 6.6-rt", f"{st}")


# ---- shutdown --------------------------------------------------------------------------------


@test
def test_sigterm_ends_long_work(c):
    """SIGTERM ends the server within seconds whatever runs.  Attack: another program holds the
    farm database locked, so that an upload waits for the lock (up to its 10 s); SIGTERM then.
    The server exits within its 5 s bound (saying so), not after the wait; the upload is not
    answered as stored, and once the lock is gone a server on the same database stores it."""
    f = c.farm()
    a = f.enroll("lab-a")
    f.start()
    E = end_of_history()
    r = a.run(1, R, start_ns=E - HOUR)
    ivs = r.history(E - HOUR, E, 10 * MIN)
    pg = f.db.startswith("postgresql:")
    if pg:
        holder = subprocess.Popen(
            [os.path.join(os.environ.get("RTSOAK_TEST_PG_BIN", "/usr/bin"), "psql"), "-q",
             f.db], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            text=True)
        # Left open: the session holds the lock idle in its transaction until psql is killed.
        holder.stdin.write("BEGIN; LOCK TABLE runs IN ACCESS EXCLUSIVE MODE;\n")
        holder.stdin.flush()
    else:
        import sqlite3
        holder = sqlite3.connect(f.db, timeout=1, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    time.sleep(1)
    answers = []

    def post():
        try:
            answers.extend(r.post(ivs, expect=None))
        except Exception as e:  # the connection cut: not stored, as it must be
            answers.append(("cut", str(e)))
    poster = threading.Thread(target=post)
    poster.start()
    time.sleep(1.5)  # the upload waits for the lock now
    t0 = time.monotonic()
    f.proc.send_signal(signal.SIGTERM)
    try:
        f.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    took = time.monotonic() - t0
    c.check(f.proc.poll() is not None and took < 8, "the server exits within its bound",
            f"{took:.1f} s")
    if pg:
        holder.kill()
        holder.wait()
    else:
        holder.rollback() if holder.in_transaction else None
        holder.close()
    poster.join(60)
    c.check(answers and all(x[0] != 200 for x in answers), "the cut upload is not answered as stored",
            answers)
    f.stop()
    f.start()
    r.post(ivs)
    v = f.verdict(R)
    c.eq(machine_of(v, a).get("covered_ns"), HOUR, "stored by the next server, once")


# ---- 11. Nothing is invisible --------------------------------------------------------------


@test
def test_inv11_not_counted_is_listed(c):
    """Invariant 11 (and 8). lab-c (not gating, a build of its own: no mixed build, as it does not
    gate) has three violations, lab-d (only in group rack-z, which does not judge 6.6-rt) a
    probe down for 30 minutes: both are listed under not_counted with why, and both machines
    under other_machines with why; the release qualifies on lab-a and lab-b.  And a release of
    another series with 601 violations on one machine lists 500 problems but counts all 601
    (problems_total, problem_counts), judged by the series' own group (group_source series)."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    cm = f.enroll("lab-c", "--gating", "no")
    d = f.enroll("lab-d", "--groups", "rack-z")
    g = f.enroll("lab-g", "--groups", "6.1-rt")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    for m in (a, b):
        clean(m, R, S, E)
    _, civs = clean(cm, R, S, E, kernel_version="#9 SMP PREEMPT_RT a build of its own",
                    tweak=lambda i, t, n: {"per_cpu": {1: {"max_ns": 250 * US}}}
                    if i in (10, 20, 30) else None)
    _, divs = clean(d, R, S, E, tweak=lambda i, t, n: {"per_cpu": {1: {"samples": 0}}}
                    if 70 <= i < 73 else None)
    _, givs = clean(g, "6.1.90-rt40", E - 601 * MIN, E, step=MIN,
                    tweak=lambda i, t, n: {"per_cpu": {0: {"max_ns": 200 * US}}})
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict")
    want = sorted([f"violation:{cm.id}:1:{civs[i]['seq']}:1" for i in (10, 20, 30)] +
                  [f"probe_down:{d.id}:1:{divs[70]['seq']}:1"])
    c.eq(c.ids(v, key="not_counted"), want, "not_counted")
    c.no_kind(v, "mixed_builds")
    c.eq(v.get("not_counted_total"), 4, "not_counted_total")
    c.check(all(p.get("why") for p in v.get("not_counted") or []), "each not_counted says why",
            v.get("not_counted"))
    # What a release manager reads (reasons, `rtsoak verdict`, the gate's log) does not say
    # "no problem" alone: how many were not counted, of which kinds, and where they are.
    told = [x for x in v.get("reasons") or [] if "not counted" in x]
    c.check(told and "4 problem(s)" in told[0] and "3 violation" in told[0]
            and "1 probe_down" in told[0] and "not_counted" in told[0],
            "reasons tell the 4 problems not counted and where to see them", v.get("reasons"))
    c.eq(len([x for x in told if x.startswith("not counted (")]), 4,
         "reasons list each problem not counted, with why")
    p = f.rtsoak("verdict", "--server", f.url, R)
    c.check(p.returncode == 0 and "4 problem(s) of machines that did not gate" in p.stdout,
            "rtsoak verdict prints them", p.stdout[:1500])
    others = {x.get("id"): x for x in v.get("other_machines") or []}
    c.check(cm.id in others and d.id in others and all(x.get("why") for x in others.values()),
            "other_machines lists lab-c and lab-d with why", v.get("other_machines"))
    v = f.verdict("6.1.90-rt40")
    c.eq((v.get("group"), v.get("group_source")), ("6.1-rt", "series"), "6.1.90-rt40: group")
    c.eq((v.get("problems_total"), len(v.get("problems") or []),
          (v.get("problem_counts") or {}).get("violation")), (601, 500, 601),
         "problems_total, problems listed, problem_counts.violation")


@test
def test_inv11_kernel_list_says_how_much_is_missing(c):
    """Invariant 11, in the kernel list.  Attack: 24 gating machines, one of which ran the
    release for 2 h: its verdict misses the coverage of one and the runs of 23 (and their
    reasons), more than the 20 of each that the kernel list shows; the list must say how many
    there are, so that a release missing 1,400 things does not look like one missing 20."""
    f = c.farm()
    ms = [f.enroll(f"lab-{i:02d}") for i in range(24)]
    f.start()
    E = end_of_history()
    clean(ms[0], R, E - 2 * HOUR, E)
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "verdict")
    c.check(len(v.get("missing") or []) > 20 and len(v.get("reasons") or []) > 20,
            "the verdict misses more than 20 things, with as many reasons",
            f"{len(v.get('missing') or [])} missing, {len(v.get('reasons') or [])} reasons")
    c.same_in_list(f, v)


@test
def test_control_obsolete_setting_is_said(c):
    """CacheWarming= (schema 12 keeps every day's histograms at ingest) is accepted without
    effect, and the server says so naming the file and line; a farm that does not set it hears
    nothing of it."""
    said = "CacheWarming=/--cache-warming is obsolete"
    f = c.farm(extra="[Server]\nCacheWarming=no")
    plain = c.farm(name="obsolete-setting-unset")
    for farm in (f, plain):
        farm.raw_twin = False  # no history to judge twice
        farm.start()
    deadline = time.monotonic() + 30
    while said not in f.log_tail(20000) and time.monotonic() < deadline:
        time.sleep(0.05)
    c.check(re.search(r"rtsoak-server\.conf:\d+: " + re.escape(said), f.log_tail(20000)),
            "the server names the file and line of CacheWarming=", f.log_tail(1000))
    c.check(said not in plain.log_tail(20000), "no word of it where it is not set",
            plain.log_tail(1000))


@test
def test_inv11_gap_waiver_does_not_waive_the_next(c):
    """Invariant 11 (and a control of waivers).  Attack: lab-b is silent twice for 20 minutes.
    Each gap's id names its start and end, so the waiver of the first leaves the second failing
    the release; once both are waived the release qualifies (24 h 20 min covered)."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    rb = b.run(1, R, start_ns=S)
    ivs = rb.history(S, E)
    holes = [(E - 15 * HOUR, E - 15 * HOUR + 20 * MIN), (E - 8 * HOUR, E - 8 * HOUR + 20 * MIN)]
    rb.post([iv for iv in ivs if not any(h0 <= iv["start_ns"] < h1 for h0, h1 in holes)])
    g1, g2 = (f"gap:{b.id}:{h0}:{h1}" for h0, h1 in holes)
    v = f.verdict(R)
    c.eq(c.ids(v), sorted([g1, g2]), "two gaps, ids with start and end")
    st, text, _ = f.waive(R, g1, "lab power cut, ticket 12")
    c.eq(st, 201, f"waiver of the first gap ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "failed", "verdict with the second gap unwaived")
    c.eq(c.ids(v), [g2], "problems: the second gap only")
    c.same_in_list(f, v)
    w = problems_by_id(v, "waived").get(g1) or {}
    c.eq((w.get("waiver") or {}).get("reason"), "lab power cut, ticket 12",
         "the first gap's waiver")
    st, text, _ = f.waive(R, g2, "same power cut, second outage")
    c.eq(st, 201, f"waiver of the second gap ({text[:200]})")
    v = f.verdict(R)
    c.eq(v.get("verdict"), "qualified", "verdict with both gaps waived")
    c.machine(v, b, covered_ns=25 * HOUR - 40 * MIN)


@test
def test_inv11_run_without_an_interval_has_not_run(c):
    """Invariant 11.  lab-b started a run of the release that sent an event but no interval yet:
    it is missing as not_run ("... long enough to report an interval"), not as coverage, and is
    not counted among the machines that ran the release."""
    f = c.farm()
    a, b = f.enroll("lab-a"), f.enroll("lab-b")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    rb = b.run(1, R, start_ns=E - 5 * MIN)
    rb.post([], events=[{"id": 1, "time_ns": E - 4 * MIN, "type": "note", "cpu": None,
                         "value": None, "message": "started"}])
    v = f.verdict(R)
    c.eq(v.get("verdict"), "pending", "verdict")
    c.machine(v, b, ran=False, runs=1, status="pending")
    miss = c.missing(v, "not_run", b)
    c.eq(len(miss), 1, "missing: lab-b not_run")
    c.check(miss and "long enough to report an interval" in (miss[0].get("message") or ""),
            "the message says it has not run long enough", miss)
    c.eq(c.missing(v, "coverage", b), [], "no coverage item for lab-b")
    c.eq((v.get("gating_machines"), v.get("machines_ran")), (2, 1),
         "gating_machines, machines_ran: lab-b has not run it (no interval)")


@test
def test_inv11_exactly_ten_not_counted(c):
    """Invariant 11.  lab-c, not gating, has exactly 10 violations: the reasons list all 10,
    with no "... and 0 more"."""
    f = c.farm()
    a = f.enroll("lab-a")
    cm = f.enroll("lab-c", "--gating", "no")
    f.start()
    E = end_of_history()
    S = E - 25 * HOUR
    clean(a, R, S, E)
    clean(cm, R, S, E, tweak=lambda i, t, n: {"per_cpu": {1: {"max_ns": 250 * US}}}
          if i < 10 else None)
    v = f.verdict(R)
    c.eq((v.get("verdict"), v.get("not_counted_total")), ("qualified", 10),
         "verdict, not_counted_total")
    told = [x for x in v.get("reasons") or [] if "not counted" in x]
    c.eq(len([x for x in told if x.startswith("not counted (")]), 10, "ten listed")
    c.eq([x for x in told if "more not counted" in x], [], "no '... and N more'")


# ---- the runner ----------------------------------------------------------------------------


def run_one(fn):
    c = Case(fn.__name__)
    t0 = time.monotonic()
    try:
        fn(c)
        # Every history of the suite, judged from the day rollups and interval by interval.
        for f in c.farms:
            # (Not after retention: the intervals it dropped cannot be read one by one.)
            if f.proc and f.proc.poll() is None and getattr(f, "raw_twin", True):
                n, d, rep = f.raw_twin_differences()
                c.check(n > 0 and not d, "the rollups and the intervals read one by one give "
                        "the same verdicts", f"{n} releases: " + "\n".join(d)[:3000])
                c.check(rep is None, "the second server's log has no sanitizer report", rep)
    except Exception as e:  # the set-up failing is a failure, never a pass
        detail = str(e) if isinstance(e, FarmError) else traceback.format_exc(limit=4)
        c.failures.append(f"the test ran to its end: {detail}")
    finally:
        for f in c.farms:
            try:
                f.stop()
                rep = f.sanitizer_report()
                c.check(rep is None, "the server's log has no sanitizer report", rep)
            finally:
                if os.environ.get("VERDICT_KEEP") and c.failures:
                    print(f"# {fn.__name__}: kept {f.dir}", file=sys.stderr)
                else:
                    f.cleanup()
    return c, time.monotonic() - t0


def main():
    only = os.environ.get("VERDICT_TESTS")
    tests = [t for t in TESTS if not only or re.search(only, t.__name__)]
    # Live tests sleep most of their time: start them first.
    live = ("test_inv4_replay_and_ask_again", "test_inv6_maintenance_window",
            "test_inv5_coverage_only_while_gating", "test_inv10_latest_stable_by_version_order",
            "test_inv6_ungating_ends_an_ongoing_silence")
    tests.sort(key=lambda t: 0 if t.__name__ in live else 1)
    workers = int(os.environ.get("VERDICT_JOBS", "4"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(zip((t.__name__ for t in tests), pool.map(run_one, tests)))
    print(f"1..{len(tests)}")
    failed = 0
    for i, t in enumerate([t for t in TESTS if t.__name__ in results], 1):
        c, secs = results[t.__name__]
        ok = not c.failures
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {i} - {t.__name__} ({c.checks} checks, {secs:.1f} s)")
        for line in c.failures[:25]:
            for part in str(line)[:1500].splitlines():
                print(f"# {part}")
        if len(c.failures) > 25:
            print(f"# ... and {len(c.failures) - 25} more failed checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
