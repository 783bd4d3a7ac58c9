/* SPDX-License-Identifier: MIT */
/* The farm tells people (docs/notifications.md): notifications of silent machines, problems
 * of gating machines, verdicts, waivers and latest stable releases, kept in the farm database
 * until each channel (webhook, mail) has them. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server-db.h"
#include "server-params.h"
#include "server-notify-config.h"
#include "server-rule.h"
#include "server-stable.h"

struct farm_notifier;

/* Starts the threads: one that looks for silent machines and waiver actions every
 * cfg->check_ns, one per channel that delivers.  When cfg has no dashboard address, it is
 * made of tls, link_host (the name clients use, or NULL: this host's name when bound is every
 * address) and bound ("ADDR:PORT").  listening_ns: when the server began to take uploads;
 * the first pass on a farm learns the problems of what was received before it and tells the
 * rest.  rule and cfg must outlive the notifier. */
int farm_notifier_start(farm_db *db, const struct farm_rule *rule, const struct notify_config *cfg,
                        const char *bound, const char *link_host, bool tls, int64_t listening_ns,
                        struct farm_notifier **ret);
/* Stops the threads; a delivery in flight is given back (webhook) or finished (mail). */
void farm_notifier_stop(struct farm_notifier *n);
/* The hooks for the verdict log's thread: problems, verdicts, latest stable. */
const struct farm_verdict_hooks *farm_notifier_hooks(struct farm_notifier *n);

/* Queues a test notification for channel (rtsoak-server notifications test): 0 with its id,
 * -ENOENT when the configuration has no such channel. */
int farm_notify_test(farm_db *db, const struct notify_config *cfg, const char *channel,
                     const char *who, int64_t now_ns, int64_t *ret_id,
                     char err[static FARM_ERROR_MAX]);

/* GET /api/v1/notifications: the notifications, newest first, with their deliveries;
 * -EINVAL (err says which) for a filter that is not a state, kind, machine id or release. */
int farm_notifications_json(farm_db *db, const char *state, const char *kind, const char *machine,
                            const char *release, const struct farm_page *page, json_t **ret,
                            char err[static FARM_ERROR_MAX]);
/* prefix and text percent-escaped for a URL (all but letters, digits and - . _ ~);
 * malloc'd. */
char *notify_url_escape(const char *prefix, const char *text);
