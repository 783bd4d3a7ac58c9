/* SPDX-License-Identifier: MIT */
/* The per-day histogram cache (hist_days): filled by the queries that need a whole past day
 * and by a background thread, and the reading of a window's days from it or the intervals. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "day-hists.h"
#include "db-internal.h"
#include "hist.h"
#include "log.h"
#include "macro.h"
#include "hist-cache.h"
#include "merge.h"
#include "timeutil.h"
#include "worker.h"

/* What the histogram cache holds in memory: the rows of one day (a day above it is not cached),
 * and of the days merged before they are written. */
#define CACHE_DAY_BYTES_MAX ((size_t) 24 << 20)
#define CACHE_BATCH_BYTES_MAX ((size_t) 8 << 20)

/* A cache row ready to be written. */
struct cache_row {
        int64_t run, day;
        char scenario[64];
        int cpu;
        uint64_t samples, min_ns, max_ns, violations;
        int64_t max_time_ns;
        uint32_t limit_us;
        uint8_t *hist;
        size_t len;
};

/* The merged days waiting to be written, with the interval count each was merged from. */
struct fill_batch {
        struct cache_row *rows;
        size_t nrows, arows, bytes; /* bytes: of the rows' histograms */
        struct {
                int64_t run, day, intervals;
                size_t first_row, nrows;
        } days[32];
        size_t ndays;
};

static void batch_clear(struct fill_batch *b) {
        for (size_t i = 0; i < b->nrows; i++)
                free(b->rows[i].hist);
        b->nrows = 0;
        b->bytes = 0;
        b->ndays = 0;
}

/* The CPU rows of a run's intervals in [?2, ?3). */
static const char *const sql_day_cpus[] =
        SQL_BY_CPUS("SELECT coalesce(i.scenario, ''), c.cpu, c.hist_limit_us, c.hist, "
                    "c.samples, c.min_ns, c.max_ns, c.max_time_ns, c.violations FROM intervals i ",
                    " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3");

/* The cache of merged histograms per (run, UTC day, scenario, CPU), hist_days (schema 4).
 *
 * Why filled lazily and not kept at ingest: keeping it at ingest means decoding, merging and
 * re-encoding one cached histogram per CPU of every interval stored (8 for a one-minute
 * interval of an 8-CPU machine), under the writer's lock that every upload waits for, for
 * histograms that are mostly never asked for.  Filled by the first query that needs a whole
 * past day, it costs that query once per run and day (a day of one-minute intervals of 8 CPUs
 * is 11,520 small blobs, tens of milliseconds), and the store path only deletes the day's rows
 * when an interval of it arrives late (server-ingest.c: one DELETE by primary key,
 * which finds nothing for the current day, never cached).  The current UTC day and the partial
 * days at the edges of a window are read from the intervals.
 *
 * Filling does not hold up uploads: a day is merged on the reading connection, in one read
 * transaction together with the day's interval count from run_days (kept in the transaction
 * that stores each interval), and written under the writer's lock only if that count is still
 * the same, so a cached day never misses an interval stored meanwhile; it is merged again by a
 * later query otherwise.  Intervals are never removed, so an equal count is the same set. */
/* The merge of one run and day: its scenarios (a key is the scenario's index and the CPU) and
 * the rows made of the merged keys so far. */
struct day_merge {
        const struct day_ref *ref;
        struct fill_batch *b;
        char **scenarios;
        size_t nscenarios, first_row, first_bytes;
};

static int day_scenario(struct day_merge *m, const char *scenario) {
        for (size_t i = 0; i < m->nscenarios; i++)
                if (strcmp(m->scenarios[i], scenario) == 0)
                        return (int) i;
        char **v = realloc(m->scenarios, (m->nscenarios + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        m->scenarios = v;
        if (!(v[m->nscenarios] = strdup(scenario)))
                return -ENOMEM;
        return (int) m->nscenarios++;
}

/* A merged (scenario, CPU) of the day becomes a cache row; a day whose rows would take more
 * than CACHE_DAY_BYTES_MAX is not cached (its queries read its intervals). */
static int day_key_done(void *userdata, uint64_t key, struct farm_acc *c) {
        struct day_merge *m = userdata;
        struct fill_batch *b = m->b;
        /* Counts that saturated (stored before the schema bounded them) would not read back
         * as a valid histogram: such a day is merged from its intervals each time. */
        if (c->samples >= INT64_MAX)
                return -E2BIG;
        if (b->nrows == b->arows) {
                size_t na = b->arows ? b->arows * 2 : 256;
                struct cache_row *v = realloc(b->rows, na * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                b->rows = v;
                b->arows = na;
        }
        struct cache_row *x = &b->rows[b->nrows];
        *x = (struct cache_row){ .run = m->ref->run,
                                 .day = m->ref->day,
                                 .cpu = (int) (key % FARM_CPU_MAX),
                                 .samples = c->samples,
                                 .min_ns = c->min_ns,
                                 .max_ns = c->max_ns,
                                 .violations = c->violations,
                                 .max_time_ns = c->max_time_ns,
                                 .limit_us = c->h.limit_us };
        snprintf(x->scenario, sizeof(x->scenario), "%s", m->scenarios[key / FARM_CPU_MAX]);
        int r = hist_encode(c->h.limit_us, c->h.counts, &x->hist, &x->len);
        if (r < 0)
                return r;
        b->nrows++;
        b->bytes += x->len;
        return b->bytes - m->first_bytes > CACHE_DAY_BYTES_MAX ? -E2BIG : 0;
}

/* One pass over the day's rows in a read transaction of its own; -ESTALE when an interval was
 * stored since the first pass (the day is merged again by a later query). */
static int merge_day_pass(farm_db *db, struct day_merge *m, struct farm_merge_set *set,
                          int64_t *intervals, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *sel = NULL;
        const struct day_ref *ref = m->ref;
        int r, rc;

        if ((r = farm_prepare(c, "SELECT intervals FROM run_days WHERE run = ? AND day = ?", &cnt,
                              err)) < 0 ||
            (r = farm_prepare(c, sql_day_cpus[sql_dialect(c)], &sel, err)) < 0)
                return r;
        if ((r = sql_begin(c, SQL_TXN_SNAPSHOT)) < 0)
                return farm_fail(c, r, "cannot begin reading", err);
        sql_bind_int64(cnt, 1, ref->run);
        sql_bind_int64(cnt, 2, ref->day);
        int64_t n = (rc = sql_step(cnt)) == SQL_ROW ? sql_column_int64(cnt, 0) : -1;
        if (n < 0 || (*intervals >= 0 && n != *intervals))
                r = -ESTALE;
        *intervals = n;
        sql_bind_int64(sel, 1, ref->run);
        sql_bind_int64(sel, 2, ref->day * FARM_DAY_NS);
        sql_bind_int64(sel, 3, (ref->day + 1) * FARM_DAY_NS);
        while (r >= 0 && (rc = sql_step(sel)) == SQL_ROW) {
                int64_t cpu = sql_column_int64(sel, 1);
                const char *why = NULL;
                if (cpu < 0 || cpu >= FARM_CPU_MAX) {
                        r = farm_failf(farm_of(c), -EBADMSG, err, "interval CPU %lld out of range",
                                       (long long) cpu);
                        break;
                }
                int si = day_scenario(m, sql_column_text(sel, 0) ?: "");
                size_t blob_len;
                const void *blob = sql_column_blob(sel, 3, &blob_len);
                r = si < 0 ? si
                           : farm_merge_set_add(set, (uint64_t) si * FARM_CPU_MAX + (uint64_t) cpu,
                                                (uint32_t) sql_column_int64(sel, 2), blob, blob_len,
                                                (uint64_t) sql_column_int64(sel, 4),
                                                (uint64_t) sql_column_int64(sel, 5),
                                                (uint64_t) sql_column_int64(sel, 6),
                                                sql_column_int64(sel, 7),
                                                (uint64_t) sql_column_int64(sel, 8), &why);
                if (r < 0 && r != -ENOMEM)
                        r = farm_failf(db, r, err, "stored histogram of run %lld, CPU %lld: %s",
                                       (long long) ref->run, (long long) cpu, why ?: "bad");
        }
        if (r >= 0 && rc != SQL_DONE)
                r = farm_fail(c, rc, "cannot read the intervals of a day", err);
        sql_rollback(c);
        return r < 0 ? r : 0;
}

static int merge_day(farm_db *db, const struct day_ref *ref, struct fill_batch *b, char *err) {
        struct day_merge m = { .ref = ref, .b = b, .first_row = b->nrows, .first_bytes = b->bytes };
        struct farm_merge_set *set = NULL;
        int64_t intervals = -1;
        int r = farm_merge_set_new(FARM_MERGE_BUDGET_BYTES, false, &set);
        /* Passes until every (scenario, CPU) is merged: one, unless the day's histograms do
         * not fit the budget at once. */
        while (r >= 0) {
                r = merge_day_pass(db, &m, set, &intervals, err);
                if (r >= 0)
                        r = farm_merge_set_finish(set, day_key_done, &m);
                if (r <= 0)
                        break;
        }
        farm_merge_set_free(set);
        for (size_t i = 0; i < m.nscenarios; i++)
                free(m.scenarios[i]);
        free(m.scenarios);
        if (r == -ESTALE || r == -E2BIG || (r >= 0 && intervals < 0)) {
                /* Stored meanwhile, too large to cache, or gone: not cached now. */
                for (size_t i = m.first_row; i < b->nrows; i++)
                        free(b->rows[i].hist);
                b->nrows = m.first_row;
                b->bytes = m.first_bytes;
                return 0;
        }
        if (r >= 0) {
                b->days[b->ndays].run = ref->run;
                b->days[b->ndays].day = ref->day;
                b->days[b->ndays].intervals = intervals;
                b->days[b->ndays].first_row = m.first_row;
                b->days[b->ndays++].nrows = b->nrows - m.first_row;
        }
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging a day");
        return r;
}

/* Writes the merged days of the batch whose interval count is still the one they were merged
 * from, in one transaction under the writer's lock (a few inserts: uploads hardly wait). */
/* The day's interval count: on PostgreSQL its rollup row is locked against the uploads of
 * every server until the commit, so that an interval stored meanwhile either shows in the
 * count or deletes the rows written here once they are committed (the store path drops the
 * day's cache after it updated the rollup). */
static const char *const sql_day_count[] = {
        [SQL_SQLITE] = "SELECT intervals FROM run_days WHERE run = ? AND day = ?",
        [SQL_PG] = "SELECT intervals FROM run_days WHERE run = ? AND day = ? FOR SHARE",
};

/* A write transaction that, on PostgreSQL, does not wait for the lock of the staff's changes
 * (the cache is no change of theirs). */
static int farm_begin_fill(sql_conn *c, char *err) {
        int r = sql_begin(c, SQL_TXN_WRITE);
        return r < 0 ? farm_fail(c, r, "cannot begin a transaction", err) : 0;
}

static int write_batch(farm_db *db, struct fill_batch *b, char *err) {
        if (b->ndays == 0)
                return 0;
        _cleanup_release_ sql_conn *c = farm_writer(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *chk = NULL, *ins = NULL;
        int r;

        if ((r = farm_prepare(c, sql_day_count[sql_dialect(c)], &cnt, err)) < 0 ||
            (r = farm_prepare(c, "SELECT 1 FROM hist_days WHERE run = ? AND day = ?", &chk, err)) <
                    0 ||
            (r = farm_prepare(c,
                              "INSERT INTO hist_days (run, day, scenario, cpu, samples, "
                              "min_ns, max_ns, max_time_ns, violations, hist_limit_us, hist) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                              "ON CONFLICT DO NOTHING",
                              &ins, err)) < 0 ||
            (r = farm_begin_fill(c, err)) < 0)
                return r;
        for (size_t d = 0; r >= 0 && d < b->ndays; d++) {
                sql_reset(cnt);
                sql_reset(chk);
                sql_bind_int64(cnt, 1, b->days[d].run);
                sql_bind_int64(cnt, 2, b->days[d].day);
                sql_bind_int64(chk, 1, b->days[d].run);
                sql_bind_int64(chk, 2, b->days[d].day);
                if (sql_step(cnt) != SQL_ROW || sql_column_int64(cnt, 0) != b->days[d].intervals ||
                    sql_step(chk) != SQL_DONE)
                        continue; /* stored meanwhile, or cached by another query */
                for (size_t i = b->days[d].first_row;
                     r >= 0 && i < b->days[d].first_row + b->days[d].nrows; i++) {
                        const struct cache_row *x = &b->rows[i];
                        sql_bind_int64(ins, 1, x->run);
                        sql_bind_int64(ins, 2, x->day);
                        sql_bind_text(ins, 3, x->scenario);
                        sql_bind_int64(ins, 4, x->cpu);
                        sql_bind_int64(ins, 5, (int64_t) x->samples);
                        sql_bind_int64(ins, 6, (int64_t) x->min_ns);
                        sql_bind_int64(ins, 7, (int64_t) x->max_ns);
                        sql_bind_int64(ins, 8, x->max_time_ns);
                        sql_bind_int64(ins, 9, (int64_t) x->violations);
                        sql_bind_int64(ins, 10, x->limit_us);
                        sql_bind_blob(ins, 11, x->hist, (int) x->len);
                        r = farm_step_done(ins, "cannot cache a histogram", err);
                }
        }
        sql_reset(cnt);
        sql_reset(chk);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0)
                sql_rollback(c);
        return r;
}

/* Fills the cache for the whole past days of refs that lack it. */
int day_refs_fill(farm_db *db, const struct day_refs *refs, char *err) {
        struct fill_batch b = {};
        int r = 0;
        for (size_t i = 0; r >= 0 && i < refs->n; i++) {
                if (!refs->v[i].whole || refs->v[i].cached || refs->v[i].all_cpus)
                        continue;
                r = merge_day(db, &refs->v[i], &b, err);
                if (r >= 0 && (b.ndays == ELEMENTSOF(b.days) || b.bytes > CACHE_BATCH_BYTES_MAX)) {
                        r = write_batch(db, &b, err);
                        batch_clear(&b);
                }
        }
        if (r >= 0)
                r = write_batch(db, &b, err);
        batch_clear(&b);
        free(b.rows);
        return r;
}

/* ---- filling the cache in the background ---- */

/* Fills the cache of up to max past days (the most recent first) that lack it; the number of
 * them cached now, 0 when none was left to do (or none could be: it is tried again later). */
int farm_query_warm(farm_db *db, int64_t now_ns, unsigned max, char *err) {
        struct day_refs refs = {};
        int r = 0, rc;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                _cleanup_reset_ sql_stmt *st = NULL;
                if ((r = farm_prepare(c,
                                      "SELECT d.run, d.day FROM run_days d WHERE d.day < ? AND "
                                      "NOT EXISTS (SELECT 1 FROM hist_days h WHERE h.run = "
                                      "d.run AND h.day = d.day) ORDER BY d.day DESC LIMIT ?",
                                      &st, err)) < 0)
                        return r;
                sql_bind_int64(st, 1, now_ns / FARM_DAY_NS - (now_ns % FARM_DAY_NS < 0));
                sql_bind_int64(st, 2, max);
                while (r >= 0 && (rc = sql_step(st)) == SQL_ROW)
                        r = day_refs_add(&refs, &(struct day_ref){ .run = sql_column_int64(st, 0),
                                                                   .day = sql_column_int64(st, 1),
                                                                   .whole = true });
                if (r >= 0 && rc != SQL_DONE)
                        r = farm_fail(c, rc, "cannot find days to cache", err);
        }
        if (r >= 0 && refs.n > 0)
                r = day_refs_fill(db, &refs, err);
        unsigned done = 0;
        if (r >= 0 && refs.n > 0) {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                _cleanup_reset_ sql_stmt *chk = NULL;
                if ((r = farm_prepare(c, "SELECT 1 FROM hist_days WHERE run = ? AND day = ?", &chk,
                                      err)) >= 0)
                        for (size_t i = 0; i < refs.n; i++) {
                                sql_reset(chk);
                                sql_bind_int64(chk, 1, refs.v[i].run);
                                sql_bind_int64(chk, 2, refs.v[i].day);
                                done += sql_step(chk) == SQL_ROW;
                        }
        }
        free(refs.v);
        return r < 0 ? r : (int) done;
}

struct farm_warmer {
        farm_db *db;
        struct worker *worker;
};

#define WARM_DAYS_PER_PASS 4
#define WARM_PAUSE_NS \
        (50 * NSEC_PER_MSEC)             /* between passes while there is work: queries go first */
#define WARM_IDLE_NS (60 * NSEC_PER_SEC) /* between looks when all is cached */

static void warmer_main(void *arg, struct worker *worker) {
        struct farm_warmer *w = arg;
        uint64_t days = 0;
        bool failing = false;
        do {
                char err[FARM_ERROR_MAX] = "";
                int n = farm_query_warm(w->db, now_ns(CLOCK_REALTIME), WARM_DAYS_PER_PASS, err);
                if (n < 0 && !failing && !farm_db_stopping(w->db))
                        log_warning("Histogram cache: %s; trying again in a minute", err);
                failing = n < 0;
                if (n > 0) {
                        days += (uint64_t) n;
                        continue; /* to the short pause */
                }
                if (days > 0)
                        log_info("Histogram cache: %" PRIu64 " day(s) of machines' data merged "
                                 "in the background",
                                 days);
                days = 0;
        } while (worker_wait(worker, days > 0 ? WARM_PAUSE_NS : WARM_IDLE_NS));
}

int farm_warmer_start(farm_db *db, struct farm_warmer **ret) {
        struct farm_warmer *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->db = db;
        int r = worker_start("cache-warmer", warmer_main, w, &w->worker);
        if (r < 0) {
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

void farm_warmer_stop(struct farm_warmer *w) {
        if (!w)
                return;
        worker_stop(w->worker);
        free(w);
}

static const char *const sql_window_cpus[] =
        SQL_BY_CPUS("SELECT coalesce(i.scenario, ''), c.cpu, c.hist_limit_us, c.hist, "
                    "c.samples, c.min_ns, c.max_ns, c.max_time_ns, c.violations FROM intervals i ",
                    " WHERE i.run = ?1 AND i.start_ns >= ?2 AND i.start_ns < ?3 "
                    "AND (i.scenario = ?4 OR ?4 IS NULL) AND (c.cpu = ?5 OR ?5 IS NULL) "
                    "AND (coalesce(i.received_ns, 0) <= ?6 OR ?6 IS NULL) "
                    "AND (c.cpu >= ?7 OR ?7 IS NULL) AND (c.cpu <= ?8 OR ?8 IS NULL)");

/* Reads one run and day of the window [from, to): from run_day_hists or the cache when the day
 * is whole (still, in this read transaction), from its intervals otherwise.  Reader lock
 * held. */
static int read_day(sql_conn *c, const struct day_ref *ref, int64_t from, int64_t to,
                    const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                    void *userdata, char *err) {
        _cleanup_reset_ sql_stmt *chk = NULL, *st = NULL;
        bool cached = false;
        int r, rc;

        if (ref->whole && ref->all_cpus && cpu < 0 && !cpu_range &&
            (r = farm_day_hists_read(c, ref, scenario, fn, userdata, err)) != 0)
                return r < 0 ? r : 0;
        if (ref->whole) {
                if ((r = farm_prepare(c, "SELECT 1 FROM hist_days WHERE run = ? AND day = ?", &chk,
                                      err)) < 0)
                        return r;
                sql_bind_int64(chk, 1, ref->run);
                sql_bind_int64(chk, 2, ref->day);
                rc = sql_step(chk);
                if (rc != SQL_ROW && rc != SQL_DONE)
                        return farm_fail(c, rc, "cannot read the histogram cache", err);
                cached = rc == SQL_ROW;
        }
        if (cached)
                r = farm_prepare(c,
                                 "SELECT scenario, cpu, hist_limit_us, hist, samples, min_ns, "
                                 "max_ns, max_time_ns, violations FROM hist_days "
                                 "WHERE run = ?1 AND day = ?2 AND (scenario = ?4 OR ?4 IS NULL) "
                                 "AND (cpu = ?5 OR ?5 IS NULL) AND (cpu >= ?7 OR ?7 IS NULL) "
                                 "AND (cpu <= ?8 OR ?8 IS NULL)",
                                 &st, err);
        else
                r = farm_prepare(c, sql_window_cpus[sql_dialect(c)], &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, ref->run);
        if (cached)
                sql_bind_int64(st, 2, ref->day);
        else {
                sql_bind_int64(st, 2, MAX(from, ref->day * FARM_DAY_NS));
                sql_bind_int64(st, 3, MIN(to, (ref->day + 1) * FARM_DAY_NS));
        }
        if (scenario)
                sql_bind_text(st, 4, scenario);
        if (cpu >= 0)
                sql_bind_int64(st, 5, cpu);
        if (!cached && ref->known_ns != INT64_MAX && ref->known_ns != 0)
                sql_bind_int64(st, 6, ref->known_ns);
        if (cpu_range && cpu_range[0] > 0)
                sql_bind_int64(st, 7, cpu_range[0]);
        if (cpu_range && cpu_range[1] < FARM_CPU_MAX)
                sql_bind_int64(st, 8, cpu_range[1]);
        return day_rows_each(c, st, true, ref, cached ? "cached" : "stored", fn, userdata, err);
}

/* Reads every ref, each in its own read transaction (a consistent snapshot of its day), taking
 * the reader's lock for one day at a time: the token checks of uploads share that connection. */
int day_refs_read(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                  const char *scenario, int64_t cpu, const int64_t cpu_range[2], day_row_fn fn,
                  void *userdata, char *err) {
        int r = 0;
        for (size_t i = 0; r >= 0 && i < refs->n; i++) {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                if ((r = sql_begin(c, SQL_TXN_SNAPSHOT)) < 0)
                        return farm_fail(c, r, "cannot begin reading", err);
                r = read_day(c, &refs->v[i], from, to, scenario, cpu, cpu_range, fn, userdata, err);
                sql_rollback(c);
        }
        return r;
}
