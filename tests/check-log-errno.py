#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""%m in a log message must expand to the error of the call that failed.

The log functions set errno to the error they are given before formatting, so a plain
log_warning("...: %m") (error 0) prints "Success" whatever failed.  Part 1 reads every C file
of the tree and refuses %m in log_error/log_warning/log_notice/log_info/log_debug (the ones
without an error argument).  Part 2 makes rtsoak-load fail to set a nice level (as user nobody,
which may not lower it) and checks that the message names the real error.

Usage: check-log-errno.py SRCDIR RTSOAK_LOAD.  TAP output.
"""
import os
import re
import subprocess
import sys

CALL = re.compile(r"\blog_(error|warning|notice|info|debug)\s*\(")


def call_text(src, start):
    """The text of the call whose '(' is at start, up to its closing parenthesis."""
    depth, i, n = 0, start, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
        elif c == "'":
            i += 1
            while i < n and src[i] != "'":
                i += 2 if src[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return src[start:i + 1]
        i += 1
    return src[start:]


def literals(text):
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', text))


def scan(srcdir):
    bad = []
    for top in ("common", "storage", "loadgen", "uploader", "daemon", "server", "cli", "bench",
                "fuzz", "tests"):
        for root, _, files in os.walk(os.path.join(srcdir, top)):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, name)
                src = open(path, encoding="utf-8", errors="replace").read()
                for m in CALL.finditer(src):
                    text = call_text(src, m.end() - 1)
                    if re.search(r"(?<!%)%m", literals(text)):
                        line = src.count("\n", 0, m.start()) + 1
                        bad.append(f"{os.path.relpath(path, srcdir)}:{line}: "
                                   f"{' '.join(text.split())[:160]}")
    return bad


def main():
    srcdir, load = sys.argv[1], sys.argv[2]
    print("1..2")
    bad = scan(srcdir)
    if bad:
        print("not ok 1 - %m only in log_*_errno() calls, which are given the error")
        for b in bad:
            print(f"# {b}")
    else:
        print("ok 1 - %m only in log_*_errno() calls, which are given the error")

    if os.geteuid() != 0:
        print("ok 2 # SKIP not root: cannot switch to user nobody")
        return 0 if not bad else 1
    p = subprocess.run([load, "--supervised", "--user", "nobody", "--nice", "-5",
                        "--duration", "200ms", "cpu", "--load", "1%"],
                       capture_output=True, text=True, timeout=30)
    want = "Cannot set nice level -5: Permission denied"
    if want in p.stderr and "Success" not in p.stderr:
        print("ok 2 - rtsoak-load names the error of setpriority()")
        ok2 = True
    else:
        print("not ok 2 - rtsoak-load names the error of setpriority()")
        for line in p.stderr.splitlines()[:10]:
            print(f"# {line}")
        ok2 = False
    return 0 if not bad and ok2 else 1


if __name__ == "__main__":
    sys.exit(main())
