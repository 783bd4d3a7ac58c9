/* SPDX-License-Identifier: MIT */
/* rtsoak-server: the farm server.  Its options, and the table of its commands (cmd/: enrol,
 * revoke and set up machines, judge releases, give waivers ...); without one it serves. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "command.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "machines.h"
#include "macro.h"
#include "migrate.h"
#include "notifications.h"
#include "prune.h"
#include "ratelimit.h"
#include "releases.h"
#include "serve.h"
#include "server-config.h"
#include "timeutil.h"
#include "token.h"

/* What the command line says besides the options the commands read. */
struct command_line {
        struct server_options o;
        uint64_t given;   /* the options given, as OPT() bits */
        bool usage_error; /* one of them was wrong (already logged) */
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
               "  kcidb RELEASE [--at TIME] [--known-at TIME] [--origin NAME]\n"
               "                       the verdict as a KCIDB v5.3 report\n"
               "  kcidb --watch DIRECTORY [--origin NAME]\n"
               "                       a report into DIRECTORY for each change of the verdict log\n"
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
               "  --cache-warming yes|no  obsolete, no effect (ingest keeps every day's "
               "histograms)\n"
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
               "  --origin NAME        kcidb: the CI system's name in KCIDB (default rtsoak)\n"
               "  --watch DIRECTORY    kcidb: follow the verdict log, a report per change\n"
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
               SERVER_CONFIG_DEFAULT, SERVER_DB_DEFAULT, FARM_LISTEN_DEFAULT, FARM_THREADS_DEFAULT,
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
        ARG_ORIGIN,
        ARG_WATCH,
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
        { "origin", required_argument, NULL, ARG_ORIGIN },
        { "watch", required_argument, NULL, ARG_WATCH },
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
static int parse_command_option(int c, const char *name, struct server_options *o) {
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
        case ARG_ORIGIN:
                o->origin = optarg;
                break;
        case ARG_WATCH:
                o->watch = optarg;
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
static int parse_serve_option(int c, struct server_options *o) {
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
        case ARG_CACHE_WARMING: {
                bool ignored;
                o->cache_warming_from = "--cache-warming";
                return parse_yes_no("--cache-warming", optarg, &ignored);
        }
        }
        return 0;
}

/* 0 to go on, 1 when done (help, version).  A wrong option is logged and marks
 * cl->usage_error; the parsing goes on, so that the command (and with it the exit status of
 * the error) is known. */
static int parse_options(int argc, char **argv, struct command_line *cl) {
        struct server_options *o = &cl->o;
        int c, index;

        while ((c = getopt_long(argc, argv, ":h", options, &index)) >= 0) {
                if (c >= ARG_CONFIG && c < ARG_VERSION)
                        cl->given |= OPT(c);
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
                                cl->usage_error = true;
                } else if (c > ARG_DB && c < ARG_BOUND) {
                        if (parse_serve_option(c, o) < 0)
                                cl->usage_error = true;
                } else if (c == '?' || c == ':') {
                        log_getopt_error(c, argv);
                        cl->usage_error = true;
                } else if (c != ARG_CONFIG && c != ARG_SET)
                        cl->usage_error = true;
        }
        return 0;
}

static const struct command {
        const char *name, *sub; /* sub: the second word, or NULL */
        int min_args, max_args; /* after the command's words */
        const char *args;       /* for messages */
        uint64_t options;       /* allowed, besides --db and --config */
        cli_command_fn *run;
} commands[] = {
        { "enroll", NULL, 1, 1, "MACHINE_ID", SETTINGS_OPTS | WHY_OPTS, cli_enroll },
        { "revoke", NULL, 1, 1, "MACHINE_ID", WHY_OPTS, cli_revoke },
        { "machine", "set", 1, 1, "MACHINE_ID", SETTINGS_OPTS | OPT(ARG_UNLABEL) | WHY_OPTS,
          cli_machine_set },
        { "machine", "show", 1, 1, "MACHINE_ID", OPT(ARG_JSON), cli_machine_show },
        { "maintenance", "add", 1, 1, "MACHINE_ID", OPT(ARG_FROM) | OPT(ARG_TO) | WHY_OPTS,
          cli_maintenance_add },
        { "maintenance", "list", 0, 1, "at most one MACHINE_ID", OPT(ARG_JSON),
          cli_maintenance_list },
        { "maintenance", "cancel", 1, 1, "WINDOW_ID", WHY_OPTS, cli_maintenance_cancel },
        { "verdict", NULL, 1, 1, "RELEASE", OPT(ARG_AT) | OPT(ARG_KNOWN_AT), cli_verdict },
        { "kcidb", NULL, 0, 1, "RELEASE, or none with --watch",
          OPT(ARG_AT) | OPT(ARG_KNOWN_AT) | OPT(ARG_ORIGIN) | OPT(ARG_WATCH), cli_kcidb },
        { "waive", NULL, 2, 2, "RELEASE and PROBLEM_ID", WHY_OPTS, cli_waive },
        { "unwaive", NULL, 1, 1, "WAIVER_ID", WHY_OPTS, cli_unwaive },
        { "waivers", NULL, 0, 1, "at most one RELEASE", 0, cli_waivers },
        { "admin-token", NULL, 1, 1, "NAME", 0, cli_admin_token },
        { "admin-revoke", NULL, 1, 1, "NAME", 0, cli_admin_revoke },
        { "read-token", NULL, 1, 1, "NAME", 0, cli_read_token },
        { "read-revoke", NULL, 1, 1, "NAME", 0, cli_read_revoke },
        { "check", NULL, 0, 0, "no argument", 0, cli_check },
        { "notifications", "retry", 1, 1, "DELIVERY_ID or \"failed\"", 0, cli_notifications_retry },
        { "notifications", "test", 1, 1, "CHANNEL", OPT(ARG_BY), cli_notifications_test },
        { "notifications", NULL, 0, 0, "no argument but retry or test",
          OPT(ARG_STATE) | OPT(ARG_KIND) | OPT(ARG_MACHINE) | OPT(ARG_RELEASE) | OPT(ARG_LIMIT) |
                  OPT(ARG_JSON),
          cli_notifications_list },
        { "migrate", NULL, 0, 0, "no argument", OPT(ARG_FROM) | OPT(ARG_TO) | OPT(ARG_CHUNK),
          cli_migrate },
        { "prune", NULL, 0, 0, "no argument", OPT(ARG_BEFORE), cli_prune },
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
                          "verdict, kcidb, waive, unwaive, waivers, admin-token, admin-revoke, "
                          "read-token, read-revoke, check, notifications, migrate or prune; see "
                          "--help)",
                          words[0]);
        return NULL;
}

static int run_command(const struct command_line *cl, char **words, int n) {
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
        uint64_t wrong = cl->given & ~(cmd->options | OPT(ARG_DB) | OPT(ARG_CONFIG) | OPT(ARG_SET));
        for (int arg = ARG_CONFIG; wrong && arg < ARG_VERSION; arg++)
                if (wrong & OPT(arg)) {
                        log_error("--%s is not an option of %s (see --help)", option_name(arg),
                                  name);
                        return EXIT_USAGE;
                }
        return cmd->run(&cl->o, words + skip, n - skip);
}

int main(int argc, char **argv) {
        struct command_line cl = { .o = {
                                           .db_path = SERVER_DB_DEFAULT,
                                           .listen = FARM_LISTEN_DEFAULT,
                                           .threads = FARM_THREADS_DEFAULT,
                                           .rate_per_s = FARM_RATE_DEFAULT,
                                           .burst = FARM_BURST_DEFAULT,
                                           .max_body_bytes = FARM_MAX_BODY_DEFAULT,
                                   } };
        struct server_options *o = &cl.o;
        const char *path, *config_db;
        int r;

        log_set_program("rtsoak-server");
        server_malloc_tuning(false);
        farm_settings_change_init(&o->change);
        if ((r = server_config_load(argc, argv, o, &path, &config_db)) != 0)
                return r;

        if (parse_options(argc, argv, &cl) > 0)
                return EXIT_SUCCESS;
        /* Options override the file; say so where the file chose another database. */
        if (o->db_path != config_db && strcmp(o->db_path, config_db) != 0 &&
            strcmp(config_db, SERVER_DB_DEFAULT) != 0)
                log_notice("--db %s overrides [Server] Database=%s of %s", o->db_path, config_db,
                           path);
        /* A usage error is 64, serving or not: the unit does not restart on it (nor on 69 or
         * 78). */
        int nargs = argc - optind;
        if (cl.usage_error)
                return EXIT_USAGE;
        if (nargs > 0)
                return run_command(&cl, argv + optind, nargs);
        uint64_t wrong = cl.given & ~(SERVE_OPTS | OPT(ARG_DB) | OPT(ARG_CONFIG) | OPT(ARG_SET));
        if (wrong) {
                int arg = ARG_CONFIG;
                while (!(wrong & OPT(arg)))
                        arg++;
                log_error("--%s belongs to a command, not to serving (see --help)",
                          option_name(arg));
                return EXIT_USAGE;
        }
        return cli_serve(o);
}
