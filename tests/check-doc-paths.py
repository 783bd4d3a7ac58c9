#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The guides to the source tree against the tree: every file or folder that docs/hacking.md and
the folders' README.md files name exists, every function they name as `name()` is defined, every
`enum name` or `struct name` too, and every identifier (`snake_case`, `UPPER_CASE`) occurs in the
code.

A path is what a link points at, a `quoted` word with a slash or a file's extension, or a word of
a picture (a fenced block) with a slash.  It is looked up beside the document first, then from
the top of the tree, and a bare file name also in the folders named before it in its paragraph
(`server/notify/` (`mail.c`)); NAME in it stands for any name (`loadgen/loadgen-NAME.c`) and * for any
text, and at least one file must then match.  TAP output.  Usage: check-doc-paths.py SRCDIR"""

import glob
import os
import re
import sys

src = os.path.abspath(sys.argv[1])
EXT = r"\.(?:c|h|py|sh|md|scd|build|conf|yml|in)"
QUOTED = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
WORD = re.compile(r"[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)+/?")
FUNC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\)$")
TYPE = re.compile(r"^(?:const )?(enum|struct) ([A-Za-z_][A-Za-z0-9_]*)$")
IDENT = re.compile(r"^(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)$")


def documents():
    docs = [os.path.join(src, "docs", "hacking.md")]
    for top, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.startswith("build"))
        if top != src and "README.md" in files and os.path.relpath(top, src) != "bench":
            docs.append(os.path.join(top, "README.md"))
    return docs


def is_path(word):
    """Not a route (/metrics), not a schema's name (rtsoak.summary/1)."""
    return not word.startswith("/") and not re.search(r"/[0-9]+$", word)


def names(text):
    """(kind, name, folders) for every path and function the text names; folders are those of
    the paths named before it in its paragraph, where a bare file name is also looked up."""
    fenced = False
    folders = []
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not line.strip() or line.startswith("#"):
            folders = []
        if fenced:
            for w in WORD.findall(line):
                if is_path(w):
                    yield "path", w, []
            continue
        for target in LINK.findall(line):
            if "://" not in target and not target.startswith("#"):
                yield "path", target.split("#")[0], []
        for q in re.findall(r"`([^`]+)`", line):
            m = FUNC.match(q)
            t = TYPE.match(q)
            if m:
                yield "func", m.group(1), []
            elif t:
                yield "type", q if not q.startswith("const ") else q[6:], []
            elif IDENT.match(q):
                yield "ident", q, []
            elif (re.search(r"^[A-Za-z0-9_.*/-]+$", q) and is_path(q)
                  and ("/" in q or re.search(EXT + r"$", q))):
                yield "path", q, list(folders)
                folders.append(q if q.endswith("/") else os.path.dirname(q))


def exists(doc_dir, path, folders):
    pattern = path.replace("NAME", "*")
    bases = [doc_dir, src]
    if "/" not in path:
        bases += [os.path.join(doc_dir, f) for f in folders] + [os.path.join(src, f) for f in folders]
    for base in bases:
        full = os.path.normpath(os.path.join(base, pattern))
        if not full.startswith(src):
            continue
        found = glob.glob(full)
        if found and (not path.endswith("/") or any(os.path.isdir(f) for f in found)):
            return True
    return False


def defined(kind, name, sources):
    """A function defined or declared (at a line's start), a type defined, a name used."""
    if kind == "func":
        pat = re.compile(r"^[A-Za-z_].*\b" + re.escape(name) + r"\s*\(", re.M)
    elif kind == "type":
        pat = re.compile(r"\b" + re.escape(name).replace(r"\ ", r"\s+") + r"\s*\{")
    else:
        pat = re.compile(r"\b" + re.escape(name) + r"\b")
    return any(pat.search(text) for text in sources)


def main():
    sources = []
    for pattern in ("**/*.c", "**/*.h"):
        for f in glob.glob(os.path.join(src, pattern), recursive=True):
            if not os.path.relpath(f, src).startswith("build"):
                with open(f, encoding="utf-8", errors="replace") as fh:
                    sources.append(fh.read())
    docs = documents()
    print(f"1..{len(docs)}")
    failed = 0
    for n, doc in enumerate(docs, 1):
        rel = os.path.relpath(doc, src)
        with open(doc, encoding="utf-8") as fh:
            text = fh.read()
        missing = []
        for kind, name, folders in names(text):
            if kind == "path":
                ok = exists(os.path.dirname(doc), name, folders)
            else:
                ok = defined(kind, name, sources)
            shown = name + ("()" if kind == "func" else "")
            if not ok and shown not in missing:
                missing.append(shown)
        if missing:
            failed += 1
            print(f"not ok {n} - {rel} names what is not in the tree: {', '.join(missing)}")
        else:
            print(f"ok {n} - every path, function, type and identifier {rel} names exists")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
