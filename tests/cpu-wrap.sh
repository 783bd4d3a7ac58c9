#!/bin/bash
# SPDX-License-Identifier: MIT
# A meson test wrapper that measures what each test costs in CPU, its children and the servers
# and containers it starts included: it runs the test in a cgroup of its own and appends one
# line to $RTSOAK_CPU_LOG (default /tmp/rtsoak-test-cpu.txt) when the test ends:
#   CPU-SECONDS WALL-SECONDS COMMAND...
# As root, with cgroup v2 (cpu.stat) or v1's cpuacct.  Processes a test leaves behind are
# counted until it ends.  docs/testing.md says how to read a whole suite with it:
#   meson test -C build --wrapper="$PWD/tests/cpu-wrap.sh" ...
#   sort -rn /tmp/rtsoak-test-cpu.txt | head
log=${RTSOAK_CPU_LOG:-/tmp/rtsoak-test-cpu.txt}
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        root=/sys/fs/cgroup
elif [ -d /sys/fs/cgroup/cpuacct ]; then
        root=/sys/fs/cgroup/cpuacct
else
        echo "cpu-wrap.sh: no cgroup to measure in (neither cgroup v2 nor v1's cpuacct)" >&2
        exit 1
fi
cg=$root/rtsoak-test-cpu.$$
mkdir "$cg" || exit 1
echo $$ >"$cg/cgroup.procs"
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
if [ -f "$cg/cpu.stat" ]; then
        cpu=$(awk '$1 == "usage_usec" { printf "%.2f", $2 / 1e6 }' "$cg/cpu.stat")
else
        cpu=$(awk '{ printf "%.2f", $1 / 1e9 }' "$cg/cpuacct.usage")
fi
echo "$cpu $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') $*" >>"$log"
echo $$ >"$root/cgroup.procs"
rmdir "$cg" 2>/dev/null
exit $status
