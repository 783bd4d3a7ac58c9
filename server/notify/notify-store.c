/* SPDX-License-Identifier: MIT */
/* Notifications in the farm database, on either store (sql.h): making a notification once by
 * its key, grouping problems, leasing deliveries to one server instance, and the lists. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "notify-store.h"
#include "rule.h"
#include "timeutil.h"

/* The columns of a notification, as row_json() reads them. */
#define ROW_COLUMNS                                                                         \
        "n.id, n.kind, n.status, n.machine_id, n.hostname, n.release, n.series, n.groups, " \
        "n.event_ns, n.last_ns, n.created_ns, n.not_before_ns, n.count, n.detail, n.path"

/* On PostgreSQL the transaction holds the farm's lock of changes (farm_begin_write()), so that
 * the notifications' writes of every server instance take turns, as SQLite's one writer makes
 * them; the lease of a delivery is in addition taken by a compare-and-set that holds without
 * it. */
int notify_store_write(farm_db *db, notify_write_fn fn, void *userdata,
                       char err[static FARM_ERROR_MAX]) {
        return FARM_WRITE_TRANSACTION(db, c, err, fn(c, userdata, err));
}

static int add_deliveries(sql_conn *c, int64_t id, const struct notify_new *n,
                          int64_t not_before_ns, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "INSERT INTO notification_deliveries (notification, channel, state, "
                             "next_ns) VALUES (?, ?, 'pending', ?)",
                             &st, err);
        for (size_t i = 0; r >= 0 && i < n->nchannels; i++) {
                sql_bind_int64(st, 1, id);
                sql_bind_text(st, 2, n->channels[i]);
                sql_bind_int64(st, 3, not_before_ns);
                r = farm_step_done(st, "cannot queue a notification", err);
        }
        return r;
}

int notify_store_insert(sql_conn *c, const struct notify_new *n, int64_t now_ns,
                        int64_t not_before_ns, int64_t *ret_id, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        _cleanup_free_ char *detail = json_dumps(n->detail, JSON_COMPACT);
        int r = farm_prepare(c,
                             "INSERT INTO notifications (key, kind, status, grp, machine_id, "
                             "hostname, release, series, groups, event_ns, last_ns, created_ns, "
                             "not_before_ns, count, detail, path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                             "?7, ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14, ?15) "
                             "ON CONFLICT (key) DO NOTHING RETURNING id",
                             &st, err);
        if (r < 0)
                return r;
        if (!detail)
                return -ENOMEM;
        sql_bind_text(st, 1, n->key);
        sql_bind_text(st, 2, notify_kind_names[n->kind]);
        sql_bind_text(st, 3, n->status);
        sql_bind_text(st, 4, n->grp);
        sql_bind_text(st, 5, n->machine_id);
        sql_bind_text(st, 6, n->hostname);
        sql_bind_text(st, 7, n->release);
        sql_bind_text(st, 8, n->series);
        sql_bind_text(st, 9, n->groups ?: "");
        sql_bind_int64(st, 10, n->event_ns);
        sql_bind_int64(st, 11, now_ns);
        sql_bind_int64(st, 12, not_before_ns);
        sql_bind_int64(st, 13, (int64_t) (n->count ?: 1));
        sql_bind_text(st, 14, detail);
        sql_bind_text(st, 15, n->path ?: "/");
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return 0; /* made before */
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot store a notification", err);
        int64_t id = sql_column_int64(st, 0);
        sql_reset(st);
        if ((r = add_deliveries(c, id, n, not_before_ns, err)) < 0)
                return r;
        if (ret_id)
                *ret_id = id;
        return 1;
}

int notify_store_seen_add(sql_conn *c, const char *problem, const char *release, int64_t now_ns,
                          char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "INSERT INTO notify_seen (problem, release, seen_ns) VALUES (?, ?, ?) "
                             "ON CONFLICT (problem) DO NOTHING",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, problem);
        sql_bind_text(st, 2, release ?: "");
        sql_bind_int64(st, 3, now_ns);
        if ((r = farm_step_done(st, "cannot record a problem as seen", err)) < 0)
                return r;
        return sql_changes(st) > 0;
}

int notify_store_open_group(sql_conn *c, const char *grp, int64_t now_ns, int64_t *ret_id,
                            uint64_t *ret_count, json_t **ret_detail, int64_t *ret_last_due_ns,
                            char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT id, sealed, not_before_ns, count, detail FROM notifications "
                             "WHERE grp = ? ORDER BY id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, grp);
        int rc = sql_step(st);
        *ret_last_due_ns = INT64_MIN;
        if (rc == SQL_DONE)
                return 0;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the notifications", err);
        *ret_last_due_ns = sql_column_int64(st, 2);
        if (sql_column_int64(st, 1) != 0 || sql_column_int64(st, 2) <= now_ns)
                return 0;
        json_error_t je;
        *ret_id = sql_column_int64(st, 0);
        *ret_count = (uint64_t) sql_column_int64(st, 3);
        *ret_detail = json_loads(sql_column_text(st, 4) ?: "{}", 0, &je);
        return *ret_detail ? 1 : -EBADMSG;
}

int notify_store_group_update(sql_conn *c, int64_t id, uint64_t count, int64_t last_ns,
                              json_t *detail, const char *path, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        _cleanup_free_ char *text = json_dumps(detail, JSON_COMPACT);
        int r = farm_prepare(c,
                             "UPDATE notifications SET count = ?2, last_ns = greatest(last_ns, "
                             "?3), detail = ?4, path = ?5 WHERE id = ?1",
                             &st, err);
        if (r < 0)
                return r;
        if (!text)
                return -ENOMEM;
        sql_bind_int64(st, 1, id);
        sql_bind_int64(st, 2, (int64_t) count);
        sql_bind_int64(st, 3, last_ns);
        sql_bind_text(st, 4, text);
        sql_bind_text(st, 5, path);
        return farm_step_done(st, "cannot update a notification", err);
}

/* ---- the engine's state ---- */

int notify_state_get(sql_conn *c, const char *key, char **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT value FROM notify_state WHERE key = ?", &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, key);
        int rc = sql_step(st);
        *ret = NULL;
        if (rc == SQL_DONE)
                return 0;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the notifications' state", err);
        *ret = strdup(sql_column_text(st, 0) ?: "");
        return *ret ? 1 : -ENOMEM;
}

int notify_state_read(farm_db *db, const char *key, char **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        return notify_state_get(c, key, ret, err);
}

int notify_state_list(farm_db *db, const char *prefix, json_t **ret,
                      char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *o = json_object();
        int r = farm_prepare(c,
                             "SELECT key, value FROM notify_state WHERE substr(key, 1, "
                             "length(?1)) = ?1 ORDER BY key",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        if (!o)
                return -ENOMEM;
        sql_bind_text(st, 1, prefix);
        while ((rc = sql_step(st)) == SQL_ROW)
                if (json_object_set_new(o, sql_column_text(st, 0) ?: "",
                                        farm_json_col_text(st, 1)) < 0)
                        return -ENOMEM;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the notifications' state", err);
        *ret = json_incref(o);
        return 0;
}

int notify_state_set(sql_conn *c, const char *key, const char *value, int64_t now_ns, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "INSERT INTO notify_state (key, value, updated_ns) VALUES (?1, ?2, "
                             "?3) ON CONFLICT (key) DO UPDATE SET value = ?2, updated_ns = ?3",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, key);
        sql_bind_text(st, 2, value);
        sql_bind_int64(st, 3, now_ns);
        return farm_step_done(st, "cannot write the notifications' state", err);
}

int notify_state_del(sql_conn *c, const char *key, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "DELETE FROM notify_state WHERE key = ?", &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, key);
        return farm_step_done(st, "cannot write the notifications' state", err);
}

int notify_store_seen_has(farm_db *db, const char *problem, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT 1 FROM notify_seen WHERE problem = ?", &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, problem);
        int rc = sql_step(st);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the seen problems", err);
        return rc == SQL_ROW;
}

/* ---- the sources ---- */

static char *col_dup(sql_stmt *st, int col) {
        return strdup(sql_column_text(st, col) ?: "");
}

static int64_t col_time(sql_stmt *st, int col) {
        return sql_column_null(st, col) ? INT64_MIN : sql_column_int64(st, col);
}

/* A window is in force from from_ns to the earlier of to_ns and its cancel (one cancelled
 * before it began never is). */
#define MACHINE_COLUMNS                                                                          \
        "SELECT m.id, m.hostname, m.enrolled_ns, m.last_report_ns, (SELECT s.groups FROM "       \
        "machine_settings s WHERE s.machine_id = m.id ORDER BY s.from_ns DESC, s.id DESC "       \
        "LIMIT 1), (SELECT max(least(w.to_ns, coalesce(w.cancelled_ns, w.to_ns))) FROM "         \
        "maintenance w WHERE w.machine_id = m.id AND w.from_ns <= ?1 AND "                       \
        "least(w.to_ns, coalesce(w.cancelled_ns, w.to_ns)) > w.from_ns), EXISTS (SELECT 1 FROM " \
        "maintenance w WHERE w.machine_id = m.id AND w.from_ns <= ?1 AND "                       \
        "least(w.to_ns, coalesce(w.cancelled_ns, w.to_ns)) > ?1) FROM machines m "

static int machine_row(sql_stmt *st, struct notify_machine *m) {
        snprintf(m->id, sizeof(m->id), "%s", sql_column_text(st, 0) ?: "");
        m->hostname = col_dup(st, 1);
        m->enrolled_ns = sql_column_int64(st, 2);
        m->last_report_ns = col_time(st, 3);
        m->groups = col_dup(st, 4);
        m->quiet_until_ns = col_time(st, 5);
        m->in_window = sql_column_int(st, 6) != 0;
        return m->hostname && m->groups ? 0 : -ENOMEM;
}

void notify_machines_free(struct notify_machine *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].hostname);
                free(v[i].groups);
        }
        free(v);
}

int notify_store_gating_machines(farm_db *db, int64_t now_ns, struct notify_machine **ret,
                                 size_t *ret_n, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        struct notify_machine *v = NULL;
        size_t n = 0;
        int r = farm_prepare(
                c, MACHINE_COLUMNS "WHERE m.gating = 1 AND m.revoked_ns IS NULL ORDER BY m.id", &st,
                err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, now_ns);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct notify_machine *x = realloc(v, (n + 1) * sizeof(*x));
                if (!x) {
                        r = -ENOMEM;
                        break;
                }
                v = x;
                v[n] = (struct notify_machine){};
                if ((r = machine_row(st, &v[n++])) < 0)
                        break;
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot list the machines", err);
        if (r < 0) {
                notify_machines_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int notify_store_machine(farm_db *db, const char *id, struct notify_machine *ret,
                         char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, MACHINE_COLUMNS "WHERE m.id = ?2", &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, now_ns(CLOCK_REALTIME));
        sql_bind_text(st, 2, id);
        int rc = sql_step(st);
        *ret = (struct notify_machine){};
        if (rc == SQL_DONE)
                return -ENOENT;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read a machine", err);
        return machine_row(st, ret);
}

void notify_audit_free(struct notify_audit *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].who);
                free(v[i].action);
                free(v[i].release);
                free(v[i].problem);
                free(v[i].detail);
        }
        free(v);
}

int notify_store_waiver_actions(farm_db *db, int64_t after, struct notify_audit **ret,
                                size_t *ret_n, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        struct notify_audit *v = NULL;
        size_t n = 0;
        int r = farm_prepare(c,
                             "SELECT id, time_ns, coalesce(waiver, 0), who, action, "
                             "kernel_release, problem, detail FROM audit WHERE id > ? AND action "
                             "IN ('waive', 'unwaive') ORDER BY id LIMIT 100",
                             &st, err),
            rc = SQL_DONE;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, after);
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                struct notify_audit *x = realloc(v, (n + 1) * sizeof(*x));
                if (!x) {
                        r = -ENOMEM;
                        break;
                }
                v = x;
                v[n] = (struct notify_audit){ sql_column_int64(st, 0), sql_column_int64(st, 1),
                                              sql_column_int64(st, 2), col_dup(st, 3),
                                              col_dup(st, 4),          col_dup(st, 5),
                                              col_dup(st, 6),          col_dup(st, 7) };
                if (!v[n].who || !v[n].action || !v[n].release || !v[n].problem || !v[n].detail)
                        r = -ENOMEM;
                n++;
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the audit trail", err);
        if (r < 0) {
                notify_audit_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The first column of the only row of sql (no parameter) on a reader. */
static int read_int(farm_db *db, const char *sql, const char *what, int64_t *ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, sql, &st, err);
        if (r < 0)
                return r;
        int rc = sql_step(st);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, what, err);
        *ret = sql_column_null(st, 0) ? INT64_MIN : sql_column_int64(st, 0);
        return 0;
}

int notify_store_audit_last(farm_db *db, int64_t *ret, char err[static FARM_ERROR_MAX]) {
        return read_int(db, "SELECT coalesce(max(id), 0) FROM audit", "cannot read the audit trail",
                        ret, err);
}

int notify_store_latest_stable(farm_db *db, json_t **ret, int64_t *ret_log_id,
                               char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *best = json_object();
        int64_t last = 0;
        /* The last status logged for every release. */
        int r = farm_prepare(c,
                             "SELECT l.series, l.release, l.status, (SELECT max(id) FROM "
                             "verdict_log) FROM verdict_log l WHERE l.id = (SELECT x.id FROM "
                             "verdict_log x WHERE x.release = l.release ORDER BY x.at_ns DESC, "
                             "x.id DESC LIMIT 1)",
                             &st, err);
        if (r < 0)
                return r;
        if (!best)
                return -ENOMEM;
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *series = sql_column_text(st, 0) ?: "",
                           *rel = sql_column_text(st, 1) ?: "",
                           *status = sql_column_text(st, 2) ?: "";
                const char *cur = json_string_value(json_object_get(best, series));
                last = sql_column_int64(st, 3);
                if (strcmp(status, "qualified") != 0) {
                        if (!json_object_get(best, series))
                                json_object_set_new(best, series, json_null());
                        continue;
                }
                if (!cur || farm_version_cmp(rel, cur) > 0)
                        json_object_set_new(best, series, json_string(rel));
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the verdict log", err);
        *ret = json_incref(best);
        *ret_log_id = last;
        return 0;
}

/* ---- delivery ---- */

/* A notification row (ROW_COLUMNS) as the API lists it. */
static json_t *row_json(sql_stmt *st) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN], t3[TIMESTAMP_MAX_LEN];
        json_t *groups = json_array(),
               *detail = json_loads(sql_column_text(st, 13) ?: "{}", 0, NULL);
        for (const char *p = sql_column_text(st, 7) ?: ""; *p;) {
                size_t len = strcspn(p, ",");
                json_array_append_new(groups, json_stringn(p, len));
                p += len + (p[len] == ',');
        }
        int64_t event = sql_column_int64(st, 8), last = sql_column_int64(st, 9),
                created = sql_column_int64(st, 10);
        return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:s, s:I, s:s, s:I, "
                         "s:I, s:I, s:o, s:o}",
                         "id", (json_int_t) sql_column_int64(st, 0), "kind",
                         farm_json_col_text(st, 1), "status", farm_json_col_text(st, 2), "machine",
                         farm_json_col_text(st, 3), "hostname", farm_json_col_text(st, 4),
                         "release", farm_json_col_text(st, 5), "series", farm_json_col_text(st, 6),
                         "groups", groups, "time", format_timestamp_utc(t1, event), "time_ns",
                         (json_int_t) event, "last", format_timestamp_utc(t2, last), "last_ns",
                         (json_int_t) last, "created", format_timestamp_utc(t3, created),
                         "created_ns", (json_int_t) created, "due_ns",
                         (json_int_t) sql_column_int64(st, 11), "count",
                         (json_int_t) sql_column_int64(st, 12), "detail", detail ?: json_object(),
                         "path", farm_json_col_text(st, 14));
}

void notify_claim_done(struct notify_claim *c) {
        json_decref(c->row);
        c->row = NULL;
}

struct claim_args {
        const char *channel, *owner;
        int64_t now, lease;
        struct notify_claim *ret;
};

/* The oldest due delivery, leased if nobody holds it: the lease is a compare-and-set (the
 * UPDATE changes the row only while it is pending and unleased), so that two instances never
 * both take it, whatever the isolation of the store; the one that lost sees no change and
 * looks again at its next turn. */
static int claim_in(sql_conn *conn, void *userdata, char *err) {
        struct claim_args *a = userdata;
        _cleanup_reset_ sql_stmt *sel = NULL, *lease = NULL, *seal = NULL, *row = NULL;
        int r;
        if ((r = farm_prepare(conn,
                              "SELECT d.id, d.notification, d.attempts FROM "
                              "notification_deliveries d JOIN notifications n ON n.id = "
                              "d.notification WHERE d.channel = ?1 AND d.state = 'pending' AND "
                              "d.next_ns <= ?2 AND n.not_before_ns <= ?2 AND (d.lease_until_ns IS "
                              "NULL OR d.lease_until_ns <= ?2) ORDER BY d.next_ns, d.id LIMIT 1",
                              &sel, err)) < 0 ||
            (r = farm_prepare(conn,
                              "UPDATE notification_deliveries SET lease_owner = ?2, "
                              "lease_until_ns = ?3 WHERE id = ?1 AND state = 'pending' AND "
                              "(lease_until_ns IS NULL OR lease_until_ns <= ?4)",
                              &lease, err)) < 0 ||
            (r = farm_prepare(conn, "UPDATE notifications SET sealed = 1 WHERE id = ?", &seal,
                              err)) < 0 ||
            (r = farm_prepare(conn, "SELECT " ROW_COLUMNS " FROM notifications n WHERE n.id = ?",
                              &row, err)) < 0)
                return r;
        sql_bind_text(sel, 1, a->channel);
        sql_bind_int64(sel, 2, a->now);
        int rc = sql_step(sel);
        if (rc == SQL_DONE)
                return 0;
        if (rc != SQL_ROW)
                return farm_fail(conn, rc, "cannot read the deliveries", err);
        struct notify_claim *c = a->ret;
        c->delivery = sql_column_int64(sel, 0);
        c->notification = sql_column_int64(sel, 1);
        c->attempts = sql_column_int64(sel, 2);
        snprintf(c->channel, sizeof(c->channel), "%s", a->channel);
        sql_reset(sel);
        sql_bind_int64(lease, 1, c->delivery);
        sql_bind_text(lease, 2, a->owner);
        sql_bind_int64(lease, 3, a->now + a->lease);
        sql_bind_int64(lease, 4, a->now);
        if ((r = farm_step_done(lease, "cannot lease a delivery", err)) < 0)
                return r;
        if (sql_changes(lease) == 0)
                return 0; /* another instance took it meanwhile */
        sql_bind_int64(seal, 1, c->notification);
        if ((r = farm_step_done(seal, "cannot seal a notification", err)) < 0)
                return r;
        sql_bind_int64(row, 1, c->notification);
        if ((rc = sql_step(row)) != SQL_ROW)
                return farm_fail(conn, rc, "cannot read a notification", err);
        c->row = row_json(row);
        return c->row ? 1 : -ENOMEM;
}

int notify_store_claim(farm_db *db, const char *channel, const char *owner, int64_t now_ns,
                       int64_t lease_ns, struct notify_claim *ret,
                       char err[static FARM_ERROR_MAX]) {
        struct claim_args a = { channel, owner, now_ns, lease_ns, ret };
        *ret = (struct notify_claim){};
        int r = notify_store_write(db, claim_in, &a, err);
        if (r <= 0)
                notify_claim_done(ret);
        return r;
}

int notify_store_next_due(farm_db *db, const char *channel, int64_t *ret,
                          char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT min(greatest(d.next_ns, n.not_before_ns, "
                             "coalesce(d.lease_until_ns, 0))) FROM notification_deliveries d JOIN "
                             "notifications n ON n.id = d.notification WHERE d.channel = ? AND "
                             "d.state = 'pending'",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, channel);
        int rc = sql_step(st);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the deliveries", err);
        *ret = sql_column_null(st, 0) ? INT64_MAX : sql_column_int64(st, 0);
        return 0;
}

struct finish_args {
        int64_t delivery;
        const char *owner;
        enum notify_outcome outcome;
        int64_t now, next;
        const char *error;
};

static int finish_in(sql_conn *c, void *userdata, char *err) {
        struct finish_args *a = userdata;
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(
                c,
                "UPDATE notification_deliveries SET lease_owner = NULL, lease_until_ns = NULL, "
                "state = CASE ?3 WHEN 0 THEN 'sent' WHEN 2 THEN 'failed' ELSE state END, "
                "attempts = attempts + CASE ?3 WHEN 3 THEN 0 ELSE 1 END, next_ns = CASE ?3 WHEN "
                "1 THEN ?5 ELSE next_ns END, done_ns = CASE WHEN ?3 IN (0, 2) THEN ?4 ELSE "
                "done_ns END, last_error = CASE ?3 WHEN 3 THEN last_error WHEN 0 THEN NULL ELSE "
                "?6 END WHERE id = ?1 AND lease_owner = ?2",
                &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, a->delivery);
        sql_bind_text(st, 2, a->owner);
        sql_bind_int64(st, 3, (int64_t) a->outcome);
        sql_bind_int64(st, 4, a->now);
        sql_bind_int64(st, 5, a->next);
        sql_bind_text(st, 6, a->error);
        if ((r = farm_step_done(st, "cannot record a delivery", err)) < 0)
                return r;
        if (sql_changes(st) == 0)
                return farm_failf(farm_of(c), -ESTALE, err,
                                  "delivery %" PRId64 ": its lease ran out and another server "
                                  "instance took it over",
                                  a->delivery);
        return 0;
}

int notify_store_finish(farm_db *db, int64_t delivery, const char *owner,
                        enum notify_outcome outcome, int64_t now_ns, int64_t next_ns,
                        const char *error, char err[static FARM_ERROR_MAX]) {
        _Static_assert(NOTIFY_SENT == 0 && NOTIFY_RETRY == 1 && NOTIFY_FAILED == 2 &&
                               NOTIFY_GIVEN_BACK == 3,
                       "the numbers of the SQL above");
        struct finish_args a = { delivery, owner, outcome, now_ns, next_ns, error };
        return notify_store_write(db, finish_in, &a, err);
}

struct orphan_args {
        const struct notify_config *c;
        int64_t now;
};

static int orphans_in(sql_conn *c, void *userdata, char *err) {
        struct orphan_args *a = userdata;
        _cleanup_reset_ sql_stmt *sel = NULL, *upd = NULL;
        json_auto_t *names = json_array();
        int r, rc;
        if ((r = farm_prepare(c,
                              "SELECT DISTINCT channel FROM notification_deliveries WHERE state = "
                              "'pending'",
                              &sel, err)) < 0 ||
            (r = farm_prepare(c,
                              "UPDATE notification_deliveries SET state = 'failed', done_ns = ?2, "
                              "last_error = 'the channel is no longer configured', lease_owner = "
                              "NULL, lease_until_ns = NULL WHERE channel = ?1 AND state = "
                              "'pending'",
                              &upd, err)) < 0)
                return r;
        while ((rc = sql_step(sel)) == SQL_ROW)
                json_array_append_new(names, farm_json_col_text(sel, 0));
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the deliveries", err);
        size_t i;
        json_t *name;
        json_array_foreach (names, i, name) {
                if (notify_channel_find(a->c, json_string_value(name)))
                        continue;
                sql_bind_text(upd, 1, json_string_value(name));
                sql_bind_int64(upd, 2, a->now);
                if ((r = farm_step_done(upd, "cannot record a delivery", err)) < 0)
                        return r;
        }
        return 0;
}

int notify_store_orphans(farm_db *db, const struct notify_config *c, int64_t now_ns,
                         char err[static FARM_ERROR_MAX]) {
        struct orphan_args a = { c, now_ns };
        return notify_store_write(db, orphans_in, &a, err);
}

struct retry_args {
        int64_t delivery, now;
};

static int retry_in(sql_conn *c, void *userdata, char *err) {
        struct retry_args *a = userdata;
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "UPDATE notification_deliveries SET state = 'pending', attempts = 0, "
                             "next_ns = ?2, done_ns = NULL, lease_owner = NULL, lease_until_ns = "
                             "NULL WHERE state = 'failed' AND (?1 = 0 OR id = ?1)",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, a->delivery);
        sql_bind_int64(st, 2, a->now);
        if ((r = farm_step_done(st, "cannot requeue deliveries", err)) < 0)
                return r;
        return (int) sql_changes(st);
}

int notify_store_retry(farm_db *db, int64_t delivery, int64_t now_ns,
                       char err[static FARM_ERROR_MAX]) {
        struct retry_args a = { delivery, now_ns };
        return notify_store_write(db, retry_in, &a, err);
}

static int prune_in(sql_conn *c, void *userdata, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "DELETE FROM notifications WHERE created_ns < ?1 AND not_before_ns < "
                             "?1 AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE "
                             "d.notification = notifications.id AND d.state = 'pending')",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, *(int64_t *) userdata);
        if ((r = farm_step_done(st, "cannot delete old notifications", err)) < 0)
                return r;
        return (int) sql_changes(st);
}

int notify_store_prune(farm_db *db, int64_t before_ns, char err[static FARM_ERROR_MAX]) {
        return notify_store_write(db, prune_in, &before_ns, err);
}

/* ---- the lists ---- */

static int deliveries_json(sql_conn *c, int64_t id, json_t **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *list = json_array();
        char t[TIMESTAMP_MAX_LEN];
        int r = farm_prepare(c,
                             "SELECT id, channel, state, attempts, next_ns, done_ns, last_error "
                             "FROM notification_deliveries WHERE notification = ? ORDER BY channel",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, id);
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *state = sql_column_text(st, 2) ?: "";
                bool pending = strcmp(state, "pending") == 0;
                int64_t done = col_time(st, 5);
                json_t *d = json_pack("{s:I, s:o, s:s, s:I, s:o, s:o, s:o}", "id",
                                      (json_int_t) sql_column_int64(st, 0), "channel",
                                      farm_json_col_text(st, 1), "state", state, "attempts",
                                      (json_int_t) sql_column_int64(st, 3), "next_attempt_ns",
                                      pending ? json_integer(sql_column_int64(st, 4)) : json_null(),
                                      "done",
                                      done != INT64_MIN ? json_string(format_timestamp_utc(t, done))
                                                        : json_null(),
                                      "error", farm_json_col_text(st, 6));
                if (!d || json_array_append_new(list, d) < 0)
                        return -ENOMEM;
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the deliveries", err);
        *ret = json_incref(list);
        return 0;
}

/* A filter left out is NULL: its parameter is cast, so that PostgreSQL knows its type. */
#define LIST_WHERE                                                                        \
        " FROM notifications n WHERE (CAST(?1 AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM " \
        "notification_deliveries d WHERE d.notification = n.id AND d.state = ?1)) AND "   \
        "(CAST(?2 AS TEXT) IS NULL OR n.kind = ?2) AND (CAST(?3 AS TEXT) IS NULL OR "     \
        "n.machine_id = ?3) AND (CAST(?4 AS TEXT) IS NULL OR n.release = ?4)"

static void bind_filter(sql_stmt *st, const struct notify_filter *f) {
        sql_bind_text(st, 1, f->state);
        sql_bind_text(st, 2, f->kind);
        sql_bind_text(st, 3, f->machine);
        sql_bind_text(st, 4, f->release);
}

/* The notifications of one page, each with its deliveries. */
static int list_in(sql_conn *c, const struct notify_filter *f, const struct farm_page *page,
                   json_t **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL, *cnt = NULL;
        json_auto_t *list = json_array();
        int r, rc;
        if ((r = farm_prepare(c, "SELECT count(*)" LIST_WHERE, &cnt, err)) < 0 ||
            (r = farm_prepare(
                     c, "SELECT " ROW_COLUMNS LIST_WHERE " ORDER BY n.id DESC LIMIT ?5 OFFSET ?6",
                     &st, err)) < 0)
                return r;
        if (!list)
                return -ENOMEM;
        bind_filter(cnt, f);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count notifications", err);
        int64_t total = sql_column_int64(cnt, 0);
        bind_filter(st, f);
        sql_bind_int64(st, 5, (int64_t) MIN(page->limit, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 6, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        while ((rc = sql_step(st)) == SQL_ROW) {
                json_t *n = row_json(st), *d = NULL;
                if (!n || (r = deliveries_json(c, sql_column_int64(st, 0), &d, err)) < 0) {
                        json_decref(n);
                        return r < 0 ? r : -ENOMEM;
                }
                json_object_set_new(n, "deliveries", d);
                if (json_array_append_new(list, n) < 0)
                        return -ENOMEM;
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list notifications", err);
        *ret = json_pack("{s:O, s:I, s:I, s:I}", "notifications", list, "total", (json_int_t) total,
                         "limit", (json_int_t) page->limit, "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

int notify_store_list(farm_db *db, const struct notify_filter *f, const struct farm_page *page,
                      json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        return list_in(c, f, page, ret, err);
}

int notify_store_metric_deliveries(farm_db *db, FILE *f, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT channel, state, count(*) FROM notification_deliveries GROUP "
                             "BY 1, 2 ORDER BY 1, 2",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        while ((rc = sql_step(st)) == SQL_ROW)
                fprintf(f, "rtsoak_notification_deliveries{channel=\"%s\",state=\"%s\"} %lld\n",
                        sql_column_text(st, 0) ?: "", sql_column_text(st, 1) ?: "",
                        (long long) sql_column_int64(st, 2));
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot count deliveries", err);
        return 0;
}

int notify_store_metric_oldest(farm_db *db, FILE *f, int64_t now_ns,
                               char err[static FARM_ERROR_MAX]) {
        int64_t t;
        int r = read_int(db,
                         "SELECT min(n.created_ns) FROM notification_deliveries d JOIN "
                         "notifications n ON n.id = d.notification WHERE d.state = 'pending'",
                         "cannot read deliveries", &t, err);
        if (r < 0)
                return r;
        fprintf(f, "rtsoak_notification_oldest_pending_seconds %.3f\n",
                (double) MAX(now_ns - (t == INT64_MIN ? now_ns : t), 0) / 1e9);
        return 0;
}
