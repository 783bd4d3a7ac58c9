/* SPDX-License-Identifier: MIT */
/* The flight recorder's captures on the farm: stored from the summaries, found for a violation
 * (the culprit line of the verdict's problems and the dashboard's violation rows), listed and
 * read with their raw events for the API (server/api/captures.c answers them). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "capture-model.h"
#include "db.h"
#include "sql.h"
#include "summary.h"
#include "trace-analysis.h"

#define FARM_API_TRACES "/api/v1/traces"
/* The raw events as the dashboard links them, /traces/ID.txt: a page's path, so that they are
 * read with the pages' access wherever the API's differs. */
#define FARM_DASH_TRACES "/traces/"

/* Stores the captures an interval carries, inside the upload's transaction on c; one stored
 * before (the same run, CPU and due time) stays as it was. */
int farm_store_traces(sql_conn *c, int64_t run, const struct summary_interval *iv, char *err);

struct farm_trace_brief {
        int64_t id;
        char summary[TRACE_SUMMARY_MAX];
        bool raw; /* its raw events are on the server */
};

/* The capture that explains a violation of a machine (any of its runs) on cpu within
 * [from, to): the one of the violation's time at if there is one, else the worst.  0 with
 * *ret, -ENOENT if there is none, or -errno. */
int farm_trace_find_machine(farm_db *db, const char *machine_id, int cpu, int64_t from_ns,
                            int64_t to_ns, int64_t at_ns, struct farm_trace_brief *ret);
/* Whether the machine has any capture in [from, to), on any CPU: 0 with *ret, or -errno. */
int farm_trace_any_machine(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                           bool *ret);
/* The same for one run (its row id), for a caller that keeps its statements prepared. */
#define FARM_TRACE_FIND_SQL                                                             \
        "SELECT t.id, t.summary, t.raw IS NOT NULL FROM traces t WHERE t.run = ?1 AND " \
        "t.cpu = ?2 AND t.time_ns >= ?3 AND t.time_ns < ?4 "                            \
        "ORDER BY t.time_ns = ?5 DESC, t.latency_ns DESC, t.id LIMIT 1"
/* The capture that explains a violation of run (its row id) on cpu in [from_ns, to_ns) at at_ns,
 * as farm_trace_find_machine() picks it: 0 with *ret, -ENOENT without one.  find is a statement
 * of FARM_TRACE_FIND_SQL, freshly reset. */
int farm_trace_find_run(sql_stmt *find, int64_t run, int cpu, int64_t from_ns, int64_t to_ns,
                        int64_t at_ns, struct farm_trace_brief *ret);

/* Captures in one answer of the list. */
#define FARM_TRACES_LIST_MAX 1000

/* The captures of machine_id in [from_ns, to_ns) on cpu (-1: every CPU), the latest first (by
 * time, then id), at most limit of them; without their analysis.  0 with *ret, or -errno with
 * err. */
int farm_traces_list(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                     int64_t cpu, uint64_t limit, struct farm_capture_list *ret, char *err);
/* Capture id with its analysis, and with its raw events inflated into *raw_text when raw_text
 * is not NULL (NULL there when they are not on the server).  0 with *ret, -ENOENT for no such
 * capture, or -errno with err. */
int farm_trace_get(farm_db *db, int64_t id, struct farm_capture *ret, char **raw_text, char *err);
