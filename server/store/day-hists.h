/* SPDX-License-Identifier: MIT */
/* The merged histograms per run, UTC day and scenario, kept by ingest in the transaction that
 * stores the intervals: of all CPUs together (run_day_hists, schema 10) and of each CPU
 * (hist_days, schema 12).  A late interval merges into its day, a duplicate is not stored and
 * so not merged.  The regression check and the kernel comparison read the rows of all CPUs,
 * the histogram query and the machine page those of each CPU, for whole days, and never merge
 * the intervals of such a day again.  A row of all CPUs whose hist is NULL, or a day whose
 * run_days.cpu_hists is 0, could not be kept (a count saturated, a histogram that did not
 * decode): readers merge that day from its intervals. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "day-rows.h"
#include "db.h"
#include "sql.h"
#include "summary.h"

struct farm_day_hist;

/* The sums of one transaction's intervals, per day, scenario and CPU (and of all CPUs), not
 * yet written. */
struct farm_day_hists {
        struct farm_day_hist *v;
        size_t n;
        size_t bytes; /* of their histograms */
};

/* What the sums may hold before farm_day_hists_full() asks for a write (ingest checks after
 * each CPU): a summary of 1,024
 * CPUs with a 100 ms exact range would otherwise hold 800 MiB. */
#define FARM_DAY_HISTS_BYTES_MAX ((size_t) 8 << 20)

/* Adds one stored CPU row (hist_encode() form) to the sums of day, scenario and cpu (-1: of
 * all CPUs). */
int farm_day_hists_add_row(struct farm_day_hists *d, int64_t day, const char *scenario, int64_t cpu,
                           uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                           uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                           uint64_t violations);
static inline bool farm_day_hists_full(const struct farm_day_hists *d) {
        return d->bytes > FARM_DAY_HISTS_BYTES_MAX;
}
/* Merges the sums into run's rows (inside the caller's write transaction) and empties them. */
int farm_day_hists_write(sql_conn *c, int64_t run, struct farm_day_hists *d, char *err);
void farm_day_hists_done(struct farm_day_hists *d);

/* Calls fn with each scenario's row of ref's whole day (CPU -1), inside the caller's read
 * transaction: 1 when read, 0 when the day has no complete rows (none, or one without its
 * histogram: the caller reads its intervals). */
int farm_day_hists_read(sql_conn *c, const struct day_ref *ref, const char *scenario, day_row_fn fn,
                        void *userdata, char *err);

/* Migration 9 -> 10: the rows of all CPUs of every day stored before, merged from its
 * intervals, inside the migration's transaction. */
int farm_migrate_10(sql_conn *c, char *err);
/* Migration 11 -> 12: the rows of each CPU of every day stored before that the histogram cache
 * did not hold, merged from its intervals, inside the migration's transaction. */
int farm_migrate_12(sql_conn *c, char *err);
