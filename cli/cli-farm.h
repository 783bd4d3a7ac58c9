/* SPDX-License-Identifier: MIT */
/* Asking a farm server from the command line: the options every such command takes
 * (--server, --ca, --timeout) and one GET that answers JSON. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

struct cli_farm {
        const char *server; /* http:// or https://, trailing slashes allowed */
        const char *ca;
        const char *token_file; /* a read or staff token in its first line, or NULL */
        long timeout_s;
};

/* Parses the value of --timeout (whole seconds, 1-3600): false (logged) when it is bad. */
bool cli_farm_timeout(const char *text, long *ret);
/* Checks --server (false, logged, when missing or not an http(s) URL), that --ca is a file of
 * PEM certificates that can be read, and reads the token of --token-file (false when it cannot
 * be read), warning about a file every user can read and about a token that would go to
 * another host over plain HTTP.  false is a usage error (64) of the command. */
bool cli_farm_server_ok(const struct cli_farm *f, const char *command);

/* GETs path (already escaped, with its query) from the server: 0 with the status and the
 * answer parsed as JSON (NULL when it is not JSON), or -EIO when the server cannot be reached
 * (logged, saying that the answer cannot be told). */
int cli_farm_get(const struct cli_farm *f, const char *path, long *ret_status, json_t **ret);

/* path segment escaped for a URL (allocated). */
char *cli_farm_escape(const char *segment);
