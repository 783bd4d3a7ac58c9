/* SPDX-License-Identifier: MIT */
/* One machine's data of the release: coverage (measured, counted once, while gating), the
 * stretches of its silences' evidence, probes and generators that stopped, clock skew,
 * violations, unclean ends and overlapping runs.  A day is read from its rollups when it is
 * clean by the rule's numbers, interval by interval otherwise (docs/verdict.md, "How it is
 * computed"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure.h"
#include "traces.h"
#include "verdict-internal.h"

/* A run of the release on the machine. */
struct vrun {
        int64_t row, id;
        uint64_t probe_ns;
        bool probe_ok; /* its probe period measures */
        uint32_t *probed;
        size_t nprobed;
        bool gating_data; /* some of its data came while the machine gated the release */
        int64_t first_ns; /* its first interval judged */
        int64_t first_seq;
        int64_t seq_min; /* its first interval, where its probes start a moment apart */
};

/* The receipt bound: what was received by `known`. */
static bool received_ok(const struct vctx *v, sql_stmt *st, int col, int64_t end,
                        int64_t *ret_received) {
        int64_t r = sql_column_null(st, col) ? end : sql_column_int64(st, col);
        *ret_received = r;
        return r <= v->known;
}

static int add_entry(struct vmachine *m, int64_t run, int64_t start, int64_t end) {
        if (m->nentries > 0) {
                struct ventry *e = &m->entries[m->nentries - 1];
                if (e->run == run && start >= e->start && start <= e->end) {
                        e->end = MAX(e->end, end);
                        goto out;
                }
        }
        if (!farm_grow((void **) &m->entries, m->nentries, sizeof(*m->entries)))
                return -ENOMEM;
        m->entries[m->nentries++] = (struct ventry){ run, start, end };
out:
        m->first_ns = m->nentries == 1 && m->first_ns == 0 ? start : MIN(m->first_ns, start);
        m->last_ns = MAX(m->last_ns, end);
        return 0;
}

static int add_seg(struct vmachine *m, const struct vseg *s) {
        if (!farm_grow((void **) &m->segs, m->nsegs, sizeof(*m->segs)))
                return -ENOMEM;
        m->segs[m->nsegs++] = *s;
        return 0;
}

static int add_down(struct vmachine *m, const struct vdown *d) {
        if (!farm_grow((void **) &m->downs, m->ndowns, sizeof(*m->downs)))
                return -ENOMEM;
        struct vdown *x = &m->downs[m->ndowns++];
        *x = *d;
        x->last_seq = d->seq;
        x->end = d->start + d->len;
        return 0;
}

/* A probe's down in interval d->seq: it extends the CPU's down of the interval before (in
 * m->open, from *at on, by CPU) or is one of its own; either way it is open for the next.  A
 * CPU absent from a day of intervals is one entry, not 1,440. */
static int add_probe_down(struct vmachine *m, const struct vdown *d, size_t *at, size_t *nnext) {
        while (*at < m->nopen && m->downs[m->open[*at]].cpu < d->cpu)
                (*at)++;
        size_t i = m->ndowns;
        if (*at < m->nopen && m->downs[m->open[*at]].cpu == d->cpu) {
                struct vdown *x = &m->downs[i = m->open[*at]];
                x->last_seq = d->seq;
                x->end = d->start + d->len;
                x->missing_ns += d->missing_ns;
                x->missing_wakeups += d->missing_wakeups;
        } else {
                int r = add_down(m, d);
                if (r < 0)
                        return r;
        }
        m->open_next[(*nnext)++] = i;
        return 0;
}

/* ---- the generators of one interval -------------------------------------------------------- */

/* The generators of interval seq (its loads: got, n) that did not run their load, and for
 * how long: those its scenario requires (one it lacks is down all along), or, for a scenario
 * the rule lists no generators for, any of them.  Returns the time the required ones took from
 * the scenario: their down times added (when several were down, their times may not
 * overlap). */
static int interval_loads(const struct vctx *v, const struct vrun *run, const struct vload *got,
                          size_t n, int64_t seq, int64_t start, int64_t len, const char *scen,
                          struct vmachine *m, int64_t *ret_required_down) {
        const struct farm_rule_loads *req = farm_rule_loads_of(&v->rule, scen);
        int r;
        struct vdown d = { .run = run->row,
                           .run_id = run->id,
                           .seq = seq,
                           .start = start,
                           .len = len,
                           .cpu = -1 };
        snprintf(d.scenario, sizeof(d.scenario), "%s", scen);
        int64_t required_down = 0;
        for (size_t i = 0; !req && i < n; i++) {
                if (got[i].down_ns <= 0)
                        continue;
                d.missing_ns = got[i].down_ns;
                memcpy(d.name, got[i].name, sizeof(d.name));
                if ((r = add_down(m, &d)) < 0)
                        return r;
        }
        for (size_t k = 0; req && k < req->ngens; k++) {
                int64_t down = len; /* absent: down all along */
                for (size_t i = 0; i < n; i++)
                        if (strcmp(got[i].name, req->gens[k]) == 0)
                                down = MIN(down, got[i].down_ns);
                required_down += down;
                if (down <= 0)
                        continue;
                d.missing_ns = down;
                snprintf(d.name, sizeof(d.name), "%s", req->gens[k]);
                if ((r = add_down(m, &d)) < 0)
                        return r;
        }
        *ret_required_down = required_down;
        return 0;
}

/* ---- probes that did not measure ----------------------------------------------------------- */

/* Records the probed CPUs of interval id (its rows from the day's, cpus) that did not
 * measure: below the share of wake-ups that covers, or missing more time than the rule allows
 * in this interval alone (wake-ups missed, and the part of the interval the CPU's span leaves
 * out, except in the run's first interval, where its probes start a moment apart). */
static int interval_probes(struct vctx *v, const struct vrun *run, struct vday_cursor *cpus,
                           int64_t id, int64_t seq, int64_t start, int64_t len, const char *scen,
                           struct vmachine *m) {
        int r = 0;
        bool edge = seq == run->seq_min;
        struct vdown d = {
                .run = run->row, .run_id = run->id, .seq = seq, .start = start, .len = len
        };
        snprintf(d.scenario, sizeof(d.scenario), "%s", scen);
        /* Room for this interval's open downs; the interval before's go on only if it is
         * seq - 1 of the same run. */
        size_t at = 0, nnext = 0;
        size_t *next = realloc(m->open_next, MAX(run->nprobed, (size_t) 1) * sizeof(*next));
        if (!next)
                return -ENOMEM;
        m->open_next = next;
        if (m->open_run != run->row || m->open_seq != seq - 1)
                m->nopen = 0;
        for (size_t k = 0; k < run->nprobed && r >= 0; k++) {
                uint32_t cpu = run->probed[k];
                while (r >= 0 && vday_at(cpus, id) && sql_column_int64(cpus->st, 3) < cpu)
                        r = vday_next(v, cpus);
                bool present = r >= 0 && vday_at(cpus, id) && sql_column_int64(cpus->st, 3) == cpu;
                uint64_t samples = present ? (uint64_t) sql_column_int64(cpus->st, 4) : UINT64_MAX;
                uint64_t span = present ? (uint64_t) sql_column_int64(cpus->st, 5) : (uint64_t) len;
                int32_t ratio = present ? farm_cpu_ratio_pm(samples, span, run->probe_ns) : 0;
                int64_t missing = farm_cpu_missing_ns(samples, span, edge ? span : (uint64_t) len,
                                                      run->probe_ns);
                if (ratio >= (int32_t) v->rule.min_samples_pm &&
                    missing <= (int64_t) v->rule.probe_down_max_ns)
                        continue;
                d.cpu = (int) cpu;
                d.missing_ns = missing;
                d.missing_wakeups = (uint64_t) missing / run->probe_ns;
                r = add_probe_down(m, &d, &at, &nnext);
        }
        /* This interval's downs are the open ones now. */
        m->open_next = m->open;
        m->open = next;
        m->nopen = nnext;
        m->open_run = run->row;
        m->open_seq = seq;
        return r;
}

/* ---- days ---------------------------------------------------------------------------------- */

/* Whether [start, end) lies in one gating state of m. */
static bool uniform_gating(const struct vmachine *m, int64_t start, int64_t end) {
        for (size_t i = 0; i < m->ngate; i++)
                if ((m->gate[i].start > start && m->gate[i].start < end) ||
                    (m->gate[i].end > start && m->gate[i].end < end))
                        return false;
        return true;
}

/* Whether every generator a scenario requires is in gens ("a b c"). */
static bool gens_complete(const struct farm_rule_loads *req, const char *gens) {
        bool ok = true;
        for (size_t k = 0; req && k < req->ngens; k++) {
                size_t n = strlen(req->gens[k]);
                bool found = false;
                for (const char *p = gens; (p = strstr(p, req->gens[k])); p += n)
                        if ((p == gens || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
                                found = true;
                ok &= found;
        }
        return ok;
}

/* The scenarios of a clean day: whether every one ran its load (ret_ok), and with apply, its
 * coverage per scenario added to m. */
static int fast_scenarios(struct vctx *v, const struct vdayscens *ds, const struct vday *d,
                          struct vmachine *m, bool apply, bool *ret_ok) {
        bool ok = true;
        int r = 0;
        for (size_t i = 0; i < ds->n && r >= 0; i++) {
                const struct vdayscen *x = &ds->v[i];
                if (x->day != d->day)
                        continue;
                ok &= x->down == 0 &&
                      gens_complete(farm_rule_loads_of(&v->rule, x->scenario), x->gens);
                if (apply)
                        r = vadd_scenario(m, x->scenario, x->counted);
        }
        *ret_ok = ok;
        return r;
}

static int fast_day(struct vctx *v, struct vrun *run, const struct vdayscens *ds,
                    const struct vday *d, struct vmachine *m) {
        bool ok = false;
        int r;
        if (v->raw_only || d->last > v->at || d->max_received > v->known || !d->gaps_known ||
            d->max_gap > (int64_t) v->rule.max_gap_ns || !run->probe_ok ||
            d->min_ratio < (int64_t) v->rule.min_samples_pm ||
            d->max_missing > (int64_t) v->rule.probe_down_max_ns ||
            d->max_skew > (int64_t) v->rule.clock_tolerance_ns ||
            !uniform_gating(m, d->first, d->last))
                return 0;
        bool gating = vmachine_gates_at(m, d->first);
        if ((r = fast_scenarios(v, ds, d, m, false, &ok)) < 0 || !ok)
                return r;
        if ((r = add_entry(m, run->row, d->first, d->last)) < 0)
                return r;
        run->first_ns = MIN(run->first_ns, d->first);
        if (!gating)
                return 1;
        run->gating_data = true;
        m->covered_ns += d->counted;
        if ((r = fast_scenarios(v, ds, d, m, true, &ok)) < 0 ||
            (r = add_seg(m, &(struct vseg){ run->row, d->day, d->first, d->counted, true })) < 0)
                return r;
        return 1;
}

/* A day's intervals, and their other rows read beside them. */
struct raw_cursors {
        int64_t day;
        struct vday_cursor intervals, loads;
        struct vday_cursor cpus; /* opened at the day's first interval that needs it */
        bool cpus_open;
};

/* The CPU rows of interval (start, seq), current if it has any. */
static int seek_cpus(struct vctx *v, const struct vrun *run, struct raw_cursors *x, int64_t start,
                     int64_t seq) {
        int r = 0;
        if (!x->cpus_open && (r = vday_cpus_open(v, &x->cpus, run->row, x->day)) >= 0)
                x->cpus_open = true;
        return r < 0 ? r : vday_seek(v, &x->cpus, start, seq);
}

/* The loads of interval id, at most SUMMARY_MAX_LOADS of them into got. */
static int take_loads(struct vctx *v, struct vday_cursor *loads, int64_t id, struct vload *got,
                      size_t *ret_n) {
        size_t n = 0;
        int r = 0;
        for (; r >= 0 && vday_at(loads, id); r = vday_next(v, loads))
                if (n < SUMMARY_MAX_LOADS) {
                        snprintf(got[n].name, sizeof(got[n].name), "%s",
                                 sql_column_text(loads->st, 4) ?: "");
                        got[n++].down_ns = sql_column_int64(loads->st, 5);
                }
        *ret_n = n;
        return r;
}

/* One interval read on its own (its other rows from the day's, x). */
static int raw_interval(struct vctx *v, struct vrun *run, sql_stmt *st, struct raw_cursors *x,
                        struct vmachine *m) {
        int64_t id = sql_column_int64(st, 0), start = sql_column_int64(st, 1),
                seq = sql_column_int64(st, 2), len = sql_column_int64(st, 4), end = start + len,
                received, required_down = 0;
        const char *scen = sql_column_text(st, 5) ?: "";
        int64_t counted = sql_column_int64(st, 7), ratio = sql_column_int64(st, 8),
                missing = sql_column_int64(st, 9);
        struct vload got[SUMMARY_MAX_LOADS];
        size_t ngot;
        int r;
        if (end > v->at || !received_ok(v, st, 6, end, &received) ||
            end - received > (int64_t) v->rule.clock_tolerance_ns)
                return 0; /* not yet, not known, or from the future (the clock pass); the next
                           * interval's seek passes its loads */
        if ((r = vday_seek(v, &x->loads, start, seq)) < 0 ||
            (r = take_loads(v, &x->loads, id, got, &ngot)) < 0 ||
            (r = add_entry(m, run->row, start, end)) < 0)
                return r;
        run->first_ns = MIN(run->first_ns, start);
        run->first_seq = MIN(run->first_seq, seq);
        bool measured = run->probe_ok && ratio >= (int64_t) v->rule.min_samples_pm;
        if (run->probe_ok && (!measured || missing > (int64_t) v->rule.probe_down_max_ns) &&
            ((r = seek_cpus(v, run, x, start, seq)) < 0 ||
             (r = interval_probes(v, run, &x->cpus, id, seq, start, len, scen, m)) < 0))
                return r;
        if ((r = interval_loads(v, run, got, ngot, seq, start, len, scen, m, &required_down)) < 0)
                return r;
        if (!vmachine_gates_at(m, start))
                return 0;
        run->gating_data = true;
        if (!measured)
                return 0;
        m->covered_ns += counted;
        if ((r = add_seg(m, &(struct vseg){ run->row, start / FARM_DAY_NS, start, counted,
                                            false })) < 0)
                return r;
        return vadd_scenario(m, scen, MAX(counted - required_down, 0));
}

static int raw_day(struct vctx *v, struct vrun *run, int64_t day, struct vmachine *m,
                   int64_t *ret_seen) {
        struct raw_cursors x = { .day = day };
        int r = vday_intervals_open(v, &x.intervals, run->row, day);
        if (r >= 0)
                r = vday_loads_open(v, &x.loads, run->row, day);
        /* The rows are read one at a time while other statements run: keep them apart. */
        *ret_seen = 0;
        while (r >= 0 && x.intervals.rc == SQL_ROW) {
                (*ret_seen)++;
                if ((r = raw_interval(v, run, x.intervals.st, &x, m)) >= 0)
                        r = vday_next(v, &x.intervals);
        }
        vday_close(&x.intervals);
        vday_close(&x.loads);
        vday_close(&x.cpus);
        return r;
}

/* A day the rule reads interval by interval, some of whose intervals retention dropped (it
 * keeps those days, but not those that a rule made stricter afterwards, or a required
 * generator missing, sends here): what they held cannot be judged, and a verdict must not
 * take that for clean (docs/verdict.md, "dropped"). */
static int dropped_day(struct vctx *v, const struct vrun *run, struct vmachine *m,
                       const struct vday *d, int64_t seen) {
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX];
        int64_t start = d->day * FARM_DAY_NS;
        snprintf(id, sizeof(id), "dropped:%s:%" PRId64 ":%" PRId64, m->id, run->id, start);
        snprintf(msg, sizeof(msg),
                 "%s: run %" PRId64 ", the day of %s: %" PRId64 " of its %" PRId64
                 " intervals were dropped by retention, and the rule reads that day interval by "
                 "interval: what they held cannot be judged",
                 vhost(m), run->id, vts(t, start), d->intervals - seen, d->intervals);
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_DROPPED, m, start, id, msg, &ok);
        p.has_end = true;
        p.end_ns = start + FARM_DAY_NS;
        p.dropped = (struct farm_dropped){ .run = run->id, .intervals = d->intervals - seen };
        return vproblem(v, m, d->first, d->last, &p, ok);
}

static int run_days(struct vctx *v, struct vrun *run, struct vmachine *m) {
        struct vdays days;
        struct vdayscens ds;
        int r = vrun_days(v, run->row, &days, &ds);
        for (size_t i = 0; i < days.n && r >= 0; i++) {
                const struct vday *d = &days.v[i];
                int64_t seen = 0;
                r = fast_day(v, run, &ds, d, m);
                if (r == 0)
                        r = raw_day(v, run, d->day, m, &seen);
                /* Judged whole (a moment inside the day is judged without the intervals that
                 * went: less coverage, never a problem less, docs/farm-server.md). */
                if (r == 0 && seen < d->intervals && d->last <= v->at &&
                    d->max_received <= v->known)
                        r = dropped_day(v, run, m, d, seen);
        }
        return r;
}

/* ---- clock --------------------------------------------------------------------------------- */

/* Data of run stamped later than it arrived (by more than the tolerance), received by the
 * moment judged: one clock problem per run. */
static int run_clock(struct vctx *v, const struct vrun *run, struct vmachine *m) {
        sql_stmt *st;
        int64_t tol = (int64_t) v->rule.clock_tolerance_ns, seen = MIN(v->at, v->known);
        bool may;
        int r = vrun_may_have(v, run->row, VRUN_CLOCK, &may);
        if (r < 0 || !may)
                return r;
        r = vprep(v,
                  "SELECT count(*), max(i.start_ns + i.length_ns - i.received_ns), "
                  "min(i.received_ns), min(i.start_ns) FROM run_days d JOIN intervals i "
                  "ON i.run = d.run AND i.start_ns >= d.day * 86400000000000 AND "
                  "i.start_ns < (d.day + 1) * 86400000000000 "
                  "WHERE d.run = ?1 AND d.max_skew_ns > ?2 AND i.received_ns <= ?3 AND "
                  "i.start_ns + i.length_ns > i.received_ns + ?2",
                  &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, tol);
        sql_bind_int64(st, 3, seen);
        int rc = sql_step(st);
        if (rc != SQL_ROW) {
                sql_reset(st);
                return vfail(v, rc, "cannot look for clock skew");
        }
        int64_t count = sql_column_int64(st, 0), skew = sql_column_int64(st, 1),
                first = sql_column_int64(st, 2);
        sql_reset(st);
        /* Events stamped ahead are the same evidence. */
        if ((r = vprep(v,
                       "SELECT count(*), max(time_ns - received_ns), min(received_ns) FROM "
                       "events WHERE run = ?1 AND received_ns <= ?3 AND "
                       "time_ns > received_ns + ?2",
                       &st)) < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, tol);
        sql_bind_int64(st, 3, seen);
        if ((rc = sql_step(st)) != SQL_ROW) {
                sql_reset(st);
                return vfail(v, rc, "cannot look for clock skew");
        }
        int64_t events = sql_column_int64(st, 0);
        if (events > 0) {
                skew = count ? MAX(skew, sql_column_int64(st, 1)) : sql_column_int64(st, 1);
                first = count ? MIN(first, sql_column_int64(st, 2)) : sql_column_int64(st, 2);
        }
        sql_reset(st);
        count += events;
        if (count == 0)
                return 0;
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX], a[VTEXT_MAX], b[VTEXT_MAX];
        snprintf(id, sizeof(id), "clock:%s:%" PRId64, m->id, run->id);
        snprintf(msg, sizeof(msg),
                 "%s: clock ahead of the server's by up to %s (run %" PRId64 ", %" PRId64
                 " interval(s) or event(s) stamped after they arrived, first seen %s; allowed "
                 "%s): that data covers nothing",
                 vhost(m), vspan_text(a, skew), run->id, count, vts(t, first), vspan_text(b, tol));
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_CLOCK, m, first, id, msg, &ok);
        p.clock = (struct farm_clock_skew){ .run = run->id, .value_ns = skew, .intervals = count };
        return vproblem(v, m, first, first, &p, ok);
}

/* ---- violations, unclean ends, overlaps ---------------------------------------------------- */

static int violation(struct vctx *v, struct vmachine *m, const struct vrun *run, int64_t seq,
                     int64_t start, int64_t len, const char *scen, int cpu, int64_t value,
                     int64_t when, int64_t bound) {
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX], a[VTEXT_MAX], b[VTEXT_MAX];
        snprintf(id, sizeof(id), "violation:%s:%" PRId64 ":%" PRId64 ":%d", m->id, run->id, seq,
                 cpu);
        snprintf(msg, sizeof(msg),
                 "%s CPU %d: latency %s over the bound of %s at %s (scenario %s, run %" PRId64
                 ", interval %" PRId64 ")",
                 vhost(m), cpu, vspan_text(a, value), vspan_text(b, bound), vts(t, when),
                 scen ?: "none", run->id, seq);
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_VIOLATION, m, when, id, msg, &ok);
        p.violation = (struct farm_violation){ .cpu = cpu,
                                               .value_ns = value,
                                               .threshold_ns = bound,
                                               .run = run->id,
                                               .scenario = farm_strdup_or_null(scen, &ok) };
        vevidence(&p.violation.interval, seq, start, len, scen, &ok);
        /* What the machine's flight recorder says ran instead: the culprit line (only for
         * a problem that will be listed). */
        sql_stmt *find = NULL;
        struct farm_trace_brief brief;
        if (v->out->nproblems < FARM_VERDICT_PROBLEMS_LISTED &&
            vprep(v, FARM_TRACE_FIND_SQL, &find) >= 0) {
                p.violation.traced = true;
                if (farm_trace_find_run(find, run->row, cpu, start, start + len, when, &brief) ==
                    0) {
                        p.violation.culprit = farm_strdup_or_null(brief.summary, &ok);
                        p.violation.trace = brief.id;
                }
        }
        return vproblem(v, m, start, start + len, &p, ok);
}

static int run_violations(struct vctx *v, const struct vrun *run, struct vmachine *m) {
        sql_stmt *st, *cs;
        bool may = false;
        int r = vrun_may_have(v, run->row, VRUN_OVER, &may);
        if (r < 0 || !may)
                return r;
        r = vprep(v,
                  "SELECT id, seq, start_ns, length_ns, scenario, received_ns FROM intervals "
                  "WHERE run = ?1 AND max_ns > ?2 AND start_ns + length_ns <= ?3 "
                  "ORDER BY start_ns, seq",
                  &st);
        static const char *const cpus_sql[] = {
                [SQL_SQLITE] = "SELECT cpu, max_ns, max_time_ns FROM interval_cpus "
                               "WHERE interval = ?1 AND max_ns > ?2 ORDER BY cpu",
                [SQL_PG] = "SELECT cpu, max_ns, max_time_ns FROM interval_cpus "
                           "WHERE interval = ?1 AND max_ns > ?2 AND start_ns = ?3 ORDER BY cpu",
        };
        if (r < 0 || (r = vprep(v, cpus_sql[sql_dialect(v->c)], &cs)) < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, vmachine_min_bound(m));
        sql_bind_int64(st, 3, v->at);
        int rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                int64_t seq = sql_column_int64(st, 1), start = sql_column_int64(st, 2),
                        len = sql_column_int64(st, 3), received;
                const char *scen = sql_column_text(st, 4);
                if (!received_ok(v, st, 5, start + len, &received))
                        continue;
                int64_t bound = vmachine_bound_at(m, start);
                sql_reset(cs);
                sql_bind_int64(cs, 1, sql_column_int64(st, 0));
                sql_bind_int64(cs, 2, bound);
                if (sql_dialect(v->c) == SQL_PG)
                        sql_bind_int64(cs, 3, start);
                int crc;
                while (r >= 0 && (crc = sql_step(cs)) == SQL_ROW)
                        r = violation(v, m, run, seq, start, len, scen, sql_column_int(cs, 0),
                                      sql_column_int64(cs, 1), sql_column_int64(cs, 2), bound);
                sql_reset(cs);
                if (r >= 0 && crc != SQL_DONE)
                        r = vfail(v, crc, "cannot read the CPUs of an interval");
        }
        sql_reset(st);
        if (r < 0)
                return r;
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot look for violations");
}

struct vev {
        int64_t id, time;
        char *message;
};

static int run_unclean(struct vctx *v, const struct vrun *run, struct vmachine *m) {
        sql_stmt *st;
        bool may;
        int r = vrun_may_have(v, run->row, VRUN_UNCLEAN, &may);
        if (r < 0 || !may)
                return r;
        r = vprep(v,
                  "SELECT event_id, time_ns, message, received_ns FROM events "
                  "WHERE run = ? AND type = 'unclean_end' AND time_ns <= ? ORDER BY time_ns",
                  &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, v->at);
        struct vev *evs = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                int64_t received;
                if (!received_ok(v, st, 3, sql_column_int64(st, 1), &received))
                        continue;
                struct vev *e = realloc(evs, (n + 1) * sizeof(*e));
                if (!e)
                        break;
                evs = e;
                const char *msg = sql_column_text(st, 2);
                evs[n++] = (struct vev){ sql_column_int64(st, 0), sql_column_int64(st, 1),
                                         strdup(msg ?: "") };
        }
        sql_reset(st);
        r = rc == SQL_DONE ? 0 : rc == SQL_ROW ? -ENOMEM : vfail(v, rc, "cannot read events");
        for (size_t i = 0; i < n; i++) {
                char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX];
                struct farm_evidence iv = {};
                bool ok = true;
                if (r >= 0)
                        r = vinterval_before(v, run->row, evs[i].time + 1, &iv, &ok);
                if (r >= 0) {
                        snprintf(id, sizeof(id), "unclean_end:%s:%" PRId64 ":%" PRId64, m->id,
                                 run->id, evs[i].id);
                        snprintf(msg, sizeof(msg),
                                 "%s: run %" PRId64 " did not end cleanly (crash, reset or power "
                                 "loss); its last data is from %s",
                                 vhost(m), run->id, vts(t, evs[i].time));
                        struct farm_problem p;
                        vproblem_head(&p, FARM_PROBLEM_UNCLEAN_END, m, evs[i].time, id, msg, &ok);
                        p.unclean = (struct farm_unclean_end){ .run = run->id,
                                                               .interval = iv,
                                                               .detail = farm_strdup_or_null(
                                                                       evs[i].message ?: "", &ok) };
                        iv = (struct farm_evidence){};
                        r = vproblem(v, m, evs[i].time, evs[i].time, &p, ok);
                }
                farm_evidence_done(&iv);
                free(evs[i].message);
        }
        free(evs);
        return r;
}

/* Two runs of the machine at the same time: reported once per pair, by the run of the pair
 * that is of this release and comes first. */
static int run_overlaps(struct vctx *v, const struct vrun *run, struct vmachine *m) {
        sql_stmt *st;
        bool may;
        int r = vrun_may_have(v, run->row, VRUN_OVERLAP, &may);
        if (r < 0 || !may)
                return r;
        r = vprep(v,
                  "SELECT ra.run_id, rb.run_id, min(o.start_ns), max(o.end_ns), "
                  "sum(o.end_ns - o.start_ns), o.run_a, o.run_b, ra.release = rb.release "
                  "FROM \"overlaps\" o JOIN runs ra ON ra.id = o.run_a "
                  "JOIN runs rb ON rb.id = o.run_b "
                  "WHERE (o.run_a = ?1 OR o.run_b = ?1) AND o.received_ns <= ?2 "
                  "AND o.start_ns <= ?3 GROUP BY o.run_a, o.run_b, ra.run_id, rb.run_id, "
                  "ra.release, rb.release ORDER BY o.run_a, o.run_b",
                  &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, v->known);
        sql_bind_int64(st, 3, v->at);
        int rc;
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                int64_t a = sql_column_int64(st, 0), b = sql_column_int64(st, 1),
                        start = sql_column_int64(st, 2), end = sql_column_int64(st, 3),
                        total = sql_column_int64(st, 4);
                bool same = sql_column_int(st, 7) != 0;
                if (same && sql_column_int64(st, 6) == run->row)
                        continue; /* the other run of the pair, also of this release, reports it */
                char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX], t2[VTEXT_MAX], s[VTEXT_MAX];
                snprintf(id, sizeof(id), "overlap:%s:%" PRId64 ":%" PRId64, m->id, MIN(a, b),
                         MAX(a, b));
                snprintf(msg, sizeof(msg),
                         "%s: runs %" PRId64 " and %" PRId64 " measured at the same time, %s "
                         "between %s and %s (two probes on one machine, or data that is not "
                         "what it claims)",
                         vhost(m), MIN(a, b), MAX(a, b), vspan_text(s, total), vts(t, start),
                         vts(t2, end));
                struct farm_problem p;
                bool ok = true;
                vproblem_head(&p, FARM_PROBLEM_OVERLAP, m, start, id, msg, &ok);
                p.has_end = true;
                p.end_ns = end;
                p.overlap = (struct farm_overlap){ .value_ns = total,
                                                   .run = run->id,
                                                   .runs = { MIN(a, b), MAX(a, b) } };
                r = vproblem(v, m, start, end, &p, ok);
        }
        sql_reset(st);
        if (r < 0)
                return r;
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the overlaps");
}

/* A run whose probe period does not measure: one problem, all its time uncovered. */
static int run_probe_period(struct vctx *v, const struct vrun *run, struct vmachine *m) {
        char id[FARM_PROBLEM_ID_MAX], msg[512], a[VTEXT_MAX], b[VTEXT_MAX];
        if (run->probe_ok || run->first_ns == INT64_MAX)
                return 0;
        snprintf(id, sizeof(id), "probe_down:%s:%" PRId64 ":%" PRId64 ":all", m->id, run->id,
                 run->first_seq);
        if (run->probe_ns == 0)
                snprintf(msg, sizeof(msg),
                         "%s: run %" PRId64 " does not state its probe period: nothing it sent "
                         "counts as measured",
                         vhost(m), run->id);
        else
                snprintf(msg, sizeof(msg),
                         "%s: run %" PRId64 " probes every %s, longer than the %s that "
                         "measures: nothing it sent counts as measured",
                         vhost(m), run->id, vspan_text(a, (int64_t) run->probe_ns),
                         vspan_text(b, (int64_t) v->rule.max_probe_interval_ns));
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_PROBE_DOWN, m, run->first_ns, id, msg, &ok);
        p.down = (struct farm_down){ .shape = FARM_DOWN_RUN, .run = run->id };
        return vproblem(v, m, run->first_ns, run->first_ns, &p, ok);
}

/* ---- late data ----------------------------------------------------------------------------- */

/* What of the run, stamped by `at`, was received after it (asked about the past). */
static int run_late(struct vctx *v, const struct vrun *run) {
        sql_stmt *st, *ev;
        int r = vprep(v,
                      "SELECT count(*), coalesce(sum(i.counted_ns), 0) FROM run_days d "
                      "JOIN intervals i ON i.run = d.run AND i.start_ns >= d.day * 86400000000000 "
                      "AND i.start_ns < (d.day + 1) * 86400000000000 "
                      "WHERE d.run = ?1 AND d.max_received_ns > ?2 AND d.first_start_ns < ?2 "
                      "AND i.start_ns + i.length_ns <= ?2 AND i.received_ns > ?2",
                      &st);
        if (r < 0 || (r = vprep(v,
                                "SELECT count(*) FROM events WHERE run = ?1 AND time_ns <= ?2 "
                                "AND received_ns > ?2",
                                &ev)) < 0)
                return r;
        sql_bind_int64(st, 1, run->row);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(ev, 1, run->row);
        sql_bind_int64(ev, 2, v->at);
        int rc = sql_step(st), erc = sql_step(ev);
        if (rc == SQL_ROW && erc == SQL_ROW) {
                v->out->late.intervals += (uint64_t) sql_column_int64(st, 0);
                v->out->late.covered_ns += sql_column_int64(st, 1);
                v->out->late.events += (uint64_t) sql_column_int64(ev, 0);
        }
        sql_reset(st);
        sql_reset(ev);
        if (rc != SQL_ROW || erc != SQL_ROW)
                return vfail(v, rc != SQL_ROW ? rc : erc, "cannot count late data");
        return 0;
}

/* ---- the machine --------------------------------------------------------------------------- */

static int judge_run(struct vctx *v, struct vrun *run, const char *build, struct vmachine *m) {
        int r;
        run->first_ns = INT64_MAX;
        run->first_seq = INT64_MAX;
        if ((r = run_days(v, run, m)) < 0 || (r = run_clock(v, run, m)) < 0 ||
            (r = run_probe_period(v, run, m)) < 0 || (r = run_violations(v, run, m)) < 0 ||
            (r = run_unclean(v, run, m)) < 0 || (r = run_overlaps(v, run, m)) < 0)
                return r;
        if (v->known == INT64_MAX && (r = run_late(v, run)) < 0)
                return r;
        if (!run->gating_data)
                return 0;
        for (size_t i = 0; i < m->nbuilds; i++)
                if (strcmp(m->builds[i], build) == 0)
                        return 0;
        if (!farm_grow((void **) &m->builds, m->nbuilds, sizeof(*m->builds)) ||
            !(m->builds[m->nbuilds] = strdup(build)))
                return -ENOMEM;
        m->nbuilds++;
        return 0;
}

static int cmp_down(const void *a, const void *b) {
        const struct vdown *x = a, *y = b;
        if (x->run != y->run)
                return x->run < y->run ? -1 : 1;
        if (x->cpu != y->cpu)
                return x->cpu < y->cpu ? -1 : 1;
        int c = strcmp(x->name, y->name);
        if (c)
                return c;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A stretch of consecutive intervals [first, last] of one probe or generator. */
static int flush_stretch(struct vctx *v, struct vmachine *m, const struct vdown *first,
                         const struct vdown *last, int64_t missing_ns, uint64_t wakeups) {
        bool probe = first->cpu >= 0;
        int64_t allowed = (int64_t) (probe ? v->rule.probe_down_max_ns : v->rule.load_down_max_ns);
        int64_t end = last->end;
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[VTEXT_MAX], t2[VTEXT_MAX], a[VTEXT_MAX],
                b[VTEXT_MAX];
        if (missing_ns <= allowed)
                return 0;
        if (probe) {
                snprintf(id, sizeof(id), "probe_down:%s:%" PRId64 ":%" PRId64 ":%d", m->id,
                         first->run_id, first->seq, first->cpu);
                snprintf(msg, sizeof(msg),
                         "%s CPU %d: the probe missed %" PRIu64 " wake-ups (%s unmeasured) "
                         "between %s and %s (run %" PRId64 ", intervals %" PRId64 "-%" PRId64
                         "; allowed %s)",
                         vhost(m), first->cpu, wakeups, vspan_text(a, missing_ns),
                         vts(t, first->start), vts(t2, end), first->run_id, first->seq,
                         last->last_seq, vspan_text(b, allowed));
        } else {
                snprintf(id, sizeof(id), "load_down:%s:%" PRId64 ":%" PRId64 ":%s", m->id,
                         first->run_id, first->seq, first->name);
                snprintf(msg, sizeof(msg),
                         "%s: generator %s did not run its load for %s between %s and %s "
                         "(scenario %s; allowed %s)",
                         vhost(m), first->name, vspan_text(a, missing_ns), vts(t, first->start),
                         vts(t2, end), *first->scenario ? first->scenario : "none",
                         vspan_text(b, allowed));
        }
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, probe ? FARM_PROBLEM_PROBE_DOWN : FARM_PROBLEM_LOAD_DOWN, m, first->start,
                      id, msg, &ok);
        p.has_end = true;
        p.end_ns = end;
        p.down = (struct farm_down){
                .shape = FARM_DOWN_STRETCH,
                .run = first->run_id,
                .value_ns = missing_ns,
                .scenario = farm_strdup_or_null(*first->scenario ? first->scenario : NULL, &ok),
                .cpu = first->cpu,
                .generator = probe ? NULL : farm_strdup_or_null(first->name, &ok)
        };
        vevidence(&p.down.interval, first->seq, first->start, first->len, first->scenario, &ok);
        return vproblem(v, m, first->start, end, &p, ok);
}

/* The generators' downs (cpu < 0) of m, by name and then in m's order (run, seq). */
static int cmp_down_name(const void *a, const void *b) {
        const struct vdown *const *x = a, *const *y = b;
        int c = strcmp((*x)->name, (*y)->name);
        return c ? c : (*x < *y ? -1 : *x > *y);
}

static int cmp_down_first(const void *a, const void *b) {
        const struct vdown *const *x = a, *const *y = b;
        return *x < *y ? -1 : *x > *y;
}

/* One generator's downs in total over all the release's data on m: a problem when longer than
 * allowed, at the end of the down that went over. */
static int flush_total(struct vctx *v, struct vmachine *m, struct vdown *const *downs, size_t n) {
        int64_t allowed = (int64_t) v->rule.load_down_total_ns, total = 0, when = 0;
        const struct vdown *d = downs[0];
        for (size_t k = 0; k < n; k++)
                if (vmachine_gates_at(m, downs[k]->start)) {
                        total = (int64_t) MIN((uint64_t) total + (uint64_t) downs[k]->missing_ns,
                                              (uint64_t) INT64_MAX);
                        if (total > allowed && !when)
                                when = downs[k]->start + downs[k]->len;
                }
        if (total <= allowed)
                return 0;
        char id[FARM_PROBLEM_ID_MAX], msg[512], a[VTEXT_MAX], b[VTEXT_MAX];
        snprintf(id, sizeof(id), "load_down:%s:total:%s", m->id, d->name);
        snprintf(msg, sizeof(msg),
                 "%s: generator %s did not run its load for %s in total (allowed %s)", vhost(m),
                 d->name, vspan_text(a, total), vspan_text(b, allowed));
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_LOAD_DOWN, m, when, id, msg, &ok);
        p.down = (struct farm_down){ .shape = FARM_DOWN_TOTAL,
                                     .value_ns = total,
                                     .generator = farm_strdup_or_null(d->name, &ok) };
        return vproblem(v, m, when - 1, when, &p, ok);
}

/* Each generator's total, in the order of its first down: grouped by a sort, as a machine's
 * downs may be hundreds of thousands (a CPU absent from every interval of a day). */
static int flush_totals(struct vctx *v, struct vmachine *m) {
        size_t n = 0, ngroups = 0;
        for (size_t i = 0; i < m->ndowns; i++)
                n += m->downs[i].cpu < 0;
        if (n == 0)
                return 0;
        _cleanup_free_ struct vdown **by = malloc(n * sizeof(*by));
        _cleanup_free_ struct vdown **first = malloc(n * sizeof(*first));
        if (!by || !first)
                return -ENOMEM;
        n = 0;
        for (size_t i = 0; i < m->ndowns; i++)
                if (m->downs[i].cpu < 0)
                        by[n++] = &m->downs[i];
        qsort(by, n, sizeof(*by), cmp_down_name);
        for (size_t i = 0; i < n; i++)
                if (i == 0 || strcmp(by[i]->name, by[i - 1]->name) != 0)
                        first[ngroups++] = by[i];
        qsort(first, ngroups, sizeof(*first), cmp_down_first);
        for (size_t g = 0; g < ngroups; g++) {
                /* The group of first[g] in by: found by its name. */
                struct vdown *const *lo = bsearch(&first[g], by, n, sizeof(*by), cmp_down_name);
                size_t i = (size_t) (lo - by), k = i;
                while (k < n && strcmp(by[k]->name, first[g]->name) == 0)
                        k++;
                int r = flush_total(v, m, by + i, k - i);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int flush_downs(struct vctx *v, struct vmachine *m) {
        int r;
        if (m->ndowns > 0)
                qsort(m->downs, m->ndowns, sizeof(*m->downs), cmp_down);
        for (size_t i = 0; i < m->ndowns;) {
                size_t k = i;
                int64_t missing = m->downs[i].missing_ns;
                uint64_t wakeups = m->downs[i].missing_wakeups;
                while (k + 1 < m->ndowns && m->downs[k + 1].run == m->downs[i].run &&
                       m->downs[k + 1].cpu == m->downs[i].cpu &&
                       strcmp(m->downs[k + 1].name, m->downs[i].name) == 0 &&
                       m->downs[k + 1].seq == m->downs[k].last_seq + 1) {
                        k++;
                        missing += m->downs[k].missing_ns;
                        wakeups += m->downs[k].missing_wakeups;
                }
                if ((r = flush_stretch(v, m, &m->downs[i], &m->downs[k], missing, wakeups)) < 0)
                        return r;
                i = k + 1;
        }
        return flush_totals(v, m);
}

/* A run of the release as its judgement reads it. */
static int run_of(const struct vctx *v, const struct vrelrun *x, struct vrun *ret) {
        *ret = (struct vrun){ .row = x->row,
                              .id = x->id,
                              .probe_ns = (uint64_t) x->probe_ns,
                              .seq_min = x->seq_min };
        ret->probe_ok = ret->probe_ns > 0 && ret->probe_ns <= v->rule.max_probe_interval_ns;
        return farm_cpu_list_parse(x->probed, &ret->probed, &ret->nprobed) == -ENOMEM ? -ENOMEM : 0;
}

int vjudge_data(struct vctx *v, struct vmachine *m) {
        const struct vrelrun *runs;
        size_t n;
        bool changed = false;
        int r = vrelease_runs(v, m->id, &runs, &n);
        if (r < 0)
                return r;
        m->runs = (unsigned) n;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                struct vrun run;
                if (*runs[i].host) {
                        free(m->hostname);
                        if (!(m->hostname = strdup(runs[i].host)))
                                return -ENOMEM;
                }
                if ((r = run_of(v, &runs[i], &run)) >= 0)
                        r = judge_run(v, &run, runs[i].build, m);
                free(run.probed);
                if (r >= 0 && !changed)
                        r = vrun_may_have(v, runs[i].row, VRUN_CHANGED, &changed);
        }
        if (r >= 0 && changed)
                r = vjudge_inventory(v, m, runs, n);
        return r < 0 ? r : flush_downs(v, m);
}
