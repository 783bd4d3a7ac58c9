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
#include "steps.h"
#include "text-json.h"
#include "timeutil.h"

#define DEFAULT_STEP_NS (60 * (int64_t) NSEC_PER_SEC)
#define NAMES_MAX FARM_STEP_NAMES_MAX /* different scenarios or kernels in one intervals answer */

/* ---- GET /api/v1/machines/{id}/intervals ------------------------------------------------ */

static void names_done(struct farm_names *n) {
        for (unsigned i = 0; i < n->n; i++)
                free(n->s[i]);
        n->n = 0;
}

/* The index of s ("" for none), added if new: -ENOSPC past NAMES_MAX. */
static int name_id(struct farm_names *n, const char *s) {
        for (unsigned i = 0; i < n->n; i++)
                if (strcmp(n->s[i], s) == 0)
                        return (int) i;
        if (n->n == NAMES_MAX)
                return -ENOSPC;
        n->s[n->n] = strdup(s);
        return n->s[n->n] ? (int) n->n++ : -ENOMEM;
}

void farm_steps_done(struct farm_steps *s) {
        names_done(&s->scenarios);
        names_done(&s->kernels);
        free(s->v);
        s->v = NULL;
        s->n = 0;
}

/* The index of s, or with lump the last one renamed "(others)" once NAMES_MAX are taken: a
 * machine's day with hundreds of scenarios still has a page (for the API it is a 400). */
static int name_or_lump(struct farm_names *n, const char *s, bool lump) {
        int i = name_id(n, s);
        if (i != -ENOSPC || !lump)
                return i;
        if (strcmp(n->s[NAMES_MAX - 1], "(others)") != 0) {
                char *o = strdup("(others)");
                if (!o)
                        return -ENOMEM;
                free(n->s[NAMES_MAX - 1]);
                n->s[NAMES_MAX - 1] = o;
        }
        return NAMES_MAX - 1;
}

/* The intervals of the machine's runs in the window (?1 machine, ?2 from, ?3 to, ?4 the
 * scenario or NULL), each with its step k from the first step's start ?5 and the step ?6: all
 * CPUs from the totals kept on each interval's row (schema 4), or one CPU ?7's row. */
#define STEPS_ROW                                                                             \
        "SELECT (i.start_ns - ?5) / ?6 AS k, coalesce(i.scenario, '') AS scen, "              \
        "coalesce(r.kernel_release, '') AS kern, i.length_ns AS len, i.start_ns AS st, r.id " \
        "AS run, "
#define STEPS_WHERE                                                                            \
        " WHERE r.machine_id = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3 AND (i.scenario = " \
        "?4 OR ?4 IS NULL)"
#define STEPS_ALL_CPUS                                                                         \
        STEPS_ROW "i.max_ns AS mx, i.max_cpu AS mcpu, i.max_time_ns AS mt, i.samples AS smp, " \
                  "i.violations AS vio FROM runs r JOIN intervals i ON i.run = r.id" STEPS_WHERE
#define STEPS_ONE_CPU(join)                                                                \
        STEPS_ROW "c.max_ns AS mx, c.cpu AS mcpu, c.max_time_ns AS mt, c.samples AS smp, " \
                  "c.violations AS vio FROM runs r JOIN intervals i ON i.run = r.id " join \
                  " AND c.cpu = ?7" STEPS_WHERE
/* Aggregated per step, scenario and kernel in the database: a month of one-minute intervals
 * at 5-minute steps comes back as 8,640 rows (more where a step holds two scenarios or two
 * kernels), not 43,200.  Each group's worst case is its first row by the largest maximum, the
 * earliest time of equals, then the earliest interval and run; its sums saturate at 2^63-1 (a
 * machine may send intervals that overlap); the groups come in time order, and in a step by
 * their first interval, which orders the names by their first appearance. */
#define STEPS_GROUPS(sum, sum_end, rows)                                                        \
        "SELECT k, scen, kern, count(*), " sum "len" sum_end ", " sum "smp" sum_end ", " sum    \
        "vio" sum_end ", max(st + len), max(mx), max(CASE WHEN rn = 1 THEN mt END), "           \
        "max(CASE WHEN rn = 1 THEN mcpu END), max(CASE WHEN rn = 1 THEN st END), "              \
        "max(CASE WHEN rn = 1 THEN run END) FROM (SELECT w.*, row_number() OVER (PARTITION BY " \
        "k, scen, kern ORDER BY mx DESC, mt, st, run) AS rn FROM (" rows ") w) x "              \
        "GROUP BY k, scen, kern ORDER BY k, min(st), min(run)"
#define SAT_SUM_SQLITE "sat_sum(", ")"
#define SAT_SUM_PG "least(sum(", "), 9223372036854775807)::bigint"
#define STEPS_GROUPS_OF(...) STEPS_GROUPS(__VA_ARGS__)
static const char *const sql_steps[2][2] = {
        { [SQL_SQLITE] = STEPS_GROUPS_OF(SAT_SUM_SQLITE, STEPS_ALL_CPUS),
          [SQL_PG] = STEPS_GROUPS_OF(SAT_SUM_PG, STEPS_ALL_CPUS) },
        { [SQL_SQLITE] = STEPS_GROUPS_OF(SAT_SUM_SQLITE, STEPS_ONE_CPU(SQL_JOIN_CPUS_SQLITE)),
          [SQL_PG] = STEPS_GROUPS_OF(SAT_SUM_PG, STEPS_ONE_CPU(SQL_JOIN_CPUS_PG)) },
};

/* Where a step's worst case came from, to choose between equals of two groups. */
struct step_tie {
        int64_t start_ns, run;
};

/* One group's row (a step's intervals of one scenario and kernel) added to its step: the
 * worst case is the largest, the earliest of equals (then the earliest interval, run). */
static void step_add_group(struct farm_step *s, struct step_tie *tie, sql_stmt *st) {
        uint64_t max = (uint64_t) sql_column_int64(st, 8);
        int64_t time = sql_column_int64(st, 9), start = sql_column_int64(st, 11),
                run = sql_column_int64(st, 12);
        if (!s->intervals || max > s->max_ns ||
            (max == s->max_ns &&
             (time < s->max_time_ns ||
              (time == s->max_time_ns &&
               (start < tie->start_ns || (start == tie->start_ns && run < tie->run)))))) {
                s->max_ns = max;
                s->max_cpu = sql_column_int64(st, 10);
                s->max_time_ns = time;
                *tie = (struct step_tie){ start, run };
        }
        sat_add(&s->intervals, (uint64_t) sql_column_int64(st, 3));
        sat_add(&s->covered_ns, (uint64_t) sql_column_int64(st, 4));
        sat_add(&s->samples, (uint64_t) sql_column_int64(st, 5));
        sat_add(&s->violations, (uint64_t) sql_column_int64(st, 6));
        s->data_end_ns = MAX(s->data_end_ns, sql_column_int64(st, 7));
}

/* A new step at the end of steps (in time order): NULL when out of memory. */
static struct farm_step *steps_append(struct farm_step **steps, struct step_tie **ties, size_t *n,
                                      size_t *alloc, int64_t start_ns) {
        if (*n == *alloc) {
                size_t na = *alloc ? *alloc * 2 : 256;
                struct farm_step *s = realloc(*steps, na * sizeof(*s));
                if (s)
                        *steps = s;
                struct step_tie *t = s ? realloc(*ties, na * sizeof(*t)) : NULL;
                if (!t)
                        return NULL;
                *ties = t;
                *alloc = na;
        }
        (*steps)[*n] = (struct farm_step){ .start_ns = start_ns };
        (*ties)[*n] = (struct step_tie){};
        return &(*steps)[(*n)++];
}

/* The steps of [from, to) that hold intervals, in time order.  -ENOSPC past NAMES_MAX
 * scenarios or kernels (unless lump), other errors with err. */
static int collect_steps(sql_conn *c, const char *id, int64_t from, int64_t to, uint64_t step_ns,
                         int64_t cpu, const char *scenario, bool lump, struct farm_steps *ret,
                         char *err) {
        struct farm_names scen = {}, kern = {};
        struct farm_step *steps = NULL;
        _cleanup_free_ struct step_tie *ties = NULL;
        size_t n = 0, alloc = 0;
        int64_t first = farm_step_floor(from, step_ns), last_k = -1;
        int rc;

        *ret = (struct farm_steps){};
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, sql_steps[cpu >= 0][sql_dialect(c)], &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, from);
        sql_bind_int64(st, 3, to);
        if (scenario)
                sql_bind_text(st, 4, scenario);
        sql_bind_int64(st, 5, first);
        sql_bind_int64(st, 6, (int64_t) step_ns);
        if (cpu >= 0)
                sql_bind_int64(st, 7, cpu);
        while ((rc = sql_step(st)) == SQL_ROW) {
                int64_t k = sql_column_int64(st, 0);
                if (k != last_k && !steps_append(&steps, &ties, &n, &alloc,
                                                 first + (int64_t) ((uint64_t) k * step_ns))) {
                        r = -ENOMEM;
                        break;
                }
                last_k = k;
                struct farm_step *s = &steps[n - 1];
                step_add_group(s, &ties[n - 1], st);
                int si = name_or_lump(&scen, sql_column_text(st, 1) ?: "", lump);
                int ki = name_or_lump(&kern, sql_column_text(st, 2) ?: "", lump);
                if (si < 0 || ki < 0) {
                        r = si < 0 ? si : ki;
                        break;
                }
                s->scenarios |= UINT64_C(1) << si;
                s->kernels |= UINT64_C(1) << ki;
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the intervals", err);
        else if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory for the steps");
        if (r >= 0 && n == 0 && !(steps = calloc(1, sizeof(*steps)))) {
                snprintf(err, FARM_ERROR_MAX, "out of memory for the steps");
                r = -ENOMEM;
        }
        if (r < 0) {
                names_done(&scen);
                names_done(&kern);
                free(steps);
                return r;
        }
        *ret = (struct farm_steps){ .v = steps, .n = n, .scenarios = scen, .kernels = kern };
        return 0;
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
