/* SPDX-License-Identifier: MIT */
/* The flight recorder's captures served by the API: GET /api/v1/traces (a machine's, in a
 * window), /api/v1/traces/ID, and the raw events at /api/v1/traces/ID/raw and /traces/ID.txt. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "captures.h"
#include "hist-cache.h"
#include "db-internal.h"
#include "params.h"
#include "query-internal.h"
#include "text-safe.h"
#include "timeutil.h"
#include "trace-raw.h"
#include "traces.h"

/* A refusal: the query API's error answer (query_error()), and 1 (answered). */
#define refuse(a, status, ...) (query_error(a, status, __VA_ARGS__), 1)

static int failed(struct farm_answer *a, int error, const char *what) {
        a->status = error == -EBUSY ? 503 : 500;
        a->error = error;
        snprintf(a->err, sizeof(a->err), "%s", what);
        return 1;
}

static json_t *row_json(sql_stmt *st, bool with_analysis) {
        char t[TIMESTAMP_MAX_LEN];
        json_t *o = json_pack(
                "{s:I, s:s, s:I, s:I, s:i, s:s, s:I, s:I, s:s, s:{s:s, s:s, s:o, s:I}, s:b}", "id",
                (json_int_t) sql_column_int64(st, 0), "machine", sql_column_text(st, 1) ?: "",
                "run", (json_int_t) sql_column_int64(st, 2), "interval",
                (json_int_t) sql_column_int64(st, 3), "cpu", sql_column_int(st, 4), "time",
                format_timestamp_utc(t, sql_column_int64(st, 5)), "time_ns",
                (json_int_t) sql_column_int64(st, 5), "latency_ns",
                (json_int_t) sql_column_int64(st, 6), "summary", sql_column_text(st, 7) ?: "",
                "culprit", "kind", sql_column_text(st, 8) ?: "unknown", "name",
                sql_column_text(st, 9) ?: "", "pid",
                sql_column_null(st, 10) ? json_null() : json_integer(sql_column_int64(st, 10)),
                "duration_ns", (json_int_t) sql_column_int64(st, 11), "raw",
                sql_column_int(st, 12) != 0);
        if (o && with_analysis)
                json_object_set_new(o, "analysis",
                                    json_loads(sql_column_text(st, 13) ?: "", 0, NULL)
                                            ?: json_null());
        return o;
}

#define ROW_COLUMNS                                                                    \
        "SELECT t.id, r.machine_id, r.run_id, t.seq, t.cpu, t.time_ns, t.latency_ns, " \
        "t.summary, t.culprit_kind, t.culprit_name, t.culprit_pid, t.culprit_ns, "     \
        "t.raw IS NOT NULL, t.analysis"
#define ROW_FROM " FROM traces t JOIN runs r ON r.id = t.run "
#define ROW_SQL ROW_COLUMNS ROW_FROM

static int list_traces(farm_db *db, const struct farm_args *args, int64_t now_ns,
                       struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX], err[FARM_ERROR_MAX];
        int64_t from = INT64_MIN, to = INT64_MAX;
        uint64_t cpu = UINT64_MAX, limit = 100;
        const char *m = farm_args_get(args, "machine");
        if (!m || !farm_machine_id_valid(m))
                return refuse(a, 400, "machine: required, a machine id (32 hexadecimal digits)");
        if (farm_param_time("from", farm_args_get(args, "from"), now_ns, &from, perr) < 0 ||
            farm_param_time("to", farm_args_get(args, "to"), now_ns, &to, perr) < 0 ||
            farm_param_uint("cpu", farm_args_get(args, "cpu"), 0, FARM_CPU_MAX - 1, &cpu, perr) <
                    0 ||
            farm_param_uint("limit", farm_args_get(args, "limit"), 1, FARM_TRACES_LIST_MAX, &limit,
                            perr) < 0)
                return refuse(a, 400, "%s", perr);
        if (from >= to)
                return refuse(a, 400, "from: not before to");

        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             ROW_SQL "WHERE r.machine_id = ?1 AND t.time_ns >= ?2 AND "
                                     "t.time_ns < ?3 AND (?4 < 0 OR t.cpu = ?4) "
                                     "ORDER BY t.time_ns DESC, t.id DESC LIMIT ?5",
                             &st, err);
        if (r < 0)
                return failed(a, r, err);
        sql_bind_text(st, 1, m);
        sql_bind_int64(st, 2, from);
        sql_bind_int64(st, 3, to);
        sql_bind_int64(st, 4, cpu == UINT64_MAX ? -1 : (int64_t) cpu);
        sql_bind_int64(st, 5, (int64_t) limit);
        json_t *list = json_array();
        int rc = SQL_DONE;
        while (list && (rc = sql_step(st)) == SQL_ROW)
                if (json_array_append_new(list, row_json(st, false)) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        if (!list)
                return failed(a, -ENOMEM, "out of memory listing traces");
        if (rc != SQL_DONE) {
                json_decref(list);
                return failed(a, farm_fail(c, rc, "cannot list traces", err), err);
        }
        a->status = 200;
        a->json = json_pack("{s:o}", "traces", list);
        return 1;
}

/* One capture as JSON, or its raw events as text. */
static int get_trace(farm_db *db, int64_t id, bool raw, struct farm_answer *a) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];
        int r = farm_prepare(c, ROW_COLUMNS ", t.raw" ROW_FROM "WHERE t.id = ?1", &st, err);
        if (r < 0)
                return failed(a, r, err);
        sql_bind_int64(st, 1, id);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return refuse(a, 404, "no such trace");
        if (rc != SQL_ROW)
                return failed(a, farm_fail(c, rc, "cannot read a trace", err), err);
        if (!raw) {
                a->status = 200;
                a->json = row_json(st, true);
                return a->json ? 1 : failed(a, -ENOMEM, "out of memory");
        }
        if (sql_column_null(st, 14))
                return refuse(a, 404,
                              "the raw events of this trace are not on the server: they stayed "
                              "on the machine (rtsoak trace ID --raw there), or went with the "
                              "intervals of their month (retention)");
        char *text = NULL;
        size_t len;
        const void *blob = sql_column_blob(st, 14, &len);
        r = blob ? trace_raw_inflate(blob, len, TRACE_RAW_TEXT_MAX, &text, NULL) : -ENOMEM;
        if (r < 0)
                return failed(a, r, "a trace's raw events do not inflate");
        /* The events name tasks as the kernel does (any bytes): text with lines, escaped where
         * the rule refuses it, as every other text the server sends. */
        char why[TEXT_WHY_MAX];
        if (!text_ok(text, true, why)) {
                char *safe = text_escape_lines_dup(text);
                free(text);
                if (!safe)
                        return failed(a, -ENOMEM, "out of memory");
                text = safe;
        }
        a->status = 200;
        a->text = text;
        a->content_type = "text/plain; charset=utf-8";
        return 1;
}

/* The capture id at p, followed by exactly suffix: 0 when it is not one. */
static int64_t id_at(const char *p, const char *suffix) {
        char *end;
        errno = 0;
        long long id = strtoll(p, &end, 10);
        if (p[0] < '1' || p[0] > '9' || errno == ERANGE || strcmp(end, suffix) != 0)
                return 0;
        return id;
}

int farm_trace_route(farm_db *db, const char *url, const struct farm_args *args, int64_t now_ns,
                     struct farm_answer *ret) {
        size_t n = strlen(FARM_API_TRACES), d = strlen(FARM_DASH_TRACES);
        bool api = strncmp(url, FARM_API_TRACES, n) == 0 && (url[n] == 0 || url[n] == '/');
        bool page = strncmp(url, FARM_DASH_TRACES, d) == 0;
        if (!api && !page)
                return 0;
        *ret = (struct farm_answer){};
        if (api && url[n] == 0)
                return list_traces(db, args, now_ns, ret);
        int64_t id = 0;
        bool raw = true;
        if (page)
                id = id_at(url + d, ".txt");
        else if (!(id = id_at(url + n + 1, "/raw")))
                id = id_at(url + n + 1, ""), raw = false;
        if (id == 0)
                return refuse(ret, 404, "no such trace");
        return get_trace(db, id, raw, ret);
}
