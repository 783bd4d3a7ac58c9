/* SPDX-License-Identifier: MIT */
/* The routes of the query API: which of its parts answers a URL, and the checks every route
 * shares (the machine id or kernel release in the path). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "encode-compare.h"
#include "encode-histogram.h"
#include "encode-steps.h"
#include "machine-routes.h"
#include "metrics.h"
#include "path.h"
#include "query-internal.h"
#include "rule.h"

#define API "/api/v1"

/* ---- routes ----------------------------------------------------------------------------- */

int farm_query_route(farm_db *db, struct farm_counters *counters, const char *url,
                     const struct farm_args *args, int64_t now_ns, struct farm_answer *ret) {
        enum {
                METRICS,
                MACHINES,
                INTERVALS,
                HISTOGRAM,
                EVENTS,
                RUNS,
                INVENTORY,
                COMPARE,
                UNKNOWN
        } which;
        static const char *const machine_subs[] = { [INTERVALS] = "intervals",
                                                    [HISTOGRAM] = "histogram",
                                                    [EVENTS] = "events",
                                                    [RUNS] = "runs",
                                                    [INVENTORY] = "inventory" };
        char key[SUMMARY_MAX_RELEASE + 1] = ""; /* a machine id or a release */

        if (strcmp(url, "/metrics") == 0)
                which = METRICS;
        else if (strcmp(url, API "/machines") == 0)
                which = MACHINES;
        else if (strncmp(url, API "/machines/", strlen(API "/machines/")) == 0) {
                const char *id = url + strlen(API "/machines/"), *slash = strchr(id, '/');
                if (!slash)
                        return 0; /* one machine: the store's own route */
                which = UNKNOWN;
                for (int i = INTERVALS; i <= INVENTORY; i++)
                        if (strcmp(slash + 1, machine_subs[i]) == 0)
                                which = i;
                snprintf(key, sizeof(key), "%.*s",
                         (int) MIN((size_t) (slash - id), sizeof(key) - 1), id);
                if (which != UNKNOWN && !farm_machine_id_valid(key)) {
                        *ret = (struct farm_answer){};
                        query_error(ret, 404, "no such machine");
                        return 1;
                }
        } else if (strncmp(url, API "/kernels/", strlen(API "/kernels/")) == 0) {
                const char *rel = url + strlen(API "/kernels/"), *slash = strrchr(rel, '/');
                if (!slash || strcmp(slash + 1, "compare") != 0)
                        return 0; /* the verdict's routes */
                which = COMPARE;
                /* Still percent-encoded in the routing path: a release stored before the rule
                 * may hold a '/'. */
                if (farm_release_segment(rel, (size_t) (slash - rel), key) < 0) {
                        *ret = (struct farm_answer){};
                        query_error(ret, 404, "no such kernel");
                        return 1;
                }
        } else
                return 0;

        *ret = (struct farm_answer){};
        if (which == UNKNOWN) {
                query_error(ret, 404, "no such resource");
                return 1;
        }
        /* How the machines' stamps are shown (struct farm_clock_view). */
        const struct farm_clock_view cv = { now_ns, (int64_t) counters->rule->clock_tolerance_ns,
                                            (int64_t) counters->rule->max_gap_ns };
        switch (which) {
        case METRICS:
                query_metrics(db, counters, args, ret);
                break;
        case MACHINES:
                farm_api_machines(db, args, url, &cv, ret);
                break;
        case INTERVALS:
                farm_api_intervals(db, key, args, now_ns, url, ret);
                break;
        case HISTOGRAM:
                farm_api_histogram(db, key, args, now_ns, url, ret);
                break;
        case EVENTS:
                farm_api_events(db, key, args, now_ns, url, ret);
                break;
        case RUNS:
                farm_api_runs(db, key, args, url, &cv, ret);
                break;
        case INVENTORY:
                farm_api_inventory(db, key, args, url, &cv, ret);
                break;
        case COMPARE:
                farm_api_compare(db, key, args, now_ns, url, ret);
                break;
        default:
                break;
        }
        if (ret->status == 0) {
                snprintf(ret->err, sizeof(ret->err), "%s: no answer", url);
                query_internal(ret, -EIO);
        }
        return 1;
}
