#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds the fuzz targets with clang's libFuzzer (plus AddressSanitizer and UBSan) and runs
# one of them.  Usage: scripts/fuzz.sh [TARGET] [SECONDS]   (default: summary 60)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-summary}
seconds=${2:-60}
out=build-fuzz
mkdir -p "$out"
CC=clang meson setup "$out" -Dtests=false -Db_lundef=false --reconfigure >/dev/null 2>&1 ||
        CC=clang meson setup "$out" -Dtests=false -Db_lundef=false >/dev/null
ninja -C "$out" common/libcommon.a >/dev/null
clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Icommon -I"$out" \
        "fuzz/fuzz-$target.c" common/*.c -ljansson -lm -o "$out/fuzz-$target"
mkdir -p "$out/corpus-$target"
"$out/fuzz-$target" -max_total_time="$seconds" -max_len=65536 "$out/corpus-$target" \
        "fuzz/corpus/$target"
