/* SPDX-License-Identifier: MIT */
/* The JSON that the query routes' answers share (answer-json.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "params.h"
#include "query.h"

/* {"error": msg} (NULL without memory).  msg often quotes what the client sent, which may be
 * any bytes and may have been cut inside a character: what is not valid UTF-8 without control
 * characters becomes '?', since a JSON string must be UTF-8. */
json_t *farm_error_json(const char *msg);

/* A 200 with j, or a 500 when j is NULL (out of memory building it). */
void farm_api_json(struct farm_answer *a, json_t *j);

/* Adds "total", "limit", "offset" and "next" (the path and query of the next page, or null)
 * to o. */
int farm_api_add_page(json_t *o, const char *path, const struct farm_args *args,
                      const struct farm_page *page, uint64_t total);

/* A 200 with o holding list as key, and the page (both o and list the answer's, or freed);
 * a 500 when either is NULL (out of memory building them). */
void farm_api_list_answer(struct farm_answer *a, json_t *o, const char *key, json_t *list,
                          const char *path, const struct farm_args *args,
                          const struct farm_page *page, uint64_t total);

/* Adds "machine", "from_ns", "from", "to_ns", "to", "cpu" and "scenario" to o. */
int farm_api_window_fields(json_t *o, const char *machine, int64_t from, int64_t to, int64_t cpu,
                           const char *scenario);

/* A value of an answer written as text rather than built as JSON (thousands of steps or
 * histograms): key's value is text (NULL: null), or, with list, an array of the elements in
 * text. */
struct farm_api_splice {
        const char *key, *text;
        bool list;
};

/* A 200 with o as its head and the spliced values in place: o holds each key of splices, in
 * their order, as null where its value goes.  o stays the caller's; a 500 when out of memory. */
void farm_api_json_spliced(struct farm_answer *a, json_t *o, const struct farm_api_splice *splices,
                           size_t n);
