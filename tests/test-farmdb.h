/* SPDX-License-Identifier: MIT */
/* Helpers for the tests that run on either farm store: where a test's farm database is (an
 * SQLite file, or a PostgreSQL database of the server that pg-run.sh started), and SQL run on
 * it through the server's own statement API to check what was stored. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sql.h"

/* Whether the test runs on PostgreSQL (pg-run.sh set RTSOAK_TEST_PG). */
bool tu_pg(void);
/* "SQLite" or "PostgreSQL", for messages. */
const char *tu_backend_name(void);
/* A new, empty farm database named name: dir/name.db (removed first), or the database name
 * of the test's PostgreSQL server (dropped and created again).  ret gets its --db target. */
void tu_farm_target(const char *dir, const char *name, char *ret, size_t size);
/* Drops a farm database made by tu_farm_target(). */
void tu_farm_drop(const char *target);
/* A connection to target (fails the test when it cannot be opened). */
sql_conn *tu_farm_open(const char *target);
/* The first column of the first row of sql on target (fails the test when there is none). */
long long tu_farm_int(const char *target, const char *sql);
/* Everything the database holds as text: the SQLite file, or pg_dump's output. */
char *tu_farm_dump(const char *target);
/* Runs statements without results on target. */
void tu_farm_exec(const char *target, const char *sql);
