/* SPDX-License-Identifier: MIT */
/* Times the plots of one machine's dashboard page: the latency histogram of 8 CPUs and the
 * worst case over 30 days at 1-minute and 5-minute steps.  Prints medians of N runs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "svg.h"

#define NCPUS 8
#define MANY_CPUS 256
#define LIMIT_US 1000
#define DAYS 30
#define MIN_NS (60 * INT64_C(1000000000))
#define T0_NS (INT64_C(1793491200) * 1000000000)

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static uint64_t rng(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static double now_ms(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
        qsort(v, (size_t) n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 30 days at 5 kHz per CPU, an exponential tail and a few outliers. */
static void make_hist(uint64_t (*counts)[LIMIT_US], struct svg_hist_cpu *cpus, unsigned ncpus) {
        const uint64_t samples = UINT64_C(5000) * 86400 * DAYS;
        for (unsigned k = 0; k < ncpus; k++) {
                memset(counts[k], 0, sizeof(counts[k]));
                uint64_t left = samples;
                /* Bucket i above the peak holds e^(-(i - peak)/3) of the rest. */
                for (unsigned i = 6 + k % 8; i < LIMIT_US && left; i++) {
                        uint64_t c = (uint64_t) ((double) left * (1 - exp(-1.0 / 3)));
                        counts[k][i] = c ? c : left;
                        left -= counts[k][i];
                }
                counts[k][60 + rng() % 60] += 3;
                cpus[k] = (struct svg_hist_cpu){
                        .cpu = k, .counts = counts[k], .nbuckets = LIMIT_US, .max_ns = 121000
                };
        }
        cpus[5].overflow = 2;
        cpus[5].max_ns = 1800000;
}

static void make_points(struct svg_lt_point *pts, size_t n, int64_t step_ns) {
        for (size_t i = 0; i < n; i++) {
                pts[i] = (struct svg_lt_point){ .t_ns = T0_NS + (int64_t) i * step_ns,
                                                .max_ns = 25000 + (int64_t) (rng() % 40000),
                                                .href = "/machines/lab-07/steps/1",
                                                .detail = "CPU 3, scenario hackbench" };
                if (rng() % 2000 == 0)
                        pts[i].max_ns = 160000 + (int64_t) (rng() % 100000);
        }
}

typedef int (*render_fn)(struct svg_buf *b, const void *p);

/* With a directory argument, the plots are also written there, to look at. */
static const char *save_dir;

static void save(const struct svg_buf *b, const char *name) {
        char path[4096];
        if (!save_dir)
                return;
        snprintf(path, sizeof(path), "%s/%s", save_dir, name);
        FILE *f = fopen(path, "w");
        if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
                fprintf(stderr, "cannot write %s\n", path);
                exit(EXIT_FAILURE);
        }
}

static int render_hist(struct svg_buf *b, const void *p) {
        return svg_hist_render(b, p);
}

static int render_lt(struct svg_buf *b, const void *p) {
        return svg_lt_render(b, p);
}

static double lo_ms, hi_ms, cpu_ms;

/* Median time of n renders into a fresh buffer each (as a request would), and the size; the
 * fastest and slowest run in lo_ms and hi_ms. */
static double time_it(render_fn fn, const void *p, int n, size_t *ret_len, const char *name) {
        double *t = calloc((size_t) n, sizeof(*t)), *c = calloc((size_t) n, sizeof(*c));
        if (!t || !c)
                exit(EXIT_FAILURE);
        for (int i = 0; i < n; i++) {
                struct svg_buf b = { 0 };
                double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
                int r = fn(&b, p);
                t[i] = now_ms(CLOCK_MONOTONIC) - t0;
                c[i] = now_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
                if (r < 0) {
                        fprintf(stderr, "render failed: %s\n", b.error);
                        exit(EXIT_FAILURE);
                }
                *ret_len = b.len;
                if (i == 0)
                        save(&b, name);
                svg_buf_done(&b);
        }
        double m = median(t, n);
        lo_ms = t[0];
        hi_ms = t[n - 1];
        cpu_ms = median(c, n);
        free(t);
        free(c);
        return m;
}

int main(int argc, char **argv) {
        static uint64_t counts[MANY_CPUS][LIMIT_US];
        static struct svg_hist_cpu cpus[MANY_CPUS];
        int runs = argc > 1 ? atoi(argv[1]) : 101;
        save_dir = argc > 2 ? argv[2] : NULL;
        size_t n1 = (size_t) DAYS * 1440, n5 = n1 / 5, len;
        struct svg_lt_point *p1 = calloc(n1, sizeof(*p1)), *p5 = calloc(n5, sizeof(*p5));
        static struct svg_lt_band bands[DAYS * 24];
        static const char *const sc[] = { "idle", "cpu", "io", "net", "hackbench", "mixed" };
        static const struct svg_lt_mark marks[] = { { T0_NS + 9 * 1440 * MIN_NS, "6.6.63-rt46" } };

        if (runs < 1 || !p1 || !p5) {
                fprintf(stderr, "usage: %s [RUNS [DIR]]\n", argv[0]);
                return EXIT_FAILURE;
        }
        make_hist(counts, cpus, MANY_CPUS);
        make_points(p1, n1, MIN_NS);
        make_points(p5, n5, 5 * MIN_NS);
        for (size_t i = 0; i < ELEMENTSOF(bands); i++)
                bands[i] = (struct svg_lt_band){ T0_NS + (int64_t) i * 60 * MIN_NS,
                                                 T0_NS + (int64_t) (i + 1) * 60 * MIN_NS,
                                                 sc[i % 6] };

        struct svg_hist_plot hp = {
                .title = "lab-07 6.6.63-rt46", .cpus = cpus, .ncpus = NCPUS, .bound_us = 150
        };
        struct svg_lt_plot lp = { .title = "lab-07: worst case per minute",
                                  .points = p1,
                                  .npoints = n1,
                                  .step_ns = MIN_NS,
                                  .bound_ns = 150000,
                                  .start_ns = T0_NS,
                                  .end_ns = T0_NS + DAYS * 1440 * MIN_NS,
                                  .marks = marks,
                                  .nmarks = ELEMENTSOF(marks),
                                  .bands = bands,
                                  .nbands = ELEMENTSOF(bands) };
        struct svg_lt_plot lp5 = lp;
        lp5.points = p5;
        lp5.npoints = n5;
        lp5.step_ns = 5 * MIN_NS;

        printf("svg-render: median of %d runs, each into a new buffer: wall time "
               "(fastest-slowest), "
               "CPU time of the thread, size\n",
               runs);
        double th = time_it(render_hist, &hp, runs, &len, "bench-hist.svg"), ch = cpu_ms;
        printf("histogram, %3d CPUs x %d buckets:  %7.3f ms (%.3f-%.3f)  CPU %7.3f ms  %7zu "
               "bytes\n",
               NCPUS, LIMIT_US, th, lo_ms, hi_ms, cpu_ms, len);
        struct svg_hist_plot hp256 = hp;
        hp256.ncpus = MANY_CPUS;
        double t256 = time_it(render_hist, &hp256, runs, &len, "bench-hist-256.svg");
        printf("histogram, %3d CPUs x %d buckets:  %7.3f ms (%.3f-%.3f)  CPU %7.3f ms  %7zu "
               "bytes\n",
               MANY_CPUS, LIMIT_US, t256, lo_ms, hi_ms, cpu_ms, len);
        double t1 = time_it(render_lt, &lp, runs, &len, "bench-longterm-1min.svg"), c1 = cpu_ms;
        printf("long-term, %zu points (30 d x 1 min): %7.3f ms (%.3f-%.3f)  CPU %7.3f ms  %7zu "
               "bytes\n",
               n1, t1, lo_ms, hi_ms, cpu_ms, len);
        double t5 = time_it(render_lt, &lp5, runs, &len, "bench-longterm-5min.svg");
        printf("long-term, %zu points (30 d x 5 min):  %7.3f ms (%.3f-%.3f)  CPU %7.3f ms  %7zu "
               "bytes\n",
               n5, t5, lo_ms, hi_ms, cpu_ms, len);
        printf("machine page plots (8-CPU histogram + 1-min long-term): %.3f ms wall, %.3f ms CPU "
               "(target: whole page < 200 ms)\n",
               th + t1, ch + c1);
        free(p1);
        free(p5);
        return EXIT_SUCCESS;
}
