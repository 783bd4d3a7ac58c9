/* SPDX-License-Identifier: MIT */
/* The local database: runs, intervals with per-CPU statistics and histograms, and events.
 * Only this part speaks SQL; everything else uses these functions and structs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "inventory.h"

/* The database and its lock file: the owner writes, its group (rtsoak's readers) reads. */
#define STORE_FILE_MODE 0640

typedef struct store store;

#define STORE_ERROR_MAX 512
#define STORE_SCHEMA_VERSION 7

enum {
        STORE_READONLY = 1 << 0, /* for the CLI: never creates or migrates */
        STORE_WRITER = 1 << 1,   /* for rtsoakd: creates, migrates, checks, takes the lock */
        STORE_UPLOADER = 1 << 2, /* rtsoakd's uploader: a second connection that only
                                  * marks the outbox (the writer holds the lock) */
};

/* Opens (and for writers creates, migrates and quick_checks) the database.  On failure
 * returns -errno and writes a message naming the file and the problem into err. */
int store_open(const char *path, unsigned flags, store **ret, char err[static STORE_ERROR_MAX]);
void store_close(store *s);
static inline void store_closep(store **s) {
        if (*s)
                store_close(*s);
}
/* The message of the last failed call on s. */
const char *store_error(const store *s);
/* Whether a writer (rtsoakd) holds the database now. */
bool store_writer_active(const char *path);

/* A run found not to have ended, as told to store_run_info.kernel_leftovers. */
struct store_unclean {
        int64_t run_id;
        const char *boot_id;
        bool same_boot;    /* the run died in the boot now running (the daemon died) */
        bool last_of_boot; /* no later run of its boot: what the boot left is its */
        int64_t last_seen_ns, interval_ns;
};

/* Upper bound of an event's details (JSON text); larger ones are cut down by the writer. */
#define STORE_DETAILS_MAX (64 * 1024)

struct store_run_info {
        const char *machine_id, *boot_id, *hostname;
        const char *kernel_release, *kernel_version, *kernel_cmdline, *preempt_model;
        const char *daemon_version, *config_digest, *config_text, *cpus;
        const char *release; /* the name the farm judges the run under; NULL: its kernel's */
        uint64_t priority, probe_interval_ns, interval_ns, threshold_ns;
        uint32_t hist_limit_us;
        int64_t start_ns;
        int64_t boot_ns; /* wall-clock time at which the machine booted; 0: unknown */
        /* Optional: what the kernel left about an earlier run that did not end cleanly (pstore
         * records, the journal of its boot), as a JSON object added to the unclean_end event's
         * details as "kernel".  Called once per unclean run, inside the transaction that
         * records it; returns malloc'ed JSON text or NULL. */
        char *(*kernel_leftovers)(void *userdata, const struct store_unclean *u);
        void *userdata;
};

/* Marks every run that never ended as ended uncleanly (with an "unclean_end" event carrying
 * what is known about it), then records a new run.  *ret_unclean (optional) receives how many
 * runs were found unclean. */
int store_begin_run(store *s, const struct store_run_info *info, int64_t *ret_run_id,
                    unsigned *ret_unclean);
/* reason: "clean" or "error".  message may be NULL. */
int store_end_run(store *s, int64_t run_id, int64_t end_ns, const char *reason,
                  const char *message);

struct store_cpu_interval {
        int cpu;
        int64_t start_ns;
        uint64_t length_ns;
        uint64_t samples, min_ns, max_ns, sum_ns, violations, missed;
        int64_t max_time_ns;
        uint32_t hist_limit_us;
        const uint64_t *hist;        /* hist_nbuckets(hist_limit_us) dense counts, or NULL and: */
        const uint8_t *hist_encoded; /* the same as hist_encode() makes it */
        size_t hist_encoded_len;
};

struct store_event {
        int64_t time_ns;
        const char *type;
        int cpu;          /* -1: not about one CPU */
        int64_t value_ns; /* -1: no value */
        const char *message;
        const char *details; /* a JSON object, or NULL */
};

/* One throughput figure of a load generator over an interval ("write", "MiB/s", 12.5). */
struct store_load_metric {
        const char *name, *unit;
        double value;
};

/* One load generator of the scenario during an interval. */
struct store_interval_load {
        const char *generator;
        uint64_t up_ns;  /* how long it was running during the interval */
        uint32_t starts; /* starts (first and restarts) during the interval */
        uint32_t exits;  /* exits (crashes, kills) during the interval */
        const struct store_load_metric *metrics;
        size_t nmetrics;
};

/* A capture of the trace flight recorder (storage/store-trace.c). */
struct store_trace {
        int cpu;
        int64_t time_ns; /* when the late wake-up was due */
        uint64_t latency_ns;
        const char *analysis; /* the analysis, a JSON object (common/trace-analysis.h) */
        const uint8_t *raw;   /* the events' text compressed with zlib, or NULL */
        size_t raw_len;
        uint64_t raw_events, raw_dropped; /* events kept in raw, and left out to fit its cap */
};

struct store_interval {
        int64_t run_id;
        uint64_t seq;
        int64_t start_ns;
        uint64_t length_ns;
        const char *scenario; /* may be NULL */
        const struct store_interval_load *loads;
        size_t nloads;
        const struct store_cpu_interval *cpus;
        size_t ncpus;
        const struct store_event *events;
        size_t nevents;
        const struct store_trace *traces; /* captures of violations due before its end */
        size_t ntraces;
};

/* Stores one interval, its per-CPU rows, events and traces in one transaction. */
int store_write_interval(store *s, const struct store_interval *iv);
/* Stores one event outside an interval (queued for upload when the outbox is on). */
int store_add_event(store *s, int64_t run_id, const struct store_event *ev);
/* The same, never queued for upload: kept in this database only. */
int store_add_event_local(store *s, int64_t run_id, const struct store_event *ev);

/* ---- queries ---- */

struct store_filter {
        int64_t since_ns;     /* INT64_MIN: unbounded */
        int64_t until_ns;     /* INT64_MAX: unbounded */
        int64_t run_id;       /* 0: every run */
        int cpu;              /* -1: every CPU */
        const char *scenario; /* NULL: every scenario */
};
#define STORE_FILTER_ALL ((struct store_filter){ INT64_MIN, INT64_MAX, 0, -1, NULL })

struct store_run {
        int64_t id;
        char *machine_id, *boot_id, *hostname;
        char *kernel_release, *kernel_version, *kernel_cmdline, *preempt_model;
        char *daemon_version, *config_digest, *config_text, *cpus;
        char *release; /* NULL: not recorded (a run from before schema 5) */
        uint64_t priority, probe_interval_ns, interval_ns, threshold_ns;
        uint32_t hist_limit_us;
        int64_t start_ns, last_seen_ns, end_ns; /* INT64_MIN when not set */
        char *end_reason;                       /* NULL while running (or not yet found dead) */
};
void store_run_done(struct store_run *r);

/* run_id 0 means the latest run.  -ENOENT when there is none. */
int store_get_run(store *s, int64_t run_id, struct store_run *ret);

/* How a run ended: for the run before another, what "rtsoak status" tells first. */
struct store_run_end {
        int64_t id, last_seen_ns, end_ns; /* INT64_MIN when not set */
        char *end_reason;                 /* NULL: it never ended (or is running) */
        char *end_message;                /* NULL when none was recorded */
};
void store_run_end_done(struct store_run_end *e);
/* The run just before run_id.  -ENOENT when run_id is the first. */
int store_get_previous_run_end(store *s, int64_t run_id, struct store_run_end *ret);

struct store_cpu_report {
        int cpu;
        uint64_t intervals, samples, min_ns, max_ns, violations, missed;
        unsigned __int128 sum_ns;
        int64_t max_time_ns, first_ns, last_ns;
        struct hist hist;
};
void store_report_free(struct store_cpu_report *r, size_t n);

/* Aggregates every per-CPU interval row whose start lies in [since, until) into one entry per
 * CPU, sorted by CPU, with the merged histogram.  Corrupt rows (a histogram that does not
 * decode or does not add up to the row's samples) fail the query with -EBADMSG naming the
 * row: a report must never silently leave samples out. */
int store_report(store *s, const struct store_filter *f, struct store_cpu_report **ret,
                 size_t *ret_n);

struct store_event_row {
        int64_t id, run_id, time_ns, value_ns;
        int cpu;
        char *type, *message;
        char *details; /* JSON object text, or NULL */
};
void store_events_free(struct store_event_row *e, size_t n);
/* Events in [since, until), oldest first; type NULL for all; at most limit (0: no limit),
 * the newest ones when limited. */
int store_list_events(store *s, const struct store_filter *f, const char *type, size_t limit,
                      struct store_event_row **ret, size_t *ret_n);

/* ---- scenarios ---- */

struct store_load_summary {
        int idx;
        char *generator;
        char *metric, *unit; /* NULL for a load that reported nothing */
        double avg;          /* average of the metric, weighted by interval length */
        uint64_t up_ns, starts, exits;
        uint64_t intervals; /* intervals in which it appeared */
        uint64_t length_ns; /* their total length (up_ns / length_ns: the share it ran) */
};

struct store_scenario {
        char *name; /* "" for intervals without a scenario */
        uint64_t intervals, length_ns;
        int64_t first_ns, last_ns;
        struct store_load_summary *loads; /* one row per load and metric, by idx then metric */
        size_t nloads;
};
void store_scenarios_free(struct store_scenario *s, size_t n);

/* Every scenario with intervals in the window (by name), with the average throughput of each
 * load generator and how long each really ran.  f->scenario and f->cpu are ignored. */
int store_list_scenarios(store *s, const struct store_filter *f, struct store_scenario **ret,
                         size_t *ret_n);

/* ---- upload outbox ---- */

/* From now on every interval stored and every event added also enters the outbox, in the
 * same transaction. */
void store_set_outbox(store *s, bool on);

struct store_outbox_row {
        int64_t id, run_id, interval_id, event_id; /* one of interval_id, event_id is 0 */
        int64_t created_ns;
        uint32_t attempts;
};

/* The oldest pending rows, at most max of them, all of the same run (the first's). */
int store_outbox_next(store *s, size_t max, struct store_outbox_row **ret, size_t *ret_n);

struct summary;
/* Fills s->intervals and s->events with what the rows carry (the intervals with their CPUs,
 * loads and events; the events on their own).  The rest of *s is left alone. */
int store_outbox_summary(store *s, const struct store_outbox_row *rows, size_t n,
                         struct summary *ret);

/* Marks rows sent, or rejected with the server's message, or counts a failed attempt. */
enum store_outbox_result { STORE_OUTBOX_SENT, STORE_OUTBOX_REJECTED, STORE_OUTBOX_RETRY };
int store_outbox_mark(store *s, const struct store_outbox_row *rows, size_t n,
                      enum store_outbox_result result, int64_t now_ns, const char *message);

struct store_upload_status {
        uint64_t pending, rejected, sent;
        int64_t oldest_pending_ns;              /* INT64_MIN: none */
        int64_t last_success_ns, last_error_ns; /* INT64_MIN: never */
        char *last_error;                       /* NULL: none */
        char *last_rejection;                   /* the newest rejected row's message */
};
void store_upload_status_done(struct store_upload_status *st);
int store_get_upload_status(store *s, struct store_upload_status *ret);

/* ---- long-run hygiene ---- */

/* Databases up to this size made before schema 4 are rewritten at open (VACUUM) to return
 * freed pages to the file system; larger ones keep their size and reuse freed pages. */
#define STORE_VACUUM_CONVERT_MAX (256ULL * 1024 * 1024)

/* Whether freed pages are given back to the file system (auto_vacuum incremental). */
bool store_vacuum_incremental(const store *s);

struct store_prune_result {
        uint64_t intervals, events, outbox; /* rows deleted */
        uint64_t pages_freed;               /* returned to the file system */
};
/* Deletes at most batch intervals (with their CPUs, loads, events and outbox rows) and at
 * most batch events that started before before_ns and are not waiting for upload, in one
 * transaction, then returns up to vacuum_pages free pages to the file system.  Adds to *ret;
 * returns how many intervals and events went (0: nothing left to delete). */
int store_prune(store *s, int64_t before_ns, size_t batch, unsigned vacuum_pages,
                struct store_prune_result *ret);
/* A passive WAL checkpoint: copies what it can into the database without waiting for
 * readers; the WAL file is cut back to a bound when it restarts. */
int store_checkpoint(store *s);

/* ---- trace captures (store-trace.c) ---- */

/* What a run's flight recorder was (a JSON object: state, notice, timerlat, ...). */
int store_set_run_trace(store *s, int64_t run_id, const char *json);

struct store_trace_row {
        int64_t id, run_id, seq; /* seq: the interval that carried it, -1 when none */
        int cpu;
        int64_t time_ns;
        uint64_t latency_ns;
        char *analysis, *summary, *culprit_kind, *culprit_name;
        int64_t culprit_pid; /* -1: not a thread */
        uint64_t culprit_ns;
        uint8_t *raw; /* only from store_get_trace() with raw */
        size_t raw_len;
        uint64_t raw_events, raw_dropped;
};
void store_traces_free(struct store_trace_row *t, size_t n);
void store_trace_row_done(struct store_trace_row *t);
/* Captures in [since, until) (f->cpu and f->run_id narrow), oldest first; the newest limit
 * when limit > 0. */
int store_list_traces(store *s, const struct store_filter *f, size_t limit,
                      struct store_trace_row **ret, size_t *ret_n);
/* One capture, with its raw events when raw is set; -ENOENT when there is none. */
int store_get_trace(store *s, int64_t id, bool raw, struct store_trace_row *ret);
/* The run's flight recorder as recorded (JSON text, malloc'ed), NULL when none was. */
int store_get_run_trace(store *s, int64_t run_id, char **ret);

struct store_trace_totals {
        uint64_t captures;
        uint64_t skipped; /* violations not captured, as the captures count them */
};
int store_trace_totals(store *s, int64_t run_id, struct store_trace_totals *ret);

/* ---- the machine's inventory (store-inventory.c) ---- */

/* A version of the inventory of a run: what the machine was from time_ns on. */
struct store_inventory_row {
        int64_t run_id;
        uint64_t version; /* from 1 within the run */
        int64_t time_ns;  /* when rtsoakd found it */
        int64_t after_ns; /* the check before, which found the version before; 0: none */
        struct inventory fields;
};
void store_inventory_rows_free(struct store_inventory_row *v, size_t n);
void store_inventory_row_done(struct store_inventory_row *v);

/* Stores a version with the event that announces it (ev, of its run), in one transaction: with
 * the outbox on, that event's upload carries the version to the farm. */
int store_add_inventory(store *s, const struct store_inventory_row *v,
                        const struct store_event *ev);
/* The versions of run_id (0: of every run), oldest first. */
int store_list_inventory(store *s, int64_t run_id, struct store_inventory_row **ret, size_t *ret_n);
/* The newest version of run_id (0: of the newest run that has one); -ENOENT when none. */
int store_get_inventory(store *s, int64_t run_id, struct store_inventory_row *ret);
