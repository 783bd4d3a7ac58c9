/* SPDX-License-Identifier: MIT */
/* The kernel releases the farm has seen: every name (for the pages' choices), and a page of
 * the kernel list, each release with the figures of its runs and its verdict's gist. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "grow.h"
#include "verdict.h"

int farm_release_names(farm_db *db, char ***ret, size_t *ret_n, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char **v = NULL;
        size_t n = 0;
        int r = farm_prepare(c, "SELECT DISTINCT release FROM runs ORDER BY 1", &st, err), rc;
        if (r < 0)
                return r;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *rel = sql_column_text(st, 0);
                if (rel && (!farm_grow((void **) &v, n, sizeof(*v)) || !(v[n++] = strdup(rel)))) {
                        farm_strv_free(v, n);
                        return -ENOMEM;
                }
        }
        if (rc != SQL_DONE) {
                farm_strv_free(v, n);
                return farm_fail(c, rc, "cannot list the releases", err);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

#define SEEN_AT1_KNOWN2 FARM_SQL_RUN_SEEN("", "?1", "?2")
#define SEEN_Q_AT1_KNOWN4 FARM_SQL_RUN_SEEN("q.", "?1", "?4")
#define SEEN_R_AT1_KNOWN4 FARM_SQL_RUN_SEEN("r.", "?1", "?4")
#define KERNEL_RUN_START FARM_SQL_RUN_START("r.", "?5")

/* A release of the page from a row of the kernel list's SELECT. */
static int kernel_row(sql_stmt *st, struct farm_kernel_page *p) {
        const char *rel = sql_column_text(st, 0);
        if (!farm_grow((void **) &p->v, p->n, sizeof(*p->v)))
                return -ENOMEM;
        p->v[p->n] = (struct farm_kernel){ .release = strdup(rel ?: ""),
                                           .machines = sql_column_int(st, 1),
                                           .runs = sql_column_int(st, 2),
                                           .first_run_ns = sql_column_int64(st, 3),
                                           .last_run_ns = sql_column_int64(st, 4),
                                           .covered_ns = sql_column_int64(st, 5) };
        return p->v[p->n++].release ? 0 : -ENOMEM;
}

/* The releases the question q sees, a page of them, with their figures from the runs and days
 * it sees (days of data stamped by its moment and received by what it knows); their runs'
 * starts as the server takes them (a start stamped beyond tolerance_ns after the run arrived
 * counts from the arrival). */
static int kernel_rows(farm_db *db, const struct farm_question *q, int64_t tolerance_ns,
                       struct farm_kernel_page *p, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL, *cnt = NULL;
        int r, rc;
        if ((r = farm_prepare(c, "SELECT count(DISTINCT release) FROM runs WHERE " SEEN_AT1_KNOWN2,
                              &cnt, err)) < 0)
                return r;
        sql_bind_int64(cnt, 1, q->at_ns);
        sql_bind_int64(cnt, 2, q->known_ns);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count the releases", err);
        p->total = sql_column_int64(cnt, 0);
        r = farm_prepare(c,
                         "SELECT r.release, count(DISTINCT r.machine_id), count(*), "
                         "min(" KERNEL_RUN_START "), max(" KERNEL_RUN_START "), "
                         "(SELECT coalesce(sum(d.counted_ns), "
                         "0) FROM run_days d JOIN runs q ON d.run = q.id "
                         "WHERE q.release = r.release AND d.last_end_ns <= ?1 AND "
                         "d.max_received_ns <= ?4 AND " SEEN_Q_AT1_KNOWN4 ") "
                         "FROM runs r WHERE " SEEN_R_AT1_KNOWN4 " GROUP BY r.release "
                         "ORDER BY max(" KERNEL_RUN_START ") DESC, r.release LIMIT ?2 OFFSET ?3",
                         &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, q->at_ns);
        sql_bind_int64(st, 2, (int64_t) p->limit);
        sql_bind_int64(st, 3, (int64_t) p->offset);
        sql_bind_int64(st, 4, q->known_ns);
        sql_bind_int64(st, 5, tolerance_ns);
        while ((rc = sql_step(st)) == SQL_ROW)
                if ((r = kernel_row(st, p)) < 0)
                        return r;
        return rc == SQL_DONE ? 0 : farm_fail(c, rc, "cannot list the releases", err);
}

/* The gist of k's verdict as q asks it: its series, status, problems, what it misses, why. */
static int kernel_verdict(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                          struct farm_kernel *k, char *err) {
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        struct farm_question kq = *q;
        kq.release = k->release;
        int r = farm_verdict_ask(db, rule, &kq, &v, err);
        if (r < 0)
                return r;
        snprintf(k->series, sizeof(k->series), "%s", v->series);
        k->status = v->status;
        k->problems = v->problems_total;
        k->missing = TAKE_PTR(v->missing);
        k->nmissing = v->nmissing;
        v->nmissing = 0;
        k->reasons = TAKE_PTR(v->reasons);
        k->nreasons = v->nreasons;
        v->nreasons = 0;
        return 0;
}

int farm_kernels(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                 const struct farm_page *page, struct farm_kernel_page *ret,
                 char err[static FARM_ERROR_MAX]) {
        *ret = (struct farm_kernel_page){ .limit = page->limit, .offset = page->offset };
        int r = kernel_rows(db, q, (int64_t) rule->clock_tolerance_ns, ret, err);
        /* The verdicts are computed without the reader's lock: each has its own snapshot. */
        for (size_t i = 0; r >= 0 && i < ret->n; i++)
                r = kernel_verdict(db, rule, q, &ret->v[i], err);
        if (r < 0)
                farm_kernel_page_done(ret);
        return r;
}
