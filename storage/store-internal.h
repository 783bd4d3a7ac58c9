/* SPDX-License-Identifier: MIT */
/* What the storage files share: the connection struct, prepared statement cache and error
 * helpers.  Not for use outside storage/. */
#pragma once

#include <sqlite3.h>

#include "store.h"

struct store {
        sqlite3 *db;
        char *path;
        int lock_fd;
        bool writer;
        bool uploader;
        bool outbox;     /* intervals and events written also enter the outbox */
        int auto_vacuum; /* PRAGMA auto_vacuum: 0 none, 1 full, 2 incremental */
        char error[STORE_ERROR_MAX];
};

/* Records "what: sqlite message" as the last error and returns a negative errno that fits
 * the SQLite result code. */
int store_fail(store *s, int rc, const char *what);
int store_failf(store *s, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int store_exec(store *s, const char *sql);
/* BEGIN IMMEDIATE (ending first a transaction an earlier failure left open), and ROLLBACK of an
 * open one. */
int store_begin(store *s);
void store_rollback(store *s);
/* Inserts ev, of no interval, inside the caller's transaction, with its outbox row when the
 * outbox is on; its id in *ret_id. */
int store_insert_event(store *s, int64_t run_id, const struct store_event *ev, int64_t *ret_id);
int store_prepare(store *s, const char *sql, sqlite3_stmt **ret);

static inline void sqlite3_finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_stmt_ __attribute__((cleanup(sqlite3_finalizep)))

/* The details (JSON object text, at most STORE_DETAILS_MAX) of the unclean_end event of run
 * u: its last stored interval with the worst latency of each CPU, what load ran then, the
 * boots and the uptime of the dead one, and what now->kernel_leftovers finds; and a short
 * summary of it for the event's message. */
int store_unclean_details(store *s, const struct store_run_info *now, const struct store_unclean *u,
                          char **ret_details, char *summary, size_t summary_size);

/* For the writer at open: bounds the WAL file, and turns a database made before schema 4
 * (auto_vacuum off) into one with incremental vacuum if it is small enough to rewrite now. */
int store_setup_vacuum(store *s);

/* Stores an interval's trace captures (store-trace.c), inside the caller's transaction. */
int store_insert_traces(store *s, int64_t run_id, int64_t interval_id,
                        const struct store_trace *traces, size_t n);
struct summary;
/* Adds the captures carried by the interval to the last interval of sum, with their raw
 * events while the summary stays within its budget for them. */
int store_load_traces(store *s, int64_t interval_id, struct summary *sum);
/* Adds the inventory versions that the event carries to sum (store-inventory.c). */
int store_load_inventory(store *s, int64_t event_id, struct summary *sum);
