/* SPDX-License-Identifier: MIT */
/* The dashboard's kernel page (GET /kernels/{release}) and its coverage plot: the verdict, its
 * problems, the coverage per gating machine, and a comparison with another release. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "dash-internal.h"
#include "comparison.h"
#include "svg.h"
#include "timeutil.h"

#define COV_BINS 300
#define COMPARE_ROWS_MAX 1000 /* of a comparison, the first */

/* The evidence of a problem: the machine page zoomed on its interval (or its silence). */
static void evidence_href(FILE *f, const struct farm_problem *p, int64_t now) {
        const struct farm_evidence *iv = farm_problem_evidence(p);
        int64_t start = p->time_ns, end;
        if (p->kind == FARM_PROBLEM_GAP)
                end = MIN(p->has_end ? p->end_ns : start + 1, now);
        else if (iv && iv->given) {
                start = iv->start_ns;
                end = start + MAX(iv->length_ns, 1);
                if (p->kind == FARM_PROBLEM_LOAD_DOWN && p->has_end)
                        end = MAX(end, p->end_ns);
        } else
                end = start + 1;
        dash_zoom_href(f, p->machine, start, MAX(end, start + 1));
}

/* Time spans of one status, sorted and merged, for a coverage bar. */
struct spans {
        struct svg_cov_segment *v;
        size_t n, alloc;
};

static int spans_add(struct spans *sp, int64_t a, int64_t e, enum svg_cov_status status) {
        if (e <= a)
                return 0;
        if (sp->n && sp->v[sp->n - 1].status == status && a <= sp->v[sp->n - 1].end_ns) {
                sp->v[sp->n - 1].end_ns = MAX(sp->v[sp->n - 1].end_ns, e);
                return 0;
        }
        if (sp->n == sp->alloc) {
                size_t na = sp->alloc ? 2 * sp->alloc : 64;
                struct svg_cov_segment *nv = realloc(sp->v, na * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                sp->v = nv;
                sp->alloc = na;
        }
        sp->v[sp->n++] = (struct svg_cov_segment){ a, e, status, NULL };
        return 0;
}

/* Where the machine ran the release in [from, to): the steps of the window that hold its
 * intervals, each from its start to the end of its last interval (an interval longer than a
 * step is covered over its whole length). */
static int covered_spans(struct dash *x, const char *id, const char *release, int64_t from,
                         int64_t to, int64_t step, struct spans *ret) {
        char err[FARM_ERROR_MAX];
        struct farm_steps fs;
        int r = farm_machine_steps(x->db, id, from, to, (uint64_t) step, &fs, err);
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return r;
        }
        int ki = -1;
        for (unsigned k = 0; k < fs.kernels.n; k++)
                if (strcmp(fs.kernels.s[k], release) == 0)
                        ki = (int) k;
        for (size_t i = 0; ki >= 0 && r >= 0 && i < fs.n; i++)
                if (fs.v[i].kernels & (UINT64_C(1) << ki))
                        r = spans_add(ret, fs.v[i].start_ns, MIN(fs.v[i].data_end_ns, to),
                                      SVG_COV_COVERED);
        farm_steps_done(&fs);
        return r;
}

static int cmp_segment(const void *a, const void *b) {
        const struct svg_cov_segment *x = a, *y = b;
        return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* One machine's bar: problems over covered time over missing time, each at its exact times
 * (up to now; what is later is missing). */
static int machine_bar(struct dash *x, const char *release, const struct farm_verdict *v,
                       const struct farm_verdict_machine *m, int64_t start, int64_t end,
                       int64_t step, struct spans *bar) {
        int64_t known = MAX(MIN(end, x->now), start); /* what is later has not happened */
        struct spans cov = {}, prob = {};
        int r = 0;

        if (m->ran)
                r = covered_spans(x, m->id, release, start, known, step, &cov);
        for (size_t j = 0; r >= 0 && j < v->nproblems; j++) {
                const struct farm_problem *p = &v->problems[j];
                if (strcmp(p->machine, m->id) != 0)
                        continue;
                int64_t a = p->time_ns, e = MAX(p->has_end ? p->end_ns : a, a + 1);
                r = spans_add(&prob, MAX(a, start), MIN(e, known), SVG_COV_PROBLEM);
        }
        if (r >= 0 && prob.n > 1) { /* merge problems that overlap */
                qsort(prob.v, prob.n, sizeof(*prob.v), cmp_segment);
                size_t k = 0;
                for (size_t i = 1; i < prob.n; i++)
                        if (prob.v[i].start_ns <= prob.v[k].end_ns)
                                prob.v[k].end_ns = MAX(prob.v[k].end_ns, prob.v[i].end_ns);
                        else
                                prob.v[++k] = prob.v[i];
                prob.n = k + 1;
        }
        /* Walk the bar: at each point, a problem wins over coverage, coverage over nothing. */
        size_t ci = 0, pi = 0;
        for (int64_t t = start; r >= 0 && t < end;) {
                while (ci < cov.n && cov.v[ci].end_ns <= t)
                        ci++;
                while (pi < prob.n && prob.v[pi].end_ns <= t)
                        pi++;
                int64_t next = end;
                enum svg_cov_status st = SVG_COV_MISSING;
                if (pi < prob.n && prob.v[pi].start_ns <= t) {
                        st = SVG_COV_PROBLEM;
                        next = prob.v[pi].end_ns;
                } else {
                        if (pi < prob.n)
                                next = prob.v[pi].start_ns;
                        if (ci < cov.n && cov.v[ci].start_ns <= t) {
                                st = SVG_COV_COVERED;
                                next = MIN(next, cov.v[ci].end_ns);
                        } else if (ci < cov.n)
                                next = MIN(next, cov.v[ci].start_ns);
                }
                next = MIN(next, end);
                r = spans_add(bar, t, next, st);
                t = next;
        }
        free(cov.v);
        free(prob.v);
        return r;
}

static int coverage_plot(struct dash *x, const char *release, const struct farm_verdict *v,
                         struct svg_buf *out) {
        size_t n = v->nmachines;
        int64_t period = (int64_t) x->rule->period_ns, start = INT64_MAX;
        int64_t step = MAX(period / COV_BINS / (int64_t) NSEC_PER_SEC, 1) * (int64_t) NSEC_PER_SEC;
        struct svg_cov_machine *cm = calloc(MAX(n, 1), sizeof(*cm));
        struct spans *bars = calloc(MAX(n, 1), sizeof(*bars));
        char(*hrefs)[64] = calloc(MAX(n, 1), 64), (*names)[64] = calloc(MAX(n, 1), 64);
        int r = cm && bars && hrefs && names ? 0 : -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int64_t t = v->machines[i].ran ? dash_time_shown(v->machines[i].first_ns)
                                               : INT64_MIN;
                if (t != INT64_MIN)
                        start = MIN(start, t);
        }
        if (start == INT64_MAX)
                start = MAX(x->now - period, 0);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct farm_verdict_machine *m = &v->machines[i];
                char nb[16];
                snprintf(hrefs[i], 64, "/machines/%.32s", m->id);
                snprintf(names[i], 64, "%s", dash_name(m->id, m->hostname, nb));
                r = machine_bar(x, release, v, m, start, start + period, step, &bars[i]);
                if (r < 0) {
                        r = dash_fail_internal(x, r, NULL);
                        break;
                }
                /* The figure beside the bar is the verdict's, as in the table. */
                cm[i] = (struct svg_cov_machine){ .name = names[i],
                                                  .href = hrefs[i],
                                                  .segs = bars[i].v,
                                                  .nsegs = bars[i].n,
                                                  .covered_ns = m->covered_ns,
                                                  .covered_given = true };
        }
        if (r >= 0) {
                char title[400], d[32];
                snprintf(title, sizeof(title), "%.200s: coverage of the %s period per machine",
                         release, dash_fmt_days(d, period));
                struct svg_cov_plot pl = { .title = title,
                                           .start_ns = start,
                                           .target_ns = period,
                                           .machines = cm,
                                           .nmachines = n };
                r = svg_cov_render(out, &pl);
                if (r < 0) {
                        snprintf(x->a->err, sizeof(x->a->err), "coverage plot: %s", out->error);
                        r = dash_fail_internal(x, r, NULL);
                }
        }
        for (size_t k = 0; bars && k < n; k++)
                free(bars[k].v);
        free(bars);
        free(cm);
        free(hrefs);
        free(names);
        return r < 0 ? r : 1;
}

/* 1 and *ret, 0 answered (404), < 0 internal. */
static int kernel_verdict(struct dash *x, const char *release, struct farm_verdict **ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_verdict(x->db, x->rule, release, x->now, ret, err);
        if (r == -ENOENT) {
                dash_fail_page(x, 404, "no such kernel release: no machine ever ran %.256s",
                               release);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return dash_fail_internal(x, r, NULL);
        }
        return 1;
}

/* A figure of one side of a comparison ("–" when it did not run there). */
static char *cmp_lat(char buf[static 32], const struct farm_cmp_side *side, bool worst) {
        return dash_fmt_lat(buf,
                            !side->used ? -1 : (int64_t) (worst ? side->worst_ns : side->p99_9_ns));
}

static void kernel_compare(struct dash *x, const char *release, const struct farm_verdict *v,
                           const struct farm_comparison *cmp, const char *with, char *const *list,
                           size_t nlist) {
        FILE *f = x->f;
        char b1[32], b2[32], b3[32], b4[32], nb[16];
        size_t i;
        fputs("<h2 id=\"compare\">Comparison with an earlier kernel</h2>\n"
              "<form method=\"get\" action=\"\"><label>Compare with <select name=\"compare\">",
              f);
        for (i = 0; i < nlist; i++) {
                const char *s = list[i];
                if (strcmp(s, release) == 0)
                        continue;
                fputs("<option value=\"", f);
                dash_esc(f, s);
                fprintf(f, "\"%s>", cmp && strcmp(with, s) == 0 ? " selected" : "");
                dash_esc(f, s);
                fputs("</option>", f);
        }
        fputs("</select></label> <button type=\"submit\">Compare</button></form>\n", f);
        if (!cmp)
                return;
        fprintf(f, "<p id=\"regressions\">%" PRIu64 " regression%s against ", cmp->regressions,
                cmp->regressions == 1 ? "" : "s");
        dash_kernel_link(f, with);
        fputs(" (", f);
        dash_esc(f, cmp->rule);
        fputs(").</p>\n<div class=\"scroll\"><table class=\"compare\"><tr><th>machine</th>"
              "<th>scenario</th><th class=\"num\">worst, this</th><th class=\"num\">worst, "
              "other</th><th class=\"num\">p99.9, this</th><th class=\"num\">p99.9, other</th>"
              "<th>result</th></tr>\n",
              f);
        for (i = 0; i < cmp->n && i < COMPARE_ROWS_MAX; i++) {
                const struct farm_cmp_entry *e = &cmp->v[i];
                const struct farm_cmp_side *a = &e->side[0], *b = &e->side[1];
                const struct farm_verdict_machine *vm = dash_verdict_machine(v, e->machine);
                fputs("<tr><td>", f);
                if (vm)
                        dash_esc(f, dash_name(vm->id, vm->hostname, nb));
                else
                        fprintf(f, "<code>%.8s…</code>", e->machine);
                fputs("</td><td>", f);
                dash_esc(f, e->scenario[0] ? e->scenario : "none");
                fprintf(f,
                        "</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                        "<td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                        cmp_lat(b1, a, true), cmp_lat(b2, b, true), cmp_lat(b3, a, false),
                        cmp_lat(b4, b, false));
                if (a->used && b->used)
                        fputs(e->regression ? "<span class=\"bad\">✗ REGRESSION</span>" : "ok", f);
                else
                        fprintf(f, "only in %s", a->used ? "this" : "the other");
                fputs("</td></tr>\n", f);
        }
        fputs("</table></div>\n", f);
        dash_inventory_differences(x, v, cmp);
}

/* The heading, the rule and why the verdict is what it is. */
static void kernel_head(struct dash *x, const char *release, const struct farm_verdict *v) {
        FILE *f = x->f;
        char b1[32], b2[32], b3[32];
        fputs("<h1>Kernel ", f);
        dash_esc(f, release);
        fputs(" ", f);
        dash_verdict_badge(f, farm_verdict_status_name(v->status));
        fputs("</h1>\n<p class=\"note\">The verdict as of ", f);
        dash_put_time(f, v->at_ns);
        fprintf(f,
                "; rule: every gating machine (%" PRId64 ") covers %s under every required "
                "scenario, no violation, no unclean end, no silence over %s, no generator "
                "down over %s.</p>\n",
                (int64_t) v->gating_machines, dash_fmt_days(b1, (int64_t) x->rule->period_ns),
                dash_fmt_span(b2, (int64_t) x->rule->max_gap_ns),
                dash_fmt_span(b3, (int64_t) x->rule->load_down_max_ns));

        fputs("<h2 id=\"reasons\">Why</h2>\n<ul class=\"reasons\">", f);
        for (size_t i = 0; i < v->nreasons; i++) {
                fputs("<li>", f);
                dash_esc(f, v->reasons[i]);
                fputs("</li>", f);
        }
        if (!v->nreasons)
                fputs("<li>every requirement is met</li>", f);
        fputs("</ul>\n", f);
}

/* A problem's row: its kind, machine, time, message (with the flight recorder's culprit of a
 * violation), id and evidence. */
static void problem_row(struct dash *x, const struct farm_problem *p) {
        FILE *f = x->f;
        char nb[16];
        fputs("<tr><td class=\"bad\">", f);
        dash_esc(f, farm_problem_kind_name(p->kind));
        fputs("</td><td>", f);
        /* As this page has always named it: the hostname, else the start of the problem's id. */
        dash_esc(f, dash_name(p->id, p->hostname, nb));
        fputs("</td><td>", f);
        dash_put_time(f, p->time_ns);
        fputs("</td><td class=\"reason\">", f);
        dash_esc(f, p->message);
        if (p->kind == FARM_PROBLEM_VIOLATION && p->violation.culprit) {
                fputs("<br>", f);
                dash_culprit_html(f, p->violation.culprit, p->violation.trace,
                                  p->violation.trace > 0);
        }
        fputs("<br><span class=\"note\">id <code>", f);
        dash_esc(f, p->id);
        fputs("</code></span></td><td><a class=\"evidence\" href=\"", f);
        evidence_href(f, p, x->now);
        fputs("\">evidence</a></td></tr>\n", f);
}

/* The problems, those waived, and what the verdict still waits for. */
static void kernel_problems(struct dash *x, const struct farm_verdict *v) {
        FILE *f = x->f;
        size_t i;
        fprintf(f, "<h2 id=\"problems\">Problems (%" PRIu64 ")</h2>\n", v->problems_total);
        if (v->nproblems) {
                fputs("<div class=\"scroll\"><table class=\"problems\"><tr><th>kind</th>"
                      "<th>machine</th><th>time</th><th>what</th><th>evidence</th></tr>\n",
                      f);
                for (i = 0; i < v->nproblems; i++)
                        problem_row(x, &v->problems[i]);
                fputs("</table></div>\n", f);
                if (v->problems_total > v->nproblems)
                        fprintf(f, "<p class=\"note\">The first %zu are listed.</p>\n",
                                v->nproblems);
        } else
                fputs("<p>None.</p>\n", f);

        fprintf(f, "<h2 id=\"waived\">Waived problems (%zu)</h2>\n", v->nwaived);
        if (v->nwaived) {
                fputs("<div class=\"scroll\"><table class=\"waived\"><tr><th>problem</th>"
                      "<th>waived by</th><th>when</th><th>why</th><th>evidence</th></tr>\n",
                      f);
                for (i = 0; i < v->nwaived; i++) {
                        const struct farm_waived_problem *p = &v->waived[i];
                        fputs("<tr><td>", f);
                        dash_esc(f, p->problem.message);
                        fputs("</td><td>", f);
                        dash_esc(f, p->waiver.by);
                        fputs("</td><td>", f);
                        dash_put_time(f, p->waiver.created_ns);
                        fputs("</td><td>", f);
                        dash_esc(f, p->waiver.reason);
                        fputs("</td><td><a href=\"", f);
                        evidence_href(f, &p->problem, x->now);
                        fputs("\">evidence</a></td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p>None.</p>\n", f);

        fprintf(f, "<h2 id=\"missing\">Still waiting for (%zu)</h2>\n", v->nmissing);
        if (v->nmissing) {
                fputs("<ul class=\"missing\">", f);
                for (i = 0; i < v->nmissing; i++) {
                        fputs("<li>", f);
                        dash_esc(f, v->missing[i].message);
                        fputs("</li>", f);
                }
                fputs("</ul>\n", f);
        } else
                fputs("<p>Nothing.</p>\n", f);
}

/* The coverage plot and table of the gating machines, and the others that ran the release. */
static void kernel_coverage(struct dash *x, const char *release, const struct farm_verdict *v,
                            const struct svg_buf *cov) {
        FILE *f = x->f;
        char b1[32], b2[32], nb[16];
        size_t i;
        fputs("<h2 id=\"coverage\">Coverage</h2>\n<div class=\"plot\">", f);
        fputs(cov->data, f);
        fputs("</div><p class=\"note\"><a href=\"/plots/kernels/", f);
        dash_urlenc(f, release);
        fputs("/coverage.svg\">SVG</a></p>\n", f);
        if (v->nmachines) {
                fputs("<div class=\"scroll\"><table class=\"coverage\"><tr><th>gating machine"
                      "</th><th>status</th><th class=\"num\">covered</th><th class=\"num\">"
                      "still missing</th><th>scenarios</th></tr>\n",
                      f);
                for (i = 0; i < v->nmachines; i++) {
                        const struct farm_verdict_machine *m = &v->machines[i];
                        fputs("<tr><td>", f);
                        /* The release's window on a machine that ran it; a machine that
                         * has not has no such window: its page. */
                        fprintf(f, "<a href=\"/machines/%.32s", m->id);
                        if (m->ran) {
                                fputs("?window=kernel:", f);
                                dash_urlenc(f, release);
                        }
                        fputs("\">", f);
                        dash_esc(f, dash_name(m->id, m->hostname, nb));
                        fputs("</a></td><td>", f);
                        dash_verdict_badge(f, farm_machine_status_name(m->status));
                        fprintf(f, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td>",
                                dash_fmt_days(b1, m->covered_ns), dash_fmt_days(b2, m->missing_ns));
                        for (size_t j = 0; j < m->nscenarios; j++) {
                                const struct farm_scenario_cover *sc = &m->scenarios[j];
                                int64_t got = sc->covered_ns,
                                        need = sc->required ? sc->required_ns : -1;
                                fprintf(f, "%s<span class=\"%s\">", j ? ", " : "",
                                        need >= 0 && got < need ? "bad" : "");
                                dash_esc(f, sc->name);
                                fprintf(f, " %s", dash_fmt_span(b1, got));
                                if (need >= 0)
                                        fprintf(f, " of %s", dash_fmt_span(b2, need));
                                fputs("</span>", f);
                        }
                        fputs("</td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
        } else
                fputs("<p class=\"bad\">No gating machine is enrolled: the release cannot "
                      "qualify.</p>\n",
                      f);
        if (v->nothers) {
                fputs("<p>Also ran it (not gating): ", f);
                for (i = 0; i < v->nothers; i++) {
                        fputs(i ? ", " : "", f);
                        dash_link_machine(f, v->others[i].id, v->others[i].hostname, NULL);
                }
                fputs("</p>\n", f);
        }
}

int dash_page_kernel(struct dash *x, const char *release) {
        char err[FARM_ERROR_MAX];
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        char **list = NULL;
        size_t nlist = 0;
        struct farm_comparison cmp = {};
        struct svg_buf cov = {};
        const char *with = farm_args_get(x->args, "compare");
        int r;

        if ((r = kernel_verdict(x, release, &v)) <= 0)
                return r;
        if (with && !*with)
                with = NULL; /* the form sent without a choice */
        if (with) {
                r = farm_kernel_compare(
                        x->db, release, with, FARM_COMPARE_TOLERANCE_PERCENT_DEFAULT,
                        FARM_COMPARE_MIN_DIFFERENCE_NS_DEFAULT, 0, x->now, &cmp, err);
                if (r == -ENOENT) {
                        dash_fail_page(x, 400, "compare=%.256s: no such kernel release", with);
                        r = 0;
                        goto done;
                }
                if (r < 0) {
                        snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                        r = dash_fail_internal(x, r, NULL);
                        goto done;
                }
        }
        if ((r = farm_release_names(x->db, &list, &nlist, err)) < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                r = dash_fail_internal(x, r, NULL);
                goto done;
        }
        if ((r = coverage_plot(x, release, v, &cov)) <= 0)
                goto done;
        if ((r = dash_open_page(x)) < 0) {
                r = dash_fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        dash_page_begin(x, release, 300);
        kernel_head(x, release, v);
        kernel_problems(x, v);
        kernel_coverage(x, release, v, &cov);
        kernel_compare(x, release, v, with ? &cmp : NULL, with, list, nlist);
        dash_page_end(x);
        r = dash_finish_page(x, HTML);
done:
        if (r <= 0)
                dash_abandon_page(x);
        svg_buf_done(&cov);
        farm_comparison_done(&cmp);
        farm_strv_free(list, nlist);
        return r < 0 ? r : 0;
}

int dash_plot_coverage(struct dash *x, const char *release) {
        struct svg_buf out = {};
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        int r;
        if ((r = kernel_verdict(x, release, &v)) <= 0)
                return r;
        if ((r = coverage_plot(x, release, v, &out)) > 0)
                dash_finish_svg(x, &out);
        svg_buf_done(&out);
        return r < 0 ? r : 0;
}
