/* SPDX-License-Identifier: MIT */
/* The series as the API answers them (docs/api.md): the JSON of the typed answers of "which
 * release is latest stable?", every key in its place. */
#pragma once

#include <jansson.h>

#include "series-model.h"
#include "verdict-log.h"

/* {"series": [{series, latest_stable, since, since_ns, releases, newest, newest_verdict}]}. */
json_t *farm_series_list_to_json(const struct farm_series_list *l);
/* One series' entry with "at_ns", "at" and its "history". */
json_t *farm_latest_stable_to_json(const struct farm_latest_stable *s);

/* farm_series() and farm_latest_stable() answered as JSON: *ret the caller's. */
int farm_series_json(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                     json_t **ret, char err[static FARM_ERROR_MAX]);
int farm_latest_stable_json(farm_db *db, const struct farm_rule *rule, const char *series,
                            const struct farm_question *q, json_t **ret,
                            char err[static FARM_ERROR_MAX]);
