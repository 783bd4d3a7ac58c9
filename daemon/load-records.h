/* SPDX-License-Identifier: MIT */
/* What the loads did in each interval not yet stored: made at each interval boundary, given
 * to the interval as it is written, passed on when that interval never makes it into the
 * database. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "loadsup.h"
#include "store.h"

/* Records kept while storage fails; beyond this the oldest goes (its interval is then stored
 * without scenario and loads, should storage come back). */
#define LOAD_RECORDS_MAX 2048

struct load_records {
        struct load_record *r; /* oldest first */
        size_t n, cap;
        struct store_interval_load again[SCENARIO_LOADS_MAX]; /* see load_records_annotate */
};

/* A new, zeroed record of interval k, to be filled by loadsup_snapshot(); NULL when out of
 * memory. */
struct load_record *load_records_add(struct load_records *lr, uint64_t k);

/* The newest record, NULL if none. */
const struct load_record *load_records_last(const struct load_records *lr);

/* Fills in iv's scenario and loads from the record of interval k, just before iv is written
 * (again: a row of k was stored before, and the loads' starts and exits went with it).
 * Records of earlier intervals are let go; the starts and exits of one whose interval was
 * never stored go on to the next record of the same scenario. */
void load_records_annotate(struct load_records *lr, uint64_t k, bool again,
                           struct store_interval *iv);

/* Interval k was stored with its record. */
void load_records_written(struct load_records *lr, uint64_t k);

void load_records_free(struct load_records *lr);
