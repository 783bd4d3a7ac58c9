/* SPDX-License-Identifier: MIT */
/* Kernel comparisons from the per-day histograms: the regression rule, a release against
 * another, and a release's figures per machine and scenario (for the verdict's regression
 * check). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "inventory-model.h"

/* The rule of GET /api/v1/kernels/{release}/compare without tolerance= and min_difference=. */
#define FARM_COMPARE_TOLERANCE_PERCENT_DEFAULT 10
#define FARM_COMPARE_MIN_DIFFERENCE_NS_DEFAULT (5 * INT64_C(1000))
/* The most days= of a comparison may ask for (a century). */
#define FARM_COMPARE_DAYS_MAX 36500

/* One side of a comparison entry: the figures of the merged histogram, which is not kept. */
struct farm_cmp_side {
        bool used;
        uint64_t worst_ns, p99_9_ns, samples, violations;
};

/* One machine and scenario under each of the two kernels. */
struct farm_cmp_entry {
        char machine[FARM_MACHINE_ID_LEN + 1];
        char *scenario;               /* "" for none */
        struct farm_cmp_side side[2]; /* [0] of the kernel, [1] of the one compared with */
        bool regression;              /* in both, the kernel's figures worse by the rule */
};

/* A comparison as the compare query answers it: every machine and scenario that ran either
 * kernel, in order of machine and scenario, and their counts. */
struct farm_comparison {
        struct farm_cmp_entry *v;
        size_t n;
        uint64_t in_both, only[2], regressions; /* only[0]: only the kernel, [1] only the other */
        char rule[256];                         /* the regression rule in words */
        /* Each machine's inventory for the kernel [0] and the other [1], and the machines
         * whose two differ. */
        struct farm_machine_inventory *inv[2];
        size_t ninv[2];
        struct farm_inventory_difference *diff;
        size_t ndiff;
        /* With a number of days asked: the days of each kernel compared, from the start of
         * the first to the end of its newest day with data ([0] the kernel, [1] the other;
         * INT64_MIN for a kernel whose runs hold no data). */
        uint32_t days;
        int64_t from_ns[2], to_ns[2];
};
/* Compares release with with under the rule of farm_worse(); now tells the past days (their
 * histograms are cached).  days > 0: each kernel's newest days UTC with data only, that many
 * (the comparison of a long-lived release bounded); 0: all its data.  -ENOENT (err saying
 * which) when one of them has no runs. */
int farm_kernel_compare(farm_db *db, const char *release, const char *with,
                        uint64_t tolerance_percent, uint64_t min_difference_ns, uint32_t days,
                        int64_t now, struct farm_comparison *ret, char err[static FARM_ERROR_MAX]);
void farm_comparison_done(struct farm_comparison *c);

/* The regression rule of a comparison: value is worse than base when it exceeds it by more
 * than tolerance_percent of base and by more than min_difference_ns. */
bool farm_worse(uint64_t value, uint64_t base, uint64_t tolerance_percent,
                uint64_t min_difference_ns);

/* The worst case and p99.9 of a release per machine and scenario, over its data stamped
 * before to_ns and received by known_ns (INT64_MAX: all), on the machines listed (NULL: on
 * every machine).  An allocated array. */
struct farm_release_stat {
        char machine[FARM_MACHINE_ID_LEN + 1];
        char scenario[64];
        uint64_t worst_ns, p99_9_ns, samples;
};
int farm_release_stats(farm_db *db, const char *release, const char *const *machines,
                       size_t nmachines, int64_t to_ns, int64_t known_ns,
                       struct farm_release_stat **ret, size_t *ret_n, char *err);
