/* SPDX-License-Identifier: MIT */
/* Housekeeping for a daemon that runs for months: retention, vacuum and WAL checkpoints in
 * small steps, and events for wall-clock steps and probed CPUs going offline. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "probe.h"
#include "store.h"

struct housekeeping_params {
        store *store;
        int64_t run_id;
        uint64_t retention_ns; /* 0: keep everything */
        struct probe **probes;
        size_t nprobes;
        bool all_cpus; /* [Probe] CPUs=all: an online CPU without a probe is worth a word */
};

struct housekeeping;
/* Adds its timers to e; they run on the main loop between interval writes. */
int housekeeping_start(sd_event *e, const struct housekeeping_params *p, struct housekeeping **ret);
void housekeeping_free(struct housekeeping *h);
/* Records probed CPUs gone offline (and back, pinning their probes again); runs on every tick
 * and may be called at any other moment of the main loop. */
void housekeeping_check_cpus(struct housekeeping *h);
/* The probes are being stopped: CPU checks end here (an exiting probe's affinity says nothing
 * about its CPU). */
void housekeeping_stop_cpu_checks(struct housekeeping *h);
