#!/bin/bash
# SPDX-License-Identifier: MIT
# Sets up a Debian 12 machine for rtsoak, builds it, and either runs a short soak or the
# whole test suite.  Run as root from the source tree:
#
#   scripts/quickstart.sh soak [DURATION]   install, build, soak for 60 s under a rotation of
#                                           load scenarios, print the report per scenario
#   scripts/quickstart.sh test              install, build, run the suite twice (plain and
#                                           with AddressSanitizer+UBSan), print the counts
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD

# scdoc builds the man pages.
build_packages=(meson ninja-build gcc pkg-config libsqlite3-dev libsystemd-dev libjansson-dev
                libcmocka-dev libmicrohttpd-dev libcurl4-openssl-dev libxml2-dev libpq-dev zlib1g-dev
                scdoc)
# systemd-analyze checks the unit files, clang-format the formatting, chromium (headless) the
# dashboard as a browser shows it, systemd-journal-remote writes the journal files that the
# forensics test reads; build-essential (which dpkg-buildpackage requires), dpkg-dev, debhelper
# and lintian build and check the Debian packages, systemd-container boots them under a real
# systemd, with openssl, iproute2 and curl for the farm set-up of the README; postgresql the
# farm server's second store (the tests start servers of their own); promtool (prometheus)
# checks and unit-tests the alert rules and the metrics, xmllint (libxml2-utils) validates the
# JUnit XML of rtsoak verdict and junitparser (python3-junitparser) reads it back; rt-tests'
# cyclictest runs in the benchmark scripts' test; faketime holds the server's clock still while
# the golden corpus (tests/golden.py) is asked.
test_packages=(systemd systemd-journal-remote clang-format python3 chromium build-essential
               dpkg-dev debhelper lintian systemd-container openssl iproute2 curl procps util-linux
               postgresql prometheus libxml2-utils python3-junitparser rt-tests faketime)

install_missing() {
        local missing=()
        for p in "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
                        missing+=("$p")
        done
        if [ ${#missing[@]} -gt 0 ]; then
                echo "Installing: ${missing[*]}"
                if [ "$(id -u)" -ne 0 ]; then
                        echo "error: run as root to install packages" >&2
                        exit 1
                fi
                export DEBIAN_FRONTEND=noninteractive
                apt-get update -q >/dev/null
                apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
        fi
}

# The unprivileged system user the load generators run as by default ([Load] User=rtsoak), as
# the package's postinst creates it.
ensure_load_user() {
        getent passwd rtsoak >/dev/null && return 0
        echo "Creating the system user rtsoak (systemd-sysusers systemd/rtsoak.sysusers)"
        systemd-sysusers "$src/systemd/rtsoak.sysusers"
}

# Configures DIR with the given options (also a directory configured before with other ones:
# "soak" makes build/ without tests, "test" needs them) and builds it.
build() { # dir [meson options...]
        local dir=$1 out
        shift
        if [ ! -f "$dir/build.ninja" ]; then
                out=$(meson setup "$dir" "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
        elif [ $# -gt 0 ]; then
                out=$(meson setup --reconfigure "$dir" "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
        fi
        out=$(ninja -C "$dir" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}

# Runs one group of a build's tests (meson test options select it), logged in
# DIR/meson-logs/GROUP.json; the sanitizers stop at their first finding.
group() { # dir group [meson test options...]
        local dir=$1 name=$2
        shift 2
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                meson test -C "$dir" --no-rebuild --print-errorlogs --logbase "$name" "$@"
}

# The last line of a test run: "N passed, N failed[, N skipped]", from meson's own logs.  A
# build whose log is missing or holds no test counts as a failure: it ran nothing.
summarize() {
        python3 - "$@" <<'PY'
import json, sys
passed = failed = skipped = 0
for log in sys.argv[1:]:
    try:
        lines = [l for l in open(log).read().splitlines() if l.strip()]
    except OSError as e:
        print(f"error: no test log {log}: {e.strerror}", file=sys.stderr)
        lines = []
    if not lines:
        print(f"error: {log} holds no test: that build ran none", file=sys.stderr)
        failed += 1
    for line in lines:
        if not line.strip():
            continue
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
sys.exit(1 if failed or passed + failed == 0 else 0)
PY
}

# Sourced (by the test of this script), only the functions above are defined.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
        return 0
fi

case "${1:-}" in
soak)
        duration=${2:-60s}
        install_missing "${build_packages[@]}"
        ensure_load_user
        # A build/ made by "test" is used as it is; a new one is made without the tests.
        if [ -f build/build.ninja ]; then
                build build
        else
                build build -Dtests=false
        fi
        db=$src/build/quickstart/rtsoak.db
        mkdir -p "$(dirname "$db")"
        rm -f "$db" "$db-wal" "$db-shm"

        # A farm server of our own, its database in a temporary directory, with this machine
        # enrolled; rtsoakd uploads to it.
        farm=$(mktemp -d /tmp/rtsoak-farm.XXXXXX)
        machine=$(cat /etc/machine-id)
        build/server/rtsoak-server --db "$farm/farm.db" enroll "$machine" >"$farm/token"
        build/server/rtsoak-server --db "$farm/farm.db" --listen 127.0.0.1:0 2>"$farm/server.log" &
        server=$!
        trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$farm"' EXIT
        for _ in $(seq 100); do
                grep -q "Listening on" "$farm/server.log" && break
                sleep 0.1
        done
        url=$(sed -n 's/.*Listening on \(http:[^ ]*\).*/\1/p' "$farm/server.log" | head -1)
        if [ -z "$url" ]; then
                cat "$farm/server.log" >&2
                exit 1
        fi
        echo "Farm server at $url (database $farm/farm.db), machine $machine enrolled."

        echo "Soaking for $duration on every CPU, rotating through the idle, mixed and"
        echo "hackbench scenarios every 20 s, uploading each 10 s interval to the farm server"
        echo "(Ctrl-C stops early and still reports)..."
        build/daemon/rtsoakd --config etc/rtsoakd.conf --set "Storage.Path=$db" \
                --set Storage.Interval=10s --set "Load.Helper=$src/build/loadgen/rtsoak-load" \
                --set "Schedule.Rotation=idle 20s, mixed 20s, hackbench 20s" \
                --set "Upload.Server=$url" --set "Upload.TokenFile=$farm/token" \
                --duration "$duration" || true
        echo
        build/cli/rtsoak --db "$db" report --by-scenario
        echo
        build/cli/rtsoak --db "$db" status | sed -n '/^Upload:/,$p'
        echo
        echo "What the farm server received ($url/api/v1/machines/$machine):"
        python3 - "$url/api/v1/machines/$machine" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    print(json.dumps(json.load(r), indent=2))
PY
        ;;
test)
        install_missing "${build_packages[@]}" "${test_packages[@]}"
        ensure_load_user
        build build -Dtests=true
        build build-asan -Dtests=true -Db_sanitize=address,undefined -Db_lundef=false
        rm -f build/meson-logs/{busy,waiting,alone}.json build-asan/meson-logs/{busy,waiting,alone}.json
        # The faults test takes CPU 1 offline for moments (it runs alone); a plain
        # `meson test` leaves the CPUs alone.
        export RTSOAK_TEST_HOTPLUG="${RTSOAK_TEST_HOTPLUG:-1}"
        # Three groups per build (suites in tests/meson.build): the tests that mostly wait
        # (for rtsoakd, a container) run beside those that keep the CPUs busy, plain build
        # then sanitized in each stream; then the tests that measure time or change the whole
        # machine, one at a time with nothing else.  The waiting stream's lines say "waiting:".
        busy=(--no-suite alone --no-suite waiting --no-suite deploy)
        waiting=(--suite waiting --suite deploy)
        status=0
        {
                s=0
                group build busy "${busy[@]}" || s=1
                group build-asan busy "${busy[@]}" || s=1
                exit $s
        } &
        busy_pid=$!
        {
                s=0
                group build waiting "${waiting[@]}" || s=1
                group build-asan waiting "${waiting[@]}" || s=1
                exit $s
        } > >(sed -u 's/^/waiting: /') 2>&1 &
        waiting_pid=$!
        wait $busy_pid || status=1
        wait $waiting_pid || status=1
        group build alone --suite alone || status=1
        group build-asan alone --suite alone || status=1
        summarize build/meson-logs/{busy,waiting,alone}.json \
                build-asan/meson-logs/{busy,waiting,alone}.json || status=1
        exit $status
        ;;
*)
        echo "usage: $0 soak [DURATION] | test" >&2
        exit 2
        ;;
esac
