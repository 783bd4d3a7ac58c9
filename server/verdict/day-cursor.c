/* SPDX-License-Identifier: MIT */
/* A day read interval by interval (machine.c): its intervals, and beside them what it needs
 * of their other rows, their generators and, where they did not measure, their CPUs, one
 * statement each for the day, in the intervals' order (asked interval by interval, they were
 * up to two statements per interval: 1,440 round trips a day each on PostgreSQL).  Each is read
 * in chunks of at most v->chunk_rows rows, each chunk after the last row of the one before
 * (PostgreSQL hands a statement's result over whole: a day of a machine with hundreds of CPUs
 * that did not measure would otherwise be hundreds of thousands of rows at once, 157-297 MiB
 * for 256 CPUs).  A chunk is found from its day's intervals after the last start read, sorted
 * by (start, seq) there: a day of many chunks costs more than its rows, which only a day far
 * larger than a machine's minutes has. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "verdict-internal.h"

/* Columns 0 id, 1 start, 2 seq, 3 the row's key within its interval (sub), then the row's own:
 * the run's (?1) rows of intervals that start in [?2, ?3), after (?4, ?5, ?6) in the order
 * (start, seq, sub), at most ?7. */
#define DAY_ROWS(sub, cols, join, where)                                                          \
        "SELECT i.id, i.start_ns, i.seq, " sub ", " cols " FROM intervals i " join                \
        " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3 AND (i.start_ns, i.seq, " sub \
        ") > (?4, ?5, ?6)" where " ORDER BY i.start_ns, i.seq, " sub " LIMIT ?7"

/* The intervals: 4 length, 5 scenario, 6 received, 7 counted, 8 the lowest share of wake-ups
 * of its CPUs, 9 the time its probes missed. */
static const char *const sql_intervals =
        DAY_ROWS("i.seq",
                 "i.length_ns, coalesce(i.scenario, ''), i.received_ns, coalesce(i.counted_ns, "
                 "0), coalesce(i.min_ratio_pm, 0), coalesce(i.missing_ns, i.length_ns)",
                 "", "");

/* The generators: 4 name, 5 the time it did not run its load. */
#define LOADS_JOIN(partition)                                                             \
        "JOIN interval_loads l ON l.interval = i.id" partition " LEFT JOIN load_downs d " \
        "ON d.run = i.run AND d.seq = i.seq AND d.load_idx = l.idx"
static const char *const sql_loads[] = {
        [SQL_SQLITE] = DAY_ROWS("l.idx", "l.generator, coalesce(d.down_ns, 0)", LOADS_JOIN(""), ""),
        [SQL_PG] = DAY_ROWS("l.idx", "l.generator, coalesce(d.down_ns, 0)",
                            LOADS_JOIN(" AND l.start_ns = i.start_ns"), ""),
};

/* The CPUs (3) of the intervals that did not measure by the rule (?8 its lowest share of
 * wake-ups per mille, ?9 the most a probe may miss; machine.c's test, here a superset of it):
 * 4 samples, 5 the time its span covers. */
#define CPU_COLS "c.samples, coalesce(c.span_length_ns, i.length_ns)"
#define NOT_MEASURED \
        " AND (coalesce(i.min_ratio_pm, 0) < ?8 OR coalesce(i.missing_ns, i.length_ns) > ?9)"
static const char *const sql_cpus[] = {
        [SQL_SQLITE] = DAY_ROWS("c.cpu", CPU_COLS, SQL_JOIN_CPUS_SQLITE, NOT_MEASURED),
        [SQL_PG] = DAY_ROWS("c.cpu", CPU_COLS, SQL_JOIN_CPUS_PG, NOT_MEASURED),
};

static int checked(struct vctx *v, struct vday_cursor *d) {
        return d->rc == SQL_ROW || d->rc == SQL_DONE ? 0 : vfail(v, d->rc, "cannot read a day");
}

/* The next row (SQL_ROW) or none (SQL_DONE) of the current chunk, its key kept. */
static int chunk_step(struct vctx *v, struct vday_cursor *d) {
        d->rc = sql_step(d->st);
        if (d->rc == SQL_ROW) {
                for (int k = 0; k < 3; k++)
                        d->key[k] = sql_column_int64(d->st, 1 + k);
                d->rows++;
        }
        return checked(v, d);
}

/* The chunk after the key, at its first row. */
static int chunk_open(struct vctx *v, struct vday_cursor *d) {
        int r = vprep(v, d->sql, &d->st);
        if (r < 0)
                return r;
        sql_bind_int64(d->st, 1, d->run);
        sql_bind_int64(d->st, 2, MAX(d->day * FARM_DAY_NS, d->key[0]));
        sql_bind_int64(d->st, 3, (d->day + 1) * FARM_DAY_NS);
        for (int k = 0; k < 3; k++)
                sql_bind_int64(d->st, 4 + k, d->key[k]);
        sql_bind_int64(d->st, 7, (int64_t) v->chunk_rows);
        if (d->not_measured) {
                sql_bind_int64(d->st, 8, (int64_t) v->rule.min_samples_pm);
                sql_bind_int64(d->st, 9, (int64_t) v->rule.probe_down_max_ns);
        }
        d->rows = 0;
        return chunk_step(v, d);
}

static int day_open(struct vctx *v, struct vday_cursor *d, const char *sql, bool not_measured,
                    int64_t run, int64_t day) {
        *d = (struct vday_cursor){ .sql = sql,
                                   .not_measured = not_measured,
                                   .run = run,
                                   .day = day,
                                   .key = { INT64_MIN, INT64_MIN, INT64_MIN } };
        return chunk_open(v, d);
}

int vday_intervals_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day) {
        return day_open(v, d, sql_intervals, false, run, day);
}

int vday_loads_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day) {
        return day_open(v, d, sql_loads[sql_dialect(v->c)], false, run, day);
}

int vday_cpus_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day) {
        return day_open(v, d, sql_cpus[sql_dialect(v->c)], true, run, day);
}

int vday_next(struct vctx *v, struct vday_cursor *d) {
        int r = chunk_step(v, d);
        if (r >= 0 && d->rc == SQL_DONE && d->rows == v->chunk_rows)
                r = chunk_open(v, d); /* a full chunk: there may be more */
        return r;
}

int vday_seek(struct vctx *v, struct vday_cursor *d, int64_t start, int64_t seq) {
        int r = 0;
        while (r >= 0 && d->rc == SQL_ROW) {
                int64_t s = sql_column_int64(d->st, 1);
                if (s > start || (s == start && sql_column_int64(d->st, 2) >= seq))
                        break;
                r = vday_next(v, d);
        }
        return r;
}

bool vday_at(const struct vday_cursor *d, int64_t id) {
        return d->rc == SQL_ROW && sql_column_int64(d->st, 0) == id;
}

void vday_close(struct vday_cursor *d) {
        if (d->st)
                sql_reset(d->st);
        *d = (struct vday_cursor){};
}
