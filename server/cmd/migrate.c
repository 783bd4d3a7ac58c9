/* SPDX-License-Identifier: MIT */
/* rtsoak-server migrate: the copy, then the comparison of every row, each with what it did and
 * how long it took; run again after an interruption, the copy goes on where it stopped. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "farm-copy.h"
#include "log.h"
#include "migrate.h"
#include "sql.h"
#include "timeutil.h"

int cli_migrate(const struct server_options *o, char **args, int n) {
        char err[FARM_ERROR_MAX], from[512], to[512];
        struct farm_copy_stats st;
        (void) args, (void) n;
        if (!o->from || !o->to) {
                log_error("migrate needs --from (the farm) and --to (the database to copy it "
                          "into)");
                return EXIT_USAGE;
        }
        sql_target_shown(o->from, from, sizeof(from));
        sql_target_shown(o->to, to, sizeof(to));
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        int r = farm_copy(o->from, o->to, o->chunk, &st, err);
        if (r < 0) {
                log_error("Cannot copy %s into %s: %s", from, to, err);
                return EXIT_FAILURE;
        }
        int64_t t1 = now_ns(CLOCK_MONOTONIC);
        log_info("Copied %" PRIu64 " rows of %u tables in %.1f s; comparing every row",
                 st.rows_copied, st.tables, (double) (t1 - t0) / 1e9);
        r = farm_copy_verify(o->from, o->to, &st, err);
        if (r < 0) {
                log_error("%s and %s differ: %s", from, to, err);
                return EXIT_FAILURE;
        }
        log_info("Verified: %" PRIu64 " rows of %u tables the same in %s and %s (%.1f s)",
                 st.rows_compared, st.tables, from, to,
                 (double) (now_ns(CLOCK_MONOTONIC) - t1) / 1e9);
        return EXIT_SUCCESS;
}
