/* SPDX-License-Identifier: MIT */
/* The exec load (not written yet). */
#include <errno.h>

#include "loadgen.h"
#include "macro.h"

static int exec_run(struct loadgen_ctx *ctx) {
        return -EOPNOTSUPP;
}

const struct loadgen_info loadgen_exec_info = {
        .name = "exec",
        .summary = "not written yet",
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = exec_run,
};
