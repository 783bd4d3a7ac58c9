/* SPDX-License-Identifier: MIT */
/* The Prometheus exposition at GET /metrics: the machines' figures from the farm database,
 * the server's request counters, the kernels' verdicts and the notifications' deliveries. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "macro.h"
#include "metrics.h"
#include "notify-store.h"
#include "query-internal.h"
#include "log-read.h"
#include "text-stream.h"
#include "timeutil.h"

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

/* Every machine has one, also one that never reported: the alert rules tell a gating machine
 * silent since its enrolment by it. */
static int m_enrolled(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        return machine_family(c->db, f, name,
                              "SELECT id, hostname, enrolled_ns FROM machines ORDER BY id", true,
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

/* The verdict of every release with data in the last qualification period and day (those
 * whose verdict can still change, docs/api.md), as a state set: one sample per possible
 * verdict, 1 for the current one.  The status is the verdict log's (re-judged every Watch=),
 * read, not judged: a scrape costs the same however many releases the farm holds. */
static int m_verdicts(const struct metric_ctx *c, FILE *f, const char *name, char *err) {
        static const char *const states[] = { "qualified", "pending", "failed" };
        if (!c->counters->rule)
                return 0;
        struct farm_logged *v = NULL;
        size_t n = 0;
        int64_t since = now_ns(CLOCK_REALTIME) - (int64_t) c->counters->rule->period_ns -
                        FARM_DAY_NS;
        int r = farm_log_current(c->db, since, &v, &n, err);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char esc[3 * SUMMARY_MAX_RELEASE + 1];
                if (!v[i].status[0] || farm_prom_escape(v[i].release, esc, sizeof(esc)) < 0)
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(states); k++)
                        fprintf(f, "%s{release=\"%s\",verdict=\"%s\"} %d\n", name, esc, states[k],
                                strcmp(v[i].status, states[k]) == 0);
        }
        farm_logged_free(v, n);
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
                char kernel[3 * SUMMARY_MAX_RELEASE + 1], groups[3 * 2100 + 1];
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
        { "rtsoak_machine_enrolled_timestamp_seconds", "gauge",
          "When the machine was enrolled (Unix time).", m_enrolled },
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

int query_metrics(farm_db *db, struct farm_counters *counters, const struct farm_args *args,
                  struct farm_answer *a) {
        struct metric_ctx c = { db, counters };
        char *text = NULL;
        size_t len = 0;
        int r = 0;

        (void) args; /* it takes none (server-routes.c) */
        FILE *f = text_stream_open(&text, &len);
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
