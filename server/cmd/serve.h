/* SPDX-License-Identifier: MIT */
/* Serving the farm: rtsoak-server without a command.  Runs the HTTP server and what runs
 * beside it until SIGTERM or SIGINT; returns the program's exit status. */
#pragma once

#include <stdbool.h>

#include "command.h"

int cli_serve(const struct server_options *o);

/* glibc's allocation thresholds for a command (serving: true), as GLIBC_TUNABLES leaves them. */
void server_malloc_tuning(bool serving);
