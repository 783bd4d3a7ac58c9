/* SPDX-License-Identifier: MIT */
/* The dashboard's machine page (GET /machines/{id}) and its plots: the window, the histogram
 * per CPU, the worst case over time, the lists of violations, silences, events and runs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "macro.h"
#include "dash-internal.h"
#include "params.h"
#include "histogram.h"
#include "svg.h"
#include "traces.h"
#include "timeutil.h"

#define LT_STEP_NS (300 * (int64_t) NSEC_PER_SEC) /* the long-term plot's 5-minute step */
#define LT_FINE_WINDOW_NS (12 * HOUR_NS)          /* shorter windows: one point per interval */
#define LT_POINTS_MAX 20000

struct window {
        int64_t from, to;
        int64_t hl_from, hl_to; /* hl_to <= hl_from: nothing highlighted */
        char name[64];          /* "1d", "30d", "kernel:..." or "" for from/to */
        char kernel[SUMMARY_MAX_RELEASE + 1];
};

/* ?window=1d|30d|kernel:RELEASE, or ?from=&to= (one of them: a day from or up to it), and
 * ?hl_from=&hl_to= (a span to highlight).  By default the last day up to now, or up to the
 * end of the latest data (and a little after) for a machine that is silent. */
static int parse_window(struct dash *x, const struct dash_machine *m, struct window *w) {
        char perr[FARM_PARAM_ERROR_MAX];
        const char *win = farm_args_get(x->args, "window"), *f = farm_args_get(x->args, "from"),
                   *t = farm_args_get(x->args, "to"), *hf = farm_args_get(x->args, "hl_from"),
                   *ht = farm_args_get(x->args, "hl_to");
        *w = (struct window){};
        if (win && (f || t)) {
                dash_fail_page(x, 400, "window=%.64s: give either window= or from=/to=, not both",
                               win);
                return -EINVAL;
        }
        int64_t end = m->silent ? MIN(x->now, m->last_data_ns + HOUR_NS) : x->now;
        if (!win && !f && !t)
                win = "1d";
        if (win && (strcmp(win, "1d") == 0 || strcmp(win, "30d") == 0)) {
                w->to = end;
                w->from = end - (win[0] == '1' ? 1 : 30) * DAY_NS;
                snprintf(w->name, sizeof(w->name), "%s", win);
        } else if (win && strncmp(win, "kernel:", 7) == 0 && win[7]) {
                const char *rel = win + 7;
                bool any = false;
                for (size_t i = 0; i < m->runs.n; i++) {
                        const struct farm_run *run = &m->runs.v[i];
                        /* By the release it counts for (the kernel page links so) or by
                         * its uname -r (the machine's current kernel). */
                        const char *k = run->kernel_release, *named = run->release;
                        int64_t a = run->first_data_ns, b = run->last_data_ns;
                        if ((!k || strcmp(k, rel) != 0) && (!named || strcmp(named, rel) != 0))
                                continue;
                        if (a == FARM_NONE || b == FARM_NONE)
                                continue;
                        w->from = any ? MIN(w->from, a) : a;
                        w->to = any ? MAX(w->to, b) : b;
                        any = true;
                }
                if (!any) {
                        dash_fail_page(x, 400,
                                       "window=%.300s: this machine has no data of kernel %.256s "
                                       "(expected 1d, 30d or kernel:RELEASE of one of its runs)",
                                       win, rel);
                        return -EINVAL;
                }
                snprintf(w->name, sizeof(w->name), "kernel");
                snprintf(w->kernel, sizeof(w->kernel), "%s", rel);
        } else if (win) {
                dash_fail_page(x, 400, "window=%.64s: expected 1d, 30d or kernel:RELEASE", win);
                return -EINVAL;
        } else if (farm_param_window(f, t, x->now, DAY_NS, &w->from, &w->to, perr) < 0) {
                dash_fail_page(x, 400, "%s", perr);
                return -EINVAL;
        }
        if (farm_param_time("hl_from", hf, x->now, &w->hl_from, perr) < 0 ||
            farm_param_time("hl_to", ht, x->now, &w->hl_to, perr) < 0) {
                dash_fail_page(x, 400, "%s", perr);
                return -EINVAL;
        }
        if (!hf != !ht || (hf && w->hl_from >= w->hl_to)) {
                dash_fail_page(x, 400, "hl_from=, hl_to=: give both, hl_from before hl_to");
                return -EINVAL;
        }
        return 0;
}

/* A point in time as a parameter: Unix nanoseconds, or "@SECONDS.NANOSECONDS" before 1970-01-12
 * (a plain number of fewer than 16 digits is refused as probably meant as seconds). */
static const char *time_arg(char buf[static 40], int64_t ns) {
        if (ns >= INT64_C(1000000000000000))
                snprintf(buf, 40, "%" PRId64, ns);
        else
                snprintf(buf, 40, "@%" PRId64 ".%09" PRId64, ns / (int64_t) NSEC_PER_SEC,
                         ns % (int64_t) NSEC_PER_SEC);
        return buf;
}

/* The query string that selects the same window ("?window=30d", "?from=..&to=.."), with
 * "&amp;" when for HTML. */
static void window_query(char *buf, size_t size, const struct window *w, bool html, bool hl) {
        const char *amp = html ? "&amp;" : "&";
        char t1[40], t2[40];
        size_t o;
        if (w->name[0] && strcmp(w->name, "kernel") != 0)
                o = (size_t) snprintf(buf, size, "?window=%s", w->name);
        else if (w->name[0]) {
                char k[3 * SUMMARY_MAX_RELEASE + 1];
                dash_urlenc_buf(k, sizeof(k), w->kernel);
                o = (size_t) snprintf(buf, size, "?window=kernel:%s", k);
        } else
                o = (size_t) snprintf(buf, size, "?from=%s%sto=%s", time_arg(t1, w->from), amp,
                                      time_arg(t2, w->to));
        if (hl && w->hl_to > w->hl_from && o < size)
                snprintf(buf + o, size - o, "%shl_from=%s%shl_to=%s", amp, time_arg(t1, w->hl_from),
                         amp, time_arg(t2, w->hl_to));
}

/* The longest interval of the machine's runs with data in the window (0: none). */
static int64_t window_interval(const struct dash_machine *m, const struct window *w) {
        int64_t iv = 0;
        for (size_t i = 0; i < m->runs.n; i++) {
                const struct farm_run *run = &m->runs.v[i];
                int64_t first = run->first_data_ns, last = run->last_data_ns;
                if (first != FARM_NONE && last != FARM_NONE && first < w->to && last > w->from)
                        iv = MAX(iv, run->interval_ns != FARM_NONE ? run->interval_ns : 0);
        }
        return iv;
}

/* The long-term plot's step: 5 minutes (or the longest interval of the window when longer,
 * so that no step falls between two intervals); one point per interval in a short window;
 * longer steps when the window would hold too many. */
static int64_t lt_step(const struct dash_machine *m, const struct window *w) {
        int64_t iv = MAX(window_interval(m, w), m->interval_ns);
        if (iv <= 0)
                iv = 60 * (int64_t) NSEC_PER_SEC;
        int64_t step = w->to - w->from <= LT_FINE_WINDOW_NS ? iv : MAX(LT_STEP_NS, iv);
        int64_t n = (w->to - w->from) / step;
        if (n > LT_POINTS_MAX)
                step *= (n + LT_POINTS_MAX - 1) / LT_POINTS_MAX;
        return step;
}

/* The histogram plot's CPUs as they are merged: each reduced to the plot's columns at once
 * (6 KiB a CPU, whatever its histogram), the axis known from all CPUs merged. */
struct plot_cpus {
        uint64_t bound_us, x_limit_us;
        struct svg_hist_cpu *cpus;
        struct svg_hist_columns *cols;
        size_t n;
};

static uint32_t last_exact_bucket(const struct farm_acc *c) {
        for (uint32_t i = c->h.counts ? MIN(c->h.limit_us, c->h.nbuckets) : 0; i > 0; i--)
                if (c->h.counts[i - 1])
                        return i;
        return 0;
}

static int plot_cpu(void *userdata, int64_t cpu, const struct farm_acc *acc,
                    const struct farm_acc *all) {
        struct plot_cpus *p = userdata;
        if (!p->x_limit_us)
                p->x_limit_us = svg_hist_axis_end(p->bound_us, last_exact_bucket(all));
        if (cpu < 0 || !acc->samples)
                return 0;
        if (!farm_grow((void **) &p->cpus, p->n, sizeof(*p->cpus)) ||
            !farm_grow((void **) &p->cols, p->n, sizeof(*p->cols)))
                return -ENOMEM;
        uint32_t limit = MIN(acc->h.limit_us, acc->h.nbuckets);
        uint64_t overflow = 0;
        for (uint32_t i = limit; i < acc->h.nbuckets; i++)
                overflow += acc->h.counts[i];
        svg_hist_reduce(p->x_limit_us, p->bound_us, acc->h.counts, limit, overflow, &p->cols[p->n]);
        p->cpus[p->n] = (struct svg_hist_cpu){ .cpu = (unsigned) cpu,
                                               .nbuckets = limit,
                                               .overflow = overflow,
                                               .max_ns = acc->max_ns };
        p->n++;
        return 0;
}

static int machine_hist(struct dash *x, const struct dash_machine *m, const struct window *w,
                        struct svg_buf *out) {
        char title[400], nb[16];
        /* A bound beyond the exact ranges (a threshold of minutes) is not drawn. */
        struct plot_cpus p = { .bound_us = MIN((uint64_t) m->bound_ns / 1000,
                                               (uint64_t) HIST_LIMIT_US_MAX * 1000) };
        int r = farm_machine_hists(x->db, m->id, w->from, w->to, x->now, plot_cpu, &p, x->a->err);
        /* The columns move with realloc: pointed at once all are there. */
        for (size_t i = 0; r >= 0 && i < p.n; i++)
                p.cpus[i].cols = &p.cols[i];
        snprintf(title, sizeof(title), "%s: latency histogram per CPU",
                 dash_machine_name(&m->info, nb));
        if (r >= 0) {
                struct svg_hist_plot plot = { .title = title,
                                              .cpus = p.cpus,
                                              .ncpus = p.n,
                                              .bound_us = p.bound_us,
                                              .x_limit_us = p.x_limit_us };
                r = svg_hist_render(out, &plot);
                if (r < 0)
                        snprintf(x->a->err, sizeof(x->a->err), "histogram plot: %s", out->error);
        }
        free(p.cpus);
        free(p.cols);
        if (r < 0)
                return dash_fail_internal(x, r, "dashboard: histogram plot");
        return 1;
}

/* The steps of a machine's window, as the long-term plot and the lists need them: computed
 * by the same code as the intervals query, without the JSON of thousands of steps. */
struct steps {
        struct farm_steps fs;
        int64_t step_ns;
};

/* Where the data of a step ends: its end, or later when an interval in it is longer. */
static int64_t step_end(const struct steps *s, const struct farm_step *st) {
        return MAX(st->start_ns + s->step_ns, st->data_end_ns);
}

static int machine_steps(struct dash *x, const struct dash_machine *m, const struct window *w,
                         struct steps *s) {
        char err[FARM_ERROR_MAX];
        s->step_ns = lt_step(m, w);
        int r = farm_machine_steps(x->db, m->id, w->from, w->to, (uint64_t) s->step_ns, &s->fs,
                                   err);
        if (r == -E2BIG || r == -ENOSPC || r == -EINVAL) {
                dash_fail_page(x, 400,
                               "the window holds too much to show: %s; narrow it (from=, to=)",
                               err);
                return 0;
        }
        if (r < 0) {
                snprintf(x->a->err, sizeof(x->a->err), "%s", err);
                return dash_fail_internal(x, r, NULL);
        }
        return 1;
}

static int machine_lt(struct dash *x, const struct dash_machine *m, const struct window *w,
                      const struct steps *s, struct svg_buf *out) {
        size_t n = s->fs.n;
        struct svg_lt_point *pts = calloc(MAX(n, 1), sizeof(*pts));
        struct svg_lt_mark *marks = calloc(MAX(n, 1), sizeof(*marks));
        struct svg_lt_band *bands = calloc(MAX(n, 1), sizeof(*bands));
        char *text = malloc(MAX(n, 1) * 256);
        size_t nm = 0, nb = 0;
        const char *prev_kernel = NULL;
        char title[400], hl[300], namebuf[16];
        int r = pts && marks && bands && text ? 0 : -ENOMEM;

        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct farm_step *st = &s->fs.v[i];
                int64_t t = st->start_ns;
                const char *scen = dash_step_name(&s->fs.scenarios, st->scenarios);
                const char *kern = dash_step_name(&s->fs.kernels, st->kernels);
                char *href = text + i * 256, *detail = href + 128;
                snprintf(href, 128,
                         "/machines/%s?from=%" PRId64 "&to=%" PRId64 "&hl_from=%" PRId64
                         "&hl_to=%" PRId64,
                         m->id, t - ZOOM_NS, t + s->step_ns + ZOOM_NS, t, t + s->step_ns);
                snprintf(detail, 128, "CPU %" PRId64 ", scenario %.40s, kernel %.60s", st->max_cpu,
                         *scen ? scen : "none", kern);
                pts[i] = (struct svg_lt_point){
                        .t_ns = t, .max_ns = (int64_t) st->max_ns, .href = href, .detail = detail
                };
                if (prev_kernel && strcmp(prev_kernel, kern) != 0)
                        marks[nm++] = (struct svg_lt_mark){ .t_ns = t, .label = kern };
                prev_kernel = kern;
                if (nb > 0 && strcmp(bands[nb - 1].scenario, scen) == 0 &&
                    bands[nb - 1].end_ns >= t - s->step_ns / 2)
                        bands[nb - 1].end_ns = MAX(bands[nb - 1].end_ns, step_end(s, st));
                else
                        bands[nb++] = (struct svg_lt_band){
                                .start_ns = nb ? MAX(t, bands[nb - 1].end_ns) : t,
                                .end_ns = step_end(s, st),
                                .scenario = scen
                        };
        }
        if (r >= 0) {
                char sp[TIMESPAN_MAX_LEN];
                snprintf(title, sizeof(title), "%s: worst case per %s step",
                         dash_machine_name(&m->info, namebuf),
                         format_timespan(sp, (uint64_t) s->step_ns));
                snprintf(hl, sizeof(hl), "the evidence linked to");
                struct svg_lt_plot p = { .title = title,
                                         .points = pts,
                                         .npoints = n,
                                         .step_ns = s->step_ns,
                                         .bound_ns = m->bound_ns,
                                         .scale = SVG_SCALE_LOG,
                                         .start_ns = w->from,
                                         .end_ns = w->to,
                                         .marks = marks,
                                         .nmarks = nm,
                                         .bands = bands,
                                         .nbands = nb,
                                         .hl_start_ns = w->hl_from,
                                         .hl_end_ns = w->hl_to,
                                         .hl_label = hl };
                r = svg_lt_render(out, &p);
                if (r < 0)
                        snprintf(x->a->err, sizeof(x->a->err), "long-term plot: %s", out->error);
        }
        free(pts);
        free(marks);
        free(bands);
        free(text);
        if (r < 0)
                return dash_fail_internal(x, r, "dashboard: long-term plot");
        return 1;
}

static void window_nav(struct dash *x, const struct dash_machine *m, const struct window *w) {
        static const char *const wins[] = { "1d", "30d" };
        FILE *f = x->f;
        fputs("<nav class=\"windows\">Window: ", f);
        for (size_t i = 0; i < ELEMENTSOF(wins); i++) {
                if (strcmp(w->name, wins[i]) == 0)
                        fprintf(f, "<strong>%s</strong>", wins[i]);
                else
                        fprintf(f, "<a href=\"/machines/%s?window=%s\">%s</a>", m->id, wins[i],
                                wins[i]);
        }
        const char *k = dash_machine_kernel(m);
        if (k) {
                if (strcmp(w->name, "kernel") == 0 && strcmp(w->kernel, k) == 0)
                        fputs("<strong>current kernel</strong>", f);
                else {
                        fprintf(f, "<a href=\"/machines/%s?window=kernel:", m->id);
                        dash_urlenc(f, k);
                        fputs("\">current kernel</a>", f);
                }
        }
        fputs(" · showing ", f);
        dash_put_time(f, w->from);
        fputs(" to ", f);
        char sp[32];
        /* A window that reaches past now (its data stamped ahead, or asked so) says so. */
        if (w->to > x->now + (int64_t) x->rule->clock_tolerance_ns) {
                fputs("<span class=\"clock-ahead\">", f);
                dash_put_time(f, w->to);
                fprintf(f, " <span class=\"bad\">⚠ %s after now</span></span>",
                        dash_fmt_span(sp, w->to - x->now));
        } else
                dash_put_time(f, w->to);
        fprintf(f, " (%s)</nav>\n", dash_fmt_span(sp, w->to - w->from));
}

/* The next step from *i on that the violations table shows (over the machine's bound, among
 * the first LIST_MAX of those), or NULL. */
static const struct farm_step *next_shown(const struct dash_machine *m, const struct steps *s,
                                          size_t *i, size_t *shown) {
        for (; *i < s->fs.n && *shown < LIST_MAX; (*i)++)
                if ((int64_t) s->fs.v[*i].max_ns > m->bound_ns) {
                        (*shown)++;
                        return &s->fs.v[(*i)++];
                }
        return NULL;
}

/* Whether the machine has any capture in the span of the steps the list shows: one without
 * (its flight recorder off, or nothing captured) is not asked once for each of its rows (up
 * to LIST_MAX statements, each a round trip on PostgreSQL). */
static bool any_capture(struct dash *x, const struct dash_machine *m, const struct steps *s) {
        int64_t from = INT64_MAX, to = INT64_MIN;
        size_t i = 0, shown = 0;
        for (const struct farm_step *st; (st = next_shown(m, s, &i, &shown));) {
                from = MIN(from, st->start_ns);
                to = MAX(to, st->start_ns + s->step_ns);
        }
        bool any = true;
        if (shown && farm_trace_any_machine(x->db, m->id, from, to, &any) < 0)
                any = true; /* then each row asks for itself */
        return shown && any;
}

/* The steps whose worst case is over the machine's bound. */
static void list_violations(struct dash *x, const struct dash_machine *m, const struct window *w,
                            const struct steps *s) {
        FILE *f = x->f;
        char b1[32];
        const struct farm_step *st;
        size_t i;

        size_t nviol = 0;
        for (i = 0; i < s->fs.n; i++)
                nviol += (int64_t) s->fs.v[i].max_ns > m->bound_ns;
        fprintf(f, "<h2 id=\"violations\">Violations (%zu step%s over the bound of %s)</h2>\n",
                nviol, nviol == 1 ? "" : "s", dash_fmt_lat(b1, m->bound_ns));
        if (nviol) {
                fputs("<div class=\"scroll\"><table class=\"violations\"><tr><th>time of the "
                      "maximum</th><th class=\"num\">worst</th><th class=\"num\">CPU</th>"
                      "<th>scenario</th><th>kernel</th><th>culprit</th><th></th></tr>\n",
                      f);
                size_t shown = 0;
                bool traced = any_capture(x, m, s);
                for (i = 0; (st = next_shown(m, s, &i, &shown));) {
                        int64_t t = st->start_ns, mt = st->max_time_ns;
                        bool hl = w->hl_to > w->hl_from && mt >= w->hl_from && t < w->hl_to;
                        fprintf(f, "<tr%s><td>", hl ? " class=\"hl\"" : "");
                        dash_put_time(f, mt);
                        fprintf(f,
                                "</td><td class=\"num bad\">%s</td><td class=\"num\">%" PRId64
                                "</td><td>",
                                dash_fmt_lat(b1, (int64_t) st->max_ns), st->max_cpu);
                        dash_esc(f, dash_step_name(&s->fs.scenarios, st->scenarios));
                        fputs("</td><td>", f);
                        dash_kernel_link(f, dash_step_name(&s->fs.kernels, st->kernels));
                        fputs("</td><td>", f);
                        struct farm_trace_brief tb;
                        if (traced && farm_trace_find_machine(x->db, m->id, (int) st->max_cpu, t,
                                                              t + s->step_ns, mt, &tb) == 0)
                                dash_culprit_html(f, tb.summary, tb.id, tb.raw);
                        else
                                fputs("–", f);
                        fputs("</td><td><a href=\"", f);
                        dash_zoom_href(f, m->id, t, t + s->step_ns);
                        fputs("\">zoom</a></td></tr>\n", f);
                }
                fputs("</table></div>\n", f);
                if (nviol > LIST_MAX)
                        fprintf(f, "<p class=\"note\">and %zu more; narrow the window.</p>\n",
                                nviol - LIST_MAX);
        } else
                fputs("<p>None in this window.</p>\n", f);
}

/* The holes between the steps longer than the allowed gap, and the ongoing one. */
static void list_silences(struct dash *x, const struct dash_machine *m, const struct window *w,
                          const struct steps *s) {
        FILE *f = x->f;
        char b1[32];
        size_t i;

        fputs("<h2 id=\"silences\">Silences</h2>\n", f);
        size_t nsil = m->silent;
        int64_t prev_end = INT64_MIN;
        for (i = 0; i < s->fs.n; i++) {
                int64_t t = s->fs.v[i].start_ns;
                nsil += prev_end != INT64_MIN && t - prev_end > (int64_t) x->rule->max_gap_ns;
                prev_end = MAX(prev_end, step_end(s, &s->fs.v[i]));
        }
        if (nsil)
                fputs("<div class=\"scroll\"><table class=\"silences\"><tr><th>from</th>"
                      "<th>to</th><th class=\"num\">length</th><th></th></tr>\n",
                      f);
        size_t shown = 0;
        prev_end = INT64_MIN;
        for (i = 0; i < s->fs.n; i++) {
                int64_t t = s->fs.v[i].start_ns;
                if (prev_end != INT64_MIN && t - prev_end > (int64_t) x->rule->max_gap_ns &&
                    shown++ < LIST_MAX) {
                        bool hl = w->hl_to > w->hl_from && prev_end < w->hl_to && t > w->hl_from;
                        fprintf(f, "<tr%s><td>", hl ? " class=\"hl\"" : "");
                        dash_put_time(f, prev_end);
                        fputs("</td><td>", f);
                        dash_put_time(f, t);
                        fprintf(f, "</td><td class=\"num\">%s</td><td><a href=\"",
                                dash_fmt_span(b1, t - prev_end));
                        dash_zoom_href(f, m->id, prev_end, t);
                        fputs("\">zoom</a></td></tr>\n", f);
                }
                prev_end = MAX(prev_end, step_end(s, &s->fs.v[i]));
        }
        if (m->silent) {
                fputs("<tr class=\"silent\"><td>", f);
                dash_put_time(f, m->last_data_ns);
                fprintf(f,
                        "</td><td><strong>still silent</strong></td><td class=\"num\">%s</td>"
                        "<td></td></tr>\n",
                        dash_fmt_span(b1, x->now - m->last_data_ns));
        }
        if (nsil)
                fputs("</table></div>\n", f);
        if (shown > LIST_MAX)
                fprintf(f, "<p class=\"note\">and %zu more; narrow the window.</p>\n",
                        shown - LIST_MAX);
        if (!nsil)
                fprintf(f,
                        "<p>None in this window: no hole longer than the allowed gap of %s.</p>\n",
                        dash_fmt_span(b1, (int64_t) x->rule->max_gap_ns));
}

/* The events of the window: unclean ends, generator failures, the machine's own violation
 * events. */
static void list_events(struct dash *x, const struct farm_event_page *events) {
        FILE *f = x->f;
        char b2[32];

        size_t total = (size_t) events->total;
        fprintf(f, "<h2 id=\"events\">Events (%zu)</h2>\n", total);
        if (events->n) {
                fputs("<div class=\"scroll\"><table class=\"events\"><tr><th>time</th>"
                      "<th>type</th><th class=\"num\">CPU</th><th class=\"num\">value</th>"
                      "<th>message</th><th class=\"num\">run</th></tr>\n",
                      f);
                for (size_t i = 0; i < events->n; i++) {
                        const struct farm_event *ev = &events->v[i];
                        const char *type = ev->type ?: "";
                        fputs("<tr><td>", f);
                        dash_put_time(f, ev->time_ns != FARM_NONE ? ev->time_ns : 0);
                        fprintf(f, "</td><td class=\"%s\">",
                                strcmp(type, "scenario") == 0 ? "" : "bad");
                        dash_esc(f, type);
                        fputs("</td><td class=\"num\">", f);
                        if (ev->cpu != FARM_NONE)
                                fprintf(f, "%" PRId64, ev->cpu);
                        fputs("</td><td class=\"num\">", f);
                        if (ev->value != FARM_NONE)
                                fputs(strcmp(type, "violation") == 0
                                              ? dash_fmt_lat(b2, ev->value)
                                              : (snprintf(b2, sizeof(b2), "%" PRId64, ev->value),
                                                 b2),
                                      f);
                        fputs("</td><td>", f);
                        dash_esc(f, ev->message);
                        fprintf(f, "</td><td class=\"num\">%" PRId64 "</td></tr>\n",
                                ev->run != FARM_NONE ? ev->run : 0);
                }
                fputs("</table></div>\n", f);
                if (total > events->n)
                        fprintf(f, "<p class=\"note\">The latest %zu are shown.</p>\n", events->n);
        } else
                fputs("<p>None in this window.</p>\n", f);
}

static void machine_lists(struct dash *x, const struct dash_machine *m, const struct window *w,
                          const struct steps *s, const struct farm_event_page *events) {
        list_violations(x, m, w, s);
        list_silences(x, m, w, s);
        list_events(x, events);
}

static void machine_runs(struct dash *x, const struct dash_machine *m) {
        FILE *f = x->f;
        char b[32];
        fprintf(f, "<h2 id=\"runs\">Runs (%zu)</h2>\n", m->runs.n);
        if (!m->runs.n) {
                fputs("<p>No run reported yet.</p>\n", f);
                return;
        }
        fputs("<div class=\"scroll\"><table class=\"runs\"><tr><th class=\"num\">run</th>"
              "<th>kernel</th><th>boot</th><th>started</th><th>last data</th>"
              "<th class=\"num\">intervals</th><th class=\"num\">worst</th><th>end</th></tr>\n",
              f);
        for (size_t i = 0; i < m->runs.n; i++) {
                const struct farm_run *run = &m->runs.v[i];
                const char *boot = run->boot_id ?: "";
                fprintf(f, "<tr><td class=\"num\">%" PRId64 "</td><td>",
                        run->id != FARM_NONE ? run->id : 0);
                dash_kernel_link(f, run->kernel_release);
                fputs("<br><span class=\"note\">", f);
                dash_esc(f, run->preempt_model);
                fputs("</span></td><td><code title=\"", f);
                dash_esc(f, boot);
                fprintf(f, "\">%.8s</code></td><td>", boot);
                /* As stamped, marked where later than their arrival. */
                dash_put_stamp(x, run->start_ns != FARM_NONE ? run->start_ns : 0,
                               run->first_report_ns);
                fputs("</td><td>", f);
                if (run->last_data_ns != FARM_NONE)
                        dash_put_stamp(x, run->last_data_ns, run->last_received_ns);
                else
                        fputs("–", f);
                fprintf(f, "</td><td class=\"num\">%" PRId64 "</td><td class=\"num\">%s</td><td>",
                        run->intervals,
                        dash_fmt_lat(b, run->worst_latency_ns != FARM_NONE ? run->worst_latency_ns
                                                                           : -1));
                if (run->end.unclean) {
                        fputs("<span class=\"bad\">✗ unclean end</span> found ", f);
                        dash_put_time(f, run->end.time_ns != FARM_NONE ? run->end.time_ns : 0);
                        fputs(": ", f);
                        dash_esc(f, run->end.message);
                } else if (i > 0)
                        fputs("ended cleanly", f);
                else if (m->silent)
                        fputs("<span class=\"bad\">silent</span> (no end reported)", f);
                else
                        fputs("running", f);
                fputs("</td></tr>\n", f);
        }
        fputs("</table></div>\n", f);
}

/* The latest events of the window, and how many it holds: 1, or 0 answered (400), < 0
 * internal. */
static int machine_events(struct dash *x, const struct dash_machine *m, const struct window *w,
                          struct farm_event_page *ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_machine_events(x->db, m->id, w->from, w->to, NULL,
                                    &(struct farm_page){ LIST_MAX, 0 }, ret, err);
        return dash_machine_read(x, r, err);
}

/* The machine of a page or plot and the window its parameters ask for: 1 with both filled, 0
 * answered (a refusal page), < 0 internal. */
static int machine_and_window(struct dash *x, const char *id, struct dash_machine *m,
                              struct window *w) {
        int r = dash_machine_load(x, id, m);
        if (r <= 0)
                return r;
        if (parse_window(x, m, w) < 0) {
                dash_machine_done(m);
                return 0;
        }
        return 1;
}

/* When its last upload arrived, and where its data ends as the server takes it. */
static void machine_reports(struct dash *x, const struct dash_machine *m) {
        FILE *f = x->f;
        int64_t report = m->info.last_report_ns;
        fputs("<tr><th>last report</th><td id=\"last-report\">", f);
        if (report != FARM_NONE)
                dash_put_time(f, report);
        else
                fputs("never", f);
        fputs("</td><th>data until</th><td id=\"last-data\">", f);
        if (m->has_data)
                dash_put_time(f, m->last_data_ns);
        else
                fputs("–", f);
        fputs("</td><th></th><td></td></tr></table>\n", f);
}

int dash_page_machine(struct dash *x, const char *id) {
        struct dash_machine m;
        struct window w;
        struct steps s = {};
        struct svg_buf hist = {}, lt = {};
        struct farm_event_page events = {};
        struct farm_inventory_history inv = {};
        char q[3 * SUMMARY_MAX_RELEASE + 400], nb[16], b1[32], b2[32];
        int r;

        if ((r = machine_and_window(x, id, &m, &w)) <= 0)
                return r;
        if ((r = machine_steps(x, &m, &w, &s)) <= 0 ||
            (r = machine_events(x, &m, &w, &events)) <= 0 ||
            (r = dash_inventory_load(x, m.id, &inv)) <= 0 ||
            (r = machine_hist(x, &m, &w, &hist)) <= 0 || (r = machine_lt(x, &m, &w, &s, &lt)) <= 0)
                goto done;
        if ((r = dash_open_page(x)) < 0) {
                r = dash_fail_internal(x, r, "dashboard: no memory for the page");
                goto done;
        }
        FILE *f = x->f;
        const char *name = dash_machine_name(&m.info, nb);
        dash_page_begin(x, name, 300);
        if (m.silent) {
                fputs("<div class=\"alert\" id=\"silent\"><strong>⚠ SILENT</strong> — ", f);
                dash_esc(f, name);
                fputs(" has sent no data since ", f);
                dash_put_time(f, m.last_data_ns);
                fprintf(f, " (%s; allowed gap %s).</div>\n",
                        dash_fmt_span(b1, x->now - m.last_data_ns),
                        dash_fmt_span(b2, (int64_t) x->rule->max_gap_ns));
        }
        fputs("<h1>", f);
        dash_esc(f, name);
        fputs("</h1>\n<table class=\"facts\"><tr><th>state</th><td>", f);
        dash_put_state(x, &m);
        fputs("</td><th>kernel</th><td>", f);
        dash_kernel_link(f, dash_machine_kernel(&m));
        fprintf(f,
                "</td><th>bound</th><td class=\"num\">%s</td></tr>\n<tr><th>machine id</th>"
                "<td><code>%s</code></td><th>CPUs</th><td>%" PRId64 " · ",
                dash_fmt_lat(b1, m.bound_ns), m.id, m.info.cpus != FARM_NONE ? m.info.cpus : 0);
        dash_esc(f, m.info.cpu_model);
        fprintf(f, "</td><th>gating</th><td>%s</td></tr>\n", m.info.gating ? "yes" : "no");
        machine_reports(x, &m);
        window_nav(x, &m, &w);
        if (w.hl_to > w.hl_from) {
                fputs("<p class=\"note\" id=\"highlight\">Highlighted (dashed box): ", f);
                dash_put_time(f, w.hl_from);
                fputs(" to ", f);
                dash_put_time(f, w.hl_to);
                fputs(".</p>\n", f);
        }
        window_query(q, sizeof(q), &w, true, false);
        fputs("<h2 id=\"histogram\">Latency histogram</h2>\n<div class=\"plot\">", f);
        fputs(hist.data, f);
        fprintf(f,
                "</div><p class=\"note\">One curve per CPU; samples on a logarithmic axis. "
                "<a href=\"/plots/machines/%s/histogram.svg%s\">SVG</a></p>\n",
                m.id, q);
        window_query(q, sizeof(q), &w, true, true);
        fputs("<h2 id=\"longterm\">Worst case over time</h2>\n<div class=\"plot\">", f);
        fputs(lt.data, f);
        fprintf(f,
                "</div><p class=\"note\">Each point is the worst latency of a step on any "
                "CPU; the dashed line is the bound, vertical lines are kernel changes, the "
                "strip under the plot the scenarios. Click a point to zoom. "
                "<a href=\"/plots/machines/%s/longterm.svg%s\">SVG</a></p>\n",
                m.id, q);
        machine_lists(x, &m, &w, &s, &events);
        dash_inventory_section(x, &inv);
        machine_runs(x, &m);
        dash_page_end(x);
        r = dash_finish_page(x, HTML);
done:
        if (r <= 0)
                dash_abandon_page(x);
        svg_buf_done(&hist);
        svg_buf_done(&lt);
        farm_steps_done(&s.fs);
        farm_event_page_done(&events);
        farm_inventory_history_done(&inv);
        dash_machine_done(&m);
        return r < 0 ? r : 0;
}

/* /plots/machines/{id}/histogram.svg and longterm.svg */
int dash_plot_machine(struct dash *x, const char *id, bool histogram) {
        struct dash_machine m;
        struct window w;
        struct steps s = {};
        struct svg_buf out = {};
        int r;
        if ((r = machine_and_window(x, id, &m, &w)) <= 0)
                return r;
        if (histogram)
                r = machine_hist(x, &m, &w, &out);
        else if ((r = machine_steps(x, &m, &w, &s)) > 0)
                r = machine_lt(x, &m, &w, &s, &out);
        if (r > 0)
                dash_finish_svg(x, &out);
        svg_buf_done(&out);
        farm_steps_done(&s.fs);
        dash_machine_done(&m);
        return r < 0 ? r : 0;
}
