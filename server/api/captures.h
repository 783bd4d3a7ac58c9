/* SPDX-License-Identifier: MIT */
/* The flight recorder's captures served by the API (store/traces.c keeps and reads them). */
#pragma once

#include <stdint.h>

#include "db.h"
#include "query.h"

/* GET /api/v1/traces?machine=ID[&from=&to=&cpu=], /api/v1/traces/ID, and the raw events
 * (text/plain) at /api/v1/traces/ID/raw and /traces/ID.txt: 1 and *ret when url is one of
 * them, else 0. */
int farm_trace_route(farm_db *db, const char *url, const struct farm_args *args, int64_t now_ns,
                     struct farm_answer *ret);
