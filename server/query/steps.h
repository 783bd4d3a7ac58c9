/* SPDX-License-Identifier: MIT */
/* A machine's intervals per time step, as the intervals query computes them: for its route
 * and for the dashboard (which would otherwise build and read back the JSON of thousands of
 * steps). */
#pragma once

#include <stdint.h>

#include "db.h"
#include "params.h"
#include "query.h"

/* An intervals query answers at most this many steps: a larger window needs a larger step. */
#define FARM_STEPS_MAX 100000
/* The most steps one page of ?limit= holds: steps are small, and every page costs a scan of
 * the window (a month at 5-minute steps, 8,640, fits one page). */
#define FARM_STEPS_PAGE_MAX 10000

/* The worst case per time step of a machine. */
#define FARM_STEP_NAMES_MAX 64
struct farm_names { /* different scenarios or kernels; "" for none */
        char *s[FARM_STEP_NAMES_MAX];
        unsigned n;
};
struct farm_step {
        int64_t start_ns, max_time_ns;
        int64_t data_end_ns; /* the latest end of its intervals (after the step's end when
                              * intervals are longer than the step) */
        uint64_t max_ns, samples, violations, intervals, covered_ns;
        uint64_t scenarios, kernels; /* bits of the names: 1 << index */
        int64_t max_cpu;
};
struct farm_steps {
        struct farm_step *v; /* the steps that hold intervals, in time order */
        size_t n;
        struct farm_names scenarios, kernels;
};
/* The steps of step_ns of [from, to) of the machine's intervals (aligned as in the intervals
 * query).  -E2BIG for more than FARM_STEPS_MAX steps; beyond FARM_STEP_NAMES_MAX scenarios or
 * kernels, the last name is "(others)" and stands for the rest. */
int farm_machine_steps(farm_db *db, const char *machine_id, int64_t from, int64_t to,
                       uint64_t step_ns, struct farm_steps *ret, char err[static FARM_ERROR_MAX]);
/* The steps of step_ns of the intervals query's window without from= and to= (the 24 hours up
 * to the machine's latest interval), as that query answers them: -ENOENT for a machine not
 * enrolled, -ENOSPC (as the query refuses them) beyond FARM_STEP_NAMES_MAX scenarios or
 * kernels. */
int farm_machine_recent_steps(farm_db *db, const char *machine_id, int64_t now, uint64_t step_ns,
                              struct farm_steps *ret, char err[static FARM_ERROR_MAX]);
void farm_steps_done(struct farm_steps *s);

/* The intervals query's answer (GET /api/v1/machines/{id}/intervals), before its encoding:
 * the window and step asked, and the steps (steps.v, all of them; the page says which are
 * answered). */
struct farm_intervals {
        const char *machine, *scenario; /* the caller's strings */
        int64_t from, to, cpu;          /* cpu -1: all */
        uint64_t step_ns;
        struct farm_page page;
        struct farm_steps steps;
};
/* Reads the query's parameters (args) and its steps: 1 with *ret filled (the caller's:
 * farm_steps_done(&ret->steps)), or 0 (or a negative error) with the refusal or failure in a
 * (400 naming the parameter, 404 for a machine not enrolled, 500). */
int farm_intervals_ask(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                       struct farm_intervals *ret, struct farm_answer *a);
