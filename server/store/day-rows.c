/* SPDX-License-Identifier: MIT */
/* The days of a window and the reading of their rows (day-rows.h). */
#include <errno.h>
#include <stdlib.h>

#include "grow.h"
#include "day-rows.h"
#include "db-internal.h"

int day_refs_add(struct day_refs *d, const struct day_ref *x) {
        if (!farm_grow((void **) &d->v, d->n, sizeof(*d->v)))
                return -ENOMEM;
        d->v[d->n++] = *x;
        return 0;
}

int day_rows_each(sql_conn *c, sql_stmt *st, bool with_cpu, const struct day_ref *ref,
                  const char *what, day_row_fn fn, void *userdata, char *err) {
        int k = with_cpu ? 1 : 0, r, rc;
        size_t blob_len;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *why = NULL;
                int64_t cpu = with_cpu ? sql_column_int64(st, 1) : -1;
                const void *blob = sql_column_blob(st, 2 + k, &blob_len);
                r = fn(userdata, ref, sql_column_text(st, 0) ?: "", cpu,
                       (uint32_t) sql_column_int64(st, 1 + k), blob, blob_len,
                       (uint64_t) sql_column_int64(st, 3 + k),
                       (uint64_t) sql_column_int64(st, 4 + k),
                       (uint64_t) sql_column_int64(st, 5 + k), sql_column_int64(st, 6 + k),
                       (uint64_t) sql_column_int64(st, 7 + k), &why);
                if (r < 0) {
                        if (with_cpu)
                                return farm_failf(
                                        farm_of(c), r, err,
                                        "%s histogram of run %lld, day %lld, CPU %lld: %s", what,
                                        (long long) ref->run, (long long) ref->day, (long long) cpu,
                                        why ?: "no memory");
                        return farm_failf(
                                farm_of(c), r, err, "%s histogram of run %lld, day %lld: %s", what,
                                (long long) ref->run, (long long) ref->day, why ?: "no memory");
                }
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the histograms", err);
        return 0;
}
