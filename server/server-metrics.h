/* SPDX-License-Identifier: MIT */
/* The Prometheus metrics of the farm server: the request counters that every HTTP thread
 * updates, and the label escapes of the exposition at GET /metrics. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct farm_rule;

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
        /* Of the verdicts, for rtsoak_kernel_verdict, and the clock view of the machine
         * queries (ClockTolerance=, MaxGap=). */
        const struct farm_rule *rule;
};

/* Counts a finished request: upload says it was a POST of a summary, duplicate that it was
 * answered "duplicate". */
void farm_counters_request(struct farm_counters *c, bool upload, bool duplicate, unsigned status);

/* Appends a Prometheus label value to buf (with escapes for \, " and newline). */
int farm_prom_escape(const char *value, char *buf, size_t size);
