/* SPDX-License-Identifier: MIT */
/* Trace captures in the local database: stored with the interval that carries them, read back
 * for the CLI and for the upload, and what each run's flight recorder was. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "summary.h"
#include "trace-analysis.h"

/* Raw events in one upload, at most (the server's default body limit is 16 MiB; base64 adds a
 * third). */
#define SUMMARY_RAW_BUDGET (3u << 20)

/* An analysis as stored, checked (text an earlier rtsoakd let through repaired); ret_text
 * (optional) receives it as it reads back, for the upload. */
static int parse_analysis(store *s, const char *text, struct trace_analysis *ret, char **ret_text) {
        char err[TRACE_ERROR_MAX];
        json_error_t je;
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (!j)
                return store_failf(s, -EBADMSG, "a trace analysis is not JSON: %s", je.text);
        int r = trace_analysis_from_stored_json(j, ret, err);
        if (r >= 0 && ret_text && !(*ret_text = json_dumps(j, JSON_COMPACT)))
                r = -ENOMEM;
        json_decref(j);
        if (r == -ENOMEM)
                return store_failf(s, r, "out of memory");
        if (r < 0)
                return store_failf(s, r, "a trace analysis is damaged: %s", err);
        return 0;
}

int store_insert_traces(store *s, int64_t run_id, int64_t interval_id,
                        const struct store_trace *traces, size_t n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (n == 0)
                return 0;
        int r = store_prepare(s,
                              "INSERT INTO traces (run_id, interval_id, cpu, time_ns, latency_ns, "
                              "analysis, summary, culprit_kind, culprit_name, culprit_pid, "
                              "culprit_ns, raw, raw_events, raw_dropped) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              &st);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const struct store_trace *t = &traces[i];
                struct trace_analysis a;
                r = parse_analysis(s, t->analysis, &a, NULL);
                if (r < 0)
                        return r;
                const struct trace_contrib *c = &a.culprit;
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, run_id);
                sqlite3_bind_int64(st, 2, interval_id);
                sqlite3_bind_int(st, 3, t->cpu);
                sqlite3_bind_int64(st, 4, t->time_ns);
                sqlite3_bind_int64(st, 5, (int64_t) MIN(t->latency_ns, (uint64_t) INT64_MAX));
                sqlite3_bind_text(st, 6, t->analysis, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 7, a.summary, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(st, 8, trace_culprit_kind_name(c->kind), -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 9, c->name, -1, SQLITE_TRANSIENT);
                if (c->kind == TRACE_CULPRIT_THREAD)
                        sqlite3_bind_int(st, 10, c->pid);
                sqlite3_bind_int64(st, 11, (int64_t) c->duration_ns);
                if (t->raw)
                        sqlite3_bind_blob(st, 12, t->raw, (int) t->raw_len, SQLITE_STATIC);
                sqlite3_bind_int64(st, 13, (int64_t) t->raw_events);
                sqlite3_bind_int64(st, 14, (int64_t) t->raw_dropped);
                int rc = sqlite3_step(st);
                if (rc != SQLITE_DONE)
                        return store_fail(s, rc, "cannot store a trace capture");
        }
        return 0;
}

static size_t raw_used(const struct summary *sum) {
        size_t used = 0;
        for (size_t i = 0; i < sum->nintervals; i++)
                for (size_t k = 0; k < sum->intervals[i].ntraces; k++)
                        used += sum->intervals[i].traces[k].raw_len;
        return used;
}

int store_load_traces(store *s, int64_t interval_id, struct summary *sum) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct summary_interval *iv = &sum->intervals[sum->nintervals - 1];
        size_t used = raw_used(sum);
        /* A capture whose CPU has no row in its interval (that CPU handed its slot over past
         * its grace time, or its probe had ended) stays here and is not uploaded: the server
         * refuses an interval with a capture of a CPU it does not hold, every CPU's data
         * with it. */
        int rc, r = store_prepare(s,
                                  "SELECT analysis, raw FROM traces t WHERE interval_id = ? AND "
                                  "cpu IN (SELECT cpu FROM interval_cpus c WHERE c.interval_id = "
                                  "t.interval_id) ORDER BY time_ns, id LIMIT ?",
                                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, interval_id);
        sqlite3_bind_int(st, 2, SUMMARY_MAX_TRACES);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct summary_trace *a = realloc(iv->traces, (iv->ntraces + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                iv->traces = a;
                struct summary_trace *t = &a[iv->ntraces++];
                *t = (struct summary_trace){
                        .analysis = calloc(1, sizeof(struct trace_analysis)),
                };
                if (!t->analysis)
                        return -ENOMEM;
                r = parse_analysis(s, (const char *) sqlite3_column_text(st, 0), t->analysis,
                                   &t->json);
                if (r < 0)
                        return r;
                /* Beyond the budget the raw events stay on the machine: rtsoak trace ID --raw. */
                size_t len = (size_t) sqlite3_column_bytes(st, 1);
                if (len == 0 || len > SUMMARY_MAX_TRACE_RAW || used + len > SUMMARY_RAW_BUDGET)
                        continue;
                t->raw = malloc(len);
                if (!t->raw)
                        return -ENOMEM;
                memcpy(t->raw, sqlite3_column_blob(st, 1), len);
                t->raw_len = len;
                used += len;
        }
        return rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot read an interval's traces");
}

int store_set_run_trace(store *s, int64_t run_id, const char *json) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "UPDATE runs SET trace = ? WHERE id = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, run_id);
        int rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot record the run's trace recorder");
}

int store_get_run_trace(store *s, int64_t run_id, char **ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "SELECT trace FROM runs WHERE id = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        int rc = sqlite3_step(st);
        *ret = NULL;
        if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
                *ret = strdup((const char *) sqlite3_column_text(st, 0));
                return *ret ? 0 : -ENOMEM;
        }
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot read a run");
}

void store_trace_row_done(struct store_trace_row *t) {
        free(t->analysis);
        free(t->summary);
        free(t->culprit_kind);
        free(t->culprit_name);
        free(t->raw);
        *t = (struct store_trace_row){};
}

void store_traces_free(struct store_trace_row *t, size_t n) {
        for (size_t i = 0; t && i < n; i++)
                store_trace_row_done(&t[i]);
        free(t);
}

#define TRACE_COLUMNS                                                                            \
        "t.id, t.run_id, coalesce(i.seq, -1), t.cpu, t.time_ns, t.latency_ns, t.analysis, "      \
        "t.summary, t.culprit_kind, t.culprit_name, coalesce(t.culprit_pid, -1), t.culprit_ns, " \
        "t.raw_events, t.raw_dropped"

static char *dup_col(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return strdup(t ? (const char *) t : "");
}

static int read_row(sqlite3_stmt *st, struct store_trace_row *t) {
        *t = (struct store_trace_row){
                .id = sqlite3_column_int64(st, 0),
                .run_id = sqlite3_column_int64(st, 1),
                .seq = sqlite3_column_int64(st, 2),
                .cpu = sqlite3_column_int(st, 3),
                .time_ns = sqlite3_column_int64(st, 4),
                .latency_ns = (uint64_t) sqlite3_column_int64(st, 5),
                .analysis = dup_col(st, 6),
                .summary = dup_col(st, 7),
                .culprit_kind = dup_col(st, 8),
                .culprit_name = dup_col(st, 9),
                .culprit_pid = sqlite3_column_int64(st, 10),
                .culprit_ns = (uint64_t) sqlite3_column_int64(st, 11),
                .raw_events = (uint64_t) sqlite3_column_int64(st, 12),
                .raw_dropped = (uint64_t) sqlite3_column_int64(st, 13),
        };
        return t->analysis && t->summary && t->culprit_kind && t->culprit_name ? 0 : -ENOMEM;
}

int store_list_traces(store *s, const struct store_filter *f, size_t limit,
                      struct store_trace_row **ret, size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_trace_row *arr = NULL;
        size_t n = 0;
        int rc, r = store_prepare(s,
                                  "SELECT " TRACE_COLUMNS " FROM traces t LEFT JOIN intervals i "
                                  "ON i.id = t.interval_id WHERE t.time_ns >= ?1 AND "
                                  "t.time_ns < ?2 AND (?3 = 0 OR t.run_id = ?3) AND "
                                  "(?4 < 0 OR t.cpu = ?4) ORDER BY t.time_ns DESC, t.id DESC "
                                  "LIMIT ?5",
                                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, f->since_ns);
        sqlite3_bind_int64(st, 2, f->until_ns);
        sqlite3_bind_int64(st, 3, f->run_id);
        sqlite3_bind_int(st, 4, f->cpu);
        sqlite3_bind_int64(st, 5, limit ? (int64_t) limit : -1);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_trace_row *a = realloc(arr, (n + 1) * sizeof(*a));
                if (!a) {
                        store_traces_free(arr, n);
                        return -ENOMEM;
                }
                arr = a;
                r = read_row(st, &arr[n++]);
                if (r < 0) {
                        store_traces_free(arr, n);
                        return r;
                }
        }
        if (rc != SQLITE_DONE) {
                store_traces_free(arr, n);
                return store_fail(s, rc, "cannot list trace captures");
        }
        /* Newest first for the limit; oldest first for the reader. */
        for (size_t i = 0; i < n / 2; i++) {
                struct store_trace_row x = arr[i];
                arr[i] = arr[n - 1 - i];
                arr[n - 1 - i] = x;
        }
        *ret = arr;
        *ret_n = n;
        return 0;
}

int store_get_trace(store *s, int64_t id, bool raw, struct store_trace_row *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "SELECT " TRACE_COLUMNS ", t.raw FROM traces t LEFT JOIN "
                              "intervals i ON i.id = t.interval_id WHERE t.id = ?",
                              &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return store_failf(s, -ENOENT, "there is no trace capture %lld", (long long) id);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read a trace capture");
        r = read_row(st, ret);
        size_t len = (size_t) sqlite3_column_bytes(st, 14);
        if (r >= 0 && raw && len > 0) {
                ret->raw = malloc(len);
                if (!ret->raw)
                        r = -ENOMEM;
                else {
                        memcpy(ret->raw, sqlite3_column_blob(st, 14), len);
                        ret->raw_len = len;
                }
        }
        if (r < 0)
                store_trace_row_done(ret);
        return r;
}

int store_trace_totals(store *s, int64_t run_id, struct store_trace_totals *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "SELECT count(*), coalesce(sum(json_extract(analysis, "
                              "'$.skipped')), 0) FROM traces WHERE ?1 = 0 OR run_id = ?1",
                              &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot count trace captures");
        ret->captures = (uint64_t) sqlite3_column_int64(st, 0);
        ret->skipped = (uint64_t) sqlite3_column_int64(st, 1);
        return 0;
}
