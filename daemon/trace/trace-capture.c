/* SPDX-License-Identifier: MIT */
/* The capture threads, one per probed CPU and pinned to it: the probe's wake-up of its own
 * CPU's thread is local, so that thread runs as soon as the probe sleeps (a thread woken on
 * another CPU that had gone idle has waited milliseconds for this VM to run that CPU again,
 * with every CPU's recording frozen meanwhile).  A thread waits at a low real-time priority
 * (so that a loaded machine cannot keep the buffers frozen for long), freezes, copies and
 * resumes at that priority, one thread at a time, then analyses at normal priority.  They
 * never log: notices go to the main thread. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"
#include "proc-sched.h"
#include "timeutil.h"
#include "trace-capture.h"
#include "trace-raw.h"
#include "trace-symbols.h"

#define NOTICES_MAX 8
#define CAPTURE_STACK (256 * 1024)

struct cpu_state {
        uint64_t seen;         /* the probe's fired counter, as far as taken */
        int64_t window_end;    /* end of the rate-limit window (monotonic); 0: none open */
        uint64_t window_floor; /* the worst latency handed over within the window */
        struct trace_capture_result *held[TRACE_BURST_MAX];
        size_t nheld;
        uint64_t skipped_seen; /* the probe's skipped counter at its last capture */
        uint32_t taken;        /* captures taken in the window, replaced ones too */
        /* Violations taken but neither kept nor counted by the probe (a capture that could not
         * be made, or one discarded for a worse one in its window): counted as skipped by the
         * next capture kept, so that the captures' skipped counts miss none. */
        uint64_t unsaid;
};

/* Within a window, a worse violation replaces a kept capture; after this many captures (per
 * one kept) the window only counts, so that a run of ever worse violations does not keep
 * the capture thread busy. */
#define WINDOW_TAKES 4

/* The capture thread of probe i. */
struct worker {
        struct trace_capture *c;
        size_t i;
        pthread_t thread;
        bool started;
        int efd;      /* the probe's wake-up */
        int priority; /* 0 once SCHED_FIFO was refused */
};

struct trace_capture {
        struct trace_capture_params p;
        struct trace_capture_probe *probes; /* p.probes: this copy of the caller's */
        struct trace_symbols symbols;
        struct worker *workers;
        _Atomic bool stop;
        _Atomic bool told_priority; /* a refused SCHED_FIFO is told once, not per thread */
        /* The recorder's freeze, hold and copy are one thread's at a time: tracing_on and
         * tracing_cpumask are the instance's. */
        pthread_mutex_t rec_lock;
        bool *held; /* the CPUs being read, under rec_lock */

        pthread_mutex_t lock; /* everything below */
        struct cpu_state *cpu;
        struct trace_capture_result **done;
        size_t ndone, capdone;
        unsigned working; /* threads between taking a violation and keeping its capture */
        char notices[NOTICES_MAX][TRACE_NOTICE_MAX];
        size_t nnotices;
        uint64_t captures, replaced, discarded, failed;
};

void trace_capture_result_free(struct trace_capture_result *r) {
        if (!r)
                return;
        free(r->events);
        free(r->analysis_json);
        free(r->raw);
        free(r);
}

_printf_(2, 3) static void notice(struct trace_capture *c, const char *fmt, ...) {
        va_list ap;
        pthread_mutex_lock(&c->lock);
        if (c->nnotices == NOTICES_MAX) {
                memmove(c->notices[0], c->notices[1], (NOTICES_MAX - 1) * TRACE_NOTICE_MAX);
                c->nnotices--;
        }
        va_start(ap, fmt);
        vsnprintf(c->notices[c->nnotices++], TRACE_NOTICE_MAX, fmt, ap);
        va_end(ap);
        pthread_mutex_unlock(&c->lock);
}

bool trace_capture_notice(struct trace_capture *c, char buf[static TRACE_NOTICE_MAX]) {
        pthread_mutex_lock(&c->lock);
        bool any = c->nnotices > 0;
        if (any) {
                memcpy(buf, c->notices[0], TRACE_NOTICE_MAX);
                memmove(c->notices[0], c->notices[1], (NOTICES_MAX - 1) * TRACE_NOTICE_MAX);
                c->nnotices--;
        }
        pthread_mutex_unlock(&c->lock);
        return any;
}

static void set_realtime(struct worker *w, bool on) {
        if (w->priority <= 0)
                return;
        struct sched_param sp = { .sched_priority = on ? w->priority : 0 };
        int r = pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp);
        if (r != 0 && on) {
                w->priority = 0;
                if (!atomic_exchange(&w->c->told_priority, true))
                        notice(w->c,
                               "the capture threads cannot run at SCHED_FIFO %d (%s): captures "
                               "may come late on a loaded machine",
                               sp.sched_priority, strerror(r));
        }
}

/* ---- the rate limit (all under c->lock) ---- */

static uint64_t lat_of(const struct trace_capture_result *r) {
        return r->analysis.latency_ns;
}

/* The least bad capture held for a CPU. */
static size_t least(const struct cpu_state *st) {
        size_t m = 0;
        for (size_t i = 1; i < st->nheld; i++)
                if (lat_of(st->held[i]) < lat_of(st->held[m]))
                        m = i;
        return m;
}

/* What the probe must exceed to be captured: inside a window, worse than what was handed over
 * and, once the window's captures are all taken, worse than the least bad of them. */
static void update_floor(struct trace_capture *c, size_t i) {
        struct cpu_state *st = &c->cpu[i];
        uint64_t f = 0;
        if (st->window_end) {
                f = st->window_floor;
                if (st->nheld >= c->p.rate_burst)
                        f = MAX(f, lat_of(st->held[least(st)]));
                if (st->taken >= WINDOW_TAKES * c->p.rate_burst)
                        f = UINT64_MAX;
        }
        atomic_store_explicit(&c->p.probes[i].trace->floor_ns, f, memory_order_relaxed);
}

static int push_done(struct trace_capture *c, struct trace_capture_result *r) {
        if (c->ndone == c->capdone) {
                size_t cap = c->capdone ? c->capdone * 2 : 8;
                struct trace_capture_result **a = realloc(c->done, cap * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                c->done = a;
                c->capdone = cap;
        }
        c->done[c->ndone++] = r;
        return 0;
}

/* Hands over the held captures of CPU i that match (all when before is INT64_MAX). */
static void hand_over(struct trace_capture *c, size_t i, int64_t before) {
        struct cpu_state *st = &c->cpu[i];
        for (size_t k = 0; k < st->nheld;) {
                struct trace_capture_result *r = st->held[k];
                if (r->due_mono_ns >= before || push_done(c, r) < 0) {
                        k++;
                        continue;
                }
                st->window_floor = MAX(st->window_floor, lat_of(r));
                c->captures++;
                st->held[k] = st->held[--st->nheld];
        }
}

/* Closes CPU i's window once it has ended. */
static void expire_window(struct trace_capture *c, size_t i, int64_t now) {
        struct cpu_state *st = &c->cpu[i];
        if (!st->window_end || now < st->window_end)
                return;
        hand_over(c, i, INT64_MAX);
        if (st->nheld > 0)
                return; /* out of memory: try again later */
        st->window_end = 0;
        st->window_floor = 0;
        st->taken = 0;
        update_floor(c, i);
}

/* Keeps a finished capture within CPU i's window, or replaces the least bad one there. */
static void keep(struct trace_capture *c, size_t i, struct trace_capture_result *r) {
        struct cpu_state *st = &c->cpu[i];
        expire_window(c, i, now_ns(CLOCK_MONOTONIC));
        if (!st->window_end) {
                st->window_end = r->due_mono_ns + (int64_t) c->p.rate_interval_ns;
                st->window_floor = 0;
                st->taken = 0;
        }
        st->taken++;
        r->analysis.skipped += st->unsaid;
        st->unsaid = 0;
        if (st->nheld < c->p.rate_burst)
                st->held[st->nheld++] = r;
        else {
                size_t m = least(st);
                if (lat_of(r) > lat_of(st->held[m])) {
                        r->analysis.skipped += st->held[m]->analysis.skipped + 1;
                        trace_capture_result_free(st->held[m]);
                        st->held[m] = r;
                        c->replaced++;
                } else {
                        st->unsaid += r->analysis.skipped + 1;
                        trace_capture_result_free(r);
                        c->discarded++;
                }
        }
        update_floor(c, i);
}

/* ---- one capture ---- */

/* The scheduling policy and priority of a thread from /proc, if it is still the same task;
 * otherwise the analysis's guess from the trace stays. */
static void fill_policy(struct trace_contrib *x) {
        if (x->kind == TRACE_CULPRIT_THREAD && x->pid > 0)
                (void) proc_thread_sched(x->pid, x->name, x->policy, sizeof(x->policy),
                                         &x->priority);
}

/* A kept capture's raw events: its text, compressed; the events themselves are let go. */
static void finish(const struct trace_capture *c, struct trace_capture_result *r) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (!r->events)
                return;
        if (trace_raw_text(r->events, r->nevents, r->cpu, r->due_mono_ns, &text, &len) >= 0 &&
            trace_raw_compress(text, len, c->p.raw_max, &r->raw, &r->raw_len, &r->raw_dropped) >= 0)
                r->raw_events = r->nevents;
        free(r->events);
        r->events = NULL;
}

/* How far past a late wake-up the events of a capture without its marker reach: the trace
 * clock and the probe's clock read differ by a few us. */
#define CAPTURE_SLACK_NS 20000

/* The analysis and raw events of CPU i's wake-up due at due, from its marker or, without one,
 * from the events up to the wake-up; NULL when the trace holds nothing of the look-back. */
static struct trace_capture_result *build(struct trace_capture *c, size_t i,
                                          const struct trace_event *ev, size_t n, bool lost,
                                          int64_t oldest, int64_t due, uint64_t lat) {
        const struct trace_capture_probe *p = &c->p.probes[i];
        int32_t tid = atomic_load_explicit(p->tid, memory_order_relaxed);
        ssize_t mark = -1;
        for (size_t k = 0; k < n; k++)
                if (ev[k].kind == TRACE_MARKER && ev[k].pid == tid && ev[k].ts_ns >= due)
                        mark = (ssize_t) k;
        /* No marker: written while another CPU's marker had frozen the instance, before this
         * thread held that CPU apart.  The events up to the wake-up still say what ran
         * before it, and the analysis says the marker is missing. */
        if (mark < 0) {
                ssize_t last = -1;
                for (size_t k = 0; k < n && ev[k].ts_ns <= due + (int64_t) lat + CAPTURE_SLACK_NS;
                     k++)
                        last = (ssize_t) k;
                if (last >= 0 && ev[last].ts_ns >= due - (int64_t) c->p.lookback_ns)
                        mark = last;
        }
        if (mark < 0)
                return NULL;
        size_t from = 0;
        while (from < (size_t) mark && ev[from].ts_ns < due - (int64_t) c->p.lookback_ns)
                from++;
        size_t cnt = (size_t) mark - from + 1;

        struct trace_capture_result *r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->cpu = p->cpu;
        r->due_mono_ns = due;
        struct trace_wakeup w = {
                .cpu = p->cpu, .probe_pid = tid, .due_ns = due, .latency_ns = lat
        };
        r->events = malloc(cnt * sizeof(*r->events));
        if (!r->events || trace_analyze(ev + from, cnt, &w, &r->analysis) < 0) {
                trace_capture_result_free(r);
                return NULL;
        }
        memcpy(r->events, ev + from, cnt * sizeof(*r->events));
        r->nevents = cnt;
        struct trace_analysis *a = &r->analysis;
        a->time_ns = due + c->p.mono_to_real_ns;
        for (size_t k = 0; k < a->ncontribs; k++)
                fill_policy(&a->contribs[k]);
        trace_symbols_name_hrtimers(&c->symbols, a);
        trace_analysis_summarize(a);
        uint64_t sk = atomic_load_explicit(&p->trace->skipped, memory_order_relaxed);
        a->skipped = sk - c->cpu[i].skipped_seen;
        c->cpu[i].skipped_seen = sk;

        /* Events were overwritten and the look-back is not covered: the buffer is too small
         * for what this machine does; make it larger for the next time. */
        if (lost && due - oldest < (int64_t) c->p.lookback_ns) {
                pthread_mutex_lock(&c->lock);
                int64_t kib = trace_recorder_grow(c->p.recorder, i);
                pthread_mutex_unlock(&c->lock);
                if (kib > 0)
                        notice(c,
                               "CPU %d: the trace reached back only %" PRIu64 " us of the "
                               "%" PRIu64 " us look-back; trace buffers grown to %" PRId64
                               " KiB per CPU",
                               p->cpu, a->lookback_ns / 1000, c->p.lookback_ns / 1000, kib);
        }
        return r;
}

/* Freezes the instance (where the marker's trigger did not), lets the other CPUs record
 * again, copies CPU i's look-back and lets CPU i record again; the events into *ev.  Returns
 * the copy's error, or the resumption's in *kon.
 *
 * The marker froze every CPU (tracing_on is the instance's).  CPU i is held apart and the
 * others record again at once, so that a violation of theirs meanwhile keeps its wake-up in
 * their events.  The copy is not under rec_lock: another CPU's thread holds its own CPU too
 * and resumes the rest while this one is read.  Where CPU i cannot be held on its own, every
 * CPU stays frozen (and rec_lock held) until it is read. */
static int freeze_and_copy(struct trace_capture *c, size_t i, uint64_t fired, int64_t due,
                           struct trace_event **ev, size_t *n, bool *lost, int64_t *oldest,
                           int *kon) {
        struct trace_recorder *rec = c->p.recorder;
        struct probe_trace *t = c->p.probes[i].trace;
        pthread_mutex_lock(&c->rec_lock);
        if (!rec->trigger)
                (void) trace_recorder_set_on(rec, false);
        c->held[i] = true;
        bool held = trace_recorder_hold(rec, c->held) >= 0;
        bool resumed = held && trace_recorder_set_on(rec, true) >= 0;
        if (held)
                pthread_mutex_unlock(&c->rec_lock);
        if (resumed) /* the probe need not move this thread any more */
                atomic_store_explicit(&t->resumed, fired, memory_order_release);
        /* Only the look-back is kept; what came before it is read past. */
        int k = trace_recorder_drain(rec, i, due - (int64_t) c->p.lookback_ns, ev, n, lost, oldest);
        if (held)
                pthread_mutex_lock(&c->rec_lock);
        /* This CPU records again.  Once resumed, tracing_on stays as it is: off if another
         * CPU's marker froze the instance meanwhile, for that CPU's capture. */
        c->held[i] = false;
        *kon = held ? trace_recorder_hold(rec, c->held) : 0;
        if (*kon >= 0 && !resumed)
                *kon = trace_recorder_set_on(rec, true);
        pthread_mutex_unlock(&c->rec_lock);
        if (!resumed)
                atomic_store_explicit(&t->resumed, fired, memory_order_release);
        return k;
}

static void capture_one(struct worker *w, uint64_t fired) {
        struct trace_capture *c = w->c;
        size_t i = w->i;
        struct probe_trace *t = c->p.probes[i].trace;
        int64_t due = t->due_ns;
        uint64_t lat = t->latency_ns;
        struct trace_event *ev = NULL;
        size_t n = 0;
        bool lost = false;
        int64_t oldest;
        int kon;

        int k = freeze_and_copy(c, i, fired, due, &ev, &n, &lost, &oldest, &kon);
        set_realtime(w, false);
        struct trace_capture_result *r = NULL;
        if (k < 0 || kon < 0)
                notice(c, "CPU %d: cannot %s the trace: %s", c->p.probes[i].cpu,
                       k < 0 ? "read" : "resume", strerror(-(k < 0 ? k : kon)));
        else
                r = build(c, i, ev, n, lost, oldest, due, lat);
        free(ev);

        pthread_mutex_lock(&c->lock);
        if (r)
                keep(c, i, r);
        else {
                c->failed++;
                c->cpu[i].unsaid++;
        }
        c->working--;
        pthread_mutex_unlock(&c->lock);
        /* Ready for this CPU's next violation. */
        atomic_store_explicit(&t->armed, true, memory_order_release);
        set_realtime(w, true);
}

/* Until CPU i's window ends, or -1: none open. */
static int next_timeout_ms(struct trace_capture *c, size_t i) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_lock(&c->lock);
        int64_t next = c->cpu[i].window_end;
        pthread_mutex_unlock(&c->lock);
        if (!next)
                return -1;
        return next <= now ? 0 : (int) MIN((next - now) / 1000000 + 1, 60000);
}

/* The probe's CPU alone; false if it cannot be put in a set. */
static bool probe_cpu(const struct worker *w, cpu_set_t *set) {
        int cpu = w->c->p.probes[w->i].cpu;
        CPU_ZERO(set);
        if (cpu < 0 || cpu >= CPU_SETSIZE)
                return false;
        CPU_SET(cpu, set);
        return true;
}

/* Back on the probe's CPU (it was pinned there at its start). */
static void pin(struct worker *w) {
        cpu_set_t set;
        if (probe_cpu(w, &set))
                (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *capture_main(void *arg) {
        struct worker *w = arg;
        struct trace_capture *c = w->c;
        size_t i = w->i;
        struct probe_trace *t = c->p.probes[i].trace;
        atomic_store_explicit(&t->capture_tid, (int) gettid(), memory_order_relaxed);
        set_realtime(w, true);
        while (!atomic_load(&c->stop)) {
                /* Moved by the probe while its CPU was kept from this thread: back to it
                 * before waiting, so that the next wake-up is local again. */
                if (atomic_exchange_explicit(&t->moved, false, memory_order_acq_rel))
                        pin(w);
                struct pollfd pfd = { .fd = w->efd, .events = POLLIN };
                if (poll(&pfd, 1, next_timeout_ms(c, i)) > 0) {
                        uint64_t v;
                        (void) !read(w->efd, &v, sizeof(v));
                }
                if (atomic_load(&c->stop))
                        break;
                uint64_t fired = atomic_load_explicit(&c->p.probes[i].trace->fired,
                                                      memory_order_acquire);
                pthread_mutex_lock(&c->lock);
                bool pending = fired != c->cpu[i].seen;
                if (pending) {
                        c->cpu[i].seen = fired;
                        c->working++;
                }
                pthread_mutex_unlock(&c->lock);
                if (pending)
                        capture_one(w, fired);
                pthread_mutex_lock(&c->lock);
                expire_window(c, i, now_ns(CLOCK_MONOTONIC));
                pthread_mutex_unlock(&c->lock);
        }
        atomic_store_explicit(&t->capture_tid, 0, memory_order_relaxed);
        return NULL;
}

/* Probe i's capture thread, on the probe's CPU (anywhere if it cannot be put there), with a
 * small stack: with mlockall(MCL_FUTURE) every byte of it is resident. */
static int start_worker(struct worker *w) {
        int cpu = w->c->p.probes[w->i].cpu;
        cpu_set_t set;
        bool pinnable = probe_cpu(w, &set);
        int r = 0;
        for (int pinned = 1; pinned >= 0; pinned--) {
                pthread_attr_t attr;
                r = -pthread_attr_init(&attr);
                if (r == 0)
                        r = -pthread_attr_setstacksize(&attr, CAPTURE_STACK);
                if (r == 0 && pinned && pinnable)
                        r = -pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
                if (r == 0)
                        r = -pthread_create(&w->thread, &attr, capture_main, w);
                pthread_attr_destroy(&attr);
                if (r == 0)
                        break;
        }
        if (r < 0)
                return r;
        w->started = true;
        char name[16];
        snprintf(name, sizeof(name), cpu < 1000 ? "rtsoak-trace%d" : "rtsoak-tr%d", cpu);
        (void) pthread_setname_np(w->thread, name);
        return 0;
}

int trace_capture_start(const struct trace_capture_params *p, struct trace_capture **ret) {
        struct trace_capture *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->p = *p;
        c->probes = calloc(p->nprobes, sizeof(*c->probes));
        if (c->probes)
                memcpy(c->probes, p->probes, p->nprobes * sizeof(*c->probes));
        c->p.probes = c->probes;
        c->p.rate_burst = MAX(1u, MIN(p->rate_burst, (uint32_t) TRACE_BURST_MAX));
        c->cpu = calloc(p->nprobes, sizeof(*c->cpu));
        c->workers = calloc(p->nprobes, sizeof(*c->workers));
        c->held = calloc(p->nprobes, sizeof(*c->held));
        trace_symbols_init(&c->symbols);
        pthread_mutex_init(&c->rec_lock, NULL);
        pthread_mutex_init(&c->lock, NULL);
        int r = c->probes && c->cpu && c->workers && c->held ? 0 : -ENOMEM;
        for (size_t i = 0; c->workers && i < p->nprobes; i++) {
                c->workers[i] = (struct worker){ .c = c, .i = i, .priority = p->priority };
                c->workers[i].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (c->workers[i].efd < 0 && r == 0)
                        r = -errno;
        }
        /* Where a capture thread may go when its probe's CPU is kept from it: the CPUs this
         * process may use but that one. */
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
                CPU_ZERO(&allowed);
        for (size_t i = 0; r == 0 && i < p->nprobes; i++) {
                struct probe_trace *t = p->probes[i].trace;
                t->marker_fd = p->recorder->marker_fd;
                t->wake_fd = c->workers[i].efd;
                t->elsewhere = allowed;
                if (p->probes[i].cpu >= 0 && p->probes[i].cpu < CPU_SETSIZE)
                        CPU_CLR(p->probes[i].cpu, &t->elsewhere);
                atomic_store(&t->resumed, atomic_load(&t->fired));
                atomic_store(&t->floor_ns, 0);
                atomic_store(&t->armed, true);
                c->cpu[i].seen = atomic_load(&t->fired);
                c->cpu[i].skipped_seen = atomic_load(&t->skipped);
        }
        for (size_t i = 0; r == 0 && i < p->nprobes; i++)
                r = start_worker(&c->workers[i]);
        if (r < 0) {
                trace_capture_stop(c);
                return r;
        }
        *ret = c;
        return 0;
}

void trace_capture_stop(struct trace_capture *c) {
        if (!c)
                return;
        /* The probes stay, disarmed: nothing reads their captures any more, nor may they move
         * a capture thread. */
        for (size_t i = 0; c->probes && i < c->p.nprobes; i++) {
                atomic_store(&c->p.probes[i].trace->armed, false);
                atomic_store(&c->p.probes[i].trace->capture_tid, 0);
        }
        atomic_store(&c->stop, true);
        for (size_t i = 0; c->workers && i < c->p.nprobes; i++) {
                struct worker *w = &c->workers[i];
                uint64_t one = 1;
                if (w->started) {
                        (void) !write(w->efd, &one, sizeof(one));
                        pthread_join(w->thread, NULL);
                }
        }
        for (size_t i = 0; c->workers && i < c->p.nprobes; i++)
                if (c->workers[i].efd >= 0)
                        close(c->workers[i].efd);
        for (size_t i = 0; c->cpu && i < c->p.nprobes; i++)
                for (size_t k = 0; k < c->cpu[i].nheld; k++)
                        trace_capture_result_free(c->cpu[i].held[k]);
        for (size_t i = 0; i < c->ndone; i++)
                trace_capture_result_free(c->done[i]);
        free(c->done);
        free(c->probes);
        free(c->cpu);
        free(c->workers);
        free(c->held);
        trace_symbols_done(&c->symbols);
        pthread_mutex_destroy(&c->rec_lock);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

static int by_due(const void *a, const void *b) {
        const struct trace_capture_result *x = *(const struct trace_capture_result *const *) a,
                                          *y = *(const struct trace_capture_result *const *) b;
        return x->due_mono_ns < y->due_mono_ns ? -1 : x->due_mono_ns > y->due_mono_ns;
}

/* A capture's analysis as the store reads it back.  One that cannot be written as JSON or
 * would not read back (a defect of this code: the store refuses it) is left out with a
 * notice, and counted as failed rather than kept: held, it would keep its interval, and every
 * later one, out of the database. */
static char *analysis_text(struct trace_capture *c, const struct trace_capture_result *r) {
        char err[TRACE_ERROR_MAX] = "out of memory", lat[32];
        _cleanup_free_ struct trace_analysis *back = malloc(sizeof(*back));
        json_t *j = back ? trace_analysis_to_json(&r->analysis) : NULL;
        if (!j && back)
                snprintf(err, sizeof(err), "it cannot be written as JSON");
        int k = j ? trace_analysis_from_json(j, back, err) : -ENOMEM;
        char *text = k >= 0 ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text) {
                notice(c, "CPU %d: the trace capture of a wake-up %s late is left out: %s", r->cpu,
                       trace_format_span(lat, r->analysis.latency_ns), err);
                pthread_mutex_lock(&c->lock);
                c->captures--;
                c->failed++;
                pthread_mutex_unlock(&c->lock);
        }
        return text;
}

int trace_capture_take(struct trace_capture *c, int64_t before_mono,
                       struct trace_capture_result ***ret, size_t *ret_n, bool *ret_busy) {
        struct trace_capture_result **out = NULL;
        size_t n = 0;
        int r = 0;
        pthread_mutex_lock(&c->lock);
        bool busy = c->working > 0;
        for (size_t i = 0; i < c->p.nprobes; i++) {
                if (atomic_load_explicit(&c->p.probes[i].trace->fired, memory_order_acquire) !=
                    c->cpu[i].seen)
                        busy = true;
                hand_over(c, i, before_mono);
                update_floor(c, i);
        }
        if (c->ndone > 0 && !(out = malloc(c->ndone * sizeof(*out))))
                r = -ENOMEM;
        for (size_t k = 0; r >= 0 && k < c->ndone;) {
                if (c->done[k]->due_mono_ns < before_mono) {
                        out[n++] = c->done[k];
                        c->done[k] = c->done[--c->ndone];
                } else
                        k++;
        }
        pthread_mutex_unlock(&c->lock);
        if (r < 0)
                return r;
        if (n > 1)
                qsort(out, n, sizeof(*out), by_due);
        /* The JSON now: a capture replaced within its window added to the skipped count. */
        for (size_t k = 0; k < n; k++) {
                finish(c, out[k]);
                out[k]->analysis_json = analysis_text(c, out[k]);
        }
        *ret = out;
        *ret_n = n;
        *ret_busy = busy;
        return 0;
}

void trace_capture_get_stats(struct trace_capture *c, struct trace_capture_stats *ret) {
        uint64_t sk = 0;
        for (size_t i = 0; i < c->p.nprobes; i++)
                sk += atomic_load_explicit(&c->p.probes[i].trace->skipped, memory_order_relaxed);
        pthread_mutex_lock(&c->lock);
        *ret = (struct trace_capture_stats){
                .captures = c->captures,
                .replaced = c->replaced,
                .skipped = sk + c->replaced + c->discarded,
                .failed = c->failed,
                .buffer_kib = c->p.recorder->buffer_kib,
        };
        pthread_mutex_unlock(&c->lock);
}
