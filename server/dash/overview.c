/* SPDX-License-Identifier: MIT */
/* The dashboard's farm overview (GET /): the latest stable releases, every machine's state and
 * latest figures, and the kernels under test. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "dash-internal.h"
#include "verdict-log.h"

#define WAITING_MAX 6

struct verdicts {
        struct {
                char *release;
                struct farm_verdict *v; /* NULL: none (no machine has run it) */
        } * e;
        size_t n;
};

static void verdicts_done(struct verdicts *vs) {
        for (size_t i = 0; i < vs->n; i++) {
                free(vs->e[i].release);
                farm_verdict_free(vs->e[i].v);
        }
        free(vs->e);
}

/* The verdict of release now, computed once per page. */
static const struct farm_verdict *verdict_of(struct dash *x, struct verdicts *vs,
                                             const char *release, int *ret) {
        char err[FARM_ERROR_MAX];
        for (size_t i = 0; i < vs->n; i++)
                if (strcmp(vs->e[i].release, release) == 0)
                        return vs->e[i].v;
        struct farm_verdict *v = NULL;
        int r = farm_verdict(x->db, x->rule, release, x->now, &v, err);
        if (r < 0 && r != -ENOENT) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                *ret = r;
                return NULL;
        }
        void *e = realloc(vs->e, (vs->n + 1) * sizeof(*vs->e));
        if (!e) {
                farm_verdict_free(v);
                *ret = -ENOMEM;
                return NULL;
        }
        vs->e = e;
        vs->e[vs->n].release = strdup(release);
        vs->e[vs->n++].v = v;
        return v;
}

/* The machine's problems in v (of one kind, or of all when kind < 0). */
static size_t count_problems(const struct farm_verdict *v, const char *id, int kind) {
        size_t n = 0;
        for (size_t i = 0; i < v->nproblems; i++)
                n += strcmp(v->problems[i].machine, id) == 0 &&
                     (kind < 0 || v->problems[i].kind == (enum farm_problem_kind) kind);
        return n;
}

/* "Latest stable" per series: the answer the farm exists for, first. */
static void latest_stable_headline(struct dash *x, FILE *f) {
        char err[FARM_ERROR_MAX];
        struct farm_series_list series;
        struct farm_question q = { NULL, x->now, x->now, x->now };
        if (farm_series(x->db, x->rule, &q, &series, err) < 0) {
                fputs("<p class=\"alert\">The latest stable releases cannot be told: ", f);
                dash_esc(f, err);
                fputs("</p>\n", f);
                return;
        }
        fputs("<div id=\"latest-stable\" class=\"headline\">", f);
        if (series.n == 0)
                fputs("<p>No kernel release has run yet.</p>", f);
        for (size_t i = 0; i < series.n; i++) {
                const struct farm_series_entry *e = &series.v[i];
                const char *stable = e->latest_stable;
                char t[TIMESTAMP_MAX_LEN];
                fputs("<p class=\"series\"><strong>", f);
                dash_esc(f, e->series);
                fputs("</strong>: latest stable ", f);
                if (stable) {
                        dash_kernel_link(f, stable);
                        if (e->since_ns != FARM_NONE) {
                                fputs(" (since ", f);
                                dash_esc(f, format_timestamp_utc(t, e->since_ns));
                                fputs(")", f);
                        }
                } else
                        fputs("<em>none yet</em>", f);
                if (e->newest && (!stable || strcmp(e->newest, stable) != 0)) {
                        fputs("; newest ", f);
                        dash_kernel_link(f, e->newest);
                        fputs(" is ", f);
                        dash_esc(f, e->judged ? farm_verdict_status_name(e->newest_status) : "?");
                }
                fputs("</p>", f);
        }
        fputs("</div>\n", f);
        farm_series_list_done(&series);
}

struct overview_row {
        struct dash_machine m;
        struct farm_steps steps; /* the last day of data, per hour */
};

/* Loads the machines' rows: 0, or < 0 internal (answered).  *n counts those loaded (those
 * removed meanwhile are left out). */
static int overview_rows(struct dash *x, struct farm_machine_list *machines,
                         struct overview_row *rows, size_t *n) {
        char err[FARM_ERROR_MAX];
        int r;
        for (size_t i = 0; i < machines->n; i++) {
                struct overview_row *row = &rows[*n];
                if ((r = dash_machine_load_listed(x, &machines->v[i], &row->m)) < 0)
                        return r;
                if (r == 0) { /* removed meanwhile */
                        farm_answer_done(x->a);
                        continue;
                }
                (*n)++;
                if (row->m.has_data &&
                    (r = farm_machine_recent_steps(x->db, row->m.id, x->now, HOUR_NS, &row->steps,
                                                   err)) < 0 &&
                    r != -ENOENT && r != -ENOSPC && r != -E2BIG) {
                        snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                        return dash_fail_internal(x, r, NULL);
                }
                /* One machine's refused steps (more names than a step lists) leave its row
                 * without them, not the farm without its overview. */
        }
        return 0;
}

/* The alert that lists the silent machines, when there are any. */
static void overview_silent(struct dash *x, const struct overview_row *rows, size_t n) {
        FILE *f = x->f;
        char b1[32];
        size_t nsilent = 0;
        for (size_t k = 0; k < n; k++)
                nsilent += rows[k].m.silent;
        if (nsilent) {
                fprintf(f,
                        "<div class=\"alert\" id=\"silent\"><strong>⚠ %zu SILENT "
                        "MACHINE%s</strong> (no data for longer than the allowed gap of %s):<ul>",
                        nsilent, nsilent == 1 ? "" : "S",
                        dash_fmt_span(b1, (int64_t) x->rule->max_gap_ns));
                for (size_t k = 0; k < n; k++) {
                        if (!rows[k].m.silent)
                                continue;
                        fputs("<li>", f);
                        dash_machine_link(f, &rows[k].m.info, NULL);
                        fputs(" — silent since ", f);
                        dash_put_time(f, rows[k].m.last_data_ns);
                        fprintf(f, " (%s)</li>",
                                dash_fmt_span(b1, x->now - rows[k].m.last_data_ns));
                }
                fputs("</ul></div>\n", f);
        }
}

/* A machine's row of the table: 0, or < 0 internal (answered). */
static int overview_machine(struct dash *x, struct verdicts *vs, const struct overview_row *row) {
        FILE *f = x->f;
        char b1[32], b2[32];
        const struct dash_machine *m = &row->m;
        const char *kernel = dash_machine_kernel(m);
        const struct farm_steps *fs = &row->steps;
        int64_t worst24 = -1, kworst = -1;
        const char *scen = NULL;
        size_t j;
        for (j = 0; j < fs->n; j++) {
                const struct farm_step *st = &fs->v[j];
                if (st->start_ns + HOUR_NS > x->now - DAY_NS)
                        worst24 = MAX(worst24, (int64_t) st->max_ns);
                scen = dash_step_name(&fs->scenarios, st->scenarios);
        }
        for (j = 0; j < m->runs.n; j++) {
                const struct farm_run *run = &m->runs.v[j];
                if (kernel && strcmp(run->kernel_release ?: "", kernel) == 0)
                        kworst = MAX(kworst, run->worst_latency_ns != FARM_NONE
                                                     ? run->worst_latency_ns
                                                     : -1);
        }
        int r = 0;
        const struct farm_verdict *v = kernel ? verdict_of(x, vs, kernel, &r) : NULL;
        if (kernel && !v && r < 0) {
                dash_abandon_page(x);
                return dash_fail_internal(x, r, NULL);
        }
        const struct farm_verdict_machine *vm = v ? dash_verdict_machine(v, m->id) : NULL;
        fprintf(f, "<tr%s><td>", m->silent ? " class=\"silent\"" : "");
        dash_machine_link(f, &m->info, NULL);
        fputs("</td><td>", f);
        dash_put_state(x, m);
        fputs("</td><td>", f);
        dash_kernel_link(f, kernel);
        fputs("</td><td>", f);
        if (scen && *scen && !m->silent)
                dash_esc(f, scen);
        else if (scen && *scen) {
                fputs("<span class=\"note\">last: ", f);
                dash_esc(f, scen);
                fputs("</span>", f);
        } else
                fputs("–", f);
        fprintf(f, "</td><td class=\"num%s\">%s</td><td class=\"num%s\">%s</td>",
                worst24 > m->bound_ns ? " bad" : "", dash_fmt_lat(b1, worst24),
                kworst > m->bound_ns ? " bad" : "", dash_fmt_lat(b2, kworst));
        fprintf(f, "<td class=\"num\">%s</td>", dash_fmt_lat(b1, m->bound_ns));
        if (v) {
                size_t viol = count_problems(v, m->id, FARM_PROBLEM_VIOLATION),
                       all_p = count_problems(v, m->id, -1);
                fprintf(f, "<td class=\"num%s\">%zu", viol ? " bad" : "", viol);
                if (all_p > viol)
                        fprintf(f, " <span class=\"bad\">+%zu other problem%s</span>", all_p - viol,
                                all_p - viol == 1 ? "" : "s");
                fputs("</td><td>", f);
                if (vm) {
                        int64_t cov = vm->covered_ns;
                        fprintf(f, "%s of %s", dash_fmt_days(b1, cov),
                                dash_fmt_days(b2, (int64_t) x->rule->period_ns));
                        /* Clean: all of it, or the time covered since the last
                         * problem (a streak that starts again at each problem). */
                        if (!all_p)
                                fputs(", all clean", f);
                        else {
                                fprintf(f, "; <span class=\"bad\">%s clean since ",
                                        dash_fmt_days(b1, vm->clean_ns));
                                dash_put_time(f, vm->has_problem ? vm->last_problem_ns : 0);
                                fputs("</span>", f);
                        }
                } else
                        fputs("<span class=\"note\">not gating</span>", f);
                fputs("</td></tr>\n", f);
        } else
                fputs("<td class=\"num\">–</td><td>–</td></tr>\n", f);
        return 0;
}

/* The kernels under test and what each is still waiting for. */
static void overview_kernels(struct dash *x, const struct farm_kernel_page *kernels) {
        FILE *f = x->f;
        char b1[32], t[TIMESTAMP_MAX_LEN];
        fprintf(f, "<h2 id=\"kernels\">Kernels under test (%" PRId64 ")</h2>\n", kernels->total);
        if (kernels->n) {
                fputs("<div class=\"scroll\"><table class=\"kernels\"><tr><th>release</th>"
                      "<th>verdict</th><th class=\"num\">machines</th><th>latest run</th>"
                      "<th class=\"num\">covered</th><th class=\"num\">problems</th>"
                      "<th>still waiting for</th></tr>\n",
                      f);
                for (size_t i = 0; i < kernels->n; i++) {
                        const struct farm_kernel *k = &kernels->v[i];
                        fputs("<tr><td>", f);
                        dash_kernel_link(f, k->release);
                        fputs("</td><td>", f);
                        dash_verdict_badge(f, farm_verdict_status_name(k->status));
                        fprintf(f, "</td><td class=\"num\">%d</td><td>", k->machines);
                        int64_t last = dash_time_shown(k->last_run_ns);
                        if (last != INT64_MIN)
                                dash_put_time(f, last);
                        else
                                dash_esc(f, format_timestamp_utc(t, k->last_run_ns));
                        fprintf(f,
                                "</td><td class=\"num\">%s</td><td class=\"num%s\">%" PRIu64
                                "</td><td>",
                                dash_fmt_days(b1, k->covered_ns), k->problems ? " bad" : "",
                                k->problems);
                        if (!k->nmissing)
                                fputs("nothing", f);
                        else
                                fputs("<ul class=\"waiting\">", f);
                        for (size_t j = 0; j < k->nmissing; j++) {
                                if (j == WAITING_MAX) {
                                        fprintf(f, "<li>and %zu more</li>",
                                                k->nmissing - WAITING_MAX);
                                        break;
                                }
                                fputs("<li>", f);
                                dash_esc(f, k->missing[j].message);
                                fputs("</li>", f);
                        }
                        if (k->nmissing)
                                fputs("</ul>", f);
                        fputs("</td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p>No kernel has run yet.</p>\n", f);
}

int dash_page_overview(struct dash *x) {
        char err[FARM_ERROR_MAX];
        struct farm_machine_list all = {};
        struct farm_kernel_page kernels = {};
        struct overview_row *rows = NULL;
        struct verdicts vs = {};
        size_t n = 0;
        int r;

        struct farm_clock_view cv = dash_clock_view(x);
        if ((r = farm_machines(x->db, NULL, &cv, &all, err)) < 0 ||
            (r = farm_kernels(x->db, x->rule,
                              &(struct farm_question){ NULL, x->now, x->now, x->now },
                              &(struct farm_page){ 100, 0 }, &kernels, err)) < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                r = dash_fail_internal(x, r, NULL);
                goto done;
        }
        rows = calloc(MAX(all.n, 1), sizeof(*rows));
        if (!rows) {
                r = dash_fail_internal(x, -ENOMEM, "dashboard: no memory");
                goto done;
        }
        if ((r = overview_rows(x, &all, rows, &n)) < 0)
                goto done;
        if ((r = dash_open_page(x)) < 0) {
                r = dash_fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        FILE *f = x->f;
        dash_page_begin(x, "Farm overview", 60);
        overview_silent(x, rows, n);
        fputs("<h1>Farm overview</h1>\n", f);
        latest_stable_headline(x, f);
        fprintf(f, "<h2 id=\"machines\">Machines (%zu)</h2>\n", n);
        if (!n)
                fputs("<p>No machine is enrolled yet (<code>rtsoak-server enroll</code>).</p>\n",
                      f);
        else
                fputs("<div class=\"scroll\"><table class=\"machines\"><tr><th>machine</th>"
                      "<th>state</th><th>kernel</th><th>scenario</th>"
                      "<th class=\"num\">worst, last 24 h</th>"
                      "<th class=\"num\">worst on this kernel</th><th class=\"num\">bound</th>"
                      "<th class=\"num\">violations</th><th>coverage of this kernel, "
                      "clean</th></tr>\n",
                      f);
        for (size_t k = 0; k < n; k++)
                if ((r = overview_machine(x, &vs, &rows[k])) < 0)
                        goto done;
        if (n)
                fputs("</table></div>\n", f);
        overview_kernels(x, &kernels);
        dash_page_end(x);
        r = dash_finish_page(x, HTML);
done:
        for (size_t z = 0; rows && z < n; z++) {
                dash_machine_done(&rows[z].m);
                farm_steps_done(&rows[z].steps);
        }
        free(rows);
        verdicts_done(&vs);
        farm_machine_list_done(&all);
        farm_kernel_page_done(&kernels);
        return r < 0 ? r : 0;
}
