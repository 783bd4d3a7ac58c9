/* SPDX-License-Identifier: MIT */
/* Reloading rtsoakd's configuration (SIGHUP): which keys apply live, and the new effective
 * configuration with the keys that need a restart kept at their running values. */
#pragma once

#include <stdbool.h>

#include "daemon-config.h"

/* When a key changed by a reload takes effect. */
enum reload_when {
        RELOAD_AT_ONCE,       /* [Upload] but Release= (the uploader restarts), [Inventory] */
        RELOAD_NEXT_INTERVAL, /* [Schedule], the scenarios, [Probe] Threshold= */
        RELOAD_RESTART,       /* the rest: kept at its running value until a restart */
};
enum reload_when reload_applies(const char *section, const char *key);
static inline bool reload_needs_restart(const char *section, const char *key) {
        return reload_applies(section, key) == RELOAD_RESTART;
}

struct reload_result {
        struct daemon_config cfg; /* the new effective configuration */
        char *changed;            /* "Schedule.Rotation, Probe.Threshold" or "" (allocated) */
        char *kept;               /* "Probe.Priority=80 (running: 95), ..." or "" (allocated) */
        /* When the changed keys apply: "at once: Upload.Server; from the next interval
         * boundary: Schedule.Rotation" or "" (allocated). */
        char *applies;
};
void reload_result_done(struct reload_result *r);

/* Reads path (and its drop-ins) and the assignments again, like at start.  Keys that need a
 * restart and differ keep their running values (listed in kept); the other differences are
 * listed in changed.  On error (a bad file; the new keys do not fit the kept ones) returns
 * -errno with the message in err, and cur is what stays in effect. */
int reload_config(const struct daemon_config *cur, const char *path, bool explicit_path,
                  char *const *sets, struct reload_result *ret, char err[static CONF_ERROR_MAX]);
