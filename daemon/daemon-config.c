/* SPDX-License-Identifier: MIT */
/* rtsoakd's configuration keys, defaults and bounds in one table, and the checks that
 * involve more than one key. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-config.h"
#include "hist.h"
#include "macro.h"
#include "timeutil.h"

#define US NSEC_PER_USEC
#define MS NSEC_PER_MSEC
#define S NSEC_PER_SEC

static const struct conf_item items[] = {
        { "Probe", "CPUs", &conf_type_cpuset, offsetof(struct daemon_config, cpus), 0, 0, "all" },
        { "Probe", "Priority", &conf_type_uint, offsetof(struct daemon_config, priority), 1, 99,
          "95" },
        { "Probe", "Interval", &conf_type_timespan,
          offsetof(struct daemon_config, probe_interval_ns), 10 * US, 1 * S, "200us" },
        { "Probe", "Threshold", &conf_type_timespan, offsetof(struct daemon_config, threshold_ns),
          1 * US, 3600 * S, "100us" },
        { "Probe", "HistogramLimit", &conf_type_timespan_us,
          offsetof(struct daemon_config, hist_limit_ns), 1 * US, HIST_LIMIT_US_MAX *US, "1ms" },
        { "Probe", "LockMemory", &conf_type_bool, offsetof(struct daemon_config, lock_memory), 0, 0,
          "yes" },
        { "Probe", "CpuDmaLatency", &conf_type_timespan_off,
          offsetof(struct daemon_config, dma_latency_ns), 0, 2000 * S / 1000, "0" },
        { "Storage", "Path", &conf_type_string, offsetof(struct daemon_config, storage_path), 1,
          4000, "/var/lib/rtsoak/rtsoak.db" },
        { "Storage", "Interval", &conf_type_timespan_s, offsetof(struct daemon_config, interval_ns),
          1 * S, 86400 * S, "60s" },
};

const struct conf_table daemon_config_table = { items, ELEMENTSOF(items) };

void daemon_config_free(struct daemon_config *c) {
        conf_free(&daemon_config_table, c);
}

int daemon_config_load(struct daemon_config *c, const char *path, bool explicit_path,
                       char *const *sets, char ***ret_sources, char err[static CONF_ERROR_MAX]) {
        char *origins[ELEMENTSOF(items)] = {};
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        int r;

        *c = (struct daemon_config){};
        r = conf_load(&daemon_config_table, path, explicit_path, sets, c, origins, ret_sources,
                      err);
        if (r < 0)
                goto out;

        /* A probe period as long as the interval would leave intervals with a sample or
         * none; ask for at least ten wake-ups per interval. */
        if (c->probe_interval_ns * 10 > c->interval_ns) {
                snprintf(err, CONF_ERROR_MAX,
                         "%s: [Probe] Interval=%s is too long for [Storage] Interval=%s (set at "
                         "%s): each interval needs at least 10 wake-ups",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, probe_interval_ns)),
                         format_timespan(a, c->probe_interval_ns),
                         format_timespan(b, c->interval_ns),
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, interval_ns)));
                r = -EINVAL;
                goto out;
        }
out:
        conf_origins_free(&daemon_config_table, origins);
        return r;
}

char *daemon_config_text(const struct daemon_config *c) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        conf_print(&daemon_config_table, c, f);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
