/* SPDX-License-Identifier: MIT */
/* rtsoak-replay: posts synthetic rtsoak.summary/1 histories to a real rtsoak-server, so that
 * weeks of farm history (spikes, gaps, unclean ends, loads going down) take seconds. */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cpuset.h"
#include "hist.h"
#include "http-reply.h"
#include "log.h"
#include "macro.h"
#include "rotation.h"
#include "sha256.h"
#include "summary.h"
#include "trace-analysis.h"
#include "trace-raw.h"
#include "timeutil.h"

#define DAY_NS ((int64_t) 86400 * (int64_t) NSEC_PER_SEC)
#define REPLAY_HIST_LIMIT_US 1000 /* rtsoakd's default [Probe] HistogramLimit= */
#define REPLAY_MAX_ITEMS 4096     /* of each repeatable option */
#define REPLAY_MAX_TRIES 10       /* per upload, on network errors, 408, 429 and 5xx */
#define REPLAY_RETRY_AFTER_MAX_NS (5 * NSEC_PER_SEC)
#define DEFAULT_ROTATION "idle 1h, cpu 1h, io 1h, net 1h, hackbench 1h, mixed 1h"

/* ---- the built-in scenarios, as rtsoakd defines them (daemon/daemon-config.c) --------------- */

struct metric_def {
        const char *name, *unit;
        double full; /* the rate while the generator runs the whole interval */
};

struct load_def {
        const char *generator;
        struct metric_def metrics[4];
        size_t nmetrics;
};

struct scenario {
        const char *name;
        struct load_def loads[4];
        size_t nloads;
};

/* Rates of the generators' own metrics (loadgen/loadgen-*.c): plausible values for a small
 * x86 machine, or the rate the scenario asks for (mixed: 1 Mbit/s, 1 MB/s, 40 % CPU). */
static const struct scenario scenarios[] = {
        { "idle", {}, 0 },
        { "cpu", { { "cpu", { { "ops", "ops/s", 120000 } }, 1 } }, 1 },
        { "io",
          { { "fileio",
              { { "write", "MiB/s", 180 }, { "read", "MiB/s", 175 }, { "fsync", "fsyncs/s", 45 } },
              3 } },
          1 },
        { "net",
          { { "network",
              { { "tx", "Mbit/s", 9400 },
                { "rx", "Mbit/s", 9400 },
                { "tx_packets", "packets/s", 780000 },
                { "rx_packets", "packets/s", 780000 } },
              4 } },
          1 },
        { "hackbench",
          { { "hackbench", { { "messages", "msg/s", 420000 }, { "rounds", "rounds/s", 41 } }, 2 } },
          1 },
        { "mixed",
          { { "cpu", { { "ops", "ops/s", 48000 } }, 1 },
            { "network",
              { { "tx", "Mbit/s", 1 },
                { "rx", "Mbit/s", 1 },
                { "tx_packets", "packets/s", 85 },
                { "rx_packets", "packets/s", 85 } },
              4 },
            { "fileio",
              { { "write", "MiB/s", 0.95 }, { "read", "MiB/s", 0.95 }, { "fsync", "fsyncs/s", 1 } },
              3 },
            { "memory", { { "alloc", "MiB/s", 0.95 }, { "ops", "allocs/s", 240 } }, 2 } },
          4 },
};

static const struct scenario *scenario_lookup(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(scenarios); i++)
                if (strcmp(scenarios[i].name, name) == 0)
                        return &scenarios[i];
        return NULL;
}

/* ---- options ------------------------------------------------------------------------------- */

struct spike {
        int64_t time_ns;
        uint32_t cpu;
        uint64_t latency_ns;
        char culprit[16]; /* "": no trace capture */
};

struct span {
        int64_t from_ns, to_ns;
};

struct run_end {
        int64_t time_ns;
        bool unclean;
};

struct load_down {
        int64_t time_ns;
        uint64_t span_ns;
        char generator[33];
};

/* A CPU absent from the intervals of [from, to): its probe measured nothing then. */
struct probe_down {
        uint32_t cpu;
        int64_t from_ns, to_ns;
};

/* A generator up through [from, to) with all its metrics 0: a load that ran no load. */
struct load_zero {
        int64_t from_ns, to_ns;
        char generator[33];
};

struct machine {
        char id[33];
        char *token;
};

struct options {
        const char *server, *token, *token_file, *machine, *tokens_file, *ca_file;
        const char *kernel, *kernel_version, *preempt_model, *hostname, *rotation, *release;
        unsigned jobs, cpus, batch;
        int64_t from_ns, to_ns, run_id;
        uint64_t interval_ns, latency_ns, threshold_ns, probe_interval_ns, reboot_ns, seed;
        bool quiet, json;

        struct schedule_step *steps;
        size_t nsteps;
        uint64_t cycle_ns;
        struct spike *spikes;
        size_t nspikes;
        struct span *gaps;
        size_t ngaps;
        struct run_end *ends;
        size_t nends;
        struct load_down *downs;
        size_t ndowns;
        struct probe_down *pdowns;
        size_t npdowns;
        struct load_zero *zeros;
        size_t nzeros;
        uint32_t *probed; /* run.cpus; NULL: not sent */
        size_t nprobed;
        double samples_share;    /* of the wake-ups each CPU's span allows */
        uint64_t clock_ahead_ns; /* stamps of the intervals from clock_from_ns on */
        int64_t clock_from_ns;
        char config_digest[2 * SHA256_DIGEST_SIZE + 1];
};

static struct options opt = {
        .jobs = 2,
        .cpus = 2,
        .batch = 60,
        .run_id = 1,
        .interval_ns = 60 * NSEC_PER_SEC,
        .latency_ns = 30 * NSEC_PER_USEC,
        .threshold_ns = 100 * NSEC_PER_USEC,
        .probe_interval_ns = NSEC_PER_MSEC,
        .reboot_ns = 120 * NSEC_PER_SEC,
        .kernel = "6.1.0-rt-replay",
        .kernel_version = "#1 SMP PREEMPT_RT (rtsoak-replay)",
        .preempt_model = "PREEMPT_RT",
        .rotation = DEFAULT_ROTATION,
        .samples_share = 1.0,
        .clock_from_ns = INT64_MIN,
};

_printf_(2, 3) static int usage_error(const char *option, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "rtsoak-replay: %s: %s (see --help)\n", option, msg);
        return -EINVAL;
}

/* Deterministic pseudo-random numbers: a pure function of its inputs, so that an interval
 * comes out the same whatever the batching, the threads or the order of the machines. */
static uint64_t mix64(uint64_t x) {
        x += UINT64_C(0x9e3779b97f4a7c15);
        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t key, uint64_t a, uint64_t b) {
        return mix64(key ^ mix64(a ^ mix64(b)));
}

/* A uniform fraction in [0, 1). */
static double frac(uint64_t r) {
        return (double) (r >> 11) / (double) (UINT64_C(1) << 53);
}

static int64_t align_up(int64_t t, uint64_t step) {
        int64_t m = t % (int64_t) step;
        if (m < 0)
                m += (int64_t) step;
        return m ? t + ((int64_t) step - m) : t;
}

static char *fmt_time(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        return format_timestamp_utc(buf, ns);
}

/* ---- option parsing ------------------------------------------------------------------------- */

static int parse_u64(const char *option, const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || !isdigit((unsigned char) s[0]) || v < min ||
            v > max)
                return usage_error(option, "'%s' is not an integer from %" PRIu64 " to %" PRIu64, s,
                                   min, max);
        *ret = v;
        return 0;
}

static int parse_span(const char *option, const char *s, uint64_t min, uint64_t max,
                      uint64_t *ret) {
        const char *reason = NULL;
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        if (parse_timespan(s, ret, &reason) < 0)
                return usage_error(option, "'%s' is not a time span: %s", s, reason ?: "invalid");
        if (*ret < min || *ret > max)
                return usage_error(option, "'%s' is out of range (%s to %s)", s,
                                   format_timespan(a, min), format_timespan(b, max));
        return 0;
}

static int parse_time(const char *option, const char *s, int64_t now, int64_t *ret) {
        const char *reason = NULL;
        if (parse_timestamp(s, now, ret, &reason) < 0)
                return usage_error(option, "'%s' is not a time: %s", s, reason ?: "invalid");
        return 0;
}

/* Splits "A,B[,C]" into exactly n fields (copied into buf). */
static int split_fields(const char *option, const char *s, char *buf, size_t size, char **fields,
                        size_t n, const char *form) {
        if (strlen(s) >= size)
                return usage_error(option, "'%s' is too long", s);
        strcpy(buf, s);
        size_t k = 0;
        char *p = buf;
        for (;;) {
                if (k == n)
                        return usage_error(option, "'%s': expected %s", s, form);
                fields[k++] = p;
                char *c = strchr(p, ',');
                if (!c)
                        break;
                *c = 0;
                p = c + 1;
        }
        if (k != n)
                return usage_error(option, "'%s': expected %s", s, form);
        for (size_t i = 0; i < n; i++) {
                while (isspace((unsigned char) *fields[i]))
                        fields[i]++;
                size_t l = strlen(fields[i]);
                while (l > 0 && isspace((unsigned char) fields[i][l - 1]))
                        fields[i][--l] = 0;
                if (!*fields[i])
                        return usage_error(option, "'%s': expected %s (field %zu is empty)", s,
                                           form, i + 1);
        }
        return 0;
}

static void *grow(void *array, size_t *n, size_t size) {
        if (*n >= REPLAY_MAX_ITEMS)
                return NULL;
        void *a = realloc(array, (*n + 1) * size);
        if (a)
                (*n)++;
        return a;
}

#define APPEND(option, array, n)                                                      \
        ({                                                                            \
                __typeof__(array) _a = grow(array, &(n), sizeof(*(array)));           \
                if (!_a)                                                              \
                        return usage_error(option, "more than %d (or out of memory)", \
                                           REPLAY_MAX_ITEMS);                         \
                (array) = _a;                                                         \
                &(array)[(n) -1];                                                     \
        })

static bool valid_id(const char *s) {
        return strlen(s) == 32 && strspn(s, "0123456789abcdef") == 32;
}

static bool valid_generator(const char *s) {
        size_t l = strlen(s);
        return l >= 1 && l <= 32 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == l;
}

static const struct scenario *rotation_lookup(void *userdata, const char *name) {
        return scenario_lookup(name);
}

static void rotation_problem(void *userdata, enum rotation_problem what, const char *item,
                             const char *span, const char *reason) {
        char a[TIMESPAN_MAX_LEN];
        switch (what) {
        case ROTATION_SYNTAX:
                usage_error("--rotation",
                            "expected \"SCENARIO DURATION\" items separated by commas (e.g. "
                            "\"idle 1h, mixed 2h\"), got \"%s\"",
                            item);
                break;
        case ROTATION_UNKNOWN:
                usage_error("--rotation",
                            "unknown scenario \"%s\" (built-in: idle, cpu, io, net, hackbench, "
                            "mixed)",
                            item);
                break;
        case ROTATION_BAD_SPAN:
                usage_error("--rotation", "%s %s: %s", item, span,
                            reason ?: "must be longer than 0");
                break;
        case ROTATION_NOT_WHOLE:
                usage_error("--rotation",
                            "%s %s is not a whole number of intervals (--interval %s)", item, span,
                            format_timespan(a, opt.interval_ns));
                break;
        case ROTATION_TOO_MANY:
                usage_error("--rotation", "more than %d steps", ROTATION_STEPS_MAX);
                break;
        case ROTATION_TOO_LONG:
                usage_error("--rotation", "%s %s is too long", item, span);
                break;
        case ROTATION_EMPTY:
                usage_error("--rotation", "no scenario given");
                break;
        }
}

/* "idle 1h, cpu 30min": every step a built-in scenario and a whole number of intervals (the
 * default rotation follows any interval, like rtsoakd's), read as rtsoakd reads its
 * [Schedule] Rotation=. */
static int parse_rotation(bool is_default) {
        struct rotation_params p = {
                .interval_ns = opt.interval_ns,
                .round_up = is_default,
                .max_step_ns = (uint64_t) 100 * 365 * DAY_NS,
                .lookup = rotation_lookup,
                .problem = rotation_problem,
        };
        int r = rotation_parse(opt.rotation, &p, &opt.steps, &opt.nsteps, &opt.cycle_ns);
        if (r == -ENOMEM)
                return log_oom();
        return r < 0 ? -EINVAL : 0;
}

/* The rotation step at time t, like rtsoakd's schedule_at(): aligned to the epoch. */
static const struct schedule_step *step_at(int64_t t, int64_t *ret_step_start) {
        return rotation_at(opt.steps, opt.nsteps, opt.cycle_ns, t, ret_step_start, NULL);
}

static const struct load_def *scenario_load(const struct scenario *sc, const char *gen) {
        for (size_t i = 0; i < sc->nloads; i++)
                if (strcmp(sc->loads[i].generator, gen) == 0)
                        return &sc->loads[i];
        return NULL;
}

static int cmp_spike(const void *a, const void *b) {
        const struct spike *x = a, *y = b;
        return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

static int cmp_end(const void *a, const void *b) {
        const struct run_end *x = a, *y = b;
        return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

static void help(void) {
        printf("Usage: rtsoak-replay --server URL (--token TOKEN | --token-file FILE) --machine ID "
               "[OPTIONS]\n"
               "       rtsoak-replay --server URL --tokens FILE [--jobs N] [OPTIONS]\n"
               "\n"
               "Posts a synthetic history of rtsoak.summary/1 uploads to an rtsoak-server.\n"
               "\n"
               "  --server URL             the farm server (http:// or https://)\n"
               "  --token TOKEN            the machine's token (from rtsoak-server enroll)\n"
               "  --token-file FILE        read the token from the first line of FILE\n"
               "  --machine ID             the machine id (32 lowercase hex digits)\n"
               "  --tokens FILE            many machines: lines \"MACHINE_ID TOKEN\" (# comments)\n"
               "  --jobs N                 machines posted in parallel with --tokens (default 2)\n"
               "  --kernel RELEASE         run.kernel_release (default 6.1.0-rt-replay)\n"
               "  --kernel-version TEXT    run.kernel_version (uname -v: two builds of one "
               "release)\n"
               "  --release NAME           run.release, the name the farm judges runs under\n"
               "  --preempt-model TEXT     run.preempt_model (default PREEMPT_RT)\n"
               "  --from TIME, --to TIME   the history [from, to) (default: --days before now)\n"
               "  --days N                 length of the history when --from is not given "
               "(default 1)\n"
               "  --interval SPAN          interval length (default 1min)\n"
               "  --cpus N                 CPUs (default 2)\n"
               "  --hostname NAME          default replay-<first 8 digits of each machine's id>\n"
               "  --run-id N               the first run's id (default 1)\n"
               "  --rotation TEXT          scenarios, epoch-aligned (default \"%s\")\n"
               "  --latency SPAN           typical per-interval maximum (default 30us)\n"
               "  --threshold SPAN         the run's threshold (default 100us)\n"
               "  --probe-interval SPAN    probe period (default 1ms)\n"
               "  --spike TIME,CPU,SPAN[,THREAD]\n"
               "                           the interval holding TIME has maximum SPAN on CPU;\n"
               "                           with THREAD, a trace capture of it that names that\n"
               "                           thread (pid 4242, SCHED_FIFO 50) as the culprit\n"
               "  --gap FROM,TO            no intervals starting in [FROM, TO)\n"
               "  --unclean TIME           the run ends uncleanly at TIME; a new run follows\n"
               "  --restart TIME           the run ends cleanly at TIME; a new run follows\n"
               "  --reboot-time SPAN       from an end to the next run (default 2min)\n"
               "  --load-down TIME,SPAN,GENERATOR\n"
               "                           the generator is down from TIME for SPAN\n"
               "\n"
               "Hostile histories (what a release manager must not sign):\n"
               "  --probed-cpus LIST       run.cpus: the CPUs the run claims to probe "
               "(\"0-3,6\"),\n"
               "                           also those missing from every interval\n"
               "  --probe-down CPU,FROM,TO the CPU is absent from the intervals of [FROM, TO)\n"
               "                           (partly covered ones: its own span, the rest); an\n"
               "                           interval without any CPU is not sent\n"
               "  --samples-share PERCENT  each CPU delivers only this share of the wake-ups its\n"
               "                           span allows (0 to 1000: above 100, more than possible)\n"
               "  --load-zero GENERATOR,FROM,TO\n"
               "                           the generator runs through [FROM, TO) and reports\n"
               "                           nothing (every metric 0)\n"
               "  --clock-ahead SPAN[,FROM]\n"
               "                           the machine's clock runs SPAN ahead: every stamp of\n"
               "                           the intervals from FROM on (default: all) is shifted\n"
               "                           into the future\n"
               "\n"
               "Posting:\n"
               "  --batch N                intervals per upload (default 60, at most %d)\n"
               "  --seed N                 seed of the pseudo-random jitter (default 0)\n"
               "  --ca FILE                CA certificate(s) to verify the server with\n"
               "  --quiet                  print nothing but errors\n"
               "  --json                   print the final figures as JSON\n"
               "  -h, --help               show this help\n"
               "\n"
               "TIME: RFC 3339, Unix nanoseconds, \"now\", \"30d ago\". SPAN: \"200us\", "
               "\"1h30min\".\n"
               "--spike, --gap, --unclean, --restart, --load-down, --probe-down and --load-zero\n"
               "may be repeated.\n"
               "Exit status: 0 posted, 1 refused by the server or failed, 64 usage error.\n",
               DEFAULT_ROTATION, SUMMARY_MAX_INTERVALS);
}

struct raw_list {
        const char **v;
        size_t n;
};

static int raw_add(struct raw_list *l, const char *option, const char *s) {
        const char **a = grow(l->v, &l->n, sizeof(*l->v));
        if (!a)
                return usage_error(option, "given more than %d times (or out of memory)",
                                   REPLAY_MAX_ITEMS);
        l->v = a;
        a[l->n - 1] = s;
        return 0;
}

/* "0-3,6": the probed CPUs, each below SUMMARY_MAX_CPUS. */
static int parse_probed(const char *text) {
        struct cpuset set = {};
        const char *reason = NULL;
        if (strcmp(text, "all") == 0 || cpuset_parse(text, &set, &reason) < 0)
                return usage_error("--probed-cpus", "'%s' is not a list of CPUs (\"0-3,6\")%s%s",
                                   text, reason ? ": " : "", reason ?: "");
        int r = 0;
        if (set.n == 0 || set.cpus[set.n - 1] >= SUMMARY_MAX_CPUS)
                r = usage_error("--probed-cpus", "'%s': CPUs are 0 to %d", text,
                                SUMMARY_MAX_CPUS - 1);
        else if (!(opt.probed = calloc(set.n, sizeof(*opt.probed))))
                r = log_oom();
        for (size_t i = 0; r >= 0 && i < set.n; i++)
                opt.probed[opt.nprobed++] = (uint32_t) set.cpus[i];
        cpuset_done(&set);
        return r;
}

/* FROM,TO of a window option, FROM before TO. */
static int parse_window(const char *option, const char *raw, const char *f_from, const char *f_to,
                        int64_t now, int64_t *ret_from, int64_t *ret_to) {
        int r;
        if ((r = parse_time(option, f_from, now, ret_from)) < 0 ||
            (r = parse_time(option, f_to, now, ret_to)) < 0)
                return r;
        if (*ret_from >= *ret_to)
                return usage_error(option, "'%s': FROM is not before TO", raw);
        return 0;
}

static bool rotation_runs(const char *generator) {
        for (size_t i = 0; i < opt.nsteps; i++)
                if (scenario_load(opt.steps[i].scenario, generator))
                        return true;
        return false;
}

/* The options that make a history a release manager must not sign. */
static int parse_hostile(const char *probed, const char *share, const char *ahead,
                         const struct raw_list *pdowns, const struct raw_list *zeros, int64_t now) {
        char buf[256], *f[3];
        uint64_t v;
        int r;

        if (opt.release && !summary_release_valid(opt.release))
                return usage_error("--release",
                                   "'%s' is not a release name (1-%d letters, digits and . _ + "
                                   "~ : -)",
                                   opt.release, SUMMARY_MAX_RELEASE);
        if (probed && (r = parse_probed(probed)) < 0)
                return r;
        if (share) {
                char *end;
                errno = 0;
                double pct = strtod(share, &end);
                if (errno || end == share || (*end && strcmp(end, "%") != 0) || !(pct >= 0) ||
                    pct > 1000)
                        return usage_error("--samples-share",
                                           "'%s' is not a share in percent from 0 to 1000", share);
                opt.samples_share = pct / 100;
        }
        for (size_t i = 0; i < pdowns->n; i++) {
                struct probe_down *d = APPEND("--probe-down", opt.pdowns, opt.npdowns);
                if ((r = split_fields("--probe-down", pdowns->v[i], buf, sizeof(buf), f, 3,
                                      "CPU,FROM,TO")) < 0 ||
                    (r = parse_u64("--probe-down CPU", f[0], 0, opt.cpus - 1, &v)) < 0 ||
                    (r = parse_window("--probe-down", pdowns->v[i], f[1], f[2], now, &d->from_ns,
                                      &d->to_ns)) < 0)
                        return r;
                d->cpu = (uint32_t) v;
        }
        for (size_t i = 0; i < zeros->n; i++) {
                struct load_zero *z = APPEND("--load-zero", opt.zeros, opt.nzeros);
                if ((r = split_fields("--load-zero", zeros->v[i], buf, sizeof(buf), f, 3,
                                      "GENERATOR,FROM,TO")) < 0 ||
                    (r = parse_window("--load-zero", zeros->v[i], f[1], f[2], now, &z->from_ns,
                                      &z->to_ns)) < 0)
                        return r;
                if (!valid_generator(f[0]) || !rotation_runs(f[0]))
                        return usage_error("--load-zero",
                                           "'%s': no scenario of the rotation runs a generator "
                                           "'%s'",
                                           zeros->v[i], f[0]);
                snprintf(z->generator, sizeof(z->generator), "%s", f[0]);
        }
        if (ahead) {
                const char *comma = strchr(ahead, ',');
                char span[128];
                snprintf(span, sizeof(span), "%.*s", (int) (comma ? comma - ahead : 127), ahead);
                if ((r = parse_span("--clock-ahead", span, 1, (uint64_t) 365 * DAY_NS,
                                    &opt.clock_ahead_ns)) < 0 ||
                    (comma &&
                     (r = parse_time("--clock-ahead", comma + 1, now, &opt.clock_from_ns)) < 0))
                        return r;
                if (opt.to_ns + (int64_t) opt.clock_ahead_ns > INT64_C(7258118400) * 1000000000)
                        return usage_error("--clock-ahead", "the stamps would pass 2200-01-01");
        }
        return 0;
}

/* A time an option gives (raw, as given) must fall inside the history [from, to). */
static int check_inside(const char *option, const char *raw, int64_t t) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        if (t < opt.from_ns || t >= opt.to_ns)
                return usage_error(option, "'%s' is outside the history [%s, %s)", raw,
                                   fmt_time(t1, opt.from_ns), fmt_time(t2, opt.to_ns));
        return 0;
}

/* --spike TIME,CPU,SPAN[,THREAD], in time order. */
static int parse_spikes(const struct raw_list *spikes, int64_t now) {
        char buf[256], *f[4];
        uint64_t v;
        int r;
        for (size_t i = 0; i < spikes->n; i++) {
                struct spike *s = APPEND("--spike", opt.spikes, opt.nspikes);
                /* A fourth field names the thread a synthetic trace capture blames. */
                size_t commas = 0;
                for (const char *ch = spikes->v[i]; *ch; ch++)
                        commas += *ch == ',';
                size_t nf = commas == 3 ? 4 : 3;
                if ((r = split_fields("--spike", spikes->v[i], buf, sizeof(buf), f, nf,
                                      nf == 4 ? "TIME,CPU,SPAN,THREAD" : "TIME,CPU,SPAN")) < 0 ||
                    (r = parse_time("--spike", f[0], now, &s->time_ns)) < 0 ||
                    (r = parse_u64("--spike CPU", f[1], 0, opt.cpus - 1, &v)) < 0 ||
                    (r = parse_span("--spike", f[2], NSEC_PER_USEC, (uint64_t) DAY_NS,
                                    &s->latency_ns)) < 0)
                        return r;
                s->cpu = (uint32_t) v;
                if (nf == 4 && strlen(f[3]) >= sizeof(s->culprit))
                        return usage_error("--spike", "'%s': a thread name has at most %zu bytes",
                                           spikes->v[i], sizeof(s->culprit) - 1);
                snprintf(s->culprit, sizeof(s->culprit), "%s", nf == 4 ? f[3] : "");
                if ((r = check_inside("--spike", spikes->v[i], s->time_ns)) < 0)
                        return r;
        }
        if (opt.nspikes)
                qsort(opt.spikes, opt.nspikes, sizeof(*opt.spikes), cmp_spike);
        return 0;
}

/* --gap FROM,TO */
static int parse_gaps(const struct raw_list *gaps, int64_t now) {
        char buf[256], *f[2];
        int r;
        for (size_t i = 0; i < gaps->n; i++) {
                struct span *g = APPEND("--gap", opt.gaps, opt.ngaps);
                if ((r = split_fields("--gap", gaps->v[i], buf, sizeof(buf), f, 2, "FROM,TO")) <
                            0 ||
                    (r = parse_time("--gap", f[0], now, &g->from_ns)) < 0 ||
                    (r = parse_time("--gap", f[1], now, &g->to_ns)) < 0)
                        return r;
                if (g->from_ns >= g->to_ns)
                        return usage_error("--gap", "'%s': FROM is not before TO", gaps->v[i]);
        }
        return 0;
}

/* --unclean and --restart TIME, in time order, each after the run the one before starts. */
static int parse_ends(const struct raw_list *uncleans, const struct raw_list *restarts,
                      int64_t now) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN], t3[TIMESTAMP_MAX_LEN];
        const struct raw_list *endlists[2] = { uncleans, restarts };
        int r;
        for (size_t k = 0; k < 2; k++)
                for (size_t i = 0; i < endlists[k]->n; i++) {
                        const char *o = k == 0 ? "--unclean" : "--restart";
                        struct run_end *e = APPEND(o, opt.ends, opt.nends);
                        e->unclean = k == 0;
                        if ((r = parse_time(o, endlists[k]->v[i], now, &e->time_ns)) < 0 ||
                            (r = check_inside(o, endlists[k]->v[i], e->time_ns)) < 0)
                                return r;
                }
        if (opt.nends)
                qsort(opt.ends, opt.nends, sizeof(*opt.ends), cmp_end);
        for (size_t i = 1; i < opt.nends; i++) {
                int64_t next = align_up(opt.ends[i - 1].time_ns + (int64_t) opt.reboot_ns,
                                        opt.interval_ns);
                if (opt.ends[i].time_ns < next)
                        return usage_error(opt.ends[i].unclean ? "--unclean" : "--restart",
                                           "%s is before the run that the end at %s starts (at "
                                           "%s, after --reboot-time)",
                                           fmt_time(t1, opt.ends[i].time_ns),
                                           fmt_time(t2, opt.ends[i - 1].time_ns),
                                           fmt_time(t3, next));
        }
        return 0;
}

/* --load-down TIME,SPAN,GENERATOR: a generator the scenario at that time runs. */
static int parse_downs(const struct raw_list *downs, int64_t now) {
        char buf[256], *f[3];
        int r;
        for (size_t i = 0; i < downs->n; i++) {
                struct load_down *d = APPEND("--load-down", opt.downs, opt.ndowns);
                if ((r = split_fields("--load-down", downs->v[i], buf, sizeof(buf), f, 3,
                                      "TIME,SPAN,GENERATOR")) < 0 ||
                    (r = parse_time("--load-down", f[0], now, &d->time_ns)) < 0 ||
                    (r = parse_span("--load-down", f[1], 1, (uint64_t) DAY_NS * 3650,
                                    &d->span_ns)) < 0)
                        return r;
                if (!valid_generator(f[2]))
                        return usage_error("--load-down", "'%s': '%s' is not a generator name",
                                           downs->v[i], f[2]);
                snprintf(d->generator, sizeof(d->generator), "%s", f[2]);
                if ((r = check_inside("--load-down", downs->v[i], d->time_ns)) < 0)
                        return r;
                const struct schedule_step *st = step_at(d->time_ns, NULL);
                if (!scenario_load(st->scenario, d->generator))
                        return usage_error("--load-down",
                                           "'%s': the scenario at that time, %s, runs no %s "
                                           "generator",
                                           downs->v[i], st->scenario->name, d->generator);
        }
        return 0;
}

/* The events of the history: spikes, gaps, run ends and generators down, each inside it. */
static int parse_history(const struct raw_list *spikes, const struct raw_list *gaps,
                         const struct raw_list *uncleans, const struct raw_list *restarts,
                         const struct raw_list *downs, int64_t now) {
        int r;
        if ((r = parse_spikes(spikes, now)) < 0 || (r = parse_gaps(gaps, now)) < 0 ||
            (r = parse_ends(uncleans, restarts, now)) < 0)
                return r;
        return parse_downs(downs, now);
}

/* The long options of rtsoak-replay. */
enum {
        ARG_SERVER = 0x100,
        ARG_TOKEN,
        ARG_TOKEN_FILE,
        ARG_MACHINE,
        ARG_TOKENS,
        ARG_JOBS,
        ARG_KERNEL,
        ARG_KERNEL_VERSION,
        ARG_PREEMPT_MODEL,
        ARG_FROM,
        ARG_TO,
        ARG_DAYS,
        ARG_INTERVAL,
        ARG_CPUS,
        ARG_HOSTNAME,
        ARG_RUN_ID,
        ARG_ROTATION,
        ARG_LATENCY,
        ARG_THRESHOLD,
        ARG_PROBE_INTERVAL,
        ARG_SPIKE,
        ARG_GAP,
        ARG_UNCLEAN,
        ARG_RESTART,
        ARG_REBOOT_TIME,
        ARG_LOAD_DOWN,
        ARG_RELEASE,
        ARG_PROBED_CPUS,
        ARG_PROBE_DOWN,
        ARG_SAMPLES_SHARE,
        ARG_LOAD_ZERO,
        ARG_CLOCK_AHEAD,
        ARG_BATCH,
        ARG_SEED,
        ARG_CA,
        ARG_QUIET,
        ARG_JSON,
};

static const struct option longopts[] = {
        { "server", required_argument, NULL, ARG_SERVER },
        { "token", required_argument, NULL, ARG_TOKEN },
        { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
        { "machine", required_argument, NULL, ARG_MACHINE },
        { "tokens", required_argument, NULL, ARG_TOKENS },
        { "jobs", required_argument, NULL, ARG_JOBS },
        { "kernel", required_argument, NULL, ARG_KERNEL },
        { "kernel-version", required_argument, NULL, ARG_KERNEL_VERSION },
        { "preempt-model", required_argument, NULL, ARG_PREEMPT_MODEL },
        { "from", required_argument, NULL, ARG_FROM },
        { "to", required_argument, NULL, ARG_TO },
        { "days", required_argument, NULL, ARG_DAYS },
        { "interval", required_argument, NULL, ARG_INTERVAL },
        { "cpus", required_argument, NULL, ARG_CPUS },
        { "hostname", required_argument, NULL, ARG_HOSTNAME },
        { "run-id", required_argument, NULL, ARG_RUN_ID },
        { "rotation", required_argument, NULL, ARG_ROTATION },
        { "latency", required_argument, NULL, ARG_LATENCY },
        { "threshold", required_argument, NULL, ARG_THRESHOLD },
        { "probe-interval", required_argument, NULL, ARG_PROBE_INTERVAL },
        { "spike", required_argument, NULL, ARG_SPIKE },
        { "gap", required_argument, NULL, ARG_GAP },
        { "unclean", required_argument, NULL, ARG_UNCLEAN },
        { "restart", required_argument, NULL, ARG_RESTART },
        { "reboot-time", required_argument, NULL, ARG_REBOOT_TIME },
        { "load-down", required_argument, NULL, ARG_LOAD_DOWN },
        { "release", required_argument, NULL, ARG_RELEASE },
        { "probed-cpus", required_argument, NULL, ARG_PROBED_CPUS },
        { "probe-down", required_argument, NULL, ARG_PROBE_DOWN },
        { "samples-share", required_argument, NULL, ARG_SAMPLES_SHARE },
        { "load-zero", required_argument, NULL, ARG_LOAD_ZERO },
        { "clock-ahead", required_argument, NULL, ARG_CLOCK_AHEAD },
        { "batch", required_argument, NULL, ARG_BATCH },
        { "seed", required_argument, NULL, ARG_SEED },
        { "ca", required_argument, NULL, ARG_CA },
        { "quiet", no_argument, NULL, ARG_QUIET },
        { "json", no_argument, NULL, ARG_JSON },
        { "help", no_argument, NULL, 'h' },
        {},
};

/* The options whose text is checked once all are read: the lists of events and faults, and
 * the times and shares that depend on other options. */
struct raw_options {
        struct raw_list spikes, gaps, uncleans, restarts, downs, pdowns, zeros;
        const char *from, *to, *days, *probed, *share, *ahead;
};

static void raw_options_done(struct raw_options *raw) {
        free(raw->spikes.v);
        free(raw->gaps.v);
        free(raw->uncleans.v);
        free(raw->restarts.v);
        free(raw->downs.v);
        free(raw->pdowns.v);
        free(raw->zeros.v);
}

/* The options that are only kept: their argument as given. */
static const struct {
        int id;
        const char **dst;
} kept_options[] = {
        { ARG_SERVER, &opt.server },
        { ARG_TOKEN, &opt.token },
        { ARG_TOKEN_FILE, &opt.token_file },
        { ARG_MACHINE, &opt.machine },
        { ARG_TOKENS, &opt.tokens_file },
        { ARG_KERNEL, &opt.kernel },
        { ARG_KERNEL_VERSION, &opt.kernel_version },
        { ARG_PREEMPT_MODEL, &opt.preempt_model },
        { ARG_HOSTNAME, &opt.hostname },
        { ARG_ROTATION, &opt.rotation },
        { ARG_RELEASE, &opt.release },
        { ARG_CA, &opt.ca_file },
};

/* The options that may be given more than once: a list each. */
static const struct {
        int id;
        size_t offset; /* of its list in struct raw_options */
        const char *name;
} list_options[] = {
        { ARG_SPIKE, offsetof(struct raw_options, spikes), "--spike" },
        { ARG_GAP, offsetof(struct raw_options, gaps), "--gap" },
        { ARG_UNCLEAN, offsetof(struct raw_options, uncleans), "--unclean" },
        { ARG_RESTART, offsetof(struct raw_options, restarts), "--restart" },
        { ARG_LOAD_DOWN, offsetof(struct raw_options, downs), "--load-down" },
        { ARG_PROBE_DOWN, offsetof(struct raw_options, pdowns), "--probe-down" },
        { ARG_LOAD_ZERO, offsetof(struct raw_options, zeros), "--load-zero" },
};

/* One option c with its argument arg: 0, or -EINVAL on a usage error (already printed). */
static int parse_option(int c, const char *arg, char **argv, struct raw_options *raw) {
        uint64_t v;
        int r = 0;
        for (size_t i = 0; i < ELEMENTSOF(kept_options); i++)
                if (kept_options[i].id == c) {
                        *kept_options[i].dst = arg;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(list_options); i++)
                if (list_options[i].id == c)
                        return raw_add((struct raw_list *) ((char *) raw + list_options[i].offset),
                                       list_options[i].name, arg);
        switch (c) {
        case ARG_JOBS:
                r = parse_u64("--jobs", arg, 1, 256, &v);
                opt.jobs = (unsigned) v;
                break;
        case ARG_FROM:
                raw->from = arg;
                break;
        case ARG_TO:
                raw->to = arg;
                break;
        case ARG_DAYS:
                raw->days = arg;
                break;
        case ARG_INTERVAL:
                r = parse_span("--interval", arg, NSEC_PER_MSEC, (uint64_t) DAY_NS,
                               &opt.interval_ns);
                break;
        case ARG_CPUS:
                r = parse_u64("--cpus", arg, 1, SUMMARY_MAX_CPUS, &v);
                opt.cpus = (unsigned) v;
                break;
        case ARG_RUN_ID:
                r = parse_u64("--run-id", arg, 1, INT64_MAX / 2, &v);
                opt.run_id = (int64_t) v;
                break;
        case ARG_LATENCY:
                r = parse_span("--latency", arg, NSEC_PER_USEC, (uint64_t) DAY_NS, &opt.latency_ns);
                break;
        case ARG_THRESHOLD:
                r = parse_span("--threshold", arg, 0, (uint64_t) DAY_NS, &opt.threshold_ns);
                break;
        case ARG_PROBE_INTERVAL:
                r = parse_span("--probe-interval", arg, NSEC_PER_USEC, (uint64_t) DAY_NS,
                               &opt.probe_interval_ns);
                break;
        case ARG_REBOOT_TIME:
                r = parse_span("--reboot-time", arg, 0, (uint64_t) DAY_NS, &opt.reboot_ns);
                break;
        case ARG_PROBED_CPUS:
                raw->probed = arg;
                break;
        case ARG_SAMPLES_SHARE:
                raw->share = arg;
                break;
        case ARG_CLOCK_AHEAD:
                raw->ahead = arg;
                break;
        case ARG_BATCH:
                r = parse_u64("--batch", arg, 1, SUMMARY_MAX_INTERVALS, &v);
                opt.batch = (unsigned) v;
                break;
        case ARG_SEED:
                r = parse_u64("--seed", arg, 0, UINT64_MAX, &opt.seed);
                break;
        case ARG_QUIET:
                opt.quiet = true;
                break;
        case ARG_JSON:
                opt.json = true;
                break;
        case ':':
                r = usage_error(argv[optind - 1], "requires an argument");
                break;
        default:
                r = usage_error(optopt ? (char[]){ '-', (char) optopt, 0 } : argv[optind - 1],
                                "unknown option");
                break;
        }
        return r;
}

/* Who posts where, and what the machine says about itself. */
static int check_identity(void) {
        int r;
        if (!opt.server)
                return usage_error("--server", "required (e.g. --server http://127.0.0.1:8470)");
        if (strncmp(opt.server, "http://", 7) != 0 && strncmp(opt.server, "https://", 8) != 0)
                return usage_error("--server", "'%s' is not an http:// or https:// URL",
                                   opt.server);
        if (strlen(opt.server) > 4000)
                return usage_error("--server", "the URL is too long");
        if (opt.tokens_file) {
                const char *bad = opt.machine      ? "--machine"
                                  : opt.token      ? "--token"
                                  : opt.token_file ? "--token-file"
                                                   : NULL;
                if (bad)
                        return usage_error(bad, "cannot be combined with --tokens (its file names "
                                                "the machines and their tokens)");
        } else {
                if (!opt.machine)
                        return usage_error("--machine", "required (or --tokens FILE)");
                if (!valid_id(opt.machine))
                        return usage_error("--machine",
                                           "'%s' is not a machine id (32 lowercase hex digits)",
                                           opt.machine);
                if (!opt.token == !opt.token_file)
                        return usage_error(opt.token ? "--token" : "--token-file",
                                           opt.token ? "give either --token or --token-file, not "
                                                       "both"
                                                     : "required (or --token TOKEN)");
        }
        if (opt.hostname && (!*opt.hostname || strlen(opt.hostname) > 255))
                return usage_error("--hostname", "must be 1 to 255 bytes");
        if (!*opt.kernel || strlen(opt.kernel) > 256)
                return usage_error("--kernel", "must be 1 to 256 bytes");
        if (strlen(opt.kernel_version) > 512)
                return usage_error("--kernel-version", "longer than 512 bytes");
        if (strlen(opt.preempt_model) > 64)
                return usage_error("--preempt-model", "longer than 64 bytes");
        if (opt.probe_interval_ns > opt.interval_ns)
                return usage_error("--probe-interval", "longer than the interval");
        if (opt.interval_ns / opt.probe_interval_ns > UINT64_C(1) << 40)
                return usage_error("--probe-interval", "too many samples per interval");
        r = parse_rotation(opt.rotation == (const char *) DEFAULT_ROTATION ||
                           strcmp(opt.rotation, DEFAULT_ROTATION) == 0);
        return r < 0 ? r : 0;
}

/* The history [from, to) of --from, --to and --days. */
static int parse_span_of_history(const struct raw_options *raw, int64_t now) {
        int r;
        if (raw->days && raw->from)
                return usage_error("--days", "cannot be combined with --from");
        uint64_t ndays = 1;
        if (raw->days && (r = parse_u64("--days", raw->days, 1, 36500, &ndays)) < 0)
                return r;
        opt.to_ns = now;
        if (raw->to && (r = parse_time("--to", raw->to, now, &opt.to_ns)) < 0)
                return r;
        opt.from_ns = opt.to_ns - (int64_t) ndays * DAY_NS;
        if (raw->from && (r = parse_time("--from", raw->from, now, &opt.from_ns)) < 0)
                return r;
        if (opt.from_ns >= opt.to_ns)
                return usage_error(raw->from ? "--from" : "--days",
                                   "the history is empty: from is not before to");
        if (align_up(opt.from_ns, opt.interval_ns) + (int64_t) opt.interval_ns > opt.to_ns)
                return usage_error(raw->to ? "--to" : "--from",
                                   "the history [from, to) holds no whole interval");
        if (opt.from_ns < INT64_C(1000000000) * 1000000000 ||
            opt.to_ns > INT64_C(7258118400) * (int64_t) NSEC_PER_SEC)
                return usage_error(
                        opt.from_ns < INT64_C(1000000000) * 1000000000 ? "--from" : "--to",
                        "outside the times the schema allows (2001-09-09 to 2200-01-01)");
        return 0;
}

/* 0 to go on, 1 when done (--help), -EINVAL on a usage error (already printed). */
static int parse_options(int argc, char **argv) {
        struct raw_options raw = {};
        int64_t now = now_ns(CLOCK_REALTIME);
        int c, r = 0;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) >= 0) {
                if (c == 'h') {
                        help();
                        r = 1;
                        goto out;
                }
                if ((r = parse_option(c, optarg, argv, &raw)) < 0)
                        goto out;
        }
        if (optind < argc) {
                r = usage_error(argv[optind], "unexpected argument (all settings are options)");
                goto out;
        }
        if ((r = check_identity()) < 0 || (r = parse_span_of_history(&raw, now)) < 0 ||
            (r = parse_history(&raw.spikes, &raw.gaps, &raw.uncleans, &raw.restarts, &raw.downs,
                               now)) < 0 ||
            (r = parse_hostile(raw.probed, raw.share, raw.ahead, &raw.pdowns, &raw.zeros, now)) < 0)
                goto out;

        /* What identifies the configuration, as rtsoakd's digest of its effective one. */
        char cfg[1024], s1[TIMESPAN_MAX_LEN], s2[TIMESPAN_MAX_LEN], s3[TIMESPAN_MAX_LEN];
        snprintf(cfg, sizeof(cfg),
                 "rtsoak-replay\ninterval=%s\nprobe_interval=%s\nthreshold=%s\ncpus=%u\n"
                 "rotation=%s\nrelease=%s\n",
                 format_timespan(s1, opt.interval_ns), format_timespan(s2, opt.probe_interval_ns),
                 format_timespan(s3, opt.threshold_ns), opt.cpus, opt.rotation, opt.release ?: "");
        sha256_hex(cfg, strlen(cfg), opt.config_digest);
        r = 0;
out:
        raw_options_done(&raw);
        return r;
}

/* ---- machines and tokens ------------------------------------------------------------------ */

static struct machine *machines;
static size_t nmachines;

static int valid_token(const char *option, const char *where, const char *t) {
        size_t l = strlen(t);
        if (l == 0)
                return usage_error(option, "%s: the token is empty", where);
        if (l > 512)
                return usage_error(option, "%s: the token is longer than 512 bytes", where);
        for (const char *p = t; *p; p++)
                if ((unsigned char) *p <= ' ' || (unsigned char) *p >= 0x7f)
                        return usage_error(option,
                                           "%s: the token has a space or control "
                                           "character",
                                           where);
        return 0;
}

static void strip(char *s) {
        size_t l = strlen(s);
        while (l > 0 && isspace((unsigned char) s[l - 1]))
                s[--l] = 0;
}

static int load_machines(void) {
        char line[1024], where[600];
        if (!opt.tokens_file) {
                machines = calloc(1, sizeof(*machines));
                if (!machines)
                        return log_oom();
                nmachines = 1;
                snprintf(machines[0].id, sizeof(machines[0].id), "%s", opt.machine);
                if (opt.token) {
                        machines[0].token = strdup(opt.token);
                        snprintf(where, sizeof(where), "'%s'", "--token");
                } else {
                        _cleanup_fclose_ FILE *f = fopen(opt.token_file, "re");
                        if (!f)
                                return usage_error("--token-file", "cannot read '%s': %s",
                                                   opt.token_file, strerror(errno));
                        if (!fgets(line, sizeof(line), f))
                                line[0] = 0;
                        strip(line);
                        machines[0].token = strdup(line);
                        snprintf(where, sizeof(where), "%s, line 1", opt.token_file);
                        explicit_bzero(line, sizeof(line));
                }
                if (!machines[0].token)
                        return log_oom();
                return valid_token(opt.token ? "--token" : "--token-file", where,
                                   machines[0].token);
        }

        _cleanup_fclose_ FILE *f = fopen(opt.tokens_file, "re");
        if (!f)
                return usage_error("--tokens", "cannot read '%s': %s", opt.tokens_file,
                                   strerror(errno));
        unsigned lineno = 0;
        int r = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                snprintf(where, sizeof(where), "%s, line %u", opt.tokens_file, lineno);
                if (!strchr(line, '\n') && !feof(f)) {
                        r = usage_error("--tokens", "%s: the line is too long", where);
                        break;
                }
                strip(line);
                char *p = line;
                while (isspace((unsigned char) *p))
                        p++;
                if (!*p || *p == '#')
                        continue;
                char *id = p;
                while (*p && !isspace((unsigned char) *p))
                        p++;
                if (!*p) {
                        r = usage_error("--tokens", "%s: expected \"MACHINE_ID TOKEN\"", where);
                        break;
                }
                *p++ = 0;
                while (isspace((unsigned char) *p))
                        p++;
                if (!valid_id(id)) {
                        r = usage_error("--tokens",
                                        "%s: '%s' is not a machine id (32 lowercase hex digits)",
                                        where, id);
                        break;
                }
                if ((r = valid_token("--tokens", where, p)) < 0)
                        break;
                for (size_t i = 0; i < nmachines; i++)
                        if (strcmp(machines[i].id, id) == 0) {
                                r = usage_error("--tokens", "%s: machine %s is listed twice", where,
                                                id);
                                goto out;
                        }
                struct machine *m = realloc(machines, (nmachines + 1) * sizeof(*m));
                if (!m) {
                        r = log_oom();
                        break;
                }
                machines = m;
                m = &machines[nmachines++];
                snprintf(m->id, sizeof(m->id), "%s", id);
                m->token = strdup(p);
                if (!m->token) {
                        r = log_oom();
                        break;
                }
        }
out:
        explicit_bzero(line, sizeof(line));
        if (r < 0)
                return r;
        if (ferror(f))
                return usage_error("--tokens", "cannot read '%s': %s", opt.tokens_file,
                                   strerror(errno));
        if (nmachines == 0)
                return usage_error("--tokens", "'%s' lists no machine", opt.tokens_file);
        return 0;
}

/* ---- the history of one machine ----------------------------------------------------------- */

struct stats {
        uint64_t machines, runs, intervals, events, uploads, retries;
};

struct worker {
        pthread_t thread;
        CURL *curl;
        struct http_reply reply;
        struct stats stats;

        /* The histogram being filled, and which of its buckets are not zero. */
        struct hist hist;
        uint32_t touched[64];
        size_t ntouched;

        /* The upload being built. */
        struct summary_interval *ivs;
        struct summary_cpu *cpus;     /* batch x cpus */
        struct summary_load *loads;   /* batch x 4 */
        struct summary_metric *mets;  /* batch x 4 x 4 */
        struct summary_event *events; /* messages allocated */
        size_t nivs, nevents, cap_events;
};

/* One machine's state while its history is generated. */
struct mstate {
        const struct machine *m;
        struct curl_slist *headers;
        char hostname[256];
        uint64_t key; /* the seed of this machine's pseudo-random numbers */

        int64_t run_id, run_start_ns, last_data_ns;
        char boot_id[33];
        uint64_t seq; /* of the next interval in the run */
        bool run_posted;
        uint64_t event_id; /* the last event number used */
        size_t next_spike;
};

static atomic_bool failed;
static atomic_size_t next_machine;
static atomic_uint unsent_spikes, unsent_downs;

static void new_boot_id(struct mstate *ms) {
        char text[128], hex[2 * SHA256_DIGEST_SIZE + 1];
        snprintf(text, sizeof(text), "boot %s %" PRIu64 " %" PRId64, ms->m->id, opt.seed,
                 ms->run_id);
        sha256_hex(text, strlen(text), hex);
        snprintf(ms->boot_id, sizeof(ms->boot_id), "%.32s", hex);
}

_printf_(7, 8) static int add_event(struct worker *w, struct mstate *ms, int64_t time_ns,
                                    const char *type, int cpu, int64_t value, const char *fmt,
                                    ...) {
        if (w->nevents == w->cap_events) {
                size_t cap = w->cap_events ? 2 * w->cap_events : 16;
                struct summary_event *e = realloc(w->events, cap * sizeof(*e));
                if (!e)
                        return -ENOMEM;
                w->events = e;
                w->cap_events = cap;
        }
        char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        w->events[w->nevents++] = (struct summary_event){
                .id = ++ms->event_id,
                .time_ns = time_ns,
                .type = (char *) type,
                .cpu = cpu,
                .value = value,
                .message = msg,
        };
        return 0;
}

struct sample {
        uint64_t ns, count;
};

/* A trace capture of a spike as rtsoakd's flight recorder would make it: the named thread
 * held the CPU for 95 % of the latency, the timer interrupt for a little of the rest. */
static int make_trace(const struct spike *sp, struct summary_trace *t) {
        struct trace_analysis *a = calloc(1, sizeof(*a));
        t->analysis = a;
        if (!a)
                return -ENOMEM;
        uint64_t lat = sp->latency_ns;
        *a = (struct trace_analysis){
                .cpu = (int) sp->cpu,
                .time_ns = sp->time_ns,
                .latency_ns = lat,
                .timer_ns = MIN(lat / 100, 2000),
                .return_ns = MIN(lat / 100, 1000),
                .timer_seen = true,
                .switch_seen = true,
                .marker_seen = true,
                .lookback_ns = 20 * NSEC_PER_MSEC,
                .nevents = 4,
                .ncontribs = 2,
        };
        a->sched_ns = lat - a->timer_ns - a->return_ns;
        a->contribs[0] = (struct trace_contrib){ .kind = TRACE_CULPRIT_THREAD,
                                                 .pid = 4242,
                                                 .irq = -1,
                                                 .priority = 50,
                                                 .duration_ns = lat / 100 * 95,
                                                 .count = 1 };
        snprintf(a->contribs[0].name, sizeof(a->contribs[0].name), "%s", sp->culprit);
        snprintf(a->contribs[0].policy, sizeof(a->contribs[0].policy), "SCHED_FIFO");
        a->contribs[1] = (struct trace_contrib){ .kind = TRACE_CULPRIT_IRQ,
                                                 .pid = -1,
                                                 .irq = -1,
                                                 .duration_ns = lat / 100 * 3,
                                                 .count = 1 };
        snprintf(a->contribs[1].name, sizeof(a->contribs[1].name), "local_timer");
        trace_analysis_summarize(a);
        json_t *j = trace_analysis_to_json(a);
        t->json = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!t->json)
                return -ENOMEM;
        /* Raw events of the same story, as the machine would send them. */
        size_t len = 0;
        struct trace_event ev[3] = {
                { .ts_ns = -1000, .pid = 4242, .kind = TRACE_SWITCH },
                { .ts_ns = (int64_t) a->timer_ns, .pid = 4242, .kind = TRACE_WAKEUP },
                { .ts_ns = (int64_t) (lat - a->return_ns), .pid = 4242, .kind = TRACE_SWITCH },
        };
        snprintf(ev[0].u.sw.next_comm, TRACE_COMM_MAX, "%s", sp->culprit);
        snprintf(ev[0].u.sw.prev_comm, TRACE_COMM_MAX, "swapper/%u", sp->cpu);
        ev[0].u.sw.next_pid = 4242;
        ev[0].u.sw.next_prio = 49;
        snprintf(ev[1].u.wake.comm, TRACE_COMM_MAX, "rtsoak-cpu%u", sp->cpu);
        ev[1].u.wake.pid = 4000;
        ev[1].u.wake.target_cpu = (int32_t) sp->cpu;
        snprintf(ev[2].u.sw.prev_comm, TRACE_COMM_MAX, "%s", sp->culprit);
        snprintf(ev[2].u.sw.next_comm, TRACE_COMM_MAX, "rtsoak-cpu%u", sp->cpu);
        ev[2].u.sw.prev_pid = 4242;
        ev[2].u.sw.prev_prio = 49;
        ev[2].u.sw.next_pid = 4000;
        _cleanup_free_ char *text = NULL;
        size_t dropped;
        int r = trace_raw_text(ev, ELEMENTSOF(ev), (int) sp->cpu, 0, &text, &len);
        return r < 0 ? r : trace_raw_compress(text, len, 64 * 1024, &t->raw, &t->raw_len, &dropped);
}

/* One CPU of one interval: a plausible distribution around --latency (one sample at the
 * minimum, one at the maximum, most near the average, a thin tail between), plus the spikes,
 * put into a real histogram whose count is exactly the sample count. */
static int make_cpu(struct worker *w, struct mstate *ms, struct summary_cpu *out, uint32_t cpu,
                    int64_t t, const struct span *own, const struct spike *const *sp, size_t nsp) {
        struct sample s[24];
        size_t n = 0;
        uint64_t span_ns = (uint64_t) (own->to_ns - own->from_ns);
        uint64_t total = (uint64_t) ((double) (span_ns / opt.probe_interval_ns) *
                                     opt.samples_share),
                 left = total, missed = 0;
        uint64_t r = rnd(ms->key, (uint64_t) t, cpu);
        uint64_t L = opt.latency_ns;
        uint64_t max0 = MAX(L - (uint64_t) ((double) L * 0.1 * frac(r)), 1);
        uint64_t min0 = MAX(L / 6, 1), avg0 = MAX(L / 3, min0);
        int64_t max_time = own->from_ns + (int64_t) (mix64(r) % span_ns);
        uint64_t best = 0;

        for (size_t i = 0; i < nsp && left > 0; i++, left--) {
                s[n++] = (struct sample){ sp[i]->latency_ns, 1 };
                if (sp[i]->latency_ns > opt.probe_interval_ns)
                        missed += sp[i]->latency_ns / opt.probe_interval_ns;
        }
        if (left > 0)
                s[n++] = (struct sample){ max0, 1 }, left--;
        if (left > 0)
                s[n++] = (struct sample){ min0, 1 }, left--;
        if (left > 0) {
                uint64_t q25 = left / 4, q20 = left / 5, tail = left / 20;
                uint64_t q50 = left - q25 - q20 - tail;
                s[n++] = (struct sample){ avg0, q50 };
                if (q25)
                        s[n++] = (struct sample){ avg0 > NSEC_PER_USEC ? avg0 - NSEC_PER_USEC : 0,
                                                  q25 };
                if (q20)
                        s[n++] = (struct sample){ avg0 + NSEC_PER_USEC, q20 };
                /* The tail: 8 steps from just above the average to just below the maximum. */
                for (unsigned k = 0; k < 8 && tail; k++) {
                        uint64_t c = tail / (8 - k);
                        tail -= c;
                        uint64_t lo = avg0 + 2 * NSEC_PER_USEC;
                        uint64_t v = lo + (max0 > lo ? (max0 - lo) * k / 8 : 0);
                        if (c)
                                s[n++] = (struct sample){ v, c };
                }
        }

        uint64_t mn = UINT64_MAX, mx = 0, viol = 0;
        unsigned __int128 sum = 0;
        for (size_t i = 0; i < n; i++) {
                /* Only the spikes may leave the typical range. */
                if (i >= nsp)
                        s[i].ns = MIN(MAX(s[i].ns, min0), max0);
                mn = MIN(mn, s[i].ns);
                if (s[i].ns > mx) {
                        mx = s[i].ns;
                        best = i;
                }
                sum += (unsigned __int128) s[i].ns * s[i].count;
                if (s[i].ns > opt.threshold_ns)
                        viol += s[i].count;
        }
        if (best < nsp)
                max_time = sp[best]->time_ns;

        /* The histogram: only the touched buckets are cleared again. */
        for (size_t i = 0; i < n; i++) {
                uint32_t idx = hist_index(w->hist.limit_us, s[i].ns);
                if (!w->hist.counts[idx] && w->ntouched < ELEMENTSOF(w->touched))
                        w->touched[w->ntouched++] = idx;
                w->hist.counts[idx] += s[i].count;
        }
        uint8_t *buf = NULL;
        size_t len = 0;
        int ret = hist_encode(w->hist.limit_us, w->hist.counts, &buf, &len);
        for (size_t i = 0; i < w->ntouched; i++)
                w->hist.counts[w->touched[i]] = 0;
        w->ntouched = 0;
        if (ret < 0)
                return ret;

        *out = (struct summary_cpu){
                .cpu = cpu,
                .samples = total,
                .min_ns = total ? mn : 0,
                .avg_ns = total ? (uint64_t) (sum / total) : 0,
                .max_ns = total ? mx : 0,
                .max_time_ns = total ? max_time : own->from_ns,
                .violations = viol,
                .missed = missed,
                .hist_limit_us = w->hist.limit_us,
                .hist = buf,
                .hist_len = len,
        };
        return 0;
}

static uint64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
        int64_t lo = MAX(a0, b0), hi = MIN(a1, b1);
        return hi > lo ? (uint64_t) (hi - lo) : 0;
}

/* The part of [t, end) in which CPU c measured: the longest stretch outside its --probe-down
 * windows (empty: none). */
static struct span cpu_span(uint32_t c, int64_t t, int64_t end) {
        struct span best = { t, t };
        for (int64_t at = t; at < end;) {
                int64_t covered = at, next = end;
                for (size_t k = 0; k < opt.npdowns; k++) {
                        const struct probe_down *d = &opt.pdowns[k];
                        if (d->cpu != c)
                                continue;
                        if (d->from_ns <= at && d->to_ns > covered)
                                covered = d->to_ns;
                        else if (d->from_ns > at && d->from_ns < next)
                                next = d->from_ns;
                }
                if (covered > at) {
                        at = covered;
                        continue;
                }
                if (next - at > best.to_ns - best.from_ns)
                        best = (struct span){ at, next };
                at = next;
        }
        return best;
}

/* The shift of every stamp of the interval that starts at t (--clock-ahead). */
static int64_t clock_shift(int64_t t) {
        return t >= opt.clock_from_ns ? (int64_t) opt.clock_ahead_ns : 0;
}

/* The CPUs of the interval [t, end) that measured, each over its own span, with the spikes
 * [first, last) that fell in it, and their violation events. */
static int make_interval_cpus(struct worker *w, struct mstate *ms, struct summary_interval *iv,
                              int64_t t, size_t first, size_t last) {
        int64_t end = t + (int64_t) opt.interval_ns;
        char a[TIMESPAN_MAX_LEN];
        int r;

        for (uint32_t c = 0; c < opt.cpus; c++) {
                struct span own = cpu_span(c, t, end);
                if (own.to_ns <= own.from_ns)
                        continue; /* absent from this interval */
                const struct spike *sp[16];
                size_t nsp = 0;
                for (size_t i = first; i < last; i++)
                        if (opt.spikes[i].cpu == c && nsp < ELEMENTSOF(sp) &&
                            opt.spikes[i].time_ns >= own.from_ns &&
                            opt.spikes[i].time_ns < own.to_ns)
                                sp[nsp++] = &opt.spikes[i];
                struct summary_cpu *x = &iv->cpus[iv->ncpus++];
                *x = (struct summary_cpu){};
                if ((r = make_cpu(w, ms, x, c, t, &own, sp, nsp)) < 0)
                        return r;
                if (own.from_ns != t || own.to_ns != end) {
                        x->span_start_ns = own.from_ns;
                        x->span_length_ns = (uint64_t) (own.to_ns - own.from_ns);
                }
                /* With --latency over --threshold the typical samples violate too: rtsoakd
                 * would record 32 of them one by one and count the rest in one event; here
                 * only the spikes are recorded one by one, the rest are counted. */
                uint64_t recorded = 0;
                for (size_t i = 0; i < nsp; i++)
                        recorded += sp[i]->latency_ns > opt.threshold_ns;
                if (x->violations > recorded) {
                        r = add_event(w, ms, t, "violations_unrecorded", (int) c,
                                      (int64_t) (x->violations - recorded),
                                      "%" PRIu64 " more violations over %s on CPU %u in this "
                                      "interval were counted but not recorded one by one",
                                      x->violations - recorded,
                                      format_timespan(a, opt.threshold_ns), c);
                        if (r < 0)
                                return r;
                }
                /* The synthetic captures of the spikes that name a thread. */
                for (size_t i = 0; i < nsp; i++)
                        if (sp[i]->culprit[0] && iv->ntraces < SUMMARY_MAX_TRACES) {
                                if (!iv->traces &&
                                    !(iv->traces = calloc(SUMMARY_MAX_TRACES, sizeof(*iv->traces))))
                                        return -ENOMEM;
                                if ((r = make_trace(sp[i], &iv->traces[iv->ntraces++])) < 0)
                                        return r;
                        }
                /* The violations, in time order as rtsoakd records them. */
                for (size_t i = 0; i < nsp; i++)
                        if (sp[i]->latency_ns > opt.threshold_ns &&
                            (r = add_event(w, ms, sp[i]->time_ns, "violation", (int) c,
                                           (int64_t) sp[i]->latency_ns, "%s", "")) < 0)
                                return r;
        }
        return 0;
}

/* How much of [t, end) generator gen ran with all its metrics 0 (--load-zero). */
static uint64_t zero_ns(const char *gen, int64_t t, int64_t end) {
        uint64_t z = 0;
        for (size_t k = 0; k < opt.nzeros; k++)
                if (strcmp(opt.zeros[k].generator, gen) == 0)
                        z += overlap(t, end, opt.zeros[k].from_ns, opt.zeros[k].to_ns);
        return MIN(z, opt.interval_ns);
}

/* The load generators of the interval [t, end) of scenario sc, and their exits. */
static int make_interval_loads(struct worker *w, struct mstate *ms, struct summary_interval *iv,
                               struct summary_metric *mets, const struct scenario *sc, int64_t t,
                               int64_t step_start) {
        int64_t end = t + (int64_t) opt.interval_ns;
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        bool fresh = t == step_start || t == ms->run_start_ns;
        for (size_t i = 0; i < sc->nloads; i++) {
                const struct load_def *ld = &sc->loads[i];
                uint64_t up = opt.interval_ns;
                uint32_t starts = fresh, exits = 0;
                for (size_t k = 0; k < opt.ndowns; k++) {
                        const struct load_down *d = &opt.downs[k];
                        if (strcmp(d->generator, ld->generator) != 0)
                                continue;
                        int64_t dend = d->time_ns + (int64_t) d->span_ns;
                        up -= MIN(up, overlap(t, end, d->time_ns, dend));
                        if (d->time_ns >= t && d->time_ns < end)
                                exits++;
                        if (dend >= t && dend < end)
                                starts++;
                }
                /* Up, but working only outside its --load-zero windows. */
                double working = (double) up *
                                 (double) (opt.interval_ns - zero_ns(ld->generator, t, end)) /
                                 (double) opt.interval_ns;
                struct summary_metric *m = &mets[i * 4];
                for (size_t k = 0; k < ld->nmetrics; k++) {
                        double jitter =
                                1.0 +
                                0.05 * (2 * frac(rnd(ms->key, (uint64_t) t, 1000 + i * 8 + k)) - 1);
                        m[k] = (struct summary_metric){
                                .name = (char *) ld->metrics[k].name,
                                .unit = (char *) ld->metrics[k].unit,
                                .value = ld->metrics[k].full * jitter * working /
                                         (double) opt.interval_ns,
                        };
                }
                iv->loads[i] = (struct summary_load){
                        .generator = (char *) ld->generator,
                        .up_ns = up,
                        .starts = starts,
                        .exits = exits,
                        .metrics = m,
                        .nmetrics = ld->nmetrics,
                };
        }
        for (size_t k = 0; k < opt.ndowns; k++) {
                const struct load_down *d = &opt.downs[k];
                if (d->time_ns < t || d->time_ns >= end)
                        continue;
                size_t idx = 0;
                for (; idx < sc->nloads; idx++)
                        if (strcmp(sc->loads[idx].generator, d->generator) == 0)
                                break;
                int64_t since = MAX(step_start, ms->run_start_ns);
                uint64_t ran = (uint64_t) (d->time_ns - since);
                int r = add_event(
                        w, ms, d->time_ns, "load_exit", -1, 1,
                        "%s #%zu of scenario %s (pid %u) exited with status 1 after "
                        "%s; restarting in %s",
                        d->generator, idx + 1, sc->name,
                        (unsigned) (1000 + rnd(ms->key, (uint64_t) d->time_ns, k) % 60000),
                        format_timespan(a, ran / NSEC_PER_MSEC * NSEC_PER_MSEC),
                        format_timespan(b, d->span_ns));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Shifts every stamp of the interval and of the events from ev0 on (--clock-ahead). */
static void shift_stamps(struct worker *w, struct summary_interval *iv, size_t ev0, int64_t shift) {
        iv->start_ns += shift;
        for (size_t c = 0; c < iv->ncpus; c++) {
                iv->cpus[c].max_time_ns += shift;
                if (iv->cpus[c].span_length_ns)
                        iv->cpus[c].span_start_ns += shift;
        }
        for (size_t e = ev0; e < w->nevents; e++)
                w->events[e].time_ns += shift;
}

/* The interval that starts at t: 0 when made, 1 when no CPU measured in it (not sent). */
static int make_interval(struct worker *w, struct mstate *ms, int64_t t) {
        int64_t end = t + (int64_t) opt.interval_ns, step_start;
        const struct schedule_step *st = step_at(t, &step_start);
        const struct scenario *sc = st->scenario;
        struct summary_interval *iv = &w->ivs[w->nivs];
        size_t ev0 = w->nevents;
        int r;

        bool any = false;
        for (uint32_t c = 0; c < opt.cpus && !any; c++) {
                struct span own = cpu_span(c, t, end);
                any = own.to_ns > own.from_ns;
        }
        if (!any)
                return 1;
        *iv = (struct summary_interval){
                .seq = ms->seq,
                .start_ns = t,
                .length_ns = opt.interval_ns,
                .scenario = (char *) sc->name,
                .cpus = &w->cpus[w->nivs * opt.cpus],
                .loads = &w->loads[w->nivs * 4],
                .nloads = sc->nloads,
        };
        w->nivs++; /* from here on, flushing frees what it holds */

        /* Spikes before this interval were in no interval that was sent. */
        while (ms->next_spike < opt.nspikes && opt.spikes[ms->next_spike].time_ns < t) {
                if (ms->m == &machines[0])
                        atomic_fetch_add(&unsent_spikes, 1);
                ms->next_spike++;
        }
        size_t first = ms->next_spike, last = first;
        while (last < opt.nspikes && opt.spikes[last].time_ns < end)
                last++;
        ms->next_spike = last;

        if ((r = make_interval_cpus(w, ms, iv, t, first, last)) < 0 ||
            (r = make_interval_loads(w, ms, iv, &w->mets[(w->nivs - 1) * 16], sc, t, step_start)) <
                    0)
                return r;
        shift_stamps(w, iv, ev0, clock_shift(t));
        ms->seq++;
        ms->last_data_ns = end;
        return 0;
}

/* ---- posting ------------------------------------------------------------------------------- */

static void sleep_ns(uint64_t ns) {
        struct timespec ts = { (time_t) (ns / NSEC_PER_SEC), (long) (ns % NSEC_PER_SEC) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Posts one summary, retrying what is not the upload's fault (the network, 408, 429, 5xx)
 * with a short backoff.  Anything else the server refuses ends the replay. */
static int post(struct worker *w, struct mstate *ms, const char *body, size_t len,
                const char *what) {
        char msg[HTTP_REPLY_BODY_MAX + 128];
        uint64_t wait = 50 * NSEC_PER_MSEC;

        for (unsigned attempt = 1;; attempt++) {
                long status = 0;
                http_reply_reset(&w->reply);
                curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, ms->headers);
                curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
                CURLcode rc = curl_easy_perform(w->curl);
                if (rc == CURLE_OK) {
                        curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
                        if (status >= 200 && status < 300) {
                                w->stats.uploads++;
                                return 0;
                        }
                        http_reply_message(&w->reply, status, msg, sizeof(msg));
                        if (status != 408 && status != 429 && status < 500) {
                                log_error("Machine %s, %s: the server refused the upload: %s",
                                          ms->m->id, what, msg);
                                return -EBADMSG;
                        }
                } else
                        snprintf(msg, sizeof(msg), "%s: %s", opt.server, curl_easy_strerror(rc));
                if (attempt >= REPLAY_MAX_TRIES || atomic_load(&failed)) {
                        log_error("Machine %s, %s: giving up after %u attempts: %s", ms->m->id,
                                  what, attempt, msg);
                        return -EIO;
                }
                uint64_t ra = status ? MIN(http_parse_retry_after(w->reply.retry_after,
                                                                  now_ns(CLOCK_REALTIME)),
                                           REPLAY_RETRY_AFTER_MAX_NS)
                                     : 0;
                uint64_t delay = MAX(wait, ra);
                if (!opt.quiet) {
                        char span[TIMESPAN_MAX_LEN];
                        log_warning("Machine %s, %s: %s; retrying in %s", ms->m->id, what, msg,
                                    format_timespan(span, delay / NSEC_PER_MSEC * NSEC_PER_MSEC));
                }
                w->stats.retries++;
                sleep_ns(delay);
                wait = MIN(wait * 2, 2 * NSEC_PER_SEC);
        }
}

static void batch_clear(struct worker *w) {
        for (size_t i = 0; i < w->nivs; i++) {
                for (size_t c = 0; c < w->ivs[i].ncpus; c++) {
                        free(w->ivs[i].cpus[c].hist);
                        w->ivs[i].cpus[c].hist = NULL;
                }
                summary_traces_free(&w->ivs[i]);
        }
        for (size_t i = 0; i < w->nevents; i++)
                free(w->events[i].message);
        w->nivs = 0;
        w->nevents = 0;
}

/* Sends what the batch holds as one summary of the current run. */
static int flush(struct worker *w, struct mstate *ms) {
        if (w->nivs == 0 && w->nevents == 0)
                return 0;
        struct summary s = {
                .machine = { (char *) ms->m->id, ms->hostname,
                             (char *) "rtsoak-replay synthetic CPU", opt.cpus },
                .run = { .id = ms->run_id,
                         .boot_id = ms->boot_id,
                         .kernel_release = (char *) opt.kernel,
                         .kernel_version = (char *) opt.kernel_version,
                         .kernel_cmdline = (char *) "quiet",
                         .preempt_model = (char *) opt.preempt_model,
                         .daemon_version = (char *) PROJECT_VERSION,
                         .config_digest = opt.config_digest,
                         .start_ns = ms->run_start_ns + clock_shift(ms->run_start_ns),
                         .threshold_ns = opt.threshold_ns,
                         .probe_interval_ns = opt.probe_interval_ns,
                         .interval_ns = opt.interval_ns,
                         .release = (char *) opt.release,
                         .probed_cpus = opt.probed,
                         .nprobed_cpus = opt.nprobed },
                /* As unique in the run as the uploader's outbox row ids, and the same when the
                 * same history is posted again: the first interval's number, or for events
                 * alone the number the next interval would have. */
                .seq = w->nivs ? w->ivs[0].seq : ms->seq,
                .intervals = w->ivs,
                .nintervals = w->nivs,
                .events = w->events,
                .nevents = w->nevents,
        };
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        int r = summary_encode(&s, &body, &len);
        if (r < 0) {
                batch_clear(w);
                return log_error_errno(r,
                                       "Machine %s: cannot encode a summary of run %" PRId64 ": %m",
                                       ms->m->id, ms->run_id);
        }
        char what[128];
        snprintf(what, sizeof(what), "run %" PRId64 " upload %" PRIu64, ms->run_id, s.seq);
        r = post(w, ms, body, len, what);
        if (r >= 0) {
                w->stats.intervals += w->nivs;
                w->stats.events += w->nevents;
                if (!ms->run_posted)
                        w->stats.runs++;
                ms->run_posted = true;
        }
        batch_clear(w);
        return r;
}

static bool in_gap(int64_t t) {
        for (size_t i = 0; i < opt.ngaps; i++)
                if (t >= opt.gaps[i].from_ns && t < opt.gaps[i].to_ns)
                        return true;
        return false;
}

static void count_unsent_downs(const struct mstate *ms, int64_t t) {
        if (ms->m != &machines[0])
                return;
        for (size_t k = 0; k < opt.ndowns; k++)
                if (opt.downs[k].time_ns >= t &&
                    opt.downs[k].time_ns < t + (int64_t) opt.interval_ns)
                        atomic_fetch_add(&unsent_downs, 1);
}

/* Ends the current run: its last upload, with the unclean_end event that rtsoakd attaches to
 * a run that did not end cleanly (time: its last data). */
static int end_run(struct worker *w, struct mstate *ms, const struct run_end *e) {
        char ts[TIMESTAMP_MAX_LEN];
        if (e && e->unclean) {
                int64_t at = ms->last_data_ns +
                             clock_shift(ms->last_data_ns - (int64_t) opt.interval_ns);
                int r = add_event(w, ms, at, "unclean_end", -1, -1,
                                  "run %" PRId64 " (boot %s) did not end cleanly; its last data "
                                  "is from %s (the daemon was killed, crashed, or the machine "
                                  "lost power or reset)",
                                  ms->run_id, ms->boot_id, fmt_time(ts, ms->last_data_ns));
                if (r < 0)
                        return log_oom();
        }
        return flush(w, ms);
}

static int replay_machine(struct worker *w, const struct machine *m) {
        char auth[600];
        struct mstate ms = {
                .m = m,
                .run_id = opt.run_id,
                .key = opt.seed,
        };
        for (const char *p = m->id; *p; p++)
                ms.key = mix64(ms.key ^ (uint64_t) (unsigned char) *p);
        if (opt.hostname)
                snprintf(ms.hostname, sizeof(ms.hostname), "%s", opt.hostname);
        else
                snprintf(ms.hostname, sizeof(ms.hostname), "replay-%.8s", m->id);

        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", m->token);
        ms.headers = curl_slist_append(NULL, "Content-Type: application/json");
        ms.headers = curl_slist_append(ms.headers, auth);
        explicit_bzero(auth, sizeof(auth));
        ms.headers = curl_slist_append(ms.headers, "Expect:");
        if (!ms.headers)
                return log_oom();

        int64_t t = align_up(opt.from_ns, opt.interval_ns);
        ms.run_start_ns = t;
        ms.last_data_ns = t;
        new_boot_id(&ms);
        size_t next_end = 0;
        int r = 0;

        while (t + (int64_t) opt.interval_ns <= opt.to_ns) {
                if (atomic_load(&failed)) {
                        r = -ECANCELED;
                        goto out;
                }
                const struct run_end *e = next_end < opt.nends ? &opt.ends[next_end] : NULL;
                if (e && t + (int64_t) opt.interval_ns > e->time_ns) {
                        /* The run ends inside this interval: it is not closed, not sent. */
                        r = end_run(w, &ms, e);
                        if (r < 0)
                                goto out;
                        int64_t next = align_up(e->time_ns + (int64_t) opt.reboot_ns,
                                                opt.interval_ns);
                        for (int64_t u = t; u < next; u += (int64_t) opt.interval_ns)
                                count_unsent_downs(&ms, u);
                        t = next;
                        next_end++;
                        ms.run_id++;
                        ms.run_start_ns = t;
                        ms.last_data_ns = t;
                        ms.seq = 0;
                        ms.run_posted = false;
                        new_boot_id(&ms);
                        continue;
                }
                if (in_gap(t)) {
                        count_unsent_downs(&ms, t);
                        t += (int64_t) opt.interval_ns;
                        continue;
                }
                r = make_interval(w, &ms, t);
                if (r < 0) {
                        batch_clear(w);
                        r = log_error_errno(r, "Machine %s: cannot make an interval: %m", m->id);
                        goto out;
                }
                if (r > 0) { /* every CPU down: nothing to send, its number unused */
                        ms.seq++;
                        count_unsent_downs(&ms, t);
                        t += (int64_t) opt.interval_ns;
                        continue;
                }
                /* Full, or so many events (a --latency over --threshold on many CPUs) that
                 * the next interval could take them over the schema's limit. */
                if ((w->nivs >= opt.batch || w->nevents >= SUMMARY_MAX_EVENTS / 2) &&
                    (r = flush(w, &ms)) < 0)
                        goto out;
                t += (int64_t) opt.interval_ns;
        }
        /* An end after the last whole interval still ends the run. */
        r = end_run(w, &ms, next_end < opt.nends ? &opt.ends[next_end] : NULL);
        if (r >= 0)
                w->stats.machines++;
out:
        for (struct curl_slist *h = ms.headers; h; h = h->next)
                explicit_bzero(h->data, strlen(h->data));
        curl_slist_free_all(ms.headers);
        return r;
}

static void *worker_main(void *arg) {
        struct worker *w = arg;
        for (;;) {
                size_t i = atomic_fetch_add(&next_machine, 1);
                if (i >= nmachines || atomic_load(&failed))
                        break;
                if (replay_machine(w, &machines[i]) < 0) {
                        atomic_store(&failed, true);
                        break;
                }
        }
        return NULL;
}

static int worker_init(struct worker *w) {
        int r = hist_init(&w->hist, REPLAY_HIST_LIMIT_US);
        if (r < 0)
                return r;
        w->ivs = calloc(opt.batch, sizeof(*w->ivs));
        w->cpus = calloc((size_t) opt.batch * opt.cpus, sizeof(*w->cpus));
        w->loads = calloc((size_t) opt.batch * 4, sizeof(*w->loads));
        w->mets = calloc((size_t) opt.batch * 16, sizeof(*w->mets));
        w->curl = curl_easy_init();
        if (!w->ivs || !w->cpus || !w->loads || !w->mets || !w->curl)
                return -ENOMEM;
        char url[4200];
        size_t l = strlen(opt.server);
        snprintf(url, sizeof(url), "%.*s/api/v1/summaries",
                 (int) (opt.server[l - 1] == '/' ? l - 1 : l), opt.server);
        curl_easy_setopt(w->curl, CURLOPT_URL, url);
        curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(w->curl, CURLOPT_TIMEOUT_MS, 120000L);
        curl_easy_setopt(w->curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(w->curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (opt.ca_file)
                curl_easy_setopt(w->curl, CURLOPT_CAINFO, opt.ca_file);
        curl_easy_setopt(w->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, http_reply_on_body);
        curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, &w->reply);
        curl_easy_setopt(w->curl, CURLOPT_HEADERFUNCTION, http_reply_on_header);
        curl_easy_setopt(w->curl, CURLOPT_HEADERDATA, &w->reply);
        curl_easy_setopt(w->curl, CURLOPT_USERAGENT, "rtsoak-replay/" PROJECT_VERSION);
        return 0;
}

static void worker_done(struct worker *w) {
        batch_clear(w);
        curl_easy_cleanup(w->curl);
        hist_done(&w->hist);
        free(w->ivs);
        free(w->cpus);
        free(w->loads);
        free(w->mets);
        free(w->events);
}

int main(int argc, char **argv) {
        log_set_program("rtsoak-replay");
        int r = parse_options(argc, argv);
        if (r > 0)
                return EXIT_SUCCESS;
        if (r < 0)
                return EXIT_USAGE;
        r = load_machines();
        if (r == -EINVAL)
                return EXIT_USAGE;
        if (r < 0)
                return EXIT_FAILURE;
        if (opt.ca_file && access(opt.ca_file, R_OK) < 0)
                return usage_error("--ca", "cannot read '%s': %s", opt.ca_file, strerror(errno)),
                       EXIT_USAGE;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        unsigned nworkers = (unsigned) MIN((size_t) opt.jobs, nmachines);
        struct worker *workers = calloc(nworkers, sizeof(*workers));
        if (!workers)
                return log_oom(), EXIT_FAILURE;
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        unsigned started = 0;
        for (unsigned i = 0; i < nworkers; i++) {
                r = worker_init(&workers[i]);
                if (r < 0) {
                        log_error_errno(r, "Cannot set up a worker: %m");
                        atomic_store(&failed, true);
                        break;
                }
                r = -pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
                if (r < 0) {
                        log_error_errno(r, "Cannot start a worker thread: %m");
                        atomic_store(&failed, true);
                        break;
                }
                started++;
        }
        struct stats total = {};
        for (unsigned i = 0; i < nworkers; i++) {
                if (i < started)
                        pthread_join(workers[i].thread, NULL);
                total.machines += workers[i].stats.machines;
                total.runs += workers[i].stats.runs;
                total.intervals += workers[i].stats.intervals;
                total.events += workers[i].stats.events;
                total.uploads += workers[i].stats.uploads;
                total.retries += workers[i].stats.retries;
                worker_done(&workers[i]);
        }
        free(workers);
        /* Milliseconds are precise enough, and print as such in JSON. */
        double secs = (double) ((now_ns(CLOCK_MONOTONIC) - t0) / (int64_t) NSEC_PER_MSEC) / 1e3;
        double rate = secs > 0 ? (double) (uint64_t) ((double) total.intervals / secs) : 0;

        if (!opt.quiet && atomic_load(&unsent_spikes))
                log_warning("%u --spike time(s) fell in no interval that was sent (a gap, or "
                            "between runs)",
                            atomic_load(&unsent_spikes));
        if (!opt.quiet && atomic_load(&unsent_downs))
                log_warning("%u --load-down time(s) fell in no interval that was sent (a gap, "
                            "or between runs): no load_exit event for them",
                            atomic_load(&unsent_downs));
        if (opt.json) {
                json_auto_t *j =
                        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b}", "machines",
                                  (json_int_t) total.machines, "runs", (json_int_t) total.runs,
                                  "intervals", (json_int_t) total.intervals, "events",
                                  (json_int_t) total.events, "uploads", (json_int_t) total.uploads,
                                  "retries", (json_int_t) total.retries, "seconds", secs,
                                  "intervals_per_second", rate, "ok", !atomic_load(&failed));
                if (j)
                        json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(12)),
                                putchar('\n');
        } else if (!opt.quiet)
                printf("machines %" PRIu64 ", runs %" PRIu64 ", intervals %" PRIu64
                       ", events %" PRIu64 ", uploads %" PRIu64 ", seconds %.3f, "
                       "intervals/s %.0f\n",
                       total.machines, total.runs, total.intervals, total.events, total.uploads,
                       secs, rate);
        for (size_t i = 0; i < nmachines; i++) {
                explicit_bzero(machines[i].token, strlen(machines[i].token));
                free(machines[i].token);
        }
        free(machines);
        free(opt.spikes);
        free(opt.gaps);
        free(opt.ends);
        free(opt.downs);
        free(opt.pdowns);
        free(opt.zeros);
        free(opt.probed);
        free(opt.steps);
        curl_global_cleanup();
        return atomic_load(&failed) ? EXIT_FAILURE : EXIT_SUCCESS;
}
