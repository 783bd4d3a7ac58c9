#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the fuzz targets with clang's libFuzzer (the whole tree instrumented, with
# AddressSanitizer and UBSan) and runs one of them over its corpus.
#
#   scripts/fuzz.sh [TARGET] [SECONDS] [LIBFUZZER_OPTION...]
#
# TARGET: summary (default), config, loadgen, retry-after, params.  SECONDS: how long
# (default 60; 0: until another option such as -runs=10000000 ends it).  New inputs the fuzzer
# finds are kept in build-fuzz/corpus-TARGET; an input that crashed, leaked, ran out of memory
# or was slow is left in build-fuzz/artifacts-TARGET/ (crash-*, slow-unit-*...), never in the
# source tree, and a crash exits non-zero.  An input worth keeping goes to fuzz/corpus/TARGET/
# and fuzz/meson.build.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-summary}
seconds=${2:-60}
shift $(($# > 2 ? 2 : $#))
if [ ! -f "fuzz/fuzz-$target.c" ]; then
        echo "No fuzz target '$target': $(cd fuzz && ls fuzz-*.c | sed 's/fuzz-//; s/\.c$//' | tr '\n' ' ')" >&2
        exit 2
fi
out=build-fuzz
if [ ! -f "$out/build.ninja" ]; then
        CC=clang meson setup "$out" -Dtests=false -Dman=disabled -Dlibfuzzer=true \
                -Db_sanitize=address,undefined -Db_lundef=false \
                -Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
ninja -C "$out" "fuzz/fuzz-$target" >/dev/null
mkdir -p "$out/corpus-$target" "$out/artifacts-$target"
limit=()
if [ "$seconds" != 0 ]; then
        limit=(-max_total_time="$seconds")
fi
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$out/fuzz/fuzz-$target" "${limit[@]}" -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts-$target/" "$@" \
        "$out/corpus-$target" "fuzz/corpus/$target"
