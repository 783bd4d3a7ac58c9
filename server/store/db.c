/* SPDX-License-Identifier: MIT */
/* The farm database's connections on either store (SQLite's writer and reader, PostgreSQL's
 * pool, the snapshots), and the helpers of every part that speaks SQL. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-mode.h"
#include "macro.h"
#include "db-internal.h"

int farm_fail(sql_conn *c, int r, const char *what, char *err) {
        farm_db *db = farm_of(c);
        snprintf(err, FARM_ERROR_MAX, "%s: %s: %s", db ? db->shown : "database", what,
                 sql_errmsg(c));
        /* -EINVAL means a bad request to the callers (400 with err): data the database refuses
         * (PostgreSQL's data exceptions) is ours to have checked before, a failure of ours. */
        return r < 0 && r != -EINVAL ? r : -EIO;
}

_printf_(4, 5) int farm_failf(farm_db *db, int error, char *err, const char *fmt, ...) {
        char msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(err, FARM_ERROR_MAX, "%s: %s", db->shown, msg);
        return error < 0 ? error : -error;
}

int farm_prepare(sql_conn *c, const char *sql, sql_stmt **ret, char *err) {
        int r = sql_prepare(c, sql, ret);
        return r < 0 ? farm_fail(c, r, "cannot prepare query", err) : 0;
}

int farm_step_done(sql_stmt *st, const char *what, char *err) {
        int r = sql_step_done(st);
        return r < 0 ? farm_fail(sql_stmt_conn(st), r, what, err) : 0;
}

int farm_exec(sql_conn *c, const char *sql, char *err) {
        int r = sql_exec(c, sql);
        return r < 0 ? farm_fail(c, r, sql, err) : 0;
}

int farm_begin_write(sql_conn *c, char *err) {
        int r = sql_begin(c, SQL_TXN_WRITE);
        if (r < 0)
                return farm_fail(c, r, "cannot begin a transaction", err);
        if (sql_dialect(c) == SQL_PG)
                r = farm_exec(c, "SELECT pg_advisory_xact_lock(" FARM_LOCK_STAFF ")", err);
        return r;
}

int farm_commit(sql_conn *c, char *err) {
        int r = sql_commit(c);
        return r < 0 ? farm_fail(c, r, "cannot commit", err) : 0;
}

/* ---- connections --------------------------------------------------------------------------- */

int farm_conn_open(farm_db *db, unsigned flags, sql_conn **ret, char *err) {
        char e[SQL_ERROR_MAX];
        int r = sql_open(db->target, flags, ret, e);
        if (r < 0) {
                snprintf(err, FARM_ERROR_MAX, "%s", e);
                return r;
        }
        sql_set_owner(*ret, db);
        return 0;
}

void farm_db_stop(farm_db *db) {
        atomic_store(&db->stop, true);
}

bool farm_db_stopping(farm_db *db) {
        return atomic_load(&db->stop);
}

/* Connections of the pool that this thread holds: one that holds some already (a verdict that
 * asks for its baseline's, a query that fills the histogram cache) never waits for another, or
 * the threads could all wait for each other's. */
static __thread unsigned pool_held;

/* A connection of the pool: an idle one, a new one while there are fewer than max (or when this
 * thread holds one already), or the next one given back. */
static sql_conn *pool_get(farm_db *db) {
        struct farm_pool *p = &db->pool;
        pthread_mutex_lock(&p->lock);
        for (;;) {
                if (p->nidle > 0) {
                        sql_conn *c = p->idle[--p->nidle];
                        pthread_mutex_unlock(&p->lock);
                        pool_held++;
                        return c;
                }
                if (p->nopen < p->max || pool_held > 0)
                        break;
                pthread_cond_wait(&p->cond, &p->lock);
        }
        p->nopen++;
        pthread_mutex_unlock(&p->lock);
        /* With the database unreachable the connection still comes: its statements fail with
         * -EBUSY (503 to the clients, who retry), each trying to connect again. */
        char err[FARM_ERROR_MAX];
        sql_conn *c = NULL;
        while (farm_conn_open(db, SQL_OPEN_RETRY, &c, err) < 0)
                usleep(100 * 1000); /* out of memory */
        pool_held++;
        return c;
}

static void pool_put(farm_db *db, sql_conn *c) {
        struct farm_pool *p = &db->pool;
        sql_rollback(c);
        pool_held--;
        pthread_mutex_lock(&p->lock);
        if (p->nidle < p->max) {
                p->idle[p->nidle++] = c;
                c = NULL;
        } else
                p->nopen--; /* one opened beyond max for a thread that held others */
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
        sql_close(c);
}

int farm_pool_open(farm_db *db, unsigned pool_size, sql_conn **ret, char *err) {
        struct farm_pool *p = &db->pool;
        p->max = MAX(pool_size, 2u);
        p->idle = calloc(p->max, sizeof(*p->idle));
        if (!p->idle)
                return -ENOMEM;
        int r = farm_conn_open(db, 0, ret, err);
        if (r < 0)
                return r;
        p->nopen = 1;
        pool_held++;
        return 0;
}

sql_conn *farm_reader(farm_db *db) {
        if (farm_is_pg(db))
                return pool_get(db);
        pthread_mutex_lock(&db->rlock);
        return db->rc;
}

sql_conn *farm_writer(farm_db *db) {
        if (farm_is_pg(db))
                return pool_get(db);
        pthread_mutex_lock(&db->lock);
        while (db->txn_open || db->committing)
                pthread_cond_wait(&db->cond, &db->lock);
        return db->wc;
}

sql_conn *farm_snapshot(farm_db *db, char *err) {
        sql_conn *c = NULL;
        if (farm_is_pg(db))
                c = pool_get(db);
        else {
                pthread_mutex_lock(&db->snaps.lock);
                if (db->snaps.n > 0)
                        c = db->snaps.idle[--db->snaps.n];
                pthread_mutex_unlock(&db->snaps.lock);
                if (!c && farm_conn_open(db, SQL_OPEN_READONLY, &c, err) < 0)
                        return NULL;
        }
        /* Only reads are stopped (farm_db_stop()): until it is released. */
        sql_set_stop(c, &db->stop);
        int r = sql_begin(c, SQL_TXN_SNAPSHOT);
        if (r < 0) {
                farm_fail(c, r, "cannot begin a snapshot", err);
                farm_release(c);
                return NULL;
        }
        return c;
}

void farm_release(sql_conn *c) {
        farm_db *db = farm_of(c);
        if (farm_is_pg(db)) {
                sql_set_stop(c, NULL);
                pool_put(db, c);
        } else if (c == db->rc)
                pthread_mutex_unlock(&db->rlock);
        else if (c == db->wc) {
                sql_rollback(c);
                pthread_mutex_unlock(&db->lock);
        } else {
                sql_rollback(c);
                pthread_mutex_lock(&db->snaps.lock);
                if (db->snaps.n < ELEMENTSOF(db->snaps.idle)) {
                        db->snaps.idle[db->snaps.n++] = c;
                        c = NULL;
                }
                pthread_mutex_unlock(&db->snaps.lock);
                sql_close(c);
        }
}

const struct name_rule farm_name_person = { "a person's name",
                                            NAME_LOWER | NAME_UPPER | NAME_DIGITS, "._@-", 1,
                                            FARM_PERSON_NAME_MAX };

bool farm_machine_id_valid(const char *s) {
        char why[NAME_WHY_MAX];
        return name_ok(&summary_name_id, s, why);
}

json_t *farm_json_col_int(sql_stmt *st, int col) {
        if (sql_column_null(st, col))
                return json_null();
        return json_integer(sql_column_int64(st, col));
}

int farm_json_set_col_time(json_t *o, const char *key_ns, sql_stmt *st, int col) {
        return json_set_time(o, key_ns,
                             sql_column_null(st, col) ? JSON_TIME_NONE : sql_column_int64(st, col));
}

json_t *farm_json_col_text(sql_stmt *st, int col) {
        const char *t = sql_column_text(st, col);
        return t ? json_string(t) : json_null();
}
