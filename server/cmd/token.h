/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about the staff's and the readers' tokens (admin-token,
 * admin-revoke, read-token, read-revoke), and a new token printed once on standard output. */
#pragma once

#include <stddef.h>

#include "command.h"

#define CLI_TOKEN_WHERE_MAX 4200

/* Prints token and a newline on standard output and wipes token.  ret_where names the token
 * where it went, for the message that follows: "the token above" on a terminal, "the token in
 * PATH" when standard output is a file, "the token on standard output" else (a pipe).  0, or
 * -errno when it could not be written.  enroll, admin-token and read-token print with it. */
int cli_token_print(char *token, char ret_where[static CLI_TOKEN_WHERE_MAX]);

/* admin-token NAME, admin-revoke NAME: a staff token made (printed once) or revoked. */
int cli_admin_token(const struct server_options *o, char **args, int n);
int cli_admin_revoke(const struct server_options *o, char **args, int n);
/* read-token NAME, read-revoke NAME: a read token made (printed once) or revoked. */
int cli_read_token(const struct server_options *o, char **args, int n);
int cli_read_revoke(const struct server_options *o, char **args, int n);
