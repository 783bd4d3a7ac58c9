/* SPDX-License-Identifier: MIT */
/* The header fields of a request head, checked for what lets two parsers frame one stream
 * differently (request smuggling through a proxy) before any route reads them. */
#pragma once

#include <stddef.h>

#define FARM_HEAD_ERROR_MAX 256

/* One header field as libmicrohttpd parsed it: the name is what came before the first colon
 * of its line (whitespace included), the value what came after it, leading whitespace left
 * out. */
struct farm_field {
        const char *name, *value;
};

/* Checks the fields of a request of HTTP version (as its request line spells it, "HTTP/1.1"):
 * 0 when the head may be served; else the status to answer, 400 (or 501 for a transfer coding
 * other than chunked) with err naming the field and the fault, after which the connection
 * must be closed: what follows the head on it cannot be trusted to be a body or a request.
 *
 * Refused: a field name that is not a token (whitespace before the colon, a line starting
 * with whitespace, a folded line); a name that starts with Content-Length or
 * Transfer-Encoding and goes on (libmicrohttpd appends a folded line to the name); a control
 * character in a value; Host, Content-Length, Transfer-Encoding or Authorization more than
 * once; Content-Length that is not digits, or with Transfer-Encoding; Transfer-Encoding in
 * HTTP/1.0, or other than "chunked" alone; no Host in HTTP/1.1, or one that is not a host
 * and an optional port. */
unsigned farm_head_check(const char *version, const struct farm_field *fields, size_t n,
                         char err[static FARM_HEAD_ERROR_MAX]);
