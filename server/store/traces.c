/* SPDX-License-Identifier: MIT */
/* Trace captures in the farm database: written with their summary's interval, looked up for
 * a violation, and answered as JSON or, for the raw events, as text. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "params.h"
#include "traces.h"
#include "timeutil.h"
#include "text-safe.h"
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

int farm_trace_find_run(sql_stmt *find, int64_t run, int cpu, int64_t from_ns, int64_t to_ns,
                        int64_t at_ns, struct farm_trace_brief *ret) {
        return find_with(find, run, NULL, cpu, from_ns, to_ns, at_ns, ret);
}
