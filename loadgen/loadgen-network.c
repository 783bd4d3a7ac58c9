/* SPDX-License-Identifier: MIT */
/* The network load (not written yet). */
#include <errno.h>

#include "loadgen.h"
#include "macro.h"

static int network_run(struct loadgen_ctx *ctx) {
        return -EOPNOTSUPP;
}

const struct loadgen_info loadgen_network_info = {
        .name = "network",
        .summary = "not written yet",
        .check = loadgen_check_nothing,
        .probe = loadgen_probe_nothing,
        .run = network_run,
};
