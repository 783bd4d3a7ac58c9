/* SPDX-License-Identifier: MIT */
/* The machines and a machine's runs and events as the API answers them (docs/api.md): the JSON of
 * the typed results, every key in its place. */
#pragma once

#include <jansson.h>

#include "machine-model.h"

/* GET /api/v1/machines/{id}'s answer (NULL without memory). */
json_t *farm_machine_to_json(const struct farm_machine *m);
/* The machines' answers as a list. */
json_t *farm_machine_list_to_json(const struct farm_machine_list *l);
/* A run as GET /api/v1/machines/{id}/runs lists it; the list of a page of them. */
json_t *farm_run_to_json(const struct farm_run *r);
json_t *farm_runs_to_json(const struct farm_run_page *p);
/* An event as GET /api/v1/machines/{id}/events lists it; the list of a page of them. */
json_t *farm_event_to_json(const struct farm_event *e);
json_t *farm_events_to_json(const struct farm_event_page *p);
