/* SPDX-License-Identifier: MIT */
/* The systemd watchdog: a thread that pings WATCHDOG=1 only while every part of rtsoakd (each
 * probe, the collector, the storage writer, the uploader) shows progress, and names the part
 * that stopped when one does. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "probe.h"

/* A part's sign of life.  A part either beats (its loop turned: collector, uploader) or
 * brackets calls that may block with heartbeat_enter()/heartbeat_leave() (storage). */
struct heartbeat {
        const char *name; /* "collector", "storage writer", "uploader" */
        bool beating;     /* must beat between two checks (else: only calls count) */
        /* Optional: a part on the same thread; when this one misses its beats while that one
         * is inside a call, that one is named too (first): it is where the thread is stuck. */
        struct heartbeat *same_thread;
        _Atomic bool active;     /* checked only while active */
        _Atomic uint64_t beats;  /* loop turns */
        _Atomic int64_t busy_ns; /* CLOCK_MONOTONIC start of the call in progress, 0: none */
        /* Test-only fault: the next beat or enter blocks until test_hang is cleared. */
        _Atomic bool test_hang;
};

void heartbeat_hang_point(struct heartbeat *h);

static inline void heartbeat_beat(struct heartbeat *h) {
        if (!h)
                return;
        if (atomic_load_explicit(&h->test_hang, memory_order_relaxed))
                heartbeat_hang_point(h);
        atomic_fetch_add_explicit(&h->beats, 1, memory_order_relaxed);
}

void heartbeat_enter(struct heartbeat *h);
static inline void heartbeat_leave(struct heartbeat *h) {
        if (h)
                atomic_store_explicit(&h->busy_ns, 0, memory_order_release);
}

struct watchdog_params {
        uint64_t period_ns; /* between checks and pings: half of WATCHDOG_USEC */
        struct probe **probes;
        size_t nprobes;
        struct heartbeat **parts; /* NULL-terminated */
        /* Called from the watchdog thread, once per stall, after pinging has stopped: records
         * the stall (in storage, if storage still works). */
        void (*on_stall)(void *userdata, const char *part, uint64_t stalled_ns);
        void *userdata;
};

struct watchdog;

/* The period systemd asks for (half of $WATCHDOG_USEC), or 0 when no watchdog is set. */
uint64_t watchdog_period_ns(void);

int watchdog_start(const struct watchdog_params *p, struct watchdog **ret);
/* Stops pinging and joins the thread.  NULL is fine. */
void watchdog_stop(struct watchdog *w);

/* For tests: the checks of one tick, without the thread; a fresh state starts with
 * everything "progressed".  Returns true when every part made progress since the last call,
 * and names the first one that did not in stalled. */
struct watchdog_state {
        uint64_t *probe_marks;
        uint64_t *part_marks;
        int64_t last_check_ns;
};
bool watchdog_check(const struct watchdog_params *p, struct watchdog_state *st, int64_t now_ns,
                    char *stalled, size_t len);
