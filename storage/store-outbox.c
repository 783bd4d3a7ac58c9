/* SPDX-License-Identifier: MIT */
/* The upload outbox: which stored intervals and events still have to reach the farm server,
 * what they hold in the summary's terms, and what became of each upload. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "summary.h"

int store_outbox_next(store *s, size_t max, struct store_outbox_row **ret, size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_outbox_row *rows = calloc(max ? max : 1, sizeof(*rows));
        size_t n = 0;
        int64_t versions = 0;
        int rc, r;

        if (!rows)
                return -ENOMEM;
        r = store_prepare(s,
                          "SELECT id, run_id, coalesce(interval_id, 0), coalesce(event_id, 0), "
                          "created_ns, attempts, (SELECT count(*) FROM inventory v WHERE "
                          "v.event_id = o.event_id) FROM outbox o WHERE state = 'pending' "
                          "ORDER BY id LIMIT ?",
                          &st);
        if (r < 0) {
                free(rows);
                return r;
        }
        sqlite3_bind_int64(st, 1, (int64_t) max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_outbox_row x = {
                        .id = sqlite3_column_int64(st, 0),
                        .run_id = sqlite3_column_int64(st, 1),
                        .interval_id = sqlite3_column_int64(st, 2),
                        .event_id = sqlite3_column_int64(st, 3),
                        .created_ns = sqlite3_column_int64(st, 4),
                        .attempts = (uint32_t) sqlite3_column_int64(st, 5),
                };
                if (n > 0 && x.run_id != rows[0].run_id)
                        break; /* one summary carries one run */
                /* ... and no more inventory versions than the farm takes in one. */
                versions += sqlite3_column_int64(st, 6);
                if (n > 0 && versions > SUMMARY_MAX_INVENTORY)
                        break;
                rows[n++] = x;
        }
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
                free(rows);
                return store_fail(s, rc, "cannot read the upload outbox");
        }
        *ret = rows;
        *ret_n = n;
        return 0;
}

static char *col_text(sqlite3_stmt *st, int i, size_t max) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strndup((const char *) t, max) : strdup("");
}

static int add_event(store *s, sqlite3_stmt *st, struct summary *ret) {
        struct summary_event *a = realloc(ret->events, (ret->nevents + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        ret->events = a;
        struct summary_event *e = &a[ret->nevents];
        *e = (struct summary_event){
                .id = (uint64_t) sqlite3_column_int64(st, 0),
                .time_ns = sqlite3_column_int64(st, 1),
                .type = col_text(st, 2, 64),
                .cpu = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 3),
                .value = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1
                                                                   : sqlite3_column_int64(st, 4),
                .message = col_text(st, 5, SUMMARY_MAX_TEXT),
                .details = sqlite3_column_type(st, 6) == SQLITE_NULL
                                   ? NULL
                                   : col_text(st, 6, STORE_DETAILS_MAX),
        };
        ret->nevents++;
        if (!e->type || !e->message || (!e->details && sqlite3_column_type(st, 6) != SQLITE_NULL))
                return -ENOMEM;
        /* The inventory versions it announces travel with it. */
        return store_load_inventory(s, (int64_t) e->id, ret);
}

/* A CPU's own span, sent when it differs from the interval's (the probe started or stopped
 * inside it).  Cut to the interval: a span outside it would have the whole upload refused,
 * and the clock steps that could make one are the interval's business, not the CPU's.  A CPU
 * without a span (it measured nothing) is sent with the interval's: its samples say so. */
static void cpu_span(const struct summary_interval *iv, int64_t start_ns, int64_t length_ns,
                     struct summary_cpu *c) {
        int64_t iv_end = iv->start_ns + (int64_t) iv->length_ns;
        int64_t from = MAX(start_ns, iv->start_ns);
        int64_t to = length_ns > 0 && start_ns <= INT64_MAX - length_ns ? start_ns + length_ns
                                                                        : start_ns;
        to = MIN(to, iv_end);
        if (to <= from || (from == iv->start_ns && to == iv_end))
                return;
        c->span_start_ns = from;
        c->span_length_ns = (uint64_t) (to - from);
}

#define EVENT_COLUMNS "id, time_ns, type, cpu, value_ns, message, details"

/* The interval's own row, as the next of ret's intervals (*ret_iv). */
static int load_interval_row(store *s, int64_t id, struct summary *ret,
                             struct summary_interval **ret_iv) {
        _cleanup_stmt_ sqlite3_stmt *iv = NULL;
        int r = store_prepare(
                s, "SELECT seq, start_ns, length_ns, scenario FROM intervals WHERE id = ?", &iv);
        if (r < 0)
                return r;
        sqlite3_bind_int64(iv, 1, id);
        int rc = sqlite3_step(iv);
        if (rc != SQLITE_ROW)
                return rc == SQLITE_DONE ? store_failf(s, -EBADMSG,
                                                       "outbox refers to interval %lld, which "
                                                       "does not exist (database damaged?)",
                                                       (long long) id)
                                         : store_fail(s, rc, "cannot read an interval");
        struct summary_interval *a = realloc(ret->intervals, (ret->nintervals + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        ret->intervals = a;
        struct summary_interval *x = &a[ret->nintervals++];
        *x = (struct summary_interval){
                .seq = (uint64_t) sqlite3_column_int64(iv, 0),
                .start_ns = sqlite3_column_int64(iv, 1),
                .length_ns = (uint64_t) sqlite3_column_int64(iv, 2),
                .scenario = sqlite3_column_type(iv, 3) == SQLITE_NULL ? NULL : col_text(iv, 3, 32),
        };
        *ret_iv = x;
        return 0;
}

/* One row of interval_cpus as the next CPU of x. */
static int add_cpu(sqlite3_stmt *cpu, struct summary_interval *x) {
        struct summary_cpu *c = realloc(x->cpus, (x->ncpus + 1) * sizeof(*c));
        if (!c)
                return -ENOMEM;
        x->cpus = c;
        c = &c[x->ncpus++];
        uint64_t samples = (uint64_t) sqlite3_column_int64(cpu, 1),
                 sum = (uint64_t) sqlite3_column_int64(cpu, 4);
        *c = (struct summary_cpu){
                .cpu = (uint32_t) sqlite3_column_int(cpu, 0),
                .samples = samples,
                .min_ns = (uint64_t) sqlite3_column_int64(cpu, 2),
                .avg_ns = samples ? sum / samples : 0,
                .max_ns = (uint64_t) sqlite3_column_int64(cpu, 3),
                .max_time_ns = sqlite3_column_int64(cpu, 5),
                .violations = (uint64_t) sqlite3_column_int64(cpu, 6),
                .missed = (uint64_t) sqlite3_column_int64(cpu, 7),
                .hist_limit_us = (uint32_t) sqlite3_column_int64(cpu, 8),
        };
        int len = sqlite3_column_bytes(cpu, 9);
        c->hist = malloc(len > 0 ? (size_t) len : 1);
        if (!c->hist)
                return -ENOMEM;
        if (len > 0)
                memcpy(c->hist, sqlite3_column_blob(cpu, 9), (size_t) len);
        c->hist_len = (size_t) len;
        cpu_span(x, sqlite3_column_int64(cpu, 10), sqlite3_column_int64(cpu, 11), c);
        return 0;
}

static int load_interval_cpus(store *s, int64_t id, struct summary_interval *x) {
        _cleanup_stmt_ sqlite3_stmt *cpu = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT cpu, samples, min_ns, max_ns, sum_ns, max_time_ns, "
                                  "violations, missed, hist_limit_us, hist, start_ns, length_ns "
                                  "FROM interval_cpus WHERE interval_id = ? ORDER BY cpu",
                                  &cpu);
        if (r < 0)
                return r;
        sqlite3_bind_int64(cpu, 1, id);
        while ((rc = sqlite3_step(cpu)) == SQLITE_ROW)
                if ((r = add_cpu(cpu, x)) < 0)
                        return r;
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot read an interval's CPUs");
        return 0;
}

/* The throughput metrics of load l, number idx of interval id (m: the prepared query). */
static int load_metrics(store *s, sqlite3_stmt *m, int64_t id, int64_t idx,
                        struct summary_load *l) {
        int rc;
        sqlite3_reset(m);
        sqlite3_bind_int64(m, 1, id);
        sqlite3_bind_int64(m, 2, idx);
        while ((rc = sqlite3_step(m)) == SQLITE_ROW) {
                struct summary_metric *mm = realloc(l->metrics, (l->nmetrics + 1) * sizeof(*mm));
                if (!mm)
                        return -ENOMEM;
                l->metrics = mm;
                mm[l->nmetrics++] = (struct summary_metric){
                        .name = col_text(m, 0, 32),
                        .unit = col_text(m, 1, 32),
                        .value = sqlite3_column_double(m, 2),
                };
                if (!mm[l->nmetrics - 1].name || !mm[l->nmetrics - 1].unit)
                        return -ENOMEM;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot read load throughput");
        return 0;
}

static int load_interval_loads(store *s, int64_t id, struct summary_interval *x) {
        _cleanup_stmt_ sqlite3_stmt *ld = NULL, *m = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT idx, generator, up_ns, starts, exits FROM interval_loads "
                                  "WHERE interval_id = ? ORDER BY idx",
                                  &ld);
        if (r >= 0)
                r = store_prepare(s,
                                  "SELECT metric, unit, value FROM interval_load_metrics "
                                  "WHERE interval_id = ? AND idx = ? ORDER BY rowid",
                                  &m);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ld, 1, id);
        while ((rc = sqlite3_step(ld)) == SQLITE_ROW) {
                struct summary_load *l = realloc(x->loads, (x->nloads + 1) * sizeof(*l));
                if (!l)
                        return -ENOMEM;
                x->loads = l;
                l = &l[x->nloads++];
                *l = (struct summary_load){
                        .generator = col_text(ld, 1, 32),
                        .up_ns = (uint64_t) sqlite3_column_int64(ld, 2),
                        .starts = (uint32_t) sqlite3_column_int64(ld, 3),
                        .exits = (uint32_t) sqlite3_column_int64(ld, 4),
                };
                if (!l->generator)
                        return -ENOMEM;
                r = load_metrics(s, m, id, sqlite3_column_int64(ld, 0), l);
                if (r < 0)
                        return r;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot read an interval's loads");
        return 0;
}

static int load_interval_events(store *s, int64_t id, struct summary *ret) {
        _cleanup_stmt_ sqlite3_stmt *ev = NULL;
        int rc, r = store_prepare(
                        s, "SELECT " EVENT_COLUMNS " FROM events WHERE interval_id = ? ORDER BY id",
                        &ev);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ev, 1, id);
        while ((rc = sqlite3_step(ev)) == SQLITE_ROW) {
                r = add_event(s, ev, ret);
                if (r < 0)
                        return r;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot read an interval's events");
        return 0;
}

/* Interval id with its CPUs, loads, events and captures, into ret. */
static int load_interval(store *s, int64_t id, struct summary *ret) {
        struct summary_interval *x = NULL;
        int r = load_interval_row(s, id, ret, &x);
        if (r >= 0)
                r = load_interval_cpus(s, id, x);
        if (r >= 0)
                r = load_interval_loads(s, id, x);
        if (r >= 0)
                r = load_interval_events(s, id, ret);
        return r < 0 ? r : store_load_traces(s, id, ret);
}

static int load_event(store *s, int64_t id, struct summary *ret) {
        _cleanup_stmt_ sqlite3_stmt *ev = NULL;
        int r = store_prepare(s, "SELECT " EVENT_COLUMNS " FROM events WHERE id = ?", &ev);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ev, 1, id);
        int rc = sqlite3_step(ev);
        if (rc == SQLITE_ROW)
                return add_event(s, ev, ret);
        return rc == SQLITE_DONE ? store_failf(s, -EBADMSG,
                                               "outbox refers to event %lld, which does not "
                                               "exist (database damaged?)",
                                               (long long) id)
                                 : store_fail(s, rc, "cannot read an event");
}

int store_outbox_summary(store *s, const struct store_outbox_row *rows, size_t n,
                         struct summary *ret) {
        int r = store_exec(s, "BEGIN");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++)
                r = rows[i].interval_id > 0 ? load_interval(s, rows[i].interval_id, ret)
                                            : load_event(s, rows[i].event_id, ret);
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (r == -ENOMEM)
                store_failf(s, r, "out of memory");
        return r;
}

int store_outbox_mark(store *s, const struct store_outbox_row *rows, size_t n,
                      enum store_outbox_result result, int64_t now_ns, const char *message) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL, *status = NULL;
        int r = store_exec(s, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "UPDATE outbox SET attempts = attempts + 1, state = ?1, "
                          "done_ns = CASE WHEN ?1 = 'pending' THEN NULL ELSE ?2 END, "
                          "message = ?3 WHERE id = ?4",
                          &st);
        for (size_t i = 0; i < n && r >= 0; i++) {
                sqlite3_reset(st);
                sqlite3_bind_text(st, 1,
                                  result == STORE_OUTBOX_SENT       ? "sent"
                                  : result == STORE_OUTBOX_REJECTED ? "rejected"
                                                                    : "pending",
                                  -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, now_ns);
                if (message)
                        sqlite3_bind_text(st, 3, message, -1, SQLITE_STATIC);
                else
                        sqlite3_bind_null(st, 3);
                sqlite3_bind_int64(st, 4, rows[i].id);
                int rc = sqlite3_step(st);
                if (rc != SQLITE_DONE)
                        r = store_fail(s, rc, "cannot update the upload outbox");
        }
        if (r >= 0)
                r = store_prepare(s,
                                  result == STORE_OUTBOX_SENT
                                          ? "UPDATE upload_status SET last_success_ns = ?1"
                                          : "UPDATE upload_status SET last_error_ns = ?1, "
                                            "last_error = ?2",
                                  &status);
        if (r >= 0) {
                sqlite3_bind_int64(status, 1, now_ns);
                if (result != STORE_OUTBOX_SENT)
                        sqlite3_bind_text(status, 2, message ?: "", -1, SQLITE_STATIC);
                int rc = sqlite3_step(status);
                if (rc != SQLITE_DONE)
                        r = store_fail(s, rc, "cannot update the upload status");
        }
        if (r >= 0)
                r = store_exec(s, "COMMIT");
        if (r < 0)
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return r;
}

void store_upload_status_done(struct store_upload_status *st) {
        free(st->last_error);
        free(st->last_rejection);
        *st = (struct store_upload_status){};
}

int store_get_upload_status(store *s, struct store_upload_status *ret) {
        _cleanup_stmt_ sqlite3_stmt *c = NULL, *u = NULL, *rej = NULL;
        struct store_upload_status st = { .oldest_pending_ns = INT64_MIN,
                                          .last_success_ns = INT64_MIN,
                                          .last_error_ns = INT64_MIN };
        int rc, r;

        r = store_exec(s, "BEGIN");
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "SELECT sum(state = 'pending'), sum(state = 'rejected'), "
                          "sum(state = 'sent'), min(CASE WHEN state = 'pending' THEN created_ns "
                          "END) FROM outbox",
                          &c);
        if (r >= 0 && (rc = sqlite3_step(c)) == SQLITE_ROW) {
                st.pending = (uint64_t) sqlite3_column_int64(c, 0);
                st.rejected = (uint64_t) sqlite3_column_int64(c, 1);
                st.sent = (uint64_t) sqlite3_column_int64(c, 2);
                if (sqlite3_column_type(c, 3) != SQLITE_NULL)
                        st.oldest_pending_ns = sqlite3_column_int64(c, 3);
        } else if (r >= 0)
                r = store_fail(s, rc, "cannot read the upload outbox");
        if (r >= 0)
                r = store_prepare(s,
                                  "SELECT last_success_ns, last_error_ns, last_error "
                                  "FROM upload_status",
                                  &u);
        if (r >= 0 && sqlite3_step(u) == SQLITE_ROW) {
                if (sqlite3_column_type(u, 0) != SQLITE_NULL)
                        st.last_success_ns = sqlite3_column_int64(u, 0);
                if (sqlite3_column_type(u, 1) != SQLITE_NULL)
                        st.last_error_ns = sqlite3_column_int64(u, 1);
                if (sqlite3_column_type(u, 2) != SQLITE_NULL)
                        st.last_error = col_text(u, 2, SUMMARY_MAX_TEXT);
        }
        if (r >= 0)
                r = store_prepare(s,
                                  "SELECT message FROM outbox WHERE state = 'rejected' "
                                  "ORDER BY id DESC LIMIT 1",
                                  &rej);
        if (r >= 0 && sqlite3_step(rej) == SQLITE_ROW)
                st.last_rejection = col_text(rej, 0, SUMMARY_MAX_TEXT);
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (r < 0) {
                store_upload_status_done(&st);
                return r;
        }
        *ret = st;
        return 0;
}
