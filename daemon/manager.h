/* SPDX-License-Identifier: MIT */
/* rtsoakd's manager: the object that owns a run, from the probes' start to the run's record of
 * its end, with one part for each concern and one file for each part (manager-*.c). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "collector.h"
#include "cpuset.h"
#include "daemon-config.h"
#include "forensics.h"
#include "housekeeping.h"
#include "inventory-read.h"
#include "load-records.h"
#include "loadsup.h"
#include "macro.h"
#include "probe.h"
#include "store.h"
#include "sysinfo.h"
#include "tracing.h"
#include "uploader.h"
#include "watchdog.h"

/* What main() was told. */
struct manager_options {
        const char *config_path;
        bool explicit_config; /* --config: the file must exist */
        char *const *sets;    /* --set assignments, NULL-terminated */
        uint64_t duration_ns; /* --duration; 0: until told to stop */
};

/* The probe threads and what they hold while they run. */
struct manager_probes {
        struct cpuset cpus; /* [Probe] CPUs= resolved */
        struct probe_control ctl;
        struct probe **p;
        size_t n;
        int dma_fd; /* /dev/cpu_dma_latency held; -1: not */
};

/* The run's record in the local database (manager-run.c). */
struct manager_run {
        store *store;
        int64_t id;
        char *db_path; /* a copy the watchdog thread may read */
        struct sysinfo_run si;
        struct forensics_params forensics;
};

/* How the run ends (manager-loop.c). */
struct manager_end {
        bool stopping;
        int64_t deadline_mono; /* give up waiting for probes to finish after this */
        bool failed;
        bool unavailable; /* what failed was this machine refusing to let it measure */
        char message[512];
};

/* The interval clock, the loads and what they did in each interval not yet stored (normally
 * one or two; more only while storage fails), and the collector that stores the intervals
 * (manager-intervals.c). */
struct manager_intervals {
        struct collector *collector;
        struct loadsup *loads;
        struct load_records records;
        bool loads_recorded_to_end; /* stop() made the last, partial interval's record */
        uint64_t cur_k;             /* the interval now running */
        int64_t next_boundary_mono; /* when it ends */
        int64_t mono_to_real;
};

/* The outbox drain (manager-upload.c). */
struct manager_upload {
        struct uploader *uploader; /* NULL: no upload configured */
        char *token;
        _Atomic bool outbox_on;
        uint64_t backlog; /* pending outbox rows at the last look */
};

/* Test-only (RTSOAKD_TEST_HANG): a part made to hang after READY=1, for the watchdog tests. */
struct manager_test_hang {
        const char *part; /* NULL: none */
        uint64_t after_ns;
};

/* What systemd hears: readiness, status, the watchdog and the parts it checks
 * (manager-status.c). */
struct manager_systemd {
        bool ready_sent;
        int64_t last_status_mono;
        struct heartbeat hb_collector, hb_storage, hb_uploader;
        struct heartbeat *parts[4]; /* what the watchdog checks besides the probes */
        struct watchdog *watchdog;
        uint64_t watchdog_period_ns;
        struct manager_test_hang test_hang;
};

/* The main loop's sources (manager-loop.c). */
struct manager_loop {
        sd_event *event;
        sd_event_source *poll_source;
        uint64_t poll_cap_usec;   /* the main loop turns at least this often */
        struct flightrec *flight; /* NULL: no flight record */
        sd_event_source *flight_source;
        struct housekeeping *housekeeping;
};

/* The machine's inventory (manager-inventory.c). */
struct manager_inventory {
        struct inventory boot;    /* what cannot change while the kernel runs, read at start */
        struct inventory current; /* the last version recorded */
        uint64_t version;         /* its number; 0: none recorded yet */
        int64_t last_check_ns;    /* the last check that found it */
        bool told_dropped;        /* that fields were left out was logged */
        sd_event_source *timer;   /* every [Inventory] Check=; NULL: none */
};

/* Configurations replaced by a reload: the loads and the interval records may still point at
 * their scenarios, so they live until the end (manager-reload.c). */
struct manager_retired {
        struct daemon_config *cfgs;
        size_t n;
};

struct manager {
        struct daemon_config cfg;
        struct manager_options opts;
        struct manager_probes probes;
        struct manager_run run;
        struct manager_end end;
        struct manager_intervals iv;
        struct manager_upload up;
        struct manager_systemd sd;
        struct manager_loop loop;
        struct manager_retired retired;
        struct manager_inventory inv;
        struct tracing *tracing; /* NULL: no flight recorder */
};

/* main()'s side: takes cfg over (it is zeroed); runs until told to stop, the --duration or a
 * failure, and returns the exit status. */
struct manager *manager_new(struct daemon_config *cfg, const struct manager_options *o);
int manager_run(struct manager *m);
void manager_free(struct manager *m);

/* The parts, from the bottom up: each calls only those above it in this list. */

/* manager-run.c: the run's record, its events, its failure. */
int manager_begin_run_record(struct manager *m, const struct probe_params *pp, const char *text,
                             const char *cpus);
int manager_start_tracing(struct manager *m, int64_t mono_to_real);
/* An event of the run, of no CPU (value -1: none). */
void manager_add_event(struct manager *m, const char *type, int64_t value, const char *message);
/* Records the run as failed, with why. */
_printf_(2, 3) void manager_fail(struct manager *m, const char *fmt, ...);

/* manager-upload.c */
int manager_read_token(const char *path, const char *server, char **ret);
int manager_start_uploader(struct manager *m);
void manager_stop_uploader(struct manager *m);
void manager_refresh_backlog(struct manager *m);
/* A reload changed [Upload] or the token: the uploader starts again with token (taken over;
 * NULL: upload off). */
void manager_restart_upload(struct manager *m, char *token);

/* manager-probes.c */
int manager_resolve_cpus(struct manager *m);
int manager_start_probes(struct manager *m, const struct probe_params *pp);
void manager_stop_probes(struct manager *m);
/* The first probe that failed, or NULL. */
const struct probe *manager_failed_probe(const struct manager *m);
/* While stopping: true once every probe is done, or when the wait for them timed out (then
 * the run has failed). */
bool manager_probes_finished(struct manager *m, int64_t now);
void manager_join_finished_probes(struct manager *m);

/* manager-intervals.c */
int manager_start_collector(struct manager *m, const struct probe_params *pp, int64_t mono_to_real);
int manager_go(struct manager *m, const struct probe_params *pp, int64_t mono_to_real,
               int64_t now_mono, int64_t *ret_end);
/* The scenario the rotation prescribes at real_ns, unless it is the one running. */
void manager_start_scenario(struct manager *m, int64_t real_ns, int64_t now_mono);
void manager_advance_intervals(struct manager *m, int64_t now);
void manager_stop_loads(struct manager *m);

/* manager-status.c */
void manager_init_heartbeats(struct manager *m);
int manager_parse_test_hang(struct manager *m);
int manager_check_ready(struct manager *m);
void manager_notify_status(struct manager *m);
void manager_release_test_hang(struct manager *m);

/* manager-inventory.c: before the probes start, what cannot change; once the run is recorded,
 * version 1 (a failure to store it is logged, and the next check tries again); a check (why
 * names its cause in the log); the periodic check set from the configuration. */
int manager_inventory_read_boot(struct manager *m);
int manager_inventory_record_first(struct manager *m);
void manager_inventory_check(struct manager *m, const char *why);
int manager_inventory_arm(struct manager *m);
void manager_inventory_free(struct manager *m);

/* manager-reload.c: SIGHUP */
void manager_reload(struct manager *m);

/* manager-loop.c */
int manager_setup_event_loop(struct manager *m);
int manager_arm_duration(struct manager *m, int64_t end_mono);
void manager_stop(struct manager *m, const char *why);
