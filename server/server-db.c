/* SPDX-License-Identifier: MIT */
/* The farm database: schema and migrations, token checks, storing summaries in one
 * transaction each, and the machine queries of the JSON API. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "sqlite-errno.h"
#include "server-db-internal.h"
#include "server-notify-store.h"
#include "server-settings.h"

/* 'rtsf': marks the file as the farm database, so the machines' own database (and any other
 * SQLite file) is refused by name. */
#define FARM_APPLICATION_ID 0x72747366
#define FARM_SCHEMA_VERSION 7
#define FARM_BUSY_TIMEOUT_MS 10000

/* Migration N takes the schema from version N to N+1.  Never edit a released entry: add one. */
static const char *const migrations[] = {
        /* 0 -> 1: the first schema. */
        "CREATE TABLE machines ("
        "  id TEXT PRIMARY KEY CHECK (length(id) = 32),"
        "  token_hash BLOB NOT NULL CHECK (length(token_hash) = 32),"
        "  threshold_ns INTEGER NOT NULL CHECK (threshold_ns >= 0),"
        "  gating INTEGER NOT NULL CHECK (gating IN (0, 1)),"
        "  enrolled_ns INTEGER NOT NULL, rekeyed_ns INTEGER, revoked_ns INTEGER,"
        "  last_report_ns INTEGER, hostname TEXT, cpu_model TEXT, cpus INTEGER);"
        "CREATE TABLE runs ("
        "  id INTEGER PRIMARY KEY,"
        "  machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  run_id INTEGER NOT NULL CHECK (run_id >= 1),"
        "  boot_id TEXT NOT NULL, kernel_release TEXT NOT NULL, kernel_version TEXT NOT NULL,"
        "  kernel_cmdline TEXT NOT NULL, preempt_model TEXT NOT NULL,"
        "  daemon_version TEXT NOT NULL, config_digest TEXT NOT NULL,"
        "  start_ns INTEGER NOT NULL, threshold_ns INTEGER NOT NULL,"
        "  probe_interval_ns INTEGER NOT NULL, interval_ns INTEGER NOT NULL,"
        "  first_report_ns INTEGER NOT NULL,"
        "  UNIQUE (machine_id, run_id));"
        "CREATE INDEX runs_kernel ON runs(kernel_release);"
        "CREATE TABLE intervals ("
        "  id INTEGER PRIMARY KEY,"
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL CHECK (seq >= 0),"
        "  start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL CHECK (length_ns > 0),"
        "  scenario TEXT,"
        "  max_ns INTEGER NOT NULL," /* the worst of its CPUs, for the queries */
        "  UNIQUE (run, seq));"
        "CREATE INDEX intervals_start ON intervals(start_ns);"
        "CREATE TABLE interval_cpus ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  cpu INTEGER NOT NULL CHECK (cpu >= 0),"
        "  samples INTEGER NOT NULL, min_ns INTEGER NOT NULL, avg_ns INTEGER NOT NULL,"
        "  max_ns INTEGER NOT NULL, max_time_ns INTEGER NOT NULL,"
        "  violations INTEGER NOT NULL, missed INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  UNIQUE (interval, cpu));"
        "CREATE TABLE interval_loads ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  idx INTEGER NOT NULL CHECK (idx >= 0),"
        "  generator TEXT NOT NULL, up_ns INTEGER NOT NULL,"
        "  starts INTEGER NOT NULL, exits INTEGER NOT NULL,"
        "  UNIQUE (interval, idx));"
        "CREATE TABLE interval_load_metrics ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  load_idx INTEGER NOT NULL, idx INTEGER NOT NULL,"
        "  name TEXT NOT NULL, unit TEXT NOT NULL, value REAL NOT NULL,"
        "  UNIQUE (interval, load_idx, idx));"
        "CREATE TABLE events ("
        "  id INTEGER PRIMARY KEY,"
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  event_id INTEGER NOT NULL CHECK (event_id >= 1),"
        "  time_ns INTEGER NOT NULL, type TEXT NOT NULL, cpu INTEGER, value INTEGER,"
        "  message TEXT NOT NULL,"
        "  UNIQUE (run, event_id));"
        "CREATE INDEX events_time ON events(time_ns);"
        "CREATE TABLE uploads ("
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL CHECK (seq >= 0),"
        "  received_ns INTEGER NOT NULL,"
        "  intervals INTEGER NOT NULL, events INTEGER NOT NULL,"
        "  UNIQUE (run, seq));",
        /* 1 -> 2: a token is looked up by its hash instead of compared with every machine's. */
        "CREATE INDEX machines_token ON machines(token_hash);",
        /* 2 -> 3: what the verdict and the queries need.  Per run and UTC day, the coverage and
         * the widest hole between intervals that arrived in time order (gaps_known = 0 once one
         * arrived out of order: that day is then read from its intervals), kept up to date as
         * uploads are stored, so that a verdict over a month of a farm reads thousands of rows,
         * not millions; the intervals in which a generator was down, and for how long;
         * per-machine counters for /metrics; staff tokens, waivers and their audit trail. */
        "CREATE TABLE run_days ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  intervals INTEGER NOT NULL, covered_ns INTEGER NOT NULL,"
        "  first_start_ns INTEGER NOT NULL, last_end_ns INTEGER NOT NULL,"
        "  max_gap_ns INTEGER NOT NULL, gaps_known INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run, day)) WITHOUT ROWID;"
        "CREATE TABLE run_day_scenarios ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  scenario TEXT NOT NULL, covered_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run, day, scenario)) WITHOUT ROWID;"
        "INSERT INTO run_days SELECT run, start_ns / 86400000000000, count(*), sum(length_ns),"
        "  min(start_ns), max(start_ns + length_ns), 0, 0, max(max_ns)"
        "  FROM intervals GROUP BY 1, 2;"
        "INSERT INTO run_day_scenarios SELECT run, start_ns / 86400000000000,"
        "  coalesce(scenario, ''), sum(length_ns) FROM intervals GROUP BY 1, 2, 3;"
        "CREATE TABLE load_downs ("
        "  run INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,"
        "  load_idx INTEGER NOT NULL, generator TEXT NOT NULL,"
        "  start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL, scenario TEXT,"
        "  down_ns INTEGER NOT NULL CHECK (down_ns > 0),"
        "  PRIMARY KEY (run, seq, load_idx)) WITHOUT ROWID;"
        "INSERT INTO load_downs SELECT i.run, i.seq, l.idx, l.generator, i.start_ns,"
        "  i.length_ns, i.scenario, i.length_ns - l.up_ns"
        "  FROM interval_loads l JOIN intervals i ON i.id = l.interval"
        "  WHERE l.up_ns < i.length_ns;"
        "CREATE INDEX intervals_run_start ON intervals(run, start_ns);"
        "CREATE INDEX intervals_run_max ON intervals(run, max_ns);"
        "CREATE INDEX events_run_type ON events(run, type, time_ns);"
        "CREATE INDEX runs_machine ON runs(machine_id, start_ns);"
        "ALTER TABLE machines ADD COLUMN violations_total INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE machines ADD COLUMN last_interval_start_ns INTEGER;"
        "ALTER TABLE machines ADD COLUMN last_worst_ns INTEGER;"
        "UPDATE machines SET violations_total = (SELECT coalesce(sum(c.violations), 0)"
        "  FROM interval_cpus c JOIN intervals i ON c.interval = i.id JOIN runs r ON i.run = r.id"
        "  WHERE r.machine_id = machines.id);"
        "CREATE TABLE admins ("
        "  name TEXT PRIMARY KEY, token_hash BLOB NOT NULL CHECK (length(token_hash) = 32),"
        "  created_ns INTEGER NOT NULL, revoked_ns INTEGER);"
        "CREATE INDEX admins_token ON admins(token_hash);"
        "CREATE TABLE waivers ("
        "  id INTEGER PRIMARY KEY, kernel_release TEXT NOT NULL, problem TEXT NOT NULL,"
        "  reason TEXT NOT NULL CHECK (length(reason) > 0), by TEXT NOT NULL,"
        "  created_ns INTEGER NOT NULL, withdrawn_ns INTEGER, withdrawn_by TEXT);"
        "CREATE INDEX waivers_kernel ON waivers(kernel_release, problem);"
        "CREATE TABLE audit ("
        "  id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, who TEXT NOT NULL,"
        "  action TEXT NOT NULL, kernel_release TEXT, problem TEXT, waiver INTEGER,"
        "  detail TEXT);",
        /* 3 -> 4: for the query API (server-query.c).  Each interval keeps the totals of its
         * CPUs (samples, violations, which CPU had the worst case and when), so that a month
         * of a machine's intervals per step reads one row per interval; merged histograms
         * per run, UTC day, scenario and CPU are cached in hist_days, filled by the queries
         * and dropped for a day when an interval of it is stored. */
        "ALTER TABLE intervals ADD COLUMN samples INTEGER;"
        "ALTER TABLE intervals ADD COLUMN violations INTEGER;"
        "ALTER TABLE intervals ADD COLUMN max_cpu INTEGER;"
        "ALTER TABLE intervals ADD COLUMN max_time_ns INTEGER;"
        "UPDATE intervals SET"
        "  samples = (SELECT sum(samples) FROM interval_cpus WHERE interval = intervals.id),"
        "  violations = (SELECT sum(violations) FROM interval_cpus"
        "    WHERE interval = intervals.id),"
        "  max_cpu = (SELECT cpu FROM interval_cpus WHERE interval = intervals.id"
        "    ORDER BY max_ns DESC, cpu LIMIT 1),"
        "  max_time_ns = (SELECT max_time_ns FROM interval_cpus WHERE interval = intervals.id"
        "    ORDER BY max_ns DESC, cpu LIMIT 1);"
        "CREATE TABLE hist_days ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  scenario TEXT NOT NULL, cpu INTEGER NOT NULL,"
        "  samples INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
        "  max_time_ns INTEGER NOT NULL, violations INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  PRIMARY KEY (run, day, scenario, cpu)) WITHOUT ROWID;"
        /* Covers the intervals query: a month of a machine's intervals is read from the
         * index alone, without a lookup of each row (a quarter less CPU per query). */
        "CREATE INDEX intervals_query ON intervals(run, start_ns, length_ns, max_ns, max_cpu,"
        "  max_time_ns, samples, violations, scenario);",
        /* 4 -> 5: an event's structured details (the forensics of an unclean end), JSON. */
        "ALTER TABLE events ADD COLUMN details TEXT;",
        /* 5 -> 6: the verdict's invariants (docs/verdict.md).  Runs: the name they are judged
         * under, the host and the probed CPUs they reported, the span of their intervals.
         * Intervals and events: when they were received (NULL: stored before this version,
         * taken as received when they ended); per interval what the rule needs that no
         * configured number changes: the span every probed CPU measured (m_start_ns,
         * m_end_ns; NULL: none), the smallest share of the wake-ups its period allows that a
         * probed CPU delivered (per mille; 0 for a probed CPU missing, -1 for more than the
         * period allows), and the part of the measured span no earlier-stored interval of the
         * machine covered (counted_ns).  Rollups of those per run and day (and scenario, with
         * the generators present in every interval and the time generators were down).
         * Overlaps of two runs of a machine; machine settings with their history; maintenance
         * windows; the rule's versions; the verdict log.  Derived values of the intervals
         * stored before are filled by migrate_6() below. */
        "ALTER TABLE runs ADD COLUMN release TEXT;"
        "ALTER TABLE runs ADD COLUMN hostname TEXT;"
        "ALTER TABLE runs ADD COLUMN probed_cpus TEXT;"
        "ALTER TABLE runs ADD COLUMN first_start_ns INTEGER;"
        "ALTER TABLE runs ADD COLUMN last_end_ns INTEGER;"
        "ALTER TABLE runs ADD COLUMN max_length_ns INTEGER NOT NULL DEFAULT 0;"
        "UPDATE runs SET release = kernel_release,"
        "  hostname = (SELECT hostname FROM machines WHERE machines.id = runs.machine_id),"
        "  first_start_ns = (SELECT min(start_ns) FROM intervals WHERE run = runs.id),"
        "  last_end_ns = (SELECT max(start_ns + length_ns) FROM intervals WHERE run = runs.id),"
        "  max_length_ns = coalesce((SELECT max(length_ns) FROM intervals"
        "    WHERE run = runs.id), 0);"
        "CREATE INDEX runs_release ON runs(release, start_ns);"
        "CREATE INDEX runs_machine_end ON runs(machine_id, last_end_ns);"
        "ALTER TABLE intervals ADD COLUMN received_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN m_start_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN m_end_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN min_ratio_pm INTEGER;"
        "ALTER TABLE intervals ADD COLUMN min_ratio_cpu INTEGER;"
        "ALTER TABLE intervals ADD COLUMN counted_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN missing_ns INTEGER;"
        "ALTER TABLE interval_cpus ADD COLUMN span_start_ns INTEGER;"
        "ALTER TABLE interval_cpus ADD COLUMN span_length_ns INTEGER;"
        "ALTER TABLE events ADD COLUMN received_ns INTEGER;"
        "CREATE INDEX events_run_received ON events(run, received_ns);"
        "ALTER TABLE run_days ADD COLUMN counted_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN min_ratio_pm INTEGER NOT NULL DEFAULT 1000;"
        "ALTER TABLE run_days ADD COLUMN max_skew_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN max_received_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN max_missing_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_day_scenarios ADD COLUMN counted_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_day_scenarios ADD COLUMN gens_all TEXT;"
        "ALTER TABLE run_day_scenarios ADD COLUMN down_ns INTEGER NOT NULL DEFAULT 0;"
        "CREATE TABLE overlaps ("
        "  machine_id TEXT NOT NULL, run_a INTEGER NOT NULL REFERENCES runs(id),"
        "  run_b INTEGER NOT NULL REFERENCES runs(id), start_ns INTEGER NOT NULL,"
        "  end_ns INTEGER NOT NULL, received_ns INTEGER NOT NULL, CHECK (run_a < run_b));"
        "CREATE INDEX overlaps_a ON overlaps(run_a);"
        "CREATE INDEX overlaps_b ON overlaps(run_b);"
        "CREATE TABLE machine_settings ("
        "  id INTEGER PRIMARY KEY, machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  from_ns INTEGER NOT NULL, threshold_ns INTEGER NOT NULL CHECK (threshold_ns >= 0),"
        "  gating INTEGER NOT NULL CHECK (gating IN (0, 1)), groups TEXT NOT NULL,"
        "  labels TEXT NOT NULL, revoked INTEGER NOT NULL CHECK (revoked IN (0, 1)),"
        "  by TEXT NOT NULL, reason TEXT NOT NULL);"
        "CREATE INDEX machine_settings_machine ON machine_settings(machine_id, from_ns);"
        "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, gating, groups, labels,"
        "  revoked, by, reason) SELECT id, enrolled_ns, threshold_ns, gating, 'default', '{}', 0,"
        "  'migration', 'settings as they were when the history began' FROM machines;"
        "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, gating, groups, labels,"
        "  revoked, by, reason) SELECT id, revoked_ns, threshold_ns, gating, 'default', '{}', 1,"
        "  'migration', 'revoked' FROM machines WHERE revoked_ns IS NOT NULL;"
        "CREATE TABLE maintenance ("
        "  id INTEGER PRIMARY KEY, machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  from_ns INTEGER NOT NULL, to_ns INTEGER NOT NULL CHECK (to_ns > from_ns),"
        "  reason TEXT NOT NULL, by TEXT NOT NULL, created_ns INTEGER NOT NULL,"
        "  cancelled_ns INTEGER, cancelled_by TEXT);"
        "CREATE INDEX maintenance_machine ON maintenance(machine_id, from_ns);"
        "CREATE TABLE rule_versions (id INTEGER PRIMARY KEY, from_ns INTEGER NOT NULL,"
        "  rule TEXT NOT NULL);"
        "CREATE TABLE verdict_log ("
        "  id INTEGER PRIMARY KEY, release TEXT NOT NULL, series TEXT NOT NULL,"
        "  status TEXT NOT NULL, at_ns INTEGER NOT NULL, problems INTEGER NOT NULL,"
        "  missing INTEGER NOT NULL);"
        "CREATE INDEX verdict_log_release ON verdict_log(release, at_ns);"
        "CREATE INDEX verdict_log_series ON verdict_log(series, at_ns);"
        "ALTER TABLE audit ADD COLUMN machine_id TEXT;",
        /* 6 -> 7: notifications (server-notify-store.c). */
        notify_store_migration,
};
_Static_assert(ELEMENTSOF(migrations) == FARM_SCHEMA_VERSION, "one migration per version");

/* Writes "path: what: SQLite's message" (of connection c) into err and returns the matching
 * -errno. */
int farm_fail_on(farm_db *db, sqlite3 *c, int rc, const char *what, char *err) {
        snprintf(err, FARM_ERROR_MAX, "%s: %s: %s", db->path, what,
                 c ? sqlite3_errmsg(c) : sqlite3_errstr(rc));
        return sqlite_errno(rc);
}

static int fail(farm_db *db, int rc, const char *what, char *err) {
        return farm_fail_on(db, db->db, rc, what, err);
}

_printf_(4, 5) int farm_failf(farm_db *db, int error, char *err, const char *fmt, ...) {
        char msg[FARM_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(err, FARM_ERROR_MAX, "%s: %s", db->path, msg);
        return error < 0 ? error : -error;
}

static int exec_sql(farm_db *db, const char *sql, char *err) {
        int rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : fail(db, rc, sql, err);
}

static int prepare_on(farm_db *db, sqlite3 *c, const char *sql, sqlite3_stmt **ret, char *err) {
        int rc = sqlite3_prepare_v2(c, sql, -1, ret, NULL);
        return rc == SQLITE_OK ? 0 : farm_fail_on(db, c, rc, "cannot prepare query", err);
}

static int prepare(farm_db *db, const char *sql, sqlite3_stmt **ret, char *err) {
        return prepare_on(db, db->db, sql, ret, err);
}

/* The statement of connection c for sql (a string literal: looked up by address first), from
 * its cache, prepared the first time.  Reset it after use (_cleanup_reset_); never finalize it. */
static int prepare_cached(farm_db *db, sqlite3 *c, struct stmt_cache *cache, const char *sql,
                          sqlite3_stmt **ret, char *err) {
        for (unsigned i = 0; i < cache->n; i++)
                if (cache->sql[i] == sql) {
                        *ret = cache->st[i];
                        return 0;
                }
        for (unsigned i = 0; i < cache->n; i++)
                if (strcmp(cache->sql[i], sql) == 0) {
                        *ret = cache->st[i];
                        return 0;
                }
        if (cache->n == STMT_CACHE_MAX) /* a farm_db has fewer statements than that */
                return farm_failf(db, -ENOSPC, err, "statement cache full (%u)", STMT_CACHE_MAX);
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v3(c, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (rc != SQLITE_OK)
                return farm_fail_on(db, c, rc, "cannot prepare query", err);
        cache->sql[cache->n] = sql;
        cache->st[cache->n++] = st;
        *ret = st;
        return 0;
}

int farm_prepare_w(farm_db *db, const char *sql, sqlite3_stmt **ret, char *err) {
        return prepare_cached(db, db->db, &db->cache, sql, ret, err);
}

int farm_prepare_r(farm_db *db, const char *sql, sqlite3_stmt **ret, char *err) {
        return prepare_cached(db, db->rdb, &db->rcache, sql, ret, err);
}

static void stmt_cache_clear(struct stmt_cache *cache) {
        for (unsigned i = 0; i < cache->n; i++)
                sqlite3_finalize(cache->st[i]);
        cache->n = 0;
}

/* Runs a cached statement that returns no row (BEGIN, SAVEPOINT, COMMIT ...) on the writer. */
int farm_exec_w(farm_db *db, const char *sql, char *err) {
        sqlite3_stmt *st;
        int r = farm_prepare_w(db, sql, &st, err);
        if (r < 0)
                return r;
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : fail(db, rc, sql, err);
}

/* Steps a statement that returns no row, and resets it for the next use. */
int farm_step_done(farm_db *db, sqlite3_stmt *st, const char *what, char *err) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
                return fail(db, rc, what, err);
        return 0;
}

static int query_int(farm_db *db, const char *sql, int64_t *ret, char *err) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = prepare(db, sql, &st, err);
        if (r < 0)
                return r;
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return fail(db, rc, "cannot read database header", err);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

void farm_rollback(farm_db *db) {
        if (!sqlite3_get_autocommit(db->db))
                sqlite3_exec(db->db, "ROLLBACK", NULL, NULL, NULL);
}

static int migrate(farm_db *db, int64_t version, char *err) {
        for (int64_t v = version; v < FARM_SCHEMA_VERSION; v++) {
                char sql[64];
                int r = exec_sql(db, "BEGIN IMMEDIATE", err);
                if (r < 0)
                        return r;
                int rc = sqlite3_exec(db->db, migrations[v], NULL, NULL, NULL);
                if (rc != SQLITE_OK) {
                        snprintf(sql, sizeof(sql), "cannot migrate the schema to version %lld",
                                 (long long) v + 1);
                        r = fail(db, rc, sql, err);
                }
                if (r >= 0 && v == 5)
                        r = farm_migrate_6(db, err);
                if (r >= 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long) v + 1);
                        r = exec_sql(db, sql, err);
                }
                if (r >= 0 && v == 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d",
                                 FARM_APPLICATION_ID);
                        r = exec_sql(db, sql, err);
                }
                if (r >= 0)
                        r = exec_sql(db, "COMMIT", err);
                if (r < 0) {
                        farm_rollback(db);
                        return r;
                }
        }
        return 0;
}

void farm_db_close(farm_db *db) {
        if (!db)
                return;
        stmt_cache_clear(&db->rcache);
        stmt_cache_clear(&db->cache);
        if (db->rdb)
                sqlite3_close_v2(db->rdb);
        if (db->db)
                sqlite3_close_v2(db->db);
        pthread_mutex_destroy(&db->lock);
        pthread_cond_destroy(&db->cond);
        pthread_mutex_destroy(&db->rlock);
        free(db->path);
        free(db);
}

static int open_checked(farm_db *db, char *err) {
        int64_t version, appid, tables;
        int r;

        int rc = sqlite3_open_v2(db->path, &db->db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 NULL);
        if (rc != SQLITE_OK)
                return fail(db, rc, "cannot open database", err);
        sqlite3_extended_result_codes(db->db, 1);
        /* enroll and revoke run as separate processes while the server writes. */
        sqlite3_busy_timeout(db->db, FARM_BUSY_TIMEOUT_MS);

        /* The first read fails with SQLITE_NOTADB for a file that is not SQLite at all. */
        if ((r = query_int(db, "PRAGMA application_id", &appid, err)) < 0 ||
            (r = query_int(db, "PRAGMA user_version", &version, err)) < 0 ||
            (r = query_int(db, "SELECT count(*) FROM sqlite_schema", &tables, err)) < 0)
                return r;
        if (appid == 0 && version == 0 && tables > 0)
                return farm_failf(db, -EBADMSG, err,
                                  "SQLite database of another program (no farm schema); refusing "
                                  "to touch it");
        if (appid != 0 && appid != FARM_APPLICATION_ID)
                return farm_failf(db, -EBADMSG, err,
                                  "SQLite database of another program (application_id %#llx); "
                                  "refusing to touch it",
                                  (unsigned long long) appid);
        if (version > FARM_SCHEMA_VERSION)
                return farm_failf(db, -EPROTONOSUPPORT, err,
                                  "farm database schema version %lld is newer than this "
                                  "rtsoak-server understands (%d); upgrade rtsoak-server",
                                  (long long) version, FARM_SCHEMA_VERSION);

        /* WAL lets the queries read while an upload is written; FULL syncs the WAL on every
         * commit, so an upload answered "stored" survives power loss. */
        if ((r = exec_sql(db, "PRAGMA journal_mode = WAL", err)) < 0 ||
            (r = exec_sql(db, "PRAGMA synchronous = FULL", err)) < 0 ||
            (r = exec_sql(db, "PRAGMA foreign_keys = ON", err)) < 0)
                return r;

        /* quick_check reads the whole file: seconds for a small farm, many minutes for one
         * of tens of GiB, longer than a service manager waits for a start.  Above the limit
         * it is left to "rtsoak-server check"; SQLite still refuses damaged pages it meets. */
        int64_t pages, page_size;
        if ((r = query_int(db, "PRAGMA page_count", &pages, err)) < 0 ||
            (r = query_int(db, "PRAGMA page_size", &page_size, err)) < 0)
                return r;
        db->size_bytes = pages * page_size;
        if (db->size_bytes <= FARM_CHECK_AT_OPEN_MAX_BYTES) {
                if ((r = farm_db_check(db, err)) < 0)
                        return r;
        } else
                db->check_skipped = true;
        return migrate(db, version, err);
}

int farm_db_check(farm_db *db, char err[static FARM_ERROR_MAX]) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;
        if ((r = prepare(db, "PRAGMA quick_check", &st, err)) < 0)
                return r;
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return fail(db, rc, "integrity check failed", err);
        const char *res = (const char *) sqlite3_column_text(st, 0);
        if (!res || strcmp(res, "ok") != 0)
                return farm_failf(db, -EBADMSG, err,
                                  "database is corrupt (quick_check: %s); keep the file for "
                                  "analysis and move it aside",
                                  res ?: "no result");
        return 0;
}

bool farm_db_check_skipped(farm_db *db, int64_t *ret_size_bytes) {
        *ret_size_bytes = db->size_bytes;
        return db->check_skipped;
}

/* The reading connection, opened once the schema is in place. */
static int open_reader(farm_db *db, char *err) {
        int rc = sqlite3_open_v2(db->path, &db->rdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
                                 NULL);
        if (rc != SQLITE_OK) {
                snprintf(err, FARM_ERROR_MAX, "%s: cannot open database: %s", db->path,
                         db->rdb ? sqlite3_errmsg(db->rdb) : sqlite3_errstr(rc));
                return sqlite_errno(rc);
        }
        sqlite3_extended_result_codes(db->rdb, 1);
        sqlite3_busy_timeout(db->rdb, FARM_BUSY_TIMEOUT_MS);
        /* 64 MiB of page cache: a month of a machine's intervals per step reads some 4 MiB of
         * pages, which the default 2 MiB would read again from the file at every query. */
        rc = sqlite3_exec(
                db->rdb,
                "PRAGMA query_only = ON; PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536",
                NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                snprintf(err, FARM_ERROR_MAX, "%s: cannot set up the reading connection: %s",
                         db->path, sqlite3_errmsg(db->rdb));
                return sqlite_errno(rc);
        }
        return 0;
}

int farm_db_open(const char *path, farm_db **ret, char err[static FARM_ERROR_MAX]) {
        static _Atomic uint64_t generations;
        farm_db *db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        db->generation = ++generations;
        pthread_mutex_init(&db->lock, NULL);
        pthread_cond_init(&db->cond, NULL);
        pthread_mutex_init(&db->rlock, NULL);
        db->path = strdup(path);
        if (!db->path) {
                farm_db_close(db);
                return -ENOMEM;
        }
        int r = open_checked(db, err);
        if (r >= 0)
                r = open_reader(db, err);
        if (r < 0) {
                farm_db_close(db);
                return r;
        }
        *ret = db;
        return 0;
}

bool farm_machine_id_valid(const char *s) {
        size_t n = 0;
        for (; s[n]; n++)
                if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
                        return false;
        return n == FARM_MACHINE_ID_LEN;
}

int farm_token_lookup(farm_db *db, const char *sql, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char *ret_name, size_t size) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        char err[FARM_ERROR_MAX];
        bool found = false;
        int rc;

        /* The token is looked up by its SHA-256 in an index, not compared with every stored
         * hash: a farm of 10,000 machines made that scan cost 3-4 ms of CPU per upload.  The
         * lookup's time depends only on the hash of what was presented, and knowing where the
         * hash of a guess falls among the stored hashes does not help to find a token whose
         * hash is one of them (that takes a SHA-256 preimage of a 256-bit random token).  The
         * row found is still compared in full without an early exit. */
        if (farm_prepare_r(db, sql, &st, err) < 0)
                return -EIO;
        sqlite3_bind_blob(st, 1, token_hash, SHA256_DIGEST_SIZE, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const uint8_t *h = sqlite3_column_blob(st, 1);
                if (!h || sqlite3_column_bytes(st, 1) != SHA256_DIGEST_SIZE)
                        continue;
                uint8_t diff = 0;
                for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                        diff |= h[i] ^ token_hash[i];
                if (diff == 0 && sqlite3_column_int(st, 2)) {
                        snprintf(ret_name, size, "%s", (const char *) sqlite3_column_text(st, 0));
                        found = true;
                }
        }
        if (rc != SQLITE_DONE)
                return -EIO;
        return found ? 0 : -EACCES;
}

int farm_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char ret_machine_id[static FARM_MACHINE_ID_LEN + 1]) {
        return farm_token_lookup(
                db, "SELECT id, token_hash, revoked_ns IS NULL FROM machines WHERE token_hash = ?",
                token_hash, ret_machine_id, FARM_MACHINE_ID_LEN + 1);
}

/* Ends the open batch: commits it, or rolls it back after a failure (result < 0), and answers
 * every upload in it.  Called with the lock held and committing set; the commit runs without
 * the lock (committing keeps the others off the connection), so that uploads arriving in the
 * meantime can queue up for the next batch. */
static void end_batch(farm_db *db, int result, const char *why) {
        char err[FARM_ERROR_MAX];
        int r = result;

        snprintf(err, sizeof(err), "%s", why ?: "");
        if (r >= 0) {
                pthread_mutex_unlock(&db->lock);
                r = farm_exec_w(db, "COMMIT", err);
                pthread_mutex_lock(&db->lock);
        }
        if (r < 0)
                farm_rollback(db);
        unsigned n = 0;
        for (struct batch_waiter *w = db->batch, *next; w; w = next) {
                next = w->next; /* w lives on its thread's stack: gone once done is seen */
                w->result = r;
                if (r < 0)
                        snprintf(w->err, sizeof(w->err), "%s", err);
                w->done = true;
                n++;
        }
        if (r >= 0 && n > 0) {
                db->commits++;
                db->batched += n;
        }
        db->batch = NULL;
        db->txn_open = false;
        db->committing = false;
        pthread_cond_broadcast(&db->cond);
}

int farm_store_summary(farm_db *db, const struct summary *s, int64_t now_ns,
                       struct farm_stored *ret, char err[static FARM_ERROR_MAX]) {
        struct farm_stored res = {};
        struct batch_waiter me = {};
        int r;

        pthread_mutex_lock(&db->lock);
        db->queued++;
        while (db->committing)
                pthread_cond_wait(&db->cond, &db->lock);
        db->queued--;

        r = 0;
        if (!db->txn_open) {
                r = farm_exec_w(db, "BEGIN IMMEDIATE", err);
                db->txn_open = r >= 0;
        }
        if (r >= 0)
                r = farm_exec_w(db, "SAVEPOINT upload", err);
        if (r >= 0) {
                bool broken = false;
                r = farm_ingest_summary(db, s, now_ns, &res, err);
                char ignored[FARM_ERROR_MAX];
                if (r < 0 && !sqlite3_get_autocommit(db->db) &&
                    farm_exec_w(db, "ROLLBACK TO upload", ignored) < 0)
                        broken = true; /* it cannot be undone alone */
                if (!sqlite3_get_autocommit(db->db)) {
                        int q = farm_exec_w(db, "RELEASE upload", r >= 0 ? err : ignored);
                        if (q < 0) {
                                broken = true;
                                r = r < 0 ? r : q;
                        }
                }
                if (db->txn_open && (broken || sqlite3_get_autocommit(db->db))) {
                        /* The transaction is broken, or SQLite rolled it back (an I/O error, a
                         * full disk): what the others stored in it must not be committed, or is
                         * gone already, and they must not hear "stored". */
                        db->committing = true;
                        end_batch(db, -EIO, "the batch was rolled back after an error");
                        if (r >= 0) {
                                /* Not in the batch that just ended: do not wait for it. */
                                r = -EIO;
                                snprintf(err, FARM_ERROR_MAX,
                                         "the batch was rolled back after an error");
                        }
                } else if (r >= 0) {
                        me.next = db->batch;
                        db->batch = &me;
                }
        }

        /* The last upload in the queue commits the batch; the others wait for it. */
        if (db->txn_open && db->queued == 0) {
                db->committing = true;
                end_batch(db, db->batch ? 0 : -ECANCELED, NULL);
        }
        if (r >= 0) {
                while (!me.done)
                        pthread_cond_wait(&db->cond, &db->lock);
                r = me.result;
                if (r < 0)
                        snprintf(err, FARM_ERROR_MAX, "%s", me.err);
        }
        pthread_mutex_unlock(&db->lock);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

void farm_db_commit_stats(farm_db *db, uint64_t *ret_commits, uint64_t *ret_uploads) {
        pthread_mutex_lock(&db->lock);
        *ret_commits = db->commits;
        *ret_uploads = db->batched;
        pthread_mutex_unlock(&db->lock);
}

json_t *farm_json_col_int(sqlite3_stmt *st, int col) {
        if (sqlite3_column_type(st, col) == SQLITE_NULL)
                return json_null();
        return json_integer(sqlite3_column_int64(st, col));
}

json_t *farm_json_col_text(sqlite3_stmt *st, int col) {
        const char *t = (const char *) sqlite3_column_text(st, col);
        return t ? json_string(t) : json_null();
}

/* The latest run of a machine (by start time), or null. */
static int latest_run_json(farm_db *db, const char *machine_id, json_t **ret, char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_r(
                db,
                "SELECT run_id, boot_id, kernel_release, kernel_version, preempt_model, "
                "start_ns, (SELECT max(max_ns) FROM intervals WHERE run = runs.id) "
                "FROM runs WHERE machine_id = ? ORDER BY start_ns DESC, run_id DESC "
                "LIMIT 1",
                &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, machine_id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                *ret = json_null();
                return 0;
        }
        if (rc != SQLITE_ROW)
                return farm_fail_on(db, db->rdb, rc, "cannot read the latest run", err);
        *ret = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                         "boot_id", farm_json_col_text(st, 1), "kernel_release",
                         farm_json_col_text(st, 2), "kernel_version", farm_json_col_text(st, 3),
                         "preempt_model", farm_json_col_text(st, 4), "start_ns",
                         farm_json_col_int(st, 5), "worst_latency_ns", farm_json_col_int(st, 6));
        return *ret ? 0 : -ENOMEM;
}

int farm_machines_json(farm_db *db, const char *machine_id, json_t **ret,
                       char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        json_auto_t *list = json_array();
        int r, rc;

        if (!list)
                return -ENOMEM;
        r = farm_prepare_r(
                db,
                "SELECT m.id, m.hostname, m.cpu_model, m.cpus, m.threshold_ns, m.gating, "
                "m.enrolled_ns, m.revoked_ns, m.last_report_ns, "
                /* From the day rollups: a month of a machine is 30 of their rows rather
                 * than tens of thousands of intervals. */
                "(SELECT max(d.max_ns) FROM run_days d JOIN runs r ON d.run = r.id "
                " WHERE r.machine_id = m.id), "
                "(SELECT coalesce(sum(d.intervals), 0) FROM run_days d "
                " JOIN runs r ON d.run = r.id WHERE r.machine_id = m.id), "
                "(SELECT count(*) FROM events e JOIN runs r ON e.run = r.id "
                " WHERE r.machine_id = m.id), "
                "(SELECT groups || char(10) || labels FROM machine_settings s "
                " WHERE s.machine_id = m.id ORDER BY from_ns DESC, id DESC LIMIT 1) "
                "FROM machines m WHERE ?1 IS NULL OR m.id = ?1 ORDER BY m.id",
                &st, err);
        if (r < 0)
                return r;
        if (machine_id)
                sqlite3_bind_text(st, 1, machine_id, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *id = (const char *) sqlite3_column_text(st, 0);
                json_t *latest = NULL;
                if ((r = latest_run_json(db, id, &latest, err)) < 0)
                        return r;
                json_t *kernel = json_is_object(latest)
                                         ? json_incref(json_object_get(latest, "kernel_release"))
                                         : json_null();
                json_t *m = json_pack(
                        "{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:b, s:o, s:o, s:o, s:o, s:o, "
                        "s:o, s:o}",
                        "id", id, "hostname", farm_json_col_text(st, 1), "cpu_model",
                        farm_json_col_text(st, 2), "cpus", farm_json_col_int(st, 3), "threshold_ns",
                        farm_json_col_int(st, 4), "gating", sqlite3_column_int(st, 5),
                        "enrolled_ns", farm_json_col_int(st, 6), "revoked",
                        sqlite3_column_type(st, 7) != SQLITE_NULL, "revoked_ns",
                        farm_json_col_int(st, 7), "last_report_ns", farm_json_col_int(st, 8),
                        "kernel", kernel, "worst_latency_ns", farm_json_col_int(st, 9),
                        "latest_run", latest, "intervals", farm_json_col_int(st, 10), "events",
                        farm_json_col_int(st, 11));
                /* The groups and labels in force, as the settings' history has them. */
                if (m && json_object_update_new(
                                 m, farm_settings_brief_json(
                                            (const char *) sqlite3_column_text(st, 12))) < 0) {
                        json_decref(m);
                        m = NULL;
                }
                if (!m || json_array_append_new(list, m) < 0)
                        return -ENOMEM;
        }
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, db->rdb, rc, "cannot list the machines", err);
        if (machine_id) {
                if (json_array_size(list) == 0)
                        return farm_failf(db, -ENOENT, err, "no machine %s is enrolled",
                                          machine_id);
                *ret = json_incref(json_array_get(list, 0));
        } else
                *ret = json_pack("{s:O}", "machines", list);
        return *ret ? 0 : -ENOMEM;
}
