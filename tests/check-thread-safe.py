#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtsoakd, the uploader and rtsoak-server run threads: their code calls no libc function that
keeps hidden state between calls or returns a shared buffer (strtok and the like); it uses the
reentrant form.  Two capture threads splitting /proc lines with strtok at once once took each
other's fields.  Comments and string literals are left out before looking.
(strerror is allowed: glibc 2.32 and later give each thread its own buffer.)

Usage: check-thread-safe.py SRCDIR"""
import pathlib
import re
import sys

BANNED = """strtok localtime gmtime ctime asctime rand srand random srandom drand48 lrand48 mrand48
seed48 inet_ntoa gethostbyname gethostbyaddr getpwnam getpwuid getpwent getgrnam getgrgid
getgrent getlogin strsignal setlocale setenv putenv unsetenv tmpnam ttyname ptsname ecvt fcvt
gcvt crypt getdate ctermid""".split()
DIRS = ["common", "storage", "daemon", "uploader", "server", "loadgen"]
CALL = re.compile(r"(?<![\w.>])(" + "|".join(BANNED) + r")\s*\(")
# What is not code: comments, string and character literals (newlines kept for line numbers).
NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def main():
    root = pathlib.Path(sys.argv[1])
    print(f"1..{len(DIRS)}")
    failed = False
    for n, d in enumerate(DIRS, 1):
        files = sorted((root / d).rglob("*.[ch]"))
        if not files:
            print(f"not ok {n} - {d}/ holds no C file (moved? update this check)")
            failed = True
            continue
        hits = []
        for f in files:
            code = NOT_CODE.sub(blank, f.read_text(errors="replace"))
            for i, line in enumerate(code.splitlines(), 1):
                for m in CALL.finditer(line):
                    hits.append(f"{f.relative_to(root)}:{i}: {m.group(1)}()")
        if hits:
            failed = True
            print(f"not ok {n} - {d}/ calls a libc function with hidden state (use its "
                  f"reentrant form)")
            for h in hits[:20]:
                print(f"# {h}")
        else:
            print(f"ok {n} - {d}/ calls no thread-unsafe libc function ({len(files)} files)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
