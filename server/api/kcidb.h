/* SPDX-License-Identifier: MIT */
/* A release's verdict as a KCIDB I/O v5.3 report (docs/kcidb.md): the checkout, a build per
 * kernel build (uname -v), and tests per gating machine and scenario plus the verdict itself,
 * with ids that stay the same from one call to the next. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "db.h"
#include "rule.h"
#include "verdict.h"

#define FARM_KCIDB_ORIGIN_DEFAULT "rtsoak"
#define FARM_KCIDB_ORIGIN_MAX 64

/* An origin KCIDB takes: 1 to FARM_KCIDB_ORIGIN_MAX of [a-z0-9_]. */
bool farm_kcidb_origin_ok(const char *origin);

/* The report of q's release as the verdict judges it: *ret the caller's.  -ENOENT when no
 * machine ever ran the release (by then), as farm_verdict_ask(). */
int farm_kcidb_report(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                      const char *origin, json_t **ret, char err[static FARM_ERROR_MAX]);
