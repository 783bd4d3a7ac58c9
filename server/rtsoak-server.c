/* SPDX-License-Identifier: MIT */
/* rtsoak-server: the farm server.  Serves the upload and query API, and enrols or revokes
 * machines in its farm database. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "conf-parser.h"
#include "config.h"
#include "log.h"
#include "macro.h"
#include "server-access.h"
#include "server-auth.h"
#include "server-db.h"
#include "server-http.h"
#include "server-query.h"
#include "server-ratelimit.h"
#include "server-verdict.h"
#include "text-safe.h"
#include "timeutil.h"

#define DB_DEFAULT "/var/lib/rtsoak-server/farm.db"
#define CONFIG_DEFAULT "/etc/rtsoak/rtsoak-server.conf"

/* The configuration file: the same settings as the options, which override it. */
struct server_config {
        char *listen, *db, *cert, *key;
        uint64_t threads, rate, burst, max_body;
        uint64_t connections, per_address, head_timeout, request_timeout, idle_timeout;
        char *read_api, *read_dashboard, *read_metrics, *hosts;
        bool cache_warming;
        uint64_t period, max_gap, load_down_max;
        char *scenarios;
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
        { "Verdict", "Period", &conf_type_timespan, offsetof(struct server_config, period),
          NSEC_PER_SEC, 3650 * 86400 * NSEC_PER_SEC, FARM_RULE_PERIOD_DEFAULT },
        { "Verdict", "MaxGap", &conf_type_timespan, offsetof(struct server_config, max_gap),
          NSEC_PER_SEC, 365 * 86400 * NSEC_PER_SEC, FARM_RULE_MAX_GAP_DEFAULT },
        { "Verdict", "LoadDownMax", &conf_type_timespan,
          offsetof(struct server_config, load_down_max), 0, 365 * 86400 * NSEC_PER_SEC,
          FARM_RULE_LOAD_DOWN_MAX_DEFAULT },
        { "Verdict", "Scenarios", &conf_type_string, offsetof(struct server_config, scenarios), 0,
          4000, FARM_RULE_SCENARIOS_DEFAULT },
};
static const struct conf_table config_table = { .items = config_items,
                                                .n = ELEMENTSOF(config_items) };
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
        int64_t threshold_ns; /* -1: not given */
        int gating;           /* -1: not given */
        const char *reason, *by, *at;
        bool json;
        bool serve_options, enroll_options, waive_options;
        struct farm_rule rule;
};

static void help(void) {
        printf("Usage: rtsoak-server [OPTIONS]                    serve the farm API\n"
               "       rtsoak-server [--db PATH] enroll MACHINE_ID [--threshold SPAN] "
               "[--gating yes|no]\n"
               "       rtsoak-server [--db PATH] revoke MACHINE_ID\n"
               "       rtsoak-server [--db PATH] verdict RELEASE [--at TIME]\n"
               "       rtsoak-server [--db PATH] waive RELEASE PROBLEM_ID --reason TEXT "
               "[--by NAME]\n"
               "       rtsoak-server [--db PATH] unwaive WAIVER_ID [--reason TEXT] [--by NAME]\n"
               "       rtsoak-server [--db PATH] waivers [RELEASE]\n"
               "       rtsoak-server [--db PATH] admin-token NAME | admin-revoke NAME\n"
               "       rtsoak-server [--db PATH] read-token NAME | read-revoke NAME\n"
               "       rtsoak-server [--db PATH] check\n"
               "\n"
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
               "  --config FILE        configuration file (default %s)\n"
               "  --set SECTION.KEY=VALUE  a setting of the configuration file (repeatable)\n"
               "  --threshold SPAN     enroll: the machine's latency bound (default 100us)\n"
               "  --gating yes|no      enroll: whether the machine gates releases "
               "(default yes)\n"
               "  --at TIME            verdict: as it was at TIME (RFC 3339, Unix ns, \"2d ago\")\n"
               "  --reason TEXT        waive/unwaive: why (kept in the audit trail)\n"
               "  --by NAME            waive/unwaive: who (default: $SUDO_USER, $USER)\n"
               "  -h, --help           show this help\n"
               "  --version            show the version\n"
               "\n"
               "enroll and admin-token print the new token once on stdout; only its hash is "
               "kept.\nThe verdict's rule is set in the [Verdict] section of the configuration "
               "file.\n",
               DB_DEFAULT, FARM_LISTEN_DEFAULT, FARM_THREADS_DEFAULT, FARM_RATE_DEFAULT,
               FARM_BURST_DEFAULT, FARM_MAX_BODY_DEFAULT, CONFIG_DEFAULT);
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

/* 0 to go on, 1 when done (help), -EINVAL for a usage error (already logged). */
static int parse_options(int argc, char **argv, struct options *o) {
        enum {
                ARG_CONFIG = 0x100,
                ARG_DB,
                ARG_LISTEN,
                ARG_CERT,
                ARG_KEY,
                ARG_THREADS,
                ARG_RATE,
                ARG_BURST,
                ARG_MAX_BODY,
                ARG_CACHE_WARMING,
                ARG_THRESHOLD,
                ARG_GATING,
                ARG_REASON,
                ARG_BY,
                ARG_AT,
                ARG_SET,
                ARG_VERSION,
        };
        static const struct option options[] = {
                { "config", required_argument, NULL, ARG_CONFIG },
                { "db", required_argument, NULL, ARG_DB },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "cert", required_argument, NULL, ARG_CERT },
                { "key", required_argument, NULL, ARG_KEY },
                { "threads", required_argument, NULL, ARG_THREADS },
                { "rate", required_argument, NULL, ARG_RATE },
                { "burst", required_argument, NULL, ARG_BURST },
                { "max-body", required_argument, NULL, ARG_MAX_BODY },
                { "cache-warming", required_argument, NULL, ARG_CACHE_WARMING },
                { "threshold", required_argument, NULL, ARG_THRESHOLD },
                { "gating", required_argument, NULL, ARG_GATING },
                { "reason", required_argument, NULL, ARG_REASON },
                { "by", required_argument, NULL, ARG_BY },
                { "at", required_argument, NULL, ARG_AT },
                { "set", required_argument, NULL, ARG_SET },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        unsigned long long v;
        const char *reason;
        uint64_t ns;
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case ARG_CONFIG:
                case ARG_SET:
                        break; /* read before the options */
                case ARG_DB:
                        o->db_path = optarg;
                        break;
                case ARG_LISTEN:
                        o->listen = optarg;
                        o->serve_options = true;
                        break;
                case ARG_CERT:
                        o->cert = optarg;
                        o->serve_options = true;
                        break;
                case ARG_KEY:
                        o->key = optarg;
                        o->serve_options = true;
                        break;
                case ARG_THREADS:
                        if (parse_uint("--threads", optarg, 1, 256, &v) < 0)
                                return -EINVAL;
                        o->threads = (unsigned) v;
                        o->serve_options = true;
                        break;
                case ARG_RATE: {
                        char *end;
                        errno = 0;
                        o->rate_per_s = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(o->rate_per_s > 0) ||
                            o->rate_per_s > 1e6) {
                                log_error("Invalid --rate '%s': expected a number of requests "
                                          "per second above 0",
                                          optarg);
                                return -EINVAL;
                        }
                        o->serve_options = true;
                        break;
                }
                case ARG_BURST:
                        if (parse_uint("--burst", optarg, 1, 1000000, &v) < 0)
                                return -EINVAL;
                        o->burst = (unsigned) v;
                        o->serve_options = true;
                        break;
                case ARG_MAX_BODY:
                        if (parse_uint("--max-body", optarg, 1024, (unsigned long long) 1 << 30,
                                       &v) < 0)
                                return -EINVAL;
                        o->max_body_bytes = (size_t) v;
                        o->serve_options = true;
                        break;
                case ARG_CACHE_WARMING:
                        if (strcmp(optarg, "yes") != 0 && strcmp(optarg, "no") != 0) {
                                log_error("Invalid --cache-warming '%s': expected yes or no",
                                          optarg);
                                return -EINVAL;
                        }
                        o->cache_warming = strcmp(optarg, "yes") == 0;
                        o->serve_options = true;
                        break;
                case ARG_THRESHOLD:
                        if (parse_timespan(optarg, &ns, &reason) < 0 ||
                            ns > 24 * 3600 * NSEC_PER_SEC) {
                                log_error("Invalid --threshold '%s': %s", optarg,
                                          reason ?: "more than a day");
                                return -EINVAL;
                        }
                        o->threshold_ns = (int64_t) ns;
                        o->enroll_options = true;
                        break;
                case ARG_GATING:
                        if (strcmp(optarg, "yes") == 0)
                                o->gating = 1;
                        else if (strcmp(optarg, "no") == 0)
                                o->gating = 0;
                        else {
                                log_error("Invalid --gating '%s': expected yes or no", optarg);
                                return -EINVAL;
                        }
                        o->enroll_options = true;
                        break;
                case ARG_REASON:
                        o->reason = optarg;
                        o->waive_options = true;
                        break;
                case ARG_BY:
                        o->by = optarg;
                        o->waive_options = true;
                        break;
                case ARG_AT:
                        o->at = optarg;
                        break;
                case 'h':
                        help();
                        return 1;
                case ARG_VERSION:
                        printf("rtsoak-server %s\n", PROJECT_VERSION);
                        return 1;
                default:
                        return -EINVAL; /* getopt said what */
                }
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

static int open_db(const char *path, farm_db **ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_db_open(path, ret, err);
        if (r < 0)
                return log_error_errno(r, "Cannot open the farm database: %s", err);
        return 0;
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

static int serve(const struct options *o) {
        _cleanup_free_ char *cert = NULL, *key = NULL;
        char bound[FARM_ADDRESS_MAX], err[FARM_ERROR_MAX];
        farm_http *http = NULL;
        farm_db *db = NULL;
        int fd = -1, r, sig;

        _cleanup_free_ char *cred_cert = NULL, *cred_key = NULL;
        if (!o->cert && !o->key && credentials(&cred_cert, &cred_key) < 0)
                return EXIT_CONFIG;
        struct options with_cred;
        if (cred_cert) {
                with_cred = *o;
                with_cred.cert = cred_cert;
                with_cred.key = cred_key;
                o = &with_cred;
        }
        if (!!o->cert != !!o->key) {
                log_error("--cert and --key go together: HTTPS needs both");
                return EXIT_CONFIG;
        }
        if (o->cert && (read_pem("certificate", o->cert, &cert) < 0 ||
                        read_pem("private key", o->key, &key) < 0))
                return EXIT_CONFIG;

        r = farm_db_open(o->db_path, &db, err);
        if (r < 0) {
                log_error_errno(r, "Cannot open the farm database: %s", err);
                return EXIT_FAILURE;
        }

        int64_t size;
        if (farm_db_check_skipped(db, &size))
                log_info("The farm database is %.1f GiB: its integrity check at start is skipped "
                         "(it reads the whole file); run \"rtsoak-server check\" when convenient",
                         (double) size / (1 << 30));

        r = farm_listen(o->listen, &fd, bound);
        if (r == -EINVAL) {
                log_error("Invalid --listen '%s': expected ADDR:PORT with a numeric address "
                          "(127.0.0.1:8470, [::1]:8470)",
                          o->listen);
                farm_db_close(db);
                return EXIT_CONFIG;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m%s", o->listen,
                                r == -EADDRINUSE ? " (is another server running on this port?)"
                                                 : "");
                farm_db_close(db);
                return EXIT_FAILURE;
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
        r = farm_http_start(&hc, db, &http);
        if (r < 0) {
                close(fd);
                farm_db_close(db);
                return EXIT_FAILURE;
        }
        log_info("Listening on %s://%s (database %s, %u threads)", cert ? "https" : "http", bound,
                 o->db_path, o->threads);
        struct farm_warmer *warmer = NULL;
        if (o->cache_warming && (r = farm_warmer_start(db, &warmer)) < 0)
                log_warning_errno(r, "Cannot merge histograms in the background, the queries "
                                     "will: %m");

        while (sigwait(&mask, &sig) != 0)
                ;
        log_info("Stopping on %s", strsignal(sig));
        farm_http_stop(http);
        farm_warmer_stop(warmer);
        uint64_t commits, uploads;
        farm_db_commit_stats(db, &commits, &uploads);
        log_info("Stored %llu uploads in %llu commits", (unsigned long long) uploads,
                 (unsigned long long) commits);
        farm_db_close(db);
        return EXIT_SUCCESS;
}

static int enroll(const struct options *o, const char *machine_id) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX], span[TIMESPAN_MAX_LEN];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;

        if (!farm_machine_id_valid(machine_id)) {
                log_error("Invalid machine id '%s': expected 32 lowercase hex digits, as in "
                          "/etc/machine-id",
                          machine_id);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_token_new(token, hash);
        if (r < 0) {
                farm_db_close(db);
                log_error_errno(r, "Cannot read random bytes for the token: %m");
                return EXIT_FAILURE;
        }
        r = farm_enroll(db, machine_id, hash, o->threshold_ns, o->gating, now_ns(CLOCK_REALTIME),
                        err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot enroll %s: %s", machine_id, err);
                return EXIT_FAILURE;
        }
        printf("%s\n", token);
        if (fflush(stdout) != 0) {
                log_error_errno(errno, "Cannot print the token: %m");
                return EXIT_FAILURE;
        }
        explicit_bzero(token, sizeof(token));
        if (o->threshold_ns >= 0)
                format_timespan(span, (uint64_t) o->threshold_ns);
        log_info("%s machine %s%s%s%s%s; the token above is shown only this once",
                 r > 0 ? "Enrolled" : "Re-keyed", machine_id,
                 o->threshold_ns >= 0 ? ", threshold " : "", o->threshold_ns >= 0 ? span : "",
                 o->gating >= 0 ? ", gating " : "",
                 o->gating >= 0 ? (o->gating ? "yes" : "no") : "");
        return EXIT_SUCCESS;
}

static int revoke_machine(const struct options *o, const char *machine_id) {
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;

        if (!farm_machine_id_valid(machine_id)) {
                log_error("Invalid machine id '%s': expected 32 lowercase hex digits", machine_id);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_revoke(db, machine_id, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot revoke %s: %s", machine_id, err);
                return EXIT_FAILURE;
        }
        log_info("Revoked the token of machine %s", machine_id);
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
        char err[FARM_ERROR_MAX];
        int64_t now = now_ns(CLOCK_REALTIME), at = now;
        const char *why = NULL;
        farm_db *db = NULL;
        json_t *j = NULL;

        if (o->at && parse_timestamp(o->at, now, &at, &why) < 0) {
                log_error("Invalid --at '%s': %s", o->at, why ?: "not a point in time");
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_verdict(db, &o->rule, release, at, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot judge %s: %s", release, err);
                return r == -ENOENT ? 3 : EXIT_FAILURE;
        }
        json_dumpf(j, stdout, JSON_INDENT(2));
        putchar('\n');
        const char *st = farm_verdict_status(j);
        r = strcmp(st, "qualified") == 0 ? 0 : strcmp(st, "failed") == 0 ? 1 : 2;
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
                return EXIT_CONFIG;
        }
        if (!text_ok(o->reason, false, why) || !text_ok(who(o), false, why)) {
                log_error("Invalid --reason or --by: %s (one line of plain text)", why);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waive(db, &o->rule, release, problem, o->reason, who(o),
                           now_ns(CLOCK_REALTIME), &id, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot waive: %s", err);
                return r == -EINVAL ? EXIT_CONFIG : EXIT_FAILURE;
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
                return EXIT_CONFIG;
        }
        char why[TEXT_WHY_MAX];
        if (!text_ok(o->reason ?: "", false, why) || !text_ok(who(o), false, why)) {
                log_error("Invalid --reason or --by: %s (one line of plain text)", why);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
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

        if (open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waivers_json(db, release, &page, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot list the waivers: %s", err);
                return EXIT_FAILURE;
        }
        json_dumpf(j, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(j);
        return EXIT_SUCCESS;
}

static int admin_cmd(const struct options *o, const char *name, bool revoke) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;
        int r;

        if (!farm_admin_name_valid(name)) {
                log_error("Invalid staff name '%s': 1-%d letters, digits or . _ @ -", name,
                          FARM_ADMIN_NAME_MAX);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
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
        printf("%s\n", token);
        explicit_bzero(token, sizeof(token));
        if (fflush(stdout) != 0)
                return log_error_errno(errno, "Cannot print the token: %m"), EXIT_FAILURE;
        log_info("Staff token of %s created; it is shown only this once", name);
        return EXIT_SUCCESS;
}

static int reader_cmd(const struct options *o, const char *name, bool revoke) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;
        int r;

        if (!farm_reader_name_valid(name)) {
                log_error("Invalid reader name '%s': 1-%d letters, digits or . _ @ -", name,
                          FARM_READER_NAME_MAX);
                return EXIT_CONFIG;
        }
        if (open_db(o->db_path, &db) < 0)
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
        printf("%s\n", token);
        explicit_bzero(token, sizeof(token));
        if (fflush(stdout) != 0)
                return log_error_errno(errno, "Cannot print the token: %m"), EXIT_FAILURE;
        log_info("Read token of %s created; it is shown only this once", name);
        return EXIT_SUCCESS;
}

static int check_cmd(const struct options *o) {
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        if (open_db(o->db_path, &db) < 0)
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

/* The configuration file and the --set assignments into o, before the other options: 0, or
 * the exit status. */
static int load_config(int argc, char **argv, struct options *o) {
        static struct server_config sc;
        char err[CONF_ERROR_MAX];
        bool explicit_config;
        const char *path = config_path(argc, argv, &explicit_config);
        _cleanup_free_ char **sets = config_sets(argc, argv);
        if (!sets)
                return log_oom(), EXIT_FAILURE;
        if (conf_load(&config_table, path, explicit_config, sets, &sc, NULL, NULL, err) < 0) {
                log_error("%s", err);
                return EXIT_CONFIG;
        }
        o->limits = (struct farm_connlimit_config){ .max_total = (unsigned) sc.connections,
                                                    .max_per_address = (unsigned) sc.per_address,
                                                    .head_timeout_ns = sc.head_timeout,
                                                    .request_timeout_ns = sc.request_timeout };
        o->idle_timeout_s = (unsigned) (sc.idle_timeout / NSEC_PER_SEC);
        o->access.hosts = sc.hosts;
        if (read_mode(path, "API", sc.read_api, &o->access.api) < 0 ||
            read_mode(path, "Dashboard", sc.read_dashboard, &o->access.dashboard) < 0 ||
            read_mode(path, "Metrics", sc.read_metrics, &o->access.metrics) < 0)
                return EXIT_CONFIG;
        o->listen = sc.listen;
        o->db_path = sc.db;
        o->cert = *sc.cert ? sc.cert : NULL;
        o->key = *sc.key ? sc.key : NULL;
        o->threads = (unsigned) sc.threads;
        o->rate_per_s = (double) sc.rate;
        o->burst = (unsigned) sc.burst;
        o->max_body_bytes = (size_t) sc.max_body;
        o->cache_warming = sc.cache_warming;
        o->rule.period_ns = sc.period;
        o->rule.max_gap_ns = sc.max_gap;
        o->rule.load_down_max_ns = sc.load_down_max;
        if (farm_rule_parse_scenarios(sc.scenarios, &o->rule, err, sizeof(err)) < 0) {
                log_error("%s: [Verdict] Scenarios=: %s", path, err);
                return EXIT_CONFIG;
        }

        return 0;
}

int main(int argc, char **argv) {
        struct options o = {
                .db_path = DB_DEFAULT,
                .listen = FARM_LISTEN_DEFAULT,
                .threads = FARM_THREADS_DEFAULT,
                .rate_per_s = FARM_RATE_DEFAULT,
                .burst = FARM_BURST_DEFAULT,
                .max_body_bytes = FARM_MAX_BODY_DEFAULT,
                .threshold_ns = -1,
                .gating = -1,
        };

        log_set_program("rtsoak-server");
        /* Large blocks (a merged histogram is up to 800 KiB) always from mmap(): freed, they go
         * back to the kernel at once, instead of raising glibc's threshold and staying in the
         * heap as resident memory after the request that needed them. */
        mallopt(M_MMAP_THRESHOLD, 256 * 1024);

        int r = load_config(argc, argv, &o);
        if (r != 0)
                return r;
        r = parse_options(argc, argv, &o);
        if (r != 0)
                return r > 0 ? EXIT_SUCCESS : EXIT_CONFIG;

        int nargs = argc - optind;
        const char *cmd = nargs > 0 ? argv[optind] : NULL;
        if (!cmd) {
                if (o.enroll_options || o.waive_options || o.at) {
                        log_error("--threshold, --gating, --reason, --by and --at belong to "
                                  "commands (see --help)");
                        return EXIT_CONFIG;
                }
                return serve(&o);
        }
        static const struct {
                const char *name;
                int min_args, max_args; /* after the command */
        } commands[] = {
                { "enroll", 1, 1 },      { "revoke", 1, 1 },       { "verdict", 1, 1 },
                { "waive", 2, 2 },       { "unwaive", 1, 1 },      { "waivers", 0, 1 },
                { "admin-token", 1, 1 }, { "admin-revoke", 1, 1 }, { "check", 0, 0 },
                { "read-token", 1, 1 },  { "read-revoke", 1, 1 },
        };
        size_t k = 0;
        for (; k < ELEMENTSOF(commands); k++)
                if (strcmp(cmd, commands[k].name) == 0)
                        break;
        if (k == ELEMENTSOF(commands)) {
                log_error("Unknown command '%s' (expected enroll, revoke, verdict, waive, unwaive, "
                          "waivers, admin-token, admin-revoke, read-token, read-revoke or check; "
                          "see --help)",
                          cmd);
                return EXIT_CONFIG;
        }
        if (nargs - 1 < commands[k].min_args || nargs - 1 > commands[k].max_args) {
                log_error("%s takes %s (see --help)", cmd,
                          k == 3   ? "RELEASE and PROBLEM_ID"
                          : k == 5 ? "at most one RELEASE"
                                   : "exactly one argument");
                return EXIT_CONFIG;
        }
        bool enroll_cmd = k == 0, waive_cmds = k == 3 || k == 4;
        if (o.serve_options || (!enroll_cmd && o.enroll_options) ||
            (!waive_cmds && o.waive_options) || (k != 2 && o.at)) {
                log_error("Options of another command given to %s (see --help)", cmd);
                return EXIT_CONFIG;
        }
        const char *a1 = argv[optind + 1], *a2 = nargs > 2 ? argv[optind + 2] : NULL;
        switch (k) {
        case 0:
                return enroll(&o, a1);
        case 1:
                return revoke_machine(&o, a1);
        case 2:
                return verdict_cmd(&o, a1);
        case 3:
                return waive_cmd(&o, a1, a2);
        case 4:
                return unwaive_cmd(&o, a1);
        case 5:
                return waivers_cmd(&o, nargs > 1 ? a1 : NULL);
        case 8:
                return check_cmd(&o);
        case 9:
        case 10:
                return reader_cmd(&o, a1, k == 10);
        default:
                return admin_cmd(&o, a1, k == 7);
        }
}
