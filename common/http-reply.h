/* SPDX-License-Identifier: MIT */
/* What a client of the farm server keeps of an HTTP answer: the start of the body, the
 * Retry-After header, and the server's error message in one line.  The callbacks fit
 * libcurl's CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (this file needs no libcurl). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define HTTP_REPLY_BODY_MAX 4096

struct http_reply {
        char body[HTTP_REPLY_BODY_MAX]; /* NUL-terminated; a longer body is cut */
        size_t len;
        char retry_after[64];
};

void http_reply_reset(struct http_reply *r);
size_t http_reply_on_body(char *data, size_t size, size_t n, void *reply);
size_t http_reply_on_header(char *data, size_t size, size_t n, void *reply);
/* "HTTP 400: <the error of a JSON body {"error": ...}, or the body as it is>", with control and
 * bidirectional formatting characters escaped (text-safe.h: it goes into databases, logs and
 * terminals). */
void http_reply_message(const struct http_reply *r, long status, char *buf, size_t len);
/* Retry-After: delay-seconds or an HTTP date; the wait in ns from now_real_ns (CLOCK_REALTIME),
 * at most a day; 0 when absent, past or not understood. */
uint64_t http_parse_retry_after(const char *value, int64_t now_real_ns);
