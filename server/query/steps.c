/* SPDX-License-Identifier: MIT */
/* The intervals query: a machine's intervals aggregated into time steps (the worst case of
 * each step, its totals, its scenarios and kernels), for GET .../intervals and the dashboard. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "query-internal.h"
#include "steps-read.h"
#include "steps.h"
#include "timeutil.h"

#define DEFAULT_STEP_NS (60 * (int64_t) NSEC_PER_SEC)
#define NAMES_MAX FARM_STEP_NAMES_MAX /* different scenarios or kernels in one intervals answer */

/* ---- GET /api/v1/machines/{id}/intervals ------------------------------------------------ */

void farm_steps_done(struct farm_steps *s) {
        for (unsigned i = 0; i < s->scenarios.n; i++)
                free(s->scenarios.s[i]);
        for (unsigned i = 0; i < s->kernels.n; i++)
                free(s->kernels.s[i]);
        s->scenarios.n = s->kernels.n = 0;
        free(s->v);
        s->v = NULL;
        s->n = 0;
}

/* The steps of [from, to) that hold intervals, in time order.  -ENOSPC past NAMES_MAX
 * scenarios or kernels (unless lump), other errors with err. */
static int collect_steps(sql_conn *c, const char *id, int64_t from, int64_t to, uint64_t step_ns,
                         int64_t cpu, const char *scenario, bool lump, struct farm_steps *ret,
                         char *err) {
        struct steps_read r;
        *ret = (struct farm_steps){};
        int q = steps_read_init(&r, from, to, step_ns, lump);
        if (q >= 0 && (q = steps_read(&r, c, id, from, to, cpu, scenario, err)) >= 0)
                q = steps_read_finish(&r, ret);
        if (q == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory for the steps");
        steps_read_done(&r);
        return q;
}

/* What farm_machine_steps() and farm_machine_recent_steps() refuse. */
static int steps_check(int64_t from, int64_t to, uint64_t step_ns, char *err) {
        if (from >= to || step_ns == 0 || step_ns > (uint64_t) INT64_MAX) {
                snprintf(err, FARM_ERROR_MAX, "steps: an empty window or a bad step");
                return -EINVAL;
        }
        if (farm_steps_in(from, to, step_ns) > FARM_STEPS_MAX) {
                snprintf(err, FARM_ERROR_MAX, "steps: more than %d in the window", FARM_STEPS_MAX);
                return -E2BIG;
        }
        return 0;
}

int farm_machine_steps(farm_db *db, const char *machine_id, int64_t from, int64_t to,
                       uint64_t step_ns, struct farm_steps *ret, char err[static FARM_ERROR_MAX]) {
        int r = steps_check(from, to, step_ns, err);
        if (r < 0)
                return r;
        _cleanup_release_ sql_conn *c = farm_reader(db);
        return collect_steps(c, machine_id, from, to, step_ns, -1, NULL, true, ret, err);
}

int farm_machine_recent_steps(farm_db *db, const char *machine_id, int64_t now, uint64_t step_ns,
                              struct farm_steps *ret, char err[static FARM_ERROR_MAX]) {
        struct query_machine m;
        int64_t from, to;
        *ret = (struct farm_steps){};
        _cleanup_release_ sql_conn *c = farm_reader(db);
        int r = query_machine_find(c, machine_id, &m, err);
        if (r == 0) {
                snprintf(err, FARM_ERROR_MAX, "no such machine");
                return -ENOENT;
        }
        if (r < 0)
                return r;
        query_default_window(&m, now, &from, &to);
        if ((r = steps_check(from, to, step_ns, err)) < 0)
                return r;
        r = collect_steps(c, machine_id, from, to, step_ns, -1, NULL, false, ret, err);
        if (r == -ENOSPC)
                snprintf(err, FARM_ERROR_MAX,
                         "steps: more than %d different scenarios or kernels in the window",
                         NAMES_MAX);
        return r;
}

int farm_intervals_ask(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                       struct farm_intervals *ret, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        int64_t cpu;
        uint64_t step_ns = 0;
        const char *scenario = farm_args_get(args, "scenario");
        int r;

        *ret = (struct farm_intervals){ .machine = id, .scenario = scenario };
        if (!query_parse_cpu(args, &cpu, a) || (scenario && !query_scenario_ok(scenario, a)) ||
            /* Steps are small, and every page costs a scan of the window: a month at
             * 5-minute steps (8,640) fits one page. */
            !query_param_ok(farm_param_page_up_to(farm_args_get(args, "limit"),
                                                  farm_args_get(args, "offset"),
                                                  FARM_STEPS_PAGE_MAX, &ret->page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_span("step", farm_args_get(args, "step"), &step_ns, perr),
                            perr, a))
                return 0;
        if (args->unpaged && !farm_args_get(args, "limit"))
                ret->page.limit = FARM_STEPS_MAX;
        if (step_ns > (uint64_t) INT64_MAX) {
                query_error(a, 400, "step=%.64s: too long", farm_args_get(args, "step"));
                return 0;
        }

        _cleanup_release_ sql_conn *c = farm_reader(db);
        if ((r = query_machine_lookup(c, id, &m, a)) <= 0 ||
            !query_parse_window(args, now, &m, &ret->from, &ret->to, a))
                return r < 0 ? r : 0;
        if (step_ns == 0)
                step_ns = m.interval_ns ?: (uint64_t) DEFAULT_STEP_NS;
        uint64_t nsteps = farm_steps_in(ret->from, ret->to, step_ns);
        if (nsteps > FARM_STEPS_MAX) {
                char span[TIMESPAN_MAX_LEN];
                query_error(a, 400,
                            "step=%s: the window holds %" PRIu64 " steps, more than %d; ask for "
                            "a larger step or a shorter window",
                            format_timespan(span, step_ns), nsteps, FARM_STEPS_MAX);
                return 0;
        }
        ret->cpu = cpu;
        ret->step_ns = step_ns;
        r = collect_steps(c, id, ret->from, ret->to, step_ns, cpu, scenario, false, &ret->steps,
                          a->err);
        if (r == -ENOSPC) {
                query_error(a, 400,
                            "the window holds more than %d different scenarios or kernels; "
                            "narrow it (from=, to=) or choose a scenario=",
                            NAMES_MAX);
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);
        return 1;
}
