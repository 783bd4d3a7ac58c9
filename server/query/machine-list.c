/* SPDX-License-Identifier: MIT */
/* The list queries of the JSON API: the paginated machine list, and a machine's runs and
 * events. */
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

/* ---- GET /api/v1/machines/{id}/events and /runs ----------------------------------------- */

static bool event_type_ok(const char *s, struct farm_answer *a) {
        char why[NAME_WHY_MAX];
        bool ok = name_ok(&summary_name_event_type, s, why);
        if (!ok)
                query_error(a, 400, "type=%.64s: %s", s, why);
        return ok;
}

/* The answer of a machine's list: {"machine": id, key: list, and the page}; or of r, what
 * reading the list returned, when it failed. */
static int machine_list_answer(struct farm_answer *a, int r, const char *id, const char *key,
                               json_t *list, const char *path, const struct farm_args *args,
                               const struct farm_page *page, uint64_t total) {
        if (r == -ENOENT) {
                query_error(a, 404, "no such machine");
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);
        json_t *o = json_object();
        if (!o || json_object_set_new(o, "machine", json_string(id)) < 0 ||
            json_object_set_new(o, key, list) < 0 ||
            query_add_page(o, path, args, page, total) < 0) {
                if (!o)
                        json_decref(list);
                json_decref(o);
                query_json(a, NULL);
                return 0;
        }
        query_json(a, o);
        return 0;
}

/* 0 when the machine is enrolled, -ENOENT when not.  With the reader lock held. */
static int machine_known(sql_conn *c, const char *id, char *err) {
        struct query_machine m;
        int r = query_machine_find(c, id, &m, err);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
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
        int r = machine_known(c, id, err);
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
        return machine_list_answer(a, r, id, "events", list, path, args, &page, total);
}

/* What the machine stamped of a run, and how it ended. */
static json_t *run_stamps_json(sql_stmt *st, bool data) {
        bool unclean = !sql_column_null(st, 13);
        json_t *end = unclean ? json_pack("{s:s, s:o, s:o, s:o}", "how", "unclean", "time_ns",
                                          farm_json_col_int(st, 13), "time",
                                          json_time(sql_column_int64(st, 13)), "message",
                                          farm_json_col_text(st, 14))
                              : json_null();
        return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
                         "s:o, s:o, s:I, s:o, s:o}",
                         "id", farm_json_col_int(st, 0), "boot_id", farm_json_col_text(st, 1),
                         "kernel_release", farm_json_col_text(st, 2), "kernel_version",
                         farm_json_col_text(st, 3), "preempt_model", farm_json_col_text(st, 4),
                         "daemon_version", farm_json_col_text(st, 5), "start_ns",
                         farm_json_col_int(st, 6), "start", json_time(sql_column_int64(st, 6)),
                         "interval_ns", farm_json_col_int(st, 7), "threshold_ns",
                         farm_json_col_int(st, 8), "first_data_ns", farm_json_col_int(st, 9),
                         "first_data", data ? json_time(sql_column_int64(st, 9)) : json_null(),
                         "last_data_ns", farm_json_col_int(st, 10), "last_data",
                         data ? json_time(sql_column_int64(st, 10)) : json_null(), "intervals",
                         (json_int_t) sql_column_int64(st, 11), "worst_latency_ns",
                         farm_json_col_int(st, 12), "end", end);
}

/* A run as the runs query lists it, from a row of its SELECT. */
static json_t *run_json(sql_stmt *st) {
        bool data = !sql_column_null(st, 9);
        json_t *run = run_stamps_json(st, data);
        /* When the server received it: its first upload, its latest interval. */
        if (run && (farm_json_set_col_time(run, "first_report_ns", st, 15) < 0 ||
                    farm_json_set_col_time(run, "last_received_ns", st, 16) < 0 ||
                    json_object_set_new(run, "clock_ahead_ns", farm_json_col_int(st, 17)) < 0))
                json_decref(run), run = NULL;
        return run;
}

#define RUNS_SKEW FARM_SQL_RUN_SKEW("q.")
#define RUNS_START FARM_SQL_RUN_START("r.", "?4")

int farm_machine_runs_json(farm_db *db, const char *id, const struct farm_page *page,
                           const struct farm_clock_view *cv, json_t **ret, uint64_t *ret_total,
                           char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        int r = machine_known(c, id, err);
        if (r < 0)
                return r;
        /* The day rollups give the first and last data, the intervals and the worst case of a
         * run from a few rows per day instead of its intervals. */
        if ((r = farm_prepare(c, "SELECT count(*) FROM runs WHERE machine_id = ?", &cnt, err)) <
                    0 ||
            (r = farm_prepare(c,
                              "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                              "r.preempt_model, r.daemon_version, r.start_ns, r.interval_ns, "
                              "r.threshold_ns, d.first_ns, d.last_ns, d.intervals, d.max_ns, "
                              "u.time_ns, u.message, r.first_report_ns, d.received_ns, "
                              "CASE WHEN r.skew_ns > ?4 THEN r.skew_ns END "
                              /* How far its data was stamped after it arrived, when beyond ?4. */
                              "FROM (SELECT q.*, " RUNS_SKEW " AS skew_ns FROM runs q "
                              "  WHERE q.machine_id = ?1) r "
                              "LEFT JOIN (SELECT run, min(first_start_ns) AS first_ns, "
                              "  max(last_end_ns) AS last_ns, sum(intervals) AS intervals, "
                              "  max(max_ns) AS max_ns, max(max_received_ns) AS received_ns "
                              "  FROM run_days GROUP BY run) d ON d.run = r.id "
                              /* The run's first unclean end, if any. */
                              "LEFT JOIN events u ON u.id = (SELECT e.id FROM events e WHERE "
                              "  e.run = r.id AND e.type = 'unclean_end' ORDER BY e.time_ns, e.id "
                              "  LIMIT 1) "
                              "ORDER BY " RUNS_START " DESC, r.run_id DESC LIMIT ?2 OFFSET ?3",
                              &st, err)) < 0)
                return r;
        sql_bind_text(cnt, 1, id);
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 4, cv->clock_tolerance_ns);
        return page_rows(c, cnt, st, 2, page, run_json, "cannot count runs", "cannot read runs",
                         ret, ret_total, err);
}

int query_runs(farm_db *db, const char *id, const struct farm_args *args, const char *path,
               const struct farm_clock_view *cv, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        json_t *list = NULL;
        uint64_t total = 0;

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        int r = farm_machine_runs_json(db, id, &page, cv, &list, &total, a->err);
        return machine_list_answer(a, r, id, "runs", list, path, args, &page, total);
}

/* ---- GET /api/v1/machines, paginated ---------------------------------------------------- */

int query_machines(farm_db *db, const struct farm_args *args, const char *path,
                   const struct farm_clock_view *cv, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        uint64_t total = 0;
        char(*ids)[FARM_MACHINE_ID_LEN + 1] = NULL;
        size_t n = 0;
        int r, rc;

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        ids = calloc(page.limit, sizeof(*ids));
        if (!ids)
                return query_internal(a, -ENOMEM);
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
                if ((r = farm_prepare(c, "SELECT count(*) FROM machines", &cnt, a->err)) < 0 ||
                    (r = farm_prepare(c, "SELECT id FROM machines ORDER BY id LIMIT ?1 OFFSET ?2",
                                      &st, a->err)) < 0) {
                        free(ids);
                        return query_internal(a, r);
                }
                if ((rc = sql_step(cnt)) == SQL_ROW)
                        total = (uint64_t) sql_column_int64(cnt, 0);
                sql_bind_int64(st, 1, (int64_t) page.limit);
                sql_bind_int64(st, 2, (int64_t) MIN(page.offset, (uint64_t) INT64_MAX));
                while (rc == SQL_ROW && (rc = sql_step(st)) == SQL_ROW && n < page.limit)
                        snprintf(ids[n++], sizeof(ids[0]), "%s", sql_column_text(st, 0) ?: "");
                if (rc != SQL_DONE) {
                        free(ids);
                        return query_internal(a,
                                              farm_fail(c, rc, "cannot list the machines", a->err));
                }
        }
        /* Each machine as GET /api/v1/machines/{id} shows it. */
        json_t *list = json_array(), *o = json_object();
        for (size_t i = 0; list && i < n; i++) {
                json_t *m = NULL;
                r = farm_machines_json(db, ids[i], cv, &m, a->err);
                if (r == -ENOENT)
                        continue; /* removed meanwhile */
                if (r < 0) {
                        free(ids);
                        json_decref(list);
                        json_decref(o);
                        return query_internal(a, r);
                }
                json_array_append_new(list, m);
        }
        free(ids);
        if (!o || !list || json_object_set_new(o, "machines", list) < 0 ||
            query_add_page(o, path, args, &page, total) < 0) {
                json_decref(o);
                query_json(a, NULL);
                return 0;
        }
        query_json(a, o);
        return 0;
}

/* ---- GET /api/v1/machines/{id}, and the list's rows ---- */

#define LATEST_RUN_START FARM_SQL_RUN_START("r.", "?2")
#define LATEST_RUN_SKEW FARM_SQL_RUN_SKEW("r.")

/* The latest run of a machine (by its start as the server takes it), or null. */
static int latest_run_json(sql_conn *c, const char *machine_id, const struct farm_clock_view *cv,
                           json_t **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                             "r.preempt_model, r.start_ns, (SELECT max(max_ns) FROM intervals "
                             "WHERE run = r.id), r.first_report_ns, " LATEST_RUN_SKEW ", "
                             "r.interval_ns FROM runs r WHERE r.machine_id = ?1 "
                             "ORDER BY " LATEST_RUN_START " DESC, r.run_id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        int rc = sql_step(st);
        if (rc == SQL_DONE) {
                *ret = json_null();
                return 0;
        }
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the latest run", err);
        bool ahead = !sql_column_null(st, 8) && sql_column_int64(st, 8) > cv->clock_tolerance_ns;
        *ret = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                         "boot_id", farm_json_col_text(st, 1), "kernel_release",
                         farm_json_col_text(st, 2), "kernel_version", farm_json_col_text(st, 3),
                         "preempt_model", farm_json_col_text(st, 4), "worst_latency_ns",
                         farm_json_col_int(st, 6), "interval_ns", farm_json_col_int(st, 9),
                         "clock_ahead_ns", ahead ? farm_json_col_int(st, 8) : json_null());
        if (*ret && (farm_json_set_col_time(*ret, "start_ns", st, 5) < 0 ||
                     farm_json_set_col_time(*ret, "first_report_ns", st, 7) < 0))
                json_decref(*ret), *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

/* What the clock view adds to machine m: its last data (col of st, as the server takes it),
 * whether it is silent, and how far its latest run's data was stamped ahead of its arrival
 * (null: within the tolerance). */
static int clock_fields(json_t *m, sql_stmt *st, int col, const json_t *latest,
                        const struct farm_clock_view *cv) {
        int64_t last = sql_column_int64(st, col);
        int64_t interval = json_integer_value(json_object_get(latest, "interval_ns"));
        bool silent = !sql_column_null(st, col) && !json_is_true(json_object_get(m, "revoked")) &&
                      cv->now_ns - last > interval + cv->max_gap_ns;
        json_t *ahead = json_object_get(latest, "clock_ahead_ns");
        if (farm_json_set_col_time(m, "last_data_ns", st, col) < 0 ||
            json_object_set_new(m, "silent", json_boolean(silent)) < 0 ||
            json_object_set_new(m, "clock_ahead_ns", ahead ? json_incref(ahead) : json_null()) < 0)
                return -ENOMEM;
        return 0;
}

#define MACHINE_DAY_END FARM_SQL_DAY_END("d.", "?2")

int farm_machines_json(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                       json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *list = json_array();
        int r, rc;

        if (!list)
                return -ENOMEM;
        r = farm_prepare(c,
                         "SELECT m.id, m.hostname, m.cpu_model, m.cpus, m.threshold_ns, m.gating, "
                         "m.enrolled_ns, m.revoked_ns, m.last_report_ns, "
                         /* From the day rollups: a month of a machine is 30 of their rows rather
                          * than tens of thousands of intervals. */
                         "(SELECT max(d.max_ns) FROM run_days d JOIN runs r ON d.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT coalesce(sum(d.intervals), 0) FROM run_days d "
                         " JOIN runs r ON d.run = r.id WHERE r.machine_id = m.id), "
                         "(SELECT count(*) FROM events e JOIN runs r ON e.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT groups || '\n' || labels FROM machine_settings s "
                         " WHERE s.machine_id = m.id ORDER BY from_ns DESC, id DESC LIMIT 1), "
                         "(SELECT max(" MACHINE_DAY_END ") FROM run_days d JOIN runs r "
                         " ON d.run = r.id WHERE r.machine_id = m.id) "
                         "FROM machines m WHERE m.id = ?1 OR ?1 IS NULL ORDER BY m.id",
                         &st, err);
        if (r < 0)
                return r;
        if (machine_id)
                sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *id = sql_column_text(st, 0);
                json_t *latest = NULL;
                if ((r = latest_run_json(c, id, cv, &latest, err)) < 0)
                        return r;
                json_t *kernel = json_is_object(latest)
                                         ? json_incref(json_object_get(latest, "kernel_release"))
                                         : json_null();
                json_t *m = json_pack(
                        "{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:b, s:o, s:o, s:o, s:o, s:o, "
                        "s:o, s:o}",
                        "id", id, "hostname", farm_json_col_text(st, 1), "cpu_model",
                        farm_json_col_text(st, 2), "cpus", farm_json_col_int(st, 3), "threshold_ns",
                        farm_json_col_int(st, 4), "gating", sql_column_int(st, 5), "enrolled_ns",
                        farm_json_col_int(st, 6), "revoked", !sql_column_null(st, 7), "revoked_ns",
                        farm_json_col_int(st, 7), "last_report_ns", farm_json_col_int(st, 8),
                        "kernel", kernel, "worst_latency_ns", farm_json_col_int(st, 9),
                        "latest_run", latest, "intervals", farm_json_col_int(st, 10), "events",
                        farm_json_col_int(st, 11));
                /* The groups and labels in force, as the settings' history has them. */
                if (m && json_object_update_new(
                                 m, farm_settings_brief_json(sql_column_text(st, 12))) < 0) {
                        json_decref(m);
                        m = NULL;
                }
                /* "revoked" is the flag: the time of the revocation is "revoked_at". */
                if (!m || farm_json_set_col_time(m, "enrolled_ns", st, 6) < 0 ||
                    farm_json_set_col_time(m, "last_report_ns", st, 8) < 0 ||
                    clock_fields(m, st, 13, latest, cv) < 0 ||
                    json_object_set_new(m, "revoked_at",
                                        sql_column_null(st, 7)
                                                ? json_null()
                                                : json_time(sql_column_int64(st, 7))) < 0 ||
                    json_array_append_new(list, m) < 0)
                        return -ENOMEM;
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list the machines", err);
        if (machine_id) {
                if (json_array_size(list) == 0)
                        return farm_failf(db, -ENOENT, err, "no machine %s is enrolled",
                                          machine_id);
                *ret = json_incref(json_array_get(list, 0));
        } else
                *ret = json_pack("{s:O}", "machines", list);
        return *ret ? 0 : -ENOMEM;
}
