/* SPDX-License-Identifier: MIT */
/* rtsoak's inventory command: the machine's inventory in a run with its changes
 * (rtsoak inventory), and its line in rtsoak status. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* The newest version of run_id's inventory (0: of the newest run that has one) with every
 * field, and each change during the run: printed, or as JSON.  -ENOENT (logged) when none
 * is recorded. */
int cli_inventory(store *s, int64_t run_id, bool json);
/* The run's newest version in brief (version, time, fields, digest), or JSON null. */
json_t *cli_inventory_status_json(store *s, int64_t run_id);
void cli_inventory_status_print(store *s, int64_t run_id);
