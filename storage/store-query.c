/* SPDX-License-Identifier: MIT */
/* Reading the local database for the CLI: runs, per-CPU aggregation over a time window with
 * merged histograms, and events.  Stored values are checked, not trusted. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"

static char *col_strdup(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strdup((const char *) t) : NULL;
}

static int64_t col_i64_or_min(sqlite3_stmt *st, int i) {
        return sqlite3_column_type(st, i) == SQLITE_NULL ? INT64_MIN : sqlite3_column_int64(st, i);
}

void store_run_done(struct store_run *r) {
        char **strs[] = { &r->machine_id,     &r->boot_id,        &r->hostname,
                          &r->kernel_release, &r->kernel_version, &r->kernel_cmdline,
                          &r->preempt_model,  &r->daemon_version, &r->config_digest,
                          &r->config_text,    &r->cpus,           &r->end_reason,
                          &r->release };
        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                free(*strs[i]);
        *r = (struct store_run){};
}

int store_get_run(store *s, int64_t run_id, struct store_run *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_run r = {};
        int rc, e;

        e = store_prepare(s,
                          "SELECT id, machine_id, boot_id, hostname, kernel_release, "
                          "kernel_version, kernel_cmdline, preempt_model, daemon_version, "
                          "config_digest, config, cpus, priority, probe_interval_ns, interval_ns, "
                          "threshold_ns, hist_limit_us, start_ns, last_seen_ns, end_ns, "
                          "end_reason, release FROM runs WHERE (?1 = 0 OR id = ?1) "
                          "ORDER BY id DESC LIMIT 1",
                          &st);
        if (e < 0)
                return e;
        sqlite3_bind_int64(st, 1, run_id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return run_id ? store_failf(s, -ENOENT, "no run %lld", (long long) run_id)
                              : store_failf(s, -ENOENT, "no run recorded yet");
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read runs");

        r.id = sqlite3_column_int64(st, 0);
        char **strs[] = { &r.machine_id,     &r.boot_id,        &r.hostname,      &r.kernel_release,
                          &r.kernel_version, &r.kernel_cmdline, &r.preempt_model, &r.daemon_version,
                          &r.config_digest,  &r.config_text,    &r.cpus };
        for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
                *strs[i] = col_strdup(st, (int) i + 1);
                if (!*strs[i]) {
                        store_run_done(&r);
                        return -ENOMEM;
                }
        }
        r.priority = (uint64_t) sqlite3_column_int64(st, 12);
        r.probe_interval_ns = (uint64_t) sqlite3_column_int64(st, 13);
        r.interval_ns = (uint64_t) sqlite3_column_int64(st, 14);
        r.threshold_ns = (uint64_t) sqlite3_column_int64(st, 15);
        r.hist_limit_us = (uint32_t) sqlite3_column_int64(st, 16);
        r.start_ns = sqlite3_column_int64(st, 17);
        r.last_seen_ns = col_i64_or_min(st, 18);
        r.end_ns = col_i64_or_min(st, 19);
        r.end_reason = col_strdup(st, 20);
        r.release = col_strdup(st, 21);
        if (sqlite3_column_type(st, 21) != SQLITE_NULL && !r.release) {
                store_run_done(&r);
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

void store_run_end_done(struct store_run_end *e) {
        free(e->end_reason);
        free(e->end_message);
        *e = (struct store_run_end){};
}

int store_get_previous_run_end(store *s, int64_t run_id, struct store_run_end *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int e = store_prepare(s,
                              "SELECT id, last_seen_ns, end_ns, end_reason, end_message FROM runs "
                              "WHERE id < ?1 ORDER BY id DESC LIMIT 1",
                              &st);
        if (e < 0)
                return e;
        sqlite3_bind_int64(st, 1, run_id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return store_failf(s, -ENOENT, "no run before run %lld", (long long) run_id);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read runs");
        struct store_run_end r = { .id = sqlite3_column_int64(st, 0),
                                   .last_seen_ns = col_i64_or_min(st, 1),
                                   .end_ns = col_i64_or_min(st, 2),
                                   .end_reason = col_strdup(st, 3),
                                   .end_message = col_strdup(st, 4) };
        if ((!r.end_reason && sqlite3_column_type(st, 3) != SQLITE_NULL) ||
            (!r.end_message && sqlite3_column_type(st, 4) != SQLITE_NULL)) {
                store_run_end_done(&r);
                return -ENOMEM;
        }
        *ret = r;
        return 0;
}

void store_report_free(struct store_cpu_report *r, size_t n) {
        if (!r)
                return;
        for (size_t i = 0; i < n; i++)
                hist_done(&r[i].hist);
        free(r);
}

static struct store_cpu_report *find_or_add_cpu(struct store_cpu_report **arr, size_t *n, int cpu,
                                                uint32_t limit_us) {
        for (size_t i = 0; i < *n; i++)
                if ((*arr)[i].cpu == cpu)
                        return &(*arr)[i];
        struct store_cpu_report *a = realloc(*arr, (*n + 1) * sizeof(**arr));
        if (!a)
                return NULL;
        *arr = a;
        struct store_cpu_report *c = &a[*n];
        *c = (struct store_cpu_report){
                .cpu = cpu, .min_ns = UINT64_MAX, .max_time_ns = INT64_MIN, .last_ns = INT64_MIN
        };
        if (hist_init(&c->hist, limit_us) < 0)
                return NULL;
        (*n)++;
        return c;
}

static int cmp_cpu(const void *a, const void *b) {
        const struct store_cpu_report *x = a, *y = b;
        return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

#define WINDOW_SQL                                                  \
        " WHERE c.start_ns >= ?1 AND c.start_ns < ?2"               \
        " AND (?3 = 0 OR i.run_id = ?3) AND (?4 < 0 OR c.cpu = ?4)" \
        " AND (?7 IS NULL OR coalesce(i.scenario, '') = ?7)"

static void bind_filter(sqlite3_stmt *st, const struct store_filter *f) {
        sqlite3_bind_int64(st, 1, f->since_ns);
        sqlite3_bind_int64(st, 2, f->until_ns);
        sqlite3_bind_int64(st, 3, f->run_id);
        sqlite3_bind_int(st, 4, f->cpu);
}

static void bind_scenario(sqlite3_stmt *st, const struct store_filter *f) {
        if (f->scenario)
                sqlite3_bind_text(st, 7, f->scenario, -1, SQLITE_STATIC);
}

static int report_in_snapshot(store *s, const struct store_filter *f, struct store_cpu_report **ret,
                              size_t *ret_n);

/* A start time stored as text or a number out of 64 bits (a damaged row) falls outside every
 * window of the report's query without a word: such rows fail the report instead.  They sort
 * after (text) or beyond (real) every integer, so the index finds them at once. */
static int check_start_times(store *s) {
        static const char *const tables[][2] = { { "intervals", "id" },
                                                 { "interval_cpus", "interval_id" } };
        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                char sql[220];
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                snprintf(sql, sizeof(sql),
                         "SELECT count(*), min(%s) FROM %s WHERE start_ns > 9223372036854775807 "
                         "OR start_ns < -9223372036854775808.0",
                         tables[i][1], tables[i][0]);
                int r = store_prepare(s, sql, &st);
                if (r < 0)
                        return r;
                int rc = sqlite3_step(st);
                if (rc != SQLITE_ROW)
                        return store_fail(s, rc, "cannot query intervals");
                if (sqlite3_column_int64(st, 0) > 0)
                        return store_failf(s, -EBADMSG,
                                           "%lld row(s) of %s have a start time that is not a "
                                           "64-bit integer, the first of interval %lld (database "
                                           "damaged?)",
                                           (long long) sqlite3_column_int64(st, 0), tables[i][0],
                                           (long long) sqlite3_column_int64(st, 1));
        }
        return 0;
}

/* Each of a row's statistics is an integer, as stored (sqlite3_column_int64 reads text as 0). */
static bool row_integers(sqlite3_stmt *st) {
        static const int cols[] = { 0, 1, 2, 3, 4, 5, 6, 7, 9, 10 };
        for (size_t i = 0; i < ELEMENTSOF(cols); i++)
                if (sqlite3_column_type(st, cols[i]) != SQLITE_INTEGER)
                        return false;
        return true;
}

int store_report(store *s, const struct store_filter *f, struct store_cpu_report **ret,
                 size_t *ret_n) {
        int r;

        /* Both queries must see the same data even while rtsoakd commits: one snapshot. */
        r = store_exec(s, "BEGIN");
        if (r < 0)
                return r;
        r = check_start_times(s);
        if (r >= 0)
                r = report_in_snapshot(s, f, ret, ret_n);
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        return r;
}

/* The widest exact range of the histograms in the window (0: none): every CPU is merged into
 * it, so that rows of runs with a smaller HistogramLimit= lose nothing. */
static int report_limit(store *s, const struct store_filter *f, uint32_t *ret_limit_us) {
        _cleanup_stmt_ sqlite3_stmt *lim = NULL;
        int r = store_prepare(s,
                              "SELECT max(c.hist_limit_us) FROM interval_cpus c "
                              "JOIN intervals i ON i.id = c.interval_id" WINDOW_SQL,
                              &lim);
        if (r < 0)
                return r;
        bind_filter(lim, f);
        bind_scenario(lim, f);
        int rc = sqlite3_step(lim);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot query intervals");
        *ret_limit_us = 0;
        if (sqlite3_column_type(lim, 0) != SQLITE_NULL) {
                int64_t v = sqlite3_column_int64(lim, 0);
                if (sqlite3_column_type(lim, 0) != SQLITE_INTEGER || v <= 0 ||
                    v > HIST_LIMIT_US_MAX)
                        return store_failf(s, -EBADMSG,
                                           "stored histogram limit %lld us is out "
                                           "of range (database damaged?)",
                                           (long long) v);
                *ret_limit_us = (uint32_t) v;
        }
        return 0;
}

/* One CPU's row of an interval, checked and merged into that CPU's report. */
static int report_add_row(store *s, sqlite3_stmt *st, uint32_t limit_us,
                          struct store_cpu_report **arr, size_t *n) {
        int cpu = sqlite3_column_int(st, 0);
        int64_t samples = sqlite3_column_int64(st, 1), min = sqlite3_column_int64(st, 2),
                max = sqlite3_column_int64(st, 3), sum = sqlite3_column_int64(st, 4),
                viol = sqlite3_column_int64(st, 6), missed = sqlite3_column_int64(st, 7),
                start = sqlite3_column_int64(st, 9), len = sqlite3_column_int64(st, 10),
                interval_id = sqlite3_column_int64(st, 11);
        const void *blob = sqlite3_column_blob(st, 8);
        int blob_len = sqlite3_column_bytes(st, 8);
        const char *reason = NULL;
        uint64_t decoded;

        if (!row_integers(st) || samples < 0 || min < 0 || max < 0 || sum < 0 || viol < 0 ||
            missed < 0 || len < 0 || (samples > 0 && min > max) || viol > samples)
                return store_failf(s, -EBADMSG,
                                   "interval %lld, CPU %d: inconsistent "
                                   "statistics (database damaged?)",
                                   (long long) interval_id, cpu);
        struct store_cpu_report *c = find_or_add_cpu(arr, n, cpu, limit_us);
        if (!c)
                return -ENOMEM;
        int r = hist_decode_merge(&c->hist, blob, (size_t) blob_len, &decoded, &reason);
        if (r < 0)
                return store_failf(s, r, "interval %lld, CPU %d: %s (database damaged?)",
                                   (long long) interval_id, cpu, reason);
        if (decoded != (uint64_t) samples)
                return store_failf(s, -EBADMSG,
                                   "interval %lld, CPU %d: histogram holds "
                                   "%llu samples but the row says %lld (database damaged?)",
                                   (long long) interval_id, cpu, (unsigned long long) decoded,
                                   (long long) samples);

        int64_t end;
        if (__builtin_add_overflow(start, len, &end))
                return store_failf(s, -EBADMSG,
                                   "interval %lld, CPU %d: start and length "
                                   "out of range (database damaged?)",
                                   (long long) interval_id, cpu);
        if (c->intervals == 0)
                c->first_ns = start;
        c->last_ns = MAX(c->last_ns, end);
        c->intervals++;
        c->samples += (uint64_t) samples;
        c->sum_ns += (uint64_t) sum;
        c->violations += (uint64_t) viol;
        c->missed += (uint64_t) missed;
        if (samples > 0 && (uint64_t) min < c->min_ns)
                c->min_ns = (uint64_t) min;
        if (samples > 0 && ((uint64_t) max > c->max_ns || c->max_time_ns == INT64_MIN)) {
                c->max_ns = (uint64_t) max;
                c->max_time_ns = sqlite3_column_int64(st, 5);
        }
        return 0;
}

static int report_in_snapshot(store *s, const struct store_filter *f, struct store_cpu_report **ret,
                              size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_cpu_report *arr = NULL;
        uint32_t limit_us = 0;
        size_t n = 0;
        int rc, r;

        r = report_limit(s, f, &limit_us);
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "SELECT c.cpu, c.samples, c.min_ns, c.max_ns, c.sum_ns, c.max_time_ns, "
                          "c.violations, c.missed, c.hist, c.start_ns, c.length_ns, i.id "
                          "FROM interval_cpus c JOIN intervals i ON i.id = c.interval_id" WINDOW_SQL
                          " ORDER BY c.start_ns",
                          &st);
        if (r < 0)
                return r;
        bind_filter(st, f);
        bind_scenario(st, f);

        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if ((r = report_add_row(s, st, limit_us, &arr, &n)) < 0)
                        goto fail;
        if (rc != SQLITE_DONE) {
                r = store_fail(s, rc, "cannot query intervals");
                goto fail;
        }

        for (size_t i = 0; i < n; i++)
                if (arr[i].samples == 0)
                        arr[i].min_ns = 0;
        if (n > 1)
                qsort(arr, n, sizeof(*arr), cmp_cpu);
        *ret = arr;
        *ret_n = n;
        return 0;
fail:
        store_report_free(arr, n);
        return r;
}

void store_events_free(struct store_event_row *e, size_t n) {
        if (!e)
                return;
        for (size_t i = 0; i < n; i++) {
                free(e[i].type);
                free(e[i].message);
                free(e[i].details);
        }
        free(e);
}

int store_list_events(store *s, const struct store_filter *f, const char *type, size_t limit,
                      struct store_event_row **ret, size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_event_row *arr = NULL;
        size_t n = 0;
        int rc, r;

        /* Newest first with the limit, then reversed, so that a limit keeps the latest. */
        r = store_prepare(s,
                          "SELECT id, run_id, time_ns, type, cpu, value_ns, message, details "
                          "FROM events "
                          "WHERE time_ns >= ?1 AND time_ns < ?2 AND (?3 = 0 OR run_id = ?3) "
                          "AND (?4 < 0 OR cpu = ?4) AND (?5 IS NULL OR type = ?5) "
                          "ORDER BY time_ns DESC, id DESC LIMIT ?6",
                          &st);
        if (r < 0)
                return r;
        bind_filter(st, f);
        if (type)
                sqlite3_bind_text(st, 5, type, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, limit ? (int64_t) limit : -1);

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_event_row *a = realloc(arr, (n + 1) * sizeof(*arr));
                if (!a) {
                        r = -ENOMEM;
                        goto fail;
                }
                arr = a;
                struct store_event_row *e = &arr[n++];
                *e = (struct store_event_row){
                        .id = sqlite3_column_int64(st, 0),
                        .run_id = sqlite3_column_int64(st, 1),
                        .time_ns = sqlite3_column_int64(st, 2),
                        .type = col_strdup(st, 3),
                        .cpu = sqlite3_column_type(st, 4) == SQLITE_NULL
                                       ? -1
                                       : sqlite3_column_int(st, 4),
                        .value_ns = sqlite3_column_type(st, 5) == SQLITE_NULL
                                            ? -1
                                            : sqlite3_column_int64(st, 5),
                        .message = col_strdup(st, 6),
                        .details = sqlite3_column_type(st, 7) == SQLITE_NULL ? NULL
                                                                             : col_strdup(st, 7),
                };
                if (!e->type || !e->message ||
                    (sqlite3_column_type(st, 7) != SQLITE_NULL && !e->details)) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        if (rc != SQLITE_DONE) {
                r = store_fail(s, rc, "cannot query events");
                goto fail;
        }
        for (size_t i = 0; i < n / 2; i++) {
                struct store_event_row t = arr[i];
                arr[i] = arr[n - 1 - i];
                arr[n - 1 - i] = t;
        }
        *ret = arr;
        *ret_n = n;
        return 0;
fail:
        store_events_free(arr, n);
        return r;
}

void store_scenarios_free(struct store_scenario *sc, size_t n) {
        if (!sc)
                return;
        for (size_t i = 0; i < n; i++) {
                free(sc[i].name);
                for (size_t k = 0; k < sc[i].nloads; k++) {
                        free(sc[i].loads[k].generator);
                        free(sc[i].loads[k].metric);
                        free(sc[i].loads[k].unit);
                }
                free(sc[i].loads);
        }
        free(sc);
}

static struct store_scenario *find_scenario(struct store_scenario *arr, size_t n,
                                            const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(arr[i].name, name) == 0)
                        return &arr[i];
        return NULL;
}

static int scenarios_in_snapshot(store *s, const struct store_filter *f,
                                 struct store_scenario **ret, size_t *ret_n);

int store_list_scenarios(store *s, const struct store_filter *f, struct store_scenario **ret,
                         size_t *ret_n) {
        int r = store_exec(s, "BEGIN");
        if (r < 0)
                return r;
        r = scenarios_in_snapshot(s, f, ret, ret_n);
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        return r;
}

#define SCENARIO_WINDOW_SQL \
        " WHERE i.start_ns >= ?1 AND i.start_ns < ?2 AND (?3 = 0 OR i.run_id = ?3)"

/* Each scenario of the window: how often and how long it ran. */
static int scenario_rows(store *s, const struct store_filter *f, struct store_scenario **arr,
                         size_t *n) {
        _cleanup_stmt_ sqlite3_stmt *sc = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT coalesce(i.scenario, ''), count(*), sum(i.length_ns), "
                                  "min(i.start_ns), max(i.start_ns + i.length_ns) FROM intervals "
                                  "i" SCENARIO_WINDOW_SQL " GROUP BY 1 ORDER BY 1",
                                  &sc);
        if (r < 0)
                return r;
        bind_filter(sc, f);
        while ((rc = sqlite3_step(sc)) == SQLITE_ROW) {
                struct store_scenario *a = realloc(*arr, (*n + 1) * sizeof(**arr));
                if (!a)
                        return -ENOMEM;
                *arr = a;
                a[*n] = (struct store_scenario){
                        .name = col_strdup(sc, 0),
                        .intervals = (uint64_t) sqlite3_column_int64(sc, 1),
                        .length_ns = (uint64_t) sqlite3_column_int64(sc, 2),
                        .first_ns = sqlite3_column_int64(sc, 3),
                        .last_ns = sqlite3_column_int64(sc, 4),
                };
                if (!a[(*n)++].name)
                        return -ENOMEM;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot query scenarios");
        return 0;
}

/* A load of scenario x (base, of generator gen) with its throughput metrics, one entry per
 * metric, or one without figures; m: the prepared, bound query of its metrics. */
static int add_load_metrics(store *s, sqlite3_stmt *m, struct store_scenario *x,
                            const struct store_load_summary *base, const char *gen) {
        bool any = false;
        int rc;
        for (;;) {
                rc = sqlite3_step(m);
                if (rc != SQLITE_ROW && (rc != SQLITE_DONE || any))
                        break;
                struct store_load_summary *a = realloc(x->loads,
                                                       (x->nloads + 1) * sizeof(*x->loads));
                if (!a)
                        return -ENOMEM;
                x->loads = a;
                struct store_load_summary *e = &x->loads[x->nloads++];
                *e = *base;
                e->generator = strdup(gen);
                if (!e->generator)
                        return -ENOMEM;
                if (rc == SQLITE_DONE)
                        break; /* a load without figures still shows */
                e->metric = col_strdup(m, 0);
                e->unit = col_strdup(m, 1);
                e->avg = sqlite3_column_double(m, 2);
                if (!e->metric || !e->unit)
                        return -ENOMEM;
                any = true;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot query load throughput");
        return 0;
}

/* What ran, how long and how often it had to be restarted, per load of each scenario; then its
 * throughput, averaged over time (intervals weighted by their length). */
static int scenario_loads(store *s, const struct store_filter *f, struct store_scenario *arr,
                          size_t n) {
        _cleanup_stmt_ sqlite3_stmt *ld = NULL, *m = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT coalesce(i.scenario, ''), l.idx, l.generator, count(*), "
                                  "sum(l.up_ns), sum(l.starts), sum(l.exits), sum(i.length_ns) "
                                  "FROM interval_loads l JOIN intervals i ON i.id = "
                                  "l.interval_id" SCENARIO_WINDOW_SQL
                                  " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
                                  &ld);
        if (r < 0)
                return r;
        bind_filter(ld, f);
        r = store_prepare(s,
                          "SELECT m.metric, m.unit, "
                          "sum(m.value * i.length_ns) / sum(i.length_ns) "
                          "FROM interval_load_metrics m JOIN intervals i ON i.id = m.interval_id "
                          "JOIN interval_loads l ON l.interval_id = m.interval_id AND l.idx = "
                          "m.idx" SCENARIO_WINDOW_SQL
                          " AND coalesce(i.scenario, '') = ?4 AND m.idx = ?5 AND l.generator = ?6"
                          " GROUP BY 1, 2 ORDER BY min(m.rowid)",
                          &m);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(ld)) == SQLITE_ROW) {
                const char *name = (const char *) sqlite3_column_text(ld, 0);
                struct store_scenario *x = find_scenario(arr, n, name ?: "");
                if (!x)
                        continue;
                struct store_load_summary base = {
                        .idx = sqlite3_column_int(ld, 1),
                        .intervals = (uint64_t) sqlite3_column_int64(ld, 3),
                        .up_ns = (uint64_t) sqlite3_column_int64(ld, 4),
                        .starts = (uint64_t) sqlite3_column_int64(ld, 5),
                        .exits = (uint64_t) sqlite3_column_int64(ld, 6),
                        .length_ns = (uint64_t) sqlite3_column_int64(ld, 7),
                };
                const char *gen = (const char *) sqlite3_column_text(ld, 2);
                sqlite3_reset(m);
                bind_filter(m, f);
                sqlite3_bind_text(m, 4, name ?: "", -1, SQLITE_TRANSIENT);
                sqlite3_bind_int(m, 5, base.idx);
                sqlite3_bind_text(m, 6, gen ?: "", -1, SQLITE_TRANSIENT);
                r = add_load_metrics(s, m, x, &base, gen ?: "");
                if (r < 0)
                        return r;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot query loads");
        return 0;
}

static int scenarios_in_snapshot(store *s, const struct store_filter *f,
                                 struct store_scenario **ret, size_t *ret_n) {
        struct store_scenario *arr = NULL;
        size_t n = 0;
        int r = scenario_rows(s, f, &arr, &n);
        if (r >= 0)
                r = scenario_loads(s, f, arr, n);
        if (r < 0) {
                store_scenarios_free(arr, n);
                return r;
        }
        *ret = arr;
        *ret_n = n;
        return 0;
}
