/* SPDX-License-Identifier: MIT */
/* rtsoak-server check: the farm database's quick check, run when the administrator finds it
 * convenient, with the time it took. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "log.h"
#include "timeutil.h"

int cli_check(const struct server_options *o, char **args, int n) {
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        (void) args, (void) n;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int64_t t = now_ns(CLOCK_MONOTONIC);
        int r = farm_db_check(db, err);
        farm_db_close(db);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_FAILURE;
        }
        log_info("%s: quick_check ok (%.1f s)", o->db_path,
                 (double) (now_ns(CLOCK_MONOTONIC) - t) / 1e9);
        return EXIT_SUCCESS;
}
