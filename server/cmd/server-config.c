/* SPDX-License-Identifier: MIT */
/* rtsoak-server's configuration file: its table of [Server], [Access], [Verdict] and
 * [Notifications] keys with their bounds and defaults, the [Series.NAME] and [Notify.NAME]
 * sections, --set assignments, and what they set in the options. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-parser.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "notifier.h"
#include "ratelimit.h"
#include "server-config.h"
#include "timeutil.h"

/* The configuration file: the same settings as the options, which override it. */
struct server_config {
        char *listen, *db, *cert, *key;
        uint64_t threads, rate, burst, max_body, retention;
        uint64_t connections, per_address, head_timeout, request_timeout, idle_timeout;
        char *read_api, *read_dashboard, *read_metrics, *hosts;
        bool cache_warming;
        uint64_t period, max_gap, load_down_max, load_down_total, probe_down_max;
        uint64_t max_probe_interval, clock_tolerance, regression_min_diff, watch;
        bool regression;
        char *scenarios, *scenario_loads, *min_samples, *regression_tolerance, *inventory_fields;
        struct farm_rule series;     /* only its [Series.NAME] sections */
        struct notify_config notify; /* [Notifications] and [Notify.NAME] */
};

#define STR_(x) #x
#define STR(x) STR_(x)
static const struct conf_item config_items[] = {
        { "Server", "Listen", &conf_type_string, offsetof(struct server_config, listen), 1,
          FARM_ADDRESS_MAX, FARM_LISTEN_DEFAULT },
        { "Server", "Database", &conf_type_string, offsetof(struct server_config, db), 1, 4000,
          SERVER_DB_DEFAULT },
        { "Server", "Certificate", &conf_type_string, offsetof(struct server_config, cert), 0, 4000,
          "" },
        { "Server", "Key", &conf_type_string, offsetof(struct server_config, key), 0, 4000, "" },
        { "Server", "Threads", &conf_type_uint, offsetof(struct server_config, threads), 1, 256,
          STR(FARM_THREADS_DEFAULT) },
        { "Server", "Rate", &conf_type_uint, offsetof(struct server_config, rate), 1, 1000000,
          "10" },
        { "Server", "Burst", &conf_type_uint, offsetof(struct server_config, burst), 1, 1000000,
          STR(FARM_BURST_DEFAULT) },
        { "Server", "MaxBody", &conf_type_uint, offsetof(struct server_config, max_body), 1024,
          UINT64_C(1) << 30, "16777216" },
        { "Server", "CacheWarming", &conf_type_bool, offsetof(struct server_config, cache_warming),
          0, 0, "yes" },
        { "Server", "Connections", &conf_type_uint, offsetof(struct server_config, connections), 16,
          65536, STR(FARM_CONNECTIONS_DEFAULT) },
        { "Server", "ConnectionsPerAddress", &conf_type_uint,
          offsetof(struct server_config, per_address), 1, 65536,
          STR(FARM_CONNECTIONS_PER_ADDRESS_DEFAULT) },
        { "Server", "HeadTimeout", &conf_type_timespan,
          offsetof(struct server_config, head_timeout), 100 * NSEC_PER_MSEC, 3600 * NSEC_PER_SEC,
          FARM_HEAD_TIMEOUT_DEFAULT },
        { "Server", "RequestTimeout", &conf_type_timespan,
          offsetof(struct server_config, request_timeout), NSEC_PER_SEC, 86400 * NSEC_PER_SEC,
          FARM_REQUEST_TIMEOUT_DEFAULT },
        { "Server", "IdleTimeout", &conf_type_timespan_s,
          offsetof(struct server_config, idle_timeout), NSEC_PER_SEC, 3600 * NSEC_PER_SEC,
          STR(FARM_CONNECTION_TIMEOUT_S_DEFAULT) "s" },
        { "Access", "API", &conf_type_string, offsetof(struct server_config, read_api), 1, 16,
          "auto" },
        { "Access", "Dashboard", &conf_type_string, offsetof(struct server_config, read_dashboard),
          1, 16, "auto" },
        { "Access", "Metrics", &conf_type_string, offsetof(struct server_config, read_metrics), 1,
          16, "auto" },
        { "Access", "Hosts", &conf_type_string, offsetof(struct server_config, hosts), 1, 4000,
          "auto" },
        { "Server", "Retention", &conf_type_timespan, offsetof(struct server_config, retention), 0,
          UINT64_C(36500) * 86400 * NSEC_PER_SEC, "0" },
        { "Verdict", "Period", &conf_type_timespan, offsetof(struct server_config, period),
          NSEC_PER_SEC, 3650 * 86400 * NSEC_PER_SEC, FARM_RULE_PERIOD_DEFAULT },
        { "Verdict", "MaxGap", &conf_type_timespan, offsetof(struct server_config, max_gap),
          NSEC_PER_SEC, 365 * 86400 * NSEC_PER_SEC, FARM_RULE_MAX_GAP_DEFAULT },
        { "Verdict", "LoadDownMax", &conf_type_timespan,
          offsetof(struct server_config, load_down_max), 0, 365 * 86400 * NSEC_PER_SEC,
          FARM_RULE_LOAD_DOWN_MAX_DEFAULT },
        { "Verdict", "LoadDownTotal", &conf_type_timespan,
          offsetof(struct server_config, load_down_total), 0, 3650 * 86400 * NSEC_PER_SEC,
          FARM_RULE_LOAD_DOWN_TOTAL_DEFAULT },
        { "Verdict", "ProbeDownMax", &conf_type_timespan,
          offsetof(struct server_config, probe_down_max), 0, 365 * 86400 * NSEC_PER_SEC,
          FARM_RULE_PROBE_DOWN_MAX_DEFAULT },
        { "Verdict", "MaxProbeInterval", &conf_type_timespan,
          offsetof(struct server_config, max_probe_interval), NSEC_PER_USEC, NSEC_PER_SEC,
          FARM_RULE_MAX_PROBE_INTERVAL_DEFAULT },
        { "Verdict", "ClockTolerance", &conf_type_timespan,
          offsetof(struct server_config, clock_tolerance), 0, 86400 * NSEC_PER_SEC,
          FARM_RULE_CLOCK_TOLERANCE_DEFAULT },
        { "Verdict", "MinSamples", &conf_type_string, offsetof(struct server_config, min_samples),
          1, 31, FARM_RULE_MIN_SAMPLES_DEFAULT },
        { "Verdict", "Scenarios", &conf_type_string, offsetof(struct server_config, scenarios), 0,
          4000, FARM_RULE_SCENARIOS_DEFAULT },
        { "Verdict", "ScenarioLoads", &conf_type_string,
          offsetof(struct server_config, scenario_loads), 0, 4000, FARM_RULE_LOADS_DEFAULT },
        { "Verdict", "InventoryFields", &conf_type_string,
          offsetof(struct server_config, inventory_fields), 0, FARM_INVENTORY_GLOBS_MAX - 1,
          FARM_RULE_INVENTORY_FIELDS_DEFAULT },
        { "Verdict", "Regression", &conf_type_bool, offsetof(struct server_config, regression), 0,
          0, "yes" },
        { "Verdict", "RegressionTolerance", &conf_type_string,
          offsetof(struct server_config, regression_tolerance), 1, 31,
          FARM_RULE_REGRESSION_TOLERANCE_DEFAULT },
        { "Verdict", "RegressionMinDifference", &conf_type_timespan,
          offsetof(struct server_config, regression_min_diff), 0, NSEC_PER_SEC,
          FARM_RULE_REGRESSION_MIN_DIFF_DEFAULT },
        { "Verdict", "Watch", &conf_type_timespan, offsetof(struct server_config, watch), 0,
          86400 * NSEC_PER_SEC, FARM_RULE_WATCH_DEFAULT },
        { "Notifications", "Enabled", &conf_type_bool,
          offsetof(struct server_config, notify.enabled), 0, 0, "yes" },
        { "Notifications", "DashboardURL", &conf_type_string,
          offsetof(struct server_config, notify.dashboard_url), 0, 1000, "" },
        { "Notifications", "Check", &conf_type_timespan,
          offsetof(struct server_config, notify.check_ns), NSEC_PER_SEC / 10, 3600 * NSEC_PER_SEC,
          NOTIFY_CHECK_DEFAULT },
        { "Notifications", "GroupWait", &conf_type_timespan,
          offsetof(struct server_config, notify.group_wait_ns), 0, 3600 * NSEC_PER_SEC,
          NOTIFY_GROUP_WAIT_DEFAULT },
        { "Notifications", "GroupInterval", &conf_type_timespan,
          offsetof(struct server_config, notify.group_interval_ns), 0, 86400 * NSEC_PER_SEC,
          NOTIFY_GROUP_INTERVAL_DEFAULT },
        { "Notifications", "Keep", &conf_type_timespan,
          offsetof(struct server_config, notify.keep_ns), 0, 3650 * 86400 * NSEC_PER_SEC,
          NOTIFY_KEEP_DEFAULT },
};

/* [Series.NAME] sections: Releases= and Group=. */
static int series_assign(void *obj, const char *where, const char *name, const char *key,
                         const char *value, char err[static CONF_ERROR_MAX]) {
        struct server_config *sc = obj;
        return farm_rule_series_set(&sc->series, name, key, value, err, CONF_ERROR_MAX);
}

static void series_print(const void *obj, FILE *f) {
        const struct server_config *sc = obj;
        for (size_t i = 0; i < sc->series.nseries; i++)
                fprintf(f, "\n[Series.%s]\nReleases=%s\nGroup=%s\n", sc->series.series[i].name,
                        sc->series.series[i].globs, sc->series.series[i].group);
}

/* [Notify.NAME] sections: the channels of notifications. */
static int channel_assign(void *obj, const char *where, const char *name, const char *key,
                          const char *value, char err[static CONF_ERROR_MAX]) {
        struct server_config *sc = obj;
        return notify_channel_assign(&sc->notify, where, name, key, value, err);
}

static void channel_print(const void *obj, FILE *f) {
        const struct server_config *sc = obj;
        notify_channels_print(&sc->notify, f);
}

static const struct conf_dynamic config_dynamics[] = {
        { "Notify.", channel_assign, channel_print },
};

static const struct conf_table config_table = { .items = config_items,
                                                .n = ELEMENTSOF(config_items),
                                                .dynamic_prefix = "Series.",
                                                .dynamic_assign = series_assign,
                                                .dynamic_print = series_print,
                                                .dynamics = config_dynamics,
                                                .ndynamics = ELEMENTSOF(config_dynamics) };
_Static_assert(FARM_RATE_DEFAULT == 10.0 && FARM_MAX_BODY_DEFAULT == 16777216,
               "the configuration's defaults are the options' defaults");

/* The --set SECTION.KEY=VALUE assignments, in order, NULL-terminated (allocated); they apply
 * after the file, before the other options. */
static char **config_sets(int argc, char **argv) {
        char **sets = calloc((size_t) argc + 1, sizeof(char *));
        size_t n = 0;
        for (int i = 1; sets && i < argc; i++) {
                if (strcmp(argv[i], "--") == 0)
                        break;
                if (strcmp(argv[i], "--set") == 0 && i + 1 < argc)
                        sets[n++] = argv[++i];
                else if (strncmp(argv[i], "--set=", 6) == 0)
                        sets[n++] = argv[i] + 6;
        }
        return sets;
}

/* auto, open, token or staff: [Access] API=, Dashboard=, Metrics=. */
static int read_mode(const char *path, const char *key, const char *v, enum farm_read_mode *ret) {
        static const char *const names[] = { [FARM_READ_AUTO] = "auto",
                                             [FARM_READ_OPEN] = "open",
                                             [FARM_READ_TOKEN] = "token",
                                             [FARM_READ_STAFF] = "staff" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(v, names[i]) == 0) {
                        *ret = (enum farm_read_mode) i;
                        return 0;
                }
        log_error("%s: [Access] %s=%s: expected auto, open, token or staff", path, key, v);
        return -EINVAL;
}

/* Finds --config FILE (or --config=FILE) before the options are parsed: the options given
 * on the command line override what the file says. */
static const char *config_path(int argc, char **argv, bool *explicit) {
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0)
                        break;
                if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
                        *explicit = true;
                        return argv[i + 1];
                }
                if (strncmp(argv[i], "--config=", 9) == 0) {
                        *explicit = true;
                        return argv[i] + 9;
                }
        }
        *explicit = false;
        return SERVER_CONFIG_DEFAULT;
}

/* The connection limits of [Server] and the read access of [Access]. */
static int connection_settings(const struct server_config *sc, const char *path,
                               struct server_options *o) {
        o->limits = (struct farm_connlimit_config){ .max_total = (unsigned) sc->connections,
                                                    .max_per_address = (unsigned) sc->per_address,
                                                    .head_timeout_ns = sc->head_timeout,
                                                    .request_timeout_ns = sc->request_timeout };
        o->idle_timeout_s = (unsigned) (sc->idle_timeout / NSEC_PER_SEC);
        o->access.hosts = sc->hosts;
        if (read_mode(path, "API", sc->read_api, &o->access.api) < 0 ||
            read_mode(path, "Dashboard", sc->read_dashboard, &o->access.dashboard) < 0 ||
            read_mode(path, "Metrics", sc->read_metrics, &o->access.metrics) < 0)
                return -EINVAL;
        /* The Host list is checked here, with the file named, not first when the server
         * starts to listen. */
        char err[FARM_ACCESS_ERROR_MAX];
        farm_access *a = NULL;
        int r = farm_access_new(&o->access, &a, err);
        farm_access_free(a);
        if (r < 0) {
                log_error("%s: [Access] %s", path, err);
                return r;
        }
        return 0;
}

/* The verdict's rule from the [Verdict] and [Series.NAME] sections. */
static int rule_from_config(const struct server_config *sc, const char *path,
                            struct farm_rule *rule) {
        char err[FARM_RULE_ERROR_MAX];
        const char *key = NULL;
        farm_rule_default(rule);
        rule->period_ns = sc->period;
        rule->max_gap_ns = sc->max_gap;
        rule->load_down_max_ns = sc->load_down_max;
        rule->load_down_total_ns = sc->load_down_total;
        rule->probe_down_max_ns = sc->probe_down_max;
        rule->max_probe_interval_ns = sc->max_probe_interval;
        rule->clock_tolerance_ns = sc->clock_tolerance;
        rule->regression = sc->regression;
        rule->regression_min_diff_ns = sc->regression_min_diff;
        rule->watch_ns = sc->watch;
        rule->nseries = sc->series.nseries;
        memcpy(rule->series, sc->series.series, sizeof(rule->series));
        if (farm_rule_parse_scenarios(sc->scenarios, rule, err, sizeof(err)) < 0)
                key = "Scenarios";
        else if (farm_rule_parse_loads(sc->scenario_loads, rule, err, sizeof(err)) < 0)
                key = "ScenarioLoads";
        else if (farm_rule_parse_share(sc->min_samples, &rule->min_samples_pm, err, sizeof(err)) <
                 0)
                key = "MinSamples";
        else if (farm_rule_parse_percent(sc->regression_tolerance, &rule->regression_tolerance_pct,
                                         err, sizeof(err)) < 0)
                key = "RegressionTolerance";
        else if (farm_rule_parse_inventory_fields(sc->inventory_fields, rule, err, sizeof(err)) < 0)
                key = "InventoryFields";
        else if (rule->watch_ns == 0 && rule->regression) {
                key = "Watch";
                snprintf(err, sizeof(err),
                         "0 keeps no verdict log, and the regression check reads each release's "
                         "baseline from it: give it a period, or set Regression=no as well");
        }
        if (key) {
                log_error("%s: [Verdict] %s=: %s", path, key, err);
                return -EINVAL;
        }
        return 0;
}

/* What the [Server] section sets besides the connection limits. */
static void server_settings(const struct server_config *sc, struct server_options *o) {
        o->listen = sc->listen;
        o->db_path = sc->db;
        o->cert = *sc->cert ? sc->cert : NULL;
        o->key = *sc->key ? sc->key : NULL;
        o->threads = (unsigned) sc->threads;
        o->rate_per_s = (double) sc->rate;
        o->burst = (unsigned) sc->burst;
        o->max_body_bytes = (size_t) sc->max_body;
        o->retention_ns = sc->retention;
}

int server_config_load(int argc, char **argv, struct server_options *o, const char **ret_path,
                       const char **ret_db) {
        /* The options point into it for as long as the program runs. */
        static struct server_config sc;
        static char *origins[ELEMENTSOF(config_items)];
        char err[CONF_ERROR_MAX];
        bool explicit_config;
        const char *path = config_path(argc, argv, &explicit_config);
        _cleanup_free_ char **sets = config_sets(argc, argv);
        if (!sets)
                return log_oom(), EXIT_FAILURE;
        *ret_path = path;
        if (conf_load(&config_table, path, explicit_config, sets, &sc, origins, NULL, err) < 0) {
                log_error("%s", err);
                return EXIT_CONFIG;
        }
        if (connection_settings(&sc, path, o) < 0)
                return EXIT_CONFIG;
        server_settings(&sc, o);
        const char *warming = conf_origin(&config_table, origins,
                                          offsetof(struct server_config, cache_warming));
        if (strcmp(warming, "default") != 0)
                o->cache_warming_from = warming;
        if (rule_from_config(&sc, path, &o->rule) < 0)
                return EXIT_CONFIG;
        if (notify_config_check(&sc.notify,
                                conf_origin(&config_table, origins,
                                            offsetof(struct server_config, notify.dashboard_url)),
                                err) < 0) {
                log_error("%s", err);
                return EXIT_CONFIG;
        }
        o->notify = &sc.notify;
        *ret_db = sc.db;
        return 0;
}
