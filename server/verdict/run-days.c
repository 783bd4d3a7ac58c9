/* SPDX-License-Identifier: MIT */
/* The day rollups of every run of the release and their scenarios, read once per verdict (two
 * statements, not two per run: on PostgreSQL each is a round trip, and a farm's release is
 * hundreds of runs); each run's judgement takes its slice (machine.c). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "verdict-internal.h"

static int load_days(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT d.run, d.day, d.first_start_ns, d.last_end_ns, d.max_gap_ns, "
                      "d.gaps_known, d.counted_ns, d.min_ratio_pm, d.max_skew_ns, "
                      "d.max_received_ns, d.max_missing_ns, d.intervals FROM run_days d "
                      "JOIN runs r ON r.id = d.run WHERE r.release = ?1 AND "
                      "d.first_start_ns < ?2 ORDER BY d.run, d.day",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->at);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &v->days, v->ndays, sizeof(*v->days))) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                v->days[v->ndays++] = (struct vday){
                        .run = sql_column_int64(st, 0),
                        .day = sql_column_int64(st, 1),
                        .first = sql_column_int64(st, 2),
                        .last = sql_column_int64(st, 3),
                        .max_gap = sql_column_int64(st, 4),
                        .gaps_known = sql_column_int(st, 5) != 0,
                        .counted = sql_column_int64(st, 6),
                        .min_ratio = sql_column_int64(st, 7),
                        .max_skew = sql_column_int64(st, 8),
                        .max_received = sql_column_int64(st, 9),
                        .max_missing = sql_column_int64(st, 10),
                        .intervals = sql_column_int64(st, 11),
                };
        }
        sql_reset(st);
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the day rollups");
}

static int load_scenarios(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT s.run, s.day, s.scenario, s.counted_ns, coalesce(s.gens_all, ''), "
                      "s.down_ns FROM run_day_scenarios s JOIN runs r ON r.id = s.run "
                      "WHERE r.release = ?1 ORDER BY s.run, s.day, s.scenario",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &v->dayscens, v->ndayscens, sizeof(*v->dayscens))) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                struct vdayscen *x = &v->dayscens[v->ndayscens++];
                *x = (struct vdayscen){ .run = sql_column_int64(st, 0),
                                        .day = sql_column_int64(st, 1),
                                        .scenario = strdup(sql_column_text(st, 2) ?: ""),
                                        .counted = sql_column_int64(st, 3),
                                        .gens = strdup(sql_column_text(st, 4) ?: ""),
                                        .down = sql_column_int64(st, 5) };
                if (!x->scenario || !x->gens) {
                        sql_reset(st);
                        return -ENOMEM;
                }
        }
        sql_reset(st);
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the days' scenarios");
}

_Static_assert(offsetof(struct vday, run) == 0 && offsetof(struct vdayscen, run) == 0,
               "first_of_run() reads each row's run first");

/* The first of n rows of size bytes, each starting with its run's row id, sorted by it, whose
 * run is at least run. */
static size_t first_of_run(const void *rows, size_t n, size_t size, int64_t run) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int64_t x;
                memcpy(&x, (const char *) rows + mid * size, sizeof(x));
                if (x < run)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

int vrun_days(struct vctx *v, int64_t run, struct vdays *ret_days, struct vdayscens *ret_scens) {
        int r;
        if (!v->days_loaded) {
                if ((r = load_days(v)) < 0 || (r = load_scenarios(v)) < 0)
                        return r;
                v->days_loaded = true;
        }
        size_t a = first_of_run(v->days, v->ndays, sizeof(*v->days), run), b = a;
        while (b < v->ndays && v->days[b].run == run)
                b++;
        *ret_days = (struct vdays){ b > a ? v->days + a : NULL, b - a };
        a = first_of_run(v->dayscens, v->ndayscens, sizeof(*v->dayscens), run);
        for (b = a; b < v->ndayscens && v->dayscens[b].run == run;)
                b++;
        *ret_scens = (struct vdayscens){ b > a ? v->dayscens + a : NULL, b - a };
        return 0;
}

void vrun_days_done(struct vctx *v) {
        for (size_t i = 0; i < v->ndayscens; i++) {
                free(v->dayscens[i].scenario);
                free(v->dayscens[i].gens);
        }
        free(v->dayscens);
        free(v->days);
}
