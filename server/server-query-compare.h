/* SPDX-License-Identifier: MIT */
/* Kernel comparisons: the regression rule, and a release's figures per machine and scenario
 * (for the verdict's regression check). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server-db.h"

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
