/* SPDX-License-Identifier: MIT */
/* Asking a farm server from the command line: the options every such command takes
 * (--server, --ca, --timeout) and one GET that answers JSON. */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

struct cli_farm {
        const char *server; /* http:// or https://, trailing slashes allowed */
        const char *ca;
        const char *token_file; /* a read or staff token in its first line, or NULL */
        long timeout_s;
};

/* The getopt_long values of the options every such command takes; a command's own options
 * are numbered from CLI_FARM_ARG_END on. */
enum {
        CLI_FARM_ARG_SERVER = 0x100,
        CLI_FARM_ARG_CA,
        CLI_FARM_ARG_TIMEOUT,
        CLI_FARM_ARG_TOKEN_FILE,
        CLI_FARM_ARG_END,
};
#define CLI_FARM_OPTION_SERVER \
        { "server", required_argument, NULL, CLI_FARM_ARG_SERVER }
#define CLI_FARM_OPTION_CA \
        { "ca", required_argument, NULL, CLI_FARM_ARG_CA }
#define CLI_FARM_OPTION_TIMEOUT \
        { "timeout", required_argument, NULL, CLI_FARM_ARG_TIMEOUT }
#define CLI_FARM_OPTION_TOKEN_FILE \
        { "token-file", required_argument, NULL, CLI_FARM_ARG_TOKEN_FILE }

/* Takes the value of farm option c (CLI_FARM_ARG_*) into f: false (logged) when it is bad (a
 * --timeout that is not whole seconds from 1 to 3600). */
bool cli_farm_option(struct cli_farm *f, int c, const char *value);
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
