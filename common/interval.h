/* SPDX-License-Identifier: MIT */
/* Interval arithmetic shared by the probe, the collector and the tests: wall-clock aligned
 * boundaries, which interval a wake-up belongs to, and missed periods. */
#pragma once

#include <stdint.h>

/* The boundary at or before t that is a whole multiple of period since the epoch, so that
 * every CPU and every machine of a farm closes its intervals at the same instants. */
static inline int64_t interval_align(int64_t t, int64_t period) {
        int64_t r = t % period;
        return r < 0 ? t - r - period : t - r;
}

/* Index of the interval holding t, counting from base (t >= base). */
static inline uint64_t interval_index(int64_t base, int64_t period, int64_t t) {
        return t <= base ? 0 : (uint64_t) ((t - base) / period);
}

static inline int64_t interval_start(int64_t base, int64_t period, uint64_t k) {
        return base + (int64_t) k * period;
}

/* Whole periods a wake-up this late slept through.  The loop then moves its next deadline by
 * that many periods, so a stall yields one long sample and a count, not a burst of
 * catch-up wake-ups. */
static inline uint64_t interval_missed(uint64_t latency_ns, uint64_t period_ns) {
        return latency_ns / period_ns;
}
