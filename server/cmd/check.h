/* SPDX-License-Identifier: MIT */
/* rtsoak-server check: the farm database's integrity checked on demand (a large one is not
 * checked at start).  Returns the program's exit status. */
#pragma once

#include "command.h"

int cli_check(const struct server_options *o, char **args, int n);
