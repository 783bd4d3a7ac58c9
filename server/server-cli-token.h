/* SPDX-License-Identifier: MIT */
/* A new token on standard output, printed once: the commands that make one (enroll,
 * admin-token, read-token) say where it went, since the administrator often redirects it. */
#pragma once

#include <stddef.h>

#define CLI_TOKEN_WHERE_MAX 4200

/* Prints token and a newline on standard output and wipes token.  ret_where names the token
 * where it went, for the message that follows: "the token above" on a terminal, "the token in
 * PATH" when standard output is a file, "the token on standard output" else (a pipe).  0, or
 * -errno when it could not be written. */
int cli_token_print(char *token, char ret_where[static CLI_TOKEN_WHERE_MAX]);
