/* SPDX-License-Identifier: MIT */
/* What rtsoak-server's commands share: who acts, opening the farm database for one command,
 * and printing an answer as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "command.h"
#include "log.h"
#include "text-json.h"

const char *cli_who(const struct server_options *o) {
        const char *w = o->by ?: getenv("SUDO_USER");
        if (!w || !*w)
                w = getenv("USER");
        return w && *w ? w : "root";
}

int cli_open_db(const char *path, farm_db **ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_db_open(path, ret, err);
        if (r < 0)
                return log_error_errno(r, "Cannot open the farm database: %s", err);
        return 0;
}

int cli_print_json(json_t *j) {
        /* What was stored before the text rule reaches the terminal escaped (text-json.h). */
        int r = text_json_escape(j) < 0 ? -ENOMEM : json_dumpf(j, stdout, JSON_INDENT(2));
        putchar('\n');
        if (r < 0 || fflush(stdout) != 0)
                return log_error_errno(EIO, "Cannot print the answer"), EXIT_FAILURE;
        return EXIT_SUCCESS;
}
