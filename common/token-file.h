/* SPDX-License-Identifier: MIT */
/* A bearer token kept in a file (the machine's upload token, a read token for rtsoak), and the
 * two ways of giving it away: a file every user can read, and plain HTTP to another host. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define TOKEN_FILE_MAX 512
#define TOKEN_MESSAGE_MAX 512

/* The first line of path, without surrounding spaces: -errno with err when it cannot be read,
 * -EINVAL when it holds no token or bytes that cannot go into an HTTP header.  *warning is
 * set ("" when none) when the file is readable by every user. */
int token_file_read(const char *path, char **ret, char err[static TOKEN_MESSAGE_MAX],
                    char warning[static TOKEN_MESSAGE_MAX]);

/* Whether a token sent to url travels in clear over a network: http:// to a host that is not
 * loopback (localhost, 127.0.0.0/8, ::1).  A name is not resolved: only "localhost" counts as
 * loopback. */
bool token_in_clear(const char *url);
