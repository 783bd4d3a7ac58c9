/* SPDX-License-Identifier: MIT */
/* Writing the audit trail: the one statement that adds its rows, for every part that changes
 * what the farm is told to do. */
#include "audit.h"
#include "db-internal.h"

int farm_audit_write(sql_conn *c, const struct farm_audit_row *row, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "INSERT INTO audit (time_ns, who, action, machine_id, kernel_release, "
                             "problem, waiver, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, row->time_ns);
        sql_bind_text(st, 2, row->who);
        sql_bind_text(st, 3, row->action);
        sql_bind_text(st, 4, row->machine_id);
        sql_bind_text(st, 5, row->release);
        sql_bind_text(st, 6, row->problem);
        if (row->waiver > 0)
                sql_bind_int64(st, 7, row->waiver);
        sql_bind_text(st, 8, row->detail);
        return farm_step_done(st, "cannot write the audit trail", err);
}

int farm_audit_machine(sql_conn *c, int64_t now_ns, const char *who, const char *action,
                       const char *machine_id, const char *detail, char *err) {
        return farm_audit_write(c,
                                &(struct farm_audit_row){ .time_ns = now_ns,
                                                          .who = who,
                                                          .action = action,
                                                          .machine_id = machine_id,
                                                          .detail = detail },
                                err);
}
