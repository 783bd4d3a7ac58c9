/* SPDX-License-Identifier: MIT */
/* The day histograms kept by ingest (day-hists.h): run_day_hists of all CPUs and hist_days of
 * each.  Each write reads the day's rows of a scenario, merges the new sums into them and
 * writes them back, under the machine's lock that every upload of the machine takes first (on
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
        int64_t day, cpu; /* cpu -1: of all CPUs */
        char *scenario;
        struct farm_acc acc;
        bool bad; /* a histogram did not merge: the row (of all CPUs) is written without one */
};

static struct farm_day_hist *day_hist_of(struct farm_day_hists *d, int64_t day,
                                         const char *scenario, int64_t cpu) {
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].cpu == cpu && d->v[i].day == day &&
                    strcmp(d->v[i].scenario, scenario) == 0)
                        return &d->v[i];
        if (!farm_grow((void **) &d->v, d->n, sizeof(*d->v)))
                return NULL;
        struct farm_day_hist *x = &d->v[d->n];
        *x = (struct farm_day_hist){ .day = day, .cpu = cpu, .scenario = strdup(scenario) };
        if (!x->scenario)
                return NULL;
        d->n++;
        return x;
}

int farm_day_hists_add_row(struct farm_day_hists *d, int64_t day, const char *scenario, int64_t cpu,
                           uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                           uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                           uint64_t violations) {
        struct farm_day_hist *x = day_hist_of(d, day, scenario, cpu);
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

void farm_day_hists_done(struct farm_day_hists *d) {
        for (size_t i = 0; i < d->n; i++) {
                free(d->v[i].scenario);
                farm_acc_done(&d->v[i].acc);
        }
        free(d->v);
        *d = (struct farm_day_hists){};
}

/* ---- writing the sums ---------------------------------------------------------------------- */

/* By day, scenario and CPU (all CPUs first): a day and scenario's sums are next to each
 * other. */
static int hist_cmp(const void *a, const void *b) {
        const struct farm_day_hist *x = a, *y = b;
        if (x->day != y->day)
                return x->day < y->day ? -1 : 1;
        int c = strcmp(x->scenario, y->scenario);
        if (c)
                return c;
        return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* A day and scenario's sums, v[0..n) (sorted by CPU), and the statements that write them. */
struct day_group {
        struct farm_day_hist *v;
        size_t n;
        bool kept; /* run_days.cpu_hists: hist_days holds each CPU's rows of the day */
};

struct writer {
        sql_conn *c;
        int64_t run;
        sql_stmt *get_all, *get, *put_all, *unkeep, *drop;
        char *err;
};

static void writer_done(struct writer *w) {
        sql_stmt **v[] = { &w->get_all, &w->get, &w->put_all, &w->unkeep, &w->drop };
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                if (*v[i])
                        sql_reset(*v[i]);
}

/* The rows of all CPUs (cpu -1, from run_day_hists) and of each CPU (from hist_days, with the
 * day's cpu_hists; one row of NULLs and cpu_hists when it has none) of a run, day and
 * scenario. */
#define SQL_GET_ROWS                                                                           \
        "SELECT CAST(-1 AS BIGINT), CAST(1 AS BIGINT), hist_limit_us, hist, samples, min_ns, " \
        "max_ns, max_time_ns, violations FROM run_day_hists WHERE run = ?1 AND day = ?2 AND "  \
        "scenario = ?3 UNION ALL SELECT h.cpu, d.cpu_hists, h.hist_limit_us, h.hist, "         \
        "h.samples, h.min_ns, h.max_ns, h.max_time_ns, h.violations FROM run_days d LEFT "     \
        "JOIN hist_days h ON h.run = d.run AND h.day = d.day AND h.scenario = ?3 "             \
        "WHERE d.run = ?1 AND d.day = ?2"
#define SQL_SET_ROW                                                                        \
        "samples = excluded.samples, min_ns = excluded.min_ns, max_ns = excluded.max_ns, " \
        "max_time_ns = excluded.max_time_ns, violations = excluded.violations, "           \
        "hist_limit_us = excluded.hist_limit_us, hist = excluded.hist"

static int writer_prepare(struct writer *w, bool cpus) {
        int r = 0;
        if (!w->put_all)
                r = farm_prepare(w->c,
                                 "INSERT INTO run_day_hists (run, day, scenario, samples, min_ns, "
                                 "max_ns, max_time_ns, violations, hist_limit_us, hist) VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, day, scenario) "
                                 "DO UPDATE SET " SQL_SET_ROW,
                                 &w->put_all, w->err);
        /* Without CPUs, the statements of schema 10 only (its migration writes them). */
        if (r >= 0 && !cpus && !w->get_all)
                r = farm_prepare(w->c,
                                 "SELECT CAST(-1 AS BIGINT), CAST(1 AS BIGINT), hist_limit_us, "
                                 "hist, samples, min_ns, max_ns, max_time_ns, violations FROM "
                                 "run_day_hists WHERE run = ?1 AND day = ?2 AND scenario = ?3",
                                 &w->get_all, w->err);
        if (r >= 0 && cpus && !w->get)
                r = farm_prepare(w->c, SQL_GET_ROWS, &w->get, w->err);
        if (r >= 0 && cpus && !w->unkeep)
                r = farm_prepare(w->c,
                                 "UPDATE run_days SET cpu_hists = 0 WHERE run = ? AND day = ?",
                                 &w->unkeep, w->err);
        if (r >= 0 && cpus && !w->drop)
                r = farm_prepare(w->c, "DELETE FROM hist_days WHERE run = ? AND day = ?", &w->drop,
                                 w->err);
        return r;
}

static struct farm_day_hist *group_find(struct day_group *g, int64_t cpu) {
        size_t lo = 0, hi = g->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (g->v[mid].cpu < cpu)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < g->n && g->v[lo].cpu == cpu ? &g->v[lo] : NULL;
}

/* Merges the stored rows of g into its sums; g->kept from the day's row. */
static int merge_stored(struct writer *w, struct day_group *g, bool cpus) {
        sql_stmt *get = cpus ? w->get : w->get_all;
        int rc, r = 0;
        sql_bind_int64(get, 1, w->run);
        sql_bind_int64(get, 2, g->v[0].day);
        sql_bind_text(get, 3, g->v[0].scenario);
        g->kept = false;
        while (r >= 0 && (rc = sql_step(get)) == SQL_ROW) {
                bool no_cpu = sql_column_null(get, 0);
                int64_t cpu = sql_column_int64(get, 0);
                /* Each row of hist_days' side carries the day's cpu_hists. */
                if (no_cpu || cpu >= 0)
                        g->kept = sql_column_int64(get, 1) != 0;
                struct farm_day_hist *x = no_cpu ? NULL : group_find(g, cpu);
                if (!x || x->bad)
                        continue;
                if (sql_column_null(get, 3)) {
                        x->bad = true;
                        continue;
                }
                size_t len;
                const void *blob = sql_column_blob(get, 3, &len);
                const char *why = NULL;
                r = farm_acc_add(&x->acc, (uint32_t) sql_column_int64(get, 2), blob, len,
                                 (uint64_t) sql_column_int64(get, 4),
                                 (uint64_t) sql_column_int64(get, 5),
                                 (uint64_t) sql_column_int64(get, 6), sql_column_int64(get, 7),
                                 (uint64_t) sql_column_int64(get, 8), &why);
                if (r < 0 && r != -ENOMEM) {
                        x->bad = true;
                        r = 0;
                }
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(w->c, rc, "cannot read a day's histograms", w->err);
        sql_reset(get);
        return r;
}

/* Binds x as the row of a statement's parameters k + 1 to k + 10 (k + 11: its CPU, when
 * it has one); *blob: its encoded histogram, freed by the caller after the step. */
static int bind_row(sql_stmt *put, int k, int64_t run, struct farm_day_hist *x, uint8_t **blob) {
        size_t len = 0;
        if (x->acc.samples >= INT64_MAX)
                x->bad = true;
        if (!x->bad && x->acc.h.counts &&
            hist_encode(x->acc.h.limit_us, x->acc.h.counts, blob, &len) < 0)
                return -ENOMEM;
        sql_bind_int64(put, k + 1, run);
        sql_bind_int64(put, k + 2, x->day);
        sql_bind_text(put, k + 3, x->scenario);
        sql_bind_int64(put, k + 4, (int64_t) MIN(x->acc.samples, (uint64_t) INT64_MAX));
        sql_bind_int64(put, k + 5, (int64_t) x->acc.min_ns);
        sql_bind_int64(put, k + 6, (int64_t) x->acc.max_ns);
        sql_bind_int64(put, k + 7, x->acc.max_time_ns);
        sql_bind_int64(put, k + 8, (int64_t) MIN(x->acc.violations, (uint64_t) INT64_MAX));
        sql_bind_int64(put, k + 9, x->acc.h.counts ? x->acc.h.limit_us : 0);
        if (!x->bad)
                /* An empty histogram is a zero-length blob, not NULL. */
                sql_bind_blob(put, k + 10, *blob ? (const void *) *blob : "", len);
        if (x->cpu >= 0)
                sql_bind_int64(put, k + 11, x->cpu);
        return 0;
}

static int put_all(struct writer *w, struct farm_day_hist *x) {
        _cleanup_free_ uint8_t *blob = NULL;
        int r = bind_row(w->put_all, 0, w->run, x, &blob);
        if (r < 0)
                return r;
        return farm_step_done(w->put_all, "cannot store a day's histogram", w->err);
}

/* The rows of each CPU, up to PUT_ROWS_MAX in one statement (one for the 8 CPUs of a machine:
 * a statement each would cost PostgreSQL a tenth more CPU per upload). */
#define PUT_ROWS_MAX 64
#define PUT_ROW_PARAMS 11

static int put_cpus(struct writer *w, struct farm_day_hist *v, size_t n) {
        /* The statement's head and tail take about 450 bytes, a row 24. */
        char sql[1024 + PUT_ROWS_MAX * 24];
        uint8_t *blobs[PUT_ROWS_MAX] = {};
        sql_stmt *st = NULL;
        int len = snprintf(sql, sizeof(sql),
                           "INSERT INTO hist_days (run, day, scenario, samples, min_ns, max_ns, "
                           "max_time_ns, violations, hist_limit_us, hist, cpu) VALUES ");
        for (size_t i = 0; i < n; i++)
                len += snprintf(sql + len, sizeof(sql) - (size_t) len, "%s(?,?,?,?,?,?,?,?,?,?,?)",
                                i ? "," : "");
        int tail = snprintf(sql + len, sizeof(sql) - (size_t) len,
                            " ON CONFLICT (run, day, scenario, cpu) DO UPDATE SET %s", SQL_SET_ROW);
        if (tail < 0 || (size_t) len + (size_t) tail >= sizeof(sql))
                return farm_failf(farm_of(w->c), -E2BIG, w->err, "statement of %zu rows too long",
                                  n);
        int r = sql_prepare_text(w->c, sql, &st);
        if (r < 0)
                return farm_fail(w->c, r, "cannot prepare query", w->err);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = bind_row(st, (int) (i * PUT_ROW_PARAMS), w->run, &v[i], &blobs[i]);
        if (r >= 0)
                r = farm_step_done(st, "cannot store a day's histograms", w->err);
        sql_reset(st);
        for (size_t i = 0; i < n; i++)
                free(blobs[i]);
        return r;
}

/* A day whose CPU rows cannot be kept any longer: they are dropped, and its readers merge its
 * intervals from now on. */
static int unkeep_day(struct writer *w, int64_t day) {
        int r;
        sql_bind_int64(w->unkeep, 1, w->run);
        sql_bind_int64(w->unkeep, 2, day);
        sql_bind_int64(w->drop, 1, w->run);
        sql_bind_int64(w->drop, 2, day);
        if ((r = farm_step_done(w->unkeep, "cannot mark a day's histograms", w->err)) >= 0)
                r = farm_step_done(w->drop, "cannot drop a day's histograms", w->err);
        return r;
}

static int write_group(struct writer *w, struct day_group *g) {
        bool cpus = g->v[g->n - 1].cpu >= 0, bad = false;
        int r = writer_prepare(w, cpus);
        if (r >= 0)
                r = merge_stored(w, g, cpus);
        for (size_t i = 0; r >= 0 && i < g->n; i++) {
                struct farm_day_hist *x = &g->v[i];
                if (x->cpu < 0)
                        r = put_all(w, x);
                else
                        bad |= x->bad || x->acc.samples >= INT64_MAX;
        }
        if (r < 0 || !cpus || !g->kept)
                return r;
        if (bad)
                return unkeep_day(w, g->v[0].day);
        size_t first = g->v[0].cpu < 0; /* the row of all CPUs comes first */
        for (size_t i = first; r >= 0 && i < g->n; i += PUT_ROWS_MAX)
                r = put_cpus(w, &g->v[i], MIN(g->n - i, (size_t) PUT_ROWS_MAX));
        return r;
}

int farm_day_hists_write(sql_conn *c, int64_t run, struct farm_day_hists *d, char *err) {
        struct writer w = { .c = c, .run = run, .err = err };
        int r = 0;
        if (d->n == 0)
                return 0;
        qsort(d->v, d->n, sizeof(*d->v), hist_cmp);
        for (size_t i = 0, j; r >= 0 && i < d->n; i = j) {
                for (j = i + 1; j < d->n && d->v[j].day == d->v[i].day &&
                                strcmp(d->v[j].scenario, d->v[i].scenario) == 0;
                     j++)
                        ;
                r = write_group(&w, &(struct day_group){ .v = &d->v[i], .n = j - i });
        }
        writer_done(&w);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging a day's histograms");
        farm_day_hists_done(d);
        return r;
}

/* ---- migrations 9 -> 10 and 11 -> 12 --------------------------------------------------------- */

static const char *const sql_day_rows[] =
        SQL_BY_CPUS("SELECT coalesce(i.scenario, ''), c.hist_limit_us, c.hist, c.samples, "
                    "c.min_ns, c.max_ns, c.max_time_ns, c.violations, c.cpu FROM intervals i ",
                    " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3");

/* One run's day merged from its intervals (of all CPUs, or of each) and written. */
static int migrate_day(sql_conn *c, int64_t run, int64_t day, bool cpus, char *err) {
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
                        &d, day, sql_column_text(st, 0) ?: "", cpus ? sql_column_int64(st, 8) : -1,
                        (uint32_t) sql_column_int64(st, 1), blob, len,
                        (uint64_t) sql_column_int64(st, 3), (uint64_t) sql_column_int64(st, 4),
                        (uint64_t) sql_column_int64(st, 5), sql_column_int64(st, 6),
                        (uint64_t) sql_column_int64(st, 7));
                if (r >= 0 && farm_day_hists_full(&d))
                        r = farm_day_hists_write(c, run, &d, err);
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

/* Merges the days that sql lists (run, day) for a migration to version. */
static int migrate_days(sql_conn *c, const char *sql, int version, bool cpus, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct {
                int64_t run, day;
        } *days = NULL;
        size_t n = 0;
        int r = farm_prepare(c, sql, &st, err), rc;
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
                log_info("Schema %d: merging the histograms of %zu stored run-days once", version,
                         n);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = migrate_day(c, days[i].run, days[i].day, cpus, err);
        if (r >= 0 && n > 0)
                log_info("Schema %d: %zu run-days merged in %.1f s", version, n,
                         (double) (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
        free(days);
        return r;
}

int farm_migrate_10(sql_conn *c, char *err) {
        return migrate_days(c, "SELECT run, day FROM run_days ORDER BY run, day", 10, false, err);
}

int farm_migrate_12(sql_conn *c, char *err) {
        /* The days the histogram cache held are whole (a late interval dropped them). */
        return migrate_days(c,
                            "SELECT d.run, d.day FROM run_days d WHERE NOT EXISTS (SELECT 1 "
                            "FROM hist_days h WHERE h.run = d.run AND h.day = d.day) "
                            "ORDER BY d.run, d.day",
                            12, true, err);
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
