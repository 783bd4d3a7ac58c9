/* SPDX-License-Identifier: MIT */
/* rtsoak-server prune --before TIME: one pass of retention now, with that horizon.  Returns
 * the program's exit status. */
#pragma once

#include "command.h"

int cli_prune(const struct server_options *o, char **args, int n);
