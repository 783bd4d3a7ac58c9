/* SPDX-License-Identifier: MIT */
/* The summary a machine sends to the farm server ("rtsoak.summary/1", docs/summary-schema.md):
 * one codec, used by the uploader to encode and by the server to decode and validate. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inventory.h"
#include "name-rule.h"

#define SUMMARY_SCHEMA "rtsoak.summary/1"
#define SUMMARY_ERROR_MAX 512

/* Limits that a valid summary respects; the decoder refuses anything beyond them.  They are far
 * above what a real machine sends (docs/summary-schema.md says why each is where it is) and
 * bound what one machine's data can cost the server. */
#define SUMMARY_MAX_INTERVALS 1000
#define SUMMARY_MAX_CPUS 1024                   /* CPUs of a machine and of an interval */
#define SUMMARY_MAX_CPU_ID 8191                 /* a CPU's number (Linux's NR_CPUS at most 8192) */
#define SUMMARY_MAX_SCENARIOS 64                /* different scenario names in one summary */
#define SUMMARY_MAX_BUCKETS (UINT32_C(1) << 23) /* non-empty histogram buckets, summed */
/* Samples of a CPU in an interval: at most four per probe period of its length and 16 more;
 * with the probe period unknown (0), per SUMMARY_MIN_PROBE_NS.  One per period is what a probe
 * can count; between one and four the verdict judges the CPU as not measuring. */
#define SUMMARY_MAX_SAMPLES_PER_PERIOD 4
#define SUMMARY_MIN_PROBE_NS 1000
#define SUMMARY_MAX_MISSED_NS (UINT64_C(2) * 86400 * 1000000000) /* periods missed: 2 days' */
#define SUMMARY_MAX_LOADS 16
#define SUMMARY_MAX_METRICS 8
#define SUMMARY_MAX_EVENTS 10000
#define SUMMARY_MAX_HIST_BYTES (1 << 20)
#define SUMMARY_MAX_TEXT 4096 /* any string, except the kernel command line: */
#define SUMMARY_MAX_CMDLINE 16384
#define SUMMARY_MAX_DETAILS 65536 /* an event's details, as compact JSON text */
#define SUMMARY_DETAILS_DEPTH 8   /* how deeply its objects and arrays may nest */
/* A release name (run.release, or run.kernel_release when it is absent), stored, routed and
 * served whole: every buffer and every route that holds one uses this. */
#define SUMMARY_MAX_RELEASE 256
#define SUMMARY_MAX_SCENARIO 32
#define SUMMARY_MAX_TRACES 64                 /* trace captures per interval */
#define SUMMARY_MAX_TRACE_RAW (1 << 20)       /* a capture's compressed raw events */
#define SUMMARY_MAX_TRACE_RAW_TOTAL (4 << 20) /* all of them in one interval */
#define SUMMARY_MAX_INVENTORY 64              /* inventory versions in one summary */

struct summary_machine {
        char *id; /* 32 lowercase hex digits (/etc/machine-id) */
        char *hostname;
        char *cpu_model;
        uint32_t cpus; /* online CPUs */
};

struct summary_run {
        int64_t id; /* the machine's own run number, > 0 */
        char *boot_id;
        char *kernel_release, *kernel_version, *kernel_cmdline, *preempt_model;
        char *daemon_version;
        char *config_digest; /* 64 lowercase hex digits */
        int64_t start_ns;
        uint64_t threshold_ns, probe_interval_ns, interval_ns;
        /* Optional (NULL / 0 when the daemon did not send them): the name the run is judged
         * under ([Upload] Release=), and the CPUs it probes, ascending. */
        char *release;
        uint32_t *probed_cpus;
        size_t nprobed_cpus;
};

struct summary_cpu {
        uint32_t cpu;
        uint64_t samples, min_ns, avg_ns, max_ns, violations, missed;
        int64_t max_time_ns;
        uint32_t hist_limit_us;
        uint8_t *hist; /* hist_encode() format; base64 in JSON */
        size_t hist_len;
        /* The CPU's own span, when it differs from the interval's (a probe that started or
         * stopped inside it); span_length_ns 0: the interval's. */
        int64_t span_start_ns;
        uint64_t span_length_ns;
};

struct summary_metric {
        char *name, *unit;
        double value;
};

struct summary_load {
        char *generator;
        uint64_t up_ns;
        uint32_t starts, exits;
        struct summary_metric *metrics;
        size_t nmetrics;
};

struct trace_analysis;

/* A capture of the trace flight recorder (common/summary-trace.c). */
struct summary_trace {
        struct trace_analysis *analysis; /* checked */
        char *json;                      /* the analysis object as compact JSON */
        uint8_t *raw;                    /* zlib of the raw events' text; NULL: not sent */
        size_t raw_len;
};

struct summary_interval {
        uint64_t seq; /* the run's interval sequence number */
        int64_t start_ns;
        uint64_t length_ns;
        char *scenario; /* NULL: none */
        struct summary_cpu *cpus;
        size_t ncpus;
        struct summary_load *loads;
        size_t nloads;
        struct summary_trace *traces; /* optional: captures of violations in it */
        size_t ntraces;
};

struct summary_event {
        uint64_t id; /* the machine's own event number: with machine and run, its identity */
        int64_t time_ns;
        char *type;
        int32_t cpu;   /* -1: none */
        int64_t value; /* -1: none */
        char *message;
        char *details; /* NULL: none; else a JSON object as compact text */
};

/* A version of the machine's inventory (common/summary-inventory.c): what the machine was from
 * time_ns on, as rtsoakd found it at the run's start or at a check that saw it change. */
struct summary_inventory {
        uint64_t version; /* the run's own number of it, from 1: with machine and run, its identity
                           */
        int64_t time_ns;  /* when rtsoakd found it */
        int64_t after_ns; /* the check before, which found the version before; 0: not sent */
        struct inventory fields;
};

struct summary {
        struct summary_machine machine;
        struct summary_run run;
        uint64_t seq; /* the upload's sequence number: with machine and run, its idempotency key */
        struct summary_interval *intervals;
        size_t nintervals;
        struct summary_event *events;
        size_t nevents;
        struct summary_inventory *inventory; /* optional: versions, ascending */
        size_t ninventory;
};

void summary_done(struct summary *s);

/* The kinds of names the schema holds (name-rule.h; check them with name_ok()): a release
 * (1-256 letters, digits and . _ + ~ : -), a scenario, a load generator, a metric, an event
 * type, an identifier (machine.id, run.boot_id) and a digest (run.config_digest). */
extern const struct name_rule summary_name_release, summary_name_scenario, summary_name_generator,
        summary_name_metric, summary_name_event_type, summary_name_id, summary_name_digest;

/* The name the run is judged under: release, else kernel_release (the decoder made sure that
 * it is a release name). */
const char *summary_release_of(const struct summary_run *run);

/* Encodes s as compact JSON (allocated, NUL-terminated). */
int summary_encode(const struct summary *s, char **ret, size_t *ret_len);

/* Decodes and validates JSON text of at most len bytes.  On error returns -EBADMSG (or
 * -ENOMEM) and writes into err the path of the offending field and what is wrong
 * ("intervals[3].cpus[0].max_ns: less than min_ns"). */
int summary_decode(const char *text, size_t len, struct summary *ret,
                   char err[static SUMMARY_ERROR_MAX]);

/* The optional "traces" member of an interval (common/summary-trace.c): encoding, decoding
 * with the path of a bad field in err, freeing. */
struct json_t;
int summary_traces_encode(const struct summary_interval *iv, struct json_t *interval);
int summary_traces_decode(struct json_t *interval, const char *path, struct summary_interval *iv,
                          char err[static SUMMARY_ERROR_MAX]);
void summary_traces_free(struct summary_interval *iv);

/* The optional top-level "inventory" member (common/summary-inventory.c): encoding (nothing
 * when the summary has no version), decoding with the path of a bad field in err, freeing. */
int summary_inventory_encode(const struct summary *s, struct json_t *doc);
int summary_inventory_decode(struct json_t *doc, struct summary *s,
                             char err[static SUMMARY_ERROR_MAX]);
void summary_inventory_free(struct summary *s);
