/* SPDX-License-Identifier: MIT */
/* The memory load (not written yet). */
#include <errno.h>

#include "loadgen.h"
#include "macro.h"

static int memory_run(struct loadgen_ctx *ctx) {
        return -EOPNOTSUPP;
}

const struct loadgen_info loadgen_memory_info = {
        .name = "memory",
        .summary = "not written yet",
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = memory_run,
};
