/* SPDX-License-Identifier: MIT */
/* rtsoak-server prune: the intervals of the months before a time dropped at once, as
 * [Server] Retention= does hourly, never those the verdict's period still needs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "macro.h"
#include "prune.h"
#include "retention.h"
#include "timeutil.h"

int cli_prune(const struct server_options *o, char **args, int n) {
        char err[FARM_ERROR_MAX];
        const char *reason = NULL;
        int64_t before;
        farm_db *db = NULL;
        uint64_t intervals;
        (void) args, (void) n;
        if (!o->before) {
                log_error("prune needs --before TIME (the intervals of the months that ended "
                          "before that month are dropped)");
                return EXIT_USAGE;
        }
        if (parse_timestamp(o->before, now_ns(CLOCK_REALTIME), &before, &reason) < 0) {
                log_error("Invalid --before '%s': %s", o->before, reason ?: "not a time");
                return EXIT_USAGE;
        }
        /* As [Server] Retention=: what the verdict's period needs, and a month more. */
        int64_t now = now_ns(CLOCK_REALTIME),
                keep = (int64_t) o->rule.period_ns + 31 * 86400 * (int64_t) NSEC_PER_SEC;
        if (before > now - keep) {
                char p[TIMESPAN_MAX_LEN], t[TIMESTAMP_MAX_LEN];
                log_error("Invalid --before '%s': inside the verdict's Period=%s and a month "
                          "(the verdict needs those intervals); give a time before %s",
                          o->before, format_timespan(p, o->rule.period_ns),
                          format_timestamp_utc(t, now - keep));
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_retention_pass(db, &o->rule, before, &intervals, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot drop the old intervals: %s", err);
                return EXIT_FAILURE;
        }
        log_info("Dropped %d month(s) of partitions, %" PRIu64 " intervals", r, intervals);
        return EXIT_SUCCESS;
}
