/* SPDX-License-Identifier: MIT */
/* rtsoak's trace commands: the flight recorder's captures (rtsoak traces), one capture read
 * the way rtla's auto-analysis reads or its raw events (rtsoak trace ID), and the recorder's
 * line in rtsoak status. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

int cli_traces(store *s, const struct store_filter *f, size_t limit, bool json);
/* One capture, analysed or (raw) its events as text: -ENOENT (logged) when the database has no
 * capture of that ID, which the command line named. */
int cli_trace(store *s, int64_t id, bool raw, bool json);
/* The run's flight recorder (state, why not, captures so far, and how many of the run's
 * violations were not captured): printed, or as JSON. */
void cli_trace_status_print(store *s, int64_t run_id, uint64_t violations);
json_t *cli_trace_status_json(store *s, int64_t run_id, uint64_t violations);
