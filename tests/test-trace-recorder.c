/* SPDX-License-Identifier: MIT */
/* The flight recorder's instance on the real tracefs (root, a mount namespace of the test's own,
 * two CPUs): a probe's marker freezes every CPU; holding one CPU on its own lets the others
 * record again while it is read, and releasing it lets it record again; the wake-up filter
 * keeps real-time tasks' and the probes' wake-ups and drops the others'. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "macro.h"
#include "trace-recorder.h"

#define TRACEFS_MAGIC 0x74726163

static int64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct pinned {
        int cpu;
        int policy;       /* the sleeper's: SCHED_OTHER or SCHED_FIFO (priority 10) */
        const char *name; /* the sleeper's thread name, or NULL */
        pid_t tid;
        int fd;        /* >= 0: write a marker there once */
        int64_t at_ns; /* just after the marker was written */
};

/* On its CPU: a marker, or a few short sleeps (a context switch each). */
static void *pinned_main(void *arg) {
        struct pinned *p = arg;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->cpu, &set);
        p->tid = gettid();
        if (sched_setaffinity(0, sizeof(set), &set) < 0)
                return NULL;
        if (p->name)
                (void) pthread_setname_np(pthread_self(), p->name);
        if (p->policy == SCHED_FIFO) {
                struct sched_param sp = { .sched_priority = 10 };
                if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                        return NULL;
        }
        if (p->fd >= 0) {
                /* The trigger has frozen the instance when the write returns. */
                (void) !write(p->fd, "rtsoak late test", 16);
                p->at_ns = mono_ns();
                return NULL;
        }
        for (int i = 0; i < 20; i++) {
                struct timespec ms = { 0, 200000 };
                nanosleep(&ms, NULL);
        }
        return NULL;
}

static void on_cpu(int cpu, int fd, int64_t *at_ns) {
        struct pinned p = { .cpu = cpu, .fd = fd };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, pinned_main, &p), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        if (at_ns)
                *at_ns = p.at_ns;
}

/* How many events of probed CPU idx are from after t (the buffer is emptied). */
static size_t events_after(struct trace_recorder *r, size_t idx, int64_t t) {
        struct trace_event *ev = NULL;
        size_t n = 0, after = 0;
        bool lost;
        int64_t oldest;
        assert_int_equal(trace_recorder_drain(r, idx, 0, &ev, &n, &lost, &oldest), 0);
        for (size_t i = 0; i < n; i++)
                after += ev[i].ts_ns > t;
        free(ev);
        return after;
}

static char tracing_on(const struct trace_recorder *r) {
        char path[600], c = '?';
        snprintf(path, sizeof(path), "%s/tracing_on", r->dir);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                (void) !read(fd, &c, 1);
                close(fd);
        }
        return c;
}

/* tracefs of our own, whatever the machine has mounted; false where that cannot be. */
static bool own_tracefs(void) {
        static int done = -1;
        struct statfs sf;
        /* Where tracefs is mounted already (systemd does at boot), a second mount of it there
         * fails: that one is used. */
        if (done < 0)
                done = geteuid() == 0 && sysconf(_SC_NPROCESSORS_ONLN) >= 2 &&
                       unshare(CLONE_NEWNS) >= 0 &&
                       mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) >= 0 &&
                       (mount("nodev", TRACE_DEFAULT_PATH, "tracefs", 0, NULL) >= 0 ||
                        (statfs(TRACE_DEFAULT_PATH, &sf) == 0 &&
                         (uint32_t) sf.f_type == TRACEFS_MAGIC));
        return done;
}

/* A recorder of CPUs 0 and 1 on the test's own tracefs (skipped where there is none). */
static struct trace_recorder *open_recorder(const char *instance, const char *events,
                                            const char *wakeup_filter) {
        static const int cpus[] = { 0, 1 };
        if (!own_tracefs())
                skip();
        struct trace_params p = { .path = TRACE_DEFAULT_PATH,
                                  .instance = instance,
                                  .lookback_ns = 20000000,
                                  .buffer_kib = 512,
                                  .events = events,
                                  .wakeup_filter = wakeup_filter,
                                  .cpus = cpus,
                                  .ncpus = 2 };
        char why[TRACE_WHY_MAX];
        struct trace_recorder *r = NULL;
        if (trace_recorder_open(&p, &r, why) < 0)
                fail_msg("%s", why);
        return r;
}

static void test_hold_one_cpu(void **state) {
        (void) state;
        struct trace_recorder *r = open_recorder("rtsoak-test-hold", "sched:sched_switch", NULL);
        assert_true(r->trigger);

        /* A marker on CPU 0 freezes both CPUs. */
        int64_t t0;
        on_cpu(0, r->marker_fd, &t0);
        assert_int_equal(tracing_on(r), '0');
        on_cpu(1, -1, NULL);
        assert_int_equal(events_after(r, 1, t0), 0);

        /* CPU 0 held on its own: CPU 1 records again, CPU 0 does not. */
        bool hold0[2] = { true, false }, both[2] = { true, true };
        assert_int_equal(trace_recorder_hold(r, hold0), 0);
        assert_int_equal(trace_recorder_set_on(r, true), 0);
        int64_t t1 = mono_ns();
        on_cpu(1, -1, NULL);
        on_cpu(0, -1, NULL);
        assert_true(events_after(r, 1, t1) >= 10);
        assert_int_equal(events_after(r, 0, t0), 0);

        /* Both held: neither records, though tracing is on. */
        assert_int_equal(trace_recorder_hold(r, both), 0);
        int64_t t2 = mono_ns();
        on_cpu(0, -1, NULL);
        on_cpu(1, -1, NULL);
        assert_int_equal(events_after(r, 0, t2), 0);
        assert_int_equal(events_after(r, 1, t2), 0);

        /* Released: both record again. */
        assert_int_equal(trace_recorder_hold(r, NULL), 0);
        int64_t t3 = mono_ns();
        on_cpu(0, -1, NULL);
        on_cpu(1, -1, NULL);
        assert_true(events_after(r, 0, t3) >= 10);
        assert_true(events_after(r, 1, t3) >= 10);

        /* A single probed CPU is never held on its own. */
        struct trace_recorder one = *r;
        one.ncpus = 1;
        assert_int_equal(trace_recorder_hold(&one, hold0), -EOPNOTSUPP);
        trace_recorder_close(r);
}

/* The sched_wakeup events of CPU 1 whose wakee is tid (the buffer is emptied). */
static size_t wakeups_of(struct trace_recorder *r, pid_t tid) {
        struct trace_event *ev = NULL;
        size_t n = 0, found = 0;
        bool lost;
        int64_t oldest;
        assert_int_equal(trace_recorder_drain(r, 1, 0, &ev, &n, &lost, &oldest), 0);
        for (size_t i = 0; i < n; i++)
                found += ev[i].kind == TRACE_WAKEUP && ev[i].u.wake.pid == tid;
        free(ev);
        return found;
}

/* 20 sleeps of a thread on CPU 1: how many of its wake-ups were recorded. */
static size_t sleeper(struct trace_recorder *r, int policy, const char *name) {
        struct pinned p = { .cpu = 1, .fd = -1, .policy = policy, .name = name };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, pinned_main, &p), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        return wakeups_of(r, p.tid);
}

static void test_wakeup_filter(void **state) {
        (void) state;
        struct trace_recorder *r = open_recorder("rtsoak-test-filter", "sched:sched_wakeup",
                                                 TRACE_WAKEUP_FILTER);
        assert_false(r->filter_refused);
        /* An ordinary task's wake-ups are left out; a real-time task's and a probe's (even at
         * an ordinary policy) are kept. */
        assert_int_equal(sleeper(r, SCHED_OTHER, "sleeper"), 0);
        assert_true(sleeper(r, SCHED_FIFO, "sleeper") >= 15);
        assert_true(sleeper(r, SCHED_OTHER, "rtsoak-cpu1") >= 15);
        trace_recorder_close(r);

        /* Without the filter ([Trace] AllWakeups=yes), every one. */
        r = open_recorder("rtsoak-test-filter", "sched:sched_wakeup", NULL);
        assert_true(sleeper(r, SCHED_OTHER, "sleeper") >= 15);
        trace_recorder_close(r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hold_one_cpu),
                cmocka_unit_test(test_wakeup_filter),
        };
        return RUN_TESTS(tests);
}
