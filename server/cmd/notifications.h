/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about notifications: list them with their deliveries (the
 * dead-letter list is --state failed), send failed ones again, queue a test.  Each returns
 * the program's exit status. */
#pragma once

#include "command.h"

/* notifications [--state ...] [--json] */
int cli_notifications_list(const struct server_options *o, char **args, int n);
/* notifications retry DELIVERY_ID|failed: a delivery's id, or every failed one. */
int cli_notifications_retry(const struct server_options *o, char **args, int n);
/* notifications test CHANNEL */
int cli_notifications_test(const struct server_options *o, char **args, int n);
