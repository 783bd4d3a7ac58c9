/* SPDX-License-Identifier: MIT */
/* The latency probe: one pinned SCHED_FIFO thread per CPU running the cyclictest loop, and
 * the wait-free single-producer/single-consumer ring through which it hands closed
 * intervals to the collector. */
#pragma once

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "trace-probe.h"

/* Violations recorded one by one per slot; further ones are counted only. */
#define PROBE_VIOL_MAX 32

struct probe_params {
        uint64_t interval_ns;   /* probe period */
        uint64_t threshold_ns;  /* latency above this is a violation */
        uint32_t hist_limit_us; /* exact 1 us buckets below this */
        uint64_t period_ns;     /* storage interval length */
        int64_t base_mono_ns;   /* interval k covers [base + k*period, base + (k+1)*period) */
        int priority;           /* SCHED_FIFO priority */
        size_t stack_prefault;  /* bytes of stack touched before measuring */
};

struct probe_violation {
        int64_t time_mono_ns; /* when the wake-up was due */
        uint64_t value_ns;    /* how late it came */
};

/* One interval of one CPU, filled by the probe thread, read by the collector. */
struct probe_slot {
        uint64_t first_k, last_k; /* intervals covered: more than one if the ring was full */
        int64_t start_mono_ns, end_mono_ns;
        uint64_t samples, sum_ns, min_ns, max_ns, violations, missed;
        int64_t max_time_mono_ns; /* when the worst wake-up was due */
        uint64_t ring_full;       /* boundaries passed while no slot was free */
        uint32_t nviol;
        bool final;
        struct probe_violation viol[PROBE_VIOL_MAX];
        uint64_t *hist; /* hist_nbuckets(limit) counts, owned by the ring */
} _cacheline_aligned_;

enum probe_state {
        PROBE_STARTING,
        PROBE_READY, /* pinned, at its priority, memory touched: waiting for go */
        PROBE_RUNNING,
        PROBE_DONE,   /* stopped and final slot published */
        PROBE_FAILED, /* see error and stage; after the final slot if it ran */
};

/* Shared switches, written by the main thread only. */
struct probe_control {
        _Atomic bool go;
        _Atomic bool stop;
        /* Set before go, read once after it: a probe takes no sample due after this
         * CLOCK_MONOTONIC time (--duration), whenever the main thread gets to stop it.  0: no
         * end. */
        _Atomic int64_t end_mono_ns;
        /* Read at each interval boundary: a reloaded threshold applies from the next
         * interval on.  0: the one of the probe's params. */
        _Atomic uint64_t threshold_ns;
        /* Test-only fault (RTSOAKD_TEST_HANG=probe): the probe on CPU test_hang_cpu - 1 stops
         * at its next interval boundary, as if stuck, until told to stop.  0: none. */
        _Atomic int test_hang_cpu;
} _cacheline_aligned_;

struct probe {
        /* Consumer side and bookkeeping; the producer's hot state lives on its stack and in
         * the slot it is filling. */
        _Atomic uint64_t head _cacheline_aligned_;     /* slots published (producer writes) */
        _Atomic uint64_t tail _cacheline_aligned_;     /* slots consumed (consumer writes) */
        _Atomic uint64_t progress _cacheline_aligned_; /* samples in the open slot, relaxed:
                                                        * lets a watchdog see the loop turn */
        _Atomic uint64_t open_max_ns; /* worst latency of the open slot, relaxed: for status */
        /* The worst latency since the flight recorder last took it (it swaps in 0), relaxed;
         * on the progress line, which the probe writes anyway. */
        _Atomic uint64_t recent_max_ns;

        int cpu _cacheline_aligned_;
        struct probe_params params;
        const struct probe_control *ctl;
        size_t nslots;
        struct probe_slot *slots; /* allocated by the probe thread itself (first touch) */
        uint64_t *hist_mem;

        struct probe_trace trace;

        pthread_t thread;
        bool thread_started;
        _Atomic int tid; /* the thread's id, as trace events name it */
        _Atomic int state;
        int error;         /* negative errno when FAILED */
        const char *stage; /* what failed: "affinity", "scheduler", "memory", "clock" */
};

int probe_new(int cpu, const struct probe_params *params, const struct probe_control *ctl,
              struct probe **ret);
/* Creates the thread; it pins itself, switches to SCHED_FIFO and reports READY or FAILED. */
int probe_start(struct probe *p);
int probe_join(struct probe *p);
void probe_free(struct probe *p);

static inline int probe_state(const struct probe *p) {
        return atomic_load_explicit(&p->state, memory_order_acquire);
}

/* Consumer side: the oldest published slot, or NULL. */
struct probe_slot *probe_peek(struct probe *p);
/* Zeroes the slot returned by probe_peek() and hands it back to the producer. */
void probe_release(struct probe *p);

/* Allocates and zeroes the ring; the probe thread calls it on its own CPU.  Exported for
 * tests that play the producer's part themselves. */
int probe_alloc_ring(struct probe *p);
