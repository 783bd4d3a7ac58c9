/* SPDX-License-Identifier: MIT */
/* Waivers that farm staff give for single problems of a release's verdict, and the audit
 * trail of everything staff do. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "params.h"
#include "rule.h"

#define FARM_WAIVER_REASON_MAX 1000

/* Waives one problem of release's current verdict (its "id").  -ENOENT when the current
 * verdict has no such unwaived problem, -EINVAL for an empty or too long reason or an ongoing
 * silence.  Recorded in the audit trail with who and when. */
int farm_waive(farm_db *db, const struct farm_rule *rule, const char *release, const char *problem,
               const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
               char err[static FARM_ERROR_MAX]);
/* Withdraws a waiver (-ENOENT: no such waiver in force); audited as well. */
int farm_unwaive(farm_db *db, int64_t waiver_id, const char *who, const char *reason,
                 int64_t now_ns, char err[static FARM_ERROR_MAX]);
/* The waivers of release (all releases when NULL), newest first, and the audit trail. */
int farm_waivers_json(farm_db *db, const char *release, const struct farm_page *page, json_t **ret,
                      char err[static FARM_ERROR_MAX]);
int farm_audit_json(farm_db *db, const struct farm_page *page, json_t **ret,
                    char err[static FARM_ERROR_MAX]);
