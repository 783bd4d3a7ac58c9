/* SPDX-License-Identifier: MIT */
/* Storing one decoded summary: its run, intervals (with what the verdict needs of each, which
 * no configured number changes: when it arrived, what it measured, the time no earlier
 * interval of the machine covered), the day rollups, the loads and the events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-db-internal.h"
#include "server-trace.h"
#include "server-measure.h"

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
        sql_conn *c;
        bool pg; /* PostgreSQL: the rows of an interval carry its start (partitions) */
        char *err;
        const struct summary *s;
        int64_t now;
        struct run_ctx run;
        sql_stmt *stored, *interval, *day, *day_scenario, *gens, *down, *cand_runs, *cand_ivs,
                *overlap, *uncache;
        struct span *spans;
        size_t nspans, cap_spans;
        struct overlap *overlaps;
        size_t noverlaps, cap_overlaps;
        /* What the machine's counters take from the stored intervals. */
        uint64_t violations;
        int64_t latest_start_ns, latest_max_ns; /* latest_start_ns < 0: none stored */
};

static int wfail(struct ingest *g, int rc, const char *what) {
        return farm_fail(g->c, rc, what, g->err);
}

static void ingest_done(struct ingest *g) {
        sql_stmt **st[] = {
                &g->stored, &g->interval,  &g->day,      &g->day_scenario, &g->gens,
                &g->down,   &g->cand_runs, &g->cand_ivs, &g->overlap,      &g->uncache
        };
        for (size_t i = 0; i < ELEMENTSOF(st); i++)
                sql_resetp(st[i]);
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
static int check_run(struct ingest *g, sql_stmt *sel) {
        const struct summary_run *run = &g->s->run;
        const char *boot = sql_column_text(sel, 1);
        const char *kernel = sql_column_text(sel, 2);
        const char *release = sql_column_text(sel, 4);
        const char *probed = sql_column_text(sel, 5);
        if (strcmp(boot ?: "", run->boot_id) != 0)
                return conflict(g->err, "run.boot_id: run %lld is stored with boot id %s",
                                (long long) run->id, boot);
        if (strcmp(kernel ?: "", run->kernel_release) != 0)
                return conflict(g->err, "run.kernel_release: run %lld is stored with kernel %s",
                                (long long) run->id, kernel);
        if (sql_column_int64(sel, 3) != run->start_ns)
                return conflict(g->err, "run.start_ns: run %lld is stored with start %lld",
                                (long long) run->id, (long long) sql_column_int64(sel, 3));
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
        g->run.row = sql_column_int64(sel, 0);
        g->run.probe_ns = (uint64_t) sql_column_int64(sel, 6);
        g->run.max_len = sql_column_int64(sel, 7);
        if (!sql_column_null(sel, 8)) {
                g->run.first_start = sql_column_int64(sel, 8);
                g->run.last_end = sql_column_int64(sel, 9);
        }
        return 0;
}

static int insert_run(struct ingest *g) {
        const struct summary *s = g->s;
        const struct summary_run *run = &s->run;
        _cleanup_reset_ sql_stmt *ins = NULL;
        int r = farm_prepare(
                g->c,
                "INSERT INTO runs (machine_id, run_id, boot_id, kernel_release, kernel_version, "
                "kernel_cmdline, preempt_model, daemon_version, config_digest, start_ns, "
                "threshold_ns, probe_interval_ns, interval_ns, first_report_ns, release, "
                "hostname, probed_cpus) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
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
                        sql_bind_text(ins, i + 1, texts[i]);
        sql_bind_int64(ins, 2, run->id);
        sql_bind_int64(ins, 10, run->start_ns);
        sql_bind_int64(ins, 11, (int64_t) run->threshold_ns);
        sql_bind_int64(ins, 12, (int64_t) run->probe_interval_ns);
        sql_bind_int64(ins, 13, (int64_t) run->interval_ns);
        sql_bind_int64(ins, 14, g->now);
        sql_bind_text(ins, 15, release_of(s));
        sql_bind_text(ins, 16, s->machine.hostname);
        sql_bind_text(ins, 17, probed);
        if ((r = sql_step(ins)) != SQL_ROW)
                return wfail(g, r, "cannot store the run");
        g->run.row = sql_column_int64(ins, 0);
        g->run.probe_ns = run->probe_interval_ns;
        return 0;
}

/* Finds or creates the row of the summary's run. */
static int store_run(struct ingest *g) {
        _cleanup_reset_ sql_stmt *sel = NULL;
        int r = farm_prepare(g->c,
                             "SELECT id, boot_id, kernel_release, start_ns, release, "
                             "probed_cpus, probe_interval_ns, max_length_ns, first_start_ns, "
                             "last_end_ns FROM runs WHERE machine_id = ? AND run_id = ?",
                             &sel, g->err);
        if (r < 0)
                return r;
        g->run.first_start = INT64_MAX;
        g->run.last_end = INT64_MIN;
        sql_bind_text(sel, 1, g->s->machine.id);
        sql_bind_int64(sel, 2, g->s->run.id);
        int rc = sql_step(sel);
        if (rc == SQL_ROW)
                return check_run(g, sel);
        if (rc != SQL_DONE)
                return wfail(g, rc, "cannot look up the run");
        return insert_run(g);
}

static int update_run(struct ingest *g) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (g->run.first_start > g->run.last_end)
                return 0;
        int r = farm_prepare(g->c,
                             "UPDATE runs SET first_start_ns = ?2, last_end_ns = ?3, "
                             "max_length_ns = ?4 WHERE id = ?1",
                             &st, g->err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, g->run.row);
        sql_bind_int64(st, 2, g->run.first_start);
        sql_bind_int64(st, 3, g->run.last_end);
        sql_bind_int64(st, 4, g->run.max_len);
        return farm_step_done(st, "cannot update the run", g->err);
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
        sql_reset(g->cand_ivs);
        sql_bind_int64(g->cand_ivs, 1, run);
        sql_bind_int64(g->cand_ivs, 2, start - max_len);
        sql_bind_int64(g->cand_ivs, 3, end);
        while ((rc = sql_step(g->cand_ivs)) == SQL_ROW) {
                int64_t s = sql_column_int64(g->cand_ivs, 1),
                        e = s + sql_column_int64(g->cand_ivs, 2);
                int r = 0;
                if (e <= start || (run == g->run.row && sql_column_int64(g->cand_ivs, 0) == seq))
                        continue;
                if (run != g->run.row)
                        r = add_overlap(g, run, MAX(s, start), MIN(e, end));
                if (r >= 0 && !sql_column_null(g->cand_ivs, 3))
                        r = add_span(g, sql_column_int64(g->cand_ivs, 3),
                                     sql_column_int64(g->cand_ivs, 4));
                if (r < 0)
                        return r;
        }
        sql_reset(g->cand_ivs);
        return rc == SQL_DONE ? 0 : wfail(g, rc, "cannot look for overlapping intervals");
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
        sql_reset(g->cand_runs);
        sql_bind_text(g->cand_runs, 1, g->s->machine.id);
        sql_bind_int64(g->cand_runs, 2, start);
        sql_bind_int64(g->cand_runs, 3, end);
        sql_bind_int64(g->cand_runs, 4, g->run.row);
        while (r >= 0 && (rc = sql_step(g->cand_runs)) == SQL_ROW)
                r = scan_run(g, sql_column_int64(g->cand_runs, 0),
                             sql_column_int64(g->cand_runs, 1), -1, start, end);
        if (r >= 0 && rc != SQL_DONE)
                r = wfail(g, rc, "cannot look for overlapping runs");
        sql_reset(g->cand_runs);
        if (r < 0)
                return r;
        *ret = m->measured ? uncovered(g, m->start_ns, m->end_ns) : 0;
        return 0;
}

static int store_overlaps(struct ingest *g) {
        for (size_t i = 0; i < g->noverlaps; i++) {
                const struct overlap *o = &g->overlaps[i];
                sql_bind_text(g->overlap, 1, g->s->machine.id);
                sql_bind_int64(g->overlap, 2, MIN(o->run, g->run.row));
                sql_bind_int64(g->overlap, 3, MAX(o->run, g->run.row));
                sql_bind_int64(g->overlap, 4, o->start);
                sql_bind_int64(g->overlap, 5, o->end);
                sql_bind_int64(g->overlap, 6, g->now);
                int r = farm_step_done(g->overlap, "cannot store an overlap", g->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- rows of an interval, several per statement --------------------------------------------- */

/* The rows of an interval's CPUs, loads and load metrics (heads of multi-row INSERTs): on
 * PostgreSQL with the interval's start, which chooses their partition. */
static const char *const sql_cpu[] = {
        "INSERT INTO interval_cpus (interval, cpu, samples, min_ns, avg_ns, max_ns, max_time_ns, "
        "violations, missed, hist_limit_us, hist, span_start_ns, span_length_ns) VALUES ",
        "INSERT INTO interval_cpus (interval, cpu, samples, min_ns, avg_ns, max_ns, max_time_ns, "
        "violations, missed, hist_limit_us, hist, span_start_ns, span_length_ns, start_ns) "
        "VALUES ",
};
static const char *const sql_load[] = {
        "INSERT INTO interval_loads (interval, idx, generator, up_ns, starts, exits) VALUES ",
        "INSERT INTO interval_loads (interval, idx, generator, up_ns, starts, exits, start_ns) "
        "VALUES ",
};
static const char *const sql_metric[] = {
        "INSERT INTO interval_load_metrics (interval, load_idx, idx, name, unit, value) VALUES ",
        "INSERT INTO interval_load_metrics (interval, load_idx, idx, name, unit, value, "
        "start_ns) VALUES ",
};

/* Rows per multi-row INSERT: one statement for the 8 CPUs of an interval instead of 8, which
 * on PostgreSQL is 8 round trips and executions fewer. */
#define ROWS_MAX 128

/* The INSERT of n rows of ncols values each (head: "INSERT INTO t (a, b) VALUES ", tail after
 * the rows), prepared once per shape: row i's value k is parameter i * ncols + k + 1. */
static int prepare_rows(struct ingest *g, const char *head, unsigned ncols, size_t n,
                        const char *tail, sql_stmt **ret) {
        char *sql = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&sql, &len);
        if (!f)
                return -ENOMEM;
        fputs(head, f);
        for (size_t i = 0; i < n; i++) {
                fputs(i ? ", (?" : "(?", f);
                for (unsigned k = 1; k < ncols; k++)
                        fputs(", ?", f);
                fputc(')', f);
        }
        fputs(tail, f);
        if (fclose(f) != 0) {
                free(sql);
                return -ENOMEM;
        }
        int r = sql_prepare_text(g->c, sql, ret);
        free(sql);
        return r < 0 ? wfail(g, r, "cannot prepare query") : 0;
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

static int store_load_rows(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        unsigned w = 6 + g->pg;
        for (size_t first = 0; first < iv->nloads; first += ROWS_MAX) {
                size_t n = MIN(iv->nloads - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g, sql_load[g->pg], w, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        const struct summary_load *ld = &iv->loads[first + i];
                        int k = (int) (i * w);
                        sql_bind_int64(st, k + 1, id);
                        sql_bind_int64(st, k + 2, (int64_t) (first + i));
                        sql_bind_text(st, k + 3, ld->generator);
                        sql_bind_int64(st, k + 4, (int64_t) ld->up_ns);
                        sql_bind_int64(st, k + 5, ld->starts);
                        sql_bind_int64(st, k + 6, ld->exits);
                        if (g->pg)
                                sql_bind_int64(st, k + 7, iv->start_ns);
                }
                if (r < 0 || (r = farm_step_done(st, "cannot store the loads", g->err)) < 0)
                        return r;
        }
        return 0;
}

/* The metrics of every load of iv, ROWS_MAX per statement. */
static int store_metric_rows(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        unsigned w = 6 + g->pg;
        size_t total = 0, l = 0, m = 0; /* (l, m): the next metric */
        for (size_t k = 0; k < iv->nloads; k++)
                total += iv->loads[k].nmetrics;
        for (size_t first = 0; first < total; first += ROWS_MAX) {
                size_t n = MIN(total - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g, sql_metric[g->pg], w, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++, m++) {
                        while (m >= iv->loads[l].nmetrics) {
                                l++;
                                m = 0;
                        }
                        const struct summary_metric *x = &iv->loads[l].metrics[m];
                        int k = (int) (i * w);
                        sql_bind_int64(st, k + 1, id);
                        sql_bind_int64(st, k + 2, (int64_t) l);
                        sql_bind_int64(st, k + 3, (int64_t) m);
                        sql_bind_text(st, k + 4, x->name);
                        sql_bind_text(st, k + 5, x->unit);
                        sql_bind_double(st, k + 6, x->value);
                        if (g->pg)
                                sql_bind_int64(st, k + 7, iv->start_ns);
                }
                if (r < 0 || (r = farm_step_done(st, "cannot store the load metrics", g->err)) < 0)
                        return r;
        }
        return 0;
}

/* The loads of iv and their metrics, and the time each was down. */
static int store_loads(struct ingest *g, int64_t id, const struct summary_interval *iv,
                       uint64_t *ret_down) {
        int r;
        *ret_down = 0;
        if ((r = store_load_rows(g, id, iv)) < 0 || (r = store_metric_rows(g, id, iv)) < 0)
                return r;
        for (size_t l = 0; l < iv->nloads; l++) {
                const struct summary_load *ld = &iv->loads[l];
                uint64_t down = load_down_ns(iv, ld);
                if (down == 0)
                        continue;
                sql_stmt *d = g->down;
                sql_bind_int64(d, 1, g->run.row);
                sql_bind_int64(d, 2, (int64_t) iv->seq);
                sql_bind_int64(d, 3, (int64_t) l);
                sql_bind_text(d, 4, ld->generator);
                sql_bind_int64(d, 5, iv->start_ns);
                sql_bind_int64(d, 6, (int64_t) iv->length_ns);
                sql_bind_text(d, 7, iv->scenario);
                sql_bind_int64(d, 8, (int64_t) down);
                if ((r = farm_step_done(d, "cannot store a load's down time", g->err)) < 0)
                        return r;
                *ret_down += down;
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

        sql_stmt *d = g->day;
        sql_bind_int64(d, 1, g->run.row);
        sql_bind_int64(d, 2, day);
        sql_bind_int64(d, 3, (int64_t) iv->length_ns);
        sql_bind_int64(d, 4, iv->start_ns);
        sql_bind_int64(d, 5, end);
        sql_bind_int64(d, 6, (int64_t) f->max_ns);
        sql_bind_int64(d, 7, f->counted_ns);
        sql_bind_int64(d, 8, f->m.min_ratio_pm);
        sql_bind_int64(d, 9, end - g->now);
        sql_bind_int64(d, 10, g->now);
        sql_bind_int64(d, 11, f->m.max_missing_ns);
        if ((r = farm_step_done(d, "cannot update the day's coverage", g->err)) < 0)
                return r;

        sql_reset(g->gens);
        sql_bind_int64(g->gens, 1, g->run.row);
        sql_bind_int64(g->gens, 2, day);
        sql_bind_text(g->gens, 3, scen);
        rc = sql_step(g->gens);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return wfail(g, rc, "cannot read the day's generators");
        gens_intersect(iv, rc == SQL_ROW ? sql_column_text(g->gens, 0) : NULL, gens, sizeof(gens));
        sql_reset(g->gens);

        d = g->day_scenario;
        sql_bind_int64(d, 1, g->run.row);
        sql_bind_int64(d, 2, day);
        sql_bind_text(d, 3, scen);
        sql_bind_int64(d, 4, (int64_t) iv->length_ns);
        sql_bind_int64(d, 5, f->counted_ns);
        sql_bind_text(d, 6, gens);
        sql_bind_int64(d, 7, f->down_ns);
        if ((r = farm_step_done(d, "cannot update the day's scenarios", g->err)) < 0)
                return r;

        /* The day's merged histograms are out of date.  After the rollups: a server of the
         * same PostgreSQL that fills them holds the day's rollup row until it committed, so
         * that what it wrote is gone here, not written after. */
        sql_bind_int64(g->uncache, 1, g->run.row);
        sql_bind_int64(g->uncache, 2, day);
        return farm_step_done(g->uncache, "cannot drop the day's cached histograms", g->err);
}

/* ---- intervals ----------------------------------------------------------------------------- */

static void sat_add(uint64_t *a, uint64_t b) {
        *a = *a > UINT64_MAX - b ? UINT64_MAX : *a + b;
}

/* Inserts the interval's row: its id, or 0 when (run, seq) is stored already. */
static int insert_interval(struct ingest *g, const struct summary_interval *iv,
                           const struct facts *f, int64_t *ret_id) {
        uint64_t samples = 0, violations = 0;
        int64_t max_cpu = 0, max_time = iv->start_ns;
        int r;
        for (size_t c = 0; c < iv->ncpus; c++) {
                const struct summary_cpu *p = &iv->cpus[c];
                sat_add(&samples, p->samples);
                sat_add(&violations, p->violations);
                if (c == 0 || p->max_ns > iv->cpus[max_cpu].max_ns) {
                        max_cpu = (int64_t) c;
                        max_time = p->max_time_ns;
                }
        }
        /* Unique by (run, seq): on PostgreSQL the key of a partitioned table holds the start
         * too, so that it is looked for here (under the machine's row lock). */
        sql_bind_int64(g->stored, 1, g->run.row);
        sql_bind_int64(g->stored, 2, (int64_t) iv->seq);
        r = sql_step(g->stored);
        sql_reset(g->stored);
        if (r < 0)
                return wfail(g, r, "cannot look for the interval");
        *ret_id = 0;
        if (r == SQL_ROW)
                return 0;

        sql_stmt *st = g->interval;
        sql_bind_int64(st, 1, g->run.row);
        sql_bind_int64(st, 2, (int64_t) iv->seq);
        sql_bind_int64(st, 3, iv->start_ns);
        sql_bind_int64(st, 4, (int64_t) iv->length_ns);
        sql_bind_text(st, 5, iv->scenario);
        sql_bind_int64(st, 6, (int64_t) f->max_ns);
        sql_bind_int64(st, 7, (int64_t) MIN(samples, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 8, (int64_t) MIN(violations, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 9, iv->cpus[max_cpu].cpu);
        sql_bind_int64(st, 10, max_time);
        sql_bind_int64(st, 11, g->now);
        if (f->m.measured) {
                sql_bind_int64(st, 12, f->m.start_ns);
                sql_bind_int64(st, 13, f->m.end_ns);
        }
        sql_bind_int64(st, 14, f->m.min_ratio_pm);
        if (f->m.min_ratio_cpu >= 0)
                sql_bind_int64(st, 15, f->m.min_ratio_cpu);
        sql_bind_int64(st, 16, f->counted_ns);
        sql_bind_int64(st, 17, f->m.max_missing_ns);
        r = sql_step(st);
        if (r == SQL_ROW)
                *ret_id = sql_column_int64(st, 0);
        sql_reset(st);
        return r < 0 ? wfail(g, r, "cannot store an interval") : 0;
}

static int store_cpus(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        unsigned w = 13 + g->pg;
        for (size_t first = 0; first < iv->ncpus; first += ROWS_MAX) {
                size_t n = MIN(iv->ncpus - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g, sql_cpu[g->pg], w, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        const struct summary_cpu *p = &iv->cpus[first + i];
                        int k = (int) (i * w);
                        sql_bind_int64(st, k + 1, id);
                        sql_bind_int64(st, k + 2, p->cpu);
                        sql_bind_int64(st, k + 3, (int64_t) p->samples);
                        sql_bind_int64(st, k + 4, (int64_t) p->min_ns);
                        sql_bind_int64(st, k + 5, (int64_t) p->avg_ns);
                        sql_bind_int64(st, k + 6, (int64_t) p->max_ns);
                        sql_bind_int64(st, k + 7, p->max_time_ns);
                        sql_bind_int64(st, k + 8, (int64_t) p->violations);
                        sql_bind_int64(st, k + 9, (int64_t) p->missed);
                        sql_bind_int64(st, k + 10, p->hist_limit_us);
                        /* An empty histogram is a zero-length blob, not NULL. */
                        sql_bind_blob(st, k + 11, p->hist, p->hist_len);
                        if (p->span_length_ns) {
                                sql_bind_int64(st, k + 12, p->span_start_ns);
                                sql_bind_int64(st, k + 13, (int64_t) p->span_length_ns);
                        }
                        if (g->pg)
                                sql_bind_int64(st, k + 14, iv->start_ns);
                        sat_add(&g->violations, p->violations);
                }
                if (r < 0 ||
                    (r = farm_step_done(st, "cannot store the CPUs of an interval", g->err)) < 0)
                        return r;
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
        int64_t id, end;
        if ((r = counted_of(g, iv, &f.m, &f.counted_ns)) < 0 ||
            (r = insert_interval(g, iv, &f, &id)) < 0)
                return r;
        if (id == 0)
                return 0; /* (run, seq) is stored: the same interval sent again */
        uint64_t down = 0;
        if ((r = store_cpus(g, id, iv)) < 0 || (r = store_loads(g, id, iv, &down)) < 0)
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

/* The events of the summary, ROWS_MAX per statement; those stored before are left. */
static int store_events(struct ingest *g, struct farm_stored *ret) {
        const struct summary *s = g->s;
        for (size_t first = 0; first < s->nevents; first += ROWS_MAX) {
                size_t n = MIN(s->nevents - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(
                        g,
                        "INSERT INTO events (run, event_id, time_ns, type, cpu, value, "
                        "message, details, received_ns) VALUES ",
                        9, n, " ON CONFLICT (run, event_id) DO NOTHING", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        const struct summary_event *e = &s->events[first + i];
                        int k = (int) (i * 9);
                        sql_bind_int64(st, k + 1, g->run.row);
                        sql_bind_int64(st, k + 2, (int64_t) e->id);
                        sql_bind_int64(st, k + 3, e->time_ns);
                        sql_bind_text(st, k + 4, e->type);
                        if (e->cpu >= 0)
                                sql_bind_int64(st, k + 5, e->cpu);
                        if (e->value >= 0)
                                sql_bind_int64(st, k + 6, e->value);
                        sql_bind_text(st, k + 7, e->message);
                        sql_bind_text(st, k + 8, e->details);
                        sql_bind_int64(st, k + 9, g->now);
                }
                if (r < 0 || (r = farm_step_done(st, "cannot store the events", g->err)) < 0)
                        return r;
                ret->events += (uint64_t) sql_changes(st);
        }
        return 0;
}

/* ---- the summary --------------------------------------------------------------------------- */

static int prepare_all(struct ingest *g) {
        const struct {
                sql_stmt **st;
                const char *sql;
        } list[] = {
                { &g->stored, "SELECT 1 FROM intervals WHERE run = ? AND seq = ?" },
                { &g->interval,
                  "INSERT INTO intervals (run, seq, start_ns, length_ns, scenario, max_ns, "
                  "samples, violations, max_cpu, max_time_ns, received_ns, m_start_ns, m_end_ns, "
                  "min_ratio_pm, min_ratio_cpu, counted_ns, missing_ns) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT DO NOTHING RETURNING id" },
                { &g->day, "INSERT INTO run_days (run, day, intervals, covered_ns, first_start_ns, "
                           "last_end_ns, max_gap_ns, gaps_known, max_ns, counted_ns, min_ratio_pm, "
                           "max_skew_ns, max_received_ns, max_missing_ns) "
                           "VALUES (?1, ?2, 1, ?3, ?4, ?5, 0, 1, ?6, ?7, ?8, ?9, ?10, ?11) "
                           "ON CONFLICT (run, day) DO UPDATE SET "
                           "intervals = run_days.intervals + 1, "
                           "covered_ns = run_days.covered_ns + ?3, "
                           "max_gap_ns = CASE WHEN ?4 >= run_days.last_end_ns "
                           "THEN greatest(run_days.max_gap_ns, ?4 - run_days.last_end_ns) "
                           "ELSE run_days.max_gap_ns END, "
                           "gaps_known = CASE WHEN run_days.gaps_known <> 0 AND "
                           "?4 >= run_days.last_end_ns THEN 1 ELSE 0 END, "
                           "first_start_ns = least(run_days.first_start_ns, ?4), "
                           "last_end_ns = greatest(run_days.last_end_ns, ?5), "
                           "max_ns = greatest(run_days.max_ns, ?6), "
                           "counted_ns = run_days.counted_ns + ?7, "
                           "min_ratio_pm = least(run_days.min_ratio_pm, ?8), "
                           "max_skew_ns = greatest(run_days.max_skew_ns, ?9), "
                           "max_received_ns = greatest(run_days.max_received_ns, ?10), "
                           "max_missing_ns = greatest(run_days.max_missing_ns, ?11)" },
                { &g->gens, "SELECT gens_all FROM run_day_scenarios WHERE run = ? AND day = ? AND "
                            "scenario = ?" },
                { &g->day_scenario,
                  "INSERT INTO run_day_scenarios (run, day, scenario, covered_ns, counted_ns, "
                  "gens_all, down_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                  "ON CONFLICT (run, day, scenario) DO UPDATE SET "
                  "covered_ns = run_day_scenarios.covered_ns + ?4, "
                  "counted_ns = run_day_scenarios.counted_ns + ?5, gens_all = ?6, "
                  "down_ns = run_day_scenarios.down_ns + ?7" },
                { &g->uncache, "DELETE FROM hist_days WHERE run = ? AND day = ?" },
                { &g->down,
                  "INSERT INTO load_downs (run, seq, load_idx, generator, start_ns, length_ns, "
                  "scenario, down_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)" },
                { &g->cand_runs, "SELECT id, max_length_ns FROM runs WHERE machine_id = ?1 AND "
                                 "last_end_ns > ?2 AND first_start_ns < ?3 AND id <> ?4" },
                { &g->cand_ivs,
                  "SELECT seq, start_ns, length_ns, m_start_ns, m_end_ns FROM intervals "
                  "WHERE run = ?1 AND start_ns > ?2 AND start_ns < ?3" },
                { &g->overlap, "INSERT INTO \"overlaps\" (machine_id, run_a, run_b, start_ns, "
                               "end_ns, received_ns) VALUES (?, ?, ?, ?, ?, ?)" },
        };
        for (size_t i = 0; i < ELEMENTSOF(list); i++) {
                int r = farm_prepare(g->c, list[i].sql, list[i].st, g->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int update_machine(struct ingest *g) {
        _cleanup_reset_ sql_stmt *upd = NULL;
        const struct summary *s = g->s;
        int r = farm_prepare(
                g->c,
                "UPDATE machines SET last_report_ns = greatest(coalesce(last_report_ns, 0), ?2), "
                "hostname = ?3, cpu_model = ?4, cpus = ?5, "
                /* Saturating at 2^63-1 (an addition past it fails on PostgreSQL). */
                "violations_total = CASE WHEN ?6 > 9223372036854775807 - violations_total "
                "THEN 9223372036854775807 ELSE violations_total + ?6 END, "
                "last_worst_ns = CASE WHEN ?7 >= coalesce(last_interval_start_ns, ?7) "
                "THEN ?8 ELSE last_worst_ns END, "
                "last_interval_start_ns = CASE WHEN ?7 IS NULL THEN last_interval_start_ns "
                "ELSE greatest(coalesce(last_interval_start_ns, ?7), ?7) END "
                "WHERE id = ?1",
                &upd, g->err);
        if (r < 0)
                return r;
        sql_bind_text(upd, 1, s->machine.id);
        sql_bind_int64(upd, 2, g->now);
        sql_bind_text(upd, 3, s->machine.hostname);
        sql_bind_text(upd, 4, s->machine.cpu_model);
        sql_bind_int64(upd, 5, s->machine.cpus);
        sql_bind_int64(upd, 6, (int64_t) MIN(g->violations, (uint64_t) INT64_MAX));
        if (g->latest_start_ns >= 0) {
                sql_bind_int64(upd, 7, g->latest_start_ns);
                sql_bind_int64(upd, 8, g->latest_max_ns);
        }
        return farm_step_done(upd, "cannot update the machine", g->err);
}

static int store_upload(struct ingest *g, const struct farm_stored *res) {
        _cleanup_reset_ sql_stmt *up = NULL;
        int r = farm_prepare(g->c,
                             "INSERT INTO uploads (run, seq, received_ns, intervals, events) "
                             "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run, seq) DO NOTHING",
                             &up, g->err);
        if (r < 0)
                return r;
        sql_bind_int64(up, 1, g->run.row);
        sql_bind_int64(up, 2, (int64_t) g->s->seq);
        sql_bind_int64(up, 3, g->now);
        sql_bind_int64(up, 4, (int64_t) res->intervals);
        sql_bind_int64(up, 5, (int64_t) res->events);
        return farm_step_done(up, "cannot store the upload", g->err);
}

/* The machine's row, which must not be revoked: on PostgreSQL locked until the commit, so that
 * the uploads of one machine through any server of the farm are stored one after the other (what
 * an interval counts depends on those stored before it), and a revocation waits for them. */
static const char *const sql_machine[] = {
        [SQL_SQLITE] = "SELECT 1 FROM machines WHERE id = ? AND revoked_ns IS NULL",
        [SQL_PG] = "SELECT 1 FROM machines WHERE id = ? AND revoked_ns IS NULL FOR UPDATE",
};

int farm_ingest_summary(sql_conn *c, const struct summary *s, int64_t now_ns,
                        struct farm_stored *ret, char *err) {
        struct ingest g = { .c = c,
                            .pg = sql_dialect(c) == SQL_PG,
                            .err = err,
                            .s = s,
                            .now = now_ns,
                            .latest_start_ns = -1 };
        _cleanup_reset_ sql_stmt *mach = NULL;
        int r, rc;

        /* The token may have been revoked since it was checked: the transaction decides. */
        r = farm_prepare(c, sql_machine[sql_dialect(c)], &mach, err);
        if (r < 0)
                return r;
        sql_bind_text(mach, 1, s->machine.id);
        rc = sql_step(mach);
        if (rc == SQL_DONE)
                return -EACCES;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot look up the machine", err);

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
                /* The flight recorder's captures it carries (server-trace.c). */
                if ((r = farm_store_traces(c, g.run.row, &s->intervals[i], err)) < 0)
                        goto out;
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
