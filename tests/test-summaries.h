/* SPDX-License-Identifier: MIT */
/* Summaries for the farm server's tests, built with the real codec: a run's intervals of a few
 * CPUs with their histograms, a load and events, numbered as a spec says. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define TU_MIN_NS (60 * INT64_C(1000000000))

struct tu_spec {
        const char *machine, *kernel;
        int64_t run, start_ns;
        uint64_t seq, first_interval, nintervals, ncpus;
        uint64_t max_ns; /* interval i, CPU c gets max_ns + 1000 i + 10 c */
        uint64_t first_event, nevents;
        bool measured; /* every CPU with all the wake-ups of the minute, not 1000 */
};

/* The summary of p as rtsoak.summary/1 JSON (allocated): intervals first_interval... of one
 * minute from start_ns + seq minutes, each CPU with 1000 samples, one violation and a
 * histogram; a cpu load; violation events first_event.... */
char *tu_summary_text(const struct tu_spec *p);
