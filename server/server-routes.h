/* SPDX-License-Identifier: MIT */
/* The routes the server answers: every path pattern with its methods, query parameters and the
 * format of its answers, in one table that docs/api.md is checked against. */
#pragma once

#include <stdbool.h>

#include "server-query.h"

/* What a route's answers are, errors included. */
enum farm_route_format {
        FARM_ROUTE_JSON, /* {"error": ...} */
        FARM_ROUTE_HTML, /* a page with <p id="error"> (the plots' errors too) */
};

struct farm_route {
        const char *methods; /* "GET", "GET POST", ... (HEAD goes with GET) */
        /* Segments are literal, or "{name}" for one non-empty segment (percent-encoded in the
         * routing path), or "{name}SUFFIX" for one that ends with SUFFIX. */
        const char *pattern;
        const char *params; /* the query parameters it takes, space-separated */
        enum farm_route_format format;
};

extern const struct farm_route farm_routes[];
extern const unsigned farm_routes_n;

/* The route whose pattern path (a routing path, server-path.h) matches, or NULL: a path that no
 * route matches is answered 404 before any part of the server looks at it. */
const struct farm_route *farm_route_find(const char *path);

/* Whether the route takes method (HEAD where it takes GET). */
bool farm_route_takes(const struct farm_route *route, const char *method);

/* The one check of every request's query parameters: 0, or -EINVAL with err naming the first
 * one that the route does not take ("colour: unknown parameter (this query takes: from, to)")
 * or that is given twice, or saying there are too many.  A misspelt filter is refused, never
 * ignored. */
int farm_route_check_args(const struct farm_route *route, const struct farm_args *args,
                          char err[static FARM_ERROR_MAX]);
