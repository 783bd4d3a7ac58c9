/* SPDX-License-Identifier: MIT */
/* A machine's events as the events query lists them: for its route and for the dashboard. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "db.h"
#include "params.h"

/* The page of the machine's events in [from, to) (of one type when not NULL), newest first:
 * *ret an array of the objects of GET .../events, *ret_total (when not NULL) how many there
 * are.  -ENOENT for a machine not enrolled. */
int farm_machine_events_json(farm_db *db, const char *id, int64_t from, int64_t to,
                             const char *type, const struct farm_page *page, json_t **ret,
                             uint64_t *ret_total, char err[static FARM_ERROR_MAX]);
