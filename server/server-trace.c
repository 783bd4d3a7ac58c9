/* SPDX-License-Identifier: MIT */
/* Trace captures in the farm database: written with their summary's interval, looked up for
 * a violation, and answered as JSON or, for the raw events, as text. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-db-internal.h"
#include "server-params.h"
#include "server-trace.h"
#include "timeutil.h"
#include "text-safe.h"
#include "trace-raw.h"

#define LIST_MAX 1000

int farm_store_traces(sql_conn *c, int64_t run, const struct summary_interval *iv, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (iv->ntraces == 0)
                return 0;
        int r = farm_prepare(c,
                             "INSERT INTO traces (run, seq, cpu, time_ns, latency_ns, summary, "
                             "culprit_kind, culprit_name, culprit_pid, culprit_ns, analysis, "
                             "raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT (run, cpu, time_ns) DO NOTHING",
                             &st, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < iv->ntraces; i++) {
                const struct summary_trace *t = &iv->traces[i];
                const struct trace_analysis *a = t->analysis;
                const struct trace_contrib *k = &a->culprit;
                sql_bind_int64(st, 1, run);
                sql_bind_int64(st, 2, (int64_t) iv->seq);
                sql_bind_int64(st, 3, a->cpu);
                sql_bind_int64(st, 4, a->time_ns);
                sql_bind_int64(st, 5, (int64_t) a->latency_ns);
                sql_bind_text(st, 6, a->summary);
                sql_bind_text(st, 7, trace_culprit_kind_name(k->kind));
                sql_bind_text(st, 8, k->name);
                if (k->kind == TRACE_CULPRIT_THREAD)
                        sql_bind_int64(st, 9, k->pid);
                else
                        sql_bind_null(st, 9);
                sql_bind_int64(st, 10, (int64_t) k->duration_ns);
                sql_bind_text(st, 11, t->json);
                if (t->raw)
                        sql_bind_blob(st, 12, t->raw, t->raw_len);
                else
                        sql_bind_null(st, 12);
                if ((r = farm_step_done(st, "cannot store a trace capture", err)) < 0)
                        return r;
        }
        return 0;
}

static int brief_of(sql_stmt *st, struct farm_trace_brief *ret) {
        int r = sql_step(st);
        if (r == SQL_DONE)
                return -ENOENT;
        if (r != SQL_ROW)
                return r < 0 ? r : -EIO;
        ret->id = sql_column_int64(st, 0);
        snprintf(ret->summary, sizeof(ret->summary), "%s", sql_column_text(st, 1) ?: "");
        ret->raw = sql_column_int(st, 2) != 0;
        return 0;
}

/* Of the candidates (FARM_TRACE_FIND_SQL): the capture of the violation's own wake-up first,
 * then the worst. */
static int find_with(sql_stmt *st, int64_t key, const char *machine_id, int cpu, int64_t from_ns,
                     int64_t to_ns, int64_t at_ns, struct farm_trace_brief *ret) {
        if (machine_id)
                sql_bind_text(st, 1, machine_id);
        else
                sql_bind_int64(st, 1, key);
        sql_bind_int64(st, 2, cpu);
        sql_bind_int64(st, 3, from_ns);
        sql_bind_int64(st, 4, to_ns);
        sql_bind_int64(st, 5, at_ns);
        int r = brief_of(st, ret);
        sql_reset(st);
        return r;
}

int farm_trace_find_machine(farm_db *db, const char *machine_id, int cpu, int64_t from_ns,
                            int64_t to_ns, int64_t at_ns, struct farm_trace_brief *ret) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];
        int r = farm_prepare(c,
                             "SELECT t.id, t.summary, t.raw IS NOT NULL FROM runs r JOIN traces t "
                             "ON t.run = r.id WHERE r.machine_id = ?1 AND t.cpu = ?2 AND "
                             "t.time_ns >= ?3 AND t.time_ns < ?4 "
                             "ORDER BY t.time_ns = ?5 DESC, t.latency_ns DESC, t.id LIMIT 1",
                             &st, err);
        return r < 0 ? r : find_with(st, 0, machine_id, cpu, from_ns, to_ns, at_ns, ret);
}

void farm_trace_annotate_problem(sql_stmt *find, json_t *problem, int64_t run, int cpu,
                                 int64_t from_ns, int64_t to_ns, int64_t at_ns) {
        struct farm_trace_brief b;
        bool found = problem && find &&
                     find_with(find, run, NULL, cpu, from_ns, to_ns, at_ns, &b) == 0;
        if (!problem)
                return;
        json_object_set_new(problem, "culprit", found ? json_string(b.summary) : json_null());
        json_object_set_new(problem, "trace", found ? json_integer(b.id) : json_null());
}

/* ---- the API ---- */

_printf_(3, 4) static int refuse(struct farm_answer *a, unsigned status, const char *fmt, ...) {
        char msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        a->status = status;
        a->json = farm_error_json(msg);
        return 1;
}

static int failed(struct farm_answer *a, int error, const char *what) {
        a->status = error == -EBUSY ? 503 : 500;
        a->error = error;
        snprintf(a->err, sizeof(a->err), "%s", what);
        return 1;
}

/* The value of parameter name ("" for "?name"), or NULL; the route table checked them
 * (server-routes.c). */
static const char *param(const struct farm_args *args, const char *name) {
        for (unsigned i = 0; i < args->n; i++)
                if (strcmp(args->a[i].name, name) == 0)
                        return args->a[i].value ?: "";
        return NULL;
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
        const char *m = param(args, "machine");
        if (!m || !farm_machine_id_valid(m))
                return refuse(a, 400, "machine: required, a machine id (32 hexadecimal digits)");
        if (farm_param_time("from", param(args, "from"), now_ns, &from, perr) < 0 ||
            farm_param_time("to", param(args, "to"), now_ns, &to, perr) < 0 ||
            farm_param_uint("cpu", param(args, "cpu"), 0, 8191, &cpu, perr) < 0 ||
            farm_param_uint("limit", param(args, "limit"), 1, LIST_MAX, &limit, perr) < 0)
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

int farm_trace_route(farm_db *db, const char *url, const char *method, const struct farm_args *args,
                     int64_t now_ns, struct farm_answer *ret) {
        size_t n = strlen(FARM_API_TRACES), d = strlen(FARM_DASH_TRACES);
        bool api = strncmp(url, FARM_API_TRACES, n) == 0 && (url[n] == 0 || url[n] == '/');
        bool page = strncmp(url, FARM_DASH_TRACES, d) == 0;
        if (!api && !page)
                return 0;
        *ret = (struct farm_answer){};
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
                ret->allow = "GET, HEAD";
                return refuse(ret, 405, "method not allowed");
        }
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
