/* SPDX-License-Identifier: MIT */
/* run_day_hists: the merged histogram of all CPUs per run, UTC day and scenario, kept by
 * ingest (day-hists.h).  Each write reads the day's row, merges the new sums into it and writes
 * it back, under the machine's lock that every upload of the machine takes first (on
 * PostgreSQL a row lock held to the commit, on SQLite the one writer): two uploads of one run
 * never merge into the same row at once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "day-hists.h"
#include "db-internal.h"
#include "grow.h"
#include "hist.h"
#include "log.h"
#include "macro.h"
#include "merge.h"
#include "timeutil.h"

struct farm_day_hist {
        int64_t day;
        char *scenario;
        struct farm_acc acc;
        bool bad; /* a histogram did not merge: the row is written without one */
};

static struct farm_day_hist *day_hist_of(struct farm_day_hists *d, int64_t day,
                                         const char *scenario) {
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].day == day && strcmp(d->v[i].scenario, scenario) == 0)
                        return &d->v[i];
        if (!farm_grow((void **) &d->v, d->n, sizeof(*d->v)))
                return NULL;
        struct farm_day_hist *x = &d->v[d->n];
        *x = (struct farm_day_hist){ .day = day, .scenario = strdup(scenario) };
        if (!x->scenario)
                return NULL;
        d->n++;
        return x;
}

int farm_day_hists_add_row(struct farm_day_hists *d, int64_t day, const char *scenario,
                           uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                           uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                           uint64_t violations) {
        struct farm_day_hist *x = day_hist_of(d, day, scenario);
        if (!x)
                return -ENOMEM;
        if (x->bad)
                return 0;
        size_t before = farm_acc_bytes(&x->acc);
        const char *why = NULL;
        int r = farm_acc_add(&x->acc, limit_us, blob, len, samples, min_ns, max_ns, max_time_ns,
                             violations, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || x->acc.samples >= INT64_MAX) {
                /* Readers merge this day from its intervals, as before the rows were kept. */
                x->bad = true;
                d->bytes -= before;
                farm_acc_done(&x->acc);
                return 0;
        }
        d->bytes += farm_acc_bytes(&x->acc) - before;
        return 0;
}

int farm_day_hists_add(struct farm_day_hists *d, const struct summary_interval *iv) {
        int64_t day = iv->start_ns / FARM_DAY_NS;
        for (size_t i = 0; i < iv->ncpus; i++) {
                const struct summary_cpu *p = &iv->cpus[i];
                int r = farm_day_hists_add_row(d, day, iv->scenario ?: "", p->hist_limit_us,
                                               p->hist, p->hist_len, p->samples, p->min_ns,
                                               p->max_ns, p->max_time_ns, p->violations);
                if (r < 0)
                        return r;
        }
        return 0;
}

void farm_day_hists_done(struct farm_day_hists *d) {
        for (size_t i = 0; i < d->n; i++) {
                free(d->v[i].scenario);
                farm_acc_done(&d->v[i].acc);
        }
        free(d->v);
        *d = (struct farm_day_hists){};
}

/* Merges the stored row of x (if any) into it; x->bad when that row has no histogram. */
static int merge_stored(sql_stmt *get, int64_t run, struct farm_day_hist *x, char *err) {
        sql_bind_int64(get, 1, run);
        sql_bind_int64(get, 2, x->day);
        sql_bind_text(get, 3, x->scenario);
        int rc = sql_step(get), r = 0;
        if (rc == SQL_ROW && !x->bad) {
                if (sql_column_null(get, 1))
                        x->bad = true;
                else {
                        size_t len;
                        const void *blob = sql_column_blob(get, 1, &len);
                        const char *why = NULL;
                        r = farm_acc_add(&x->acc, (uint32_t) sql_column_int64(get, 0), blob, len,
                                         (uint64_t) sql_column_int64(get, 2),
                                         (uint64_t) sql_column_int64(get, 3),
                                         (uint64_t) sql_column_int64(get, 4),
                                         sql_column_int64(get, 5),
                                         (uint64_t) sql_column_int64(get, 6), &why);
                        if (r < 0 && r != -ENOMEM) {
                                x->bad = true;
                                r = 0;
                        }
                }
        } else if (rc != SQL_ROW && rc != SQL_DONE)
                r = farm_fail(sql_stmt_conn(get), rc, "cannot read a day's histogram", err);
        sql_reset(get);
        return r;
}

static int put_row(sql_stmt *put, int64_t run, struct farm_day_hist *x, char *err) {
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len = 0;
        if (x->acc.samples >= INT64_MAX)
                x->bad = true;
        if (!x->bad && x->acc.h.counts &&
            hist_encode(x->acc.h.limit_us, x->acc.h.counts, &blob, &len) < 0)
                return -ENOMEM;
        sql_bind_int64(put, 1, run);
        sql_bind_int64(put, 2, x->day);
        sql_bind_text(put, 3, x->scenario);
        sql_bind_int64(put, 4, (int64_t) MIN(x->acc.samples, (uint64_t) INT64_MAX));
        sql_bind_int64(put, 5, (int64_t) x->acc.min_ns);
        sql_bind_int64(put, 6, (int64_t) x->acc.max_ns);
        sql_bind_int64(put, 7, x->acc.max_time_ns);
        sql_bind_int64(put, 8, (int64_t) MIN(x->acc.violations, (uint64_t) INT64_MAX));
        sql_bind_int64(put, 9, x->acc.h.counts ? x->acc.h.limit_us : 0);
        if (!x->bad)
                /* An empty histogram is a zero-length blob, not NULL. */
                sql_bind_blob(put, 10, blob ? (const void *) blob : "", len);
        return farm_step_done(put, "cannot store a day's histogram", err);
}

int farm_day_hists_write(sql_conn *c, int64_t run, struct farm_day_hists *d, char *err) {
        _cleanup_reset_ sql_stmt *get = NULL, *put = NULL;
        int r = 0;
        if (d->n == 0)
                return 0;
        if ((r = farm_prepare(c,
                              "SELECT hist_limit_us, hist, samples, min_ns, max_ns, max_time_ns, "
                              "violations FROM run_day_hists WHERE run = ? AND day = ? AND "
                              "scenario = ?",
                              &get, err)) < 0 ||
            (r = farm_prepare(c,
                              "INSERT INTO run_day_hists (run, day, scenario, samples, min_ns, "
                              "max_ns, max_time_ns, violations, hist_limit_us, hist) VALUES "
                              "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, day, scenario) "
                              "DO UPDATE SET samples = excluded.samples, min_ns = "
                              "excluded.min_ns, max_ns = excluded.max_ns, max_time_ns = "
                              "excluded.max_time_ns, violations = excluded.violations, "
                              "hist_limit_us = excluded.hist_limit_us, hist = excluded.hist",
                              &put, err)) < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < d->n; i++) {
                r = merge_stored(get, run, &d->v[i], err);
                if (r >= 0)
                        r = put_row(put, run, &d->v[i], err);
        }
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging a day's histograms");
        farm_day_hists_done(d);
        return r;
}

/* ---- migration 9 -> 10 ---------------------------------------------------------------------- */

static const char *const sql_day_rows[] =
        SQL_BY_CPUS("SELECT coalesce(i.scenario, ''), c.hist_limit_us, c.hist, c.samples, "
                    "c.min_ns, c.max_ns, c.max_time_ns, c.violations FROM intervals i ",
                    " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3");

/* One run's day merged from its intervals and written. */
static int migrate_day(sql_conn *c, int64_t run, int64_t day, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct farm_day_hists d = {};
        int r = farm_prepare(c, sql_day_rows[sql_dialect(c)], &st, err), rc;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run);
        sql_bind_int64(st, 2, day * FARM_DAY_NS);
        sql_bind_int64(st, 3, (day + 1) * FARM_DAY_NS);
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                size_t len;
                const void *blob = sql_column_blob(st, 2, &len);
                r = farm_day_hists_add_row(
                        &d, day, sql_column_text(st, 0) ?: "", (uint32_t) sql_column_int64(st, 1),
                        blob, len, (uint64_t) sql_column_int64(st, 3),
                        (uint64_t) sql_column_int64(st, 4), (uint64_t) sql_column_int64(st, 5),
                        sql_column_int64(st, 6), (uint64_t) sql_column_int64(st, 7));
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read a day's intervals", err);
        sql_reset(st);
        if (r >= 0)
                r = farm_day_hists_write(c, run, &d, err);
        farm_day_hists_done(&d);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging a day's histograms");
        return r;
}

int farm_migrate_10(sql_conn *c, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct {
                int64_t run, day;
        } *days = NULL;
        size_t n = 0;
        int r = farm_prepare(c, "SELECT run, day FROM run_days ORDER BY run, day", &st, err), rc;
        if (r < 0)
                return r;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &days, n, sizeof(*days))) {
                        free(days);
                        snprintf(err, FARM_ERROR_MAX, "out of memory");
                        return -ENOMEM;
                }
                days[n].run = sql_column_int64(st, 0);
                days[n++].day = sql_column_int64(st, 1);
        }
        if (rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot list the days", err);
        sql_reset(st);
        /* Minutes on a farm of millions of intervals: said, so that a start that takes them is
         * not taken for a hang. */
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        if (r >= 0 && n > 0)
                log_info("Schema 10: merging the histograms of %zu stored run-days once", n);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = migrate_day(c, days[i].run, days[i].day, err);
        if (r >= 0 && n > 0)
                log_info("Schema 10: %zu run-days merged in %.1f s", n,
                         (double) (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
        free(days);
        return r;
}

int farm_day_hists_read(sql_conn *c, const struct day_ref *ref, const char *scenario, day_row_fn fn,
                        void *userdata, char *err) {
        _cleanup_reset_ sql_stmt *chk = NULL, *st = NULL;
        int r, rc;
        if ((r = farm_prepare(c,
                              "SELECT count(*), count(hist) FROM run_day_hists WHERE run = ? "
                              "AND day = ?",
                              &chk, err)) < 0)
                return r;
        sql_bind_int64(chk, 1, ref->run);
        sql_bind_int64(chk, 2, ref->day);
        if ((rc = sql_step(chk)) != SQL_ROW)
                return farm_fail(c, rc, "cannot read the day's histograms", err);
        if (sql_column_int64(chk, 0) == 0 || sql_column_int64(chk, 0) != sql_column_int64(chk, 1))
                return 0;
        if ((r = farm_prepare(c,
                              "SELECT scenario, hist_limit_us, hist, samples, min_ns, max_ns, "
                              "max_time_ns, violations FROM run_day_hists WHERE run = ?1 AND "
                              "day = ?2 AND (scenario = ?3 OR ?3 IS NULL)",
                              &st, err)) < 0)
                return r;
        sql_bind_int64(st, 1, ref->run);
        sql_bind_int64(st, 2, ref->day);
        if (scenario)
                sql_bind_text(st, 3, scenario);
        r = day_rows_each(c, st, false, ref, "day", fn, userdata, err);
        return r < 0 ? r : 1;
}
