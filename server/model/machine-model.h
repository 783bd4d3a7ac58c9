/* SPDX-License-Identifier: MIT */
/* The machines as the farm lists them: each with its settings in force and the facts of its
 * latest run (silent, revoked, gating, clock ahead, last data, kernel), and a machine's runs
 * and events; owned by the list and freed with it.  The API encodes them; the dashboard reads them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grow.h"
#include "macro.h"

/* The latest run of a machine, by its start as the server takes it. */
struct farm_latest_run {
        int64_t id;
        char *boot_id, *kernel_release, *kernel_version, *preempt_model;  /* NULL: not told */
        int64_t start_ns, worst_latency_ns, first_report_ns, interval_ns; /* FARM_NONE: none */
        int64_t clock_ahead_ns; /* beyond the tolerance; FARM_NONE: within it */
};

struct farm_machine_label {
        char *key, *value;
};

struct farm_machine {
        char *id, *hostname, *cpu_model; /* hostname, cpu_model NULL: not told */
        int64_t cpus, threshold_ns;      /* FARM_NONE: none */
        bool gating, revoked;
        int64_t enrolled_ns, revoked_ns, last_report_ns; /* FARM_NONE: none */
        int64_t worst_latency_ns, intervals, events;     /* FARM_NONE: none */
        bool has_latest;
        struct farm_latest_run latest; /* when has_latest */
        char **groups;                 /* in force, as the settings' history has them */
        size_t ngroups;
        struct farm_machine_label *labels;
        size_t nlabels;
        /* As the clock view takes them (struct farm_clock_view): the end of its last data
         * (FARM_NONE: none), whether it is silent, and how far its latest run's data was
         * stamped ahead of its arrival (FARM_NONE: within the tolerance). */
        int64_t last_data_ns;
        bool silent;
        int64_t clock_ahead_ns;
};

/* The machines, by id. */
struct farm_machine_list {
        struct farm_machine *v;
        size_t n;
};

/* How a run ended, when not cleanly: its first unclean end. */
struct farm_run_end {
        bool unclean;
        int64_t time_ns;
        char *message; /* NULL: none */
};

/* A run as a machine's runs list it. */
struct farm_run {
        int64_t id;
        char *boot_id, *kernel_release, *kernel_version, *preempt_model, *daemon_version;
        char *release; /* the release it counts for: run.release, or its kernel_release */
        int64_t start_ns, interval_ns, threshold_ns; /* FARM_NONE: none */
        bool has_data;
        int64_t first_data_ns, last_data_ns; /* of its data (FARM_NONE: none) */
        int64_t intervals, worst_latency_ns; /* worst FARM_NONE: none */
        struct farm_run_end end;
        /* When the server received it: its first upload, its latest interval (FARM_NONE:
         * none), and how far its data was stamped after it arrived beyond the tolerance
         * (FARM_NONE: within it). */
        int64_t first_report_ns, last_received_ns, clock_ahead_ns;
};

/* A page of a machine's runs, newest first; total of all its runs. */
struct farm_run_page {
        struct farm_run *v;
        size_t n;
        uint64_t total;
};

/* An event of a machine's runs as its events list them. */
struct farm_event {
        int64_t run, id, time_ns;
        char *type;         /* NULL: none */
        int64_t cpu, value; /* FARM_NONE: none */
        char *message, *kernel_release;
};

/* A page of a machine's events, newest first; total of all those the question selects. */
struct farm_event_page {
        struct farm_event *v;
        size_t n;
        uint64_t total;
};

void farm_latest_run_done(struct farm_latest_run *r);
void farm_machine_done(struct farm_machine *m);
void farm_machine_list_done(struct farm_machine_list *l);
void farm_run_done(struct farm_run *r);
void farm_run_page_done(struct farm_run_page *p);
void farm_event_done(struct farm_event *e);
void farm_event_page_done(struct farm_event_page *p);

static inline void farm_machine_donep(struct farm_machine *m) {
        farm_machine_done(m);
}
#define _cleanup_machine_ _cleanup_(farm_machine_donep)
