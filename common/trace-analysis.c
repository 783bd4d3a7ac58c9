/* SPDX-License-Identifier: MIT */
/* The analysis of one capture: walks the CPU's events in time order, keeping which task runs
 * and which interrupt or softirq is active, and charges every nanosecond between the due time
 * and the probe's switch-in to what occupied the CPU then. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "text-safe.h"
#include "trace-analysis.h"

#define STACK_MAX 8
/* A wake-up found in the trace counts as the probe's if it is this close before the due time
 * (the hrtimer fires at or after it; the trace clock and the probe's read the same clock). */
#define SLACK_NS 2000
#define PRIO_UNKNOWN INT32_MIN

const char *trace_culprit_kind_name(int kind) {
        static const char *const names[] = { "unknown", "thread", "irq", "softirq" };
        return kind >= 0 && kind < (int) ELEMENTSOF(names) ? names[kind] : "unknown";
}

int trace_culprit_kind_from_name(const char *name) {
        for (int k = TRACE_CULPRIT_UNKNOWN; k <= TRACE_CULPRIT_SOFTIRQ; k++)
                if (strcmp(name, trace_culprit_kind_name(k)) == 0)
                        return k;
        return -1;
}

char *trace_format_span(char buf[static 32], uint64_t ns) {
        if (ns < 10 * 1000)
                snprintf(buf, 32, "%.1f µs", (double) ns / 1e3);
        else if (ns < 10 * 1000 * 1000)
                snprintf(buf, 32, "%" PRIu64 " µs", (ns + 500) / 1000);
        else
                snprintf(buf, 32, "%.2f ms", (double) ns / 1e6);
        return buf;
}

/* What occupies the CPU now: the task, or the innermost interrupt or softirq. */
struct ctx {
        uint8_t kind;
        int32_t irq;
        char name[TRACE_NAME_MAX];
};

struct walk {
        const struct trace_event *ev;
        size_t n;
        int64_t lo, hi; /* the window charged: due time to switch-in */
        int32_t pid, prio;
        const char *comm;
        struct ctx stack[STACK_MAX];
        size_t depth;
        struct trace_contrib *acc;
        size_t nacc, cap;
        struct trace_contrib *last; /* what the previous stretch was charged to */
};

/* A name as the schema takes it: a task's name from the kernel is any bytes, even none, and
 * text_copy_utf8() makes '?' of what the text rule refuses. */
static void set_name(char *dst, const char *src) {
        text_copy_utf8(*src ? src : "<unnamed>", dst, TRACE_CULPRIT_NAME_MAX);
}

static struct trace_contrib *contrib(struct walk *w, uint8_t kind, const char *name, int32_t pid,
                                     int32_t irq) {
        char clean[TRACE_CULPRIT_NAME_MAX];
        set_name(clean, name);
        for (size_t i = 0; i < w->nacc; i++) {
                struct trace_contrib *c = &w->acc[i];
                if (c->kind != kind)
                        continue;
                if (kind == TRACE_CULPRIT_THREAD ? c->pid == pid
                                                 : c->irq == irq && strcmp(c->name, clean) == 0)
                        return c;
        }
        if (w->nacc == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 16;
                struct trace_contrib *a = realloc(w->acc, cap * sizeof(*a));
                if (!a)
                        return NULL;
                w->acc = a;
                w->cap = cap;
        }
        struct trace_contrib *c = &w->acc[w->nacc++];
        *c = (struct trace_contrib){ .kind = kind, .pid = pid, .irq = irq, .prio = PRIO_UNKNOWN };
        memcpy(c->name, clean, sizeof(clean));
        return c;
}

/* Charges [a, b) (within the window) to what occupies the CPU. */
static int charge(struct walk *w, int64_t a, int64_t b) {
        int64_t lo = MAX(a, w->lo), hi = MIN(b, w->hi);
        if (hi <= lo)
                return 0;
        struct trace_contrib *c;
        if (w->depth > 0) {
                const struct ctx *x = &w->stack[w->depth - 1];
                c = contrib(w, x->kind, x->name, -1, x->irq);
        } else {
                char name[TRACE_COMM_MAX + 8];
                if (w->pid == 0)
                        snprintf(name, sizeof(name), "idle");
                else
                        snprintf(name, sizeof(name), "%s", w->comm ?: "<unknown>");
                c = contrib(w, TRACE_CULPRIT_THREAD, name, w->pid, -1);
                if (c) {
                        c->idle = w->pid == 0;
                        if (w->prio != PRIO_UNKNOWN)
                                c->prio = w->prio;
                        if (strcmp(c->name, "<unknown>") == 0 && w->comm)
                                set_name(c->name, w->comm);
                }
        }
        if (!c)
                return -ENOMEM;
        c->duration_ns += (uint64_t) (hi - lo);
        if (c != w->last)
                c->count++;
        w->last = c;
        return 0;
}

static void push(struct walk *w, uint8_t kind, int32_t irq, const char *name) {
        if (w->depth < STACK_MAX)
                w->stack[w->depth] = (struct ctx){ .kind = kind, .irq = irq };
        if (w->depth < STACK_MAX)
                snprintf(w->stack[w->depth].name, TRACE_NAME_MAX, "%s", name);
        w->depth++;
}

static void pop(struct walk *w) {
        /* An exit whose entry came before the first captured event: nothing to pop. */
        if (w->depth > 0)
                w->depth--;
}

static void apply(struct walk *w, const struct trace_event *e) {
        char name[TRACE_NAME_MAX];
        switch (e->kind) {
        case TRACE_SWITCH:
                /* A switch happens in task context: whatever was left open was lost. */
                w->depth = 0;
                w->pid = e->u.sw.next_pid;
                w->prio = e->u.sw.next_prio;
                w->comm = e->u.sw.next_comm;
                break;
        case TRACE_IRQ_ENTRY:
                push(w, TRACE_CULPRIT_IRQ, e->u.irq.irq, e->u.irq.name);
                break;
        case TRACE_VECTOR_ENTRY:
                push(w, TRACE_CULPRIT_IRQ, -1, e->u.vector.name);
                break;
        case TRACE_SOFTIRQ_ENTRY:
                snprintf(name, sizeof(name), "%s", trace_softirq_name(e->u.softirq.vec) ?: "?");
                push(w, TRACE_CULPRIT_SOFTIRQ, -1, name);
                break;
        case TRACE_HRTIMER_ENTRY:
                /* An hrtimer's callback (the tick, a sleeper's wake-up ...), in the hard
                 * interrupt or, for a soft hrtimer, in the softirq; named by its function,
                 * which the caller may turn into a symbol. */
                snprintf(name, sizeof(name), "hrtimer %#" PRIx64, e->u.hrtimer.function);
                push(w,
                     (e->flags & TRACE_FLAG_SOFTIRQ) && !(e->flags & TRACE_FLAG_HARDIRQ)
                             ? TRACE_CULPRIT_SOFTIRQ
                             : TRACE_CULPRIT_IRQ,
                     -1, name);
                break;
        case TRACE_IRQ_EXIT:
        case TRACE_VECTOR_EXIT:
        case TRACE_SOFTIRQ_EXIT:
        case TRACE_HRTIMER_EXIT:
                pop(w);
                break;
        default:
                break;
        }
}

/* The kernel priority of a task as a policy guess: -1 deadline, below 100 real-time, 100 to
 * 139 the others (nice -20 to 19).  Anything else is no kernel priority (a damaged record):
 * no guess. */
static void guess_policy(struct trace_contrib *c) {
        if (c->kind != TRACE_CULPRIT_THREAD || c->idle || c->policy[0] || c->prio < -1 ||
            c->prio > 139)
                return;
        if (c->prio < 0)
                snprintf(c->policy, sizeof(c->policy), "SCHED_DEADLINE");
        else if (c->prio < 100) {
                snprintf(c->policy, sizeof(c->policy), "RT");
                c->priority = 99 - c->prio;
        } else {
                snprintf(c->policy, sizeof(c->policy), "SCHED_OTHER");
                c->priority = c->prio - 120;
        }
}

static int by_duration(const void *a, const void *b) {
        const struct trace_contrib *x = a, *y = b;
        if (x->duration_ns != y->duration_ns)
                return x->duration_ns < y->duration_ns ? 1 : -1;
        return strcmp(x->name, y->name);
}

/* Where the probe's wake-up shows in the events: its switch-in, the wake-up before it and the
 * timer expiry that did it; fills the three parts of the latency. */
static int64_t find_wakeup(const struct trace_event *ev, size_t n, const struct trace_wakeup *w,
                           struct trace_analysis *a) {
        int64_t wake = w->due_ns + (int64_t) w->latency_ns, limit = wake + SLACK_NS;
        ssize_t mark = -1, sw = -1, wk = -1, hr = -1;
        for (size_t i = 0; i < n; i++)
                if (ev[i].kind == TRACE_MARKER && ev[i].pid == w->probe_pid &&
                    ev[i].ts_ns >= w->due_ns)
                        mark = (ssize_t) i;
        if (mark >= 0) {
                a->marker_seen = true;
                limit = ev[mark].ts_ns;
        }
        for (size_t i = 0; i < n && ev[i].ts_ns <= limit; i++)
                if (ev[i].kind == TRACE_SWITCH && ev[i].u.sw.next_pid == w->probe_pid &&
                    ev[i].ts_ns >= w->due_ns - SLACK_NS)
                        sw = (ssize_t) i;
        int64_t end = sw >= 0 ? ev[sw].ts_ns : wake;
        for (ssize_t i = 0; i < (sw >= 0 ? sw : (ssize_t) n) && ev[i].ts_ns <= end; i++)
                if (ev[i].kind == TRACE_WAKEUP && ev[i].u.wake.pid == w->probe_pid &&
                    ev[i].ts_ns >= w->due_ns - SLACK_NS)
                        wk = i;
        for (ssize_t i = wk; i >= 0 && ev[i].ts_ns >= w->due_ns - SLACK_NS; i--)
                if (ev[i].kind == TRACE_HRTIMER_ENTRY) {
                        hr = i;
                        break;
                }
        a->switch_seen = sw >= 0;
        a->timer_seen = wk >= 0;
        /* The trace clock and the probe's clock read are both CLOCK_MONOTONIC, but not read
         * the same way: keep the points in order, so that the parts add up to the latency. */
        int64_t t_end = MIN(MAX(end, w->due_ns), wake);
        if (wk >= 0) {
                int64_t fire = hr >= 0 ? ev[hr].ts_ns : ev[wk].ts_ns;
                fire = MIN(MAX(fire, w->due_ns), t_end);
                a->timer_ns = (uint64_t) (fire - w->due_ns);
                if (sw >= 0)
                        a->sched_ns = (uint64_t) (t_end - fire);
        }
        if (sw >= 0)
                a->return_ns = (uint64_t) (wake - t_end);
        return t_end;
}

int trace_analyze(const struct trace_event *ev, size_t n, const struct trace_wakeup *wu,
                  struct trace_analysis *ret) {
        struct trace_analysis a = { .cpu = wu->cpu,
                                    .latency_ns = wu->latency_ns,
                                    .nevents = (uint32_t) MIN(n, UINT32_MAX) };
        struct walk w = { .ev = ev, .n = n, .lo = wu->due_ns, .pid = -1, .prio = PRIO_UNKNOWN };
        int r = 0;

        w.hi = find_wakeup(ev, n, wu, &a);
        if (n > 0) {
                a.lookback_ns = (uint64_t) MAX(wu->due_ns - ev[0].ts_ns, 0);
                w.pid = ev[0].pid;
                w.comm = trace_comm_of(ev, n, w.pid, &w.prio);
        }
        /* Before the oldest event nothing is known. */
        int64_t first = n > 0 ? ev[0].ts_ns : w.hi;
        if (first > w.lo) {
                struct trace_contrib *c = contrib(&w, TRACE_CULPRIT_UNKNOWN, "not in the trace", -1,
                                                  -1);
                if (!c)
                        return -ENOMEM;
                c->duration_ns = (uint64_t) (MIN(first, w.hi) - w.lo);
                c->count = 1;
        }
        int64_t prev = first;
        for (size_t i = 0; i < n && r >= 0; i++) {
                if (ev[i].pid != w.pid) {
                        /* Another task is current, but no switch to it was traced (this
                         * happens when the CPU leaves the idle task): it took over right
                         * after the event before, which ended the interrupt that woke it. */
                        w.pid = ev[i].pid;
                        w.prio = PRIO_UNKNOWN;
                        w.comm = trace_comm_of(ev, n, w.pid, &w.prio);
                        w.depth = 0;
                }
                r = charge(&w, prev, ev[i].ts_ns);
                apply(&w, &ev[i]);
                prev = MAX(prev, ev[i].ts_ns);
        }
        if (r >= 0)
                r = charge(&w, prev, w.hi);
        if (r < 0) {
                free(w.acc);
                return r;
        }

        qsort(w.acc, w.nacc, sizeof(*w.acc), by_duration);
        for (size_t i = 0; i < w.nacc; i++) {
                guess_policy(&w.acc[i]);
                if (i < TRACE_CONTRIB_MAX)
                        a.contribs[a.ncontribs++] = w.acc[i];
                else
                        a.others_ns += w.acc[i].duration_ns;
        }
        free(w.acc);
        trace_analysis_summarize(&a);
        *ret = a;
        return 0;
}

void trace_contrib_who(const struct trace_contrib *c, char *buf, size_t size) {
        if (!c->policy[0])
                snprintf(buf, size, "pid %d", c->pid);
        else if (strcmp(c->policy, "SCHED_OTHER") == 0 || strcmp(c->policy, "SCHED_BATCH") == 0 ||
                 strcmp(c->policy, "SCHED_IDLE") == 0)
                snprintf(buf, size, "pid %d, %s nice %d", c->pid, c->policy, c->priority);
        else if (strcmp(c->policy, "SCHED_DEADLINE") == 0)
                snprintf(buf, size, "pid %d, %s", c->pid, c->policy);
        else
                snprintf(buf, size, "pid %d, %s %d", c->pid, c->policy, c->priority);
}

void trace_analysis_summarize(struct trace_analysis *a) {
        char d[32], l[32], who[96];
        /* The largest contributor; the idle task is not a culprit: the CPU waited for the
         * timer's interrupt, which came late from below the kernel. */
        a->culprit = (struct trace_contrib){
                .kind = TRACE_CULPRIT_UNKNOWN, .pid = -1, .irq = -1, .prio = PRIO_UNKNOWN
        };
        if (a->ncontribs > 0)
                a->culprit = a->contribs[0];
        struct trace_contrib *c = &a->culprit;
        trace_format_span(d, c->duration_ns);
        trace_format_span(l, a->latency_ns);
        if (a->ncontribs == 0) {
                set_name(c->name, "no events");
                snprintf(a->summary, sizeof(a->summary),
                         "unknown: the trace holds no events of this wake-up (%s late)", l);
        } else if (c->kind == TRACE_CULPRIT_THREAD && c->idle) {
                c->kind = TRACE_CULPRIT_UNKNOWN;
                c->pid = -1;
                set_name(c->name, "idle");
                snprintf(a->summary, sizeof(a->summary),
                         "unknown: the CPU was idle %s of the %s (the timer interrupt came late: "
                         "hardware, firmware or hypervisor)",
                         d, l);
        } else if (c->kind == TRACE_CULPRIT_THREAD) {
                trace_contrib_who(c, who, sizeof(who));
                snprintf(a->summary, sizeof(a->summary), "thread %s (%s) ran %s of the %s", c->name,
                         who, d, l);
        } else if (c->kind == TRACE_CULPRIT_IRQ && c->irq >= 0)
                snprintf(a->summary, sizeof(a->summary), "irq %d (%s) ran %s of the %s", c->irq,
                         c->name, d, l);
        else if (c->kind == TRACE_CULPRIT_IRQ)
                snprintf(a->summary, sizeof(a->summary), "irq %s ran %s of the %s", c->name, d, l);
        else if (c->kind == TRACE_CULPRIT_SOFTIRQ)
                snprintf(a->summary, sizeof(a->summary), "softirq %s ran %s of the %s", c->name, d,
                         l);
        else
                snprintf(a->summary, sizeof(a->summary),
                         "unknown: %s of the %s came before the oldest traced event (look-back "
                         "too short, or events lost)",
                         d, l);
}
