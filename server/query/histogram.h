/* SPDX-License-Identifier: MIT */
/* A machine's histograms of a window merged per CPU, as the histogram query merges them: for
 * its route and the dashboard's histogram plot; and the percentiles of a merged histogram. */
#pragma once

#include <stdint.h>

#include "hist.h"
#include "db.h"
#include "merge.h"

/* The merged histograms of a machine's window [from, to), CPU by CPU in ascending order and
 * within the memory budget of server-merge.h: fn(cpu, that CPU's, all CPUs merged) for each
 * CPU with data, or once fn(-1, NULL, all) for a window without any. */
typedef int (*farm_cpu_hist_fn)(void *userdata, int64_t cpu, const struct farm_acc *acc,
                                const struct farm_acc *all);
int farm_machine_hists(farm_db *db, const char *machine_id, int64_t from, int64_t to, int64_t now,
                       farm_cpu_hist_fn fn, void *userdata, char err[static FARM_ERROR_MAX]);
