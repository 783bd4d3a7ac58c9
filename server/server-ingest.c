/* SPDX-License-Identifier: MIT */
/* Storing one decoded summary: its run, intervals (with what the verdict needs of each, which
 * no configured number changes: when it arrived, what it measured, the time no earlier
 * interval of the machine covered), the day rollups, the loads and the events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-db-internal.h"
#include "server-measure.h"
#include "server-query.h"

/* For messages that go back to the machine: no file path in them. */
_printf_(2, 3) static int conflict(char *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, FARM_ERROR_MAX, fmt, ap);
        va_end(ap);
        return -EEXIST;
}

struct run_ctx {
        int64_t row;
        uint64_t probe_ns;
        uint32_t *probed;
        size_t nprobed;
        int64_t first_start, last_end, max_len; /* of its stored intervals; first > last: none */
};

struct span {
        int64_t start, end;
};

/* Another run of the machine whose interval overlaps the one being stored. */
struct overlap {
        int64_t run, start, end;
};

struct ingest {
        farm_db *db;
        char *err;
        const struct summary *s;
        int64_t now;
        struct run_ctx run;
        sqlite3_stmt *interval, *cpu, *load, *metric, *day, *day_scenario, *gens, *down, *cand_runs,
                *cand_ivs, *overlap;
        struct span *spans;
        size_t nspans, cap_spans;
        struct overlap *overlaps;
        size_t noverlaps, cap_overlaps;
        /* What the machine's counters take from the stored intervals. */
        uint64_t violations;
        int64_t latest_start_ns, latest_max_ns; /* latest_start_ns < 0: none stored */
};

static int wfail(struct ingest *g, int rc, const char *what) {
        return farm_fail_on(g->db, farm_db_writer(g->db), rc, what, g->err);
}

/* Steps a statement that returns no row, and leaves it reset with no value bound: the
 * statements are used once per row, and a value bound only when present (NULL otherwise)
 * must not carry over from the row before. */
static int step(struct ingest *g, sqlite3_stmt *st, const char *what) {
        int r = farm_step_done(g->db, st, what, g->err);
        sqlite3_clear_bindings(st);
        return r;
}

static void ingest_done(struct ingest *g) {
        sqlite3_stmt **st[] = { &g->interval,  &g->cpu,          &g->load,   &g->metric,
                                &g->day,       &g->day_scenario, &g->gens,   &g->down,
                                &g->cand_runs, &g->cand_ivs,     &g->overlap };
        for (size_t i = 0; i < ELEMENTSOF(st); i++)
                resetp(st[i]);
        free(g->run.probed);
        free(g->spans);
        free(g->overlaps);
}

/* ---- the run ------------------------------------------------------------------------------- */

/* The probed CPUs of a new run: as the summary lists them, else every CPU it reports online
 * (what rtsoakd probed before it listed them). */
static int probed_of(const struct summary *s, uint32_t **ret, size_t *ret_n) {
        size_t n = s->run.nprobed_cpus ?: s->machine.cpus;
        uint32_t *v = calloc(n ?: 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v[i] = s->run.nprobed_cpus ? s->run.probed_cpus[i] : (uint32_t) i;
        *ret = v;
        *ret_n = n;
        return 0;
}

static const char *release_of(const struct summary *s) {
        return s->run.release ?: s->run.kernel_release;
}

/* A stored run: its identity never changes (a run is one daemon lifetime); a different one
 * under the same number means the machine's local database was replaced. */
static int check_run(struct ingest *g, sqlite3_stmt *sel) {
        const struct summary_run *run = &g->s->run;
        const char *boot = (const char *) sqlite3_column_text(sel, 1);
        const char *kernel = (const char *) sqlite3_column_text(sel, 2);
        const char *release = (const char *) sqlite3_column_text(sel, 4);
        const char *probed = (const char *) sqlite3_column_text(sel, 5);
        if (strcmp(boot ?: "", run->boot_id) != 0)
                return conflict(g->err, "run.boot_id: run %lld is stored with boot id %s",
                                (long long) run->id, boot);
        if (strcmp(kernel ?: "", run->kernel_release) != 0)
                return conflict(g->err, "run.kernel_release: run %lld is stored with kernel %s",
                                (long long) run->id, kernel);
        if (sqlite3_column_int64(sel, 3) != run->start_ns)
                return conflict(g->err, "run.start_ns: run %lld is stored with start %lld",
                                (long long) run->id, (long long) sqlite3_column_int64(sel, 3));
        if (strcmp(release ?: "", release_of(g->s)) != 0)
                return conflict(g->err, "run.release: run %lld is stored as release %s",
                                (long long) run->id, release);
        int r = farm_cpu_list_parse(probed ?: "", &g->run.probed, &g->run.nprobed);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || g->run.nprobed == 0) {
                free(g->run.probed);
                if ((r = probed_of(g->s, &g->run.probed, &g->run.nprobed)) < 0)
                        return r;
        } else if (run->nprobed_cpus &&
                   (run->nprobed_cpus != g->run.nprobed ||
                    memcmp(run->probed_cpus, g->run.probed, g->run.nprobed * sizeof(uint32_t)))) {
                return conflict(g->err, "run.cpus: run %lld is stored probing CPUs %s",
                                (long long) run->id, probed);
        }
        g->run.row = sqlite3_column_int64(sel, 0);
        g->run.probe_ns = (uint64_t) sqlite3_column_int64(sel, 6);
        g->run.max_len = sqlite3_column_int64(sel, 7);
        if (sqlite3_column_type(sel, 8) != SQLITE_NULL) {
                g->run.first_start = sqlite3_column_int64(sel, 8);
                g->run.last_end = sqlite3_column_int64(sel, 9);
        }
        return 0;
}

static int insert_run(struct ingest *g) {
        const struct summary *s = g->s;
        const struct summary_run *run = &s->run;
        _cleanup_reset_ sqlite3_stmt *ins = NULL;
        int r = farm_prepare_w(
                g->db,
                "INSERT INTO runs (machine_id, run_id, boot_id, kernel_release, kernel_version, "
                "kernel_cmdline, preempt_model, daemon_version, config_digest, start_ns, "
                "threshold_ns, probe_interval_ns, interval_ns, first_report_ns, release, "
                "hostname, probed_cpus) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                &ins, g->err);
        if (r < 0)
                return r;
        if ((r = probed_of(s, &g->run.probed, &g->run.nprobed)) < 0)
                return r;
        _cleanup_free_ char *probed = farm_cpu_list_format(g->run.probed, g->run.nprobed);
        if (!probed)
                return -ENOMEM;
        const char *texts[] = { s->machine.id,       NULL,
                                run->boot_id,        run->kernel_release,
                                run->kernel_version, run->kernel_cmdline,
                                run->preempt_model,  run->daemon_version,
                                run->config_digest };
        for (int i = 0; i < (int) ELEMENTSOF(texts); i++)
                if (texts[i])
                        sqlite3_bind_text(ins, i + 1, texts[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 2, run->id);
        sqlite3_bind_int64(ins, 10, run->start_ns);
        sqlite3_bind_int64(ins, 11, (int64_t) run->threshold_ns);
        sqlite3_bind_int64(ins, 12, (int64_t) run->probe_interval_ns);
        sqlite3_bind_int64(ins, 13, (int64_t) run->interval_ns);
        sqlite3_bind_int64(ins, 14, g->now);
        sqlite3_bind_text(ins, 15, release_of(s), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 16, s->machine.hostname, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 17, probed, -1, SQLITE_STATIC);
        if ((r = step(g, ins, "cannot store the run")) < 0)
                return r;
        g->run.row = sqlite3_last_insert_rowid(farm_db_writer(g->db));
        g->run.probe_ns = run->probe_interval_ns;
        return 0;
}

/* Finds or creates the row of the summary's run. */
static int store_run(struct ingest *g) {
        _cleanup_reset_ sqlite3_stmt *sel = NULL;
        int r = farm_prepare_w(g->db,
                               "SELECT id, boot_id, kernel_release, start_ns, release, "
                               "probed_cpus, probe_interval_ns, max_length_ns, first_start_ns, "
                               "last_end_ns FROM runs WHERE machine_id = ? AND run_id = ?",
                               &sel, g->err);
        if (r < 0)
                return r;
        g->run.first_start = INT64_MAX;
        g->run.last_end = INT64_MIN;
        sqlite3_bind_text(sel, 1, g->s->machine.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(sel, 2, g->s->run.id);
        int rc = sqlite3_step(sel);
        if (rc == SQLITE_ROW)
                return check_run(g, sel);
        if (rc != SQLITE_DONE)
                return wfail(g, rc, "cannot look up the run");
        return insert_run(g);
}

static int update_run(struct ingest *g) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        if (g->run.first_start > g->run.last_end)
                return 0;
        int r = farm_prepare_w(g->db,
                               "UPDATE runs SET first_start_ns = ?2, last_end_ns = ?3, "
                               "max_length_ns = ?4 WHERE id = ?1",
                               &st, g->err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, g->run.row);
        sqlite3_bind_int64(st, 2, g->run.first_start);
        sqlite3_bind_int64(st, 3, g->run.last_end);
        sqlite3_bind_int64(st, 4, g->run.max_len);
        return step(g, st, "cannot update the run");
}

/* ---- counted once -------------------------------------------------------------------------- */

static int add_span(struct ingest *g, int64_t start, int64_t end) {
        if (g->nspans == g->cap_spans) {
                size_t cap = g->cap_spans ? g->cap_spans * 2 : 16;
                struct span *s = realloc(g->spans, cap * sizeof(*s));
                if (!s)
                        return -ENOMEM;
                g->spans = s;
                g->cap_spans = cap;
        }
        g->spans[g->nspans++] = (struct span){ start, end };
        return 0;
}

static int add_overlap(struct ingest *g, int64_t run, int64_t start, int64_t end) {
        if (g->noverlaps == g->cap_overlaps) {
                size_t cap = g->cap_overlaps ? g->cap_overlaps * 2 : 4;
                struct overlap *o = realloc(g->overlaps, cap * sizeof(*o));
                if (!o)
                        return -ENOMEM;
                g->overlaps = o;
                g->cap_overlaps = cap;
        }
        g->overlaps[g->noverlaps++] = (struct overlap){ run, start, end };
        return 0;
}

/* The intervals of run (whose longest interval is max_len) that overlap [start, end). */
static int scan_run(struct ingest *g, int64_t run, int64_t max_len, int64_t seq, int64_t start,
                    int64_t end) {
        int rc;
        sqlite3_reset(g->cand_ivs);
        sqlite3_bind_int64(g->cand_ivs, 1, run);
        sqlite3_bind_int64(g->cand_ivs, 2, start - max_len);
        sqlite3_bind_int64(g->cand_ivs, 3, end);
        while ((rc = sqlite3_step(g->cand_ivs)) == SQLITE_ROW) {
                int64_t s = sqlite3_column_int64(g->cand_ivs, 1),
                        e = s + sqlite3_column_int64(g->cand_ivs, 2);
                int r = 0;
                if (e <= start ||
                    (run == g->run.row && sqlite3_column_int64(g->cand_ivs, 0) == seq))
                        continue;
                if (run != g->run.row)
                        r = add_overlap(g, run, MAX(s, start), MIN(e, end));
                if (r >= 0 && sqlite3_column_type(g->cand_ivs, 3) != SQLITE_NULL)
                        r = add_span(g, sqlite3_column_int64(g->cand_ivs, 3),
                                     sqlite3_column_int64(g->cand_ivs, 4));
                if (r < 0)
                        return r;
        }
        sqlite3_reset(g->cand_ivs);
        return rc == SQLITE_DONE ? 0 : wfail(g, rc, "cannot look for overlapping intervals");
}

static int cmp_span(const void *a, const void *b) {
        const struct span *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

/* The part of [start, end) that the collected spans leave. */
static int64_t uncovered(struct ingest *g, int64_t start, int64_t end) {
        int64_t left = 0, at = start;
        if (g->nspans > 0)
                qsort(g->spans, g->nspans, sizeof(*g->spans), cmp_span);
        for (size_t i = 0; i < g->nspans && at < end; i++) {
                const struct span *s = &g->spans[i];
                if (s->end <= at)
                        continue;
                if (s->start > at)
                        left += MIN(s->start, end) - at;
                at = MAX(at, s->end);
        }
        if (at < end)
                left += end - at;
        return left;
}

/* Time is counted once (invariant 2): the measured part of iv that no interval of the
 * machine stored before covers, and the other runs of the machine that overlap it. */
static int counted_of(struct ingest *g, const struct summary_interval *iv,
                      const struct farm_measure *m, int64_t *ret) {
        int64_t start = iv->start_ns, end = start + (int64_t) iv->length_ns;
        int rc, r;
        g->nspans = g->noverlaps = 0;
        r = scan_run(g, g->run.row, g->run.max_len, (int64_t) iv->seq, start, end);
        sqlite3_reset(g->cand_runs);
        sqlite3_bind_text(g->cand_runs, 1, g->s->machine.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(g->cand_runs, 2, start);
        sqlite3_bind_int64(g->cand_runs, 3, end);
        sqlite3_bind_int64(g->cand_runs, 4, g->run.row);
        while (r >= 0 && (rc = sqlite3_step(g->cand_runs)) == SQLITE_ROW)
                r = scan_run(g, sqlite3_column_int64(g->cand_runs, 0),
                             sqlite3_column_int64(g->cand_runs, 1), -1, start, end);
        if (r >= 0 && rc != SQLITE_DONE)
                r = wfail(g, rc, "cannot look for overlapping runs");
        sqlite3_reset(g->cand_runs);
        if (r < 0)
                return r;
        *ret = m->measured ? uncovered(g, m->start_ns, m->end_ns) : 0;
        return 0;
}

static int store_overlaps(struct ingest *g) {
        for (size_t i = 0; i < g->noverlaps; i++) {
                const struct overlap *o = &g->overlaps[i];
                sqlite3_bind_text(g->overlap, 1, g->s->machine.id, -1, SQLITE_STATIC);
                sqlite3_bind_int64(g->overlap, 2, MIN(o->run, g->run.row));
                sqlite3_bind_int64(g->overlap, 3, MAX(o->run, g->run.row));
                sqlite3_bind_int64(g->overlap, 4, o->start);
                sqlite3_bind_int64(g->overlap, 5, o->end);
                sqlite3_bind_int64(g->overlap, 6, g->now);
                int r = step(g, g->overlap, "cannot store an overlap");
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- loads and rollups --------------------------------------------------------------------- */

/* How long a load of iv did not run its load: the time it was not up, or all of the
 * interval when it reported no throughput at all. */
static uint64_t load_down_ns(const struct summary_interval *iv, const struct summary_load *ld) {
        bool throughput = false;
        for (size_t m = 0; m < ld->nmetrics; m++)
                throughput |= ld->metrics[m].value > 0;
        if (!throughput)
                return iv->length_ns;
        return ld->up_ns < iv->length_ns ? iv->length_ns - ld->up_ns : 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* The generators of iv that are also in prev ("a b c", or NULL for all of iv's), sorted and
 * space-separated into buf. */
static void gens_intersect(const struct summary_interval *iv, const char *prev, char *buf,
                           size_t size) {
        const char *names[SUMMARY_MAX_LOADS];
        size_t n = 0, len = 0;
        for (size_t i = 0; i < iv->nloads && n < SUMMARY_MAX_LOADS; i++)
                names[n++] = iv->loads[i].generator;
        qsort(names, n, sizeof(*names), cmp_str);
        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
                        continue;
                if (prev) {
                        size_t k = strlen(names[i]);
                        bool found = false;
                        for (const char *p = prev; (p = strstr(p, names[i])); p += k)
                                if ((p == prev || p[-1] == ' ') && (p[k] == ' ' || !p[k]))
                                        found = true;
                        if (!found)
                                continue;
                }
                len += (size_t) snprintf(buf + len, size - MIN(len, size), "%s%s", len ? " " : "",
                                         names[i]);
        }
}

static int store_loads(struct ingest *g, int64_t id, const struct summary_interval *iv,
                       uint64_t *ret_down) {
        int r;
        *ret_down = 0;
        for (size_t l = 0; l < iv->nloads; l++) {
                const struct summary_load *ld = &iv->loads[l];
                uint64_t down = load_down_ns(iv, ld);
                sqlite3_bind_int64(g->load, 1, id);
                sqlite3_bind_int64(g->load, 2, (int64_t) l);
                sqlite3_bind_text(g->load, 3, ld->generator, -1, SQLITE_STATIC);
                sqlite3_bind_int64(g->load, 4, (int64_t) ld->up_ns);
                sqlite3_bind_int64(g->load, 5, ld->starts);
                sqlite3_bind_int64(g->load, 6, ld->exits);
                if ((r = step(g, g->load, "cannot store a load")) < 0)
                        return r;
                if (down > 0) {
                        sqlite3_stmt *d = g->down;
                        sqlite3_bind_int64(d, 1, g->run.row);
                        sqlite3_bind_int64(d, 2, (int64_t) iv->seq);
                        sqlite3_bind_int64(d, 3, (int64_t) l);
                        sqlite3_bind_text(d, 4, ld->generator, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(d, 5, iv->start_ns);
                        sqlite3_bind_int64(d, 6, (int64_t) iv->length_ns);
                        if (iv->scenario)
                                sqlite3_bind_text(d, 7, iv->scenario, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(d, 8, (int64_t) down);
                        if ((r = step(g, d, "cannot store a load's down time")) < 0)
                                return r;
                        *ret_down += down;
                }
                for (size_t m = 0; m < ld->nmetrics; m++) {
                        sqlite3_bind_int64(g->metric, 1, id);
                        sqlite3_bind_int64(g->metric, 2, (int64_t) l);
                        sqlite3_bind_int64(g->metric, 3, (int64_t) m);
                        sqlite3_bind_text(g->metric, 4, ld->metrics[m].name, -1, SQLITE_STATIC);
                        sqlite3_bind_text(g->metric, 5, ld->metrics[m].unit, -1, SQLITE_STATIC);
                        sqlite3_bind_double(g->metric, 6, ld->metrics[m].value);
                        if ((r = step(g, g->metric, "cannot store a load metric")) < 0)
                                return r;
                }
        }
        return 0;
}

/* The UTC day of a time, as the day rollups and the SQL that fills them count it. */
static int64_t day_of(int64_t ns) {
        return ns / FARM_DAY_NS;
}

struct facts {
        uint64_t max_ns;
        int64_t counted_ns, down_ns;
        struct farm_measure m;
};

/* Adds a stored interval to its day's rollups. */
static int rollup_interval(struct ingest *g, const struct summary_interval *iv,
                           const struct facts *f) {
        int64_t day = day_of(iv->start_ns), end = iv->start_ns + (int64_t) iv->length_ns;
        const char *scen = iv->scenario ?: "";
        char gens[SUMMARY_MAX_LOADS * 34];
        int r, rc;

        sqlite3_stmt *d = g->day;
        sqlite3_bind_int64(d, 1, g->run.row);
        sqlite3_bind_int64(d, 2, day);
        sqlite3_bind_int64(d, 3, (int64_t) iv->length_ns);
        sqlite3_bind_int64(d, 4, iv->start_ns);
        sqlite3_bind_int64(d, 5, end);
        sqlite3_bind_int64(d, 6, (int64_t) f->max_ns);
        sqlite3_bind_int64(d, 7, f->counted_ns);
        sqlite3_bind_int64(d, 8, f->m.min_ratio_pm);
        sqlite3_bind_int64(d, 9, end - g->now);
        sqlite3_bind_int64(d, 10, g->now);
        sqlite3_bind_int64(d, 11, f->m.max_missing_ns);
        if ((r = step(g, d, "cannot update the day's coverage")) < 0)
                return r;

        sqlite3_reset(g->gens);
        sqlite3_bind_int64(g->gens, 1, g->run.row);
        sqlite3_bind_int64(g->gens, 2, day);
        sqlite3_bind_text(g->gens, 3, scen, -1, SQLITE_STATIC);
        rc = sqlite3_step(g->gens);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return wfail(g, rc, "cannot read the day's generators");
        gens_intersect(iv, rc == SQLITE_ROW ? (const char *) sqlite3_column_text(g->gens, 0) : NULL,
                       gens, sizeof(gens));
        sqlite3_reset(g->gens);

        d = g->day_scenario;
        sqlite3_bind_int64(d, 1, g->run.row);
        sqlite3_bind_int64(d, 2, day);
        sqlite3_bind_text(d, 3, scen, -1, SQLITE_STATIC);
        sqlite3_bind_int64(d, 4, (int64_t) iv->length_ns);
        sqlite3_bind_int64(d, 5, f->counted_ns);
        sqlite3_bind_text(d, 6, gens, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(d, 7, f->down_ns);
        return step(g, d, "cannot update the day's scenarios");
}

/* ---- intervals ----------------------------------------------------------------------------- */

static int insert_interval(struct ingest *g, const struct summary_interval *iv,
                           const struct facts *f) {
        uint64_t samples = 0, violations = 0;
        int64_t max_cpu = 0, max_time = iv->start_ns;
        for (size_t c = 0; c < iv->ncpus; c++) {
                const struct summary_cpu *p = &iv->cpus[c];
                samples += p->samples;
                violations += p->violations;
                if (c == 0 || p->max_ns > iv->cpus[max_cpu].max_ns) {
                        max_cpu = (int64_t) c;
                        max_time = p->max_time_ns;
                }
        }
        sqlite3_stmt *st = g->interval;
        sqlite3_bind_int64(st, 1, g->run.row);
        sqlite3_bind_int64(st, 2, (int64_t) iv->seq);
        sqlite3_bind_int64(st, 3, iv->start_ns);
        sqlite3_bind_int64(st, 4, (int64_t) iv->length_ns);
        if (iv->scenario)
                sqlite3_bind_text(st, 5, iv->scenario, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, (int64_t) f->max_ns);
        sqlite3_bind_int64(st, 7, (int64_t) MIN(samples, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(st, 8, (int64_t) MIN(violations, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(st, 9, iv->cpus[max_cpu].cpu);
        sqlite3_bind_int64(st, 10, max_time);
        sqlite3_bind_int64(st, 11, g->now);
        if (f->m.measured) {
                sqlite3_bind_int64(st, 12, f->m.start_ns);
                sqlite3_bind_int64(st, 13, f->m.end_ns);
        }
        sqlite3_bind_int64(st, 14, f->m.min_ratio_pm);
        if (f->m.min_ratio_cpu >= 0)
                sqlite3_bind_int64(st, 15, f->m.min_ratio_cpu);
        sqlite3_bind_int64(st, 16, f->counted_ns);
        sqlite3_bind_int64(st, 17, f->m.max_missing_ns);
        return step(g, st, "cannot store an interval");
}

static int store_cpus(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        for (size_t c = 0; c < iv->ncpus; c++) {
                const struct summary_cpu *p = &iv->cpus[c];
                sqlite3_stmt *st = g->cpu;
                sqlite3_bind_int64(st, 1, id);
                sqlite3_bind_int64(st, 2, p->cpu);
                sqlite3_bind_int64(st, 3, (int64_t) p->samples);
                sqlite3_bind_int64(st, 4, (int64_t) p->min_ns);
                sqlite3_bind_int64(st, 5, (int64_t) p->avg_ns);
                sqlite3_bind_int64(st, 6, (int64_t) p->max_ns);
                sqlite3_bind_int64(st, 7, p->max_time_ns);
                sqlite3_bind_int64(st, 8, (int64_t) p->violations);
                sqlite3_bind_int64(st, 9, (int64_t) p->missed);
                sqlite3_bind_int64(st, 10, p->hist_limit_us);
                /* An empty histogram is a zero-length blob, not NULL. */
                sqlite3_bind_blob(st, 11, p->hist ? (const void *) p->hist : "", (int) p->hist_len,
                                  SQLITE_STATIC);
                if (p->span_length_ns) {
                        sqlite3_bind_int64(st, 12, p->span_start_ns);
                        sqlite3_bind_int64(st, 13, (int64_t) p->span_length_ns);
                }
                int r = step(g, st, "cannot store a CPU of an interval");
                if (r < 0)
                        return r;
                g->violations += p->violations;
        }
        return 0;
}

/* Stores one interval with its CPUs and loads; 1 if stored, 0 if it was already there. */
static int store_interval(struct ingest *g, const struct summary_interval *iv) {
        struct facts f = {};
        int r;

        for (size_t c = 0; c < iv->ncpus; c++)
                f.max_ns = MAX(f.max_ns, iv->cpus[c].max_ns);
        farm_measure_interval(iv, g->run.probed, g->run.nprobed, g->run.probe_ns, &f.m);
        if ((r = counted_of(g, iv, &f.m, &f.counted_ns)) < 0 ||
            (r = insert_interval(g, iv, &f)) < 0)
                return r;
        if (sqlite3_changes(farm_db_writer(g->db)) == 0)
                return 0; /* (run, seq) is stored: the same interval sent again */
        int64_t id = sqlite3_last_insert_rowid(farm_db_writer(g->db)), end;
        uint64_t down = 0;
        if ((r = store_cpus(g, id, iv)) < 0 ||
            (r = farm_query_interval_stored(g->db, g->run.row, id, iv, g->err)) < 0 ||
            (r = store_loads(g, id, iv, &down)) < 0)
                return r;
        f.down_ns = (int64_t) down;
        if ((r = rollup_interval(g, iv, &f)) < 0 || (r = store_overlaps(g)) < 0)
                return r;
        if (iv->start_ns >= g->latest_start_ns) {
                g->latest_start_ns = iv->start_ns;
                g->latest_max_ns = (int64_t) f.max_ns;
        }
        end = iv->start_ns + (int64_t) iv->length_ns;
        g->run.first_start = MIN(g->run.first_start, iv->start_ns);
        g->run.last_end = MAX(g->run.last_end, end);
        g->run.max_len = MAX(g->run.max_len, (int64_t) iv->length_ns);
        return 1;
}

static int store_events(struct ingest *g, struct farm_stored *ret) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(g->db,
                               "INSERT INTO events (run, event_id, time_ns, type, cpu, value, "
                               "message, details, received_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                               "ON CONFLICT (run, event_id) DO NOTHING",
                               &st, g->err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < g->s->nevents; i++) {
                const struct summary_event *e = &g->s->events[i];
                sqlite3_bind_int64(st, 1, g->run.row);
                sqlite3_bind_int64(st, 2, (int64_t) e->id);
                sqlite3_bind_int64(st, 3, e->time_ns);
                sqlite3_bind_text(st, 4, e->type, -1, SQLITE_STATIC);
                if (e->cpu >= 0)
                        sqlite3_bind_int(st, 5, e->cpu);
                else
                        sqlite3_bind_null(st, 5);
                if (e->value >= 0)
                        sqlite3_bind_int64(st, 6, e->value);
                else
                        sqlite3_bind_null(st, 6);
                sqlite3_bind_text(st, 7, e->message, -1, SQLITE_STATIC);
                if (e->details)
                        sqlite3_bind_text(st, 8, e->details, -1, SQLITE_STATIC);
                else
                        sqlite3_bind_null(st, 8);
                sqlite3_bind_int64(st, 9, g->now);
                if ((r = step(g, st, "cannot store an event")) < 0)
                        return r;
                ret->events += (uint64_t) sqlite3_changes(farm_db_writer(g->db));
        }
        return 0;
}

/* ---- the summary --------------------------------------------------------------------------- */

static int prepare_all(struct ingest *g) {
        const struct {
                sqlite3_stmt **st;
                const char *sql;
        } list[] = {
                { &g->interval,
                  "INSERT INTO intervals (run, seq, start_ns, length_ns, scenario, max_ns, "
                  "samples, violations, max_cpu, max_time_ns, received_ns, m_start_ns, m_end_ns, "
                  "min_ratio_pm, min_ratio_cpu, counted_ns, missing_ns) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (run, seq) DO NOTHING" },
                { &g->cpu,
                  "INSERT INTO interval_cpus (interval, cpu, samples, min_ns, avg_ns, max_ns, "
                  "max_time_ns, violations, missed, hist_limit_us, hist, span_start_ns, "
                  "span_length_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" },
                { &g->load,
                  "INSERT INTO interval_loads (interval, idx, generator, up_ns, starts, exits) "
                  "VALUES (?, ?, ?, ?, ?, ?)" },
                { &g->metric,
                  "INSERT INTO interval_load_metrics (interval, load_idx, idx, name, unit, "
                  "value) VALUES (?, ?, ?, ?, ?, ?)" },
                { &g->day, "INSERT INTO run_days (run, day, intervals, covered_ns, first_start_ns, "
                           "last_end_ns, max_gap_ns, gaps_known, max_ns, counted_ns, min_ratio_pm, "
                           "max_skew_ns, max_received_ns) "
                           "VALUES (?1, ?2, 1, ?3, ?4, ?5, 0, 1, ?6, ?7, ?8, ?9, ?10) "
                           "ON CONFLICT (run, day) DO UPDATE SET "
                           "intervals = intervals + 1, covered_ns = covered_ns + ?3, "
                           "max_gap_ns = CASE WHEN ?4 >= last_end_ns "
                           "THEN max(max_gap_ns, ?4 - last_end_ns) ELSE max_gap_ns END, "
                           "gaps_known = gaps_known AND ?4 >= last_end_ns, "
                           "first_start_ns = min(first_start_ns, ?4), "
                           "last_end_ns = max(last_end_ns, ?5), max_ns = max(max_ns, ?6), "
                           "counted_ns = counted_ns + ?7, min_ratio_pm = min(min_ratio_pm, ?8), "
                           "max_skew_ns = max(max_skew_ns, ?9), "
                           "max_received_ns = max(max_received_ns, ?10), "
                           "max_missing_ns = max(max_missing_ns, ?11)" },
                { &g->gens, "SELECT gens_all FROM run_day_scenarios WHERE run = ? AND day = ? AND "
                            "scenario = ?" },
                { &g->day_scenario,
                  "INSERT INTO run_day_scenarios (run, day, scenario, covered_ns, counted_ns, "
                  "gens_all, down_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                  "ON CONFLICT (run, day, scenario) DO UPDATE SET "
                  "covered_ns = covered_ns + ?4, counted_ns = counted_ns + ?5, gens_all = ?6, "
                  "down_ns = down_ns + ?7" },
                { &g->down,
                  "INSERT INTO load_downs (run, seq, load_idx, generator, start_ns, length_ns, "
                  "scenario, down_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)" },
                { &g->cand_runs, "SELECT id, max_length_ns FROM runs WHERE machine_id = ?1 AND "
                                 "last_end_ns > ?2 AND first_start_ns < ?3 AND id <> ?4" },
                { &g->cand_ivs,
                  "SELECT seq, start_ns, length_ns, m_start_ns, m_end_ns FROM intervals "
                  "WHERE run = ?1 AND start_ns > ?2 AND start_ns < ?3" },
                { &g->overlap, "INSERT INTO overlaps (machine_id, run_a, run_b, start_ns, end_ns, "
                               "received_ns) VALUES (?, ?, ?, ?, ?, ?)" },
        };
        for (size_t i = 0; i < ELEMENTSOF(list); i++) {
                int r = farm_prepare_w(g->db, list[i].sql, list[i].st, g->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int update_machine(struct ingest *g) {
        _cleanup_reset_ sqlite3_stmt *upd = NULL;
        const struct summary *s = g->s;
        int r = farm_prepare_w(
                g->db,
                "UPDATE machines SET last_report_ns = max(coalesce(last_report_ns, 0), ?2), "
                "hostname = ?3, cpu_model = ?4, cpus = ?5, "
                "violations_total = violations_total + ?6, "
                "last_worst_ns = CASE WHEN ?7 >= coalesce(last_interval_start_ns, ?7) "
                "THEN ?8 ELSE last_worst_ns END, "
                "last_interval_start_ns = CASE WHEN ?7 IS NULL THEN last_interval_start_ns "
                "ELSE max(coalesce(last_interval_start_ns, ?7), ?7) END "
                "WHERE id = ?1",
                &upd, g->err);
        if (r < 0)
                return r;
        sqlite3_bind_text(upd, 1, s->machine.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(upd, 2, g->now);
        sqlite3_bind_text(upd, 3, s->machine.hostname, -1, SQLITE_STATIC);
        sqlite3_bind_text(upd, 4, s->machine.cpu_model, -1, SQLITE_STATIC);
        sqlite3_bind_int64(upd, 5, s->machine.cpus);
        sqlite3_bind_int64(upd, 6, (int64_t) MIN(g->violations, (uint64_t) INT64_MAX));
        if (g->latest_start_ns >= 0) {
                sqlite3_bind_int64(upd, 7, g->latest_start_ns);
                sqlite3_bind_int64(upd, 8, g->latest_max_ns);
        }
        return step(g, upd, "cannot update the machine");
}

static int store_upload(struct ingest *g, const struct farm_stored *res) {
        _cleanup_reset_ sqlite3_stmt *up = NULL;
        int r = farm_prepare_w(g->db,
                               "INSERT INTO uploads (run, seq, received_ns, intervals, events) "
                               "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run, seq) DO NOTHING",
                               &up, g->err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(up, 1, g->run.row);
        sqlite3_bind_int64(up, 2, (int64_t) g->s->seq);
        sqlite3_bind_int64(up, 3, g->now);
        sqlite3_bind_int64(up, 4, (int64_t) res->intervals);
        sqlite3_bind_int64(up, 5, (int64_t) res->events);
        return step(g, up, "cannot store the upload");
}

int farm_ingest_summary(farm_db *db, const struct summary *s, int64_t now_ns,
                        struct farm_stored *ret, char *err) {
        struct ingest g = { .db = db, .err = err, .s = s, .now = now_ns, .latest_start_ns = -1 };
        _cleanup_reset_ sqlite3_stmt *mach = NULL;
        int r, rc;

        /* The token may have been revoked since it was checked: the transaction decides. */
        r = farm_prepare_w(db, "SELECT 1 FROM machines WHERE id = ? AND revoked_ns IS NULL", &mach,
                           err);
        if (r < 0)
                return r;
        sqlite3_bind_text(mach, 1, s->machine.id, -1, SQLITE_STATIC);
        rc = sqlite3_step(mach);
        if (rc == SQLITE_DONE)
                return -EACCES;
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, farm_db_writer(db), rc, "cannot look up the machine", err);

        /* The content is stored even when the idempotency key is known: an uploader that did
         * not hear our answer may retry with a larger batch under the same key, and what it
         * adds must not be lost.  Intervals and events are unique per run, so whatever was
         * stored before is stored once. */
        if ((r = store_run(&g)) < 0 || (r = prepare_all(&g)) < 0)
                goto out;
        for (size_t i = 0; i < s->nintervals; i++) {
                if ((r = store_interval(&g, &s->intervals[i])) < 0)
                        goto out;
                ret->intervals += (uint64_t) r;
        }
        if ((r = store_events(&g, ret)) < 0)
                goto out;
        ret->dup_intervals = s->nintervals - ret->intervals;
        ret->dup_events = s->nevents - ret->events;
        ret->duplicate = ret->intervals == 0 && ret->events == 0;
        if ((r = store_upload(&g, ret)) < 0 || (r = update_run(&g)) < 0)
                goto out;
        r = update_machine(&g);
out:
        ingest_done(&g);
        return r;
}
