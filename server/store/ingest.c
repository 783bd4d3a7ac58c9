/* SPDX-License-Identifier: MIT */
/* Storing one decoded summary: its run, intervals (with what the verdict needs of each, which
 * no configured number changes: when it arrived, what it measured, the time no earlier
 * interval of the machine covered), the day rollups, the loads and the events. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "day-hists.h"
#include "inventories.h"
#include "db-internal.h"
#include "traces.h"
#include "measure.h"
#include "rollups.h"

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
        int64_t stored_first, stored_last, stored_max; /* the same as the row holds them */
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
        bool pg; /* PostgreSQL: an interval's rows in one statement, carrying its start */
        char *err;
        const struct summary *s;
        int64_t now;
        struct run_ctx run;
        sql_stmt *stored, *interval, *gens, *down, *cand_runs, *cand_ivs, *overlap;
        /* PostgreSQL: the look-up of the first interval's overlaps, sent with the run's. */
        sql_stmt *scan_first;
        struct span *spans;
        size_t nspans, cap_spans;
        struct overlap *overlaps;
        size_t noverlaps, cap_overlaps;
        struct farm_day_hists day_hists; /* the stored intervals' sums, per day and scenario */
        struct farm_rollup rollup;       /* their day rollups not yet written */
        /* PostgreSQL: the events that go with the statement of the next interval, from ev_first
         * (ev_n of them), and how many of them it stored. */
        size_t ev_first, ev_n;
        uint64_t ev_stored;
        /* What the machine's counters take from the stored intervals. */
        uint64_t violations;
        int64_t latest_start_ns, latest_max_ns; /* latest_start_ns < 0: none stored */
};

static int wfail(struct ingest *g, int rc, const char *what) {
        return farm_fail(g->c, rc, what, g->err);
}

static void ingest_done(struct ingest *g) {
        sql_stmt **st[] = { &g->stored,    &g->interval, &g->gens,    &g->down,
                            &g->cand_runs, &g->cand_ivs, &g->overlap, &g->scan_first };
        for (size_t i = 0; i < ELEMENTSOF(st); i++)
                sql_resetp(st[i]);
        free(g->run.probed);
        free(g->spans);
        free(g->overlaps);
        farm_day_hists_done(&g->day_hists);
        farm_rollup_done(&g->rollup);
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
        if (strcmp(release ?: "", summary_release_of(&g->s->run)) != 0)
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
        g->run.stored_first = g->run.first_start;
        g->run.stored_last = g->run.last_end;
        g->run.stored_max = g->run.max_len;
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
        sql_bind_text(ins, 15, summary_release_of(&s->run));
        sql_bind_text(ins, 16, s->machine.hostname);
        sql_bind_text(ins, 17, probed);
        if ((r = sql_step(ins)) != SQL_ROW)
                return wfail(g, r, "cannot store the run");
        g->run.row = sql_column_int64(ins, 0);
        g->run.probe_ns = run->probe_interval_ns;
        return 0;
}

/* The run's row as sel found it (rc: its step; no row, or a NULL id: none), or a new one. */
static int run_of(struct ingest *g, sql_stmt *sel, int rc) {
        g->run.first_start = g->run.stored_first = INT64_MAX;
        g->run.last_end = g->run.stored_last = INT64_MIN;
        if (rc == SQL_ROW && !sql_column_null(sel, 0))
                return check_run(g, sel);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return wfail(g, rc, "cannot look up the run");
        return insert_run(g);
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
        sql_bind_text(sel, 1, g->s->machine.id);
        sql_bind_int64(sel, 2, g->s->run.id);
        return run_of(g, sel, sql_step(sel));
}

/* The span of the run's intervals, updated once per upload and only when an interval stored
 * moved it (parameters 1 to 4 after base). */
#define SQL_UPDATE_RUN(ID, FIRST, LAST, MAX)                                                       \
        "UPDATE runs SET first_start_ns = " FIRST ", last_end_ns = " LAST ", max_length_ns = " MAX \
        " WHERE id = " ID

static bool run_moved(const struct ingest *g) {
        return g->run.first_start <= g->run.last_end &&
               (g->run.first_start != g->run.stored_first ||
                g->run.last_end != g->run.stored_last || g->run.max_len != g->run.stored_max);
}

static void bind_run(const struct ingest *g, sql_stmt *st, int base) {
        sql_bind_int64(st, base + 1, g->run.row);
        sql_bind_int64(st, base + 2, g->run.first_start);
        sql_bind_int64(st, base + 3, g->run.last_end);
        sql_bind_int64(st, base + 4, g->run.max_len);
}

static int update_run(struct ingest *g) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (!run_moved(g))
                return 0;
        int r = farm_prepare(g->c, SQL_UPDATE_RUN("?1", "?2", "?3", "?4"), &st, g->err);
        if (r < 0)
                return r;
        bind_run(g, st, 0);
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

/* A stored interval of run (st's columns from col on: seq, start, length, measured start and
 * end) that may overlap [start, end) of interval seq of this run. */
static int scan_row(struct ingest *g, sql_stmt *st, int col, int64_t run, int64_t seq,
                    int64_t start, int64_t end) {
        int64_t s = sql_column_int64(st, col + 1), e = s + sql_column_int64(st, col + 2);
        int r = 0;
        if (e <= start || (run == g->run.row && sql_column_int64(st, col) == seq))
                return 0;
        if (run != g->run.row)
                r = add_overlap(g, run, MAX(s, start), MIN(e, end));
        if (r >= 0 && !sql_column_null(st, col + 3))
                r = add_span(g, sql_column_int64(st, col + 3), sql_column_int64(st, col + 4));
        return r;
}

/* The intervals of run (whose longest interval is max_len) that overlap [start, end). */
static int scan_run(struct ingest *g, int64_t run, int64_t max_len, int64_t seq, int64_t start,
                    int64_t end) {
        int rc, r = 0;
        sql_reset(g->cand_ivs);
        sql_bind_int64(g->cand_ivs, 1, run);
        sql_bind_int64(g->cand_ivs, 2, start - max_len);
        sql_bind_int64(g->cand_ivs, 3, end);
        while (r >= 0 && (rc = sql_step(g->cand_ivs)) == SQL_ROW)
                r = scan_row(g, g->cand_ivs, 0, run, seq, start, end);
        sql_reset(g->cand_ivs);
        if (r < 0)
                return r;
        return rc == SQL_DONE ? 0 : wfail(g, rc, "cannot look for overlapping intervals");
}

/* The same for the summary's first interval, sent before the run is known (with the
 * machine's lock and the run's look-up, answered with them): the run by its number, and the
 * longest interval as its row has it, which is what the upload found (the upload's own
 * intervals change neither before its first one). */
#define SQL_SCAN_FIRST                                                                       \
        "SELECT r.id, i.seq, i.start_ns, i.length_ns, i.m_start_ns, i.m_end_ns FROM runs r " \
        "CROSS JOIN LATERAL (SELECT seq, start_ns, length_ns, m_start_ns, m_end_ns FROM "    \
        "intervals WHERE run = r.id AND start_ns > ?2 - r.max_length_ns AND start_ns < ?3 "  \
        "OFFSET 0) i "                                                                       \
        "WHERE r.machine_id = ?1 AND (r.run_id = ?4 OR (r.last_end_ns > ?2 AND "             \
        "r.first_start_ns < ?3))"

static int send_scan_first(struct ingest *g) {
        const struct summary_interval *iv = &g->s->intervals[0];
        int r = farm_prepare(g->c, SQL_SCAN_FIRST, &g->scan_first, g->err);
        if (r < 0)
                return r;
        sql_bind_text(g->scan_first, 1, g->s->machine.id);
        sql_bind_int64(g->scan_first, 2, iv->start_ns);
        sql_bind_int64(g->scan_first, 3, iv->start_ns + (int64_t) iv->length_ns);
        sql_bind_int64(g->scan_first, 4, g->s->run.id);
        if ((r = sql_send(g->scan_first)) < 0)
                return farm_fail(g->c, r, "cannot look for overlapping intervals", g->err);
        return 0;
}

/* OFFSET 0 keeps each LATERAL subquery a scan of one run's intervals in a time range, run for
 * each run found: without it PostgreSQL may flatten it into a join whose generic plan (forced for
 * the upload's statements, lock_machine_pg()) reads a whole month's partition by start time
 * when the tables' statistics are young (1.4 s per upload, measured after a bulk load, against
 * 0.14 ms). */
/* On PostgreSQL in one statement: the intervals of this run and of the machine's other runs
 * whose span meets [start, end) (their ids and longest intervals as cand_runs finds them) that
 * may overlap it; for the first interval the answer of send_scan_first(). */
static int scan_runs_pg(struct ingest *g, int64_t seq, int64_t start, int64_t end) {
        _cleanup_reset_ sql_stmt *st = NULL;
        if (g->scan_first) {
                st = g->scan_first;
                g->scan_first = NULL;
                int rc, r = 0;
                while (r >= 0 && (rc = sql_step(st)) == SQL_ROW)
                        r = scan_row(g, st, 1, sql_column_int64(st, 0), seq, start, end);
                if (r < 0)
                        return r;
                return rc == SQL_DONE ? 0 : wfail(g, rc, "cannot look for overlapping intervals");
        }
        static const char *const sql =
                "SELECT r.id, i.seq, i.start_ns, i.length_ns, i.m_start_ns, i.m_end_ns FROM "
                "(SELECT ?4::bigint AS id, ?5::bigint AS max_length_ns UNION ALL "
                "SELECT id, max_length_ns FROM runs WHERE machine_id = ?1 AND last_end_ns > ?2 "
                "AND first_start_ns < ?3 AND id <> ?4) r CROSS JOIN LATERAL "
                "(SELECT seq, start_ns, length_ns, m_start_ns, m_end_ns FROM intervals "
                "WHERE run = r.id AND start_ns > ?2 - r.max_length_ns AND start_ns < ?3 "
                "OFFSET 0) i";
        int rc, r = farm_prepare(g->c, sql, &st, g->err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, g->s->machine.id);
        sql_bind_int64(st, 2, start);
        sql_bind_int64(st, 3, end);
        sql_bind_int64(st, 4, g->run.row);
        sql_bind_int64(st, 5, g->run.max_len);
        while (r >= 0 && (rc = sql_step(st)) == SQL_ROW)
                r = scan_row(g, st, 1, sql_column_int64(st, 0), seq, start, end);
        if (r < 0)
                return r;
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

/* The same on SQLite: the intervals of this run, then those of each other run found. */
static int scan_runs_sqlite(struct ingest *g, int64_t seq, int64_t start, int64_t end) {
        int rc, r = scan_run(g, g->run.row, g->run.max_len, seq, start, end);
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
        return r;
}

/* Time is counted once (invariant 2): the measured part of iv that no interval of the
 * machine stored before covers, and the other runs of the machine that overlap it. */
static int counted_of(struct ingest *g, const struct summary_interval *iv,
                      const struct farm_measure *m, int64_t *ret) {
        int64_t start = iv->start_ns, end = start + (int64_t) iv->length_ns;
        g->nspans = g->noverlaps = 0;
        int r = g->pg ? scan_runs_pg(g, (int64_t) iv->seq, start, end)
                      : scan_runs_sqlite(g, (int64_t) iv->seq, start, end);
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

/* The columns of an interval's rows after the interval's id (and on PostgreSQL its start), in
 * the order of the bind_*() functions below, with their types. */
#define COLS_CPU                                                                                 \
        "cpu, samples, min_ns, avg_ns, max_ns, max_time_ns, violations, missed, hist_limit_us, " \
        "hist, span_start_ns, span_length_ns"
#define COLS_LOAD "idx, generator, up_ns, starts, exits"
#define COLS_METRIC "load_idx, idx, name, unit, value"
static const char *const types_cpu[] = {
        "bigint", "bigint", "bigint", "bigint", "bigint", "bigint",
        "bigint", "bigint", "bigint", "bytea",  "bigint", "bigint"
};
static const char *const types_load[] = { "bigint", "text", "bigint", "bigint", "bigint" };
static const char *const types_metric[] = { "bigint", "bigint", "text", "text",
                                            "double precision" };
/* A load's down time (load_downs, with the interval's run, seq, start, length and scenario). */
static const char *const types_down[] = { "bigint", "text", "bigint" };
#define NCOLS_CPU ELEMENTSOF(types_cpu)
#define NCOLS_LOAD ELEMENTSOF(types_load)
#define NCOLS_METRIC ELEMENTSOF(types_metric)
#define NCOLS_DOWN ELEMENTSOF(types_down)

/* Rows per multi-row INSERT: one statement for the 8 CPUs of an interval instead of 8.  On
 * PostgreSQL a statement keeps below 7,500 parameters (libpq refuses the description of more,
 * 30,000 bytes): ROWS_MAX CPUs and events go with an interval's statement, more in their own. */
#define ROWS_MAX 128

/* SQL built at run time, prepared once per shape. */
struct sqlbuf {
        FILE *f;
        char *sql;
        size_t len;
};

static int sqlbuf_open(struct sqlbuf *b) {
        *b = (struct sqlbuf){};
        b->f = open_memstream(&b->sql, &b->len);
        return b->f ? 0 : -ENOMEM;
}

static int sqlbuf_prepare(struct ingest *g, struct sqlbuf *b, sql_stmt **ret) {
        if (fclose(b->f) != 0) {
                free(b->sql);
                return -ENOMEM;
        }
        int r = sql_prepare_text(g->c, b->sql, ret);
        free(b->sql);
        return r < 0 ? wfail(g, r, "cannot prepare query") : 0;
}

/* The PostgreSQL statements built per shape (an interval's CPUs, loads, metrics...), built once
 * in the process and kept: an upload neither writes its statements' text again nor compares it
 * with the texts its connection prepared (sql_prepare() finds it by its address).  The shapes
 * are few: the farm's CPU counts and loads. */
static struct shape {
        char key[64];
        char *sql;
} * shapes;
static size_t nshapes, cap_shapes;
static pthread_mutex_t shapes_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *shape_find(const char *key) {
        for (size_t i = 0; i < nshapes; i++)
                if (strcmp(shapes[i].key, key) == 0)
                        return shapes[i].sql;
        return NULL;
}

/* The statement of shape key (at most 63 characters), its text written by b's opener when it is
 * not known yet (b open; closed here either way). */
static int prepare_shape(struct ingest *g, const char *key, struct sqlbuf *b, sql_stmt **ret) {
        const char *sql = NULL;
        if (fclose(b->f) != 0) {
                free(b->sql);
                return -ENOMEM;
        }
        pthread_mutex_lock(&shapes_lock);
        if (!(sql = shape_find(key))) {
                if (nshapes == cap_shapes) {
                        size_t cap = cap_shapes ? cap_shapes * 2 : 16;
                        struct shape *v = realloc(shapes, cap * sizeof(*v));
                        if (v) {
                                shapes = v;
                                cap_shapes = cap;
                        }
                }
                if (nshapes < cap_shapes) {
                        snprintf(shapes[nshapes].key, sizeof(shapes[nshapes].key), "%s", key);
                        shapes[nshapes].sql = b->sql;
                        sql = shapes[nshapes++].sql;
                        b->sql = NULL;
                }
        }
        pthread_mutex_unlock(&shapes_lock);
        free(b->sql);
        if (!sql)
                return -ENOMEM;
        return farm_prepare(g->c, sql, ret, g->err);
}

/* The known statement of shape key, or 0 with *ret NULL. */
static int prepare_known(struct ingest *g, const char *key, sql_stmt **ret) {
        pthread_mutex_lock(&shapes_lock);
        const char *sql = shape_find(key);
        pthread_mutex_unlock(&shapes_lock);
        *ret = NULL;
        return sql ? farm_prepare(g->c, sql, ret, g->err) : 0;
}

/* n rows of ncols parameters, "(?first, ?first+1 ...), (...)"; with types, each cast to its
 * column's (a parameter in a VALUES list has no column to take its type from). */
static void put_rows(FILE *f, size_t ncols, size_t n, int first, const char *const *types) {
        for (size_t i = 0; i < n; i++) {
                fputs(i ? ", (" : "(", f);
                for (size_t k = 0; k < ncols; k++) {
                        fprintf(f, "%s?%d", k ? ", " : "", first++);
                        if (types)
                                fprintf(f, "::%s", types[k]);
                }
                fputc(')', f);
        }
}

/* The INSERT of n rows of ncols values each (head: "INSERT INTO t (a, b) VALUES ", tail after
 * the rows): row i's value k is parameter i * ncols + k + 1. */
static int prepare_rows(struct ingest *g, const char *head, size_t ncols, size_t n,
                        const char *tail, sql_stmt **ret) {
        struct sqlbuf b;
        if (sqlbuf_open(&b) < 0)
                return -ENOMEM;
        fputs(head, b.f);
        put_rows(b.f, ncols, n, 1, NULL);
        fputs(tail, b.f);
        return sqlbuf_prepare(g, &b, ret);
}

/* The values of one row from parameter k + 1 on. */
static void bind_cpu(sql_stmt *st, int k, const struct summary_cpu *p) {
        sql_bind_int64(st, k + 1, p->cpu);
        sql_bind_int64(st, k + 2, (int64_t) p->samples);
        sql_bind_int64(st, k + 3, (int64_t) p->min_ns);
        sql_bind_int64(st, k + 4, (int64_t) p->avg_ns);
        sql_bind_int64(st, k + 5, (int64_t) p->max_ns);
        sql_bind_int64(st, k + 6, p->max_time_ns);
        sql_bind_int64(st, k + 7, (int64_t) p->violations);
        sql_bind_int64(st, k + 8, (int64_t) p->missed);
        sql_bind_int64(st, k + 9, p->hist_limit_us);
        /* An empty histogram is a zero-length blob, not NULL. */
        sql_bind_blob(st, k + 10, p->hist, p->hist_len);
        if (p->span_length_ns) {
                sql_bind_int64(st, k + 11, p->span_start_ns);
                sql_bind_int64(st, k + 12, (int64_t) p->span_length_ns);
        }
}

static void bind_load(sql_stmt *st, int k, size_t idx, const struct summary_load *ld) {
        sql_bind_int64(st, k + 1, (int64_t) idx);
        sql_bind_text(st, k + 2, ld->generator);
        sql_bind_int64(st, k + 3, (int64_t) ld->up_ns);
        sql_bind_int64(st, k + 4, ld->starts);
        sql_bind_int64(st, k + 5, ld->exits);
}

/* The metrics of every load of iv in order: *l and *m the next one's load and index. */
static const struct summary_metric *next_metric(const struct summary_interval *iv, size_t *l,
                                                size_t *m) {
        while (*m >= iv->loads[*l].nmetrics) {
                ++*l;
                *m = 0;
        }
        return &iv->loads[*l].metrics[(*m)++];
}

static void bind_metric(sql_stmt *st, int k, size_t l, size_t m, const struct summary_metric *x) {
        sql_bind_int64(st, k + 1, (int64_t) l);
        sql_bind_int64(st, k + 2, (int64_t) m);
        sql_bind_text(st, k + 3, x->name);
        sql_bind_text(st, k + 4, x->unit);
        sql_bind_double(st, k + 5, x->value);
}

static size_t metrics_of(const struct summary_interval *iv) {
        size_t total = 0;
        for (size_t k = 0; k < iv->nloads; k++)
                total += iv->loads[k].nmetrics;
        return total;
}

/* ---- loads ----------------------------------------------------------------------------------- */

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

/* ---- SQLite: an interval's rows, ROWS_MAX per statement -------------------------------------- */

static int store_load_rows(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        for (size_t first = 0; first < iv->nloads; first += ROWS_MAX) {
                size_t n = MIN(iv->nloads - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g,
                                     "INSERT INTO interval_loads (interval, " COLS_LOAD ") VALUES ",
                                     1 + NCOLS_LOAD, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        int k = (int) (i * (1 + NCOLS_LOAD));
                        sql_bind_int64(st, k + 1, id);
                        bind_load(st, k + 1, first + i, &iv->loads[first + i]);
                }
                if (r < 0 || (r = farm_step_done(st, "cannot store the loads", g->err)) < 0)
                        return r;
        }
        return 0;
}

static int store_metric_rows(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        size_t total = metrics_of(iv), l = 0, m = 0; /* (l, m): the next metric */
        for (size_t first = 0; first < total; first += ROWS_MAX) {
                size_t n = MIN(total - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(
                        g, "INSERT INTO interval_load_metrics (interval, " COLS_METRIC ") VALUES ",
                        1 + NCOLS_METRIC, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        int k = (int) (i * (1 + NCOLS_METRIC));
                        const struct summary_metric *x = next_metric(iv, &l, &m);
                        sql_bind_int64(st, k + 1, id);
                        bind_metric(st, k + 1, l, m - 1, x);
                }
                if (r < 0 || (r = farm_step_done(st, "cannot store the load metrics", g->err)) < 0)
                        return r;
        }
        return 0;
}

/* The loads of iv and their metrics, and the time each was down. */
static int store_loads(struct ingest *g, int64_t id, const struct summary_interval *iv) {
        int r;
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
        }
        return 0;
}

/* The interval's CPUs from from on (on PostgreSQL those after the ROWS_MAX that go with the
 * interval's statement, with its start). */
static int store_cpus(struct ingest *g, int64_t id, const struct summary_interval *iv,
                      size_t from) {
        static const char *const head[] = {
                "INSERT INTO interval_cpus (interval, " COLS_CPU ") VALUES ",
                "INSERT INTO interval_cpus (interval, start_ns, " COLS_CPU ") VALUES ",
        };
        size_t w = 1 + g->pg + NCOLS_CPU;
        for (size_t first = from; first < iv->ncpus; first += ROWS_MAX) {
                size_t n = MIN(iv->ncpus - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g, head[g->pg], w, n, "", &st);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        int k = (int) (i * w);
                        sql_bind_int64(st, k + 1, id);
                        if (g->pg)
                                sql_bind_int64(st, k + 2, iv->start_ns);
                        bind_cpu(st, k + 1 + g->pg, &iv->cpus[first + i]);
                }
                if (r < 0 ||
                    (r = farm_step_done(st, "cannot store the CPUs of an interval", g->err)) < 0)
                        return r;
        }
        return 0;
}

/* ---- rollups ------------------------------------------------------------------------------- */

struct facts {
        uint64_t max_ns;
        int64_t counted_ns, down_ns;
        struct farm_measure m;
};

/* The generators of iv's day and scenario with it (SQLite): from the fold when iv joins it,
 * else as stored. */
static int gens_sqlite(struct ingest *g, const struct summary_interval *iv, char *gens,
                       size_t size) {
        if (farm_rollup_joins(&g->rollup, g->run.row, iv)) {
                gens_intersect(iv, g->rollup.gens, gens, size);
                return 0;
        }
        sql_reset(g->gens);
        sql_bind_int64(g->gens, 1, g->run.row);
        sql_bind_int64(g->gens, 2, farm_rollup_day(iv->start_ns));
        sql_bind_text(g->gens, 3, iv->scenario ?: "");
        int rc = sql_step(g->gens);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return wfail(g, rc, "cannot read the day's generators");
        gens_intersect(iv, rc == SQL_ROW ? sql_column_text(g->gens, 0) : NULL, gens, size);
        sql_reset(g->gens);
        return 0;
}

/* Adds a stored interval to the fold of its day's rollups. */
static int rollup_add(struct ingest *g, const struct summary_interval *iv, const struct facts *f,
                      const char *gens) {
        struct farm_rollup_facts rf = { (int64_t) f->max_ns, f->counted_ns, f->down_ns,
                                        f->m.min_ratio_pm, f->m.max_missing_ns };
        int r = farm_rollup_add(&g->rollup, g->run.row, iv, &rf, gens);
        if (r == -ENOMEM)
                snprintf(g->err, FARM_ERROR_MAX, "out of memory adding to the day's rollups");
        return r;
}

/* Writes the fold (before the statements that read its rows). */
static int rollup_flush(struct ingest *g) {
        return farm_rollup_flush(g->c, g->pg, &g->rollup, g->now, g->err);
}

/* ---- events -------------------------------------------------------------------------------- */

#define COLS_EVENT "run, event_id, time_ns, type, cpu, value, message, details, received_ns"
#define NCOLS_EVENT 9

static void bind_event(struct ingest *g, sql_stmt *st, int k, const struct summary_event *e) {
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

/* The summary's events before upto, ROWS_MAX per statement; those stored before are left. */
static int store_events(struct ingest *g, size_t upto, struct farm_stored *ret) {
        for (size_t first = 0; first < upto; first += ROWS_MAX) {
                size_t n = MIN(upto - first, (size_t) ROWS_MAX);
                _cleanup_reset_ sql_stmt *st = NULL;
                int r = prepare_rows(g, "INSERT INTO events (" COLS_EVENT ") VALUES ", NCOLS_EVENT,
                                     n, " ON CONFLICT (run, event_id) DO NOTHING", &st);
                for (size_t i = 0; r >= 0 && i < n; i++)
                        bind_event(g, st, (int) (i * NCOLS_EVENT), &g->s->events[first + i]);
                if (r < 0 || (r = farm_step_done(st, "cannot store the events", g->err)) < 0)
                        return r;
                ret->events += (uint64_t) sql_changes(st);
        }
        return 0;
}

/* ---- intervals ----------------------------------------------------------------------------- */

static void sat_add(uint64_t *a, uint64_t b) {
        *a = *a > UINT64_MAX - b ? UINT64_MAX : *a + b;
}

#define COLS_INTERVAL                                                                     \
        "run, seq, start_ns, length_ns, scenario, max_ns, samples, violations, max_cpu, " \
        "max_time_ns, received_ns, m_start_ns, m_end_ns, min_ratio_pm, min_ratio_cpu, "   \
        "counted_ns, missing_ns"
static const char *const types_interval[] = { "bigint", "bigint", "bigint", "bigint", "text",
                                              "bigint", "bigint", "bigint", "bigint", "bigint",
                                              "bigint", "bigint", "bigint", "bigint", "bigint",
                                              "bigint", "bigint" };
#define NCOLS_INTERVAL ELEMENTSOF(types_interval)

/* The interval's row, parameters 1 to 17. */
static void bind_interval(struct ingest *g, sql_stmt *st, const struct summary_interval *iv,
                          const struct facts *f) {
        uint64_t samples = 0, violations = 0;
        int64_t max_cpu = 0, max_time = iv->start_ns;
        for (size_t c = 0; c < iv->ncpus; c++) {
                const struct summary_cpu *p = &iv->cpus[c];
                sat_add(&samples, p->samples);
                sat_add(&violations, p->violations);
                if (c == 0 || p->max_ns > iv->cpus[max_cpu].max_ns) {
                        max_cpu = (int64_t) c;
                        max_time = p->max_time_ns;
                }
        }
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
}

/* Inserts the interval's row (SQLite): its id, or 0 when (run, seq) is stored already. */
static int insert_interval(struct ingest *g, const struct summary_interval *iv,
                           const struct facts *f, int64_t *ret_id) {
        sql_bind_int64(g->stored, 1, g->run.row);
        sql_bind_int64(g->stored, 2, (int64_t) iv->seq);
        int r = sql_step(g->stored);
        sql_reset(g->stored);
        if (r < 0)
                return wfail(g, r, "cannot look for the interval");
        *ret_id = 0;
        if (r == SQL_ROW)
                return 0;

        bind_interval(g, g->interval, iv, f);
        r = sql_step(g->interval);
        if (r == SQL_ROW)
                *ret_id = sql_column_int64(g->interval, 0);
        sql_reset(g->interval);
        return r < 0 ? wfail(g, r, "cannot store an interval") : 0;
}

/* ", name AS (...)": n rows of the interval iv of the statement below into table (with its
 * columns), their values from parameter *p on (moved past them); nothing for none. */
static void put_child(FILE *f, const char *name, const char *table, size_t ncols, size_t n, int *p,
                      const char *const *types) {
        if (n == 0)
                return;
        fprintf(f, ", %s AS (INSERT INTO %s SELECT iv.id, ?3, v.* FROM iv, (VALUES ", name, table);
        put_rows(f, ncols, n, *p, types);
        fputs(") v)", f);
        *p += (int) (n * ncols);
}

/* The rows of an interval on PostgreSQL, one statement of this shape: the interval's row unless
 * (run, seq) is stored (unique by them: the key of a partitioned table holds the start too, so
 * that it is looked for here, under the machine's row lock), and with the id it got its first
 * ROWS_MAX CPUs, its loads, load metrics and loads' down times, all carrying its start, which
 * chooses their partition; with the upload's last events when g->ev_n (the interval's statement
 * is answered anyway, the upload's last one then is not, so that it goes with the commit).  Its
 * one row: the id (NULL when the interval was stored already), the generators of its day and
 * scenario so far (parameters 18 and 19) and how many of the events it stored.  Parameters:
 * the interval's 1 to 17, then the rows' from 20 on. */
static int prepare_interval_pg(struct ingest *g, const struct summary_interval *iv, size_t ndowns,
                               sql_stmt **ret) {
        size_t nev = g->ev_n;
        size_t nmetrics = metrics_of(iv);
        int p = 20;
        char key[64];
        size_t ncpus = MIN(iv->ncpus, (size_t) ROWS_MAX);
        snprintf(key, sizeof(key), "interval %zu %zu %zu %zu %zu", ncpus, iv->nloads, nmetrics,
                 ndowns, nev);
        int r = prepare_known(g, key, ret);
        if (r < 0 || *ret)
                return r;
        struct sqlbuf b;
        if (sqlbuf_open(&b) < 0)
                return -ENOMEM;
        fputs("WITH iv AS (INSERT INTO intervals (" COLS_INTERVAL ") SELECT ", b.f);
        for (size_t k = 0; k < NCOLS_INTERVAL; k++)
                fprintf(b.f, "%s?%zu::%s", k ? ", " : "", k + 1, types_interval[k]);
        fputs(" WHERE NOT EXISTS (SELECT 1 FROM intervals WHERE run = ?1 AND seq = ?2) "
              "ON CONFLICT DO NOTHING RETURNING id)",
              b.f);
        put_child(b.f, "c", "interval_cpus (interval, start_ns, " COLS_CPU ")", NCOLS_CPU, ncpus,
                  &p, types_cpu);
        put_child(b.f, "l", "interval_loads (interval, start_ns, " COLS_LOAD ")", NCOLS_LOAD,
                  iv->nloads, &p, types_load);
        put_child(b.f, "m", "interval_load_metrics (interval, start_ns, " COLS_METRIC ")",
                  NCOLS_METRIC, nmetrics, &p, types_metric);
        if (ndowns) {
                fputs(", d AS (INSERT INTO load_downs (run, seq, load_idx, generator, start_ns, "
                      "length_ns, scenario, down_ns) SELECT ?1, ?2, v.l, v.g, ?3, ?4, ?5, v.d "
                      "FROM iv, (VALUES ",
                      b.f);
                put_rows(b.f, NCOLS_DOWN, ndowns, p, types_down);
                fputs(") v (l, g, d))", b.f);
                p += (int) (ndowns * NCOLS_DOWN);
        }
        if (nev) {
                fputs(", e AS (INSERT INTO events (" COLS_EVENT ") VALUES ", b.f);
                put_rows(b.f, NCOLS_EVENT, nev, p, NULL);
                fputs(" ON CONFLICT (run, event_id) DO NOTHING RETURNING 1)", b.f);
        }
        fprintf(b.f,
                " SELECT (SELECT id FROM iv), (SELECT gens_all FROM run_day_scenarios WHERE "
                "run = ?1 AND day = ?18 AND scenario = ?19), %s",
                nev ? "(SELECT count(*) FROM e)" : "0");
        return prepare_shape(g, key, &b, ret);
}

/* Stores the interval's rows on PostgreSQL: *ret_id its id, or 0 when it was stored already;
 * gens the generators of its day and scenario with it, f->down_ns the time its loads were
 * down. */
static int insert_interval_pg(struct ingest *g, const struct summary_interval *iv, struct facts *f,
                              int64_t *ret_id, char *gens, size_t size) {
        _cleanup_reset_ sql_stmt *st = NULL;
        uint64_t downs[SUMMARY_MAX_LOADS], down = 0;
        size_t ndowns = 0, l = 0, m = 0, nmetrics = metrics_of(iv);
        for (size_t i = 0; i < iv->nloads && i < SUMMARY_MAX_LOADS; i++) {
                downs[i] = load_down_ns(iv, &iv->loads[i]);
                ndowns += downs[i] > 0;
                down += downs[i];
        }
        int r = prepare_interval_pg(g, iv, ndowns, &st);
        if (r < 0)
                return r;
        bind_interval(g, st, iv, f);
        sql_bind_int64(st, 18, farm_rollup_day(iv->start_ns));
        sql_bind_text(st, 19, iv->scenario ?: "");
        int k = 19;
        for (size_t i = 0; i < iv->ncpus && i < ROWS_MAX; i++, k += (int) NCOLS_CPU)
                bind_cpu(st, k, &iv->cpus[i]);
        for (size_t i = 0; i < iv->nloads; i++, k += (int) NCOLS_LOAD)
                bind_load(st, k, i, &iv->loads[i]);
        for (size_t i = 0; i < nmetrics; i++, k += (int) NCOLS_METRIC) {
                const struct summary_metric *x = next_metric(iv, &l, &m);
                bind_metric(st, k, l, m - 1, x);
        }
        for (size_t i = 0; i < iv->nloads && i < SUMMARY_MAX_LOADS; i++) {
                if (downs[i] == 0)
                        continue;
                sql_bind_int64(st, k + 1, (int64_t) i);
                sql_bind_text(st, k + 2, iv->loads[i].generator);
                sql_bind_int64(st, k + 3, (int64_t) downs[i]);
                k += (int) NCOLS_DOWN;
        }
        for (size_t i = 0; i < g->ev_n; i++, k += NCOLS_EVENT)
                bind_event(g, st, k, &g->s->events[g->ev_first + i]);
        *ret_id = 0;
        r = sql_step(st);
        if (r == SQL_ROW && !sql_column_null(st, 0)) {
                *ret_id = sql_column_int64(st, 0);
                gens_intersect(iv, sql_column_null(st, 1) ? NULL : sql_column_text(st, 1), gens,
                               size);
        }
        if (r == SQL_ROW)
                g->ev_stored = (uint64_t) sql_column_int64(st, 2);
        f->down_ns = (int64_t) down;
        return r == SQL_ROW ? 0 : wfail(g, r < 0 ? r : -EIO, "cannot store an interval");
}

/* Adds the CPUs of a stored interval to the sums of its day and scenario (each CPU's and all
 * CPUs'), writing them into the run's rows whenever they grow full (after the fold of the day
 * rollups: the sums' statements read the day's row). */
static int day_hists_add(struct ingest *g, const struct summary_interval *iv) {
        int64_t day = farm_rollup_day(iv->start_ns);
        for (size_t i = 0; i < iv->ncpus; i++) {
                const struct summary_cpu *p = &iv->cpus[i];
                int r = 0;
                for (int all = 0; r >= 0 && all < 2; all++)
                        r = farm_day_hists_add_row(&g->day_hists, day, iv->scenario ?: "",
                                                   all ? -1 : (int64_t) p->cpu, p->hist_limit_us,
                                                   p->hist, p->hist_len, p->samples, p->min_ns,
                                                   p->max_ns, p->max_time_ns, p->violations);
                if (r == -ENOMEM)
                        snprintf(g->err, FARM_ERROR_MAX, "out of memory merging histograms");
                if (r >= 0 && farm_day_hists_full(&g->day_hists) && (r = rollup_flush(g)) >= 0)
                        r = farm_day_hists_write(g->c, g->run.row, &g->day_hists, g->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Stores one interval with its CPUs and loads; 1 if stored, 0 if it was already there. */
static int store_interval(struct ingest *g, const struct summary_interval *iv) {
        char gens[FARM_ROLLUP_GENS_MAX];
        struct facts f = {};
        int64_t id, end;
        bool joins = farm_rollup_joins(&g->rollup, g->run.row, iv);
        int r;

        for (size_t c = 0; c < iv->ncpus; c++)
                f.max_ns = MAX(f.max_ns, iv->cpus[c].max_ns);
        farm_measure_interval(iv, g->run.probed, g->run.nprobed, g->run.probe_ns, &f.m);
        /* A fold that iv does not join is written first: iv's statements read its rows. */
        if ((r = counted_of(g, iv, &f.m, &f.counted_ns)) < 0 ||
            (!joins && (r = rollup_flush(g)) < 0))
                return r;
        if (g->pg) {
                if ((r = insert_interval_pg(g, iv, &f, &id, gens, sizeof(gens))) < 0 || id == 0)
                        return r;
                /* Joining, its day's generators are the fold's (those stored are older). */
                if (joins)
                        gens_intersect(iv, g->rollup.gens, gens, sizeof(gens));
                r = store_cpus(g, id, iv, ROWS_MAX);
        } else {
                if ((r = insert_interval(g, iv, &f, &id)) < 0 || id == 0)
                        return r; /* id 0: (run, seq) is stored, the same interval sent again */
                uint64_t down = 0;
                for (size_t l = 0; l < iv->nloads; l++)
                        down += load_down_ns(iv, &iv->loads[l]);
                f.down_ns = (int64_t) down;
                if ((r = store_cpus(g, id, iv, 0)) >= 0 && (r = store_loads(g, id, iv)) >= 0)
                        r = gens_sqlite(g, iv, gens, sizeof(gens));
        }
        if (r >= 0)
                r = rollup_add(g, iv, &f, gens);
        if (r < 0 || (r = store_overlaps(g)) < 0)
                return r;
        /* Its histograms join those of its day (written with the upload's last rows, or now
         * when the sums grew large). */
        if ((r = day_hists_add(g, iv)) < 0)
                return r;
        for (size_t c = 0; c < iv->ncpus; c++)
                sat_add(&g->violations, iv->cpus[c].violations);
        /* Which interval is the machine's latest (its worst case is /metrics' "last"): one
         * stamped to start after it arrived counts as starting when it arrived, so that a clock
         * ahead does not hold the place of the data that comes after it. */
        int64_t start = MIN(iv->start_ns, g->now);
        if (start >= g->latest_start_ns) {
                g->latest_start_ns = start;
                g->latest_max_ns = (int64_t) f.max_ns;
        }
        end = iv->start_ns + (int64_t) iv->length_ns;
        g->run.first_start = MIN(g->run.first_start, iv->start_ns);
        g->run.last_end = MAX(g->run.last_end, end);
        g->run.max_len = MAX(g->run.max_len, (int64_t) iv->length_ns);
        return 1;
}

/* ---- the summary --------------------------------------------------------------------------- */

static int prepare_all(struct ingest *g) {
        const struct {
                sql_stmt **st;
                const char *sql;
                bool pg; /* used on PostgreSQL too */
        } list[] = {
                { &g->stored, "SELECT 1 FROM intervals WHERE run = ? AND seq = ?", false },
                { &g->interval,
                  "INSERT INTO intervals (" COLS_INTERVAL ") "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT DO NOTHING RETURNING id",
                  false },
                { &g->gens,
                  "SELECT gens_all FROM run_day_scenarios WHERE run = ? AND day = ? AND "
                  "scenario = ?",
                  false },
                { &g->down,
                  "INSERT INTO load_downs (run, seq, load_idx, generator, start_ns, length_ns, "
                  "scenario, down_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  false },
                { &g->cand_runs,
                  "SELECT id, max_length_ns FROM runs WHERE machine_id = ?1 AND "
                  "last_end_ns > ?2 AND first_start_ns < ?3 AND id <> ?4",
                  false },
                { &g->cand_ivs,
                  "SELECT seq, start_ns, length_ns, m_start_ns, m_end_ns FROM intervals "
                  "WHERE run = ?1 AND start_ns > ?2 AND start_ns < ?3",
                  false },
                { &g->overlap,
                  "INSERT INTO \"overlaps\" (machine_id, run_a, run_b, start_ns, "
                  "end_ns, received_ns) VALUES (?, ?, ?, ?, ?, ?)",
                  true },
        };
        for (size_t i = 0; i < ELEMENTSOF(list); i++) {
                if (g->pg && !list[i].pg)
                        continue;
                int r = farm_prepare(g->c, list[i].sql, list[i].st, g->err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The machine's counters (parameters 1 to 8 after base, bound by bind_machine()). */
#define SQL_UPDATE_MACHINE(ID, NOW, HOST, MODEL, CPUS, VIOL, START, WORST)                      \
        "UPDATE machines SET last_report_ns = greatest(coalesce(last_report_ns, 0), " NOW "), " \
        "hostname = " HOST ", cpu_model = " MODEL ", cpus = " CPUS                              \
        ", " /* Saturating at 2^63-1 (an addition past it fails on PostgreSQL). */              \
        "violations_total = CASE WHEN " VIOL " > 9223372036854775807 - violations_total "       \
        "THEN 9223372036854775807 ELSE violations_total + " VIOL " END, "                       \
        "last_worst_ns = CASE WHEN " START " >= coalesce(last_interval_start_ns, " START ") "   \
        "THEN " WORST " ELSE last_worst_ns END, "                                               \
        "last_interval_start_ns = CASE WHEN " START " IS NULL THEN last_interval_start_ns "     \
        "ELSE greatest(coalesce(last_interval_start_ns, " START "), " START ") END "            \
        "WHERE id = " ID

static void bind_machine(struct ingest *g, sql_stmt *upd, int base) {
        const struct summary *s = g->s;
        sql_bind_text(upd, base + 1, s->machine.id);
        sql_bind_int64(upd, base + 2, g->now);
        sql_bind_text(upd, base + 3, s->machine.hostname);
        sql_bind_text(upd, base + 4, s->machine.cpu_model);
        sql_bind_int64(upd, base + 5, s->machine.cpus);
        sql_bind_int64(upd, base + 6, (int64_t) MIN(g->violations, (uint64_t) INT64_MAX));
        if (g->latest_start_ns >= 0) {
                sql_bind_int64(upd, base + 7, g->latest_start_ns);
                sql_bind_int64(upd, base + 8, g->latest_max_ns);
        }
}

static int update_machine(struct ingest *g) {
        _cleanup_reset_ sql_stmt *upd = NULL;
        int r = farm_prepare(g->c,
                             SQL_UPDATE_MACHINE("?1", "?2", "?3", "?4", "?5", "?6", "?7", "?8"),
                             &upd, g->err);
        if (r < 0)
                return r;
        bind_machine(g, upd, 0);
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

static int prepare_upload_pg(struct ingest *g, bool run, sql_stmt **ret) {
        char key[64];
        snprintf(key, sizeof(key), "upload %d", run);
        int r = prepare_known(g, key, ret);
        if (r < 0 || *ret)
                return r;
        struct sqlbuf b;
        if (sqlbuf_open(&b) < 0)
                return -ENOMEM;
        fputs("WITH u AS (INSERT INTO uploads (run, seq, received_ns, intervals, events) "
              "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run, seq) DO NOTHING)",
              b.f);
        if (run)
                fputs(", r AS (" SQL_UPDATE_RUN("?6", "?7", "?8", "?9") ")", b.f);
        fputs(" " SQL_UPDATE_MACHINE("?10", "?11", "?12", "?13", "?14", "?15", "?16", "?17"), b.f);
        return prepare_shape(g, key, &b, ret);
}

/* The upload's last statement on PostgreSQL, answered with the commit: the upload's row, the
 * run's span if it moved, the machine's counters.  Parameters: the upload's 1 to 5, the run's 6
 * to 9, the machine's 10 to 17. */
static int finish_pg(struct ingest *g, const struct farm_stored *res) {
        _cleanup_reset_ sql_stmt *st = NULL;
        bool run = run_moved(g);
        int r = prepare_upload_pg(g, run, &st);
        if (r < 0)
                return r;

        sql_bind_int64(st, 1, g->run.row);
        sql_bind_int64(st, 2, (int64_t) g->s->seq);
        sql_bind_int64(st, 3, g->now);
        sql_bind_int64(st, 4, (int64_t) res->intervals);
        sql_bind_int64(st, 5, (int64_t) res->events);
        if (run)
                bind_run(g, st, 5);
        bind_machine(g, st, 9);
        return farm_step_done(st, "cannot store the upload", g->err);
}

/* The machine's row, which must not be revoked: on PostgreSQL locked until the commit, so that
 * the uploads of one machine through any server of the farm are stored one after the other (what
 * an interval counts depends on those stored before it), and a revocation waits for them.  Then
 * its run's row, found or made, in a statement of its own: one that waited for the lock sees
 * what the upload before it stored. */
static int lock_machine_sqlite(struct ingest *g) {
        _cleanup_reset_ sql_stmt *mach = NULL;
        int r = farm_prepare(g->c, "SELECT 1 FROM machines WHERE id = ? AND revoked_ns IS NULL",
                             &mach, g->err);
        if (r < 0)
                return r;
        sql_bind_text(mach, 1, g->s->machine.id);
        int rc = sql_step(mach);
        if (rc == SQL_DONE)
                return -EACCES;
        if (rc != SQL_ROW)
                return farm_fail(g->c, rc, "cannot look up the machine", g->err);
        return store_run(g);
}

/* On PostgreSQL in one round trip: the lock taken by a statement without rows (the aggregate
 * reads every row locked, HAVING lets none out), the run looked for by the next one, which
 * also says whether the machine may upload.  The lock's statement sets the transaction's
 * plan_cache_mode (SET LOCAL without a statement of its own): the upload's statements are a
 * few shapes run thousands of times, and the look-up of overlapping intervals, whose custom
 * plan PostgreSQL preferred for a partitioned table, was otherwise planned again for every
 * upload; its generic plan prunes the months at run time. */
static int lock_machine_pg(struct ingest *g) {
        _cleanup_reset_ sql_stmt *lock = NULL, *sel = NULL;
        int r = farm_prepare(g->c,
                             "SELECT count(*) FROM (SELECT set_config('plan_cache_mode', "
                             "'force_generic_plan', true) FROM machines WHERE id = ? AND "
                             "revoked_ns IS NULL FOR UPDATE) l HAVING count(*) < 0",
                             &lock, g->err);
        if (r < 0 ||
            (r = farm_prepare(g->c,
                              "SELECT r.id, r.boot_id, r.kernel_release, r.start_ns, r.release, "
                              "r.probed_cpus, r.probe_interval_ns, r.max_length_ns, "
                              "r.first_start_ns, r.last_end_ns, EXISTS (SELECT 1 FROM machines "
                              "WHERE id = ?1 AND revoked_ns IS NULL) FROM (SELECT 1) one "
                              "LEFT JOIN runs r ON r.machine_id = ?1 AND r.run_id = ?2",
                              &sel, g->err)) < 0)
                return r;
        sql_bind_text(lock, 1, g->s->machine.id);
        if ((r = farm_step_done(lock, "cannot lock the machine", g->err)) < 0)
                return r;
        sql_bind_text(sel, 1, g->s->machine.id);
        sql_bind_int64(sel, 2, g->s->run.id);
        if ((r = sql_send(sel)) < 0)
                return farm_fail(g->c, r, "cannot look up the machine", g->err);
        if (g->s->nintervals > 0 && (r = send_scan_first(g)) < 0)
                return r;
        int rc = sql_step(sel);
        if (rc != SQL_ROW)
                return farm_fail(g->c, rc == SQL_DONE ? -EIO : rc, "cannot look up the machine",
                                 g->err);
        if (!sql_column_int(sel, 10))
                return -EACCES;
        return run_of(g, sel, rc);
}

int farm_ingest_summary(sql_conn *c, const struct summary *s, int64_t now_ns,
                        struct farm_stored *ret, char *err) {
        struct ingest g = { .c = c,
                            .pg = sql_dialect(c) == SQL_PG,
                            .err = err,
                            .s = s,
                            .now = now_ns,
                            .latest_start_ns = -1 };
        int r;

        /* The token may have been revoked since it was checked: the transaction decides.
         * The content is stored even when the idempotency key is known: an uploader that did
         * not hear our answer may retry with a larger batch under the same key, and what it
         * adds must not be lost.  Intervals and events are unique per run, so whatever was
         * stored before is stored once. */
        if ((r = g.pg ? lock_machine_pg(&g) : lock_machine_sqlite(&g)) < 0 ||
            (r = prepare_all(&g)) < 0)
                goto out;
        /* On PostgreSQL the last ROWS_MAX events go with the last interval's statement. */
        size_t last = g.pg && s->nintervals && s->nevents ? (s->nevents - 1) / ROWS_MAX * ROWS_MAX
                                                          : s->nevents;
        for (size_t i = 0; i < s->nintervals; i++) {
                if (i + 1 == s->nintervals) {
                        g.ev_first = last;
                        g.ev_n = s->nevents - last;
                }
                if ((r = store_interval(&g, &s->intervals[i])) < 0)
                        goto out;
                ret->intervals += (uint64_t) r;
                /* The flight recorder's captures it carries (server-trace.c). */
                if ((r = farm_store_traces(c, g.run.row, &s->intervals[i], err)) < 0)
                        goto out;
        }
        if ((r = store_events(&g, last, ret)) < 0 || (r = rollup_flush(&g)) < 0 ||
            (r = farm_day_hists_write(c, g.run.row, &g.day_hists, err)) < 0 ||
            (r = farm_inventories_store(c, g.run.row, s, now_ns, err)) < 0)
                goto out;
        ret->events += g.ev_stored;
        if (g.pg)
                r = finish_pg(&g, ret);
        else if ((r = store_upload(&g, ret)) >= 0 && (r = update_run(&g)) >= 0)
                r = update_machine(&g);
        if (r < 0)
                goto out;
        ret->dup_intervals = s->nintervals - ret->intervals;
        ret->dup_events = s->nevents - ret->events;
        ret->duplicate = ret->intervals == 0 && ret->events == 0;
out:
        ingest_done(&g);
        return r;
}
