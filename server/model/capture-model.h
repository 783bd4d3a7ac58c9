/* SPDX-License-Identifier: MIT */
/* The flight recorder's captures as the farm keeps them: one capture with the culprit its
 * analysis named, and a machine's list of them; owned by the caller and freed with
 * farm_capture_done() and farm_capture_list_done().  The API encodes them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grow.h"

struct farm_capture {
        int64_t id, run, interval, cpu, time_ns, latency_ns;
        char *machine, *summary;
        char *culprit_kind, *culprit_name; /* culprit_kind NULL: not stored ("unknown") */
        int64_t culprit_pid;               /* FARM_NONE: not a thread */
        int64_t culprit_ns;
        bool raw;       /* its raw events are on the server */
        char *analysis; /* the analysis as stored (JSON text); NULL: not asked or none */
};

struct farm_capture_list {
        struct farm_capture *v;
        size_t n;
};

void farm_capture_done(struct farm_capture *c);
void farm_capture_list_done(struct farm_capture_list *l);
