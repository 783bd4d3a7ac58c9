/* SPDX-License-Identifier: MIT */
/* Inside the farm database: its connections (which thread may use which), transactions, and
 * the helpers that the server's parts which speak SQL share.  Nothing outside server/
 * includes this. */
#pragma once

#include "json-time.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "db.h"
#include "sql.h"

#define FARM_SNAPSHOTS_IDLE 8

/* An upload that is stored in the open batch and waits for the commit that makes it durable. */
struct batch_waiter {
        struct batch_waiter *next;
        bool done;
        int result; /* of the commit: 0, or why the batch (and so this upload) was not stored */
        char err[FARM_ERROR_MAX];
};

/* PostgreSQL: the connections of this server, each used by one thread at a time. */
struct farm_pool {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        sql_conn **idle;
        size_t nidle, nopen, max;
};

struct farm_db {
        char *target;     /* the path, or the postgresql:// URI */
        atomic_bool stop; /* farm_db_stop(): reads fail */
        char shown[512];  /* the same without a password, for messages */
        enum sql_dialect dialect;
        bool check_skipped; /* too large for the integrity check at open */
        int64_t size_bytes; /* of the file at open */

        /* SQLite: one connection writes, shared by the HTTP worker threads (SQLite lets one
         * writer in at a time anyway; the expensive part of an upload, parsing and validating
         * the JSON, runs before the lock is taken).  A second one reads: in WAL mode it sees
         * the last commit while the writer works, so that neither waits for a commit's fsync,
         * and it never sees uploads that are not durable yet.
         *
         * Group commit: uploads are stored in a transaction that stays open while more are
         * queued behind the lock, each inside its own savepoint (so a refused one is undone
         * alone), and the last of them commits the batch.  With synchronous=FULL that commit
         * fsyncs the WAL once for the whole batch, and every upload of the batch is answered
         * only after it returned: an upload answered "stored" is on disk. */
        sql_conn *wc, *rc;
        pthread_mutex_t lock;
        pthread_cond_t cond;        /* a commit finished */
        unsigned queued;            /* uploads that want the writer: they join the open batch */
        bool txn_open;              /* a batch is open */
        bool committing;            /* its COMMIT runs, without the lock: nobody else writes */
        struct batch_waiter *batch; /* the uploads stored in the open batch */
        uint64_t commits, batched;  /* batches committed and uploads in them, for the log */
        pthread_mutex_t rlock;      /* of rc */
        uint64_t generation;        /* of this opening, unique in the process */

        /* SQLite: the snapshots' connections given back, kept to be used again (a connection
         * opened anew reads the schema and prepares every statement again). */
        struct {
                pthread_mutex_t lock;
                sql_conn *idle[FARM_SNAPSHOTS_IDLE];
                size_t n;
        } snaps;

        /* PostgreSQL: every connection comes from the pool, and each upload is a transaction
         * of its own; the database serializes what must be (docs/farm-server.md). */
        struct farm_pool pool;
        /* The months whose partitions exist (server-partitions.c). */
        struct {
                pthread_mutex_t lock;
                int64_t *v;
                size_t n, cap;
        } months;
};

static inline const char *farm_db_path(farm_db *db) {
        return db->target;
}

/* Tells this opening of a database from an earlier one of the same file (caches keyed by it). */
static inline uint64_t farm_db_generation(farm_db *db) {
        return db->generation;
}

static inline bool farm_is_pg(const farm_db *db) {
        return db->dialect == SQL_PG;
}

/* A new connection of db's (owned by it), and PostgreSQL's pool of pool_size with its first
 * connection, held by this thread until farm_release() (store/open.c opens the database with
 * them). */
int farm_conn_open(farm_db *db, unsigned flags, sql_conn **ret, char *err);
int farm_pool_open(farm_db *db, unsigned pool_size, sql_conn **ret, char *err);

/* A connection for reading (SQLite: the reading connection, locked; PostgreSQL: one of the
 * pool), for one thread until farm_release().  Each statement sees the last commit. */
sql_conn *farm_reader(farm_db *db);
/* A connection for writing, once no upload batch is open (SQLite: the writer, locked;
 * PostgreSQL: one of the pool). */
sql_conn *farm_writer(farm_db *db);
/* A connection in a read-only snapshot: every statement sees the database as it was at the
 * first; NULL with err on failure (SQLite: a connection of its own, so that the snapshot does
 * not hold the reader for the whole of a verdict). */
sql_conn *farm_snapshot(farm_db *db, char *err);
/* Gives a connection back (ends a snapshot's transaction; rolls back one left open). */
void farm_release(sql_conn *c);
static inline void farm_releasep(sql_conn **c) {
        if (*c)
                farm_release(*c);
}
#define _cleanup_release_ _cleanup_(farm_releasep)

/* The farm database of a connection. */
static inline farm_db *farm_of(const sql_conn *c) {
        return sql_owner(c);
}

/* The clock view's SQL (struct farm_clock_view), over the columns of runs (prefix R, "r.") or
 * run_days (prefix D) with TOL the SQL of the tolerance: a run's start as the server takes it;
 * a day rollup's end of data as the server takes it (its latest receipt, when an interval of it
 * was stamped beyond the tolerance); how far a run's data was stamped after it arrived (its
 * start against its first upload, its intervals' ends, its events). */
#define FARM_SQL_RUN_START(R, TOL)                                                            \
        "CASE WHEN " R "start_ns > " R "first_report_ns + " TOL " THEN " R "first_report_ns " \
        "ELSE " R "start_ns END"
#define FARM_SQL_DAY_END(D, TOL)                                                                \
        "CASE WHEN " D "max_skew_ns > " TOL " THEN " D "max_received_ns ELSE " D "last_end_ns " \
        "END"
#define FARM_SQL_RUN_SKEW(R)                                                                     \
        "greatest(" R "start_ns - " R "first_report_ns, (SELECT max(max_skew_ns) FROM run_days " \
        "WHERE run = " R "id), (SELECT max(time_ns - received_ns) FROM events WHERE run = " R    \
        "id))"

/* Writes "target: what: the database's message" into err; returns r (-EIO for r >= 0, and
 * for -EINVAL: callers answer that as a bad request). */
int farm_fail(sql_conn *c, int r, const char *what, char *err);
_printf_(4, 5) int farm_failf(farm_db *db, int error, char *err, const char *fmt, ...);
/* The cached statement for sql (a string literal: cached by address, see sql_prepare()) on c;
 * reset it after use (_cleanup_reset_), never finalize it. */
int farm_prepare(sql_conn *c, const char *sql, sql_stmt **ret, char *err);
/* Steps a statement that returns no row, and resets it. */
int farm_step_done(sql_stmt *st, const char *what, char *err);
/* Runs statements without parameters or results. */
int farm_exec(sql_conn *c, const char *sql, char *err);
#define _cleanup_reset_ _cleanup_sql_reset_

/* The CPU rows c of the intervals i: on PostgreSQL also by the interval's start, which chooses
 * the partition (without it, every month's partition is looked into for every interval).
 * SQL_BY_CPUS(head, tail) is the statement for each dialect, indexed by sql_dialect(). */
#define SQL_JOIN_CPUS_SQLITE "JOIN interval_cpus c ON c.interval = i.id"
#define SQL_JOIN_CPUS_PG "JOIN interval_cpus c ON c.interval = i.id AND c.start_ns = i.start_ns"
#define SQL_BY_CPUS(head, tail) \
        { [SQL_SQLITE] = head SQL_JOIN_CPUS_SQLITE tail, [SQL_PG] = head SQL_JOIN_CPUS_PG tail }

/* PostgreSQL's advisory locks of the farm, shared by all its servers: 'rtsf' and a number. */
#define FARM_LOCK_SCHEMA "1920234342001"      /* creating and migrating the schema */
#define FARM_LOCK_STAFF "1920234342002"       /* the staff's and commands' changes */
#define FARM_LOCK_PARTITIONS "1920234342003"  /* making and dropping partitions */
#define FARM_LOCK_VERDICT_LOG "1920234342004" /* one writer of the verdict log */

/* Begins a write transaction on c (a farm_writer()): on PostgreSQL it also takes the lock that
 * serializes the staff's changes of every server of the farm, as SQLite's one writer does. */
int farm_begin_write(sql_conn *c, char *err);
int farm_commit(sql_conn *c, char *err);

/* Runs call (an expression of the connection named c, giving 0 or more, or -errno) inside a
 * write transaction once no upload batch is open; rolls back when it fails.  Its value:
 * call's, or the error. */
#define FARM_WRITE_TRANSACTION(db, c, err, call)                 \
        ({                                                       \
                _cleanup_release_ sql_conn *c = farm_writer(db); \
                int _r = farm_begin_write(c, err);               \
                if (_r >= 0)                                     \
                        _r = (call);                             \
                if (_r >= 0) {                                   \
                        int _q = farm_commit(c, err);            \
                        if (_q < 0)                              \
                                _r = _q;                         \
                }                                                \
                if (_r < 0)                                      \
                        sql_rollback(c);                         \
                _r;                                              \
        })

/* Finds the row whose token hash is token_hash with sql, which selects (name, token_hash,
 * usable) by "token_hash = ?"; compares the hash in full without an early exit.  0 and the name
 * (of at most size bytes) of a usable row, -EACCES, or -EIO. */
int farm_token_lookup(farm_db *db, const char *sql, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char *ret_name, size_t size);
/* The same with the rows of st, a statement of that kind run here (its parameters bound);
 * with ret_more, the fourth column of the usable row found too. */
int farm_token_rows(sql_stmt *st, const uint8_t token_hash[SHA256_DIGEST_SIZE], char *ret_name,
                    size_t size, int64_t *ret_more);
json_t *farm_json_col_int(sql_stmt *st, int col);
json_t *farm_json_col_text(sql_stmt *st, int col);
/* Sets key_ns from an integer column (NULL: null) with its RFC 3339 twin (json_set_time()). */
int farm_json_set_col_time(json_t *o, const char *key_ns, sql_stmt *st, int col);

/* 0 when machine_id is enrolled (revoked or not), else -ENOENT with err saying so
 * (settings.c). */
int farm_machine_exists(sql_conn *c, const char *machine_id, char *err);

/* The schema (server-schema.c): creates or migrates the farm database on c, the writer. */
int farm_schema_open(farm_db *db, sql_conn *c, char *err);
/* Fills what schema 6 adds for the intervals stored before it (server-migrate.c). */
int farm_migrate_6(sql_conn *c, char *err);
/* Stores a decoded summary inside the open transaction (server-ingest.c); -EACCES when the
 * machine's token was revoked meanwhile, -EEXIST (err for the machine) when the run is stored
 * with another identity. */
int farm_ingest_summary(sql_conn *c, const struct summary *s, int64_t now_ns,
                        struct farm_stored *ret, char *err);
