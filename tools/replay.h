/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's parts: its built-in scenarios and their rotation (replay-scenarios.c), the
 * options (replay-options.c), the machines and their tokens (replay-machines.c), the history
 * of a machine (replay-history.c) and its posting (replay-post.c). */
#pragma once

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hist.h"
#include "http-reply.h"
#include "macro.h"
#include "rotation.h"
#include "sha256.h"
#include "summary.h"
#include "text-safe.h"
#include "timeutil.h"

#define DAY_NS ((int64_t) 86400 * (int64_t) NSEC_PER_SEC)
#define REPLAY_HIST_LIMIT_US 1000 /* rtsoakd's default [Probe] HistogramLimit= */
#define REPLAY_MAX_ITEMS 4096     /* of each repeatable option */
#define REPLAY_MAX_TRIES 10       /* per upload, on network errors, 408, 429 and 5xx */
#define REPLAY_RETRY_AFTER_MAX_NS (5 * NSEC_PER_SEC)
#define DEFAULT_ROTATION "idle 1h, cpu 1h, io 1h, net 1h, hackbench 1h, mixed 1h"

/* ---- the built-in scenarios, as rtsoakd defines them (daemon/daemon-config.c) --------------- */

struct metric_def {
        const char *name, *unit;
        double full; /* the rate while the generator runs the whole interval */
};

struct load_def {
        const char *generator;
        struct metric_def metrics[4];
        size_t nmetrics;
};

struct scenario {
        const char *name;
        struct load_def loads[4];
        size_t nloads;
};

/* The scenario of that name, or NULL. */
const struct scenario *replay_scenario_lookup(const char *name);
/* --rotation into replay_opt.steps (is_default: the built-in one, which follows any
 * interval): 0, or <0 after saying why. */
int replay_parse_rotation(bool is_default);
/* The rotation step at time t, like rtsoakd's schedule_at(): aligned to the epoch. */
const struct schedule_step *replay_step_at(int64_t t, int64_t *ret_step_start);
/* The load of scenario sc that runs generator gen, or NULL. */
const struct load_def *replay_scenario_load(const struct scenario *sc, const char *gen);

/* ---- options ------------------------------------------------------------------------------- */

struct spike {
        int64_t time_ns;
        uint32_t cpu;
        uint64_t latency_ns;
        char culprit[16]; /* "": no trace capture */
};

struct span {
        int64_t from_ns, to_ns;
};

struct run_end {
        int64_t time_ns;
        bool unclean;
};

struct load_down {
        int64_t time_ns;
        uint64_t span_ns;
        char generator[33];
};

/* A CPU absent from the intervals of [from, to): its probe measured nothing then. */
struct probe_down {
        uint32_t cpu;
        int64_t from_ns, to_ns;
};

/* A generator up through [from, to) with all its metrics 0: a load that ran no load. */
struct load_zero {
        int64_t from_ns, to_ns;
        char generator[33];
};

/* --inventory-change: at time_ns the field name takes value (NULL: it goes). */
struct inv_change {
        int64_t time_ns;
        char *name, *value;
};

struct machine {
        char id[33];
        char *token;
};

struct options {
        const char *server, *token, *token_file, *machine, *tokens_file, *ca_file;
        const char *kernel, *kernel_version, *preempt_model, *hostname, *rotation, *release;
        unsigned jobs, cpus, batch;
        int64_t from_ns, to_ns, run_id;
        uint64_t interval_ns, latency_ns, threshold_ns, probe_interval_ns, reboot_ns, seed;
        bool quiet, json;

        struct schedule_step *steps;
        size_t nsteps;
        uint64_t cycle_ns;
        struct spike *spikes;
        size_t nspikes;
        struct span *gaps;
        size_t ngaps;
        struct run_end *ends;
        size_t nends;
        struct load_down *downs;
        size_t ndowns;
        struct probe_down *pdowns;
        size_t npdowns;
        struct load_zero *zeros;
        size_t nzeros;
        uint32_t *probed; /* run.cpus; NULL: not sent */
        size_t nprobed;
        double samples_share;    /* of the wake-ups each CPU's span allows */
        uint64_t clock_ahead_ns; /* stamps of the intervals from clock_from_ns on */
        int64_t clock_from_ns;
        int64_t now_ns; /* the time the relative times of the options count from */
        const char **inventory_args, **inventory_change_args; /* as given */
        size_t ninventory_args, ninventory_change_args;
        bool send_inventory;            /* --inventory or --inventory-change given */
        struct inventory inventory;     /* at the history's start */
        struct inv_change *inv_changes; /* in time order */
        size_t ninv_changes;
        char config_digest[2 * SHA256_DIGEST_SIZE + 1];
};

extern struct options replay_opt;

/* "rtsoak-replay: OPTION: what is wrong (see --help)" on stderr; returns -EINVAL. */
_printf_(2, 3) int replay_usage_error(const char *option, const char *fmt, ...);
/* 0 to go on, 1 when done (--help), -EINVAL on a usage error (already printed). */
int replay_parse_options(int argc, char **argv);
/* A TIME option's value (RFC 3339, Unix nanoseconds, "now", "30d ago"). */
int replay_parse_time(const char *option, const char *s, int64_t now, int64_t *ret);
/* --inventory NAME=VALUE and --inventory-change TIME,NAME=VALUE|TIME,-NAME, as given, into
 * replay_opt (replay-inventory.c): 0, or -EINVAL on a usage error (already printed). */
int replay_parse_inventory(void);

/* ---- machines and tokens: --machine with --token or --token-file, or --tokens ------------- */

/* A machine id: 32 lowercase hex digits. */
static inline bool valid_id(const char *s) {
        char why[NAME_WHY_MAX];
        return name_ok(&summary_name_id, s, why);
}

extern struct machine *replay_machines;
extern size_t replay_nmachines;
int replay_load_machines(void);

/* ---- arithmetic of the parts --------------------------------------------------------------- */

/* Deterministic pseudo-random numbers: a pure function of its inputs, so that an interval
 * comes out the same whatever the batching, the threads or the order of the machines. */
static inline uint64_t mix64(uint64_t x) {
        x += UINT64_C(0x9e3779b97f4a7c15);
        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

static inline uint64_t rnd(uint64_t key, uint64_t a, uint64_t b) {
        return mix64(key ^ mix64(a ^ mix64(b)));
}

/* A uniform fraction in [0, 1). */
static inline double frac(uint64_t r) {
        return (double) (r >> 11) / (double) (UINT64_C(1) << 53);
}

static inline int64_t align_up(int64_t t, uint64_t step) {
        int64_t m = t % (int64_t) step;
        if (m < 0)
                m += (int64_t) step;
        return m ? t + ((int64_t) step - m) : t;
}

static inline char *fmt_time(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        return format_timestamp_utc(buf, ns);
}

/* The shift of every stamp of the interval that starts at t (--clock-ahead). */
static inline int64_t replay_clock_shift(int64_t t) {
        return t >= replay_opt.clock_from_ns ? (int64_t) replay_opt.clock_ahead_ns : 0;
}

/* ---- the history of one machine, and its posting -------------------------------------------- */

struct stats {
        uint64_t machines, runs, intervals, events, uploads, retries;
};

struct worker {
        pthread_t thread;
        CURL *curl;
        struct http_reply reply;
        struct stats stats;

        /* The histogram being filled, and which of its buckets are not zero. */
        struct hist hist;
        uint32_t touched[64];
        size_t ntouched;

        /* The upload being built. */
        struct summary_interval *ivs;
        struct summary_cpu *cpus;     /* batch x cpus */
        struct summary_load *loads;   /* batch x 4 */
        struct summary_metric *mets;  /* batch x 4 x 4 */
        struct summary_event *events; /* messages allocated */
        size_t nivs, nevents, cap_events;
        struct summary_inventory invs[SUMMARY_MAX_INVENTORY]; /* fields owned */
        size_t ninvs;
};

/* One machine's state while its history is generated. */
struct mstate {
        const struct machine *m;
        struct curl_slist *headers;
        char hostname[256];
        uint64_t key; /* the seed of this machine's pseudo-random numbers */

        int64_t run_id, run_start_ns, last_data_ns;
        char boot_id[33];
        uint64_t seq; /* of the next interval in the run */
        bool run_posted;
        uint64_t event_id; /* the last event number used */
        size_t next_spike;
        /* The inventory as the machine is now, the run's last version of it and when it was
         * found, and the next --inventory-change to apply. */
        struct inventory inv;
        bool inv_begun; /* inv holds --inventory */
        uint64_t inv_version;
        int64_t inv_found_ns;
        size_t next_inv_change;
};

extern atomic_bool replay_failed;
extern atomic_uint replay_unsent_spikes, replay_unsent_downs;

/* The boot id of the machine's current run: the same for the same seed, machine and run. */
void replay_new_boot_id(struct mstate *ms);
/* An event of the batch being built, numbered in the machine's order. */
_printf_(7, 8) int replay_add_event(struct worker *w, struct mstate *ms, int64_t time_ns,
                                    const char *type, int cpu, int64_t value, const char *fmt, ...);
/* The interval that starts at t: 0 when made, 1 when no CPU measured in it (not sent). */
int replay_make_interval(struct worker *w, struct mstate *ms, int64_t t);

/* The run that starts now sends the machine's inventory as its version 1, with its
 * "inventory" event (changes made while no run was up applied first); nothing without
 * --inventory options. */
int replay_inventory_run_start(struct worker *w, struct mstate *ms);
/* The changes up to end: one new version of the run for those found together, with its
 * inventory_changed event. */
int replay_inventory_changes(struct worker *w, struct mstate *ms, int64_t end);
/* Frees the versions of the batch, and the machine's inventory. */
void replay_inventory_batch_clear(struct worker *w);

int replay_worker_init(struct worker *w);
/* A posting thread: takes the next machine until none is left or the replay failed. */
void *replay_worker_main(void *arg);
void replay_worker_done(struct worker *w);
