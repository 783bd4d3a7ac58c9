/* SPDX-License-Identifier: MIT */
/* The days of a window and the reading of their rows (day-rows.h). */
#include <errno.h>
#include <stdlib.h>

#include "day-hists.h"
#include "day-rows.h"
#include "db-internal.h"
#include "grow.h"
#include "macro.h"
#include "merge.h"

int day_refs_add(struct day_refs *d, const struct day_ref *x) {
        if (!farm_grow((void **) &d->v, d->n, sizeof(*d->v)))
                return -ENOMEM;
        d->v[d->n++] = *x;
        return 0;
}

/* Calls fn with the row of st whose columns from k are scenario, (with_cpu) the CPU,
 * hist_limit_us, hist, samples, min_ns, max_ns, max_time_ns and violations. */
static int row_call(sql_conn *c, sql_stmt *st, int k, bool with_cpu, const struct day_ref *ref,
                    const char *what, day_row_fn fn, void *userdata, char *err) {
        const char *why = NULL;
        int64_t cpu = with_cpu ? sql_column_int64(st, k + 1) : -1;
        int j = k + (with_cpu ? 1 : 0);
        size_t blob_len;
        const void *blob = sql_column_blob(st, 2 + j, &blob_len);
        int r = fn(userdata, ref, sql_column_text(st, k) ?: "", cpu,
                   (uint32_t) sql_column_int64(st, 1 + j), blob, blob_len,
                   (uint64_t) sql_column_int64(st, 3 + j), (uint64_t) sql_column_int64(st, 4 + j),
                   (uint64_t) sql_column_int64(st, 5 + j), sql_column_int64(st, 6 + j),
                   (uint64_t) sql_column_int64(st, 7 + j), &why);
        if (r >= 0)
                return 0;
        if (with_cpu)
                return farm_failf(farm_of(c), r, err,
                                  "%s histogram of run %lld, day %lld, CPU %lld: %s", what,
                                  (long long) ref->run, (long long) ref->day, (long long) cpu,
                                  why ?: "no memory");
        return farm_failf(farm_of(c), r, err, "%s histogram of run %lld, day %lld: %s", what,
                          (long long) ref->run, (long long) ref->day, why ?: "no memory");
}

int day_rows_each(sql_conn *c, sql_stmt *st, bool with_cpu, const struct day_ref *ref,
                  const char *what, day_row_fn fn, void *userdata, char *err) {
        int r = 0, rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW)
                r = row_call(c, st, 0, with_cpu, ref, what, fn, userdata, err);
        if (r < 0)
                return r;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the histograms", err);
        return 0;
}

static const char *const sql_window_cpus[] =
        SQL_BY_CPUS("SELECT coalesce(i.scenario, ''), c.cpu, c.hist_limit_us, c.hist, "
                    "c.samples, c.min_ns, c.max_ns, c.max_time_ns, c.violations FROM intervals i ",
                    " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3 "
                    "AND (i.scenario = ?4 OR ?4 IS NULL) AND (c.cpu = ?5 OR ?5 IS NULL) "
                    "AND (coalesce(i.received_ns, 0) <= ?6 OR ?6 IS NULL) "
                    "AND (c.cpu >= ?7 OR ?7 IS NULL) AND (c.cpu <= ?8 OR ?8 IS NULL)");

/* Reads one run and day of the window [from, to): when the day is whole, from run_day_hists
 * (all CPUs) or hist_days (each CPU; when the day's run_days.cpu_hists says they are kept, in
 * this read transaction), from its intervals otherwise.  Reader lock held. */
static int read_day(sql_conn *c, const struct day_ref *ref, int64_t from, int64_t to,
                    const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                    void *userdata, char *err) {
        _cleanup_reset_ sql_stmt *chk = NULL, *st = NULL;
        bool cached = false;
        int r, rc;

        if (ref->whole && ref->all_cpus && cpu < 0 && !cpu_range &&
            (r = farm_day_hists_read(c, ref, scenario, fn, userdata, err)) != 0)
                return r < 0 ? r : 0;
        if (ref->whole) {
                if ((r = farm_prepare(c, "SELECT cpu_hists FROM run_days WHERE run = ? AND day = ?",
                                      &chk, err)) < 0)
                        return r;
                sql_bind_int64(chk, 1, ref->run);
                sql_bind_int64(chk, 2, ref->day);
                rc = sql_step(chk);
                if (rc != SQL_ROW && rc != SQL_DONE)
                        return farm_fail(c, rc, "cannot read the day's histograms", err);
                cached = rc == SQL_ROW && sql_column_int64(chk, 0) != 0;
        }
        if (cached)
                r = farm_prepare(c,
                                 "SELECT scenario, cpu, hist_limit_us, hist, samples, min_ns, "
                                 "max_ns, max_time_ns, violations FROM hist_days "
                                 "WHERE run = ?1 AND day = ?2 AND (scenario = ?4 OR ?4 IS NULL) "
                                 "AND (cpu = ?5 OR ?5 IS NULL) AND (cpu >= ?7 OR ?7 IS NULL) "
                                 "AND (cpu <= ?8 OR ?8 IS NULL)",
                                 &st, err);
        else
                r = farm_prepare(c, sql_window_cpus[sql_dialect(c)], &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, ref->run);
        if (cached)
                sql_bind_int64(st, 2, ref->day);
        else {
                sql_bind_int64(st, 2, MAX(from, ref->day * FARM_DAY_NS));
                sql_bind_int64(st, 3, MIN(to, (ref->day + 1) * FARM_DAY_NS));
        }
        if (scenario)
                sql_bind_text(st, 4, scenario);
        if (cpu >= 0)
                sql_bind_int64(st, 5, cpu);
        if (!cached && ref->known_ns != INT64_MAX && ref->known_ns != 0)
                sql_bind_int64(st, 6, ref->known_ns);
        if (cpu_range && cpu_range[0] > 0)
                sql_bind_int64(st, 7, cpu_range[0]);
        if (cpu_range && cpu_range[1] < FARM_CPU_MAX)
                sql_bind_int64(st, 8, cpu_range[1]);
        return day_rows_each(c, st, true, ref, cached ? "kept" : "stored", fn, userdata, err);
}

/* The whole days lo..hi of run v[0].run among v[0..n) read for all CPUs (as
 * farm_day_hists_read() reads one), inside the caller's read transaction: those whose every
 * scenario's histogram is kept in run_day_hists, their rows given to each ref of their day;
 * done[k] is set for the refs read. */
static int kept_days_in(sql_conn *c, const struct day_ref *v, size_t n, int64_t lo, int64_t hi,
                        bool *done, day_row_fn fn, void *userdata, char *err) {
        _cleanup_reset_ sql_stmt *days = NULL, *rows = NULL;
        int r, rc;
        if ((r = farm_prepare(c,
                              "SELECT day FROM run_day_hists WHERE run = ?1 AND day >= ?2 AND "
                              "day <= ?3 GROUP BY day HAVING count(*) = count(hist)",
                              &days, err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT day, scenario, hist_limit_us, hist, samples, min_ns, "
                              "max_ns, max_time_ns, violations FROM run_day_hists WHERE run = ?1 "
                              "AND day >= ?2 AND day <= ?3",
                              &rows, err)) < 0)
                return r;
        sql_stmt *st[] = { days, rows };
        for (size_t i = 0; i < ELEMENTSOF(st); i++) {
                sql_bind_int64(st[i], 1, v[0].run);
                sql_bind_int64(st[i], 2, lo);
                sql_bind_int64(st[i], 3, hi);
        }
        while ((rc = sql_step(days)) == SQL_ROW)
                for (size_t k = 0; k < n; k++)
                        if (v[k].whole && v[k].all_cpus && v[k].day == sql_column_int64(days, 0))
                                done[k] = true;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the days' histograms", err);
        while (r >= 0 && (rc = sql_step(rows)) == SQL_ROW)
                for (size_t k = 0; r >= 0 && k < n; k++)
                        if (done[k] && v[k].day == sql_column_int64(rows, 0))
                                r = row_call(c, rows, 1, false, &v[k], "day", fn, userdata, err);
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the histograms", err);
        return r;
}

/* The same for the refs v[0..n) of one run, in a read transaction of its own: a farm's month
 * is then two statements a run, not four a day. */
static int read_kept_days(farm_db *db, const struct day_ref *v, size_t n, bool *done, day_row_fn fn,
                          void *userdata, char *err) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t k = 0; k < n; k++)
                if (v[k].whole && v[k].all_cpus) {
                        lo = MIN(lo, v[k].day);
                        hi = MAX(hi, v[k].day);
                }
        if (lo > hi)
                return 0;
        _cleanup_release_ sql_conn *c = farm_reader(db);
        int r = sql_begin(c, SQL_TXN_SNAPSHOT);
        if (r < 0)
                return farm_fail(c, r, "cannot begin reading", err);
        r = kept_days_in(c, v, n, lo, hi, done, fn, userdata, err);
        sql_rollback(c);
        return r;
}

/* Reads every ref, each in its own read transaction (a consistent snapshot of its day), taking
 * the reader's lock for one day at a time: the token checks of uploads share that connection.
 * Whole days read for all CPUs go a run at a time (read_kept_days()): refs of one run next to
 * each other read together. */
int day_refs_read(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                  const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                  void *userdata, char *err) {
        bool *done = NULL;
        int r = 0;
        if (cpu < 0 && !cpu_range && !scenario && refs->n) {
                if (!(done = calloc(refs->n, sizeof(*done))))
                        return -ENOMEM;
                for (size_t i = 0, j; r >= 0 && i < refs->n; i = j) {
                        for (j = i + 1; j < refs->n && refs->v[j].run == refs->v[i].run;)
                                j++;
                        r = read_kept_days(db, refs->v + i, j - i, done + i, fn, userdata, err);
                }
        }
        for (size_t i = 0; r >= 0 && i < refs->n; i++) {
                if (done && done[i])
                        continue;
                _cleanup_release_ sql_conn *c = farm_reader(db);
                if ((r = sql_begin(c, SQL_TXN_SNAPSHOT)) < 0) {
                        free(done);
                        return farm_fail(c, r, "cannot begin reading", err);
                }
                r = read_day(c, &refs->v[i], from, to, scenario, cpu, cpu_range, fn, userdata, err);
                sql_rollback(c);
        }
        free(done);
        return r;
}
