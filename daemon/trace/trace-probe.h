/* SPDX-License-Identifier: MIT */
/* Where a probe thread meets the flight recorder: what it shares with its CPU's capture
 * thread, the only trace state a probe touches (and only after a violation). */
#pragma once

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

/* The trace flight recorder's side of a probe, touched only after a violation: the probe writes
 * a marker into the instance's trace_marker (whose trigger freezes the buffers) and wakes its
 * CPU's capture thread, unless a capture is still pending or the violation is no worse than
 * the rate limit asks for (floor_ns); then it only counts it.
 *
 * The capture thread is pinned to the probe's CPU.  Should a real-time task above it (but
 * below the probe) keep that CPU busy, the thread could not run, and every CPU's recording
 * would stay frozen: after PROBE_RESCUE_NS the probe lets it run on the other CPUs
 * (elsewhere); the thread comes back once it has resumed the recording (moved). */
#define PROBE_RESCUE_NS (2 * 1000 * 1000)
struct probe_trace {
        int marker_fd, wake_fd;    /* -1: no flight recorder */
        _Atomic bool armed;        /* the capture thread takes this CPU's next capture */
        _Atomic uint64_t floor_ns; /* a violation must be later than this to be captured */
        _Atomic uint64_t fired;    /* captures asked for; due_ns and latency_ns: the last */
        _Atomic uint64_t resumed;  /* the last of them whose capture resumed the recording */
        _Atomic uint64_t skipped;  /* violations not captured */
        int64_t due_ns;
        uint64_t latency_ns;
        int64_t asked_ns;        /* the probe's own: when it asked, 0 once resumed or moved */
        _Atomic int capture_tid; /* the capture thread; 0: none */
        _Atomic bool moved;      /* the probe let the capture thread run elsewhere */
        cpu_set_t elsewhere;     /* the CPUs it may then run on (none: stays) */
} _cacheline_aligned_;
