/* SPDX-License-Identifier: MIT */
/* One kernel trace event of the flight recorder, decoded into what the analysis needs, and
 * its one-line text form (the raw events of a capture, as `rtsoak trace ID --raw` prints them). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_COMM_MAX 16 /* the kernel's TASK_COMM_LEN, with the NUL */
#define TRACE_NAME_MAX 32
#define TRACE_TEXT_MAX 112

enum trace_kind {
        TRACE_OTHER,         /* any other event: u.other */
        TRACE_SWITCH,        /* sched:sched_switch */
        TRACE_WAKEUP,        /* sched:sched_wakeup, sched:sched_wakeup_new */
        TRACE_IRQ_ENTRY,     /* irq:irq_handler_entry */
        TRACE_IRQ_EXIT,      /* irq:irq_handler_exit */
        TRACE_SOFTIRQ_ENTRY, /* irq:softirq_entry */
        TRACE_SOFTIRQ_EXIT,  /* irq:softirq_exit */
        TRACE_HRTIMER_ENTRY, /* timer:hrtimer_expire_entry */
        TRACE_HRTIMER_EXIT,  /* timer:hrtimer_expire_exit */
        TRACE_VECTOR_ENTRY, /* irq_vectors:*_entry (x86: local_timer, reschedule ...), ipi:ipi_entry
                             */
        TRACE_VECTOR_EXIT,  /* irq_vectors:*_exit, ipi:ipi_exit */
        TRACE_MARKER,       /* ftrace:print: what the probe wrote into trace_marker */
};

/* common_flags of an event (include/linux/trace_events.h). */
#define TRACE_FLAG_IRQS_OFF 0x01
#define TRACE_FLAG_HARDIRQ 0x08
#define TRACE_FLAG_SOFTIRQ 0x10
#define TRACE_FLAG_NMI 0x40

struct trace_event {
        int64_t ts_ns; /* the instance's trace clock (mono: CLOCK_MONOTONIC) */
        int32_t pid;   /* common_pid: the task that was current on the CPU */
        uint8_t kind;  /* enum trace_kind */
        uint8_t flags; /* common_flags */
        uint8_t preempt;
        union {
                struct {
                        char prev_comm[TRACE_COMM_MAX], next_comm[TRACE_COMM_MAX];
                        int32_t prev_pid, prev_prio, next_pid, next_prio;
                        int64_t prev_state;
                } sw;
                struct {
                        char comm[TRACE_COMM_MAX];
                        int32_t pid, prio, target_cpu;
                        bool new_task;
                } wake;
                struct {
                        int32_t irq, ret; /* ret: exit only */
                        char name[TRACE_NAME_MAX];
                } irq;
                struct {
                        uint32_t vec;
                } softirq;
                struct {
                        uint64_t timer, function;
                } hrtimer;
                struct {
                        char name[TRACE_NAME_MAX]; /* "local_timer", "reschedule", ... */
                        int32_t vector;            /* -1: none given */
                } vector;
                struct {
                        char text[TRACE_TEXT_MAX];
                } marker;
                struct {
                        char name[TRACE_NAME_MAX]; /* "system:event" */
                        char text[TRACE_TEXT_MAX]; /* its fields as "name=value ..." */
                } other;
        } u;
};

/* "NET_RX", "TIMER", ... or NULL for a vector the kernel does not have. */
const char *trace_softirq_name(uint32_t vec);

/* Finds the name of a task by pid among the events (from switches and wake-ups, the latest
 * first); NULL if none names it.  ret_prio (optional) receives its kernel priority there. */
const char *trace_comm_of(const struct trace_event *ev, size_t n, int32_t pid, int32_t *ret_prio);

/* One line for event e on cpu, its time shown in microseconds relative to ref_ns (the due
 * time of the late wake-up), e.g.
 *   "   -12.480 us [001] d.h.  stall-inject-812     irq_handler_entry: irq=11 name=virtio0"
 * comm names the current task (NULL: looked up among ev, else "<...>").  Returns the length
 * snprintf would have written. */
int trace_event_format(const struct trace_event *e, int cpu, int64_t ref_ns, const char *comm,
                       char *buf, size_t size);
