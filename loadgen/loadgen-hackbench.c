/* SPDX-License-Identifier: MIT */
/* The hackbench load (not written yet). */
#include <errno.h>

#include "loadgen.h"
#include "macro.h"

static int hackbench_run(struct loadgen_ctx *ctx) {
        return -EOPNOTSUPP;
}

const struct loadgen_info loadgen_hackbench_info = {
        .name = "hackbench",
        .summary = "not written yet",
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = hackbench_run,
};
