/* SPDX-License-Identifier: MIT */
/* The exec load: any command given after "--" (a kernel build, stress-ng, a customer's
 * workload), run in its own process group, restarted when it exits, killed with its group. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

enum { EXEC_METRIC_RUNS, EXEC_METRIC_CPU };

/* After SIGTERM the group has this long to go before SIGKILL; rtsoak-load waits 400 ms for
 * a generator to return, and the group must be gone before then. */
#define KILL_GRACE_NS (200 * (int64_t) NSEC_PER_MSEC)
#define KILL_WAIT_NS (150 * (int64_t) NSEC_PER_MSEC)
/* How often the CPU time of the running command is sampled. */
#define CPU_SAMPLE_NS (500 * (int64_t) NSEC_PER_MSEC)

struct exec_opts {
        uint64_t restart_delay_ns;
        uint64_t backoff_max_ns;
        uint64_t fail_window_ns;
};

static const struct loadgen_opt exec_opts[] = {
        { "restart-delay", LOADGEN_OPT_TIMESPAN, offsetof(struct exec_opts, restart_delay_ns), 0,
          3600 * NSEC_PER_SEC, "1s", NULL, "pause before the command is started again" },
        { "backoff-max", LOADGEN_OPT_TIMESPAN, offsetof(struct exec_opts, backoff_max_ns), 0,
          3600 * NSEC_PER_SEC, "0", NULL,
          "double the pause after each quick failure up to this; 0: no backoff" },
        { "fail-window", LOADGEN_OPT_TIMESPAN, offsetof(struct exec_opts, fail_window_ns), 0,
          3600 * NSEC_PER_SEC, "10s", NULL,
          "a run failing sooner than this counts as a quick failure (see --backoff-max)" },
};

static const struct loadgen_metric exec_metrics[] = {
        [EXEC_METRIC_RUNS] = { "runs", "runs/s", "starts", 1.0 },
        /* CPU time of the command's processes in ns per second of wall time, shown as percent
         * of one CPU. */
        [EXEC_METRIC_CPU] = { "cpu", "%", "ns of CPU time", 1e-7 },
};

static int exec_check(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]) {
        if (!args[0] || !*args[0]) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "exec: a command is required after -- (e.g. exec -- make -j4)");
                return -EINVAL;
        }
        return 0;
}

/* Resolves the command like execvp() would, into path (size PATH_MAX), so that the child
 * only needs execv() and the reasons for failing are known before it starts. */
static int resolve_command(const char *cmd, char *path, size_t size,
                           char why[static LOADGEN_ERROR_MAX]) {
        struct stat st;

        if (strchr(cmd, '/')) {
                if (stat(cmd, &st) < 0) {
                        snprintf(why, LOADGEN_ERROR_MAX, "command '%s': %s", cmd, strerror(errno));
                        return negative_errno();
                }
                if (!S_ISREG(st.st_mode) || access(cmd, X_OK) < 0) {
                        snprintf(why, LOADGEN_ERROR_MAX, "command '%s': not an executable file",
                                 cmd);
                        return -EACCES;
                }
                snprintf(path, size, "%s", cmd);
                return 0;
        }
        const char *search = getenv("PATH");
        if (!search || !*search)
                search = "/usr/local/bin:/usr/bin:/bin";
        bool found_unexecutable = false;
        for (const char *p = search; p;) {
                const char *colon = strchr(p, ':');
                size_t len = colon ? (size_t) (colon - p) : strlen(p);
                /* An empty element means the current directory. */
                int n = len ? snprintf(path, size, "%.*s/%s", (int) len, p, cmd)
                            : snprintf(path, size, "./%s", cmd);
                if (n > 0 && (size_t) n < size && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        if (access(path, X_OK) == 0)
                                return 0;
                        found_unexecutable = true;
                }
                p = colon ? colon + 1 : NULL;
        }
        snprintf(why, LOADGEN_ERROR_MAX,
                 found_unexecutable ? "command '%s' is in PATH (%s) but not executable"
                                    : "command '%s' not found in PATH (%s)",
                 cmd, search);
        return found_unexecutable ? -EACCES : -ENOENT;
}

static int exec_probe(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]) {
        char path[4096];
        return resolve_command(args[0], path, sizeof(path), why);
}

/* ---- the command's processes ---- */

struct command {
        struct loadgen_ctx *ctx;
        const char *path;
        pid_t pid; /* also the process group */
        int pidfd;
        int64_t started_ns;
        bool running;
        int status;
};

static void child_exec(const char *path, char *const *argv, pid_t parent, int devnull,
                       int err_pipe) {
        /* Between fork() and exec only async-signal-safe calls: rtsoak-load has threads. */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(127); /* rtsoak-load died before PR_SET_PDEATHSIG took hold */
        /* rtsoak-load blocks SIGTERM, SIGINT and SIGHUP and ignores SIGPIPE; the command
         * gets the defaults (an ignored signal would survive exec). */
        struct sigaction sa = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                sigaction(sig, &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* No input; output to our stderr, so that rtsoak-load's own stdout (JSON) stays
         * clean. */
        dup2(devnull, STDIN_FILENO);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execv(path, argv);
        int e = errno;
        ssize_t w = write(err_pipe, &e, sizeof(e));
        (void) w;
        _exit(127);
}

static int command_start(struct command *c, char *const *argv) {
        _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int p[2];

        if (devnull < 0)
                return log_error_errno(negative_errno(), "exec: cannot open /dev/null: %m");
        if (pipe2(p, O_CLOEXEC) < 0)
                return log_error_errno(negative_errno(), "exec: pipe: %m");
        pid_t parent = getpid(), pid = fork();
        if (pid < 0) {
                int r = negative_errno();
                close(p[0]);
                close(p[1]);
                return log_error_errno(r, "exec: fork: %m");
        }
        if (pid == 0)
                child_exec(c->path, argv, parent, devnull, p[1]);
        /* Both sides set the group, so it exists whichever runs first. */
        setpgid(pid, pid);
        close(p[1]);
        int e = 0;
        ssize_t n;
        while ((n = read(p[0], &e, sizeof(e))) < 0 && errno == EINTR)
                ;
        close(p[0]);
        c->pid = pid;
        c->running = true;
        c->started_ns = now_ns(CLOCK_MONOTONIC);
        c->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        loadgen_add(c->ctx, EXEC_METRIC_RUNS, 1);
        if (n == (ssize_t) sizeof(e)) {
                loadgen_event(c->ctx, "exec_failed", e, "cannot execute %s: %s", c->path,
                              strerror(e));
                /* The child exits with 127 right away and is reaped like any run. */
        }
        return 0;
}

static bool group_alive(pid_t pgid) {
        /* kill(0, ...) would mean our own group. */
        return pgid > 0 && (kill(-pgid, 0) == 0 || errno != ESRCH);
}

/* Reaps whatever has exited: the command itself, and (as we are a subreaper) orphans it
 * left behind.  Returns true when the command itself was reaped, with its status. */
static bool reap(struct command *c) {
        bool leader = false;
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
                if (c->running && pid == c->pid) {
                        c->status = st;
                        c->running = false;
                        leader = true;
                }
        return leader;
}

static void describe_exit(struct command *c, bool stopped) {
        double secs = (double) (now_ns(CLOCK_MONOTONIC) - c->started_ns) / 1e9;
        const char *why = stopped ? " (stopped by rtsoak-load)" : "";
        if (WIFSIGNALED(c->status)) {
                int sig = WTERMSIG(c->status);
                const char *name = sigabbrev_np(sig);
                loadgen_event(c->ctx, "command_exit", 128 + sig,
                              "command killed by signal SIG%s after %.1f s%s", name ?: "?", secs,
                              why);
        } else
                loadgen_event(c->ctx, "command_exit", WEXITSTATUS(c->status),
                              "command exited with status %d after %.1f s%s",
                              WEXITSTATUS(c->status), secs, why);
}

/* Ends every process of the group: SIGTERM, then SIGKILL after a grace period. */
static void kill_group(struct command *c) {
        pid_t pgid = c->pid;
        int64_t start = now_ns(CLOCK_MONOTONIC);
        bool killed = false;

        kill(-pgid, SIGTERM);
        kill(-pgid, SIGCONT); /* a stopped process would not see SIGTERM */
        for (;;) {
                reap(c);
                if (!c->running && !group_alive(pgid))
                        return;
                int64_t now = now_ns(CLOCK_MONOTONIC);
                if (!killed && now - start >= KILL_GRACE_NS) {
                        kill(-pgid, SIGKILL);
                        killed = true;
                } else if (killed && now - start >= KILL_GRACE_NS + KILL_WAIT_NS)
                        return; /* not ours to reap (reparented elsewhere); it is dying */
                struct timespec ts = { 0, 5 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

/* ---- CPU time ---- */

static int64_t timeval_ns(struct timeval tv) {
        return (int64_t) tv.tv_sec * (int64_t) NSEC_PER_SEC + (int64_t) tv.tv_usec * 1000;
}

/* CPU time of every live process in the group, including the children each has reaped
 * (utime, stime, cutime, cstime of /proc/PID/stat, in clock ticks). */
static int64_t group_cpu_ns(pid_t pgid) {
        static long ticks;
        DIR *d = opendir("/proc");
        struct dirent *de;
        int64_t sum = 0;

        if (!d)
                return 0;
        if (ticks <= 0)
                ticks = sysconf(_SC_CLK_TCK);
        while ((de = readdir(d))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                char path[64], buf[1024];
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = 0;
                /* The command name may hold spaces and parentheses: skip to the last ')'. */
                char *p = strrchr(buf, ')');
                if (!p)
                        continue;
                char state;
                int ppid, pgrp;
                unsigned long long f[13];
                if (sscanf(p + 2,
                           "%c %d %d %*d %*d %*d %*u %llu %llu %llu %llu %llu %llu %llu %llu "
                           "%llu",
                           &state, &ppid, &pgrp, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
                           &f[7], &f[8]) != 12 ||
                    pgrp != pgid)
                        continue;
                /* f: minflt cminflt majflt cmajflt utime stime cutime cstime */
                unsigned long long t = f[4] + f[5] + f[6] + f[7];
                sum += (int64_t) (t * NSEC_PER_SEC / (unsigned long long) ticks);
        }
        closedir(d);
        return sum;
}

/* Total CPU time of everything the command ran: what was reaped (our RUSAGE_CHILDREN; the
 * subreaper setting makes orphans ours too) plus what is running now. */
static int64_t command_cpu_ns(struct command *c) {
        struct rusage ru;
        int64_t sum = 0;
        if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
                sum = timeval_ns(ru.ru_utime) + timeval_ns(ru.ru_stime);
        if (c->pid > 0 && (c->running || group_alive(c->pid)))
                sum += group_cpu_ns(c->pid);
        return sum;
}

/* The counter only grows: a process counted as running and then reaped between the two
 * readings must not make the total go back (nor be counted twice). */
static void report_cpu(struct command *c, int64_t base, int64_t *reported) {
        int64_t now = command_cpu_ns(c) - base;
        if (now > *reported) {
                loadgen_add(c->ctx, EXEC_METRIC_CPU, (uint64_t) (now - *reported));
                *reported = now;
        }
}

/* ---- running ---- */

/* Waits for the command to exit, up to deadline_ns, reaping orphans on the way. */
static void wait_command(struct command *c, int64_t deadline_ns) {
        while (c->running && !loadgen_stopping(c->ctx)) {
                if (reap(c))
                        return;
                int64_t left = deadline_ns - now_ns(CLOCK_MONOTONIC);
                if (left <= 0)
                        return;
                /* A pidfd turns readable when the command exits; without one, poll often. */
                struct pollfd p = { c->pidfd, POLLIN, 0 };
                int ms = c->pidfd >= 0 ? 50 : 10;
                poll(&p, c->pidfd >= 0 ? 1 : 0, (int) MIN(left / 1000000 + 1, ms));
        }
}

static uint64_t next_delay(const struct exec_opts *o, struct command *c, uint64_t delay) {
        bool failed = !WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0;
        int64_t ran = now_ns(CLOCK_MONOTONIC) - c->started_ns;
        if (!o->backoff_max_ns || !failed || ran >= (int64_t) o->fail_window_ns)
                return o->restart_delay_ns;
        /* A quick failure: twice the previous pause, at least 100 ms, at most the cap. */
        uint64_t d = MAX(delay * 2, 100 * NSEC_PER_MSEC);
        return MIN(d, MAX(o->backoff_max_ns, o->restart_delay_ns));
}

static int exec_run(struct loadgen_ctx *ctx) {
        const struct exec_opts *o = ctx->opts;
        char path[4096], why[LOADGEN_ERROR_MAX];
        struct command c = { .ctx = ctx, .path = path, .pidfd = -1 };
        int64_t cpu_base, cpu_reported = 0;
        uint64_t delay = o->restart_delay_ns;
        int r;

        r = resolve_command(ctx->args[0], path, sizeof(path), why);
        if (r < 0)
                return log_error_errno(r, "exec: %s", why);
        /* Orphans of the command (a shell's background jobs) become our children, so that
         * they are reaped here and their CPU time is counted. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                log_debug_errno(negative_errno(), "PR_SET_CHILD_SUBREAPER: %m");
        cpu_base = command_cpu_ns(&c);

        while (!loadgen_stopping(ctx)) {
                r = command_start(&c, ctx->args);
                if (r < 0)
                        break;
                int64_t next_sample = now_ns(CLOCK_MONOTONIC);
                while (c.running && !loadgen_stopping(ctx)) {
                        next_sample += CPU_SAMPLE_NS;
                        wait_command(&c, next_sample);
                        report_cpu(&c, cpu_base, &cpu_reported);
                }
                if (c.running)
                        break; /* stopping: the group goes below */
                describe_exit(&c, false);
                /* Leftovers of this run (background jobs) do not outlive it. */
                if (group_alive(c.pid))
                        kill_group(&c);
                report_cpu(&c, cpu_base, &cpu_reported);
                if (c.pidfd >= 0)
                        close(c.pidfd);
                c.pidfd = -1;
                /* The group is gone: its ID may be reused from now on, never signal it. */
                c.pid = 0;
                delay = next_delay(o, &c, delay);
                if (!loadgen_sleep_until(ctx, now_ns(CLOCK_MONOTONIC) + (int64_t) delay))
                        break;
        }

        if (c.pid > 0 && (c.running || group_alive(c.pid))) {
                bool was_running = c.running;
                /* Last look at the CPU time while the processes are still there. */
                report_cpu(&c, cpu_base, &cpu_reported);
                kill_group(&c);
                if (was_running && !c.running)
                        describe_exit(&c, true);
                report_cpu(&c, cpu_base, &cpu_reported);
        }
        if (c.pidfd >= 0)
                close(c.pidfd);
        return r;
}

const struct loadgen_info loadgen_exec_info = {
        .name = "exec",
        .summary = "any command given after \"--\", restarted when it exits",
        .opts = exec_opts,
        .nopts = ELEMENTSOF(exec_opts),
        .opts_size = sizeof(struct exec_opts),
        .metrics = exec_metrics,
        .nmetrics = ELEMENTSOF(exec_metrics),
        .args_help = "COMMAND [ARGUMENTS...]",
        .check = exec_check,
        .probe = exec_probe,
        .run = exec_run,
};
