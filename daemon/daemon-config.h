/* SPDX-License-Identifier: MIT */
/* rtsoakd's configuration: the key table, the cross-key checks, and the effective
 * configuration as text (printed by --check-config and digested into each run). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "conf-parser.h"
#include "cpuset.h"

#define DAEMON_CONFIG_PATH "/etc/rtsoak/rtsoakd.conf"

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
};

extern const struct conf_table daemon_config_table;

/* Loads defaults, path (required if explicit), its drop-ins and the --set assignments, then
 * checks the keys against each other.  On error err holds the message. */
int daemon_config_load(struct daemon_config *c, const char *path, bool explicit_path,
                       char *const *sets, char ***ret_sources, char err[static CONF_ERROR_MAX]);
void daemon_config_free(struct daemon_config *c);
/* The effective configuration as INI text (allocated). */
char *daemon_config_text(const struct daemon_config *c);
