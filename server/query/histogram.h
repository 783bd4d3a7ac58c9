/* SPDX-License-Identifier: MIT */
/* A machine's histograms of a window merged per CPU, as the histogram query merges them: for
 * its route and the dashboard's histogram plot; and the percentiles of a merged histogram. */
#pragma once

#include <stdint.h>

#include "hist.h"
#include "db.h"
#include "day-rows.h"
#include "merge.h"
#include "params.h"
#include "query.h"

/* The merged histograms of a machine's window [from, to), CPU by CPU in ascending order and
 * within the memory budget of server-merge.h: fn(cpu, that CPU's, all CPUs merged) for each
 * CPU with data, or once fn(-1, NULL, all) for a window without any. */
typedef int (*farm_cpu_hist_fn)(void *userdata, int64_t cpu, const struct farm_acc *acc,
                                const struct farm_acc *all);
int farm_machine_hists(farm_db *db, const char *machine_id, int64_t from, int64_t to, int64_t now,
                       farm_cpu_hist_fn fn, void *userdata, char err[static FARM_ERROR_MAX]);

/* The histogram query (GET /api/v1/machines/{id}/histogram) as asked: the machine, window,
 * CPU (-1: all), scenario (or NULL), page, and the days it reads. */
struct farm_histogram_query {
        const char *machine, *scenario; /* the caller's strings */
        int64_t from, to, cpu, now;
        struct farm_page page;
        struct day_refs refs;
};
/* Reads the query's parameters (args) and the machine's days of the window: 1 with *q filled
 * (farm_histogram_query_done()), or 0 (or a negative error) with the refusal or failure in a. */
int farm_histogram_ask(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                       struct farm_histogram_query *q, struct farm_answer *a);
/* Merges q's window, calling fn for each CPU (as farm_machine_hists()) until it returns 1;
 * *ret_ncpus: how many CPUs hold data. */
int farm_histogram_merge(farm_db *db, struct farm_histogram_query *q, farm_cpu_hist_fn fn,
                         void *userdata, uint64_t *ret_ncpus, char err[static FARM_ERROR_MAX]);
void farm_histogram_query_done(struct farm_histogram_query *q);
