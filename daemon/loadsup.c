/* SPDX-License-Identifier: MIT */
/* Implementation of the load supervisor.  Children are started with posix_spawn (a vfork),
 * never fork(): fork would write-protect the probes' memory for copy-on-write, and the next
 * store of a probe thread into its own ring would then take a page fault we would measure as
 * latency. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loadsup.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

extern char **environ;

/* A child that ran at least this long is considered healthy: its backoff starts over. */
#define HEALTHY_NS (30 * (int64_t) NSEC_PER_SEC)
/* Events a child may report in a burst, and how fast that allowance comes back. */
#define EVENT_BURST 10
#define EVENT_REFILL_NS (6 * (int64_t) NSEC_PER_SEC)

enum slot_state { SLOT_NEW, SLOT_RUNNING, SLOT_BACKOFF, SLOT_STOPPING, SLOT_DONE };

struct slot {
        struct loadsup *sup;
        const struct loadgen_spec *spec;
        char **argv; /* the generator's own words, split from spec->text */
        size_t idx;
        bool retired; /* belongs to a scenario that ended */
        enum slot_state state;

        int shm_fd;
        struct loadgen_shm *shm;

        pid_t pid;
        int pidfd, ev_fd;
        sd_event_source *exit_src, *ev_src, *timer;
        char evbuf[1024];
        size_t evlen;
        unsigned ev_tokens;
        int64_t ev_refill_mono;
        uint64_t ev_suppressed;

        uint64_t backoff_ns;
        int64_t started_mono;

        /* Accounting since the last snapshot. */
        int64_t up_from_mono; /* running since (or since the last snapshot) */
        uint64_t up_acc_ns;
        uint32_t starts, exits;
        uint64_t last[LOADGEN_MAX_METRICS];
        int64_t last_mono;
};

struct loadsup {
        sd_event *event;
        struct loadsup_params p;
        const struct scenario *scenario;
        struct slot **slots; /* current scenario */
        size_t nslots;
        struct slot **retired; /* stopping */
        size_t nretired;
        int64_t last_sweep_mono; /* 0: never */
};

/* Looking for orphans reads every process's stat on kernels without per-thread children
 * lists: with short intervals that would be most of the daemon's own CPU time. */
#define SWEEP_MIN_GAP_NS (10 * NSEC_PER_SEC)

static void emit(struct loadsup *s, const char *type, int64_t value, const char *fmt, ...)
        _printf_(4, 5);
static void emit(struct loadsup *s, const char *type, int64_t value, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (s->p.on_event)
                s->p.on_event(s->p.userdata, type, value, msg);
}

static const char *slot_name(const struct slot *sl, char *buf, size_t len) {
        snprintf(buf, len, "%s #%zu of scenario %s", sl->spec->info->name, sl->idx + 1,
                 sl->sup->scenario && !sl->retired ? sl->sup->scenario->name : "(ended)");
        return buf;
}

static void close_child_fds(struct slot *sl) {
        sl->exit_src = sd_event_source_disable_unref(sl->exit_src);
        sl->ev_src = sd_event_source_disable_unref(sl->ev_src);
        if (sl->pidfd >= 0)
                close(sl->pidfd);
        if (sl->ev_fd >= 0)
                close(sl->ev_fd);
        sl->pidfd = sl->ev_fd = -1;
}

static void slot_free(struct slot *sl) {
        if (!sl)
                return;
        close_child_fds(sl);
        sl->timer = sd_event_source_disable_unref(sl->timer);
        if (sl->shm && sl->shm != MAP_FAILED)
                munmap(sl->shm, sizeof(*sl->shm));
        if (sl->shm_fd >= 0)
                close(sl->shm_fd);
        strv_freep(&sl->argv);
        free(sl);
}

/* ---- events from the child ---- */

static bool valid_type(const char *t, size_t n) {
        if (n == 0 || n > 32)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((t[i] >= 'a' && t[i] <= 'z') || t[i] == '_'))
                        return false;
        return true;
}

static void child_line(struct slot *sl, char *line) {
        struct loadsup *s = sl->sup;
        char name[128], type[48];
        int64_t now = now_ns(CLOCK_MONOTONIC);

        /* What a generator reports while we stop it (its command killed, its connections
         * closed) is the stop itself, not news. */
        if (sl->state == SLOT_STOPPING || sl->retired) {
                log_debug("Load %s while stopping: %s", sl->spec->info->name, line);
                return;
        }

        /* A child cannot flood the database: a small burst, then one per refill period. */
        while (sl->ev_tokens < EVENT_BURST && now - sl->ev_refill_mono >= EVENT_REFILL_NS) {
                sl->ev_tokens++;
                sl->ev_refill_mono += EVENT_REFILL_NS;
        }
        if (sl->ev_tokens >= EVENT_BURST)
                sl->ev_refill_mono = now;
        if (sl->ev_tokens == 0) {
                sl->ev_suppressed++;
                return;
        }
        sl->ev_tokens--;

        char *sp = strchr(line, ' ');
        size_t tl = sp ? (size_t) (sp - line) : strlen(line);
        int64_t value = -1;
        const char *msg = "";
        if (sp) {
                char *end;
                value = strtoll(sp + 1, &end, 10);
                msg = *end == ' ' ? end + 1 : end;
        }
        /* "exit" is ours (the supervisor's own load_exit): a child cannot report it. */
        if (!valid_type(line, tl) || (tl == 4 && strncmp(line, "exit", 4) == 0)) {
                snprintf(type, sizeof(type), "load_message");
                msg = line;
                value = -1;
        } else
                snprintf(type, sizeof(type), "load_%.*s", (int) tl, line);
        slot_name(sl, name, sizeof(name));
        if (sl->ev_suppressed > 0) {
                emit(s, type, value, "%s: %s (%" PRIu64 " earlier events not recorded)", name, msg,
                     sl->ev_suppressed);
                sl->ev_suppressed = 0;
        } else
                emit(s, type, value, "%s: %s", name, msg);
        log_info("Load %s: %s %s", name, type, msg);
}

static void drain_events(struct slot *sl) {
        for (;;) {
                if (sl->ev_fd < 0)
                        return;
                ssize_t n = read(sl->ev_fd, sl->evbuf + sl->evlen,
                                 sizeof(sl->evbuf) - 1 - sl->evlen);
                if (n <= 0) {
                        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                                sl->ev_src = sd_event_source_disable_unref(sl->ev_src);
                                close(sl->ev_fd);
                                sl->ev_fd = -1;
                        }
                        return;
                }
                sl->evlen += (size_t) n;
                char *start = sl->evbuf, *nl;
                while ((nl = memchr(start, '\n', (size_t) (sl->evbuf + sl->evlen - start)))) {
                        *nl = 0;
                        /* A NUL inside the line ends it early, nothing worse. */
                        child_line(sl, start);
                        start = nl + 1;
                }
                sl->evlen -= (size_t) (start - sl->evbuf);
                memmove(sl->evbuf, start, sl->evlen);
                if (sl->evlen == sizeof(sl->evbuf) - 1) /* a line too long: cut it */
                        sl->evlen = 0;
        }
}

static int on_child_event(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        drain_events(userdata);
        return 0;
}

/* ---- starting and stopping ---- */

static int slot_spawn(struct slot *sl);

static int on_restart_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct slot *sl = userdata;
        sl->timer = sd_event_source_disable_unref(sl->timer);
        if (sl->state != SLOT_BACKOFF)
                return 0;
        (void) slot_spawn(sl);
        return 0;
}

static void arm_timer(struct slot *sl, uint64_t after_ns, sd_event_time_handler_t cb) {
        sl->timer = sd_event_source_disable_unref(sl->timer);
        int r = sd_event_add_time_relative(sl->sup->event, &sl->timer, CLOCK_MONOTONIC,
                                           after_ns / 1000, 1000, cb, sl);
        if (r < 0)
                /* The next interval boundary looks at slots without a timer. */
                log_error_errno(r, "Cannot arm a load timer: %m");
}

static void schedule_restart(struct slot *sl) {
        sl->state = SLOT_BACKOFF;
        arm_timer(sl, sl->backoff_ns, on_restart_timer);
}

static void describe_status(const siginfo_t *si, char *buf, size_t len) {
        if (si->si_code == CLD_EXITED)
                snprintf(buf, len, "exited with status %d", si->si_status);
        else
                snprintf(buf, len, "killed by signal %d (%s)%s", si->si_status,
                         sigdescr_np(si->si_status) ?: "unknown signal",
                         si->si_code == CLD_DUMPED ? ", core dumped" : "");
}

static void remove_retired(struct loadsup *s, struct slot *sl) {
        for (size_t i = 0; i < s->nretired; i++)
                if (s->retired[i] == sl) {
                        s->retired[i] = s->retired[--s->nretired];
                        break;
                }
        slot_free(sl);
}

/* The child is a zombie now: its PID (and so its process group ID) cannot be reused until we
 * reap it, which makes killing what is left of its group safe. */
static void slot_reap(struct slot *sl) {
        struct loadsup *s = sl->sup;
        siginfo_t si = {};
        int64_t now = now_ns(CLOCK_MONOTONIC);
        char name[128], how[128];

        (void) kill(-sl->pid, SIGKILL);
        if (waitid(P_PID, (id_t) sl->pid, &si, WEXITED) < 0)
                log_warning_errno(negative_errno(), "waitid(%d): %m", (int) sl->pid);
        drain_events(sl);
        close_child_fds(sl);
        sl->timer = sd_event_source_disable_unref(sl->timer);
        if (!sl->retired) {
                sl->up_acc_ns += (uint64_t) MAX(0, now - sl->up_from_mono);
                sl->exits++;
        }
        sl->pid = 0;

        if (sl->state == SLOT_STOPPING || sl->retired) {
                sl->state = SLOT_DONE;
                if (sl->retired)
                        remove_retired(s, sl);
                return;
        }

        /* It died on its own: record it and restart it with backoff. */
        uint64_t ran = (uint64_t) (now - sl->started_mono);
        if ((int64_t) ran >= HEALTHY_NS && (int64_t) ran >= 2 * (int64_t) sl->backoff_ns)
                sl->backoff_ns = s->p.restart_delay_ns;
        describe_status(&si, how, sizeof(how));
        slot_name(sl, name, sizeof(name));
        char ranbuf[TIMESPAN_MAX_LEN], delay[TIMESPAN_MAX_LEN];
        bool unsupported = si.si_code == CLD_EXITED && si.si_status == EXIT_UNAVAILABLE;
        /* "Cannot run here" may be passing (a port still held by the loads of the scenario
         * that just ended): the usual backoff, which grows if it persists. */
        uint64_t wait = sl->backoff_ns;
        emit(s, "load_exit", si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status,
             "%s (pid %d) %s after %s%s; restarting in %s", name, (int) si.si_pid, how,
             format_timespan(ranbuf, ran / NSEC_PER_MSEC * NSEC_PER_MSEC),
             unsupported ? " (cannot run here)" : "", format_timespan(delay, wait));
        log_warning("Load %s %s; restarting in %s", name, how, delay);
        sl->state = SLOT_BACKOFF;
        arm_timer(sl, wait, on_restart_timer);
        sl->backoff_ns = MIN(sl->backoff_ns * 2, s->p.restart_delay_max_ns);
}

static int on_child_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        slot_reap(userdata);
        return 0;
}

/* Could not start or watch the child: try again after the backoff. */
static int spawn_failed(struct slot *sl, int r, const char *what) {
        struct loadsup *s = sl->sup;
        char name[128], delay[TIMESPAN_MAX_LEN];
        slot_name(sl, name, sizeof(name));
        emit(s, "load_exit", -1, "%s: %s: %s; retrying in %s", name, what, strerror(-r),
             format_timespan(delay, sl->backoff_ns));
        log_error("Load %s: %s: %s; retrying in %s", name, what, strerror(-r), delay);
        schedule_restart(sl);
        sl->backoff_ns = MIN(sl->backoff_ns * 2, s->p.restart_delay_max_ns);
        return r;
}

static int slot_spawn(struct slot *sl) {
        struct loadsup *s = sl->sup;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        int evp[2] = { -1, -1 }, r;
        char parent[32], nice[32], name[128];
        size_t n = 0, nwords = 0;

        while (sl->argv[nwords])
                nwords++;
        _cleanup_free_ char **argv = calloc(nwords + 16, sizeof(char *));
        if (!argv)
                return spawn_failed(sl, -ENOMEM, "cannot start it");
        if (pipe2(evp, O_CLOEXEC) < 0)
                return spawn_failed(sl, negative_errno(), "cannot create its event pipe");
        snprintf(parent, sizeof(parent), "%d", (int) getpid());
        snprintf(nice, sizeof(nice), "%d", s->p.nice);
        argv[n++] = (char *) s->p.helper;
        argv[n++] = "--supervised";
        argv[n++] = "--stats-fd=3";
        argv[n++] = "--events-fd=4";
        argv[n++] = "--parent";
        argv[n++] = parent;
        argv[n++] = "--nice";
        argv[n++] = nice;
        if (s->p.user && *s->p.user) {
                argv[n++] = "--user";
                argv[n++] = (char *) s->p.user;
        }
        for (size_t i = 0; i < nwords; i++)
                argv[n++] = sl->argv[i];
        argv[n] = NULL;

        /* The child gets: stdin and stdout on /dev/null, our stderr (the journal), the
         * statistics area as fd 3, the event pipe as fd 4, and nothing else; its own process
         * group, default signal handling, an empty signal mask, and normal scheduling. */
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, sl->shm_fd, 3);
        posix_spawn_file_actions_adddup2(&fa, evp[1], 4);
        posix_spawn_file_actions_addclosefrom_np(&fa, 5);
        posix_spawnattr_init(&attr);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        sigdelset(&all, SIGKILL);
        sigdelset(&all, SIGSTOP);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setpgroup(&attr, 0);
        struct sched_param sp = { .sched_priority = 0 };
        posix_spawnattr_setschedpolicy(&attr, SCHED_OTHER);
        posix_spawnattr_setschedparam(&attr, &sp);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                                POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSCHEDULER |
                                                POSIX_SPAWN_USEVFORK);
        pid_t pid;
        r = -posix_spawn(&pid, s->p.helper, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        close(evp[1]);
        if (r < 0) {
                char what[4200];
                close(evp[0]);
                snprintf(what, sizeof(what), "cannot start %s", s->p.helper);
                return spawn_failed(sl, r, what);
        }

        sl->pid = pid;
        sl->ev_fd = evp[0];
        sl->pidfd = pidfd_open(pid, 0);
        r = sl->pidfd < 0 ? negative_errno() : 0;
        (void) fcntl(sl->ev_fd, F_SETFL, O_NONBLOCK);
        if (r >= 0)
                r = sd_event_add_io(s->event, &sl->exit_src, sl->pidfd, EPOLLIN, on_child_exit, sl);
        if (r >= 0)
                r = sd_event_add_io(s->event, &sl->ev_src, sl->ev_fd, EPOLLIN, on_child_event, sl);
        if (r < 0) {
                /* Not watched, it would be neither restarted nor reaped: end it now. */
                (void) kill(-pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                sl->pid = 0;
                close_child_fds(sl);
                return spawn_failed(sl, r, "cannot watch it");
        }
        sl->state = SLOT_RUNNING;
        sl->started_mono = now_ns(CLOCK_MONOTONIC);
        sl->up_from_mono = sl->started_mono;
        sl->starts++;
        slot_name(sl, name, sizeof(name));
        log_debug("Started load %s as pid %d", name, (int) pid);
        return 0;
}

static int slot_new(struct loadsup *s, const struct loadgen_spec *spec, size_t idx,
                    int64_t now_mono, struct slot **ret) {
        char err[LOADGEN_ERROR_MAX];
        struct slot *sl = calloc(1, sizeof(*sl));
        if (!sl)
                return -ENOMEM;
        *sl = (struct slot){ .sup = s,
                             .spec = spec,
                             .idx = idx,
                             .shm_fd = -1,
                             .pidfd = -1,
                             .ev_fd = -1,
                             .ev_tokens = EVENT_BURST,
                             .ev_refill_mono = now_mono,
                             .backoff_ns = s->p.restart_delay_ns,
                             .up_from_mono = now_mono,
                             .last_mono = now_mono };
        int r = loadgen_split(spec->text, &sl->argv, err);
        if (r < 0) {
                log_error("Load %s: %s", spec->text, err);
                goto fail;
        }
        /* Sealed at its size: a child cannot shrink it under our reads (SIGBUS). */
        sl->shm_fd = memfd_create("rtsoak-load-stats", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (sl->shm_fd < 0 || ftruncate(sl->shm_fd, sizeof(struct loadgen_shm)) < 0 ||
            fcntl(sl->shm_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
                r = log_error_errno(negative_errno(), "Cannot create a statistics area: %m");
                goto fail;
        }
        sl->shm = mmap(NULL, sizeof(*sl->shm), PROT_READ | PROT_WRITE, MAP_SHARED, sl->shm_fd, 0);
        if (sl->shm == MAP_FAILED) {
                r = log_error_errno(negative_errno(), "Cannot map a statistics area: %m");
                goto fail;
        }
        sl->shm->magic = LOADGEN_SHM_MAGIC;
        *ret = sl;
        return 0;
fail:
        slot_free(sl);
        return r;
}

static void slot_terminate(struct slot *sl);

static int on_kill_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct slot *sl = userdata;
        sl->timer = sd_event_source_disable_unref(sl->timer);
        if (sl->pid > 0) {
                log_warning("Load %s (pid %d) did not stop within %" PRIu64 " ms; killing it",
                            sl->spec->info->name, (int) sl->pid,
                            sl->sup->p.stop_grace_ns / NSEC_PER_MSEC);
                (void) kill(-sl->pid, SIGKILL);
        }
        return 0;
}

static void slot_terminate(struct slot *sl) {
        if (sl->state == SLOT_RUNNING && sl->pid > 0) {
                (void) kill(-sl->pid, SIGTERM);
                sl->state = SLOT_STOPPING;
                arm_timer(sl, sl->sup->p.stop_grace_ns, on_kill_timer);
        } else if (sl->state != SLOT_RUNNING && sl->state != SLOT_STOPPING) {
                sl->timer = sd_event_source_disable_unref(sl->timer);
                sl->state = SLOT_DONE;
        }
}

int loadsup_new(sd_event *e, const struct loadsup_params *p, int64_t now_mono,
                struct loadsup **ret) {
        struct loadsup *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        /* Whatever a generator leaves orphaned (a command's background job that left its
         * process group, workers of a generator that was killed) becomes our child instead of
         * init's, and loadsup_sweep() ends it. */
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                log_warning_errno(negative_errno(),
                                  "Cannot become a child subreaper (%m): processes that "
                                  "generators orphan would not be cleaned up");
        s->event = sd_event_ref(e);
        s->p = *p;
        *ret = s;
        return 0;
}

static void retire_current(struct loadsup *s) {
        for (size_t i = 0; i < s->nslots; i++) {
                struct slot *sl = s->slots[i];
                slot_terminate(sl);
                if (sl->state == SLOT_DONE) {
                        slot_free(sl);
                        continue;
                }
                struct slot **a = realloc(s->retired, (s->nretired + 1) * sizeof(*a));
                if (!a) {
                        /* Cannot track it: wait for it here rather than lose it. */
                        if (sl->pid > 0) {
                                (void) kill(-sl->pid, SIGKILL);
                                slot_reap(sl);
                        }
                        slot_free(sl);
                        continue;
                }
                s->retired = a;
                sl->retired = true;
                s->retired[s->nretired++] = sl;
        }
        free(s->slots);
        s->slots = NULL;
        s->nslots = 0;
}

int loadsup_set_scenario(struct loadsup *s, const struct scenario *sc, int64_t now_mono) {
        int r = 0;
        retire_current(s);
        s->scenario = sc;
        if (!sc || sc->nloads == 0)
                return 0;
        s->slots = calloc(sc->nloads, sizeof(*s->slots));
        if (!s->slots)
                return -ENOMEM;
        for (size_t i = 0; i < sc->nloads; i++) {
                r = slot_new(s, &sc->loads[i], i, now_mono, &s->slots[s->nslots]);
                if (r < 0)
                        break;
                s->nslots++;
        }
        for (size_t i = 0; i < s->nslots; i++)
                (void) slot_spawn(s->slots[i]); /* a failure is retried with backoff */
        return r;
}

const struct scenario *loadsup_scenario(const struct loadsup *s) {
        return s->scenario;
}

void loadsup_stop(struct loadsup *s) {
        retire_current(s);
}

static bool pid_is_slot(struct slot **v, size_t n, pid_t pid) {
        for (size_t i = 0; i < n; i++)
                if (v[i]->pid == pid)
                        return true;
        return false;
}

/* Ends (or reaps) pid, a child of ours that is none of our generators. */
static size_t sweep_one(pid_t pid) {
        char path[64], buf[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = 0;
        char *p = strrchr(buf, ')'), state;
        int ppid;
        if (!p || sscanf(p + 2, "%c %d", &state, &ppid) != 2 || ppid != getpid())
                return 0;
        size_t n = 0;
        /* Our child, so its PID cannot be reused before we reap it. */
        if (state != 'Z') {
                log_warning("Ending process %d, left behind by a load generator", (int) pid);
                (void) kill(pid, SIGKILL);
                n++;
        }
        (void) waitpid(pid, NULL, state == 'Z' ? 0 : WNOHANG);
        return n;
}

/* Our children as the kernel lists them per thread (/proc/self/task/TID/children): a few
 * small files instead of every process on the machine.  -ENOENT without
 * CONFIG_PROC_CHILDREN. */
static int sweep_children(struct loadsup *s, size_t *ret) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        size_t n = 0;
        int r = 0;
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[96], buf[4096];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/proc/self/task/%.20s/children", de->d_name);
                FILE *f = fopen(path, "re");
                if (!f) {
                        r = -errno;
                        break;
                }
                size_t len = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[len] = 0;
                char *save = NULL;
                for (char *tok = strtok_r(buf, " \n", &save); tok;
                     tok = strtok_r(NULL, " \n", &save)) {
                        pid_t pid = (pid_t) atoi(tok);
                        if (pid > 0 && !pid_is_slot(s->slots, s->nslots, pid) &&
                            !pid_is_slot(s->retired, s->nretired, pid))
                                n += sweep_one(pid);
                }
        }
        closedir(d);
        *ret = n;
        return r;
}

static size_t sweep_now(struct loadsup *s) {
        size_t n = 0;
        s->last_sweep_mono = now_ns(CLOCK_MONOTONIC);
        if (sweep_children(s, &n) >= 0)
                return n;
        /* No per-thread children lists: look at every process. */
        DIR *d = opendir("/proc");
        struct dirent *de;
        if (!d)
                return n;
        while ((de = readdir(d))) {
                pid_t pid = (pid_t) atoi(de->d_name);
                if (pid <= 0 || pid_is_slot(s->slots, s->nslots, pid) ||
                    pid_is_slot(s->retired, s->nretired, pid))
                        continue;
                n += sweep_one(pid);
        }
        closedir(d);
        return n;
}

size_t loadsup_sweep(struct loadsup *s) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (s->last_sweep_mono > 0 && now - s->last_sweep_mono < (int64_t) SWEEP_MIN_GAP_NS)
                return 0;
        return sweep_now(s);
}

void loadsup_free(struct loadsup *s) {
        if (!s)
                return;
        retire_current(s);
        /* Wait for every child: SIGKILL to the groups of those still there after the grace. */
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t) s->p.stop_grace_ns;
        int64_t give_up = deadline + 5 * (int64_t) NSEC_PER_SEC;
        bool killed = false;
        while (s->nretired > 0) {
                if (now_ns(CLOCK_MONOTONIC) >= give_up) {
                        /* Stuck in the kernel (a hung disk): do not hang with it. */
                        for (size_t i = 0; i < s->nretired; i++) {
                                log_error("Load process %d did not end 5 s after SIGKILL; "
                                          "leaving it",
                                          (int) s->retired[i]->pid);
                                s->retired[i]->pid = 0;
                        }
                        while (s->nretired > 0)
                                remove_retired(s, s->retired[0]);
                        break;
                }
                struct slot *sl = s->retired[0];
                if (sl->pid <= 0) {
                        remove_retired(s, sl);
                        continue;
                }
                siginfo_t si = {};
                if (waitid(P_PID, (id_t) sl->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                    si.si_pid == sl->pid) {
                        slot_reap(sl); /* removes it */
                        continue;
                }
                if (!killed && now_ns(CLOCK_MONOTONIC) >= deadline) {
                        for (size_t i = 0; i < s->nretired; i++)
                                if (s->retired[i]->pid > 0)
                                        (void) kill(-s->retired[i]->pid, SIGKILL);
                        killed = true;
                }
                struct timespec ts = { 0, 5 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        /* Orphans of the generators, now children of ours: end and reap them. */
        for (int i = 0; i < 100 && sweep_now(s) > 0; i++) {
                struct timespec ts = { 0, 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        free(s->retired);
        sd_event_unref(s->event);
        free(s);
}

void loadsup_snapshot(struct loadsup *s, int64_t at_mono, int64_t now_mono,
                      struct load_record *rec) {
        rec->scenario = s->scenario ? s->scenario->name : NULL;
        rec->nloads = 0;
        for (size_t i = 0; i < s->nslots && i < SCENARIO_LOADS_MAX; i++) {
                struct slot *sl = s->slots[i];
                const struct loadgen_info *info = sl->spec->info;
                if (sl->state == SLOT_BACKOFF && !sl->timer)
                        (void) slot_spawn(sl); /* its restart timer could not be armed */
                /* Counters are read now, which may be later than the boundary at_mono when
                 * the main loop was held up: the part before the boundary goes into this
                 * record, in proportion to the time (the rate is the same either way). */
                int64_t span = now_mono - sl->last_mono, part = at_mono - sl->last_mono;
                double frac = span > 0 ? (double) MAX(part, 0) / (double) span : 1.0;
                if (frac > 1.0)
                        frac = 1.0;
                uint64_t up = sl->up_acc_ns;
                if (sl->state == SLOT_RUNNING)
                        up += (uint64_t) MAX(0, now_mono - sl->up_from_mono);
                uint64_t up_part = MIN((uint64_t) ((double) up * frac), (uint64_t) MAX(part, 0));
                struct store_interval_load *l = &rec->loads[rec->nloads];
                *l = (struct store_interval_load){
                        .generator = info->name,
                        .up_ns = up_part,
                        .starts = sl->starts,
                        .exits = sl->exits,
                        .metrics = rec->metrics[rec->nloads],
                        .nmetrics = MIN(info->nmetrics, (size_t) LOADGEN_MAX_METRICS),
                };
                for (size_t m = 0; m < l->nmetrics; m++) {
                        uint64_t cur = atomic_load_explicit(&sl->shm->counters[m],
                                                            memory_order_relaxed);
                        uint64_t delta = loadsup_counter_delta(cur, &sl->last[m]);
                        double rate = span > 0 ? (double) delta * 1e9 / (double) span : 0;
                        rec->metrics[rec->nloads][m] = (struct store_load_metric){
                                .name = info->metrics[m].name,
                                .unit = info->metrics[m].unit,
                                .value = MIN(rate * info->metrics[m].scale, LOADSUP_METRIC_MAX),
                        };
                        sl->last[m] += (uint64_t) ((double) delta * frac);
                }
                rec->nloads++;
                sl->up_acc_ns = up - up_part;
                sl->up_from_mono = now_mono;
                sl->starts = sl->exits = 0;
                sl->last_mono = MAX(at_mono, sl->last_mono);
        }
}

uint64_t loadsup_counter_delta(uint64_t cur, uint64_t *last) {
        if (cur < *last)
                *last = cur;
        return cur - *last;
}

bool loadsup_record_carry(const struct load_record *from, struct load_record *to) {
        bool counts = false;
        for (size_t i = 0; i < from->nloads; i++)
                counts |= from->loads[i].starts > 0 || from->loads[i].exits > 0;
        if (!counts)
                return true;
        if (!from->scenario || !to->scenario || strcmp(from->scenario, to->scenario) != 0 ||
            from->nloads != to->nloads)
                return false;
        for (size_t i = 0; i < from->nloads; i++) {
                if (strcmp(from->loads[i].generator, to->loads[i].generator) != 0)
                        return false;
        }
        for (size_t i = 0; i < from->nloads; i++) {
                to->loads[i].starts += from->loads[i].starts;
                to->loads[i].exits += from->loads[i].exits;
        }
        return true;
}

size_t loadsup_pids(const struct loadsup *s, int *pids, size_t max) {
        size_t n = 0;
        for (size_t i = 0; i < s->nslots && n < max; i++)
                if (s->slots[i]->pid > 0)
                        pids[n++] = s->slots[i]->pid;
        return n;
}
