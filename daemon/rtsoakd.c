/* SPDX-License-Identifier: MIT */
/* rtsoakd: the command line and the configuration (--check-config prints it); the manager
 * (manager.c) runs the probes, the loads, storage and upload until told to stop. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "daemon-config.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "timeutil.h"

static void usage(FILE *f) {
        fprintf(f,
                "Usage: rtsoakd [OPTIONS]\n"
                "Measures timer wake-up latency on every configured CPU, forever, and stores\n"
                "per-interval worst cases and histograms.\n\n"
                "  -c, --config FILE        configuration file (default " DAEMON_CONFIG_PATH ");\n"
                "                           drop-ins are read from FILE.d/*.conf\n"
                "  -s, --set SECTION.KEY=VALUE\n"
                "                           override one key (repeatable, applied last)\n"
                "  -d, --duration TIME      stop cleanly after TIME (e.g. 30s, 1h)\n"
                "      --check-config       print the effective configuration and exit\n"
                "  -v, --verbose            log debug messages\n"
                "  -h, --help               show this help\n"
                "      --version            show the version\n"
                "\n"
                "Exit status: 0 after a clean stop, 1 failed, 64 usage error, 69 real-time\n"
                "scheduling or locked memory refused here, 78 configuration error.\n");
}

struct options {
        struct manager_options m;
        char **sets; /* owns the array, not the strings */
        size_t nsets;
        bool check;
};

/* -s: one more assignment, the array kept NULL-terminated. */
static int add_set(struct options *o, char *arg) {
        char **n = realloc(o->sets, (o->nsets + 2) * sizeof(char *));
        if (!n)
                return log_oom();
        o->sets = n;
        o->sets[o->nsets++] = arg;
        o->sets[o->nsets] = NULL;
        o->m.sets = o->sets;
        return 0;
}

/* -1 to go on, else the exit status. */
static int parse_options(int argc, char *argv[], struct options *o) {
        enum { ARG_CHECK_CONFIG = 0x100, ARG_VERSION };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "set", required_argument, NULL, 's' },
                { "duration", required_argument, NULL, 'd' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        const char *reason;
        int c;

        while ((c = getopt_long(argc, argv, ":c:s:d:vh", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        o->m.config_path = optarg;
                        o->m.explicit_config = true;
                        break;
                case 's':
                        if (add_set(o, optarg) < 0)
                                return EXIT_FAILURE;
                        break;
                case 'd':
                        if (parse_timespan(optarg, &o->m.duration_ns, &reason) < 0 ||
                            o->m.duration_ns == 0) {
                                log_error("--duration %s: %s", optarg,
                                          o->m.duration_ns == 0 && !reason ? "must be longer than 0"
                                                                           : reason);
                                return EXIT_USAGE;
                        }
                        break;
                case ARG_CHECK_CONFIG:
                        o->check = true;
                        break;
                case 'v':
                        log_set_max_level(LOG_LEVEL_DEBUG);
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("rtsoakd %s\n", PROJECT_VERSION);
                        return EXIT_SUCCESS;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("Unexpected argument '%s' (see --help)", argv[optind]);
                return EXIT_USAGE;
        }
        return -1;
}

/* --check-config: the effective configuration and where it came from. */
static int check_config(const struct daemon_config *cfg, char **sources, const struct options *o) {
        _cleanup_free_ char *text = daemon_config_text(cfg);
        printf("# rtsoakd effective configuration\n");
        if (!sources || !sources[0])
                printf("# from: built-in defaults\n");
        for (char **s = sources; s && *s; s++)
                printf("# from: %s\n", *s);
        for (size_t i = 0; i < o->nsets; i++)
                printf("# from: --set %s\n", o->sets[i]);
        fputs(text ?: "", stdout);
        return text ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char *argv[]) {
        struct options o = { .m.config_path = DAEMON_CONFIG_PATH };
        _cleanup_strv_free_ char **sources = NULL;
        struct daemon_config cfg = {};
        char err[CONF_ERROR_MAX];

        log_set_program("rtsoakd");
        int r = parse_options(argc, argv, &o);
        if (r < 0) {
                r = daemon_config_load(&cfg, o.m.config_path, o.m.explicit_config, o.sets, &sources,
                                       err);
                if (r < 0) {
                        log_error("%s", err);
                        r = EXIT_CONFIG;
                } else if (o.check)
                        r = check_config(&cfg, sources, &o);
                else {
                        struct manager *m = manager_new(&cfg, &o.m);
                        r = m ? manager_run(m) : (log_oom(), EXIT_FAILURE);
                        manager_free(m);
                }
                daemon_config_free(&cfg);
        }
        free(o.sets);
        return r;
}
