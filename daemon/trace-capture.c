/* SPDX-License-Identifier: MIT */
/* The capture thread.  It waits at a low real-time priority (so that a loaded machine cannot
 * keep the buffers frozen for long), copies and resumes at that priority, then analyses at
 * normal priority.  It never logs: notices go to the main thread. */
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
#include "timeutil.h"
#include "trace-capture.h"
#include "trace-raw.h"

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
};

/* Within a window, a worse violation replaces a kept capture; after this many captures (per
 * one kept) the window only counts, so that a run of ever worse violations does not keep
 * the capture thread busy. */
#define WINDOW_TAKES 4

/* Kernel functions by address (/proc/kallsyms), for the hrtimer callbacks of the analyses. */
#define SYMBOLS_MAX 64
struct symbol {
        uint64_t addr;
        char name[48]; /* "" when kallsyms does not have it (or hides addresses) */
};

struct trace_capture {
        struct trace_capture_params p;
        struct symbol symbols[SYMBOLS_MAX]; /* the capture thread's own */
        size_t nsymbols;
        pthread_t thread;
        bool started;
        int efd;
        _Atomic bool stop;
        int priority; /* 0 once SCHED_FIFO was refused */

        pthread_mutex_t lock; /* everything below */
        struct cpu_state *cpu;
        struct trace_capture_result **done;
        size_t ndone, capdone;
        bool working;
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

static void set_realtime(struct trace_capture *c, bool on) {
        if (c->priority <= 0)
                return;
        struct sched_param sp = { .sched_priority = on ? c->priority : 0 };
        int r = pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp);
        if (r != 0 && on) {
                c->priority = 0;
                notice(c,
                       "the capture thread cannot run at SCHED_FIFO %d (%s): captures may "
                       "come late on a loaded machine",
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
        atomic_store_explicit(&c->p.probes[i]->trace.floor_ns, f, memory_order_relaxed);
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

static void expire_windows(struct trace_capture *c, int64_t now) {
        for (size_t i = 0; i < c->p.nprobes; i++) {
                struct cpu_state *st = &c->cpu[i];
                if (!st->window_end || now < st->window_end)
                        continue;
                hand_over(c, i, INT64_MAX);
                if (st->nheld > 0)
                        continue; /* out of memory: try again later */
                st->window_end = 0;
                st->window_floor = 0;
                st->taken = 0;
                update_floor(c, i);
        }
}

/* Keeps a finished capture within CPU i's window, or replaces the least bad one there. */
static void keep(struct trace_capture *c, size_t i, struct trace_capture_result *r) {
        struct cpu_state *st = &c->cpu[i];
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (st->window_end && now >= st->window_end)
                expire_windows(c, now);
        if (!st->window_end) {
                st->window_end = r->due_mono_ns + (int64_t) c->p.rate_interval_ns;
                st->window_floor = 0;
                st->taken = 0;
        }
        st->taken++;
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
                        trace_capture_result_free(r);
                        c->discarded++;
                }
        }
        update_floor(c, i);
}

/* ---- one capture ---- */

/* The scheduling policy and priority of a thread from /proc, if it is still the same task. */
static void fill_policy(struct trace_contrib *x) {
        static const char *const names[] = { "SCHED_OTHER",   "SCHED_FIFO", "SCHED_RR",
                                             "SCHED_BATCH",   NULL,         "SCHED_IDLE",
                                             "SCHED_DEADLINE" };
        char path[64], buf[1024];
        if (x->kind != TRACE_CULPRIT_THREAD || x->pid <= 0)
                return;
        snprintf(path, sizeof(path), "/proc/%d/stat", x->pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = 0;
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close || close < open)
                return;
        /* A pid used again since is another task. */
        if ((size_t) (close - open - 1) != strlen(x->name) ||
            strncmp(open + 1, x->name, strlen(x->name)) != 0)
                return;
        long v[40] = {};
        size_t n = 0;
        for (char *t = strtok(close + 2, " "); t && n < ELEMENTSOF(v); t = strtok(NULL, " "))
                v[n++] = strtol(t, NULL, 10);
        /* After ")": field 3 is index 0; nice is field 19, rt_priority 40, policy 41. */
        if (n < 39 || v[38] < 0 || v[38] >= (long) ELEMENTSOF(names) || !names[v[38]])
                return;
        snprintf(x->policy, sizeof(x->policy), "%s", names[v[38]]);
        x->priority = (int32_t) (v[38] == 1 || v[38] == 2 ? v[37] : v[16]);
}

/* Looks up the addresses not known yet in one pass over /proc/kallsyms. */
static void learn_symbols(struct trace_capture *c, const uint64_t *want, size_t n) {
        size_t first = c->nsymbols;
        for (size_t i = 0; i < n && c->nsymbols < SYMBOLS_MAX; i++)
                c->symbols[c->nsymbols++] = (struct symbol){ .addr = want[i] };
        if (first == c->nsymbols)
                return;
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[256];
        size_t left = c->nsymbols - first;
        /* "ffffffff8142d170 t hrtimer_wakeup": 120,000 lines here, so only the address is
         * read of each until one matches. */
        while (f && left > 0 && fgets(line, sizeof(line), f)) {
                char *end;
                uint64_t addr = strtoull(line, &end, 16);
                if (!addr || end[0] != ' ' || !end[1] || end[2] != ' ')
                        continue;
                for (size_t i = first; i < c->nsymbols; i++)
                        if (c->symbols[i].addr == addr && !c->symbols[i].name[0]) {
                                snprintf(c->symbols[i].name, sizeof(c->symbols[i].name), "%.*s",
                                         (int) strcspn(end + 3, " \t\n"), end + 3);
                                left--;
                        }
        }
        if (f)
                fclose(f);
}

/* "hrtimer 0xffffffff8142d170" becomes "hrtimer hrtimer_wakeup" where kallsyms tells. */
static void name_hrtimers(struct trace_capture *c, struct trace_analysis *a) {
        uint64_t want[TRACE_CONTRIB_MAX];
        size_t n = 0;
        for (size_t k = 0; k < a->ncontribs; k++) {
                unsigned long long addr;
                if (sscanf(a->contribs[k].name, "hrtimer %llx", &addr) != 1)
                        continue;
                bool known = false;
                for (size_t i = 0; i < c->nsymbols; i++)
                        known |= c->symbols[i].addr == addr;
                if (!known)
                        want[n++] = addr;
        }
        learn_symbols(c, want, n);
        for (size_t k = 0; k < a->ncontribs; k++) {
                unsigned long long addr;
                if (sscanf(a->contribs[k].name, "hrtimer %llx", &addr) != 1)
                        continue;
                for (size_t i = 0; i < c->nsymbols; i++)
                        if (c->symbols[i].addr == addr && c->symbols[i].name[0])
                                snprintf(a->contribs[k].name, sizeof(a->contribs[k].name),
                                         "hrtimer %s", c->symbols[i].name);
        }
}

/* The events' text, one line each, times relative to the due time. */
static int raw_text(const struct trace_event *ev, size_t n, int cpu, int64_t due, char **ret,
                    size_t *ret_len) {
        size_t len = 0;
        char line[512];
        FILE *f = open_memstream(ret, &len);
        if (!f)
                return -ENOMEM;
        int32_t cur = n ? ev[0].pid : -1;
        const char *comm = n ? trace_comm_of(ev, n, cur, NULL) : NULL;
        for (size_t i = 0; i < n; i++) {
                if (ev[i].pid != cur) {
                        /* The task changed without a switch event (leaving the idle task is
                         * not traced by every kernel). */
                        cur = ev[i].pid;
                        comm = trace_comm_of(ev, n, cur, NULL);
                }
                const char *who = comm;
                trace_event_format(&ev[i], cpu, due, who, line, sizeof(line));
                fputs(line, f);
                fputc('\n', f);
                if (ev[i].kind == TRACE_SWITCH) {
                        cur = ev[i].u.sw.next_pid;
                        comm = ev[i].u.sw.next_comm;
                }
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret_len = len;
        return 0;
}

/* A kept capture's raw events: its text, compressed; the events themselves are let go. */
static void finish(const struct trace_capture *c, struct trace_capture_result *r) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (!r->events)
                return;
        if (raw_text(r->events, r->nevents, r->cpu, r->due_mono_ns, &text, &len) >= 0 &&
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
        struct probe *p = c->p.probes[i];
        int32_t tid = atomic_load_explicit(&p->tid, memory_order_relaxed);
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
        name_hrtimers(c, a);
        trace_analysis_summarize(a);
        uint64_t sk = atomic_load_explicit(&p->trace.skipped, memory_order_relaxed);
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

static void capture_one(struct trace_capture *c, size_t i) {
        struct probe_trace *t = &c->p.probes[i]->trace;
        struct trace_recorder *rec = c->p.recorder;
        int64_t due = t->due_ns;
        uint64_t lat = t->latency_ns;
        struct trace_event *ev = NULL;
        size_t n = 0;
        bool lost = false;
        int64_t oldest;

        if (!rec->trigger)
                (void) trace_recorder_set_on(rec, false);
        /* The marker froze every CPU (tracing_on is the instance's): the other CPUs record
         * again while this one is read, so that a violation of theirs meanwhile keeps its
         * wake-up in their events.  Where this CPU cannot be held on its own, all stay frozen
         * until it is read. */
        bool held = trace_recorder_hold(rec, (ssize_t) i) >= 0;
        bool resumed = held && trace_recorder_set_on(rec, true) >= 0;
        /* Only the look-back is kept; what came before it is read past. */
        int k = trace_recorder_drain(rec, i, due - (int64_t) c->p.lookback_ns, &ev, &n, &lost,
                                     &oldest);
        /* This CPU records again.  Once resumed, tracing_on stays as it is: off if another
         * CPU's marker froze the instance meanwhile, for that CPU's capture. */
        int kon = held ? trace_recorder_hold(rec, -1) : 0;
        if (kon >= 0 && !resumed)
                kon = trace_recorder_set_on(rec, true);
        set_realtime(c, false);
        struct trace_capture_result *r = NULL;
        if (k < 0 || kon < 0)
                notice(c, "CPU %d: cannot %s the trace: %s", c->p.probes[i]->cpu,
                       k < 0 ? "read" : "resume", strerror(-(k < 0 ? k : kon)));
        else
                r = build(c, i, ev, n, lost, oldest, due, lat);
        free(ev);

        pthread_mutex_lock(&c->lock);
        if (r)
                keep(c, i, r);
        else
                c->failed++;
        c->working = false;
        pthread_mutex_unlock(&c->lock);
        /* Ready for this CPU's next violation. */
        atomic_store_explicit(&t->armed, true, memory_order_release);
        set_realtime(c, true);
}

static int next_timeout_ms(struct trace_capture *c) {
        int64_t now = now_ns(CLOCK_MONOTONIC), next = INT64_MAX;
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < c->p.nprobes; i++)
                if (c->cpu[i].window_end)
                        next = MIN(next, c->cpu[i].window_end);
        pthread_mutex_unlock(&c->lock);
        if (next == INT64_MAX)
                return -1;
        return next <= now ? 0 : (int) MIN((next - now) / 1000000 + 1, 60000);
}

static void *capture_main(void *arg) {
        struct trace_capture *c = arg;
        set_realtime(c, true);
        while (!atomic_load(&c->stop)) {
                struct pollfd pfd = { .fd = c->efd, .events = POLLIN };
                if (poll(&pfd, 1, next_timeout_ms(c)) > 0) {
                        uint64_t v;
                        (void) !read(c->efd, &v, sizeof(v));
                }
                if (atomic_load(&c->stop))
                        break;
                for (size_t i = 0; i < c->p.nprobes; i++) {
                        uint64_t fired = atomic_load_explicit(&c->p.probes[i]->trace.fired,
                                                              memory_order_acquire);
                        pthread_mutex_lock(&c->lock);
                        bool pending = fired != c->cpu[i].seen;
                        if (pending) {
                                c->cpu[i].seen = fired;
                                c->working = true;
                        }
                        pthread_mutex_unlock(&c->lock);
                        if (pending)
                                capture_one(c, i);
                }
                pthread_mutex_lock(&c->lock);
                expire_windows(c, now_ns(CLOCK_MONOTONIC));
                pthread_mutex_unlock(&c->lock);
        }
        return NULL;
}

int trace_capture_start(const struct trace_capture_params *p, struct trace_capture **ret) {
        struct trace_capture *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->p = *p;
        c->p.rate_burst = MAX(1u, MIN(p->rate_burst, (uint32_t) TRACE_BURST_MAX));
        c->priority = p->priority;
        c->cpu = calloc(p->nprobes, sizeof(*c->cpu));
        c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (!c->cpu || c->efd < 0) {
                int r = c->cpu ? -errno : -ENOMEM;
                if (c->efd >= 0)
                        close(c->efd);
                free(c->cpu);
                free(c);
                return r;
        }
        pthread_mutex_init(&c->lock, NULL);
        for (size_t i = 0; i < p->nprobes; i++) {
                struct probe_trace *t = &p->probes[i]->trace;
                t->marker_fd = p->recorder->marker_fd;
                t->wake_fd = c->efd;
                atomic_store(&t->floor_ns, 0);
                atomic_store(&t->armed, true);
                c->cpu[i].seen = atomic_load(&t->fired);
                c->cpu[i].skipped_seen = atomic_load(&t->skipped);
        }
        /* A small stack: with mlockall(MCL_FUTURE) every byte of it is resident. */
        pthread_attr_t attr;
        int r = -pthread_attr_init(&attr);
        if (r == 0)
                r = -pthread_attr_setstacksize(&attr, CAPTURE_STACK);
        if (r == 0)
                r = -pthread_create(&c->thread, &attr, capture_main, c);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                c->p.nprobes = 0; /* the probes stay armed but nothing reads: disarm */
                for (size_t i = 0; i < p->nprobes; i++)
                        atomic_store(&p->probes[i]->trace.armed, false);
                trace_capture_stop(c);
                return r;
        }
        c->started = true;
        (void) pthread_setname_np(c->thread, "rtsoak-trace");
        *ret = c;
        return 0;
}

void trace_capture_stop(struct trace_capture *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->p.nprobes; i++)
                atomic_store(&c->p.probes[i]->trace.armed, false);
        atomic_store(&c->stop, true);
        if (c->started) {
                uint64_t one = 1;
                (void) !write(c->efd, &one, sizeof(one));
                pthread_join(c->thread, NULL);
        }
        for (size_t i = 0; i < c->p.nprobes; i++)
                for (size_t k = 0; k < c->cpu[i].nheld; k++)
                        trace_capture_result_free(c->cpu[i].held[k]);
        for (size_t i = 0; i < c->ndone; i++)
                trace_capture_result_free(c->done[i]);
        free(c->done);
        free(c->cpu);
        close(c->efd);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

static int by_due(const void *a, const void *b) {
        const struct trace_capture_result *x = *(const struct trace_capture_result *const *) a,
                                          *y = *(const struct trace_capture_result *const *) b;
        return x->due_mono_ns < y->due_mono_ns ? -1 : x->due_mono_ns > y->due_mono_ns;
}

int trace_capture_take(struct trace_capture *c, int64_t before_mono,
                       struct trace_capture_result ***ret, size_t *ret_n, bool *ret_busy) {
        struct trace_capture_result **out = NULL;
        size_t n = 0;
        int r = 0;
        pthread_mutex_lock(&c->lock);
        bool busy = c->working;
        for (size_t i = 0; i < c->p.nprobes; i++) {
                if (atomic_load_explicit(&c->p.probes[i]->trace.fired, memory_order_acquire) !=
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
                json_t *j = trace_analysis_to_json(&out[k]->analysis);
                out[k]->analysis_json = j ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
        }
        *ret = out;
        *ret_n = n;
        *ret_busy = busy;
        return 0;
}

void trace_capture_get_stats(struct trace_capture *c, struct trace_capture_stats *ret) {
        uint64_t sk = 0;
        for (size_t i = 0; i < c->p.nprobes; i++)
                sk += atomic_load_explicit(&c->p.probes[i]->trace.skipped, memory_order_relaxed);
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
