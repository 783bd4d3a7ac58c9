/* SPDX-License-Identifier: MIT */
/* The routes of the machines: a page of them, one of them, a machine's runs. */
#pragma once

#include <jansson.h>

#include "db.h"
#include "query.h"

/* GET /api/v1/machines, GET /api/v1/machines/{id}/runs and .../events: each answers a
 * (returning 0 once a holds the answer, or what query_internal() returns). */
int farm_api_machines(farm_db *db, const struct farm_args *args, const char *path,
                      const struct farm_clock_view *cv, struct farm_answer *a);
int farm_api_runs(farm_db *db, const char *id, const struct farm_args *args, const char *path,
                  const struct farm_clock_view *cv, struct farm_answer *a);
/* GET /api/v1/machines/{id}/inventory. */
int farm_api_inventory(farm_db *db, const char *id, const struct farm_args *args, const char *path,
                       const struct farm_clock_view *cv, struct farm_answer *a);
int farm_api_events(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                    const char *path, struct farm_answer *a);
/* One machine as JSON (-ENOENT when not enrolled) or, with id NULL, all of them:
 * {"machines": [...]}. */
int farm_api_machine_json(farm_db *db, const char *id, const struct farm_clock_view *cv,
                          json_t **ret, char err[static FARM_ERROR_MAX]);
