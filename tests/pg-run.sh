#!/bin/bash
# SPDX-License-Identifier: MIT
# Runs a test against a PostgreSQL server of its own: initdb and pg_ctl in a temporary
# directory, as an unprivileged user (nobody when run as root), listening only on a Unix socket
# in that directory.  The test finds it in RTSOAK_TEST_PG (a postgresql:// URI of the
# superuser's database; tests create a database per farm).  Without the PostgreSQL server
# binaries the test is skipped, saying why (TAP: 1..0 # SKIP).
#
#   pg-run.sh [--template=DIR] COMMAND [ARGS...]
#
# --template=DIR: a cluster made by initdb once, kept in DIR, is copied for each test instead
# of running initdb again (the suite starts 36 of them: a copy takes 0.1 s of CPU, initdb 0.9 s).
# DIR holds the cluster of the PostgreSQL binaries and options its stamp names; another one is
# made again.  Tests started at once wait for the first to make it.
set -euo pipefail

template=
case ${1:-} in
--template=*) template=${1#--template=}; shift ;;
esac

bindir=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
                bindir=$d
                break
        fi
done
if [ -z "$bindir" ] && command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        bindir=$(dirname "$(command -v initdb)")
fi
if [ -z "$bindir" ]; then
        echo "1..0 # SKIP no PostgreSQL server binaries (initdb, pg_ctl; Debian: apt-get install postgresql)"
        exit 0
fi

dir=$(mktemp -d /tmp/rtsoak-pg.XXXXXX)
as_user=()
if [ "$(id -u)" -eq 0 ]; then
        # PostgreSQL refuses to run as root.
        chown nobody: "$dir"
        as_user=(runuser -u nobody --)
fi
chmod 755 "$dir"

cleanup() {
        "${as_user[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$dir"
}
trap cleanup EXIT

# No fsync: a test's cluster does not outlive the machine (the durability tests kill the
# server processes, not the machine).
initdb_options=(-U postgres --auth=trust --no-sync -E UTF8 --locale=C)
make_cluster() { # directory
        if ! "${as_user[@]}" "$bindir/initdb" -D "$1" "${initdb_options[@]}" >"$dir/initdb.log" 2>&1; then
                echo "Bail out! initdb failed: $(tail -3 "$dir/initdb.log" | tr '\n' ' ')"
                exit 1
        fi
}
if [ -n "$template" ]; then
        mkdir -p "$template"
        exec 8>"$template/lock"
        flock 8
        stamp="$bindir $("$bindir/initdb" --version) ${initdb_options[*]}"
        if [ ! -f "$template/data/PG_VERSION" ] || [ "$(cat "$template/stamp" 2>/dev/null)" != "$stamp" ]; then
                rm -rf "$template/data" "$template/stamp"
                make_cluster "$dir/data"
                rm -rf "$template/data.new"
                cp -a "$dir/data" "$template/data.new"
                mv "$template/data.new" "$template/data"
                echo "$stamp" >"$template/stamp"
        else
                cp -a "$template/data" "$dir/data"
        fi
        flock -u 8
        exec 8>&-
else
        make_cluster "$dir/data"
fi
if ! "${as_user[@]}" "$bindir/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/server.log" \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off -c max_connections=200 -c shared_buffers=32MB" \
        start >/dev/null 2>&1; then
        echo "Bail out! the test's PostgreSQL did not start: $(tail -3 "$dir/server.log" | tr '\n' ' ')"
        exit 1
fi

export RTSOAK_TEST_PG="postgresql://postgres@/postgres?host=$dir"
export RTSOAK_TEST_PG_BIN="$bindir"
status=0
"$@" || status=$?
exit $status
