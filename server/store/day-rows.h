/* SPDX-License-Identifier: MIT */
/* The days of a window that the histogram and comparison queries read, and the rows they read
 * for each: of the day histograms kept at ingest (day-hists.h) or of the intervals' CPUs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "sql.h"

/* CPUs are numbered below it (a query's cpu=, a merged histogram's key). */
#define FARM_CPU_MAX 8192

/* A run's UTC day of data in a window.  cached: its merged histograms per CPU are kept in
 * hist_days (known and used by the histogram query only). */
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
        size_t n;
};

int day_refs_add(struct day_refs *d, const struct day_ref *x);

/* Receives the stored histograms of a window, one row (of the cache or of an interval's CPU)
 * at a time. */
typedef int (*day_row_fn)(void *userdata, const struct day_ref *ref, const char *scenario,
                          int64_t cpu, uint32_t limit_us, const void *blob, size_t len,
                          uint64_t samples, uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                          uint64_t violations, const char **why);

/* Calls fn with every row of st, whose columns from the first are scenario, the CPU (when
 * with_cpu; -1 otherwise), hist_limit_us, hist, samples, min_ns, max_ns, max_time_ns and
 * violations.  what names the rows in an error. */
int day_rows_each(sql_conn *c, sql_stmt *st, bool with_cpu, const struct day_ref *ref,
                  const char *what, day_row_fn fn, void *userdata, char *err);

/* Reads every ref's rows in [from, to) (of one scenario, CPU and range of CPUs when given),
 * each day in a read transaction of its own: a whole day from run_day_hists when read
 * all_cpus (cpu -1) or from hist_days when kept there, from its intervals otherwise. */
int day_refs_read(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                  const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                  void *userdata, char *err);
