/* SPDX-License-Identifier: MIT */
/* Times in JSON answers and outputs: "NAME_ns" (integer nanoseconds since the epoch) always
 * with its RFC 3339 twin "NAME" (UTC, as precise as the value). */
#pragma once

#include <jansson.h>
#include <stdint.h>

#define JSON_TIME_NONE INT64_MIN /* both fields null */

/* The RFC 3339 text of ns ("2026-12-03T08:00:00.5Z"). */
json_t *json_time(int64_t ns);
/* Sets key_ns (which must end in "_ns") to ns and its twin (key_ns without "_ns") to the same
 * moment as RFC 3339; JSON_TIME_NONE sets both to null.  0, or -1 on a bad key or no memory. */
int json_set_time(json_t *o, const char *key_ns, int64_t ns);
