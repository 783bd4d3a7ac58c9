/* SPDX-License-Identifier: MIT */
/* The series as "which release is latest stable?" answers them: each series with its latest
 * stable and newest release, and one series with the history of its latest stable; owned by
 * the answer and freed with it.  The API encodes them; the dashboard reads them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grow.h"
#include "rule.h"
#include "verdict-model.h"

/* A series at the moment asked about. */
struct farm_series_entry {
        char series[FARM_SERIES_NAME_MAX];
        char *latest_stable; /* NULL: none yet */
        int64_t since_ns;    /* since when the verdict log has it qualified; FARM_NONE: unknown */
        int releases;        /* of the series, run by then */
        char *newest;        /* its newest release */
        bool judged;         /* the newest has a verdict: newest_status */
        enum farm_verdict_status newest_status;
};

/* Every series with a release run by the moment asked about, by name. */
struct farm_series_list {
        struct farm_series_entry *v;
        size_t n;
};

/* A change of the latest stable of a series, from the verdict log. */
struct farm_stable_change {
        char *latest_stable; /* NULL: none from then */
        int64_t from_ns;
};

/* One series at at_ns, with the history of its latest stable, newest first. */
struct farm_latest_stable {
        struct farm_series_entry entry;
        int64_t at_ns;
        struct farm_stable_change *history;
        size_t nhistory;
};

void farm_series_entry_done(struct farm_series_entry *e);
void farm_series_list_done(struct farm_series_list *l);
void farm_latest_stable_done(struct farm_latest_stable *s);
