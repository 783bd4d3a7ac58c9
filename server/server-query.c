/* SPDX-License-Identifier: MIT */
/* The query API of the farm server (intervals per step, merged histograms with their per-day
 * cache, kernel comparisons, events, runs, the machine list) and the Prometheus metrics. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "hist.h"
#include "json-time.h"
#include "log.h"
#include "macro.h"
#include "server-merge.h"
#include "server-path.h"
#include "server-hist-cache.h"
#include "server-query-hist.h"
#include "server-query-internal.h"
#include "server-query-steps.h"
#include "server-notify-store.h"
#include "timeutil.h"
#include "worker.h"

#define API "/api/v1"

int farm_prom_escape(const char *value, char *buf, size_t size) {
        size_t o = 0;
        for (const char *p = value; *p; p++) {
                const char *e = *p == '\\'   ? "\\\\"
                                : *p == '"'  ? "\\\""
                                : *p == '\n' ? "\\n"
                                             : NULL;
                size_t n = e ? 2 : 1;
                if (o + n >= size)
                        return -ENOBUFS;
                if (e)
                        memcpy(buf + o, e, 2);
                else
                        buf[o] = *p;
                o += n;
        }
        if (o >= size)
                return -ENOBUFS;
        buf[o] = '\0';
        return 0;
}

/* ---- GET /api/v1/machines/{id}/events and /runs ----------------------------------------- */

static bool event_type_ok(const char *s, struct farm_answer *a) {
        size_t n = strlen(s);
        bool ok = n >= 1 && n <= 64;
        for (size_t i = 0; ok && i < n; i++)
                ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
        if (!ok)
                query_error(a, 400, "type=%.64s: not an event type (1-64 of a-z, 0-9 and _)", s);
        return ok;
}

static int get_events(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                      const char *path, struct farm_answer *a) {
        static const char *const allowed[] = { "from", "to", "type", "limit", "offset", NULL };
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        struct farm_page page;
        int64_t from = INT64_MIN, to = INT64_MAX;
        const char *type = query_arg(args, "type");
        int r, rc;

        if (!query_check_args(args, allowed, a) || (type && !event_type_ok(type, a)) ||
            !query_param_ok(farm_param_page(query_arg(args, "limit"), query_arg(args, "offset"),
                                            &page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("from", query_arg(args, "from"), now, &from, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("to", query_arg(args, "to"), now, &to, perr), perr, a))
                return 0;
        if (from >= to) {
                query_error(a, 400, "from=%.64s: not before to=%.64s",
                            query_arg(args, "from") ?: "", query_arg(args, "to") ?: "");
                return 0;
        }
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        if ((r = query_machine_lookup(c, id, &m, a)) <= 0)
                return r;
#define EVENTS_WHERE                                                                             \
        "FROM runs r JOIN events e ON e.run = r.id WHERE r.machine_id = ?1 AND e.time_ns >= ?2 " \
        "AND e.time_ns < ?3 AND (e.type = ?4 OR ?4 IS NULL) "
        if ((r = farm_prepare(c, "SELECT count(*) " EVENTS_WHERE, &cnt, a->err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT r.run_id, e.event_id, e.time_ns, e.type, e.cpu, e.value, "
                              "e.message, r.kernel_release " EVENTS_WHERE
                              "ORDER BY e.time_ns DESC, r.run_id DESC, e.event_id DESC "
                              "LIMIT ?5 OFFSET ?6",
                              &st, a->err)) < 0)
                return query_internal(a, r);
#undef EVENTS_WHERE
        sql_stmt *both[2] = { cnt, st };
        for (int i = 0; i < 2; i++) {
                sql_bind_text(both[i], 1, id);
                sql_bind_int64(both[i], 2, from);
                sql_bind_int64(both[i], 3, to);
                if (type)
                        sql_bind_text(both[i], 4, type);
        }
        sql_bind_int64(st, 5, (int64_t) page.limit);
        sql_bind_int64(st, 6, (int64_t) MIN(page.offset, (uint64_t) INT64_MAX));
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return query_internal(a, farm_fail(c, rc, "cannot count events", a->err));
        uint64_t total = (uint64_t) sql_column_int64(cnt, 0);
        json_t *list = json_array(), *o = json_object();
        while (list && (rc = sql_step(st)) == SQL_ROW)
                json_array_append_new(
                        list, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "run",
                                        farm_json_col_int(st, 0), "id", farm_json_col_int(st, 1),
                                        "time_ns", farm_json_col_int(st, 2), "time",
                                        json_time(sql_column_int64(st, 2)), "type",
                                        farm_json_col_text(st, 3), "cpu", farm_json_col_int(st, 4),
                                        "value", farm_json_col_int(st, 5), "message",
                                        farm_json_col_text(st, 6), "kernel_release",
                                        farm_json_col_text(st, 7)));
        if (list && rc != SQL_DONE) {
                json_decref(list);
                json_decref(o);
                return query_internal(a, farm_fail(c, rc, "cannot read events", a->err));
        }
        if (!o || !list || json_object_set_new(o, "machine", json_string(id)) < 0 ||
            json_object_set_new(o, "events", list) < 0 ||
            query_add_page(o, path, args, &page, total) < 0) {
                json_decref(o);
                query_json(a, NULL);
                return 0;
        }
        query_json(a, o);
        return 0;
}

static int get_runs(farm_db *db, const char *id, const struct farm_args *args, const char *path,
                    struct farm_answer *a) {
        static const char *const allowed[] = { "limit", "offset", NULL };
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        struct farm_page page;
        int r, rc;

        if (!query_check_args(args, allowed, a) ||
            !query_param_ok(farm_param_page(query_arg(args, "limit"), query_arg(args, "offset"),
                                            &page, perr),
                            perr, a))
                return 0;
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        if ((r = query_machine_lookup(c, id, &m, a)) <= 0)
                return r;
        /* The day rollups give the first and last data, the intervals and the worst case of a
         * run from a few rows per day instead of its intervals. */
        if ((r = farm_prepare(c, "SELECT count(*) FROM runs WHERE machine_id = ?", &cnt, a->err)) <
                    0 ||
            (r = farm_prepare(
                     c,
                     "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                     "r.preempt_model, r.daemon_version, r.start_ns, r.interval_ns, "
                     "r.threshold_ns, d.first_ns, d.last_ns, d.intervals, d.max_ns, "
                     "u.time_ns, u.message "
                     "FROM runs r "
                     "LEFT JOIN (SELECT run, min(first_start_ns) AS first_ns, "
                     "  max(last_end_ns) AS last_ns, sum(intervals) AS intervals, "
                     "  max(max_ns) AS max_ns FROM run_days GROUP BY run) d ON d.run = r.id "
                     /* The run's first unclean end, if any. */
                     "LEFT JOIN events u ON u.id = (SELECT e.id FROM events e WHERE "
                     "  e.run = r.id AND e.type = 'unclean_end' ORDER BY e.time_ns, e.id "
                     "  LIMIT 1) "
                     "WHERE r.machine_id = ?1 ORDER BY r.start_ns DESC, r.run_id DESC "
                     "LIMIT ?2 OFFSET ?3",
                     &st, a->err)) < 0)
                return query_internal(a, r);
        sql_bind_text(cnt, 1, id);
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, (int64_t) page.limit);
        sql_bind_int64(st, 3, (int64_t) MIN(page.offset, (uint64_t) INT64_MAX));
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return query_internal(a, farm_fail(c, rc, "cannot count runs", a->err));
        uint64_t total = (uint64_t) sql_column_int64(cnt, 0);
        json_t *list = json_array(), *o = json_object();
        while (list && (rc = sql_step(st)) == SQL_ROW) {
                bool data = !sql_column_null(st, 9);
                bool unclean = !sql_column_null(st, 13);
                json_t *end = unclean ? json_pack("{s:s, s:o, s:o, s:o}", "how", "unclean",
                                                  "time_ns", farm_json_col_int(st, 13), "time",
                                                  json_time(sql_column_int64(st, 13)), "message",
                                                  farm_json_col_text(st, 14))
                                      : json_null();
                json_array_append_new(
                        list,
                        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
                                  "s:o, s:o, s:I, s:o, s:o}",
                                  "id", farm_json_col_int(st, 0), "boot_id",
                                  farm_json_col_text(st, 1), "kernel_release",
                                  farm_json_col_text(st, 2), "kernel_version",
                                  farm_json_col_text(st, 3), "preempt_model",
                                  farm_json_col_text(st, 4), "daemon_version",
                                  farm_json_col_text(st, 5), "start_ns", farm_json_col_int(st, 6),
                                  "start", json_time(sql_column_int64(st, 6)), "interval_ns",
                                  farm_json_col_int(st, 7), "threshold_ns",
                                  farm_json_col_int(st, 8), "first_data_ns",
                                  farm_json_col_int(st, 9), "first_data",
                                  data ? json_time(sql_column_int64(st, 9)) : json_null(),
                                  "last_data_ns", farm_json_col_int(st, 10), "last_data",
                                  data ? json_time(sql_column_int64(st, 10)) : json_null(),
                                  "intervals", (json_int_t) sql_column_int64(st, 11),
                                  "worst_latency_ns", farm_json_col_int(st, 12), "end", end));
        }
        if (list && rc != SQL_DONE) {
                json_decref(list);
                json_decref(o);
                return query_internal(a, farm_fail(c, rc, "cannot read runs", a->err));
        }
        if (!o || !list || json_object_set_new(o, "machine", json_string(id)) < 0 ||
            json_object_set_new(o, "runs", list) < 0 ||
            query_add_page(o, path, args, &page, total) < 0) {
                json_decref(o);
                query_json(a, NULL);
                return 0;
        }
        query_json(a, o);
        return 0;
}

/* ---- GET /api/v1/machines, paginated ---------------------------------------------------- */

static int get_machines(farm_db *db, const struct farm_args *args, const char *path,
                        struct farm_answer *a) {
        static const char *const allowed[] = { "limit", "offset", NULL };
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        uint64_t total = 0;
        char(*ids)[FARM_MACHINE_ID_LEN + 1] = NULL;
        size_t n = 0;
        int r, rc;

        if (!query_check_args(args, allowed, a) ||
            !query_param_ok(farm_param_page(query_arg(args, "limit"), query_arg(args, "offset"),
                                            &page, perr),
                            perr, a))
                return 0;
        ids = calloc(page.limit, sizeof(*ids));
        if (!ids)
                return query_internal(a, -ENOMEM);
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
                if ((r = farm_prepare(c, "SELECT count(*) FROM machines", &cnt, a->err)) < 0 ||
                    (r = farm_prepare(c, "SELECT id FROM machines ORDER BY id LIMIT ?1 OFFSET ?2",
                                      &st, a->err)) < 0) {
                        free(ids);
                        return query_internal(a, r);
                }
                if ((rc = sql_step(cnt)) == SQL_ROW)
                        total = (uint64_t) sql_column_int64(cnt, 0);
                sql_bind_int64(st, 1, (int64_t) page.limit);
                sql_bind_int64(st, 2, (int64_t) MIN(page.offset, (uint64_t) INT64_MAX));
                while (rc == SQL_ROW && (rc = sql_step(st)) == SQL_ROW && n < page.limit)
                        snprintf(ids[n++], sizeof(ids[0]), "%s", sql_column_text(st, 0) ?: "");
                if (rc != SQL_DONE) {
                        free(ids);
                        return query_internal(a,
                                              farm_fail(c, rc, "cannot list the machines", a->err));
                }
        }
        /* Each machine as GET /api/v1/machines/{id} shows it. */
        json_t *list = json_array(), *o = json_object();
        for (size_t i = 0; list && i < n; i++) {
                json_t *m = NULL;
                r = farm_machines_json(db, ids[i], &m, a->err);
                if (r == -ENOENT)
                        continue; /* removed meanwhile */
                if (r < 0) {
                        free(ids);
                        json_decref(list);
                        json_decref(o);
                        return query_internal(a, r);
                }
                json_array_append_new(list, m);
        }
        free(ids);
        if (!o || !list || json_object_set_new(o, "machines", list) < 0 ||
            query_add_page(o, path, args, &page, total) < 0) {
                json_decref(o);
                query_json(a, NULL);
                return 0;
        }
        query_json(a, o);
        return 0;
}

/* ---- GET /metrics ----------------------------------------------------------------------- */

/* Writes "12.000081020": nanoseconds as exact decimal seconds. */
static void put_seconds(FILE *f, int64_t ns) {
        const char *sign = ns < 0 ? "-" : "";
        uint64_t u = ns < 0 ? -(uint64_t) ns : (uint64_t) ns;
        fprintf(f, "%s%" PRIu64 ".%09" PRIu64, sign, u / NSEC_PER_SEC, u % NSEC_PER_SEC);
}

/* The labels of a machine: machine="ID",hostname="..." (columns 0 and 1 of st), without the
 * braces. */
static void put_machine_label_pairs(FILE *f, sql_stmt *st) {
        char host[3 * 256 + 1];
        if (farm_prom_escape(sql_column_text(st, 1) ?: "", host, sizeof(host)) < 0)
                host[0] = '\0';
        fprintf(f, "machine=\"%s\",hostname=\"%s\"", sql_column_text(st, 0) ?: "", host);
}

static void put_machine_labels(FILE *f, sql_stmt *st) {
        fputc('{', f);
        put_machine_label_pairs(f, st);
        fputc('}', f);
}

/* One sample per machine from sql, whose columns are id, hostname and the value (NULL: no
 * sample); seconds: the value is in nanoseconds and shown in seconds. */
static int machine_family(farm_db *db, FILE *f, const char *name, const char *sql, bool seconds,
                          char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, sql, &st, err), rc;
        if (r < 0)
                return r;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (sql_column_null(st, 2))
                        continue;
                fputs(name, f);
                put_machine_labels(f, st);
                fputc(' ', f);
                if (seconds)
                        put_seconds(f, sql_column_int64(st, 2));
                else
                        fprintf(f, "%lld", (long long) sql_column_int64(st, 2));
                fputc('\n', f);
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the machines' metrics", err);
        return 0;
}

struct metric_ctx {
        farm_db *db;
        const struct farm_counters *counters;
};

static int m_last_worst(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT id, hostname, last_worst_ns FROM machines ORDER BY id", true,
                              err);
}

static int m_violations(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT id, hostname, violations_total FROM machines ORDER BY id",
                              false, err);
}

static int m_last_report(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT id, hostname, last_report_ns FROM machines ORDER BY id", true,
                              err);
}

/* From the day rollups: a few rows per run and day, not one per interval. */
static int m_intervals(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT m.id, m.hostname, (SELECT coalesce(sum(d.intervals), 0) "
                              "FROM runs r JOIN run_days d ON d.run = r.id "
                              "WHERE r.machine_id = m.id) FROM machines m ORDER BY m.id",
                              false, err);
}

static int m_reports(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) err;
        fprintf(f, "%s{result=\"stored\"} %" PRIu64 "\n", name, atomic_load(&c->counters->stored));
        fprintf(f, "%s{result=\"duplicate\"} %" PRIu64 "\n", name,
                atomic_load(&c->counters->duplicate));
        return 0;
}

static const char *const refusal_names[FARM_REFUSED_MAX] = {
        [FARM_REFUSED_BAD_REQUEST] = "bad_request",   [FARM_REFUSED_UNAUTHORIZED] = "unauthorized",
        [FARM_REFUSED_FORBIDDEN] = "forbidden",       [FARM_REFUSED_CONFLICT] = "conflict",
        [FARM_REFUSED_TOO_LARGE] = "too_large",       [FARM_REFUSED_RATE_LIMITED] = "rate_limited",
        [FARM_REFUSED_OTHER_CLIENT] = "other_client", [FARM_REFUSED_SERVER_ERROR] = "server_error",
};

static int m_ingest_errors(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) err;
        for (int i = 0; i < FARM_REFUSED_MAX; i++)
                fprintf(f, "%s{reason=\"%s\"} %" PRIu64 "\n", name, refusal_names[i],
                        atomic_load(&c->counters->refused[i]));
        return 0;
}

static int m_http(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) err;
        for (unsigned s = 0; s < ELEMENTSOF(c->counters->status); s++) {
                uint64_t v = atomic_load(&c->counters->status[s]);
                if (v)
                        fprintf(f, "%s{code=\"%u\"} %" PRIu64 "\n", name, s, v);
        }
        return 0;
}

/* The verdict of every release, as a state set: one sample per possible verdict, 1 for the
 * current one.  A verdict of a big farm costs tens of milliseconds or more, and a scrape
 * every few seconds from several Prometheus servers must not multiply that: the lines are
 * kept for VERDICT_METRIC_TTL_NS and shared. */
#define VERDICT_METRIC_TTL_NS (60 * (int64_t) NSEC_PER_SEC)
static pthread_mutex_t verdict_metric_lock = PTHREAD_MUTEX_INITIALIZER;
static char *verdict_metric_text;
static int64_t verdict_metric_at = INT64_MIN;
static const farm_db *verdict_metric_db;

static int verdict_lines(const struct metric_ctx *c, const char *name, char **ret, char *err) {
        static const char *const states[] = { "qualified", "pending", "failed" };
        json_t *list = NULL;
        char *text = NULL;
        size_t len = 0;
        /* Bounded: the releases with data in the last qualification period and day, those
         * whose verdict can still change (docs/api.md). */
        int64_t now = now_ns(CLOCK_REALTIME);
        int r = farm_kernel_list_since(
                c->db, now - (int64_t) c->counters->rule->period_ns - FARM_DAY_NS, &list, err);
        if (r < 0)
                return r;
        FILE *f = open_memstream(&text, &len);
        if (!f) {
                json_decref(list);
                return -ENOMEM;
        }
        size_t i;
        json_t *rel;
        json_array_foreach (list, i, rel) {
                const char *release = json_string_value(rel);
                char esc[3 * 256 + 1];
                json_t *v = NULL;
                if (!release || farm_prom_escape(release, esc, sizeof(esc)) < 0)
                        continue;
                r = farm_verdict(c->db, c->counters->rule, release, now, &v, err);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        break;
                const char *st = farm_verdict_status(v);
                for (size_t k = 0; k < ELEMENTSOF(states); k++)
                        fprintf(f, "%s{release=\"%s\",verdict=\"%s\"} %d\n", name, esc, states[k],
                                strcmp(st, states[k]) == 0);
                json_decref(v);
        }
        json_decref(list);
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(text);
                return r;
        }
        *ret = text;
        return 0;
}

static int m_verdicts(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        if (!c->counters->rule)
                return 0;
        pthread_mutex_lock(&verdict_metric_lock);
        int64_t now = now_ns(CLOCK_MONOTONIC);
        int r = 0;
        if (!verdict_metric_text || verdict_metric_db != c->db ||
            now - verdict_metric_at >= VERDICT_METRIC_TTL_NS) {
                char *text = NULL;
                r = verdict_lines(c, name, &text, err);
                if (r >= 0) {
                        free(verdict_metric_text);
                        verdict_metric_text = text;
                        verdict_metric_at = now;
                        verdict_metric_db = c->db;
                }
        }
        if (r >= 0)
                fputs(verdict_metric_text, f);
        pthread_mutex_unlock(&verdict_metric_lock);
        return r;
}

static int m_build_info(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) c, (void) err;
        fprintf(f, "%s{version=\"%s\"} 1\n", name, PROJECT_VERSION);
        return 0;
}

static int m_max_gap(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) err;
        if (c->counters->rule) {
                fputs(name, f);
                fputc(' ', f);
                put_seconds(f, (int64_t) c->counters->rule->max_gap_ns);
                fputc('\n', f);
        }
        return 0;
}

static int m_bound(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT id, hostname, threshold_ns FROM machines ORDER BY id", true,
                              err);
}

static int m_maintenance(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        /* A window is in force from its start to the earlier of its end and its cancel. */
        _cleanup_release_ sql_conn *conn = farm_reader(c->db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(conn,
                             "SELECT m.id, m.hostname, EXISTS (SELECT 1 FROM maintenance w WHERE "
                             "w.machine_id = m.id AND w.from_ns <= ?1 AND least(w.to_ns, "
                             "coalesce(w.cancelled_ns, w.to_ns)) > ?1) FROM machines m ORDER BY "
                             "m.id",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, now_ns(CLOCK_REALTIME));
        while ((rc = sql_step(st)) == SQL_ROW) {
                fputs(name, f);
                put_machine_labels(f, st);
                fprintf(f, " %d\n", sql_column_int(st, 2));
        }
        if (rc != SQL_DONE)
                return farm_fail(conn, rc, "cannot read the machines' metrics", err);
        return 0;
}

/* One sample of 1 per machine whose labels say what it is: the release of its latest run,
 * whether it gates (and is not revoked), and its gating groups (sorted, comma-separated). */
static int m_machine_info(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        _cleanup_release_ sql_conn *conn = farm_reader(c->db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(conn,
                             "SELECT m.id, m.hostname, (SELECT r.release FROM runs r WHERE "
                             "r.machine_id = m.id ORDER BY r.start_ns DESC, r.id DESC LIMIT 1), "
                             "m.gating = 1 AND m.revoked_ns IS NULL, (SELECT s.groups FROM "
                             "machine_settings s WHERE s.machine_id = m.id ORDER BY s.from_ns "
                             "DESC, s.id DESC LIMIT 1) FROM machines m ORDER BY m.id",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        while ((rc = sql_step(st)) == SQL_ROW) {
                char kernel[3 * 256 + 1], groups[3 * 2100 + 1];
                if (farm_prom_escape(sql_column_text(st, 2) ?: "", kernel, sizeof(kernel)) < 0)
                        kernel[0] = '\0';
                if (farm_prom_escape(sql_column_text(st, 4) ?: "", groups, sizeof(groups)) < 0)
                        groups[0] = '\0';
                fprintf(f, "%s{", name);
                put_machine_label_pairs(f, st);
                fprintf(f, ",kernel=\"%s\",gating=\"%d\",groups=\"%s\"} 1\n", kernel,
                        sql_column_int(st, 3), groups);
        }
        if (rc != SQL_DONE)
                return farm_fail(conn, rc, "cannot read the machines' metrics", err);
        return 0;
}

static int m_deliveries(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) name;
        return notify_store_metric_deliveries(c->db, f, err);
}

static int m_oldest_pending(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        (void) name;
        return notify_store_metric_oldest(c->db, f, now_ns(CLOCK_REALTIME), err);
}

/* One entry per metric family: its HELP and TYPE lines are written before its samples. */
static const struct metric_family {
        const char *name, *type, *help;
        int (*write)(const struct metric_ctx *c, FILE *f, const char *name, char *err);
} metric_families[] = {
        { "rtsoak_machine_last_worst_latency_seconds", "gauge",
          "Worst latency of the latest interval a machine reported.", m_last_worst },
        { "rtsoak_machine_violations_total", "counter",
          "Samples over the machine's latency threshold, over all its stored intervals.",
          m_violations },
        { "rtsoak_machine_last_report_timestamp_seconds", "gauge",
          "When the machine's last upload was stored (Unix time).", m_last_report },
        { "rtsoak_machine_intervals_total", "counter", "Intervals stored for the machine.",
          m_intervals },
        { "rtsoak_reports_received_total", "counter",
          "Uploads answered 200 since the server started, stored (something new) or duplicate.",
          m_reports },
        { "rtsoak_ingest_errors_total", "counter",
          "Uploads refused since the server started, by the reason of their status code.",
          m_ingest_errors },
        { "rtsoak_http_requests_total", "counter",
          "HTTP requests answered since the server started, by status code.", m_http },
        { "rtsoak_kernel_verdict", "gauge",
          "Whether a kernel release qualifies as latest stable: 1 for its current verdict "
          "(computed at most once a minute), for the releases with data in the last "
          "qualification period and day.",
          m_verdicts },
        { "rtsoak_build_info", "gauge", "The rtsoak-server that answers: 1, with its version.",
          m_build_info },
        { "rtsoak_verdict_max_gap_seconds", "gauge",
          "The verdict's MaxGap=: the longest silence of a machine that is not a problem.",
          m_max_gap },
        { "rtsoak_machine_bound_seconds", "gauge",
          "The machine's latency bound in force: a latency above it is a violation.", m_bound },
        { "rtsoak_machine_info", "gauge",
          "1 per machine: the release of its latest run, whether it gates releases, its gating "
          "groups.",
          m_machine_info },
        { "rtsoak_machine_in_maintenance", "gauge",
          "1 while a maintenance window of the machine is in force, else 0.", m_maintenance },
        { "rtsoak_notification_deliveries", "gauge",
          "Deliveries of notifications kept in the farm database, by channel and state (failed: "
          "the dead-letter list).",
          m_deliveries },
        { "rtsoak_notification_oldest_pending_seconds", "gauge",
          "Age of the oldest notification not yet delivered to every channel (0: none).",
          m_oldest_pending },
};

static int get_metrics(farm_db *db, struct farm_counters *counters, const struct farm_args *args,
                       struct farm_answer *a) {
        static const char *const allowed[] = { NULL };
        struct metric_ctx c = { db, counters };
        char *text = NULL;
        size_t len = 0;
        int r = 0;

        if (!query_check_args(args, allowed, a))
                return 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return query_internal(a, -ENOMEM);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(metric_families); i++) {
                const struct metric_family *m = &metric_families[i];
                fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
                r = m->write(&c, f, m->name, a->err);
        }
        if (fclose(f) != 0 && r >= 0) {
                snprintf(a->err, sizeof(a->err), "cannot write the metrics");
                r = -ENOMEM;
        }
        if (r < 0) {
                free(text);
                return query_internal(a, r);
        }
        a->status = 200;
        a->text = text;
        a->content_type = "text/plain; version=0.0.4; charset=utf-8";
        return 0;
}

void farm_counters_request(struct farm_counters *c, bool upload, bool duplicate, unsigned status) {
        if (status < 100)
                return; /* never answered: the connection ended before */
        if (status < ELEMENTSOF(c->status))
                atomic_fetch_add_explicit(&c->status[status], 1, memory_order_relaxed);
        if (!upload)
                return;
        if (status == 200) {
                atomic_fetch_add_explicit(duplicate ? &c->duplicate : &c->stored, 1,
                                          memory_order_relaxed);
                return;
        }
        enum farm_refusal why = status == 400   ? FARM_REFUSED_BAD_REQUEST
                                : status == 401 ? FARM_REFUSED_UNAUTHORIZED
                                : status == 403 ? FARM_REFUSED_FORBIDDEN
                                : status == 409 ? FARM_REFUSED_CONFLICT
                                : status == 413 ? FARM_REFUSED_TOO_LARGE
                                : status == 429 ? FARM_REFUSED_RATE_LIMITED
                                : status >= 500 ? FARM_REFUSED_SERVER_ERROR
                                                : FARM_REFUSED_OTHER_CLIENT;
        atomic_fetch_add_explicit(&c->refused[why], 1, memory_order_relaxed);
}

/* ---- routes ----------------------------------------------------------------------------- */

int farm_query_route(farm_db *db, struct farm_counters *counters, const char *url,
                     const char *method, const struct farm_args *args, int64_t now_ns,
                     struct farm_answer *ret) {
        enum { METRICS, MACHINES, INTERVALS, HISTOGRAM, EVENTS, RUNS, COMPARE, UNKNOWN } which;
        static const char *const machine_subs[] = { [INTERVALS] = "intervals",
                                                    [HISTOGRAM] = "histogram",
                                                    [EVENTS] = "events",
                                                    [RUNS] = "runs" };
        char key[300] = "";

        if (strcmp(url, "/metrics") == 0)
                which = METRICS;
        else if (strcmp(url, API "/machines") == 0)
                which = MACHINES;
        else if (strncmp(url, API "/machines/", strlen(API "/machines/")) == 0) {
                const char *id = url + strlen(API "/machines/"), *slash = strchr(id, '/');
                if (!slash)
                        return 0; /* one machine: the store's own route */
                which = UNKNOWN;
                for (int i = INTERVALS; i <= RUNS; i++)
                        if (strcmp(slash + 1, machine_subs[i]) == 0)
                                which = i;
                snprintf(key, sizeof(key), "%.*s",
                         (int) MIN((size_t) (slash - id), sizeof(key) - 1), id);
                if (which != UNKNOWN && !farm_machine_id_valid(key)) {
                        *ret = (struct farm_answer){};
                        query_error(ret, 404, "no such machine");
                        return 1;
                }
        } else if (strncmp(url, API "/kernels/", strlen(API "/kernels/")) == 0) {
                const char *rel = url + strlen(API "/kernels/"), *slash = strrchr(rel, '/');
                if (!slash || strcmp(slash + 1, "compare") != 0)
                        return 0; /* the verdict's routes */
                which = COMPARE;
                if ((size_t) (slash - rel) >= sizeof(key) || slash == rel) {
                        *ret = (struct farm_answer){};
                        query_error(ret, 404, "no such kernel");
                        return 1;
                }
                /* Still percent-encoded in the routing path: a release may hold a '/'. */
                if (farm_segment_decode(rel, (size_t) (slash - rel), key, sizeof(key)) < 0) {
                        *ret = (struct farm_answer){};
                        query_error(ret, 404, "no such kernel");
                        return 1;
                }
        } else
                return 0;

        *ret = (struct farm_answer){};
        if (which == UNKNOWN) {
                query_error(ret, 404, "no such resource");
                return 1;
        }
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
                query_error(ret, 405, "method not allowed");
                ret->allow = "GET, HEAD";
                return 1;
        }
        switch (which) {
        case METRICS:
                get_metrics(db, counters, args, ret);
                break;
        case MACHINES:
                get_machines(db, args, url, ret);
                break;
        case INTERVALS:
                query_intervals(db, key, args, now_ns, url, ret);
                break;
        case HISTOGRAM:
                query_histogram(db, key, args, now_ns, url, ret);
                break;
        case EVENTS:
                get_events(db, key, args, now_ns, url, ret);
                break;
        case RUNS:
                get_runs(db, key, args, url, ret);
                break;
        case COMPARE:
                query_compare(db, key, args, now_ns, url, ret);
                break;
        default:
                break;
        }
        if (ret->status == 0) {
                snprintf(ret->err, sizeof(ret->err), "%s: no answer", url);
                query_internal(ret, -EIO);
        }
        return 1;
}
