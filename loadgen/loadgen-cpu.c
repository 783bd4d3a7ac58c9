/* SPDX-License-Identifier: MIT */
/* The cpu load: workers mixing integer, floating-point and cache-walking work, each holding a
 * requested duty cycle measured in its own CPU time, so "40 %" means 40 % of a CPU. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

enum { CPU_METRIC_OPS, CPU_METRIC_CPU };
enum { METHOD_MIX, METHOD_INT, METHOD_FLOAT, METHOD_CACHE };

struct cpu_opts {
        uint64_t workers;
        uint64_t load;      /* hundredths of a percent of one CPU per worker */
        uint64_t period_ns; /* busy/idle cycle length when load < 100 % */
        uint64_t cache_size;
        unsigned method;
};

static const char *const methods[] = { "mix", "int", "float", "cache", NULL };

static const struct loadgen_opt cpu_opts[] = {
        { "workers", LOADGEN_OPT_UINT, offsetof(struct cpu_opts, workers), 0, 4096, "0", NULL,
          "worker threads; 0: one per online CPU" },
        { "load", LOADGEN_OPT_PERCENT, offsetof(struct cpu_opts, load), 1, 10000, "100%", NULL,
          "share of one CPU each worker uses" },
        { "period", LOADGEN_OPT_TIMESPAN, offsetof(struct cpu_opts, period_ns), NSEC_PER_MSEC,
          10 * NSEC_PER_SEC, "100ms", NULL, "length of one busy+idle cycle below 100%" },
        { "cache-size", LOADGEN_OPT_SIZE, offsetof(struct cpu_opts, cache_size), 4096,
          UINT64_C(1) << 30, "1M", NULL, "buffer each worker walks for cache work" },
        { "method", LOADGEN_OPT_ENUM, offsetof(struct cpu_opts, method), 0, 0, "mix", methods,
          "kind of work" },
};

static const struct loadgen_metric cpu_metrics[] = {
        [CPU_METRIC_OPS] = { "ops", "ops/s", "ops", 1.0 },
        /* CPU time in ns per second of wall time, shown as percent of one CPU. */
        [CPU_METRIC_CPU] = { "cpu", "%", "ns of CPU time", 1e-7 },
};

struct cpu_worker {
        struct loadgen_ctx *ctx;
        const struct cpu_opts *o;
        pthread_t thread;
        uint64_t *buf;
        size_t nwords;
        uint64_t seed;
        volatile double sink;
};

/* One unit of work, roughly 20-50 us on a current CPU. */
static void work_int(struct cpu_worker *w) {
        uint64_t x = w->seed;
        for (int i = 0; i < 4000; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x = x * 0x9e3779b97f4a7c15u + (x >> 29);
        }
        w->seed = x | 1;
}

static void work_float(struct cpu_worker *w) {
        double a = (double) (w->seed & 0xffff) + 1.0, s = 0;
        for (int i = 1; i <= 1500; i++) {
                s += sqrt(a * i) / (1.0 + i);
                a = fma(a, 1.0000001, 0.5);
        }
        w->sink = s;
}

static void work_cache(struct cpu_worker *w) {
        /* Read-modify-write one word per cache line, in a scattered but complete order. */
        size_t lines = w->nwords / 8, step = (lines / 2) | 1, idx = w->seed % lines;
        for (int i = 0; i < 2000; i++) {
                w->buf[idx * 8] += idx;
                idx += step;
                if (idx >= lines)
                        idx -= lines;
        }
        w->seed += 2001;
}

static void work(struct cpu_worker *w) {
        switch (w->o->method) {
        case METHOD_INT:
                work_int(w);
                break;
        case METHOD_FLOAT:
                work_float(w);
                break;
        case METHOD_CACHE:
                work_cache(w);
                break;
        default:
                work_int(w);
                work_float(w);
                work_cache(w);
        }
}

static int64_t thread_cpu_ns(void) {
        return now_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void *cpu_worker_main(void *arg) {
        struct cpu_worker *w = arg;
        struct loadgen_ctx *ctx = w->ctx;
        const struct cpu_opts *o = w->o;
        int64_t period = (int64_t) o->period_ns, start = now_ns(CLOCK_MONOTONIC);
        int64_t cpu_start = thread_cpu_ns(), cpu_reported = cpu_start;
        double duty = (double) o->load / 10000.0;
        uint64_t ops = 0;

        /* Duty cycle: in cycle k, work until this thread's CPU time reaches duty * (k+1) *
         * period, then sleep until cycle k+1 begins.  Measuring CPU time (not wall time) keeps
         * the share right when other tasks preempt us; a deficit of more than one cycle (a
         * stall) is forgiven rather than repaid in one long burst. */
        for (int64_t k = 0; !loadgen_stopping(ctx); k++) {
                int64_t budget = (int64_t) (duty * (double) ((k + 1) * period));
                int64_t used = thread_cpu_ns() - cpu_start;
                if (budget - used > 2 * (int64_t) (duty * (double) period)) {
                        cpu_start -= budget - used - (int64_t) (duty * (double) period);
                        used = thread_cpu_ns() - cpu_start;
                }
                while (used < budget && !loadgen_stopping(ctx)) {
                        work(w);
                        ops++;
                        int64_t now_cpu = thread_cpu_ns();
                        used = now_cpu - cpu_start;
                        if ((ops & 15) == 0) {
                                loadgen_add(ctx, CPU_METRIC_OPS, 16);
                                loadgen_add(ctx, CPU_METRIC_CPU,
                                            (uint64_t) (now_cpu - cpu_reported));
                                cpu_reported = now_cpu;
                        }
                }
                if (o->load < 10000 && !loadgen_sleep_until(ctx, start + (k + 1) * period))
                        break;
        }
        loadgen_add(ctx, CPU_METRIC_OPS, ops & 15);
        loadgen_add(ctx, CPU_METRIC_CPU, (uint64_t) (thread_cpu_ns() - cpu_reported));
        return NULL;
}

static int cpu_run(struct loadgen_ctx *ctx) {
        const struct cpu_opts *o = ctx->opts;
        size_t n = o->workers ? o->workers : ctx->ncpus;
        struct cpu_worker *w = calloc(n, sizeof(*w));
        size_t started = 0;
        int r = 0;

        if (!w)
                return log_oom();
        for (size_t i = 0; i < n; i++) {
                w[i] = (struct cpu_worker){ .ctx = ctx, .o = o, .seed = 0x2545f491u * (i + 1) };
                w[i].nwords = o->cache_size / sizeof(uint64_t);
                if (w[i].nwords < 8)
                        w[i].nwords = 8;
                w[i].buf = calloc(w[i].nwords, sizeof(uint64_t));
                if (!w[i].buf) {
                        r = log_oom();
                        break;
                }
                r = -pthread_create(&w[i].thread, NULL, cpu_worker_main, &w[i]);
                if (r < 0) {
                        free(w[i].buf);
                        log_error_errno(r, "cpu: cannot start worker %zu: %m", i);
                        break;
                }
                started++;
        }
        if (r < 0)
                atomic_store(&ctx->stop, true);
        for (size_t i = 0; i < started; i++) {
                pthread_join(w[i].thread, NULL);
                free(w[i].buf);
        }
        free(w);
        return r;
}

const struct loadgen_info loadgen_cpu_info = {
        .name = "cpu",
        .summary = "integer, floating-point and cache work at a chosen share of each CPU",
        .opts = cpu_opts,
        .nopts = ELEMENTSOF(cpu_opts),
        .opts_size = sizeof(struct cpu_opts),
        .metrics = cpu_metrics,
        .nmetrics = ELEMENTSOF(cpu_metrics),
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = cpu_run,
};
