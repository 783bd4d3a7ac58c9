/* SPDX-License-Identifier: MIT */
/* The query side of the JSON API (a machine's intervals, histograms, events and runs, kernel
 * comparisons, the paginated machine list) and the Prometheus /metrics exposition. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hist.h"
#include "server-db.h"
#include "server-merge.h"
#include "server-verdict.h"
#include "summary.h"

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

/* Why an upload was refused, for rtsoak_ingest_errors_total{reason}. */
enum farm_refusal {
        FARM_REFUSED_BAD_REQUEST,  /* 400 */
        FARM_REFUSED_UNAUTHORIZED, /* 401 */
        FARM_REFUSED_FORBIDDEN,    /* 403 */
        FARM_REFUSED_CONFLICT,     /* 409 */
        FARM_REFUSED_TOO_LARGE,    /* 413 */
        FARM_REFUSED_RATE_LIMITED, /* 429 */
        FARM_REFUSED_OTHER_CLIENT, /* another 4xx */
        FARM_REFUSED_SERVER_ERROR, /* 5xx */
        FARM_REFUSED_MAX,
};

/* Server-wide counters since the start, for /metrics: updated by every HTTP thread. */
struct farm_counters {
        _Atomic uint64_t stored, duplicate;
        _Atomic uint64_t refused[FARM_REFUSED_MAX];
        _Atomic uint64_t status[600]; /* HTTP requests by status code */
        const struct farm_rule *rule; /* of the verdicts, for rtsoak_kernel_verdict */
};

/* Counts a finished request: upload says it was a POST of a summary, duplicate that it was
 * answered "duplicate". */
void farm_counters_request(struct farm_counters *c, bool upload, bool duplicate, unsigned status);

/* Answers url if it is one of the query routes: 1 with ret filled, 0 when it is not one of
 * them (ret untouched). */
int farm_query_route(farm_db *db, struct farm_counters *counters, const char *url,
                     const char *method, const struct farm_args *args, int64_t now_ns,
                     struct farm_answer *ret);

/* ---- pure helpers, exposed for the unit tests ---- */

/* Appends a Prometheus label value to buf (with escapes for \, " and newline). */
int farm_prom_escape(const char *value, char *buf, size_t size);
