/* SPDX-License-Identifier: MIT */
/* The histogram query: a machine's histograms of a window merged per CPU (from the per-day
 * cache where it can), for GET .../histogram (encoded in server/api/encode-histogram.c) and the
 * dashboard's histogram plot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "macro.h"
#include "day-rows.h"
#include "merge.h"
#include "histogram.h"
#include "query-internal.h"

/* ---- GET /api/v1/machines/{id}/histogram ------------------------------------------------ */

/* The runs and days of the machine that hold data in [from, to), and which of them are
 * cached and whole (read from their kept rows; intervals are at least a nanosecond long, so
 * one that ends by to starts before it); reader lock held. */
static int window_refs(sql_conn *c, const char *id, int64_t from, int64_t to, int64_t now,
                       struct day_refs *refs, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT d.run, d.day, d.cpu_hists, d.first_start_ns, "
                             "d.last_end_ns FROM runs r JOIN run_days d ON d.run = r.id "
                             "WHERE r.machine_id = ?1 AND d.day >= ?2 AND d.day <= ?3",
                             &st, err);
        if (r < 0)
                return r;
        int64_t today = farm_step_floor(now, DAY_NS) / DAY_NS;
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, farm_step_floor(from, DAY_NS) / DAY_NS);
        sql_bind_int64(st, 3, farm_step_floor(to - 1, DAY_NS) / DAY_NS);
        while ((r = sql_step(st)) == SQL_ROW) {
                struct day_ref x = { .run = sql_column_int64(st, 0),
                                     .day = sql_column_int64(st, 1),
                                     .cached = sql_column_int(st, 2) };
                /* Whole: a past day inside the window, or a day whose every interval starts
                 * in it (today's, up to now): its kept rows are those of its intervals. */
                x.whole = (x.day < today && x.day * DAY_NS >= from && (x.day + 1) * DAY_NS <= to) ||
                          (sql_column_int64(st, 3) >= from && sql_column_int64(st, 4) <= to);
                if (day_refs_add(refs, &x) < 0) {
                        snprintf(err, FARM_ERROR_MAX, "out of memory");
                        return -ENOMEM;
                }
        }
        if (r != SQL_DONE)
                return farm_fail(c, r, "cannot list the days", err);
        return 0;
}

/* The merge of a window's histograms CPU by CPU: the first pass merges every row into all as
 * well, and as many CPUs as the budget holds, the smallest first; later passes read only the
 * CPUs left. */
struct window_merge {
        struct farm_merge_set *set;
        struct farm_acc all;
        bool first_pass;
        bool enough; /* fn needs no more CPUs */
        farm_cpu_hist_fn fn;
        void *userdata;
};

static int window_row(void *userdata, const struct day_ref *ref, const char *scenario, int64_t cpu,
                      uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                      uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns, uint64_t violations,
                      const char **why) {
        struct window_merge *w = userdata;
        if (cpu < 0 || cpu >= CPU_MAX) {
                *why = "CPU out of range";
                return -EBADMSG;
        }
        int r = 0;
        if (w->first_pass)
                r = farm_acc_add(&w->all, limit_us, blob, len, samples, min_ns, max_ns, max_time_ns,
                                 violations, why);
        if (r >= 0)
                r = farm_merge_set_add(w->set, (uint64_t) cpu, limit_us, blob, len, samples, min_ns,
                                       max_ns, max_time_ns, violations, why);
        return r < 0 ? r : 0;
}

static int window_cpu_done(void *userdata, uint64_t key, struct farm_acc *acc) {
        struct window_merge *w = userdata;
        if (w->enough)
                return 0;
        int r = w->fn(w->userdata, (int64_t) key, acc, &w->all);
        w->enough = r > 0;
        return MIN(r, 0);
}

/* Merges refs' histograms of [from, to) (of one scenario and CPU when given), calling fn for each
 * CPU in ascending order, with all complete, until fn returns 1 (it needs no more); *ret_ncpus:
 * how many CPUs hold data. */
static int window_hists(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                        const char *scenario, int64_t cpu, farm_cpu_hist_fn fn, void *userdata,
                        uint64_t *ret_ncpus, char *err) {
        struct window_merge w = { .first_pass = true, .fn = fn, .userdata = userdata };
        int r = 0;
        if ((r = farm_merge_set_new(FARM_MERGE_BUDGET_BYTES, true, &w.set)) < 0)
                snprintf(err, FARM_ERROR_MAX, "out of memory");
        /* After the first pass, each reads only the CPUs that the next pass can take (twice
         * as many as the last one merged), not every row left. */
        int64_t range[2] = { 0, CPU_MAX };
        while (r >= 0) {
                r = day_refs_read(db, refs, from, to, scenario, cpu, range, window_row, &w, err);
                if (r >= 0 && w.first_pass && !w.all.used)
                        r = fn(userdata, -1, NULL, &w.all); /* no data at all */
                w.first_pass = false;
                if (r >= 0)
                        r = farm_merge_set_finish(w.set, window_cpu_done, &w);
                /* Every CPU was seen by the first pass (their count is known): once fn has
                 * what it needs, the others are not merged. */
                if (r > 0 && w.enough)
                        r = 0;
                if (r <= 0)
                        break;
                range[0] = (int64_t) farm_merge_set_first_waiting(w.set);
                uint64_t last = farm_merge_set_nth_waiting(
                        w.set, 2 * MAX(farm_merge_set_last_pass(w.set), (size_t) 1));
                range[1] = last == UINT64_MAX ? CPU_MAX : (int64_t) last - 1;
        }
        if (r >= 0 && ret_ncpus)
                *ret_ncpus = farm_merge_set_keys(w.set);
        farm_merge_set_free(w.set);
        farm_acc_done(&w.all);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging histograms");
        return r;
}

int farm_machine_hists(farm_db *db, const char *machine_id, int64_t from, int64_t to, int64_t now,
                       farm_cpu_hist_fn fn, void *userdata, char err[static FARM_ERROR_MAX]) {
        struct day_refs refs = {};
        int r;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                r = window_refs(c, machine_id, from, to, now, &refs, err);
        }
        if (r >= 0)
                r = window_hists(db, &refs, from, to, NULL, -1, fn, userdata, NULL, err);
        free(refs.v);
        return r;
}

int farm_histogram_ask(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                       struct farm_histogram_query *q, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        int r;

        *q = (struct farm_histogram_query){ .machine = id,
                                            .scenario = farm_args_get(args, "scenario") };
        if (!query_parse_cpu(args, &q->cpu, a) ||
            (q->scenario && !query_scenario_ok(q->scenario, a)) ||
            !query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &q->page, perr),
                            perr, a))
                return 0;
        if (args->unpaged && !farm_args_get(args, "limit"))
                q->page.limit = CPU_MAX;
        _cleanup_release_ sql_conn *c = farm_reader(db);
        if ((r = query_machine_lookup(c, id, &m, a)) <= 0 ||
            !query_parse_window(args, now, &m, &q->from, &q->to, a))
                return r < 0 ? r : 0;
        q->now = now;
        r = window_refs(c, id, q->from, q->to, now, &q->refs, a->err);
        if (r < 0) {
                farm_histogram_query_done(q);
                return query_internal(a, r);
        }
        return 1;
}

int farm_histogram_merge(farm_db *db, struct farm_histogram_query *q, farm_cpu_hist_fn fn,
                         void *userdata, uint64_t *ret_ncpus, char err[static FARM_ERROR_MAX]) {
        return window_hists(db, &q->refs, q->from, q->to, q->scenario, q->cpu, fn, userdata,
                            ret_ncpus, err);
}

void farm_histogram_query_done(struct farm_histogram_query *q) {
        free(q->refs.v);
        q->refs = (struct day_refs){};
}
