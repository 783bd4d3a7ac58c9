#!/bin/bash
# SPDX-License-Identifier: MIT
# The quick start's two commands in either order: "soak" leaves build/ configured without the
# test suite, and "test" after it must still run the suite, or fail, never print a passing
# count for a build that ran nothing.  Runs scripts/quickstart.sh test on a copy of the sources
# whose build/ was configured as "soak" makes it, with ninja a no-op (nothing is compiled) and
# "meson test" writing one passing entry per test of the group it is asked for (none: "No tests
# defined.", as meson does): the groups must cover every test once.  Usage: check-quickstart.sh SRCDIR.  TAP output.
set -u
src=$1
tmp=$(mktemp -d /tmp/rtsoak-quickstart.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
failed=0
result() { # n ok what [detail]
        if [ "$2" = 1 ]; then
                echo "ok $1 - $3"
        else
                failed=1
                echo "not ok $1 - $3"
                [ -n "${4:-}" ] && printf '%s\n' "$4" | tail -20 | sed 's/^/# /'
        fi
}

# A copy of the sources (build directories, which git ignores, stay out of it).
(cd "$src" && git ls-files -z --cached --others --exclude-standard 2>/dev/null | xargs -0 cp --parents -t "$tmp/" 2>/dev/null) ||
        (cd "$src" && find . -path ./build\* -prune -o -type f -print0 |
                 xargs -0 cp --parents -t "$tmp/")
mkdir -p "$tmp/shim"
real_meson=$(command -v meson)
real_ninja=$(command -v ninja)
cat >"$tmp/shim/ninja" <<SH
#!/bin/sh
[ "\$1" = --version ] && exec "$real_ninja" --version
exit 0
SH
cat >"$tmp/shim/meson" <<SH
#!/bin/bash
if [ "\$1" = test ]; then
        shift
        dir=. base=testlog select=()
        while [ \$# -gt 0 ]; do
                case \$1 in
                -C) dir=\$2; shift ;;
                --logbase) base=\$2; shift ;;
                --suite | --no-suite) select+=("\$1" "\$2"); shift ;;
                esac
                shift
        done
        n=\$("$real_meson" test -C "\$dir" --no-rebuild --list "\${select[@]}" 2>/dev/null | grep -c ' / ')
        if [ "\$n" = 0 ]; then
                echo "No tests defined."
                exit 0
        fi
        mkdir -p "\$dir/meson-logs"
        for _ in \$(seq "\$n"); do echo '{"result": "OK"}'; done >"\$dir/meson-logs/\$base.json"
        exit 0
fi
exec "$real_meson" "\$@"
SH
chmod +x "$tmp/shim/ninja" "$tmp/shim/meson"

# 1: soak's build/ (no tests), then the test command.
out=$(cd "$tmp" && meson setup build -Dtests=false 2>&1 >/dev/null &&
        PATH="$tmp/shim:$PATH" bash scripts/quickstart.sh test 2>&1)
status=$?
plain=$(meson introspect --tests "$tmp/build" 2>/dev/null |
        python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
result 1 "$([ "${plain:-0}" -gt 0 ] && echo 1)" \
        "after soak's build, the test command runs the plain build's tests (${plain:-0} defined)" "$out"
asan=$(meson introspect --tests "$tmp/build-asan" 2>/dev/null |
        python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
last=$(printf '%s\n' "$out" | tail -1)
want="$((${plain:-0} + ${asan:-0})) passed, 0 failed"
result 2 "$([ $status -eq 0 ] && [ "${plain:-0}" -gt 0 ] && [ "$last" = "$want" ] && echo 1)" \
        "the count covers both builds' tests: \"$last\" (want \"$want\", both builds with tests)" "$out"

# 3: a build that ran nothing is a failure, not a pass.
out=$(cd "$tmp" && : >build/meson-logs/alone.json &&
        bash -c 'source scripts/quickstart.sh && summarize build/meson-logs/{busy,waiting,alone}.json build-asan/meson-logs/{busy,waiting,alone}.json' 2>&1)
status=$?
result 3 "$([ $status -ne 0 ] && printf '%s' "$out" | grep -q 'holds no test' && echo 1)" \
        "a build whose log holds no test makes the count fail" "$out"
# 4: a test that must run alone is in the group that runs with nothing else: the other two
# groups run side by side, so meson's is_parallel alone would not keep them apart.
out=$(for b in build build-asan; do meson introspect --tests "$tmp/$b"; echo; done 2>&1 | python3 -c '
import json, sys
bad = [t["name"] for chunk in sys.stdin.read().split("\n") if chunk.strip()
       for t in json.loads(chunk) if not t["is_parallel"] and not any(s.split(":")[-1] == "alone" for s in t["suite"])]
print(" ".join(bad)); sys.exit(1 if bad else 0)' 2>&1)
result 4 "$([ $? -eq 0 ] && echo 1)" "every test that runs alone (is_parallel false) is in the \"alone\" group" "$out"
exit $failed
