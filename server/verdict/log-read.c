/* SPDX-License-Identifier: MIT */
/* The verdict log as a record: which status each release had in it at a moment (the log itself
 * is kept by server-stable.c).  One query reads the names of the releases and their last
 * status; nothing is judged. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "grow.h"
#include "log-read.h"
#include "verdict-model.h"

void farm_logged_free(struct farm_logged *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].release);
        free(v);
}

/* The releases that st selects with their status (columns 0 and 1), their series by rule (NULL:
 * not set). */
static int read_logged(sql_stmt *st, const struct farm_rule *rule, struct farm_logged **ret,
                       size_t *ret_n, char *err) {
        struct farm_logged *v = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *rel = sql_column_text(st, 0);
                char group[FARM_GROUP_NAME_MAX];
                if (!rel)
                        continue;
                struct farm_logged *x = realloc(v, (n + 1) * sizeof(*x));
                if (!x)
                        break;
                v = x;
                x = &v[n];
                *x = (struct farm_logged){ .release = strdup(rel) };
                if (!x->release)
                        break;
                n++;
                if (rule)
                        farm_rule_series_of(rule, rel, x->series, group);
                snprintf(x->status, sizeof(x->status), "%s", sql_column_text(st, 1) ?: "");
        }
        if (rc != SQL_DONE) {
                farm_logged_free(v, n);
                return rc == SQL_ROW ? -ENOMEM
                                     : farm_fail(sql_stmt_conn(st), rc,
                                                 "cannot read the verdict log", err);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int farm_log_qualified(sql_conn *c, const struct farm_rule *rule, int64_t at_ns, int64_t known_ns,
                       struct farm_logged **ret, size_t *ret_n, char err[static FARM_ERROR_MAX]) {
        _cleanup_reset_ sql_stmt *st = NULL;
        /* Driven by the log's rows, of which only the qualified ones are looked at further:
         * a farm's many releases that never qualified cost a row each. */
        int r = farm_prepare(c,
                             "SELECT l.release, l.status FROM verdict_log l WHERE l.at_ns <= ?1 "
                             "AND l.status = 'qualified' AND l.id = (SELECT x.id FROM verdict_log "
                             "x WHERE x.release = l.release AND x.at_ns <= ?1 ORDER BY x.at_ns "
                             "DESC, x.id DESC LIMIT 1) AND EXISTS (SELECT 1 FROM runs r WHERE "
                             "r.release = l.release AND r.start_ns <= ?1 AND r.first_report_ns "
                             "<= ?2)",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, at_ns);
        sql_bind_int64(st, 2, known_ns);
        return read_logged(st, rule, ret, ret_n, err);
}

int farm_log_current(farm_db *db, int64_t since_ns, struct farm_logged **ret, size_t *ret_n,
                     char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT r.release, (SELECT l.status FROM verdict_log l WHERE "
                             "l.release = r.release ORDER BY l.at_ns DESC, l.id DESC LIMIT 1) "
                             "FROM (SELECT release FROM runs GROUP BY release HAVING "
                             "max(coalesce(last_end_ns, start_ns)) >= ?1) r ORDER BY 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, since_ns);
        return read_logged(st, NULL, ret, ret_n, err);
}

const char *farm_log_newest_qualified(const struct farm_logged *v, size_t n, const char *series,
                                      const char *below) {
        const char *best = NULL;
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].status, "qualified") == 0 && strcmp(v[i].series, series) == 0 &&
                    (!below || farm_version_cmp(v[i].release, below) < 0) &&
                    (!best || farm_version_cmp(v[i].release, best) > 0))
                        best = v[i].release;
        return best;
}

int farm_log_changed_since(farm_db *db, int64_t after_id, char ***ret, size_t *ret_n,
                           int64_t *ret_last, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char **v = NULL;
        size_t n = 0;
        int r = farm_prepare(c,
                             "SELECT release, max(id) FROM verdict_log WHERE id > ?1 GROUP BY "
                             "release ORDER BY 2",
                             &st, err),
            rc;
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, after_id);
        *ret_last = after_id;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *rel = sql_column_text(st, 0) ?: "";
                if (!farm_grow((void **) &v, n, sizeof(*v)) || !(v[n] = strdup(rel))) {
                        farm_strv_free(v, n);
                        snprintf(err, FARM_ERROR_MAX, "out of memory");
                        return -ENOMEM;
                }
                n++;
                *ret_last = sql_column_int64(st, 1);
        }
        if (rc != SQL_DONE) {
                farm_strv_free(v, n);
                return farm_fail(c, rc, "cannot read the verdict log", err);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
