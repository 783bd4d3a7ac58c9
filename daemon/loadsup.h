/* SPDX-License-Identifier: MIT */
/* The load supervisor: runs the load generators of the current scenario as child processes
 * (rtsoak-load, each in its own process group), restarts them with backoff, relays their
 * events, and measures what each did in every interval. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "daemon-config.h"
#include "loadgen.h"
#include "store.h"

struct loadsup_params {
        const char *helper; /* path of rtsoak-load */
        const char *user;   /* NULL or "": do not change user */
        int nice;
        uint64_t restart_delay_ns, restart_delay_max_ns;
        uint64_t stop_grace_ns; /* SIGTERM, then SIGKILL to the group after this */
        /* Something worth an event happened (type "load_exit", "load_low_space" ...). */
        void (*on_event)(void *userdata, const char *type, int64_t value, const char *message);
        void *userdata;
};

/* What the loads of one interval did. */
struct load_record {
        uint64_t k;  /* interval index */
        bool stored; /* its interval was stored with it */
        const char *scenario;
        size_t nloads;
        struct store_interval_load loads[SCENARIO_LOADS_MAX];
        struct store_load_metric metrics[SCENARIO_LOADS_MAX][LOADGEN_MAX_METRICS];
};

struct loadsup;

int loadsup_new(sd_event *e, const struct loadsup_params *p, int64_t now_mono,
                struct loadsup **ret);
/* Stops every child (SIGTERM, SIGKILL after the grace) and waits for them: nothing of ours
 * is left running when this returns. */
void loadsup_free(struct loadsup *s);

/* Stops the loads of the current scenario and starts those of sc. */
int loadsup_set_scenario(struct loadsup *s, const struct scenario *sc, int64_t now_mono);
const struct scenario *loadsup_scenario(const struct loadsup *s);

/* Asks every child to stop (for daemon shutdown); loadsup_free() waits for them. */
void loadsup_stop(struct loadsup *s);

/* Fills rec with each load's throughput, running time, starts and exits from the previous
 * call (or the start of the scenario) to at_mono, an interval boundary; now_mono is when
 * this is called (later than at_mono when the main loop was held up). */
void loadsup_snapshot(struct loadsup *s, int64_t at_mono, int64_t now_mono,
                      struct load_record *rec);

/* A generator's counter's growth since *last.  The counters are in memory the generator
 * writes (as the load user): one that goes back (a generator that writes them wrong) counts
 * nothing and is taken as the new start, instead of wrapping into a rate the farm refuses,
 * and with it the whole interval. */
uint64_t loadsup_counter_delta(uint64_t cur, uint64_t *last);
/* The largest metric value stored: the farm's summary refuses more. */
#define LOADSUP_METRIC_MAX 1e18

/* Adds the starts and exits of from (a record whose interval was never stored) to to, the
 * next record, when both are of the same scenario: a generator's restarts are never lost with
 * an interval that no CPU measured in.  Its running time is not carried (that interval is not
 * covered).  Returns false when the counts could not be carried (the scenario changed). */
bool loadsup_record_carry(const struct load_record *from, struct load_record *to);

/* Ends (SIGKILL) and reaps every child of ours that is not a generator we started: what the
 * generators orphaned (we are their subreaper).  Returns how many were still running.  At
 * most every 10 s; a call sooner does nothing. */
size_t loadsup_sweep(struct loadsup *s);

/* Process IDs of the running generator processes (group leaders), for tests and status. */
size_t loadsup_pids(const struct loadsup *s, int *pids, size_t max);
