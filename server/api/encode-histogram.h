/* SPDX-License-Identifier: MIT */
/* The histogram query's answer as JSON (GET /api/v1/machines/{id}/histogram). */
#pragma once

#include "histogram.h"
#include "query.h"

/* Asks machine id's merged histograms (args as the route took them) and answers a: 200 with
 * the window, all CPUs merged and a page of CPUs, or the refusal. */
void farm_api_histogram(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                        const char *path, struct farm_answer *a);
