/* SPDX-License-Identifier: MIT */
/* The probe thread.  Between two wake-ups it only calls clock_nanosleep() and
 * clock_gettime() and writes its own slot: no locks, no allocation, no other system call,
 * so that what it measures is the kernel's latency and not ours.  Only after a wake-up over
 * the threshold, once the sample is taken, may it write twice more: the flight recorder's
 * marker and its CPU's capture thread's wake-up. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "interval.h"
#include "probe.h"

int probe_new(int cpu, const struct probe_params *params, const struct probe_control *ctl,
              struct probe **ret) {
        struct probe *p;
        int r = posix_memalign((void **) &p, 64, sizeof(*p));
        if (r != 0)
                return -r;
        memset(p, 0, sizeof(*p));
        p->cpu = cpu;
        p->params = *params;
        p->ctl = ctl;
        atomic_init(&p->head, 0);
        atomic_init(&p->tail, 0);
        atomic_init(&p->state, PROBE_STARTING);
        atomic_init(&p->progress, 0);
        atomic_init(&p->recent_max_ns, 0);
        p->trace.marker_fd = p->trace.wake_fd = -1;
        atomic_init(&p->trace.armed, false);
        atomic_init(&p->trace.floor_ns, 0);
        atomic_init(&p->trace.fired, 0);
        atomic_init(&p->trace.resumed, 0);
        atomic_init(&p->trace.capture_tid, 0);
        atomic_init(&p->trace.moved, false);
        atomic_init(&p->trace.skipped, 0);
        atomic_init(&p->tid, 0);

        /* Each slot carries a whole histogram; keep a CPU's ring near 4 MiB at most, with
         * room for at least one closed interval beside the one being filled. */
        size_t slot_bytes = sizeof(struct probe_slot) +
                            hist_nbuckets(params->hist_limit_us) * sizeof(uint64_t);
        size_t n = (4u << 20) / slot_bytes;
        p->nslots = n < 2 ? 2 : n > 8 ? 8 : n;
        *ret = p;
        return 0;
}

void probe_free(struct probe *p) {
        if (!p)
                return;
        free(p->slots);
        free(p->hist_mem);
        free(p);
}

static int fail(struct probe *p, int error, const char *stage) {
        p->error = error;
        p->stage = stage;
        atomic_store_explicit(&p->state, PROBE_FAILED, memory_order_release);
        return error;
}

static void slot_open(struct probe_slot *s, uint64_t k, int64_t start) {
        s->first_k = s->last_k = k;
        s->start_mono_ns = start;
        s->min_ns = UINT64_MAX;
        s->max_time_mono_ns = start;
}

/* Producer: publish the current slot if the one after it is free.  Wait-free. */
static bool ring_publish(struct probe *p, uint64_t head) {
        uint64_t tail = atomic_load_explicit(&p->tail, memory_order_acquire);
        if (head + 1 - tail >= p->nslots)
                return false;
        atomic_store_explicit(&p->head, head + 1, memory_order_release);
        return true;
}

struct probe_slot *probe_peek(struct probe *p) {
        uint64_t tail = atomic_load_explicit(&p->tail, memory_order_relaxed);
        uint64_t head = atomic_load_explicit(&p->head, memory_order_acquire);
        if (tail == head)
                return NULL;
        return &p->slots[tail % p->nslots];
}

void probe_release(struct probe *p) {
        uint64_t tail = atomic_load_explicit(&p->tail, memory_order_relaxed);
        struct probe_slot *s = &p->slots[tail % p->nslots];
        uint64_t *hist = s->hist;
        memset(hist, 0, hist_nbuckets(p->params.hist_limit_us) * sizeof(uint64_t));
        memset(s, 0, sizeof(*s));
        s->hist = hist;
        atomic_store_explicit(&p->tail, tail + 1, memory_order_release);
}

static inline struct timespec ts_of(int64_t ns) {
        return (struct timespec){ .tv_sec = ns / (int64_t) NSEC_PER_SEC,
                                  .tv_nsec = ns % (int64_t) NSEC_PER_SEC };
}

static inline int64_t mono_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * (int64_t) NSEC_PER_SEC + ts.tv_nsec;
}

int probe_alloc_ring(struct probe *p) {
        size_t nb = hist_nbuckets(p->params.hist_limit_us);
        /* Each slot's histogram starts on its own cache line, so the collector clearing one
         * never shares a line with the probe filling the next. */
        size_t stride = (nb * sizeof(uint64_t) + 63) / 64 * 64 / sizeof(uint64_t);

        if (posix_memalign((void **) &p->slots, 64, p->nslots * sizeof(struct probe_slot)) != 0 ||
            posix_memalign((void **) &p->hist_mem, 64, p->nslots * stride * sizeof(uint64_t)) != 0)
                return -ENOMEM;
        memset(p->slots, 0, p->nslots * sizeof(struct probe_slot));
        memset(p->hist_mem, 0, p->nslots * stride * sizeof(uint64_t));
        for (size_t i = 0; i < p->nslots; i++)
                p->slots[i].hist = p->hist_mem + i * stride;
        return 0;
}

static int setup(struct probe *p) {
        const struct probe_params *pp = &p->params;
        cpu_set_t set;
        int r;

        CPU_ZERO(&set);
        CPU_SET(p->cpu, &set);
        r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        if (r != 0)
                return fail(p, -r, "affinity");

        struct sched_param sp = { .sched_priority = pp->priority };
        r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
        if (r != 0)
                return fail(p, -r, "scheduler");

        /* Allocated and zeroed here, on the probed CPU, so that the pages come from its
         * NUMA node and are resident (and locked, with mlockall) before the first sample. */
        if (probe_alloc_ring(p) < 0)
                return fail(p, -ENOMEM, "memory");

        /* Touch the stack we may use, so no page fault lands inside a measurement. */
        if (pp->stack_prefault > 0) {
                volatile unsigned char *buf = alloca(pp->stack_prefault);
                for (size_t i = 0; i < pp->stack_prefault; i += 4096)
                        buf[i] = 0;
        }
        return 0;
}

/* After a violation, outside the measurement: asks the flight recorder for a capture, or
 * counts the violation as not captured.  The marker write stops the trace (its trigger), so
 * the buffers hold what led up to this wake-up; this CPU's capture thread reads them. */
static void trace_fire(struct probe *p, int64_t due, uint64_t lat) {
        struct probe_trace *t = &p->trace;
        if (!atomic_load_explicit(&t->armed, memory_order_acquire) ||
            lat <= atomic_load_explicit(&t->floor_ns, memory_order_relaxed)) {
                atomic_fetch_add_explicit(&t->skipped, 1, memory_order_relaxed);
                return;
        }
        atomic_store_explicit(&t->armed, false, memory_order_relaxed);
        t->due_ns = due;
        t->latency_ns = lat;
        t->asked_ns = due + (int64_t) lat;
        atomic_fetch_add_explicit(&t->fired, 1, memory_order_release);
        char buf[96];
        int n = snprintf(buf, sizeof(buf), "rtsoak late cpu=%d due=%lld latency=%llu", p->cpu,
                         (long long) due, (unsigned long long) lat);
        uint64_t one = 1;
        /* Failures are seen by the capture thread: no marker in the trace. */
        (void) !write(t->marker_fd, buf, (size_t) n);
        (void) !write(t->wake_fd, &one, sizeof(one));
}

/* While the capture asked for has not resumed the recording: after PROBE_RESCUE_NS, its
 * thread may run on the other CPUs.  The thread is pinned here and this probe is running, so
 * it is not running itself: moving it does not wait for it. */
static void trace_rescue(struct probe *p, int64_t now) {
        struct probe_trace *t = &p->trace;
        if (atomic_load_explicit(&t->resumed, memory_order_acquire) ==
            atomic_load_explicit(&t->fired, memory_order_relaxed)) {
                t->asked_ns = 0;
                return;
        }
        if (now - t->asked_ns < PROBE_RESCUE_NS)
                return;
        t->asked_ns = 0;
        int tid = atomic_load_explicit(&t->capture_tid, memory_order_relaxed);
        if (tid > 0 && CPU_COUNT(&t->elsewhere) > 0 &&
            sched_setaffinity(tid, sizeof(t->elsewhere), &t->elsewhere) == 0)
                atomic_store_explicit(&t->moved, true, memory_order_release);
}

/* Until the main thread says go (false: it said stop first).  Not measuring yet: a plain
 * sleep is fine. */
static bool wait_for_go(struct probe *p) {
        while (!atomic_load_explicit(&p->ctl->go, memory_order_acquire)) {
                if (atomic_load_explicit(&p->ctl->stop, memory_order_relaxed))
                        return false;
                struct timespec ms = { 0, 1000000 };
                nanosleep(&ms, NULL);
        }
        return true;
}

/* What the loop carries from one wake-up to the next besides the deadline.  The helpers that
 * take it are inlined, so it stays in registers as plain locals would. */
struct cursor {
        uint64_t head;           /* slots published */
        struct probe_slot *slot; /* the one being filled */
        int64_t boundary;        /* the end of its interval */
        uint64_t threshold_ns;   /* a later wake-up is a violation */
        uint32_t limit_us;       /* the histogram's */
};

/* Test-only (RTSOAKD_TEST_HANG=probe): stop turning, as a stuck probe would, until told to
 * stop.  Out of line: only an interval boundary ever calls it. */
__attribute__((noinline, cold)) static void test_hang(const struct probe *p) {
        while (!atomic_load_explicit(&p->ctl->stop, memory_order_relaxed)) {
                struct timespec ms = { 0, 10 * 1000 * 1000 };
                nanosleep(&ms, NULL);
        }
}

/* The first wake-up due in a new interval, once per interval and never per sample: the slot
 * filled so far is published (or, with the ring full, goes on collecting: nothing is lost),
 * and what the main thread changed for the next interval is read.  False when the probe is to
 * stop turning here (the test fault, checked at this boundary only). */
__attribute__((always_inline)) static inline bool cross_boundary(struct probe *p, struct cursor *c,
                                                                 int64_t next) {
        const int64_t period = (int64_t) p->params.period_ns, base = p->params.base_mono_ns;
        /* The sample belongs to the interval its wake-up was due in. */
        uint64_t nk = interval_index(base, period, next);
        int64_t nstart = interval_start(base, period, nk);
        c->slot->last_k = nk - 1;
        c->slot->end_mono_ns = nstart;
        if (ring_publish(p, c->head)) {
                c->head++;
                c->slot = &p->slots[c->head % p->nslots];
                slot_open(c->slot, nk, nstart);
        } else
                c->slot->ring_full++;
        c->boundary = nstart + period;
        atomic_store_explicit(&p->open_max_ns, 0, memory_order_relaxed);
        uint64_t t = atomic_load_explicit(&p->ctl->threshold_ns, memory_order_relaxed);
        if (t)
                c->threshold_ns = t;
        if (_unlikely_(atomic_load_explicit(&p->ctl->test_hang_cpu, memory_order_relaxed) ==
                       p->cpu + 1)) {
                test_hang(p);
                return false;
        }
        return true;
}

/* One wake-up due at next, lat late, into the open slot. */
__attribute__((always_inline)) static inline void take_sample(struct probe *p,
                                                              const struct cursor *c, int64_t next,
                                                              uint64_t lat) {
        struct probe_slot *slot = c->slot;
        slot->samples++;
        slot->sum_ns += lat;
        if (lat < slot->min_ns)
                slot->min_ns = lat;
        if (lat > slot->max_ns) {
                slot->max_ns = lat;
                slot->max_time_mono_ns = next;
                atomic_store_explicit(&p->open_max_ns, lat, memory_order_relaxed);
        }
        slot->hist[hist_index(c->limit_us, lat)]++;
        if (_unlikely_(lat > c->threshold_ns)) {
                if (slot->nviol < PROBE_VIOL_MAX)
                        slot->viol[slot->nviol++] = (struct probe_violation){ next, lat };
                slot->violations++;
                if (p->trace.wake_fd >= 0)
                        trace_fire(p, next, lat);
        }
}

/* The cyclictest loop, from go until told to stop, the run's end or a clock failure; returns
 * the deadline it stopped at, with the slot it was filling in *ret.  Its state is a local of its
 * own (no pointer to it leaves the inlined helpers), and it is a function of its own: what
 * probe_thread_main() keeps around it takes no register from the loop (69 instructions a
 * wake-up on x86-64 with GCC 12, against 78 with the loop inside probe_thread_main()). */
__attribute__((noinline)) static int64_t measure(struct probe *p, struct cursor *ret) {
        const int64_t interval = (int64_t) p->params.interval_ns;
        int64_t next = mono_now() + interval;
        int64_t end = atomic_load_explicit(&p->ctl->end_mono_ns, memory_order_relaxed);
        if (end <= 0)
                end = INT64_MAX;
        uint64_t k = interval_index(p->params.base_mono_ns, (int64_t) p->params.period_ns, next);
        struct cursor cur = {
                .slot = &p->slots[0],
                .boundary = interval_start(p->params.base_mono_ns, (int64_t) p->params.period_ns,
                                           k + 1),
                .threshold_ns = p->params.threshold_ns,
                .limit_us = p->params.hist_limit_us,
        };
        slot_open(cur.slot, k, next - interval);

        for (;;) {
                struct timespec ts = ts_of(next);
                int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                if (_unlikely_(r != 0)) {
                        if (r == EINTR)
                                continue;
                        /* clock_nanosleep returns the error; errno is not set.  The state
                         * says FAILED only once the final slot is out (publish_final()): the
                         * main thread joins on it. */
                        p->error = -r;
                        p->stage = "clock";
                        break;
                }
                int64_t now = mono_now();
                /* An absolute sleep never returns early; clamp anyway rather than wrap. */
                uint64_t lat = _likely_(now >= next) ? (uint64_t) (now - next) : 0;

                if (_unlikely_(next >= cur.boundary) && !cross_boundary(p, &cur, next))
                        break;
                take_sample(p, &cur, next, lat);
                if (_unlikely_(p->trace.asked_ns))
                        trace_rescue(p, now);
                if (_unlikely_(lat >= (uint64_t) interval)) {
                        /* Whole periods slept through: count them and move on, rather than
                         * firing a burst of catch-up wake-ups that would measure nothing. */
                        uint64_t missed = interval_missed(lat, (uint64_t) interval);
                        /* Not the periods due after the run's end (a stall across it). */
                        if (_unlikely_(next + (int64_t) missed * interval > end))
                                missed = (uint64_t) ((end - next) / interval);
                        cur.slot->missed += missed;
                        next += (int64_t) missed * interval;
                }
                atomic_store_explicit(&p->progress, cur.slot->samples, memory_order_relaxed);
                if (_unlikely_(lat > atomic_load_explicit(&p->recent_max_ns, memory_order_relaxed)))
                        atomic_store_explicit(&p->recent_max_ns, lat, memory_order_relaxed);

                if (_unlikely_(atomic_load_explicit(&p->ctl->stop, memory_order_relaxed)))
                        break;
                if (_unlikely_(next > end - interval))
                        break;
                next += interval;
        }
        *ret = cur;
        return next;
}

/* Publish what was measured last; wait for room if need be: we are not measuring any more,
 * and the collector drains until every probe is done. */
static void publish_final(struct probe *p, const struct cursor *c, int64_t next) {
        c->slot->last_k = interval_index(p->params.base_mono_ns, (int64_t) p->params.period_ns,
                                         next);
        c->slot->end_mono_ns = next;
        c->slot->final = true;
        while (!ring_publish(p, c->head)) {
                struct timespec ms = { 0, 1000000 };
                nanosleep(&ms, NULL);
        }
}

static void *probe_thread_main(void *arg) {
        struct probe *p = arg;
        struct cursor c;

        atomic_store_explicit(&p->tid, (int) gettid(), memory_order_relaxed);
        if (setup(p) < 0)
                return NULL;
        atomic_store_explicit(&p->state, PROBE_READY, memory_order_release);
        if (!wait_for_go(p)) {
                atomic_store_explicit(&p->state, PROBE_DONE, memory_order_release);
                return NULL;
        }
        atomic_store_explicit(&p->state, PROBE_RUNNING, memory_order_release);
        int64_t next = measure(p, &c);
        publish_final(p, &c, next);
        atomic_store_explicit(&p->state, p->error ? PROBE_FAILED : PROBE_DONE,
                              memory_order_release);
        return NULL;
}

int probe_start(struct probe *p) {
        pthread_attr_t attr;
        int r;

        r = pthread_attr_init(&attr);
        if (r != 0)
                return -r;
        /* A known stack size keeps locked memory small and lets us prefault all we use. */
        r = pthread_attr_setstacksize(&attr, 256 * 1024);
        if (r == 0)
                r = pthread_create(&p->thread, &attr, probe_thread_main, p);
        pthread_attr_destroy(&attr);
        if (r != 0)
                return -r;
        p->thread_started = true;
        /* Named for top -H, ps -L and /proc: "rtsoak-cpu3" is the probe of CPU 3. */
        char name[16];
        snprintf(name, sizeof(name), "rtsoak-cpu%d", p->cpu);
        (void) pthread_setname_np(p->thread, name);
        return 0;
}

int probe_join(struct probe *p) {
        if (!p->thread_started)
                return 0;
        int r = pthread_join(p->thread, NULL);
        p->thread_started = false;
        return -r;
}
