/* SPDX-License-Identifier: MIT */
/* What the verdict log recorded: the status each release had in it at a moment.  The baseline
 * of the regression check and the latest stable of a series are read from it (docs/verdict.md,
 * invariants 9 and 10), so that no verdict judges the other releases of its series. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "rule.h"
#include "sql.h"

/* A release and the last status the verdict log had recorded for it by a moment. */
struct farm_logged {
        char *release;
        char series[FARM_SERIES_NAME_MAX];
        char status[16];
};

/* The releases whose last status in the verdict log at at_ns was qualified, that have a run
 * started by at_ns and received by known_ns, with their series by rule; read on c (the
 * caller's snapshot). */
int farm_log_qualified(sql_conn *c, const struct farm_rule *rule, int64_t at_ns, int64_t known_ns,
                       struct farm_logged **ret, size_t *ret_n, char err[static FARM_ERROR_MAX]);
void farm_logged_free(struct farm_logged *v, size_t n);

/* The releases whose verdict the log recorded a change of after row after_id, each once, in the
 * order of their latest change; *ret_last gets the last row's id (after_id when none). */
int farm_log_changed_since(farm_db *db, int64_t after_id, char ***ret, size_t *ret_n,
                           int64_t *ret_last, char err[static FARM_ERROR_MAX]);

/* The newest release of series in v that the log had qualified, older than below (NULL: any),
 * or NULL. */
const char *farm_log_newest_qualified(const struct farm_logged *v, size_t n, const char *series,
                                      const char *below);

/* The last status the verdict log recorded for each release with data stamped since since_ns,
 * by name ("" for one not logged yet; series is not set). */
int farm_log_current(farm_db *db, int64_t since_ns, struct farm_logged **ret, size_t *ret_n,
                     char err[static FARM_ERROR_MAX]);
