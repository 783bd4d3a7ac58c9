/* SPDX-License-Identifier: MIT */
/* GET /api/v1/kernels/{release}/compare: the request checked, the comparison asked
 * (store/comparison.h compares) and its answer written as JSON. */
#pragma once

#include "comparison.h"
#include "query.h"

/* Answers a (the route's path and arguments as it took them): 200 with a page of the
 * comparison, or the refusal; 0, or what query_internal() returns. */
int farm_api_compare(farm_db *db, const char *release, const struct farm_args *args, int64_t now,
                     const char *path, struct farm_answer *a);
