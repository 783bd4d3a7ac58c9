/* SPDX-License-Identifier: MIT */
/* A rotation of load scenarios ("idle 1h, cpu 30min"), aligned to the epoch: rtsoakd's
 * [Schedule] Rotation= and rtsoak-replay's --rotation, read by one parser. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROTATION_STEPS_MAX 256

/* Each program's own: rtsoakd's configured scenarios, rtsoak-replay's built-in ones. */
struct scenario;

struct schedule_step {
        const struct scenario *scenario;
        uint64_t duration_ns;
};

enum rotation_problem {
        ROTATION_SYNTAX,    /* an item is not "SCENARIO DURATION" (item: as far as it goes) */
        ROTATION_UNKNOWN,   /* no scenario has the name item */
        ROTATION_BAD_SPAN,  /* span is no time span (reason), or 0 (reason NULL) */
        ROTATION_NOT_WHOLE, /* span is not a whole number of intervals */
        ROTATION_TOO_MANY,  /* more than ROTATION_STEPS_MAX steps */
        ROTATION_TOO_LONG,  /* span is longer than max_step_ns */
        ROTATION_EMPTY,     /* no step at all */
};

struct rotation_params {
        uint64_t interval_ns; /* each step lasts a whole number of these */
        /* A step that does not is made that much longer instead of refused: a built-in
         * rotation follows whatever interval was chosen. */
        bool round_up;
        uint64_t max_step_ns; /* 0: no limit */
        const struct scenario *(*lookup)(void *userdata, const char *name);
        /* Says what is wrong, before rotation_parse() fails; item and span point into a copy
         * of the text that lives until then. */
        void (*problem)(void *userdata, enum rotation_problem what, const char *item,
                        const char *span, const char *reason);
        void *userdata;
};

/* Reads text into *ret_steps (allocated), their number and *ret_cycle_ns, the sum of their
 * durations.  Returns 0, -EINVAL or -E2BIG (after calling problem once), or -ENOMEM. */
int rotation_parse(const char *text, const struct rotation_params *p,
                   struct schedule_step **ret_steps, size_t *ret_n, uint64_t *ret_cycle_ns);

/* The step of the n that runs at t (ns since the epoch): the rotation starts over at every
 * multiple of cycle_ns since the epoch, so that it resumes where it would be after a restart
 * and machines sharing a configuration run the same scenario at the same time.  The step's
 * start and end go to the ret_ pointers that are not NULL. */
const struct schedule_step *rotation_at(const struct schedule_step *steps, size_t n,
                                        uint64_t cycle_ns, int64_t t, int64_t *ret_start_ns,
                                        int64_t *ret_end_ns);
