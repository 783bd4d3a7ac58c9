/* SPDX-License-Identifier: MIT */
/* A machine's runs and events as the runs and events queries list them: for their routes and
 * for the dashboard. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "server-db.h"
#include "server-params.h"

/* The page of the machine's runs, newest first (by their start as the server takes it, cv):
 * *ret an array of the objects of GET .../runs, *ret_total (when not NULL) how many it has.
 * -ENOENT for a machine not enrolled. */
int farm_machine_runs_json(farm_db *db, const char *id, const struct farm_page *page,
                           const struct farm_clock_view *cv, json_t **ret, uint64_t *ret_total,
                           char err[static FARM_ERROR_MAX]);

/* The page of the machine's events in [from, to) (of one type when not NULL), newest first:
 * *ret an array of the objects of GET .../events, *ret_total (when not NULL) how many there
 * are.  -ENOENT for a machine not enrolled. */
int farm_machine_events_json(farm_db *db, const char *id, int64_t from, int64_t to,
                             const char *type, const struct farm_page *page, json_t **ret,
                             uint64_t *ret_total, char err[static FARM_ERROR_MAX]);
