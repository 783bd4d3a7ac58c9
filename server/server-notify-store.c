/* SPDX-License-Identifier: MIT */
/* Notifications in the farm database (SQLite): the schema, making a notification once by its
 * key, grouping problems, leasing deliveries to one server instance, and the lists. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-db-internal.h"
#include "server-notify-store.h"
#include "server-rule.h"
#include "timeutil.h"

/* 6 -> 7.  A notification is made once per key (a silence's start, a verdict's change, a
 * group of problems): two server instances on one database make it once between them.  Its
 * deliveries, one per channel, are leased to the instance that sends them (lease_owner until
 * lease_until_ns); a lease that runs out (the instance died) lets another take the delivery.
 * notify_seen holds every problem id already announced; notify_state the engine's small
 * state (silences announced, the latest stable told, the audit rows read). */
const char notify_store_migration[] =
        "CREATE TABLE notifications ("
        "  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,"
        "  status TEXT NOT NULL, grp TEXT, machine_id TEXT, hostname TEXT, release TEXT,"
        "  series TEXT, groups TEXT NOT NULL, event_ns INTEGER NOT NULL,"
        "  last_ns INTEGER NOT NULL, created_ns INTEGER NOT NULL,"
        "  not_before_ns INTEGER NOT NULL, sealed INTEGER NOT NULL DEFAULT 0,"
        "  count INTEGER NOT NULL DEFAULT 1, detail TEXT NOT NULL, path TEXT NOT NULL);"
        "CREATE INDEX notifications_grp ON notifications(grp, id);"
        "CREATE INDEX notifications_created ON notifications(created_ns);"
        "CREATE TABLE notification_deliveries ("
        "  id INTEGER PRIMARY KEY,"
        "  notification INTEGER NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,"
        "  channel TEXT NOT NULL,"
        "  state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),"
        "  attempts INTEGER NOT NULL DEFAULT 0, next_ns INTEGER NOT NULL,"
        "  lease_owner TEXT, lease_until_ns INTEGER, done_ns INTEGER, last_error TEXT,"
        "  UNIQUE (notification, channel));"
        "CREATE INDEX notification_deliveries_due ON notification_deliveries(channel, state,"
        "  next_ns);"
        "CREATE INDEX notification_deliveries_state ON notification_deliveries(state,"
        "  notification);"
        "CREATE TABLE notify_seen (problem TEXT PRIMARY KEY, release TEXT NOT NULL,"
        "  seen_ns INTEGER NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE notify_state (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        "  updated_ns INTEGER NOT NULL) WITHOUT ROWID;";

/* The columns of a notification, as row_json() reads them. */
#define ROW_COLUMNS                                                                         \
        "n.id, n.kind, n.status, n.machine_id, n.hostname, n.release, n.series, n.groups, " \
        "n.event_ns, n.last_ns, n.created_ns, n.not_before_ns, n.count, n.detail, n.path"

int notify_store_write(farm_db *db, int (*fn)(farm_db *db, void *userdata, char *err),
                       void *userdata, char err[static FARM_ERROR_MAX]) {
        return FARM_WRITE_TRANSACTION(db, err, fn(db, userdata, err));
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
        if (s)
                sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
        else
                sqlite3_bind_null(st, i);
}

static int add_deliveries(farm_db *db, int64_t id, const struct notify_new *n,
                          int64_t not_before_ns, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "INSERT INTO notification_deliveries (notification, channel, "
                               "state, next_ns) VALUES (?, ?, 'pending', ?)",
                               &st, err);
        for (size_t i = 0; r >= 0 && i < n->nchannels; i++) {
                sqlite3_bind_int64(st, 1, id);
                sqlite3_bind_text(st, 2, n->channels[i], -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 3, not_before_ns);
                r = farm_step_done(db, st, "cannot queue a notification", err);
        }
        return r;
}

int notify_store_insert(farm_db *db, const struct notify_new *n, int64_t now_ns,
                        int64_t not_before_ns, int64_t *ret_id, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        _cleanup_free_ char *detail = json_dumps(n->detail, JSON_COMPACT);
        int r = farm_prepare_w(db,
                               "INSERT INTO notifications (key, kind, status, grp, machine_id, "
                               "hostname, release, series, groups, event_ns, last_ns, created_ns, "
                               "not_before_ns, count, detail, path) VALUES (?1, ?2, ?3, ?4, ?5, "
                               "?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12, ?13, ?14, ?15) "
                               "ON CONFLICT (key) DO NOTHING",
                               &st, err);
        if (r < 0)
                return r;
        if (!detail)
                return -ENOMEM;
        sqlite3_bind_text(st, 1, n->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, notify_kind_names[n->kind], -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, n->status, -1, SQLITE_STATIC);
        bind_text_or_null(st, 4, n->grp);
        bind_text_or_null(st, 5, n->machine_id);
        bind_text_or_null(st, 6, n->hostname);
        bind_text_or_null(st, 7, n->release);
        bind_text_or_null(st, 8, n->series);
        sqlite3_bind_text(st, 9, n->groups ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 10, n->event_ns);
        sqlite3_bind_int64(st, 11, now_ns);
        sqlite3_bind_int64(st, 12, not_before_ns);
        sqlite3_bind_int64(st, 13, (int64_t) (n->count ?: 1));
        sqlite3_bind_text(st, 14, detail, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 15, n->path ?: "/", -1, SQLITE_STATIC);
        if ((r = farm_step_done(db, st, "cannot store a notification", err)) < 0)
                return r;
        if (sqlite3_changes(farm_db_writer(db)) == 0)
                return 0;
        int64_t id = sqlite3_last_insert_rowid(farm_db_writer(db));
        if ((r = add_deliveries(db, id, n, not_before_ns, err)) < 0)
                return r;
        if (ret_id)
                *ret_id = id;
        return 1;
}

int notify_store_seen_add(farm_db *db, const char *problem, const char *release, int64_t now_ns,
                          char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "INSERT INTO notify_seen (problem, release, seen_ns) VALUES (?, ?, "
                               "?) ON CONFLICT (problem) DO NOTHING",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, problem, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, release ?: "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, now_ns);
        if ((r = farm_step_done(db, st, "cannot record a problem as seen", err)) < 0)
                return r;
        return sqlite3_changes(farm_db_writer(db)) > 0;
}

int notify_store_open_group(farm_db *db, const char *grp, int64_t now_ns, int64_t *ret_id,
                            uint64_t *ret_count, json_t **ret_detail, int64_t *ret_last_due_ns,
                            char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "SELECT id, sealed, not_before_ns, count, detail FROM "
                               "notifications WHERE grp = ? ORDER BY id DESC LIMIT 1",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, grp, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        *ret_last_due_ns = INT64_MIN;
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_writer(db), rc, "cannot read the notifications",
                                    err);
        *ret_last_due_ns = sqlite3_column_int64(st, 2);
        if (sqlite3_column_int(st, 1) || sqlite3_column_int64(st, 2) <= now_ns)
                return 0;
        json_error_t je;
        *ret_id = sqlite3_column_int64(st, 0);
        *ret_count = (uint64_t) sqlite3_column_int64(st, 3);
        *ret_detail = json_loads((const char *) sqlite3_column_text(st, 4) ?: "{}", 0, &je);
        return *ret_detail ? 1 : -EBADMSG;
}

int notify_store_group_update(farm_db *db, int64_t id, uint64_t count, int64_t last_ns,
                              json_t *detail, const char *path, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        _cleanup_free_ char *text = json_dumps(detail, JSON_COMPACT);
        int r = farm_prepare_w(db,
                               "UPDATE notifications SET count = ?2, last_ns = max(last_ns, ?3), "
                               "detail = ?4, path = ?5 WHERE id = ?1",
                               &st, err);
        if (r < 0)
                return r;
        if (!text)
                return -ENOMEM;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (int64_t) count);
        sqlite3_bind_int64(st, 3, last_ns);
        sqlite3_bind_text(st, 4, text, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, path, -1, SQLITE_STATIC);
        return farm_step_done(db, st, "cannot update a notification", err);
}

/* ---- the engine's state ---- */

static int state_get_on(farm_db *db, bool writer, const char *key, char **ret, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        static const char sql[] = "SELECT value FROM notify_state WHERE key = ?";
        int r = writer ? farm_prepare_w(db, sql, &st, err) : farm_prepare_r(db, sql, &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        *ret = NULL;
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, writer ? farm_db_writer(db) : farm_db_reader(db), rc,
                                    "cannot read the notifications' state", err);
        *ret = strdup((const char *) sqlite3_column_text(st, 0) ?: "");
        return *ret ? 1 : -ENOMEM;
}

int notify_state_get(farm_db *db, const char *key, char **ret, char *err) {
        return state_get_on(db, true, key, ret, err);
}

int notify_state_read(farm_db *db, const char *key, char **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        return state_get_on(db, false, key, ret, err);
}

int notify_state_list(farm_db *db, const char *prefix, json_t **ret,
                      char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        json_auto_t *o = json_object();
        int r = farm_prepare_r(db,
                               "SELECT key, value FROM notify_state WHERE substr(key, 1, "
                               "length(?1)) = ?1 ORDER BY key",
                               &st, err),
            rc;
        if (r < 0)
                return r;
        if (!o)
                return -ENOMEM;
        sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if (json_object_set_new(o, (const char *) sqlite3_column_text(st, 0) ?: "",
                                        farm_json_col_text(st, 1)) < 0)
                        return -ENOMEM;
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc,
                                    "cannot read the notifications' state", err);
        *ret = json_incref(o);
        return 0;
}

int notify_state_set(farm_db *db, const char *key, const char *value, int64_t now_ns, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "INSERT INTO notify_state (key, value, updated_ns) VALUES (?1, ?2, "
                               "?3) ON CONFLICT (key) DO UPDATE SET value = ?2, updated_ns = ?3",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, now_ns);
        return farm_step_done(db, st, "cannot write the notifications' state", err);
}

int notify_state_del(farm_db *db, const char *key, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db, "DELETE FROM notify_state WHERE key = ?", &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        return farm_step_done(db, st, "cannot write the notifications' state", err);
}

int notify_store_seen_has(farm_db *db, const char *problem, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db, "SELECT 1 FROM notify_seen WHERE problem = ?", &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, problem, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read the seen problems",
                                    err);
        return rc == SQLITE_ROW;
}

/* ---- the sources ---- */

static char *col_dup(sqlite3_stmt *st, int col) {
        const char *t = (const char *) sqlite3_column_text(st, col);
        return strdup(t ?: "");
}

static int64_t col_time(sqlite3_stmt *st, int col) {
        return sqlite3_column_type(st, col) == SQLITE_NULL ? INT64_MIN
                                                           : sqlite3_column_int64(st, col);
}

/* A window is in force from from_ns to the earlier of to_ns and its cancel (one cancelled
 * before it began never is). */
#define MACHINE_COLUMNS                                                                        \
        "SELECT m.id, m.hostname, m.enrolled_ns, m.last_report_ns, (SELECT s.groups FROM "     \
        "machine_settings s WHERE s.machine_id = m.id ORDER BY s.from_ns DESC, s.id DESC "     \
        "LIMIT 1), (SELECT max(min(w.to_ns, coalesce(w.cancelled_ns, w.to_ns))) FROM "         \
        "maintenance w WHERE w.machine_id = m.id AND w.from_ns <= ?1 AND "                     \
        "min(w.to_ns, coalesce(w.cancelled_ns, w.to_ns)) > w.from_ns), EXISTS (SELECT 1 FROM " \
        "maintenance w WHERE w.machine_id = m.id AND w.from_ns <= ?1 AND "                     \
        "min(w.to_ns, coalesce(w.cancelled_ns, w.to_ns)) > ?1) FROM machines m "

static int machine_row(sqlite3_stmt *st, struct notify_machine *m) {
        snprintf(m->id, sizeof(m->id), "%s", (const char *) sqlite3_column_text(st, 0) ?: "");
        m->hostname = col_dup(st, 1);
        m->enrolled_ns = sqlite3_column_int64(st, 2);
        m->last_report_ns = col_time(st, 3);
        m->groups = col_dup(st, 4);
        m->quiet_until_ns = col_time(st, 5);
        m->in_window = sqlite3_column_int(st, 6);
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
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        struct notify_machine *v = NULL;
        size_t n = 0;
        int r = farm_prepare_r(
                db, MACHINE_COLUMNS "WHERE m.gating = 1 AND m.revoked_ns IS NULL ORDER BY m.id",
                &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, now_ns);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
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
        if (r >= 0 && rc != SQLITE_DONE)
                r = farm_fail_on(db, farm_db_reader(db), rc, "cannot list the machines", err);
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
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db, MACHINE_COLUMNS "WHERE m.id = ?2", &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, now_ns(CLOCK_REALTIME));
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        *ret = (struct notify_machine){};
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read a machine", err);
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
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        struct notify_audit *v = NULL;
        size_t n = 0;
        int r = farm_prepare_r(db,
                               "SELECT id, time_ns, coalesce(waiver, 0), who, action, "
                               "kernel_release, problem, detail FROM audit WHERE id > ? AND "
                               "action IN ('waive', 'unwaive') ORDER BY id LIMIT 100",
                               &st, err),
            rc = SQLITE_DONE;
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, after);
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct notify_audit *x = realloc(v, (n + 1) * sizeof(*x));
                if (!x) {
                        r = -ENOMEM;
                        break;
                }
                v = x;
                v[n] = (struct notify_audit){ sqlite3_column_int64(st, 0),
                                              sqlite3_column_int64(st, 1),
                                              sqlite3_column_int64(st, 2),
                                              col_dup(st, 3),
                                              col_dup(st, 4),
                                              col_dup(st, 5),
                                              col_dup(st, 6),
                                              col_dup(st, 7) };
                if (!v[n].who || !v[n].action || !v[n].release || !v[n].problem || !v[n].detail)
                        r = -ENOMEM;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = farm_fail_on(db, farm_db_reader(db), rc, "cannot read the audit trail", err);
        if (r < 0) {
                notify_audit_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int notify_store_audit_last(farm_db *db, int64_t *ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db, "SELECT coalesce(max(id), 0) FROM audit", &st, err);
        if (r < 0)
                return r;
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read the audit trail", err);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

int notify_store_latest_stable(farm_db *db, json_t **ret, int64_t *ret_log_id,
                               char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        json_auto_t *best = json_object();
        int64_t last = 0;
        /* The last status logged for every release. */
        int r = farm_prepare_r(db,
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
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *series = (const char *) sqlite3_column_text(st, 0) ?: "",
                           *rel = (const char *) sqlite3_column_text(st, 1) ?: "",
                           *status = (const char *) sqlite3_column_text(st, 2) ?: "";
                const char *cur = json_string_value(json_object_get(best, series));
                last = sqlite3_column_int64(st, 3);
                if (strcmp(status, "qualified") != 0) {
                        if (!json_object_get(best, series))
                                json_object_set_new(best, series, json_null());
                        continue;
                }
                if (!cur || farm_version_cmp(rel, cur) > 0)
                        json_object_set_new(best, series, json_string(rel));
        }
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read the verdict log", err);
        *ret = json_incref(best);
        *ret_log_id = last;
        return 0;
}

/* ---- delivery ---- */

/* A notification row (ROW_COLUMNS) as the API lists it. */
static json_t *row_json(sqlite3_stmt *st) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN], t3[TIMESTAMP_MAX_LEN];
        json_t *groups = json_array(),
               *detail = json_loads((const char *) sqlite3_column_text(st, 13) ?: "{}", 0, NULL);
        for (const char *p = (const char *) sqlite3_column_text(st, 7) ?: ""; *p;) {
                size_t len = strcspn(p, ",");
                json_array_append_new(groups, json_stringn(p, len));
                p += len + (p[len] == ',');
        }
        int64_t event = sqlite3_column_int64(st, 8), last = sqlite3_column_int64(st, 9),
                created = sqlite3_column_int64(st, 10);
        return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:I, s:s, s:I, s:s, s:I, "
                         "s:I, s:I, s:o, s:o}",
                         "id", (json_int_t) sqlite3_column_int64(st, 0), "kind",
                         farm_json_col_text(st, 1), "status", farm_json_col_text(st, 2), "machine",
                         farm_json_col_text(st, 3), "hostname", farm_json_col_text(st, 4),
                         "release", farm_json_col_text(st, 5), "series", farm_json_col_text(st, 6),
                         "groups", groups, "time", format_timestamp_utc(t1, event), "time_ns",
                         (json_int_t) event, "last", format_timestamp_utc(t2, last), "last_ns",
                         (json_int_t) last, "created", format_timestamp_utc(t3, created),
                         "created_ns", (json_int_t) created, "due_ns",
                         (json_int_t) sqlite3_column_int64(st, 11), "count",
                         (json_int_t) sqlite3_column_int64(st, 12), "detail",
                         detail ?: json_object(), "path", farm_json_col_text(st, 14));
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

static int claim_in(farm_db *db, void *userdata, char *err) {
        struct claim_args *a = userdata;
        _cleanup_reset_ sqlite3_stmt *sel = NULL, *lease = NULL, *seal = NULL, *row = NULL;
        int r;
        if ((r = farm_prepare_w(db,
                                "SELECT d.id, d.notification, d.attempts FROM "
                                "notification_deliveries d JOIN notifications n ON n.id = "
                                "d.notification WHERE d.channel = ?1 AND d.state = 'pending' AND "
                                "d.next_ns <= ?2 AND n.not_before_ns <= ?2 AND "
                                "(d.lease_until_ns IS NULL OR d.lease_until_ns <= ?2) ORDER BY "
                                "d.next_ns, d.id LIMIT 1",
                                &sel, err)) < 0 ||
            (r = farm_prepare_w(db,
                                "UPDATE notification_deliveries SET lease_owner = ?2, "
                                "lease_until_ns = ?3 WHERE id = ?1",
                                &lease, err)) < 0 ||
            (r = farm_prepare_w(db, "UPDATE notifications SET sealed = 1 WHERE id = ?", &seal,
                                err)) < 0 ||
            (r = farm_prepare_w(db, "SELECT " ROW_COLUMNS " FROM notifications n WHERE n.id = ?",
                                &row, err)) < 0)
                return r;
        sqlite3_bind_text(sel, 1, a->channel, -1, SQLITE_STATIC);
        sqlite3_bind_int64(sel, 2, a->now);
        int rc = sqlite3_step(sel);
        if (rc == SQLITE_DONE)
                return 0;
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_writer(db), rc, "cannot read the deliveries", err);
        struct notify_claim *c = a->ret;
        c->delivery = sqlite3_column_int64(sel, 0);
        c->notification = sqlite3_column_int64(sel, 1);
        c->attempts = sqlite3_column_int64(sel, 2);
        snprintf(c->channel, sizeof(c->channel), "%s", a->channel);
        sqlite3_bind_int64(lease, 1, c->delivery);
        sqlite3_bind_text(lease, 2, a->owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(lease, 3, a->now + a->lease);
        sqlite3_bind_int64(seal, 1, c->notification);
        if ((r = farm_step_done(db, lease, "cannot lease a delivery", err)) < 0 ||
            (r = farm_step_done(db, seal, "cannot seal a notification", err)) < 0)
                return r;
        sqlite3_bind_int64(row, 1, c->notification);
        if ((rc = sqlite3_step(row)) != SQLITE_ROW)
                return farm_fail_on(db, farm_db_writer(db), rc, "cannot read a notification", err);
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
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db,
                               "SELECT min(max(d.next_ns, n.not_before_ns, "
                               "coalesce(d.lease_until_ns, 0))) FROM notification_deliveries d "
                               "JOIN notifications n ON n.id = d.notification WHERE d.channel = ? "
                               "AND d.state = 'pending'",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, channel, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read the deliveries", err);
        *ret = sqlite3_column_type(st, 0) == SQLITE_NULL ? INT64_MAX : sqlite3_column_int64(st, 0);
        return 0;
}

struct finish_args {
        int64_t delivery;
        const char *owner;
        enum notify_outcome outcome;
        int64_t now, next;
        const char *error;
};

static int finish_in(farm_db *db, void *userdata, char *err) {
        struct finish_args *a = userdata;
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(
                db,
                "UPDATE notification_deliveries SET lease_owner = NULL, lease_until_ns = NULL, "
                "state = CASE ?3 WHEN 0 THEN 'sent' WHEN 2 THEN 'failed' ELSE state END, "
                "attempts = attempts + (?3 != 3), next_ns = CASE ?3 WHEN 1 THEN ?5 ELSE next_ns "
                "END, done_ns = CASE WHEN ?3 IN (0, 2) THEN ?4 ELSE done_ns END, "
                "last_error = CASE ?3 WHEN 3 THEN last_error WHEN 0 THEN NULL ELSE ?6 END "
                "WHERE id = ?1 AND lease_owner = ?2",
                &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, a->delivery);
        sqlite3_bind_text(st, 2, a->owner, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, (int) a->outcome);
        sqlite3_bind_int64(st, 4, a->now);
        sqlite3_bind_int64(st, 5, a->next);
        bind_text_or_null(st, 6, a->error);
        if ((r = farm_step_done(db, st, "cannot record a delivery", err)) < 0)
                return r;
        if (sqlite3_changes(farm_db_writer(db)) == 0)
                return farm_failf(db, -ESTALE, err,
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

static int orphans_in(farm_db *db, void *userdata, char *err) {
        struct orphan_args *a = userdata;
        _cleanup_reset_ sqlite3_stmt *sel = NULL, *upd = NULL;
        json_auto_t *names = json_array();
        int r, rc;
        if ((r = farm_prepare_w(db,
                                "SELECT DISTINCT channel FROM notification_deliveries WHERE "
                                "state = 'pending'",
                                &sel, err)) < 0 ||
            (r = farm_prepare_w(db,
                                "UPDATE notification_deliveries SET state = 'failed', done_ns = "
                                "?2, last_error = 'the channel is no longer configured', "
                                "lease_owner = NULL, lease_until_ns = NULL WHERE channel = ?1 AND "
                                "state = 'pending'",
                                &upd, err)) < 0)
                return r;
        while ((rc = sqlite3_step(sel)) == SQLITE_ROW)
                json_array_append_new(names, farm_json_col_text(sel, 0));
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_writer(db), rc, "cannot read the deliveries", err);
        size_t i;
        json_t *name;
        json_array_foreach (names, i, name) {
                if (notify_channel_find(a->c, json_string_value(name)))
                        continue;
                sqlite3_bind_text(upd, 1, json_string_value(name), -1, SQLITE_STATIC);
                sqlite3_bind_int64(upd, 2, a->now);
                if ((r = farm_step_done(db, upd, "cannot record a delivery", err)) < 0)
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

static int retry_in(farm_db *db, void *userdata, char *err) {
        struct retry_args *a = userdata;
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "UPDATE notification_deliveries SET state = 'pending', attempts = "
                               "0, next_ns = ?2, done_ns = NULL, lease_owner = NULL, "
                               "lease_until_ns = NULL WHERE state = 'failed' AND (?1 = 0 OR id = "
                               "?1)",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, a->delivery);
        sqlite3_bind_int64(st, 2, a->now);
        if ((r = farm_step_done(db, st, "cannot requeue deliveries", err)) < 0)
                return r;
        return sqlite3_changes(farm_db_writer(db));
}

int notify_store_retry(farm_db *db, int64_t delivery, int64_t now_ns,
                       char err[static FARM_ERROR_MAX]) {
        struct retry_args a = { delivery, now_ns };
        return notify_store_write(db, retry_in, &a, err);
}

static int prune_in(farm_db *db, void *userdata, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "DELETE FROM notifications WHERE created_ns < ?1 AND "
                               "not_before_ns < ?1 AND NOT EXISTS (SELECT 1 FROM "
                               "notification_deliveries d WHERE d.notification = "
                               "notifications.id AND d.state = 'pending')",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, *(int64_t *) userdata);
        if ((r = farm_step_done(db, st, "cannot delete old notifications", err)) < 0)
                return r;
        return sqlite3_changes(farm_db_writer(db));
}

int notify_store_prune(farm_db *db, int64_t before_ns, char err[static FARM_ERROR_MAX]) {
        return notify_store_write(db, prune_in, &before_ns, err);
}

/* ---- the lists ---- */

static int deliveries_json(farm_db *db, int64_t id, json_t **ret, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        json_auto_t *list = json_array();
        char t[TIMESTAMP_MAX_LEN];
        int r = farm_prepare_r(db,
                               "SELECT id, channel, state, attempts, next_ns, done_ns, "
                               "last_error FROM notification_deliveries WHERE notification = ? "
                               "ORDER BY channel",
                               &st, err),
            rc;
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *state = (const char *) sqlite3_column_text(st, 2) ?: "";
                bool pending = strcmp(state, "pending") == 0;
                int64_t done = col_time(st, 5);
                json_t *d = json_pack(
                        "{s:I, s:o, s:s, s:I, s:o, s:o, s:o}", "id",
                        (json_int_t) sqlite3_column_int64(st, 0), "channel",
                        farm_json_col_text(st, 1), "state", state, "attempts",
                        (json_int_t) sqlite3_column_int64(st, 3), "next_attempt_ns",
                        pending ? json_integer(sqlite3_column_int64(st, 4)) : json_null(), "done",
                        done != INT64_MIN ? json_string(format_timestamp_utc(t, done))
                                          : json_null(),
                        "error", farm_json_col_text(st, 6));
                if (!d || json_array_append_new(list, d) < 0)
                        return -ENOMEM;
        }
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read the deliveries", err);
        *ret = json_incref(list);
        return 0;
}

#define LIST_WHERE                                                                             \
        " FROM notifications n WHERE (?1 IS NULL OR EXISTS (SELECT 1 FROM "                    \
        "notification_deliveries d WHERE d.notification = n.id AND d.state = ?1)) AND (?2 IS " \
        "NULL OR n.kind = ?2) AND (?3 IS NULL OR n.machine_id = ?3) AND (?4 IS NULL OR "       \
        "n.release = ?4)"

static void bind_filter(sqlite3_stmt *st, const struct notify_filter *f) {
        bind_text_or_null(st, 1, f->state);
        bind_text_or_null(st, 2, f->kind);
        bind_text_or_null(st, 3, f->machine);
        bind_text_or_null(st, 4, f->release);
}

int notify_store_list(farm_db *db, const struct notify_filter *f, const struct farm_page *page,
                      json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL, *cnt = NULL;
        json_auto_t *list = json_array();
        int r, rc;
        if ((r = farm_prepare_r(db, "SELECT count(*)" LIST_WHERE, &cnt, err)) < 0 ||
            (r = farm_prepare_r(
                     db, "SELECT " ROW_COLUMNS LIST_WHERE " ORDER BY n.id DESC LIMIT ?5 OFFSET ?6",
                     &st, err)) < 0)
                return r;
        if (!list)
                return -ENOMEM;
        bind_filter(cnt, f);
        if ((rc = sqlite3_step(cnt)) != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot count notifications", err);
        int64_t total = sqlite3_column_int64(cnt, 0);
        bind_filter(st, f);
        sqlite3_bind_int64(st, 5, (int64_t) MIN(page->limit, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(st, 6, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                json_t *n = row_json(st), *d = NULL;
                if (!n || (r = deliveries_json(db, sqlite3_column_int64(st, 0), &d, err)) < 0) {
                        json_decref(n);
                        return r < 0 ? r : -ENOMEM;
                }
                json_object_set_new(n, "deliveries", d);
                if (json_array_append_new(list, n) < 0)
                        return -ENOMEM;
        }
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot list notifications", err);
        *ret = json_pack("{s:O, s:I, s:I, s:I}", "notifications", list, "total", (json_int_t) total,
                         "limit", (json_int_t) page->limit, "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

int notify_store_metric_deliveries(farm_db *db, FILE *f, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db,
                               "SELECT channel, state, count(*) FROM notification_deliveries "
                               "GROUP BY 1, 2 ORDER BY 1, 2",
                               &st, err),
            rc;
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                fprintf(f, "rtsoak_notification_deliveries{channel=\"%s\",state=\"%s\"} %lld\n",
                        (const char *) sqlite3_column_text(st, 0) ?: "",
                        (const char *) sqlite3_column_text(st, 1) ?: "",
                        (long long) sqlite3_column_int64(st, 2));
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot count deliveries", err);
        return 0;
}

int notify_store_metric_oldest(farm_db *db, FILE *f, int64_t now_ns,
                               char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(db,
                               "SELECT min(n.created_ns) FROM notification_deliveries d JOIN "
                               "notifications n ON n.id = d.notification WHERE d.state = "
                               "'pending'",
                               &st, err),
            rc;
        if (r < 0)
                return r;
        if ((rc = sqlite3_step(st)) != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot read deliveries", err);
        int64_t t = sqlite3_column_type(st, 0) == SQLITE_NULL ? now_ns
                                                              : sqlite3_column_int64(st, 0);
        fprintf(f, "rtsoak_notification_oldest_pending_seconds %.3f\n",
                (double) MAX(now_ns - t, 0) / 1e9);
        return 0;
}
