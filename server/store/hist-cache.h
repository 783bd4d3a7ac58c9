/* SPDX-License-Identifier: MIT */
/* The per-day histogram cache: the background thread that fills it, and for the histogram and
 * comparison queries the days of a window, read from the cache where it holds them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

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

/* A run's UTC day of data in a window.  cached: its merged histograms are in hist_days. */
struct day_ref {
        int64_t run, day;
        int64_t known_ns;   /* 0 or INT64_MAX: every interval; else those received by then */
        bool cached, whole; /* whole: the day is past and the window holds all of it */
        /* The reader merges the CPUs: a whole day is read from run_day_hists (day-hists.h),
         * one row per scenario, and needs no cache of its CPUs. */
        bool all_cpus;
        int side; /* of a comparison: 0 the kernel, 1 the other */
        char machine[FARM_MACHINE_ID_LEN + 1];
};

struct day_refs {
        struct day_ref *v;
        size_t n, alloc;
};

int day_refs_add(struct day_refs *d, const struct day_ref *x);

/* Fills the cache for the whole past days of refs that lack it (not those read all_cpus). */
int day_refs_fill(farm_db *db, const struct day_refs *refs, char *err);

/* Receives the stored histograms of a window, one row (of the cache or of an interval's CPU)
 * at a time. */
typedef int (*day_row_fn)(void *userdata, const struct day_ref *ref, const char *scenario,
                          int64_t cpu, uint32_t limit_us, const void *blob, size_t len,
                          uint64_t samples, uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                          uint64_t violations, const char **why);

/* Reads every ref's rows in [from, to) (of one scenario, CPU and range of CPUs when given),
 * each day in a read transaction of its own: a whole day from run_day_hists when read
 * all_cpus (cpu -1) or from the cache when cached, from its intervals otherwise. */
int day_refs_read(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                  const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                  void *userdata, char *err);
