/* SPDX-License-Identifier: MIT */
/* The collector: drains every probe's ring, groups per-CPU slots into intervals that close
 * at the same wall-clock boundary, and stores each interval in one transaction. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "probe.h"
#include "store.h"
#include "trace-capture.h"
#include "watchdog.h"

struct collector_params {
        uint64_t period_ns;
        int64_t base_mono_ns;      /* interval k starts at base + k * period */
        int64_t run_start_mono_ns; /* nothing is recorded before this */
        int64_t mono_to_real_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
        uint64_t threshold_ns;
        uint64_t probe_interval_ns;
        uint32_t hist_limit_us;
        uint64_t grace_ns;  /* how long to wait for a late CPU before writing */
        size_t max_pending; /* slots held per CPU while storage fails */
        /* Optional: fills in what ran during interval k (scenario, loads) just before it is
         * stored; called again if the write fails and is retried.  again: a row of k was
         * stored before (a CPU late past its grace time hands over its slot later). */
        void (*annotate)(void *userdata, uint64_t k, bool again, struct store_interval *iv);
        /* Optional: a row of interval k was stored (annotate's data went into the database;
         * a write that failed and was given up after max_pending is never told). */
        void (*written)(void *userdata, uint64_t k);
        void *userdata;
        /* Optional: marks the storage calls, so that a watchdog can tell a stuck database
         * from a stuck collector. */
        struct heartbeat *storage_beat;
        /* Optional: the flight recorder's captures, stored with the interval their violation
         * was due in (or, if they come later than it, with the next one written). */
        struct trace_capture *traces;
};

struct collector;

int collector_new(const struct collector_params *params, store *st, int64_t run_id,
                  struct probe **probes, size_t nprobes, struct collector **ret);
void collector_free(struct collector *c);

/* Drains the rings and writes every interval that is complete (or whose grace ran out).
 * With final set, writes everything still held (call after all probes are done).
 * Returns the number of intervals written, or a negative errno if storage failed (the data
 * stays held and the next call retries). */
int collector_poll(struct collector *c, int64_t now_mono_ns, bool final);

/* Monotonic time at which the next interval is expected to be complete. */
int64_t collector_next_due(const struct collector *c);

struct collector_stats {
        uint64_t intervals_written;
        uint64_t write_failures;
        uint64_t slots_dropped; /* only when storage failed for longer than max_pending */
        uint64_t last_max_ns;   /* worst latency of the last interval written */
        int last_max_cpu;
        uint64_t total_violations;
};
void collector_get_stats(const struct collector *c, struct collector_stats *ret);

/* A reloaded [Probe] Threshold= (for the messages about violations). */
void collector_set_threshold(struct collector *c, uint64_t threshold_ns);
