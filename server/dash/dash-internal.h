/* SPDX-License-Identifier: MIT */
/* Inside the dashboard: one request (struct dash), what its pages share (formats, the page
 * around the content, errors as pages, a machine as the pages show it), and the pages that
 * server-dash.c routes to. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "macro.h"
#include "comparison.h"
#include "dash.h"
#include "machines.h"
#include "steps.h"
#include "svg.h"
#include "timeutil.h"
#include "verdict.h"

#define HOUR_NS (3600 * (int64_t) NSEC_PER_SEC)
#define DAY_NS FARM_DAY_NS
#define ZOOM_NS (3 * HOUR_NS) /* an evidence link shows this much either side */
#define LIST_MAX 200          /* rows of a list on a page; the rest is counted */
#define HTML "text/html; charset=utf-8"
#define SVG "image/svg+xml; charset=utf-8"

/* One request of the dashboard. */
struct dash {
        farm_db *db;
        const struct farm_rule *rule;
        int64_t now;
        const struct farm_args *args;
        struct farm_answer *a;
        FILE *f; /* the page being written */
        char *buf;
        size_t len;
};

/* ---- small helpers ---- */

/* Text for HTML, in elements and attribute values. */
void dash_esc(FILE *f, const char *text);
/* A path segment or query value, percent-encoded (and so safe in HTML as well). */
void dash_urlenc(FILE *f, const char *s);
void dash_urlenc_buf(char *buf, size_t size, const char *s);
/* "42 µs", "1.25 ms"; "2 d 4 h", "3 h 12 min"; "12.4 d". */
char *dash_fmt_lat(char buf[static 32], int64_t ns);
char *dash_fmt_span(char buf[static 32], int64_t ns);
char *dash_fmt_days(char buf[static 32], int64_t ns);
/* A time as a <time> element. */
void dash_put_time(FILE *f, int64_t ns);
/* A time a machine stamped on data that the server received at received_ns (INT64_MIN:
 * unknown): as stamped, and when later than the receipt by more than ClockTolerance=, marked
 * so (class "clock-ahead"), with the receipt. */
void dash_put_stamp(const struct dash *x, int64_t stamp_ns, int64_t received_ns);
/* The machine's name as shown: its hostname, or the start of its id. */
const char *dash_name(const char *id, const char *hostname, char buf[static 16]);
const char *dash_machine_name(const struct farm_machine *m, char buf[static 16]);
/* A time given as a parameter, or INT64_MIN. */
int64_t dash_parse_utc(struct dash *x, const char *s);
/* A time the verdict gives, as the pages show it: ns within the times a parameter may name,
 * else INT64_MIN. */
int64_t dash_time_shown(int64_t ns);

/* ---- pages and errors ---- */

void dash_page_begin(struct dash *x, const char *title, unsigned refresh_s);
void dash_page_end(struct dash *x);
int dash_open_page(struct dash *x);
/* A complete HTML page for an error: 400 names the parameter, 404 the unknown thing. */
void dash_fail_page(struct dash *x, unsigned status, const char *fmt, ...) _printf_(3, 4);
/* A failure of ours: logged by the caller from a->err, answered with a 500 (503 when busy). */
int dash_fail_internal(struct dash *x, int error, const char *what);
/* What reading r of a machine's data (err its message) answers: 1 read, 0 answered (404: the
 * machine was removed meanwhile), < 0 internal (500, or 503 when busy). */
int dash_machine_read(struct dash *x, int r, const char *err);
int dash_finish_page(struct dash *x, const char *content_type);
/* Drops a page that is not finished (nothing when there is none). */
void dash_abandon_page(struct dash *x);
int dash_finish_svg(struct dash *x, struct svg_buf *b);

/* ---- what the pages share about a machine and a release ---- */

struct dash_machine {
        char id[FARM_MACHINE_ID_LEN + 1];
        struct farm_machine info;  /* as GET /api/v1/machines/{id} tells it */
        struct farm_run_page runs; /* as GET .../runs lists them: newest first */
        bool has_data, silent;
        int64_t last_data_ns;   /* end of its latest data, as the server takes it */
        int64_t clock_ahead_ns; /* its latest run's data stamped ahead of arrival (0: not) */
        int64_t bound_ns;
        int64_t interval_ns; /* of its latest run */
};
void dash_machine_done(struct dash_machine *m);
/* How the pages take the machines' stamps: the rule's ClockTolerance= and MaxGap=, now. */
struct farm_clock_view dash_clock_view(const struct dash *x);
/* 1 with m filled, 0 answered (404), < 0 internal. */
int dash_machine_load(struct dash *x, const char *id, struct dash_machine *m);
/* The same for a machine of a list read with dash_clock_view(x) (farm_machines()): its row is
 * moved into m, not read again. */
int dash_machine_load_listed(struct dash *x, struct farm_machine *listed, struct dash_machine *m);
/* The machine's state as a badge. */
void dash_put_state(struct dash *x, const struct dash_machine *m);
void dash_link_machine(FILE *f, const char *id, const char *hostname, const char *query);
/* The kernel of the machine's latest run, or NULL. */
const char *dash_machine_kernel(const struct dash_machine *m);
void dash_machine_link(FILE *f, const struct farm_machine *info, const char *query);
void dash_kernel_link(FILE *f, const char *release);
void dash_verdict_badge(FILE *f, const char *status);
/* The machine page zoomed on [start, end), highlighted. */
void dash_zoom_href(FILE *f, const char *id, int64_t start, int64_t end);
/* What the trace flight recorder names as the cause of a violation, with its raw events. */
void dash_culprit_html(FILE *f, const char *summary, int64_t trace_id, bool raw);
/* The first of the names in mask ("" for none). */
const char *dash_step_name(const struct farm_names *names, uint64_t mask);
/* The answer of gating machine id in a verdict, or NULL. */
const struct farm_verdict_machine *dash_verdict_machine(const struct farm_verdict *v,
                                                        const char *id);

/* ---- the pages: each answers x->a (returning 0, or < 0 for a failure of ours) ---- */

int dash_page_overview(struct dash *x);
int dash_page_machine(struct dash *x, const char *id);
/* A machine's inventory for its page (dash/inventory.c): 1 read, 0 answered (404), < 0
 * internal; and its section of the page. */
int dash_inventory_load(struct dash *x, const char *id, struct farm_inventory_history *ret);
void dash_inventory_section(struct dash *x, const struct farm_inventory_history *h);
/* The machines whose inventories for the kernel and the one compared with differ. */
void dash_inventory_differences(struct dash *x, const struct farm_verdict *v,
                                const struct farm_comparison *cmp);
/* /plots/machines/{id}/histogram.svg and longterm.svg */
int dash_plot_machine(struct dash *x, const char *id, bool histogram);
int dash_page_kernel(struct dash *x, const char *release);
int dash_plot_coverage(struct dash *x, const char *release);
