/* SPDX-License-Identifier: MIT */
/* The audit trail: who did what to the farm, when and why (settings, maintenance windows,
 * waivers, staff and read tokens), each row written in the transaction of its change. */
#pragma once

#include <stdint.h>

#include "sql.h"

struct farm_audit_row {
        int64_t time_ns;
        const char *who, *action;
        const char *machine_id;        /* what it is about: NULL for none */
        const char *release, *problem; /* NULL for none */
        int64_t waiver;                /* 0 for none */
        const char *detail;            /* NULL for none */
};

/* Writes row into the audit trail, in c's write transaction. */
int farm_audit_write(sql_conn *c, const struct farm_audit_row *row, char *err);
/* The same for a row about a machine. */
int farm_audit_machine(sql_conn *c, int64_t now_ns, const char *who, const char *action,
                       const char *machine_id, const char *detail, char *err);
