/* SPDX-License-Identifier: MIT */
/* rtsoakd's configuration: the key table, the cross-key checks, and the effective
 * configuration as text (printed by --check-config and digested into each run). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "conf-parser.h"
#include "cpuset.h"
#include "loadgen.h"
#include "rotation.h"
#include "summary.h"

#define DAEMON_CONFIG_PATH "/etc/rtsoak/rtsoakd.conf"
/* The unprivileged system user the load generators run as by default (sysusers.d). */
#define DAEMON_LOAD_USER "rtsoak"

struct daemon_config {
        struct cpuset cpus;
        uint64_t priority;
        uint64_t probe_interval_ns;
        uint64_t threshold_ns;
        uint64_t hist_limit_ns;
        bool lock_memory;
        int64_t dma_latency_ns; /* -1: leave /dev/cpu_dma_latency alone */

        char *storage_path;
        uint64_t interval_ns;
        uint64_t retention_ns;   /* 0: keep everything */
        uint64_t hold_intervals; /* held in memory per CPU while storage fails */

        char *pstore_dir, *journal_dir, *flight_recorder;
        uint64_t journal_lines;

        char *load_helper; /* path of rtsoak-load */
        char *load_user;   /* the generators' user (setuid by rtsoak-load) */
        uint64_t load_nice;
        uint64_t restart_delay_ns, restart_delay_max_ns;

        char *upload_server; /* "": no upload */
        char *upload_token_file, *upload_ca_file;
        char *upload_release; /* the name the farm judges runs under; "": the kernel's release */
        /* The tested kernel tree, as the operator declares it ("": not told): an https:// URL
         * and a 40-digit commit, sent in the inventory (kernel.git_url, kernel.git_commit). */
        char *upload_git_url, *upload_git_commit;
        uint64_t upload_batch, upload_timeout_ns, upload_connect_timeout_ns, upload_retry_max_ns;

        bool trace; /* the trace flight recorder */
        char *trace_path, *trace_instance, *trace_events;
        uint64_t trace_lookback_ns;
        uint64_t trace_buffer_bytes; /* per probed CPU; 0: from the look-back */
        uint64_t trace_rate_interval_ns, trace_rate_burst;
        uint64_t trace_raw_max;
        bool trace_all_wakeups; /* false: only real-time tasks' and the probes' wake-ups */

        uint64_t inventory_check_ns; /* how often the inventory is checked; 0: only at reloads */

        char *rotation; /* "NAME SPAN, NAME SPAN, ..." as written */
        struct schedule_step *steps;
        size_t nsteps;
        uint64_t cycle_ns; /* sum of the steps */

        struct scenario *scenarios;
        size_t nscenarios;
};

#define SCENARIO_LOADS_MAX 16
#define SCENARIO_NAME_MAX SUMMARY_MAX_SCENARIO

struct scenario {
        char *name;
        struct loadgen_spec *loads;
        size_t nloads;
        bool builtin; /* still the built-in definition (the first Load= replaces it) */
};

/* The scenario that runs at wall-clock time real_ns: the rotation is aligned to the epoch
 * (like intervals), so it resumes where it would be after a restart, and machines sharing a
 * configuration run the same scenario at the same time. */
const struct schedule_step *schedule_at(const struct daemon_config *c, int64_t real_ns,
                                        int64_t *ret_step_start_ns, int64_t *ret_step_end_ns);
const struct scenario *scenario_find(const struct daemon_config *c, const char *name);

extern const struct conf_table daemon_config_table;

/* Whether the runs of this configuration on a kernel whose release (uname -r) is kernel_release
 * get a name the farm takes: with [Upload] Server= and without [Upload] Release=, the kernel's
 * release is the name, and it must be one (summary_name_release); -EINVAL with err otherwise. */
int daemon_config_check_release(const struct daemon_config *c, const char *kernel_release,
                                char err[static CONF_ERROR_MAX]);

/* Loads defaults, path (required if explicit), its drop-ins and the --set assignments, then
 * checks the keys against each other and the running kernel's release against the farm's
 * rule (daemon_config_check_release).  On error err holds the message. */
int daemon_config_load(struct daemon_config *c, const char *path, bool explicit_path,
                       char *const *sets, char ***ret_sources, char err[static CONF_ERROR_MAX]);
void daemon_config_free(struct daemon_config *c);
/* The effective configuration as INI text (allocated). */
char *daemon_config_text(const struct daemon_config *c);
/* -ENOENT (with err) when the rotation runs load generators and user does not exist: refused
 * at start and at a reload, rather than at the first scenario with loads. */
int daemon_config_check_load_user(const struct daemon_config *c, const char *user,
                                  char err[static CONF_ERROR_MAX]);
