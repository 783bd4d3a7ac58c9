/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about machines: enrol, revoke, change and show settings, and
 * declare, list and cancel maintenance windows.  Each returns the program's exit status. */
#pragma once

#include <stdbool.h>

#include "db.h"
#include "settings.h"

struct cli_machine_args {
        const char *db_path;
        const struct farm_settings_change *change;
        const char *reason, *who, *from, *to;
        bool json;
};

/* Opens the farm database, logging why it cannot. */
int cli_open_db(const char *path, farm_db **ret);
/* Prints j indented on stdout: the exit status. */
int cli_print_json(json_t *j);

int cli_enroll(const struct cli_machine_args *a, const char *machine_id);
int cli_revoke(const struct cli_machine_args *a, const char *machine_id);
int cli_machine_set(const struct cli_machine_args *a, const char *machine_id);
int cli_machine_show(const struct cli_machine_args *a, const char *machine_id);
int cli_maintenance_add(const struct cli_machine_args *a, const char *machine_id);
int cli_maintenance_list(const struct cli_machine_args *a, const char *machine_id);
int cli_maintenance_cancel(const struct cli_machine_args *a, const char *window_id);
