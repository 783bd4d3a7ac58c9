#!/bin/bash
# SPDX-License-Identifier: MIT
# Every option that a program's --help shows is described in its man page (man/*.scd).
#
# Usage: check-man-options.sh SRCDIR BINARY PAGE [BINARY PAGE]...
set -u
src=$1
shift
echo "1..$(($# / 2))"
n=0
failed=0
while [ $# -ge 2 ]; do
        bin=$1 page=$2
        shift 2
        n=$((n + 1))
        missing=""
        for o in $("$bin" --help 2>&1 | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
                grep -qE -- "(\*|, )$o(\*|,)" "$src/man/$page.scd" || missing+=" $o"
        done
        if [ -z "$missing" ]; then
                echo "ok $n - man/$page.scd describes every option of $(basename "$bin") --help"
        else
                failed=1
                echo "not ok $n - man/$page.scd lacks$missing"
        fi
done
exit $failed
