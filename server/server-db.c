/* SPDX-License-Identifier: MIT */
/* The farm database: its connections on either store (SQLite's writer and reader, PostgreSQL's
 * pool), token checks, storing summaries (SQLite: group commit; PostgreSQL: one transaction
 * per upload, several at once) and the machine queries of the JSON API. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-mode.h"
#include "macro.h"
#include "server-db-internal.h"
#include "server-partitions.h"
#include "server-settings.h"

/* PostgreSQL connections per server: two per HTTP thread (a request may hold a reader while it
 * stores, or a verdict's snapshot while it reads) and some for the cache warmer, the verdict log
 * and retention. */
#define FARM_POOL_EXTRA 4
#define FARM_POOL_DEFAULT 20

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

static int conn_open(farm_db *db, unsigned flags, sql_conn **ret, char *err) {
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
        while (conn_open(db, SQL_OPEN_RETRY, &c, err) < 0)
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
                if (!c && conn_open(db, SQL_OPEN_READONLY, &c, err) < 0)
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

bool farm_db_check_skipped(farm_db *db, int64_t *ret_size_bytes) {
        *ret_size_bytes = db->size_bytes;
        return db->check_skipped;
}

/* SQLite's reading connection, opened once the schema is in place. */
static int open_reader(farm_db *db, char *err) {
        int r = conn_open(db, 0, &db->rc, err);
        if (r < 0)
                return r;
        sql_set_stop(db->rc, &db->stop); /* it only reads */
        /* 64 MiB of page cache: a month of a machine's intervals per step reads some 4 MiB of
         * pages, which the default 2 MiB would read again from the file at every query. */
        return farm_exec(db->rc,
                         "PRAGMA query_only = ON; PRAGMA foreign_keys = ON; "
                         "PRAGMA cache_size = -65536",
                         err);
}

static int open_sqlite(farm_db *db, char *err) {
        /* 0600 whatever the umask: the farm's data, its staff and token hashes are the
         * server's alone (the WAL and shared-memory files take the same mode). */
        int r = file_create_mode(db->target, FARM_DB_FILE_MODE, NULL);
        if (r < 0)
                return farm_failf(db, r, err, "cannot create the database: %s", strerror(-r));
        r = conn_open(db, SQL_OPEN_CREATE, &db->wc, err);
        if (r < 0 || (r = farm_schema_open(db, db->wc, err)) < 0)
                return r;
        return open_reader(db, err);
}

static int open_pg(farm_db *db, unsigned pool_size, char *err) {
        struct farm_pool *p = &db->pool;
        p->max = MAX(pool_size, 2u);
        p->idle = calloc(p->max, sizeof(*p->idle));
        if (!p->idle)
                return -ENOMEM;
        sql_conn *c = NULL;
        int r = conn_open(db, 0, &c, err);
        if (r < 0)
                return r;
        p->nopen = 1;
        pool_held++;
        r = farm_schema_open(db, c, err);
        pool_put(db, c);
        return r;
}

int farm_db_open_with(const char *target, unsigned threads, farm_db **ret,
                      char err[static FARM_ERROR_MAX]) {
        static _Atomic uint64_t generations;
        farm_db *db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        db->generation = ++generations;
        db->generation = ++generations;
        pthread_mutex_init(&db->lock, NULL);
        pthread_cond_init(&db->cond, NULL);
        pthread_mutex_init(&db->rlock, NULL);
        pthread_mutex_init(&db->snaps.lock, NULL);
        pthread_mutex_init(&db->pool.lock, NULL);
        pthread_cond_init(&db->pool.cond, NULL);
        pthread_mutex_init(&db->months.lock, NULL);
        db->target = strdup(target);
        if (!db->target) {
                farm_db_close(db);
                return -ENOMEM;
        }
        sql_target_shown(target, db->shown, sizeof(db->shown));
        db->dialect = sql_target_is_pg(target) ? SQL_PG : SQL_SQLITE;
        int r = farm_is_pg(db)
                        ? open_pg(db, threads ? 2 * threads + FARM_POOL_EXTRA : FARM_POOL_DEFAULT,
                                  err)
                        : open_sqlite(db, err);
        if (r < 0) {
                farm_db_close(db);
                return r;
        }
        *ret = db;
        return 0;
}

int farm_db_open(const char *target, farm_db **ret, char err[static FARM_ERROR_MAX]) {
        return farm_db_open_with(target, 0, ret, err);
}

void farm_db_close(farm_db *db) {
        if (!db)
                return;
        sql_close(db->rc);
        sql_close(db->wc);
        for (size_t i = 0; i < db->pool.nidle; i++)
                sql_close(db->pool.idle[i]);
        for (size_t i = 0; i < db->snaps.n; i++)
                sql_close(db->snaps.idle[i]);
        pthread_mutex_destroy(&db->snaps.lock);
        free(db->pool.idle);
        free(db->months.v);
        pthread_mutex_destroy(&db->lock);
        pthread_cond_destroy(&db->cond);
        pthread_mutex_destroy(&db->rlock);
        pthread_mutex_destroy(&db->pool.lock);
        pthread_cond_destroy(&db->pool.cond);
        pthread_mutex_destroy(&db->months.lock);
        free(db->target);
        free(db);
}

const struct name_rule farm_name_person = { "a person's name",
                                            NAME_LOWER | NAME_UPPER | NAME_DIGITS, "._@-", 1,
                                            FARM_PERSON_NAME_MAX };

bool farm_machine_id_valid(const char *s) {
        char why[NAME_WHY_MAX];
        return name_ok(&summary_name_id, s, why);
}

int farm_token_rows(sql_stmt *st, const uint8_t token_hash[SHA256_DIGEST_SIZE], char *ret_name,
                    size_t size, int64_t *ret_more) {
        bool found = false;
        int r;

        /* The token is looked up by its SHA-256 in an index, not compared with every stored
         * hash: a farm of 10,000 machines made that scan cost 3-4 ms of CPU per upload.  The
         * lookup's time depends only on the hash of what was presented, and knowing where the
         * hash of a guess falls among the stored hashes does not help to find a token whose
         * hash is one of them (that takes a SHA-256 preimage of a 256-bit random token).  The
         * row found is still compared in full without an early exit. */
        while ((r = sql_step(st)) == SQL_ROW) {
                size_t len;
                const uint8_t *h = sql_column_blob(st, 1, &len);
                if (!h || len != SHA256_DIGEST_SIZE)
                        continue;
                uint8_t diff = 0;
                for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                        diff |= h[i] ^ token_hash[i];
                if (diff == 0 && sql_column_int(st, 2)) {
                        snprintf(ret_name, size, "%s", sql_column_text(st, 0));
                        if (ret_more)
                                *ret_more = sql_column_int64(st, 3);
                        found = true;
                }
        }
        if (r != SQL_DONE)
                return r == -EBUSY ? -EBUSY : -EIO;
        return found ? 0 : -EACCES;
}

int farm_token_lookup(farm_db *db, const char *sql, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char *ret_name, size_t size) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];

        if (farm_prepare(c, sql, &st, err) < 0)
                return -EIO;
        sql_bind_blob(st, 1, token_hash, SHA256_DIGEST_SIZE);
        return farm_token_rows(st, token_hash, ret_name, size, NULL);
}

int farm_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char ret_machine_id[static FARM_MACHINE_ID_LEN + 1]) {
        return farm_token_lookup(
                db, "SELECT id, token_hash, revoked_ns IS NULL FROM machines WHERE token_hash = ?",
                token_hash, ret_machine_id, FARM_MACHINE_ID_LEN + 1);
}

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

#define LATEST_RUN_START FARM_SQL_RUN_START("r.", "?2")
#define LATEST_RUN_SKEW FARM_SQL_RUN_SKEW("r.")

/* The latest run of a machine (by its start as the server takes it), or null. */
static int latest_run_json(sql_conn *c, const char *machine_id, const struct farm_clock_view *cv,
                           json_t **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                             "r.preempt_model, r.start_ns, (SELECT max(max_ns) FROM intervals "
                             "WHERE run = r.id), r.first_report_ns, " LATEST_RUN_SKEW ", "
                             "r.interval_ns FROM runs r WHERE r.machine_id = ?1 "
                             "ORDER BY " LATEST_RUN_START " DESC, r.run_id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        int rc = sql_step(st);
        if (rc == SQL_DONE) {
                *ret = json_null();
                return 0;
        }
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the latest run", err);
        bool ahead = !sql_column_null(st, 8) && sql_column_int64(st, 8) > cv->clock_tolerance_ns;
        *ret = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                         "boot_id", farm_json_col_text(st, 1), "kernel_release",
                         farm_json_col_text(st, 2), "kernel_version", farm_json_col_text(st, 3),
                         "preempt_model", farm_json_col_text(st, 4), "worst_latency_ns",
                         farm_json_col_int(st, 6), "interval_ns", farm_json_col_int(st, 9),
                         "clock_ahead_ns", ahead ? farm_json_col_int(st, 8) : json_null());
        if (*ret && (farm_json_set_col_time(*ret, "start_ns", st, 5) < 0 ||
                     farm_json_set_col_time(*ret, "first_report_ns", st, 7) < 0))
                json_decref(*ret), *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

/* What the clock view adds to machine m: its last data (col of st, as the server takes it),
 * whether it is silent, and how far its latest run's data was stamped ahead of its arrival
 * (null: within the tolerance). */
static int clock_fields(json_t *m, sql_stmt *st, int col, const json_t *latest,
                        const struct farm_clock_view *cv) {
        int64_t last = sql_column_int64(st, col);
        int64_t interval = json_integer_value(json_object_get(latest, "interval_ns"));
        bool silent = !sql_column_null(st, col) && !json_is_true(json_object_get(m, "revoked")) &&
                      cv->now_ns - last > interval + cv->max_gap_ns;
        json_t *ahead = json_object_get(latest, "clock_ahead_ns");
        if (farm_json_set_col_time(m, "last_data_ns", st, col) < 0 ||
            json_object_set_new(m, "silent", json_boolean(silent)) < 0 ||
            json_object_set_new(m, "clock_ahead_ns", ahead ? json_incref(ahead) : json_null()) < 0)
                return -ENOMEM;
        return 0;
}

#define MACHINE_DAY_END FARM_SQL_DAY_END("d.", "?2")

int farm_machines_json(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                       json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *list = json_array();
        int r, rc;

        if (!list)
                return -ENOMEM;
        r = farm_prepare(c,
                         "SELECT m.id, m.hostname, m.cpu_model, m.cpus, m.threshold_ns, m.gating, "
                         "m.enrolled_ns, m.revoked_ns, m.last_report_ns, "
                         /* From the day rollups: a month of a machine is 30 of their rows rather
                          * than tens of thousands of intervals. */
                         "(SELECT max(d.max_ns) FROM run_days d JOIN runs r ON d.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT coalesce(sum(d.intervals), 0) FROM run_days d "
                         " JOIN runs r ON d.run = r.id WHERE r.machine_id = m.id), "
                         "(SELECT count(*) FROM events e JOIN runs r ON e.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT groups || '\n' || labels FROM machine_settings s "
                         " WHERE s.machine_id = m.id ORDER BY from_ns DESC, id DESC LIMIT 1), "
                         "(SELECT max(" MACHINE_DAY_END ") FROM run_days d JOIN runs r "
                         " ON d.run = r.id WHERE r.machine_id = m.id) "
                         "FROM machines m WHERE m.id = ?1 OR ?1 IS NULL ORDER BY m.id",
                         &st, err);
        if (r < 0)
                return r;
        if (machine_id)
                sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *id = sql_column_text(st, 0);
                json_t *latest = NULL;
                if ((r = latest_run_json(c, id, cv, &latest, err)) < 0)
                        return r;
                json_t *kernel = json_is_object(latest)
                                         ? json_incref(json_object_get(latest, "kernel_release"))
                                         : json_null();
                json_t *m = json_pack(
                        "{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:b, s:o, s:o, s:o, s:o, s:o, "
                        "s:o, s:o}",
                        "id", id, "hostname", farm_json_col_text(st, 1), "cpu_model",
                        farm_json_col_text(st, 2), "cpus", farm_json_col_int(st, 3), "threshold_ns",
                        farm_json_col_int(st, 4), "gating", sql_column_int(st, 5), "enrolled_ns",
                        farm_json_col_int(st, 6), "revoked", !sql_column_null(st, 7), "revoked_ns",
                        farm_json_col_int(st, 7), "last_report_ns", farm_json_col_int(st, 8),
                        "kernel", kernel, "worst_latency_ns", farm_json_col_int(st, 9),
                        "latest_run", latest, "intervals", farm_json_col_int(st, 10), "events",
                        farm_json_col_int(st, 11));
                /* The groups and labels in force, as the settings' history has them. */
                if (m && json_object_update_new(
                                 m, farm_settings_brief_json(sql_column_text(st, 12))) < 0) {
                        json_decref(m);
                        m = NULL;
                }
                /* "revoked" is the flag: the time of the revocation is "revoked_at". */
                if (!m || farm_json_set_col_time(m, "enrolled_ns", st, 6) < 0 ||
                    farm_json_set_col_time(m, "last_report_ns", st, 8) < 0 ||
                    clock_fields(m, st, 13, latest, cv) < 0 ||
                    json_object_set_new(m, "revoked_at",
                                        sql_column_null(st, 7)
                                                ? json_null()
                                                : json_time(sql_column_int64(st, 7))) < 0 ||
                    json_array_append_new(list, m) < 0)
                        return -ENOMEM;
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list the machines", err);
        if (machine_id) {
                if (json_array_size(list) == 0)
                        return farm_failf(db, -ENOENT, err, "no machine %s is enrolled",
                                          machine_id);
                *ret = json_incref(json_array_get(list, 0));
        } else
                *ret = json_pack("{s:O}", "machines", list);
        return *ret ? 0 : -ENOMEM;
}
