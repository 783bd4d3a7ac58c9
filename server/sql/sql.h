/* SPDX-License-Identifier: MIT */
/* The farm store's statement API: SQL written once and run on SQLite (sqlite.c) or on
 * PostgreSQL (pg.c); the connection, its statements, transactions and errors. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* SQL dialect accepted by both backends (docs/farm-server.md, "The store layer"):
 *   - parameters are ? (the next number) or ?N, numbered from 1, as SQLite writes them; the
 *     PostgreSQL backend turns them into $N;
 *   - greatest(a, b, ...) and least(...) (PostgreSQL's; NULLs ignored) and string_agg(x, sep)
 *     are added to SQLite by its backend, so the scalar max(a, b) and group_concat() of SQLite
 *     are not used;
 *   - truth values are compared (x <> 0, x IS NULL), never used as integers or integers as
 *     truth values; a truth value selected as a column reads as 0 or 1 on both;
 *   - new rows' ids come back with INSERT ... RETURNING id; ON CONFLICT ... DO NOTHING /
 *     DO UPDATE as both write it;
 *   - what differs anyway (schema, PRAGMAs, row locks, partitions) is chosen with
 *     sql_dialect(). */

#define SQL_ERROR_MAX 1024

typedef struct sql_conn sql_conn;
typedef struct sql_stmt sql_stmt;

enum sql_dialect {
        SQL_SQLITE,
        SQL_PG,
};

/* What sql_step() returns besides a -errno. */
enum {
        SQL_DONE = 0,
        SQL_ROW = 1,
};

enum sql_open_flags {
        SQL_OPEN_CREATE = 1 << 0,   /* SQLite: create the file if it is missing */
        SQL_OPEN_READONLY = 1 << 1, /* only reads (SQLite: the file read-only) */
        /* PostgreSQL: a server that cannot be reached now still gives a connection, whose
         * statements fail with -EBUSY until it can (each tries again). */
        SQL_OPEN_RETRY = 1 << 2,
};

enum sql_txn {
        SQL_TXN_WRITE,    /* SQLite: BEGIN IMMEDIATE (the write lock now); PostgreSQL: BEGIN */
        SQL_TXN_SNAPSHOT, /* one read-only snapshot for every statement until the end */
        /* SQL_TXN_WRITE whose statements without rows, stepped with sql_step_done(), may be
         * sent without waiting for their answers (PostgreSQL: BEGIN too, in libpq's pipeline
         * mode); those are read at the next statement that returns rows, sql_changes() of the
         * statement, or the commit.  A failure of one shows there, with its own message, and the
         * transaction can only be rolled back.  sql_exec() of one statement is sent ahead too;
         * of several, and copies, end the pipelining. */
        SQL_TXN_PIPELINE,
};

/* Whether target names a PostgreSQL database (postgresql:// or postgres://) rather than an
 * SQLite file. */
bool sql_target_is_pg(const char *target);
/* target for messages: a PostgreSQL URI without its password. */
void sql_target_shown(const char *target, char *buf, size_t size);

/* Opens a connection.  On failure err says why (naming the target, never a password). */
int sql_open(const char *target, unsigned flags, sql_conn **ret, char err[static SQL_ERROR_MAX]);
void sql_close(sql_conn *c);
enum sql_dialect sql_dialect(const sql_conn *c);
/* The message of the last failure on c (its statements included). */
const char *sql_errmsg(const sql_conn *c);
/* Who holds the connection (the farm database that pools it), for its users. */
void sql_set_owner(sql_conn *c, void *owner);
void *sql_owner(const sql_conn *c);

/* Once *stop is true, c's statements fail with -EBUSY ("the server is stopping"): the next
 * one at once, and on SQLite also one that is running (within a thousand steps of its virtual
 * machine).  A transaction left open by such a failure is rolled back as any other.  stop
 * outlives c. */
void sql_set_stop(sql_conn *c, const atomic_bool *stop);

/* Runs statements without parameters or results, separated by ';'. */
int sql_exec(sql_conn *c, const char *sql);
int sql_begin(sql_conn *c, enum sql_txn kind);
int sql_commit(sql_conn *c);
/* Rolls back the open transaction, if any. */
void sql_rollback(sql_conn *c);
bool sql_in_txn(const sql_conn *c);

/* The statement for sql, prepared once per connection and kept (sql is a string literal or
 * otherwise lives as long as the connection): reset it after use, never finalize it.  It is
 * found by sql's address first: text built in a buffer that is reused for other text must go
 * through sql_prepare_text(), or it gets the statement of the text the buffer held before. */
int sql_prepare(sql_conn *c, const char *sql, sql_stmt **ret);
/* The same for SQL built at run time (looked up by its text, which is copied): many executions of
 * a few shapes, like an INSERT of n rows.  Reset it after use, never finalize it. */
int sql_prepare_text(sql_conn *c, const char *sql, sql_stmt **ret);
/* A statement of its own, for SQL built at run time: sql_finalize() it. */
int sql_prepare_once(sql_conn *c, const char *sql, sql_stmt **ret);
void sql_finalize(sql_stmt *st);
/* Ends the statement's current execution: its rows are dropped and its parameters NULL. */
void sql_reset(sql_stmt *st);
sql_conn *sql_stmt_conn(const sql_stmt *st);

/* Parameters (i from 1) keep their value until sql_reset(); text and blobs are copied.  A
 * parameter never bound is NULL.  A failure (memory, a bad index) shows at sql_step(). */
void sql_bind_int64(sql_stmt *st, int i, int64_t v);
void sql_bind_double(sql_stmt *st, int i, double v);
/* s NULL binds NULL. */
void sql_bind_text(sql_stmt *st, int i, const char *s);
void sql_bind_blob(sql_stmt *st, int i, const void *p, size_t n);
void sql_bind_null(sql_stmt *st, int i);

/* SQL_ROW with the next row, SQL_DONE, or -errno (sql_errmsg() says why): -EBUSY for a lock
 * that was not given in time or a lost connection (retry later), -EAGAIN for a transaction the
 * database aborted to resolve a conflict (retry it now), -EEXIST for a constraint, -ENOSPC
 * for a full disk. */
int sql_step(sql_stmt *st);
/* Rows changed by the statement's last execution. */
int64_t sql_changes(sql_stmt *st);

/* Columns of the current row, from 0.  Text and blobs stay valid until the next step or
 * reset.  A truth value reads as 0 or 1, NULL as 0 (or NULL text). */
bool sql_column_null(sql_stmt *st, int i);
int64_t sql_column_int64(sql_stmt *st, int i);
int sql_column_int(sql_stmt *st, int i);
double sql_column_double(sql_stmt *st, int i);
const char *sql_column_text(sql_stmt *st, int i);
/* A blob (PostgreSQL: bytea) and its length; an empty one is not NULL. */
const void *sql_column_blob(sql_stmt *st, int i, size_t *ret_len);
int sql_column_count(sql_stmt *st);

/* Bulk loading of a table, much faster than an INSERT per row on PostgreSQL (COPY); INSERTs
 * on SQLite.  Between begin and end only the copy's calls on c: values in the order of columns,
 * sql_copy_row() after each row. */
int sql_copy_begin(sql_conn *c, const char *table, const char *const *columns, size_t ncolumns);
void sql_copy_int64(sql_conn *c, int64_t v);
void sql_copy_double(sql_conn *c, double v);
void sql_copy_text(sql_conn *c, const char *s); /* NULL: NULL */
void sql_copy_blob(sql_conn *c, const void *p, size_t n);
void sql_copy_null(sql_conn *c);
int sql_copy_row(sql_conn *c);
/* Ends the copy; fails (and the rows are not stored) when any value or row failed. */
int sql_copy_end(sql_conn *c);

/* Steps a statement that returns no row and resets it: 0 or -errno.  In an SQL_TXN_PIPELINE
 * transaction the failure may show at a later statement instead. */
int sql_step_done(sql_stmt *st);
/* In an SQL_TXN_PIPELINE transaction: sends the execution of st (with the parameters bound so
 * far) now, after what was sent before, without waiting for its answer, so that statements
 * with rows whose parameters do not depend on each other's rows share one round trip; its rows
 * are read at its first sql_step(), which fails then if it did.  Elsewhere (SQLite, other
 * transactions) nothing is done: sql_step() runs it.  0, or -errno when it cannot be sent. */
int sql_send(sql_stmt *st);

static inline void sql_resetp(sql_stmt **st) {
        if (*st)
                sql_reset(*st);
}
#define _cleanup_sql_reset_ _cleanup_(sql_resetp)

static inline void sql_finalizep(sql_stmt **st) {
        if (*st)
                sql_finalize(*st);
}
#define _cleanup_sql_finalize_ _cleanup_(sql_finalizep)

static inline void sql_closep(sql_conn **c) {
        if (*c)
                sql_close(*c);
}
#define _cleanup_sql_close_ _cleanup_(sql_closep)
