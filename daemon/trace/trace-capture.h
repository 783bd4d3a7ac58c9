/* SPDX-License-Identifier: MIT */
/* The capture threads, one per probed CPU: woken by its probe after a violation, a CPU's thread
 * copies its trace buffer (frozen by the probe's marker), resumes tracing, analyses the window
 * before the wake-up and keeps the result for the collector, which stores it with its interval.
 * Captures are rate limited per CPU; within a window the worst violations are kept and the others
 * counted. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace-analysis.h"
#include "trace-probe.h"
#include "trace-recorder.h"

#define TRACE_BURST_MAX 16
#define TRACE_NOTICE_MAX 256

/* A probed CPU, as its capture thread sees the probe. */
struct trace_capture_probe {
        int cpu;
        const _Atomic int *tid;    /* the probe thread's id, as trace events name it */
        struct probe_trace *trace; /* what the probe and the capture thread share */
};

struct trace_capture_params {
        struct trace_recorder *recorder; /* its CPUs in the order of probes */
        const struct trace_capture_probe *probes;
        size_t nprobes;
        uint64_t lookback_ns;
        uint64_t rate_interval_ns; /* per CPU, at most rate_burst captures per this window */
        uint32_t rate_burst;
        size_t raw_max;          /* compressed bytes of raw events per capture */
        int64_t mono_to_real_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC */
        int priority;            /* SCHED_FIFO priority while freezing and copying; 0: none */
};

struct trace_capture_result {
        int cpu;
        int64_t due_mono_ns;
        struct trace_analysis analysis; /* time_ns: the due time, wall clock */
        char *analysis_json;            /* its JSON object, compact */
        uint8_t *raw;                   /* zlib of the events' text */
        size_t raw_len, raw_events, raw_dropped;
        /* The events until the capture is handed over: only a capture that is kept (not
         * replaced by a worse one of its window) is written out as text and compressed. */
        struct trace_event *events;
        size_t nevents;
};
void trace_capture_result_free(struct trace_capture_result *r);

struct trace_capture;

/* Arms every probe and starts the thread. */
int trace_capture_start(const struct trace_capture_params *p, struct trace_capture **ret);
/* Disarms the probes, stops the thread and frees what was not taken. */
void trace_capture_stop(struct trace_capture *c);

/* Hands over the captures of violations due before before_mono, oldest first (*ret is
 * malloc'ed, the results are the caller's).  *ret_busy is set while a capture the probes asked
 * for is still being taken. */
int trace_capture_take(struct trace_capture *c, int64_t before_mono,
                       struct trace_capture_result ***ret, size_t *ret_n, bool *ret_busy);

struct trace_capture_stats {
        uint64_t captures; /* taken and kept */
        uint64_t replaced; /* kept, then replaced by a worse one in the same window */
        uint64_t skipped;  /* violations not captured (rate limit, a capture in progress) */
        uint64_t failed;   /* asked for but not usable (the recorder was frozen, a read failed) */
        uint64_t buffer_kib;
};
void trace_capture_get_stats(struct trace_capture *c, struct trace_capture_stats *ret);
/* What the thread has to say (buffer grown, a read failed), one notice at a time; false when
 * there is none.  The thread itself never logs. */
bool trace_capture_notice(struct trace_capture *c, char buf[static TRACE_NOTICE_MAX]);
