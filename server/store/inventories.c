/* SPDX-License-Identifier: MIT */
/* The versions of the machines' inventories in the farm database (inventories.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "grow.h"
#include "inventories.h"
#include "log.h"

/* A version stored before was sent again: the first is kept; one with other fields is said in
 * the log (a machine that numbers its versions wrongly). */
static int kept_first(sql_conn *c, int64_t run, const struct summary *s,
                      const struct summary_inventory *v, const char *digest, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT digest FROM inventories WHERE run = ? AND version = ?", &st,
                             err),
            rc;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run);
        sql_bind_int64(st, 2, (int64_t) v->version);
        if ((rc = sql_step(st)) != SQL_ROW)
                return farm_fail(c, rc == SQL_DONE ? -EIO : rc, "cannot read an inventory", err);
        if (strcmp(sql_column_text(st, 0) ?: "", digest) != 0)
                log_warning("Machine %s, run %" PRIu64 ": inventory version %" PRIu64
                            " sent again with other fields; the one stored first is kept",
                            s->machine.id, s->run.id, v->version);
        return 0;
}

int farm_inventories_store(sql_conn *c, int64_t run, const struct summary *s, int64_t now_ns,
                           char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (s->ninventory == 0)
                return 0;
        int r = farm_prepare(c,
                             "INSERT INTO inventories (run, version, time_ns, after_ns, "
                             "received_ns, digest, fields) VALUES (?, ?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT (run, version) DO NOTHING",
                             &st, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->ninventory; i++) {
                const struct summary_inventory *v = &s->inventory[i];
                char digest[65];
                _cleanup_free_ char *text = inventory_to_text(&v->fields);
                if (!text || inventory_digest(&v->fields, digest) < 0) {
                        snprintf(err, FARM_ERROR_MAX, "out of memory storing an inventory");
                        return -ENOMEM;
                }
                sql_bind_int64(st, 1, run);
                sql_bind_int64(st, 2, (int64_t) v->version);
                sql_bind_int64(st, 3, v->time_ns);
                if (v->after_ns)
                        sql_bind_int64(st, 4, v->after_ns);
                else
                        sql_bind_null(st, 4);
                sql_bind_int64(st, 5, now_ns);
                sql_bind_text(st, 6, digest);
                sql_bind_text(st, 7, text);
                if ((r = farm_step_done(st, "cannot store an inventory", err)) < 0)
                        return r;
                if (sql_changes(st) == 0 && (r = kept_first(c, run, s, v, digest, err)) < 0)
                        return r;
        }
        return 0;
}

/* A version from a row of farm_inventories_of()'s SELECT. */
static int version_row(sql_conn *c, sql_stmt *st, struct farm_inventory_version *v, char *err) {
        char why[INVENTORY_WHY_MAX];
        *v = (struct farm_inventory_version){
                .run = sql_column_int64(st, 0),
                .version = (uint64_t) sql_column_int64(st, 1),
                .time_ns = sql_column_int64(st, 2),
                .after_ns = sql_column_null(st, 3) ? FARM_NONE : sql_column_int64(st, 3),
                .received_ns = sql_column_int64(st, 4),
        };
        snprintf(v->digest, sizeof(v->digest), "%s", sql_column_text(st, 5) ?: "");
        int r = inventory_from_text(sql_column_text(st, 6) ?: "", &v->fields, why);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory reading an inventory");
        else if (r < 0)
                return farm_failf(farm_of(c), -EIO, err,
                                  "the inventory of run %lld, version %llu does not read back: %s",
                                  (long long) v->run, (unsigned long long) v->version, why);
        return r;
}

int farm_inventories_of(sql_conn *c, const char *machine, const char *release, int64_t known_ns,
                        int64_t tolerance_ns, struct farm_inventory_version **ret, size_t *ret_n,
                        char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct farm_inventory_version *v = NULL;
        size_t n = 0;
        int r = farm_prepare(c,
                             "SELECT r.run_id, i.version, i.time_ns, i.after_ns, i.received_ns, "
                             "i.digest, i.fields FROM inventories i JOIN runs r ON r.id = i.run "
                             "WHERE r.machine_id = ?1 AND i.received_ns <= ?2 AND "
                             "(r.release = ?4 OR ?4 IS NULL) "
                             "ORDER BY " FARM_SQL_RUN_START("r.", "?3") ", r.run_id, i.version",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine);
        sql_bind_int64(st, 2, known_ns);
        sql_bind_int64(st, 3, tolerance_ns);
        if (release)
                sql_bind_text(st, 4, release);
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &v, n, sizeof(*v))) {
                        r = -ENOMEM;
                        snprintf(err, FARM_ERROR_MAX, "out of memory reading an inventory");
                        break;
                }
                if ((r = version_row(c, st, &v[n], err)) < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the inventories", err);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        farm_inventory_version_done(&v[i]);
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int farm_inventories_of_release(sql_conn *c, const char *release, int64_t at, int64_t known,
                                int64_t tolerance_ns, struct farm_machine_inventory **ret,
                                size_t *ret_n, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct farm_machine_inventory *v = NULL;
        size_t n = 0;
        int r = farm_prepare(c,
                             "SELECT r.run_id, i.version, i.time_ns, i.after_ns, i.received_ns, "
                             "i.digest, i.fields, r.machine_id FROM inventories i JOIN runs r ON "
                             "r.id = i.run WHERE r.release = ?1 AND i.received_ns <= ?2 AND "
                             /* Stamped beyond the tolerance after it arrived: its arrival. */
                             "CASE WHEN i.time_ns > i.received_ns + ?3 THEN i.received_ns ELSE "
                             "i.time_ns END <= ?4 ORDER BY r.machine_id, " FARM_SQL_RUN_START(
                                     "r.", "?3") ", r.run_id, i.version",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        sql_bind_text(st, 1, release);
        sql_bind_int64(st, 2, known);
        sql_bind_int64(st, 3, tolerance_ns);
        sql_bind_int64(st, 4, at);
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *m = sql_column_text(st, 7) ?: "";
                /* The newest of a machine replaces the one before. */
                if (!n || strcmp(v[n - 1].machine, m) != 0) {
                        if (!farm_grow((void **) &v, n, sizeof(*v))) {
                                r = -ENOMEM;
                                snprintf(err, FARM_ERROR_MAX, "out of memory reading an inventory");
                                break;
                        }
                        v[n++] = (struct farm_machine_inventory){};
                        snprintf(v[n - 1].machine, sizeof(v[n - 1].machine), "%s", m);
                } else
                        farm_inventory_version_done(&v[n - 1].v);
                if ((r = version_row(c, st, &v[n - 1].v, err)) < 0)
                        break;
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the inventories", err);
        if (r < 0) {
                farm_machine_inventories_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
