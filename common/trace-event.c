/* SPDX-License-Identifier: MIT */
/* The text form of flight-recorder events: close to what the kernel's own "trace" file shows,
 * with times relative to the late wake-up's due time, so that a person reads the story. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "trace-event.h"

const char *trace_softirq_name(uint32_t vec) {
        static const char *const names[] = { "HI",       "TIMER",   "NET_TX", "NET_RX",  "BLOCK",
                                             "IRQ_POLL", "TASKLET", "SCHED",  "HRTIMER", "RCU" };
        return vec < ELEMENTSOF(names) ? names[vec] : NULL;
}

const char *trace_comm_of(const struct trace_event *ev, size_t n, int32_t pid, int32_t *ret_prio) {
        int32_t prio;
        const char *comm = NULL;
        for (size_t i = n; i-- > 0 && !comm;) {
                const struct trace_event *e = &ev[i];
                if (e->kind == TRACE_SWITCH && e->u.sw.next_pid == pid) {
                        comm = e->u.sw.next_comm;
                        prio = e->u.sw.next_prio;
                } else if (e->kind == TRACE_SWITCH && e->u.sw.prev_pid == pid) {
                        comm = e->u.sw.prev_comm;
                        prio = e->u.sw.prev_prio;
                } else if (e->kind == TRACE_WAKEUP && e->u.wake.pid == pid) {
                        comm = e->u.wake.comm;
                        prio = e->u.wake.prio;
                }
        }
        if (comm && ret_prio)
                *ret_prio = prio;
        return comm;
}

/* The task state letters of sched_switch's prev_state. */
static const char *state_text(int64_t st, char buf[static 16]) {
        static const char letters[] = "SDTtXZPI";
        size_t n = 0;
        if ((st & 0xff) == 0)
                return "R";
        for (int i = 0; i < 8 && n < 14; i++)
                if (st & (1 << i)) {
                        if (n)
                                buf[n++] = '|';
                        buf[n++] = letters[i];
                }
        buf[n] = 0;
        return buf;
}

static int body(const struct trace_event *e, char *buf, size_t size) {
        char st[16];
        const char *sn;
        switch (e->kind) {
        case TRACE_SWITCH:
                return snprintf(buf, size,
                                "sched_switch: prev_comm=%s prev_pid=%d prev_prio=%d "
                                "prev_state=%s ==> next_comm=%s next_pid=%d next_prio=%d",
                                e->u.sw.prev_comm, e->u.sw.prev_pid, e->u.sw.prev_prio,
                                state_text(e->u.sw.prev_state, st), e->u.sw.next_comm,
                                e->u.sw.next_pid, e->u.sw.next_prio);
        case TRACE_WAKEUP:
                return snprintf(buf, size, "%s: comm=%s pid=%d prio=%d target_cpu=%03d",
                                e->u.wake.new_task ? "sched_wakeup_new" : "sched_wakeup",
                                e->u.wake.comm, e->u.wake.pid, e->u.wake.prio,
                                e->u.wake.target_cpu);
        case TRACE_IRQ_ENTRY:
                return snprintf(buf, size, "irq_handler_entry: irq=%d name=%s", e->u.irq.irq,
                                e->u.irq.name);
        case TRACE_IRQ_EXIT:
                return snprintf(buf, size, "irq_handler_exit: irq=%d ret=%s", e->u.irq.irq,
                                e->u.irq.ret ? "handled" : "unhandled");
        case TRACE_SOFTIRQ_ENTRY:
        case TRACE_SOFTIRQ_EXIT:
                sn = trace_softirq_name(e->u.softirq.vec);
                return snprintf(buf, size, "softirq_%s: vec=%u [action=%s]",
                                e->kind == TRACE_SOFTIRQ_ENTRY ? "entry" : "exit", e->u.softirq.vec,
                                sn ?: "?");
        case TRACE_HRTIMER_ENTRY:
                return snprintf(buf, size,
                                "hrtimer_expire_entry: hrtimer=%#" PRIx64 " function=%#" PRIx64,
                                e->u.hrtimer.timer, e->u.hrtimer.function);
        case TRACE_HRTIMER_EXIT:
                return snprintf(buf, size, "hrtimer_expire_exit: hrtimer=%#" PRIx64,
                                e->u.hrtimer.timer);
        case TRACE_VECTOR_ENTRY:
        case TRACE_VECTOR_EXIT:
                if (e->u.vector.vector >= 0)
                        return snprintf(buf, size, "%s_%s: vector=%d", e->u.vector.name,
                                        e->kind == TRACE_VECTOR_ENTRY ? "entry" : "exit",
                                        e->u.vector.vector);
                return snprintf(buf, size, "%s_%s", e->u.vector.name,
                                e->kind == TRACE_VECTOR_ENTRY ? "entry" : "exit");
        case TRACE_MARKER:
                return snprintf(buf, size, "tracing_mark_write: %s", e->u.marker.text);
        default:
                return snprintf(buf, size, "%s: %s", e->u.other.name, e->u.other.text);
        }
}

int trace_event_format(const struct trace_event *e, int cpu, int64_t ref_ns, const char *comm,
                       char *buf, size_t size) {
        /* Latency-format flags like the kernel's: irqs off, and the context. */
        char fl[5] = "....";
        if (e->flags & TRACE_FLAG_IRQS_OFF)
                fl[0] = 'd';
        if (e->flags & TRACE_FLAG_NMI)
                fl[1] = 'Z';
        else if ((e->flags & TRACE_FLAG_HARDIRQ) && (e->flags & TRACE_FLAG_SOFTIRQ))
                fl[1] = 'H';
        else if (e->flags & TRACE_FLAG_HARDIRQ)
                fl[1] = 'h';
        else if (e->flags & TRACE_FLAG_SOFTIRQ)
                fl[1] = 's';
        if (e->preempt & 0xf)
                fl[2] = "0123456789abcdef"[e->preempt & 0xf];
        int64_t rel = e->ts_ns - ref_ns;
        uint64_t mag = (uint64_t) (rel < 0 ? -rel : rel);
        char who[TRACE_COMM_MAX + 16];
        snprintf(who, sizeof(who), "%s-%d", e->pid == 0 ? "<idle>" : comm ?: "<...>", e->pid);
        int n = snprintf(buf, size, "%c%7" PRIu64 ".%03" PRIu64 " us [%03d] %s %-22s ",
                         rel < 0 ? '-' : '+', mag / 1000, mag % 1000, cpu, fl, who);
        if (n < 0)
                return n;
        int m = body(e, (size_t) n < size ? buf + n : NULL, (size_t) n < size ? size - n : 0);
        return m < 0 ? m : n + m;
}
