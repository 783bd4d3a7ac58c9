/* SPDX-License-Identifier: MIT */
/* A machine's inventory as GET /api/v1/machines/{id}/inventory answers it (docs/api.md). */
#pragma once

#include <jansson.h>

#include "inventory-model.h"

/* {"machine", "versions", "current"} of the answer (NULL without memory). */
json_t *farm_inventory_to_json(const char *machine, const struct farm_inventory_history *h);
/* The page of changes, newest first (NULL without memory). */
json_t *farm_inventory_changes_to_json(const struct farm_inventory_history *h);
