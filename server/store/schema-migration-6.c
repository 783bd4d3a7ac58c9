/* SPDX-License-Identifier: MIT */
/* The part of migration 5 -> 6 that SQL alone does not do well: what each interval stored
 * before measured and counted, computed by the same rules as at ingest (server-measure.c), and
 * the rollups of those.  Runs inside the migration's transaction. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db-internal.h"
#include "measure.h"

struct mrun {
        int64_t row;
        uint64_t probe_ns;
        uint32_t *probed;
        size_t nprobed;
};

/* The CPUs a run stored before probed: every CPU its intervals hold. */
static int probed_of_run(sql_conn *c, struct mrun *run, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL, *upd = NULL;
        int r = farm_prepare(c,
                             "SELECT DISTINCT c.cpu FROM interval_cpus c JOIN intervals i "
                             "ON c.interval = i.id WHERE i.run = ? ORDER BY 1",
                             &st, err);
        if (r < 0 ||
            (r = farm_prepare(c, "UPDATE runs SET probed_cpus = ? WHERE id = ?", &upd, err)) < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                uint32_t *x = realloc(run->probed, (run->nprobed + 1) * sizeof(*x));
                if (!x)
                        return -ENOMEM;
                run->probed = x;
                x[run->nprobed++] = (uint32_t) sql_column_int64(st, 0);
        }
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read a run's CPUs", err);
        _cleanup_free_ char *text = farm_cpu_list_format(run->probed, run->nprobed);
        if (!text)
                return -ENOMEM;
        sql_bind_text(upd, 1, text);
        sql_bind_int64(upd, 2, run->row);
        return farm_step_done(upd, "cannot store a run's CPUs", err);
}

/* What one stored interval measured, from its CPU rows. */
static int measure_stored(sql_conn *c, const struct mrun *run, int64_t id, int64_t start,
                          int64_t len, struct farm_measure *ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct summary_cpu cpus[64], *many = NULL, *v = cpus;
        size_t n = 0, cap = 64;
        int r = farm_prepare(c,
                             "SELECT cpu, samples FROM interval_cpus WHERE interval = ? "
                             "ORDER BY cpu",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, id);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (n == cap) {
                        cap *= 2;
                        struct summary_cpu *x = realloc(many, cap * sizeof(*x));
                        if (!x) {
                                free(many);
                                return -ENOMEM;
                        }
                        if (!many)
                                memcpy(x, cpus, sizeof(cpus));
                        many = v = x;
                }
                v[n++] = (struct summary_cpu){
                        .cpu = (uint32_t) sql_column_int64(st, 0),
                        .samples = (uint64_t) sql_column_int64(st, 1),
                };
        }
        struct summary_interval iv = {
                .start_ns = start, .length_ns = (uint64_t) len, .cpus = v, .ncpus = n
        };
        if (rc == SQL_DONE)
                farm_measure_interval(&iv, run->probed, run->nprobed, run->probe_ns, ret);
        free(many);
        return rc == SQL_DONE ? 0 : farm_fail(c, rc, "cannot read an interval's CPUs", err);
}

struct miv {
        int64_t id, run, start, end, m_start, m_end;
        bool measured;
};

static int cmp_start(const void *a, const void *b) {
        const struct miv *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->id < y->id ? -1 : x->id > y->id;
}

/* The measured part of iv that no interval stored before it (smaller id) covers. */
static int64_t counted_of(const struct miv *all, size_t n, size_t i, int64_t max_len) {
        const struct miv *iv = &all[i];
        int64_t at = iv->m_start, left = 0;
        if (!iv->measured)
                return 0;
        /* The earlier-stored intervals that overlap, in start order. */
        size_t lo = i;
        while (lo > 0 && all[lo - 1].start > iv->start - max_len)
                lo--;
        for (size_t k = lo; k < n && all[k].start < iv->m_end && at < iv->m_end; k++) {
                const struct miv *o = &all[k];
                if (k == i || o->id > iv->id || !o->measured || o->m_end <= at)
                        continue;
                if (o->m_start > at)
                        left += MIN(o->m_start, iv->m_end) - at;
                at = MAX(at, o->m_end);
        }
        return left + MAX(iv->m_end - at, 0);
}

/* Intervals of other runs stored before iv that overlap it: two runs at once. */
static int store_overlaps(sql_conn *c, const char *machine, const struct miv *all, size_t n,
                          size_t i, int64_t max_len, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        const struct miv *iv = &all[i];
        int r = farm_prepare(
                c,
                "INSERT INTO \"overlaps\" (machine_id, run_a, run_b, start_ns, end_ns, "
                "received_ns) VALUES (?, ?, ?, ?, ?, ?)",
                &st, err);
        if (r < 0)
                return r;
        size_t lo = i;
        while (lo > 0 && all[lo - 1].start > iv->start - max_len)
                lo--;
        for (size_t k = lo; k < n && all[k].start < iv->end && r >= 0; k++) {
                const struct miv *o = &all[k];
                if (o->id > iv->id || o->run == iv->run || o->end <= iv->start)
                        continue;
                sql_bind_text(st, 1, machine);
                sql_bind_int64(st, 2, MIN(o->run, iv->run));
                sql_bind_int64(st, 3, MAX(o->run, iv->run));
                sql_bind_int64(st, 4, MAX(o->start, iv->start));
                sql_bind_int64(st, 5, MIN(o->end, iv->end));
                sql_bind_int64(st, 6, MAX(o->end, iv->end));
                r = farm_step_done(st, "cannot store an overlap", err);
        }
        return r;
}

static int store_facts(sql_conn *c, const struct miv *iv, const struct farm_measure *m,
                       int64_t counted, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "UPDATE intervals SET m_start_ns = ?2, m_end_ns = ?3, "
                             "min_ratio_pm = ?4, min_ratio_cpu = ?5, counted_ns = ?6, "
                             "missing_ns = ?7 WHERE id = ?1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, iv->id);
        if (m->measured) {
                sql_bind_int64(st, 2, m->start_ns);
                sql_bind_int64(st, 3, m->end_ns);
        }
        sql_bind_int64(st, 4, m->min_ratio_pm);
        if (m->min_ratio_cpu >= 0)
                sql_bind_int64(st, 5, m->min_ratio_cpu);
        sql_bind_int64(st, 6, counted);
        sql_bind_int64(st, 7, m->max_missing_ns);
        return farm_step_done(st, "cannot store what an interval measured", err);
}

/* Every interval of one machine: measured, then counted in the order they were stored. */
static int migrate_machine(sql_conn *c, const char *machine, struct mrun *runs, size_t nruns,
                           char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct miv *all = NULL;
        struct farm_measure *ms = NULL;
        size_t n = 0, cap = 0;
        int64_t max_len = 0;
        int r = farm_prepare(c,
                             "SELECT i.id, i.run, i.start_ns, i.length_ns FROM intervals i "
                             "JOIN runs r ON i.run = r.id WHERE r.machine_id = ? ORDER BY i.id",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 1024;
                        struct miv *x = realloc(all, cap * sizeof(*x));
                        struct farm_measure *y = realloc(ms, cap * sizeof(*y));
                        if (x)
                                all = x;
                        if (y)
                                ms = y;
                        if (!x || !y) {
                                r = -ENOMEM;
                                break;
                        }
                }
                int64_t len = sql_column_int64(st, 3);
                all[n] = (struct miv){ .id = sql_column_int64(st, 0),
                                       .run = sql_column_int64(st, 1),
                                       .start = sql_column_int64(st, 2) };
                all[n].end = all[n].start + len;
                max_len = MAX(max_len, len);
                n++;
        }
        sql_reset(st);
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the intervals", err);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct mrun *run = NULL;
                for (size_t k = 0; k < nruns && !run; k++)
                        if (runs[k].row == all[i].run)
                                run = &runs[k];
                if (!run)
                        continue;
                r = measure_stored(c, run, all[i].id, all[i].start, all[i].end - all[i].start,
                                   &ms[i], err);
                all[i].measured = ms[i].measured;
                all[i].m_start = ms[i].start_ns;
                all[i].m_end = ms[i].end_ns;
        }
        /* In start order for the overlaps; ms follows by id. */
        struct miv *sorted = r >= 0 && n ? malloc(n * sizeof(*sorted)) : NULL;
        if (r >= 0 && n && !sorted)
                r = -ENOMEM;
        if (sorted) {
                memcpy(sorted, all, n * sizeof(*sorted));
                qsort(sorted, n, sizeof(*sorted), cmp_start);
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                /* all is in id order: find its place in start order. */
                size_t lo = 0, hi = n;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (cmp_start(&sorted[mid], &all[i]) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                r = store_facts(c, &all[i], &ms[i], counted_of(sorted, n, lo, max_len), err);
                if (r >= 0)
                        r = store_overlaps(c, machine, sorted, n, lo, max_len, err);
        }
        free(sorted);
        free(all);
        free(ms);
        return r;
}

/* The rollups of what the intervals measured and counted, and the down time of generators
 * that reported no throughput. */
static const char *const rollups_sql =
        "INSERT INTO load_downs (run, seq, load_idx, generator, start_ns, length_ns, scenario, "
        "  down_ns) SELECT i.run, i.seq, l.idx, l.generator, i.start_ns, i.length_ns, "
        "  i.scenario, i.length_ns FROM interval_loads l JOIN intervals i ON i.id = l.interval "
        "  WHERE NOT EXISTS (SELECT 1 FROM interval_load_metrics m WHERE m.interval = l.interval "
        "  AND m.load_idx = l.idx AND m.value > 0) "
        "  ON CONFLICT (run, seq, load_idx) DO UPDATE SET down_ns = excluded.down_ns;"
        "UPDATE run_days SET "
        "  counted_ns = (SELECT coalesce(sum(counted_ns), 0) FROM intervals i WHERE i.run = "
        "  run_days.run AND i.start_ns >= run_days.day * 86400000000000 AND i.start_ns < "
        "  (run_days.day + 1) * 86400000000000), "
        "  min_ratio_pm = coalesce((SELECT min(min_ratio_pm) FROM intervals i WHERE i.run = "
        "  run_days.run AND i.start_ns >= run_days.day * 86400000000000 AND i.start_ns < "
        "  (run_days.day + 1) * 86400000000000), 1000), "
        "  max_missing_ns = coalesce((SELECT max(missing_ns) FROM intervals i WHERE i.run = "
        "  run_days.run AND i.start_ns >= run_days.day * 86400000000000 AND i.start_ns < "
        "  (run_days.day + 1) * 86400000000000), 0), "
        "  max_skew_ns = 0, max_received_ns = last_end_ns;"
        "UPDATE run_day_scenarios SET "
        "  counted_ns = (SELECT coalesce(sum(counted_ns), 0) FROM intervals i WHERE i.run = "
        "  run_day_scenarios.run AND coalesce(i.scenario, '') = run_day_scenarios.scenario AND "
        "  i.start_ns >= run_day_scenarios.day * 86400000000000 AND i.start_ns < "
        "  (run_day_scenarios.day + 1) * 86400000000000), "
        "  down_ns = (SELECT coalesce(sum(d.down_ns), 0) FROM load_downs d WHERE d.run = "
        "  run_day_scenarios.run AND coalesce(d.scenario, '') = run_day_scenarios.scenario AND "
        "  d.start_ns >= run_day_scenarios.day * 86400000000000 AND d.start_ns < "
        "  (run_day_scenarios.day + 1) * 86400000000000), "
        /* The generators every interval of the day and scenario had. */
        "  gens_all = coalesce((SELECT string_agg(g, ' ') FROM (SELECT l.generator AS g "
        "  FROM interval_loads l JOIN intervals i ON i.id = l.interval WHERE i.run = "
        "  run_day_scenarios.run AND coalesce(i.scenario, '') = run_day_scenarios.scenario AND "
        "  i.start_ns >= run_day_scenarios.day * 86400000000000 AND i.start_ns < "
        "  (run_day_scenarios.day + 1) * 86400000000000 GROUP BY l.generator "
        "  HAVING count(DISTINCT l.interval) = (SELECT count(*) FROM intervals j WHERE j.run = "
        "  run_day_scenarios.run AND coalesce(j.scenario, '') = run_day_scenarios.scenario AND "
        "  j.start_ns >= run_day_scenarios.day * 86400000000000 AND j.start_ns < "
        "  (run_day_scenarios.day + 1) * 86400000000000) ORDER BY l.generator) AS gens), '');";

int farm_migrate_6(sql_conn *c, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL, *ms = NULL;
        struct mrun *runs = NULL;
        size_t nruns = 0;
        int r = farm_prepare(c,
                             "SELECT id, probe_interval_ns FROM runs WHERE machine_id = ? "
                             "ORDER BY id",
                             &st, err);
        if (r < 0 || (r = farm_prepare(c, "SELECT id FROM machines ORDER BY id", &ms, err)) < 0)
                return r;
        int rc;
        while (r >= 0 && (rc = sql_step(ms)) == SQL_ROW) {
                const char *machine = sql_column_text(ms, 0);
                sql_reset(st);
                sql_bind_text(st, 1, machine);
                int q = SQL_DONE;
                while (r >= 0 && (q = sql_step(st)) == SQL_ROW) {
                        struct mrun *x = realloc(runs, (nruns + 1) * sizeof(*x));
                        if (!x) {
                                r = -ENOMEM;
                                break;
                        }
                        runs = x;
                        runs[nruns] =
                                (struct mrun){ .row = sql_column_int64(st, 0),
                                               .probe_ns = (uint64_t) sql_column_int64(st, 1) };
                        r = probed_of_run(c, &runs[nruns++], err);
                }
                if (r >= 0 && q != SQL_DONE)
                        r = farm_fail(c, q, "cannot list the runs", err);
                if (r >= 0)
                        r = migrate_machine(c, machine, runs, nruns, err);
                for (size_t i = 0; i < nruns; i++)
                        free(runs[i].probed);
                nruns = 0;
        }
        free(runs);
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot list the machines", err);
        if (r < 0)
                return r;
        return farm_exec(c, rollups_sql, err);
}
