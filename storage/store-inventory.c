/* SPDX-License-Identifier: MIT */
/* The machine's inventory in the local database: a version per run start and per change, each
 * stored with the event that announces it and carried to the farm by that event's upload. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "summary.h"

void store_inventory_row_done(struct store_inventory_row *v) {
        inventory_done(&v->fields);
}

void store_inventory_rows_free(struct store_inventory_row *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                store_inventory_row_done(&v[i]);
        free(v);
}

int store_add_inventory(store *s, const struct store_inventory_row *v,
                        const struct store_event *ev) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_free_ char *fields = inventory_to_text(&v->fields);
        int64_t event_id = 0;
        if (!fields)
                return store_failf(s, -ENOMEM, "out of memory");
        if (v->version < 1 || v->version > INT64_MAX)
                return store_failf(s, -ERANGE, "inventory version %llu is out of range",
                                   (unsigned long long) v->version);
        int r = store_prepare(s,
                              "INSERT INTO inventory (run_id, version, time_ns, after_ns, fields, "
                              "event_id) VALUES (?, ?, ?, ?, ?, ?)",
                              &st);
        if (r >= 0)
                r = store_begin(s);
        if (r < 0)
                return r;
        /* The version and its event (with the event's outbox row), or none of them. */
        r = store_insert_event(s, v->run_id, ev, &event_id);
        if (r >= 0) {
                sqlite3_bind_int64(st, 1, v->run_id);
                sqlite3_bind_int64(st, 2, (int64_t) v->version);
                sqlite3_bind_int64(st, 3, v->time_ns);
                if (v->after_ns != 0)
                        sqlite3_bind_int64(st, 4, v->after_ns);
                sqlite3_bind_text(st, 5, fields, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 6, event_id);
                int rc = sqlite3_step(st);
                if (rc != SQLITE_DONE)
                        r = store_fail(s, rc, "cannot store an inventory version");
        }
        if (r >= 0)
                r = store_exec(s, "COMMIT");
        if (r < 0)
                store_rollback(s);
        return r;
}

/* One row of "SELECT run_id, version, time_ns, after_ns, fields" into ret. */
static int read_row(store *s, sqlite3_stmt *st, struct store_inventory_row *ret) {
        char why[INVENTORY_WHY_MAX];
        *ret = (struct store_inventory_row){
                .run_id = sqlite3_column_int64(st, 0),
                .version = (uint64_t) sqlite3_column_int64(st, 1),
                .time_ns = sqlite3_column_int64(st, 2),
                .after_ns = sqlite3_column_int64(st, 3), /* NULL reads as 0 */
        };
        const char *text = (const char *) sqlite3_column_text(st, 4);
        int r = inventory_from_text(text ?: "", &ret->fields, why);
        if (r == -ENOMEM)
                return store_failf(s, r, "out of memory");
        if (r < 0)
                return store_failf(s, r, "inventory version %llu of run %lld is damaged: %s",
                                   (unsigned long long) ret->version, (long long) ret->run_id, why);
        return 0;
}

#define INVENTORY_COLUMNS "run_id, version, time_ns, after_ns, fields"

int store_list_inventory(store *s, int64_t run_id, struct store_inventory_row **ret,
                         size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        struct store_inventory_row *v = NULL;
        size_t n = 0;
        int rc, r = store_prepare(s,
                                  "SELECT " INVENTORY_COLUMNS " FROM inventory WHERE ?1 = 0 OR "
                                  "run_id = ?1 ORDER BY run_id, version",
                                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_inventory_row *a = realloc(v, (n + 1) * sizeof(*v));
                if (!a) {
                        r = store_failf(s, -ENOMEM, "out of memory");
                        break;
                }
                v = a;
                if ((r = read_row(s, st, &v[n])) < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = store_fail(s, rc, "cannot read the inventory");
        if (r < 0) {
                store_inventory_rows_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int store_get_inventory(store *s, int64_t run_id, struct store_inventory_row *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "SELECT " INVENTORY_COLUMNS " FROM inventory WHERE ?1 = 0 OR "
                              "run_id = ?1 ORDER BY run_id DESC, version DESC LIMIT 1",
                              &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return store_failf(s, -ENOENT, "no inventory recorded%s",
                                   run_id ? " for this run" : "");
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read the inventory");
        return read_row(s, st, ret);
}

int store_load_inventory(store *s, int64_t event_id, struct summary *sum) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT " INVENTORY_COLUMNS " FROM inventory "
                                  "WHERE event_id = ? ORDER BY version",
                                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, event_id);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_inventory_row row;
                struct summary_inventory *a = realloc(sum->inventory,
                                                      (sum->ninventory + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                sum->inventory = a;
                if ((r = read_row(s, st, &row)) < 0)
                        return r;
                a[sum->ninventory++] = (struct summary_inventory){
                        .version = row.version,
                        .time_ns = row.time_ns,
                        .after_ns = row.after_ns,
                        .fields = row.fields,
                };
        }
        return rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot read the inventory");
}
