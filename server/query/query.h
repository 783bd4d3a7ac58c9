/* SPDX-License-Identifier: MIT */
/* The query routes of the JSON API (a machine's intervals, histograms, events and runs, kernel
 * comparisons, the paginated machine list) and the Prometheus /metrics exposition: their
 * parameters, their answers and the dispatch to them.  Each part has a header of its own
 * (server-query-*.h, server-metrics.h) for the callers of its C functions. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "db.h"

#define FARM_ARGS_MAX 32

/* The query parameters of a request, as libmicrohttpd decoded them (value NULL: "?name"). */
struct farm_args {
        struct {
                const char *name, *value;
        } a[FARM_ARGS_MAX];
        unsigned n;
        bool too_many;
        /* Set by callers inside the server (the dashboard), never from a request: without
         * ?limit=, the intervals and histogram queries answer every step and CPU at once. */
        bool unpaged;
};

/* The value of name in args ("" for "?name"), or NULL when it is not given: how every route
 * reads its parameters, once the route table checked them (api/routes.c). */
const char *farm_args_get(const struct farm_args *args, const char *name);

/* What a query route answers: JSON, or text with its content type. */
struct farm_answer {
        unsigned status;
        json_t *json;
        char *text;
        const char *content_type;
        const char *allow; /* the Allow header of a 405 */
        int error;         /* of a 500 or 503: the -errno, err says why (for the log) */
        char err[FARM_ERROR_MAX];
};
void farm_answer_done(struct farm_answer *a);

/* {"error": msg} (NULL without memory).  msg often quotes what the client sent, which may be
 * any bytes and may have been cut inside a character: what is not valid UTF-8 without control
 * characters becomes '?', since a JSON string must be UTF-8. */
json_t *farm_error_json(const char *msg);

struct farm_counters;

/* Answers url if it is one of the query routes: 1 with ret filled, 0 when it is not one of
 * them (ret untouched). */
int farm_query_route(farm_db *db, struct farm_counters *counters, const char *url,
                     const struct farm_args *args, int64_t now_ns, struct farm_answer *ret);
