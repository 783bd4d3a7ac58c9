/* SPDX-License-Identifier: MIT */
/* The filters of rtsoak's commands (--run, --cpu, --scenario, --type) checked against the
 * database: a value it does not know is a usage error that lists the ones it knows, never a
 * silently empty answer. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-filters.h"
#include "cpuset.h"
#include "log.h"
#include "macro.h"

/* Every event type rtsoakd records (load_* also carries what a generator reports). */
static const char *const event_types[] = {
        "alloc_failed",
        "clock_step",
        "config_reload_failed",
        "config_reloaded",
        "cpu_offline",
        "cpu_online",
        "cpu_unprobed",
        "inventory",
        "inventory_changed",
        "load_alloc_failed",
        "load_command_exit",
        "load_connect_failed",
        "load_connection_lost",
        "load_data_mismatch",
        "load_exec_failed",
        "load_exit",
        "load_leftover_removed",
        "load_listening",
        "load_low_space",
        "load_message",
        "load_socket_failed",
        "load_space_ok",
        "load_unsupported",
        "ring_full",
        "scenario",
        "storage_error",
        "storage_full",
        "unclean_end",
        "upload_rejected",
        "violation",
        "violations_unrecorded",
        "watchdog_stall",
};

/* Appends ", item" (or "item" first) to buf, cutting with "..." when it is full. */
static void list_add(char *buf, size_t len, const char *item) {
        size_t used = strlen(buf);
        if (used + strlen(item) + 8 >= len) {
                if (used + 5 < len && !strstr(buf, "..."))
                        strcat(buf, ", ...");
                return;
        }
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", item);
}

static int check_run(store *s, int64_t run_id) {
        struct store_run r, last;
        int e = store_get_run(s, run_id, &r);
        if (e >= 0) {
                store_run_done(&r);
                return 0;
        }
        if (e != -ENOENT) {
                log_error("--run %" PRId64 ": %s", run_id, store_error(s));
                return -EIO;
        }
        if (store_get_run(s, 0, &last) < 0) {
                log_error("--run %" PRId64 ": this database holds no run yet", run_id);
                return -ENOENT;
        }
        log_error("--run %" PRId64 ": no such run (this database holds runs 1 to %" PRId64 ")",
                  run_id, last.id);
        store_run_done(&last);
        return -ENOENT;
}

/* The CPUs every run of the database (or the one asked for) probed. */
static int check_cpu(store *s, int64_t run_id, int cpu) {
        struct store_run last;
        char list[512] = "";
        bool found = false, any = false;
        int64_t first = run_id ? run_id : 1, end = run_id;
        if (!run_id) {
                if (store_get_run(s, 0, &last) < 0)
                        return 0; /* no run: every answer is empty anyway */
                end = last.id;
                store_run_done(&last);
        }
        uint64_t seen[CPU_SETSIZE / 64] = { 0 };
        for (int64_t id = first; id <= end && !found; id++) {
                struct store_run r;
                struct cpuset set;
                const char *why;
                if (store_get_run(s, id, &r) < 0)
                        continue;
                if (r.cpus && cpuset_parse(r.cpus, &set, &why) >= 0) {
                        for (size_t i = 0; i < set.n; i++)
                                if (set.cpus[i] >= 0 && set.cpus[i] < CPU_SETSIZE)
                                        seen[set.cpus[i] / 64] |= UINT64_C(1) << (set.cpus[i] % 64);
                        found = cpuset_contains(&set, cpu);
                        any = true;
                        cpuset_done(&set);
                }
                store_run_done(&r);
        }
        if (found || !any)
                return 0;
        for (int c = 0; c < CPU_SETSIZE; c++)
                if (seen[c / 64] & (UINT64_C(1) << (c % 64))) {
                        char n[16];
                        snprintf(n, sizeof(n), "%d", c);
                        list_add(list, sizeof(list), n);
                }
        log_error("--cpu %d: no run %s probed it (probed CPUs: %s)", cpu,
                  run_id ? "asked for" : "of this database", list);
        return -ENOENT;
}

static int check_scenario(store *s, const char *name) {
        struct store_scenario *sc = NULL;
        size_t n = 0;
        char list[1024] = "";
        struct store_filter all = STORE_FILTER_ALL;
        int r = store_list_scenarios(s, &all, &sc, &n);
        if (r < 0) {
                log_error("--scenario %s: %s", name, store_error(s));
                return -EIO;
        }
        bool found = false;
        for (size_t i = 0; i < n; i++) {
                found = found || strcmp(sc[i].name, name) == 0;
                if (*sc[i].name)
                        list_add(list, sizeof(list), sc[i].name);
        }
        store_scenarios_free(sc, n);
        if (found || n == 0)
                return 0;
        log_error("--scenario %s: no interval of this database ran it (scenarios: %s)", name,
                  *list ? list : "none");
        return -ENOENT;
}

static int check_type(store *s, const char *type) {
        char list[2048] = "";
        for (size_t i = 0; i < ELEMENTSOF(event_types); i++)
                if (strcmp(event_types[i], type) == 0)
                        return 0;
        /* Not one rtsoakd records: known all the same if the database holds one (a newer
         * rtsoakd's, or a generator's own report). */
        struct store_event_row *ev = NULL;
        size_t n = 0;
        struct store_filter all = STORE_FILTER_ALL;
        if (store_list_events(s, &all, type, 1, &ev, &n) >= 0) {
                store_events_free(ev, n);
                if (n > 0)
                        return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(event_types); i++)
                list_add(list, sizeof(list), event_types[i]);
        log_error("--type %s: unknown event type (known: %s)", type, list);
        return -ENOENT;
}

int cli_check_filters(store *s, const struct store_filter *f, const char *type) {
        int r = 0;
        if (f->run_id > 0)
                r = check_run(s, f->run_id);
        if (r >= 0 && f->cpu >= 0)
                r = check_cpu(s, f->run_id, f->cpu);
        if (r >= 0 && f->scenario)
                r = check_scenario(s, f->scenario);
        if (r >= 0 && type)
                r = check_type(s, type);
        return r;
}
