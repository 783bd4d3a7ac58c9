/* SPDX-License-Identifier: MIT */
/* Unit tests of the local database on real SQLite files: schema and refusal of foreign or
 * newer files, runs and unclean ends, interval round trips, year-scale sums, corrupt rows,
 * the writer lock and events. */
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include "tests.h"
#include "hist.h"
#include "macro.h"
#include "store.h"
#include "summary.h"
#include "trace-analysis.h"

static char dir[] = "/tmp/test-store-XXXXXX";

static char *db_path(const char *name) {
        static char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return p;
}

static void sql(const char *path, const char *statement) {
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        char *msg = NULL;
        if (sqlite3_exec(db, statement, NULL, NULL, &msg) != SQLITE_OK)
                fail_msg("%s: %s", statement, msg);
        sqlite3_close(db);
}

static const struct store_run_info run_info = {
        .machine_id = "m1",
        .boot_id = "b1",
        .hostname = "host",
        .kernel_release = "6.1.0-rt",
        .kernel_version = "#1 SMP PREEMPT_RT",
        .kernel_cmdline = "quiet",
        .preempt_model = "PREEMPT_RT",
        .daemon_version = "test",
        .config_digest = "abc",
        .config_text = "[Probe]\n",
        .cpus = "0-1",
        .priority = 95,
        .probe_interval_ns = 200000,
        .interval_ns = 60000000000,
        .threshold_ns = 100000,
        .hist_limit_us = 1000,
        .start_ns = 1000,
};

static void make_row(struct store_cpu_interval *row, uint64_t *counts, int cpu, int64_t start,
                     uint64_t samples, uint64_t lat_ns) {
        memset(counts, 0, hist_nbuckets(1000) * sizeof(uint64_t));
        counts[hist_index(1000, lat_ns)] = samples;
        *row = (struct store_cpu_interval){
                .cpu = cpu,
                .start_ns = start,
                .length_ns = 60000000000,
                .samples = samples,
                .min_ns = lat_ns,
                .max_ns = lat_ns,
                .sum_ns = samples * lat_ns,
                .max_time_ns = start + 5,
                .hist_limit_us = 1000,
                .hist = counts,
        };
}

static void test_open_create_and_reopen(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        (void) state;
        /* Read-only open of a missing file explains itself. */
        assert_int_equal(store_open(db_path("a.db"), STORE_READONLY, &s, err), -ENOENT);
        assert_non_null(strstr(err, "no database here"));

        assert_int_equal(store_open(db_path("a.db"), STORE_WRITER, &s, err), 0);
        assert_true(store_writer_active(db_path("a.db")));
        /* A second writer is refused while the first holds the lock. */
        store *s2 = NULL;
        assert_int_equal(store_open(db_path("a.db"), STORE_WRITER, &s2, err), -EBUSY);
        assert_non_null(strstr(err, "another rtsoakd is already writing this database"));
        store_close(s);
        assert_false(store_writer_active(db_path("a.db")));

        /* Empty database: the CLI says nothing was written yet rather than failing oddly. */
        assert_int_equal(store_open(db_path("a.db"), STORE_READONLY, &s, err), 0);
        struct store_run r;
        assert_int_equal(store_get_run(s, 0, &r), -ENOENT);
        assert_non_null(strstr(store_error(s), "no run recorded yet"));
        store_close(s);
}

static void test_refuses_foreign_and_newer(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        (void) state;

        /* Not SQLite at all. */
        int fd = open(db_path("junk.db"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        char junk[4096];
        memset(junk, 'x', sizeof(junk));
        assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
        close(fd);
        assert_int_equal(store_open(db_path("junk.db"), STORE_READONLY, &s, err), -EBADMSG);
        assert_non_null(strstr(err, "file is not a database"));
        assert_int_equal(store_open(db_path("junk.db"), STORE_WRITER, &s, err), -EBADMSG);

        /* Another program's SQLite file. */
        sql(db_path("other.db"), "CREATE TABLE t(x)");
        assert_int_equal(store_open(db_path("other.db"), STORE_WRITER, &s, err), -EBADMSG);
        assert_non_null(strstr(err, "SQLite database of another program"));

        /* A newer schema than we know. */
        assert_int_equal(store_open(db_path("new.db"), STORE_WRITER, &s, err), 0);
        store_close(s);
        sql(db_path("new.db"), "PRAGMA user_version = 99");
        assert_int_equal(store_open(db_path("new.db"), STORE_WRITER, &s, err), -EPROTONOSUPPORT);
        assert_non_null(strstr(err, "schema version 99 is newer"));
        assert_int_equal(store_open(db_path("new.db"), STORE_READONLY, &s, err), -EPROTONOSUPPORT);
}

static void test_corrupt_file(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        struct store_cpu_interval row;
        uint64_t *counts = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        int64_t run;
        (void) state;

        assert_int_equal(store_open(db_path("c.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        for (int i = 0; i < 200; i++) {
                make_row(&row, counts, 0, i * 60000000000LL, 300000, 5000);
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = row.start_ns,
                                             .length_ns = row.length_ns,
                                             .cpus = &row,
                                             .ncpus = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }
        store_close(s);
        sql(db_path("c.db"), "PRAGMA wal_checkpoint(TRUNCATE)");

        /* Overwrite a page in the middle with garbage. */
        int fd = open(db_path("c.db"), O_WRONLY);
        assert_true(fd >= 0);
        char junk[4096];
        memset(junk, 0xa5, sizeof(junk));
        assert_int_equal(pwrite(fd, junk, sizeof(junk), 4096 * 3), sizeof(junk));
        close(fd);

        int r = store_open(db_path("c.db"), STORE_WRITER, &s, err);
        assert_int_equal(r, -EBADMSG);
        assert_non_null(strstr(err, "c.db"));
        free(counts);
}

static void test_runs_and_unclean(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run1, run2, run3;
        unsigned unclean = 99;
        struct store_run r;
        (void) state;

        assert_int_equal(store_open(db_path("r.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run1, &unclean), 0);
        assert_int_equal(unclean, 0);
        /* Run 1 never ends: as if killed. */
        store_close(s);

        assert_int_equal(store_open(db_path("r.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run2, &unclean), 0);
        assert_int_equal(unclean, 1);
        assert_int_equal(store_get_run(s, run1, &r), 0);
        assert_string_equal(r.end_reason, "unclean");
        assert_int_equal(r.end_ns, run_info.start_ns); /* no data: the start is all we know */
        store_run_done(&r);
        assert_int_equal(store_end_run(s, run2, 5000, "clean", NULL), 0);
        assert_int_equal(store_end_run(s, 12345, 5000, "clean", NULL), -ENOENT);
        store_close(s);

        assert_int_equal(store_open(db_path("r.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run3, &unclean), 0);
        assert_int_equal(unclean, 0); /* run 2 ended cleanly */
        assert_int_equal(store_get_run(s, 0, &r), 0);
        assert_int_equal(r.id, run3);
        assert_null(r.end_reason);
        assert_string_equal(r.kernel_release, "6.1.0-rt");
        assert_string_equal(r.preempt_model, "PREEMPT_RT");
        assert_int_equal(r.probe_interval_ns, 200000);
        store_run_done(&r);

        struct store_event_row *ev;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_list_events(s, &f, "unclean_end", 0, &ev, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(ev[0].run_id, run1);
        assert_non_null(strstr(ev[0].message, "did not end cleanly"));
        store_events_free(ev, n);
        store_close(s);
}

static void test_interval_roundtrip_and_report(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        uint64_t *c1 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        (void) state;

        assert_int_equal(store_open(db_path("i.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);

        const int64_t minute = 60000000000LL;
        for (int i = 0; i < 3; i++) {
                struct store_cpu_interval rows[2];
                make_row(&rows[0], c0, 0, i * minute, 300000, 5000 + (uint64_t) i * 1000);
                make_row(&rows[1], c1, 1, i * minute, 299999, 7000);
                c1[hist_index(1000, 20000000)] = 1; /* one 20 ms stall on CPU 1 */
                rows[1].samples = 300000;
                rows[1].max_ns = 20000000;
                rows[1].sum_ns += 20000000;
                rows[1].violations = 1;
                rows[1].missed = 100;
                struct store_event ev = { .time_ns = i * minute + 7,
                                          .type = "violation",
                                          .cpu = 1,
                                          .value_ns = 20000000 };
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = i * minute,
                                             .length_ns = minute,
                                             .cpus = rows,
                                             .ncpus = 2,
                                             .events = &ev,
                                             .nevents = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }
        /* A repeated sequence number is refused, and nothing of it is stored. */
        {
                struct store_cpu_interval row;
                make_row(&row, c0, 0, 3 * minute, 1, 1000);
                struct store_interval iv = { .run_id = run,
                                             .seq = 2,
                                             .start_ns = 3 * minute,
                                             .length_ns = minute,
                                             .cpus = &row,
                                             .ncpus = 1 };
                assert_true(store_write_interval(s, &iv) < 0);
        }

        struct store_cpu_report *rep;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_report(s, &f, &rep, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(rep[0].cpu, 0);
        assert_int_equal(rep[0].samples, 900000);
        assert_int_equal(rep[0].min_ns, 5000);
        assert_int_equal(rep[0].max_ns, 7000);
        assert_int_equal(rep[0].max_time_ns, 2 * minute + 5);
        assert_int_equal(rep[0].intervals, 3);
        assert_int_equal(hist_total(&rep[0].hist), 900000);
        assert_int_equal(rep[1].violations, 3);
        assert_int_equal(rep[1].missed, 300);
        assert_int_equal(rep[1].max_ns, 20000000);
        assert_int_equal(hist_overflows(&rep[1].hist, 1000), 3);
        store_report_free(rep, n);

        /* Window and CPU filters. */
        f.since_ns = minute;
        f.until_ns = 2 * minute;
        f.cpu = 1;
        assert_int_equal(store_report(s, &f, &rep, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(rep[0].cpu, 1);
        assert_int_equal(rep[0].samples, 300000);
        store_report_free(rep, n);

        struct store_event_row *ev;
        f = STORE_FILTER_ALL;
        assert_int_equal(store_list_events(s, &f, "violation", 2, &ev, &n), 0);
        assert_int_equal(n, 2); /* the newest two, oldest first */
        assert_int_equal(ev[0].time_ns, minute + 7);
        assert_int_equal(ev[1].time_ns, 2 * minute + 7);
        assert_int_equal(ev[1].value_ns, 20000000);
        store_events_free(ev, n);
        store_close(s);
        free(c0);
        free(c1);
}

static void test_year_scale_sums(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        (void) state;

        /* Two rows that each hold a year at 5 kHz with sums near the 63-bit limit (more than
         * a year of wall time allows): each fits the database, their total does not fit 64
         * bits and must still add up. */
        const uint64_t year = UINT64_C(5000) * 86400 * 365;
        assert_int_equal(store_open(db_path("y.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        for (int i = 0; i < 2; i++) {
                struct store_cpu_interval row;
                make_row(&row, c, 0, i, year, 20000000);
                row.sum_ns = UINT64_C(5000000000000000000);
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = i,
                                             .length_ns = 1,
                                             .cpus = &row,
                                             .ncpus = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }
        struct store_cpu_report *rep;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_report(s, &f, &rep, &n), 0);
        assert_int_equal(rep[0].samples, 2 * year);
        unsigned __int128 want = (unsigned __int128) UINT64_C(5000000000000000000) * 2;
        assert_true(rep[0].sum_ns == want);
        assert_int_equal(hist_total(&rep[0].hist), 2 * year);
        store_report_free(rep, n);

        /* A value beyond what SQLite stores is refused with a clear message. */
        struct store_cpu_interval row;
        make_row(&row, c, 0, 5, 1, 1000);
        row.sum_ns = UINT64_MAX;
        struct store_interval iv = {
                .run_id = run, .seq = 9, .start_ns = 5, .length_ns = 1, .cpus = &row, .ncpus = 1
        };
        assert_int_equal(store_write_interval(s, &iv), -ERANGE);
        assert_non_null(strstr(store_error(s), "does not fit the database"));
        store_close(s);
        free(c);
}

static void test_corrupt_rows_fail_report(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        (void) state;

        assert_int_equal(store_open(db_path("k.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        struct store_cpu_interval row;
        make_row(&row, c, 0, 0, 1000, 5000);
        struct store_interval iv = {
                .run_id = run, .seq = 0, .start_ns = 0, .length_ns = 1, .cpus = &row, .ncpus = 1
        };
        assert_int_equal(store_write_interval(s, &iv), 0);
        store_close(s);

        static const struct {
                const char *sql, *msg;
        } t[] = {
                /* Outside every window of the query: caught before it. */
                { "UPDATE interval_cpus SET start_ns = 'x0'",
                  "1 row(s) of interval_cpus have a start time that is not a 64-bit integer" },
                { "UPDATE interval_cpus SET start_ns = 0; UPDATE intervals SET start_ns = 1e300",
                  "1 row(s) of intervals have a start time that is not a 64-bit integer, the "
                  "first of interval 1" },
                /* Text read as 0 would pass every other check. */
                { "UPDATE intervals SET start_ns = 0; UPDATE interval_cpus SET violations = 'x'",
                  "inconsistent statistics" },
                { "UPDATE interval_cpus SET violations = 0, samples = 999",
                  "histogram holds 1000 samples but the row says 999" },
                { "UPDATE interval_cpus SET hist = x'01e807ff7f01', samples = 1000",
                  "histogram bucket index out of range" },
                { "UPDATE interval_cpus SET hist = x'02', samples = 1000", "histogram too short" },
                { "UPDATE interval_cpus SET hist = x'01e80705e807', min_ns = 9, max_ns = 3",
                  "inconsistent statistics" },
                { "UPDATE interval_cpus SET hist_limit_us = 0", "out of range" },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                sql(db_path("k.db"), t[i].sql);
                assert_int_equal(store_open(db_path("k.db"), STORE_READONLY, &s, err), 0);
                struct store_cpu_report *rep;
                size_t n;
                struct store_filter f = STORE_FILTER_ALL;
                int r = store_report(s, &f, &rep, &n);
                if (r != -EBADMSG)
                        fail_msg("case %zu: %d %s", i, r, store_error(s));
                if (!strstr(store_error(s), t[i].msg))
                        fail_msg("case %zu: '%s' lacks '%s'", i, store_error(s), t[i].msg);
                store_close(s);
        }
        free(c);
}

static void test_scenarios_and_loads(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL;

        assert_int_equal(store_open(db_path("sc.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);

        const struct store_load_metric cpu_a[] = { { "ops", "ops/s", 100 }, { "cpu", "%", 40 } },
                                       cpu_b[] = { { "ops", "ops/s", 300 }, { "cpu", "%", 60 } },
                                       io[] = { { "write", "MiB/s", 1.5 } };
        const struct store_interval_load l_a = { "cpu", 60 * NSEC_PER_SEC, 1, 0, cpu_a, 2 },
                                         l_b = { "cpu", 30 * NSEC_PER_SEC, 1, 1, cpu_b, 2 },
                                         mixed[] = { { "fileio", 60 * NSEC_PER_SEC, 0, 0, io, 1 },
                                                     { "memory", 0, 3, 3, NULL, 0 } };
        struct {
                const char *scenario;
                const struct store_interval_load *loads;
                size_t nloads;
                uint64_t lat;
        } ivs[] = {
                { "cpu", &l_a, 1, 5000 },
                { "cpu", &l_b, 1, 9000 },
                { "idle", NULL, 0, 2000 },
                { "mixed", mixed, 2, 7000 },
        };
        for (size_t i = 0; i < ELEMENTSOF(ivs); i++) {
                struct store_cpu_interval row;
                make_row(&row, c0, 0, (int64_t) i * minute, 1000, ivs[i].lat);
                struct store_interval iv = { .run_id = run,
                                             .seq = i,
                                             .start_ns = (int64_t) i * minute,
                                             .length_ns = minute,
                                             .scenario = ivs[i].scenario,
                                             .loads = ivs[i].loads,
                                             .nloads = ivs[i].nloads,
                                             .cpus = &row,
                                             .ncpus = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }

        struct store_scenario *sc;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_list_scenarios(s, &f, &sc, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(sc[0].name, "cpu");
        assert_int_equal(sc[0].intervals, 2);
        assert_int_equal(sc[0].length_ns, 2 * minute);
        assert_int_equal(sc[0].nloads, 2);
        assert_string_equal(sc[0].loads[0].generator, "cpu");
        assert_string_equal(sc[0].loads[0].metric, "ops");
        assert_true(sc[0].loads[0].avg > 199.9 && sc[0].loads[0].avg < 200.1);
        assert_string_equal(sc[0].loads[1].metric, "cpu");
        assert_true(sc[0].loads[1].avg > 49.9 && sc[0].loads[1].avg < 50.1);
        assert_int_equal(sc[0].loads[0].up_ns, 90 * NSEC_PER_SEC);
        assert_int_equal(sc[0].loads[0].exits, 1);
        assert_string_equal(sc[1].name, "idle");
        assert_int_equal(sc[1].nloads, 0);
        assert_string_equal(sc[2].name, "mixed");
        assert_int_equal(sc[2].nloads, 2);
        assert_string_equal(sc[2].loads[0].unit, "MiB/s");
        assert_string_equal(sc[2].loads[1].generator, "memory");
        assert_null(sc[2].loads[1].metric); /* never ran, still listed */
        assert_int_equal(sc[2].loads[1].starts, 3);
        store_scenarios_free(sc, n);

        /* The per-CPU report narrowed to one scenario. */
        struct store_cpu_report *rep;
        f.scenario = "cpu";
        assert_int_equal(store_report(s, &f, &rep, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(rep[0].intervals, 2);
        assert_int_equal(rep[0].max_ns, 9000);
        store_report_free(rep, n);
        f.scenario = "nope";
        assert_int_equal(store_report(s, &f, &rep, &n), 0);
        assert_int_equal(n, 0);
        store_report_free(rep, n);
        store_close(s);
        free(c0);
}

static void test_migration_from_v1(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        const char *p = db_path("v1.db");

        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        store_close(s);
        /* Make it look like a database written by the first schema. */
        sql(p, "DROP TABLE outbox; DROP TABLE upload_status; "
               "DROP TABLE interval_load_metrics; DROP TABLE interval_loads; "
               "DROP INDEX intervals_scenario; DROP INDEX events_interval; "
               "ALTER TABLE runs DROP COLUMN boot_ns; ALTER TABLE runs DROP COLUMN release; "
               "ALTER TABLE events DROP COLUMN details; DROP TABLE traces; "
               "ALTER TABLE runs DROP COLUMN trace; DROP TABLE inventory; "
               "PRAGMA user_version = 1;");
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        store_close(s);
        sqlite3 *db;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT count(*) FROM sqlite_master WHERE name IN "
                                            "('interval_loads', 'interval_load_metrics')",
                                            -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 0), 2);
        sqlite3_finalize(st);
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 0), STORE_SCHEMA_VERSION);
        sqlite3_finalize(st);
        sqlite3_close(db);
}

static void test_outbox(void **state) {
        store *s = NULL, *up = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL, t0 = 1796300000000000000LL;

        assert_int_equal(store_open(db_path("ob.db"), STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        /* Before the outbox is on, nothing enters it. */
        struct store_event early = { t0, "scenario", -1, -1, "before" };
        assert_int_equal(store_add_event(s, run, &early), 0);
        store_set_outbox(s, true);
        const struct store_load_metric ms[] = { { "ops", "ops/s", 12.5 } };
        const struct store_interval_load ld = { "cpu", minute, 1, 0, ms, 1 };
        for (int i = 0; i < 3; i++) {
                struct store_cpu_interval row;
                make_row(&row, c0, 0, t0 + i * minute, 1000, 7000);
                struct store_event ev = { t0 + i * minute + 5, "violation", 0, 7000, "" };
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = t0 + i * minute,
                                             .length_ns = minute,
                                             .scenario = "mixed",
                                             .loads = &ld,
                                             .nloads = 1,
                                             .cpus = &row,
                                             .ncpus = 1,
                                             .events = &ev,
                                             .nevents = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }
        struct store_event ex = { t0 + 3 * minute, "load_exit", -1, 137, "killed" };
        assert_int_equal(store_add_event(s, run, &ex), 0);

        /* A second connection, as the uploader has, reads and marks the outbox. */
        assert_int_equal(store_open(db_path("ob.db"), STORE_UPLOADER, &up, err), 0);
        struct store_outbox_row *rows;
        size_t n;
        assert_int_equal(store_outbox_next(up, 10, &rows, &n), 0);
        assert_int_equal(n, 4);
        assert_true(rows[0].interval_id > 0 && rows[3].event_id > 0);
        struct summary sum = {};
        assert_int_equal(store_outbox_summary(up, rows, 4, &sum), 0);
        assert_int_equal(sum.nintervals, 3);
        assert_int_equal(sum.intervals[2].seq, 2);
        assert_string_equal(sum.intervals[0].scenario, "mixed");
        assert_int_equal(sum.intervals[0].ncpus, 1);
        assert_int_equal(sum.intervals[0].cpus[0].samples, 1000);
        assert_int_equal(sum.intervals[0].cpus[0].avg_ns, 7000);
        assert_true(sum.intervals[0].cpus[0].hist_len > 0);
        assert_int_equal(sum.intervals[0].nloads, 1);
        assert_string_equal(sum.intervals[0].loads[0].metrics[0].name, "ops");
        /* Three violations with their intervals, then the event on its own. */
        assert_int_equal(sum.nevents, 4);
        assert_string_equal(sum.events[3].type, "load_exit");
        assert_int_equal(sum.events[3].value, 137);
        summary_done(&sum);

        /* A failed attempt leaves them pending; a rejection and a success settle them. */
        assert_int_equal(store_outbox_mark(up, rows, 4, STORE_OUTBOX_RETRY, t0 + 1, "timeout"), 0);
        assert_int_equal(store_outbox_mark(up, rows, 1, STORE_OUTBOX_REJECTED, t0 + 2,
                                           "400: intervals[0].cpus: empty"),
                         0);
        assert_int_equal(store_outbox_mark(up, rows + 1, 2, STORE_OUTBOX_SENT, t0 + 3, NULL), 0);
        free(rows);
        struct store_upload_status st;
        assert_int_equal(store_get_upload_status(up, &st), 0);
        assert_int_equal(st.pending, 1);
        assert_int_equal(st.rejected, 1);
        assert_int_equal(st.sent, 2);
        assert_int_equal(st.oldest_pending_ns, t0 + 3 * minute);
        assert_int_equal(st.last_success_ns, t0 + 3);
        assert_int_equal(st.last_error_ns, t0 + 2);
        assert_string_equal(st.last_error, "400: intervals[0].cpus: empty");
        assert_string_equal(st.last_rejection, "400: intervals[0].cpus: empty");
        store_upload_status_done(&st);
        assert_int_equal(store_outbox_next(up, 10, &rows, &n), 0);
        assert_int_equal(n, 1);
        assert_true(rows[0].event_id > 0);
        assert_int_equal(rows[0].attempts, 1);
        free(rows);
        store_close(up);
        store_close(s);
        free(c0);
}

static long long query1(const char *path, const char *statement);

/* The name a run is judged under (schema 5), and each CPU's own span in what is uploaded. */
static void test_release_and_cpu_spans(void **state) {
        store *s = NULL, *up = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run, run2;
        struct store_run r;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL, t0 = 1796300000000000000LL, sec = 1000000000LL;
        const char *p = db_path("release.db");
        (void) state;

        /* A database of schema 4 with a run: migrated, the run without a release. */
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        store_close(s);
        sql(p, "ALTER TABLE runs DROP COLUMN release; DROP TABLE traces; "
               "ALTER TABLE runs DROP COLUMN trace; DROP TABLE inventory; "
               "PRAGMA user_version = 4;");
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(query1(p, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        assert_int_equal(store_get_run(s, run, &r), 0);
        assert_null(r.release);
        store_run_done(&r);

        struct store_run_info info = run_info;
        info.release = "6.1.0-rt-lab2";
        assert_int_equal(store_begin_run(s, &info, &run2, NULL), 0);
        assert_int_equal(store_get_run(s, run2, &r), 0);
        assert_string_equal(r.release, "6.1.0-rt-lab2");
        assert_string_equal(r.kernel_release, "6.1.0-rt");
        assert_string_equal(r.cpus, "0-1");
        store_run_done(&r);

        /* CPU 0 measured the whole interval; 1 only 20 s of it; 2 nothing; 3 a span larger
         * than the interval on both sides and 4 one that starts before it (a clock step):
         * cut to the interval. */
        store_set_outbox(s, true);
        struct store_cpu_interval rows[5];
        uint64_t *counts[5];
        for (int c = 0; c < 5; c++) {
                counts[c] = calloc(hist_nbuckets(1000), sizeof(uint64_t));
                make_row(&rows[c], counts[c], c, t0, c == 2 ? 0 : 1000, 7000);
        }
        rows[1].start_ns = t0 + 10 * sec;
        rows[1].length_ns = 20 * sec;
        rows[2].length_ns = 0;
        rows[3].start_ns = t0 - 5 * sec;
        rows[3].length_ns = 70 * sec;
        rows[4].start_ns = t0 - 5 * sec;
        rows[4].length_ns = 30 * sec;
        struct store_interval iv = { .run_id = run2,
                                     .seq = 0,
                                     .start_ns = t0,
                                     .length_ns = minute,
                                     .cpus = rows,
                                     .ncpus = 5 };
        assert_int_equal(store_write_interval(s, &iv), 0);
        assert_int_equal(store_open(p, STORE_UPLOADER, &up, err), 0);
        struct store_outbox_row *ob;
        size_t n;
        assert_int_equal(store_outbox_next(up, 10, &ob, &n), 0);
        assert_int_equal(n, 1);
        struct summary sum = {};
        assert_int_equal(store_outbox_summary(up, ob, n, &sum), 0);
        free(ob);
        struct summary_cpu *c = sum.intervals[0].cpus;
        assert_int_equal(c[0].span_length_ns, 0);
        assert_int_equal(c[1].span_start_ns, t0 + 10 * sec);
        assert_int_equal(c[1].span_length_ns, 20 * sec);
        assert_int_equal(c[2].span_length_ns, 0);
        assert_int_equal(c[3].span_length_ns, 0);
        assert_int_equal(c[4].span_start_ns, t0);
        assert_int_equal(c[4].span_length_ns, 25 * sec);

        /* What is uploaded is what the server's decoder accepts. */
        sum.machine = (struct summary_machine){ strdup("0123456789abcdef0123456789abcdef"),
                                                strdup("host"), strdup("cpu"), 5 };
        sum.run = (struct summary_run){ .id = run2,
                                        .boot_id = strdup("fedcba9876543210fedcba9876543210"),
                                        .kernel_release = strdup("6.1.0-rt"),
                                        .kernel_version = strdup(""),
                                        .kernel_cmdline = strdup(""),
                                        .preempt_model = strdup(""),
                                        .daemon_version = strdup("test"),
                                        .config_digest = strdup("00112233445566778899aabbccddeeff"
                                                                "00112233445566778899aabbccddeeff"),
                                        .start_ns = t0,
                                        .release = strdup("6.1.0-rt-lab2") };
        char *text;
        struct summary back;
        assert_int_equal(summary_encode(&sum, &text, NULL), 0);
        char derr[SUMMARY_ERROR_MAX];
        if (summary_decode(text, strlen(text), &back, derr) < 0)
                fail_msg("refused: %s", derr);
        assert_int_equal(back.intervals[0].cpus[4].span_length_ns, 25 * sec);
        assert_string_equal(back.run.release, "6.1.0-rt-lab2");
        summary_done(&back);
        free(text);
        summary_done(&sum);
        for (int k = 0; k < 5; k++)
                free(counts[k]);
        store_close(up);
        store_close(s);
        free(c0);
}

static long long query1(const char *path, const char *statement) {
        sqlite3 *db;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        if (sqlite3_prepare_v2(db, statement, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", statement, sqlite3_errmsg(db));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

/* A capture's analysis as rtsoakd makes it (common/trace-json.c). */
static char *analysis_text(int cpu, int64_t t, uint64_t lat_ns, const char *culprit) {
        struct trace_analysis a = { .cpu = cpu,
                                    .time_ns = t,
                                    .latency_ns = lat_ns,
                                    .timer_ns = 1000,
                                    .sched_ns = lat_ns - 2000,
                                    .return_ns = 1000,
                                    .timer_seen = true,
                                    .switch_seen = true,
                                    .marker_seen = true,
                                    .nevents = 3,
                                    .ncontribs = 1 };
        a.contribs[0] = (struct trace_contrib){ .kind = TRACE_CULPRIT_THREAD,
                                                .pid = 211,
                                                .irq = -1,
                                                .priority = 50,
                                                .duration_ns = lat_ns - 3000,
                                                .count = 1 };
        snprintf(a.contribs[0].name, sizeof(a.contribs[0].name), "%s", culprit);
        snprintf(a.contribs[0].policy, sizeof(a.contribs[0].policy), "SCHED_FIFO");
        trace_analysis_summarize(&a);
        json_t *j = trace_analysis_to_json(&a);
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        return text;
}

/* Trace captures: stored with their interval, listed and read back (the raw events too),
 * counted, uploaded with the interval within the summary's budget for raw events, refused
 * when damaged, and deleted with their interval by retention. */
static void test_traces(void **state) {
        store *s = NULL, *up = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL, t0 = 1796300000000000000LL;
        const char *p = db_path("traces.db");
        static uint8_t raw[2][700 << 10]; /* two raw blobs of 700 KiB: 1.4 MiB */
        (void) state;

        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        assert_int_equal(store_set_run_trace(s, run, "{\"state\":\"on\",\"timerlat\":false}"), 0);
        store_set_outbox(s, true);
        memset(raw[0], 'a', sizeof(raw[0]));
        memset(raw[1], 'b', sizeof(raw[1]));
        for (int i = 0; i < 6; i++) {
                struct store_cpu_interval row;
                make_row(&row, c0, 1, t0 + i * minute, 1000, 7000);
                _cleanup_free_ char *a0 = analysis_text(1, t0 + i * minute + 5, 480000,
                                                        "kworker/1:2");
                _cleanup_free_ char *a1 = analysis_text(1, t0 + i * minute + 9, 900000, "dd");
                struct store_trace tr[2] = {
                        { 1, t0 + i * minute + 5, 480000, a0, raw[0], sizeof(raw[0]), 1000, 0 },
                        { 1, t0 + i * minute + 9, 900000, a1, raw[1], sizeof(raw[1]), 2000, 5 },
                };
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = t0 + i * minute,
                                             .length_ns = minute,
                                             .cpus = &row,
                                             .ncpus = 1,
                                             .traces = tr,
                                             .ntraces = 2 };
                assert_int_equal(store_write_interval(s, &iv), 0);
        }
        /* A damaged analysis is refused, with the interval: nothing half-stored. */
        struct store_cpu_interval row;
        make_row(&row, c0, 1, t0 + 6 * minute, 1000, 7000);
        struct store_trace bad = { 1, t0 + 6 * minute, 5, "{\"cpu\":1}", NULL, 0, 0, 0 };
        struct store_interval biv = { .run_id = run,
                                      .seq = 6,
                                      .start_ns = t0 + 6 * minute,
                                      .length_ns = minute,
                                      .cpus = &row,
                                      .ncpus = 1,
                                      .traces = &bad,
                                      .ntraces = 1 };
        assert_int_equal(store_write_interval(s, &biv), -EBADMSG);
        assert_non_null(strstr(store_error(s), "a trace analysis is damaged: time_ns: missing"));
        assert_int_equal(query1(p, "SELECT count(*) FROM intervals"), 6);

        /* Listed (the newest limit, oldest first), read back. */
        struct store_filter f = STORE_FILTER_ALL;
        struct store_trace_row *rows;
        size_t n;
        assert_int_equal(store_list_traces(s, &f, 3, &rows, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(rows[0].time_ns, t0 + 4 * minute + 9);
        assert_int_equal(rows[2].time_ns, t0 + 5 * minute + 9);
        assert_int_equal(rows[2].seq, 5);
        assert_string_equal(rows[2].culprit_kind, "thread");
        assert_string_equal(rows[2].culprit_name, "dd");
        assert_int_equal(rows[2].culprit_pid, 211);
        assert_string_equal(rows[2].summary,
                            "thread dd (pid 211, SCHED_FIFO 50) ran 897 µs of the 900 µs");
        assert_null(rows[2].raw);
        int64_t id = rows[2].id;
        store_traces_free(rows, n);
        f.cpu = 0;
        assert_int_equal(store_list_traces(s, &f, 0, &rows, &n), 0);
        assert_int_equal(n, 0);
        store_traces_free(rows, n);
        struct store_trace_row one;
        assert_int_equal(store_get_trace(s, id, true, &one), 0);
        assert_int_equal(one.raw_len, sizeof(raw[1]));
        assert_int_equal(one.raw[0], 'b');
        assert_int_equal(one.raw_events, 2000);
        assert_int_equal(one.raw_dropped, 5);
        store_trace_row_done(&one);
        assert_int_equal(store_get_trace(s, 999, false, &one), -ENOENT);
        struct store_trace_totals tt;
        assert_int_equal(store_trace_totals(s, run, &tt), 0);
        assert_int_equal(tt.captures, 12);
        _cleanup_free_ char *rt = NULL;
        assert_int_equal(store_get_run_trace(s, run, &rt), 0);
        assert_string_equal(rt, "{\"state\":\"on\",\"timerlat\":false}");

        /* The upload: every capture with its interval, the raw events while the summary's
         * budget (3 MiB) lasts: 4 of the 12 blobs of 700 KiB. */
        assert_int_equal(store_open(p, STORE_UPLOADER, &up, err), 0);
        struct store_outbox_row *ob;
        assert_int_equal(store_outbox_next(up, 10, &ob, &n), 0);
        assert_int_equal(n, 6);
        struct summary sum = {};
        assert_int_equal(store_outbox_summary(up, ob, n, &sum), 0);
        size_t with_raw = 0;
        for (size_t i = 0; i < sum.nintervals; i++) {
                assert_int_equal(sum.intervals[i].ntraces, 2);
                for (size_t k = 0; k < 2; k++)
                        with_raw += sum.intervals[i].traces[k].raw != NULL;
                assert_string_equal(sum.intervals[i].traces[1].analysis->culprit.name, "dd");
        }
        assert_int_equal(with_raw, 4);
        summary_done(&sum);
        free(ob);

        /* A capture of a CPU that has no row in its interval (late past its grace time) is
         * kept here but not uploaded: the server refuses the whole interval with it. */
        sql(p, "UPDATE outbox SET state = 'sent'");
        make_row(&row, c0, 1, t0 + 7 * minute, 1000, 7000);
        _cleanup_free_ char *a2 = analysis_text(0, t0 + 7 * minute + 5, 480000, "late");
        struct store_trace other = { 0, t0 + 7 * minute + 5, 480000, a2, NULL, 0, 0, 0 };
        struct store_interval liv = { .run_id = run,
                                      .seq = 7,
                                      .start_ns = t0 + 7 * minute,
                                      .length_ns = minute,
                                      .cpus = &row,
                                      .ncpus = 1,
                                      .traces = &other,
                                      .ntraces = 1 };
        assert_int_equal(store_write_interval(s, &liv), 0);
        assert_int_equal(store_outbox_next(up, 10, &ob, &n), 0);
        assert_int_equal(n, 1);
        sum = (struct summary){};
        assert_int_equal(store_outbox_summary(up, ob, n, &sum), 0);
        assert_int_equal(sum.nintervals, 1);
        assert_int_equal(sum.intervals[0].ntraces, 0);
        summary_done(&sum);
        free(ob);
        store_close(up);

        /* Retention takes them with their interval. */
        sql(p, "UPDATE outbox SET state = 'sent'");
        struct store_prune_result res = {};
        while (store_prune(s, t0 + 3 * minute, 100, 0, &res) > 0)
                ;
        assert_int_equal(res.intervals, 3);
        assert_int_equal(query1(p, "SELECT count(*) FROM traces"), 7);
        assert_int_equal(query1(p, "SELECT min(time_ns) FROM traces") - t0, 3 * minute + 5);
        store_close(s);
        free(c0);
}

/* Retention deletes old intervals with everything that hangs on them, and old events, in
 * small batches, never what the server has not received, and gives the pages back. */
static void test_retention(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t)),
                 *c1 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL, t0 = 1796300000000000000LL;
        const char *p = db_path("retention.db");

        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_true(store_vacuum_incremental(s));
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        store_set_outbox(s, true);
        const struct store_load_metric ms[] = { { "ops", "ops/s", 12.5 } };
        const struct store_interval_load ld = { "cpu", minute, 1, 0, ms, 1 };
        for (int i = 0; i < 300; i++) {
                struct store_cpu_interval rows[2];
                make_row(&rows[0], c0, 0, t0 + i * minute, 1000, 7000);
                make_row(&rows[1], c1, 1, t0 + i * minute, 1000, 9000);
                struct store_event ev = { t0 + i * minute + 5, "violation", 0, 7000, "" };
                struct store_interval iv = { .run_id = run,
                                             .seq = (uint64_t) i,
                                             .start_ns = t0 + i * minute,
                                             .length_ns = minute,
                                             .scenario = "cpu",
                                             .loads = &ld,
                                             .nloads = 1,
                                             .cpus = rows,
                                             .ncpus = 2,
                                             .events = &ev,
                                             .nevents = 1 };
                assert_int_equal(store_write_interval(s, &iv), 0);
                struct store_event alone = { t0 + i * minute + 7, "scenario", -1, -1, "x" };
                assert_int_equal(store_add_event(s, run, &alone), 0);
        }
        /* The server has the first 500 outbox rows (250 intervals, 250 events). */
        sql(p, "UPDATE outbox SET state = 'sent' WHERE id <= 500");
        int64_t pages_before = query1(p, "PRAGMA page_count");

        /* Everything older than 280 minutes may go, but 250 to 279 were not delivered. */
        struct store_prune_result res = {};
        int r, rounds = 0;
        while ((r = store_prune(s, t0 + 280 * minute, 100, 1000, &res)) > 0)
                rounds++;
        assert_int_equal(r, 0);
        assert_int_equal(rounds, 3); /* batches of 100: 100+100, 100+100, 50+50 */
        assert_int_equal(res.intervals, 250);
        assert_int_equal(res.events, 500); /* each interval's event and each lone event */
        assert_int_equal(res.outbox, 500);
        assert_true(res.pages_freed > 0);
        store_close(s);

        assert_int_equal(query1(p, "SELECT count(*) FROM intervals"), 50);
        assert_int_equal(query1(p, "SELECT min(seq) FROM intervals"), 250);
        assert_int_equal(query1(p, "SELECT count(*) FROM interval_cpus"), 100);
        assert_int_equal(query1(p, "SELECT count(*) FROM interval_loads"), 50);
        assert_int_equal(query1(p, "SELECT count(*) FROM interval_load_metrics"), 50);
        assert_int_equal(query1(p, "SELECT count(*) FROM events"), 100);
        assert_int_equal(query1(p, "SELECT count(*) FROM outbox WHERE state = 'pending'"), 100);
        assert_int_equal(query1(p, "SELECT count(*) FROM outbox"), 100);
        assert_int_equal(query1(p, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
        assert_int_equal(query1(p, "SELECT count(*) FROM runs"), 1);
        /* The file shrank (incremental vacuum), the free list is empty again. */
        assert_true(query1(p, "PRAGMA page_count") < pages_before);
        assert_int_equal(query1(p, "PRAGMA freelist_count"), 0);

        /* Once delivered, the rest goes too. */
        sql(p, "UPDATE outbox SET state = 'sent'");
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        res = (struct store_prune_result){};
        while (store_prune(s, t0 + 1000 * minute, 100, 1000, &res) > 0)
                ;
        assert_int_equal(res.intervals, 50);
        store_close(s);
        assert_int_equal(query1(p, "SELECT count(*) FROM intervals"), 0);
        assert_int_equal(query1(p, "SELECT count(*) FROM events"), 0);
        free(c0);
        free(c1);
}

/* A database made before incremental vacuum (auto_vacuum off) is rewritten with it at open
 * when it is small, and the schema survives. */
static void test_vacuum_conversion(void **state) {
        store *s = NULL;
        char err[STORE_ERROR_MAX];
        const char *p = db_path("old-vacuum.db");
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        store_close(s);
        sql(p, "PRAGMA journal_mode = DELETE; PRAGMA auto_vacuum = NONE; VACUUM;");
        assert_int_equal(query1(p, "PRAGMA auto_vacuum"), 0);
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_true(store_vacuum_incremental(s));
        store_close(s);
        assert_int_equal(query1(p, "PRAGMA auto_vacuum"), 2);
        assert_int_equal(query1(p, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
}

/* A capture an earlier rtsoakd stored with a task's name the text rule refuses (it let C1
 * controls and bidirectional overrides through): read back for the upload with '?' for them,
 * in a summary the farm's decoder takes, rather than refused with its interval. */
static void test_traces_stored_before_the_rule(void **state) {
        store *s = NULL, *up = NULL;
        char err[STORE_ERROR_MAX], derr[SUMMARY_ERROR_MAX];
        int64_t run;
        uint64_t *c0 = calloc(hist_nbuckets(1000), sizeof(uint64_t));
        const int64_t minute = 60000000000LL, t0 = 1796300000000000000LL;
        const char *p = db_path("traces-legacy.db");
        (void) state;

        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        store_set_outbox(s, true);
        struct store_cpu_interval row;
        make_row(&row, c0, 1, t0, 1000, 7000);
        _cleanup_free_ char *a = analysis_text(1, t0 + 5, 480000, "legacy");
        struct store_trace tr = { 1, t0 + 5, 480000, a, NULL, 0, 0, 0 };
        struct store_interval iv = { .run_id = run,
                                     .start_ns = t0,
                                     .length_ns = minute,
                                     .cpus = &row,
                                     .ncpus = 1,
                                     .traces = &tr,
                                     .ntraces = 1 };
        assert_int_equal(store_write_interval(s, &iv), 0);
        sql(p, "UPDATE traces SET analysis = replace(analysis, 'legacy', 'leg' || char(8238) || "
               "'acy' || char(133))");

        assert_int_equal(store_open(p, STORE_UPLOADER, &up, err), 0);
        struct store_outbox_row *ob;
        size_t n;
        assert_int_equal(store_outbox_next(up, 10, &ob, &n), 0);
        assert_int_equal(n, 1);
        struct summary sum = {}, back;
        if (store_outbox_summary(up, ob, n, &sum) < 0)
                fail_msg("%s", store_error(up));
        assert_int_equal(sum.intervals[0].ntraces, 1);
        assert_string_equal(sum.intervals[0].traces[0].analysis->contribs[0].name, "leg?acy?");
        assert_null(strstr(sum.intervals[0].traces[0].json, "\xe2\x80\xae"));
        /* What goes to the farm is what its decoder takes. */
        sum.machine = (struct summary_machine){ (char *) "0123456789abcdef0123456789abcdef",
                                                (char *) "lab", (char *) "x", 2 };
        sum.run = (struct summary_run){
                .id = run,
                .boot_id = (char *) "fedcba9876543210fedcba9876543210",
                .kernel_release = (char *) run_info.kernel_release,
                .kernel_version = (char *) "",
                .kernel_cmdline = (char *) "",
                .preempt_model = (char *) "",
                .daemon_version = (char *) "0.1",
                .config_digest =
                        (char *) "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
                .start_ns = t0,
                .interval_ns = minute,
        };
        char *text;
        assert_int_equal(summary_encode(&sum, &text, NULL), 0);
        if (summary_decode(text, strlen(text), &back, derr) < 0)
                fail_msg("the farm would refuse it: %s", derr);
        summary_done(&back);
        free(text);
        sum.machine = (struct summary_machine){};
        sum.run = (struct summary_run){};
        summary_done(&sum);
        free(ob);
        store_close(up);
        store_close(s);
        free(c0);
}

/* The inventory's versions: stored with their events, read back in order, carried by their
 * events' uploads (never more in one summary than the farm takes), kept by retention, and a
 * damaged one named. */
static void test_inventory(void **state) {
        store *s = NULL, *up = NULL;
        char err[STORE_ERROR_MAX], derr[SUMMARY_ERROR_MAX];
        int64_t run;
        const int64_t t0 = 1796300000000000000LL, sec = 1000000000LL;
        const char *p = db_path("inventory.db");
        (void) state;

        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(store_begin_run(s, &run_info, &run, NULL), 0);
        struct store_inventory_row none;
        assert_int_equal(store_get_inventory(s, 0, &none), -ENOENT);
        store_set_outbox(s, true);
        /* The run's first version and 70 changes of one field. */
        for (uint64_t v = 1; v <= 71; v++) {
                struct store_inventory_row row = { .run_id = run,
                                                   .version = v,
                                                   .time_ns = t0 + (int64_t) v * sec,
                                                   .after_ns = v > 1 ? t0 + (int64_t) v * sec - 5
                                                                     : 0 };
                assert_int_equal(inventory_set(&row.fields, "cpu.model_name", "AMD EPYC"), 0);
                assert_int_equal(inventory_setf(&row.fields, "thp.enabled", "%s",
                                                v % 2 ? "never" : "always"),
                                 0);
                struct store_event ev = { row.time_ns, v == 1 ? "inventory" : "inventory_changed",
                                          -1, (int64_t) v, "changed" };
                assert_int_equal(store_add_inventory(s, &row, &ev), 0);
                inventory_done(&row.fields);
        }
        /* Its number again is refused, and nothing of it stays (no second event). */
        struct store_inventory_row again = { .run_id = run, .version = 3, .time_ns = t0 };
        struct store_event aev = { t0, "inventory_changed", -1, 3, "again" };
        assert_int_equal(store_add_inventory(s, &again, &aev), -EEXIST);
        assert_int_equal(query1(p, "SELECT count(*) FROM events"), 71);

        struct store_inventory_row *v;
        size_t n;
        assert_int_equal(store_list_inventory(s, run, &v, &n), 0);
        assert_int_equal(n, 71);
        assert_int_equal(v[0].version, 1);
        assert_int_equal(v[0].after_ns, 0);
        assert_int_equal(v[70].version, 71);
        assert_int_equal(v[70].after_ns, t0 + 71 * sec - 5);
        assert_string_equal(inventory_get(&v[1].fields, "thp.enabled"), "always");
        store_inventory_rows_free(v, n);
        struct store_inventory_row last;
        assert_int_equal(store_get_inventory(s, 0, &last), 0);
        assert_int_equal(last.version, 71);
        assert_string_equal(inventory_get(&last.fields, "cpu.model_name"), "AMD EPYC");
        store_inventory_row_done(&last);

        /* The uploads: 64 versions in the first, the 7 others in the next, each taken by the
         * farm's decoder. */
        assert_int_equal(store_open(p, STORE_UPLOADER, &up, err), 0);
        for (size_t round = 0, want[] = { 64, 7 }; round < 2; round++) {
                struct store_outbox_row *ob;
                struct summary sum = {}, back;
                assert_int_equal(store_outbox_next(up, 1000, &ob, &n), 0);
                assert_int_equal(n, want[round]);
                assert_int_equal(store_outbox_summary(up, ob, n, &sum), 0);
                assert_int_equal(sum.ninventory, want[round]);
                assert_int_equal(sum.nevents, want[round]);
                assert_int_equal(sum.inventory[0].version, round ? 65 : 1);
                sum.machine = (struct summary_machine){ (char *) "0123456789abcdef0123456789abcdef",
                                                        (char *) "lab", (char *) "x", 2 };
                sum.run = (struct summary_run){
                        .id = run,
                        .boot_id = (char *) "fedcba9876543210fedcba9876543210",
                        .kernel_release = (char *) run_info.kernel_release,
                        .kernel_version = (char *) "",
                        .kernel_cmdline = (char *) "",
                        .preempt_model = (char *) "",
                        .daemon_version = (char *) "0.1",
                        .config_digest = (char *) "00112233445566778899aabbccddeeff"
                                                  "00112233445566778899aabbccddeeff",
                        .start_ns = t0,
                };
                char *text;
                assert_int_equal(summary_encode(&sum, &text, NULL), 0);
                if (summary_decode(text, strlen(text), &back, derr) < 0)
                        fail_msg("the farm would refuse it: %s", derr);
                assert_int_equal(back.ninventory, want[round]);
                summary_done(&back);
                free(text);
                sum.machine = (struct summary_machine){};
                sum.run = (struct summary_run){};
                summary_done(&sum);
                assert_int_equal(store_outbox_mark(up, ob, n, STORE_OUTBOX_SENT, t0, NULL), 0);
                free(ob);
        }
        store_close(up);

        /* Retention takes the delivered events; the versions stay with their run. */
        struct store_prune_result res = {};
        while (store_prune(s, t0 + 1000 * sec, 100, 0, &res) > 0)
                ;
        assert_int_equal(res.events, 71);
        assert_int_equal(query1(p, "SELECT count(*) FROM inventory"), 71);
        assert_int_equal(query1(p, "SELECT count(*) FROM pragma_foreign_key_check"), 0);

        /* A version damaged behind the daemon's back is named, not shown. */
        store_close(s);
        sql(p, "UPDATE inventory SET fields = '{\"thp.enabled\":\"a\\u001bb\"}' "
               "WHERE version = 2");
        assert_int_equal(store_open(p, STORE_READONLY, &s, err), 0);
        assert_int_equal(store_list_inventory(s, 0, &v, &n), -EBADMSG);
        assert_non_null(strstr(store_error(s), "inventory version 2 of run 1 is damaged: "
                                               "thp.enabled: a control character U+001B"));
        store_close(s);

        /* A database of schema 6 gets the table. */
        sql(p, "DROP TABLE inventory; PRAGMA user_version = 6;");
        assert_int_equal(store_open(p, STORE_WRITER, &s, err), 0);
        assert_int_equal(query1(p, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        assert_int_equal(query1(p, "SELECT count(*) FROM inventory"), 0);
        store_close(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_open_create_and_reopen),
                cmocka_unit_test(test_refuses_foreign_and_newer),
                cmocka_unit_test(test_corrupt_file),
                cmocka_unit_test(test_runs_and_unclean),
                cmocka_unit_test(test_interval_roundtrip_and_report),
                cmocka_unit_test(test_year_scale_sums),
                cmocka_unit_test(test_corrupt_rows_fail_report),
                cmocka_unit_test(test_scenarios_and_loads),
                cmocka_unit_test(test_migration_from_v1),
                cmocka_unit_test(test_outbox),
                cmocka_unit_test(test_release_and_cpu_spans),
                cmocka_unit_test(test_traces),
                cmocka_unit_test(test_traces_stored_before_the_rule),
                cmocka_unit_test(test_retention),
                cmocka_unit_test(test_vacuum_conversion),
                cmocka_unit_test(test_inventory),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
