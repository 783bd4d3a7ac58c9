#!/bin/bash
# SPDX-License-Identifier: MIT
# The Prometheus alert rules shipped in etc/: promtool checks them and runs their unit tests
# (tests/rtsoak-alerts.test.yml), every alert has a test in which it fires, and every metric
# they read is one rtsoak-server exports.  Usage: check-alert-rules.sh SRCDIR
set -u
cd "$1" || exit 1
rules=etc/rtsoak-alerts.yml
tests=tests/rtsoak-alerts.test.yml
if ! command -v promtool >/dev/null; then
        echo "1..0 # SKIP promtool is not installed (Debian package prometheus)"
        exit 0
fi
echo "1..4"
failed=0
step() { # number description command...
        local n=$1 what=$2
        shift 2
        if out=$("$@" 2>&1); then
                echo "ok $n - $what"
        else
                failed=1
                echo "not ok $n - $what"
                printf '%s\n' "$out" | head -60 | sed 's/^/# /'
        fi
}
step 1 "promtool check rules $rules" promtool check rules "$rules"
step 2 "promtool test rules $tests" promtool test rules "$tests"

# Every alert has a test case that expects it to fire.
fires() {
        local missing=""
        for a in $(sed -n 's/^ *- alert: *//p' "$rules"); do
                # The alert's test entries that expect alerts (an exp_alerts with labels).
                if ! awk -v a="$a" '
                        $1 == "alertname:" { cur = $2 }
                        $1 == "-" && $2 == "exp_labels:" && cur == a { found = 1 }
                        END { exit !found }' "$tests"; then
                        missing="$missing $a"
                fi
        done
        if [ -n "$missing" ]; then
                echo "no test fires:$missing"
                return 1
        fi
}
step 3 "every alert fires in a test" fires

# Every metric the rules read is exported by the server (named in its sources).
exported() {
        local missing=""
        for m in $(grep -o 'rtsoak_[a-z_]*' "$rules" | sort -u); do
                grep -rqF "\"$m" server/ || missing="$missing $m"
        done
        if [ -n "$missing" ]; then
                echo "not exported by rtsoak-server:$missing"
                return 1
        fi
}
step 4 "every metric of the rules is exported" exported
exit $failed
