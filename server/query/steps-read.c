/* SPDX-License-Identifier: MIT */
/* Reading a machine's intervals into time steps (steps.h): on PostgreSQL aggregated in the
 * database, one row per step, scenario and kernel (a month of one-minute intervals at
 * 5-minute steps comes back as 8,640 rows, not 43,200, each of which would cost its transfer
 * and decoding); on SQLite, in the same process, row by row, since its GROUP BY sorts every
 * row first (measured 2.5-7.7 times slower than this loop: bench/intervals-query.py).  Both
 * give the same steps:
 * - a step's worst case is the largest maximum, then the earliest time of equals, then the
 *   earliest interval's, then the run's with the lowest number;
 * - its sums saturate at 2^63-1 (a machine may send intervals that overlap);
 * - scenarios and kernels are named in the order of their first interval (its start, then
 *   its run). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "macro.h"
#include "query-internal.h"
#include "steps-read.h"

#define NAMES_MAX FARM_STEP_NAMES_MAX

/* The intervals of the machine's runs in the window (?1 machine, ?2 from, ?3 to, ?4 the
 * scenario or NULL): all CPUs from the totals kept on each interval's row (schema 4), or one
 * CPU ?5's row (?7 on PostgreSQL, whose first ones are the step's). */
#define STEPS_FROM(cols, join, cpu)                                                      \
        "SELECT i.start_ns, i.length_ns, coalesce(i.scenario, ''), "                     \
        "coalesce(r.kernel_release, ''), r.id, " cols " FROM runs r JOIN intervals i "   \
        "ON i.run = r.id " join cpu " WHERE r.machine_id = ?1 AND i.start_ns >= ?2 AND " \
        "i.start_ns < ?3 AND (i.scenario = ?4 OR ?4 IS NULL)"
#define ALL_CPUS "i.max_ns, i.max_cpu, i.max_time_ns, i.samples, i.violations"
#define ONE_CPU "c.max_ns, c.cpu, c.max_time_ns, c.samples, c.violations"

/* SQLite: the rows, columns as struct step_part's reader takes them. */
static const char *const sql_rows[2] = {
        STEPS_FROM(ALL_CPUS, "", ""),
        STEPS_FROM(ONE_CPU, SQL_JOIN_CPUS_SQLITE, " AND c.cpu = ?5"),
};

/* PostgreSQL: per step (k, from the first step's start ?5 and the step ?6), scenario and
 * kernel, the same columns: the worst row is the largest array (maximum, -time, -start,
 * -run, cpu), the first one the least (start, run). */
#define GROUPS(rows)                                                                            \
        "SELECT k, w[3] * -1, len, scen, kern, w[4] * -1, w[1], w[5], w[2] * -1, smp, vio, n, " \
        "dend, f[1], f[2] FROM (SELECT (start_ns - ?5) / ?6 AS k, scen, kern, count(*) AS n, "  \
        "least(sum(length_ns), 9223372036854775807)::bigint AS len, least(sum(samples), "       \
        "9223372036854775807)::bigint AS smp, least(sum(violations), "                          \
        "9223372036854775807)::bigint AS vio, max(start_ns + length_ns) AS dend, "              \
        "max(ARRAY[max_ns, -max_time_ns, -start_ns, -run, cpu::bigint]) AS w, "                 \
        "min(ARRAY[start_ns, run]) AS f FROM (SELECT i.start_ns, i.length_ns, "                 \
        "coalesce(i.scenario, '') AS scen, coalesce(r.kernel_release, '') AS kern, r.id AS "    \
        "run, " rows ") x GROUP BY 1, 2, 3) g ORDER BY k"
#define PG_WHERE                                                                               \
        " WHERE r.machine_id = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3 AND (i.scenario = " \
        "?4 OR ?4 IS NULL)"
static const char *const sql_groups[2] = {
        GROUPS("i.max_ns, i.max_cpu AS cpu, i.max_time_ns, i.samples, i.violations FROM runs r "
               "JOIN intervals i ON i.run = r.id" PG_WHERE),
        GROUPS("c.max_ns, c.cpu, c.max_time_ns, c.samples, c.violations FROM runs r JOIN "
               "intervals i ON i.run = r.id " SQL_JOIN_CPUS_PG " AND c.cpu = ?7" PG_WHERE),
};

/* One row (an interval) or group (of intervals of a step, scenario and kernel). */
struct step_part {
        int64_t start_ns, run; /* of its worst case */
        const char *scenario, *kernel;
        uint64_t max_ns, samples, violations, intervals, covered_ns;
        int64_t max_cpu, max_time_ns, data_end_ns;
        int64_t first_start_ns, first_run; /* its first interval */
};

/* A row of sql_rows: columns 0 start, 1 length, 2 scenario, 3 kernel, 4 run, 5 maximum, 6
 * CPU, 7 time, 8 samples, 9 violations.  A row of sql_groups has them in the same places,
 * after its step in column 0 (start and run those of the worst case), with 10 intervals, 11
 * end, 12-13 the first interval's start and run. */
static struct step_part part_of(sql_stmt *st, bool group) {
        int o = group;
        int64_t start = sql_column_int64(st, o), len = sql_column_int64(st, o + 1), end = 0;
        if (!group && __builtin_add_overflow(start, len, &end))
                end = INT64_MAX;
        struct step_part p = {
                .start_ns = start,
                .covered_ns = (uint64_t) len,
                .scenario = sql_column_text(st, o + 2) ?: "",
                .kernel = sql_column_text(st, o + 3) ?: "",
                .run = sql_column_int64(st, o + 4),
                .max_ns = (uint64_t) sql_column_int64(st, o + 5),
                .max_cpu = sql_column_int64(st, o + 6),
                .max_time_ns = sql_column_int64(st, o + 7),
                .samples = (uint64_t) sql_column_int64(st, o + 8),
                .violations = (uint64_t) sql_column_int64(st, o + 9),
                .intervals = 1,
                .data_end_ns = end,
                .first_start_ns = start,
                .first_run = sql_column_int64(st, o + 4),
        };
        if (group) {
                p.intervals = (uint64_t) sql_column_int64(st, 11);
                p.data_end_ns = sql_column_int64(st, 12);
                p.first_start_ns = sql_column_int64(st, 13);
                p.first_run = sql_column_int64(st, 14);
        }
        return p;
}

/* Whether (start, run) a comes before b. */
static bool first_before(int64_t a_start, int64_t a_run, int64_t b_start, int64_t b_run) {
        return a_start < b_start || (a_start == b_start && a_run < b_run);
}

/* A part added to its step (tie: where the step's worst case came from). */
static void step_add(struct farm_step *s, struct step_tie *tie, const struct step_part *p) {
        if (!s->intervals || p->max_ns > s->max_ns ||
            (p->max_ns == s->max_ns &&
             (p->max_time_ns < s->max_time_ns ||
              (p->max_time_ns == s->max_time_ns &&
               first_before(p->start_ns, p->run, tie->start_ns, tie->run))))) {
                s->max_ns = p->max_ns;
                s->max_cpu = p->max_cpu;
                s->max_time_ns = p->max_time_ns;
                *tie = (struct step_tie){ p->start_ns, p->run };
        }
        sat_add(&s->intervals, p->intervals);
        sat_add(&s->covered_ns, p->covered_ns);
        sat_add(&s->samples, p->samples);
        sat_add(&s->violations, p->violations);
        s->data_end_ns = MAX(s->data_end_ns, p->data_end_ns);
}

/* The index of s ("" for none), added if new, its first interval kept in first[]: -ENOSPC
 * past NAMES_MAX, unless lump, which renames the last one "(others)" and gives its index (a
 * machine's day with hundreds of scenarios still has a page; for the API it is a 400). */
static int name_index(struct farm_names *n, struct step_tie *first, const char *s, bool lump,
                      const struct step_part *p) {
        unsigned i = 0;
        while (i < n->n && strcmp(n->s[i], s) != 0)
                i++;
        if (i == NAMES_MAX) {
                if (!lump)
                        return -ENOSPC;
                i = NAMES_MAX - 1;
                if (strcmp(n->s[i], "(others)") != 0) {
                        char *o = strdup("(others)");
                        if (!o)
                                return -ENOMEM;
                        free(n->s[i]);
                        n->s[i] = o;
                }
        } else if (i == n->n) {
                if (!(n->s[i] = strdup(s)))
                        return -ENOMEM;
                n->n++;
                first[i] = (struct step_tie){ p->first_start_ns, p->first_run };
        }
        if (first_before(p->first_start_ns, p->first_run, first[i].start_ns, first[i].run))
                first[i] = (struct step_tie){ p->first_start_ns, p->first_run };
        return (int) i;
}

/* The names put in the order of their first interval ("(others)" stays last), and every
 * step's bits of them (at member off of struct farm_step) with them. */
static void names_order(struct farm_names *n, struct step_tie *first, struct farm_step *v,
                        size_t nv, size_t off) {
        unsigned k = n->n, place[NAMES_MAX], order[NAMES_MAX];
        if (k == NAMES_MAX && strcmp(n->s[k - 1], "(others)") == 0)
                k--; /* sorted without it */
        for (unsigned i = 0; i < k; i++)
                order[i] = i;
        for (unsigned i = 1; i < k; i++) /* insertion sort: at most 64 */
                for (unsigned j = i; j > 0; j--) {
                        struct step_tie *a = &first[order[j]], *b = &first[order[j - 1]];
                        if (!first_before(a->start_ns, a->run, b->start_ns, b->run))
                                break;
                        unsigned t = order[j];
                        order[j] = order[j - 1];
                        order[j - 1] = t;
                }
        char *s[NAMES_MAX];
        for (unsigned i = 0; i < n->n; i++) {
                place[i < k ? order[i] : i] = i;
                s[i] = n->s[i < k ? order[i] : i];
        }
        memcpy(n->s, s, n->n * sizeof(*s));
        for (size_t j = 0; j < nv; j++) {
                uint64_t *bits = (uint64_t *) ((char *) &v[j] + off), to = 0;
                for (unsigned i = 0; i < n->n; i++)
                        if (*bits & (UINT64_C(1) << i))
                                to |= UINT64_C(1) << place[i];
                *bits = to;
        }
}

int steps_read_init(struct steps_read *r, int64_t from, int64_t to, uint64_t step_ns, bool lump) {
        *r = (struct steps_read){ .first = farm_step_floor(from, step_ns),
                                  .step_ns = step_ns,
                                  .nsteps = farm_steps_in(from, to, step_ns),
                                  .lump = lump };
        r->slot = calloc(MAX(r->nsteps, 1), sizeof(*r->slot));
        return r->slot ? 0 : -ENOMEM;
}

/* The step that holds the part p (whose step is k), made when new: NULL when out of
 * memory. */
static struct farm_step *step_of(struct steps_read *r, uint64_t k) {
        if (r->slot[k])
                return &r->v[r->slot[k] - 1];
        if (!farm_grow((void **) &r->v, r->n, sizeof(*r->v)) ||
            !farm_grow((void **) &r->ties, r->n, sizeof(*r->ties)))
                return NULL;
        r->v[r->n] = (struct farm_step){ .start_ns = r->first + (int64_t) (k * r->step_ns) };
        r->ties[r->n] = (struct step_tie){};
        r->slot[k] = (uint32_t) ++r->n;
        return &r->v[r->n - 1];
}

/* Adds the current row of st (a group when group, else an interval). */
static int read_part(struct steps_read *r, sql_stmt *st, bool group) {
        struct step_part p = part_of(st, group);
        uint64_t k = group ? (uint64_t) sql_column_int64(st, 0)
                           : (uint64_t) (p.start_ns - r->first) / r->step_ns;
        if (k >= r->nsteps)
                return 0; /* cannot happen: its start is in [from, to) */
        struct farm_step *s = step_of(r, k);
        if (!s)
                return -ENOMEM;
        step_add(s, &r->ties[s - r->v], &p);
        int si = name_index(&r->scenarios, r->scen_first, p.scenario, r->lump, &p);
        int ki = name_index(&r->kernels, r->kern_first, p.kernel, r->lump, &p);
        if (si < 0 || ki < 0)
                return si < 0 ? si : ki;
        s->scenarios |= UINT64_C(1) << si;
        s->kernels |= UINT64_C(1) << ki;
        return 0;
}

int steps_read(struct steps_read *r, sql_conn *c, const char *id, int64_t from, int64_t to,
               int64_t cpu, const char *scenario, char *err) {
        bool pg = sql_dialect(c) == SQL_PG;
        _cleanup_reset_ sql_stmt *st = NULL;
        int q = farm_prepare(c, pg ? sql_groups[cpu >= 0] : sql_rows[cpu >= 0], &st, err), rc;
        if (q < 0)
                return q;
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, from);
        sql_bind_int64(st, 3, to);
        if (scenario)
                sql_bind_text(st, 4, scenario);
        if (pg) {
                sql_bind_int64(st, 5, r->first);
                sql_bind_int64(st, 6, (int64_t) r->step_ns);
        }
        if (cpu >= 0)
                sql_bind_int64(st, pg ? 7 : 5, cpu);
        while ((rc = sql_step(st)) == SQL_ROW)
                if ((q = read_part(r, st, pg)) < 0) {
                        if (q == -ENOMEM)
                                snprintf(err, FARM_ERROR_MAX, "out of memory for the steps");
                        return q;
                }
        return rc == SQL_DONE ? 0 : farm_fail(c, rc, "cannot read the intervals", err);
}

int steps_read_finish(struct steps_read *r, struct farm_steps *ret) {
        struct farm_step *ordered = calloc(MAX(r->n, 1), sizeof(*ordered));
        if (!ordered)
                return -ENOMEM;
        for (uint64_t k = 0, o = 0; k < r->nsteps; k++)
                if (r->slot[k])
                        ordered[o++] = r->v[r->slot[k] - 1];
        names_order(&r->scenarios, r->scen_first, ordered, r->n,
                    offsetof(struct farm_step, scenarios));
        names_order(&r->kernels, r->kern_first, ordered, r->n, offsetof(struct farm_step, kernels));
        *ret = (struct farm_steps){
                .v = ordered, .n = r->n, .scenarios = r->scenarios, .kernels = r->kernels
        };
        r->scenarios = (struct farm_names){};
        r->kernels = (struct farm_names){};
        return 0;
}

void steps_read_done(struct steps_read *r) {
        struct farm_steps names = { .scenarios = r->scenarios, .kernels = r->kernels };
        farm_steps_done(&names);
        free(r->slot);
        free(r->v);
        free(r->ties);
        *r = (struct steps_read){};
}
