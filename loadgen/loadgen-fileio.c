/* SPDX-License-Identifier: MIT */
/* The fileio load (not written yet). */
#include <errno.h>

#include "loadgen.h"
#include "macro.h"

static int fileio_run(struct loadgen_ctx *ctx) {
        return -EOPNOTSUPP;
}

const struct loadgen_info loadgen_fileio_info = {
        .name = "fileio",
        .summary = "not written yet",
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = fileio_run,
};
