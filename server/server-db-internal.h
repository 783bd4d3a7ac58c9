/* SPDX-License-Identifier: MIT */
/* Inside the farm database: the handle and the helpers that the server's parts which speak
 * SQL (storing, the verdict, the queries) share.  Nothing outside server/ includes this. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "server-db.h"

/* An upload that is stored in the open batch and waits for the commit that makes it durable. */
struct batch_waiter {
        struct batch_waiter *next;
        bool done;
        int result; /* of the commit: 0, or why the batch (and so this upload) was not stored */
        char err[FARM_ERROR_MAX];
};

/* Statements prepared once per connection and kept: preparing the dozen statements of an
 * upload every time cost as much CPU as running them. */
#define STMT_CACHE_MAX 160
struct stmt_cache {
        const char *sql[STMT_CACHE_MAX];
        sqlite3_stmt *st[STMT_CACHE_MAX];
        unsigned n;
};

struct farm_db {
        sqlite3 *db;
        struct stmt_cache cache; /* of db, used by whoever holds the writer */
        /* A second connection for the token checks and the queries: in WAL mode it reads the
         * last commit while the writer works, so that neither waits for a commit's fsync, and
         * it never sees uploads that are not durable yet. */
        sqlite3 *rdb;
        char *path;
        /* The writer connection is shared by the HTTP worker threads.  SQLite lets only one
         * writer in at a time anyway; the expensive part of an upload (parsing and validating
         * the JSON) runs before the lock is taken.
         *
         * Group commit: uploads are stored in a transaction that stays open while more are
         * queued behind the lock, each inside its own savepoint (so a refused one is undone
         * alone), and the last of them commits the batch.  With synchronous=FULL that commit
         * fsyncs the WAL once for the whole batch, and every upload of the batch is answered
         * only after it returned: an upload answered "stored" is on disk. */
        pthread_mutex_t lock;
        pthread_cond_t cond;        /* a commit finished */
        unsigned queued;            /* uploads that want the writer: they join the open batch */
        bool txn_open;              /* a batch is open */
        bool check_skipped;         /* too large for the integrity check at open */
        int64_t size_bytes;         /* of the file at open */
        bool committing;            /* its COMMIT runs, without the lock: nobody else writes */
        struct batch_waiter *batch; /* the uploads stored in the open batch */
        uint64_t commits, batched;  /* batches committed and uploads in them, for the log */
        pthread_mutex_t rlock;      /* of rdb and rcache */
        uint64_t generation;        /* of this opening, unique in the process */
        struct stmt_cache rcache;
};

static inline void finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_stmt_ _cleanup_(finalizep)

/* A cached statement goes back to the cache reset, with its parameters cleared. */
static inline void resetp(sqlite3_stmt **st) {
        if (*st) {
                sqlite3_reset(*st);
                sqlite3_clear_bindings(*st);
        }
}
#define _cleanup_reset_ _cleanup_(resetp)

static inline void unlockp(pthread_mutex_t **m) {
        if (*m)
                pthread_mutex_unlock(*m);
}
#define _cleanup_unlock_ _cleanup_(unlockp)

static inline pthread_mutex_t *farm_lock_reader(farm_db *db) {
        pthread_mutex_lock(&db->rlock);
        return &db->rlock;
}

/* Takes the writer when no batch is open or committing (enroll and revoke). */
static inline pthread_mutex_t *farm_lock_writer_idle(farm_db *db) {
        pthread_mutex_lock(&db->lock);
        while (db->txn_open || db->committing)
                pthread_cond_wait(&db->cond, &db->lock);
        return &db->lock;
}

static inline const char *farm_db_path(farm_db *db) {
        return db->path;
}
/* Tells this opening of a database from an earlier one of the same file (caches keyed by it). */
static inline uint64_t farm_db_generation(farm_db *db) {
        return db->generation;
}
/* The connections: use them only while holding their lock. */
static inline sqlite3 *farm_db_writer(farm_db *db) {
        return db->db;
}
static inline sqlite3 *farm_db_reader(farm_db *db) {
        return db->rdb;
}

/* Writes "path: what: SQLite's message" (of connection c) into err; returns the -errno. */
int farm_fail_on(farm_db *db, sqlite3 *c, int rc, const char *what, char *err);
_printf_(4, 5) int farm_failf(farm_db *db, int error, char *err, const char *fmt, ...);
/* The cached statement for sql (a string literal) on the writer or the reader connection.
 * Reset it after use (_cleanup_reset_); never finalize it. */
int farm_prepare_w(farm_db *db, const char *sql, sqlite3_stmt **ret, char *err);
int farm_prepare_r(farm_db *db, const char *sql, sqlite3_stmt **ret, char *err);
/* Steps a writer statement that returns no row, and resets it. */
int farm_step_done(farm_db *db, sqlite3_stmt *st, const char *what, char *err);
/* Runs a cached statement without result (BEGIN, COMMIT ...) on the writer. */
int farm_exec_w(farm_db *db, const char *sql, char *err);
void farm_rollback(farm_db *db);

/* Runs call (an expression giving 0 or more, or -errno) inside BEGIN IMMEDIATE ... COMMIT on
 * the writer, once no upload batch is open; rolls back when it fails.  Its value: call's, or
 * the error. */
#define FARM_WRITE_TRANSACTION(db, err, call)                                        \
        ({                                                                           \
                _cleanup_unlock_ pthread_mutex_t *_lock = farm_lock_writer_idle(db); \
                int _r = farm_exec_w(db, "BEGIN IMMEDIATE", err);                    \
                if (_r >= 0)                                                         \
                        _r = (call);                                                 \
                if (_r >= 0) {                                                       \
                        int _q = farm_exec_w(db, "COMMIT", err);                     \
                        if (_q < 0)                                                  \
                                _r = _q;                                             \
                }                                                                    \
                if (_r < 0)                                                          \
                        farm_rollback(db);                                           \
                _r;                                                                  \
        })
/* Finds the row whose token hash is token_hash with sql, which selects (name, token_hash,
 * usable) by "token_hash = ?"; compares the hash in full without an early exit.  0 and the name
 * (of at most size bytes) of a usable row, -EACCES, or -EIO. */
int farm_token_lookup(farm_db *db, const char *sql, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char *ret_name, size_t size);
json_t *farm_json_col_int(sqlite3_stmt *st, int col);
/* Fills what schema 6 adds for the intervals stored before it (server-migrate.c). */
int farm_migrate_6(farm_db *db, char *err);
/* Stores a decoded summary inside the open transaction (server-ingest.c); -EACCES when the
 * machine's token was revoked meanwhile, -EEXIST (err for the machine) when the run is stored
 * with another identity. */
int farm_ingest_summary(farm_db *db, const struct summary *s, int64_t now_ns,
                        struct farm_stored *ret, char *err);
json_t *farm_json_col_text(sqlite3_stmt *st, int col);
