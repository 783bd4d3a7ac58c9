/* SPDX-License-Identifier: MIT */
/* Integration tests of rtsoak-replay: the real binary posts synthetic histories to the real
 * rtsoak-server on loopback; what the farm stored is read back over its API and with SQLite. */
#include <curl/curl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "hist.h"

#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
#define ID_C "c0ffee00c0ffee00c0ffee00c0ffee00"
#define ID_D "d00dd00dd00dd00dd00dd00dd00dd00d"
#define ID_E "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0"
#define ID_F "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"
#define ID_G "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
#define ID_H "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"

#define SEC INT64_C(1000000000)
#define MIN_NS (60 * SEC)
/* 2026-11-01T00:00:00Z: a multiple of the default rotation's 6 h cycle. */
#define DAY1 INT64_C(1793491200000000000)

static char *dir;
static char db_path[512], log_path[512], base_url[128];
static pid_t server_pid;
static char token_a[80], token_b[80], token_c[80], token_d[80], token_e[80], token_f[80],
        token_g[80], token_h[80];

static int setup(void **state) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        dir = tu_mkdtemp("replay");
        snprintf(db_path, sizeof(db_path), "%s/farm.db", dir);
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        tu_server_enroll(db_path, ID_A, NULL, NULL, token_a);
        tu_server_enroll(db_path, ID_B, NULL, NULL, token_b);
        tu_server_enroll(db_path, ID_C, NULL, NULL, token_c);
        tu_server_enroll(db_path, ID_D, NULL, NULL, token_d);
        tu_server_enroll(db_path, ID_E, NULL, NULL, token_e);
        tu_server_enroll(db_path, ID_F, NULL, NULL, token_f);
        tu_server_enroll(db_path, ID_G, NULL, NULL, token_g);
        tu_server_enroll(db_path, ID_H, NULL, NULL, token_h);
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", NULL, base_url,
                                     sizeof(base_url));
        return 0;
}

static int teardown(void **state) {
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                tu_wait(server_pid, 10000);
        }
        tu_rmdir(dir);
        curl_global_cleanup();
        return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static sqlite3 *db_open(void) {
        sqlite3 *d;
        if (sqlite3_open_v2(db_path, &d, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                fail_msg("cannot open %s: %s", db_path, sqlite3_errmsg(d));
        sqlite3_busy_timeout(d, 5000);
        return d;
}

_printf_(2, 3) static long long db_int(sqlite3 *d, const char *fmt, ...) {
        char sql[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sql, sizeof(sql), fmt, ap);
        va_end(ap);
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(d, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(d));
        if (sqlite3_step(st) != SQLITE_ROW)
                fail_msg("%s: no row: %s", sql, sqlite3_errmsg(d));
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

/* GET path from the server: its JSON, after checking for 200. */
static json_t *get_json(const char *path) {
        char url[512];
        snprintf(url, sizeof(url), "%s%s", base_url, path);
        return tu_get_json(url, 200);
}

/* Runs rtsoak-replay --server URL with args (NULL-terminated). */
static void replay(const char *const *args, struct tu_result *ret) {
        char *argv[64];
        size_t n = 0;
        argv[n++] = (char *) tu_bin("RTSOAK_REPLAY");
        argv[n++] = "--server";
        argv[n++] = base_url;
        for (; *args; args++) {
                assert_true(n < 63);
                argv[n++] = (char *) *args;
        }
        argv[n] = NULL;
        tu_run(argv, 110000, NULL, NULL, ret);
}

static const char *const history_args[] = {
        "--machine",
        ID_A,
        "--token",
        token_a,
        "--from",
        "2026-11-01T00:00:00Z",
        "--to",
        "2026-11-03T00:00:00Z",
        "--cpus",
        "4",
        "--seed",
        "7",
        /* 10:00 is in the rotation's "io" hour; CPU 2 sees 5 ms, far over the 100 us bound. */
        "--spike",
        "2026-11-01T10:00:30.5Z,2,5ms",
        "--gap",
        "2026-11-01T12:00:00Z,2026-11-01T12:30:00Z",
        /* Kills run 1 in the 00:00 interval of day 2: run 2 starts at 00:03 (2 min reboot). */
        "--unclean",
        "2026-11-02T00:00:30Z",
        /* 01:00-02:00 is the "cpu" hour: cpu down from 01:10:30 for 5 min. */
        "--load-down",
        "2026-11-01T01:10:30Z,5min,cpu",
        NULL,
};

/* ---- tests -------------------------------------------------------------------------------- */

/* Two days of one machine with a spike, a gap, an unclean end and a load that went down:
 * the farm holds exactly that history; posting it again changes nothing. */
static void test_history(void **state) {
        struct tu_result r;
        const char *const *args = history_args;
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay failed (%d): %s", r.status, r.err);
        /* 2880 minutes, less the 30 of the gap and 00:00-00:03 of day 2 (the interval that
         * the crash cut short and the reboot). */
        const long long expected = 2880 - 30 - 3;
        char line[256];
        snprintf(line, sizeof(line), "machines 1, runs 2, intervals %lld, events 3,", expected);
        if (!strstr(r.out, line))
                fail_msg("expected '%s' in: %s", line, r.out);
        tu_result_done(&r);

        /* The API's view. */
        json_t *m = get_json("/api/v1/machines/" ID_A);
        assert_int_equal(tu_jint(m, "intervals"), expected);
        assert_int_equal(tu_jint(m, "events"), 3);
        assert_int_equal(tu_jint(m, "worst_latency_ns"), 5000000);
        assert_string_equal(json_string_value(json_object_get(m, "hostname")), "replay-01234567");
        assert_int_equal(tu_jint(m, "cpus"), 4);
        json_t *latest = json_object_get(m, "latest_run");
        assert_int_equal(tu_jint(latest, "id"), 2);
        assert_int_equal(tu_jint(latest, "start_ns"), DAY1 + 86400 * SEC + 3 * MIN_NS);
        assert_string_equal(json_string_value(json_object_get(latest, "kernel_release")),
                            "6.1.0-rt-replay");
        json_decref(m);

        /* The database's view. */
        sqlite3 *d = db_open();
        const char *run1 = "(SELECT id FROM runs WHERE machine_id = '" ID_A "' AND run_id = 1)";
        const char *run2 = "(SELECT id FROM runs WHERE machine_id = '" ID_A "' AND run_id = 2)";
        assert_int_equal(db_int(d, "SELECT count(*) FROM runs WHERE machine_id = '%s'", ID_A), 2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals WHERE run = %s", run1), 1410);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals WHERE run = %s", run2), 1437);
        /* Whole, epoch-aligned minutes; seq counts on across the gap and restarts at a run. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM intervals WHERE run IN (%s, %s) AND "
                                "(start_ns %% 60000000000 != 0 OR length_ns != 60000000000)",
                                run1, run2),
                         0);
        assert_int_equal(db_int(d, "SELECT max(seq) FROM intervals WHERE run = %s", run1), 1409);
        assert_int_equal(db_int(d, "SELECT min(seq) FROM intervals WHERE run = %s", run2), 0);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM intervals WHERE run = %s AND start_ns >= "
                                "%lld AND start_ns < %lld",
                                run1, (long long) (DAY1 + 12 * 60 * MIN_NS),
                                (long long) (DAY1 + 12 * 60 * MIN_NS + 30 * MIN_NS)),
                         0);
        assert_int_equal(db_int(d, "SELECT max(start_ns) FROM intervals WHERE run = %s", run1),
                         DAY1 + 86400 * SEC - MIN_NS);
        assert_int_equal(db_int(d, "SELECT min(start_ns) FROM intervals WHERE run = %s", run2),
                         DAY1 + 86400 * SEC + 3 * MIN_NS);
        /* Every interval has its 4 CPUs with 60000 samples (1 min / 1 ms). */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_cpus c JOIN intervals i ON "
                                "c.interval = i.id WHERE i.run IN (%s, %s) AND c.samples = 60000",
                                run1, run2),
                         4 * expected);

        /* The events, with their runs, types and times. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM events WHERE run = %s AND type = "
                                "'violation' AND cpu = 2 AND value = 5000000 AND time_ns = %lld",
                                run1, (long long) (DAY1 + 600 * MIN_NS + 30 * SEC + SEC / 2)),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM events WHERE run = %s AND type = "
                                "'unclean_end' AND cpu IS NULL AND time_ns = %lld AND message "
                                "LIKE 'run 1 %%did not end cleanly%%'",
                                run1, (long long) (DAY1 + 86400 * SEC)),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM events WHERE run = %s AND type = "
                                "'load_exit' AND value = 1 AND time_ns = %lld AND message LIKE "
                                "'cpu #1 of scenario cpu %%'",
                                run1, (long long) (DAY1 + 70 * MIN_NS + 30 * SEC)),
                         1);
        assert_int_equal(db_int(d, "SELECT count(*) FROM events WHERE run = %s", run2), 0);

        /* The spike: its interval's maximum on CPU 2 only, at its time, one violation. */
        char where[256];
        snprintf(where, sizeof(where), "i.run = %s AND i.start_ns = %lld", run1,
                 (long long) (DAY1 + 600 * MIN_NS));
        assert_int_equal(db_int(d, "SELECT i.max_ns FROM intervals i WHERE %s", where), 5000000);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_cpus c JOIN intervals i ON "
                                "c.interval = i.id WHERE %s AND c.cpu = 2 AND c.max_ns = 5000000 "
                                "AND c.max_time_ns = %lld AND c.violations = 1",
                                where, (long long) (DAY1 + 600 * MIN_NS + 30 * SEC + SEC / 2)),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT max(c.max_ns) FROM interval_cpus c JOIN intervals i ON "
                                "c.interval = i.id WHERE %s AND c.cpu != 2",
                                where),
                         db_int(d,
                                "SELECT max(c.max_ns) FROM interval_cpus c JOIN intervals i ON "
                                "c.interval = i.id WHERE %s AND c.cpu != 2 AND c.max_ns <= 30000",
                                where));
        /* Nowhere else over the bound, nor over --latency. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_cpus c JOIN intervals i ON "
                                "c.interval = i.id WHERE i.run IN (%s, %s) AND (c.max_ns > 30000 "
                                "OR c.violations > 0)",
                                run1, run2),
                         1);
        /* Its histogram decodes to the sample count, with the spike in the 5 ms bucket. */
        sqlite3_stmt *st;
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "SELECT c.hist, c.samples, c.hist_limit_us FROM interval_cpus c JOIN intervals "
                 "i ON c.interval = i.id WHERE %s AND c.cpu = 2",
                 where);
        assert_int_equal(sqlite3_prepare_v2(d, sql, -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        struct hist h;
        uint32_t limit = (uint32_t) sqlite3_column_int(st, 2);
        assert_int_equal(hist_init(&h, limit), 0);
        uint64_t total = 0;
        const char *reason = NULL;
        assert_int_equal(hist_decode_merge(&h, sqlite3_column_blob(st, 0),
                                           (size_t) sqlite3_column_bytes(st, 0), &total, &reason),
                         0);
        assert_int_equal(total, sqlite3_column_int64(st, 1));
        assert_int_equal(h.counts[hist_index(limit, 5000000)], 1);
        assert_int_equal(hist_overflows(&h, limit), 1);
        hist_done(&h);
        sqlite3_finalize(st);

        /* The load that went down: cpu's up time in 01:10-01:16 is 6 min less 5 min. */
#define LOADS                                                                          \
        "SELECT %s FROM interval_loads l JOIN intervals i ON l.interval = i.id WHERE " \
        "i.run = %s AND l.generator = 'cpu' AND i.start_ns >= %lld AND i.start_ns < %lld"
        long long from = DAY1 + 70 * MIN_NS, to = DAY1 + 76 * MIN_NS;
        assert_int_equal(db_int(d, LOADS, "sum(l.up_ns)", run1, from, to), 60 * SEC);
        assert_int_equal(db_int(d, LOADS, "sum(l.exits)", run1, from, to), 1);
        assert_int_equal(db_int(d, LOADS, "count(*)", run1, from, to), 6);
        assert_int_equal(db_int(d, LOADS, "min(l.up_ns)", run1, from, to), 0);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_loads l JOIN intervals i ON "
                                "l.interval = i.id WHERE i.run IN (%s, %s) AND l.up_ns != "
                                "i.length_ns",
                                run1, run2),
                         6); /* 01:10 and 01:15 partly, 01:11-01:14 not at all */
        /* The rotation: "mixed" from 05:00 runs its 4 generators; "idle" none. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_loads l JOIN intervals i ON "
                                "l.interval = i.id WHERE i.run = %s AND i.start_ns = %lld AND "
                                "i.scenario = 'mixed'",
                                run1, (long long) (DAY1 + 300 * MIN_NS)),
                         4);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_loads l JOIN intervals i ON "
                                "l.interval = i.id WHERE i.run IN (%s, %s) AND i.scenario = "
                                "'idle'",
                                run1, run2),
                         0);
        long long rows = db_int(d, "SELECT count(*) FROM interval_cpus");
        sqlite3_close(d);

        /* The same history again: every upload a duplicate, nothing stored twice. */
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay again failed (%d): %s", r.status, r.err);
        tu_result_done(&r);
        d = db_open();
        assert_int_equal(db_int(d, "SELECT count(*) FROM interval_cpus"), rows);
        assert_int_equal(db_int(d, "SELECT count(*) FROM events e JOIN runs r ON e.run = r.id "
                                   "WHERE r.machine_id = '" ID_A "'"),
                         3);
        sqlite3_close(d);
}

/* Three machines from a --tokens file, two at a time: each its own history. */
static void test_tokens(void **state) {
        char path[600], text[1024];
        snprintf(path, sizeof(path), "%s/tokens", dir);
        snprintf(text, sizeof(text), "# machine token\n%s %s\n\n%s  %s\n%s\t%s\n", ID_B, token_b,
                 ID_C, token_c, ID_D, token_d);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);

        struct tu_result r;
        const char *args[] = { "--tokens", path,
                               "--jobs",   "2",
                               "--from",   "2026-11-05T00:00:00Z",
                               "--to",     "2026-11-05T06:00:00Z",
                               NULL };
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay --tokens failed (%d): %s", r.status, r.err);
        if (!strstr(r.out, "machines 3, runs 3, intervals 1080,"))
                fail_msg("unexpected summary line: %s", r.out);
        tu_result_done(&r);

        sqlite3 *d = db_open();
        const char *ids[] = { ID_B, ID_C, ID_D };
        long long sums[3];
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(db_int(d,
                                        "SELECT count(*) FROM intervals i JOIN runs r ON i.run = "
                                        "r.id WHERE r.machine_id = '%s'",
                                        ids[i]),
                                 360);
                assert_int_equal(
                        db_int(d, "SELECT count(*) FROM runs WHERE machine_id = '%s'", ids[i]), 1);
                assert_int_equal(db_int(d,
                                        "SELECT count(*) FROM machines WHERE id = '%s' AND "
                                        "hostname = 'replay-%.8s' AND cpus = 2",
                                        ids[i], ids[i]),
                                 1);
                sums[i] = db_int(d,
                                 "SELECT sum(c.max_ns) FROM interval_cpus c JOIN intervals i ON "
                                 "c.interval = i.id JOIN runs r ON i.run = r.id WHERE "
                                 "r.machine_id = '%s'",
                                 ids[i]);
        }
        /* Seeded per machine: the jitter differs. */
        assert_true(sums[0] != sums[1] && sums[1] != sums[2] && sums[0] != sums[2]);
        sqlite3_close(d);
}

/* What the server refuses stops the replay with its message and exit status 1. */
static void test_refused(void **state) {
        struct tu_result r;
        /* Another machine's token. */
        const char *args[] = { "--machine", ID_E, "--token", token_a, "--days", "1", NULL };
        replay(args, &r);
        assert_int_equal(r.status, 1);
        if (!strstr(r.err, "HTTP 403: machine.id: not the machine of this token"))
                fail_msg("expected the server's 403 message, got: %s", r.err);
        tu_result_done(&r);
        /* A token the server does not know, from a file. */
        char path[600];
        snprintf(path, sizeof(path), "%s/token", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("0000000000000000000000000000000000000000000000000000000000000000\n", f);
        fclose(f);
        const char *args2[] = { "--machine", ID_E, "--token-file", path, "--days", "1", NULL };
        replay(args2, &r);
        assert_int_equal(r.status, 1);
        if (!strstr(r.err, "HTTP 401: missing, invalid or revoked token"))
                fail_msg("expected the server's 401 message, got: %s", r.err);
        tu_result_done(&r);
        /* Nothing of E was stored. */
        sqlite3 *d = db_open();
        assert_int_equal(db_int(d, "SELECT count(*) FROM runs WHERE machine_id = '%s'", ID_E), 0);
        sqlite3_close(d);
}

/* A clean restart: a new run (the next number, a new boot id) and no event; --json. */
static void test_restart_json(void **state) {
        struct tu_result r;
        const char *args[] = { "--machine",     ID_E,
                               "--token",       token_e,
                               "--from",        "2026-11-01T00:00:00Z",
                               "--to",          "2026-11-01T03:00:00Z",
                               "--run-id",      "5",
                               "--restart",     "2026-11-01T01:00:30Z",
                               "--reboot-time", "5min",
                               "--json",        NULL };
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay failed (%d): %s", r.status, r.err);
        json_t *j = tu_json(r.out);
        tu_result_done(&r);
        /* 180 minutes less 01:00-01:06 (cut short, then 5 min of reboot). */
        assert_int_equal(tu_jint(j, "machines"), 1);
        assert_int_equal(tu_jint(j, "runs"), 2);
        assert_int_equal(tu_jint(j, "intervals"), 174);
        assert_int_equal(tu_jint(j, "events"), 0);
        assert_int_equal(tu_jint(j, "uploads"), 1 + 2);
        assert_true(json_is_true(json_object_get(j, "ok")));
        assert_true(json_real_value(json_object_get(j, "seconds")) > 0);
        json_decref(j);

        sqlite3 *d = db_open();
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM runs WHERE machine_id = '%s' AND ((run_id = "
                                "5 AND start_ns = %lld) OR (run_id = 6 AND start_ns = %lld))",
                                ID_E, (long long) DAY1, (long long) (DAY1 + 66 * MIN_NS)),
                         2);
        assert_int_equal(
                db_int(d, "SELECT count(DISTINCT boot_id) FROM runs WHERE machine_id = '%s'", ID_E),
                2);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM events e JOIN runs r ON e.run = r.id WHERE "
                                "r.machine_id = '%s'",
                                ID_E),
                         0);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM intervals i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '%s' AND r.run_id = 5",
                                ID_E),
                         60);
        sqlite3_close(d);
}

/* The machine's inventory: each run sends the machine as it is at its start, a change while a
 * run is up is a new version with its event, one made while the machine rebooted is what the
 * next run finds; the farm shows each change. */
static void test_inventory(void **state) {
        struct tu_result r;
        const char *args[] = { "--machine",
                               ID_H,
                               "--token",
                               token_h,
                               "--from",
                               "2026-11-01T00:00:00Z",
                               "--to",
                               "2026-11-01T03:00:00Z",
                               "--restart",
                               "2026-11-01T01:00:30Z",
                               "--reboot-time",
                               "5min",
                               "--inventory",
                               "dmi.bios_version=1.0",
                               "--inventory",
                               "thp.enabled=never",
                               "--inventory-change",
                               "2026-11-01T00:30:00Z,thp.enabled=always",
                               "--inventory-change",
                               "2026-11-01T01:02:00Z,dmi.bios_version=1.1",
                               "--inventory-change",
                               "2026-11-01T02:00:00Z,-thp.enabled",
                               NULL };
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay failed (%d): %s", r.status, r.err);
        tu_result_done(&r);
        sqlite3 *d = db_open();
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM inventories i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '%s'",
                                ID_H),
                         4);
        /* Run 1's change: found at it, the check before five minutes earlier. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM inventories i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '%s' AND r.run_id = 1 AND i.version = 2 "
                                "AND i.time_ns = %lld AND i.after_ns = %lld AND i.fields = "
                                "'{\"dmi.bios_version\":\"1.0\",\"thp.enabled\":\"always\"}'",
                                ID_H, (long long) (DAY1 + 30 * MIN_NS),
                                (long long) (DAY1 + 25 * MIN_NS)),
                         1);
        /* Run 2 starts with the BIOS updated while it rebooted. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM inventories i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '%s' AND r.run_id = 2 AND i.version = 1 "
                                "AND i.after_ns IS NULL AND i.fields = "
                                "'{\"dmi.bios_version\":\"1.1\",\"thp.enabled\":\"always\"}'",
                                ID_H),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM events e JOIN runs r ON e.run = r.id WHERE "
                                "r.machine_id = '%s' AND e.type = 'inventory_changed' AND "
                                "e.message LIKE 'version 2, 1 field(s) changed: thp.enabled: %%'",
                                ID_H),
                         2);
        sqlite3_close(d);
        char u[300];
        snprintf(u, sizeof(u), "%s/api/v1/machines/%s/inventory", base_url, ID_H);
        json_t *inv = tu_get_json(u, 200);
        assert_int_equal(tu_jint(inv, "versions"), 4);
        assert_int_equal(tu_jint(inv, "total"), 3);
        json_t *newest = json_array_get(
                json_object_get(json_array_get(json_object_get(inv, "changes"), 0), "fields"), 0);
        assert_string_equal(json_string_value(json_object_get(newest, "name")), "thp.enabled");
        assert_true(json_is_null(json_object_get(newest, "to")));
        json_decref(inv);
}

/* The options that make hostile histories: what the farm stores is what they describe. */
static void test_hostile(void **state) {
        struct tu_result r;
        const char *args[] = {
                "--machine", ID_F, "--token", token_f, "--from", "2026-11-01T00:00:00Z", "--to",
                "2026-11-01T00:20:00Z", "--cpus", "3", "--rotation", "cpu 20min", "--release",
                "6.6.30-rt31-lab9", "--kernel-version", "#2 SMP PREEMPT_RT another build",
                "--probed-cpus", "0-3",
                /* CPU 1 leaves 30 s into 00:05 and is back at 00:08. */
                "--probe-down", "1,2026-11-01T00:05:30Z,2026-11-01T00:08:00Z",
                /* Every CPU is away through 00:10: nothing of that minute is sent. */
                "--probe-down", "0,2026-11-01T00:10:00Z,2026-11-01T00:11:00Z", "--probe-down",
                "1,2026-11-01T00:10:00Z,2026-11-01T00:11:00Z", "--probe-down",
                "2,2026-11-01T00:10:00Z,2026-11-01T00:11:00Z", "--samples-share", "95%",
                "--load-zero", "cpu,2026-11-01T00:12:00Z,2026-11-01T00:13:30Z", "--clock-ahead",
                "2h,2026-11-01T00:15:00Z", "--json", NULL
        };
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay failed (%d): %s", r.status, r.err);
        json_t *j = tu_json(r.out);
        assert_int_equal(tu_jint(j, "intervals"), 19);
        json_decref(j);
        tu_result_done(&r);

        sqlite3 *d = db_open();
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM runs WHERE machine_id = '%s' AND release = "
                                "'6.6.30-rt31-lab9' AND kernel_release = '6.1.0-rt-replay' AND "
                                "kernel_version = '#2 SMP PREEMPT_RT another build' AND "
                                "probed_cpus = '0-3'",
                                ID_F),
                         1);
#define F_CPUS                                                                                    \
        "FROM interval_cpus c JOIN intervals i ON i.id = c.interval JOIN runs r ON r.id = i.run " \
        "WHERE r.machine_id = '" ID_F "'"
        /* Never CPU 3; no minute 10; CPU 1 away in 6 and 7, and for half of 5. */
        assert_int_equal(db_int(d, "SELECT count(*) " F_CPUS " AND c.cpu = 3"), 0);
        assert_int_equal(db_int(d, "SELECT count(*) " F_CPUS " AND i.seq = 10"), 0);
        assert_int_equal(db_int(d, "SELECT count(*) " F_CPUS " AND c.cpu = 1 AND i.seq IN (6, 7)"),
                         0);
        assert_int_equal(db_int(d,
                                "SELECT count(*) " F_CPUS " AND c.cpu = 1 AND i.seq = 5 AND "
                                "c.span_start_ns = i.start_ns AND c.span_length_ns = 30000000000 "
                                "AND c.samples = 28500"),
                         1);
        /* 95 % of the 60,000 wake-ups of a minute at 1 ms, on every CPU of every full minute. */
        assert_int_equal(db_int(d, "SELECT count(*) " F_CPUS " AND NOT (c.cpu = 1 AND i.seq = 5) "
                                   "AND c.samples != 57000"),
                         0);
        /* The CPUs that measured the whole interval have no span of their own. */
        assert_int_equal(db_int(d, "SELECT count(*) " F_CPUS " AND NOT (c.cpu = 1 AND i.seq = 5) "
                                   "AND c.span_start_ns IS NOT NULL"),
                         0);
#define F_METRICS                                                                            \
        "FROM interval_load_metrics m JOIN intervals i ON i.id = m.interval JOIN runs r ON " \
        "r.id = i.run WHERE r.machine_id = '" ID_F "' AND m.name = 'ops'"
        /* The cpu generator up but reporting nothing through minute 12, half of 13. */
        assert_int_equal(db_int(d, "SELECT count(*) " F_METRICS " AND i.seq = 12 AND m.value = 0"),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT count(*) " F_METRICS " AND i.seq = 13 AND m.value > 50000 "
                                "AND m.value < 70000"),
                         1);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM interval_loads l JOIN intervals i ON i.id = "
                                "l.interval JOIN runs r ON r.id = i.run WHERE r.machine_id = '%s' "
                                "AND l.up_ns != i.length_ns",
                                ID_F),
                         0);
        /* From 00:15 on, stamped two hours ahead. */
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM intervals i JOIN runs r ON r.id = i.run "
                                "WHERE r.machine_id = '%s' AND i.start_ns = %lld + i.seq * %lld",
                                ID_F, (long long) DAY1, (long long) MIN_NS),
                         14);
        assert_int_equal(db_int(d,
                                "SELECT count(*) FROM intervals i JOIN runs r ON r.id = i.run "
                                "WHERE r.machine_id = '%s' AND i.seq >= 15 AND i.start_ns = %lld "
                                "+ i.seq * %lld + 7200000000000",
                                ID_F, (long long) DAY1, (long long) MIN_NS),
                         5);
        sqlite3_close(d);
}

/* Intervals that measured nothing, in one upload after intervals that did: the farm keeps no
 * measured span for them, and a scenario only where one was sent. */
static void test_unmeasured_after_measured(void **state) {
        struct tu_result r;
        const char *args[] = { "--machine",    ID_G,
                               "--token",      token_g,
                               "--from",       "2026-11-01T00:00:00Z",
                               "--to",         "2026-11-01T00:10:00Z",
                               "--rotation",   "idle 10min",
                               "--probe-down", "1,2026-11-01T00:03:00Z,2026-11-01T00:06:00Z",
                               "--quiet",      NULL };
        replay(args, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay failed (%d): %s", r.status, r.err);
        tu_result_done(&r);
        sqlite3 *d = db_open();
        const char *g = "FROM intervals i JOIN runs r ON r.id = i.run WHERE r.machine_id = '" ID_G
                        "'";
        char sql[512];
        snprintf(sql, sizeof(sql), "SELECT count(*) %s", g);
        assert_int_equal(db_int(d, "%s", sql), 10);
        /* Minutes 3-5 lack CPU 1: nothing measured, nothing counted. */
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) %s AND i.seq BETWEEN 3 AND 5 AND i.counted_ns = 0 AND "
                 "i.m_start_ns IS NULL AND i.m_end_ns IS NULL",
                 g);
        assert_int_equal(db_int(d, "%s", sql), 3);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) %s AND i.seq NOT BETWEEN 3 AND 5 AND i.m_start_ns = i.start_ns",
                 g);
        assert_int_equal(db_int(d, "%s", sql), 7);
        sqlite3_close(d);
}

/* A server that throttles (429 with Retry-After) gets everything in the end; one that is
 * gone makes the replay give up after its retries, with exit status 1. */
static void test_retries(void **state) {
        char db2[600], log2[600], url2[128], token[80];
        snprintf(db2, sizeof(db2), "%s/farm2.db", dir);
        snprintf(log2, sizeof(log2), "%s/server2.log", dir);
        tu_server_enroll(db2, ID_E, NULL, NULL, token);
        const char *extra[] = { "--rate", "2", "--burst", "1", NULL };
        pid_t pid = tu_server_start(db2, log2, "127.0.0.1:0", extra, url2, sizeof(url2));

        struct tu_result r;
        char *argv[] = { (char *) tu_bin("RTSOAK_REPLAY"),
                         "--server",
                         url2,
                         "--machine",
                         ID_E,
                         "--token",
                         token,
                         "--from",
                         "2026-11-01T00:00:00Z",
                         "--to",
                         "2026-11-01T06:00:00Z",
                         NULL };
        tu_run(argv, 110000, NULL, NULL, &r);
        if (r.status != 0 || !strstr(r.out, "intervals 360, events 0, uploads 6,"))
                fail_msg("expected all 6 uploads to go through, got %d: %s%s", r.status, r.out,
                         r.err);
        if (!strstr(r.err, "HTTP 429: too many requests") || !strstr(r.err, "retrying in"))
                fail_msg("expected retries after 429, got: %s", r.err);
        tu_result_done(&r);
        sqlite3 *d;
        assert_int_equal(sqlite3_open_v2(db2, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals"), 360);
        assert_int_equal(db_int(d, "SELECT count(*) FROM uploads"), 6);
        sqlite3_close(d);

        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 10000), 0);
        tu_run(argv, 110000, NULL, NULL, &r);
        assert_int_equal(r.status, 1);
        if (!strstr(r.err, "giving up after 10 attempts") || !strstr(r.err, url2))
                fail_msg("expected the replay to give up, got: %s", r.err);
        tu_result_done(&r);
}

/* Bad options: exit 64 (EX_USAGE) and a message that names the option. */
static void test_usage_errors(void **state) {
        char path[600];
        snprintf(path, sizeof(path), "%s/bad-tokens", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%s %s\nnot-an-id sometoken\n", ID_B, token_b);
        fclose(f);

        const struct {
                const char *args[10];
                const char *expect;
        } cases[] = {
                { { "--token", "x", NULL }, "--machine: required" },
                { { "--machine", "0123", "--token", "x", NULL }, "--machine: '0123'" },
                { { "--machine", ID_A, NULL }, "--token-file: required" },
                { { "--machine", ID_A, "--token", "x", "--interval", "5 parsecs", NULL },
                  "--interval:" },
                { { "--machine", ID_A, "--token", "x", "--cpus", "0", NULL }, "--cpus: '0'" },
                { { "--machine", ID_A, "--token", "x", "--batch", "1001", NULL },
                  "--batch: '1001'" },
                { { "--machine", ID_A, "--token", "x", "--spike", "1h ago,2,1ms", NULL },
                  "--spike CPU: '2'" },
                { { "--machine", ID_A, "--token", "x", "--spike", "1h ago,1", NULL },
                  "--spike: '1h ago,1': expected TIME,CPU,SPAN" },
                { { "--machine", ID_A, "--token", "x", "--spike", "3d ago,1,1ms", NULL },
                  "--spike: '3d ago,1,1ms' is outside the history" },
                { { "--machine", ID_A, "--token", "x", "--gap", "1h ago,2h ago", NULL },
                  "--gap: '1h ago,2h ago': FROM is not before TO" },
                { { "--machine", ID_A, "--token", "x", "--rotation", "idle 90s", NULL },
                  "--rotation: idle 90s is not a whole number of intervals" },
                { { "--machine", ID_A, "--token", "x", "--rotation", "busy 1h", NULL },
                  "--rotation: unknown scenario \"busy\"" },
                { { "--machine", ID_A, "--token", "x", "--from", "2026-11-02", "--to", "2026-11-01",
                    NULL },
                  "--from: the history is empty" },
                { { "--machine", ID_A, "--token", "x", "--unclean", "yesterday", NULL },
                  "--unclean: 'yesterday' is not a time" },
                { { "--machine", ID_A, "--token", "x", "--load-down",
                    "2026-11-01T00:10:00Z,5min,cpu", NULL },
                  "--load-down: '2026-11-01T00:10:00Z,5min,cpu' is outside the history" },
                { { "--machine", ID_A, "--token", "x", "--frobnicate", NULL },
                  "--frobnicate: unknown option" },
                { { "--tokens", path, "--machine", ID_A, NULL },
                  "--machine: cannot be combined with --tokens" },
                { { "--tokens", path, NULL }, "line 2: 'not-an-id' is not a machine id" },
                { { "--machine", ID_A, "--token", "x", "--jobs", "0", NULL }, "--jobs: '0'" },
                { { "--machine", ID_A, "--token", "x", "--release", "6.6 rt", NULL },
                  "--release: '6.6 rt' is not a release name" },
                { { "--machine", ID_A, "--token", "x", "--release", "", NULL },
                  "--release: '' is not a release name" },
                { { "--machine", ID_A, "--token", "x", "--probed-cpus", "x", NULL },
                  "--probed-cpus: 'x' is not a list of CPUs" },
                { { "--machine", ID_A, "--token", "x", "--probed-cpus", "0-9000", NULL },
                  "--probed-cpus: '0-9000'" },
                { { "--machine", ID_A, "--token", "x", "--probe-down", "5,1h ago,now", NULL },
                  "--probe-down CPU: '5'" },
                { { "--machine", ID_A, "--token", "x", "--probe-down", "0,now,1h ago", NULL },
                  "--probe-down: '0,now,1h ago': FROM is not before TO" },
                { { "--machine", ID_A, "--token", "x", "--probe-down", "0,now", NULL },
                  "--probe-down: '0,now': expected CPU,FROM,TO" },
                { { "--machine", ID_A, "--token", "x", "--samples-share", "most", NULL },
                  "--samples-share: 'most' is not a share in percent from 0 to 1000" },
                { { "--machine", ID_A, "--token", "x", "--samples-share", "1001", NULL },
                  "--samples-share: '1001'" },
                { { "--machine", ID_A, "--token", "x", "--load-zero", "gpu,1h ago,now", NULL },
                  "--load-zero: 'gpu,1h ago,now': no scenario of the rotation runs a generator "
                  "'gpu'" },
                { { "--machine", ID_A, "--token", "x", "--load-zero", "cpu,now,1h ago", NULL },
                  "--load-zero: 'cpu,now,1h ago': FROM is not before TO" },
                { { "--machine", ID_A, "--token", "x", "--clock-ahead", "soon", NULL },
                  "--clock-ahead: 'soon' is not a time span" },
                { { "--machine", ID_A, "--token", "x", "--clock-ahead", "0", NULL },
                  "--clock-ahead: '0' is out of range" },
                { { "--machine", ID_A, "--token", "x", "--clock-ahead", "1h,never", NULL },
                  "--clock-ahead: 'never' is not a time" },
                { { "--machine", ID_A, "--token", "x", "--inventory", "thp.enabled", NULL },
                  "--inventory: 'thp.enabled': expected NAME=VALUE" },
                { { "--machine", ID_A, "--token", "x", "--inventory", "thp enabled=x", NULL },
                  "--inventory: 'thp enabled=x': not a field name" },
                { { "--machine", ID_A, "--token", "x", "--inventory", "a=\x1b[31m", NULL },
                  "--inventory: 'a=\x1b[31m': not a line of at most 4096 bytes of text" },
                { { "--machine", ID_A, "--token", "x", "--inventory", "a=1", "--inventory", "a=2",
                    NULL },
                  "--inventory: 'a=2': a given twice" },
                { { "--machine", ID_A, "--token", "x", "--inventory-change", "a=1", NULL },
                  "--inventory-change: 'a=1': expected TIME,NAME=VALUE or TIME,-NAME" },
                { { "--machine", ID_A, "--token", "x", "--inventory-change", "soon,a=1", NULL },
                  "--inventory-change: 'soon' is not a time" },
                { { "--machine", ID_A, "--token", "x", "--inventory-change", "1h ago,-", NULL },
                  "--inventory-change: '-': not a field name" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct tu_result r;
                replay(cases[i].args, &r);
                if (r.status != 64 || !strstr(r.err, cases[i].expect))
                        fail_msg("case %zu: expected exit 64 and '%s', got %d: %s", i,
                                 cases[i].expect, r.status, r.err);
                tu_result_done(&r);
        }
        /* A load-down of a generator that the scenario at that time does not run. */
        struct tu_result r;
        const char *args[] = {
                "--machine",  ID_A,   "--token",    "x",           "--from",
                "2026-11-01", "--to", "2026-11-02", "--load-down", "2026-11-01T00:10:00Z,5min,cpu",
                NULL
        };
        replay(args, &r);
        assert_int_equal(r.status, 64);
        if (!strstr(r.err, "--load-down") || !strstr(r.err, "idle, runs no cpu generator"))
                fail_msg("unexpected message: %s", r.err);
        tu_result_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_history),
                cmocka_unit_test(test_tokens),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_restart_json),
                cmocka_unit_test(test_inventory),
                cmocka_unit_test(test_retries),
                cmocka_unit_test(test_usage_errors),
                cmocka_unit_test(test_hostile),
                cmocka_unit_test(test_unmeasured_after_measured),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
