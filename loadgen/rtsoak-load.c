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
#include <pwd.h>
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
                struct passwd *pw = getpwnam(user);
                if (!pw) {
                        log_error("--user %s: no such user", user);
                        return -ENOENT;
                }
                if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
                    setuid(pw->pw_uid) < 0)
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

int main(int argc, char *argv[]) {
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
        uint64_t duration = 0, every = 0;
        bool json = false, supervised = false;
        int stats_fd = -1, events_fd = -1, nice_level = 0, c, r;
        pid_t parent = 0;
        const char *user = NULL, *reason;
        char err[LOADGEN_ERROR_MAX];

        log_set_program("rtsoak-load");
        while ((c = getopt_long(argc, argv, "+:d:r:jlh", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                case 'r': {
                        uint64_t *v = c == 'd' ? &duration : &every;
                        if (parse_timespan(optarg, v, &reason) < 0 || *v == 0) {
                                log_error("--%s %s: %s", c == 'd' ? "duration" : "report-every",
                                          optarg,
                                          *v == 0 && !reason ? "must be longer than 0" : reason);
                                return EXIT_USAGE;
                        }
                        break;
                }
                case 'j':
                        json = true;
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
                        supervised = true;
                        break;
                case ARG_STATS_FD:
                case ARG_EVENTS_FD:
                case ARG_PARENT:
                case ARG_NICE: {
                        char *end;
                        errno = 0;
                        long v = strtol(optarg, &end, 10);
                        if (errno || *end || *optarg == 0 || v < -20 || v > INT32_MAX) {
                                log_error("%s: not a valid number: %s", argv[optind - 1], optarg);
                                return EXIT_USAGE;
                        }
                        if (c == ARG_STATS_FD)
                                stats_fd = (int) v;
                        else if (c == ARG_EVENTS_FD)
                                events_fd = (int) v;
                        else if (c == ARG_PARENT)
                                parent = (pid_t) v;
                        else
                                nice_level = (int) v;
                        break;
                }
                case ARG_USER:
                        user = optarg;
                        break;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                log_error("No load generator given (see --list)");
                return EXIT_USAGE;
        }
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

        struct loadgen_spec spec = {};
        r = loadgen_parse_argv(argc - optind, argv + optind, &spec, err);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_USAGE;
        }

        if (supervised) {
                r = become_child(user, parent, nice_level);
                if (r < 0) {
                        loadgen_spec_done(&spec);
                        return EXIT_FAILURE;
                }
        } else if (user) {
                log_error("--user is only for supervised mode; run rtsoak-load as that user");
                loadgen_spec_done(&spec);
                return EXIT_USAGE;
        }

        struct loadgen_shm *shm;
        if (stats_fd >= 0)
                shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, stats_fd, 0);
        else
                shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
        if (shm == MAP_FAILED) {
                log_error_errno(negative_errno(), "Cannot map the statistics area: %m");
                loadgen_spec_done(&spec);
                return EXIT_FAILURE;
        }
        if (stats_fd < 0)
                shm->magic = LOADGEN_SHM_MAGIC;
        else if (shm->magic != LOADGEN_SHM_MAGIC) {
                log_error("--stats-fd %d is not a statistics area", stats_fd);
                return EXIT_FAILURE;
        } else
                close(stats_fd); /* mapped; a command run by a generator must not get it */
        if (events_fd >= 0)
                (void) fcntl(events_fd, F_SETFD, FD_CLOEXEC);
        shm->nmetrics = (uint32_t) spec.info->nmetrics;

        static struct runner rn;
        rn.ctx = (struct loadgen_ctx){
                .info = spec.info,
                .opts = spec.opts,
                .args = spec.args,
                .shm = shm,
                .event_fd = events_fd,
                .ncpus = online_cpus(),
        };

        r = spec.info->probe(spec.opts, spec.args, err);
        if (r < 0) {
                if (supervised)
                        loadgen_event(&rn.ctx, "unsupported", -1, "%s", err);
                log_error("%s: cannot run here: %s", spec.info->name, err);
                loadgen_spec_done(&spec);
                return EXIT_UNAVAILABLE;
        }

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by every worker thread */
        signal(SIGPIPE, SIG_IGN);

        uint64_t first[LOADGEN_MAX_METRICS], last[LOADGEN_MAX_METRICS], cur[LOADGEN_MAX_METRICS];
        size_t nm = spec.info->nmetrics;
        snapshot(shm, nm, first);
        memcpy(last, first, sizeof(first));
        int64_t start = now_ns(CLOCK_MONOTONIC), last_report = start;

        pthread_t t;
        r = -pthread_create(&t, NULL, gen_thread, &rn);
        if (r < 0) {
                log_error_errno(r, "Cannot start the generator: %m");
                return EXIT_FAILURE;
        }

        const char *why = "stopped";
        for (;;) {
                struct timespec ts = { 0, 50 * 1000 * 1000 };
                siginfo_t si;
                int sig = sigtimedwait(&mask, &si, &ts);
                int64_t now = now_ns(CLOCK_MONOTONIC);
                atomic_fetch_add(&shm->heartbeat, 1);
                if (sig > 0) {
                        why = sig == SIGINT ? "interrupted" : "terminated";
                        break;
                }
                if (atomic_load(&rn.finished)) {
                        why = rn.result < 0 ? "failed" : "finished";
                        break;
                }
                if (duration && now - start >= (int64_t) duration) {
                        why = "duration reached";
                        break;
                }
                if (every && !json && now - last_report >= (int64_t) every) {
                        snapshot(shm, nm, cur);
                        printf("%s: %.1f s\n", spec.info->name, (double) (now - start) / 1e9);
                        print_rates(spec.info, last, cur, (double) (now - last_report) / 1e9,
                                    stdout);
                        fflush(stdout);
                        memcpy(last, cur, sizeof(cur));
                        last_report = now;
                }
        }
        atomic_store(&rn.ctx.stop, true);

        /* Give the workers a moment to finish what they do; a generator stuck in a system
         * call does not keep us: exit takes every thread with it. */
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 400 * 1000 * 1000;
        if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
        }
        bool joined = pthread_timedjoin_np(t, NULL, &deadline) == 0;
        /* Work finished after the stop request counts, and so does its time. */
        int64_t end = now_ns(CLOCK_MONOTONIC);
        snapshot(shm, nm, cur);
        double secs = (double) (end - start) / 1e9;
        int status = rn.result < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        if (supervised)
                _exit(status);

        if (json) {
                json_t *o = json_pack("{s:s, s:s, s:f, s:s, s:[]}", "generator", spec.info->name,
                                      "options", spec.text, "seconds", secs, "end", why, "metrics");
                json_t *arr = json_object_get(o, "metrics");
                for (size_t i = 0; i < nm; i++) {
                        const struct loadgen_metric *m = &spec.info->metrics[i];
                        json_array_append_new(
                                arr,
                                json_pack("{s:s, s:s, s:f, s:I, s:s}", "name", m->name, "unit",
                                          m->unit, "rate",
                                          secs > 0 ? (double) (cur[i] - first[i]) / secs * m->scale
                                                   : 0.0,
                                          "count", (json_int_t) (cur[i] - first[i]), "count_unit",
                                          m->count_unit));
                }
                json_dumpf(o, stdout, JSON_INDENT(2));
                putchar('\n');
                json_decref(o);
        } else {
                printf("%s: %s after %.2f s (%s)\n", spec.info->name, why, secs, spec.text);
                print_rates(spec.info, first, cur, secs, stdout);
        }
        fflush(stdout);
        if (!joined)
                _exit(status);
        loadgen_spec_done(&spec);
        munmap(shm, sizeof(*shm));
        return status;
}
