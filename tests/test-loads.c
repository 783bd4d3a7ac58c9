/* SPDX-License-Identifier: MIT */
/* rtsoakd with real load generators: scenarios recorded per interval with throughput, a killed
 * generator restarted and its exit stored, and no generator process outliving the daemon. */
#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

static char *dir, set_db[600], dbarg[600], dbpath[512];

static int setup(void **state) {
        dir = tu_mkdtemp("loads");
        snprintf(dbpath, sizeof(dbpath), "%s/rtsoak.db", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", dbpath);
        snprintf(dbarg, sizeof(dbarg), "--db=%s", dbpath);
        return 0;
}

static int teardown(void **state) {
        tu_rmdir(dir);
        dir = NULL;
        return 0;
}

/* Each test starts from an empty database. */
static void fresh_db(void) {
        char p[600];
        unlink(dbpath);
        snprintf(p, sizeof(p), "%s-wal", dbpath);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", dbpath);
        unlink(p);
}

static bool read_stat(pid_t pid, pid_t *ppid, pid_t *pgid) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        char state;
        int pp, pg;
        if (!p || sscanf(p + 2, "%c %d %d", &state, &pp, &pg) != 3 || state == 'Z')
                return false;
        *ppid = pp;
        *pgid = pg;
        return true;
}

/* Every live process whose parent is pid (or, with groups, that is in one of groups). */
static size_t find_procs(pid_t parent, const pid_t *groups, size_t ngroups, pid_t *out,
                         size_t max) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;
        assert_non_null(d);
        while ((de = readdir(d)) && n < max) {
                pid_t pid = atoi(de->d_name), pp, pg;
                if (pid <= 0 || !read_stat(pid, &pp, &pg))
                        continue;
                bool match = parent > 0 && pp == parent;
                for (size_t i = 0; i < ngroups; i++)
                        if (pg == groups[i])
                                match = true;
                if (match)
                        out[n++] = pid;
        }
        closedir(d);
        return n;
}

static pid_t start_daemon(const char *const *extra, const char *errlog) {
        char *argv[48];
        fresh_db();
        tu_daemon_argv(argv, set_db, extra);
        return tu_spawn(argv, NULL, errlog);
}

/* Waits until the daemon has n generator children; returns how many it found. */
static size_t wait_children(pid_t daemon, size_t want, pid_t *kids, int timeout_ms) {
        size_t n = 0;
        for (int waited = 0; waited < timeout_ms; waited += 50) {
                n = find_procs(daemon, NULL, 0, kids, 64);
                if (n >= want)
                        break;
                tu_sleep_ms(50);
        }
        return n;
}

static sqlite3 *open_db(void) {
        sqlite3 *db;
        assert_int_equal(sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        return db;
}

static long long query_int(sqlite3 *db, const char *q) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", q, sqlite3_errmsg(db));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

static void test_scenarios_recorded_with_throughput(void **state) {
        if (geteuid() != 0)
                skip();
        /* A 3 s rotation: 2 s of one worker at 30 %, then 1 s idle. */
        const char *extra[] = { "--set",      "Schedule.Rotation=busy 2s, idle 1s",
                                "--set",      "Scenario.busy.Load=cpu --workers 1 --load 30%",
                                "--duration", "7s",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        assert_int_equal(tu_wait(d, 30000), 0);

        sqlite3 *db = open_db();
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT i.start_ns, i.length_ns, i.scenario, "
                                            "l.generator, m.value, l.up_ns FROM intervals i "
                                            "LEFT JOIN interval_loads l ON l.interval_id = i.id "
                                            "LEFT JOIN interval_load_metrics m ON "
                                            "m.interval_id = i.id AND m.idx = l.idx AND "
                                            "m.metric = 'cpu' ORDER BY i.seq",
                                            -1, &st, NULL),
                         SQLITE_OK);
        int busy_full = 0, idle = 0, rows = 0;
        double busy_sum = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
                int64_t start = sqlite3_column_int64(st, 0), len = sqlite3_column_int64(st, 1);
                const char *sc = (const char *) sqlite3_column_text(st, 2);
                /* The rotation is aligned to the epoch: which scenario this interval had to
                 * run follows from its start. */
                int64_t pos = (start / 1000000000) % 3;
                const char *want = pos < 2 ? "busy" : "idle";
                assert_non_null(sc);
                if (strcmp(sc, want) != 0)
                        fail_msg("interval at %lld: scenario %s, expected %s", (long long) start,
                                 sc, want);
                rows++;
                if (strcmp(sc, "idle") == 0) {
                        assert_int_equal(sqlite3_column_type(st, 3), SQLITE_NULL);
                        idle++;
                        continue;
                }
                assert_string_equal((const char *) sqlite3_column_text(st, 3), "cpu");
                double cpu = sqlite3_column_double(st, 4);
                int64_t up = sqlite3_column_int64(st, 5);
                printf("# busy interval: %.1f %% CPU, up %lld ms of %lld\n", cpu,
                       (long long) (up / 1000000), (long long) (len / 1000000));
                /* Whole intervals in which the load ran throughout hold its duty cycle. */
                if (len == 1000000000 && up > 950000000) {
                        busy_full++;
                        busy_sum += cpu;
                        assert_true(cpu > 15 && cpu < 45);
                }
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        assert_true(rows >= 6);
        assert_true(idle >= 1);
        assert_true(busy_full >= 1);
        printf("# %.1f %% CPU on average over %d whole busy intervals\n", busy_sum / busy_full,
               busy_full);
        assert_true(busy_sum / busy_full > 24 && busy_sum / busy_full < 36);

        /* The CLI breaks the run down by scenario. */
        char *argv[] = {
                (char *) tu_bin("RTSOAK"), dbarg, "report", "--by-scenario", "--json", NULL
        };
        struct tu_result r;
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 0);
        json_t *j = tu_json(r.out), *sc;
        size_t i;
        int seen = 0;
        json_array_foreach (json_object_get(j, "scenarios"), i, sc) {
                const char *name = json_string_value(json_object_get(sc, "scenario"));
                json_t *loads = json_object_get(sc, "loads");
                if (strcmp(name, "busy") == 0) {
                        assert_int_equal(json_array_size(loads), 1);
                        json_t *l = json_array_get(loads, 0);
                        assert_string_equal(json_string_value(json_object_get(l, "generator")),
                                            "cpu");
                        json_t *m = json_array_get(json_object_get(l, "metrics"), 1);
                        assert_string_equal(json_string_value(json_object_get(m, "name")), "cpu");
                        double avg = json_number_value(json_object_get(m, "avg"));
                        printf("# busy: %.1f %% CPU on average\n", avg);
                        assert_true(avg > 20 && avg < 36);
                        seen++;
                } else if (strcmp(name, "idle") == 0) {
                        assert_int_equal(json_array_size(loads), 0);
                        seen++;
                }
                assert_true(json_integer_value(
                                    json_object_get(json_object_get(sc, "total"), "samples")) > 0);
        }
        assert_int_equal(seen, 2);
        json_decref(j);
        tu_result_done(&r);

        /* Each scenario change is an event. */
        db = open_db();
        assert_true(query_int(db, "SELECT count(*) FROM events WHERE type = 'scenario'") >= 3);
        sqlite3_close(db);
}

static void test_killed_generator_restarted(void **state) {
        char errlog[600];
        if (geteuid() != 0)
                skip();
        snprintf(errlog, sizeof(errlog), "%s/err.log", dir);
        const char *extra[] = { "--set", "Schedule.Rotation=work 1h",
                                "--set", "Scenario.work.Load=cpu --workers 1 --load 10%",
                                "--set", "Load.RestartDelay=300ms",
                                NULL };
        pid_t d = start_daemon(extra, errlog);
        pid_t kids[64];
        assert_int_equal(wait_children(d, 1, kids, 10000), 1);
        pid_t old = kids[0];
        tu_sleep_ms(1200);
        assert_int_equal(kill(old, SIGKILL), 0);

        /* Restarted after the delay, as a new process. */
        pid_t now = 0;
        for (int waited = 0; waited < 5000 && !now; waited += 50) {
                tu_sleep_ms(50);
                size_t n = find_procs(d, NULL, 0, kids, 64);
                if (n == 1 && kids[0] != old)
                        now = kids[0];
        }
        assert_true(now > 0);
        tu_sleep_ms(1500);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 10000), 0);

        sqlite3 *db = open_db();
        assert_int_equal(query_int(db, "SELECT count(*) FROM events WHERE type = 'load_exit' "
                                       "AND value_ns = 137 AND message LIKE "
                                       "'cpu #1 of scenario work (pid %) killed by signal 9 %'"),
                         1);
        /* The interval that saw it records the exit and the second start. */
        assert_int_equal(query_int(db, "SELECT sum(exits) FROM interval_loads"), 1);
        assert_int_equal(query_int(db, "SELECT sum(starts) FROM interval_loads"), 2);
        sqlite3_close(db);
}

static void test_stop_leaves_no_process(void **state) {
        if (geteuid() != 0)
                skip();
        const char *extra[] = { "--set", "Schedule.Rotation=two 1h",
                                "--set", "Scenario.two.Load=cpu --workers 2 --load 5%",
                                "--set", "Scenario.two.Load=cpu --workers 1 --load 5%",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        pid_t kids[64], left[64];
        assert_int_equal(wait_children(d, 2, kids, 10000), 2);
        tu_sleep_ms(500);
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 10000), 0);
        int64_t ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000;
        printf("# rtsoakd exited %lld ms after SIGTERM\n", (long long) ms);
        /* Not one process of the generators' groups is left once the daemon has exited. */
        assert_int_equal(find_procs(0, kids, 2, left, 64), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(kill(kids[i], 0) < 0 ? errno : 0, ESRCH);
        assert_true(ms < 2000);
}

static void test_daemon_killed_generators_die(void **state) {
        if (geteuid() != 0)
                skip();
        const char *extra[] = { "--set", "Schedule.Rotation=w 1h", "--set",
                                "Scenario.w.Load=cpu --workers 1 --load 5%", NULL };
        pid_t d = start_daemon(extra, NULL);
        pid_t kids[64], left[64];
        assert_int_equal(wait_children(d, 1, kids, 10000), 1);
        kill(d, SIGKILL);
        tu_wait(d, 5000);
        size_t n = 1;
        for (int waited = 0; waited < 1000 && n > 0; waited += 20) {
                tu_sleep_ms(20);
                n = find_procs(0, kids, 1, left, 64);
        }
        assert_int_equal(n, 0);
}

static void test_scenario_change_stops_old_loads(void **state) {
        if (geteuid() != 0)
                skip();
        const char *extra[] = { "--set",      "Schedule.Rotation=on 2s, idle 2s",
                                "--set",      "Scenario.on.Load=cpu --workers 1 --load 5%",
                                "--duration", "9s",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        /* Sample the children in the middle of each second and compare with the schedule. */
        int checked_on = 0, checked_off = 0;
        for (int i = 0; i < 7; i++) {
                int64_t now = now_ns(CLOCK_REALTIME);
                int64_t to_mid = 500000000 - now % 1000000000;
                if (to_mid < 0)
                        to_mid += 1000000000;
                tu_sleep_ms((int) (to_mid / 1000000));
                int64_t sec = now_ns(CLOCK_REALTIME) / 1000000000;
                pid_t kids[64];
                size_t n = find_procs(d, NULL, 0, kids, 64);
                if (sec % 4 < 2) {
                        if (i > 0) { /* the first second may precede the first start */
                                assert_int_equal(n, 1);
                                checked_on++;
                        }
                } else {
                        assert_int_equal(n, 0);
                        checked_off++;
                }
        }
        assert_int_equal(tu_wait(d, 20000), 0);
        assert_true(checked_on >= 2 && checked_off >= 2);
}

static void test_missing_helper_is_an_event(void **state) {
        if (geteuid() != 0)
                skip();
        const char *extra[] = { "--set",      "Schedule.Rotation=w 1h",
                                "--set",      "Scenario.w.Load=cpu --workers 1 --load 5%",
                                "--set",      "Load.Helper=/nonexistent/rtsoak-load",
                                "--set",      "Load.RestartDelay=200ms",
                                "--duration", "3s",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        /* The probes go on; the failure to start the load is recorded and retried. */
        assert_int_equal(tu_wait(d, 20000), 0);
        sqlite3 *db = open_db();
        assert_true(query_int(db, "SELECT count(*) FROM events WHERE type = 'load_exit' AND "
                                  "message LIKE '%cannot start /nonexistent/rtsoak-load: No such "
                                  "file or directory%'") >= 2);
        assert_true(query_int(db, "SELECT count(*) FROM intervals") >= 2);
        sqlite3_close(db);
}

/* Processes running "sleep SECONDS" with exactly this argument. */
static size_t count_sleepers(const char *seconds) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;
        char want[64];
        int wl = snprintf(want, sizeof(want), "sleep%c%s", 0, seconds) + 1;
        while ((de = readdir(d))) {
                char path[300], buf[128];
                pid_t pp, pg;
                if (atoi(de->d_name) <= 0 || !read_stat(atoi(de->d_name), &pp, &pg))
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                size_t l = fread(buf, 1, sizeof(buf), f);
                fclose(f);
                if ((int) l == wl && memcmp(buf, want, (size_t) wl) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

static void test_escaped_processes_ended(void **state) {
        if (geteuid() != 0)
                skip();
        /* A command that puts a process into a session of its own, out of every process
         * group we could signal: it comes back to rtsoakd (a subreaper) and is ended. */
        const char *extra[] = { "--set", "Schedule.Rotation=w 1h", "--set",
                                "Scenario.w.Load=exec -- sh -c 'setsid sleep 987654 & sleep "
                                "987654'",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        for (int i = 0; i < 100 && count_sleepers("987654") < 2; i++)
                tu_sleep_ms(50);
        assert_int_equal(count_sleepers("987654"), 2);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 10000), 0);
        assert_int_equal(count_sleepers("987654"), 0);
}

static unsigned uid_of(pid_t pid) {
        char path[64], line[256];
        unsigned uid = 0;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Uid: %u", &uid) == 1)
                        break;
        fclose(f);
        return uid;
}

static void test_loads_run_as_user(void **state) {
        if (geteuid() != 0)
                skip();
        const char *extra[] = { "--set", "Schedule.Rotation=w 1h",
                                "--set", "Scenario.w.Load=cpu --workers 1 --load 5%",
                                "--set", "Load.User=nobody",
                                "--set", "Load.Nice=7",
                                NULL };
        pid_t d = start_daemon(extra, NULL);
        pid_t kids[64];
        assert_int_equal(wait_children(d, 1, kids, 10000), 1);
        /* Give it time to drop its privileges. */
        unsigned uid = 0;
        for (int i = 0; i < 100 && uid == 0; i++) {
                tu_sleep_ms(20);
                uid = uid_of(kids[0]);
        }
        assert_int_equal(uid, 65534);
        /* Normal scheduling, at the configured nice level. */
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) kids[0]);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        long fields[40];
        char *p = strrchr(buf, ')') + 2;
        int k = 0;
        for (char *tok = strtok(p + 2, " "); tok && k < 40; tok = strtok(NULL, " "))
                fields[k++] = atol(tok);
        /* After "state": ppid is fields[0]; nice is field 19 of stat, fields[15]; policy is
         * field 41, beyond; the real-time priority (field 40) is fields[36]. */
        assert_true(k >= 37);
        assert_int_equal(fields[15], 7);
        assert_int_equal(fields[36], 0);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 10000), 0);
}

/* By default the generators run as the unprivileged system user rtsoak (sysusers.d); a
 * rotation with loads and no such user is refused at start, naming the fix. */
static void test_default_load_user(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct passwd *pw = getpwnam("rtsoak");
        if (!pw) {
                fprintf(stderr, "# the system user rtsoak is missing (scripts/quickstart.sh "
                                "creates it with systemd-sysusers)\n");
                fail();
        }
        unsigned want = (unsigned) pw->pw_uid;
        const char *extra[] = { "--set", "Schedule.Rotation=w 1h", "--set",
                                "Scenario.w.Load=cpu --workers 1 --load 5%", NULL };
        pid_t d = start_daemon(extra, NULL);
        pid_t kids[64];
        assert_int_equal(wait_children(d, 1, kids, 10000), 1);
        unsigned uid = 0;
        for (int i = 0; i < 100 && uid == 0; i++) {
                tu_sleep_ms(20);
                uid = uid_of(kids[0]);
        }
        assert_int_equal(uid, want);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 10000), 0);

        char *argv[48];
        const char *missing[] = { "--set", "Schedule.Rotation=w 1h",
                                  "--set", "Scenario.w.Load=cpu --workers 1 --load 5%",
                                  "--set", "Load.User=rtsoak-no-such-user",
                                  NULL };
        struct tu_result r;
        fresh_db();
        tu_daemon_argv(argv, set_db, missing);
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 78);
        assert_non_null(strstr(r.err, "[Load] User=rtsoak-no-such-user: no such user"));
        tu_result_done(&r);
        /* Without loads in the rotation, the user is never needed. */
        const char *idle[] = { "--set",      "Schedule.Rotation=idle 1h",
                               "--set",      "Load.User=rtsoak-no-such-user",
                               "--duration", "1s",
                               NULL };
        fresh_db();
        tu_daemon_argv(argv, set_db, idle);
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 0);
        tu_result_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_scenarios_recorded_with_throughput),
                cmocka_unit_test(test_killed_generator_restarted),
                cmocka_unit_test(test_stop_leaves_no_process),
                cmocka_unit_test(test_daemon_killed_generators_die),
                cmocka_unit_test(test_scenario_change_stops_old_loads),
                cmocka_unit_test(test_missing_helper_is_an_event),
                cmocka_unit_test(test_loads_run_as_user),
                cmocka_unit_test(test_default_load_user),
                cmocka_unit_test(test_escaped_processes_ended),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
