/* SPDX-License-Identifier: MIT */
/* The dashboard's SVG plots: layout, axes, escaping and decimation.  Colours are the
 * Okabe-Ito palette (safe for colour blindness), backed by dash patterns and marker shapes so
 * that a grey-scale print still tells the series apart. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "server-svg.h"
#include "text-safe.h"

/* The drawing is 1000 units wide; text sizes are in the same units, so 13 is 13 px on a
 * 1000 px wide window and grows with a wall screen. */
#define WIDTH 1000
#define FONT "font-family=\"sans-serif\""
#define FS_TITLE 18
#define FS_TEXT 13
#define FS_SMALL 11

/* Okabe-Ito without its yellow, which vanishes on white. */
static const char *const palette[] = { "#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                       "#56B4E9", "#E69F00", "#000000" };
static const char *const dashes[] = { NULL, "8 3", "2 2", "8 3 2 3" };
#define NSTYLES (ELEMENTSOF(palette) * ELEMENTSOF(dashes))
/* Above this many CPUs the histogram legend summarises and highlights the worst ones. */
#define HIST_LEGEND_ALL 16
#define HIST_HIGHLIGHT 7
/* Scenario bands: Paul Tol's light palette, one colour per scenario name, the same on every
 * plot and page (never by order of appearance).  The built-in scenarios have their own; any
 * other name gets one of the rest, chosen by a hash of the name. */
static const struct {
        const char *name, *colour;
} band_builtin[] = {
        { "idle", "#DDDDDD" }, { "cpu", "#EE8866" },       { "io", "#EEDD88" },
        { "net", "#99DDFF" },  { "hackbench", "#FFAABB" }, { "mixed", "#77AADD" },
};
static const char *const band_other[] = { "#44BB99", "#BBCC33", "#AAAA00" };
#define BANDS_NAMED 12 /* scenarios named in the legend */

const char *svg_scenario_colour(const char *name) {
        uint32_t h = 2166136261u; /* FNV-1a */
        if (!name || !*name)
                return "#FFFFFF";
        for (size_t i = 0; i < ELEMENTSOF(band_builtin); i++)
                if (strcmp(band_builtin[i].name, name) == 0)
                        return band_builtin[i].colour;
        for (const unsigned char *c = (const unsigned char *) name; *c; c++)
                h = (h ^ *c) * 16777619u;
        return band_other[h % ELEMENTSOF(band_other)];
}

#define NSEC_PER_MIN (60 * NSEC_PER_SEC)
#define NSEC_PER_HOUR (60 * NSEC_PER_MIN)
#define NSEC_PER_DAY (24 * NSEC_PER_HOUR)

/* ---- Output buffer ---- */

void svg_buf_done(struct svg_buf *b) {
        if (!b)
                return;
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

static void buf_reset(struct svg_buf *b) {
        b->len = 0;
        b->err = 0;
        b->error[0] = 0;
        if (b->data)
                b->data[0] = 0;
}

static _printf_(3, 4) int fail(struct svg_buf *b, int err, const char *fmt, ...) {
        if (b->err == 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(b->error, sizeof(b->error), fmt, ap);
                va_end(ap);
                b->err = err;
        }
        return b->err;
}

static bool reserve(struct svg_buf *b, size_t more) {
        if (b->err)
                return false;
        if (b->len + more + 1 <= b->cap)
                return true;
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + more + 1)
                cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
                fail(b, -ENOMEM, "out of memory for a %zu byte plot", cap);
                return false;
        }
        b->data = d;
        b->cap = cap;
        return true;
}

static void put(struct svg_buf *b, const char *s, size_t n) {
        if (!reserve(b, n))
                return;
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = 0;
}

static void puts_(struct svg_buf *b, const char *s) {
        put(b, s, strlen(s));
}

static _printf_(2, 3) void putf(struct svg_buf *b, const char *fmt, ...) {
        va_list ap;
        char small[256];

        va_start(ap, fmt);
        int n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0) {
                fail(b, -EINVAL, "bad format while drawing");
                return;
        }
        if ((size_t) n < sizeof(small)) {
                put(b, small, (size_t) n);
                return;
        }
        if (!reserve(b, (size_t) n))
                return;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t) n;
}

/* A coordinate with one decimal, as "%.1f" writes it but without the C library's exact
 * floating-point formatting, which was half of the time of a plot with thousands of points. */
static void put_tenths(struct svg_buf *b, double v) {
        char tmp[32], *p = tmp + sizeof(tmp);
        long long t = llround(v * 10);
        bool neg = t < 0;
        unsigned long long u = neg ? 0ULL - (unsigned long long) t : (unsigned long long) t;

        *--p = (char) ('0' + u % 10);
        *--p = '.';
        u /= 10;
        do {
                *--p = (char) ('0' + u % 10);
                u /= 10;
        } while (u);
        if (neg)
                *--p = '-';
        put(b, p, (size_t) (tmp + sizeof(tmp) - p));
}

/* ---- Text ---- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is invalid or a character
 * XML does not allow (C0 controls other than tab and newline, U+FFFE, U+FFFF). */
static size_t utf8_char(const unsigned char *s) {
        unsigned char c = s[0];
        if (c < 0x80)
                return (c >= 0x20 || c == '\t' || c == '\n') ? 1 : 0;
        if (c >= 0xC2 && c <= 0xDF)
                return (s[1] & 0xC0) == 0x80 ? 2 : 0;
        if (c >= 0xE0 && c <= 0xEF) {
                unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
                if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80)
                        return 0;
                if (c == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF))
                        return 0;
                return 3;
        }
        if (c >= 0xF0 && c <= 0xF4) {
                unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
                if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
                        return 0;
                return 4;
        }
        return 0;
}

/* Writes s escaped for XML text or attributes, at most max characters (0: no limit), ending
 * in "…" when cut.  What text_ok() refuses (stored before the rule) is escaped first, and
 * invalid bytes left would become U+FFFD: a label never breaks the document. */
static void put_text(struct svg_buf *b, const char *s, size_t max) {
        _cleanup_free_ char *safe = text_escape_lines_dup(s ? s : "");
        const unsigned char *p = (const unsigned char *) (safe ?: "");
        size_t chars = 0, keep = SIZE_MAX;

        if (max) {
                for (const unsigned char *q = p; *q; chars++)
                        q += MAX(utf8_char(q), (size_t) 1);
                if (chars > max)
                        keep = max - 1; /* and the ellipsis */
        }
        for (chars = 0; *p; chars++) {
                if (chars == keep) {
                        puts_(b, "…");
                        return;
                }
                size_t n = utf8_char(p);
                if (n == 0) {
                        puts_(b, "\xEF\xBF\xBD");
                        p++;
                        continue;
                }
                const char *entity = markup_entity(*p);
                if (entity) {
                        puts_(b, entity);
                        p += n;
                        continue;
                }
                switch (*p) {
                case '\n':
                case '\t':
                        puts_(b, " ");
                        break;
                default:
                        put(b, (const char *) p, n);
                }
                p += n;
        }
}

/* A latency with its unit: "8.5 µs", "431 µs", "1.25 ms", "2.50 s". */
static void fmt_ns(char *buf, size_t len, uint64_t ns) {
        if (ns < 10 * NSEC_PER_USEC)
                snprintf(buf, len, "%.1f µs", (double) ns / 1e3);
        else if (ns < NSEC_PER_MSEC)
                snprintf(buf, len, "%.0f µs", (double) ns / 1e3);
        else if (ns < 10 * NSEC_PER_MSEC)
                snprintf(buf, len, "%.2f ms", (double) ns / 1e6);
        else if (ns < 100 * NSEC_PER_MSEC)
                snprintf(buf, len, "%.1f ms", (double) ns / 1e6);
        else if (ns < NSEC_PER_SEC)
                snprintf(buf, len, "%.0f ms", (double) ns / 1e6);
        else
                snprintf(buf, len, "%.2f s", (double) ns / 1e9);
}

/* A count, short: "950", "12.3k", "4.5M". */
static void fmt_count(char *buf, size_t len, uint64_t n) {
        static const char suffix[] = "kMGTPE";
        if (n < 10000) {
                snprintf(buf, len, "%" PRIu64, n);
                return;
        }
        double v = (double) n;
        unsigned i = 0;
        while (v >= 999.95 && i < sizeof(suffix) - 1) {
                v /= 1000;
                i++;
        }
        snprintf(buf, len, v < 100 ? "%.1f%c" : "%.0f%c", v, suffix[i - 1]);
}

/* A decade of counts: 1, 10, 100, 1k, 10k, 100k, 1M, ... */
static void fmt_decade(char *buf, size_t len, unsigned d) {
        static const char *const suffix[] = { "", "k", "M", "G", "T", "P", "E" };
        static const char *const mant[] = { "1", "10", "100" };
        snprintf(buf, len, "%s%s", mant[d % 3], suffix[MIN(d / 3, 6u)]);
}

/* Time as UTC: "2026-12-03 06:00" or, with date_only, "2026-12-03". */
static void fmt_time(char *buf, size_t len, int64_t t_ns, bool date_only, bool seconds) {
        time_t t = (time_t) (t_ns / (int64_t) NSEC_PER_SEC);
        struct tm tm;
        if (!gmtime_r(&t, &tm)) {
                snprintf(buf, len, "?");
                return;
        }
        strftime(buf, len,
                 date_only ? "%Y-%m-%d"
                 : seconds ? "%Y-%m-%d %H:%M:%S"
                           : "%Y-%m-%d %H:%M",
                 &tm);
}

/* A duration in days or hours: "12.3 d", "5.0 h". */
static void fmt_span(char *buf, size_t len, int64_t ns) {
        if (ns >= (int64_t) NSEC_PER_DAY)
                snprintf(buf, len, "%.1f d", (double) ns / (double) NSEC_PER_DAY);
        else if (ns >= (int64_t) NSEC_PER_HOUR)
                snprintf(buf, len, "%.1f h", (double) ns / (double) NSEC_PER_HOUR);
        else if (ns > 0)
                snprintf(buf, len, "%.0f min", (double) ns / (double) NSEC_PER_MIN);
        else
                snprintf(buf, len, "0 d");
}

/* Links only to http(s) or relative addresses: a "javascript:" link in a label from a
 * machine's upload must not reach the page. */
static bool href_ok(const char *h) {
        size_t scheme = strcspn(h, ":/?#");
        if (h[scheme] != ':')
                return true; /* relative */
        return (scheme == 4 && strncasecmp(h, "http", 4) == 0) ||
               (scheme == 5 && strncasecmp(h, "https", 5) == 0);
}

/* ---- Document frame ---- */

static void doc_begin(struct svg_buf *b, int height, const char *title, const char *kind) {
        putf(b,
             "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" role=\"img\" "
             "class=\"rtsoak-plot %s\" " FONT " font-size=\"%d\">\n<title>",
             WIDTH, height, kind, FS_TEXT);
        put_text(b, title && *title ? title : kind, SVG_TOOLTIP_MAX);
        putf(b, "</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", WIDTH, height);
        if (title && *title) {
                putf(b, "<text x=\"%d\" y=\"26\" font-size=\"%d\" font-weight=\"bold\">", 20,
                     FS_TITLE);
                put_text(b, title, 2 * SVG_LABEL_MAX);
                puts_(b, "</text>\n");
        }
}

static int doc_end(struct svg_buf *b) {
        puts_(b, "</svg>\n");
        return b->err;
}

/* A complete plot that says there is nothing to show. */
static int doc_no_data(struct svg_buf *b, const char *title, const char *kind, const char *what) {
        doc_begin(b, 300, title, kind);
        puts_(b, "<rect x=\"60\" y=\"50\" width=\"880\" height=\"210\" fill=\"none\" "
                 "stroke=\"#888\"/>\n");
        putf(b,
             "<text class=\"no-data\" x=\"500\" y=\"160\" text-anchor=\"middle\" "
             "font-size=\"%d\" fill=\"#444\">No data",
             FS_TITLE);
        if (what) {
                puts_(b, ": ");
                put_text(b, what, 2 * SVG_LABEL_MAX);
        }
        puts_(b, "</text>\n");
        return doc_end(b);
}

static void put_style(struct svg_buf *b, unsigned style, double width) {
        /* 7 colours and 4 dash patterns, coprime: 28 distinct styles, and neighbours differ
         * in both (in grey-scale the dashes are what tells them apart). */
        const char *dash = dashes[style % ELEMENTSOF(dashes)];
        putf(b, "stroke=\"%s\" stroke-width=\"%.1f\"", palette[style % ELEMENTSOF(palette)], width);
        if (dash)
                putf(b, " stroke-dasharray=\"%s\"", dash);
}

/* A "nice" step (1, 2 or 5 times a power of ten) giving about n intervals over range. */
static double nice_step(double range, unsigned n) {
        if (!(range > 0)) /* never a zero step: the tick loops would not end */
                return 1;
        double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
        return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

/* ---- 1. Histogram ---- */

struct cpu_summary {
        size_t index;
        uint64_t max_ns, total, beyond, above_bound;
        uint32_t last_bucket; /* highest non-empty exact bucket + 1, or 0 */
};

static int by_max_desc(const void *a, const void *b) {
        const struct cpu_summary *x = a, *y = b;
        if (x->max_ns != y->max_ns)
                return x->max_ns < y->max_ns ? 1 : -1;
        return x->index < y->index ? -1 : x->index > y->index;
}

void svg_hist_cpu_from_hist(struct svg_hist_cpu *c, unsigned cpu, const struct hist *h,
                            uint64_t max_ns) {
        *c = (struct svg_hist_cpu){ .cpu = cpu, .counts = h->counts, .max_ns = max_ns };
        c->nbuckets = MIN(h->limit_us, h->nbuckets);
        for (uint32_t i = c->nbuckets; i < h->nbuckets; i++)
                c->overflow += h->counts[i];
}

#define H_X0 80.0
#define H_X1 850.0
#define H_OV0 875.0 /* the overflow column */
#define H_OV1 950.0
#define H_TOP 70.0
#define H_BOTTOM 400.0
#define H_ZERO_GAP 0.5 /* the room between "0" and "1", in decades */

struct hist_geom {
        double xmax_us, dec_h;
        unsigned decades;
        size_t ncols;
};

static double hist_x(const struct hist_geom *g, double us) {
        return H_X0 + (H_X1 - H_X0) * us / g->xmax_us;
}

static double hist_y(const struct hist_geom *g, uint64_t count) {
        if (count == 0)
                return H_BOTTOM;
        return H_BOTTOM - (H_ZERO_GAP + log10((double) count)) * g->dec_h;
}

/* The largest count of the buckets of column c: with more buckets than columns the curve
 * shows each column's peak, so a narrow spike never disappears. */
static uint64_t column_max(const struct hist_geom *g, const uint64_t *counts, uint32_t nbuckets,
                           size_t col, uint32_t *ret_lo, uint32_t *ret_hi) {
        uint32_t lo = (uint32_t) ((double) col * g->xmax_us / (double) g->ncols),
                 hi = (uint32_t) ((double) (col + 1) * g->xmax_us / (double) g->ncols);
        if (hi <= lo)
                hi = lo + 1;
        *ret_lo = lo;
        *ret_hi = hi;
        uint64_t m = 0;
        for (uint32_t i = lo; counts && i < hi && i < nbuckets; i++)
                m = MAX(m, counts[i]);
        return m;
}

static uint64_t column_count(const struct hist_geom *g, const struct svg_hist_cpu *c, size_t col,
                             uint32_t *ret_lo, uint32_t *ret_hi) {
        uint64_t m = column_max(g, c->counts, c->nbuckets, col, ret_lo, ret_hi);
        return c->cols ? c->cols->col[col] : m;
}

/* The axis for an end: the given one, or the bound and the last bucket rounded up to a tick. */
static void hist_axis(uint64_t x_limit_us, uint64_t bound_us, uint32_t last_bucket,
                      struct hist_geom *g, double *ret_step) {
        double xmax = x_limit_us ? (double) x_limit_us
                                 : (double) MAX(bound_us + bound_us / 10, (uint64_t) last_bucket);
        if (!x_limit_us && xmax < 10)
                xmax = 10;
        double xstep = nice_step(xmax, 8);
        if (!x_limit_us)
                xmax = ceil(xmax / xstep) * xstep;
        *g = (struct hist_geom){ .xmax_us = xmax, .ncols = (size_t) MIN(xmax, H_X1 - H_X0) };
        *ret_step = xstep;
}

uint64_t svg_hist_axis_end(uint64_t bound_us, uint32_t last_bucket) {
        struct hist_geom g;
        double step;
        hist_axis(0, bound_us, last_bucket, &g, &step);
        return (uint64_t) g.xmax_us;
}

void svg_hist_reduce(uint64_t x_limit_us, uint64_t bound_us, const uint64_t *counts,
                     uint32_t nbuckets, uint64_t overflow, struct svg_hist_columns *ret) {
        struct hist_geom g;
        double step;
        uint32_t lo, hi;
        hist_axis(MAX(x_limit_us, (uint64_t) 1), bound_us, 0, &g, &step);
        *ret = (struct svg_hist_columns){
                .total = overflow, .beyond = overflow, .above_bound = overflow, .maxcount = overflow
        };
        for (size_t col = 0; col < g.ncols && col < SVG_HIST_COLS_MAX; col++) {
                ret->col[col] = column_max(&g, counts, nbuckets, col, &lo, &hi);
                ret->maxcount = MAX(ret->maxcount, ret->col[col]);
        }
        for (uint32_t i = 0; counts && i < nbuckets; i++) {
                if (!counts[i])
                        continue;
                ret->total += counts[i];
                ret->last_bucket = i + 1;
                if (i >= (uint32_t) g.xmax_us)
                        ret->beyond += counts[i];
                if (bound_us && i >= bound_us)
                        ret->above_bound += counts[i];
        }
        ret->maxcount = MAX(ret->maxcount, ret->beyond);
}

static void hist_curve(struct svg_buf *b, const struct hist_geom *g, const struct svg_hist_cpu *c,
                       const struct cpu_summary *s, int style, bool highlighted) {
        char mx[32];
        fmt_ns(mx, sizeof(mx), s->max_ns);
        putf(b, "<path class=\"curve%s\" data-cpu=\"%u\" fill=\"none\" ",
             highlighted ? " worst" : "", c->cpu);
        if (style < 0)
                puts_(b, "stroke=\"#BBBBBB\" stroke-width=\"0.7\"");
        else
                put_style(b, (unsigned) style, 1.6);
        putf(b, " d=\"M%.1f %.1f", H_X0, H_BOTTOM);

        double prev_y = H_BOTTOM;
        size_t last = (size_t) ceil((double) MIN(c->nbuckets, (uint32_t) g->xmax_us) *
                                    (double) g->ncols / g->xmax_us);
        for (size_t col = 0; col < MIN(last, g->ncols); col++) {
                uint32_t lo, hi;
                uint64_t v = column_count(g, c, col, &lo, &hi);
                double y = hist_y(g, v);
                if (fabs(y - prev_y) >= 0.05) {
                        puts_(b, "H");
                        put_tenths(b, hist_x(g, lo));
                        puts_(b, "V");
                        put_tenths(b, y);
                        prev_y = y;
                }
        }
        /* The curve ends where its buckets or the axis end, back on the baseline. */
        double xe = hist_x(g, MIN((double) c->nbuckets, g->xmax_us));
        putf(b, "H%.1fV%.1f\"><title>CPU %u: max %s</title></path>\n", xe, H_BOTTOM, c->cpu, mx);
}

static void hist_legend_entry(struct svg_buf *b, double x, double y, const struct svg_hist_cpu *c,
                              const struct cpu_summary *s, unsigned style, double xmax_us) {
        char mx[32], cnt[32], lim[32];
        putf(b,
             "<g class=\"legend-entry\" data-cpu=\"%u\"><line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
             "y2=\"%.0f\" ",
             c->cpu, x, y - 4, x + 28, y - 4);
        put_style(b, style, 2.2);
        fmt_ns(mx, sizeof(mx), s->max_ns);
        putf(b, "/><text x=\"%.0f\" y=\"%.0f\">CPU %u: max %s", x + 34, y, c->cpu, mx);
        if (s->beyond) {
                fmt_count(cnt, sizeof(cnt), s->beyond);
                fmt_ns(lim, sizeof(lim), (uint64_t) (xmax_us * 1000));
                putf(b, ", %s ≥ %s", cnt, lim);
        }
        puts_(b, "</text></g>\n");
}

/* What the histogram plot is drawn from: each CPU summed up (sum in the plot's order, ranked
 * the worst first), the geometry, and what the legend shows. */
struct hist_render {
        const struct svg_hist_plot *p;
        struct cpu_summary *sum, *ranked;
        struct hist_geom g;
        double xstep;
        uint64_t grand_total, max_ns;
        uint32_t last_bucket;
        size_t worst, nlegend, lcols;
        bool summarise;
};

/* Sums up each CPU, checking what the plot was given. */
static int hist_sum_cpus(struct svg_buf *out, struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        for (size_t k = 0; k < p->ncpus; k++) {
                const struct svg_hist_cpu *c = &p->cpus[k];
                struct cpu_summary *s = &h->sum[k];
                if (c->nbuckets > HIST_LIMIT_US_MAX)
                        return fail(out, -EINVAL, "CPU %u: %" PRIu32 " buckets, more than %u",
                                    c->cpu, c->nbuckets, HIST_LIMIT_US_MAX);
                if (c->nbuckets > 0 && !c->counts && !c->cols)
                        return fail(out, -EINVAL, "CPU %u: %" PRIu32 " buckets but no counts",
                                    c->cpu, c->nbuckets);
                if (c->cols && !p->x_limit_us)
                        return fail(out, -EINVAL, "CPU %u: columns without the axis' end", c->cpu);
                s->index = k;
                s->total = c->cols ? c->cols->total : c->overflow;
                if (c->cols)
                        s->last_bucket = c->cols->last_bucket;
                for (uint32_t i = 0; c->counts && i < c->nbuckets; i++) {
                        if (!c->counts[i])
                                continue;
                        if (__builtin_add_overflow(s->total, c->counts[i], &s->total))
                                return fail(out, -EOVERFLOW, "CPU %u: sample count overflows",
                                            c->cpu);
                        s->last_bucket = i + 1;
                }
                /* The maximum is at least what the buckets show. */
                s->max_ns = c->max_ns;
                if (s->last_bucket)
                        s->max_ns = MAX(s->max_ns, (uint64_t) (s->last_bucket - 1) * 1000);
                if (c->overflow)
                        s->max_ns = MAX(s->max_ns, (uint64_t) c->nbuckets * 1000);
                if (s->total == 0)
                        s->max_ns = 0;
                if (__builtin_add_overflow(h->grand_total, s->total, &h->grand_total))
                        return fail(out, -EOVERFLOW, "total sample count overflows");
                h->last_bucket = MAX(h->last_bucket, s->last_bucket);
                if (s->max_ns > h->max_ns || k == 0) {
                        h->max_ns = MAX(h->max_ns, s->max_ns);
                        h->worst = k;
                }
        }
        return 0;
}

/* The highest count of an exact bucket in the plotted range or of the overflow column, with
 * each CPU's samples beyond the range and above the bound. */
static uint64_t hist_max_count(struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        uint64_t maxcount = 1;
        for (size_t k = 0; k < p->ncpus; k++) {
                const struct svg_hist_cpu *c = &p->cpus[k];
                if (c->cols) {
                        h->sum[k].beyond = c->cols->beyond;
                        h->sum[k].above_bound = c->cols->above_bound;
                        maxcount = MAX(maxcount, c->cols->maxcount);
                        continue;
                }
                h->sum[k].beyond = c->overflow;
                h->sum[k].above_bound = c->overflow;
                for (uint32_t i = 0; i < c->nbuckets; i++) {
                        if (i >= (uint32_t) h->g.xmax_us)
                                h->sum[k].beyond += c->counts[i];
                        else
                                maxcount = MAX(maxcount, c->counts[i]);
                        if (p->bound_us && i >= p->bound_us)
                                h->sum[k].above_bound += c->counts[i];
                }
                maxcount = MAX(maxcount, h->sum[k].beyond);
        }
        return maxcount;
}

/* The worst of all CPUs, and the bound. */
static void hist_subtitle(struct svg_buf *out, const struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        char t1[32], t2[32];
        uint64_t total_above = 0;
        for (size_t k = 0; k < p->ncpus; k++)
                total_above += h->sum[k].above_bound;
        fmt_ns(t1, sizeof(t1), h->max_ns);
        fmt_count(t2, sizeof(t2), h->grand_total);
        putf(out,
             "<text class=\"summary\" x=\"20\" y=\"50\">%zu CPU%s, %s sample%s, max %s (CPU %u)",
             p->ncpus, p->ncpus == 1 ? "" : "s", t2, h->grand_total == 1 ? "" : "s", t1,
             p->cpus[h->worst].cpu);
        if (p->bound_us) {
                fmt_ns(t1, sizeof(t1), p->bound_us * 1000);
                fmt_count(t2, sizeof(t2), total_above);
                putf(out, "; bound %s: %s sample%s at or above", t1, t2,
                     total_above == 1 ? "" : "s");
        }
        puts_(out, "</text>\n");
}

/* Axes, grid and log labels, the frame and the overflow column. */
static void hist_frame(struct svg_buf *out, const struct hist_render *h) {
        char t1[32];
        /* Axes, grid and log labels. */
        putf(out, "<g class=\"y-axis\" font-size=\"%d\" text-anchor=\"end\">\n", FS_SMALL);
        putf(out, "<text class=\"y-label\" x=\"%.0f\" y=\"%.1f\">0</text>\n", H_X0 - 6,
             H_BOTTOM + 4);
        for (unsigned d = 0; d <= h->g.decades; d++) {
                double y = H_BOTTOM - (H_ZERO_GAP + d) * h->g.dec_h;
                fmt_decade(t1, sizeof(t1), d);
                putf(out,
                     "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                     "<text class=\"y-label\" x=\"%.0f\" y=\"%.1f\">%s</text>\n",
                     H_X0, y, H_OV1, y, H_X0 - 6, y + 4, t1);
                for (unsigned m = 2; d < h->g.decades && m <= 9; m++) {
                        double ym = y - log10(m) * h->g.dec_h;
                        putf(out,
                             "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                             "stroke=\"#888\"/>",
                             H_X0 - 4, ym, H_X0, ym);
                }
        }
        putf(out,
             "<text x=\"22\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"%d\" "
             "transform=\"rotate(-90 22 %.0f)\">samples per 1 µs bucket (log)</text>\n</g>\n",
             (H_TOP + H_BOTTOM) / 2, FS_TEXT, (H_TOP + H_BOTTOM) / 2);

        putf(out, "<g class=\"x-axis\" font-size=\"%d\" text-anchor=\"middle\">\n", FS_SMALL);
        for (double v = 0; v <= h->g.xmax_us + 1e-9; v += h->xstep) {
                double x = hist_x(&h->g, v);
                fmt_ns(t1, sizeof(t1), (uint64_t) llround(v * 1000));
                putf(out,
                     "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#888\"/>"
                     "<text x=\"%.1f\" y=\"%.0f\">%s</text>\n",
                     x, H_BOTTOM, x, H_BOTTOM + 5, x, H_BOTTOM + 19, v == 0 ? "0" : t1);
        }
        putf(out, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"%d\">latency</text>\n</g>\n",
             (H_X0 + H_X1) / 2, H_BOTTOM + 38, FS_TEXT);
        putf(out,
             "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
             "stroke=\"#444\"/>\n",
             H_X0, H_TOP, H_X1 - H_X0, H_BOTTOM - H_TOP);

        /* The overflow column, on the same count axis. */
        fmt_ns(t1, sizeof(t1), (uint64_t) (h->g.xmax_us * 1000));
        putf(out,
             "<rect class=\"overflow-column\" x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" "
             "height=\"%.0f\" fill=\"#f4f4f4\" stroke=\"#444\"/>\n"
             "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"%d\">≥ %s</text>\n",
             H_OV0, H_TOP, H_OV1 - H_OV0, H_BOTTOM - H_TOP, (H_OV0 + H_OV1) / 2, H_BOTTOM + 19,
             FS_SMALL, t1);
        putf(out,
             "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"%d\">"
             "overflow</text>\n",
             (H_OV0 + H_OV1) / 2, H_BOTTOM + 38, FS_SMALL);
}

/* The curves, and a right-pointing triangle per CPU at its overflow count. */
static void hist_data(struct svg_buf *out, const struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        char t1[32], t2[32], t3[32];
        fmt_ns(t1, sizeof(t1), (uint64_t) (h->g.xmax_us * 1000));
        /* The curves: the grey ones first, the coloured ones on top. */
        puts_(out, "<g class=\"curves\" stroke-linejoin=\"round\">\n");
        if (h->summarise) {
                for (size_t r = h->nlegend; r < p->ncpus; r++)
                        hist_curve(out, &h->g, &p->cpus[h->ranked[r].index], &h->ranked[r], -1,
                                   false);
                for (size_t r = h->nlegend; r-- > 0;)
                        hist_curve(out, &h->g, &p->cpus[h->ranked[r].index], &h->ranked[r], (int) r,
                                   true);
        } else
                for (size_t k = p->ncpus; k-- > 0;)
                        hist_curve(out, &h->g, &p->cpus[k], &h->sum[k], (int) (k % NSTYLES), false);
        puts_(out, "</g>\n");

        /* Overflow markers: a right-pointing triangle per CPU, at its count. */
        puts_(out, "<g class=\"overflows\">\n");
        for (size_t r = p->ncpus; r-- > 0;) {
                size_t k = h->summarise ? h->ranked[r].index : r;
                const struct cpu_summary *s = h->summarise ? &h->ranked[r] : &h->sum[k];
                if (!s->beyond)
                        continue;
                int style = h->summarise ? (r < h->nlegend ? (int) r : -1) : (int) (k % NSTYLES);
                double y = hist_y(&h->g, s->beyond), x = H_OV0 + 14;
                fmt_count(t2, sizeof(t2), s->beyond);
                fmt_ns(t3, sizeof(t3), s->max_ns);
                putf(out,
                     "<path class=\"overflow\" data-cpu=\"%u\" data-count=\"%" PRIu64 "\" "
                     "d=\"M%.1f %.1fl9 5l-9 5z\" fill=\"%s\" stroke=\"#000\" stroke-width=\"0.5\">"
                     "<title>CPU %u: %" PRIu64 " sample%s ≥ %s, max %s</title></path>",
                     p->cpus[k].cpu, s->beyond, x, y - 5,
                     style < 0 ? "#BBBBBB" : palette[style % ELEMENTSOF(palette)], p->cpus[k].cpu,
                     s->beyond, s->beyond == 1 ? "" : "s", t1, t3);
                if (style >= 0)
                        putf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\">%s</text>", x + 12,
                             y + 4, FS_SMALL, t2);
                puts_(out, "\n");
        }
        puts_(out, "</g>\n");
}

static void hist_bound(struct svg_buf *out, const struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        char t1[32];
        /* The bound. */
        if (p->bound_us) {
                fmt_ns(t1, sizeof(t1), p->bound_us * 1000);
                if ((double) p->bound_us <= h->g.xmax_us) {
                        double x = hist_x(&h->g, (double) p->bound_us);
                        putf(out,
                             "<line class=\"bound\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" "
                             "y2=\"%.0f\" stroke=\"#000\" stroke-width=\"1.5\" "
                             "stroke-dasharray=\"6 4\"><title>latency bound %s</title></line>\n"
                             "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"end\" font-size=\"%d\">"
                             "bound %s</text>\n",
                             x, H_TOP, x, H_BOTTOM, t1, x - 4, H_TOP + 14, FS_SMALL, t1);
                } else
                        putf(out,
                             "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" font-size=\"%d\">"
                             "bound %s: beyond the plotted range</text>\n",
                             H_X1 - 4, H_TOP + 14, FS_SMALL, t1);
        }
}

static void hist_legend(struct svg_buf *out, const struct hist_render *h) {
        const struct svg_hist_plot *p = h->p;
        char t1[32];
        double ly = H_BOTTOM + 70;
        puts_(out, "<g class=\"legend\">\n");
        if (h->summarise) {
                unsigned lo = p->cpus[0].cpu, hi = lo;
                for (size_t k = 0; k < p->ncpus; k++) {
                        lo = MIN(lo, p->cpus[k].cpu);
                        hi = MAX(hi, p->cpus[k].cpu);
                }
                fmt_ns(t1, sizeof(t1), h->max_ns);
                putf(out,
                     "<text x=\"20\" y=\"%.0f\">CPUs %u–%u (%zu), worst CPU %u: max %s</text>\n",
                     ly, lo, hi, p->ncpus, p->cpus[h->worst].cpu, t1);
                fmt_ns(t1, sizeof(t1), h->nlegend < p->ncpus ? h->ranked[h->nlegend].max_ns : 0);
                putf(out,
                     "<line x1=\"20\" y1=\"%.0f\" x2=\"48\" y2=\"%.0f\" stroke=\"#BBBBBB\" "
                     "stroke-width=\"2\"/><text x=\"54\" y=\"%.0f\">coloured: the %zu worst CPUs; "
                     "grey: the other %zu, each max %s or less</text>\n",
                     ly + 16, ly + 16, ly + 20, h->nlegend, p->ncpus - h->nlegend, t1);
                ly += 40;
        }
        for (size_t e = 0; e < h->nlegend; e++) {
                size_t k = h->summarise ? h->ranked[e].index : e;
                const struct cpu_summary *s = h->summarise ? &h->ranked[e] : &h->sum[k];
                hist_legend_entry(out, 20 + (double) (e % h->lcols) * (960.0 / h->lcols),
                                  ly + (double) (e / h->lcols) * 20, &p->cpus[k], s,
                                  (unsigned) (h->summarise ? e : k % NSTYLES), h->g.xmax_us);
        }
        puts_(out, "</g>\n");
}

int svg_hist_render(struct svg_buf *out, const struct svg_hist_plot *p) {
        _cleanup_free_ struct cpu_summary *sum = NULL, *ranked = NULL;
        struct hist_render h = { .p = p };
        int r;

        buf_reset(out);
        if (p->ncpus > 0 && !p->cpus)
                return fail(out, -EINVAL, "histogram plot: %zu CPUs but no CPU data", p->ncpus);
        if (p->bound_us > HIST_LIMIT_US_MAX * UINT64_C(1000) ||
            p->x_limit_us > HIST_LIMIT_US_MAX * UINT64_C(1000))
                return fail(out, -EINVAL, "histogram plot: bound or x limit beyond %" PRIu64 " µs",
                            HIST_LIMIT_US_MAX * UINT64_C(1000));

        h.sum = sum = calloc(MAX(p->ncpus, (size_t) 1), sizeof(*sum));
        if (!sum)
                return fail(out, -ENOMEM, "out of memory for %zu CPUs", p->ncpus);
        if ((r = hist_sum_cpus(out, &h)) < 0)
                return r;
        if (h.grand_total == 0)
                return doc_no_data(out, p->title, "histogram",
                                   p->ncpus ? "no samples in any histogram" : "no CPUs");

        /* The x axis: a given limit, or the bound and the last non-empty exact bucket (the
         * overflow column holds the rest), rounded up to a tick. */
        hist_axis(p->x_limit_us, p->bound_us, h.last_bucket, &h.g, &h.xstep);
        uint64_t maxcount = hist_max_count(&h);
        h.g.decades = MAX(1u, (unsigned) ceil(log10((double) maxcount) - 1e-9));
        h.g.dec_h = (H_BOTTOM - H_TOP) / (h.g.decades + H_ZERO_GAP);

        /* The legend: every CPU up to HIST_LEGEND_ALL, else a summary and the worst ones. */
        h.summarise = p->ncpus > HIST_LEGEND_ALL;
        h.nlegend = h.summarise ? MIN((size_t) HIST_HIGHLIGHT, p->ncpus) : p->ncpus;
        h.ranked = ranked = malloc(p->ncpus * sizeof(*ranked));
        if (!ranked)
                return fail(out, -ENOMEM, "out of memory for %zu CPUs", p->ncpus);
        memcpy(ranked, sum, p->ncpus * sizeof(*ranked));
        qsort(ranked, p->ncpus, sizeof(*ranked), by_max_desc);
        uint64_t ranked_cut = ranked[h.nlegend - 1].max_ns;
        /* Entries that mention overflow are longer: three columns instead of four. */
        h.lcols = 4;
        for (size_t k = 0; k < p->ncpus; k++)
                if (sum[k].beyond && (!h.summarise || sum[k].max_ns >= ranked_cut))
                        h.lcols = 3;
        size_t legend_rows = (h.nlegend + h.lcols - 1) / h.lcols + (h.summarise ? 2 : 0);
        int height = (int) (H_BOTTOM + 75 + legend_rows * 20 + 10);

        doc_begin(out, height, p->title, "histogram");
        hist_subtitle(out, &h);
        hist_frame(out, &h);
        hist_data(out, &h);
        hist_bound(out, &h);
        hist_legend(out, &h);
        return doc_end(out);
}

/* ---- 2. Long-term plot ---- */

#define L_X0 80.0
#define L_X1 960.0
#define L_TOP 60.0
#define L_BOTTOM 390.0
#define L_STRIP 14.0 /* the scenario strip under the plot */
/* Kernel releases run down from the top of the plot: long ones would cross the data. */
#define KERNEL_LABEL_MAX 28

#define LT_STEP_MAX_NS (INT64_C(3653) * (int64_t) NSEC_PER_DAY)
/* Times up to twenty years before the end of int64 (in 2262): room for the arithmetic of the
 * axis, and still beyond what the farm stores (up to 2200). */
#define LT_TIME_MAX_NS (INT64_MAX - 2 * LT_STEP_MAX_NS)

struct lt_geom {
        int64_t t0, t1;
        double ymin, ymax; /* µs; logarithmic: powers of ten */
        bool log;
};

static double lt_x(const struct lt_geom *g, int64_t t) {
        return L_X0 + (L_X1 - L_X0) * (double) (t - g->t0) / (double) (g->t1 - g->t0);
}

static double lt_y(const struct lt_geom *g, double us) {
        double f;
        if (g->log) {
                us = MAX(us, g->ymin);
                f = (log10(us) - log10(g->ymin)) / (log10(g->ymax) - log10(g->ymin));
        } else
                f = (us - g->ymin) / (g->ymax - g->ymin);
        return L_BOTTOM - (L_BOTTOM - L_TOP) * MIN(f, 1.0);
}

/* The time ticks: a step from a fixed list giving at most ~9 labels, aligned to UTC (weeks to
 * Mondays). */
static void lt_time_axis(struct svg_buf *b, const struct lt_geom *g) {
        static const int64_t steps[] = {
                NSEC_PER_MIN,       5 * NSEC_PER_MIN,  15 * NSEC_PER_MIN, 30 * NSEC_PER_MIN,
                NSEC_PER_HOUR,      2 * NSEC_PER_HOUR, 3 * NSEC_PER_HOUR, 6 * NSEC_PER_HOUR,
                12 * NSEC_PER_HOUR, NSEC_PER_DAY,      2 * NSEC_PER_DAY,  7 * NSEC_PER_DAY,
                14 * NSEC_PER_DAY,  28 * NSEC_PER_DAY, 91 * NSEC_PER_DAY, 364 * NSEC_PER_DAY,
        };
        int64_t span = g->t1 - g->t0, step = steps[ELEMENTSOF(steps) - 1];
        for (size_t i = 0; i < ELEMENTSOF(steps); i++)
                if (span / steps[i] <= 8) {
                        step = steps[i];
                        break;
                }
        /* 1970-01-01 was a Thursday: Mondays are 4 days later. */
        int64_t offset = step >= 7 * (int64_t) NSEC_PER_DAY ? 4 * (int64_t) NSEC_PER_DAY : 0;
        int64_t t = g->t0 - ((g->t0 - offset) % step + step) % step;
        if (t < g->t0)
                t += step;
        bool by_day = step >= (int64_t) NSEC_PER_DAY;
        char label[32];

        putf(b, "<g class=\"x-axis\" font-size=\"%d\" text-anchor=\"middle\">\n", FS_SMALL);
        /* t + step is checked: a time axis that ends near the largest time must end the
         * loop, not wrap around to the smallest. */
        for (bool first = true; t <= g->t1; first = false) {
                double x = lt_x(g, t);
                /* Within a day only the first tick and midnights carry the date. */
                if (by_day || first || t % (int64_t) NSEC_PER_DAY == 0)
                        fmt_time(label, sizeof(label), t, by_day, false);
                else
                        fmt_time(label, sizeof(label), t, false, false),
                                memmove(label, label + 11, strlen(label + 11) + 1);
                putf(b,
                     "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>"
                     "<text class=\"time\" data-t-ns=\"%" PRId64 "\" x=\"%.1f\" y=\"%.0f\">%s"
                     "</text>\n",
                     x, L_TOP, x, L_BOTTOM, t, x, L_BOTTOM + L_STRIP + 16, label);
                if (__builtin_add_overflow(t, step, &t))
                        break;
        }
        putf(b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"%d\">time (UTC)</text>\n</g>\n",
             (L_X0 + L_X1) / 2, L_BOTTOM + L_STRIP + 34, FS_TEXT);
}

static void lt_value_axis(struct svg_buf *b, const struct lt_geom *g) {
        char label[32];
        putf(b, "<g class=\"y-axis\" font-size=\"%d\" text-anchor=\"end\">\n", FS_SMALL);
        if (g->log) {
                for (double d = g->ymin; d <= g->ymax * 1.0001; d *= 10)
                        for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) { /* 1, 2, 5 */
                                double v = d * m;
                                if (v > g->ymax * 1.0001)
                                        break;
                                double y = lt_y(g, v);
                                fmt_ns(label, sizeof(label), (uint64_t) llround(v * 1000));
                                putf(b,
                                     "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                                     "stroke=\"%s\"/><text class=\"y-label\" x=\"%.0f\" "
                                     "y=\"%.1f\">%s</text>\n",
                                     L_X0, y, L_X1, y, m == 1 ? "#d0d0d0" : "#eeeeee", L_X0 - 6,
                                     y + 4, label);
                        }
        } else {
                double step = nice_step(g->ymax - g->ymin, 6);
                for (double v = g->ymin; v <= g->ymax * 1.0001; v += step) {
                        double y = lt_y(g, v);
                        fmt_ns(label, sizeof(label), (uint64_t) llround(v * 1000));
                        putf(b,
                             "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                             "stroke=\"#e4e4e4\"/><text class=\"y-label\" x=\"%.0f\" "
                             "y=\"%.1f\">%s</text>\n",
                             L_X0, y, L_X1, y, L_X0 - 6, y + 4, v == 0 ? "0" : label);
                }
        }
        putf(b,
             "<text x=\"22\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"%d\" "
             "transform=\"rotate(-90 22 %.0f)\">worst latency per step%s</text>\n</g>\n",
             (L_TOP + L_BOTTOM) / 2, FS_TEXT, (L_TOP + L_BOTTOM) / 2, g->log ? " (log)" : "");
}

/* The points that share a pixel column (and no gap) drawn as one. */
struct lt_group {
        size_t first, worst, n, violations;
        bool gap_before;
};

static int lt_check(struct svg_buf *b, const struct svg_lt_plot *p) {
        if ((p->npoints && !p->points) || (p->nmarks && !p->marks) || (p->nbands && !p->bands))
                return fail(b, -EINVAL, "long-term plot: a count without its array");
        if (p->step_ns < 0 || p->bound_ns < 0)
                return fail(b, -EINVAL, "long-term plot: negative step or bound");
        /* Steps of up to ten years, so that 1.5 steps and a time plus a step stay in range. */
        if (p->step_ns > LT_STEP_MAX_NS)
                return fail(b, -EINVAL, "long-term plot: step %" PRId64 " ns is over ten years",
                            p->step_ns);
        if (p->start_ns < 0 || p->end_ns < 0 || (p->end_ns && p->end_ns <= p->start_ns) ||
            p->start_ns > LT_TIME_MAX_NS || p->end_ns > LT_TIME_MAX_NS)
                return fail(b, -EINVAL,
                            "long-term plot: time range %" PRId64 "..%" PRId64 " is not valid",
                            p->start_ns, p->end_ns);
        for (size_t i = 0; i < p->npoints; i++) {
                const struct svg_lt_point *pt = &p->points[i];
                if (pt->t_ns < 0)
                        return fail(b, -EINVAL, "point %zu: negative time %" PRId64, i, pt->t_ns);
                if (pt->t_ns > LT_TIME_MAX_NS)
                        return fail(b, -EINVAL, "point %zu: time %" PRId64 " out of range", i,
                                    pt->t_ns);
                if (pt->max_ns < 0)
                        return fail(b, -EINVAL, "point %zu: negative latency %" PRId64 " ns", i,
                                    pt->max_ns);
                if (i > 0 && pt->t_ns <= p->points[i - 1].t_ns)
                        return fail(b, -EINVAL,
                                    "point %zu: time %" PRId64 " not after the previous point's", i,
                                    pt->t_ns);
                if (pt->href && !href_ok(pt->href))
                        return fail(b, -EINVAL, "point %zu: link is neither http(s) nor relative",
                                    i);
        }
        for (size_t i = 0; i < p->nmarks; i++)
                if (p->marks[i].t_ns < 0)
                        return fail(b, -EINVAL, "kernel mark %zu: negative time", i);
        for (size_t i = 0; i < p->nbands; i++)
                if (p->bands[i].start_ns < 0 || p->bands[i].end_ns < p->bands[i].start_ns)
                        return fail(b, -EINVAL, "scenario band %zu: bad time range", i);
        return 0;
}

static void lt_point_title(struct svg_buf *b, const struct svg_lt_plot *p,
                           const struct lt_group *gr) {
        const struct svg_lt_point *w = &p->points[gr->worst];
        char v[32], t[32], t2[32];
        fmt_ns(v, sizeof(v), (uint64_t) w->max_ns);
        fmt_time(t, sizeof(t), w->t_ns, false, true);
        puts_(b, "<title>");
        if (gr->n == 1)
                putf(b, "%s at %s UTC", v, t);
        else {
                fmt_time(t2, sizeof(t2), p->points[gr->first + gr->n - 1].t_ns, false, true);
                putf(b, "max %s at %s UTC (worst of %zu steps up to %s", v, t, gr->n, t2);
                if (gr->violations)
                        putf(b, ", %zu above the bound", gr->violations);
                puts_(b, ")");
        }
        if (w->detail) {
                puts_(b, "; ");
                put_text(b, w->detail, SVG_TOOLTIP_MAX);
        }
        puts_(b, "</title>");
}

/* What the long-term plot is drawn from: the time axis, the points grouped per pixel column
 * (groups), and the counts and range of the points shown. */
struct lt_render {
        const struct svg_lt_plot *p;
        struct lt_geom g;
        struct lt_group *groups;
        size_t ngroups, nviolations, nshown;
        int64_t vmax, vmin;
};

/* Groups the points per pixel column, breaking at gaps. */
static void lt_group_points(struct lt_render *h) {
        const struct svg_lt_plot *p = h->p;
        int64_t step = p->step_ns;
        long prev_col = -1;
        for (size_t i = 0; i < p->npoints; i++) {
                const struct svg_lt_point *pt = &p->points[i];
                if (pt->t_ns < h->g.t0 || pt->t_ns >= h->g.t1)
                        continue; /* outside the range the caller asked for */
                h->nshown++;
                bool gap = i == 0 || h->nshown == 1 ||
                           (step > 0 && pt->t_ns - p->points[i - 1].t_ns > step + step / 2);
                long col = (long) floor(lt_x(&h->g, pt->t_ns));
                bool violation = p->bound_ns && pt->max_ns > p->bound_ns;
                h->nviolations += violation;
                h->vmax = MAX(h->vmax, pt->max_ns);
                h->vmin = MIN(h->vmin, pt->max_ns);
                if (!gap && col == prev_col) {
                        struct lt_group *gr = &h->groups[h->ngroups - 1];
                        gr->n++;
                        gr->violations += violation;
                        if (pt->max_ns > p->points[gr->worst].max_ns)
                                gr->worst = i;
                        continue;
                }
                h->groups[h->ngroups++] = (struct lt_group){
                        .first = i, .worst = i, .n = 1, .violations = violation, .gap_before = gap
                };
                prev_col = col;
        }
}

/* The value axis: decades around the data and the bound (log), or 0 to a tick above. */
static void lt_value_range(struct lt_render *h) {
        const struct svg_lt_plot *p = h->p;
        double top_us = (double) MAX(h->vmax, p->bound_ns) / 1000;
        if (h->g.log) {
                double lo_us = MAX((double) h->vmin / 1000, 1.0);
                if (p->bound_ns)
                        lo_us = MIN(lo_us, (double) p->bound_ns / 1000);
                h->g.ymin = pow(10, floor(log10(lo_us)));
                /* A bound on the lowest decade line would hide in the frame. */
                if (p->bound_ns && (double) p->bound_ns / 1000 < h->g.ymin * 1.5)
                        h->g.ymin /= 10;
                h->g.ymax = pow(10, ceil(log10(MAX(top_us, 1.0)) + 1e-9));
                if (h->g.ymax <= h->g.ymin)
                        h->g.ymax = h->g.ymin * 10;
        } else {
                h->g.ymin = 0;
                double s = nice_step(MAX(top_us * 1.05, 1.0), 6);
                h->g.ymax = MAX(ceil(top_us * 1.05 / s) * s, s); /* all zero: still a range */
        }
}

/* Scenario bands, in a strip under the plot. */
static void lt_bands(struct svg_buf *out, const struct svg_lt_plot *p, const struct lt_geom *g) {
        char t1[48], t2[48];
        puts_(out, "<g class=\"bands\">\n");
        for (size_t i = 0; i < p->nbands; i++) {
                const struct svg_lt_band *bd = &p->bands[i];
                int64_t s = MAX(bd->start_ns, g->t0), e = MIN(bd->end_ns, g->t1);
                if (e <= s)
                        continue;
                const char *name = bd->scenario ? bd->scenario : "";
                double x0 = lt_x(g, s), x1 = lt_x(g, e);
                putf(out,
                     "<rect class=\"band\" data-start-ns=\"%" PRId64 "\" data-end-ns=\"%" PRId64
                     "\" x=\"%.1f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" "
                     "fill=\"%s\"><title>",
                     s, e, x0, L_BOTTOM, MAX(x1 - x0, 0.3), L_STRIP, svg_scenario_colour(name));
                put_text(out, name, SVG_LABEL_MAX);
                fmt_time(t1, sizeof(t1), s, false, false);
                fmt_time(t2, sizeof(t2), e, false, false);
                putf(out, ": %s to %s UTC</title></rect>\n", t1, t2);
        }
        puts_(out, "</g>\n");
}

/* The highlighted span: at least 4 units wide, so that one step can be seen. */
static void lt_highlight(struct svg_buf *out, const struct svg_lt_plot *p,
                         const struct lt_geom *g) {
        if (p->hl_end_ns > p->hl_start_ns && p->hl_end_ns > g->t0 && p->hl_start_ns < g->t1) {
                double x0 = lt_x(g, MAX(p->hl_start_ns, g->t0)),
                       x1 = lt_x(g, MIN(p->hl_end_ns, g->t1));
                if (x1 - x0 < 4) {
                        x0 = (x0 + x1) / 2 - 2;
                        x1 = x0 + 4;
                }
                putf(out,
                     "<rect class=\"highlight\" data-start-ns=\"%" PRId64
                     "\" data-end-ns=\"%" PRId64
                     "\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"#E69F00\" "
                     "fill-opacity=\"0.25\" stroke=\"#000\" stroke-width=\"1.5\" "
                     "stroke-dasharray=\"3 2\"><title>",
                     p->hl_start_ns, p->hl_end_ns, x0, L_TOP, x1 - x0, L_BOTTOM - L_TOP);
                put_text(out, p->hl_label ? p->hl_label : "highlighted", SVG_TOOLTIP_MAX);
                puts_(out, "</title></rect>\n");
        }
}

static void lt_bound(struct svg_buf *out, const struct svg_lt_plot *p, const struct lt_geom *g) {
        char t1[48];
        if (p->bound_ns) {
                double y = lt_y(g, (double) p->bound_ns / 1000);
                fmt_ns(t1, sizeof(t1), (uint64_t) p->bound_ns);
                putf(out,
                     "<line class=\"bound\" x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                     "stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\">"
                     "<title>latency bound %s</title></line>\n"
                     "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"%d\" "
                     "fill=\"#D55E00\">bound %s</text>\n",
                     L_X0, y, L_X1, y, t1, L_X1 - 4, y - 4, FS_SMALL, t1);
        }
}

/* Kernel changes: a labelled vertical line each. */
static void lt_kernels(struct svg_buf *out, const struct svg_lt_plot *p, const struct lt_geom *g) {
        char t1[48];
        puts_(out, "<g class=\"kernels\">\n");
        for (size_t i = 0; i < p->nmarks; i++) {
                const struct svg_lt_mark *m = &p->marks[i];
                if (m->t_ns < g->t0 || m->t_ns > g->t1)
                        continue;
                double x = lt_x(g, m->t_ns);
                fmt_time(t1, sizeof(t1), m->t_ns, false, false);
                putf(out, "<g class=\"kernel\" data-t-ns=\"%" PRId64 "\"><title>kernel ", m->t_ns);
                put_text(out, m->label, SVG_TOOLTIP_MAX);
                putf(out,
                     " from %s UTC</title><line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" "
                     "stroke=\"#555\" stroke-width=\"1.2\"/><text x=\"%.1f\" y=\"%.0f\" "
                     "font-size=\"%d\" transform=\"rotate(-90 %.1f %.0f)\" text-anchor=\"end\" "
                     "stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">",
                     t1, x, L_TOP, x, L_BOTTOM, x + 11, L_TOP + 4, FS_SMALL, x + 11, L_TOP + 4);
                put_text(out, m->label, KERNEL_LABEL_MAX);
                puts_(out, "</text></g>\n");
        }
        puts_(out, "</g>\n");
}

/* The line of column maxima, broken at gaps, and the points: small circles; violations:
 * vermillion triangles, on top. */
static void lt_data(struct svg_buf *out, const struct lt_render *h) {
        const struct svg_lt_plot *p = h->p;
        const struct lt_geom *g = &h->g;
        const struct lt_group *groups = h->groups;
        size_t ngroups = h->ngroups;
        puts_(out, "<path class=\"worst-line\" fill=\"none\" stroke=\"#0072B2\" "
                   "stroke-width=\"1.2\" stroke-linejoin=\"round\" d=\"");
        for (size_t k = 0; k < ngroups; k++) {
                const struct lt_group *gr = &groups[k];
                puts_(out, gr->gap_before ? "M" : "L");
                put_tenths(out, lt_x(g, p->points[gr->worst].t_ns));
                puts_(out, " ");
                put_tenths(out, lt_y(g, (double) p->points[gr->worst].max_ns / 1000));
        }
        puts_(out, "\"/>\n");

        for (int pass = 0; pass < 2; pass++) {
                putf(out, "<g class=\"%s\">\n", pass ? "violations" : "points");
                for (size_t k = 0; k < ngroups; k++) {
                        const struct lt_group *gr = &groups[k];
                        const struct svg_lt_point *w = &p->points[gr->worst];
                        if ((gr->violations > 0) != (pass == 1))
                                continue;
                        double x = lt_x(g, w->t_ns), y = lt_y(g, (double) w->max_ns / 1000);
                        if (w->href) {
                                puts_(out, "<a href=\"");
                                put_text(out, w->href, 0);
                                puts_(out, "\">");
                        }
                        if (pass)
                                putf(out,
                                     "<path class=\"violation\" data-t-ns=\"%" PRId64 "\" "
                                     "data-count=\"%zu\" d=\"M%.1f %.1fl5.5 9.5h-11z\" "
                                     "fill=\"#D55E00\" stroke=\"#000\" stroke-width=\"0.6\">",
                                     w->t_ns, gr->violations, x, y - 6.5);
                        else {
                                putf(out, "<circle class=\"point\" data-t-ns=\"%" PRId64 "\" cx=\"",
                                     w->t_ns);
                                put_tenths(out, x);
                                puts_(out, "\" cy=\"");
                                put_tenths(out, y);
                                puts_(out, ngroups < 300 ? "\" r=\"3\" fill=\"#0072B2\">"
                                                         : "\" r=\"1.8\" fill=\"#0072B2\">");
                        }
                        lt_point_title(out, p, gr);
                        puts_(out, pass ? "</path>" : "</circle>");
                        puts_(out, w->href ? "</a>\n" : "\n");
                }
                puts_(out, "</g>\n");
        }
}

/* The legend: markers, then the scenarios. */
static void lt_legend(struct svg_buf *out, const struct svg_lt_plot *p, const char *const *names,
                      size_t nbands_named) {
        double ly = L_BOTTOM + L_STRIP + 58;
        putf(out,
             "<g class=\"legend\"><circle cx=\"26\" cy=\"%.0f\" r=\"3\" fill=\"#0072B2\"/>"
             "<text x=\"36\" y=\"%.0f\">worst case per step</text>",
             ly - 4, ly);
        if (p->bound_ns)
                putf(out,
                     "<path d=\"M216 %.0fl5.5 9.5h-11z\" fill=\"#D55E00\" stroke=\"#000\" "
                     "stroke-width=\"0.6\"/><text x=\"228\" y=\"%.0f\">above the bound</text>",
                     ly - 11, ly);
        if (p->nmarks)
                putf(out,
                     "<line x1=\"370\" y1=\"%.0f\" x2=\"398\" y2=\"%.0f\" stroke=\"#555\" "
                     "stroke-width=\"1.2\"/><text x=\"404\" y=\"%.0f\">kernel change</text>",
                     ly - 4, ly - 4, ly);
        puts_(out, "\n");
        for (size_t k = 0; k < nbands_named; k++) {
                double x = 20 + (double) (k % 6) * 160, y = ly + 20 + (double) (k / 6) * 20;
                putf(out,
                     "<rect x=\"%.0f\" y=\"%.0f\" width=\"22\" height=\"12\" fill=\"%s\" "
                     "stroke=\"#444\" stroke-width=\"0.5\"/><text x=\"%.0f\" y=\"%.0f\">",
                     x, y - 10, svg_scenario_colour(names[k]), x + 28, y);
                put_text(out, names[k], 24);
                puts_(out, "</text>\n");
        }
        puts_(out, "</g>\n");
}

int svg_lt_render(struct svg_buf *out, const struct svg_lt_plot *p) {
        char t1[48], t2[48];
        int r;

        buf_reset(out);
        r = lt_check(out, p);
        if (r < 0)
                return r;
        if (p->npoints == 0)
                return doc_no_data(out, p->title, "long-term", "no measured steps");

        struct lt_render h = {
                .p = p,
                .g = { .t0 = p->start_ns, .t1 = p->end_ns, .log = p->scale != SVG_SCALE_LINEAR },
                .vmin = INT64_MAX
        };
        int64_t step = p->step_ns;
        if (!h.g.t0 && !h.g.t1) {
                h.g.t0 = p->points[0].t_ns;
                if (__builtin_add_overflow(p->points[p->npoints - 1].t_ns, MAX(step, (int64_t) 1),
                                           &h.g.t1))
                        h.g.t1 = INT64_MAX;
        }
        /* A time axis from the data spans at least an hour, the data in its middle: one
         * sample is a point in a readable plot, not a line at the edge. */
        if (!p->start_ns && !p->end_ns && h.g.t1 - h.g.t0 < (int64_t) NSEC_PER_HOUR) {
                h.g.t0 -= ((int64_t) NSEC_PER_HOUR - (h.g.t1 - h.g.t0)) / 2;
                h.g.t1 = h.g.t0 + (int64_t) NSEC_PER_HOUR;
        }

        _cleanup_free_ struct lt_group *groups = malloc(p->npoints * sizeof(*groups));
        if (!groups)
                return fail(out, -ENOMEM, "out of memory for %zu points", p->npoints);
        h.groups = groups;
        lt_group_points(&h);
        if (h.nshown == 0)
                return doc_no_data(out, p->title, "long-term", "no steps in the time range");
        lt_value_range(&h);

        size_t nbands_named = 0;
        const char *names[BANDS_NAMED] = { 0 };
        for (size_t i = 0; i < p->nbands; i++) {
                const char *s = p->bands[i].scenario ? p->bands[i].scenario : "";
                size_t k;
                for (k = 0; k < nbands_named && strcmp(names[k], s) != 0; k++)
                        ;
                if (k == nbands_named && nbands_named < BANDS_NAMED)
                        names[nbands_named++] = s;
        }
        int height = (int) (L_BOTTOM + L_STRIP + 60 + ((nbands_named + 5) / 6 + 1) * 20);
        doc_begin(out, height, p->title, "long-term");

        fmt_ns(t1, sizeof(t1), (uint64_t) h.vmax);
        putf(out, "<text class=\"summary\" x=\"20\" y=\"46\">%zu step%s, max %s", h.nshown,
             h.nshown == 1 ? "" : "s", t1);
        if (p->bound_ns) {
                fmt_ns(t2, sizeof(t2), (uint64_t) p->bound_ns);
                putf(out, "; bound %s: %zu step%s above", t2, h.nviolations,
                     h.nviolations == 1 ? "" : "s");
        }
        puts_(out, "</text>\n");

        lt_value_axis(out, &h.g);
        lt_time_axis(out, &h.g);
        putf(out,
             "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
             "stroke=\"#444\"/>\n",
             L_X0, L_TOP, L_X1 - L_X0, L_BOTTOM - L_TOP);
        lt_bands(out, p, &h.g);
        lt_highlight(out, p, &h.g);
        lt_bound(out, p, &h.g);
        lt_kernels(out, p, &h.g);
        lt_data(out, &h);
        lt_legend(out, p, names, nbands_named);
        return doc_end(out);
}

/* ---- 3. Coverage ---- */

#define C_X0 230.0
#define C_X1 720.0
#define C_ROW 30.0
#define C_TOP 60.0

static const char *const cov_fill[] = {
        [SVG_COV_COVERED] = "#009E73",
        [SVG_COV_MISSING] = "#FFFFFF",
        [SVG_COV_PROBLEM] = "url(#rtsoak-hatch)",
};
static const char *const cov_name[] = {
        [SVG_COV_COVERED] = "covered",
        [SVG_COV_MISSING] = "missing",
        [SVG_COV_PROBLEM] = "problem",
};

/* Checks what the coverage plot was given. */
static int cov_check(struct svg_buf *out, const struct svg_cov_plot *p) {
        if (p->nmachines && !p->machines)
                return fail(out, -EINVAL, "coverage plot: %zu machines but no data", p->nmachines);
        if (p->target_ns <= 0 || p->start_ns < 0)
                return fail(out, -EINVAL, "coverage plot: target %" PRId64 " ns is not positive",
                            p->target_ns);
        for (size_t m = 0; m < p->nmachines; m++) {
                const struct svg_cov_machine *mc = &p->machines[m];
                if (mc->nsegs && !mc->segs)
                        return fail(out, -EINVAL, "machine %zu: segments missing", m);
                if (mc->href && !href_ok(mc->href))
                        return fail(out, -EINVAL,
                                    "machine %zu: link is neither http(s) nor relative", m);
                for (size_t i = 0; i < mc->nsegs; i++) {
                        const struct svg_cov_segment *s = &mc->segs[i];
                        if ((unsigned) s->status > SVG_COV_PROBLEM)
                                return fail(out, -EINVAL, "machine %zu segment %zu: status %d", m,
                                            i, (int) s->status);
                        if (s->start_ns < 0 || s->end_ns < s->start_ns)
                                return fail(out, -EINVAL, "machine %zu segment %zu: bad time range",
                                            m, i);
                        if (i > 0 && s->start_ns < mc->segs[i - 1].end_ns)
                                return fail(out, -EINVAL,
                                            "machine %zu segment %zu: overlaps the one before", m,
                                            i);
                }
        }
        return 0;
}

/* A machine's row: its name, its bar of segments, and its coverage. */
static void cov_machine(struct svg_buf *out, const struct svg_cov_plot *p, size_t m) {
        char t1[48], t2[48], t3[48];
        int64_t end = p->start_ns + p->target_ns;
        const struct svg_cov_machine *mc = &p->machines[m];
        double y = C_TOP + (double) m * C_ROW, h = C_ROW - 10;
        int64_t covered = 0, problem = 0;

        putf(out, "<g class=\"machine\">");
        if (mc->href) {
                puts_(out, "<a href=\"");
                put_text(out, mc->href, 0);
                puts_(out, "\">");
        }
        putf(out, "<text class=\"name\" x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\"><title>",
             C_X0 - 8, y + h / 2 + 5);
        put_text(out, mc->name, SVG_TOOLTIP_MAX);
        puts_(out, "</title>");
        put_text(out, mc->name, 28);
        puts_(out, mc->href ? "</text></a>\n" : "</text>\n");
        putf(out,
             "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" fill=\"#fff\" "
             "stroke=\"#888\"/>\n",
             C_X0, y, C_X1 - C_X0, h);
        for (size_t i = 0; i < mc->nsegs; i++) {
                const struct svg_cov_segment *s = &mc->segs[i];
                int64_t a = MAX(s->start_ns, p->start_ns), e = MIN(s->end_ns, end);
                if (e <= a)
                        continue;
                if (s->status == SVG_COV_COVERED)
                        covered += e - a;
                else if (s->status == SVG_COV_PROBLEM)
                        problem += e - a;
                double x0 = C_X0 +
                            (C_X1 - C_X0) * (double) (a - p->start_ns) / (double) p->target_ns,
                       x1 = C_X0 +
                            (C_X1 - C_X0) * (double) (e - p->start_ns) / (double) p->target_ns;
                fmt_time(t1, sizeof(t1), a, false, false);
                fmt_time(t2, sizeof(t2), e, false, false);
                putf(out,
                     "<rect class=\"%s\" data-start-ns=\"%" PRId64 "\" "
                     "data-end-ns=\"%" PRId64 "\" x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" "
                     "height=\"%.1f\" fill=\"%s\" stroke=\"#444\" stroke-width=\"0.4\">"
                     "<title>%s: %s to %s UTC",
                     cov_name[s->status], a, e, x0, y, MAX(x1 - x0, 0.5), h, cov_fill[s->status],
                     cov_name[s->status], t1, t2);
                if (s->detail) {
                        puts_(out, "; ");
                        put_text(out, s->detail, SVG_TOOLTIP_MAX);
                }
                puts_(out, "</title></rect>\n");
        }
        if (mc->covered_given)
                covered = MAX(mc->covered_ns, 0);
        fmt_span(t1, sizeof(t1), covered);
        fmt_span(t2, sizeof(t2), p->target_ns);
        putf(out,
             "<text class=\"coverage\" data-covered-ns=\"%" PRId64 "\" x=\"%.0f\" "
             "y=\"%.1f\">%s / %s (%.0f %%)",
             covered, C_X1 + 8, y + h / 2 + 5, t1, t2,
             100.0 * (double) covered / (double) p->target_ns);
        if (problem) {
                fmt_span(t3, sizeof(t3), problem);
                putf(out, ", %s problem", t3);
        }
        puts_(out, "</text></g>\n");
}

int svg_cov_render(struct svg_buf *out, const struct svg_cov_plot *p) {
        char t1[48], t2[48];

        buf_reset(out);
        int r = cov_check(out, p);
        if (r < 0)
                return r;
        if (p->nmachines == 0)
                return doc_no_data(out, p->title, "coverage", "no machines");

        int height = (int) (C_TOP + (double) p->nmachines * C_ROW + 70);
        doc_begin(out, height, p->title, "coverage");
        puts_(out, "<defs><pattern id=\"rtsoak-hatch\" width=\"6\" height=\"6\" "
                   "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
                   "<rect width=\"6\" height=\"6\" fill=\"#D55E00\"/><line x1=\"0\" y1=\"0\" "
                   "x2=\"0\" y2=\"6\" stroke=\"#000\" stroke-width=\"2.5\"/></pattern></defs>\n");
        fmt_span(t1, sizeof(t1), p->target_ns);
        fmt_time(t2, sizeof(t2), p->start_ns, false, false);
        putf(out, "<text class=\"summary\" x=\"20\" y=\"46\">target %s from %s UTC</text>\n", t1,
             t2);

        for (size_t m = 0; m < p->nmachines; m++)
                cov_machine(out, p, m);

        double ly = C_TOP + (double) p->nmachines * C_ROW + 30;
        puts_(out, "<g class=\"legend\">");
        for (int s = SVG_COV_COVERED; s <= SVG_COV_PROBLEM; s++)
                putf(out,
                     "<rect x=\"%d\" y=\"%.0f\" width=\"22\" height=\"12\" fill=\"%s\" "
                     "stroke=\"#444\"/><text x=\"%d\" y=\"%.0f\">%s</text>",
                     (int) C_X0 + s * 130, ly - 10, cov_fill[s], (int) C_X0 + 28 + s * 130, ly,
                     cov_name[s]);
        puts_(out, "</g>\n");
        return doc_end(out);
}
