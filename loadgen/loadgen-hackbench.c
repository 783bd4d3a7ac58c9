/* SPDX-License-Identifier: MIT */
/* The hackbench load: groups of senders and receivers passing small messages over AF_UNIX
 * socket pairs or pipes, as processes or threads, round after round, like rt-tests' hackbench. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"
#include "worker.h"

enum { HB_METRIC_MESSAGES, HB_METRIC_ROUNDS };

/* Every sender and receiver is a task: more than this many in one round would make a small
 * machine unusable rather than loaded. */
#define HB_MAX_TASKS 4096
#define HB_MAX_DATASIZE 65536
/* Receivers add to the shared counter once per this many messages, so that the counter's
 * cache line does not become what the tasks contend for. */
#define HB_COUNT_BATCH 256
/* Thread mode: blocked workers are interrupted with this signal when a round is abandoned. */
#define HB_KICK_SIGNAL SIGUSR1

struct hackbench_opts {
        uint64_t groups;
        uint64_t fds; /* senders, and receivers, in each group */
        uint64_t loops;
        uint64_t datasize;
        uint64_t rounds;
        bool pipe;
        bool threads;
};

static const struct loadgen_opt hackbench_opts[] = {
        { "groups", LOADGEN_OPT_UINT, offsetof(struct hackbench_opts, groups), 1, 1000, "10", NULL,
          "groups of senders and receivers" },
        { "fds", LOADGEN_OPT_UINT, offsetof(struct hackbench_opts, fds), 1, 1000, "20", NULL,
          "senders, and receivers, in each group" },
        { "loops", LOADGEN_OPT_UINT, offsetof(struct hackbench_opts, loops), 1, 1000000000, "100",
          NULL, "messages each sender sends to each receiver of its group per round" },
        { "datasize", LOADGEN_OPT_SIZE, offsetof(struct hackbench_opts, datasize), 1,
          HB_MAX_DATASIZE, "100", NULL, "bytes per message" },
        { "pipe", LOADGEN_OPT_BOOL, offsetof(struct hackbench_opts, pipe), 0, 0, "no", NULL,
          "pipes instead of AF_UNIX stream socket pairs" },
        { "threads", LOADGEN_OPT_BOOL, offsetof(struct hackbench_opts, threads), 0, 0, "no", NULL,
          "threads instead of processes" },
        { "rounds", LOADGEN_OPT_UINT, offsetof(struct hackbench_opts, rounds), 0, 1000000000, "0",
          NULL, "stop after this many rounds; 0: until stopped" },
};

static const struct loadgen_metric hackbench_metrics[] = {
        [HB_METRIC_MESSAGES] = { "messages", "msg/s", "messages", 1.0 },
        [HB_METRIC_ROUNDS] = { "rounds", "rounds/s", "rounds", 1.0 },
};

static uint64_t hb_tasks(const struct hackbench_opts *o) {
        return o->groups * o->fds * 2;
}

/* File descriptors one process holds at once: every channel of the round in thread mode, one
 * group's channels in process mode, and some to spare for what the runner has open. */
static uint64_t hb_fds_needed(const struct hackbench_opts *o) {
        return (o->threads ? o->groups : 1) * o->fds * 2 + 64;
}

static int hackbench_check(const void *opts, char *const *args,
                           char err[static LOADGEN_ERROR_MAX]) {
        const struct hackbench_opts *o = opts;
        if (hb_tasks(o) > HB_MAX_TASKS) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "hackbench: --groups=%" PRIu64 " --fds=%" PRIu64
                         ": too many tasks, %" PRIu64 " senders and receivers (2 x groups x "
                         "fds) is more than %d",
                         o->groups, o->fds, hb_tasks(o), HB_MAX_TASKS);
                return -E2BIG;
        }
        return 0;
}

static int hackbench_probe(const void *opts, char *const *args,
                           char why[static LOADGEN_ERROR_MAX]) {
        const struct hackbench_opts *o = opts;
        struct rlimit rl;

        /* Threads count against RLIMIT_NPROC just like processes.  The limit covers every
         * process of the user, so leave some room for what already runs. */
        if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && geteuid() != 0 &&
            hb_tasks(o) + 32 > rl.rlim_cur) {
                snprintf(why, LOADGEN_ERROR_MAX,
                         "%" PRIu64 " tasks (--groups x --fds x 2) do not fit in RLIMIT_NPROC %llu",
                         hb_tasks(o), (unsigned long long) rl.rlim_cur);
                return -EAGAIN;
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
            hb_fds_needed(o) > rl.rlim_max) {
                snprintf(why, LOADGEN_ERROR_MAX,
                         "%" PRIu64 " file descriptors needed, RLIMIT_NOFILE allows %llu",
                         hb_fds_needed(o), (unsigned long long) rl.rlim_max);
                return -EMFILE;
        }
        return 0;
}

/* ---- the work of one sender or receiver, the same in both modes ---- */

struct hb_round {
        struct loadgen_ctx *ctx;
        const struct hackbench_opts *o;
        int *rx; /* receiving end of each receiver's channel, groups x fds */
        int *tx; /* sending end */
        atomic_bool abandon;
        /* Thread mode: the workers wait to read end-of-file from this before they start. */
        int gate;
        /* Thread mode: how many workers are still running, for the waiting generator. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        size_t running;
};

/* Whether a round is being abandoned.  Forked workers never see it become true: they are
 * killed instead, so in them an interrupted call is simply restarted. */
static bool hb_abandoned(struct hb_round *rd) {
        return loadgen_stopping(rd->ctx) ||
               atomic_load_explicit(&rd->abandon, memory_order_relaxed);
}

static int hb_sender(struct hb_round *rd, const int *tx) {
        const struct hackbench_opts *o = rd->o;
        char buf[HB_MAX_DATASIZE];

        memset(buf, 's', o->datasize);
        for (uint64_t l = 0; l < o->loops; l++)
                for (uint64_t r = 0; r < o->fds; r++) {
                        /* A worker that never blocks would not notice the signal. */
                        if (hb_abandoned(rd))
                                return -ECANCELED;
                        for (size_t done = 0; done < o->datasize;) {
                                ssize_t n = write(tx[r], buf + done, o->datasize - done);
                                if (n < 0) {
                                        if (errno == EINTR && !hb_abandoned(rd))
                                                continue;
                                        return errno == EINTR ? -ECANCELED : -errno;
                                }
                                done += (size_t) n;
                        }
                }
        return 0;
}

static int hb_receiver(struct hb_round *rd, int rx) {
        const struct hackbench_opts *o = rd->o;
        uint64_t want = o->fds * o->loops, pending = 0;
        char buf[HB_MAX_DATASIZE];
        int r = 0;

        /* Like hackbench, a message is read with as many reads as it takes, each asking for
         * no more than the rest of the message. */
        for (uint64_t m = 0; m < want; m++) {
                if (hb_abandoned(rd)) {
                        r = -ECANCELED;
                        break;
                }
                for (size_t done = 0; done < o->datasize;) {
                        ssize_t n = read(rx, buf, o->datasize - done);
                        if (n < 0 && errno == EINTR && !hb_abandoned(rd))
                                continue;
                        if (n <= 0) {
                                r = n == 0 ? -EPIPE : errno == EINTR ? -ECANCELED : -errno;
                                goto out;
                        }
                        done += (size_t) n;
                }
                if (++pending == HB_COUNT_BATCH) {
                        loadgen_add(rd->ctx, HB_METRIC_MESSAGES, pending);
                        pending = 0;
                }
        }
out:
        loadgen_add(rd->ctx, HB_METRIC_MESSAGES, pending);
        return r;
}

static int hb_open_channel(bool use_pipe, int *ret_rx, int *ret_tx) {
        int fd[2];
        if (use_pipe ? pipe2(fd, O_CLOEXEC)
                     : socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd))
                return -errno;
        *ret_rx = fd[0];
        *ret_tx = fd[1];
        return 0;
}

static void hb_close_range(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

/* ---- process mode ---- */

/* Runs in a forked worker: dies with the generator, does its part, exits. */
static _Noreturn void hb_child(struct hb_round *rd, pid_t parent, int gate, int group,
                               int receiver) {
        char c;
        int r;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(EXIT_FAILURE);
        /* Start together, like hackbench's workers: when the generator closes the gate. */
        while (read(gate, &c, 1) < 0 && errno == EINTR)
                ;
        int *rx = rd->rx + (size_t) group * rd->o->fds, *tx = rd->tx + (size_t) group * rd->o->fds;
        if (receiver >= 0)
                r = hb_receiver(rd, rx[receiver]);
        else
                r = hb_sender(rd, tx);
        _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

static void hb_kill_all(pid_t *pids, size_t n) {
        for (size_t i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
}

/* Reaps every worker; returns the number that failed (exited other than with 0, or were killed
 * by someone else). */
static size_t hb_reap_all(pid_t *pids, size_t n, bool killed) {
        size_t failed = 0;
        for (size_t i = 0; i < n; i++) {
                int st;
                while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
                        ;
                if (!killed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
                        failed++;
        }
        return failed;
}

/* One round with forked workers.  The workers all hold the write end of a pipe and the parent
 * does not, so it reads end-of-file when the last one has exited; it waits in slices so that a
 * stop request is seen promptly, and then kills the workers. */
static int hb_round_processes(struct hb_round *rd, pid_t *pids) {
        const struct hackbench_opts *o = rd->o;
        size_t started = 0;
        pid_t self = getpid();
        int done[2] = { -1, -1 }, gate[2] = { -1, -1 }, r = 0;

        if (pipe2(done, O_CLOEXEC) < 0 || pipe2(gate, O_CLOEXEC) < 0) {
                r = log_error_errno(negative_errno(), "hackbench: cannot create a pipe: %m");
                hb_close_range(done, 2);
                return r;
        }
        for (size_t g = 0; g < o->groups && r == 0; g++) {
                size_t base = g * o->fds;
                for (size_t i = 0; i < o->fds && r == 0; i++) {
                        r = hb_open_channel(o->pipe, &rd->rx[base + i], &rd->tx[base + i]);
                        if (r < 0)
                                log_error_errno(r, "hackbench: cannot create a %s: %m",
                                                o->pipe ? "pipe" : "socket pair");
                }
                /* Receivers first, then senders, like hackbench. */
                for (size_t i = 0; i < 2 * o->fds && r == 0; i++) {
                        if (loadgen_stopping(rd->ctx)) {
                                r = -ECANCELED;
                                break;
                        }
                        pid_t pid = fork();
                        if (pid < 0) {
                                r = log_error_errno(negative_errno(),
                                                    "hackbench: cannot fork a worker: %m");
                                break;
                        }
                        if (pid == 0) {
                                close(done[0]);
                                close(gate[1]);
                                hb_child(rd, self, gate[0], (int) g, i < o->fds ? (int) i : -1);
                        }
                        pids[started++] = pid;
                }
                /* The workers of this group have their copies; later groups need not. */
                hb_close_range(rd->rx + base, o->fds);
                hb_close_range(rd->tx + base, o->fds);
        }
        close(done[1]);
        hb_close_range(gate, 2); /* opens the gate */

        while (r == 0) {
                if (loadgen_stopping(rd->ctx)) {
                        r = -ECANCELED;
                        break;
                }
                struct pollfd p = { .fd = done[0], .events = POLLIN };
                int n = poll(&p, 1, 50);
                if (n < 0 && errno != EINTR) {
                        r = log_error_errno(negative_errno(), "hackbench: poll: %m");
                        break;
                }
                if (n > 0)
                        break; /* end of file: nobody holds the write end any more */
        }
        close(done[0]);
        if (r < 0)
                hb_kill_all(pids, started);
        size_t failed = hb_reap_all(pids, started, r < 0);
        if (r == 0 && failed > 0) {
                log_error("hackbench: %zu of %zu workers failed", failed, started);
                r = -EIO;
        }
        return r;
}

/* ---- thread mode ---- */

struct hb_thread {
        struct hb_round *rd;
        pthread_t thread;
        int group, receiver; /* receiver -1: a sender */
        int result;
        atomic_bool finished;
};

static void *hb_thread_main(void *arg) {
        struct hb_thread *t = arg;
        struct hb_round *rd = t->rd;
        size_t off = (size_t) t->group * rd->o->fds;
        char c;

        /* Start together, like hackbench's workers: when the generator closes the gate.  A
         * kick interrupts the wait too; the worker then sees the round abandoned. */
        while (read(rd->gate, &c, 1) < 0 && errno == EINTR && !hb_abandoned(rd))
                ;
        if (t->receiver >= 0)
                t->result = hb_receiver(rd, rd->rx[off + (size_t) t->receiver]);
        else
                t->result = hb_sender(rd, rd->tx + off);
        /* A worker that failed would leave its peers blocked for good: abandon the round. */
        if (t->result < 0)
                atomic_store(&rd->abandon, true);
        atomic_store(&t->finished, true);
        pthread_mutex_lock(&rd->lock);
        if (--rd->running == 0 || t->result < 0)
                pthread_cond_signal(&rd->cond);
        pthread_mutex_unlock(&rd->lock);
        return NULL;
}

static void hb_kick_handler(int sig) {
        /* Nothing: being interrupted is the point. */
}

/* One round with threads.  The workers wait at a gate until all of them exist: released one by
 * one, the early ones would compete with the thread still creating the others, which then takes
 * a good part of the round to do so, and the groups would run staggered rather than together.
 * Abandoning a round means interrupting workers blocked in read() or write() with a signal; the
 * signal is sent again and again, because a worker may be just about to block when the first
 * one arrives. */
static int hb_round_threads(struct hb_round *rd, struct hb_thread *th, pthread_attr_t *attr) {
        const struct hackbench_opts *o = rd->o;
        size_t nfds = o->groups * o->fds, started = 0;
        int gate[2] = { -1, -1 }, r = 0;

        atomic_store(&rd->abandon, false);
        if (pipe2(gate, O_CLOEXEC) < 0)
                return log_error_errno(negative_errno(), "hackbench: cannot create a pipe: %m");
        rd->gate = gate[0];
        for (size_t i = 0; i < nfds && r == 0; i++) {
                r = hb_open_channel(o->pipe, &rd->rx[i], &rd->tx[i]);
                if (r < 0)
                        log_error_errno(r, "hackbench: cannot create a %s: %m",
                                        o->pipe ? "pipe" : "socket pair");
        }

        pthread_mutex_lock(&rd->lock);
        rd->running = 0;
        pthread_mutex_unlock(&rd->lock);
        for (size_t g = 0; g < o->groups && r == 0; g++)
                for (size_t i = 0; i < 2 * o->fds && r == 0; i++) {
                        if (loadgen_stopping(rd->ctx)) {
                                r = -ECANCELED;
                                break;
                        }
                        struct hb_thread *t = &th[started];
                        *t = (struct hb_thread){ .rd = rd,
                                                 .group = (int) g,
                                                 .receiver = i < o->fds ? (int) i : -1 };
                        pthread_mutex_lock(&rd->lock);
                        rd->running++;
                        pthread_mutex_unlock(&rd->lock);
                        r = -pthread_create(&t->thread, attr, hb_thread_main, t);
                        if (r < 0) {
                                pthread_mutex_lock(&rd->lock);
                                rd->running--;
                                pthread_mutex_unlock(&rd->lock);
                                log_error_errno(r, "hackbench: cannot start a thread: %m");
                                break;
                        }
                        started++;
                }
        /* Those started give up at once if the round could not be set up in full. */
        if (r < 0)
                atomic_store(&rd->abandon, true);
        close(gate[1]); /* opens the gate */

        /* Wait for the round to finish, a worker to fail, or a stop request. */
        pthread_mutex_lock(&rd->lock);
        while (r == 0 && rd->running > 0 && !hb_abandoned(rd)) {
                struct timespec ts = timespec_from_now(CLOCK_MONOTONIC,
                                                       (int64_t) (50 * NSEC_PER_MSEC));
                pthread_cond_timedwait(&rd->cond, &rd->lock, &ts);
        }
        bool finished = rd->running == 0;
        pthread_mutex_unlock(&rd->lock);

        if (!finished) {
                atomic_store(&rd->abandon, true);
                for (;;) {
                        pthread_mutex_lock(&rd->lock);
                        size_t left = rd->running;
                        pthread_mutex_unlock(&rd->lock);
                        if (left == 0)
                                break;
                        for (size_t i = 0; i < started; i++)
                                if (!atomic_load(&th[i].finished))
                                        pthread_kill(th[i].thread, HB_KICK_SIGNAL);
                        struct timespec pause = { 0, 10 * 1000 * 1000 };
                        nanosleep(&pause, NULL);
                }
        }
        /* Workers also give up by themselves when they see the stop request, so all of them
         * having returned does not mean the round was complete: only their results tell. */
        for (size_t i = 0; i < started; i++) {
                pthread_join(th[i].thread, NULL);
                if (r == 0 && th[i].result == -ECANCELED)
                        r = -ECANCELED;
                else if ((r == 0 || r == -ECANCELED) && th[i].result < 0 &&
                         th[i].result != -ECANCELED)
                        r = log_error_errno(th[i].result, "hackbench: a %s failed: %m",
                                            th[i].receiver >= 0 ? "receiver" : "sender");
        }
        close(gate[0]);
        rd->gate = -1;
        hb_close_range(rd->rx, nfds);
        hb_close_range(rd->tx, nfds);
        if (r == 0 && !finished)
                r = -ECANCELED;
        return r;
}

/* Makes room for every channel of a round in one process, within the hard limit. */
static void hb_raise_nofile(const struct hackbench_opts *o) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
            rl.rlim_cur >= hb_fds_needed(o))
                return;
        rl.rlim_cur = MIN((rlim_t) hb_fds_needed(o), rl.rlim_max);
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_debug_errno(negative_errno(), "hackbench: cannot raise RLIMIT_NOFILE: %m");
}

static int hackbench_run(struct loadgen_ctx *ctx) {
        const struct hackbench_opts *o = ctx->opts;
        size_t nfds = o->groups * o->fds, ntasks = hb_tasks(o);
        struct hb_round rd = { .ctx = ctx, .o = o };
        _cleanup_free_ int *rx = malloc(nfds * sizeof(int)), *tx = malloc(nfds * sizeof(int));
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_free_ struct hb_thread *th = NULL;
        struct sigaction kick = { .sa_handler = hb_kick_handler }, old_kick;
        pthread_attr_t attr;
        int r = 0;

        if (!rx || !tx)
                return log_oom();
        for (size_t i = 0; i < nfds; i++)
                rx[i] = tx[i] = -1;
        rd.rx = rx;
        rd.tx = tx;
        hb_raise_nofile(o);

        if (!o->threads) {
                pids = calloc(ntasks, sizeof(pid_t));
                if (!pids)
                        return log_oom();
                for (uint64_t n = 0; (o->rounds == 0 || n < o->rounds) && r == 0; n++) {
                        if (loadgen_stopping(ctx))
                                break;
                        r = hb_round_processes(&rd, pids);
                        if (r == 0)
                                loadgen_add(ctx, HB_METRIC_ROUNDS, 1);
                }
                return r == -ECANCELED ? 0 : r;
        }

        th = calloc(ntasks, sizeof(*th));
        if (!th)
                return log_oom();
        /* No SA_RESTART: the point of the signal is to make read() and write() return. */
        sigemptyset(&kick.sa_mask);
        if (sigaction(HB_KICK_SIGNAL, &kick, &old_kick) < 0)
                return log_error_errno(negative_errno(), "hackbench: sigaction: %m");
        pthread_mutex_init(&rd.lock, NULL);
        cond_init_monotonic(&rd.cond);
        pthread_attr_init(&attr);
        /* Each worker keeps one message on its stack; the default 8 MiB per thread is waste. */
        pthread_attr_setstacksize(&attr, 256 * 1024);

        for (uint64_t n = 0; (o->rounds == 0 || n < o->rounds) && r == 0; n++) {
                if (loadgen_stopping(ctx))
                        break;
                r = hb_round_threads(&rd, th, &attr);
                if (r == 0)
                        loadgen_add(ctx, HB_METRIC_ROUNDS, 1);
        }

        pthread_attr_destroy(&attr);
        pthread_cond_destroy(&rd.cond);
        pthread_mutex_destroy(&rd.lock);
        sigaction(HB_KICK_SIGNAL, &old_kick, NULL);
        return r == -ECANCELED ? 0 : r;
}

const struct loadgen_info loadgen_hackbench_info = {
        .name = "hackbench",
        .summary = "groups of senders and receivers passing messages over sockets or pipes",
        .opts = hackbench_opts,
        .nopts = ELEMENTSOF(hackbench_opts),
        .opts_size = sizeof(struct hackbench_opts),
        .metrics = hackbench_metrics,
        .nmetrics = ELEMENTSOF(hackbench_metrics),
        .check = hackbench_check,
        .probe = hackbench_probe,
        .run = hackbench_run,
};
