/* SPDX-License-Identifier: MIT */
/* rtsoak verdict: asks a farm server whether a kernel release qualifies, for gating scripts. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-farm.h"
#include "cli-output.h"
#include "cli-junit.h"
#include "cli-verdict.h"
#include "log.h"
#include "macro.h"
#include "text-safe.h"
#include "timeutil.h"

static void verdict_usage(FILE *f) {
        fprintf(f, "Usage: rtsoak verdict --server URL [OPTIONS] RELEASE\n\n"
                   "Asks the farm server whether kernel RELEASE qualifies as latest stable and\n"
                   "prints the verdict with its reasons.\n\n"
                   "  --server URL           the farm server (http:// or https://)\n"
                   "  --at TIME              the verdict about TIME (RFC 3339, Unix ns,\n"
                   "                         \"2d ago\"), with all the data received since\n"
                   "  --known-at TIME        the verdict the server gave (or would have) at TIME\n"
                   "  --json                 the server's whole answer as JSON\n"
                   "  --junit FILE           also write the verdict as JUnit XML to FILE (a test\n"
                   "                         case per gating machine), for CI systems\n"
                   "  --ca FILE              CA certificate(s) to verify an https server with\n"
                   "  --token-file FILE      a read token (rtsoak-server read-token) in the\n"
                   "                         file's first line, for a server that wants one\n"
                   "  --timeout SECONDS      give up after this long (default 60)\n"
                   "  -h, --help             show this help\n\n"
                   "Exit status: 0 qualified, 1 failed, 2 pending, 3 cannot tell (server\n"
                   "unreachable, unknown release, unexpected answer, --junit FILE not\n"
                   "written), 64 usage error (also a --ca or --token-file that cannot be read).\n");
}

static void print_verdict(const char *release, json_t *j) {
        const char *status = json_string_value(json_object_get(j, "verdict"));
        const char *at = json_string_value(json_object_get(j, "at"));
        char upper[16];
        size_t i = 0;
        for (; status && status[i] && i < sizeof(upper) - 1; i++)
                upper[i] = (char) (status[i] >= 'a' && status[i] <= 'z' ? status[i] - 32
                                                                        : status[i]);
        upper[i] = '\0';
        /* What the server says is shown escaped: a hostname or a waiver's reason must not
         * colour the terminal, forge a line of the verdict or turn its words around. */
        fputs(release, stdout);
        fputs(": ", stdout);
        text_fputs(upper, stdout);
        fputs(" (as of ", stdout);
        text_fputs(at ?: "?", stdout);
        fputs(")\n", stdout);
        json_t *reasons = json_object_get(j, "reasons"), *problems = json_object_get(j, "problems"),
               *r, *p;
        size_t k, q;
        json_array_foreach (reasons, k, r) {
                fputs("  ", stdout);
                text_fputs(json_string_value(r), stdout);
                putchar('\n');
                /* Under a problem's line, what the machine's flight recorder names as its
                 * cause. */
                json_array_foreach (problems, q, p) {
                        const char *msg = json_string_value(json_object_get(p, "message"));
                        const char *culprit = json_string_value(json_object_get(p, "culprit"));
                        if (culprit && msg && json_string_value(r) &&
                            strcmp(msg, json_string_value(r)) == 0) {
                                fputs("    culprit: ", stdout);
                                text_fputs(culprit, stdout);
                                putchar('\n');
                                break;
                        }
                }
        }
}

/* A time option as Unix nanoseconds for the query string. */
static bool time_arg(const char *opt, const char *text, int64_t *ret) {
        const char *reason = NULL;
        if (parse_timestamp(text, now_ns(CLOCK_REALTIME), ret, &reason) < 0) {
                log_error("%s %s: %s", opt, text, reason ?: "not a point in time");
                return false;
        }
        return true;
}

/* The verdict for a CI system, when --junit asks for it; a file that cannot be written
 * makes the verdict unknown to the job. */
static int junit(const char *path, const struct cli_farm *f, const char *release, json_t *v,
                 const char *error, int ret) {
        if (!path)
                return ret;
        return cli_junit_write(path, release, f->server, v, error) < 0 ? VERDICT_EXIT_UNKNOWN : ret;
}

static int ask(const struct cli_farm *f, const char *release, const char *query, bool json,
               const char *junit_path) {
        _cleanup_free_ char *escaped = cli_farm_escape(release), *path = NULL;
        json_t *j = NULL;
        long status = 0;
        if (!escaped || asprintf(&path, "/api/v1/kernels/%s/verdict%s", escaped, query) < 0) {
                log_oom();
                return VERDICT_EXIT_UNKNOWN;
        }
        if (cli_farm_get(f, path, &status, &j) < 0)
                return junit(junit_path, f, release, NULL, "the server could not be asked",
                             VERDICT_EXIT_UNKNOWN);
        const char *err = json_string_value(json_object_get(j, "error"));
        const char *v = json_string_value(json_object_get(j, "verdict"));
        int ret = VERDICT_EXIT_UNKNOWN;
        char why[512];
        if (status != 200) {
                snprintf(why, sizeof(why), "the server answered %ld%s%s", status, err ? ": " : "",
                         err ?: "");
                log_error("%s: %s; the verdict cannot be told", release, why);
                ret = junit(junit_path, f, release, NULL, why, ret);
        } else if (!v) {
                log_error("%s: the server's answer is not a verdict", release);
                ret = junit(junit_path, f, release, NULL, "the server's answer is not a verdict",
                            ret);
        } else if (!json_is_string(json_object_get(j, "release")) ||
                   strcmp(json_string_value(json_object_get(j, "release")), release) != 0) {
                /* A verdict of another release (a proxy or a --server that rewrote the path)
                 * must not pass for this one's. */
                log_error("%s: the server answered about release %s; the verdict cannot be told",
                          release,
                          cli_text(json_string_value(json_object_get(j, "release")) ?: "(none)"));
                ret = junit(junit_path, f, release, NULL,
                            "the server's answer is about another release", ret);
        } else {
                ret = strcmp(v, "qualified") == 0 ? VERDICT_EXIT_QUALIFIED
                      : strcmp(v, "failed") == 0  ? VERDICT_EXIT_FAILED
                      : strcmp(v, "pending") == 0 ? VERDICT_EXIT_PENDING
                                                  : VERDICT_EXIT_UNKNOWN;
                if (json) {
                        /* ASCII only: C1 controls and bidi overrides as \u escapes too. */
                        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
                        putchar('\n');
                } else
                        print_verdict(release, j);
                if (fflush(stdout) != 0) {
                        log_error_errno(errno, "Cannot print the verdict: %m");
                        ret = VERDICT_EXIT_UNKNOWN;
                }
                ret = junit(junit_path, f, release, j, NULL, ret);
        }
        json_decref(j);
        return ret;
}

int cli_verdict(int argc, char **argv) {
        enum { ARG_AT = CLI_FARM_ARG_END, ARG_KNOWN_AT, ARG_JSON, ARG_JUNIT };
        static const struct option options[] = {
                CLI_FARM_OPTION_SERVER,
                { "at", required_argument, NULL, ARG_AT },
                { "known-at", required_argument, NULL, ARG_KNOWN_AT },
                { "json", no_argument, NULL, ARG_JSON },
                CLI_FARM_OPTION_CA,
                CLI_FARM_OPTION_TIMEOUT,
                { "junit", required_argument, NULL, ARG_JUNIT },
                CLI_FARM_OPTION_TOKEN_FILE,
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct cli_farm f = { .timeout_s = 60 };
        int64_t at = 0, known = 0;
        bool json = false, have_at = false, have_known = false;
        const char *junit_path = NULL;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case CLI_FARM_ARG_SERVER ... CLI_FARM_ARG_END - 1:
                        if (!cli_farm_option(&f, c, optarg))
                                return EXIT_USAGE;
                        break;
                case ARG_AT:
                        if (!time_arg("--at", optarg, &at))
                                return EXIT_USAGE;
                        have_at = true;
                        break;
                case ARG_KNOWN_AT:
                        if (!time_arg("--known-at", optarg, &known))
                                return EXIT_USAGE;
                        have_known = true;
                        break;
                case ARG_JSON:
                        json = true;
                        break;
                case ARG_JUNIT:
                        junit_path = optarg;
                        break;
                case 'h':
                        verdict_usage(stdout);
                        return 0;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (!cli_farm_server_ok(&f, "verdict"))
                return EXIT_USAGE;
        if (argc - optind != 1) {
                log_error("verdict takes exactly one RELEASE (see rtsoak verdict --help)");
                return EXIT_USAGE;
        }
        char query[96] = "";
        size_t n = 0;
        if (have_at)
                n += (size_t) snprintf(query + n, sizeof(query) - n, "?at=%lld", (long long) at);
        if (have_known)
                snprintf(query + n, sizeof(query) - n, "%sknown_at=%lld", n ? "&" : "?",
                         (long long) known);
        return ask(&f, argv[optind], query, json, junit_path);
}
