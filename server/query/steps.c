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
#include "text-json.h"
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

/* The steps of the page as the text of the elements of "steps": a month at 5-minute steps is
 * 8,640 steps, written as text straight away, since a JSON object per step made allocating
 * and freeing them most of the query's time.  NULL when out of memory. */
static char *steps_text_of(const struct farm_steps *fs, const struct farm_page *page) {
        char *steps_text = NULL;
        size_t steps_len = 0;
        FILE *f = open_memstream(&steps_text, &steps_len);
        char *scen_json[NAMES_MAX] = {}, *kern_json[NAMES_MAX] = {};
        bool oom = !f;
        for (unsigned i = 0; !oom && i < fs->scenarios.n; i++) {
                json_t *j = fs->scenarios.s[i][0] ? json_string(fs->scenarios.s[i]) : json_null();
                oom = !j || !(scen_json[i] = json_dumps(j, JSON_ENCODE_ANY));
                json_decref(j);
        }
        for (unsigned i = 0; !oom && i < fs->kernels.n; i++) {
                /* A kernel's release is free text: escaped as every answer's (text-json.h). */
                json_t *j = json_string(fs->kernels.s[i]);
                oom = !j || text_json_escape(j) < 0 ||
                      !(kern_json[i] = json_dumps(j, JSON_ENCODE_ANY));
                json_decref(j);
        }
        uint64_t seen = 0;
        bool first_step = true;
        for (size_t k = 0; !oom && k < fs->n; k++) {
                if (seen++ < page->offset || seen > page->offset + page->limit)
                        continue;
                const struct farm_step *sp = &fs->v[k];
                char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
                fprintf(f,
                        "%s{\"start_ns\":%" PRId64 ",\"start\":\"%s\",\"max_ns\":%" PRIu64
                        ",\"max_cpu\":%" PRId64 ",\"max_time_ns\":%" PRId64
                        ",\"max_time\":\"%s\",\"samples\":%" PRIu64 ",\"violations\":%" PRIu64
                        ",\"intervals\":%" PRIu64 ",\"covered_ns\":%" PRIu64 ",\"scenarios\":[",
                        first_step ? "" : ",", sp->start_ns, format_timestamp_utc(t1, sp->start_ns),
                        (uint64_t) sp->max_ns, (int64_t) sp->max_cpu, sp->max_time_ns,
                        format_timestamp_utc(t2, sp->max_time_ns), (uint64_t) sp->samples,
                        (uint64_t) sp->violations, (uint64_t) sp->intervals,
                        (uint64_t) sp->covered_ns);
                first_step = false;
                bool comma = false;
                for (unsigned i = 0; i < fs->scenarios.n; i++)
                        if (sp->scenarios & (UINT64_C(1) << i)) {
                                fprintf(f, "%s%s", comma ? "," : "", scen_json[i]);
                                comma = true;
                        }
                fputs("],\"kernels\":[", f);
                comma = false;
                for (unsigned i = 0; i < fs->kernels.n; i++)
                        if (sp->kernels & (UINT64_C(1) << i)) {
                                fprintf(f, "%s%s", comma ? "," : "", kern_json[i]);
                                comma = true;
                        }
                fputs("]}", f);
        }
        for (unsigned i = 0; i < NAMES_MAX; i++) {
                free(scen_json[i]);
                free(kern_json[i]);
        }
        if (f && fclose(f) != 0)
                oom = true;
        if (oom) {
                free(steps_text);
                return NULL;
        }
        return steps_text;
}

int query_intervals(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                    const char *path, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        struct farm_page page;
        int64_t from, to, cpu;
        uint64_t step_ns = 0;
        const char *scenario = farm_args_get(args, "scenario");
        int r;

        if (!query_parse_cpu(args, &cpu, a) || (scenario && !query_scenario_ok(scenario, a)) ||
            /* Steps are small, and every page costs a scan of the window: a month at
             * 5-minute steps (8,640) fits one page. */
            !query_param_ok(farm_param_page_up_to(farm_args_get(args, "limit"),
                                                  farm_args_get(args, "offset"),
                                                  FARM_STEPS_PAGE_MAX, &page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_span("step", farm_args_get(args, "step"), &step_ns, perr),
                            perr, a))
                return 0;
        if (args->unpaged && !farm_args_get(args, "limit"))
                page.limit = FARM_STEPS_MAX;
        if (step_ns > (uint64_t) INT64_MAX) {
                query_error(a, 400, "step=%.64s: too long", farm_args_get(args, "step"));
                return 0;
        }

        _cleanup_release_ sql_conn *c = farm_reader(db);
        if ((r = query_machine_lookup(c, id, &m, a)) <= 0 ||
            !query_parse_window(args, now, &m, &from, &to, a))
                return r;
        if (step_ns == 0)
                step_ns = m.interval_ns ?: (uint64_t) DEFAULT_STEP_NS;
        uint64_t nsteps = farm_steps_in(from, to, step_ns);
        if (nsteps > FARM_STEPS_MAX) {
                char span[TIMESPAN_MAX_LEN];
                query_error(a, 400,
                            "step=%s: the window holds %" PRIu64 " steps, more than %d; ask for "
                            "a larger step or a shorter window",
                            format_timespan(span, step_ns), nsteps, FARM_STEPS_MAX);
                return 0;
        }
        struct farm_steps fs;
        r = collect_steps(c, id, from, to, step_ns, cpu, scenario, false, &fs, a->err);
        if (r == -ENOSPC) {
                query_error(a, 400,
                            "the window holds more than %d different scenarios or kernels; "
                            "narrow it (from=, to=) or choose a scenario=",
                            NAMES_MAX);
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);

        char *steps_text = steps_text_of(&fs, &page);
        bool oom = !steps_text;
        size_t n = fs.n;
        farm_steps_done(&fs);

        /* The rest of the answer is an object as usual, its "steps" put in as text. */
        json_t *o = json_object();
        char *head = NULL;
        if (oom || !o || query_window_fields(o, id, from, to, cpu, scenario) < 0 ||
            json_object_set_new(o, "step_ns", json_integer((json_int_t) step_ns)) < 0 ||
            json_object_set_new(o, "steps", json_array()) < 0 ||
            query_add_page(o, path, args, &page, n) < 0 ||
            !(head = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
                json_decref(o);
                free(steps_text);
                query_json(a, NULL);
                return 0;
        }
        json_decref(o);
        /* Strings in the head are escaped, so this marker can only be the steps' place. */
        const char *marker = "\"steps\":[]";
        char *at = strstr(head, marker);
        char *text = NULL;
        if (!at || asprintf(&text, "%.*s\"steps\":[%s]%s", (int) (at - head), head,
                            steps_text ?: "", at + strlen(marker)) < 0) {
                free(head);
                free(steps_text);
                query_json(a, NULL);
                return 0;
        }
        free(head);
        free(steps_text);
        a->status = 200;
        a->text = text;
        a->content_type = "application/json";
        return 0;
}
