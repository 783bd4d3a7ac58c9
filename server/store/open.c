/* SPDX-License-Identifier: MIT */
/* Opening the farm database: the file or the server, its schema brought up to date, the
 * connections each store keeps; and closing it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "file-mode.h"
#include "macro.h"

/* PostgreSQL connections per server: two per HTTP thread (a request may hold a reader while it
 * stores, or a verdict's snapshot while it reads) and some for the verdict log, notifications
 * and retention. */
#define FARM_POOL_EXTRA 4
#define FARM_POOL_DEFAULT 20

bool farm_db_check_skipped(farm_db *db, int64_t *ret_size_bytes) {
        *ret_size_bytes = db->size_bytes;
        return db->check_skipped;
}

/* SQLite's reading connection, opened once the schema is in place. */
static int open_reader(farm_db *db, char *err) {
        int r = farm_conn_open(db, 0, &db->rc, err);
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
        r = farm_conn_open(db, SQL_OPEN_CREATE, &db->wc, err);
        if (r < 0 || (r = farm_schema_open(db, db->wc, err)) < 0)
                return r;
        return open_reader(db, err);
}

static int open_pg(farm_db *db, unsigned pool_size, char *err) {
        sql_conn *c = NULL;
        int r = farm_pool_open(db, pool_size, &c, err);
        if (r < 0)
                return r;
        r = farm_schema_open(db, c, err);
        farm_release(c);
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
