/* SPDX-License-Identifier: MIT */
/* The statement API's common part: the backend chosen by the target, each connection's cache
 * of prepared statements, and the calls that go to the backend. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql-internal.h"

bool sql_target_is_pg(const char *target) {
        return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0;
}

void sql_target_shown(const char *target, char *buf, size_t size) {
        const char *scheme_end = strstr(target, "://");
        if (!sql_target_is_pg(target) || !scheme_end) {
                snprintf(buf, size, "%s", target);
                return;
        }
        /* postgresql://user:password@host/...: the password is left out. */
        const char *auth = scheme_end + 3;
        const char *at = strchr(auth, '@'), *slash = strchr(auth, '/');
        const char *colon = strchr(auth, ':');
        if (at && (!slash || at < slash) && colon && colon < at)
                snprintf(buf, size, "%.*s:***%s", (int) (colon - target), target, at);
        else
                snprintf(buf, size, "%s", target);
        /* A password given as a parameter (?password=...) is cut at its value. */
        char *p = strstr(buf, "password=");
        if (p)
                snprintf(p, size - (size_t) (p - buf), "password=***");
}

void sql_set_error(sql_conn *c, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
        va_end(ap);
}

int sql_open(const char *target, unsigned flags, sql_conn **ret, char err[static SQL_ERROR_MAX]) {
        const struct sql_backend *be = sql_target_is_pg(target) ? &sql_pg_backend
                                                                : &sql_sqlite_backend;
        sql_conn *c = NULL;
        int r = be->open(target, flags, &c, err);
        if (r < 0)
                return r;
        c->be = be;
        *ret = c;
        return 0;
}

void sql_close(sql_conn *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->ncache; i++) {
                c->be->finalize(c->cache[i].st);
                free(c->cache[i].copy);
        }
        free(c->cache);
        c->be->close(c);
}

enum sql_dialect sql_dialect(const sql_conn *c) {
        return c->be->dialect;
}

const char *sql_errmsg(const sql_conn *c) {
        return c->errmsg;
}

void sql_set_owner(sql_conn *c, void *owner) {
        c->owner = owner;
}

void *sql_owner(const sql_conn *c) {
        return c->owner;
}

/* -EBUSY once the connection's stop is set. */
static int stopping(sql_conn *c) {
        if (!c->stop || !atomic_load_explicit(c->stop, memory_order_relaxed))
                return 0;
        sql_set_error(c, "interrupted: the server is stopping");
        return -EBUSY;
}

int sql_exec(sql_conn *c, const char *sql) {
        int r = stopping(c);
        return r < 0 ? r : c->be->exec(c, sql);
}

int sql_begin(sql_conn *c, enum sql_txn kind) {
        int r = stopping(c);
        return r < 0 ? r : c->be->begin(c, kind);
}

int sql_commit(sql_conn *c) {
        return c->be->end(c, true);
}

void sql_rollback(sql_conn *c) {
        char keep[SQL_ERROR_MAX];
        /* The message of the failure that led here matters more than the rollback's. */
        memcpy(keep, c->errmsg, sizeof(keep));
        c->be->end(c, false);
        memcpy(c->errmsg, keep, sizeof(keep));
}

bool sql_in_txn(const sql_conn *c) {
        return c->be->in_txn(c);
}

/* The cache's entry for sql, found by its text; NULL when there is none. */
static sql_stmt *cached(sql_conn *c, const char *sql) {
        for (size_t i = 0; i < c->ncache; i++)
                if (strcmp(c->cache[i].sql, sql) == 0)
                        return c->cache[i].st;
        return NULL;
}

static int cache_add(sql_conn *c, const char *sql, bool copy, sql_stmt **ret) {
        if (c->ncache == c->cache_cap) {
                size_t cap = c->cache_cap ? c->cache_cap * 2 : 64;
                struct sql_cached *x = realloc(c->cache, cap * sizeof(*x));
                if (!x)
                        return -ENOMEM;
                c->cache = x;
                c->cache_cap = cap;
        }
        char *owned = copy ? strdup(sql) : NULL;
        if (copy && !owned)
                return -ENOMEM;
        sql_stmt *st;
        int r = c->be->prepare(c, sql, true, &st);
        if (r < 0) {
                free(owned);
                return r;
        }
        st->conn = c;
        st->sql = owned ?: sql;
        c->cache[c->ncache++] = (struct sql_cached){ owned ?: sql, owned, st };
        *ret = st;
        return 0;
}

int sql_prepare(sql_conn *c, const char *sql, sql_stmt **ret) {
        /* By address first: the statements are string literals. */
        for (size_t i = 0; i < c->ncache; i++)
                if (c->cache[i].sql == sql) {
                        *ret = c->cache[i].st;
                        return 0;
                }
        if ((*ret = cached(c, sql)))
                return 0;
        return cache_add(c, sql, false, ret);
}

int sql_prepare_text(sql_conn *c, const char *sql, sql_stmt **ret) {
        if ((*ret = cached(c, sql)))
                return 0;
        return cache_add(c, sql, true, ret);
}

int sql_prepare_once(sql_conn *c, const char *sql, sql_stmt **ret) {
        sql_stmt *st;
        int r = c->be->prepare(c, sql, false, &st);
        if (r < 0)
                return r;
        st->conn = c;
        st->sql = sql;
        *ret = st;
        return 0;
}

void sql_finalize(sql_stmt *st) {
        if (st)
                st->conn->be->finalize(st);
}

void sql_reset(sql_stmt *st) {
        st->conn->be->reset(st);
}

sql_conn *sql_stmt_conn(const sql_stmt *st) {
        return st->conn;
}

void sql_bind_int64(sql_stmt *st, int i, int64_t v) {
        st->conn->be->bind_int64(st, i, v);
}

void sql_bind_double(sql_stmt *st, int i, double v) {
        st->conn->be->bind_double(st, i, v);
}

void sql_bind_text(sql_stmt *st, int i, const char *s) {
        if (s)
                st->conn->be->bind_text(st, i, s);
        else
                st->conn->be->bind_null(st, i);
}

void sql_bind_blob(sql_stmt *st, int i, const void *p, size_t n) {
        st->conn->be->bind_blob(st, i, p, n);
}

void sql_bind_null(sql_stmt *st, int i) {
        st->conn->be->bind_null(st, i);
}

void sql_set_stop(sql_conn *c, const atomic_bool *stop) {
        c->stop = stop;
        if (c->be->set_stop)
                c->be->set_stop(c, stop);
}

int sql_step(sql_stmt *st) {
        int r = stopping(st->conn);
        return r < 0 ? r : st->conn->be->step(st);
}

int64_t sql_changes(sql_stmt *st) {
        return st->conn->be->changes ? st->conn->be->changes(st) : st->changes;
}

int sql_send(sql_stmt *st) {
        return st->conn->be->send ? st->conn->be->send(st) : 0;
}

int sql_step_done(sql_stmt *st) {
        int r = stopping(st->conn);
        if (r < 0) {
                sql_reset(st);
                return r;
        }
        if (st->conn->be->step_done)
                return st->conn->be->step_done(st);
        r = sql_step(st);
        sql_reset(st);
        if (r == SQL_ROW) {
                sql_set_error(st->conn, "a statement without rows returned one");
                return -EINVAL;
        }
        return r;
}

bool sql_column_null(sql_stmt *st, int i) {
        return st->conn->be->column_null(st, i);
}

int64_t sql_column_int64(sql_stmt *st, int i) {
        return st->conn->be->column_int64(st, i);
}

int sql_column_int(sql_stmt *st, int i) {
        return (int) st->conn->be->column_int64(st, i);
}

double sql_column_double(sql_stmt *st, int i) {
        return st->conn->be->column_double(st, i);
}

const char *sql_column_text(sql_stmt *st, int i) {
        return st->conn->be->column_text(st, i);
}

const void *sql_column_blob(sql_stmt *st, int i, size_t *ret_len) {
        return st->conn->be->column_blob(st, i, ret_len);
}

int sql_column_count(sql_stmt *st) {
        return st->conn->be->column_count(st);
}

/* ---- bulk copies ---------------------------------------------------------------------------- */

/* The backends without a copy of their own: one prepared INSERT per row. */
static int insert_copy_begin(sql_conn *c, const char *table, const char *const *columns, size_t n) {
        size_t size = strlen(table) + 64;
        for (size_t i = 0; i < n; i++)
                size += strlen(columns[i]) + 8;
        char *sql = malloc(size);
        if (!sql)
                return -ENOMEM;
        size_t len = (size_t) snprintf(sql, size, "INSERT INTO \"%s\" (", table);
        for (size_t i = 0; i < n; i++)
                len += (size_t) snprintf(sql + len, size - len, "%s\"%s\"", i ? ", " : "",
                                         columns[i]);
        len += (size_t) snprintf(sql + len, size - len, ") VALUES (");
        for (size_t i = 0; i < n; i++)
                len += (size_t) snprintf(sql + len, size - len, "%s?", i ? ", " : "");
        snprintf(sql + len, size - len, ")");
        int r = sql_prepare_once(c, sql, &c->copy.insert);
        free(sql);
        c->copy.next = 1;
        c->copy.error = 0;
        return r;
}

int sql_copy_begin(sql_conn *c, const char *table, const char *const *columns, size_t n) {
        if (c->be->copy_begin)
                return c->be->copy_begin(c, table, columns, n);
        return insert_copy_begin(c, table, columns, n);
}

void sql_copy_int64(sql_conn *c, int64_t v) {
        if (c->be->copy_int64)
                c->be->copy_int64(c, v);
        else
                sql_bind_int64(c->copy.insert, c->copy.next++, v);
}

void sql_copy_double(sql_conn *c, double v) {
        if (c->be->copy_double)
                c->be->copy_double(c, v);
        else
                sql_bind_double(c->copy.insert, c->copy.next++, v);
}

void sql_copy_text(sql_conn *c, const char *s) {
        if (!s)
                sql_copy_null(c);
        else if (c->be->copy_text)
                c->be->copy_text(c, s);
        else
                sql_bind_text(c->copy.insert, c->copy.next++, s);
}

void sql_copy_blob(sql_conn *c, const void *p, size_t n) {
        if (c->be->copy_blob)
                c->be->copy_blob(c, p, n);
        else
                sql_bind_blob(c->copy.insert, c->copy.next++, p, n);
}

void sql_copy_null(sql_conn *c) {
        if (c->be->copy_null)
                c->be->copy_null(c);
        else
                sql_bind_null(c->copy.insert, c->copy.next++);
}

int sql_copy_row(sql_conn *c) {
        if (c->be->copy_row)
                return c->be->copy_row(c);
        int r = sql_step_done(c->copy.insert);
        c->copy.next = 1;
        if (r < 0 && !c->copy.error)
                c->copy.error = r;
        return r;
}

int sql_copy_end(sql_conn *c) {
        if (c->be->copy_end)
                return c->be->copy_end(c);
        sql_finalize(c->copy.insert);
        c->copy.insert = NULL;
        return c->copy.error;
}
