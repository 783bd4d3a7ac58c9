/* SPDX-License-Identifier: MIT */
/* Reading a machine's intervals into time steps, for the intervals query (steps.c): make a
 * reader for the window and step, read (once), finish into struct farm_steps, then done. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "db-internal.h"
#include "steps.h"

/* An interval's place: its start and run (which of equal worst cases, which name first). */
struct step_tie {
        int64_t start_ns, run;
};

struct steps_read {
        int64_t first;    /* the first step's start */
        uint64_t step_ns; /* the step */
        uint64_t nsteps;  /* in the window */
        bool lump;        /* names beyond FARM_STEP_NAMES_MAX are "(others)", not -ENOSPC */
        uint32_t *slot;   /* per step of the window: 1 + its index in v, 0 for none yet */
        struct farm_step *v;
        struct step_tie *ties; /* per step of v: where its worst case came from */
        size_t n;
        struct farm_names scenarios, kernels;
        struct step_tie scen_first[FARM_STEP_NAMES_MAX], kern_first[FARM_STEP_NAMES_MAX];
};

/* A reader of the steps of step_ns of [from, to) (at most FARM_STEPS_MAX: the caller's check).
 * -ENOMEM. */
int steps_read_init(struct steps_read *r, int64_t from, int64_t to, uint64_t step_ns, bool lump);
/* Reads machine id's intervals of the window (all CPUs when cpu < 0, of scenario unless NULL):
 * -ENOSPC past FARM_STEP_NAMES_MAX scenarios or kernels (without lump), other errors with
 * err. */
int steps_read(struct steps_read *r, sql_conn *c, const char *id, int64_t from, int64_t to,
               int64_t cpu, const char *scenario, char *err);
/* The steps that hold intervals, in time order, their names in the order of their first
 * interval: *ret is the caller's (farm_steps_done()).  -ENOMEM. */
int steps_read_finish(struct steps_read *r, struct farm_steps *ret);
void steps_read_done(struct steps_read *r);
