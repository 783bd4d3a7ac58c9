/* SPDX-License-Identifier: MIT */
/* What a capture of the flight recorder says about one late wake-up: the timer/IRQ part and the
 * scheduling part of the latency (as rtla timerlat splits them), what ran on the CPU meanwhile,
 * the culprit and a one-line summary; and its JSON form, the same locally, in the summary
 * uploaded to the farm and in the farm's database. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace-event.h"

#define TRACE_CONTRIB_MAX 16 /* contributors kept per capture, the largest */
#define TRACE_CULPRIT_NAME_MAX 64
#define TRACE_POLICY_MAX 16
#define TRACE_SUMMARY_MAX 256
#define TRACE_ERROR_MAX 256

enum trace_culprit_kind {
        TRACE_CULPRIT_UNKNOWN,
        TRACE_CULPRIT_THREAD,
        TRACE_CULPRIT_IRQ,
        TRACE_CULPRIT_SOFTIRQ,
};
/* "unknown", "thread", "irq", "softirq"; and back (-1: none of them). */
const char *trace_culprit_kind_name(int kind);
int trace_culprit_kind_from_name(const char *name);

/* One thing that ran on the CPU between the due time and the probe's switch-in. */
struct trace_contrib {
        uint8_t kind;                      /* enum trace_culprit_kind */
        char name[TRACE_CULPRIT_NAME_MAX]; /* task name, irq handler or vector, softirq */
        int32_t pid;                       /* thread: its pid; else -1 */
        int32_t irq;                       /* irq: its number, -1 for a vector (local_timer) */
        int32_t prio;                      /* thread: the kernel's priority in the trace */
        char policy[TRACE_POLICY_MAX];     /* thread: SCHED_FIFO ...; "" when unknown */
        int32_t priority;                  /* thread: real-time priority, or nice */
        uint64_t duration_ns;
        uint32_t count; /* separate stretches in which it ran */
        bool idle;      /* the idle task: the CPU had nothing to run */
};

struct trace_analysis {
        int cpu;
        int64_t time_ns;     /* when the wake-up was due, wall clock */
        uint64_t latency_ns; /* as the probe measured it */
        /* timer: due time to the probe's timer firing (the hrtimer expiry that woke it);
         * sched: from there to the probe's switch-in; ret: the rest, the probe's own way back
         * to user space and its clock read.  All 0 when the events do not show them. */
        uint64_t timer_ns, sched_ns, return_ns;
        bool timer_seen, switch_seen, marker_seen;
        uint64_t lookback_ns; /* how far before the due time the captured events reach */
        uint32_t nevents;     /* events kept in the capture */
        uint64_t skipped;     /* violations on this CPU not captured since the one before */
        struct trace_contrib culprit;
        struct trace_contrib contribs[TRACE_CONTRIB_MAX]; /* largest first */
        size_t ncontribs;
        uint64_t others_ns; /* what the contributors beyond the kept ones ran */
        char summary[TRACE_SUMMARY_MAX];
};

/* The late wake-up as the probe measured it. */
struct trace_wakeup {
        int cpu;
        int32_t probe_pid;   /* the probe thread's id */
        int64_t due_ns;      /* CLOCK_MONOTONIC, the trace clock */
        uint64_t latency_ns; /* the probe read its clock at due_ns + latency_ns */
};

/* Analyses the events of w's CPU (oldest first).  Threads' policies are guessed from their
 * trace priority; the caller may fill them in better and call trace_analysis_summarize()
 * again.  Returns 0 or -ENOMEM. */
int trace_analyze(const struct trace_event *ev, size_t n, const struct trace_wakeup *w,
                  struct trace_analysis *ret);
/* Picks the culprit among the contributors and writes the one-line summary, e.g.
 * "thread kworker/3:1 (pid 211, SCHED_FIFO 50) ran 412 µs of the 480 µs". */
void trace_analysis_summarize(struct trace_analysis *a);
/* A thread's pid and policy as the summary shows them: "pid 211, SCHED_FIFO 50",
 * "pid 7, SCHED_OTHER nice 0", "pid 9" when the policy is not known. */
void trace_contrib_who(const struct trace_contrib *c, char *buf, size_t size);
/* "412 µs", "4.2 µs", "20.31 ms". */
char *trace_format_span(char buf[static 32], uint64_t ns);

/* The JSON object of an analysis (NULL: out of memory). */
json_t *trace_analysis_to_json(const struct trace_analysis *a);
/* Reads and checks one: every field's type, range and length; on error returns -EBADMSG with
 * the offending field in err ("culprit.kind: ...") or -ENOMEM. */
int trace_analysis_from_json(json_t *o, struct trace_analysis *ret,
                             char err[static TRACE_ERROR_MAX]);
/* The same for one this program stored (the local database, read back): text an earlier
 * version let through is first repaired as text_json_repair() does (o is changed). */
int trace_analysis_from_stored_json(json_t *o, struct trace_analysis *ret,
                                    char err[static TRACE_ERROR_MAX]);
