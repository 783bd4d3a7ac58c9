/* SPDX-License-Identifier: MIT */
/* Output helpers of the rtsoak command: latency figures for people, JSON documents for
 * scripts. */
#pragma once

#include <jansson.h>
#include <stdint.h>

/* Nanoseconds as microseconds with one decimal ("812.3"); "-" for none. */
char *fmt_us(char buf[static 32], uint64_t ns);
/* Writes the JSON document to stdout, indented, followed by a newline. */
int print_json(json_t *doc);
/* An RFC 3339 UTC string, as a JSON string. */
json_t *json_time(int64_t ns);
json_t *json_u64(uint64_t v);
/* s with control and bidirectional formatting characters escaped (text-safe.h), for a
 * terminal: what the server answered or a journal line must not colour it or forge lines.
 * The text is kept until eight more calls (so that several go into one printf). */
const char *cli_text(const char *s);
