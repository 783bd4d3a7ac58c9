/* SPDX-License-Identifier: MIT */
/* Unit tests of the dashboard's SVG plots: every output is parsed as XML (libxml2) and its
 * structure checked; a typical case of each plot is saved to the build directory to look at. */
#include <errno.h>
#include <math.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include "tests.h"
#include "hist.h"
#include "macro.h"
#include "svg.h"

#define DAY_NS (86400 * INT64_C(1000000000))
#define MIN_NS (60 * INT64_C(1000000000))
#define T0_NS (INT64_C(1793491200) * 1000000000) /* 2026-11-01 00:00 UTC */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

/* ---- XML helpers ---- */

struct doc {
        xmlDocPtr xml;
        xmlXPathContextPtr ctx;
};

static void doc_free(struct doc *d) {
        xmlXPathFreeContext(d->ctx);
        xmlFreeDoc(d->xml);
}

/* Parses the output strictly (any error or warning fails the test). */
static struct doc parse(const struct svg_buf *b) {
        struct doc d = { 0 };
        assert_non_null(b->data);
        assert_int_equal(strlen(b->data), b->len);
        d.xml = xmlReadMemory(b->data, (int) b->len, "plot.svg", "UTF-8",
                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
        if (!d.xml) {
                const xmlError *e = xmlGetLastError();
                fail_msg("not well-formed XML: %s (line %d)", e ? e->message : "?",
                         e ? e->line : 0);
        }
        d.ctx = xmlXPathNewContext(d.xml);
        assert_non_null(d.ctx);
        xmlXPathRegisterNs(d.ctx, BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
        return d;
}

static double xnum(struct doc *d, const char *expr) {
        xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, d->ctx);
        if (!o)
                fail_msg("bad XPath %s", expr);
        double v = xmlXPathCastToNumber(o);
        xmlXPathFreeObject(o);
        return v;
}

static int xcount(struct doc *d, const char *path) {
        char expr[512];
        snprintf(expr, sizeof(expr), "count(%s)", path);
        return (int) xnum(d, expr);
}

/* The string value of the first match, in a static buffer. */
static const char *xstr(struct doc *d, const char *path) {
        static char s[1 << 20];
        char expr[512];
        snprintf(expr, sizeof(expr), "string(%s)", path);
        xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, d->ctx);
        if (!o)
                fail_msg("bad XPath %s", expr);
        xmlChar *v = xmlXPathCastToString(o);
        snprintf(s, sizeof(s), "%s", (const char *) v);
        xmlFree(v);
        xmlXPathFreeObject(o);
        return s;
}

/* Keeps the SVG in the build directory, to look at. */
static void save(const struct svg_buf *b, const char *name) {
        const char *dir = getenv("SVG_ARTEFACT_DIR");
        char path[1024];
        if (!dir)
                return;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fwrite(b->data, 1, b->len, f), b->len);
        assert_int_equal(fclose(f), 0);
}

static void buf_freep(struct svg_buf *b) {
        svg_buf_done(b);
}
#define _cleanup_buf_ _cleanup_(buf_freep)

/* ---- Histogram ---- */

#define LIMIT_US 1000

/* An OSADL-like CPU: a peak around base µs, a tail to max_us, counts over ~6 decades. */
static void fill_cpu(uint64_t *counts, unsigned base, unsigned max_us, uint64_t samples) {
        memset(counts, 0, LIMIT_US * sizeof(*counts));
        for (uint64_t n = 0; n < samples; n++) {
                /* An exponential tail: each 3 µs further, e times fewer samples. */
                double u = ((double) (rng() >> 11) + 1) / 9007199254740993.0;
                unsigned v = base + (unsigned) (-log(u) * 3.0);
                counts[MIN(v, max_us)]++;
        }
        counts[max_us] += 1; /* the maximum itself */
}

static void hist_cpus(struct svg_hist_cpu *cpus, uint64_t (*counts)[LIMIT_US], size_t n) {
        for (size_t k = 0; k < n; k++) {
                fill_cpu(counts[k], 5 + (unsigned) k % 7, 40 + (unsigned) (k * 37) % 150, 200000);
                cpus[k] = (struct svg_hist_cpu){ .cpu = (unsigned) k,
                                                 .counts = counts[k],
                                                 .nbuckets = LIMIT_US,
                                                 .max_ns = (40 + (k * 37) % 150) * 1000 + 400 };
        }
}

static void test_hist_typical(void **state) {
        static uint64_t counts[8][LIMIT_US];
        struct svg_hist_cpu cpus[8];
        _cleanup_buf_ struct svg_buf b = { 0 };
        hist_cpus(cpus, counts, 8);
        cpus[3].overflow = 12; /* 12 samples at 1 ms or more */
        cpus[3].max_ns = 4200000;
        struct svg_hist_plot p = {
                .title = "lab-07 · 6.6.63-rt46", .cpus = cpus, .ncpus = 8, .bound_us = 150
        };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        save(&b, "svg-hist-8cpu.svg");
        struct doc d = parse(&b);

        assert_int_equal(xcount(&d, "//s:path[contains(@class,'curve')]"), 8);
        for (unsigned k = 0; k < 8; k++) {
                char q[128];
                snprintf(q, sizeof(q), "//s:path[contains(@class,'curve')][@data-cpu='%u']", k);
                assert_int_equal(xcount(&d, q), 1);
        }
        assert_int_equal(xcount(&d, "//s:g[@class='legend-entry']"), 8);
        /* Log axis: 0 at the baseline, then decades up to the largest count (~200k). */
        static const char *const labels[] = { "0", "1", "10", "100", "1k", "10k", "100k" };
        for (size_t i = 0; i < ELEMENTSOF(labels); i++) {
                char q[128];
                snprintf(q, sizeof(q), "//s:text[@class='y-label'][.='%s']", labels[i]);
                assert_int_equal(xcount(&d, q), 1);
        }
        assert_int_equal(xcount(&d, "//s:text[@class='y-label']"), 7);
        /* The bound: one dashed vertical line at 150 µs of an axis rounded up to 250 µs (the
         * worst CPU's last bucket is 188). */
        assert_int_equal(xcount(&d, "//s:line[@class='bound']"), 1);
        double x = xnum(&d, "number(//s:line[@class='bound']/@x1)");
        assert_true(fabs(x - (80 + 770.0 * 150 / 200)) < 0.2);
        assert_true(xnum(&d, "number(//s:line[@class='bound']/@x1)") ==
                    xnum(&d, "number(//s:line[@class='bound']/@x2)"));
        assert_non_null(strstr(xstr(&d, "//s:line[@class='bound']/@stroke-dasharray"), " "));
        /* CPU 3's overflow: a marker with its count, and the worst maximum in the summary. */
        assert_int_equal(xcount(&d, "//s:path[@class='overflow']"), 1);
        assert_string_equal(xstr(&d, "//s:path[@class='overflow']/@data-cpu"), "3");
        assert_string_equal(xstr(&d, "//s:path[@class='overflow']/@data-count"), "12");
        assert_non_null(strstr(xstr(&d, "//s:text[@class='summary']"), "max 4.20 ms (CPU 3)"));
        assert_non_null(strstr(xstr(&d, "//s:g[@data-cpu='3']/s:text"), "CPU 3: max 4.20 ms"));
        /* Every curve starts and ends on the baseline: zero counts are drawn there. */
        const char *path = xstr(&d, "//s:path[@data-cpu='0']/@d");
        assert_true(strncmp(path, "M80.0 400.0", 11) == 0);
        assert_true(strlen(path) > 20 && strcmp(path + strlen(path) - 6, "V400.0") == 0);
        doc_free(&d);
}

/* The decoded form of common/hist.h: exact buckets, the logarithmic ones as overflow. */
static void test_hist_from_decoded(void **state) {
        struct hist h, back;
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len;
        const char *reason = NULL;
        _cleanup_buf_ struct svg_buf b = { 0 };

        assert_int_equal(hist_init(&h, 200), 0);
        for (unsigned i = 0; i < 5000; i++)
                h.counts[hist_index(200, (uint64_t) (10 + i % 20) * 1000 + 300)]++;
        h.counts[hist_index(200, 250000)] += 3; /* above the limit: log buckets */
        h.counts[hist_index(200, 9000000)] += 2;
        assert_int_equal(hist_encode(h.limit_us, h.counts, &blob, &len), 0);
        assert_int_equal(hist_init(&back, 200), 0);
        assert_int_equal(hist_decode_merge(&back, blob, len, NULL, &reason), 0);

        struct svg_hist_cpu c;
        svg_hist_cpu_from_hist(&c, 2, &back, 9000000);
        assert_int_equal(c.nbuckets, 200);
        assert_int_equal(c.overflow, 5);
        struct svg_hist_plot p = { .cpus = &c, .ncpus = 1, .bound_us = 100 };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:path[contains(@class,'curve')]"), 1);
        assert_string_equal(xstr(&d, "//s:path[@class='overflow']/@data-count"), "5");
        assert_non_null(strstr(xstr(&d, "//s:text[@class='summary']"), "max 9.00 ms"));
        assert_non_null(strstr(xstr(&d, "//s:text[@class='summary']"), "5 samples at or above"));
        doc_free(&d);
        hist_done(&h);
        hist_done(&back);
}

static void test_hist_no_data(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        uint64_t zero[10] = { 0 };
        struct svg_hist_cpu c = { .cpu = 0, .counts = zero, .nbuckets = 10 };
        struct svg_hist_plot none = { .title = "empty" }, empty = { .cpus = &c, .ncpus = 1 };

        assert_int_equal(svg_hist_render(&b, &none), 0);
        save(&b, "svg-hist-no-data.svg");
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:text[@class='no-data']"), 1);
        assert_int_equal(xcount(&d, "//s:path"), 0);
        assert_string_equal(xstr(&d, "/s:svg/s:title"), "empty");
        doc_free(&d);

        assert_int_equal(svg_hist_render(&b, &empty), 0);
        d = parse(&b);
        assert_int_equal(xcount(&d, "//s:text[@class='no-data']"), 1);
        doc_free(&d);
}

static void test_hist_one_sample(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        uint64_t counts[100] = { 0 };
        counts[7] = 1;
        struct svg_hist_cpu c = { .cpu = 5, .counts = counts, .nbuckets = 100, .max_ns = 7300 };
        struct svg_hist_plot p = { .cpus = &c, .ncpus = 1 };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:path[contains(@class,'curve')]"), 1);
        /* One decade: 0, 1 and 10 on the axis. */
        assert_int_equal(xcount(&d, "//s:text[@class='y-label']"), 3);
        assert_int_equal(xcount(&d, "//s:text[@class='y-label'][.='10']"), 1);
        assert_int_equal(xcount(&d, "//s:line[@class='bound']"), 0);
        assert_non_null(strstr(xstr(&d, "//s:text[@class='summary']"),
                               "1 CPU, 1 sample, max 7.3 µs (CPU 5)"));
        /* The axis is 0-10 µs (77 units per µs); the curve leaves the baseline at 7 µs, rises
         * to count 1 (half a decade above "0": 400 - 0.5 * 330 / 1.5) and returns at 8 µs. */
        assert_string_equal(xstr(&d, "//s:path[@data-cpu='5']/@d"),
                            "M80.0 400.0H619.0V290.0H696.0V400.0H850.0V400.0");
        doc_free(&d);
}

static void test_hist_only_overflow(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        uint64_t zero[LIMIT_US] = { 0 }, counts[LIMIT_US] = { 0 };
        counts[20] = 1000;
        struct svg_hist_cpu c[2] = {
                { .cpu = 0, .counts = counts, .nbuckets = LIMIT_US, .max_ns = 20500 },
                { .cpu = 1,
                  .counts = zero,
                  .nbuckets = LIMIT_US,
                  .overflow = 37,
                  .max_ns = 0 /* raised to the limit */ },
        };
        struct svg_hist_plot p = { .cpus = c, .ncpus = 2, .bound_us = 100 };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        save(&b, "svg-hist-overflow-only.svg");
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:path[contains(@class,'curve')]"), 2);
        /* CPU 1's curve lies on the baseline; its samples are the overflow marker. */
        assert_null(strstr(xstr(&d, "//s:path[@data-cpu='1']/@d"), "V3"));
        assert_string_equal(xstr(&d, "//s:path[@class='overflow']/@data-cpu"), "1");
        assert_string_equal(xstr(&d, "//s:path[@class='overflow']/@data-count"), "37");
        assert_non_null(strstr(xstr(&d, "//s:g[@data-cpu='1']/s:text"), "max 1.00 ms"));
        doc_free(&d);
}

/* 100 ms of 1 µs buckets on 770 columns: each column shows its largest bucket, so a lone
 * spike survives, and the path stays one command pair per column at most. */
static void test_hist_wide_columns(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        _cleanup_free_ uint64_t *counts = calloc(HIST_LIMIT_US_MAX, sizeof(uint64_t));
        assert_non_null(counts);
        for (uint32_t i = 0; i < HIST_LIMIT_US_MAX; i += 3)
                counts[i] = 1;
        counts[54321] = 1000;
        struct svg_hist_cpu c = { .cpu = 0, .counts = counts, .nbuckets = HIST_LIMIT_US_MAX };
        struct svg_hist_plot p = { .cpus = &c, .ncpus = 1, .x_limit_us = HIST_LIMIT_US_MAX };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        struct doc d = parse(&b);
        const char *path = xstr(&d, "//s:path[@data-cpu='0']/@d");
        /* 3 decades: count 1000 is the top line, y = 70. */
        assert_int_equal(xcount(&d, "//s:text[@class='y-label']"), 5);
        assert_non_null(strstr(path, "V70.0"));
        assert_true(strlen(path) < 770 * 2 * 8);
        assert_null(strstr(xstr(&d, "//s:text[@class='summary']"), "max 0"));
        doc_free(&d);
}

static void test_hist_256_cpus(void **state) {
        static uint64_t counts[256][LIMIT_US];
        static struct svg_hist_cpu cpus[256];
        _cleanup_buf_ struct svg_buf b = { 0 };
        for (size_t k = 0; k < 256; k++) {
                fill_cpu(counts[k], 4 + (unsigned) k % 5, 30 + (unsigned) (k * 13) % 60, 20000);
                cpus[k] = (struct svg_hist_cpu){ .cpu = (unsigned) k,
                                                 .counts = counts[k],
                                                 .nbuckets = LIMIT_US,
                                                 .max_ns = 95000 };
        }
        counts[17][431] = 2;
        cpus[17].max_ns = 431200;
        cpus[200].overflow = 4;
        cpus[200].max_ns = 2000000;
        struct svg_hist_plot p = {
                .title = "256 CPUs", .cpus = cpus, .ncpus = 256, .bound_us = 300
        };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        save(&b, "svg-hist-256cpu.svg");
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:path[contains(@class,'curve')]"), 256);
        /* The legend summarises: 7 entries, the worst first, and the CPU range. */
        assert_int_equal(xcount(&d, "//s:g[@class='legend-entry']"), 7);
        assert_string_equal(xstr(&d, "(//s:g[@class='legend-entry'])[1]/@data-cpu"), "200");
        assert_string_equal(xstr(&d, "(//s:g[@class='legend-entry'])[2]/@data-cpu"), "17");
        assert_non_null(strstr(xstr(&d, "//s:g[@class='legend']/s:text[1]"),
                               "CPUs 0–255 (256), worst CPU 200: max 2.00 ms"));
        assert_int_equal(xcount(&d, "//s:path[contains(@class,'worst')]"), 7);
        /* Size stays bounded: at most a few kB per CPU. */
        assert_true(b.len < 1500000);
        doc_free(&d);
}

static void test_hist_refused(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        struct svg_hist_cpu c = { .cpu = 9, .counts = NULL, .nbuckets = 10 };
        struct svg_hist_plot p = { .cpus = &c, .ncpus = 1 };
        assert_int_equal(svg_hist_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "CPU 9"));
        uint64_t counts[4] = { UINT64_MAX, 1, 0, 0 };
        c.counts = counts;
        c.nbuckets = 4;
        assert_int_equal(svg_hist_render(&b, &p), -EOVERFLOW);
        assert_non_null(strstr(b.error, "CPU 9"));
        c.nbuckets = HIST_LIMIT_US_MAX + 1;
        assert_int_equal(svg_hist_render(&b, &p), -EINVAL);
}

/* ---- Escaping ---- */

static void test_escaping(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        uint64_t counts[10] = { 0, 4, 2 };
        struct svg_hist_cpu c = { .cpu = 0, .counts = counts, .nbuckets = 10 };
        struct svg_hist_plot p = { .title = "a<b&c\"d'e>f", .cpus = &c, .ncpus = 1 };
        assert_int_equal(svg_hist_render(&b, &p), 0);
        assert_null(strstr(b.data, "a<b"));
        assert_non_null(strstr(b.data, "a&lt;b&amp;c&quot;d&#39;e&gt;f"));
        struct doc d = parse(&b);
        assert_string_equal(xstr(&d, "/s:svg/s:title"), "a<b&c\"d'e>f");
        doc_free(&d);

        /* Long, with control characters and broken UTF-8: cut to 80 characters with an
         * ellipsis, and still well-formed. */
        char longname[400];
        memset(longname, 'x', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = 0;
        memcpy(longname, "\x01\xff\xc3(<é", 7);
        p.title = longname;
        assert_int_equal(svg_hist_render(&b, &p), 0);
        d = parse(&b);
        const char *shown = xstr(&d, "/s:svg/s:text[1]");
        assert_non_null(strstr(shown, "…"));
        assert_non_null(strstr(shown, "<é"));
        size_t chars = 0;
        for (const char *s = shown; *s; s++)
                chars += ((unsigned char) *s & 0xC0) != 0x80;
        assert_int_equal(chars, 2 * SVG_LABEL_MAX);
        doc_free(&d);

        /* Exactly the limit: not cut. */
        memset(longname, 'y', 2 * SVG_LABEL_MAX);
        longname[2 * SVG_LABEL_MAX] = 0;
        assert_int_equal(svg_hist_render(&b, &p), 0);
        d = parse(&b);
        assert_string_equal(xstr(&d, "/s:svg/s:text[1]"), longname);
        doc_free(&d);
}

/* Random bytes (anything but NUL) in every label of every plot: always well-formed. */
static void random_label(char *buf, size_t size) {
        size_t n = rng() % (size - 1);
        for (size_t i = 0; i < n; i++)
                buf[i] = (char) (1 + rng() % 255);
        buf[n] = 0;
}

static void test_random_labels(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        char l[6][300];
        uint64_t counts[50] = { 3, 0, 9, 1 };
        struct svg_hist_cpu c = { .cpu = 1, .counts = counts, .nbuckets = 50, .overflow = 2 };
        for (int round = 0; round < 200; round++) {
                for (size_t i = 0; i < ELEMENTSOF(l); i++)
                        random_label(l[i], sizeof(l[i]));
                struct svg_hist_plot hp = { .title = l[0], .cpus = &c, .ncpus = 1, .bound_us = 2 };
                assert_int_equal(svg_hist_render(&b, &hp), 0);
                doc_free((struct doc[]){ parse(&b) });

                struct svg_lt_point pts[2] = { { T0_NS, 5000, NULL, l[1] },
                                               { T0_NS + MIN_NS, 90000, "/x?a=<'\">", l[2] } };
                struct svg_lt_mark mark = { T0_NS + MIN_NS / 2, l[3] };
                struct svg_lt_band band = { T0_NS, T0_NS + MIN_NS, l[4] };
                struct svg_lt_plot lp = { .title = l[5],
                                          .points = pts,
                                          .npoints = 2,
                                          .step_ns = MIN_NS,
                                          .bound_ns = 50000,
                                          .marks = &mark,
                                          .nmarks = 1,
                                          .bands = &band,
                                          .nbands = 1 };
                assert_int_equal(svg_lt_render(&b, &lp), 0);
                doc_free((struct doc[]){ parse(&b) });

                struct svg_cov_segment seg = { T0_NS, T0_NS + DAY_NS, SVG_COV_PROBLEM, l[1] };
                struct svg_cov_machine m = { l[2], NULL, &seg, 1 };
                struct svg_cov_plot cp = { .title = l[3],
                                           .start_ns = T0_NS,
                                           .target_ns = 2 * DAY_NS,
                                           .machines = &m,
                                           .nmachines = 1 };
                assert_int_equal(svg_cov_render(&b, &cp), 0);
                doc_free((struct doc[]){ parse(&b) });
        }
}

/* ---- Long-term ---- */

static void test_lt_month_of_minutes(void **state) {
        const size_t n = 30 * 24 * 60;
        _cleanup_free_ struct svg_lt_point *pts = calloc(n, sizeof(*pts));
        _cleanup_buf_ struct svg_buf b = { 0 };
        static char hrefs[64][64];
        assert_non_null(pts);
        size_t injected = 0, j = 0;
        for (size_t i = 0; i < n; i++) {
                /* Day 12: the machine was silent for 5 hours. */
                if (i >= 12 * 1440 && i < 12 * 1440 + 300)
                        continue;
                pts[j].t_ns = T0_NS + (int64_t) i * MIN_NS;
                pts[j].max_ns = 20000 + (int64_t) (rng() % 30000);
                /* Violations, three of them in neighbouring minutes (one pixel column). */
                if (i == 5000 || i == 5001 || i == 5002 || i == 30000 || i == n - 1) {
                        pts[j].max_ns = 180000 + (int64_t) i;
                        snprintf(hrefs[injected], sizeof(hrefs[0]), "/events?t=%zu&cpu=1", i);
                        pts[j].href = hrefs[injected];
                        pts[j].detail = "CPU 1, scenario <io>";
                        injected++;
                }
                j++;
        }
        static char long_release[300];
        memset(long_release, 'k', sizeof(long_release) - 1);
        memcpy(long_release, "6.12.0-rt5-", 11);
        const struct svg_lt_mark marks[] = {
                { T0_NS + 3 * DAY_NS, "6.6.60-rt46" },
                { T0_NS + 17 * DAY_NS + 3600 * INT64_C(1000000000), "6.6.63-rt46 <test&build>" },
                { T0_NS + 25 * DAY_NS, long_release },
        };
        static const char *const sc[] = { "idle", "cpu", "io", "net", "hackbench", "mixed" };
        struct svg_lt_band bands[30 * 4];
        for (size_t i = 0; i < ELEMENTSOF(bands); i++)
                bands[i] = (struct svg_lt_band){ T0_NS + (int64_t) i * DAY_NS / 4,
                                                 T0_NS + (int64_t) (i + 1) * DAY_NS / 4,
                                                 sc[i % 6] };
        struct svg_lt_plot p = { .title = "lab-07: worst case per minute, 30 days",
                                 .points = pts,
                                 .npoints = j,
                                 .step_ns = MIN_NS,
                                 .bound_ns = 150000,
                                 .start_ns = T0_NS,
                                 .end_ns = T0_NS + 30 * DAY_NS,
                                 .marks = marks,
                                 .nmarks = ELEMENTSOF(marks),
                                 .bands = bands,
                                 .nbands = ELEMENTSOF(bands) };
        assert_int_equal(svg_lt_render(&b, &p), 0);
        save(&b, "svg-longterm-30d-1min.svg");
        struct doc d = parse(&b);

        /* Decimated per pixel column, but no violation dropped: the markers hold all five. */
        int points = xcount(&d, "//s:circle[@class='point']");
        int viol = xcount(&d, "//s:path[@class='violation']");
        assert_true(points + viol <= 2 * 880);
        assert_true(points > 800);
        assert_int_equal(viol, 3);
        assert_int_equal((size_t) xnum(&d, "sum(//s:path[@class='violation']/@data-count)"),
                         injected);
        /* Each violation links to its step and says so on hover. */
        assert_int_equal(xcount(&d, "//s:a/s:path[@class='violation']"), 3);
        assert_string_equal(xstr(&d, "//s:a[s:path[@data-count='3']]/@href"),
                            "/events?t=5002&cpu=1");
        assert_non_null(strstr(xstr(&d, "//s:path[@data-count='3']/s:title"),
                               "3 above the bound); CPU 1, scenario <io>"));
        /* The gap: the worst-case line has two pieces. */
        const char *line = xstr(&d, "//s:path[@class='worst-line']/@d");
        int moves = 0;
        for (const char *s = line; *s; s++)
                moves += *s == 'M';
        assert_int_equal(moves, 2);
        /* The bound, two kernel changes, the bands and the time labels with timestamps. */
        assert_int_equal(xcount(&d, "//s:line[@class='bound']"), 1);
        assert_int_equal(xcount(&d, "//s:g[@class='kernel']"), 3);
        /* A long release: cut on the plot, longer in its tooltip. */
        assert_int_equal(strlen(xstr(&d, "(//s:g[@class='kernel'])[3]/s:text")),
                         28 - 1 + strlen("…"));
        assert_non_null(
                strstr(xstr(&d, "(//s:g[@class='kernel'])[3]/s:title"), "kernel 6.12.0-rt5-kkk"));
        assert_non_null(
                strstr(xstr(&d, "(//s:g[@class='kernel'])[2]/s:text"), "6.6.63-rt46 <test&build>"));
        assert_int_equal(xcount(&d, "//s:rect[@class='band']"), 120);
        assert_int_equal(xcount(&d, "//s:g[@class='legend']/s:rect"), 6);
        int ticks = xcount(&d, "//s:text[@class='time']");
        assert_true(ticks >= 4 && ticks <= 9);
        assert_int_equal(xcount(&d, "//s:text[@class='time'][not(@data-t-ns)]"), 0);
        /* Weekly ticks on Mondays at 00:00 UTC: 2026-11-02 is the first. */
        assert_string_equal(xstr(&d, "(//s:text[@class='time'])[1]"), "2026-11-02");
        assert_string_equal(xstr(&d, "(//s:text[@class='time'])[1]/@data-t-ns"),
                            "1793577600000000000");
        /* Log value axis: 10 µs to 1 ms, with 1-2-5 labels. */
        assert_int_equal(xcount(&d, "//s:text[@class='y-label'][.='10 µs']"), 1);
        assert_int_equal(xcount(&d, "//s:text[@class='y-label'][.='200 µs']"), 1);
        assert_int_equal(xcount(&d, "//s:text[@class='y-label'][.='1.00 ms']"), 1);
        doc_free(&d);

        /* At 5-minute steps (the 5-minute maxima): still every violation counted. */
        size_t m = 0, kept = 0;
        for (size_t i = 0; i < j; i += 5) {
                pts[m++] = pts[i];
                kept += pts[i].max_ns > p.bound_ns;
        }
        p.npoints = m;
        p.step_ns = 5 * MIN_NS;
        assert_int_equal(svg_lt_render(&b, &p), 0);
        save(&b, "svg-longterm-30d-5min.svg");
        d = parse(&b);
        assert_true(kept >= 1);
        assert_int_equal((size_t) xnum(&d, "sum(//s:path[@class='violation']/@data-count)"), kept);
        moves = 0;
        for (const char *s = xstr(&d, "//s:path[@class='worst-line']/@d"); *s; s++)
                moves += *s == 'M';
        assert_int_equal(moves, 2);
        doc_free(&d);
}

static void test_lt_linear_and_gaps(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        struct svg_lt_point pts[10];
        for (int i = 0; i < 10; i++)
                pts[i] = (struct svg_lt_point){ T0_NS + (i < 5 ? i : i + 10) * 5 * MIN_NS,
                                                10000 * (i + 1) };
        struct svg_lt_plot p = { .points = pts,
                                 .npoints = 10,
                                 .step_ns = 5 * MIN_NS,
                                 .bound_ns = 75000,
                                 .scale = SVG_SCALE_LINEAR };
        assert_int_equal(svg_lt_render(&b, &p), 0);
        save(&b, "svg-longterm-linear.svg");
        struct doc d = parse(&b);
        /* Few points: one each, no grouping; 3 above 75 µs (80, 90, 100). */
        assert_int_equal(xcount(&d, "//s:circle[@class='point']"), 7);
        assert_int_equal(xcount(&d, "//s:path[@class='violation']"), 3);
        assert_int_equal(xcount(&d, "//s:text[@class='y-label'][.='0']"), 1);
        const char *line = xstr(&d, "//s:path[@class='worst-line']/@d");
        int moves = 0;
        for (const char *s = line; *s; s++)
                moves += *s == 'M';
        assert_int_equal(moves, 2);
        /* Hourly-or-finer ticks carry the time of day. */
        assert_non_null(strstr(xstr(&d, "(//s:text[@class='time'])[1]"), ":"));
        doc_free(&d);
}

static void test_lt_edge_cases(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        struct svg_lt_plot p = { .title = "nothing yet", .step_ns = MIN_NS, .bound_ns = 1000 };
        assert_int_equal(svg_lt_render(&b, &p), 0);
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:text[@class='no-data']"), 1);
        doc_free(&d);

        /* One sample: a point, a line of one move, a readable axis. */
        struct svg_lt_point one = { T0_NS, 42000, NULL, NULL };
        p.points = &one;
        p.npoints = 1;
        assert_int_equal(svg_lt_render(&b, &p), 0);
        save(&b, "svg-longterm-one-sample.svg");
        d = parse(&b);
        assert_int_equal(xcount(&d, "//s:path[@class='violation']"), 1);
        assert_true(xcount(&d, "//s:text[@class='time']") >= 1);
        doc_free(&d);

        /* Refused: negative latency, negative time, disorder, unsafe links; naming where. */
        struct svg_lt_point bad[3] = { { T0_NS, 1000 }, { T0_NS + MIN_NS, -5 }, { T0_NS, 1 } };
        p.points = bad;
        p.npoints = 2;
        assert_int_equal(svg_lt_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "point 1: negative latency -5"));
        bad[1].max_ns = 5;
        p.npoints = 3;
        assert_int_equal(svg_lt_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "point 2"));
        bad[0].t_ns = -1;
        assert_int_equal(svg_lt_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "point 0: negative time"));
        bad[0].t_ns = T0_NS;
        bad[0].href = "JavaScript:alert(1)";
        p.npoints = 1;
        assert_int_equal(svg_lt_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "point 0: link"));
        bad[0].href = "https://farm.lab/m/1?a=1&b=2";
        assert_int_equal(svg_lt_render(&b, &p), 0);
        d = parse(&b);
        assert_string_equal(xstr(&d, "//s:a/@href"), "https://farm.lab/m/1?a=1&b=2");
        doc_free(&d);
        p.bound_ns = -1;
        assert_int_equal(svg_lt_render(&b, &p), -EINVAL);

        /* Only zero latencies, linear: a real axis (no division by an empty range). */
        struct svg_lt_point zeros[3] = { { T0_NS, 0 },
                                         { T0_NS + MIN_NS, 0 },
                                         { T0_NS + 2 * MIN_NS, 0 } };
        struct svg_lt_plot z = {
                .points = zeros, .npoints = 3, .step_ns = MIN_NS, .scale = SVG_SCALE_LINEAR
        };
        assert_int_equal(svg_lt_render(&b, &z), 0);
        assert_null(strstr(b.data, "nan"));
        assert_null(strstr(b.data, "inf"));
        d = parse(&b);
        assert_int_equal(xcount(&d, "//s:circle[@class='point'][@cy='390.0']"), 3);
        /* Three minutes of data: the axis spans an hour around them, in minutes. */
        assert_true(xcount(&d, "//s:text[@class='time']") >= 4);
        doc_free(&d);
}

/* ---- Coverage ---- */

static void test_coverage(void **state) {
        _cleanup_buf_ struct svg_buf b = { 0 };
        struct svg_cov_segment a[] = {
                { T0_NS, T0_NS + 10 * DAY_NS, SVG_COV_COVERED, "scenario rotation complete" },
                { T0_NS + 10 * DAY_NS, T0_NS + 11 * DAY_NS, SVG_COV_MISSING, "no uploads" },
                { T0_NS + 11 * DAY_NS, T0_NS + 12 * DAY_NS, SVG_COV_PROBLEM, "unclean end" },
                { T0_NS + 12 * DAY_NS, T0_NS + 20 * DAY_NS, SVG_COV_COVERED, NULL },
        };
        struct svg_cov_segment full[] = {
                { T0_NS - DAY_NS, T0_NS + 40 * DAY_NS, SVG_COV_COVERED, NULL },
        };
        struct svg_cov_machine machines[] = {
                { "lab-07", "/machines/lab-07", a, ELEMENTSOF(a) },
                { "a-very-long-hostname-of-a-lab-machine.rack-12.example.org<&>", NULL, full, 1 },
                { "new-one", NULL, NULL, 0 },
        };
        struct svg_cov_plot p = { .title = "Coverage for 6.6.63-rt46",
                                  .start_ns = T0_NS,
                                  .target_ns = 30 * DAY_NS,
                                  .machines = machines,
                                  .nmachines = 3 };
        assert_int_equal(svg_cov_render(&b, &p), 0);
        save(&b, "svg-coverage.svg");
        struct doc d = parse(&b);
        assert_int_equal(xcount(&d, "//s:g[@class='machine']"), 3);
        assert_int_equal(xcount(&d, "//s:rect[@class='covered']"), 3);
        assert_int_equal(xcount(&d, "//s:rect[@class='missing']"), 1);
        assert_int_equal(xcount(&d, "//s:rect[@class='problem']"), 1);
        /* 18 days covered of 30; the full one is clipped to the target. */
        assert_string_equal(xstr(&d, "(//s:text[@class='coverage'])[1]"),
                            "18.0 d / 30.0 d (60 %), 1.0 d problem");
        assert_string_equal(xstr(&d, "(//s:text[@class='coverage'])[2]"),
                            "30.0 d / 30.0 d (100 %)");
        assert_string_equal(xstr(&d, "(//s:text[@class='coverage'])[3]/@data-covered-ns"), "0");
        assert_string_equal(xstr(&d, "//s:a/@href"), "/machines/lab-07");
        /* The long name: cut on the bar's left, whole in its tooltip. */
        assert_non_null(strstr(xstr(&d, "(//s:text[@class='name'])[2]/s:title"), "org<&>"));
        assert_int_equal(xcount(&d, "//s:text[@class='name'][contains(., '…')]"), 1);
        doc_free(&d);

        /* Refused: overlapping segments; no machines: a no-data plot. */
        struct svg_cov_segment overlap[] = { { T0_NS, T0_NS + DAY_NS, SVG_COV_COVERED, NULL },
                                             { T0_NS + 1, T0_NS + 2, SVG_COV_PROBLEM, NULL } };
        machines[0].segs = overlap;
        machines[0].nsegs = 2;
        assert_int_equal(svg_cov_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "machine 0 segment 1"));
        p.nmachines = 0;
        assert_int_equal(svg_cov_render(&b, &p), 0);
        d = parse(&b);
        assert_int_equal(xcount(&d, "//s:text[@class='no-data']"), 1);
        doc_free(&d);
        p.nmachines = 1;
        overlap[1] = (struct svg_cov_segment){ T0_NS + DAY_NS, T0_NS, SVG_COV_MISSING, NULL };
        assert_int_equal(svg_cov_render(&b, &p), -EINVAL);
        assert_non_null(strstr(b.error, "machine 0 segment 1: bad time range"));
        p.target_ns = 0;
        assert_int_equal(svg_cov_render(&b, &p), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hist_typical),
                cmocka_unit_test(test_hist_from_decoded),
                cmocka_unit_test(test_hist_no_data),
                cmocka_unit_test(test_hist_one_sample),
                cmocka_unit_test(test_hist_only_overflow),
                cmocka_unit_test(test_hist_wide_columns),
                cmocka_unit_test(test_hist_256_cpus),
                cmocka_unit_test(test_hist_refused),
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_random_labels),
                cmocka_unit_test(test_lt_month_of_minutes),
                cmocka_unit_test(test_lt_linear_and_gaps),
                cmocka_unit_test(test_lt_edge_cases),
                cmocka_unit_test(test_coverage),
        };
        xmlInitParser();
        int r = RUN_TESTS(tests);
        xmlCleanupParser();
        return r;
}
