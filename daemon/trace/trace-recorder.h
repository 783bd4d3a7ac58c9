/* SPDX-License-Identifier: MIT */
/* The trace flight recorder: a tracefs instance of rtsoakd's own (never the top-level buffer
 * other tools use), per-CPU ring buffers in overwrite mode on the probed CPUs with the events
 * that explain a late wake-up, frozen by the probe's marker and read back per CPU. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "trace-event.h"
#include "trace-format.h"

#define TRACE_WHY_MAX 512
#define TRACE_DEFAULT_PATH "/sys/kernel/tracing"
/* BufferSize=auto: the look-back at this many bytes of events per second and CPU (hackbench on
 * the development VM wrote 2.2 MB/s of events per CPU with the probe's own at 5 kHz on top
 * of it; twice that and a margin), within these bounds. */
#define TRACE_AUTO_BYTES_PER_S (32ull << 20)
#define TRACE_AUTO_MIN_KIB 512
#define TRACE_BUFFER_MAX_KIB (64u << 10)

/* The wake-up filter rtsoakd sets by default: the analysis needs only a probe's own wake-up,
 * and most wake-ups under load are of ordinary tasks (hackbench: some 8,000 a second on two
 * CPUs), so only real-time tasks' (kernel priority below 100) and the probes' (by thread
 * name, as probe.c names them, should one run at an ordinary policy) are recorded. */
#define TRACE_WAKEUP_FILTER "prio < 100 || comm ~ \"rtsoak-cpu*\""

struct trace_params {
        const char *path;     /* where tracefs is mounted */
        const char *instance; /* the instance's name under instances/ */
        uint64_t lookback_ns; /* how far before a late wake-up's due time to keep */
        uint64_t buffer_kib;  /* per probed CPU; 0: sized from the look-back */
        const char *events;   /* "system:event ..." */
        /* A kernel filter for the scheduler's wake-up events (sched_wakeup, sched_wakeup_new,
         * sched_waking); NULL: every wake-up is recorded. */
        const char *wakeup_filter;
        const int *cpus; /* the probed CPUs */
        size_t ncpus;
};

struct trace_recorder {
        char *dir; /* the instance's directory */
        int on_fd, marker_fd, cpumask_fd;
        int *pipe_fds; /* per probed CPU: per_cpu/cpuN/trace_pipe_raw, non-blocking */
        int *cpus;
        size_t ncpus;
        struct trace_formats formats;
        size_t page_size;
        bool trigger; /* a marker turns tracing off by itself (events/ftrace/print/trigger) */
        uint64_t buffer_kib; /* per probed CPU, as set */
        uint64_t total_kib;  /* what the instance holds, all CPUs (buffer_total_size_kb) */
        char missing[256];   /* configured events this kernel does not have */
        bool filter_refused; /* the kernel refused the wake-up filter: all are recorded */
        /* The kernel keeps its pid-to-name cache (saved_cmdlines) up to date at every context
         * switch for an instance created while the top-level option record-cmd was on: false
         * when the instance was created with it off (see make_instance()). */
        bool comm_cache;
        const char *comm_cache_why; /* why it is on (a static string), "" when off */
        /* tracefs was not mounted at the path (nothing was): the recorder mounted it, and
         * leaves it mounted for other tools. */
        bool mounted;
};

/* Whether the kernel offers the timerlat tracer (available_tracers); false when unknown. */
bool trace_kernel_has_timerlat(const char *path);

/* Creates and sets up the instance (a stale one of an earlier rtsoakd is removed first) and
 * starts recording; mounts tracefs at the path first when nothing is mounted there.  On
 * failure returns -errno with one sentence in why saying what is in the way (tracefs not
 * mounted and not mountable, read-only, the instance busy, ...). */
int trace_recorder_open(const struct trace_params *p, struct trace_recorder **ret,
                        char why[static TRACE_WHY_MAX]);
/* Stops recording and removes the instance. */
void trace_recorder_close(struct trace_recorder *r);

/* tracing_on of the instance: 0 freezes every CPU's buffer, 1 resumes. */
int trace_recorder_set_on(struct trace_recorder *r, bool on);
/* Keeps the buffers of the probed CPUs i with held[i] frozen on their own (tracing_cpumask
 * without them), so that the others can record again (trace_recorder_set_on(r, true)) while
 * they are read; held NULL: every probed CPU records.  -EOPNOTSUPP with a single probed
 * CPU. */
int trace_recorder_hold(struct trace_recorder *r, const bool *held);
/* Reads (and so empties) the buffer of probed CPU idx and decodes its events from min_ts on,
 * oldest first, into *ret (malloc'ed).  *ret_lost tells whether events were overwritten before
 * the oldest one, *ret_oldest when that was (INT64_MAX: the buffer was empty). */
int trace_recorder_drain(struct trace_recorder *r, size_t idx, int64_t min_ts,
                         struct trace_event **ret, size_t *ret_n, bool *ret_lost,
                         int64_t *ret_oldest);
/* Doubles the buffer of probed CPU idx, up to TRACE_BUFFER_MAX_KIB; returns the new size in
 * KiB, 0 when at the maximum, or -errno. */
int64_t trace_recorder_grow(struct trace_recorder *r, size_t idx);
