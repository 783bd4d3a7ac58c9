/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about notifications: list them with their deliveries (the
 * dead-letter list is --state failed), send failed ones again, queue a test.  Each returns
 * the program's exit status. */
#pragma once

#include <stdbool.h>

#include "channels.h"

struct cli_notify_filter {
        const char *state, *kind, *machine, *release;
        const char *limit; /* text of --limit, or NULL */
};

int cli_notifications_list(const char *db_path, const struct cli_notify_filter *f, bool json);
/* id: a delivery's id, or "failed" for every failed one. */
int cli_notifications_retry(const char *db_path, const char *id);
int cli_notifications_test(const char *db_path, const struct notify_config *cfg,
                           const char *channel, const char *who);
