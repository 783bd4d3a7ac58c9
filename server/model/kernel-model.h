/* SPDX-License-Identifier: MIT */
/* The kernel releases as the farm lists them: a page of the kernel list, each row with the
 * figures of its runs and the gist of its verdict; owned by the page and freed with it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "rule.h"
#include "verdict-model.h"

/* A release of the kernel list, as the question that listed it sees it. */
struct farm_kernel {
        char *release;
        char series[FARM_SERIES_NAME_MAX];
        int machines, runs; /* that ran it */
        int64_t first_run_ns, last_run_ns, covered_ns;
        enum farm_verdict_status status;
        uint64_t problems;
        struct farm_missing *missing; /* what its verdict waits for */
        size_t nmissing;
        char **reasons;
        size_t nreasons;
};

/* A page of the kernel list: newest first, total of all the releases the question sees. */
struct farm_kernel_page {
        struct farm_kernel *v;
        size_t n;
        int64_t total;
        uint64_t limit, offset;
};

void farm_kernel_page_done(struct farm_kernel_page *p);
