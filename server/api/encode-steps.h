/* SPDX-License-Identifier: MIT */
/* The intervals query's answer as JSON (GET /api/v1/machines/{id}/intervals). */
#pragma once

#include "query.h"
#include "steps.h"

/* Asks the intervals of machine id (args as the route took them) and answers a: 200 with the
 * window, the step and a page of steps, or the refusal. */
void farm_api_intervals(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                        const char *path, struct farm_answer *a);
