/* SPDX-License-Identifier: MIT */
/* A machine's silences (docs/verdict.md, invariant 6): holes between stretches of the
 * release's data, and after its last data, less the time the machine reported under another
 * release and its maintenance windows, judged while it gated the release; and its clean
 * coverage, after the end of its last problem. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict-internal.h"

static int cmp_entry(const void *a, const void *b) {
        const struct ventry *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_span(const void *a, const void *b) {
        const struct vspan *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

static int add_span(struct vspan **v, size_t *n, int64_t start, int64_t end) {
        if (!farm_grow((void **) v, *n, sizeof(**v)))
                return -ENOMEM;
        (*v)[(*n)++] = (struct vspan){ start, end };
        return 0;
}

/* The intervals of run (of another release) in [a, b), as spans (with first, only the first
 * one: whether there is any).  The intervals that do not count are left out by the statement,
 * so that the first is asked for alone (PostgreSQL sends a result whole: a run of a day at
 * 5-minute intervals was 288 rows to find one, for each machine of each release judged). */
static int other_intervals(struct vctx *v, int64_t run, int64_t max_len, int64_t a, int64_t b,
                           bool first, struct vspan **spans, size_t *n) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT start_ns, start_ns + length_ns FROM intervals "
                      "WHERE run = ?1 AND start_ns > ?2 AND start_ns < ?3 "
                      "AND start_ns + length_ns > ?4 AND start_ns + length_ns <= ?5 "
                      "AND coalesce(received_ns, start_ns + length_ns) <= ?6 "
                      "AND start_ns + length_ns - coalesce(received_ns, start_ns + length_ns) "
                      "<= ?7 ORDER BY start_ns LIMIT ?8",
                      &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run);
        sql_bind_int64(st, 2, a - max_len);
        sql_bind_int64(st, 3, b);
        sql_bind_int64(st, 4, a);
        sql_bind_int64(st, 5, v->at);
        sql_bind_int64(st, 6, v->known);
        sql_bind_int64(st, 7, (int64_t) MIN(v->rule.clock_tolerance_ns, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 8, first ? 1 : INT64_MAX);
        int rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW)
                r = add_span(spans, n, sql_column_int64(st, 0), sql_column_int64(st, 1));
        sql_reset(st);
        if (r < 0)
                return r;
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read another release's intervals");
}

/* The time in [a, b) in which m reported under another release (with first, only its first
 * interval: whether there is any, without reading a history of later releases). */
static int other_spans(struct vctx *v, struct vmachine *m, int64_t a, int64_t b, bool first,
                       struct vspan **spans, size_t *n) {
        const struct vother *runs;
        size_t nruns;
        int r = vother_runs(v, m->id, &runs, &nruns);
        for (size_t i = 0; r >= 0 && i < nruns && !(first && *n > 0); i++)
                if (runs[i].first_start < b && runs[i].last_end > a)
                        r = other_intervals(v, runs[i].row, runs[i].max_len, a, b, first, spans, n);
        return r;
}

static int gap_problem(struct vctx *v, struct vmachine *m, int64_t run, int64_t start, int64_t end,
                       bool ongoing) {
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX], t2[VTEXT_MAX], a[VTEXT_MAX],
                b[VTEXT_MAX];
        int64_t allowed = (int64_t) v->rule.max_gap_ns;
        struct farm_problem p;
        bool ok = true;
        struct farm_evidence iv;
        int r = vinterval_before(v, run, start, &iv, &ok);
        if (r < 0)
                return r;
        if (ongoing) {
                snprintf(id, sizeof(id), "gap:%s:%" PRId64 ":ongoing", m->id, start);
                snprintf(msg, sizeof(msg), "%s: silent since %s (%s, allowed %s)", vhost(m),
                         vts(t, start), vspan_text(a, end - start), vspan_text(b, allowed));
        } else {
                snprintf(id, sizeof(id), "gap:%s:%" PRId64 ":%" PRId64, m->id, start, end);
                snprintf(msg, sizeof(msg), "%s: no report for %s, from %s to %s (allowed %s)",
                         vhost(m), vspan_text(a, end - start), vts(t, start), vts(t2, end),
                         vspan_text(b, allowed));
        }
        vproblem_head(&p, FARM_PROBLEM_GAP, m, start, id, msg, &ok);
        p.has_end = true;
        p.end_ns = end;
        p.gap = (struct farm_gap){ .value_ns = end - start, .ongoing = ongoing };
        p.gap.interval = iv;
        return vproblem(v, m, start, end, &p, ok);
}

/* A silent piece [s, e): split where the machine began or stopped gating the release, each
 * part longer than allowed a problem (counted or not by when it began). */
static int silent_piece(struct vctx *v, struct vmachine *m, int64_t run, int64_t s, int64_t e,
                        bool open_end) {
        int64_t allowed = (int64_t) v->rule.max_gap_ns;
        int64_t cut[2 * 64 + 2];
        size_t ncut = 0;
        int r = 0;
        cut[ncut++] = s;
        for (size_t i = 0; i < m->ngate && ncut < ELEMENTSOF(cut) - 2; i++) {
                if (m->gate[i].start > s && m->gate[i].start < e)
                        cut[ncut++] = m->gate[i].start;
                if (m->gate[i].end > s && m->gate[i].end < e)
                        cut[ncut++] = m->gate[i].end;
        }
        cut[ncut++] = e;
        for (size_t i = 0; i + 1 < ncut && r >= 0; i++)
                if (cut[i + 1] - cut[i] > allowed)
                        r = gap_problem(v, m, run, cut[i], cut[i + 1], open_end && cut[i + 1] == e);
        return r;
}

/* The hole [a, b) after data of run: its silent pieces, less other releases and windows. */
static int examine_hole(struct vctx *v, struct vmachine *m, int64_t run, int64_t a, int64_t b,
                        bool open_end) {
        struct vspan *busy = NULL;
        size_t n = 0;
        int r = other_spans(v, m, a, b, false, &busy, &n);
        for (size_t i = 0; r >= 0 && i < m->nwindows; i++)
                if (m->windows[i].end > a && m->windows[i].start < b)
                        r = add_span(&busy, &n, m->windows[i].start, m->windows[i].end);
        if (r < 0) {
                free(busy);
                return r;
        }
        if (n > 0)
                qsort(busy, n, sizeof(*busy), cmp_span);
        int64_t at = a;
        for (size_t i = 0; i < n && r >= 0; i++) {
                if (busy[i].end <= at)
                        continue;
                if (busy[i].start > at)
                        r = silent_piece(v, m, run, at, MIN(busy[i].start, b), false);
                at = MAX(at, busy[i].end);
                if (at >= b)
                        break;
        }
        if (r >= 0 && at < b)
                r = silent_piece(v, m, run, at, b, open_end);
        free(busy);
        return r;
}

/* Whether m reported anything after t (by `at`, known by `known`) under another release: at
 * once when it began a run of another release after t that holds such an interval, else
 * asked of the runs around t. */
static int reported_after(struct vctx *v, struct vmachine *m, int64_t t, bool *ret) {
        struct vspan *spans = NULL;
        size_t n = 0;
        int64_t moved;
        int r = vmoved_on(v, m->id, &moved);
        if (r < 0 || (*ret = moved != FARM_NONE && moved > t))
                return r;
        r = other_spans(v, m, t, v->at, true, &spans, &n);
        free(spans);
        *ret = n > 0;
        return r;
}

int vjudge_gaps(struct vctx *v, struct vmachine *m) {
        int64_t allowed = (int64_t) v->rule.max_gap_ns;
        int r = 0;
        if (m->nentries == 0)
                return 0;
        qsort(m->entries, m->nentries, sizeof(*m->entries), cmp_entry);
        int64_t end = INT64_MIN, end_run = 0;
        for (size_t i = 0; i < m->nentries && r >= 0; i++) {
                const struct ventry *e = &m->entries[i];
                if (end != INT64_MIN && e->start - end > allowed)
                        r = examine_hole(v, m, end_run, end, e->start, false);
                if (e->end > end) {
                        end = e->end;
                        end_run = e->run;
                }
        }
        if (r < 0 || v->at - end <= allowed)
                return r;
        /* Silent now: nothing since the release's last data, on this release or another. */
        bool other = false;
        if ((r = reported_after(v, m, end, &other)) < 0 || other)
                return r;
        return examine_hole(v, m, end_run, end, v->at, true);
}

/* ---- clean coverage ------------------------------------------------------------------------ */

/* The measured, counted time of run's intervals of day starting at t or later. */
static int day_since(struct vctx *v, int64_t run, int64_t day, int64_t t, int64_t *sum) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT coalesce(sum(counted_ns), 0) FROM intervals WHERE run = ?1 AND "
                      "start_ns >= ?2 AND start_ns < ?3 AND start_ns + length_ns <= ?4 AND "
                      "coalesce(received_ns, 0) <= ?5 AND min_ratio_pm >= ?6",
                      &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run);
        sql_bind_int64(st, 2, MAX(t, day * FARM_DAY_NS));
        sql_bind_int64(st, 3, (day + 1) * FARM_DAY_NS);
        sql_bind_int64(st, 4, v->at);
        sql_bind_int64(st, 5, v->known);
        sql_bind_int64(st, 6, v->rule.min_samples_pm);
        int rc = sql_step(st);
        if (rc == SQL_ROW)
                *sum += sql_column_int64(st, 0);
        sql_reset(st);
        return rc == SQL_ROW ? 0 : vfail(v, rc, "cannot sum the intervals");
}

int vjudge_clean(struct vctx *v, struct vmachine *m) {
        int r = 0;
        if (m->problems == 0) {
                m->clean_ns = m->covered_ns;
                return 0;
        }
        m->clean_ns = 0;
        for (size_t i = 0; i < m->nsegs && r >= 0; i++) {
                const struct vseg *s = &m->segs[i];
                if (s->start >= m->last_problem_ns)
                        m->clean_ns += s->counted;
                else if (s->fast && (s->day + 1) * FARM_DAY_NS > m->last_problem_ns)
                        r = day_since(v, s->run, s->day, m->last_problem_ns, &m->clean_ns);
        }
        return r;
}
