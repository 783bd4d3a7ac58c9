/* SPDX-License-Identifier: MIT */
/* A machine's events as the events query lists them (struct farm_event): of a window, of one
 * type or all, newest first. */
#include <errno.h>

#include "macro.h"
#include "machines.h"
#include "query-internal.h"

/* An event from a row of farm_machine_events()'s SELECT. */
static int event_row(sql_stmt *st, void *ret) {
        struct farm_event *e = ret;
        bool ok = true;
        *e = (struct farm_event){
                .run = query_col_int(st, 0),
                .id = query_col_int(st, 1),
                .time_ns = query_col_int(st, 2),
                .type = farm_strdup_or_null(sql_column_text(st, 3), &ok),
                .cpu = query_col_int(st, 4),
                .value = query_col_int(st, 5),
                .message = farm_strdup_or_null(sql_column_text(st, 6), &ok),
                .kernel_release = farm_strdup_or_null(sql_column_text(st, 7), &ok),
        };
        if (!ok) {
                farm_event_done(e);
                return -ENOMEM;
        }
        return 0;
}

#define EVENTS_WHERE                                                                             \
        "FROM runs r JOIN events e ON e.run = r.id WHERE r.machine_id = ?1 AND e.time_ns >= ?2 " \
        "AND e.time_ns < ?3 AND (e.type = ?4 OR ?4 IS NULL) "

int farm_machine_events(farm_db *db, const char *id, int64_t from, int64_t to, const char *type,
                        const struct farm_page *page, struct farm_event_page *ret,
                        char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        *ret = (struct farm_event_page){};
        int r = query_machine_known(c, id, err);
        if (r < 0)
                return r;
        if ((r = farm_prepare(c, "SELECT count(*) " EVENTS_WHERE, &cnt, err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT r.run_id, e.event_id, e.time_ns, e.type, e.cpu, e.value, "
                              "e.message, r.kernel_release " EVENTS_WHERE
                              "ORDER BY e.time_ns DESC, r.run_id DESC, e.event_id DESC "
                              "LIMIT ?5 OFFSET ?6",
                              &st, err)) < 0)
                return r;
        sql_stmt *both[2] = { cnt, st };
        for (int i = 0; i < 2; i++) {
                sql_bind_text(both[i], 1, id);
                sql_bind_int64(both[i], 2, from);
                sql_bind_int64(both[i], 3, to);
                if (type)
                        sql_bind_text(both[i], 4, type);
        }
        sql_bind_int64(st, 5, (int64_t) page->limit);
        sql_bind_int64(st, 6, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        r = query_page_rows(c, cnt, st, sizeof(*ret->v), event_row, (void **) &ret->v, &ret->n,
                            &ret->total, "cannot count events", "cannot read events", err);
        if (r < 0)
                farm_event_page_done(ret);
        return r;
}
