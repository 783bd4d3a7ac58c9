/* SPDX-License-Identifier: MIT */
/* rtsoak-load: runs one load generator from the command line and prints its throughput;
 * rtsoakd also starts it (supervised mode) for every generator of a scenario. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "cpuset.h"
#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"
#include "user-lookup.h"

struct runner {
        struct loadgen_ctx ctx;
        atomic_bool finished;
        int result;
};

static void usage(FILE *f) {
        fprintf(f, "Usage: rtsoak-load [OPTIONS] GENERATOR [GENERATOR OPTIONS] [-- ARGS]\n"
                   "       rtsoak-load --list\n"
                   "       rtsoak-load GENERATOR --help\n"
                   "Runs a load generator until stopped (or for --duration) and prints its\n"
                   "throughput.\n\n"
                   "  -d, --duration TIME      stop after TIME (e.g. 10s); default: until SIGINT\n"
                   "  -r, --report-every TIME  also print the throughput every TIME\n"
                   "  -j, --json               print the result as JSON\n"
                   "  -l, --list               list the generators\n"
                   "  -h, --help               show this help\n"
                   "      --version            show the version\n\n"
                   "Generators:\n");
        for (size_t i = 0; i < loadgen_registry_size; i++)
                fprintf(f, "  %-10s %s\n", loadgen_registry[i]->name, loadgen_registry[i]->summary);
        fprintf(f, "\nExit status: 0 done, 1 failed, 64 usage error (also a generator's option\n"
                   "out of its bounds), 69 the generator cannot run here.\n");
}

static void *gen_thread(void *arg) {
        struct runner *rn = arg;
        rn->result = rn->ctx.info->run(&rn->ctx);
        atomic_store(&rn->finished, true);
        return NULL;
}

static unsigned online_cpus(void) {
        struct cpuset s;
        if (cpuset_online(&s, NULL) < 0)
                return 1;
        unsigned n = (unsigned) s.n;
        cpuset_done(&s);
        return n ? n : 1;
}

static void print_rates(const struct loadgen_info *info, const uint64_t *from, const uint64_t *to,
                        double seconds, FILE *f) {
        char rate[64];
        for (size_t i = 0; i < info->nmetrics; i++) {
                const struct loadgen_metric *m = &info->metrics[i];
                double v = seconds > 0 ? (double) (to[i] - from[i]) / seconds * m->scale : 0;
                fprintf(f, "  %-10s %14s   %" PRIu64 " %s\n", m->name,
                        loadgen_format_rate(rate, sizeof(rate), v, m->unit), to[i] - from[i],
                        m->count_unit);
        }
}

static void snapshot(struct loadgen_shm *shm, size_t n, uint64_t *out) {
        for (size_t i = 0; i < n; i++)
                out[i] = atomic_load(&shm->counters[i]);
}

/* Supervised mode: drop privileges if asked, then die with the parent. */
static int become_child(const char *user, pid_t parent, int nice_level) {
        if (user) {
                uid_t uid;
                gid_t gid;
                int r = user_lookup(user, &uid, &gid);
                if (r == -ENOENT) {
                        log_error("--user %s: no such user", user);
                        return -ENOENT;
                }
                if (r < 0)
                        return log_error_errno(r, "--user %s: cannot look the user up: %m", user);
                if (initgroups(user, gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                        return log_error_errno(negative_errno(), "Cannot become user %s: %m", user);
        }
        /* After the credential change, which clears it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                return log_error_errno(negative_errno(), "PR_SET_PDEATHSIG: %m");
        if (parent > 0 && getppid() != parent)
                return -ESRCH; /* the supervisor died before we got here */
        if (setpriority(PRIO_PROCESS, 0, nice_level) < 0)
                log_warning_errno(negative_errno(), "Cannot set nice level %d: %m", nice_level);
        /* If memory runs out, a load generator should go before rtsoakd does. */
        FILE *f = fopen("/proc/self/oom_score_adj", "we");
        if (f) {
                fputs("500", f);
                fclose(f);
        }
        return 0;
}

/* What the command line asked for. */
struct cli {
        uint64_t duration, every;
        bool json, supervised;
        int stats_fd, events_fd, nice_level;
        pid_t parent;
        const char *user;
};

/* A number of --stats-fd, --events-fd, --parent or --nice; false (said) when it is none. */
static bool parse_number(const char *name, const char *text, long *ret) {
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno || *end || *text == 0 || v < -20 || v > INT32_MAX) {
                log_error("%s: not a valid number: %s", name, text);
                return false;
        }
        *ret = v;
        return true;
}

/* The options before the generator's name; -1 to go on, else the exit status. */
static int parse_options(int argc, char *argv[], struct cli *o) {
        enum {
                ARG_VERSION = 0x100,
                ARG_SUPERVISED,
                ARG_STATS_FD,
                ARG_EVENTS_FD,
                ARG_PARENT,
                ARG_USER,
                ARG_NICE
        };
        static const struct option options[] = {
                { "duration", required_argument, NULL, 'd' },
                { "report-every", required_argument, NULL, 'r' },
                { "json", no_argument, NULL, 'j' },
                { "list", no_argument, NULL, 'l' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                /* Used by rtsoakd. */
                { "supervised", no_argument, NULL, ARG_SUPERVISED },
                { "stats-fd", required_argument, NULL, ARG_STATS_FD },
                { "events-fd", required_argument, NULL, ARG_EVENTS_FD },
                { "parent", required_argument, NULL, ARG_PARENT },
                { "user", required_argument, NULL, ARG_USER },
                { "nice", required_argument, NULL, ARG_NICE },
                {},
        };
        const char *reason;
        long v;
        int c;
        while ((c = getopt_long(argc, argv, "+:d:r:jlh", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                case 'r': {
                        uint64_t *t = c == 'd' ? &o->duration : &o->every;
                        if (parse_timespan(optarg, t, &reason) < 0 || *t == 0) {
                                log_error("--%s %s: %s", c == 'd' ? "duration" : "report-every",
                                          optarg,
                                          *t == 0 && !reason ? "must be longer than 0" : reason);
                                return EXIT_USAGE;
                        }
                        break;
                }
                case 'j':
                        o->json = true;
                        break;
                case 'l':
                        for (size_t i = 0; i < loadgen_registry_size; i++)
                                printf("%-10s %s\n", loadgen_registry[i]->name,
                                       loadgen_registry[i]->summary);
                        return EXIT_SUCCESS;
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("rtsoak-load %s\n", PROJECT_VERSION);
                        return EXIT_SUCCESS;
                case ARG_SUPERVISED:
                        o->supervised = true;
                        break;
                case ARG_STATS_FD:
                case ARG_EVENTS_FD:
                case ARG_PARENT:
                case ARG_NICE:
                        if (!parse_number(c == ARG_STATS_FD    ? "--stats-fd"
                                          : c == ARG_EVENTS_FD ? "--events-fd"
                                          : c == ARG_PARENT    ? "--parent"
                                                               : "--nice",
                                          optarg, &v))
                                return EXIT_USAGE;
                        if (c == ARG_STATS_FD)
                                o->stats_fd = (int) v;
                        else if (c == ARG_EVENTS_FD)
                                o->events_fd = (int) v;
                        else if (c == ARG_PARENT)
                                o->parent = (pid_t) v;
                        else
                                o->nice_level = (int) v;
                        break;
                case ARG_USER:
                        o->user = optarg;
                        break;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                log_error("No load generator given (see --list)");
                return EXIT_USAGE;
        }
        return -1;
}

/* "GENERATOR ... --help" (before any "--"): its help; -1 when not asked for. */
static int generator_help(int argc, char *argv[]) {
        for (int i = optind + 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        const struct loadgen_info *info = loadgen_find(argv[optind]);
                        if (!info) {
                                log_error("Unknown load generator '%s' (see --list)", argv[optind]);
                                return EXIT_USAGE;
                        }
                        loadgen_print_help(info, stdout);
                        return EXIT_SUCCESS;
                }
        return -1;
}

/* The statistics area: rtsoakd's (--stats-fd) or one of our own; NULL (said) when it cannot be
 * mapped or is not one. */
static struct loadgen_shm *map_stats(int stats_fd) {
        struct loadgen_shm *shm;
        if (stats_fd >= 0)
                shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
        else
                shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
        if (shm == MAP_FAILED) {
                log_error_errno(negative_errno(), "Cannot map the statistics area: %m");
                return NULL;
        }
        if (stats_fd < 0)
                shm->magic = LOADGEN_SHM_MAGIC;
        else if (shm->magic != LOADGEN_SHM_MAGIC) {
                log_error("--stats-fd %d is not a statistics area", stats_fd);
                munmap(shm, sizeof(*shm));
                return NULL;
        } else
                close(stats_fd); /* mapped; a command run by a generator must not get it */
        return shm;
}

/* Waits for a signal, the generator's end or the duration, printing the rates every
 * o->every; returns why it stopped.  first: the counters at start. */
static const char *wait_for_end(const struct cli *o, struct runner *rn, const sigset_t *mask,
                                int64_t start, const uint64_t *first) {
        const struct loadgen_info *info = rn->ctx.info;
        struct loadgen_shm *shm = rn->ctx.shm;
        uint64_t last[LOADGEN_MAX_METRICS], cur[LOADGEN_MAX_METRICS];
        int64_t last_report = start;
        memcpy(last, first, sizeof(last));
        for (;;) {
                struct timespec ts = { 0, 50 * 1000 * 1000 };
                siginfo_t si;
                int sig = sigtimedwait(mask, &si, &ts);
                int64_t now = now_ns(CLOCK_MONOTONIC);
                atomic_fetch_add(&shm->heartbeat, 1);
                if (sig > 0)
                        return sig == SIGINT ? "interrupted" : "terminated";
                if (atomic_load(&rn->finished))
                        return rn->result < 0 ? "failed" : "finished";
                if (o->duration && now - start >= (int64_t) o->duration)
                        return "duration reached";
                if (o->every && !o->json && now - last_report >= (int64_t) o->every) {
                        snapshot(shm, info->nmetrics, cur);
                        printf("%s: %.1f s\n", info->name, (double) (now - start) / 1e9);
                        print_rates(info, last, cur, (double) (now - last_report) / 1e9, stdout);
                        fflush(stdout);
                        memcpy(last, cur, sizeof(cur));
                        last_report = now;
                }
        }
}

/* Tells the generator to stop and gives its workers a moment to finish what they do; a
 * generator stuck in a system call does not keep us: exit takes every thread with it.
 * Returns whether it ended. */
static bool stop_generator(struct runner *rn, pthread_t t) {
        atomic_store(&rn->ctx.stop, true);
        struct timespec deadline = timespec_from_now(CLOCK_REALTIME,
                                                     (int64_t) (400 * NSEC_PER_MSEC));
        return pthread_timedjoin_np(t, NULL, &deadline) == 0;
}

static void print_result(const struct loadgen_spec *spec, bool json, const char *why, double secs,
                         const uint64_t *first, const uint64_t *cur) {
        const struct loadgen_info *info = spec->info;
        if (!json) {
                printf("%s: %s after %.2f s (%s)\n", info->name, why, secs, spec->text);
                print_rates(info, first, cur, secs, stdout);
                return;
        }
        json_t *o = json_pack("{s:s, s:s, s:f, s:s, s:[]}", "generator", info->name, "options",
                              spec->text, "seconds", secs, "end", why, "metrics");
        json_t *arr = json_object_get(o, "metrics");
        for (size_t i = 0; i < info->nmetrics; i++) {
                const struct loadgen_metric *m = &info->metrics[i];
                double rate = secs > 0 ? (double) (cur[i] - first[i]) / secs * m->scale : 0.0;
                json_array_append_new(arr, json_pack("{s:s, s:s, s:f, s:I, s:s}", "name", m->name,
                                                     "unit", m->unit, "rate", rate, "count",
                                                     (json_int_t) (cur[i] - first[i]), "count_unit",
                                                     m->count_unit));
        }
        json_dumpf(o, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(o);
}

/* Runs the generator of spec until it ends or is stopped; the exit status. */
static int run(const struct cli *o, const struct loadgen_spec *spec, struct loadgen_shm *shm) {
        static struct runner rn;
        char err[LOADGEN_ERROR_MAX];
        rn.ctx = (struct loadgen_ctx){
                .info = spec->info,
                .opts = spec->opts,
                .args = spec->args,
                .shm = shm,
                .event_fd = o->events_fd,
                .ncpus = online_cpus(),
        };
        if (spec->info->probe(spec->opts, spec->args, err) < 0) {
                if (o->supervised)
                        loadgen_event(&rn.ctx, "unsupported", -1, "%s", err);
                log_error("%s: cannot run here: %s", spec->info->name, err);
                return EXIT_UNAVAILABLE;
        }

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by every worker thread */
        signal(SIGPIPE, SIG_IGN);

        uint64_t first[LOADGEN_MAX_METRICS], cur[LOADGEN_MAX_METRICS];
        snapshot(shm, spec->info->nmetrics, first);
        int64_t start = now_ns(CLOCK_MONOTONIC);
        pthread_t t;
        int r = -pthread_create(&t, NULL, gen_thread, &rn);
        if (r < 0) {
                log_error_errno(r, "Cannot start the generator: %m");
                return EXIT_FAILURE;
        }
        const char *why = wait_for_end(o, &rn, &mask, start, first);
        bool joined = stop_generator(&rn, t);
        /* Work finished after the stop request counts, and so does its time. */
        int64_t end = now_ns(CLOCK_MONOTONIC);
        snapshot(shm, spec->info->nmetrics, cur);
        int status = rn.result < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        if (o->supervised)
                _exit(status);
        print_result(spec, o->json, why, (double) (end - start) / 1e9, first, cur);
        fflush(stdout);
        if (!joined)
                _exit(status);
        return status;
}

int main(int argc, char *argv[]) {
        struct cli o = { .stats_fd = -1, .events_fd = -1 };
        char err[LOADGEN_ERROR_MAX];

        log_set_program("rtsoak-load");
        int status = parse_options(argc, argv, &o);
        if (status < 0)
                status = generator_help(argc, argv);
        if (status >= 0)
                return status;

        struct loadgen_spec spec = {};
        if (loadgen_parse_argv(argc - optind, argv + optind, &spec, err) < 0) {
                log_error("%s", err);
                return EXIT_USAGE;
        }
        struct loadgen_shm *shm = NULL;
        if (o.supervised && become_child(o.user, o.parent, o.nice_level) < 0)
                status = EXIT_FAILURE;
        else if (!o.supervised && o.user) {
                log_error("--user is only for supervised mode; run rtsoak-load as that user");
                status = EXIT_USAGE;
        } else if (!(shm = map_stats(o.stats_fd)))
                status = EXIT_FAILURE;
        if (shm) {
                if (o.events_fd >= 0)
                        (void) fcntl(o.events_fd, F_SETFD, FD_CLOEXEC);
                shm->nmetrics = (uint32_t) spec.info->nmetrics;
                status = run(&o, &spec, shm);
                munmap(shm, sizeof(*shm));
        }
        loadgen_spec_done(&spec);
        return status;
}
