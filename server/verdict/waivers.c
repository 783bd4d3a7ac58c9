/* SPDX-License-Identifier: MIT */
/* Waivers of single problems of a release's verdict (given and withdrawn, audited), and the
 * waivers and the audit trail as JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "db-internal.h"
#include "verdict.h"
#include "waivers.h"

/* ---- waivers and audit ----------------------------------------------------------------------- */

static int audit(sql_conn *c, int64_t now_ns, const char *who, const char *action,
                 const char *release, const char *problem, int64_t waiver, const char *detail,
                 char *err) {
        return farm_audit_write(c,
                                &(struct farm_audit_row){ .time_ns = now_ns,
                                                          .who = who,
                                                          .action = action,
                                                          .release = release,
                                                          .problem = problem,
                                                          .waiver = waiver,
                                                          .detail = detail },
                                err);
}

int farm_waive(farm_db *db, const struct farm_rule *rule, const char *release, const char *problem,
               const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
               char err[static FARM_ERROR_MAX]) {
        size_t rl = strlen(reason);
        if (rl == 0 || rl > FARM_WAIVER_REASON_MAX) {
                snprintf(err, FARM_ERROR_MAX, "reason: %s",
                         rl == 0 ? "a waiver needs a reason" : "longer than 1000 characters");
                return -EINVAL;
        }
        if (strlen(problem) >= FARM_PROBLEM_ID_MAX) {
                snprintf(err, FARM_ERROR_MAX, "problem: no such problem id");
                return -ENOENT;
        }
        /* The problem must be one of the current verdict, not yet waived. */
        bool found = false;
        int r = farm_verdict_has_problem(db, rule, release, problem, now_ns, &found, err);
        if (r < 0)
                return r;
        if (!found) {
                snprintf(err, FARM_ERROR_MAX,
                         "problem: release %s has no unwaived problem \"%s\" (see the problems' "
                         "\"id\" in its verdict)",
                         release, problem);
                return -ENOENT;
        }
        if (strstr(problem, ":ongoing")) {
                snprintf(err, FARM_ERROR_MAX,
                         "problem: an ongoing silence cannot be waived (it has no end yet): "
                         "un-gate the machine (rtsoak-server machine set ID --gating no), and "
                         "waive the silence that then has an end");
                return -EINVAL;
        }

        _cleanup_release_ sql_conn *c = farm_writer(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        if ((r = farm_begin_write(c, err)) < 0)
                return r;
        r = farm_prepare(c,
                         "INSERT INTO waivers (kernel_release, problem, reason, by, created_ns) "
                         "VALUES (?, ?, ?, ?, ?) RETURNING id",
                         &st, err);
        int64_t id = 0;
        if (r >= 0) {
                sql_bind_text(st, 1, release);
                sql_bind_text(st, 2, problem);
                sql_bind_text(st, 3, reason);
                sql_bind_text(st, 4, who);
                sql_bind_int64(st, 5, now_ns);
                r = sql_step(st);
                if (r == SQL_ROW)
                        id = sql_column_int64(st, 0);
                else
                        r = farm_fail(c, r, "cannot store the waiver", err);
                sql_reset(st); /* done before the commit */
        }
        if (r >= 0)
                r = audit(c, now_ns, who, "waive", release, problem, id, reason, err);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0) {
                sql_rollback(c);
                return r;
        }
        *ret_id = id;
        return 0;
}

int farm_unwaive(farm_db *db, int64_t waiver_id, const char *who, const char *reason,
                 int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_writer(db);
        _cleanup_reset_ sql_stmt *sel = NULL, *st = NULL;
        int r;
        if ((r = farm_begin_write(c, err)) < 0)
                return r;
        r = farm_prepare(c,
                         "SELECT kernel_release, problem FROM waivers "
                         "WHERE id = ? AND withdrawn_ns IS NULL",
                         &sel, err);
        if (r >= 0)
                r = farm_prepare(c,
                                 "UPDATE waivers SET withdrawn_ns = ?2, withdrawn_by = ?3 "
                                 "WHERE id = ?1",
                                 &st, err);
        if (r >= 0) {
                sql_bind_int64(sel, 1, waiver_id);
                int rc = sql_step(sel);
                if (rc == SQL_DONE)
                        r = farm_failf(db, -ENOENT, err, "no waiver %" PRId64 " is in force",
                                       waiver_id);
                else if (rc != SQL_ROW)
                        r = farm_fail(c, rc, "cannot read the waiver", err);
        }
        if (r >= 0) {
                sql_bind_int64(st, 1, waiver_id);
                sql_bind_int64(st, 2, now_ns);
                sql_bind_text(st, 3, who);
                r = farm_step_done(st, "cannot withdraw the waiver", err);
        }
        if (r >= 0)
                r = audit(c, now_ns, who, "unwaive", sql_column_text(sel, 0),
                          sql_column_text(sel, 1), waiver_id, reason, err);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0)
                sql_rollback(c);
        return r;
}

static int page_json(farm_db *db, const char *count_sql, const char *sql, const char *release,
                     const struct farm_page *page, const char *key, json_t *(*row)(sql_stmt *st),
                     json_t **ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL, *cnt = NULL;
        json_auto_t *list = json_array();
        int r, rc;
        if (!list)
                return -ENOMEM;
        if ((r = farm_prepare(c, count_sql, &cnt, err)) < 0 ||
            (r = farm_prepare(c, sql, &st, err)) < 0)
                return r;
        sql_bind_text(cnt, 1, release);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count", err);
        sql_bind_text(st, 1, release);
        sql_bind_int64(st, 2, (int64_t) page->limit);
        sql_bind_int64(st, 3, (int64_t) page->offset);
        while ((rc = sql_step(st)) == SQL_ROW)
                if (json_array_append_new(list, row(st)) < 0)
                        return -ENOMEM;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list", err);
        *ret = json_pack("{s:O, s:I, s:I, s:I}", key, list, "total",
                         (json_int_t) sql_column_int64(cnt, 0), "limit", (json_int_t) page->limit,
                         "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

static json_t *waiver_row(sql_stmt *st) {
        json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                              "release", farm_json_col_text(st, 1), "problem",
                              farm_json_col_text(st, 2), "reason", farm_json_col_text(st, 3), "by",
                              farm_json_col_text(st, 4), "withdrawn_by", farm_json_col_text(st, 7));
        if (o && (farm_json_set_col_time(o, "created_ns", st, 5) < 0 ||
                  farm_json_set_col_time(o, "withdrawn_ns", st, 6) < 0))
                json_decref(o), o = NULL;
        return o;
}

int farm_waivers_json(farm_db *db, const char *release, const struct farm_page *page, json_t **ret,
                      char err[static FARM_ERROR_MAX]) {
        return page_json(db, "SELECT count(*) FROM waivers WHERE kernel_release = ?1 OR ?1 IS NULL",
                         "SELECT id, kernel_release, problem, reason, by, created_ns, "
                         "withdrawn_ns, withdrawn_by FROM waivers "
                         "WHERE kernel_release = ?1 OR ?1 IS NULL ORDER BY id DESC "
                         "LIMIT ?2 OFFSET ?3",
                         release, page, "waivers", waiver_row, ret, err);
}

static json_t *audit_row(sql_stmt *st) {
        json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
                              farm_json_col_int(st, 0), "who", farm_json_col_text(st, 2), "action",
                              farm_json_col_text(st, 3), "machine", farm_json_col_text(st, 8),
                              "release", farm_json_col_text(st, 4), "problem",
                              farm_json_col_text(st, 5), "waiver", farm_json_col_int(st, 6),
                              "detail", farm_json_col_text(st, 7));
        if (o && farm_json_set_col_time(o, "time_ns", st, 1) < 0)
                json_decref(o), o = NULL;
        return o;
}

int farm_audit_json(farm_db *db, const struct farm_page *page, json_t **ret,
                    char err[static FARM_ERROR_MAX]) {
        return page_json(
                db, "SELECT count(*) FROM audit WHERE CAST(?1 AS TEXT) IS NULL",
                "SELECT id, time_ns, who, action, kernel_release, problem, waiver, detail, "
                "machine_id FROM audit WHERE CAST(?1 AS TEXT) IS NULL ORDER BY id DESC LIMIT ?2 "
                "OFFSET ?3",
                NULL, page, "audit", audit_row, ret, err);
}
