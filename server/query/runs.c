/* SPDX-License-Identifier: MIT */
/* A machine's runs as the runs query lists them (struct farm_run): what the machine stamped
 * of each, its data from the day rollups, how it ended and when the server received it. */
#include <errno.h>

#include "macro.h"
#include "machines.h"
#include "query-internal.h"

/* A run from a row of farm_machine_runs()'s SELECT. */
static int run_row(sql_stmt *st, void *ret) {
        struct farm_run *r = ret;
        bool ok = true;
        *r = (struct farm_run){
                .id = query_col_int(st, 0),
                .boot_id = farm_strdup_or_null(sql_column_text(st, 1), &ok),
                .kernel_release = farm_strdup_or_null(sql_column_text(st, 2), &ok),
                .kernel_version = farm_strdup_or_null(sql_column_text(st, 3), &ok),
                .preempt_model = farm_strdup_or_null(sql_column_text(st, 4), &ok),
                .daemon_version = farm_strdup_or_null(sql_column_text(st, 5), &ok),
                .start_ns = query_col_int(st, 6),
                .interval_ns = query_col_int(st, 7),
                .threshold_ns = query_col_int(st, 8),
                .has_data = !sql_column_null(st, 9),
                .first_data_ns = query_col_int(st, 9),
                .last_data_ns = query_col_int(st, 10),
                .intervals = sql_column_int64(st, 11),
                .worst_latency_ns = query_col_int(st, 12),
                .end = { .unclean = !sql_column_null(st, 13),
                         .time_ns = query_col_int(st, 13),
                         .message = farm_strdup_or_null(sql_column_text(st, 14), &ok) },
                .first_report_ns = query_col_int(st, 15),
                .last_received_ns = query_col_int(st, 16),
                .clock_ahead_ns = query_col_int(st, 17),
                .release = farm_strdup_or_null(sql_column_text(st, 18), &ok),
        };
        if (!ok) {
                farm_run_done(r);
                return -ENOMEM;
        }
        return 0;
}

#define RUNS_SKEW FARM_SQL_RUN_SKEW("q.")
#define RUNS_START FARM_SQL_RUN_START("r.", "?4")

int farm_machine_runs(farm_db *db, const char *id, const struct farm_page *page,
                      const struct farm_clock_view *cv, struct farm_run_page *ret,
                      char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        *ret = (struct farm_run_page){};
        int r = query_machine_known(c, id, err);
        if (r < 0)
                return r;
        /* The day rollups give the first and last data, the intervals and the worst case of a
         * run from a few rows per day instead of its intervals: the machine's own (the whole
         * farm's, grouped on every call, cost 17 ms a call on PostgreSQL with 4,000 runs). */
        if ((r = farm_prepare(c, "SELECT count(*) FROM runs WHERE machine_id = ?", &cnt, err)) <
                    0 ||
            (r = farm_prepare(c,
                              "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                              "r.preempt_model, r.daemon_version, r.start_ns, r.interval_ns, "
                              "r.threshold_ns, d.first_ns, d.last_ns, d.intervals, d.max_ns, "
                              "u.time_ns, u.message, r.first_report_ns, d.received_ns, "
                              "CASE WHEN r.skew_ns > ?4 THEN r.skew_ns END, r.release "
                              /* How far its data was stamped after it arrived, when beyond ?4. */
                              "FROM (SELECT q.*, " RUNS_SKEW " AS skew_ns FROM runs q "
                              "  WHERE q.machine_id = ?1) r "
                              "LEFT JOIN (SELECT run, min(first_start_ns) AS first_ns, "
                              "  max(last_end_ns) AS last_ns, sum(intervals) AS intervals, "
                              "  max(max_ns) AS max_ns, max(max_received_ns) AS received_ns "
                              "  FROM run_days WHERE run IN (SELECT id FROM runs WHERE "
                              "  machine_id = ?1) GROUP BY run) d ON d.run = r.id "
                              /* The run's first unclean end, if any. */
                              "LEFT JOIN events u ON u.id = (SELECT e.id FROM events e WHERE "
                              "  e.run = r.id AND e.type = 'unclean_end' ORDER BY e.time_ns, e.id "
                              "  LIMIT 1) "
                              "ORDER BY " RUNS_START " DESC, r.run_id DESC LIMIT ?2 OFFSET ?3",
                              &st, err)) < 0)
                return r;
        sql_bind_text(cnt, 1, id);
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, (int64_t) page->limit);
        sql_bind_int64(st, 3, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 4, cv->clock_tolerance_ns);
        r = query_page_rows(c, cnt, st, sizeof(*ret->v), run_row, (void **) &ret->v, &ret->n,
                            &ret->total, "cannot count runs", "cannot read runs", err);
        if (r < 0)
                farm_run_page_done(ret);
        return r;
}
