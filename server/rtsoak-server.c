/* SPDX-License-Identifier: MIT */
/* rtsoak-server: the farm server.  Serves the upload and query API; its commands enrol, revoke
 * and set up machines, judge releases and give waivers in its farm database. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "conf-parser.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "access.h"
#include "auth.h"
#include "machines.h"
#include "token.h"
#include "notifications.h"
#include "copy.h"
#include "db.h"
#include "encode-verdict.h"
#include "hist-cache.h"
#include "http.h"
#include "notifier.h"
#include "query.h"
#include "ratelimit.h"
#include "retention.h"
#include "verdict-log.h"
#include "verdict.h"
#include "waivers.h"
#include "sql.h"
#include "text-safe.h"
#include "timeutil.h"

#define DB_DEFAULT "/var/lib/rtsoak-server/farm.db"
#define CONFIG_DEFAULT "/etc/rtsoak/rtsoak-server.conf"

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
        char *scenarios, *scenario_loads, *min_samples, *regression_tolerance;
        struct farm_rule series;     /* only its [Series.NAME] sections */
        struct notify_config notify; /* [Notifications] and [Notify.NAME] */
};

#define STR_(x) #x
#define STR(x) STR_(x)
static const struct conf_item config_items[] = {
        { "Server", "Listen", &conf_type_string, offsetof(struct server_config, listen), 1,
          FARM_ADDRESS_MAX, FARM_LISTEN_DEFAULT },
        { "Server", "Database", &conf_type_string, offsetof(struct server_config, db), 1, 4000,
          DB_DEFAULT },
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
        return CONFIG_DEFAULT;
}
#define PEM_MAX_BYTES (1 << 20)

struct options {
        const char *db_path;
        const char *listen;
        const char *cert, *key;
        unsigned threads;
        double rate_per_s;
        unsigned burst;
        size_t max_body_bytes;
        bool cache_warming;
        struct farm_connlimit_config limits;
        unsigned idle_timeout_s;
        struct farm_access_config access;
        uint64_t retention_ns;              /* [Server] Retention=: 0 keeps every interval */
        struct farm_settings_change change; /* --bound, --gating, --groups, --label, --unlabel */
        const char *reason, *by, *at, *known_at, *from, *to, *before;
        bool json;
        unsigned chunk;   /* migrate: intervals per transaction */
        uint64_t given;   /* the options given, as OPT() bits */
        bool usage_error; /* one of them was wrong (already logged) */
        struct farm_rule rule;
        struct notify_config *notify;
        struct cli_notify_filter notify_filter; /* notifications: --state, --kind ... */
};

static void help(void) {
        printf("Usage: rtsoak-server [OPTIONS]                    serve the farm API\n"
               "       rtsoak-server [--db PATH] COMMAND ...\n"
               "\n"
               "Commands:\n"
               "  enroll MACHINE_ID [--bound SPAN] [--gating yes|no] [--groups A,B] "
               "[--label K=V]...\n"
               "                       [--reason TEXT] [--by NAME]   enrol (or re-key) a machine, "
               "print its token\n"
               "  revoke MACHINE_ID [--reason TEXT] [--by NAME]\n"
               "  machine set MACHINE_ID [--bound SPAN] [--gating yes|no] [--groups A,B]\n"
               "                       [--label K=V]... [--unlabel K]... --reason TEXT [--by "
               "NAME]\n"
               "  machine show MACHINE_ID [--json]                  its settings and their "
               "history\n"
               "  maintenance add MACHINE_ID --from TIME --to TIME --reason TEXT [--by NAME]\n"
               "  maintenance list [MACHINE_ID] [--json]\n"
               "  maintenance cancel WINDOW_ID --reason TEXT [--by NAME]\n"
               "  verdict RELEASE [--at TIME] [--known-at TIME]\n"
               "  waive RELEASE PROBLEM_ID --reason TEXT [--by NAME]\n"
               "  unwaive WAIVER_ID [--reason TEXT] [--by NAME]\n"
               "  waivers [RELEASE]\n"
               "  admin-token NAME | admin-revoke NAME\n"
               "  read-token NAME | read-revoke NAME\n"
               "  check\n"
               "  notifications [--state pending|sent|failed] [--kind KIND] [--machine ID]\n"
               "                [--release RELEASE] [--limit N] [--json]   what was told, "
               "where\n"
               "  notifications retry DELIVERY_ID|failed             send failed ones again\n"
               "  notifications test CHANNEL                         queue a test "
               "notification\n"
               "  migrate --from PATH|URI --to URI [--chunk N]       copy the farm into another "
               "store\n"
               "                       (postgresql://...) and compare every row\n"
               "  prune --before TIME  drop the intervals of the months before TIME's "
               "(Retention= does it hourly)\n"
               "\n"
               "  --config FILE        configuration file (default %s)\n"
               "  --set SECTION.KEY=VALUE  a setting of the configuration file (repeatable)\n"
               "  --db PATH            farm database (default %s)\n"
               "  --listen ADDR:PORT   address to serve on (default %s; [::1]:PORT for IPv6)\n"
               "  --cert FILE          PEM certificate: serve HTTPS (with --key)\n"
               "  --key FILE           PEM private key of the certificate\n"
               "  --threads N          worker threads (default %d)\n"
               "  --rate N             uploads per second per machine (default %g)\n"
               "  --burst N            uploads a machine may send at once (default %d)\n"
               "  --max-body BYTES     largest upload body (default %zu)\n"
               "  --cache-warming yes|no  merge past days' histograms in the background "
               "(default yes)\n"
               "  --bound SPAN         the machine's latency bound, above 0 and at most 1s "
               "(default 100us;\n"
               "                       --threshold is the same)\n"
               "  --gating yes|no      whether the machine gates releases (default yes)\n"
               "  --groups A,B         its gating groups (default \"default\"), replacing the old "
               "ones\n"
               "  --label KEY=VALUE    sets a label; --unlabel KEY removes one\n"
               "  --from TIME, --to TIME  a maintenance window (\"+2h\" or \"in 2h\": from now)\n"
               "  --at TIME            verdict: about TIME (RFC 3339, Unix ns, \"2d ago\")\n"
               "  --known-at TIME      verdict: as the server knew it at TIME\n"
               "  --reason TEXT        why (kept in the audit trail)\n"
               "  --by NAME            who (default: $SUDO_USER, $USER)\n"
               "  --json               machine show, maintenance list: JSON\n"
               "  --chunk N            migrate: intervals per transaction (default 10000)\n"
               "  -h, --help           show this help\n"
               "  --version            show the version\n"
               "\n"
               "enroll, admin-token and read-token print the new token once on stdout; only its "
               "hash is "
               "kept.\nThe verdict's rule is set in the [Verdict] section of the configuration "
               "file.\nExit status of the commands: 0 done, 1 failed, 64 usage error.\n",
               CONFIG_DEFAULT, DB_DEFAULT, FARM_LISTEN_DEFAULT, FARM_THREADS_DEFAULT,
               FARM_RATE_DEFAULT, FARM_BURST_DEFAULT, FARM_MAX_BODY_DEFAULT);
}

static int parse_uint(const char *opt, const char *s, unsigned long long min,
                      unsigned long long max, unsigned long long *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
                log_error("Invalid %s '%s': expected an integer from %llu to %llu", opt, s, min,
                          max);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

enum {
        ARG_CONFIG = 0x100,
        ARG_SET,
        ARG_DB,
        ARG_LISTEN,
        ARG_CERT,
        ARG_KEY,
        ARG_THREADS,
        ARG_RATE,
        ARG_BURST,
        ARG_MAX_BODY,
        ARG_CACHE_WARMING,
        ARG_BOUND,
        ARG_GATING,
        ARG_GROUPS,
        ARG_LABEL,
        ARG_UNLABEL,
        ARG_REASON,
        ARG_BY,
        ARG_AT,
        ARG_KNOWN_AT,
        ARG_FROM,
        ARG_TO,
        ARG_JSON,
        ARG_STATE,
        ARG_KIND,
        ARG_MACHINE,
        ARG_RELEASE,
        ARG_LIMIT,
        ARG_CHUNK,
        ARG_BEFORE,
        ARG_VERSION,
};
#define OPT(arg) (UINT64_C(1) << ((arg) -ARG_CONFIG))
#define SERVE_OPTS                                                                           \
        (OPT(ARG_LISTEN) | OPT(ARG_CERT) | OPT(ARG_KEY) | OPT(ARG_THREADS) | OPT(ARG_RATE) | \
         OPT(ARG_BURST) | OPT(ARG_MAX_BODY) | OPT(ARG_CACHE_WARMING))
#define SETTINGS_OPTS (OPT(ARG_BOUND) | OPT(ARG_GATING) | OPT(ARG_GROUPS) | OPT(ARG_LABEL))
#define WHY_OPTS (OPT(ARG_REASON) | OPT(ARG_BY))

static const struct option options[] = {
        { "config", required_argument, NULL, ARG_CONFIG },
        { "set", required_argument, NULL, ARG_SET },
        { "db", required_argument, NULL, ARG_DB },
        { "listen", required_argument, NULL, ARG_LISTEN },
        { "cert", required_argument, NULL, ARG_CERT },
        { "key", required_argument, NULL, ARG_KEY },
        { "threads", required_argument, NULL, ARG_THREADS },
        { "rate", required_argument, NULL, ARG_RATE },
        { "burst", required_argument, NULL, ARG_BURST },
        { "max-body", required_argument, NULL, ARG_MAX_BODY },
        { "cache-warming", required_argument, NULL, ARG_CACHE_WARMING },
        { "bound", required_argument, NULL, ARG_BOUND },
        { "threshold", required_argument, NULL, ARG_BOUND },
        { "gating", required_argument, NULL, ARG_GATING },
        { "groups", required_argument, NULL, ARG_GROUPS },
        { "label", required_argument, NULL, ARG_LABEL },
        { "unlabel", required_argument, NULL, ARG_UNLABEL },
        { "reason", required_argument, NULL, ARG_REASON },
        { "by", required_argument, NULL, ARG_BY },
        { "at", required_argument, NULL, ARG_AT },
        { "known-at", required_argument, NULL, ARG_KNOWN_AT },
        { "from", required_argument, NULL, ARG_FROM },
        { "to", required_argument, NULL, ARG_TO },
        { "json", no_argument, NULL, ARG_JSON },
        { "state", required_argument, NULL, ARG_STATE },
        { "kind", required_argument, NULL, ARG_KIND },
        { "machine", required_argument, NULL, ARG_MACHINE },
        { "release", required_argument, NULL, ARG_RELEASE },
        { "limit", required_argument, NULL, ARG_LIMIT },
        { "chunk", required_argument, NULL, ARG_CHUNK },
        { "before", required_argument, NULL, ARG_BEFORE },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        {},
};

/* The name of an option (of OPT() bit arg), for messages. */
static const char *option_name(int arg) {
        for (const struct option *p = options; p->name; p++)
                if (p->val == arg)
                        return p->name;
        return "?";
}

static int parse_yes_no(const char *opt, const char *s, bool *ret) {
        if (strcmp(s, "yes") != 0 && strcmp(s, "no") != 0) {
                log_error("Invalid %s '%s': expected yes or no", opt, s);
                return -EINVAL;
        }
        *ret = strcmp(s, "yes") == 0;
        return 0;
}

/* The options of a command: its settings, why and who. */
static int parse_command_option(int c, const char *name, struct options *o) {
        char err[FARM_ERROR_MAX], opt[64];
        const char *reason = NULL;
        bool yes;
        uint64_t ns;
        int r = 0;

        snprintf(opt, sizeof(opt), "--%s", name);
        switch (c) {
        case ARG_BOUND:
                if (parse_timespan(optarg, &ns, &reason) < 0 || ns > (uint64_t) INT64_MAX ||
                    farm_check_bound(opt, (int64_t) ns, err) < 0) {
                        log_error("Invalid %s '%s': %s", opt, optarg,
                                  reason ?: "a latency bound is more than 0 and at most 1s");
                        return -EINVAL;
                }
                o->change.bound_ns = (int64_t) ns;
                return 0;
        case ARG_GATING:
                if (parse_yes_no(opt, optarg, &yes) < 0)
                        return -EINVAL;
                o->change.gating = yes;
                return 0;
        case ARG_GROUPS:
                r = farm_change_groups(&o->change, opt, optarg, err);
                break;
        case ARG_LABEL:
                r = farm_change_label_arg(&o->change, opt, optarg, err);
                break;
        case ARG_UNLABEL:
                r = farm_change_label(&o->change, opt, optarg, NULL, err);
                break;
        case ARG_REASON:
                o->reason = optarg;
                r = farm_check_text(opt, optarg, FARM_REASON_MAX, err);
                break;
        case ARG_BY:
                o->by = optarg;
                r = farm_check_who(opt, optarg, err);
                break;
        case ARG_AT:
                o->at = optarg;
                break;
        case ARG_KNOWN_AT:
                o->known_at = optarg;
                break;
        case ARG_FROM:
                o->from = optarg;
                break;
        case ARG_TO:
                o->to = optarg;
                break;
        case ARG_JSON:
                o->json = true;
                break;
        case ARG_STATE:
                o->notify_filter.state = optarg;
                break;
        case ARG_KIND:
                o->notify_filter.kind = optarg;
                break;
        case ARG_MACHINE:
                o->notify_filter.machine = optarg;
                break;
        case ARG_RELEASE:
                o->notify_filter.release = optarg;
                break;
        case ARG_LIMIT:
                o->notify_filter.limit = optarg;
                break;
        case ARG_BEFORE:
                o->before = optarg;
                break;
        case ARG_CHUNK: {
                unsigned long long v;
                if (parse_uint(opt, optarg, 1, 1000000, &v) < 0)
                        return -EINVAL;
                o->chunk = (unsigned) v;
                break;
        }
        }
        if (r < 0)
                log_error("%s", err);
        return r;
}

/* The options of serving. */
static int parse_serve_option(int c, struct options *o) {
        unsigned long long v;
        char *end;
        switch (c) {
        case ARG_LISTEN:
                o->listen = optarg;
                return 0;
        case ARG_CERT:
                o->cert = optarg;
                return 0;
        case ARG_KEY:
                o->key = optarg;
                return 0;
        case ARG_THREADS:
                if (parse_uint("--threads", optarg, 1, 256, &v) < 0)
                        return -EINVAL;
                o->threads = (unsigned) v;
                return 0;
        case ARG_RATE:
                errno = 0;
                o->rate_per_s = strtod(optarg, &end);
                if (errno || end == optarg || *end || !(o->rate_per_s > 0) || o->rate_per_s > 1e6) {
                        log_error("Invalid --rate '%s': expected a number of requests per second "
                                  "above 0",
                                  optarg);
                        return -EINVAL;
                }
                return 0;
        case ARG_BURST:
                if (parse_uint("--burst", optarg, 1, 1000000, &v) < 0)
                        return -EINVAL;
                o->burst = (unsigned) v;
                return 0;
        case ARG_MAX_BODY:
                if (parse_uint("--max-body", optarg, 1024, (unsigned long long) 1 << 30, &v) < 0)
                        return -EINVAL;
                o->max_body_bytes = (size_t) v;
                return 0;
        case ARG_CACHE_WARMING:
                return parse_yes_no("--cache-warming", optarg, &o->cache_warming);
        }
        return 0;
}

/* 0 to go on, 1 when done (help, version).  A wrong option is logged and marks
 * o->usage_error; the parsing goes on, so that the command (and with it the exit status of
 * the error) is known. */
static int parse_options(int argc, char **argv, struct options *o) {
        int c, index;

        while ((c = getopt_long(argc, argv, ":h", options, &index)) >= 0) {
                if (c >= ARG_CONFIG && c < ARG_VERSION)
                        o->given |= OPT(c);
                if (c == 'h') {
                        help();
                        return 1;
                }
                if (c == ARG_VERSION) {
                        printf("rtsoak-server %s\n", PROJECT_VERSION);
                        return 1;
                }
                if (c == ARG_DB)
                        o->db_path = optarg;
                else if (c >= ARG_BOUND && c < ARG_VERSION) {
                        if (parse_command_option(c, options[index].name, o) < 0)
                                o->usage_error = true;
                } else if (c > ARG_DB && c < ARG_BOUND) {
                        if (parse_serve_option(c, o) < 0)
                                o->usage_error = true;
                } else if (c == '?' || c == ':') {
                        log_getopt_error(c, argv);
                        o->usage_error = true;
                } else if (c != ARG_CONFIG && c != ARG_SET)
                        o->usage_error = true;
        }
        return 0;
}

static int read_pem(const char *what, const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
        if (fstat(fd, &st) < 0)
                return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
        if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > PEM_MAX_BYTES)
                return log_error_errno(EINVAL,
                                       "Cannot use the %s '%s': not a PEM file (empty, too "
                                       "large or not a regular file)",
                                       what, path);
        if (strcmp(what, "private key") == 0 && (st.st_mode & S_IROTH))
                log_warning("The private key '%s' is readable by every user of this machine "
                            "(chmod 600 %s, or pass it with LoadCredential=)",
                            path, path);
        _cleanup_free_ char *buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return log_oom();
        size_t got = 0;
        while (got < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t) st.st_size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        buf[got] = '\0';
        if (!strstr(buf, "-----BEGIN "))
                return log_error_errno(EINVAL, "The %s '%s' is not in PEM format", what, path);
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Every connection is a descriptor: the soft limit (1024 by default, also under systemd) is
 * raised towards the hard one so that the connection limit, not EMFILE, is what bites. */
static void raise_fd_limit(unsigned connections) {
        struct rlimit rl;
        rlim_t want = (rlim_t) connections + 256;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
                return;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : MIN(want, rl.rlim_max);
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
                log_warning("Only %llu file descriptors: fewer than the %u connections allowed "
                            "(LimitNOFILE= raises it)",
                            (unsigned long long) rl.rlim_cur, connections);
}

/* The certificate and key that systemd's LoadCredential= passed (rtsoak-server.service), when
 * neither Certificate= nor Key= is set: both or neither. */
static int credentials(char **ret_cert, char **ret_key) {
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        if (!dir || !*dir)
                return 0;
        _cleanup_free_ char *cert = NULL, *key = NULL;
        if (asprintf(&cert, "%s/rtsoak-server.crt", dir) < 0 ||
            asprintf(&key, "%s/rtsoak-server.key", dir) < 0)
                return log_oom();
        bool has_cert = access(cert, F_OK) == 0, has_key = access(key, F_OK) == 0;
        if (has_cert != has_key) {
                log_error("The credentials hold %s but not %s: HTTPS needs both",
                          has_cert ? cert : key, has_cert ? key : cert);
                return -EINVAL;
        }
        if (has_cert) {
                *ret_cert = TAKE_PTR(cert);
                *ret_key = TAKE_PTR(key);
        }
        return 0;
}

/* What serve() needs before it opens anything: the TLS pair (options or systemd credentials),
 * the notification secrets, libcurl and a retention the verdict can live with.  0, or the exit
 * status to return. */
static int serve_prepare(const struct options *o, struct options *with_cred, char **cred_cert,
                         char **cred_key, char **cert, char **key) {
        if (!o->cert && !o->key && credentials(cred_cert, cred_key) < 0)
                return EXIT_CONFIG;
        if (*cred_cert) {
                *with_cred = *o;
                with_cred->cert = *cred_cert;
                with_cred->key = *cred_key;
                o = with_cred;
        }
        if (!!o->cert != !!o->key) {
                log_error("--cert and --key go together: HTTPS needs both");
                return EXIT_CONFIG;
        }
        if (o->cert && (read_pem("certificate", o->cert, cert) < 0 ||
                        read_pem("private key", o->key, key) < 0))
                return EXIT_CONFIG;
        char cerr[CONF_ERROR_MAX];
        if (notify_config_load_secrets(o->notify, cerr) < 0) {
                log_error("%s", cerr);
                return EXIT_CONFIG;
        }
        for (size_t i = 0; i < o->notify->nchannels; i++)
                if (o->notify->channels[i].secret_shared)
                        log_warning("%s: [Notify.%s] SecretFile=%s can be read by others than "
                                    "its owner (chmod 600 it)",
                                    o->notify->channels[i].secret_where,
                                    o->notify->channels[i].name,
                                    o->notify->channels[i].secret_file);
        /* Retention keeps what the verdict's period needs, and a month more. */
        if (o->retention_ns && o->retention_ns < o->rule.period_ns + 31 * 86400 * NSEC_PER_SEC) {
                char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
                log_error("[Server] Retention=%s is shorter than the verdict's Period=%s and a "
                          "month: the verdict needs those intervals",
                          format_timespan(a, o->retention_ns),
                          format_timespan(b, o->rule.period_ns));
                return EXIT_CONFIG;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                log_error("Cannot initialise libcurl (for the webhooks)");
                return EXIT_FAILURE;
        }
        return 0;
}

/* Opens the farm database and records the rule in force.  0, or the exit status. */
static int serve_open_db(const struct options *o, farm_db **ret) {
        char err[FARM_ERROR_MAX];
        farm_db *db;
        int r = farm_db_open_with(o->db_path, o->threads, &db, err);
        if (r < 0) {
                log_error_errno(r, "Cannot open the farm database: %s", err);
                return EXIT_FAILURE;
        }
        /* The rule in force from now on: a verdict about a moment judges with the rule of
         * that moment. */
        r = farm_rule_record(db, &o->rule, now_ns(CLOCK_REALTIME), err);
        if (r < 0) {
                log_error_errno(r, "Cannot record the verdict's rule: %s", err);
                farm_db_close(db);
                return EXIT_FAILURE;
        }
        int64_t size;
        if (farm_db_check_skipped(db, &size))
                log_info("The farm database is %.1f GiB: its integrity check at start is skipped "
                         "(it reads the whole file); run \"rtsoak-server check\" when convenient",
                         (double) size / (1 << 30));
        *ret = db;
        return 0;
}

/* The listening socket.  0, or the exit status. */
static int serve_listen(const struct options *o, int *fd, char bound[static FARM_ADDRESS_MAX]) {
        int r = farm_listen(o->listen, fd, bound);
        if (r == -EINVAL) {
                log_error("Invalid --listen '%s': expected ADDR:PORT with a numeric address "
                          "(127.0.0.1:8470, [::1]:8470)",
                          o->listen);
                return EXIT_CONFIG;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m%s", o->listen,
                                r == -EADDRINUSE ? " (is another server running on this port?)"
                                                 : "");
                return EXIT_UNAVAILABLE; /* address in use or not ours: cannot run here */
        }
        return 0;
}

/* What runs beside the HTTP server: the histogram cache warmer, notifications, the verdict
 * log and retention.  Each that cannot start is logged and left out. */
struct background {
        struct farm_warmer *warmer;
        struct farm_notifier *notifier;
        struct farm_watcher *watcher;
        struct farm_pruner *pruner;
};

static void background_start(const struct options *o, farm_db *db, const char *bound, bool https,
                             int64_t listening_ns, struct background *b) {
        int r;
        *b = (struct background){};
        if (o->cache_warming && (r = farm_warmer_start(db, &b->warmer)) < 0)
                log_warning_errno(r, "Cannot merge histograms in the background, the queries "
                                     "will: %m");
        char link_host[FARM_ACCESS_LINK_HOST_MAX];
        bool named = farm_access_link_host(&o->access, link_host, sizeof(link_host)) >= 0;
        if (o->notify->enabled &&
            (r = farm_notifier_start(db, &o->rule, o->notify, bound, named ? link_host : NULL,
                                     https, listening_ns, &b->notifier)) < 0)
                log_warning_errno(r, "Cannot start the notifications: %m");
        if ((r = farm_watcher_start(db, &o->rule, farm_notifier_hooks(b->notifier), &b->watcher)) <
            0)
                log_warning_errno(r, "Cannot keep the verdict log: %m");
        if ((r = farm_pruner_start(db, &o->rule, o->retention_ns, &b->pruner)) < 0)
                log_warning_errno(r, "Cannot drop old intervals (Retention=): %m");
}

static void background_stop(struct background *b) {
        farm_pruner_stop(b->pruner);
        farm_watcher_stop(b->watcher);
        farm_notifier_stop(b->notifier);
        farm_warmer_stop(b->warmer);
        *b = (struct background){};
}

/* However long a request or a background pass still runs after a SIGTERM (the reads are
 * interrupted, farm_db_stop()), the process ends within STOP_DEADLINE_S: what is stored is
 * stored transactionally, and a client whose request is cut retries. */
#define STOP_DEADLINE_S 5

static void *stop_deadline_main(void *arg) {
        (void) arg;
        struct timespec t = { .tv_sec = STOP_DEADLINE_S };
        while (nanosleep(&t, &t) < 0 && errno == EINTR)
                ;
        log_error("Still stopping after %d s: exiting now", STOP_DEADLINE_S);
        _exit(EXIT_FAILURE);
}

static void stop_deadline_start(void) {
        pthread_t t;
        int r = -pthread_create(&t, NULL, stop_deadline_main, NULL);
        if (r < 0)
                log_warning_errno(r, "Cannot bound the time stopping takes: %m");
        else
                pthread_detach(t);
}

static int serve(const struct options *o) {
        _cleanup_free_ char *cert = NULL, *key = NULL, *cred_cert = NULL, *cred_key = NULL;
        char bound[FARM_ADDRESS_MAX];
        struct options with_cred;
        farm_http *http = NULL;
        farm_db *db = NULL;
        int fd = -1, r, sig;

        if ((r = serve_prepare(o, &with_cred, &cred_cert, &cred_key, &cert, &key)) != 0)
                return r;
        if (cred_cert)
                o = &with_cred;
        if ((r = serve_open_db(o, &db)) != 0) {
                curl_global_cleanup();
                return r;
        }
        if ((r = serve_listen(o, &fd, bound)) != 0) {
                farm_db_close(db);
                curl_global_cleanup();
                return r;
        }
        raise_fd_limit(o->limits.max_total);
        struct farm_access_config ac = o->access;
        ac.listen = bound;

        /* The worker threads inherit this mask, so the signals reach only sigwait() below. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct farm_http_config hc = {
                .listen_fd = fd,
                .tls_cert_pem = cert,
                .tls_key_pem = key,
                .threads = o->threads,
                .limits = o->limits,
                .access = ac,
                .connection_timeout_s = o->idle_timeout_s,
                .max_body_bytes = o->max_body_bytes,
                .rate_per_s = o->rate_per_s,
                .burst = o->burst,
                .rule = &o->rule,
        };
        int64_t listening_ns = now_ns(CLOCK_REALTIME);
        if (farm_http_start(&hc, db, &http) < 0) {
                close(fd);
                farm_db_close(db);
                curl_global_cleanup();
                return EXIT_FAILURE;
        }
        char shown[512];
        sql_target_shown(o->db_path, shown, sizeof(shown));
        log_info("Listening on %s://%s (database %s, %u threads)", cert ? "https" : "http", bound,
                 shown, o->threads);
        struct background bg;
        background_start(o, db, bound, cert != NULL, listening_ns, &bg);

        while (sigwait(&mask, &sig) != 0)
                ;
        log_info("Stopping on SIG%s", sigabbrev_np(sig) ?: "?");
        stop_deadline_start();
        farm_db_stop(db);
        farm_http_stop(http);
        background_stop(&bg);
        curl_global_cleanup();
        uint64_t commits, uploads;
        farm_db_commit_stats(db, &commits, &uploads);
        log_info("Stored %llu uploads in %llu commits", (unsigned long long) uploads,
                 (unsigned long long) commits);
        farm_db_close(db);
        return EXIT_SUCCESS;
}

/* Who does a staff action from the command line: --by, or the login behind sudo. */
static const char *who(const struct options *o) {
        const char *w = o->by ?: getenv("SUDO_USER");
        if (!w || !*w)
                w = getenv("USER");
        return w && *w ? w : "root";
}

static int verdict_cmd(const struct options *o, const char *release) {
        char err[FARM_ERROR_MAX], perr[FARM_PARAM_ERROR_MAX];
        struct farm_question q;
        farm_db *db = NULL;
        _cleanup_verdict_ struct farm_verdict *v = NULL;

        if (farm_question_parse(release, o->at, o->known_at, now_ns(CLOCK_REALTIME), &q, perr) <
            0) {
                log_error("Invalid --%s", perr);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_verdict_ask(db, &o->rule, &q, &v, err);
        farm_db_close(db);
        json_t *j = r >= 0 ? farm_verdict_to_json(v) : NULL;
        if (r >= 0 && !j)
                r = -ENOMEM;
        if (r < 0) {
                log_error_errno(r, "Cannot judge %s: %s", release, err);
                return r == -ENOENT ? 3 : EXIT_FAILURE;
        }
        r = v->status == FARM_VERDICT_QUALIFIED ? 0 : v->status == FARM_VERDICT_FAILED ? 1 : 2;
        if (cli_print_json(j) != EXIT_SUCCESS)
                r = EXIT_FAILURE;
        json_decref(j);
        return r;
}

static int waive_cmd(const struct options *o, const char *release, const char *problem) {
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        int64_t id;

        char why[TEXT_WHY_MAX];
        if (!o->reason || !*o->reason) {
                log_error("waive needs --reason TEXT: a waiver without a reason is not accepted");
                return EXIT_USAGE;
        }
        if (!text_ok(o->reason, false, why) || !text_ok(who(o), false, why)) {
                log_error("Invalid --reason or --by: %s (one line of plain text)", why);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waive(db, &o->rule, release, problem, o->reason, who(o),
                           now_ns(CLOCK_REALTIME), &id, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot waive: %s", err);
                return r == -EINVAL ? EXIT_USAGE : EXIT_FAILURE;
        }
        printf("%lld\n", (long long) id);
        log_info("Waiver %lld by %s: %s of %s", (long long) id, who(o), problem, release);
        return EXIT_SUCCESS;
}

static int unwaive_cmd(const struct options *o, const char *id_text) {
        char err[FARM_ERROR_MAX], *end;
        farm_db *db = NULL;

        errno = 0;
        long long id = strtoll(id_text, &end, 10);
        if (errno || *end || id <= 0) {
                log_error("Invalid waiver id '%s': expected the number that waive printed",
                          id_text);
                return EXIT_USAGE;
        }
        char why[TEXT_WHY_MAX];
        if (!text_ok(o->reason ?: "", false, why) || !text_ok(who(o), false, why)) {
                log_error("Invalid --reason or --by: %s (one line of plain text)", why);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_unwaive(db, id, who(o), o->reason ?: "", now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot withdraw waiver %lld: %s", id, err);
                return EXIT_FAILURE;
        }
        log_info("Withdrew waiver %lld", id);
        return EXIT_SUCCESS;
}

static int waivers_cmd(const struct options *o, const char *release) {
        char err[FARM_ERROR_MAX];
        struct farm_page page = { .limit = UINT32_MAX, .offset = 0 };
        farm_db *db = NULL;
        json_t *j = NULL;

        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waivers_json(db, release, &page, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot list the waivers: %s", err);
                return EXIT_FAILURE;
        }
        r = cli_print_json(j);
        json_decref(j);
        return r;
}

static int admin_cmd(const struct options *o, const char *name, bool revoke) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;
        int r;

        if (farm_check_who("staff name", name, err) < 0) {
                log_error("Invalid %s", err);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        if (revoke)
                r = farm_admin_revoke(db, name, now_ns(CLOCK_REALTIME), err);
        else if ((r = farm_token_new(token, hash)) < 0)
                snprintf(err, sizeof(err), "cannot read random bytes for the token");
        else
                r = farm_admin_add(db, name, hash, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot %s the staff token of %s: %s",
                                revoke ? "revoke" : "create", name, err);
                return EXIT_FAILURE;
        }
        if (revoke) {
                log_info("Revoked the staff token of %s", name);
                return EXIT_SUCCESS;
        }
        char where[CLI_TOKEN_WHERE_MAX];
        if ((r = cli_token_print(token, where)) < 0)
                return log_error_errno(r, "Cannot print the token: %m"), EXIT_FAILURE;
        log_info("Staff token of %s created; %s is shown only this once", name, where);
        return EXIT_SUCCESS;
}

static int reader_cmd(const struct options *o, const char *name, bool revoke) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;
        int r;

        if (farm_check_who("reader name", name, err) < 0) {
                log_error("Invalid %s", err);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        if (revoke)
                r = farm_reader_revoke(db, name, now_ns(CLOCK_REALTIME), err);
        else if ((r = farm_token_new(token, hash)) < 0)
                snprintf(err, sizeof(err), "cannot read random bytes for the token");
        else
                r = farm_reader_add(db, name, hash, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot %s the read token of %s: %s",
                                revoke ? "revoke" : "create", name, err);
                return EXIT_FAILURE;
        }
        if (revoke) {
                log_info("Revoked the read token of %s", name);
                return EXIT_SUCCESS;
        }
        char where[CLI_TOKEN_WHERE_MAX];
        if ((r = cli_token_print(token, where)) < 0)
                return log_error_errno(r, "Cannot print the token: %m"), EXIT_FAILURE;
        log_info("Read token of %s created; %s is shown only this once", name, where);
        return EXIT_SUCCESS;
}

static int check_cmd(const struct options *o) {
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int64_t t = now_ns(CLOCK_MONOTONIC);
        int r = farm_db_check(db, err);
        farm_db_close(db);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_FAILURE;
        }
        log_info("%s: quick_check ok (%.1f s)", o->db_path,
                 (double) (now_ns(CLOCK_MONOTONIC) - t) / 1e9);
        return EXIT_SUCCESS;
}

/* The connection limits of [Server] and the read access of [Access]. */
static int connection_settings(const struct server_config *sc, const char *path,
                               struct options *o) {
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

/* ---- the commands ------------------------------------------------------------------------ */

static struct cli_machine_args machine_args(const struct options *o) {
        return (struct cli_machine_args){ .db_path = o->db_path,
                                          .change = &o->change,
                                          .reason = o->reason,
                                          .who = who(o),
                                          .from = o->from,
                                          .to = o->to,
                                          .json = o->json };
}

static int run_enroll(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        return cli_enroll(&a, args[0]);
}

static int run_revoke(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        return cli_revoke(&a, args[0]);
}

static int run_machine_set(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        if (farm_settings_change_empty(&o->change)) {
                log_error("machine set needs at least one of --bound, --gating, --groups, --label "
                          "and --unlabel");
                return EXIT_USAGE;
        }
        if (!o->reason) {
                log_error("machine set needs --reason TEXT: every change of settings is kept "
                          "with why");
                return EXIT_USAGE;
        }
        return cli_machine_set(&a, args[0]);
}

static int run_machine_show(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        return cli_machine_show(&a, args[0]);
}

static int run_maintenance_add(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        const char *missing = !o->from ? "--from TIME" : !o->to ? "--to TIME" : NULL;
        if (!missing && !o->reason)
                missing = "--reason TEXT";
        if (missing) {
                log_error("maintenance add needs %s", missing);
                return EXIT_USAGE;
        }
        return cli_maintenance_add(&a, args[0]);
}

static int run_maintenance_list(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        return cli_maintenance_list(&a, n > 0 ? args[0] : NULL);
}

static int run_maintenance_cancel(const struct options *o, char **args, int n) {
        struct cli_machine_args a = machine_args(o);
        (void) n;
        if (!o->reason) {
                log_error("maintenance cancel needs --reason TEXT (kept in the audit trail)");
                return EXIT_USAGE;
        }
        return cli_maintenance_cancel(&a, args[0]);
}

static int run_verdict(const struct options *o, char **args, int n) {
        (void) n;
        return verdict_cmd(o, args[0]);
}

static int run_waive(const struct options *o, char **args, int n) {
        (void) n;
        return waive_cmd(o, args[0], args[1]);
}

static int run_unwaive(const struct options *o, char **args, int n) {
        (void) n;
        return unwaive_cmd(o, args[0]);
}

static int run_waivers(const struct options *o, char **args, int n) {
        return waivers_cmd(o, n > 0 ? args[0] : NULL);
}

static int run_admin_token(const struct options *o, char **args, int n) {
        (void) n;
        return admin_cmd(o, args[0], false);
}

static int run_admin_revoke(const struct options *o, char **args, int n) {
        (void) n;
        return admin_cmd(o, args[0], true);
}

static int run_read_token(const struct options *o, char **args, int n) {
        (void) n;
        return reader_cmd(o, args[0], false);
}

static int run_read_revoke(const struct options *o, char **args, int n) {
        (void) n;
        return reader_cmd(o, args[0], true);
}

static int run_check(const struct options *o, char **args, int n) {
        (void) args, (void) n;
        return check_cmd(o);
}

static int run_notifications(const struct options *o, char **args, int n) {
        (void) args, (void) n;
        return cli_notifications_list(o->db_path, &o->notify_filter, o->json);
}

static int run_notifications_retry(const struct options *o, char **args, int n) {
        (void) n;
        return cli_notifications_retry(o->db_path, args[0]);
}

static int run_notifications_test(const struct options *o, char **args, int n) {
        (void) n;
        return cli_notifications_test(o->db_path, o->notify, args[0], who(o));
}

/* prune --before TIME: one pass of retention now, with that horizon. */
static int run_prune(const struct options *o, char **args, int n) {
        char err[FARM_ERROR_MAX];
        const char *reason = NULL;
        int64_t before;
        farm_db *db = NULL;
        uint64_t intervals;
        (void) args, (void) n;
        if (!o->before) {
                log_error("prune needs --before TIME (the intervals of the months that ended "
                          "before that month are dropped)");
                return EXIT_USAGE;
        }
        if (parse_timestamp(o->before, now_ns(CLOCK_REALTIME), &before, &reason) < 0) {
                log_error("Invalid --before '%s': %s", o->before, reason ?: "not a time");
                return EXIT_USAGE;
        }
        /* As [Server] Retention=: what the verdict's period needs, and a month more. */
        int64_t now = now_ns(CLOCK_REALTIME),
                keep = (int64_t) o->rule.period_ns + 31 * 86400 * (int64_t) NSEC_PER_SEC;
        if (before > now - keep) {
                char p[TIMESPAN_MAX_LEN], t[TIMESTAMP_MAX_LEN];
                log_error("Invalid --before '%s': inside the verdict's Period=%s and a month "
                          "(the verdict needs those intervals); give a time before %s",
                          o->before, format_timespan(p, o->rule.period_ns),
                          format_timestamp_utc(t, now - keep));
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_retention_pass(db, &o->rule, before, &intervals, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot drop the old intervals: %s", err);
                return EXIT_FAILURE;
        }
        log_info("Dropped %d month(s) of partitions, %" PRIu64 " intervals", r, intervals);
        return EXIT_SUCCESS;
}

/* migrate: the copy, then the comparison; run again after an interruption, it goes on. */
static int run_migrate(const struct options *o, char **args, int n) {
        char err[FARM_ERROR_MAX], from[512], to[512];
        struct farm_copy_stats st;
        (void) args, (void) n;
        if (!o->from || !o->to) {
                log_error("migrate needs --from (the farm) and --to (the database to copy it "
                          "into)");
                return EXIT_USAGE;
        }
        sql_target_shown(o->from, from, sizeof(from));
        sql_target_shown(o->to, to, sizeof(to));
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        int r = farm_copy(o->from, o->to, o->chunk, &st, err);
        if (r < 0) {
                log_error("Cannot copy %s into %s: %s", from, to, err);
                return EXIT_FAILURE;
        }
        int64_t t1 = now_ns(CLOCK_MONOTONIC);
        log_info("Copied %" PRIu64 " rows of %u tables in %.1f s; comparing every row",
                 st.rows_copied, st.tables, (double) (t1 - t0) / 1e9);
        r = farm_copy_verify(o->from, o->to, &st, err);
        if (r < 0) {
                log_error("%s and %s differ: %s", from, to, err);
                return EXIT_FAILURE;
        }
        log_info("Verified: %" PRIu64 " rows of %u tables the same in %s and %s (%.1f s)",
                 st.rows_compared, st.tables, from, to,
                 (double) (now_ns(CLOCK_MONOTONIC) - t1) / 1e9);
        return EXIT_SUCCESS;
}

static const struct command {
        const char *name, *sub; /* sub: the second word, or NULL */
        int min_args, max_args; /* after the command's words */
        const char *args;       /* for messages */
        uint64_t options;       /* allowed, besides --db and --config */
        int (*run)(const struct options *o, char **args, int n);
} commands[] = {
        { "enroll", NULL, 1, 1, "MACHINE_ID", SETTINGS_OPTS | WHY_OPTS, run_enroll },
        { "revoke", NULL, 1, 1, "MACHINE_ID", WHY_OPTS, run_revoke },
        { "machine", "set", 1, 1, "MACHINE_ID", SETTINGS_OPTS | OPT(ARG_UNLABEL) | WHY_OPTS,
          run_machine_set },
        { "machine", "show", 1, 1, "MACHINE_ID", OPT(ARG_JSON), run_machine_show },
        { "maintenance", "add", 1, 1, "MACHINE_ID", OPT(ARG_FROM) | OPT(ARG_TO) | WHY_OPTS,
          run_maintenance_add },
        { "maintenance", "list", 0, 1, "at most one MACHINE_ID", OPT(ARG_JSON),
          run_maintenance_list },
        { "maintenance", "cancel", 1, 1, "WINDOW_ID", WHY_OPTS, run_maintenance_cancel },
        { "verdict", NULL, 1, 1, "RELEASE", OPT(ARG_AT) | OPT(ARG_KNOWN_AT), run_verdict },
        { "waive", NULL, 2, 2, "RELEASE and PROBLEM_ID", WHY_OPTS, run_waive },
        { "unwaive", NULL, 1, 1, "WAIVER_ID", WHY_OPTS, run_unwaive },
        { "waivers", NULL, 0, 1, "at most one RELEASE", 0, run_waivers },
        { "admin-token", NULL, 1, 1, "NAME", 0, run_admin_token },
        { "admin-revoke", NULL, 1, 1, "NAME", 0, run_admin_revoke },
        { "read-token", NULL, 1, 1, "NAME", 0, run_read_token },
        { "read-revoke", NULL, 1, 1, "NAME", 0, run_read_revoke },
        { "check", NULL, 0, 0, "no argument", 0, run_check },
        { "notifications", "retry", 1, 1, "DELIVERY_ID or \"failed\"", 0, run_notifications_retry },
        { "notifications", "test", 1, 1, "CHANNEL", OPT(ARG_BY), run_notifications_test },
        { "notifications", NULL, 0, 0, "no argument but retry or test",
          OPT(ARG_STATE) | OPT(ARG_KIND) | OPT(ARG_MACHINE) | OPT(ARG_RELEASE) | OPT(ARG_LIMIT) |
                  OPT(ARG_JSON),
          run_notifications },
        { "migrate", NULL, 0, 0, "no argument", OPT(ARG_FROM) | OPT(ARG_TO) | OPT(ARG_CHUNK),
          run_migrate },
        { "prune", NULL, 0, 0, "no argument", OPT(ARG_BEFORE), run_prune },
};

/* The command of argv (its words from *word on), or NULL with the error logged. */
static const struct command *find_command(char **words, int n) {
        bool known = false;
        for (size_t k = 0; k < ELEMENTSOF(commands); k++) {
                if (strcmp(words[0], commands[k].name) != 0)
                        continue;
                known = true;
                if (!commands[k].sub || (n > 1 && strcmp(words[1], commands[k].sub) == 0))
                        return &commands[k];
        }
        if (known)
                log_error("%s needs a subcommand: %s (see --help)", words[0],
                          strcmp(words[0], "machine") == 0 ? "set or show" : "add, list or cancel");
        else
                log_error("Unknown command '%s' (expected enroll, revoke, machine, maintenance, "
                          "verdict, waive, unwaive, waivers, admin-token, admin-revoke, "
                          "read-token, read-revoke, check, notifications, migrate or prune; see "
                          "--help)",
                          words[0]);
        return NULL;
}

static int run_command(const struct options *o, char **words, int n) {
        const struct command *cmd = find_command(words, n);
        if (!cmd)
                return EXIT_USAGE;
        char name[64];
        snprintf(name, sizeof(name), "%s%s%s", cmd->name, cmd->sub ? " " : "", cmd->sub ?: "");
        int skip = cmd->sub ? 2 : 1;
        if (n - skip < cmd->min_args || n - skip > cmd->max_args) {
                log_error("%s takes %s (see --help)", name, cmd->args);
                return EXIT_USAGE;
        }
        uint64_t wrong = o->given & ~(cmd->options | OPT(ARG_DB) | OPT(ARG_CONFIG) | OPT(ARG_SET));
        for (int arg = ARG_CONFIG; wrong && arg < ARG_VERSION; arg++)
                if (wrong & OPT(arg)) {
                        log_error("--%s is not an option of %s (see --help)", option_name(arg),
                                  name);
                        return EXIT_USAGE;
                }
        return cmd->run(o, words + skip, n - skip);
}

int main(int argc, char **argv) {
        struct options o = {
                .db_path = DB_DEFAULT,
                .listen = FARM_LISTEN_DEFAULT,
                .threads = FARM_THREADS_DEFAULT,
                .rate_per_s = FARM_RATE_DEFAULT,
                .burst = FARM_BURST_DEFAULT,
                .max_body_bytes = FARM_MAX_BODY_DEFAULT,
        };

        log_set_program("rtsoak-server");
        /* Large blocks (a merged histogram is up to 800 KiB) always from mmap(): freed, they go
         * back to the kernel at once, instead of raising glibc's threshold and staying in the
         * heap as resident memory after the request that needed them. */
        mallopt(M_MMAP_THRESHOLD, 256 * 1024);
        farm_settings_change_init(&o.change);

        static struct server_config sc;
        char err[CONF_ERROR_MAX];
        bool explicit_config;
        const char *path = config_path(argc, argv, &explicit_config);
        static char *origins[ELEMENTSOF(config_items)];
        _cleanup_free_ char **sets = config_sets(argc, argv);
        if (!sets)
                return log_oom(), EXIT_FAILURE;
        if (conf_load(&config_table, path, explicit_config, sets, &sc, origins, NULL, err) < 0) {
                log_error("%s", err);
                return EXIT_CONFIG;
        }
        if (connection_settings(&sc, path, &o) < 0)
                return EXIT_CONFIG;
        o.listen = sc.listen;
        o.db_path = sc.db;
        o.cert = *sc.cert ? sc.cert : NULL;
        o.key = *sc.key ? sc.key : NULL;
        o.threads = (unsigned) sc.threads;
        o.rate_per_s = (double) sc.rate;
        o.burst = (unsigned) sc.burst;
        o.max_body_bytes = (size_t) sc.max_body;
        o.cache_warming = sc.cache_warming;
        o.retention_ns = sc.retention;
        if (rule_from_config(&sc, path, &o.rule) < 0)
                return EXIT_CONFIG;
        if (notify_config_check(&sc.notify,
                                conf_origin(&config_table, origins,
                                            offsetof(struct server_config, notify.dashboard_url)),
                                err) < 0) {
                log_error("%s", err);
                return EXIT_CONFIG;
        }
        o.notify = &sc.notify;

        if (parse_options(argc, argv, &o) > 0)
                return EXIT_SUCCESS;
        /* Options override the file; say so where the file chose another database. */
        if (o.db_path != sc.db && strcmp(o.db_path, sc.db) != 0 && strcmp(sc.db, DB_DEFAULT) != 0)
                log_notice("--db %s overrides [Server] Database=%s of %s", o.db_path, sc.db, path);
        /* A usage error is 64, serving or not: the unit does not restart on it (nor on 69 or
         * 78). */
        int nargs = argc - optind;
        if (o.usage_error)
                return EXIT_USAGE;
        if (nargs > 0)
                return run_command(&o, argv + optind, nargs);
        uint64_t wrong = o.given & ~(SERVE_OPTS | OPT(ARG_DB) | OPT(ARG_CONFIG) | OPT(ARG_SET));
        if (wrong) {
                int arg = ARG_CONFIG;
                while (!(wrong & OPT(arg)))
                        arg++;
                log_error("--%s belongs to a command, not to serving (see --help)",
                          option_name(arg));
                return EXIT_USAGE;
        }
        return serve(&o);
}
