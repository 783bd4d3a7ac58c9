/* SPDX-License-Identifier: MIT */
/* A machine's inventory on the farm: its versions as the runs sent them (each whole), and the
 * changes between one and the next that differs, with the fields that changed.  Owned by the
 * history and freed with it; the API encodes it, the dashboard and the verdict read it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "macro.h"

struct farm_inventory_version {
        int64_t run;      /* the machine's own number of the run */
        uint64_t version; /* the run's own number of the version */
        int64_t time_ns;  /* when rtsoakd found the machine so */
        int64_t after_ns; /* the check before, which still found the version before; FARM_NONE */
        int64_t received_ns;
        char digest[65];
        struct inventory fields;
};

/* A change from versions[from] to versions[to] (the next version that differs). */
struct farm_inventory_change {
        size_t from, to;
        struct inventory_change *v; /* the fields that differ, ascending by name; their strings
                                       are the versions' */
        size_t n;
};

struct farm_inventory_history {
        struct farm_inventory_version *versions; /* ascending by time */
        size_t nversions;
        struct farm_inventory_change *changes; /* a page of them, the newest first */
        size_t nchanges;
        uint64_t total_changes;
};

void farm_inventory_version_done(struct farm_inventory_version *v);
void farm_inventory_history_done(struct farm_inventory_history *h);
static inline void farm_inventory_history_donep(struct farm_inventory_history *h) {
        farm_inventory_history_done(h);
}
#define _cleanup_inventory_history_ _cleanup_(farm_inventory_history_donep)

/* When the server takes a version to have been found: as stamped, or when it arrived if it was
 * stamped more than tolerance_ns after that (a clock ahead). */
static inline int64_t farm_inventory_time(const struct farm_inventory_version *v,
                                          int64_t tolerance_ns) {
        return v->time_ns > v->received_ns + tolerance_ns ? v->received_ns : v->time_ns;
}

/* Whether a field describes the kernel under test rather than the machine (its configuration,
 * its declared tree, the modules it loads): two kernels differ in these whatever the machine,
 * so comparisons across kernels leave them out. */
bool farm_inventory_field_of_kernel(const char *name);

/* A machine's version of the inventory in force for a release (the newest of its runs of it). */
struct farm_machine_inventory {
        char machine[33];
        struct farm_inventory_version v;
};
void farm_machine_inventories_free(struct farm_machine_inventory *v, size_t n);

/* A machine whose versions for two releases differ: a[] and b[] are the releases' lists, the
 * changes' strings theirs. */
struct farm_inventory_difference {
        size_t a, b; /* indices in the two lists */
        struct inventory_change *v;
        size_t n;
};
/* The machines in both lists (each ascending by machine) whose versions differ in a field of
 * the machine (farm_inventory_field_of_kernel() ones left out), ascending by machine. */
int farm_inventory_differences(const struct farm_machine_inventory *a, size_t na,
                               const struct farm_machine_inventory *b, size_t nb,
                               struct farm_inventory_difference **ret, size_t *ret_n);
void farm_inventory_differences_free(struct farm_inventory_difference *v, size_t n);

/* The fields of versions a and b that differ, ascending by name: every field when a is NULL. */
int farm_inventory_changes(const struct farm_inventory_version *a,
                           const struct farm_inventory_version *b, struct inventory_change **ret,
                           size_t *ret_n);
