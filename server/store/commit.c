/* SPDX-License-Identifier: MIT */
/* Storing an upload: on SQLite in a group commit (the uploads that wait for the writer share
 * one transaction, each in its own savepoint), on PostgreSQL in a transaction of its own. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "macro.h"
#include "partitions.h"

/* ---- storing an upload: SQLite's group commit ---------------------------------------------- */

/* Ends the open batch: commits it, or rolls it back after a failure (result < 0), and answers
 * every upload in it.  Called with the lock held and committing set; the commit runs without
 * the lock (committing keeps the others off the connection), so that uploads arriving in the
 * meantime can queue up for the next batch. */
static void end_batch(farm_db *db, int result, const char *why) {
        char err[FARM_ERROR_MAX];
        int r = result;

        snprintf(err, sizeof(err), "%s", why ?: "");
        if (r >= 0) {
                pthread_mutex_unlock(&db->lock);
                r = farm_commit(db->wc, err);
                pthread_mutex_lock(&db->lock);
        }
        if (r < 0)
                sql_rollback(db->wc);
        unsigned n = 0;
        for (struct batch_waiter *w = db->batch, *next; w; w = next) {
                next = w->next; /* w lives on its thread's stack: gone once done is seen */
                w->result = r;
                if (r < 0)
                        snprintf(w->err, sizeof(w->err), "%s", err);
                w->done = true;
                n++;
        }
        if (r >= 0 && n > 0) {
                db->commits++;
                db->batched += n;
        }
        db->batch = NULL;
        db->txn_open = false;
        db->committing = false;
        pthread_cond_broadcast(&db->cond);
}

/* Stores s in its own savepoint of the open batch (opened if none is); the lock is held. */
static int store_in_batch(farm_db *db, const struct summary *s, int64_t now_ns,
                          struct farm_stored *res, struct batch_waiter *me, char *err) {
        sql_conn *c = db->wc;
        int r = 0;
        if (!db->txn_open) {
                r = sql_begin(c, SQL_TXN_WRITE);
                if (r < 0)
                        return farm_fail(c, r, "cannot begin", err);
                db->txn_open = true;
        }
        if ((r = farm_exec(c, "SAVEPOINT upload", err)) < 0)
                return r;
        bool broken = false;
        char ignored[FARM_ERROR_MAX];
        r = farm_ingest_summary(c, s, now_ns, res, err);
        if (r < 0 && sql_in_txn(c) && farm_exec(c, "ROLLBACK TO upload", ignored) < 0)
                broken = true; /* it cannot be undone alone */
        if (sql_in_txn(c)) {
                int q = farm_exec(c, "RELEASE upload", r >= 0 ? err : ignored);
                if (q < 0) {
                        broken = true;
                        r = r < 0 ? r : q;
                }
        }
        if (broken || !sql_in_txn(c)) {
                /* The transaction is broken, or SQLite rolled it back (an I/O error, a full
                 * disk): what the others stored in it must not be committed, or is gone
                 * already, and they must not hear "stored". */
                db->committing = true;
                end_batch(db, -EIO, "the batch was rolled back after an error");
                if (r >= 0) {
                        /* Not in the batch that just ended: do not wait for it. */
                        r = -EIO;
                        snprintf(err, FARM_ERROR_MAX, "the batch was rolled back after an error");
                }
        } else if (r >= 0) {
                me->next = db->batch;
                db->batch = me;
        }
        return r;
}

static int store_sqlite(farm_db *db, const struct summary *s, int64_t now_ns,
                        struct farm_stored *res, char *err) {
        struct batch_waiter me = {};

        pthread_mutex_lock(&db->lock);
        db->queued++;
        while (db->committing)
                pthread_cond_wait(&db->cond, &db->lock);
        db->queued--;
        int r = store_in_batch(db, s, now_ns, res, &me, err);

        /* The last upload in the queue commits the batch; the others wait for it. */
        if (db->txn_open && db->queued == 0) {
                db->committing = true;
                end_batch(db, db->batch ? 0 : -ECANCELED, NULL);
        }
        if (r >= 0) {
                while (!me.done)
                        pthread_cond_wait(&db->cond, &db->lock);
                r = me.result;
                if (r < 0)
                        snprintf(err, FARM_ERROR_MAX, "%s", me.err);
        }
        pthread_mutex_unlock(&db->lock);
        return r;
}

/* ---- storing an upload: PostgreSQL, a transaction each ------------------------------------- */

/* Tries again a transaction the database aborted to resolve a conflict (a deadlock, a
 * serialization failure) this many times. */
#define FARM_PG_TRIES 5

static int store_pg(farm_db *db, const struct summary *s, int64_t now_ns, struct farm_stored *res,
                    char *err) {
        _cleanup_release_ sql_conn *c = farm_writer(db);
        int r = farm_partitions_for(c, s, err);
        for (int tries = 0; r >= 0 && tries < FARM_PG_TRIES; tries++) {
                *res = (struct farm_stored){};
                /* Statements without rows sent without waiting for each answer: 6 round trips
                 * per upload of one interval (the token check and the rate limit included).  The
                 * upload's few statement shapes run with their generic plans (set by its first
                 * statement, server-ingest.c). */
                r = sql_begin(c, SQL_TXN_PIPELINE);
                if (r < 0) {
                        sql_rollback(c);
                        return farm_fail(c, r, "cannot begin", err);
                }
                r = farm_ingest_summary(c, s, now_ns, res, err);
                if (r >= 0)
                        r = farm_commit(c, err);
                if (r >= 0) {
                        __atomic_add_fetch(&db->commits, 1, __ATOMIC_RELAXED);
                        __atomic_add_fetch(&db->batched, 1, __ATOMIC_RELAXED);
                        return 0;
                }
                sql_rollback(c);
                if (r == -ENOENT && strstr(err, "no partition")) {
                        /* Its month's partitions were dropped by the retention of another
                         * server of the farm: they are made again. */
                        farm_partitions_forget_all(db);
                        r = farm_partitions_for(c, s, err);
                        if (r >= 0)
                                continue;
                }
                if (r != -EAGAIN)
                        break;
                r = 0; /* again */
        }
        return r < 0 ? r
                     : farm_failf(db, -EBUSY, err,
                                  "the database aborted the upload's transaction %d times",
                                  FARM_PG_TRIES);
}

int farm_store_summary(farm_db *db, const struct summary *s, int64_t now_ns,
                       struct farm_stored *ret, char err[static FARM_ERROR_MAX]) {
        struct farm_stored res = {};
        int r = farm_is_pg(db) ? store_pg(db, s, now_ns, &res, err)
                               : store_sqlite(db, s, now_ns, &res, err);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

void farm_db_commit_stats(farm_db *db, uint64_t *ret_commits, uint64_t *ret_uploads) {
        pthread_mutex_lock(&db->lock);
        *ret_commits = __atomic_load_n(&db->commits, __ATOMIC_RELAXED);
        *ret_uploads = __atomic_load_n(&db->batched, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&db->lock);
}
