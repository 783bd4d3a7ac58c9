/* SPDX-License-Identifier: MIT */
/* rtsoakd's configuration keys, defaults and bounds in one table, and the checks that
 * involve more than one key. */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "config.h"
#include "daemon-config.h"
#include "hist.h"
#include "macro.h"
#include "summary.h"
#include "text-safe.h"
#include "timeutil.h"
#include "uploader.h"
#include "user-lookup.h"

/* What explains a late wake-up: scheduling, hard and soft interrupts with their handlers,
 * hrtimer expiry, IPIs.  "?" marks events only some architectures have (x86's interrupt
 * vectors, arm64's ipi_entry): skipped without a notice where missing.  Not x86's local
 * timer vector: the hrtimer expiries inside it say more, and every event on a probe's own
 * wake-up path adds to every sample (bench/results-trace.txt). */
#define TRACE_DEFAULT_EVENTS                                                                  \
        "sched:sched_switch sched:sched_wakeup sched:sched_wakeup_new irq:irq_handler_entry " \
        "irq:irq_handler_exit irq:softirq_entry irq:softirq_exit timer:hrtimer_expire_entry " \
        "timer:hrtimer_expire_exit ipi:ipi_send_cpu ipi:ipi_send_cpumask "                    \
        "?irq_vectors:reschedule_entry ?irq_vectors:reschedule_exit "                         \
        "?irq_vectors:call_function_entry ?irq_vectors:call_function_exit "                   \
        "?irq_vectors:call_function_single_entry ?irq_vectors:call_function_single_exit "     \
        "?irq_vectors:irq_work_entry ?irq_vectors:irq_work_exit ?ipi:ipi_entry ?ipi:ipi_exit"

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
        { "Storage", "Retention", &conf_type_timespan, offsetof(struct daemon_config, retention_ns),
          0, 100ULL * 365 * 86400 * S, "0" },
        { "Storage", "HoldIntervals", &conf_type_uint,
          offsetof(struct daemon_config, hold_intervals), 2, 1000000, "1024" },
        { "Forensics", "PstoreDir", &conf_type_string, offsetof(struct daemon_config, pstore_dir),
          1, 4000, "/sys/fs/pstore" },
        { "Forensics", "JournalDirectory", &conf_type_string,
          offsetof(struct daemon_config, journal_dir), 0, 4000, "" },
        { "Forensics", "JournalLines", &conf_type_uint,
          offsetof(struct daemon_config, journal_lines), 0, 1000, "100" },
        { "Forensics", "FlightRecorder", &conf_type_path_off,
          offsetof(struct daemon_config, flight_recorder), 0, 4000, "/dev/pmsg0" },
        { "Load", "Helper", &conf_type_string, offsetof(struct daemon_config, load_helper), 1, 4000,
          RTSOAK_LOAD_PATH },
        { "Load", "User", &conf_type_string, offsetof(struct daemon_config, load_user), 1, 256,
          DAEMON_LOAD_USER },
        { "Load", "Nice", &conf_type_uint, offsetof(struct daemon_config, load_nice), 0, 19, "0" },
        { "Load", "RestartDelay", &conf_type_timespan,
          offsetof(struct daemon_config, restart_delay_ns), 100 * MS, 3600 * S, "1s" },
        { "Load", "RestartDelayMax", &conf_type_timespan,
          offsetof(struct daemon_config, restart_delay_max_ns), 100 * MS, 86400 * S, "5min" },
        { "Upload", "Server", &conf_type_string, offsetof(struct daemon_config, upload_server), 0,
          2000, "" },
        { "Upload", "TokenFile", &conf_type_string,
          offsetof(struct daemon_config, upload_token_file), 1, 4000, "/etc/rtsoak/token" },
        { "Upload", "CAFile", &conf_type_string, offsetof(struct daemon_config, upload_ca_file), 0,
          4000, "" },
        { "Upload", "Release", &conf_type_string, offsetof(struct daemon_config, upload_release), 0,
          SUMMARY_MAX_RELEASE, "" },
        { "Upload", "GitURL", &conf_type_string, offsetof(struct daemon_config, upload_git_url), 0,
          512, "" },
        { "Upload", "GitCommit", &conf_type_string,
          offsetof(struct daemon_config, upload_git_commit), 0, 40, "" },
        { "Upload", "Batch", &conf_type_uint, offsetof(struct daemon_config, upload_batch), 1, 1000,
          "60" },
        { "Upload", "Timeout", &conf_type_timespan,
          offsetof(struct daemon_config, upload_timeout_ns), 1 * S, 600 * S, "30s" },
        { "Upload", "ConnectTimeout", &conf_type_timespan,
          offsetof(struct daemon_config, upload_connect_timeout_ns), 1 * S, 300 * S, "10s" },
        { "Upload", "RetryMax", &conf_type_timespan,
          offsetof(struct daemon_config, upload_retry_max_ns), 1 * S, 86400 * S, "5min" },
        { "Trace", "Enabled", &conf_type_bool, offsetof(struct daemon_config, trace), 0, 0, "yes" },
        { "Trace", "Path", &conf_type_string, offsetof(struct daemon_config, trace_path), 1, 4000,
          "/sys/kernel/tracing" },
        { "Trace", "Instance", &conf_type_string, offsetof(struct daemon_config, trace_instance), 1,
          64, "rtsoakd" },
        { "Trace", "LookBack", &conf_type_timespan,
          offsetof(struct daemon_config, trace_lookback_ns), 1 * MS, 10 * S, "20ms" },
        { "Trace", "BufferSize", &conf_type_size,
          offsetof(struct daemon_config, trace_buffer_bytes), 0, 1ULL << 30, "auto" },
        { "Trace", "RateLimitInterval", &conf_type_timespan,
          offsetof(struct daemon_config, trace_rate_interval_ns), 100 * MS, 86400 * S, "10s" },
        { "Trace", "RateLimitBurst", &conf_type_uint,
          offsetof(struct daemon_config, trace_rate_burst), 1, 16, "1" },
        { "Trace", "RawMax", &conf_type_size, offsetof(struct daemon_config, trace_raw_max), 4096,
          16ULL << 20, "64K" },
        { "Trace", "AllWakeups", &conf_type_bool, offsetof(struct daemon_config, trace_all_wakeups),
          0, 0, "no" },
        { "Trace", "Events", &conf_type_string, offsetof(struct daemon_config, trace_events), 1,
          4000, TRACE_DEFAULT_EVENTS },
        { "Inventory", "Check", &conf_type_timespan_s,
          offsetof(struct daemon_config, inventory_check_ns), 0, 86400 * S, "5min" },
        { "Schedule", "Rotation", &conf_type_string, offsetof(struct daemon_config, rotation), 1,
          4000, "idle 1h, cpu 1h, io 1h, net 1h, hackbench 1h, mixed 1h" },
};

/* The built-in scenarios; a [Scenario.NAME] section with the same name replaces one. */
static const struct {
        const char *name;
        const char *loads[SCENARIO_LOADS_MAX];
} builtin_scenarios[] = {
        { "idle", { NULL } },
        { "cpu", { "cpu --load 100%", NULL } },
        { "io", { "fileio", NULL } },
        { "net", { "network", NULL } },
        { "hackbench", { "hackbench", NULL } },
        /* OSADL's mid-range load: about 1 Mbit/s of network, 1 MB/s of disk I/O, 1 MB/s of
         * memory allocation and 30-50 % CPU. */
        { "mixed",
          { "cpu --load 40%", "network --rate 1Mbit", "fileio --rate 1M --file-size 8M",
            "memory --rate 1M", NULL } },
};

static void scenario_clear(struct scenario *sc) {
        for (size_t i = 0; i < sc->nloads; i++)
                loadgen_spec_done(&sc->loads[i]);
        free(sc->loads);
        sc->loads = NULL;
        sc->nloads = 0;
}

const struct scenario *scenario_find(const struct daemon_config *c, const char *name) {
        for (size_t i = 0; i < c->nscenarios; i++)
                if (strcmp(c->scenarios[i].name, name) == 0)
                        return &c->scenarios[i];
        return NULL;
}

static int scenario_get(struct daemon_config *c, const char *name, bool create,
                        struct scenario **ret) {
        struct scenario *sc = (struct scenario *) scenario_find(c, name);
        if (sc || !create) {
                *ret = sc;
                return 0;
        }
        struct scenario *a = realloc(c->scenarios, (c->nscenarios + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        c->scenarios = a;
        sc = &a[c->nscenarios];
        *sc = (struct scenario){ .name = strdup(name) };
        if (!sc->name)
                return -ENOMEM;
        c->nscenarios++;
        *ret = sc;
        return 0;
}

static int scenario_add_load(struct scenario *sc, const char *line,
                             char err[static CONF_ERROR_MAX]) {
        char msg[LOADGEN_ERROR_MAX];
        if (sc->nloads >= SCENARIO_LOADS_MAX) {
                snprintf(err, CONF_ERROR_MAX, "scenario %s has more than %d loads", sc->name,
                         SCENARIO_LOADS_MAX);
                return -E2BIG;
        }
        struct loadgen_spec *a = realloc(sc->loads, (sc->nloads + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        sc->loads = a;
        int r = loadgen_parse_line(line, &sc->loads[sc->nloads], msg);
        if (r < 0) {
                snprintf(err, CONF_ERROR_MAX, "%s", msg);
                return r;
        }
        sc->nloads++;
        return 0;
}

static int scenario_assign(void *obj, const char *where, const char *name, const char *key,
                           const char *value, char err[static CONF_ERROR_MAX]) {
        struct daemon_config *c = obj;
        struct scenario *sc;
        int r;

        char why[NAME_WHY_MAX];
        if (!name_ok(&summary_name_scenario, name, why)) {
                snprintf(err, CONF_ERROR_MAX, "invalid scenario name \"%s\": %s", name, why);
                return -EINVAL;
        }
        if (strcmp(key, "Load") != 0) {
                snprintf(err, CONF_ERROR_MAX, "unknown key in a scenario (the only key is Load=)");
                return -EINVAL;
        }
        r = scenario_get(c, name, true, &sc);
        if (r < 0) {
                snprintf(err, CONF_ERROR_MAX, "out of memory");
                return r;
        }
        /* The first Load= replaces a built-in definition; an empty Load= empties the list
         * (a scenario without loads is idle). */
        if (sc->builtin || !*value) {
                scenario_clear(sc);
                sc->builtin = false;
        }
        if (!*value)
                return 0;
        return scenario_add_load(sc, value, err);
}

static void scenario_print(const void *obj, FILE *f) {
        const struct daemon_config *c = obj;
        for (size_t i = 0; i < c->nscenarios; i++) {
                const struct scenario *sc = &c->scenarios[i];
                fprintf(f, "\n[Scenario.%s]\n", sc->name);
                if (sc->nloads == 0)
                        fprintf(f, "Load=\n");
                for (size_t k = 0; k < sc->nloads; k++)
                        fprintf(f, "Load=%s\n", sc->loads[k].text);
        }
}

const struct conf_table daemon_config_table = {
        .items = items,
        .n = ELEMENTSOF(items),
        .dynamic_prefix = "Scenario.",
        .dynamic_assign = scenario_assign,
        .dynamic_print = scenario_print,
};

static int builtin_defaults(struct daemon_config *c, char err[static CONF_ERROR_MAX]) {
        for (size_t i = 0; i < ELEMENTSOF(builtin_scenarios); i++) {
                struct scenario *sc;
                int r = scenario_get(c, builtin_scenarios[i].name, true, &sc);
                if (r < 0)
                        return r;
                for (size_t k = 0; builtin_scenarios[i].loads[k]; k++) {
                        r = scenario_add_load(sc, builtin_scenarios[i].loads[k], err);
                        if (r < 0)
                                return r;
                }
                sc->builtin = true;
        }
        return 0;
}

struct rotation_context {
        const struct daemon_config *c;
        const char *origin; /* where Rotation= was set */
        char *err;
};

static const struct scenario *rotation_lookup(void *userdata, const char *name) {
        const struct rotation_context *x = userdata;
        return scenario_find(x->c, name);
}

static void rotation_problem(void *userdata, enum rotation_problem what, const char *item,
                             const char *span, const char *reason) {
        const struct rotation_context *x = userdata;
        char list[512] = "", ispan[TIMESPAN_MAX_LEN];
        switch (what) {
        case ROTATION_SYNTAX:
                snprintf(x->err, CONF_ERROR_MAX,
                         "%s: [Schedule] Rotation=: expected \"SCENARIO DURATION\" items separated "
                         "by commas (e.g. \"idle 1h, mixed 2h\"), got \"%s\"",
                         x->origin, item);
                break;
        case ROTATION_UNKNOWN:
                for (size_t i = 0; i < x->c->nscenarios; i++)
                        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                                 i ? ", " : "", x->c->scenarios[i].name);
                snprintf(x->err, CONF_ERROR_MAX,
                         "%s: [Schedule] Rotation=: unknown scenario \"%s\" (defined: %s)",
                         x->origin, item, list);
                break;
        case ROTATION_BAD_SPAN:
                snprintf(x->err, CONF_ERROR_MAX, "%s: [Schedule] Rotation=: %s %s: %s", x->origin,
                         item, span, reason ?: "must be longer than 0");
                break;
        case ROTATION_NOT_WHOLE:
                snprintf(x->err, CONF_ERROR_MAX,
                         "%s: [Schedule] Rotation=: %s %s is not a whole number of intervals "
                         "([Storage] Interval=%s)",
                         x->origin, item, span, format_timespan(ispan, x->c->interval_ns));
                break;
        case ROTATION_TOO_MANY:
                snprintf(x->err, CONF_ERROR_MAX, "%s: [Schedule] Rotation=: more than %d steps",
                         x->origin, ROTATION_STEPS_MAX);
                break;
        case ROTATION_TOO_LONG: /* no limit asked for */
        case ROTATION_EMPTY:
                snprintf(x->err, CONF_ERROR_MAX,
                         "%s: [Schedule] Rotation=: no scenario given (use \"idle 1h\" for no "
                         "load)",
                         x->origin);
                break;
        }
}

/* "idle 1h, cpu 30min" into steps; every scenario must exist and every step must be a whole
 * number of intervals, so that each stored interval ran exactly one scenario. */
static int parse_rotation(struct daemon_config *c, const char *origin,
                          char err[static CONF_ERROR_MAX]) {
        struct rotation_context x = { c, origin, err };
        struct rotation_params p = {
                .interval_ns = c->interval_ns,
                .round_up = strcmp(origin, "default") == 0,
                .lookup = rotation_lookup,
                .problem = rotation_problem,
                .userdata = &x,
        };
        char span[TIMESPAN_MAX_LEN];
        int r = rotation_parse(c->rotation, &p, &c->steps, &c->nsteps, &c->cycle_ns);
        if (r < 0)
                return r;

        /* The effective configuration shows the rotation in one canonical spelling. */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < c->nsteps; i++)
                fprintf(f, "%s%s %s", i ? ", " : "", c->steps[i].scenario->name,
                        format_timespan(span, c->steps[i].duration_ns));
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        free(c->rotation);
        c->rotation = text;
        return 0;
}

const struct schedule_step *schedule_at(const struct daemon_config *c, int64_t real_ns,
                                        int64_t *ret_step_start_ns, int64_t *ret_step_end_ns) {
        return rotation_at(c->steps, c->nsteps, c->cycle_ns, real_ns, ret_step_start_ns,
                           ret_step_end_ns);
}

void daemon_config_free(struct daemon_config *c) {
        conf_free(&daemon_config_table, c);
        for (size_t i = 0; i < c->nscenarios; i++) {
                scenario_clear(&c->scenarios[i]);
                free(c->scenarios[i].name);
        }
        free(c->scenarios);
        free(c->steps);
        c->scenarios = NULL;
        c->steps = NULL;
        c->nscenarios = c->nsteps = 0;
}

/* [Trace] Events= is a list of "system:event" (a leading "?": only where the kernel has it);
 * [Trace] Instance= becomes a directory name under tracefs. */
static int check_trace(const struct daemon_config *c, char **origins,
                       char err[static CONF_ERROR_MAX]) {
        const char *w;
        size_t n = 0;
        static const struct name_rule instance = { "a tracefs instance's name",
                                                   NAME_LOWER | NAME_UPPER | NAME_DIGITS, "-_.", 1,
                                                   64 };
        char why[NAME_WHY_MAX];
        if (!name_ok(&instance, c->trace_instance, why)) {
                snprintf(err, CONF_ERROR_MAX, "%s: [Trace] Instance=%s: %s",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, trace_instance)),
                         c->trace_instance, why);
                return -EINVAL;
        }
        if (c->trace_instance[0] == '.') {
                snprintf(err, CONF_ERROR_MAX, "%s: [Trace] Instance=%s: must not start with '.'",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, trace_instance)),
                         c->trace_instance);
                return -EINVAL;
        }
        for (const char *p = c->trace_events; *p; p += strcspn(p, " ,\t")) {
                p += strspn(p, " ,\t");
                if (!*p)
                        break;
                w = p + (*p == '?');
                size_t len = strcspn(w, " ,\t"), sys = strcspn(w, ":");
                bool good = sys > 0 && sys + 1 < len;
                for (size_t i = 0; good && i < len; i++)
                        good = (islower((unsigned char) w[i]) || isdigit((unsigned char) w[i]) ||
                                w[i] == '_' || (i == sys && w[i] == ':'));
                if (!good) {
                        snprintf(err, CONF_ERROR_MAX,
                                 "%s: [Trace] Events=: \"%.*s\" is not SYSTEM:EVENT (e.g. "
                                 "sched:sched_switch, or ?irq_vectors:local_timer_entry for one "
                                 "only some kernels have)",
                                 conf_origin(&daemon_config_table, origins,
                                             offsetof(struct daemon_config, trace_events)),
                                 (int) strcspn(p, " ,\t"), p);
                        return -EINVAL;
                }
                n++;
        }
        if (n == 0) {
                snprintf(err, CONF_ERROR_MAX, "%s: [Trace] Events=: no event given",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, trace_events)));
                return -EINVAL;
        }
        return 0;
}

/* [Upload] GitURL= (https://, no blank or control character) and GitCommit= (40 lowercase hex
 * digits), as KCIDB takes them. */
static int check_git(const struct daemon_config *c, char **origins, char *err) {
        const char *u = c->upload_git_url, *k = c->upload_git_commit;
        bool url_ok = !*u || (strncmp(u, "https://", 8) == 0 && u[8] &&
                              strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-._~:/?#[]@!$&'()*+,;=%") == strlen(u));
        bool commit_ok = !*k || (strlen(k) == 40 && strspn(k, "0123456789abcdef") == 40);
        if (url_ok && commit_ok)
                return 0;
        char shown[600];
        snprintf(err, CONF_ERROR_MAX, "%s: [Upload] %s=%s: %s",
                 conf_origin(&daemon_config_table, origins,
                             url_ok ? offsetof(struct daemon_config, upload_git_commit)
                                    : offsetof(struct daemon_config, upload_git_url)),
                 url_ok ? "GitCommit" : "GitURL", text_escape(url_ok ? k : u, shown, sizeof(shown)),
                 url_ok ? "not a full commit hash (40 lowercase hex digits)"
                        : "not an https:// URL (without blanks)");
        return -EINVAL;
}

int daemon_config_check_release(const struct daemon_config *c, const char *kernel_release,
                                char err[static CONF_ERROR_MAX]) {
        char why[NAME_WHY_MAX], shown[4 * 65];
        if (!*c->upload_server || *c->upload_release ||
            name_ok(&summary_name_release, kernel_release, why))
                return 0;
        snprintf(err, CONF_ERROR_MAX,
                 "[Upload] Release= is not set and this kernel's release \"%s\" (uname -r) is not "
                 "a release name (%s): the farm would refuse every upload; set [Upload] Release=",
                 text_escape(kernel_release, shown, sizeof(shown)), why);
        return -EINVAL;
}

int daemon_config_load(struct daemon_config *c, const char *path, bool explicit_path,
                       char *const *sets, char ***ret_sources, char err[static CONF_ERROR_MAX]) {
        char *origins[ELEMENTSOF(items)] = {};
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        int r;

        *c = (struct daemon_config){};
        r = builtin_defaults(c, err);
        if (r < 0)
                goto out;
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
        char why[256], shown[512];
        if (*c->upload_server && !uploader_url_ok(c->upload_server, why, sizeof(why))) {
                snprintf(err, CONF_ERROR_MAX, "%s: [Upload] Server=%s: %s",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, upload_server)),
                         text_escape(c->upload_server, shown, sizeof(shown)), why);
                r = -EINVAL;
                goto out;
        }
        char name_why[NAME_WHY_MAX];
        if (*c->upload_release && !name_ok(&summary_name_release, c->upload_release, name_why)) {
                snprintf(err, CONF_ERROR_MAX, "%s: [Upload] Release=%s: %s",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, upload_release)),
                         c->upload_release, name_why);
                r = -EINVAL;
                goto out;
        }
        struct utsname u;
        if (uname(&u) == 0 && (r = daemon_config_check_release(c, u.release, err)) < 0)
                goto out;
        if ((r = check_git(c, origins, err)) < 0)
                goto out;
        r = check_trace(c, origins, err);
        if (r < 0)
                goto out;
        r = parse_rotation(c,
                           conf_origin(&daemon_config_table, origins,
                                       offsetof(struct daemon_config, rotation)),
                           err);
        if (r == -ENOMEM)
                snprintf(err, CONF_ERROR_MAX, "out of memory");
        /* The loads' user exists where the rotation runs loads (found here, with its file and
         * line, rather than at the first scenario). */
        char uerr[CONF_ERROR_MAX];
        if (r >= 0 && (r = daemon_config_check_load_user(c, c->load_user, uerr)) < 0)
                snprintf(err, CONF_ERROR_MAX, "%s: %s",
                         conf_origin(&daemon_config_table, origins,
                                     offsetof(struct daemon_config, load_user)),
                         uerr);
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

int daemon_config_check_load_user(const struct daemon_config *c, const char *user,
                                  char err[static CONF_ERROR_MAX]) {
        bool loads = false;
        for (size_t i = 0; i < c->nsteps && !loads; i++)
                loads = c->steps[i].scenario->nloads > 0;
        if (!loads || !user || !*user)
                return 0;
        int r = user_lookup(user, NULL, NULL);
        if (r == 0)
                return 0;
        int e = -r;
        if (e != ENOENT)
                snprintf(err, CONF_ERROR_MAX, "[Load] User=%s: cannot look the user up: %s", user,
                         strerror(e));
        else
                snprintf(err, CONF_ERROR_MAX,
                         "[Load] User=%s: no such user, and the rotation runs load generators as "
                         "it. The rtsoak package creates the user %s (systemd-sysusers); from a "
                         "source tree run systemd-sysusers with the full path of "
                         "systemd/rtsoak.sysusers, or set [Load] User=root to run the loads as "
                         "root",
                         user, DAEMON_LOAD_USER);
        return -ENOENT;
}
