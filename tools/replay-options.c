/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's options: the history, its events and hostile faults, the machine's
 * description and how to post, each checked with a message naming the option. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>

#include "cpuset.h"
#include "log.h"
#include "replay.h"

struct options replay_opt = {
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

int replay_usage_error(const char *option, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "rtsoak-replay: %s: %s (see --help)\n", option, msg);
        return -EINVAL;
}

/* ---- option parsing ------------------------------------------------------------------------- */

static int parse_u64(const char *option, const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || !isdigit((unsigned char) s[0]) || v < min ||
            v > max)
                return replay_usage_error(
                        option, "'%s' is not an integer from %" PRIu64 " to %" PRIu64, s, min, max);
        *ret = v;
        return 0;
}

static int parse_span(const char *option, const char *s, uint64_t min, uint64_t max,
                      uint64_t *ret) {
        const char *reason = NULL;
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        if (parse_timespan(s, ret, &reason) < 0)
                return replay_usage_error(option, "'%s' is not a time span: %s", s,
                                          reason ?: "invalid");
        if (*ret < min || *ret > max)
                return replay_usage_error(option, "'%s' is out of range (%s to %s)", s,
                                          format_timespan(a, min), format_timespan(b, max));
        return 0;
}

int replay_parse_time(const char *option, const char *s, int64_t now, int64_t *ret) {
        const char *reason = NULL;
        if (parse_timestamp(s, now, ret, &reason) < 0)
                return replay_usage_error(option, "'%s' is not a time: %s", s, reason ?: "invalid");
        return 0;
}

/* Splits "A,B[,C]" into exactly n fields (copied into buf). */
static int split_fields(const char *option, const char *s, char *buf, size_t size, char **fields,
                        size_t n, const char *form) {
        if (strlen(s) >= size)
                return replay_usage_error(option, "'%s' is too long", s);
        strcpy(buf, s);
        size_t k = 0;
        char *p = buf;
        for (;;) {
                if (k == n)
                        return replay_usage_error(option, "'%s': expected %s", s, form);
                fields[k++] = p;
                char *c = strchr(p, ',');
                if (!c)
                        break;
                *c = 0;
                p = c + 1;
        }
        if (k != n)
                return replay_usage_error(option, "'%s': expected %s", s, form);
        for (size_t i = 0; i < n; i++) {
                while (isspace((unsigned char) *fields[i]))
                        fields[i]++;
                size_t l = strlen(fields[i]);
                while (l > 0 && isspace((unsigned char) fields[i][l - 1]))
                        fields[i][--l] = 0;
                if (!*fields[i])
                        return replay_usage_error(option, "'%s': expected %s (field %zu is empty)",
                                                  s, form, i + 1);
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

#define APPEND(option, array, n)                                                             \
        ({                                                                                   \
                __typeof__(array) _a = grow(array, &(n), sizeof(*(array)));                  \
                if (!_a)                                                                     \
                        return replay_usage_error(option, "more than %d (or out of memory)", \
                                                  REPLAY_MAX_ITEMS);                         \
                (array) = _a;                                                                \
                &(array)[(n) -1];                                                            \
        })

static bool valid_generator(const char *s) {
        char why[NAME_WHY_MAX];
        return name_ok(&summary_name_generator, s, why);
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
               "The machine's inventory (none sent without these):\n"
               "  --inventory NAME=VALUE   a field of the inventory each run sends at its start\n"
               "  --inventory-change TIME,NAME=VALUE | TIME,-NAME\n"
               "                           the field changes (or goes) at TIME: the run then\n"
               "                           running sends a new version with an\n"
               "                           inventory_changed event, a later run starts with it\n"
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
               "--spike, --gap, --unclean, --restart, --load-down, --probe-down, --load-zero,\n"
               "--inventory and --inventory-change may be repeated.\n"
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
                return replay_usage_error(option, "given more than %d times (or out of memory)",
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
                return replay_usage_error("--probed-cpus",
                                          "'%s' is not a list of CPUs (\"0-3,6\")%s%s", text,
                                          reason ? ": " : "", reason ?: "");
        int r = 0;
        if (set.n == 0 || set.cpus[set.n - 1] >= SUMMARY_MAX_CPUS)
                r = replay_usage_error("--probed-cpus", "'%s': CPUs are 0 to %d", text,
                                       SUMMARY_MAX_CPUS - 1);
        else if (!(replay_opt.probed = calloc(set.n, sizeof(*replay_opt.probed))))
                r = log_oom();
        for (size_t i = 0; r >= 0 && i < set.n; i++)
                replay_opt.probed[replay_opt.nprobed++] = (uint32_t) set.cpus[i];
        cpuset_done(&set);
        return r;
}

/* FROM,TO of a window option, FROM before TO. */
static int parse_window(const char *option, const char *raw, const char *f_from, const char *f_to,
                        int64_t now, int64_t *ret_from, int64_t *ret_to) {
        int r;
        if ((r = replay_parse_time(option, f_from, now, ret_from)) < 0 ||
            (r = replay_parse_time(option, f_to, now, ret_to)) < 0)
                return r;
        if (*ret_from >= *ret_to)
                return replay_usage_error(option, "'%s': FROM is not before TO", raw);
        return 0;
}

static bool rotation_runs(const char *generator) {
        for (size_t i = 0; i < replay_opt.nsteps; i++)
                if (replay_scenario_load(replay_opt.steps[i].scenario, generator))
                        return true;
        return false;
}

/* The options that make a history a release manager must not sign. */
static int parse_hostile(const char *probed, const char *share, const char *ahead,
                         const struct raw_list *pdowns, const struct raw_list *zeros, int64_t now) {
        char buf[256], *f[3];
        uint64_t v;
        int r;

        char why[NAME_WHY_MAX];
        if (replay_opt.release && !name_ok(&summary_name_release, replay_opt.release, why))
                return replay_usage_error("--release", "'%s' is not a release name (%s)",
                                          replay_opt.release, why);
        if (probed && (r = parse_probed(probed)) < 0)
                return r;
        if (share) {
                char *end;
                errno = 0;
                double pct = strtod(share, &end);
                if (errno || end == share || (*end && strcmp(end, "%") != 0) || !(pct >= 0) ||
                    pct > 1000)
                        return replay_usage_error("--samples-share",
                                                  "'%s' is not a share in percent from 0 to 1000",
                                                  share);
                replay_opt.samples_share = pct / 100;
        }
        for (size_t i = 0; i < pdowns->n; i++) {
                struct probe_down *d = APPEND("--probe-down", replay_opt.pdowns,
                                              replay_opt.npdowns);
                if ((r = split_fields("--probe-down", pdowns->v[i], buf, sizeof(buf), f, 3,
                                      "CPU,FROM,TO")) < 0 ||
                    (r = parse_u64("--probe-down CPU", f[0], 0, replay_opt.cpus - 1, &v)) < 0 ||
                    (r = parse_window("--probe-down", pdowns->v[i], f[1], f[2], now, &d->from_ns,
                                      &d->to_ns)) < 0)
                        return r;
                d->cpu = (uint32_t) v;
        }
        for (size_t i = 0; i < zeros->n; i++) {
                struct load_zero *z = APPEND("--load-zero", replay_opt.zeros, replay_opt.nzeros);
                if ((r = split_fields("--load-zero", zeros->v[i], buf, sizeof(buf), f, 3,
                                      "GENERATOR,FROM,TO")) < 0 ||
                    (r = parse_window("--load-zero", zeros->v[i], f[1], f[2], now, &z->from_ns,
                                      &z->to_ns)) < 0)
                        return r;
                if (!valid_generator(f[0]) || !rotation_runs(f[0]))
                        return replay_usage_error(
                                "--load-zero",
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
                                    &replay_opt.clock_ahead_ns)) < 0 ||
                    (comma && (r = replay_parse_time("--clock-ahead", comma + 1, now,
                                                     &replay_opt.clock_from_ns)) < 0))
                        return r;
                if (replay_opt.to_ns + (int64_t) replay_opt.clock_ahead_ns >
                    INT64_C(7258118400) * 1000000000)
                        return replay_usage_error("--clock-ahead",
                                                  "the stamps would pass 2200-01-01");
        }
        return 0;
}

/* A time an option gives (raw, as given) must fall inside the history [from, to). */
static int check_inside(const char *option, const char *raw, int64_t t) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        if (t < replay_opt.from_ns || t >= replay_opt.to_ns)
                return replay_usage_error(option, "'%s' is outside the history [%s, %s)", raw,
                                          fmt_time(t1, replay_opt.from_ns),
                                          fmt_time(t2, replay_opt.to_ns));
        return 0;
}

/* --spike TIME,CPU,SPAN[,THREAD], in time order. */
static int parse_spikes(const struct raw_list *spikes, int64_t now) {
        char buf[256], *f[4];
        uint64_t v;
        int r;
        for (size_t i = 0; i < spikes->n; i++) {
                struct spike *s = APPEND("--spike", replay_opt.spikes, replay_opt.nspikes);
                /* A fourth field names the thread a synthetic trace capture blames. */
                size_t commas = 0;
                for (const char *ch = spikes->v[i]; *ch; ch++)
                        commas += *ch == ',';
                size_t nf = commas == 3 ? 4 : 3;
                if ((r = split_fields("--spike", spikes->v[i], buf, sizeof(buf), f, nf,
                                      nf == 4 ? "TIME,CPU,SPAN,THREAD" : "TIME,CPU,SPAN")) < 0 ||
                    (r = replay_parse_time("--spike", f[0], now, &s->time_ns)) < 0 ||
                    (r = parse_u64("--spike CPU", f[1], 0, replay_opt.cpus - 1, &v)) < 0 ||
                    (r = parse_span("--spike", f[2], NSEC_PER_USEC, (uint64_t) DAY_NS,
                                    &s->latency_ns)) < 0)
                        return r;
                s->cpu = (uint32_t) v;
                if (nf == 4 && strlen(f[3]) >= sizeof(s->culprit))
                        return replay_usage_error("--spike",
                                                  "'%s': a thread name has at most %zu bytes",
                                                  spikes->v[i], sizeof(s->culprit) - 1);
                snprintf(s->culprit, sizeof(s->culprit), "%s", nf == 4 ? f[3] : "");
                if ((r = check_inside("--spike", spikes->v[i], s->time_ns)) < 0)
                        return r;
        }
        if (replay_opt.nspikes)
                qsort(replay_opt.spikes, replay_opt.nspikes, sizeof(*replay_opt.spikes), cmp_spike);
        return 0;
}

/* --gap FROM,TO */
static int parse_gaps(const struct raw_list *gaps, int64_t now) {
        char buf[256], *f[2];
        int r;
        for (size_t i = 0; i < gaps->n; i++) {
                struct span *g = APPEND("--gap", replay_opt.gaps, replay_opt.ngaps);
                if ((r = split_fields("--gap", gaps->v[i], buf, sizeof(buf), f, 2, "FROM,TO")) <
                            0 ||
                    (r = replay_parse_time("--gap", f[0], now, &g->from_ns)) < 0 ||
                    (r = replay_parse_time("--gap", f[1], now, &g->to_ns)) < 0)
                        return r;
                if (g->from_ns >= g->to_ns)
                        return replay_usage_error("--gap", "'%s': FROM is not before TO",
                                                  gaps->v[i]);
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
                        struct run_end *e = APPEND(o, replay_opt.ends, replay_opt.nends);
                        e->unclean = k == 0;
                        if ((r = replay_parse_time(o, endlists[k]->v[i], now, &e->time_ns)) < 0 ||
                            (r = check_inside(o, endlists[k]->v[i], e->time_ns)) < 0)
                                return r;
                }
        if (replay_opt.nends)
                qsort(replay_opt.ends, replay_opt.nends, sizeof(*replay_opt.ends), cmp_end);
        for (size_t i = 1; i < replay_opt.nends; i++) {
                int64_t next =
                        align_up(replay_opt.ends[i - 1].time_ns + (int64_t) replay_opt.reboot_ns,
                                 replay_opt.interval_ns);
                if (replay_opt.ends[i].time_ns < next)
                        return replay_usage_error(
                                replay_opt.ends[i].unclean ? "--unclean" : "--restart",
                                "%s is before the run that the end at %s starts (at "
                                "%s, after --reboot-time)",
                                fmt_time(t1, replay_opt.ends[i].time_ns),
                                fmt_time(t2, replay_opt.ends[i - 1].time_ns), fmt_time(t3, next));
        }
        return 0;
}

/* --load-down TIME,SPAN,GENERATOR: a generator the scenario at that time runs. */
static int parse_downs(const struct raw_list *downs, int64_t now) {
        char buf[256], *f[3];
        int r;
        for (size_t i = 0; i < downs->n; i++) {
                struct load_down *d = APPEND("--load-down", replay_opt.downs, replay_opt.ndowns);
                if ((r = split_fields("--load-down", downs->v[i], buf, sizeof(buf), f, 3,
                                      "TIME,SPAN,GENERATOR")) < 0 ||
                    (r = replay_parse_time("--load-down", f[0], now, &d->time_ns)) < 0 ||
                    (r = parse_span("--load-down", f[1], 1, (uint64_t) DAY_NS * 3650,
                                    &d->span_ns)) < 0)
                        return r;
                if (!valid_generator(f[2]))
                        return replay_usage_error("--load-down",
                                                  "'%s': '%s' is not a generator name", downs->v[i],
                                                  f[2]);
                snprintf(d->generator, sizeof(d->generator), "%s", f[2]);
                if ((r = check_inside("--load-down", downs->v[i], d->time_ns)) < 0)
                        return r;
                const struct schedule_step *st = replay_step_at(d->time_ns, NULL);
                if (!replay_scenario_load(st->scenario, d->generator))
                        return replay_usage_error("--load-down",
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
        ARG_INVENTORY,
        ARG_INVENTORY_CHANGE,
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
        { "inventory", required_argument, NULL, ARG_INVENTORY },
        { "inventory-change", required_argument, NULL, ARG_INVENTORY_CHANGE },
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
        struct raw_list spikes, gaps, uncleans, restarts, downs, pdowns, zeros, inv, inv_changes;
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
        free(raw->inv.v);
        free(raw->inv_changes.v);
}

/* The options that are only kept: their argument as given. */
static const struct {
        int id;
        const char **dst;
} kept_options[] = {
        { ARG_SERVER, &replay_opt.server },
        { ARG_TOKEN, &replay_opt.token },
        { ARG_TOKEN_FILE, &replay_opt.token_file },
        { ARG_MACHINE, &replay_opt.machine },
        { ARG_TOKENS, &replay_opt.tokens_file },
        { ARG_KERNEL, &replay_opt.kernel },
        { ARG_KERNEL_VERSION, &replay_opt.kernel_version },
        { ARG_PREEMPT_MODEL, &replay_opt.preempt_model },
        { ARG_HOSTNAME, &replay_opt.hostname },
        { ARG_ROTATION, &replay_opt.rotation },
        { ARG_RELEASE, &replay_opt.release },
        { ARG_CA, &replay_opt.ca_file },
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
        { ARG_INVENTORY, offsetof(struct raw_options, inv), "--inventory" },
        { ARG_INVENTORY_CHANGE, offsetof(struct raw_options, inv_changes), "--inventory-change" },
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
                replay_opt.jobs = (unsigned) v;
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
                               &replay_opt.interval_ns);
                break;
        case ARG_CPUS:
                r = parse_u64("--cpus", arg, 1, SUMMARY_MAX_CPUS, &v);
                replay_opt.cpus = (unsigned) v;
                break;
        case ARG_RUN_ID:
                r = parse_u64("--run-id", arg, 1, INT64_MAX / 2, &v);
                replay_opt.run_id = (int64_t) v;
                break;
        case ARG_LATENCY:
                r = parse_span("--latency", arg, NSEC_PER_USEC, (uint64_t) DAY_NS,
                               &replay_opt.latency_ns);
                break;
        case ARG_THRESHOLD:
                r = parse_span("--threshold", arg, 0, (uint64_t) DAY_NS, &replay_opt.threshold_ns);
                break;
        case ARG_PROBE_INTERVAL:
                r = parse_span("--probe-interval", arg, NSEC_PER_USEC, (uint64_t) DAY_NS,
                               &replay_opt.probe_interval_ns);
                break;
        case ARG_REBOOT_TIME:
                r = parse_span("--reboot-time", arg, 0, (uint64_t) DAY_NS, &replay_opt.reboot_ns);
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
                replay_opt.batch = (unsigned) v;
                break;
        case ARG_SEED:
                r = parse_u64("--seed", arg, 0, UINT64_MAX, &replay_opt.seed);
                break;
        case ARG_QUIET:
                replay_opt.quiet = true;
                break;
        case ARG_JSON:
                replay_opt.json = true;
                break;
        case ':':
                r = replay_usage_error(argv[optind - 1], "requires an argument");
                break;
        default:
                r = replay_usage_error(optopt ? (char[]){ '-', (char) optopt, 0 }
                                              : argv[optind - 1],
                                       "unknown option");
                break;
        }
        return r;
}

/* Who posts where, and what the machine says about itself. */
static int check_identity(void) {
        int r;
        if (!replay_opt.server)
                return replay_usage_error("--server",
                                          "required (e.g. --server http://127.0.0.1:8470)");
        if (strncmp(replay_opt.server, "http://", 7) != 0 &&
            strncmp(replay_opt.server, "https://", 8) != 0)
                return replay_usage_error("--server", "'%s' is not an http:// or https:// URL",
                                          replay_opt.server);
        if (strlen(replay_opt.server) > 4000)
                return replay_usage_error("--server", "the URL is too long");
        if (replay_opt.tokens_file) {
                const char *bad = replay_opt.machine      ? "--machine"
                                  : replay_opt.token      ? "--token"
                                  : replay_opt.token_file ? "--token-file"
                                                          : NULL;
                if (bad)
                        return replay_usage_error(
                                bad, "cannot be combined with --tokens (its file names "
                                     "the machines and their tokens)");
        } else {
                if (!replay_opt.machine)
                        return replay_usage_error("--machine", "required (or --tokens FILE)");
                if (!valid_id(replay_opt.machine))
                        return replay_usage_error(
                                "--machine", "'%s' is not a machine id (32 lowercase hex digits)",
                                replay_opt.machine);
                if (!replay_opt.token == !replay_opt.token_file)
                        return replay_usage_error(
                                replay_opt.token ? "--token" : "--token-file",
                                replay_opt.token ? "give either --token or --token-file, not "
                                                   "both"
                                                 : "required (or --token TOKEN)");
        }
        char why[TEXT_WHY_MAX > NAME_WHY_MAX ? TEXT_WHY_MAX : NAME_WHY_MAX];
        if (replay_opt.hostname && (!*replay_opt.hostname || strlen(replay_opt.hostname) > 255))
                return replay_usage_error("--hostname", "must be 1 to 255 bytes");
        if (replay_opt.hostname && !text_ok(replay_opt.hostname, false, why))
                return replay_usage_error("--hostname", "%s", why);
        if (!*replay_opt.kernel || strlen(replay_opt.kernel) > SUMMARY_MAX_RELEASE)
                return replay_usage_error("--kernel", "must be 1 to %d bytes", SUMMARY_MAX_RELEASE);
        if (!text_ok(replay_opt.kernel, false, why))
                return replay_usage_error("--kernel", "%s", why);
        /* Without --release, the farm judges the runs under the kernel's release. */
        if (!replay_opt.release && !name_ok(&summary_name_release, replay_opt.kernel, why))
                return replay_usage_error("--kernel",
                                          "'%s' is not a release name (%s): give --release",
                                          replay_opt.kernel, why);
        if (strlen(replay_opt.kernel_version) > 512)
                return replay_usage_error("--kernel-version", "longer than 512 bytes");
        if (strlen(replay_opt.preempt_model) > 64)
                return replay_usage_error("--preempt-model", "longer than 64 bytes");
        if (replay_opt.probe_interval_ns > replay_opt.interval_ns)
                return replay_usage_error("--probe-interval", "longer than the interval");
        if (replay_opt.interval_ns / replay_opt.probe_interval_ns > UINT64_C(1) << 40)
                return replay_usage_error("--probe-interval", "too many samples per interval");
        r = replay_parse_rotation(replay_opt.rotation == (const char *) DEFAULT_ROTATION ||
                                  strcmp(replay_opt.rotation, DEFAULT_ROTATION) == 0);
        return r < 0 ? r : 0;
}

/* The history [from, to) of --from, --to and --days. */
static int parse_span_of_history(const struct raw_options *raw, int64_t now) {
        int r;
        if (raw->days && raw->from)
                return replay_usage_error("--days", "cannot be combined with --from");
        uint64_t ndays = 1;
        if (raw->days && (r = parse_u64("--days", raw->days, 1, 36500, &ndays)) < 0)
                return r;
        replay_opt.to_ns = now;
        if (raw->to && (r = replay_parse_time("--to", raw->to, now, &replay_opt.to_ns)) < 0)
                return r;
        replay_opt.from_ns = replay_opt.to_ns - (int64_t) ndays * DAY_NS;
        if (raw->from && (r = replay_parse_time("--from", raw->from, now, &replay_opt.from_ns)) < 0)
                return r;
        if (replay_opt.from_ns >= replay_opt.to_ns)
                return replay_usage_error(raw->from ? "--from" : "--days",
                                          "the history is empty: from is not before to");
        if (align_up(replay_opt.from_ns, replay_opt.interval_ns) +
                    (int64_t) replay_opt.interval_ns >
            replay_opt.to_ns)
                return replay_usage_error(raw->to ? "--to" : "--from",
                                          "the history [from, to) holds no whole interval");
        if (replay_opt.from_ns < INT64_C(1000000000) * 1000000000 ||
            replay_opt.to_ns > INT64_C(7258118400) * (int64_t) NSEC_PER_SEC)
                return replay_usage_error(
                        replay_opt.from_ns < INT64_C(1000000000) * 1000000000 ? "--from" : "--to",
                        "outside the times the schema allows (2001-09-09 to 2200-01-01)");
        return 0;
}

/* 0 to go on, 1 when done (--help), -EINVAL on a usage error (already printed). */
int replay_parse_options(int argc, char **argv) {
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
                r = replay_usage_error(argv[optind],
                                       "unexpected argument (all settings are options)");
                goto out;
        }
        if ((r = check_identity()) < 0 || (r = parse_span_of_history(&raw, now)) < 0 ||
            (r = parse_history(&raw.spikes, &raw.gaps, &raw.uncleans, &raw.restarts, &raw.downs,
                               now)) < 0 ||
            (r = parse_hostile(raw.probed, raw.share, raw.ahead, &raw.pdowns, &raw.zeros, now)) < 0)
                goto out;
        /* Parsed by replay_parse_inventory(), from main. */
        replay_opt.now_ns = now;
        replay_opt.inventory_args = TAKE_PTR(raw.inv.v);
        replay_opt.ninventory_args = raw.inv.n;
        replay_opt.inventory_change_args = TAKE_PTR(raw.inv_changes.v);
        replay_opt.ninventory_change_args = raw.inv_changes.n;

        /* What identifies the configuration, as rtsoakd's digest of its effective one. */
        char cfg[1024], s1[TIMESPAN_MAX_LEN], s2[TIMESPAN_MAX_LEN], s3[TIMESPAN_MAX_LEN];
        snprintf(cfg, sizeof(cfg),
                 "rtsoak-replay\ninterval=%s\nprobe_interval=%s\nthreshold=%s\ncpus=%u\n"
                 "rotation=%s\nrelease=%s\n",
                 format_timespan(s1, replay_opt.interval_ns),
                 format_timespan(s2, replay_opt.probe_interval_ns),
                 format_timespan(s3, replay_opt.threshold_ns), replay_opt.cpus, replay_opt.rotation,
                 replay_opt.release ?: "");
        sha256_hex(cfg, strlen(cfg), replay_opt.config_digest);
        r = 0;
out:
        raw_options_done(&raw);
        return r;
}
