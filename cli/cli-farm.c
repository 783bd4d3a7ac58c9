/* SPDX-License-Identifier: MIT */
/* One GET of a farm server's JSON API with libcurl, for the commands that ask the farm. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-farm.h"
#include "cli-output.h"
#include "buf-grow.h"
#include "log.h"
#include "macro.h"
#include "token-file.h"

#define BODY_MAX (64 << 20)

/* The header with --token-file's token, once cli_farm_server_ok() read it. */
static char authorization[TOKEN_FILE_MAX + 64];

static bool parse_timeout(const char *text, long *ret) {
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno || end == text || *end || v < 1 || v > 3600) {
                log_error("--timeout %s: expected whole seconds from 1 to 3600", text);
                return false;
        }
        *ret = v;
        return true;
}

bool cli_farm_option(struct cli_farm *f, int c, const char *value) {
        switch (c) {
        case CLI_FARM_ARG_SERVER:
                f->server = value;
                break;
        case CLI_FARM_ARG_CA:
                f->ca = value;
                break;
        case CLI_FARM_ARG_TIMEOUT:
                return parse_timeout(value, &f->timeout_s);
        case CLI_FARM_ARG_TOKEN_FILE:
                f->token_file = value;
                break;
        }
        return true;
}

/* --ca names a file of PEM certificates that can be read: a wrong one is the command line's
 * mistake (64), found before the server is asked, not an answer that cannot be told (3). */
static bool ca_ok(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        char head[65536];
        ssize_t n = -1;
        if (fd >= 0 && fstat(fd, &st) == 0)
                n = S_ISREG(st.st_mode) ? read(fd, head, sizeof(head) - 1) : 0;
        if (n < 0) {
                log_error_errno(errno, "--ca %s: cannot read: %m", path);
                return false;
        }
        head[n] = '\0';
        if (!strstr(head, "-----BEGIN CERTIFICATE-----")) {
                log_error("--ca %s: not a file of PEM certificates (-----BEGIN CERTIFICATE-----)",
                          path);
                return false;
        }
        return true;
}

bool cli_farm_server_ok(const struct cli_farm *f, const char *command) {
        if (!f->server) {
                log_error("%s needs --server URL (the farm server)", command);
                return false;
        }
        if (strncmp(f->server, "http://", 7) != 0 && strncmp(f->server, "https://", 8) != 0) {
                log_error("--server %s: expected an http:// or https:// URL", f->server);
                return false;
        }
        /* The API's paths are appended to it: a query or a fragment would make them part of
         * it, and the answer one about something else (a path prefix, as behind a reverse
         * proxy, is fine). */
        if (strpbrk(f->server, "?#")) {
                log_error("--server %s: expected the server's URL without a query or fragment "
                          "(? or #)",
                          cli_text(f->server));
                return false;
        }
        if (f->ca && !ca_ok(f->ca))
                return false;
        if (!f->token_file)
                return true;
        char err[TOKEN_MESSAGE_MAX], warning[TOKEN_MESSAGE_MAX];
        char *token = NULL;
        if (token_file_read(f->token_file, &token, err, warning) < 0) {
                log_error("--token-file %s", err);
                return false;
        }
        if (warning[0])
                log_warning("--token-file %s", warning);
        if (token_in_clear(f->server))
                log_warning("--server %s: the token goes to another host over plain HTTP, "
                            "readable by anyone on the way (use https://)",
                            f->server);
        snprintf(authorization, sizeof(authorization), "Authorization: Bearer %s", token);
        explicit_bzero(token, strlen(token));
        free(token);
        return true;
}

struct body {
        char *data;
        size_t len, cap;
};

static size_t on_data(char *p, size_t size, size_t n, void *userdata) {
        struct body *b = userdata;
        size_t add = size * n;
        if (b->len + add > BODY_MAX)
                return 0;
        if (grow_bytes(&b->data, &b->cap, b->len + add + 1) < 0)
                return 0;
        memcpy(b->data + b->len, p, add);
        b->len += add;
        b->data[b->len] = '\0';
        return add;
}

char *cli_farm_escape(const char *segment) {
        char *e = curl_easy_escape(NULL, segment, 0), *copy = e ? strdup(e) : NULL;
        curl_free(e);
        return copy;
}

int cli_farm_get(const struct cli_farm *f, const char *path, long *ret_status, json_t **ret) {
        size_t sl = strlen(f->server);
        while (sl > 0 && f->server[sl - 1] == '/')
                sl--;
        _cleanup_free_ char *url = NULL;
        if (asprintf(&url, "%.*s%s", (int) sl, f->server, path) < 0)
                return log_oom();
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
                log_error("Cannot initialise libcurl");
                return -EIO;
        }
        CURL *h = curl_easy_init();
        struct body b = {};
        int r = -EIO;
        if (!h) {
                log_oom();
                goto out;
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, f->timeout_s);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, MIN(f->timeout_s, 10L));
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (f->ca)
                curl_easy_setopt(h, CURLOPT_CAINFO, f->ca);
        struct curl_slist *headers = authorization[0] ? curl_slist_append(NULL, authorization)
                                                      : NULL;
        if (headers)
                curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        CURLcode rc = curl_easy_perform(h);
        curl_slist_free_all(headers);
        if (rc != CURLE_OK) {
                log_error("Cannot reach %.*s: %s; the answer cannot be told", (int) sl, f->server,
                          curl_easy_strerror(rc));
                goto out;
        }
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
        *ret = json_loadb(b.data ?: "", b.len, 0, NULL);
        r = 0;
out:
        free(b.data);
        if (h)
                curl_easy_cleanup(h);
        curl_global_cleanup();
        return r;
}
