/* SPDX-License-Identifier: MIT */
/* rtsoak latest-stable SERIES: the newest qualified release of a series, by the farm server. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-farm.h"
#include "cli-output.h"
#include "cli-stable.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

#define STABLE_EXIT_NONE 2
#define STABLE_EXIT_UNKNOWN 3

static void stable_usage(FILE *f) {
        fprintf(f, "Usage: rtsoak latest-stable --server URL [OPTIONS] SERIES\n\n"
                   "Prints the release the farm server calls latest stable in SERIES (such as\n"
                   "6.6-rt): the newest release of the series, in kernel version order, whose\n"
                   "verdict is qualified.\n\n"
                   "  --server URL           the farm server (http:// or https://)\n"
                   "  --at TIME              as it was at TIME (RFC 3339, Unix ns, \"2d ago\")\n"
                   "  --json                 the server's whole answer as JSON\n"
                   "  --ca FILE              CA certificate(s) to verify an https server with\n"
                   "  --token-file FILE      a read token (rtsoak-server read-token) in the\n"
                   "                         file's first line, for a server that wants one\n"
                   "  --timeout SECONDS      give up after this long (default 60)\n"
                   "  -h, --help             show this help\n\n"
                   "Exit status: 0 with the release printed, 2 when the series has no qualified\n"
                   "release yet, 3 cannot tell (server unreachable, unknown series), 64 usage\n"
                   "error (also a --ca or --token-file that cannot be read).\n");
}

static int ask(const struct cli_farm *f, const char *series, const char *query, bool json) {
        _cleanup_free_ char *escaped = cli_farm_escape(series), *path = NULL;
        json_t *j = NULL;
        long status = 0;
        if (!escaped || asprintf(&path, "/api/v1/series/%s/latest-stable%s", escaped, query) < 0) {
                log_oom();
                return STABLE_EXIT_UNKNOWN;
        }
        if (cli_farm_get(f, path, &status, &j) < 0)
                return STABLE_EXIT_UNKNOWN;
        int ret = STABLE_EXIT_UNKNOWN;
        const char *err = json_string_value(json_object_get(j, "error"));
        json_t *stable = json_object_get(j, "latest_stable");
        const char *about = json_string_value(json_object_get(j, "series"));
        if (status != 200 || !stable)
                log_error("%s: the server answered %ld%s%s; the latest stable cannot be told",
                          series, status, err ? ": " : "", err ?: "");
        else if (!about || strcmp(about, series) != 0)
                /* Another series' answer (a proxy or a --server that rewrote the path) must not
                 * pass for this one's. */
                log_error("%s: the server answered about series %s; the latest stable cannot be "
                          "told",
                          series, cli_text(about ?: "(none)"));
        else if (json) {
                json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
                putchar('\n');
                ret = json_is_string(stable) ? 0 : STABLE_EXIT_NONE;
        } else if (json_is_string(stable)) {
                const char *since = json_string_value(json_object_get(j, "since"));
                /* As the server says it, escaped (text-safe.h). */
                printf("%s\n", cli_text(json_string_value(stable)));
                if (since)
                        fprintf(stderr, "%s: latest stable %s, qualified since %s\n", series,
                                cli_text(json_string_value(stable)), cli_text(since));
                ret = 0;
        } else {
                fprintf(stderr, "%s: no release has qualified yet (newest: %s, %s)\n", series,
                        cli_text(json_string_value(json_object_get(j, "newest")) ?: "none"),
                        cli_text(json_string_value(json_object_get(j, "newest_verdict")) ?: "?"));
                ret = STABLE_EXIT_NONE;
        }
        json_decref(j);
        if (fflush(stdout) != 0) {
                log_error_errno(errno, "Cannot print the answer: %m");
                ret = STABLE_EXIT_UNKNOWN;
        }
        return ret;
}

int cli_latest_stable(int argc, char **argv) {
        enum { ARG_AT = CLI_FARM_ARG_END, ARG_JSON };
        static const struct option options[] = {
                CLI_FARM_OPTION_SERVER,
                { "at", required_argument, NULL, ARG_AT },
                { "json", no_argument, NULL, ARG_JSON },
                CLI_FARM_OPTION_CA,
                CLI_FARM_OPTION_TIMEOUT,
                CLI_FARM_OPTION_TOKEN_FILE,
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct cli_farm f = { .timeout_s = 60 };
        char query[48] = "";
        bool json = false;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case CLI_FARM_ARG_SERVER ... CLI_FARM_ARG_END - 1:
                        if (!cli_farm_option(&f, c, optarg))
                                return EXIT_USAGE;
                        break;
                case ARG_AT: {
                        const char *reason = NULL;
                        int64_t at;
                        if (parse_timestamp(optarg, now_ns(CLOCK_REALTIME), &at, &reason) < 0) {
                                log_error("--at %s: %s", optarg, reason ?: "not a point in time");
                                return EXIT_USAGE;
                        }
                        snprintf(query, sizeof(query), "?at=%lld", (long long) at);
                        break;
                }
                case ARG_JSON:
                        json = true;
                        break;
                case 'h':
                        stable_usage(stdout);
                        return 0;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (!cli_farm_server_ok(&f, "latest-stable"))
                return EXIT_USAGE;
        if (argc - optind != 1) {
                log_error("latest-stable takes exactly one SERIES (see rtsoak latest-stable "
                          "--help)");
                return EXIT_USAGE;
        }
        return ask(&f, argv[optind], query, json);
}
