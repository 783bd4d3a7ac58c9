/* SPDX-License-Identifier: MIT */
/* Maintenance windows: the rules a window must follow, declaring and cancelling (audited), and
 * the windows as JSON with their state. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "audit.h"
#include "db-internal.h"
#include "maintenance.h"
#include "settings.h"
#include "timeutil.h"

_printf_(2, 3) static int invalid(char *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, FARM_ERROR_MAX, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* The rules of a new window; err names the field that breaks one. */
static int check_window(int64_t from_ns, int64_t to_ns, int64_t now_ns, char *err) {
        char t[TIMESTAMP_MAX_LEN], s[TIMESPAN_MAX_LEN];
        if (from_ns < now_ns - FARM_WINDOW_PAST_NS)
                return invalid(err,
                               "from: %s is more than a minute in the past: a maintenance window "
                               "is declared before it starts (to excuse a past silence, waive "
                               "its gap problem)",
                               format_timestamp_utc(t, from_ns));
        if (from_ns > now_ns + FARM_WINDOW_AHEAD_MAX_NS)
                return invalid(err, "from: %s is more than a year ahead",
                               format_timestamp_utc(t, from_ns));
        if (to_ns <= from_ns)
                return invalid(err, "to: %s is not after from", format_timestamp_utc(t, to_ns));
        if (to_ns - from_ns > FARM_WINDOW_MAX_NS)
                return invalid(err, "to: the window would last %s, more than 31d",
                               format_timespan(s, (uint64_t) (to_ns - from_ns)));
        return 0;
}

static int add_locked(sql_conn *c, const char *machine_id, int64_t from_ns, int64_t to_ns,
                      const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
                      char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        char detail[128 + 4 * FARM_REASON_MAX], t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        int r = farm_machine_exists(c, machine_id, err);
        if (r < 0 ||
            (r = farm_prepare(c,
                              "INSERT INTO maintenance (machine_id, from_ns, to_ns, reason, by, "
                              "created_ns) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                              &st, err)) < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, from_ns);
        sql_bind_int64(st, 3, to_ns);
        sql_bind_text(st, 4, reason);
        sql_bind_text(st, 5, who);
        sql_bind_int64(st, 6, now_ns);
        if ((r = sql_step(st)) != SQL_ROW)
                return farm_fail(c, r, "cannot store the maintenance window", err);
        *ret_id = sql_column_int64(st, 0);
        snprintf(detail, sizeof(detail), "window %" PRId64 " from %s to %s: %s", *ret_id,
                 format_timestamp_utc(t1, from_ns), format_timestamp_utc(t2, to_ns), reason);
        return farm_audit_machine(c, now_ns, who, "maintenance_add", machine_id, detail, err);
}

int farm_maintenance_add(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                         const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
                         char err[static FARM_ERROR_MAX]) {
        int r;
        if ((r = check_window(from_ns, to_ns, now_ns, err)) < 0 ||
            (r = farm_check_text("reason", reason, FARM_REASON_MAX, err)) < 0 ||
            (r = farm_check_who("by", who, err)) < 0)
                return r;
        return FARM_WRITE_TRANSACTION(
                db, w, err,
                add_locked(w, machine_id, from_ns, to_ns, reason, who, now_ns, ret_id, err));
}

static int cancel_locked(sql_conn *c, int64_t id, const char *who, const char *reason,
                         int64_t now_ns, char *err) {
        _cleanup_reset_ sql_stmt *sel = NULL, *upd = NULL;
        char detail[128 + 4 * FARM_REASON_MAX], t[TIMESTAMP_MAX_LEN];
        int r = farm_prepare(c,
                             "SELECT machine_id, from_ns, to_ns, cancelled_ns, cancelled_by "
                             "FROM maintenance WHERE id = ?",
                             &sel, err);
        if (r < 0 ||
            (r = farm_prepare(c,
                              "UPDATE maintenance SET cancelled_ns = ?2, cancelled_by = ?3 "
                              "WHERE id = ?1",
                              &upd, err)) < 0)
                return r;
        sql_bind_int64(sel, 1, id);
        int rc = sql_step(sel);
        if (rc == SQL_DONE)
                return farm_failf(farm_of(c), -ENOENT, err, "no maintenance window %" PRId64, id);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the window", err);
        const char *machine_id = sql_column_text(sel, 0);
        int64_t from_ns = sql_column_int64(sel, 1), to_ns = sql_column_int64(sel, 2);
        /* These go back to staff over the API: no path of the database in them. */
        if (!sql_column_null(sel, 3)) {
                snprintf(err, FARM_ERROR_MAX,
                         "maintenance window %" PRId64 " was cancelled already, at %s by %s", id,
                         format_timestamp_utc(t, sql_column_int64(sel, 3)),
                         sql_column_text(sel, 4) ?: "?");
                return -EALREADY;
        }
        if (to_ns <= now_ns) {
                snprintf(err, FARM_ERROR_MAX,
                         "maintenance window %" PRId64 " is over (it ended at %s): nothing to "
                         "cancel",
                         id, format_timestamp_utc(t, to_ns));
                return -EALREADY;
        }
        sql_bind_int64(upd, 1, id);
        sql_bind_int64(upd, 2, now_ns);
        sql_bind_text(upd, 3, who);
        if ((r = farm_step_done(upd, "cannot cancel the window", err)) < 0)
                return r;
        snprintf(detail, sizeof(detail), "window %" PRId64 " %s: %s", id,
                 now_ns < from_ns ? "cancelled before it began" : "ended early", reason);
        return farm_audit_machine(c, now_ns, who, "maintenance_cancel", machine_id, detail, err);
}

int farm_maintenance_cancel(farm_db *db, int64_t id, const char *who, const char *reason,
                            int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        int r;
        if ((r = farm_check_text("reason", reason, FARM_REASON_MAX, err)) < 0 ||
            (r = farm_check_who("by", who, err)) < 0)
                return r;
        return FARM_WRITE_TRANSACTION(db, w, err, cancel_locked(w, id, who, reason, now_ns, err));
}

/* ---- JSON ---------------------------------------------------------------------------------- */

#define WINDOW_COLUMNS                                                                       \
        "w.id, w.machine_id, m.hostname, w.from_ns, w.to_ns, w.reason, w.by, w.created_ns, " \
        "w.cancelled_ns, w.cancelled_by"

static json_t *window_json(sql_stmt *st, int64_t now_ns) {
        int64_t from = sql_column_int64(st, 3), to = sql_column_int64(st, 4);
        int64_t created = sql_column_int64(st, 7);
        bool cancelled = !sql_column_null(st, 8);
        int64_t cancelled_ns = sql_column_int64(st, 8);
        /* A cancelled window ended when it was cancelled: before it began, it never did. */
        int64_t until = cancelled ? MAX(from, MIN(to, cancelled_ns)) : to;
        const char *state = cancelled       ? "cancelled"
                            : now_ns < from ? "scheduled"
                            : now_ns < to   ? "active"
                                            : "over";
        return json_pack("{s:I, s:o, s:o, s:o, s:I, s:o, s:I, s:o, s:I, s:o, s:o, s:o, s:I, s:o, "
                         "s:o, s:o, s:s}",
                         "id", (json_int_t) sql_column_int64(st, 0), "machine",
                         farm_json_col_text(st, 1), "hostname", farm_json_col_text(st, 2), "from",
                         json_time(from), "from_ns", (json_int_t) from, "to", json_time(to),
                         "to_ns", (json_int_t) to, "effective_to", json_time(until),
                         "effective_to_ns", (json_int_t) until, "reason", farm_json_col_text(st, 5),
                         "by", farm_json_col_text(st, 6), "created", json_time(created),
                         "created_ns", (json_int_t) created, "cancelled",
                         cancelled ? json_time(cancelled_ns) : json_null(), "cancelled_ns",
                         farm_json_col_int(st, 8), "cancelled_by", farm_json_col_text(st, 9),
                         "state", state);
}

int farm_maintenance_get(farm_db *db, int64_t id, int64_t now_ns, json_t **ret,
                         char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT " WINDOW_COLUMNS " FROM maintenance w "
                             "LEFT JOIN machines m ON m.id = w.machine_id WHERE w.id = ?",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, id);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return farm_failf(farm_of(c), -ENOENT, err, "no maintenance window %" PRId64, id);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the window", err);
        *ret = window_json(st, now_ns);
        return *ret ? 0 : -ENOMEM;
}

int farm_maintenance_json(farm_db *db, const char *machine_id, const struct farm_page *page,
                          int64_t now_ns, json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        json_auto_t *list = json_array();
        int r, rc;

        if (!list)
                return -ENOMEM;
        if ((r = farm_prepare(c,
                              "SELECT count(*) FROM maintenance WHERE machine_id = ?1 OR "
                              "?1 IS NULL",
                              &cnt, err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT " WINDOW_COLUMNS " FROM maintenance w "
                              "LEFT JOIN machines m ON m.id = w.machine_id "
                              "WHERE w.machine_id = ?1 OR ?1 IS NULL "
                              "ORDER BY w.from_ns DESC, w.id DESC LIMIT ?2 OFFSET ?3",
                              &st, err)) < 0)
                return r;
        sql_bind_text(cnt, 1, machine_id);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count the windows", err);
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, (int64_t) MIN(page->limit, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 3, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        while ((rc = sql_step(st)) == SQL_ROW)
                if (json_array_append_new(list, window_json(st, now_ns)) < 0)
                        return -ENOMEM;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list the windows", err);
        *ret = json_pack("{s:O, s:I, s:I, s:I}", "windows", list, "total",
                         (json_int_t) sql_column_int64(cnt, 0), "limit", (json_int_t) page->limit,
                         "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

/* ---- times in requests --------------------------------------------------------------------- */

/* RFC 3339 with its offset: "2026-12-05T08:00:00Z", "...T09:00:00.5+01:00".  Anything looser
 * (a date alone, local time, "2h ago") is refused in a request: a window must not move with
 * the server's time zone or with when the request arrived. */
static bool rfc3339_with_offset(const char *s) {
        size_t n = strlen(s);
        if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't'))
                return false;
        if (s[n - 1] == 'Z' || s[n - 1] == 'z')
                return true;
        return n >= 25 && s[n - 3] == ':' && (s[n - 6] == '+' || s[n - 6] == '-');
}

static int time_field(json_t *body, const char *key, int64_t *ret, char *err) {
        json_t *v = json_object_get(body, key);
        const char *reason = NULL;
        if (!v)
                return invalid(err, "%s: missing", key);
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v) || !rfc3339_with_offset(json_string_value(v)) ||
            parse_timestamp(json_string_value(v), 0, ret, &reason) < 0)
                return invalid(err,
                               "%s: expected RFC 3339 time with an offset "
                               "(\"2026-12-05T08:00:00Z\") or Unix nanoseconds%s%s",
                               key, reason ? ": " : "", reason ?: "");
        return 0;
}

int farm_maintenance_from_json(json_t *body, int64_t *ret_from_ns, int64_t *ret_to_ns,
                               const char **ret_reason, char err[static FARM_ERROR_MAX]) {
        const char *key;
        json_t *v;
        int r;
        if (!json_is_object(body))
                return invalid(err, "body: expected a JSON object");
        json_object_foreach (body, key, v)
                if (strcmp(key, "from") != 0 && strcmp(key, "to") != 0 &&
                    strcmp(key, "reason") != 0)
                        return invalid(err, "%.64s: unknown field (expected from, to, reason)",
                                       key);
        if ((r = time_field(body, "from", ret_from_ns, err)) < 0 ||
            (r = time_field(body, "to", ret_to_ns, err)) < 0)
                return r;
        v = json_object_get(body, "reason");
        if (v && !json_is_string(v))
                return invalid(err, "reason: expected a string");
        *ret_reason = json_string_value(v);
        return farm_check_text("reason", *ret_reason, FARM_REASON_MAX, err);
}

int farm_maintenance_cancel_from_json(json_t *body, const char **ret_reason,
                                      char err[static FARM_ERROR_MAX]) {
        const char *key;
        json_t *v;
        if (!json_is_object(body))
                return invalid(err, "body: expected a JSON object");
        json_object_foreach (body, key, v)
                if (strcmp(key, "reason") != 0)
                        return invalid(err, "%.64s: unknown field (expected reason)", key);
        v = json_object_get(body, "reason");
        if (v && !json_is_string(v))
                return invalid(err, "reason: expected a string");
        *ret_reason = json_string_value(v);
        return farm_check_text("reason", *ret_reason, FARM_REASON_MAX, err);
}

int farm_maintenance_parse_time(const char *s, int64_t now_ns, int64_t *ret_ns,
                                const char **ret_reason) {
        const char *ahead = s[0] == '+' ? s + 1 : strncmp(s, "in ", 3) == 0 ? s + 3 : NULL;
        uint64_t span;
        if (!ahead)
                return parse_timestamp(s, now_ns, ret_ns, ret_reason);
        int r = parse_timespan(ahead, &span, ret_reason);
        if (r < 0)
                return r;
        if (span > (uint64_t) (INT64_MAX - now_ns)) {
                *ret_reason = "too far ahead";
                return -ERANGE;
        }
        *ret_ns = now_ns + (int64_t) span;
        return 0;
}
