/* SPDX-License-Identifier: MIT */
/* The day rollups of one upload (run_days per run and UTC day, run_day_scenarios per run, day
 * and scenario), folded: the stored intervals of one run, day and scenario that follow each
 * other, each starting at or after the end of those before it, are added to their rows with
 * one statement, the same rows as adding each on its own makes.  A daemon catching up after an
 * outage sends a thousand intervals at once: added one by one, each was a new version of the
 * same row within one transaction (on PostgreSQL, pages of dead versions that the verdict's
 * scans of run_days read for months); folded, an hour of one scenario is one version.
 *
 * The gap columns depend on the order in which intervals arrive: when the row ends after the
 * first folded interval starts (late data), the fold is applied again to the stored row in C,
 * interval by interval, as the statement of one interval would have. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sql.h"
#include "summary.h"

/* The generators of a day and scenario, "a b c" (gens_all). */
#define FARM_ROLLUP_GENS_MAX (SUMMARY_MAX_LOADS * 34)

/* What a stored interval adds to its day's rows besides its times. */
struct farm_rollup_facts {
        int64_t max_ns, counted_ns, down_ns, min_ratio_pm, max_missing_ns;
};

struct farm_rollup_span {
        int64_t start, end;
};

/* The folded intervals not yet written (open: some). */
struct farm_rollup {
        bool open;
        int64_t run, day;
        const char *scenario; /* the summary's, which outlives the fold */
        int64_t n, covered_ns, first_start_ns, last_end_ns, max_gap_ns, max_ns, counted_ns,
                min_ratio_pm, max_missing_ns, down_ns;
        char gens[FARM_ROLLUP_GENS_MAX];
        struct farm_rollup_span *spans;
        size_t nspans;
};

/* The UTC day of a time, as the rollups count it. */
int64_t farm_rollup_day(int64_t ns);
/* Whether iv of run joins the fold (else the fold is written first). */
bool farm_rollup_joins(const struct farm_rollup *r, int64_t run, const struct summary_interval *iv);
/* Adds a stored interval: to the fold when it joins, else as the first of a new one (the
 * caller wrote the fold before).  gens: the generators of its day and scenario with it. */
int farm_rollup_add(struct farm_rollup *r, int64_t run, const struct summary_interval *iv,
                    const struct farm_rollup_facts *f, const char *gens);
/* Writes the fold into its rows inside the caller's write transaction c and empties it;
 * received at now_ns. */
int farm_rollup_flush(sql_conn *c, bool pg, struct farm_rollup *r, int64_t now_ns, char *err);
void farm_rollup_done(struct farm_rollup *r);
