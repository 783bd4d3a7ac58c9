/* SPDX-License-Identifier: MIT */
/* rtsoak-server migrate --from PATH|URI --to URI: the farm copied into another store, then
 * compared row by row.  Returns the program's exit status. */
#pragma once

#include "command.h"

int cli_migrate(const struct server_options *o, char **args, int n);
