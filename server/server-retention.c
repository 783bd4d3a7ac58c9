/* SPDX-License-Identifier: MIT */
/* Retention: the raw intervals (with their CPUs, loads and load metrics) of whole UTC months
 * older than a horizon are dropped: on PostgreSQL their partitions, on SQLite their rows in
 * batches.  What the verdict and the long views read stays: the day rollups, the runs, events,
 * load downs, overlaps and the merged histograms already cached, and the trace captures'
 * analyses (the culprits of the verdict's violations), whose raw events go with the months. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server-db-internal.h"
#include "server-partitions.h"
#include "server-retention.h"
#include "timeutil.h"
#include "worker.h"

/* SQLite: intervals deleted per transaction (uploads wait for the writer meanwhile). */
#define BATCH_INTERVALS 2000
#define PRUNE_EVERY_NS (3600 * NSEC_PER_SEC)

/* The partition months of the intervals that ended before cutoff (a month's start). */
static int old_months(sql_conn *c, int64_t cutoff, int64_t *months, size_t max, size_t *ret_n,
                      char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT substr(p.relname, length(p.relname) - 5, 6) FROM pg_inherits "
                             "i JOIN pg_class p ON p.oid = i.inhrelid JOIN pg_class t ON "
                             "t.oid = i.inhparent WHERE t.relname = 'intervals' ORDER BY 1",
                             &st, err);
        size_t n = 0;
        while (r >= 0 && (r = sql_step(st)) == SQL_ROW && n < max) {
                const char *ym = sql_column_text(st, 0);
                int y, m;
                if (!ym || sscanf(ym, "%4d%2d", &y, &m) != 2 || m < 1 || m > 12)
                        continue;
                int64_t month = ((int64_t) y - 1970) * 12 + m - 1;
                if (farm_month_start(month + 1) <= cutoff)
                        months[n++] = month;
        }
        if (r < 0)
                return farm_fail(c, r, "cannot list the partitions", err);
        *ret_n = n;
        return 0;
}

static int drop_partitions_locked(sql_conn *c, int64_t cutoff, int *ret_n, char *err) {
        int64_t months[1200];
        size_t n = 0;
        int r = farm_exec(c, "SELECT pg_advisory_xact_lock(" FARM_LOCK_PARTITIONS ")", err);
        if (r < 0 || (r = old_months(c, cutoff, months, ELEMENTSOF(months), &n, err)) < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
                int64_t s = farm_month_start(months[i]) / (int64_t) NSEC_PER_SEC;
                time_t t = (time_t) s;
                struct tm tm;
                gmtime_r(&t, &tm);
                for (size_t k = ELEMENTSOF(farm_partitioned); k-- > 0 && r >= 0;) {
                        char sql[128];
                        snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s_p%04d%02d",
                                 farm_partitioned[k], tm.tm_year + 1900, tm.tm_mon + 1);
                        r = farm_exec(c, sql, err);
                }
                farm_partitions_forget(farm_of(c), months[i]);
        }
        *ret_n = (int) n;
        return r;
}

/* One batch of the oldest intervals before cutoff, with their rows: how many went. */
static int delete_batch(sql_conn *c, int64_t cutoff, char *err) {
        static const char *const sql[] = {
                "DELETE FROM interval_load_metrics WHERE interval IN (SELECT id FROM intervals "
                "WHERE start_ns < ?1 ORDER BY start_ns LIMIT ?2)",
                "DELETE FROM interval_loads WHERE interval IN (SELECT id FROM intervals "
                "WHERE start_ns < ?1 ORDER BY start_ns LIMIT ?2)",
                "DELETE FROM interval_cpus WHERE interval IN (SELECT id FROM intervals "
                "WHERE start_ns < ?1 ORDER BY start_ns LIMIT ?2)",
                "DELETE FROM intervals WHERE id IN (SELECT id FROM intervals "
                "WHERE start_ns < ?1 ORDER BY start_ns LIMIT ?2)",
        };
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(sql) && r >= 0; i++) {
                _cleanup_reset_ sql_stmt *st = NULL;
                if ((r = farm_prepare(c, sql[i], &st, err)) < 0)
                        break;
                sql_bind_int64(st, 1, cutoff);
                sql_bind_int64(st, 2, BATCH_INTERVALS);
                r = farm_step_done(st, "cannot delete old intervals", err);
                if (r >= 0 && i == ELEMENTSOF(sql) - 1)
                        r = (int) sql_changes(st);
        }
        return r;
}

/* The raw events of the trace captures due before cutoff: the bulk of a capture (up to a
 * MiB each, a capture per CPU every few seconds on a machine that keeps violating), of no use
 * without the intervals around them; the analysis, a few hundred bytes, stays. */
static int drop_trace_raw(sql_conn *c, int64_t cutoff, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(
                c, "UPDATE traces SET raw = NULL WHERE time_ns < ?1 AND raw IS NOT NULL", &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, cutoff);
        return farm_step_done(st, "cannot drop old trace captures' raw events", err);
}

int farm_retention_pass(farm_db *db, int64_t before_ns, uint64_t *ret_intervals,
                        char err[static FARM_ERROR_MAX]) {
        /* Whole months only, the same on both stores: the month that holds before_ns stays. */
        int64_t cutoff = farm_month_start(farm_month_of(before_ns));
        *ret_intervals = 0;
        int q = FARM_WRITE_TRANSACTION(db, w, err, drop_trace_raw(w, cutoff, err));
        if (q < 0)
                return q;
        if (farm_is_pg(db)) {
                int months = 0;
                int r = FARM_WRITE_TRANSACTION(db, w, err,
                                               drop_partitions_locked(w, cutoff, &months, err));
                return r < 0 ? r : months;
        }
        int r;
        do {
                r = FARM_WRITE_TRANSACTION(db, w, err, delete_batch(w, cutoff, err));
                if (r > 0)
                        *ret_intervals += (uint64_t) r;
        } while (r == BATCH_INTERVALS);
        return r < 0 ? r : 0;
}

struct farm_pruner {
        farm_db *db;
        uint64_t retention_ns;
        struct worker *worker;
};

static void pruner_main(void *arg, struct worker *worker) {
        struct farm_pruner *p = arg;
        do {
                char err[FARM_ERROR_MAX] = "";
                uint64_t n;
                int64_t now = now_ns(CLOCK_REALTIME);
                int r = farm_retention_pass(p->db, now - (int64_t) p->retention_ns, &n, err);
                if (r < 0)
                        log_warning("Retention: %s; trying again in an hour", err);
                else if (r > 0 || n > 0)
                        log_info("Retention: dropped %d month(s) of partitions, %" PRIu64
                                 " intervals",
                                 r, n);
        } while (worker_wait(worker, PRUNE_EVERY_NS));
}

int farm_pruner_start(farm_db *db, uint64_t retention_ns, struct farm_pruner **ret) {
        *ret = NULL;
        if (retention_ns == 0)
                return 0;
        struct farm_pruner *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct farm_pruner){ .db = db, .retention_ns = retention_ns };
        int r = worker_start("retention", pruner_main, p, &p->worker);
        if (r < 0) {
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void farm_pruner_stop(struct farm_pruner *p) {
        if (!p)
                return;
        worker_stop(p->worker);
        free(p);
}
