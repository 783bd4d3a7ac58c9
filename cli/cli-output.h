/* SPDX-License-Identifier: MIT */
/* Output helpers of the rtsoak command: latency figures for people, JSON documents for
 * scripts. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "json-time.h" /* json_time(), json_set_time() */

/* Nanoseconds as microseconds with one decimal ("812.3"); "-" for none. */
char *fmt_us(char buf[static 32], uint64_t ns);
/* Writes the JSON document to stdout, indented, followed by a newline. */
int print_json(json_t *doc);
json_t *json_u64(uint64_t v);
/* s with control and bidirectional formatting characters escaped (text-safe.h), for a
 * terminal: what the server answered or a journal line must not colour it or forge lines.
 * The text is kept until eight more calls (so that several go into one printf). */
const char *cli_text(const char *s);
