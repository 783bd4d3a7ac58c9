/* SPDX-License-Identifier: MIT */
/* A machine's events as the events query lists them, and the answer of a machine's list
 * (its events, its runs). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-time.h"
#include "macro.h"
#include "query-internal.h"
#include "machine-list.h"
#include "settings.h"

/* ---- GET /api/v1/machines/{id}/events ----------------------------------------- */

static bool event_type_ok(const char *s, struct farm_answer *a) {
        char why[NAME_WHY_MAX];
        bool ok = name_ok(&summary_name_event_type, s, why);
        if (!ok)
                query_error(a, 400, "type=%.64s: %s", s, why);
        return ok;
}

int query_machine_list_answer(struct farm_answer *a, int r, const char *id, const char *key,
                              json_t *list, const char *path, const struct farm_args *args,
                              const struct farm_page *page, uint64_t total) {
        if (r == -ENOENT) {
                query_error(a, 404, "no such machine");
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);
        json_t *o = json_object();
        if (o && json_object_set_new(o, "machine", json_string(id)) < 0)
                json_decref(o), o = NULL;
        query_list_answer(a, o, key, list, path, args, page, total);
        return 0;
}

/* Binds the page to st (the parameters limit_at and limit_at + 1), counts what cnt counts,
 * and lists the rows of st, each the object that row makes of it. */
static int page_rows(sql_conn *c, sql_stmt *cnt, sql_stmt *st, int limit_at,
                     const struct farm_page *page, json_t *(*row)(sql_stmt *st),
                     const char *count_error, const char *read_error, json_t **ret,
                     uint64_t *ret_total, char *err) {
        int rc;
        sql_bind_int64(st, limit_at, (int64_t) page->limit);
        sql_bind_int64(st, limit_at + 1, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, count_error, err);
        uint64_t total = (uint64_t) sql_column_int64(cnt, 0);
        json_t *list = json_array();
        if (!list) {
                snprintf(err, FARM_ERROR_MAX, "out of memory building the answer");
                return -ENOMEM;
        }
        while ((rc = sql_step(st)) == SQL_ROW)
                json_array_append_new(list, row(st));
        if (rc != SQL_DONE) {
                json_decref(list);
                return farm_fail(c, rc, read_error, err);
        }
        *ret = list;
        if (ret_total)
                *ret_total = total;
        return 0;
}

/* An event as the events query lists it, from a row of its SELECT. */
static json_t *event_json(sql_stmt *st) {
        return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "run",
                         farm_json_col_int(st, 0), "id", farm_json_col_int(st, 1), "time_ns",
                         farm_json_col_int(st, 2), "time", json_time(sql_column_int64(st, 2)),
                         "type", farm_json_col_text(st, 3), "cpu", farm_json_col_int(st, 4),
                         "value", farm_json_col_int(st, 5), "message", farm_json_col_text(st, 6),
                         "kernel_release", farm_json_col_text(st, 7));
}

int farm_machine_events_json(farm_db *db, const char *id, int64_t from, int64_t to,
                             const char *type, const struct farm_page *page, json_t **ret,
                             uint64_t *ret_total, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        int r = query_machine_known(c, id, err);
        if (r < 0)
                return r;
#define EVENTS_WHERE                                                                             \
        "FROM runs r JOIN events e ON e.run = r.id WHERE r.machine_id = ?1 AND e.time_ns >= ?2 " \
        "AND e.time_ns < ?3 AND (e.type = ?4 OR ?4 IS NULL) "
        if ((r = farm_prepare(c, "SELECT count(*) " EVENTS_WHERE, &cnt, err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT r.run_id, e.event_id, e.time_ns, e.type, e.cpu, e.value, "
                              "e.message, r.kernel_release " EVENTS_WHERE
                              "ORDER BY e.time_ns DESC, r.run_id DESC, e.event_id DESC "
                              "LIMIT ?5 OFFSET ?6",
                              &st, err)) < 0)
                return r;
#undef EVENTS_WHERE
        sql_stmt *both[2] = { cnt, st };
        for (int i = 0; i < 2; i++) {
                sql_bind_text(both[i], 1, id);
                sql_bind_int64(both[i], 2, from);
                sql_bind_int64(both[i], 3, to);
                if (type)
                        sql_bind_text(both[i], 4, type);
        }
        return page_rows(c, cnt, st, 5, page, event_json, "cannot count events",
                         "cannot read events", ret, ret_total, err);
}

int query_events(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                 const char *path, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        int64_t from = INT64_MIN, to = INT64_MAX;
        const char *type = farm_args_get(args, "type");
        json_t *list = NULL;
        uint64_t total = 0;

        if ((type && !event_type_ok(type, a)) ||
            !query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("from", farm_args_get(args, "from"), now, &from, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("to", farm_args_get(args, "to"), now, &to, perr), perr,
                            a))
                return 0;
        if (from >= to) {
                query_error(a, 400, "from=%.64s: not before to=%.64s",
                            farm_args_get(args, "from") ?: "", farm_args_get(args, "to") ?: "");
                return 0;
        }
        int r = farm_machine_events_json(db, id, from, to, type, &page, &list, &total, a->err);
        return query_machine_list_answer(a, r, id, "events", list, path, args, &page, total);
}
