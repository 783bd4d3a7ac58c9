/* SPDX-License-Identifier: MIT */
/* Which runs of the release have anything for the per-run checks that mostly find nothing
 * (data stamped ahead of its arrival, an unclean end, a second run at the same time): read
 * once per verdict for all its runs, so that a run without any is not asked three more
 * statements (a verdict of 200 machines asked 800 of them, nearly all empty). */
#include <errno.h>
#include <stdlib.h>

#include "grow.h"
#include "verdict-internal.h"

static int cmp_flag(const void *a, const void *b) {
        const struct vrunflag *x = a, *y = b;
        return (x->row > y->row) - (x->row < y->row);
}

/* The runs with rows that a check reads, as a superset: a row outside the moment judged or
 * not yet received still marks its run, whose check then reads it and leaves it out. */
static int load_flags(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT d.run, 1 FROM run_days d JOIN runs r ON r.id = d.run "
                      "WHERE r.release = ?1 AND d.max_skew_ns > ?2 "
                      "UNION ALL SELECT e.run, 1 FROM runs r JOIN events e ON e.run = r.id "
                      "WHERE r.release = ?1 AND e.time_ns > e.received_ns + ?2 "
                      "UNION ALL SELECT e.run, 2 FROM runs r JOIN events e ON e.run = r.id "
                      "WHERE r.release = ?1 AND e.type = 'unclean_end' "
                      "UNION ALL SELECT o.run_a, 4 FROM \"overlaps\" o JOIN runs r ON "
                      "r.id = o.run_a WHERE r.release = ?1 "
                      "UNION ALL SELECT o.run_b, 4 FROM \"overlaps\" o JOIN runs r ON "
                      "r.id = o.run_b WHERE r.release = ?1",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, (int64_t) v->rule.clock_tolerance_ns);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (!farm_grow((void **) &v->runflags, v->nrunflags, sizeof(*v->runflags))) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                v->runflags[v->nrunflags++] = (struct vrunflag){ sql_column_int64(st, 0),
                                                                 (unsigned) sql_column_int(st, 1) };
        }
        sql_reset(st);
        if (rc != SQL_DONE)
                return vfail(v, rc, "cannot read which runs have events or overlaps");
        if (v->nrunflags > 0)
                qsort(v->runflags, v->nrunflags, sizeof(*v->runflags), cmp_flag);
        size_t k = 0; /* one entry per run, its flags together */
        for (size_t i = 0; i < v->nrunflags; i++) {
                if (k > 0 && v->runflags[k - 1].row == v->runflags[i].row)
                        v->runflags[k - 1].flags |= v->runflags[i].flags;
                else
                        v->runflags[k++] = v->runflags[i];
        }
        v->nrunflags = k;
        v->runflags_loaded = true;
        return 0;
}

int vrun_may_have(struct vctx *v, int64_t row, unsigned flag, bool *ret) {
        int r;
        if (!v->runflags_loaded && (r = load_flags(v)) < 0)
                return r;
        struct vrunflag key = { row, 0 };
        const struct vrunflag *f = v->nrunflags ? bsearch(&key, v->runflags, v->nrunflags,
                                                          sizeof(key), cmp_flag)
                                                : NULL;
        *ret = f && (f->flags & flag);
        return 0;
}
