/* SPDX-License-Identifier: MIT */
/* The farm dashboard: HTML pages rendered on the server (the farm overview, a machine, a
 * kernel release) with inline SVG plots, and each plot at a URL of its own.  Built from the
 * C functions behind the JSON API (server-query-*.h) and the verdict (server-verdict.c); no
 * external resource, and every page works with JavaScript off. */
#pragma once

#include <stdint.h>

#include "db.h"
#include "query.h"
#include "verdict.h"

/* Answers url if it is one of the dashboard's routes ("/", "/machines/{id}",
 * "/kernels/{release}", "/plots/..."): 1 with ret filled (text/html or image/svg+xml; errors
 * as HTML pages), 0 when it is not one of them (ret untouched). */
int farm_dash_route(farm_db *db, const struct farm_rule *rule, const char *url,
                    const struct farm_args *args, int64_t now_ns, struct farm_answer *ret);

/* A refusal as the dashboard answers it: an HTML page saying msg, with status (the routes
 * of the pages and plots answer every error so). */
void farm_dash_refusal(struct farm_answer *ret, unsigned status, const char *msg, int64_t now_ns);

/* The Content-Security-Policy of every answer: nothing from outside, no framing, and in the
 * pages only their own inline style and script (by their SHA-256). */
const char *farm_dash_csp(void);
