/* SPDX-License-Identifier: MIT */
/* Which runs of the release have anything for the per-run checks that mostly find nothing
 * (data stamped ahead of its arrival, an unclean end, a second run at the same time, a latency
 * over the lowest bound of any machine, a machine whose inventory changed within the release):
 * read once per verdict for all its runs, so that a run without any is not asked five more
 * statements (a verdict of 200 machines asked 1,200 of them, nearly all empty: on PostgreSQL a
 * round trip each). */
#include <errno.h>
#include <stdlib.h>

#include "grow.h"
#include "verdict-internal.h"

static int cmp_flag(const void *a, const void *b) {
        const struct vrunflag *x = a, *y = b;
        return (x->row > y->row) - (x->row < y->row);
}

/* The flags of the runs the statement for sql names (?1 the release, ?2 param), added. */
static int read_flags(struct vctx *v, const char *sql, int64_t param) {
        sql_stmt *st;
        int r = vprep(v, sql, &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, param);
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
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read which runs need a closer look");
}

/* The runs with rows that a check reads, as a superset: a row outside the moment judged or
 * not yet received still marks its run, whose check then reads it and leaves it out.  Two
 * statements: as one, PostgreSQL planned it in parallel, whose workers took 50 ms to start. */
static int load_flags(struct vctx *v) {
        int r = read_flags(v,
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
                           (int64_t) v->rule.clock_tolerance_ns);
        if (r < 0)
                return r;
        r = read_flags(v,
                       "SELECT r.id, 8 FROM runs r WHERE r.release = ?1 AND EXISTS "
                       "(SELECT 1 FROM intervals i WHERE i.run = r.id AND i.max_ns > ?2) "
                       "UNION ALL SELECT r.id, 16 FROM runs r WHERE r.release = ?1 AND "
                       "r.machine_id IN (SELECT q.machine_id FROM runs q JOIN inventories i ON "
                       "i.run = q.id WHERE q.release = ?1 GROUP BY q.machine_id "
                       "HAVING count(DISTINCT i.digest) > 1)",
                       v->min_bound);
        if (r < 0)
                return r;
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
