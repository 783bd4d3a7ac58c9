#!/bin/bash
# SPDX-License-Identifier: MIT
# Every C file is formatted as .clang-format says.  Usage: check-format.sh SRCDIR
set -u
cd "$1" || exit 1
if ! command -v clang-format >/dev/null; then
        echo "1..0 # SKIP clang-format is not installed"
        exit 0
fi
files=$(find common storage loadgen uploader daemon cli server tests fuzz bench -name '*.[ch]' | sort)
echo "1..$(echo "$files" | wc -l)"
n=0
failed=0
for f in $files; do
        n=$((n + 1))
        if d=$(clang-format --style=file "$f" | diff -u "$f" -); then
                echo "ok $n - $f"
        else
                failed=1
                echo "not ok $n - $f is not formatted (run clang-format -i $f)"
                printf '%s\n' "$d" | head -40 | sed 's/^/# /'
        fi
done
exit $failed
