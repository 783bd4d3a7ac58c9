/* SPDX-License-Identifier: MIT */
/* What the routes of the query API share: their answers and errors, the checks of their
 * parameters, a page of rows, and the machine and window that a machine's query is of. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "macro.h"
#include "query-internal.h"

#define DEFAULT_WINDOW_NS DAY_NS

void farm_answer_done(struct farm_answer *a) {
        json_decref(a->json);
        free(a->text);
        a->json = NULL;
        a->text = NULL;
}

void query_error(struct farm_answer *a, unsigned status, const char *fmt, ...) {
        char msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        farm_answer_done(a);
        a->status = status;
        snprintf(a->message, sizeof(a->message), "%s", msg);
}

/* A failure of ours (500, or 503 for a busy database); err already says why. */
int query_internal(struct farm_answer *a, int error) {
        a->error = error;
        a->status = error == -EBUSY ? 503 : 500;
        return error;
}

const char *farm_args_get(const struct farm_args *args, const char *name) {
        for (unsigned i = 0; i < args->n; i++)
                if (strcmp(args->a[i].name, name) == 0)
                        return args->a[i].value ?: "";
        return NULL;
}

bool query_param_ok(int r, const char *perr, struct farm_answer *a) {
        if (r >= 0)
                return true;
        query_error(a, 400, "%s", perr);
        return false;
}

/* Scenario names as the schema allows them. */
bool query_scenario_ok(const char *s, struct farm_answer *a) {
        char why[NAME_WHY_MAX];
        bool ok = name_ok(&summary_name_scenario, s, why);
        if (!ok)
                query_error(a, 400, "scenario=%.64s: %s", s, why);
        return ok;
}

int query_page_rows(sql_conn *c, sql_stmt *cnt, sql_stmt *st, size_t size,
                    int (*row)(sql_stmt *st, void *ret), void **v, size_t *n, uint64_t *ret_total,
                    const char *count_error, const char *read_error,
                    char err[static FARM_ERROR_MAX]) {
        int rc, r = 0;
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, count_error, err);
        *ret_total = (uint64_t) sql_column_int64(cnt, 0);
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow(v, *n, size))
                        r = -ENOMEM;
                else if ((r = row(st, (char *) *v + *n * size)) >= 0)
                        (*n)++;
        }
        if (r < 0)
                return r;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, read_error, err);
        return 0;
}

/* ---- the machine and the window --------------------------------------------------------- */

int query_machine_find(sql_conn *c, const char *id, struct query_machine *m,
                       char err[static FARM_ERROR_MAX]) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT m.last_interval_start_ns, (SELECT interval_ns FROM runs "
                             "WHERE machine_id = m.id ORDER BY start_ns DESC, run_id DESC "
                             "LIMIT 1) FROM machines m WHERE m.id = ?",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, id);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return 0;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot look up the machine", err);
        *m = (struct query_machine){ .id = id };
        m->has_data = !sql_column_null(st, 0);
        m->last_start_ns = sql_column_int64(st, 0);
        m->interval_ns = (uint64_t) sql_column_int64(st, 1);
        return 1;
}

int query_machine_known(sql_conn *c, const char *id, char err[static FARM_ERROR_MAX]) {
        struct query_machine m;
        int r = query_machine_find(c, id, &m, err);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

int query_machine_lookup(sql_conn *c, const char *id, struct query_machine *m,
                         struct farm_answer *a) {
        int r = query_machine_find(c, id, m, a->err);
        if (r < 0)
                return query_internal(a, r);
        if (r == 0)
                query_error(a, 404, "no such machine");
        return r;
}

void query_default_window(const struct query_machine *m, int64_t now, int64_t *ret_from,
                          int64_t *ret_to) {
        *ret_to = m->has_data ? m->last_start_ns + 1 : now;
        *ret_from = *ret_to - DEFAULT_WINDOW_NS;
}

/* ?from= and ?to= of a window [from, to): by default the 24 hours up to the machine's latest
 * interval (included); with one of them given, 24 hours from or up to it. */
bool query_parse_window(const struct farm_args *args, int64_t now, const struct query_machine *m,
                        int64_t *ret_from, int64_t *ret_to, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        int64_t from = 0, to = 0;
        int r = farm_param_window(farm_args_get(args, "from"), farm_args_get(args, "to"), now,
                                  DEFAULT_WINDOW_NS, &from, &to, perr);
        if (!query_param_ok(r, perr, a))
                return false;
        if (r > 0)
                query_default_window(m, now, &from, &to);
        *ret_from = from;
        *ret_to = to;
        return true;
}

bool query_parse_cpu(const struct farm_args *args, int64_t *ret, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        uint64_t cpu = 0;
        const char *v = farm_args_get(args, "cpu");
        *ret = -1;
        if (!query_param_ok(farm_param_uint("cpu", v, 0, CPU_MAX - 1, &cpu, perr), perr, a))
                return false;
        if (v)
                *ret = (int64_t) cpu;
        return true;
}
