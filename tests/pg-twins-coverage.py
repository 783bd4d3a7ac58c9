#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which PostgreSQL twins the sanitized build needs: the lines and branches of the product that
each -pg test reaches beyond the SQLite tests, measured with gcov in a coverage build.

Runs, in BUILD (configured with -Dtests=true -Db_coverage=true): the tests that the sanitized
build runs, but its -pg twins and those that run alone, then each shorter -pg twin by itself;
prints what the twins reach that the SQLite tests do not (by file), what each reaches that no
other twin does, and a smallest set of twins that reaches all of it (greedy).  The comment
above pg_twins_plain_only in tests/meson.build names the set the sanitized build keeps.
Minutes of CPU; not part of the suite.

Usage (from the source tree):
    meson setup /var/tmp/build-cov -Dtests=true -Db_coverage=true && ninja -C /var/tmp/build-cov
    tests/pg-twins-coverage.py /var/tmp/build-cov [--sanitized build-asan]
"""
import argparse
import json
import os
import subprocess
import sys

# Left to the plain build for their length whatever they reach (tests/meson.build: their SQLite
# twins run sanitized, and so does the store code in the shorter twins).
LONG = ["upload-pg", "hostile-pg", "verdict-hostile-pg", "text-rules-pg", "notifications-pg",
        "golden-pg"]
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def product(path):
    """Whether path (absolute) is the product's code, not a test, fuzzer or benchmark."""
    rel = os.path.relpath(path, SRC)
    return not rel.startswith("..") and rel.split(os.sep)[0] not in ("tests", "fuzz", "bench")


def reached(build):
    """(file, line) and (file, line, branch) reached since the counters were last cleared."""
    got = set()
    for root, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".gcda"):
                continue
            out = subprocess.run(["gcov", "--json-format", "--stdout", "-b", os.path.join(root, f)],
                                 capture_output=True, text=True, cwd=build).stdout
            for doc in filter(str.strip, out.splitlines()):
                for src in json.loads(doc)["files"]:
                    name = os.path.normpath(os.path.join(build, src["file"]))
                    if not product(name):
                        continue
                    for line in src["lines"]:
                        if line["count"]:
                            got.add((name, line["line_number"]))
                        for i, b in enumerate(line.get("branches", [])):
                            if b["count"]:
                                got.add((name, line["line_number"], i))
    return got


def clear(build):
    for root, _, files in os.walk(build):
        for f in files:
            if f.endswith(".gcda"):
                os.unlink(os.path.join(root, f))


def run(build, names):
    p = subprocess.run(["meson", "test", "-C", build, "--no-rebuild", "--num-processes", "2"]
                       + names, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"meson test {' '.join(names)} failed:\n{p.stdout[-3000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", help="a build configured with -Db_coverage=true")
    ap.add_argument("--sanitized", default=os.path.join(SRC, "build-asan"),
                    help="the sanitized build, whose test list is measured")
    ap.add_argument("--long", default=" ".join(LONG),
                    help="twins left to the plain build for their length, not measured")
    args = ap.parse_args()
    with open(os.path.join(args.build, "meson-info", "intro-tests.json")) as f:
        tests = json.load(f)
    alone = {t["name"] for t in tests if any(s.endswith("alone") for s in t["suite"])}
    twins = sorted(t["name"] for t in tests if t["name"].endswith("-pg") and t["name"] not in alone
                   and t["name"] not in args.long.split())
    with open(os.path.join(args.sanitized, "meson-info", "intro-tests.json")) as f:
        sanitized = {t["name"] for t in json.load(f)}
    base = sorted(n for n in sanitized if n not in alone and not n.endswith("-pg"))
    clear(args.build)
    run(args.build, base)
    sqlite = reached(args.build)
    beyond = {}
    for twin in twins:
        clear(args.build)
        run(args.build, [twin])
        beyond[twin] = reached(args.build) - sqlite
    every = set().union(*beyond.values())
    lines = [k for k in every if len(k) == 2]
    print(f"beyond the {len(base)} SQLite tests, the -pg twins reach {len(lines)} lines and "
          f"{len(every) - len(lines)} branches")
    by_file = {}
    for k in lines:
        by_file[k[0]] = by_file.get(k[0], 0) + 1
    for name, n in sorted(by_file.items(), key=lambda x: -x[1]):
        print(f"  {n:5d} lines  {os.path.relpath(name, SRC)}")
    for twin in sorted(beyond, key=lambda t: -len(beyond[t])):
        others = set().union(*(v for t, v in beyond.items() if t != twin))
        print(f"{twin:24s} beyond the SQLite tests {len(beyond[twin]):5d}, "
              f"no other twin {len(beyond[twin] - others):4d}")
    left, chosen = set(every), []
    while left:
        twin = max(beyond, key=lambda t: len(beyond[t] & left))
        chosen.append(f"{twin} ({len(beyond[twin] & left)})")
        left -= beyond[twin]
    print("a smallest set (greedy): " + ", ".join(chosen))


if __name__ == "__main__":
    main()
