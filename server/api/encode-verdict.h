/* SPDX-License-Identifier: MIT */
/* The verdict and the kernel list as the API answers them (docs/api.md): the JSON of the typed
 * results, every key in its place, for the routes and the commands that print them. */
#pragma once

#include <jansson.h>

#include "kernel-model.h"
#include "verdict.h"
#include "verdict-model.h"

/* A problem as the verdict lists it (NULL without memory). */
json_t *farm_problem_to_json(const struct farm_problem *p);
/* A problem that did not count (with its "why"), one that a waiver covers (with its "waiver"). */
json_t *farm_uncounted_to_json(const struct farm_uncounted_problem *p);
json_t *farm_waived_to_json(const struct farm_waived_problem *p);
/* The builds: [{kernel_version, machines}]. */
json_t *farm_builds_to_json(const struct farm_builds *b);
/* How many missing items and reasons each release of the kernel list shows (its verdict: all). */
#define FARM_KERNEL_LIST_ITEMS 20

/* What a verdict still waits for, and why it is what it is. */
json_t *farm_missing_to_json(const struct farm_missing *v, size_t n);
json_t *farm_strings_to_json(char *const *v, size_t n);

/* GET /api/v1/kernels/{release}/verdict's answer. */
json_t *farm_verdict_to_json(const struct farm_verdict *v);
/* A page of GET /api/v1/kernels (without its "next"). */
json_t *farm_kernel_page_to_json(const struct farm_kernel_page *p);

/* farm_verdict_ask() answered as JSON: *ret the caller's. */
int farm_verdict_json(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                      json_t **ret, char err[static FARM_ERROR_MAX]);
