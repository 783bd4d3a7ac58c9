/* SPDX-License-Identifier: MIT */
/* The load generator interface: typed options with bounds, throughput counters shared with
 * whoever supervises the generator, events, pacing, and the registry of every generator. */
#pragma once

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LOADGEN_ERROR_MAX 512
#define LOADGEN_MAX_METRICS 8

/* ---- options ---- */

enum loadgen_opt_type {
        LOADGEN_OPT_UINT,     /* uint64_t, a plain number */
        LOADGEN_OPT_SIZE,     /* uint64_t bytes: "4096", "64K", "16M", "1G" (powers of 1024) */
        LOADGEN_OPT_BYTERATE, /* uint64_t bytes/s: "1M", "1MB/s", "512K/s"; 0: flat out */
        LOADGEN_OPT_BITRATE,  /* uint64_t bits/s: "1Mbit", "100kbit/s", "1G" (powers of 1000) */
        LOADGEN_OPT_PERCENT,  /* uint64_t in hundredths of a percent: "40%", "37.5" */
        LOADGEN_OPT_TIMESPAN, /* uint64_t ns: "100ms" (a unit is required) */
        LOADGEN_OPT_BOOL,     /* bool: "--flag", "--flag=no" */
        LOADGEN_OPT_ENUM,     /* unsigned, index into choices */
        LOADGEN_OPT_STRING,   /* char * (owned) */
};

struct loadgen_opt {
        const char *name; /* given as --name VALUE or --name=VALUE */
        enum loadgen_opt_type type;
        size_t offset;              /* of the field in the generator's options struct */
        uint64_t min, max;          /* bounds in the stored unit (max 0: no upper bound) */
        const char *def;            /* default as text, parsed like user input */
        const char *const *choices; /* LOADGEN_OPT_ENUM: NULL-terminated */
        const char *help;
};

/* ---- throughput ---- */

struct loadgen_metric {
        const char *name;       /* "write" */
        const char *unit;       /* unit of the rate: "MiB/s" */
        const char *count_unit; /* unit of the counter: "bytes" */
        double scale;           /* rate in unit = counter increase per second * scale */
};

/* Shared between a generator process and its supervisor (a MAP_SHARED mapping). */
#define LOADGEN_SHM_MAGIC 0x72746c67u
struct loadgen_shm {
        uint32_t magic;
        uint32_t nmetrics;
        _Atomic uint64_t counters[LOADGEN_MAX_METRICS];
        _Atomic uint64_t heartbeat; /* bumped by the generator at least once a second */
};

/* ---- running ---- */

struct loadgen_info;

struct loadgen_ctx {
        const struct loadgen_info *info;
        const void *opts;
        char *const *args; /* arguments after "--" (NULL-terminated; empty if none) */
        struct loadgen_shm *shm;
        atomic_bool stop;
        int event_fd; /* events go here as lines; -1: to stderr */
        unsigned ncpus;
};

static inline bool loadgen_stopping(struct loadgen_ctx *ctx) {
        return atomic_load_explicit(&ctx->stop, memory_order_relaxed);
}
static inline void loadgen_add(struct loadgen_ctx *ctx, unsigned metric, uint64_t n) {
        atomic_fetch_add_explicit(&ctx->shm->counters[metric], n, memory_order_relaxed);
}
static inline uint64_t loadgen_read(struct loadgen_ctx *ctx, unsigned metric) {
        return atomic_load_explicit(&ctx->shm->counters[metric], memory_order_relaxed);
}

/* Reports something the supervisor should store as an event: type is a short word
 * ("low_space", "data_mismatch"), value a number in the type's unit or -1. */
void loadgen_event(struct loadgen_ctx *ctx, const char *type, int64_t value, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Sleeps until the CLOCK_MONOTONIC time deadline_ns, waking early when told to stop.
 * Returns false if stopping. */
bool loadgen_sleep_until(struct loadgen_ctx *ctx, int64_t deadline_ns);

/* Keeps an average rate: call loadgen_pace() after each piece of work of n units; it sleeps
 * as long as the work is ahead of rate units per second.  rate 0 never sleeps.  A pacer that
 * fell far behind (a stall) does not burst to catch up by more than one second's worth. */
struct loadgen_pacer {
        uint64_t rate;
        int64_t start_ns;
        uint64_t done;
};
void loadgen_pacer_init(struct loadgen_pacer *p, uint64_t rate);
bool loadgen_pace(struct loadgen_ctx *ctx, struct loadgen_pacer *p, uint64_t n);

/* ---- generators ---- */

struct loadgen_info {
        const char *name;
        const char *summary;
        const struct loadgen_opt *opts;
        size_t nopts;
        size_t opts_size;
        const struct loadgen_metric *metrics;
        size_t nmetrics;
        const char *args_help; /* non-NULL: takes arguments after "--" (e.g. a command) */
        /* Checks options against each other; returns <0 with a message in err. */
        int (*check)(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]);
        /* Whether it can run here with these options and arguments; if not returns <0 with
         * the reason ("O_DIRECT is not supported on /tmp (tmpfs)") in why. */
        int (*probe)(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]);
        /* Runs until loadgen_stopping(); returns 0, or <0 after logging why it failed. */
        int (*run)(struct loadgen_ctx *ctx);
};

/* Shared defaults for the hooks a generator does not need. */
int loadgen_check_nothing(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]);
int loadgen_probe_nothing(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]);

#define LOADGENS(X) X(cpu) X(fileio) X(network) X(hackbench) X(memory) X(exec)

#define LOADGEN_DECLARE(n) extern const struct loadgen_info loadgen_##n##_info;
LOADGENS(LOADGEN_DECLARE)
#undef LOADGEN_DECLARE

extern const struct loadgen_info *const loadgen_registry[];
extern const size_t loadgen_registry_size;
const struct loadgen_info *loadgen_find(const char *name);

/* ---- parsing ---- */

/* A generator with its parsed options: what a command line or a Load= line becomes. */
struct loadgen_spec {
        const struct loadgen_info *info;
        void *opts;
        char **args; /* NULL-terminated, never NULL after a successful parse */
        char *text;  /* the canonical command line, every option spelled out */
};
void loadgen_spec_done(struct loadgen_spec *s);

/* argv[0] is the generator's name, then its options, then optionally "--" and arguments.
 * Errors name the generator, the option and what is wrong. */
int loadgen_parse_argv(int argc, char *const *argv, struct loadgen_spec *ret,
                       char err[static LOADGEN_ERROR_MAX]);
/* The same from one line ("hackbench --groups 4 --pipe"), split like a shell would split it
 * (whitespace, single and double quotes, backslash). */
int loadgen_parse_line(const char *line, struct loadgen_spec *ret,
                       char err[static LOADGEN_ERROR_MAX]);
/* Splits a line into a NULL-terminated vector (free with strv_free()). */
int loadgen_split(const char *line, char ***ret, char err[static LOADGEN_ERROR_MAX]);

/* Help text for one generator: its options with bounds and defaults. */
void loadgen_print_help(const struct loadgen_info *info, FILE *f);

/* Formats a rate with its unit ("12.5 MiB/s"). */
char *loadgen_format_rate(char *buf, size_t len, double value, const char *unit);
