/* SPDX-License-Identifier: MIT */
/* What a day read interval by interval (machine.c) needs of each interval's other rows, its
 * generators and, where they did not measure, its CPUs: read for the whole day, one statement
 * each, beside the day's intervals and in their order.  Asked interval by interval, they were
 * up to two statements per interval: 1,440 round trips a day each on PostgreSQL. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "verdict-internal.h"

/* Both select the run's intervals that start in [?2, ?3) and order their rows as the day's
 * intervals are read: columns 0 id, 1 start, 2 seq, then the row's own. */
#define DAY_ROWS(cols, join, where)                                                     \
        "SELECT i.id, i.start_ns, i.seq, " cols " FROM intervals i " join               \
        " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3" where " ORDER BY " \
        "i.start_ns, i.seq, 4"

/* The generators: 3 index, 4 name, 5 the time it did not run its load. */
#define LOADS_JOIN(partition)                                                             \
        "JOIN interval_loads l ON l.interval = i.id" partition " LEFT JOIN load_downs d " \
        "ON d.run = i.run AND d.seq = i.seq AND d.load_idx = l.idx"
static const char *const sql_loads[] = {
        [SQL_SQLITE] = DAY_ROWS("l.idx, l.generator, coalesce(d.down_ns, 0)", LOADS_JOIN(""), ""),
        [SQL_PG] = DAY_ROWS("l.idx, l.generator, coalesce(d.down_ns, 0)",
                            LOADS_JOIN(" AND l.start_ns = i.start_ns"), ""),
};

/* The CPUs of the intervals that did not measure by the rule (?4 its lowest share of wake-ups
 * per mille, ?5 the most a probe may miss; machine.c's test, here a superset of it): 3 CPU, 4
 * samples, 5 the time its span covers. */
#define CPU_COLS "c.cpu, c.samples, coalesce(c.span_length_ns, i.length_ns)"
#define NOT_MEASURED \
        " AND (coalesce(i.min_ratio_pm, 0) < ?4 OR coalesce(i.missing_ns, i.length_ns) > ?5)"
static const char *const sql_cpus[] = {
        [SQL_SQLITE] = DAY_ROWS(CPU_COLS, SQL_JOIN_CPUS_SQLITE, NOT_MEASURED),
        [SQL_PG] = DAY_ROWS(CPU_COLS, SQL_JOIN_CPUS_PG, NOT_MEASURED),
};

static int checked(struct vctx *v, struct vday_cursor *d) {
        return d->rc == SQL_ROW || d->rc == SQL_DONE ? 0 : vfail(v, d->rc, "cannot read a day");
}

static int day_prepare(struct vctx *v, struct vday_cursor *d, const char *sql, int64_t run,
                       int64_t day) {
        *d = (struct vday_cursor){};
        int r = vprep(v, sql, &d->st);
        if (r < 0)
                return r;
        sql_bind_int64(d->st, 1, run);
        sql_bind_int64(d->st, 2, day * FARM_DAY_NS);
        sql_bind_int64(d->st, 3, (day + 1) * FARM_DAY_NS);
        return 0;
}

static int day_start(struct vctx *v, struct vday_cursor *d) {
        d->rc = sql_step(d->st);
        return checked(v, d);
}

int vday_loads_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day) {
        int r = day_prepare(v, d, sql_loads[sql_dialect(v->c)], run, day);
        return r < 0 ? r : day_start(v, d);
}

int vday_cpus_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day) {
        int r = day_prepare(v, d, sql_cpus[sql_dialect(v->c)], run, day);
        if (r < 0)
                return r;
        sql_bind_int64(d->st, 4, (int64_t) v->rule.min_samples_pm);
        sql_bind_int64(d->st, 5, (int64_t) v->rule.probe_down_max_ns);
        return day_start(v, d);
}

int vday_seek(struct vctx *v, struct vday_cursor *d, int64_t start, int64_t seq) {
        while (d->rc == SQL_ROW) {
                int64_t s = sql_column_int64(d->st, 1);
                if (s > start || (s == start && sql_column_int64(d->st, 2) >= seq))
                        break;
                d->rc = sql_step(d->st);
        }
        return checked(v, d);
}

bool vday_at(const struct vday_cursor *d, int64_t id) {
        return d->rc == SQL_ROW && sql_column_int64(d->st, 0) == id;
}

int vday_next(struct vctx *v, struct vday_cursor *d) {
        d->rc = sql_step(d->st);
        return checked(v, d);
}

void vday_close(struct vday_cursor *d) {
        if (d->st)
                sql_reset(d->st);
        *d = (struct vday_cursor){};
}
