/* SPDX-License-Identifier: MIT */
/* The flight recorder's captures served by the API: GET /api/v1/traces (a machine's, in a
 * window), /api/v1/traces/ID, and the raw events at /api/v1/traces/ID/raw and /traces/ID.txt;
 * store/traces.c reads them, this file checks the request and writes the answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "captures.h"
#include "params.h"
#include "query-internal.h"
#include "text-safe.h"
#include "timeutil.h"
#include "traces.h"

/* A refusal: the query API's error answer (query_error()), and 1 (answered). */
#define refuse(a, status, ...) (query_error(a, status, __VA_ARGS__), 1)

/* A failure of ours (query_internal()): what says why; 1 (answered). */
static int failed(struct farm_answer *a, int error, const char *what) {
        snprintf(a->err, sizeof(a->err), "%s", what);
        query_internal(a, error);
        return 1;
}

static json_t *capture_json(const struct farm_capture *c) {
        char t[TIMESTAMP_MAX_LEN];
        return json_pack(
                "{s:I, s:s, s:I, s:I, s:i, s:s, s:I, s:I, s:s, s:{s:s, s:s, s:o, s:I}, s:b}", "id",
                (json_int_t) c->id, "machine", c->machine, "run", (json_int_t) c->run, "interval",
                (json_int_t) c->interval, "cpu", (int) c->cpu, "time",
                format_timestamp_utc(t, c->time_ns), "time_ns", (json_int_t) c->time_ns,
                "latency_ns", (json_int_t) c->latency_ns, "summary", c->summary, "culprit", "kind",
                c->culprit_kind ?: "unknown", "name", c->culprit_name, "pid",
                c->culprit_pid == FARM_NONE ? json_null() : json_integer(c->culprit_pid),
                "duration_ns", (json_int_t) c->culprit_ns, "raw", c->raw);
}

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

        struct farm_capture_list l;
        int r = farm_traces_list(db, m, from, to, cpu == UINT64_MAX ? -1 : (int64_t) cpu, limit, &l,
                                 err);
        if (r < 0)
                return failed(a, r, err);
        json_t *list = json_array();
        for (size_t i = 0; list && i < l.n; i++)
                if (json_array_append_new(list, capture_json(&l.v[i])) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        farm_capture_list_done(&l);
        if (!list)
                return failed(a, -ENOMEM, "out of memory listing traces");
        a->status = 200;
        a->json = json_pack("{s:o}", "traces", list);
        return 1;
}

/* One capture as JSON, with its analysis. */
static int capture_answer(const struct farm_capture *c, struct farm_answer *a) {
        json_t *o = capture_json(c);
        if (o)
                json_object_set_new(o, "analysis",
                                    json_loads(c->analysis ?: "", 0, NULL) ?: json_null());
        a->status = 200;
        a->json = o;
        return o ? 1 : failed(a, -ENOMEM, "out of memory");
}

/* The raw events of a capture as text, escaped where the text rule refuses them. */
static int raw_answer(char *text, struct farm_answer *a) {
        if (!text)
                return refuse(a, 404,
                              "the raw events of this trace are not on the server: they stayed "
                              "on the machine (rtsoak trace ID --raw there), or went with the "
                              "intervals of their month (retention)");
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

/* One capture as JSON, or its raw events as text. */
static int get_trace(farm_db *db, int64_t id, bool raw, struct farm_answer *a) {
        char err[FARM_ERROR_MAX], *text = NULL;
        struct farm_capture c;
        int r = farm_trace_get(db, id, &c, raw ? &text : NULL, err);
        if (r == -ENOENT)
                return refuse(a, 404, "no such trace");
        if (r < 0)
                return failed(a, r, err);
        r = raw ? raw_answer(text, a) : capture_answer(&c, a);
        farm_capture_done(&c);
        return r;
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
