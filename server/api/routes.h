/* SPDX-License-Identifier: MIT */
/* The routes the server answers, declared once: every path pattern with its methods, who may
 * ask it (its access class), its query parameters (name, type, limits, repeatable or not) and
 * the format of its answers.  docs/api.md is checked against this table. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "access.h"
#include "query.h"

/* What a route's answers are, errors included. */
enum farm_route_format {
        FARM_ROUTE_JSON, /* {"error": ...} */
        FARM_ROUTE_HTML, /* a page with <p id="error"> (the plots' errors too) */
};

/* How a parameter's value is read.  The checker refuses a value of the wrong type or out of
 * its limits, naming the parameter, before any handler runs; what depends on other parameters
 * (a window's ends, at= before known_at=) or on the farm (a known release) is the handler's. */
enum farm_param_type {
        FARM_PARAM_TEXT,    /* any text: its route says what it must name */
        FARM_PARAM_TIME,    /* a point in time (farm_param_time()) */
        FARM_PARAM_SPAN,    /* a positive span of at most ten years (farm_param_span()) */
        FARM_PARAM_UINT,    /* a whole number in [min, max] (farm_param_uint()) */
        FARM_PARAM_PERCENT, /* a whole number in [min, max], with or without its '%' */
        FARM_PARAM_TYPE_N,
};

/* One query parameter of a route. */
struct farm_route_param {
        const char *name;
        enum farm_param_type type;
        uint64_t min, max; /* FARM_PARAM_UINT, FARM_PARAM_PERCENT */
        bool repeatable;   /* it may be given more than once */
};

struct farm_route {
        const char *methods; /* "GET", "GET POST", ... (HEAD goes with GET) */
        /* Segments are literal, or "{name}" for one non-empty segment (percent-encoded in the
         * routing path), or "{name}SUFFIX" for one that ends with SUFFIX. */
        const char *pattern;
        /* Who may ask its GET and HEAD (access.h).  Its other methods are staff's
         * (FARM_CLASS_STAFF), except where the class holds for every method: FARM_CLASS_UPLOAD
         * (a machine's token) and FARM_CLASS_AUDIT (staff only). */
        enum farm_route_class access;
        const struct farm_route_param *params; /* ended by a row without name */
        enum farm_route_format format;
};

extern const struct farm_route farm_routes[];
extern const unsigned farm_routes_n;

/* The name of a type of parameter, as docs/api.md and the table's dump say it. */
const char *farm_param_type_name(enum farm_param_type t);

/* The route whose pattern path (a routing path, path.h) matches, or NULL: a path that no
 * route matches is answered 404 before any part of the server looks at it. */
const struct farm_route *farm_route_find(const char *path);

/* Whether the route takes method (HEAD where it takes GET). */
bool farm_route_takes(const struct farm_route *route, const char *method);

/* The methods the route takes as an Allow header says them ("GET, HEAD, POST"), in buf. */
const char *farm_route_allow(const struct farm_route *route, char *buf, size_t size);

/* The access class of method on the route (struct farm_route's access). */
enum farm_route_class farm_route_access(const struct farm_route *route, const char *method);

/* The one check of every request's query parameters, before any handler: 0, or -EINVAL with
 * err naming the first one that the route does not take ("colour: unknown parameter (this
 * query takes: from, to)"), that is given twice when it is not repeatable, whose value is not
 * of its type or out of its limits ("cpu=-1: not a whole number"), or saying there are too
 * many.  A misspelt filter is refused, never ignored.  A "?name" without '=' is left to the
 * route (some read it as not given). */
int farm_route_check_args(const struct farm_route *route, const struct farm_args *args,
                          int64_t now_ns, char err[static FARM_ERROR_MAX]);
