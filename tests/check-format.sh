#!/bin/bash
# SPDX-License-Identifier: MIT
# Every C file is formatted as .clang-format says.  Usage: check-format.sh SRCDIR
# One clang-format process checks every file (--dry-run names the files it would change);
# only those get a diff of their own.
set -u
cd "$1" || exit 1
if ! command -v clang-format >/dev/null; then
        echo "1..0 # SKIP clang-format is not installed"
        exit 0
fi
mapfile -t files < <(find common storage loadgen uploader daemon cli server tests fuzz bench \
        -name '*.[ch]' | sort)
echo "1..${#files[@]}"
report=$(clang-format --style=file --dry-run "${files[@]}" 2>&1 >/dev/null)
status=$?
if [ $status -ne 0 ]; then
        echo "not ok 1 - clang-format failed (exit $status)"
        printf '%s\n' "$report" | head -40 | sed 's/^/# /'
        exit 1
fi
# The files named in "FILE:LINE:COL: warning: code should be clang-formatted" lines.
declare -A bad=()
while IFS= read -r f; do
        bad[$f]=1
done < <(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: .*clang-format.*/\1/p')
n=0
failed=0
for f in "${files[@]}"; do
        n=$((n + 1))
        if [ -z "${bad[$f]:-}" ]; then
                echo "ok $n - $f"
        else
                failed=1
                echo "not ok $n - $f is not formatted (run clang-format -i $f)"
                clang-format --style=file "$f" | diff -u "$f" - | head -40 | sed 's/^/# /'
        fi
done
exit $failed
