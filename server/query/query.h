/* SPDX-License-Identifier: MIT */
/* What the query routes share: a request's parameters and a route's answer.  Each query has a
 * header of its own (steps.h, histogram.h, machines.h, ...) for its callers. */
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

/* What a query route answers: JSON (encoded by api/), text with its content type, or a
 * refusal: its status and message, which api/ answers as {"error": message}. */
struct farm_answer {
        unsigned status;
        json_t *json;
        char *text;
        const char *content_type;
        const char *allow;            /* the Allow header of a 405 */
        char message[FARM_ERROR_MAX]; /* a refusal's reason (no json, no text) */
        int error;                    /* of a 500 or 503: the -errno, err says why (for the log) */
        char err[FARM_ERROR_MAX];
};
void farm_answer_done(struct farm_answer *a);

struct farm_counters;

/* Answers url if it is one of the query routes: 1 with ret filled, 0 when it is not one of
 * them (ret untouched). */
int farm_query_route(farm_db *db, struct farm_counters *counters, const char *url,
                     const struct farm_args *args, int64_t now_ns, struct farm_answer *ret);
