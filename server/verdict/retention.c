/* SPDX-License-Identifier: MIT */
/* Retention: the raw intervals (with their CPUs, loads and load metrics) of whole UTC months
 * older than a horizon are dropped: on PostgreSQL their partitions, on SQLite their rows in
 * batches.  What the verdict and the long views read stays: the day rollups, the runs, events,
 * load downs, overlaps and the merged histograms of each day (kept by ingest), the
 * trace captures' analyses (the culprits of the verdict's violations), whose raw events go with
 * the months, and the intervals that the verdict reads one by one (KEEP_SQL): a month with
 * any of them is thinned out instead of dropped. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "db-internal.h"
#include "partitions.h"
#include "retention.h"
#include "rule.h"
#include "timeutil.h"
#include "worker.h"

/* SQLite: intervals deleted per transaction (uploads wait for the writer meanwhile). */
#define BATCH_INTERVALS 2000
#define PRUNE_EVERY_NS (3600 * NSEC_PER_SEC)
#define DAY_SQL "86400000000000"

/* An interval (alias i) that the verdict may read one by one, so that dropping it could take a
 * problem away or change an answer (docs/farm-server.md, Retention): one over the smallest
 * bound its machine ever had (a violation), one of a run whose probe period measures nothing
 * (?7: MaxProbeInterval=), one of a day whose rollup the verdict does not take as it is (a gap
 * over ?3, MaxGap=; a CPU below ?4 per mille of its wake-ups, MinSamples=; more than ?5 missed,
 * ProbeDownMax=; a clock ahead by more than ?6, ClockTolerance=; a latency over that bound,
 * whose time splits the day's coverage; a load generator down; any machine's settings changed
 * that day or the two after, which an interval (up to 2 days long) may reach into: a group's
 * first member changes who gates), and one of a day whose histograms are not cached (the
 * regression check reads them).  What this misses (a required generator absent, by a rule made
 * later) the verdict tells as a "dropped" problem: it never passes for clean.  The numbers are the
 * strictest of the rule in force and every rule recorded. */
/* The smallest bound the machine of interval i ever had. */
#define MIN_BOUND_SQL                                                                        \
        "(SELECT min(s.threshold_ns) FROM machine_settings s JOIN runs r ON r.machine_id = " \
        "s.machine_id WHERE r.id = i.run)"
/* The UTC day of interval i, as the day rollups count it. */
#define DAY_OF_SQL "i.start_ns / " DAY_SQL
#define KEEP_SQL                                                                                   \
        "(i.max_ns > " MIN_BOUND_SQL                                                               \
        " OR EXISTS (SELECT 1 FROM runs r WHERE r.id = i.run AND (r.probe_interval_ns <= 0 "       \
        "OR r.probe_interval_ns > ?7)) "                                                           \
        "OR NOT EXISTS (SELECT 1 FROM run_days d WHERE d.run = i.run AND d.day = " DAY_OF_SQL      \
        " AND d.gaps_known <> 0 AND d.max_gap_ns <= ?3 AND d.min_ratio_pm >= ?4 AND "              \
        "d.max_missing_ns <= ?5 AND d.max_skew_ns <= ?6 AND d.max_ns <= " MIN_BOUND_SQL ") "       \
        "OR EXISTS (SELECT 1 FROM run_day_scenarios x WHERE x.run = i.run AND x.day = " DAY_OF_SQL \
        " AND x.down_ns <> 0) "                                                                    \
        "OR NOT EXISTS (SELECT 1 FROM run_days h WHERE h.run = i.run AND h.day = " DAY_OF_SQL      \
        " AND h.cpu_hists <> 0) OR EXISTS (SELECT 1 FROM machine_settings s WHERE s.from_ns >= "   \
        "(" DAY_OF_SQL ") * " DAY_SQL " AND s.from_ns < (" DAY_OF_SQL " + 3) * " DAY_SQL "))"

/* The rule's numbers for KEEP_SQL. */
struct keep {
        int64_t max_gap, min_samples_pm, probe_down_max, clock_tolerance, max_probe_interval;
};

static void keep_fold(struct keep *k, const struct farm_rule *rule) {
        k->max_gap = MIN(k->max_gap, (int64_t) rule->max_gap_ns);
        k->min_samples_pm = MAX(k->min_samples_pm, (int64_t) rule->min_samples_pm);
        k->probe_down_max = MIN(k->probe_down_max, (int64_t) rule->probe_down_max_ns);
        k->clock_tolerance = MIN(k->clock_tolerance, (int64_t) rule->clock_tolerance_ns);
        k->max_probe_interval = MIN(k->max_probe_interval, (int64_t) rule->max_probe_interval_ns);
}

/* The strictest numbers of rule and of every rule the farm recorded. */
static int keep_numbers(farm_db *db, const struct farm_rule *rule, struct keep *k, char *err) {
        *k = (struct keep){ INT64_MAX, 0, INT64_MAX, INT64_MAX, INT64_MAX };
        keep_fold(k, rule);
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT rule FROM rule_versions", &st, err), rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                json_t *j = json_loads(sql_column_text(st, 0) ?: "", 0, NULL);
                struct farm_rule old;
                char why[FARM_ERROR_MAX];
                if (j && farm_rule_from_json(j, &old, why, sizeof(why)) >= 0)
                        keep_fold(k, &old);
                json_decref(j);
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the recorded rules", err);
        return r;
}

static void bind_keep(sql_stmt *st, const struct keep *k) {
        sql_bind_int64(st, 3, k->max_gap);
        sql_bind_int64(st, 4, k->min_samples_pm);
        sql_bind_int64(st, 5, k->probe_down_max);
        sql_bind_int64(st, 6, k->clock_tolerance);
        sql_bind_int64(st, 7, k->max_probe_interval);
}

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

/* Month m of the PostgreSQL partitions: dropped when none of its intervals is kept, else
 * thinned out (the kept intervals and their rows stay); *ret_dropped: whether it went whole. */
/* A statement of text built here (sql_prepare() caches by address). */
static int prepare_text(sql_conn *c, const char *sql, sql_stmt **ret, char *err) {
        int r = sql_prepare_text(c, sql, ret);
        return r < 0 ? farm_fail(c, r, "cannot prepare query", err) : 0;
}

static int prune_month(sql_conn *c, int64_t month, const struct keep *k, bool *ret_dropped,
                       uint64_t *ret_intervals, char *err) {
        int64_t s = farm_month_start(month) / (int64_t) NSEC_PER_SEC;
        time_t t = (time_t) s;
        struct tm tm;
        char sql[2048];
        gmtime_r(&t, &tm);
        int y = tm.tm_year + 1900, mo = tm.tm_mon + 1;
        _cleanup_reset_ sql_stmt *st = NULL;
        /* Uploads into the month wait until this is done (an interval is stored first): one
         * committed between the look and the drop would go with the partitions. */
        snprintf(sql, sizeof(sql), "LOCK TABLE intervals_p%04d%02d IN SHARE MODE", y, mo);
        int r = farm_exec(c, sql, err);
        if (r < 0)
                return r;
        snprintf(sql, sizeof(sql),
                 "SELECT EXISTS (SELECT 1 FROM intervals_p%04d%02d i WHERE i.start_ns >= ?1 AND "
                 "i.start_ns < ?2 AND " KEEP_SQL ")",
                 y, mo);
        if ((r = prepare_text(c, sql, &st, err)) < 0)
                return r;
        sql_bind_int64(st, 1, farm_month_start(month));
        sql_bind_int64(st, 2, farm_month_start(month + 1));
        bind_keep(st, k);
        if ((r = sql_step(st)) != SQL_ROW)
                return farm_fail(c, r, "cannot look for the intervals retention keeps", err);
        *ret_dropped = sql_column_int(st, 0) == 0;
        /* Read to its end before the next statement (a pipelined transaction). */
        if ((r = sql_step(st)) != SQL_DONE)
                return farm_fail(c, r, "cannot look for the intervals retention keeps", err);
        for (size_t i = ELEMENTSOF(farm_partitioned); i-- > 0 && r >= 0;) {
                _cleanup_reset_ sql_stmt *del = NULL;
                if (*ret_dropped) {
                        snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s_p%04d%02d",
                                 farm_partitioned[i], y, mo);
                        r = farm_exec(c, sql, err);
                        continue;
                }
                if (i == 0)
                        snprintf(sql, sizeof(sql),
                                 "DELETE FROM intervals_p%04d%02d i WHERE i.start_ns >= ?1 AND "
                                 "i.start_ns < ?2 AND NOT " KEEP_SQL,
                                 y, mo);
                else
                        snprintf(sql, sizeof(sql),
                                 "DELETE FROM %s_p%04d%02d WHERE \"interval\" IN (SELECT i.id FROM "
                                 "intervals_p%04d%02d i WHERE i.start_ns >= ?1 AND i.start_ns < "
                                 "?2 AND NOT " KEEP_SQL ")",
                                 farm_partitioned[i], y, mo, y, mo);
                if ((r = prepare_text(c, sql, &del, err)) < 0)
                        break;
                sql_bind_int64(del, 1, farm_month_start(month));
                sql_bind_int64(del, 2, farm_month_start(month + 1));
                bind_keep(del, k);
                r = farm_step_done(del, "cannot delete old intervals", err);
                if (r >= 0 && i == 0)
                        *ret_intervals += (uint64_t) sql_changes(del);
        }
        return r;
}

static int drop_partitions_locked(sql_conn *c, int64_t cutoff, const struct keep *k, int *ret_n,
                                  uint64_t *ret_intervals, char *err) {
        int64_t months[1200];
        size_t n = 0;
        int r = farm_exec(c, "SELECT pg_advisory_xact_lock(" FARM_LOCK_PARTITIONS ")", err);
        if (r < 0 || (r = old_months(c, cutoff, months, ELEMENTSOF(months), &n, err)) < 0)
                return r;
        *ret_n = 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                bool dropped = false;
                r = prune_month(c, months[i], k, &dropped, ret_intervals, err);
                if (r >= 0 && dropped) {
                        farm_partitions_forget(farm_of(c), months[i]);
                        (*ret_n)++;
                }
        }
        return r;
}

/* One batch of the oldest intervals before cutoff that retention does not keep, with their
 * rows: how many went. */
static int delete_batch(sql_conn *c, int64_t cutoff, const struct keep *k, char *err) {
#define OLD_IDS                                                                 \
        "(SELECT i.id FROM intervals i WHERE i.start_ns < ?1 AND NOT " KEEP_SQL \
        " ORDER BY i.start_ns LIMIT ?2)"
        static const char *const sql[] = {
                "DELETE FROM interval_load_metrics WHERE interval IN " OLD_IDS,
                "DELETE FROM interval_loads WHERE interval IN " OLD_IDS,
                "DELETE FROM interval_cpus WHERE interval IN " OLD_IDS,
                "DELETE FROM intervals WHERE id IN " OLD_IDS,
        };
#undef OLD_IDS
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(sql) && r >= 0; i++) {
                _cleanup_reset_ sql_stmt *st = NULL;
                if ((r = farm_prepare(c, sql[i], &st, err)) < 0)
                        break;
                sql_bind_int64(st, 1, cutoff);
                sql_bind_int64(st, 2, BATCH_INTERVALS);
                bind_keep(st, k);
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

int farm_retention_pass(farm_db *db, const struct farm_rule *rule, int64_t before_ns,
                        uint64_t *ret_intervals, char err[static FARM_ERROR_MAX]) {
        /* Whole months only, the same on both stores: the month that holds before_ns stays. */
        int64_t cutoff = farm_month_start(farm_month_of(before_ns));
        struct keep k;
        *ret_intervals = 0;
        int q = keep_numbers(db, rule, &k, err);
        if (q >= 0)
                q = FARM_WRITE_TRANSACTION(db, w, err, drop_trace_raw(w, cutoff, err));
        if (q < 0)
                return q;
        if (farm_is_pg(db)) {
                int months = 0;
                int r = FARM_WRITE_TRANSACTION(
                        db, w, err,
                        drop_partitions_locked(w, cutoff, &k, &months, ret_intervals, err));
                return r < 0 ? r : months;
        }
        int r;
        do {
                r = FARM_WRITE_TRANSACTION(db, w, err, delete_batch(w, cutoff, &k, err));
                if (r > 0)
                        *ret_intervals += (uint64_t) r;
        } while (r == BATCH_INTERVALS);
        return r < 0 ? r : 0;
}

struct farm_pruner {
        farm_db *db;
        const struct farm_rule *rule;
        uint64_t retention_ns;
        struct worker *worker;
};

static void pruner_main(void *arg, struct worker *worker) {
        struct farm_pruner *p = arg;
        do {
                char err[FARM_ERROR_MAX] = "";
                uint64_t n;
                int64_t now = now_ns(CLOCK_REALTIME);
                int r = farm_retention_pass(p->db, p->rule, now - (int64_t) p->retention_ns, &n,
                                            err);
                if (r < 0 && !farm_db_stopping(p->db))
                        log_warning("Retention: %s; trying again in an hour", err);
                else if (r > 0 || n > 0)
                        log_info("Retention: dropped %d month(s) of partitions, %" PRIu64
                                 " intervals",
                                 r, n);
        } while (worker_wait(worker, PRUNE_EVERY_NS));
}

int farm_pruner_start(farm_db *db, const struct farm_rule *rule, uint64_t retention_ns,
                      struct farm_pruner **ret) {
        *ret = NULL;
        if (retention_ns == 0)
                return 0;
        struct farm_pruner *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (struct farm_pruner){ .db = db, .rule = rule, .retention_ns = retention_ns };
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
