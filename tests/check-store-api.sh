#!/bin/bash
# SPDX-License-Identifier: MIT
# The farm server speaks SQL only through server/sql/sql.h: no file of server/ but the SQLite
# backend calls sqlite3 (or libpq but the PostgreSQL backend).  Usage: check-store-api.sh SRCDIR
set -u
cd "$1/server" || exit 1
check() { # n, what, backend, pattern
        local bad
        bad=$(grep -rlE --include='*.[ch]' "$4" . | sed 's|^\./||' | grep -vx "$3")
        if [ -z "$bad" ]; then
                echo "ok $1 - $2 only in $3"
        else
                echo "not ok $1 - $2 outside $3, in: $(echo $bad) (use server/sql/sql.h: docs/farm-server.md, \"The store layer\")"
                failed=1
        fi
}
failed=0
echo "1..2"
check 1 "sqlite3 calls" sql/sqlite.c '\bsqlite3(_[a-z0-9_]+)?\b|<sqlite3\.h>'
check 2 "libpq calls" sql/pg.c '\bPQ[a-zA-Z]+\(|<libpq-fe\.h>'
exit $failed
