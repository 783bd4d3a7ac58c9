/* SPDX-License-Identifier: MIT */
/* The machines as the farm lists them (struct farm_machine): each with its settings in force
 * and its latest run's facts, one machine, all of them, or a page of them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "macro.h"
#include "machines.h"
#include "query-internal.h"
#include "settings.h"

#define LATEST_RUN_START FARM_SQL_RUN_START("r.", "?2")
#define LATEST_RUN_SKEW FARM_SQL_RUN_SKEW("r.")

/* The latest run of a machine (by its start as the server takes it): 1 with ret filled, 0
 * when it has none. */
static int latest_run(sql_conn *c, const char *machine_id, const struct farm_clock_view *cv,
                      struct farm_latest_run *ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT r.run_id, r.boot_id, r.kernel_release, r.kernel_version, "
                             "r.preempt_model, r.start_ns, (SELECT max(max_ns) FROM intervals "
                             "WHERE run = r.id), r.first_report_ns, " LATEST_RUN_SKEW ", "
                             "r.interval_ns FROM runs r WHERE r.machine_id = ?1 "
                             "ORDER BY " LATEST_RUN_START " DESC, r.run_id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return 0;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the latest run", err);
        bool ahead = !sql_column_null(st, 8) && sql_column_int64(st, 8) > cv->clock_tolerance_ns,
             ok = true;
        *ret = (struct farm_latest_run){
                .id = query_col_int(st, 0),
                .boot_id = farm_strdup_or_null(sql_column_text(st, 1), &ok),
                .kernel_release = farm_strdup_or_null(sql_column_text(st, 2), &ok),
                .kernel_version = farm_strdup_or_null(sql_column_text(st, 3), &ok),
                .preempt_model = farm_strdup_or_null(sql_column_text(st, 4), &ok),
                .start_ns = query_col_int(st, 5),
                .worst_latency_ns = query_col_int(st, 6),
                .first_report_ns = query_col_int(st, 7),
                .interval_ns = query_col_int(st, 9),
                .clock_ahead_ns = ahead ? sql_column_int64(st, 8) : FARM_NONE,
        };
        if (!ok) {
                farm_latest_run_done(ret);
                return -ENOMEM;
        }
        return 1;
}

/* The groups and labels in force, as the settings' history has them (groups, a newline, then
 * labels; NULL: the defaults). */
static int settings_brief(struct farm_machine *m, const char *groups_nl_labels) {
        struct farm_settings s;
        bool ok = true;
        farm_settings_brief(groups_nl_labels, &s);
        m->groups = calloc(MAX(s.ngroups, 1), sizeof(*m->groups));
        m->labels = calloc(MAX(s.nlabels, 1), sizeof(*m->labels));
        if (!m->groups || !m->labels)
                return -ENOMEM;
        for (; m->ngroups < s.ngroups && ok; m->ngroups++)
                m->groups[m->ngroups] = farm_strdup_or_null(s.groups[m->ngroups], &ok);
        for (; m->nlabels < s.nlabels && ok; m->nlabels++)
                m->labels[m->nlabels] = (struct farm_machine_label){
                        farm_strdup_or_null(s.labels[m->nlabels].key, &ok),
                        farm_strdup_or_null(s.labels[m->nlabels].value, &ok)
                };
        return ok ? 0 : -ENOMEM;
}

/* Machine m from a row of farm_machines()'s SELECT, with its latest run. */
static int machine_row(sql_conn *c, sql_stmt *st, const struct farm_clock_view *cv,
                       struct farm_machine *m, char *err) {
        bool ok = true;
        *m = (struct farm_machine){
                .id = farm_strdup_or_null(sql_column_text(st, 0) ?: "", &ok),
                .hostname = farm_strdup_or_null(sql_column_text(st, 1), &ok),
                .cpu_model = farm_strdup_or_null(sql_column_text(st, 2), &ok),
                .cpus = query_col_int(st, 3),
                .threshold_ns = query_col_int(st, 4),
                .gating = sql_column_int(st, 5) != 0,
                .enrolled_ns = query_col_int(st, 6),
                .revoked = !sql_column_null(st, 7),
                .revoked_ns = query_col_int(st, 7),
                .last_report_ns = query_col_int(st, 8),
                .worst_latency_ns = query_col_int(st, 9),
                .intervals = query_col_int(st, 10),
                .events = query_col_int(st, 11),
                .last_data_ns = query_col_int(st, 13),
        };
        if (!ok || settings_brief(m, sql_column_text(st, 12)) < 0)
                return -ENOMEM;
        int r = latest_run(c, m->id, cv, &m->latest, err);
        if (r < 0)
                return r;
        m->has_latest = r > 0;
        /* Silent once its last data is older than its latest run's interval and the allowed
         * gap; its latest run's data stamped ahead of its arrival, beyond the tolerance. */
        int64_t interval = m->has_latest && m->latest.interval_ns != FARM_NONE
                                   ? m->latest.interval_ns
                                   : 0;
        m->silent = m->last_data_ns != FARM_NONE && !m->revoked &&
                    cv->now_ns - m->last_data_ns > interval + cv->max_gap_ns;
        m->clock_ahead_ns = m->has_latest ? m->latest.clock_ahead_ns : FARM_NONE;
        return 0;
}

#define MACHINE_DAY_END FARM_SQL_DAY_END("d.", "?2")

int farm_machines(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                  struct farm_machine_list *ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r, rc;

        *ret = (struct farm_machine_list){};
        r = farm_prepare(c,
                         "SELECT m.id, m.hostname, m.cpu_model, m.cpus, m.threshold_ns, m.gating, "
                         "m.enrolled_ns, m.revoked_ns, m.last_report_ns, "
                         /* From the day rollups: a month of a machine is 30 of their rows rather
                          * than tens of thousands of intervals. */
                         "(SELECT max(d.max_ns) FROM run_days d JOIN runs r ON d.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT coalesce(sum(d.intervals), 0) FROM run_days d "
                         " JOIN runs r ON d.run = r.id WHERE r.machine_id = m.id), "
                         "(SELECT count(*) FROM events e JOIN runs r ON e.run = r.id "
                         " WHERE r.machine_id = m.id), "
                         "(SELECT groups || '\n' || labels FROM machine_settings s "
                         " WHERE s.machine_id = m.id ORDER BY from_ns DESC, id DESC LIMIT 1), "
                         "(SELECT max(" MACHINE_DAY_END ") FROM run_days d JOIN runs r "
                         " ON d.run = r.id WHERE r.machine_id = m.id) "
                         "FROM machines m WHERE m.id = ?1 OR ?1 IS NULL ORDER BY m.id",
                         &st, err);
        if (r < 0)
                return r;
        if (machine_id)
                sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, cv->clock_tolerance_ns);
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &ret->v, ret->n, sizeof(*ret->v)))
                        r = -ENOMEM;
                else
                        r = machine_row(c, st, cv, &ret->v[ret->n++], err);
                if (r < 0) {
                        farm_machine_list_done(ret);
                        return r;
                }
        }
        if (rc != SQL_DONE) {
                farm_machine_list_done(ret);
                return farm_fail(c, rc, "cannot list the machines", err);
        }
        if (machine_id && ret->n == 0)
                return farm_failf(db, -ENOENT, err, "no machine %s is enrolled", machine_id);
        return 0;
}

int farm_machine_get(farm_db *db, const char *machine_id, const struct farm_clock_view *cv,
                     struct farm_machine *ret, char err[static FARM_ERROR_MAX]) {
        struct farm_machine_list l;
        int r = farm_machines(db, machine_id, cv, &l, err);
        if (r < 0)
                return r;
        *ret = l.v[0];
        l.v[0] = (struct farm_machine){};
        farm_machine_list_done(&l);
        return 0;
}

/* The ids of a page of the machines, by id: *ret_total of all. */
static int page_ids(farm_db *db, const struct farm_page *page, char (*ids)[FARM_MACHINE_ID_LEN + 1],
                    size_t *ret_n, uint64_t *ret_total, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        int r, rc;
        size_t n = 0;
        if ((r = farm_prepare(c, "SELECT count(*) FROM machines", &cnt, err)) < 0 ||
            (r = farm_prepare(c, "SELECT id FROM machines ORDER BY id LIMIT ?1 OFFSET ?2", &st,
                              err)) < 0)
                return r;
        if ((rc = sql_step(cnt)) == SQL_ROW)
                *ret_total = (uint64_t) sql_column_int64(cnt, 0);
        sql_bind_int64(st, 1, (int64_t) page->limit);
        sql_bind_int64(st, 2, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        while (rc == SQL_ROW && (rc = sql_step(st)) == SQL_ROW && n < page->limit)
                snprintf(ids[n++], sizeof(ids[0]), "%s", sql_column_text(st, 0) ?: "");
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list the machines", err);
        *ret_n = n;
        return 0;
}

int farm_machine_page(farm_db *db, const struct farm_page *page, const struct farm_clock_view *cv,
                      struct farm_machine_list *ret, uint64_t *ret_total,
                      char err[static FARM_ERROR_MAX]) {
        char(*ids)[FARM_MACHINE_ID_LEN + 1] = calloc(page->limit, sizeof(*ids));
        size_t n = 0;
        *ret = (struct farm_machine_list){};
        *ret_total = 0;
        if (!ids)
                return -ENOMEM;
        int r = page_ids(db, page, ids, &n, ret_total, err);
        /* Each machine as GET /api/v1/machines/{id} shows it. */
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (!farm_grow((void **) &ret->v, ret->n, sizeof(*ret->v))) {
                        r = -ENOMEM;
                        break;
                }
                r = farm_machine_get(db, ids[i], cv, &ret->v[ret->n], err);
                if (r == -ENOENT)
                        r = 0; /* removed meanwhile */
                else if (r >= 0)
                        ret->n++;
        }
        free(ids);
        if (r < 0)
                farm_machine_list_done(ret);
        return r < 0 ? r : 0;
}
