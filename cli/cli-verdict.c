/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-verdict.h"
#include "log.h"
#include "macro.h"
#include "text-safe.h"
#include "timeutil.h"
#include "token-file.h"

#define BODY_MAX (64 << 20)

static void verdict_usage(FILE *f) {
        fprintf(f, "Usage: rtsoak verdict --server URL [OPTIONS] RELEASE\n\n"
                   "Asks the farm server whether kernel RELEASE qualifies as latest stable and\n"
                   "prints the verdict with its reasons.\n\n"
                   "  --server URL           the farm server (http:// or https://)\n"
                   "  --at TIME              the verdict as it was at TIME (RFC 3339, Unix ns,\n"
                   "                         \"2d ago\")\n"
                   "  --json                 the server's whole answer as JSON\n"
                   "  --ca FILE              CA certificate(s) to verify an https server with\n"
                   "  --token-file FILE      a read token (rtsoak-server read-token) in the\n"
                   "                         file's first line, for a server that wants one\n"
                   "  --timeout SECONDS      give up after this long (default 60)\n"
                   "  -h, --help             show this help\n\n"
                   "Exit status: 0 qualified, 1 failed, 2 pending, 3 cannot tell (server\n"
                   "unreachable, unknown release, unexpected answer), 64 usage error.\n");
}

struct body {
        char *data;
        size_t len;
};

static size_t on_data(char *p, size_t size, size_t n, void *userdata) {
        struct body *b = userdata;
        size_t add = size * n;
        if (b->len + add > BODY_MAX)
                return 0;
        char *d = realloc(b->data, b->len + add + 1);
        if (!d)
                return 0;
        memcpy(d + b->len, p, add);
        b->len += add;
        d[b->len] = '\0';
        b->data = d;
        return add;
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
        json_t *reasons = json_object_get(j, "reasons"), *r;
        size_t k;
        json_array_foreach (reasons, k, r) {
                fputs("  ", stdout);
                text_fputs(json_string_value(r), stdout);
                putchar('\n');
        }
}

int cli_verdict(int argc, char **argv) {
        enum { ARG_SERVER = 0x100, ARG_AT, ARG_JSON, ARG_CA, ARG_TIMEOUT, ARG_TOKEN_FILE };
        static const struct option options[] = {
                { "server", required_argument, NULL, ARG_SERVER },
                { "at", required_argument, NULL, ARG_AT },
                { "json", no_argument, NULL, ARG_JSON },
                { "ca", required_argument, NULL, ARG_CA },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *server = NULL, *ca = NULL, *reason, *token_file = NULL;
        int64_t at = 0;
        bool json = false, have_at = false;
        long timeout = 60;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case ARG_SERVER:
                        server = optarg;
                        break;
                case ARG_AT:
                        if (parse_timestamp(optarg, now_ns(CLOCK_REALTIME), &at, &reason) < 0) {
                                log_error("--at %s: %s", optarg, reason);
                                return 64;
                        }
                        have_at = true;
                        break;
                case ARG_JSON:
                        json = true;
                        break;
                case ARG_CA:
                        ca = optarg;
                        break;
                case ARG_TOKEN_FILE:
                        token_file = optarg;
                        break;
                case ARG_TIMEOUT: {
                        char *end;
                        errno = 0;
                        timeout = strtol(optarg, &end, 10);
                        if (errno || *end || timeout < 1 || timeout > 3600) {
                                log_error("--timeout %s: expected whole seconds from 1 to 3600",
                                          optarg);
                                return 64;
                        }
                        break;
                }
                case 'h':
                        verdict_usage(stdout);
                        return 0;
                default:
                        verdict_usage(stderr);
                        return 64;
                }
        if (!server) {
                log_error("verdict needs --server URL (the farm server)");
                return 64;
        }
        if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0) {
                log_error("--server %s: expected an http:// or https:// URL", server);
                return 64;
        }
        if (argc - optind != 1) {
                log_error("verdict takes exactly one RELEASE (see rtsoak verdict --help)");
                return 64;
        }
        const char *release = argv[optind];
        _cleanup_free_ char *token = NULL, *auth = NULL;
        if (token_file) {
                char err[TOKEN_MESSAGE_MAX], warning[TOKEN_MESSAGE_MAX];
                if (token_file_read(token_file, &token, err, warning) < 0) {
                        log_error("--token-file %s", err);
                        return 64;
                }
                if (warning[0])
                        log_warning("--token-file %s", warning);
                if (token_in_clear(server))
                        log_warning("--server %s: the token goes to another host over plain "
                                    "HTTP, readable by anyone on the way (use https://)",
                                    server);
                if (asprintf(&auth, "Authorization: Bearer %s", token) < 0)
                        return log_oom(), VERDICT_EXIT_UNKNOWN;
        }

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                log_error("Cannot initialise libcurl");
                return VERDICT_EXIT_UNKNOWN;
        }
        CURL *h = curl_easy_init();
        struct body b = {};
        int ret = VERDICT_EXIT_UNKNOWN;
        char *escaped = h ? curl_easy_escape(h, release, 0) : NULL;
        _cleanup_free_ char *url = NULL;
        size_t sl = strlen(server);
        while (sl > 0 && server[sl - 1] == '/')
                sl--;
        if (!escaped || asprintf(&url, "%.*s/api/v1/kernels/%s/verdict%s%lld", (int) sl, server,
                                 escaped, have_at ? "?at=" : "", (long long) at) < 0) {
                log_oom();
                goto out;
        }
        if (!have_at)
                url[strlen(url) - 1] = '\0'; /* the "0" of no --at */
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, MIN(timeout, 10L));
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (ca)
                curl_easy_setopt(h, CURLOPT_CAINFO, ca);
        struct curl_slist *headers = auth ? curl_slist_append(NULL, auth) : NULL;
        if (headers)
                curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        CURLcode rc = curl_easy_perform(h);
        curl_slist_free_all(headers);
        if (rc != CURLE_OK) {
                log_error("Cannot reach %.*s: %s; the verdict cannot be told", (int) sl, server,
                          curl_easy_strerror(rc));
                goto out;
        }
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        json_error_t je;
        json_t *j = json_loadb(b.data ?: "", b.len, 0, &je);
        const char *err = json_string_value(json_object_get(j, "error"));
        if (status != 200) {
                log_error("%s: the server answered %ld%s%s; the verdict cannot be told", release,
                          status, err ? ": " : "", err ?: "");
                json_decref(j);
                goto out;
        }
        const char *v = json_string_value(json_object_get(j, "verdict"));
        if (!v) {
                log_error("%s: the server's answer is not a verdict%s%s", release,
                          j ? "" : ": not JSON: ", j ? "" : je.text);
                json_decref(j);
                goto out;
        }
        ret = strcmp(v, "qualified") == 0 ? VERDICT_EXIT_QUALIFIED
              : strcmp(v, "failed") == 0  ? VERDICT_EXIT_FAILED
              : strcmp(v, "pending") == 0 ? VERDICT_EXIT_PENDING
                                          : VERDICT_EXIT_UNKNOWN;
        if (json) {
                /* ASCII only: C1 controls and bidirectional overrides as \u escapes too. */
                json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
                putchar('\n');
        } else
                print_verdict(release, j);
        json_decref(j);
        if (fflush(stdout) != 0) {
                log_error_errno(errno, "Cannot print the verdict: %m");
                ret = VERDICT_EXIT_UNKNOWN;
        }
out:
        curl_free(escaped);
        free(b.data);
        if (h)
                curl_easy_cleanup(h);
        curl_global_cleanup();
        return ret;
}
