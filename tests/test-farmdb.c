/* SPDX-License-Identifier: MIT */
/* The tests' farm databases on SQLite or PostgreSQL, and SQL on them through sql.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"
#include "test-farmdb.h"
#include "test-util.h"

bool tu_pg(void) {
        const char *pg = getenv("RTSOAK_TEST_PG");
        return pg && *pg;
}

const char *tu_backend_name(void) {
        return tu_pg() ? "PostgreSQL" : "SQLite";
}

/* The URI of database name on the test's server: RTSOAK_TEST_PG is
 * postgresql://postgres@/postgres?host=DIR. */
static void pg_uri(const char *name, char *ret, size_t size) {
        const char *q = strchr(getenv("RTSOAK_TEST_PG"), '?');
        snprintf(ret, size, "postgresql://postgres@/%s%s", name, q ?: "");
}

sql_conn *tu_farm_open(const char *target) {
        char err[SQL_ERROR_MAX];
        sql_conn *c = NULL;
        if (sql_open(target, SQL_OPEN_CREATE, &c, err) < 0)
                fail_msg("%s", err);
        return c;
}

void tu_farm_exec(const char *target, const char *sql) {
        sql_conn *c = tu_farm_open(target);
        if (sql_exec(c, sql) < 0)
                fail_msg("%s: %s", sql, sql_errmsg(c));
        sql_close(c);
}

/* The database name of a target made by tu_farm_target(). */
static void pg_name(const char *target, char *ret, size_t size) {
        const char *p = strstr(target, "@/");
        size_t n = p ? strcspn(p + 2, "?") : 0;
        snprintf(ret, size, "%.*s", (int) n, p ? p + 2 : "");
}

void tu_farm_drop(const char *target) {
        char sql[256], name[128];
        if (!sql_target_is_pg(target)) {
                const char *ext[] = { "", "-wal", "-shm" };
                for (size_t i = 0; i < 3; i++) {
                        snprintf(sql, sizeof(sql), "%s%s", target, ext[i]);
                        unlink(sql);
                }
                return;
        }
        pg_name(target, name, sizeof(name));
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", name);
        tu_farm_exec(getenv("RTSOAK_TEST_PG"), sql);
}

void tu_farm_target(const char *dir, const char *name, char *ret, size_t size) {
        char sql[256];
        if (!tu_pg()) {
                snprintf(ret, size, "%s/%s.db", dir, name);
                tu_farm_drop(ret);
                return;
        }
        pg_uri(name, ret, size);
        tu_farm_drop(ret);
        /* FILE_COPY: see farm_database() in farmlib.py. */
        snprintf(sql, sizeof(sql), "CREATE DATABASE \"%s\" STRATEGY FILE_COPY", name);
        tu_farm_exec(getenv("RTSOAK_TEST_PG"), sql);
}

long long tu_farm_int(const char *target, const char *sql) {
        sql_conn *c = tu_farm_open(target);
        sql_stmt *st = NULL;
        if (sql_prepare_once(c, sql, &st) < 0)
                fail_msg("%s: %s", sql, sql_errmsg(c));
        int r = sql_step(st);
        if (r != SQL_ROW)
                fail_msg("%s: no row (%d): %s", sql, r, sql_errmsg(c));
        long long v = sql_column_int64(st, 0);
        sql_finalize(st);
        sql_close(c);
        return v;
}

char *tu_farm_dump(const char *target) {
        if (!sql_target_is_pg(target))
                return tu_read_file(target);
        char pg_dump[512];
        const char *bin = getenv("RTSOAK_TEST_PG_BIN");
        snprintf(pg_dump, sizeof(pg_dump), "%s/pg_dump", bin ? bin : "/usr/bin");
        char *argv[] = { pg_dump, (char *) target, NULL };
        struct tu_result r;
        tu_run(argv, 60000, NULL, NULL, &r);
        if (r.status != 0)
                fail_msg("pg_dump %s: %s", target, r.err);
        char *out = r.out;
        r.out = NULL;
        tu_result_done(&r);
        return out;
}
