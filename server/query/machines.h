/* SPDX-License-Identifier: MIT */
/* The machines as the farm lists them and a machine's runs and events, as typed results
 * (machine-model.h): for the API's routes, which encode them, and for the dashboard. */
#pragma once

#include <stdint.h>

#include "db.h"
#include "inventory-model.h"
#include "machine-model.h"
#include "params.h"

/* One machine (-ENOENT when not enrolled) or, with machine_id NULL, all of them, by id, as
 * the clock view cv takes their stamps. */
int farm_machines(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                  struct farm_machine_list *ret, char err[static FARM_ERROR_MAX]);
/* One machine into ret (the caller's, farm_machine_done()); -ENOENT when not enrolled. */
int farm_machine_get(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                     struct farm_machine *ret, char err[static FARM_ERROR_MAX]);
/* A page of the machines, by id (those removed while it is read left out); *ret_total of
 * all of them. */
int farm_machine_page(farm_db *db, const struct farm_page *page, const struct farm_clock_view *cv,
                      struct farm_machine_list *ret, uint64_t *ret_total,
                      char err[static FARM_ERROR_MAX]);

/* The page of the machine's runs, newest first (by their start as the server takes it, cv),
 * with the total of its runs.  -ENOENT for a machine not enrolled. */
int farm_machine_runs(farm_db *db, const char *id, const struct farm_page *page,
                      const struct farm_clock_view *cv, struct farm_run_page *ret,
                      char err[static FARM_ERROR_MAX]);

/* The page of the machine's events in [from, to) (of one type when not NULL), newest first,
 * with the total the question selects.  -ENOENT for a machine not enrolled. */
int farm_machine_events(farm_db *db, const char *id, int64_t from, int64_t to, const char *type,
                        const struct farm_page *page, struct farm_event_page *ret,
                        char err[static FARM_ERROR_MAX]);

/* Each machine's inventory for release: the newest version of its runs of it stamped by at and
 * received by known (as tolerance_ns takes the runs' starts), ascending by machine. */
int farm_release_inventories(farm_db *db, const char *release, int64_t at, int64_t known,
                             int64_t tolerance_ns, struct farm_machine_inventory **ret,
                             size_t *ret_n, char err[static FARM_ERROR_MAX]);
/* The machine's inventory: every version its runs sent (as cv takes their starts), and a page
 * of the changes between them, newest first (a version like the one before is no change),
 * with their total.  -ENOENT for a machine not enrolled. */
int farm_machine_inventory(farm_db *db, const char *id, const struct farm_page *page,
                           const struct farm_clock_view *cv, struct farm_inventory_history *ret,
                           char err[static FARM_ERROR_MAX]);
