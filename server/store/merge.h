/* SPDX-License-Identifier: MIT */
/* Merging stored histograms within a memory budget.  A merged histogram costs up to 800 KiB (a
 * 100 ms exact range); a request that merged one per CPU, scenario or machine at once cost
 * gigabytes for a machine with many CPUs.  A merge set keeps the accumulators of the keys that
 * fit its budget and leaves the others waiting for another pass over the rows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"

/* The budget of one merge set: 32 MiB of histograms (40 of the largest kind). */
#define FARM_MERGE_BUDGET_BYTES ((size_t) 32 << 20)

/* The samples of one key (a CPU, or several merged) over a window. */
struct farm_acc {
        bool used;
        struct hist h;
        uint64_t samples, min_ns, max_ns, violations;
        int64_t max_time_ns;
};

void farm_acc_done(struct farm_acc *c);
/* Adds one stored histogram (hist_encode() form; empty when it holds no sample): -EBADMSG with
 * *why when it does not decode or does not hold samples, -EOVERFLOW when a count wraps. */
int farm_acc_add(struct farm_acc *c, uint32_t limit_us, const void *blob, size_t len,
                 uint64_t samples, uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                 uint64_t violations, const char **why);
int farm_acc_merge(struct farm_acc *dst, const struct farm_acc *src);
/* What its histogram takes. */
size_t farm_acc_bytes(const struct farm_acc *c);

struct farm_merge_set;

/* ordered: the keys merged in one pass are always the smallest ones not finished yet, so that
 * they can be answered in ascending order pass after pass. */
int farm_merge_set_new(size_t budget_bytes, bool ordered, struct farm_merge_set **ret);
void farm_merge_set_free(struct farm_merge_set *s);

/* Adds a row of key: 0 when merged, 1 when the key waits for a later pass or was finished in
 * an earlier one (the row is not used now), < 0 as farm_acc_add(). */
int farm_merge_set_add(struct farm_merge_set *s, uint64_t key, uint32_t limit_us, const void *blob,
                       size_t len, uint64_t samples, uint64_t min_ns, uint64_t max_ns,
                       int64_t max_time_ns, uint64_t violations, const char **why);

typedef int (*farm_merge_fn)(void *userdata, uint64_t key, struct farm_acc *acc);
/* Ends a pass: fn for every key merged in it, in ascending order (a negative return stops and
 * is returned), then they are finished and freed.  1 when keys wait for another pass, 0 when
 * every key seen is finished. */
int farm_merge_set_finish(struct farm_merge_set *s, farm_merge_fn fn, void *userdata);
/* The smallest key waiting (UINT64_MAX when none): rows of smaller keys need not be read. */
uint64_t farm_merge_set_first_waiting(const struct farm_merge_set *s);
/* The n-th smallest key waiting (n from 0), UINT64_MAX when fewer wait: an ordered set that
 * merged n keys in its last pass will not merge many more in the next, so rows beyond it need
 * not be read either. */
uint64_t farm_merge_set_nth_waiting(const struct farm_merge_set *s, size_t n);
/* How many keys the last finished pass merged. */
size_t farm_merge_set_last_pass(const struct farm_merge_set *s);
/* The keys seen so far, finished or not. */
size_t farm_merge_set_keys(const struct farm_merge_set *s);
/* The largest number of bytes the accumulators held at once (for the tests). */
size_t farm_merge_set_peak(const struct farm_merge_set *s);

struct farm_percentiles {
        uint64_t p50_ns, p99_ns, p99_9_ns, p99_99_ns;
};
/* Percentiles of a merged histogram as upper bounds (hist_quantile_ns), never above max_ns. */
void farm_percentiles(const struct hist *h, uint64_t min_ns, uint64_t max_ns,
                      struct farm_percentiles *ret);
