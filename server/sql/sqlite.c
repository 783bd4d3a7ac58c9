/* SPDX-License-Identifier: MIT */
/* The statement API on SQLite: a thin layer over sqlite3, plus the functions of the common
 * dialect that SQLite lacks (greatest, least, string_agg). */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql-internal.h"
#include "sqlite-errno.h"

#define BUSY_TIMEOUT_MS 10000

struct lite_conn {
        struct sql_conn base;
        sqlite3 *db;
        char *path;
};

struct lite_stmt {
        struct sql_stmt base;
        sqlite3_stmt *st;
        int bind_rc; /* the first failure to bind since the last reset */
};

static struct lite_conn *lc(const sql_conn *c) {
        return (struct lite_conn *) c;
}

static struct lite_stmt *ls(sql_stmt *st) {
        return (struct lite_stmt *) st;
}

/* Records SQLite's message for rc and returns the matching -errno. */
static int fail(struct lite_conn *c, int rc, const char *what) {
        const char *msg = c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
        if (what)
                sql_set_error(&c->base, "%s: %s", what, msg);
        else
                sql_set_error(&c->base, "%s", msg);
        return sqlite_errno(rc);
}

/* greatest() and least() as PostgreSQL has them: NULLs are left out, NULL only when all are. */
static void extreme(sqlite3_context *ctx, int argc, sqlite3_value **argv, int sign) {
        sqlite3_value *best = NULL;
        for (int i = 0; i < argc; i++) {
                if (sqlite3_value_type(argv[i]) == SQLITE_NULL)
                        continue;
                if (!best) {
                        best = argv[i];
                        continue;
                }
                bool ints = sqlite3_value_type(argv[i]) == SQLITE_INTEGER &&
                            sqlite3_value_type(best) == SQLITE_INTEGER;
                int cmp;
                if (ints) {
                        sqlite3_int64 a = sqlite3_value_int64(argv[i]),
                                      b = sqlite3_value_int64(best);
                        cmp = a < b ? -1 : a > b;
                } else {
                        double a = sqlite3_value_double(argv[i]), b = sqlite3_value_double(best);
                        cmp = a < b ? -1 : a > b;
                }
                if (cmp * sign > 0)
                        best = argv[i];
        }
        if (best)
                sqlite3_result_value(ctx, best);
        else
                sqlite3_result_null(ctx);
}

static void fn_greatest(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
        extreme(ctx, argc, argv, 1);
}

static void fn_least(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
        extreme(ctx, argc, argv, -1);
}

/* string_agg(value, separator): group_concat under PostgreSQL's name. */
struct agg_text {
        char *s;
        size_t len, cap;
        bool any;
};

static void agg_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
        struct agg_text *a = sqlite3_aggregate_context(ctx, sizeof(*a));
        if (!a || sqlite3_value_type(argv[0]) == SQLITE_NULL)
                return;
        const char *v = (const char *) sqlite3_value_text(argv[0]);
        const char *sep = argc > 1 ? (const char *) sqlite3_value_text(argv[1]) : ",";
        size_t nv = strlen(v ?: ""), ns = a->any && sep ? strlen(sep) : 0;
        if (a->len + nv + ns + 1 > a->cap) {
                size_t cap = (a->len + nv + ns + 1) * 2;
                char *x = sqlite3_realloc64(a->s, cap);
                if (!x) {
                        sqlite3_result_error_nomem(ctx);
                        return;
                }
                a->s = x;
                a->cap = cap;
        }
        memcpy(a->s + a->len, sep ?: "", ns);
        memcpy(a->s + a->len + ns, v ?: "", nv);
        a->len += ns + nv;
        a->s[a->len] = '\0';
        a->any = true;
}

static void agg_final(sqlite3_context *ctx) {
        struct agg_text *a = sqlite3_aggregate_context(ctx, 0);
        if (!a || !a->any) {
                sqlite3_result_null(ctx);
                return;
        }
        sqlite3_result_text(ctx, a->s, (int) a->len, sqlite3_free);
}

static int add_functions(struct lite_conn *c) {
        const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
        int rc = sqlite3_create_function_v2(c->db, "greatest", -1, flags, NULL, fn_greatest, NULL,
                                            NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_create_function_v2(c->db, "least", -1, flags, NULL, fn_least, NULL,
                                                NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_create_function_v2(c->db, "string_agg", 2, flags, NULL, NULL, agg_step,
                                                agg_final, NULL);
        return rc == SQLITE_OK ? 0 : fail(c, rc, "cannot add the SQL functions");
}

static void lite_close(sql_conn *base) {
        struct lite_conn *c = lc(base);
        if (c->db)
                sqlite3_close_v2(c->db);
        free(c->path);
        free(c);
}

static int lite_open(const char *target, unsigned flags, sql_conn **ret, char *err) {
        struct lite_conn *c = calloc(1, sizeof(*c));
        if (!c || !(c->path = strdup(target))) {
                free(c);
                return -ENOMEM;
        }
        int oflags = SQLITE_OPEN_FULLMUTEX;
        if (flags & SQL_OPEN_READONLY)
                oflags |= SQLITE_OPEN_READONLY;
        else
                oflags |= SQLITE_OPEN_READWRITE |
                          (flags & SQL_OPEN_CREATE ? SQLITE_OPEN_CREATE : 0);
        int rc = sqlite3_open_v2(target, &c->db, oflags, NULL);
        int r = 0;
        if (rc != SQLITE_OK)
                r = fail(c, rc, "cannot open database");
        if (r >= 0) {
                sqlite3_extended_result_codes(c->db, 1);
                /* The commands (enroll, machine set ...) run as processes of their own next
                 * to the server: each waits for the other's write lock. */
                sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
                r = add_functions(c);
        }
        if (r < 0) {
                snprintf(err, SQL_ERROR_MAX, "%s: %s", target, c->base.errmsg);
                lite_close(&c->base);
                return r;
        }
        *ret = &c->base;
        return 0;
}

static int lite_exec(sql_conn *base, const char *sql) {
        struct lite_conn *c = lc(base);
        int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : fail(c, rc, NULL);
}

static int lite_begin(sql_conn *c, enum sql_txn kind) {
        /* A deferred BEGIN takes its snapshot at the first read; IMMEDIATE takes the write
         * lock now, so that a transaction never fails half-way for want of it. */
        return lite_exec(c, kind != SQL_TXN_SNAPSHOT ? "BEGIN IMMEDIATE" : "BEGIN");
}

static int lite_end(sql_conn *c, bool commit) {
        if (!commit && !sqlite3_get_autocommit(lc(c)->db))
                sqlite3_exec(lc(c)->db, "ROLLBACK", NULL, NULL, NULL);
        return commit ? lite_exec(c, "COMMIT") : 0;
}

static bool lite_in_txn(const sql_conn *c) {
        return !sqlite3_get_autocommit(lc(c)->db);
}

static int lite_prepare(sql_conn *base, const char *sql, bool persistent, sql_stmt **ret) {
        struct lite_conn *c = lc(base);
        struct lite_stmt *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        int rc = sqlite3_prepare_v3(c->db, sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0,
                                    &s->st, NULL);
        if (rc != SQLITE_OK) {
                free(s);
                return fail(c, rc, "cannot prepare query");
        }
        *ret = &s->base;
        return 0;
}

static void lite_finalize(sql_stmt *st) {
        sqlite3_finalize(ls(st)->st);
        free(st);
}

static void lite_reset(sql_stmt *st) {
        sqlite3_reset(ls(st)->st);
        sqlite3_clear_bindings(ls(st)->st);
        ls(st)->bind_rc = SQLITE_OK;
}

static void bound(sql_stmt *st, int rc) {
        if (rc != SQLITE_OK && ls(st)->bind_rc == SQLITE_OK)
                ls(st)->bind_rc = rc;
}

static void lite_bind_int64(sql_stmt *st, int i, int64_t v) {
        bound(st, sqlite3_bind_int64(ls(st)->st, i, v));
}

static void lite_bind_double(sql_stmt *st, int i, double v) {
        bound(st, sqlite3_bind_double(ls(st)->st, i, v));
}

static void lite_bind_text(sql_stmt *st, int i, const char *s) {
        bound(st, sqlite3_bind_text(ls(st)->st, i, s, -1, SQLITE_TRANSIENT));
}

static void lite_bind_blob(sql_stmt *st, int i, const void *p, size_t n) {
        /* An empty blob is a zero-length blob, not NULL. */
        bound(st, sqlite3_bind_blob64(ls(st)->st, i, n ? p : "", n, SQLITE_TRANSIENT));
}

static void lite_bind_null(sql_stmt *st, int i) {
        bound(st, sqlite3_bind_null(ls(st)->st, i));
}

static int lite_step(sql_stmt *st) {
        struct lite_conn *c = lc(st->conn);
        if (ls(st)->bind_rc != SQLITE_OK)
                return fail(c, ls(st)->bind_rc, "cannot bind a parameter");
        int rc = sqlite3_step(ls(st)->st);
        if (rc == SQLITE_ROW)
                return SQL_ROW;
        if (rc == SQLITE_DONE) {
                st->changes = sqlite3_changes64(c->db);
                return SQL_DONE;
        }
        if (rc == SQLITE_INTERRUPT) {
                sql_set_error(&c->base, "interrupted: the server is stopping");
                return -EBUSY;
        }
        return fail(c, rc, NULL);
}

/* SQLite's progress handler: a non-zero answer interrupts the statement that runs. */
static int lite_progress(void *stop) {
        return atomic_load_explicit((const atomic_bool *) stop, memory_order_relaxed);
}

static void lite_set_stop(sql_conn *c, const atomic_bool *stop) {
        sqlite3_progress_handler(lc(c)->db, stop ? 1000 : 0, stop ? lite_progress : NULL,
                                 (void *) stop);
}

static bool lite_column_null(sql_stmt *st, int i) {
        return sqlite3_column_type(ls(st)->st, i) == SQLITE_NULL;
}

static int64_t lite_column_int64(sql_stmt *st, int i) {
        return sqlite3_column_int64(ls(st)->st, i);
}

static double lite_column_double(sql_stmt *st, int i) {
        return sqlite3_column_double(ls(st)->st, i);
}

static const char *lite_column_text(sql_stmt *st, int i) {
        return (const char *) sqlite3_column_text(ls(st)->st, i);
}

static const void *lite_column_blob(sql_stmt *st, int i, size_t *ret_len) {
        const void *p = sqlite3_column_blob(ls(st)->st, i);
        *ret_len = (size_t) sqlite3_column_bytes(ls(st)->st, i);
        return p ?: (lite_column_null(st, i) ? NULL : "");
}

static int lite_column_count(sql_stmt *st) {
        return sqlite3_column_count(ls(st)->st);
}

const struct sql_backend sql_sqlite_backend = {
        .name = "SQLite",
        .dialect = SQL_SQLITE,
        .open = lite_open,
        .set_stop = lite_set_stop,
        .close = lite_close,
        .exec = lite_exec,
        .begin = lite_begin,
        .end = lite_end,
        .in_txn = lite_in_txn,
        .prepare = lite_prepare,
        .finalize = lite_finalize,
        .reset = lite_reset,
        .bind_int64 = lite_bind_int64,
        .bind_double = lite_bind_double,
        .bind_text = lite_bind_text,
        .bind_blob = lite_bind_blob,
        .bind_null = lite_bind_null,
        .step = lite_step,
        .column_null = lite_column_null,
        .column_int64 = lite_column_int64,
        .column_double = lite_column_double,
        .column_text = lite_column_text,
        .column_blob = lite_column_blob,
        .column_count = lite_column_count,
};
