/* SPDX-License-Identifier: MIT */
/* Inside the query API: what its routes share (answers, parameter checks, the paging of a
 * list, the machine and window of a query) and the route handlers of server-query.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "db-internal.h"
#include "day-rows.h"
#include "machine-model.h"
#include "params.h"
#include "query.h"

#define DAY_NS FARM_DAY_NS
#define CPU_MAX FARM_CPU_MAX /* a query's cpu= is below it */

/* Adds b to *a, saturating at 2^63-1: totals of intervals that overlap (a machine may send
 * them) must not wrap, and JSON readers take no more. */
static inline void sat_add(uint64_t *a, uint64_t b) {
        if (__builtin_add_overflow(*a, b, a) || *a > INT64_MAX)
                *a = INT64_MAX;
}

/* An integer column, FARM_NONE for NULL (grow.h). */
static inline int64_t query_col_int(sql_stmt *st, int col) {
        return sql_column_null(st, col) ? FARM_NONE : sql_column_int64(st, col);
}

/* ---- answers ---- */

/* A refusal: status with {"error": the message}. */
void query_error(struct farm_answer *a, unsigned status, const char *fmt, ...) _printf_(3, 4);
/* A failure of ours (500, or 503 for a busy database); a->err already says why.  Returns
 * error. */
int query_internal(struct farm_answer *a, int error);

/* ---- parameters ---- */

/* Answers 400 with perr when r < 0. */
bool query_param_ok(int r, const char *perr, struct farm_answer *a);
/* Refuses (400) what is not a scenario name of the summary schema. */
bool query_scenario_ok(const char *s, struct farm_answer *a);
/* ?cpu=: -1 when not given. */
bool query_parse_cpu(const struct farm_args *args, int64_t *ret, struct farm_answer *a);

/* Counts the rows of a list with cnt (*ret_total), then reads each row of st into the
 * growing array *v of *n elements of size bytes with row (which leaves nothing to free when
 * it fails). */
int query_page_rows(sql_conn *c, sql_stmt *cnt, sql_stmt *st, size_t size,
                    int (*row)(sql_stmt *st, void *ret), void **v, size_t *n, uint64_t *ret_total,
                    const char *count_error, const char *read_error,
                    char err[static FARM_ERROR_MAX]);

/* ---- the machine and the window of a query ---- */

struct query_machine {
        const char *id;
        bool has_data;
        int64_t last_start_ns; /* of its latest interval */
        uint64_t interval_ns;  /* of its latest run */
};

/* 1 with m filled when the machine is enrolled, 0 when not.  With the reader lock held. */
int query_machine_find(sql_conn *c, const char *id, struct query_machine *m,
                       char err[static FARM_ERROR_MAX]);
/* 0 when the machine is enrolled, -ENOENT when not.  With the reader lock held. */
int query_machine_known(sql_conn *c, const char *id, char err[static FARM_ERROR_MAX]);
/* The same, answering 404 when it is not enrolled. */
int query_machine_lookup(sql_conn *c, const char *id, struct query_machine *m,
                         struct farm_answer *a);
/* The window of a machine's query without from= and to=: the 24 hours up to its latest interval
 * (included), or up to now before it has any. */
void query_default_window(const struct query_machine *m, int64_t now, int64_t *ret_from,
                          int64_t *ret_to);
/* ?from= and ?to= of a window [from, to) of machine m. */
bool query_parse_window(const struct farm_args *args, int64_t now, const struct query_machine *m,
                        int64_t *ret_from, int64_t *ret_to, struct farm_answer *a);
