/* SPDX-License-Identifier: MIT */
/* The day rollups of one upload, folded (rollups.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "grow.h"
#include "rollups.h"

int64_t farm_rollup_day(int64_t ns) {
        return ns / FARM_DAY_NS;
}

static const char *scenario_of(const struct summary_interval *iv) {
        return iv->scenario ?: "";
}

bool farm_rollup_joins(const struct farm_rollup *r, int64_t run,
                       const struct summary_interval *iv) {
        return r->open && r->run == run && r->day == farm_rollup_day(iv->start_ns) &&
               strcmp(r->scenario, scenario_of(iv)) == 0 && iv->start_ns >= r->last_end_ns;
}

int farm_rollup_add(struct farm_rollup *r, int64_t run, const struct summary_interval *iv,
                    const struct farm_rollup_facts *f, const char *gens) {
        int64_t start = iv->start_ns, end = start + (int64_t) iv->length_ns;
        bool joins = farm_rollup_joins(r, run, iv);
        if (!joins && r->open)
                return -EBUSY; /* the fold is to be written first */
        if (!joins)
                r->nspans = 0;
        if (!farm_grow((void **) &r->spans, r->nspans, sizeof(*r->spans)))
                return -ENOMEM;
        r->spans[r->nspans++] = (struct farm_rollup_span){ start, end };
        if (!joins) {
                /* The first: as the statement of one interval inserts its rows. */
                r->open = true;
                r->run = run;
                r->day = farm_rollup_day(start);
                r->scenario = scenario_of(iv);
                r->n = 1;
                r->covered_ns = (int64_t) iv->length_ns;
                r->first_start_ns = start;
                r->last_end_ns = end;
                r->max_gap_ns = 0;
                r->max_ns = f->max_ns;
                r->counted_ns = f->counted_ns;
                r->min_ratio_pm = f->min_ratio_pm;
                r->max_missing_ns = f->max_missing_ns;
                r->down_ns = f->down_ns;
        } else {
                r->n++;
                r->covered_ns += (int64_t) iv->length_ns;
                r->max_gap_ns = MAX(r->max_gap_ns, start - r->last_end_ns);
                r->last_end_ns = MAX(r->last_end_ns, end);
                r->max_ns = MAX(r->max_ns, f->max_ns);
                r->counted_ns += f->counted_ns;
                r->min_ratio_pm = MIN(r->min_ratio_pm, f->min_ratio_pm);
                r->max_missing_ns = MAX(r->max_missing_ns, f->max_missing_ns);
                r->down_ns += f->down_ns;
        }
        snprintf(r->gens, sizeof(r->gens), "%s", gens);
        return 0;
}

/* run_days, parameters 1 to 13 (bind_days()): the first interval's start (5) and the fold's
 * inner largest gap (7) stand for its order; applied only when the row ends by that start. */
#define SQL_DAYS                                                                               \
        "INSERT INTO run_days (run, day, intervals, covered_ns, first_start_ns, last_end_ns, " \
        "max_gap_ns, gaps_known, max_ns, counted_ns, min_ratio_pm, max_skew_ns, "              \
        "max_received_ns, max_missing_ns, cpu_hists) "                                         \
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?10, ?11, ?12, ?13, 1) "               \
        "ON CONFLICT (run, day) DO UPDATE SET "                                                \
        "intervals = run_days.intervals + ?3, "                                                \
        "covered_ns = run_days.covered_ns + ?4, "                                              \
        "max_gap_ns = greatest(run_days.max_gap_ns, ?5 - run_days.last_end_ns, ?7), "          \
        "gaps_known = CASE WHEN run_days.gaps_known <> 0 THEN 1 ELSE 0 END, "                  \
        "first_start_ns = least(run_days.first_start_ns, ?5), "                                \
        "last_end_ns = greatest(run_days.last_end_ns, ?6), "                                   \
        "max_ns = greatest(run_days.max_ns, ?8), "                                             \
        "counted_ns = run_days.counted_ns + ?9, "                                              \
        "min_ratio_pm = least(run_days.min_ratio_pm, ?10), "                                   \
        "max_skew_ns = greatest(run_days.max_skew_ns, ?11), "                                  \
        "max_received_ns = greatest(run_days.max_received_ns, ?12), "                          \
        "max_missing_ns = greatest(run_days.max_missing_ns, ?13) "                             \
        "WHERE ?5 >= run_days.last_end_ns RETURNING 1"
/* run_day_scenarios, parameters 1, 2, 4, 9 and 14 to 16 (bind_scenarios()). */
#define SQL_SCENARIOS                                                                 \
        "INSERT INTO run_day_scenarios (run, day, scenario, covered_ns, counted_ns, " \
        "gens_all, down_ns) VALUES (?1, ?2, ?14, ?4, ?9, ?15, ?16) "                  \
        "ON CONFLICT (run, day, scenario) DO UPDATE SET "                             \
        "covered_ns = run_day_scenarios.covered_ns + ?4, "                            \
        "counted_ns = run_day_scenarios.counted_ns + ?9, gens_all = ?15, "            \
        "down_ns = run_day_scenarios.down_ns + ?16"

static void bind_days(sql_stmt *st, const struct farm_rollup *r, int64_t now) {
        const int64_t v[] = { r->run,
                              r->day,
                              r->n,
                              r->covered_ns,
                              r->first_start_ns,
                              r->last_end_ns,
                              r->max_gap_ns,
                              r->max_ns,
                              r->counted_ns,
                              r->min_ratio_pm,
                              r->last_end_ns - now,
                              now,
                              r->max_missing_ns };
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                sql_bind_int64(st, (int) i + 1, v[i]);
}

static void bind_scenarios(sql_stmt *st, const struct farm_rollup *r) {
        sql_bind_int64(st, 1, r->run);
        sql_bind_int64(st, 2, r->day);
        sql_bind_int64(st, 4, r->covered_ns);
        sql_bind_int64(st, 9, r->counted_ns);
        sql_bind_text(st, 14, r->scenario);
        sql_bind_text(st, 15, r->gens);
        sql_bind_int64(st, 16, r->down_ns);
}

/* The day's row ended after the fold's first start: its gap columns follow the fold's
 * intervals one by one from the stored row, as each interval's own statement would. */
static int apply_late(sql_conn *c, const struct farm_rollup *r, int64_t now, char *err) {
        _cleanup_reset_ sql_stmt *get = NULL, *upd = NULL;
        int r2 = farm_prepare(c,
                              "SELECT last_end_ns, max_gap_ns, gaps_known FROM run_days "
                              "WHERE run = ? AND day = ?",
                              &get, err);
        if (r2 < 0)
                return r2;
        sql_bind_int64(get, 1, r->run);
        sql_bind_int64(get, 2, r->day);
        int rc = sql_step(get);
        if (rc != SQL_ROW)
                return farm_fail(c, rc == SQL_DONE ? -EIO : rc, "cannot read the day's coverage",
                                 err);
        int64_t last = sql_column_int64(get, 0), gap = sql_column_int64(get, 1);
        bool known = sql_column_int64(get, 2) != 0;
        for (size_t i = 0; i < r->nspans; i++) {
                if (r->spans[i].start >= last)
                        gap = MAX(gap, r->spans[i].start - last);
                else
                        known = false;
                last = MAX(last, r->spans[i].end);
        }
        r2 = farm_prepare(c,
                          "UPDATE run_days SET intervals = intervals + ?3, "
                          "covered_ns = covered_ns + ?4, "
                          "first_start_ns = least(first_start_ns, ?5), last_end_ns = ?6, "
                          "max_gap_ns = ?7, gaps_known = ?14, max_ns = greatest(max_ns, ?8), "
                          "counted_ns = counted_ns + ?9, "
                          "min_ratio_pm = least(min_ratio_pm, ?10), "
                          "max_skew_ns = greatest(max_skew_ns, ?11), "
                          "max_received_ns = greatest(max_received_ns, ?12), "
                          "max_missing_ns = greatest(max_missing_ns, ?13) "
                          "WHERE run = ?1 AND day = ?2",
                          &upd, err);
        if (r2 < 0)
                return r2;
        bind_days(upd, r, now);
        sql_bind_int64(upd, 6, last);
        sql_bind_int64(upd, 7, gap);
        sql_bind_int64(upd, 14, known);
        return farm_step_done(upd, "cannot update the day's coverage", err);
}

int farm_rollup_flush(sql_conn *c, bool pg, struct farm_rollup *r, int64_t now_ns, char *err) {
        if (!r->open)
                return 0;
        _cleanup_reset_ sql_stmt *days = NULL, *scen = NULL;
        bool applied;
        int rc, ret;
        if (pg) {
                /* One statement: both rows, and whether the day's was updated. */
                ret = farm_prepare(c,
                                   "WITH d AS (" SQL_DAYS ") " SQL_SCENARIOS
                                   " RETURNING (SELECT count(*) FROM d)",
                                   &days, err);
                if (ret < 0)
                        return ret;
                bind_days(days, r, now_ns);
                bind_scenarios(days, r);
                if ((rc = sql_step(days)) != SQL_ROW)
                        return farm_fail(c, rc == SQL_DONE ? -EIO : rc,
                                         "cannot update the day's rollups", err);
                applied = sql_column_int64(days, 0) > 0;
        } else {
                if ((ret = farm_prepare(c, SQL_DAYS, &days, err)) < 0 ||
                    (ret = farm_prepare(c, SQL_SCENARIOS, &scen, err)) < 0)
                        return ret;
                bind_days(days, r, now_ns);
                rc = sql_step(days);
                if (rc != SQL_ROW && rc != SQL_DONE)
                        return farm_fail(c, rc, "cannot update the day's coverage", err);
                applied = rc == SQL_ROW;
                bind_scenarios(scen, r);
                if ((ret = farm_step_done(scen, "cannot update the day's scenarios", err)) < 0)
                        return ret;
        }
        if (!applied && (ret = apply_late(c, r, now_ns, err)) < 0)
                return ret;
        r->open = false;
        r->nspans = 0;
        return 0;
}

void farm_rollup_done(struct farm_rollup *r) {
        free(r->spans);
        *r = (struct farm_rollup){};
}
