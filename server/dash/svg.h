/* SPDX-License-Identifier: MIT */
/* The dashboard's plots as standalone SVG documents: latency histograms per CPU, the worst case
 * over time, and coverage bars.  Plain structs in, text out; no database, no HTTP. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"

/* Every document is self-contained (no fonts, scripts, styles or images from outside), has a
 * viewBox and no fixed size (it scales to its container: laptop or wall screen), starts with
 * <svg> (so the same text is a file of its own and can be pasted into an HTML page) and works
 * with JavaScript off: tooltips are SVG <title> elements, links are <a href>. */

#define SVG_ERROR_MAX 256
/* Longest label kept (in characters); longer ones end in "…".  Tooltips keep more. */
#define SVG_LABEL_MAX 40
#define SVG_TOOLTIP_MAX 200

/* The growable output buffer.  A render clears it first; on failure it holds the error.  The
 * renders return 0, or -EINVAL (bad input), -EOVERFLOW (counts) or -ENOMEM, with error set. */
struct svg_buf {
        char *data; /* NUL-terminated text of len bytes */
        size_t len, cap;
        int err;                   /* first error, or 0 */
        char error[SVG_ERROR_MAX]; /* what was wrong and where, when err < 0 */
};
void svg_buf_done(struct svg_buf *b);

/* 1. Latency histogram, one step curve per CPU, sample counts on a logarithmic axis. */

/* A CPU reduced to the columns of a plot's x axis: what the plot of many CPUs keeps of each
 * (6 KiB), instead of its up to 100,000 buckets. */
#define SVG_HIST_COLS_MAX 770
struct svg_hist_columns {
        uint64_t col[SVG_HIST_COLS_MAX]; /* the largest count of each column's buckets */
        uint32_t last_bucket;            /* the highest non-empty exact bucket + 1, or 0 */
        uint64_t total, beyond, above_bound, maxcount; /* beyond: at or past the axis' end */
};

struct svg_hist_cpu {
        unsigned cpu;           /* the CPU's number, as shown */
        const uint64_t *counts; /* counts[i]: samples in [i, i+1) µs; or NULL and cols */
        uint32_t nbuckets;      /* the histogram's limit in µs: counts has this many */
        uint64_t overflow;      /* samples at or above the limit */
        uint64_t max_ns;        /* exact maximum; raised to what the buckets show if lower */
        const struct svg_hist_columns *cols; /* from svg_hist_reduce(), for x_limit_us */
};

/* The end of the x axis (µs) of a plot whose CPUs' last non-empty exact bucket + 1 is at most
 * last_bucket: what svg_hist_render() chooses without x_limit_us. */
uint64_t svg_hist_axis_end(uint64_t bound_us, uint32_t last_bucket);
/* Reduces a CPU's exact buckets (counts[0..nbuckets), overflow samples above them) to the
 * columns of an axis ending at x_limit_us. */
void svg_hist_reduce(uint64_t x_limit_us, uint64_t bound_us, const uint64_t *counts,
                     uint32_t nbuckets, uint64_t overflow, struct svg_hist_columns *ret);

/* Fills c from a decoded histogram (common/hist.h): its exact buckets, and everything in its
 * logarithmic buckets as overflow.  c points into h, which must outlive the render. */
void svg_hist_cpu_from_hist(struct svg_hist_cpu *c, unsigned cpu, const struct hist *h,
                            uint64_t max_ns);

struct svg_hist_plot {
        const char *title; /* e.g. host and kernel; NULL for none */
        const struct svg_hist_cpu *cpus;
        size_t ncpus;        /* up to thousands: above 16 the legend summarises */
        uint64_t bound_us;   /* latency bound, a dashed vertical line; 0 for none */
        uint64_t x_limit_us; /* right end of the x axis; 0: the larger of 1.1 x the bound and
                              * the last non-empty bucket, rounded up to a tick.  Needed (and
                              * the one they were reduced for) when CPUs come as columns. */
};
int svg_hist_render(struct svg_buf *out, const struct svg_hist_plot *p);

/* 2. The worst case per time step over a long period. */
enum svg_scale {
        SVG_SCALE_LOG, /* default: one outlier of milliseconds does not flatten the rest */
        SVG_SCALE_LINEAR,
};

struct svg_lt_point {
        int64_t t_ns;       /* start of the step, Unix time in ns (UTC) */
        int64_t max_ns;     /* worst latency of the step; negative is refused */
        const char *href;   /* link for this step (http(s) or relative), or NULL */
        const char *detail; /* extra tooltip text (e.g. "CPU 3, scenario io"), or NULL */
};

struct svg_lt_mark { /* a kernel change: a vertical line with the release */
        int64_t t_ns;
        const char *label;
};

struct svg_lt_band { /* a scenario's time span, shaded along the time axis in the scenario's
                      * colour (svg_scenario_colour); the first 12 names get a legend entry */
        int64_t start_ns, end_ns;
        const char *scenario;
};

struct svg_lt_plot {
        const char *title;
        const struct svg_lt_point *points; /* sorted by time, strictly increasing */
        size_t npoints;
        int64_t step_ns;  /* the time step: farther apart than 1.5 steps is a gap; 0: none */
        int64_t bound_ns; /* latency bound, a horizontal line; 0 for none */
        enum svg_scale scale;
        int64_t start_ns, end_ns; /* the time axis; both 0: from the data */
        const struct svg_lt_mark *marks;
        size_t nmarks;
        const struct svg_lt_band *bands;
        size_t nbands;
        /* A span to point out (the evidence a link leads to): outlined over the whole height;
         * hl_end_ns <= hl_start_ns for none. */
        int64_t hl_start_ns, hl_end_ns;
        const char *hl_label; /* its tooltip, or NULL */
};
/* Steps that share a pixel column are drawn as one point holding their maximum; a column with
 * steps above the bound is a violation marker whose data-count says how many it holds, so no
 * violation is ever dropped. */
int svg_lt_render(struct svg_buf *out, const struct svg_lt_plot *p);
/* The colour of a scenario's band, by its name: the same on every plot ("" or NULL: white). */
const char *svg_scenario_colour(const char *name);

/* 3. Coverage: per machine a bar of covered time against a target. */
enum svg_cov_status {
        SVG_COV_COVERED,
        SVG_COV_MISSING,
        SVG_COV_PROBLEM,
};

struct svg_cov_segment {
        int64_t start_ns, end_ns; /* sorted, not overlapping */
        enum svg_cov_status status;
        const char *detail; /* tooltip text, or NULL */
};

struct svg_cov_machine {
        const char *name;
        const char *href; /* the machine's page, or NULL */
        const struct svg_cov_segment *segs;
        size_t nsegs;
        /* The covered time stated beside the bar (e.g. the verdict's own figure, so that it
         * reads as the tables do); without it, the covered segments' length. */
        int64_t covered_ns;
        bool covered_given;
};

struct svg_cov_plot {
        const char *title;
        int64_t start_ns;  /* where every bar starts */
        int64_t target_ns; /* the bar's full length, e.g. 30 days */
        const struct svg_cov_machine *machines;
        size_t nmachines;
};
int svg_cov_render(struct svg_buf *out, const struct svg_cov_plot *p);
