/* SPDX-License-Identifier: MIT */
/* Trace captures in the farm database: written with their summary's interval, looked up for
 * a violation, listed and read (with their raw events) as typed captures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "traces.h"
#include "trace-raw.h"

int farm_store_traces(sql_conn *c, int64_t run, const struct summary_interval *iv, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (iv->ntraces == 0)
                return 0;
        int r = farm_prepare(c,
                             "INSERT INTO traces (run, seq, cpu, time_ns, latency_ns, summary, "
                             "culprit_kind, culprit_name, culprit_pid, culprit_ns, analysis, "
                             "raw) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT (run, cpu, time_ns) DO NOTHING",
                             &st, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < iv->ntraces; i++) {
                const struct summary_trace *t = &iv->traces[i];
                const struct trace_analysis *a = t->analysis;
                const struct trace_contrib *k = &a->culprit;
                sql_bind_int64(st, 1, run);
                sql_bind_int64(st, 2, (int64_t) iv->seq);
                sql_bind_int64(st, 3, a->cpu);
                sql_bind_int64(st, 4, a->time_ns);
                sql_bind_int64(st, 5, (int64_t) a->latency_ns);
                sql_bind_text(st, 6, a->summary);
                sql_bind_text(st, 7, trace_culprit_kind_name(k->kind));
                sql_bind_text(st, 8, k->name);
                if (k->kind == TRACE_CULPRIT_THREAD)
                        sql_bind_int64(st, 9, k->pid);
                else
                        sql_bind_null(st, 9);
                sql_bind_int64(st, 10, (int64_t) k->duration_ns);
                sql_bind_text(st, 11, t->json);
                if (t->raw)
                        sql_bind_blob(st, 12, t->raw, t->raw_len);
                else
                        sql_bind_null(st, 12);
                if ((r = farm_step_done(st, "cannot store a trace capture", err)) < 0)
                        return r;
        }
        return 0;
}

static int brief_of(sql_stmt *st, struct farm_trace_brief *ret) {
        int r = sql_step(st);
        if (r == SQL_DONE)
                return -ENOENT;
        if (r != SQL_ROW)
                return r < 0 ? r : -EIO;
        ret->id = sql_column_int64(st, 0);
        snprintf(ret->summary, sizeof(ret->summary), "%s", sql_column_text(st, 1) ?: "");
        ret->raw = sql_column_int(st, 2) != 0;
        return 0;
}

/* Of the candidates (FARM_TRACE_FIND_SQL): the capture of the violation's own wake-up first,
 * then the worst. */
static int find_with(sql_stmt *st, int64_t key, const char *machine_id, int cpu, int64_t from_ns,
                     int64_t to_ns, int64_t at_ns, struct farm_trace_brief *ret) {
        if (machine_id)
                sql_bind_text(st, 1, machine_id);
        else
                sql_bind_int64(st, 1, key);
        sql_bind_int64(st, 2, cpu);
        sql_bind_int64(st, 3, from_ns);
        sql_bind_int64(st, 4, to_ns);
        sql_bind_int64(st, 5, at_ns);
        int r = brief_of(st, ret);
        sql_reset(st);
        return r;
}

int farm_trace_find_machine(farm_db *db, const char *machine_id, int cpu, int64_t from_ns,
                            int64_t to_ns, int64_t at_ns, struct farm_trace_brief *ret) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];
        int r = farm_prepare(c,
                             "SELECT t.id, t.summary, t.raw IS NOT NULL FROM runs r JOIN traces t "
                             "ON t.run = r.id WHERE r.machine_id = ?1 AND t.cpu = ?2 AND "
                             "t.time_ns >= ?3 AND t.time_ns < ?4 "
                             "ORDER BY t.time_ns = ?5 DESC, t.latency_ns DESC, t.id LIMIT 1",
                             &st, err);
        return r < 0 ? r : find_with(st, 0, machine_id, cpu, from_ns, to_ns, at_ns, ret);
}

/* The statement sql prepared on c, with ?1 the machine and [?2, ?3) the span of its captures. */
static int prepare_span(sql_conn *c, const char *sql, const char *machine_id, int64_t from_ns,
                        int64_t to_ns, sql_stmt **st, char *err) {
        int r = farm_prepare(c, sql, st, err);
        if (r < 0)
                return r;
        sql_bind_text(*st, 1, machine_id);
        sql_bind_int64(*st, 2, from_ns);
        sql_bind_int64(*st, 3, to_ns);
        return 0;
}

int farm_trace_any_machine(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                           bool *ret) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];
        int r = prepare_span(c,
                             "SELECT EXISTS (SELECT 1 FROM runs r JOIN traces t ON t.run = r.id "
                             "WHERE r.machine_id = ?1 AND t.time_ns >= ?2 AND t.time_ns < ?3)",
                             machine_id, from_ns, to_ns, &st, err);
        if (r < 0)
                return r;
        if ((r = sql_step(st)) != SQL_ROW)
                return r < 0 ? r : -EIO;
        *ret = sql_column_int(st, 0) != 0;
        return 0;
}

int farm_trace_find_run(sql_stmt *find, int64_t run, int cpu, int64_t from_ns, int64_t to_ns,
                        int64_t at_ns, struct farm_trace_brief *ret) {
        return find_with(find, run, NULL, cpu, from_ns, to_ns, at_ns, ret);
}

/* ---- the captures as the API lists and reads them ---- */

#define CAPTURE_COLUMNS                                                                \
        "SELECT t.id, r.machine_id, r.run_id, t.seq, t.cpu, t.time_ns, t.latency_ns, " \
        "t.summary, t.culprit_kind, t.culprit_name, t.culprit_pid, t.culprit_ns, "     \
        "t.raw IS NOT NULL, t.analysis"
#define CAPTURE_FROM " FROM traces t JOIN runs r ON r.id = t.run "

/* The capture of the row (CAPTURE_COLUMNS). */
static int capture_of(sql_stmt *st, bool with_analysis, struct farm_capture *c) {
        bool ok = true;
        *c = (struct farm_capture){
                .id = sql_column_int64(st, 0),
                .run = sql_column_int64(st, 2),
                .interval = sql_column_int64(st, 3),
                .cpu = sql_column_int(st, 4),
                .time_ns = sql_column_int64(st, 5),
                .latency_ns = sql_column_int64(st, 6),
                .culprit_pid = sql_column_null(st, 10) ? FARM_NONE : sql_column_int64(st, 10),
                .culprit_ns = sql_column_int64(st, 11),
                .raw = sql_column_int(st, 12) != 0,
        };
        c->machine = strdup(sql_column_text(st, 1) ?: "");
        c->summary = strdup(sql_column_text(st, 7) ?: "");
        c->culprit_kind = farm_strdup_or_null(sql_column_text(st, 8), &ok);
        c->culprit_name = strdup(sql_column_text(st, 9) ?: "");
        if (with_analysis)
                c->analysis = farm_strdup_or_null(sql_column_text(st, 13), &ok);
        if (!ok || !c->machine || !c->summary || !c->culprit_name) {
                farm_capture_done(c);
                return -ENOMEM;
        }
        return 0;
}

int farm_traces_list(farm_db *db, const char *machine_id, int64_t from_ns, int64_t to_ns,
                     int64_t cpu, uint64_t limit, struct farm_capture_list *ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        struct farm_capture_list l = {};
        int r = prepare_span(c,
                             CAPTURE_COLUMNS CAPTURE_FROM
                             "WHERE r.machine_id = ?1 AND t.time_ns >= ?2 AND t.time_ns < ?3 "
                             "AND (?4 < 0 OR t.cpu = ?4) ORDER BY t.time_ns DESC, t.id DESC "
                             "LIMIT ?5",
                             machine_id, from_ns, to_ns, &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 4, cpu);
        sql_bind_int64(st, 5, (int64_t) MIN(limit, (uint64_t) INT64_MAX));
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &l.v, l.n, sizeof(*l.v)) ||
                    capture_of(st, false, &l.v[l.n]) < 0) {
                        farm_capture_list_done(&l);
                        snprintf(err, FARM_ERROR_MAX, "out of memory listing traces");
                        return -ENOMEM;
                }
                l.n++;
        }
        if (rc != SQL_DONE) {
                farm_capture_list_done(&l);
                return farm_fail(c, rc, "cannot list traces", err);
        }
        *ret = l;
        return 0;
}

/* The raw events of the row (column 14) inflated, or NULL when they are not on the server. */
static int raw_of(sql_stmt *st, char **ret, char *err) {
        size_t len;
        *ret = NULL;
        if (sql_column_null(st, 14))
                return 0;
        const void *blob = sql_column_blob(st, 14, &len);
        int r = blob ? trace_raw_inflate(blob, len, TRACE_RAW_TEXT_MAX, ret, NULL) : -ENOMEM;
        if (r < 0)
                snprintf(err, FARM_ERROR_MAX, "a trace's raw events do not inflate");
        return r < 0 ? r : 0;
}

int farm_trace_get(farm_db *db, int64_t id, struct farm_capture *ret, char **raw_text, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, CAPTURE_COLUMNS ", t.raw" CAPTURE_FROM "WHERE t.id = ?1", &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, id);
        int rc = sql_step(st);
        if (rc == SQL_DONE) {
                snprintf(err, FARM_ERROR_MAX, "no such trace");
                return -ENOENT;
        }
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read a trace", err);
        if (raw_text && (r = raw_of(st, raw_text, err)) < 0)
                return r;
        if (capture_of(st, true, ret) < 0) {
                if (raw_text) {
                        free(*raw_text);
                        *raw_text = NULL;
                }
                snprintf(err, FARM_ERROR_MAX, "out of memory");
                return -ENOMEM;
        }
        return 0;
}
