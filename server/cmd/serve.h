/* SPDX-License-Identifier: MIT */
/* Serving the farm: rtsoak-server without a command.  Runs the HTTP server and what runs
 * beside it until SIGTERM or SIGINT; returns the program's exit status. */
#pragma once

#include "command.h"

int cli_serve(const struct server_options *o);
