#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads a JUnit XML file with junitparser (Debian's python3-junitparser, the reader behind
widely used CI result publishers) and prints what it understood as JSON: the counts and time
the file declares and those junitparser computes from the cases, and every case with its
result.  tests/test-notifications.py compares them with the verdict.  Usage: junit-read.py FILE
"""
import json
import sys
import xml.etree.ElementTree as ET

from junitparser import Error, Failure, JUnitXml, Skipped


COUNTS = ("tests", "failures", "errors", "skipped")


def declared(elem):
    """What the element says, read apart: junitparser fills a missing count in from the
    cases."""
    a = elem.attrib
    out = {k: int(a[k]) if k in a else None for k in COUNTS}
    out["time"] = float(a["time"]) if "time" in a else None
    return out


def computed(x):
    return {k: getattr(x, k) for k in COUNTS + ("time",)}


def case(c):
    out = {"name": c.name, "classname": c.classname, "time": c.time, "result": "passed"}
    for r in c.result:
        kind = {Failure: "failure", Skipped: "skipped", Error: "error"}.get(type(r))
        out.update(result=kind, type=r.type, message=r.message, text=r.text)
    return out


def main(path):
    root = ET.parse(path).getroot()
    xml = JUnitXml.fromfile(path)
    suites = [{"name": s.name, "declared": declared(e), "cases": [case(c) for c in s]}
              for s, e in zip(xml, root.findall("testsuite"))]
    xml.update_statistics()
    for s, suite in zip(xml, suites):
        suite["computed"] = computed(s)
    print(json.dumps({"declared": declared(root), "computed": computed(xml), "suites": suites}))


if __name__ == "__main__":
    main(sys.argv[1])
