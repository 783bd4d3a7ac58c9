/* SPDX-License-Identifier: MIT */
/* Maintenance windows: staff declare in advance when a machine will be silent on purpose
 * (from, to, reason), and may cancel a window; both audited.  The verdict reads the table. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "db.h"
#include "params.h"

#define FARM_WINDOW_MAX_NS (31 * FARM_DAY_NS)        /* the longest window */
#define FARM_WINDOW_PAST_NS INT64_C(60000000000)     /* how far its start may lie in the past */
#define FARM_WINDOW_AHEAD_MAX_NS (366 * FARM_DAY_NS) /* how far ahead it may start */

/* Declares a window [from_ns, to_ns) for the machine: its id in *ret_id.  -ENOENT when no such
 * machine is enrolled; -EINVAL (err naming from, to or reason) when the start is more than a
 * minute in the past (excusing the past is a waiver's work), or more than a year ahead, the end
 * not after the start, the window longer than 31 days, or the reason missing. */
int farm_maintenance_add(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                         const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
                         char err[static FARM_ERROR_MAX]);
/* Cancels a window that is scheduled or active: it ends now (a scheduled one never begins).
 * -ENOENT when there is no such window, -EALREADY when it was cancelled or is over already,
 * -EINVAL for a missing reason (kept in the audit trail). */
int farm_maintenance_cancel(farm_db *db, int64_t id, const char *who, const char *reason,
                            int64_t now_ns, char err[static FARM_ERROR_MAX]);

/* One window as JSON, with its state at now_ns (scheduled, active, over, cancelled): -ENOENT
 * when there is no such window. */
int farm_maintenance_get(farm_db *db, int64_t id, int64_t now_ns, json_t **ret,
                         char err[static FARM_ERROR_MAX]);
/* A page of the windows of one machine (NULL: of every machine), latest start first:
 * {"windows": [...], "total", "limit", "offset"}. */
int farm_maintenance_json(farm_db *db, const char *machine_id, const struct farm_page *page,
                          int64_t now_ns, json_t **ret, char err[static FARM_ERROR_MAX]);

/* The body of POST /api/v1/machines/{id}/maintenance: {"from", "to", "reason"}, the times as
 * RFC 3339 text with a UTC offset or as integer Unix nanoseconds.  ret_reason points into
 * body. */
int farm_maintenance_from_json(json_t *body, int64_t *ret_from_ns, int64_t *ret_to_ns,
                               const char **ret_reason, char err[static FARM_ERROR_MAX]);
/* The body of POST /api/v1/maintenance/{id}/cancel: {"reason"}. */
int farm_maintenance_cancel_from_json(json_t *body, const char **ret_reason,
                                      char err[static FARM_ERROR_MAX]);
/* A time of the command line: what parse_timestamp() takes, or "+SPAN" / "in SPAN" ahead of
 * now.  -EINVAL with ret_reason set on error. */
int farm_maintenance_parse_time(const char *s, int64_t now_ns, int64_t *ret_ns,
                                const char **ret_reason);
