/* SPDX-License-Identifier: MIT */
/* Latency histogram maths: exact 1 us buckets below a limit, 8 logarithmic buckets per
 * octave above it, merging, percentiles and a compact sparse encoding for storage. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/* Above the limit every power of two is split into HIST_LOG_SUB buckets (12.5 % wide), for
 * up to HIST_LOG_OCTAVES octaves, fewer when the limit is so large that the bounds would
 * not fit 64 bits: with a 1 ms limit the last bound is 1 ms * 2^40, about 12.7 days.  The last
 * bucket is open-ended; the exact maximum is always kept beside the histogram.  The layout
 * depends only on the limit, which every stored histogram carries. */
#define HIST_LOG_SUB 8
#define HIST_LOG_OCTAVES 40
#define HIST_LIMIT_US_MAX 100000u /* 100 ms of exact buckets, 800 KiB per histogram */

static inline unsigned hist_octaves(uint32_t limit_us) {
        uint64_t limit_ns = (uint64_t) limit_us * 1000;
        unsigned room = (unsigned) __builtin_clzll(limit_ns); /* 64 - bit width */
        return room < HIST_LOG_OCTAVES ? room : HIST_LOG_OCTAVES;
}

static inline uint32_t hist_nbuckets(uint32_t limit_us) {
        return limit_us + hist_octaves(limit_us) * HIST_LOG_SUB;
}

/* Bucket of a latency.  Kept inline and branch-light: the probe calls it for every sample,
 * and below the limit it is one multiply (the compiler turns /1000 into one).  Above it the
 * arithmetic is in nanoseconds, so that the sub-buckets of small limits stay distinct. */
static inline uint32_t hist_index(uint32_t limit_us, uint64_t ns) {
        uint64_t us = ns / 1000;
        if (_likely_(us < limit_us))
                return (uint32_t) us;

        uint64_t limit_ns = (uint64_t) limit_us * 1000;
        unsigned octave = 63u - (unsigned) __builtin_clzll(ns / limit_ns); /* ns >= limit_ns */
        if (octave >= hist_octaves(limit_us))
                return hist_nbuckets(limit_us) - 1;
        uint64_t base = limit_ns << octave; /* <= ns: cannot overflow */
        /* limit_ns is a multiple of 1000, hence of HIST_LOG_SUB: the width is exact. */
        uint64_t sub = (ns - base) / (base / HIST_LOG_SUB);
        return limit_us + octave * HIST_LOG_SUB + (uint32_t) sub;
}

/* Lower bound of bucket i in nanoseconds (inclusive). */
uint64_t hist_bucket_lower_ns(uint32_t limit_us, uint32_t i);
/* Upper bound of bucket i in nanoseconds (exclusive); UINT64_MAX for the last bucket. */
uint64_t hist_bucket_upper_ns(uint32_t limit_us, uint32_t i);

struct hist {
        uint32_t limit_us;
        uint32_t nbuckets;
        uint64_t *counts;
        /* Merges into it stop at UINT64_MAX instead of failing with -EOVERFLOW (a farm's
         * merge of years of data, or of counts stored before the schema bounded them). */
        bool saturate;
};

int hist_init(struct hist *h, uint32_t limit_us);
void hist_done(struct hist *h);
void hist_reset(struct hist *h);
uint64_t hist_total(const struct hist *h);
/* The lowest and highest non-empty bucket; false (both 0) for an empty histogram. */
bool hist_used_range(const struct hist *h, uint32_t *ret_lowest, uint32_t *ret_highest);
/* Samples at or above the limit (cyclictest's "Histogram Overflows"). */
uint64_t hist_overflows(const struct hist *h, uint32_t limit_us);

/* Adds src into dst.  With equal limits this is exact.  Otherwise each source bucket is
 * counted at its highest value (conservative: never makes latencies look smaller).
 * Returns -EOVERFLOW if a count would wrap. */
int hist_merge(struct hist *dst, const struct hist *src);
int hist_merge_counts(struct hist *dst, uint32_t src_limit_us, const uint64_t *src_counts);

/* The q-quantile (num/den, e.g. 999/1000) as an upper bound: the exclusive upper edge of the
 * bucket that holds the ceil(q*N)-th smallest sample, clamped to [min_ns, max_ns].  So "at
 * least q of the samples were below p, and p never exceeds the true maximum". Returns 0 for
 * an empty histogram. */
uint64_t hist_quantile_ns(const struct hist *h, uint64_t num, uint64_t den, uint64_t min_ns,
                          uint64_t max_ns);

/* Sparse encoding: a version byte, the limit, then (index delta, count) pairs as unsigned
 * LEB128 varints for the non-zero buckets only.  A quiet interval with a dozen occupied
 * buckets encodes in ~40 bytes instead of 10 KiB. */
int hist_encode(const uint32_t limit_us, const uint64_t *counts, uint8_t **ret_buf,
                size_t *ret_len);
/* Decodes into a histogram that may have a different limit (merged conservatively).  When
 * ret_total is set, it receives the decoded sample count, which callers compare with the
 * stored sample count to detect corruption.  Returns -EBADMSG with *ret_reason on malformed
 * input: nothing in the blob is trusted. */
int hist_decode_merge(struct hist *dst, const uint8_t *buf, size_t len, uint64_t *ret_total,
                      const char **ret_reason);

/* Checks an encoded histogram as hist_decode_merge() does, without merging it anywhere: 0 with
 * its sample count, or -EBADMSG with *ret_reason. */
int hist_validate(const uint8_t *buf, size_t len, uint64_t *ret_total, const char **ret_reason);
/* An encoded histogram that hist_validate() accepted: its limit, how many buckets are not empty
 * and the lowest and highest of them (0 when none). */
struct hist_shape {
        uint32_t limit_us, lowest, highest;
        uint64_t entries;
};
void hist_shape(const uint8_t *buf, size_t len, struct hist_shape *ret);
