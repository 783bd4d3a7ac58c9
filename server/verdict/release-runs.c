/* SPDX-License-Identifier: MIT */
/* The runs a verdict reads for each machine, read once per verdict for all its machines: the
 * release's runs, and the runs of other releases on the same machines since the release's
 * first data (where the silence check looks for what the machine did instead).  One statement
 * each instead of two per machine: on PostgreSQL each statement is a round trip, and the
 * overview of a farm of 200 machines and 20 releases asked 8,000 of them. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "verdict-internal.h"

/* By machine, then in the order the statement gave (its order within a machine): the
 * database's collation of machine ids need not be strcmp()'s. */
static int cmp_relrun(const void *a, const void *b) {
        const struct vrelrun *x = a, *y = b;
        int c = strcmp(x->machine, y->machine);
        return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int cmp_other(const void *a, const void *b) {
        const struct vother *x = a, *y = b;
        int c = strcmp(x->machine, y->machine);
        return c ? c : (x->row > y->row) - (x->row < y->row);
}

static int relrun_row(sql_stmt *st, struct vrelrun *x, size_t order) {
        *x = (struct vrelrun){ .row = sql_column_int64(st, 1),
                               .id = sql_column_int64(st, 2),
                               .probe_ns = sql_column_int64(st, 3),
                               .probed = strdup(sql_column_text(st, 4) ?: ""),
                               .build = strdup(sql_column_text(st, 5) ?: ""),
                               .host = strdup(sql_column_text(st, 6) ?: ""),
                               .seq_min = sql_column_int64(st, 7),
                               .order = order };
        snprintf(x->machine, sizeof(x->machine), "%s", sql_column_text(st, 0) ?: "");
        return x->probed && x->build && x->host ? 0 : -ENOMEM;
}

/* The release's runs stamped by `at` (or reported by then), known by `known`. */
static int load_runs(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(
                v,
                "SELECT machine_id, id, run_id, probe_interval_ns, coalesce(probed_cpus, ''), "
                "kernel_version, hostname, coalesce((SELECT min(i.seq) FROM intervals i "
                "WHERE i.run = runs.id), -1) FROM runs WHERE release = ?1 "
                "AND first_report_ns <= ?3 AND (start_ns <= ?2 OR first_report_ns <= ?2) "
                "ORDER BY machine_id, start_ns, id",
                &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(st, 3, v->known);
        int rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &v->relruns, v->nrelruns, sizeof(*v->relruns))) {
                        r = -ENOMEM;
                        break;
                }
                /* Counted even when a copy failed: what it holds is freed with the rest. */
                r = relrun_row(st, &v->relruns[v->nrelruns], v->nrelruns);
                v->nrelruns++;
        }
        sql_reset(st);
        if (r < 0)
                return r;
        if (rc != SQL_DONE)
                return vfail(v, rc, "cannot read the runs");
        if (v->nrelruns > 0)
                qsort(v->relruns, v->nrelruns, sizeof(*v->relruns), cmp_relrun);
        return 0;
}

/* Appends the rows of st to *rows (*n of size bytes each) as fill makes them (false: the
 * statement's row has none), then sorts them by cmp: 0, or < 0 failed (said as what). */
static int rows_by_machine(struct vctx *v, sql_stmt *st, void **rows, size_t *n, size_t size,
                           bool (*fill)(sql_stmt *st, void *row),
                           int (*cmp)(const void *, const void *), const char *what) {
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow(rows, *n, size)) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                if (fill(st, (char *) *rows + *n * size))
                        (*n)++;
        }
        sql_reset(st);
        if (rc != SQL_DONE)
                return vfail(v, rc, what);
        if (*n > 0)
                qsort(*rows, *n, size, cmp);
        return 0;
}

static bool other_row(sql_stmt *st, void *row) {
        if (sql_column_null(st, 3) || sql_column_null(st, 4))
                return false;
        struct vother *x = row;
        *x = (struct vother){ .row = sql_column_int64(st, 1),
                              .max_len = sql_column_int64(st, 2),
                              .first_start = sql_column_int64(st, 3),
                              .last_end = sql_column_int64(st, 4) };
        snprintf(x->machine, sizeof(x->machine), "%s", sql_column_text(st, 0) ?: "");
        return true;
}

/* The runs of other releases, known by `known`, on the machines that ran the release, that
 * end after the release's first data began. */
static int load_others(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT machine_id, id, max_length_ns, first_start_ns, last_end_ns FROM runs "
                      "WHERE release <> ?1 AND first_report_ns <= ?2 AND last_end_ns > (SELECT "
                      "min(q.first_start_ns) FROM runs q WHERE q.release = ?1) AND machine_id IN "
                      "(SELECT q.machine_id FROM runs q WHERE q.release = ?1)",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->known);
        return rows_by_machine(v, st, (void **) &v->others, &v->nothers, sizeof(*v->others),
                               other_row, cmp_other, "cannot look for other releases");
}

static int cmp_moved(const void *a, const void *b) {
        return strcmp(((const struct vmoved *) a)->machine, ((const struct vmoved *) b)->machine);
}

static bool moved_row(sql_stmt *st, void *row) {
        if (sql_column_null(st, 1))
                return false;
        struct vmoved *x = row;
        x->first_start = sql_column_int64(st, 1);
        snprintf(x->machine, sizeof(x->machine), "%s", sql_column_text(st, 0) ?: "");
        return true;
}

/* For each machine of the release, the start of a run of another release after the end of the
 * release's runs there, with an interval that counts: the silence check's question "did it
 * report anything since, under another release", answered for the machines that moved on in
 * one statement (a statement per machine and release was 3,800 round trips of a PostgreSQL
 * overview of 200 machines and 20 releases).  Any such run will do: the first found ends the
 * search (asking for the earliest looked into every one, 11 ms a verdict there instead of 2).
 * The interval's conditions are other_intervals()' in gaps.c for a run that begins after the
 * point asked about. */
static int load_moved(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT m.machine_id, (SELECT o.first_start_ns FROM runs o WHERE "
                      "o.machine_id = m.machine_id AND o.release <> ?1 AND o.first_report_ns <= ?3 "
                      "AND o.first_start_ns > m.e AND o.first_start_ns < ?2 AND EXISTS (SELECT 1 "
                      "FROM intervals i WHERE i.run = o.id AND i.start_ns < ?2 "
                      "AND i.start_ns + i.length_ns <= ?2 "
                      "AND coalesce(i.received_ns, i.start_ns + i.length_ns) <= ?3 "
                      "AND i.start_ns + i.length_ns - coalesce(i.received_ns, "
                      "i.start_ns + i.length_ns) <= ?4) LIMIT 1) "
                      "FROM (SELECT machine_id, max(last_end_ns) AS e FROM runs WHERE release = ?1 "
                      "GROUP BY machine_id) m WHERE m.e IS NOT NULL",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(st, 3, v->known);
        sql_bind_int64(st, 4, (int64_t) MIN(v->rule.clock_tolerance_ns, (uint64_t) INT64_MAX));
        return rows_by_machine(v, st, (void **) &v->moved, &v->nmoved, sizeof(*v->moved), moved_row,
                               cmp_moved, "cannot look for the machines that moved on");
}

/* The rows of machine among n rows of size bytes sorted by the machine id each starts with:
 * their number, the first at *ret. */
static size_t rows_of_machine(const void *rows, size_t n, size_t size, const char *machine,
                              const void **ret) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp((const char *) rows + mid * size, machine) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        size_t end = lo;
        while (end < n && strcmp((const char *) rows + end * size, machine) == 0)
                end++;
        *ret = end > lo ? (const char *) rows + lo * size : NULL;
        return end - lo;
}

_Static_assert(offsetof(struct vrelrun, machine) == 0 && offsetof(struct vother, machine) == 0 &&
                       offsetof(struct vmoved, machine) == 0,
               "rows_of_machine() reads each row's machine id first");

int vrelease_runs(struct vctx *v, const char *machine, const struct vrelrun **ret, size_t *ret_n) {
        int r;
        if (!v->relruns_loaded && (r = load_runs(v)) < 0)
                return r;
        v->relruns_loaded = true;
        *ret_n = rows_of_machine(v->relruns, v->nrelruns, sizeof(*v->relruns), machine,
                                 (const void **) ret);
        return 0;
}

int vother_runs(struct vctx *v, const char *machine, const struct vother **ret, size_t *ret_n) {
        int r;
        if (!v->others_loaded && (r = load_others(v)) < 0)
                return r;
        v->others_loaded = true;
        *ret_n = rows_of_machine(v->others, v->nothers, sizeof(*v->others), machine,
                                 (const void **) ret);
        return 0;
}

int vmoved_on(struct vctx *v, const char *machine, int64_t *ret) {
        const struct vmoved *m;
        int r;
        if (!v->moved_loaded && (r = load_moved(v)) < 0)
                return r;
        v->moved_loaded = true;
        size_t n = rows_of_machine(v->moved, v->nmoved, sizeof(*v->moved), machine,
                                   (const void **) &m);
        *ret = n > 0 ? m->first_start : FARM_NONE;
        return 0;
}

void vrelease_runs_done(struct vctx *v) {
        for (size_t i = 0; i < v->nrelruns; i++) {
                free(v->relruns[i].probed);
                free(v->relruns[i].build);
                free(v->relruns[i].host);
        }
        free(v->relruns);
        free(v->others);
        free(v->moved);
}
