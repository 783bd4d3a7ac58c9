/* SPDX-License-Identifier: MIT */
/* Inside the statement API: what a backend provides (one descriptor each, sql-sqlite.c and
 * sql-pg.c) and the parts of a connection and a statement that sql.c keeps for both. */
#pragma once

#include "sql.h"

struct sql_backend {
        const char *name;
        enum sql_dialect dialect;
        int (*open)(const char *target, unsigned flags, sql_conn **ret, char *err);
        void (*close)(sql_conn *c);
        int (*exec)(sql_conn *c, const char *sql);
        int (*begin)(sql_conn *c, enum sql_txn kind);
        /* Ends the open transaction (commit false: rolls it back); the rollback never fails. */
        int (*end)(sql_conn *c, bool commit);
        bool (*in_txn)(const sql_conn *c);
        /* persistent: kept in the connection's cache for many executions. */
        int (*prepare)(sql_conn *c, const char *sql, bool persistent, sql_stmt **ret);
        void (*finalize)(sql_stmt *st);
        void (*reset)(sql_stmt *st);
        void (*bind_int64)(sql_stmt *st, int i, int64_t v);
        void (*bind_double)(sql_stmt *st, int i, double v);
        void (*bind_text)(sql_stmt *st, int i, const char *s);
        void (*bind_blob)(sql_stmt *st, int i, const void *p, size_t n);
        void (*bind_null)(sql_stmt *st, int i);
        /* Sets st->changes when the statement is done. */
        int (*step)(sql_stmt *st);
        /* NULL: sql_step() and sql_reset(), and no row.  A backend's own may send the statement
         * without waiting for its answer (SQL_TXN_PIPELINE). */
        int (*step_done)(sql_stmt *st);
        /* NULL: nothing is sent before sql_step(). */
        int (*send)(sql_stmt *st);
        /* NULL: st->changes. */
        int64_t (*changes)(sql_stmt *st);
        bool (*column_null)(sql_stmt *st, int i);
        int64_t (*column_int64)(sql_stmt *st, int i);
        double (*column_double)(sql_stmt *st, int i);
        const char *(*column_text)(sql_stmt *st, int i);
        const void *(*column_blob)(sql_stmt *st, int i, size_t *ret_len);
        int (*column_count)(sql_stmt *st);
        /* NULL: the copy is made of INSERTs (sql.c). */
        int (*copy_begin)(sql_conn *c, const char *table, const char *const *columns, size_t n);
        void (*copy_int64)(sql_conn *c, int64_t v);
        void (*copy_double)(sql_conn *c, double v);
        void (*copy_text)(sql_conn *c, const char *s);
        void (*copy_blob)(sql_conn *c, const void *p, size_t n);
        void (*copy_null)(sql_conn *c);
        int (*copy_row)(sql_conn *c);
        int (*copy_end)(sql_conn *c);
        /* NULL: only the next statement sees the stop (sql.c checks it). */
        void (*set_stop)(sql_conn *c, const atomic_bool *stop);
};

extern const struct sql_backend sql_sqlite_backend;
extern const struct sql_backend sql_pg_backend;

struct sql_cached {
        const char *sql;
        char *copy; /* of sql built at run time, owned */
        sql_stmt *st;
};

/* The first member of each backend's connection. */
struct sql_conn {
        const struct sql_backend *be;
        void *owner;
        const atomic_bool *stop; /* sql_set_stop(), or NULL */
        /* A copy made of INSERTs: the statement, the next parameter, the first failure. */
        struct {
                sql_stmt *insert;
                int next, error;
        } copy;
        struct sql_cached *cache;
        size_t ncache, cache_cap;
        char errmsg[SQL_ERROR_MAX];
};

/* The first member of each backend's statement. */
struct sql_stmt {
        sql_conn *conn;
        const char *sql;
        int64_t changes;
};

_printf_(2, 3) void sql_set_error(sql_conn *c, const char *fmt, ...);
