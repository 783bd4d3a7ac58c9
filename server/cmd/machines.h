/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about machines: enrol, revoke, change and show settings, and
 * declare, list and cancel maintenance windows.  Each returns the program's exit status. */
#pragma once

#include "command.h"

/* enroll MACHINE_ID, revoke MACHINE_ID */
int cli_enroll(const struct server_options *o, char **args, int n);
int cli_revoke(const struct server_options *o, char **args, int n);
/* machine set MACHINE_ID, machine show MACHINE_ID */
int cli_machine_set(const struct server_options *o, char **args, int n);
int cli_machine_show(const struct server_options *o, char **args, int n);
/* maintenance add MACHINE_ID, maintenance list [MACHINE_ID], maintenance cancel WINDOW_ID */
int cli_maintenance_add(const struct server_options *o, char **args, int n);
int cli_maintenance_list(const struct server_options *o, char **args, int n);
int cli_maintenance_cancel(const struct server_options *o, char **args, int n);
