/* SPDX-License-Identifier: MIT */
/* The per-day histogram cache: the background thread that fills it, and for the histogram and
 * comparison queries the days of a window, read from the cache where it holds them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "day-rows.h"

/* CPUs are numbered below it (a query's cpu=, a merged histogram's key). */
#define FARM_CPU_MAX 8192

/* The histogram cache filled in the background, so that a first look at a machine's month
 * does not wait for it: a thread that merges a few past days at a time (the most recent
 * first), pausing between them for the queries, and looks for new days once a minute. */
struct farm_warmer;
int farm_warmer_start(farm_db *db, struct farm_warmer **ret);
void farm_warmer_stop(struct farm_warmer *w);
/* One pass of it: up to max past days filled; how many are cached now. */
int farm_query_warm(farm_db *db, int64_t now_ns, unsigned max, char *err);

/* ---- the days of a window, for the queries ---- */

/* Fills the cache for the whole past days of refs that lack it (not those read all_cpus). */
int day_refs_fill(farm_db *db, const struct day_refs *refs, char *err);

/* Reads every ref's rows in [from, to) (of one scenario, CPU and range of CPUs when given),
 * each day in a read transaction of its own: a whole day from run_day_hists when read
 * all_cpus (cpu -1) or from the cache when cached, from its intervals otherwise. */
int day_refs_read(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                  const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                  void *userdata, char *err);
