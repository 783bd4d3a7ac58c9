#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages with "dpkg-buildpackage -us -uc -b" from a copy of the source tree
# into OUTDIR/debs: rtsoak_*.deb, rtsoak-server_*.deb, the .changes and the build log.  Built
# once per state of the sources (a hash of the copied files; concurrent callers wait on a
# lock), so that the package test and the container tests share one build.
# Usage: build-debs.sh SRCDIR OUTDIR.  Prints the directory of the packages.
set -euo pipefail
src=$(realpath "$1")
out=$(realpath -m "$2")
mkdir -p "$out"
exec 9>"$out/debs.lock"
flock 9

stage=$out/debs-stage
rm -rf "$stage"
mkdir -p "$stage/rtsoak"
# The sources as git sees them (tracked and new files, not what .gitignore hides, such as the
# build directories), or, outside a git checkout, everything but build directories.
if (cd "$src" && git rev-parse --is-inside-work-tree >/dev/null 2>&1); then
        (cd "$src" && git ls-files -z --cached --others --exclude-standard |
                 xargs -0 cp --parents -t "$stage/rtsoak/" 2>/dev/null || true)
else
        (cd "$src" && find . -path './build*' -prune -o -type f -print0 |
                 xargs -0 cp --parents -t "$stage/rtsoak/")
fi
hash=$(cd "$stage/rtsoak" && find . -type f -print0 | sort -z | xargs -0 sha256sum |
        sha256sum | cut -c1-64)
if [ -f "$out/debs/stamp" ] && [ "$(cat "$out/debs/stamp")" = "$hash" ]; then
        echo "$out/debs"
        exit 0
fi
rm -rf "$out/debs"
mkdir -p "$out/debs"
# The copy as a git work tree with every file added: what the build leaves that no .gitignore
# covers is what an in-tree build leaves untracked (listed in debs/untracked).
have_git=0
command -v git >/dev/null && (cd "$stage/rtsoak" && git init -q && git add -A) && have_git=1
if ! (cd "$stage/rtsoak" && dpkg-buildpackage -us -uc -b) >"$out/debs/build.log" 2>&1; then
        tail -40 "$out/debs/build.log" >&2
        echo "dpkg-buildpackage failed; the whole log is $out/debs/build.log" >&2
        exit 1
fi
[ $have_git = 0 ] ||
        (cd "$stage/rtsoak" && git ls-files --others --exclude-standard --directory) >"$out/debs/untracked"
mv "$stage"/*.deb "$stage"/*.changes "$stage"/*.buildinfo "$out/debs/"
rm -rf "$stage"
echo "$hash" >"$out/debs/stamp"
echo "$out/debs"
