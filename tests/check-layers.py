#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The direction of the product's code, from the linker's own view.

For every object file of the programs and libraries of the product (not the tests'), `nm`
says which symbols it defines and which it uses; a use points at the object that defines it.
From that graph of files:

  - no circle of files spans two folders;
  - no circle holds more than MAX_CIRCLE files;
  - the graph of folders (a file's folder points at the folders of the files it uses) has no
    circle.

TAP output: one test per rule, the offending circles listed.  Usage:
    check-layers.py BUILD_DIR [--max-circle N] [--report]
--report prints every circle of files and the folders' graph (for docs/hacking.md).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# The product's objects: everything built under these folders of the build directory, but
# tests, benchmarks and fuzz targets.
SKIP = ("tests", "bench", "fuzz", "meson-private", "meson-logs", "meson-info", "man")


def objects(build):
    out = []
    for root, dirs, files in os.walk(build):
        rel = os.path.relpath(root, build)
        if rel.split(os.sep)[0] in SKIP:
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".c.o"):
                out.append(os.path.join(root, f))
    return sorted(out)


def source_of(build, obj):
    """The source file an object is built from, relative to the source tree: meson puts
    TARGET.p/path_to_file.c.o under the target's folder (subfolders' separators as _)."""
    rel = os.path.relpath(obj, build)
    folder = rel.split(".p" + os.sep)[0]
    folder = os.path.dirname(folder)
    name = os.path.basename(obj)[:-2]  # drop ".o"
    return os.path.join(folder, name)


def symbols(objs):
    """{object: (defined, used)} from two runs of nm over every object (-A: each line names
    its object)."""
    out = {o: (set(), set()) for o in objs}
    for flags, k in ((["--defined-only", "-g"], 0), (["-u"], 1)):
        res = subprocess.run(["nm", "-A", *flags, *objs], capture_output=True, text=True,
                             check=True).stdout
        for line in res.splitlines():
            path, _, rest = line.partition(":")
            fields = rest.split()
            if path in out and fields and (k == 1 or len(fields) == 3):
                out[path][k].add(fields[-1])
    return out


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def folder_of(src):
    d = os.path.dirname(src)
    return d or "."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--max-circle", type=int, default=3)
    p.add_argument("--report", action="store_true")
    a = p.parse_args()
    objs = objects(a.build)
    if not objs:
        print("1..0 # SKIP no object files under " + a.build)
        return 0
    # One program's main and its commands define no symbol others use; several programs may
    # define the same static helpers' names, but global symbols are unique per link.  A
    # symbol defined by several objects (two programs' mains) points at each of them only from
    # its own folder.
    defs = collections.defaultdict(list)
    uses = {}
    table = symbols(objs)
    for o in objs:
        d, u = table[o]
        src = source_of(a.build, o)
        uses[src] = u
        for s in d:
            defs[s].append(src)
    edges = collections.defaultdict(set)
    for src, u in uses.items():
        for s in u:
            targets = defs.get(s, [])
            if len(targets) > 1:
                same = [t for t in targets if folder_of(t) == folder_of(src)]
                targets = same or targets
            for t in targets:
                if t != src:
                    edges[src].add(t)
    nodes = sorted(uses)
    for n in nodes:
        edges.setdefault(n, set())
    comps = [c for c in sccs(nodes, edges) if len(c) > 1]
    fedges = collections.defaultdict(set)
    for s in nodes:
        for t in edges[s]:
            if folder_of(s) != folder_of(t):
                fedges[folder_of(s)].add(folder_of(t))
    folders = sorted({folder_of(n) for n in nodes})
    for f in folders:
        fedges.setdefault(f, set())
    fcomps = [c for c in sccs(folders, fedges) if len(c) > 1]

    if a.report:
        print("# folders and what they use:")
        for f in folders:
            print(f"#   {f} -> {', '.join(sorted(fedges[f])) or '-'}")
        for c in comps:
            print(f"# circle of {len(c)} files: {' '.join(c)}")

    spanning = [c for c in comps if len({folder_of(x) for x in c}) > 1]
    large = [c for c in comps if len(c) > a.max_circle]
    print("1..3")
    for i, (bad, what) in enumerate(((spanning, "no circle of files spans two folders"),
                                     (large, f"no circle of more than {a.max_circle} files"),
                                     (fcomps, "the folders' graph has no circle")), 1):
        print(f"{'not ok' if bad else 'ok'} {i} - {what}")
        for c in bad:
            print(f"#   {' -> '.join(c)}")
    return 1 if spanning or large or fcomps else 0


if __name__ == "__main__":
    sys.exit(main())
