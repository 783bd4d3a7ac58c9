/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's built-in scenarios, with the rates of their generators' metrics, and the
 * rotation through them, read by rtsoakd's own parser (common/rotation.c). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "replay.h"

/* Rates of the generators' own metrics (loadgen/loadgen-*.c): plausible values for a small
 * x86 machine, or the rate the scenario asks for (mixed: 1 Mbit/s, 1 MB/s, 40 % CPU). */
static const struct scenario scenarios[] = {
        { "idle", {}, 0 },
        { "cpu", { { "cpu", { { "ops", "ops/s", 120000 } }, 1 } }, 1 },
        { "io",
          { { "fileio",
              { { "write", "MiB/s", 180 }, { "read", "MiB/s", 175 }, { "fsync", "fsyncs/s", 45 } },
              3 } },
          1 },
        { "net",
          { { "network",
              { { "tx", "Mbit/s", 9400 },
                { "rx", "Mbit/s", 9400 },
                { "tx_packets", "packets/s", 780000 },
                { "rx_packets", "packets/s", 780000 } },
              4 } },
          1 },
        { "hackbench",
          { { "hackbench", { { "messages", "msg/s", 420000 }, { "rounds", "rounds/s", 41 } }, 2 } },
          1 },
        { "mixed",
          { { "cpu", { { "ops", "ops/s", 48000 } }, 1 },
            { "network",
              { { "tx", "Mbit/s", 1 },
                { "rx", "Mbit/s", 1 },
                { "tx_packets", "packets/s", 85 },
                { "rx_packets", "packets/s", 85 } },
              4 },
            { "fileio",
              { { "write", "MiB/s", 0.95 }, { "read", "MiB/s", 0.95 }, { "fsync", "fsyncs/s", 1 } },
              3 },
            { "memory", { { "alloc", "MiB/s", 0.95 }, { "ops", "allocs/s", 240 } }, 2 } },
          4 },
};

const struct scenario *replay_scenario_lookup(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(scenarios); i++)
                if (strcmp(scenarios[i].name, name) == 0)
                        return &scenarios[i];
        return NULL;
}

static const struct scenario *rotation_lookup(void *userdata, const char *name) {
        return replay_scenario_lookup(name);
}

static void rotation_problem(void *userdata, enum rotation_problem what, const char *item,
                             const char *span, const char *reason) {
        char a[TIMESPAN_MAX_LEN];
        switch (what) {
        case ROTATION_SYNTAX:
                replay_usage_error("--rotation",
                                   "expected \"SCENARIO DURATION\" items separated by commas (e.g. "
                                   "\"idle 1h, mixed 2h\"), got \"%s\"",
                                   item);
                break;
        case ROTATION_UNKNOWN:
                replay_usage_error(
                        "--rotation",
                        "unknown scenario \"%s\" (built-in: idle, cpu, io, net, hackbench, "
                        "mixed)",
                        item);
                break;
        case ROTATION_BAD_SPAN:
                replay_usage_error("--rotation", "%s %s: %s", item, span,
                                   reason ?: "must be longer than 0");
                break;
        case ROTATION_NOT_WHOLE:
                replay_usage_error("--rotation",
                                   "%s %s is not a whole number of intervals (--interval %s)", item,
                                   span, format_timespan(a, replay_opt.interval_ns));
                break;
        case ROTATION_TOO_MANY:
                replay_usage_error("--rotation", "more than %d steps", ROTATION_STEPS_MAX);
                break;
        case ROTATION_TOO_LONG:
                replay_usage_error("--rotation", "%s %s is too long", item, span);
                break;
        case ROTATION_EMPTY:
                replay_usage_error("--rotation", "no scenario given");
                break;
        }
}

/* "idle 1h, cpu 30min": every step a built-in scenario and a whole number of intervals (the
 * default rotation follows any interval, like rtsoakd's), read as rtsoakd reads its
 * [Schedule] Rotation=. */
int replay_parse_rotation(bool is_default) {
        struct rotation_params p = {
                .interval_ns = replay_opt.interval_ns,
                .round_up = is_default,
                .max_step_ns = (uint64_t) 100 * 365 * DAY_NS,
                .lookup = rotation_lookup,
                .problem = rotation_problem,
        };
        int r = rotation_parse(replay_opt.rotation, &p, &replay_opt.steps, &replay_opt.nsteps,
                               &replay_opt.cycle_ns);
        if (r == -ENOMEM)
                return log_oom();
        return r < 0 ? -EINVAL : 0;
}

/* The rotation step at time t, like rtsoakd's schedule_at(): aligned to the epoch. */
const struct schedule_step *replay_step_at(int64_t t, int64_t *ret_step_start) {
        return rotation_at(replay_opt.steps, replay_opt.nsteps, replay_opt.cycle_ns, t,
                           ret_step_start, NULL);
}

const struct load_def *replay_scenario_load(const struct scenario *sc, const char *gen) {
        for (size_t i = 0; i < sc->nloads; i++)
                if (strcmp(sc->loads[i].generator, gen) == 0)
                        return &sc->loads[i];
        return NULL;
}
