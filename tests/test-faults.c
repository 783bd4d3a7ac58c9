/* SPDX-License-Identifier: MIT */
/* rtsoakd under faults, with the real binaries: kill -9 at fifty random moments while it
 * writes and uploads (no corrupt database, at most the open interval lost per kill, every
 * interval and event on the server exactly once, an unclean_end with its forensics per
 * kill); what the kernel left (pstore, the flight record) in the unclean_end after a reboot;
 * a file system that fills up and empties again; wall-clock steps. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

/* Fifty kills; ten in the sanitizer build, whose point is memory errors, not numbers. */
#define KILLS_MAX 50
static int kills = KILLS_MAX;

static char *dir, local_db[512], farm_db[512], server_log[512], token_file[512], url[128],
        set_db[600], set_server[200], set_token[600], pstore[512], set_pstore[600], flight[512],
        set_flight[600], set_journal[600] = "Forensics.JournalDirectory=";

static int setup(void **state) {
        dir = tu_mkdtemp("faults");
        snprintf(local_db, sizeof(local_db), "%s/rtsoak.db", dir);
        snprintf(farm_db, sizeof(farm_db), "%s/farm.db", dir);
        snprintf(server_log, sizeof(server_log), "%s/server.log", dir);
        snprintf(token_file, sizeof(token_file), "%s/token", dir);
        snprintf(pstore, sizeof(pstore), "%s/pstore", dir);
        snprintf(flight, sizeof(flight), "%s/flight", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", local_db);
        snprintf(set_token, sizeof(set_token), "Upload.TokenFile=%s", token_file);
        snprintf(set_pstore, sizeof(set_pstore), "Forensics.PstoreDir=%s", pstore);
        snprintf(set_flight, sizeof(set_flight), "Forensics.FlightRecorder=%s", flight);
        mkdir(pstore, 0755);
        tu_enroll_this_machine(farm_db, token_file);
        return 0;
}

static int teardown(void **state) {
        char small[600];
        /* test_disk_full's tmpfs, if the test failed before unmounting it. */
        snprintf(small, sizeof(small), "%s/small", dir);
        umount2(small, MNT_DETACH);
        tu_rmdir(dir);
        dir = NULL;
        return 0;
}

static void fresh_local(void) {
        tu_remove_db(local_db);
}

static long long query(const char *path, const char *sql) {
        sqlite3 *db;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(db));
        if (sqlite3_step(st) != SQLITE_ROW)
                fail_msg("%s: no row: %s", sql, sqlite3_errmsg(db));
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

/* Every row of sql as "a:b:...\n" (for comparing lists). */
static char *rows(const char *path, const char *sql) {
        sqlite3 *db;
        sqlite3_stmt *st;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(db));
        while (sqlite3_step(st) == SQLITE_ROW) {
                for (int i = 0; i < sqlite3_column_count(st); i++)
                        fprintf(f, "%s%s", i ? ":" : "",
                                (const char *) sqlite3_column_text(st, i) ?: "NULL");
                fputc('\n', f);
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        fclose(f);
        return buf;
}

static void expect_intact(const char *path) {
        char *r = rows(path, "PRAGMA integrity_check");
        if (strcmp(r, "ok\n") != 0)
                fail_msg("%s is damaged: %s", path, r);
        free(r);
}

static pid_t start_daemon(const char *duration, const char *errlog, bool upload) {
        char *argv[48];
        snprintf(set_server, sizeof(set_server), "Upload.Server=%s", upload ? url : "");
        const char *extra[] = { "--set",
                                set_server,
                                "--set",
                                set_token,
                                "--set",
                                "Upload.RetryMax=1s",
                                "--set",
                                "Upload.Batch=3",
                                "--set",
                                "Probe.Threshold=50ms",
                                "--set",
                                set_pstore,
                                "--set",
                                set_flight,
                                "--set",
                                set_journal,
                                duration ? "--duration" : NULL,
                                duration,
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        return tu_spawn(argv, NULL, errlog);
}

static void write_file(const char *path, const void *data, size_t len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        close(fd);
}

static void test_kill9_fifty_times(void **state) {
        char errlog[600];
        int64_t killed_at[KILLS_MAX + 1];
        char sql[512];
        if (geteuid() != 0)
                skip();
        fresh_local();
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        pid_t srv = tu_server_start(farm_db, server_log, "127.0.0.1:0", NULL, url, sizeof(url));

        const char *san = getenv("RTSOAKD_TEST_SET");
        kills = san && *san ? 10 : KILLS_MAX;
        unsigned seed = (unsigned) time(NULL);
        printf("# seed %u, %d kills\n", seed, kills);
        srand(seed);
        for (int i = 1; i <= kills; i++) {
                /* Gone before the start, so that the last run's lines cannot be mistaken. */
                unlink(errlog);
                pid_t d = start_daemon(NULL, errlog, true);
                /* Once it has recorded its run (the unclean end of the last one with it), at a
                 * random moment of its 1 s cycle of probing, storing and uploading. */
                if (!tu_wait_for_text(errlog, "Run ", 20000))
                        fail_msg("kill %d: rtsoakd did not start: %s", i, tu_read_file(errlog));
                tu_sleep_ms(rand() % 1200);
                killed_at[i] = now_ns(CLOCK_REALTIME);
                assert_int_equal(kill(d, SIGKILL), 0);
                assert_int_equal(tu_wait(d, 5000), 128 + SIGKILL);
        }
        /* A last run that ends cleanly records the last kill and sends what is left. */
        pid_t d = start_daemon("3s", errlog, true);
        assert_int_equal(tu_wait(d, 30000), 0);
        for (int i = 0; i < 100 && query(local_db, "SELECT count(*) FROM outbox WHERE state "
                                                   "!= 'sent'") > 0;
             i++)
                tu_sleep_ms(100);
        tu_server_stop(srv);

        /* No damage on either side. */
        expect_intact(local_db);
        expect_intact(farm_db);

        /* Every kill is a run that ended uncleanly, with one unclean_end event carrying its
         * forensics; the last run ended cleanly. */
        assert_int_equal(query(local_db, "SELECT count(*) FROM runs"), kills + 1);
        assert_int_equal(query(local_db, "SELECT count(*) FROM runs WHERE end_reason = 'unclean'"),
                         kills);
        snprintf(sql, sizeof(sql), "SELECT end_reason = 'clean' FROM runs WHERE id = %d",
                 kills + 1);
        assert_int_equal(query(local_db, sql), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT count(DISTINCT run_id) FROM events WHERE type = 'unclean_end' AND "
                 "run_id <= %d",
                 kills);
        assert_int_equal(query(local_db, sql), kills);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'unclean_end'"),
                         kills);
        /* The forensic fields: both boots (the same: only the daemon died), the last interval
         * with every CPU's worst case when one was stored, why pstore was not read. */
        assert_int_equal(query(local_db,
                               "SELECT count(*) FROM events WHERE type = 'unclean_end' AND "
                               "json_extract(details, '$.boot_id') = json_extract(details, "
                               "'$.current_boot_id') AND json_extract(details, '$.rebooted') = 0 "
                               "AND json_type(details, '$.last_interval') IN ('object', 'null') "
                               "AND json_extract(details, '$.kernel.pstore') LIKE 'not read:%' "
                               "AND json_type(details, '$.kernel.journal') IS NOT NULL "
                               "AND json_extract(details, '$.uptime_ns') > 0"),
                         kills);
        assert_int_equal(query(local_db,
                               "SELECT count(*) FROM events e WHERE type = 'unclean_end' AND "
                               "json_type(details, '$.last_interval') = 'object' AND ("
                               "json_extract(details, '$.last_interval.seq') != (SELECT max(seq) "
                               "FROM intervals i WHERE i.run_id = e.run_id) OR "
                               "json_array_length(details, '$.last_interval.cpus') != (SELECT "
                               "count(*) FROM interval_cpus c JOIN intervals i ON i.id = "
                               "c.interval_id WHERE i.run_id = e.run_id AND i.seq = "
                               "json_extract(details, '$.last_interval.seq')))"),
                         0);
        assert_int_equal(query(local_db,
                               "SELECT count(*) FROM events e WHERE type = 'unclean_end' AND "
                               "json_type(details, '$.last_interval') = 'null' AND EXISTS "
                               "(SELECT 1 FROM intervals i WHERE i.run_id = e.run_id)"),
                         0);

        /* Per run, the stored intervals follow each other without a gap, and what a kill lost
         * is at most the interval that was open (and the one just closed, if the kill came
         * between its end and its commit): less than two intervals and the grace. */
        assert_int_equal(query(local_db,
                               "SELECT count(*) FROM intervals a JOIN intervals b ON b.run_id = "
                               "a.run_id AND b.seq = a.seq + 1 WHERE b.start_ns != a.start_ns + "
                               "a.length_ns"),
                         0);
        assert_int_equal(query(local_db, "SELECT count(*) FROM (SELECT run_id, max(seq) + 1 - "
                                         "count(*) AS holes FROM intervals GROUP BY run_id) "
                                         "WHERE holes != 0 OR (SELECT min(seq) FROM intervals) "
                                         "!= 0"),
                         0);
        for (int i = 1; i <= kills; i++) {
                snprintf(sql, sizeof(sql),
                         "SELECT coalesce((SELECT max(start_ns + length_ns) FROM intervals WHERE "
                         "run_id = %d), (SELECT start_ns FROM runs WHERE id = %d))",
                         i, i);
                int64_t last = query(local_db, sql);
                if (killed_at[i] - last > 3 * (int64_t) NSEC_PER_SEC)
                        fail_msg("run %d: killed %.3f s after its last stored data", i,
                                 (double) (killed_at[i] - last) / 1e9);
        }
        printf("# %lld intervals stored over %d runs, %lld runs killed after storing one or more\n",
               query(local_db, "SELECT count(*) FROM intervals"), kills + 1,
               query(local_db, "SELECT count(DISTINCT run_id) FROM intervals WHERE run_id < "
                               "(SELECT max(id) FROM runs)"));

        /* The server has every interval and every event exactly once (the farm's uniqueness
         * constraints make "once" a matter of equal lists), and nothing is pending. */
        assert_int_equal(query(local_db, "SELECT count(*) FROM outbox WHERE state != 'sent'"), 0);
        char *li = rows(local_db, "SELECT run_id, seq, start_ns FROM intervals ORDER BY 1, 2");
        char *fi = rows(farm_db, "SELECT r.run_id, i.seq, i.start_ns FROM intervals i JOIN runs r "
                                 "ON r.id = i.run ORDER BY 1, 2");
        if (strcmp(li, fi) != 0)
                fail_msg("intervals differ:\nlocal:\n%s\nfarm:\n%s", li, fi);
        char *le = rows(local_db, "SELECT run_id, id, type, coalesce(details, '') FROM events "
                                  "ORDER BY 1, 2");
        char *fe = rows(farm_db, "SELECT r.run_id, e.event_id, e.type, coalesce(e.details, '') "
                                 "FROM events e JOIN runs r ON r.id = e.run ORDER BY 1, 2");
        if (strcmp(le, fe) != 0)
                fail_msg("events differ:\nlocal:\n%s\nfarm:\n%s", le, fe);
        assert_int_equal(query(farm_db, "SELECT count(*) FROM events WHERE type = 'unclean_end' "
                                        "AND json_type(details, '$.last_interval') IS NOT NULL"),
                         kills);
        free(li);
        free(fi);
        free(le);
        free(fe);
}

/* After a "reboot" (the dead run's boot ID is not the one running), the unclean_end carries
 * the pstore records, the tail of a large one, and the flight record the kernel kept. */
static void test_pstore_after_reboot(void **state) {
        char errlog[600], path[700];
        if (geteuid() != 0)
                skip();
        fresh_local();
        /* The recorder writes only into what exists (a device, a FIFO, a file made for it). */
        write_file(flight, "", 0);
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        unlink(errlog);
        pid_t d = start_daemon(NULL, errlog, false);
        assert_true(tu_wait_for_text(errlog, "Run ", 20000));
        assert_true(tu_wait_for_text(flight, "rtsoak t=", 5000));
        tu_sleep_ms(2600);
        kill(d, SIGKILL);
        assert_int_equal(tu_wait(d, 5000), 128 + SIGKILL);

        /* What a kernel with ramoops would show after the reset: the panic log (large, with
         * bytes that are not text), and the flight record as pmsg. */
        size_t big = 40000;
        char *dmesg = malloc(big);
        memset(dmesg, 'a', big);
        memcpy(dmesg, "HEAD-OF-LOG", 11);
        memcpy(dmesg + 100, "\x01\xff\xfe", 3);
        const char *end = "\nKernel panic - not syncing: Fatal exception\nEND-OF-LOG\n";
        memcpy(dmesg + big - strlen(end), end, strlen(end));
        snprintf(path, sizeof(path), "%s/dmesg-ramoops-0", pstore);
        write_file(path, dmesg, big);
        free(dmesg);
        char *rec = tu_read_file(flight);
        snprintf(path, sizeof(path), "%s/pmsg-ramoops-0", pstore);
        write_file(path, rec, strlen(rec));
        free(rec);

        /* The dead boot's journal: three lines written into a journal file of its own with
         * systemd-journal-remote (journald does not run here). */
        bool journal = access("/lib/systemd/systemd-journal-remote", X_OK) == 0;
        if (journal) {
                char jdir[600], cmd[2048];
                snprintf(jdir, sizeof(jdir), "%s/journal", dir);
                mkdir(jdir, 0755);
                snprintf(cmd, sizeof(cmd),
                         "for i in 1 2 3; do printf '__REALTIME_TIMESTAMP=%%s\\n"
                         "__MONOTONIC_TIMESTAMP=%%s\\n_BOOT_ID=00000000000000000000000000000001"
                         "\\nSYSLOG_IDENTIFIER=kernel\\nMESSAGE=line %%s of the dead boot\\n"
                         "\\n' $(($(date +%%s%%6N) - 10000000 + i)) $i $i; done | "
                         "/lib/systemd/systemd-journal-remote -o %s/dead.journal - 2>/dev/null",
                         jdir);
                assert_int_equal(system(cmd), 0);
                snprintf(set_journal, sizeof(set_journal), "Forensics.JournalDirectory=%s", jdir);
        } else
                printf("# systemd-journal-remote is not installed: the journal part is not "
                       "checked\n");

        sqlite3 *db;
        assert_int_equal(sqlite3_open(local_db, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db,
                                      "UPDATE runs SET boot_id = "
                                      "'00000000000000000000000000000001'",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(db);
        d = start_daemon("1500ms", errlog, false);
        assert_int_equal(tu_wait(d, 30000), 0);

        snprintf(set_journal, sizeof(set_journal), "Forensics.JournalDirectory=");
        if (journal) {
                char *lines = rows(local_db, "SELECT json_extract(details, '$.kernel.journal') "
                                             "FROM events WHERE type = 'unclean_end'");
                if (!strstr(lines, "\"boot_id\":\"00000000000000000000000000000001\"") ||
                    !strstr(lines, "kernel: line 1 of the dead boot\",\"") ||
                    !strstr(lines, "kernel: line 3 of the dead boot\"]"))
                        fail_msg("journal: %s", lines);
                free(lines);
        }
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'unclean_end' "
                                         "AND json_extract(details, '$.rebooted') = 1"),
                         1);
        char *det = rows(local_db, "SELECT details FROM events WHERE type = 'unclean_end'");
        /* Both records, in name order; the large one cut to its tail. */
        assert_non_null(strstr(det, "\"name\":\"dmesg-ramoops-0\""));
        assert_non_null(strstr(det, "\"name\":\"pmsg-ramoops-0\""));
        assert_non_null(strstr(det, "Kernel panic - not syncing: Fatal exception"));
        assert_null(strstr(det, "HEAD-OF-LOG"));
        assert_non_null(strstr(det, "\"size\":40000"));
        assert_non_null(strstr(det, "\"truncated\":true"));
        assert_non_null(strstr(det, "rtsoak t="));
        assert_true(strlen(det) <= 64 * 1024);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'unclean_end' "
                                         "AND json_extract(details, '$.kernel.pstore[0].name') = "
                                         "'dmesg-ramoops-0' AND json_extract(details, "
                                         "'$.kernel.pstore[1].name') = 'pmsg-ramoops-0' AND "
                                         "json_type(details, '$.kernel.journal') IS NOT NULL AND "
                                         "message LIKE '%pstore: 2 records%'"),
                         1);
        free(det);

        /* rtsoak events shows them. */
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", local_db);
        char *argv[] = {
                (char *) tu_bin("RTSOAK"), dbarg, "events", "--type", "unclean_end", NULL
        };
        struct tu_result r;
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 0);
        if (!strstr(r.out, "rebooted since") || !strstr(r.out, "pstore dmesg-ramoops-0") ||
            !strstr(r.out, "END-OF-LOG") || !strstr(r.out, "last interval"))
                fail_msg("rtsoak events:\n%s", r.out);
        tu_result_done(&r);
        for (const char *n = "dmesg-ramoops-0"; n;
             n = strcmp(n, "dmesg-ramoops-0") == 0 ? "pmsg-ramoops-0" : NULL) {
                snprintf(path, sizeof(path), "%s/%s", pstore, n);
                unlink(path);
        }
}

/* The flight recorder writes into a FIFO without a reader without ever blocking. */
static void test_flight_fifo(void **state) {
        char errlog[600];
        if (geteuid() != 0)
                skip();
        fresh_local();
        unlink(flight);
        assert_int_equal(mkfifo(flight, 0600), 0);
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        unlink(errlog);
        pid_t d = start_daemon("2500ms", errlog, false);
        assert_true(tu_wait_for_text(errlog, "Run ", 20000));
        int fd = open(flight, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        assert_true(fd >= 0);
        char buf[4096];
        ssize_t n = 0;
        for (int i = 0; i < 40 && n <= 0; i++) {
                tu_sleep_ms(100);
                n = read(fd, buf, sizeof(buf) - 1);
        }
        assert_true(n > 0);
        buf[n] = 0;
        assert_int_equal(strncmp(buf, "rtsoak t=", 9), 0);
        assert_non_null(strstr(buf, " max_us=0:"));
        close(fd);
        assert_int_equal(tu_wait(d, 30000), 0);
        unlink(flight);
}

/* Fills the file system of path until it refuses another byte; returns the bytes written. */
static size_t fill(const char *path) {
        static char chunk[64 * 1024];
        size_t total = 0;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        for (size_t len = sizeof(chunk); len > 0;) {
                ssize_t n = write(fd, chunk, len);
                if (n > 0)
                        total += (size_t) n;
                else
                        len /= 2; /* the last pages, smaller and smaller */
        }
        close(fd);
        return total;
}

/* Whether rtsoakd's log says, for one CPU, at least *(int *) n times that it dropped its
 * oldest held interval. */
static bool dropped_enough(const char *log, void *n) {
        static const char line[] = ": storage has failed for ";
        int per_cpu[1024] = { 0 };
        for (const char *p = log; (p = strstr(p, line)); p++) {
                const char *cpu = p;
                while (cpu > log && cpu[-1] >= '0' && cpu[-1] <= '9')
                        cpu--;
                int k = atoi(cpu);
                if (cpu >= log + 4 && strncmp(cpu - 4, "CPU ", 4) == 0 && k >= 0 && k < 1024 &&
                    ++per_cpu[k] >= *(int *) n)
                        return true;
        }
        return false;
}

/* A small file system fills up under rtsoakd and empties again: it goes on probing, holds
 * closed intervals in memory (at most HoldIntervals per CPU), drops the oldest beyond that
 * and counts them, stores the rest when space returns and records a storage_full event. */
static void test_disk_full(void **state) {
        char small[600], db[700], set[800], filler[700], errlog[600];
        if (geteuid() != 0)
                skip();
        snprintf(small, sizeof(small), "%s/small", dir);
        snprintf(db, sizeof(db), "%s/rtsoak.db", small);
        snprintf(set, sizeof(set), "Storage.Path=%s", db);
        snprintf(filler, sizeof(filler), "%s/filler", small);
        snprintf(errlog, sizeof(errlog), "%s/daemon-full.log", dir);
        assert_int_equal(mkdir(small, 0755), 0);
        if (mount("tmpfs", small, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m") < 0) {
                printf("# skipped: cannot mount a tmpfs here: %s\n", strerror(errno));
                rmdir(small);
                skip();
        }
        char *argv[48];
        const char *extra[] = { "--set", "Storage.HoldIntervals=3",
                                "--set", "Probe.Threshold=50ms",
                                "--set", "Forensics.FlightRecorder=\"\"",
                                NULL };
        tu_daemon_argv(argv, set, extra);
        unlink(errlog);
        pid_t d = tu_spawn(argv, NULL, errlog);
        assert_true(tu_wait_for_text(errlog, "Run ", 20000));
        tu_sleep_ms(2500);
        size_t filled = fill(filler);
        printf("# filled the 8 MiB tmpfs with %zu more bytes\n", filled);
        /* Intervals cannot be written: three are held, the older ones dropped.  How soon the
         * writes fail depends on the free space SQLite still finds in its files: wait for three
         * drops of one CPU rather than for a time (each drop is followed by one more failed
         * write, maybe the last). */
        assert_true(tu_wait_for(errlog, dropped_enough, &(int){ 3 }, 30000));
        assert_int_equal(unlink(filler), 0);
        assert_true(tu_wait_for_text(errlog, "Storage works again", 15000));
        tu_sleep_ms(1500);
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 20000), 0);

        expect_intact(db);
        assert_int_equal(query(db, "SELECT count(*) FROM events WHERE type = 'storage_full'"), 1);
        int64_t dropped = query(db, "SELECT value_ns FROM events WHERE type = 'storage_full'");
        assert_true(dropped >= 2);
        assert_int_equal(query(db, "SELECT json_extract(details, '$.held') FROM events WHERE "
                                   "type = 'storage_full'"),
                         3);
        assert_int_equal(query(db, "SELECT json_extract(details, '$.errno') FROM events WHERE "
                                   "type = 'storage_full'"),
                         ENOSPC);
        assert_true(query(db, "SELECT json_extract(details, '$.failures') FROM events WHERE "
                              "type = 'storage_full'") >= 5);
        /* What is missing is exactly what was dropped, and nothing else: the held intervals
         * were written when space returned. */
        assert_int_equal(query(db, "SELECT (max(start_ns) - min(start_ns)) / 1000000000 + 1 - "
                                   "count(*) FROM intervals WHERE seq > 0"),
                         dropped);
        assert_int_equal(query(db, "SELECT count(*) FROM intervals a JOIN intervals b ON b.seq = "
                                   "a.seq + 1 WHERE a.seq > 0 AND b.start_ns != a.start_ns + "
                                   "a.length_ns"),
                         1);
        char *ev = rows(db, "SELECT message FROM events WHERE type = 'storage_full'");
        printf("# %s", ev);
        assert_non_null(strstr(ev, "No space left on device"));
        free(ev);
        assert_int_equal(umount2(small, MNT_DETACH), 0);
        rmdir(small);
}

/* Retention runs in the daemon: soon after the start, then every minute. */
static void test_retention_in_daemon(void **state) {
        char errlog[600];
        if (geteuid() != 0)
                skip();
        fresh_local();
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        char *argv[48];
        const char *extra[] = { "--set",      "Storage.Retention=3s",
                                "--set",      "Forensics.FlightRecorder=\"\"",
                                "--duration", "13s",
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        unlink(errlog);
        pid_t d = tu_spawn(argv, NULL, errlog);
        assert_int_equal(tu_wait(d, 40000), 0);
        expect_intact(local_db);
        /* The first pass at 10 s deleted what was older than 3 s then; what came after
         * stayed. */
        long long left = query(local_db, "SELECT count(*) FROM intervals");
        long long first = query(local_db, "SELECT min(seq) FROM intervals");
        printf("# %lld intervals left, the oldest is number %lld\n", left, first);
        assert_true(first >= 5);
        assert_true(left >= 3 && left <= 8);
        assert_int_equal(query(local_db, "SELECT max(seq) + 1 - min(seq) FROM intervals"), left);
        assert_int_equal(query(local_db, "PRAGMA auto_vacuum"), 2);
}

static void step_clock(int64_t by_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t t = (int64_t) ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec + by_ns;
        ts.tv_sec = t / NSEC_PER_SEC;
        ts.tv_nsec = t % NSEC_PER_SEC;
        assert_int_equal(clock_settime(CLOCK_REALTIME, &ts), 0);
}

/* One run with the wall clock stepped back and forward 50 ms: both steps recorded; returns the
 * worst latency stored. */
static long long clock_step_run(void) {
        char errlog[600];
        fresh_local();
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        char *argv[48];
        const char *extra[] = { "--set", "Forensics.FlightRecorder=\"\"", "--duration", "4s",
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        unlink(errlog);
        pid_t d = tu_spawn(argv, NULL, errlog);
        assert_true(tu_wait_for_text(errlog, "Run ", 20000));
        tu_sleep_ms(1000);
        /* Each step once the daemon has noticed the one before (two steps it has not looked
         * at yet would be one, their sum). */
        step_clock(-50 * (int64_t) NSEC_PER_MSEC);
        bool back = tu_wait_for_text(errlog, "the wall clock was set back", 2000);
        step_clock(50 * (int64_t) NSEC_PER_MSEC);
        assert_true(back);
        assert_true(tu_wait_for_text(errlog, "the wall clock was set forward", 2000));
        assert_int_equal(tu_wait(d, 30000), 0);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'clock_step'"),
                         2);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'clock_step' "
                                         "AND abs(value_ns - 50000000) < 5000000"),
                         2);
        assert_int_equal(query(local_db, "SELECT json_extract(details, '$.step_ns') < 0 FROM "
                                         "events WHERE type = 'clock_step' ORDER BY id LIMIT 1"),
                         1);
        return query(local_db, "SELECT max(max_ns) FROM interval_cpus");
}

/* The wall clock set back and forward again by 50 ms: two clock_step events, and latencies
 * (measured on CLOCK_MONOTONIC) do not move by the step.  Small steps, so that the rest of
 * the machine hardly notices. */
static void test_machine_clock_step(void **state) {
        if (geteuid() != 0)
                skip();
        /* A probe sleeping on the wall clock would wake 50 ms late after the step back, in
         * every run; on CLOCK_MONOTONIC it does not notice.  This VM stalls for tens of ms now
         * and then: a run with a worst case over 40 ms is taken again, up to three runs. */
        long long worst = 0;
        for (int attempt = 1; attempt <= 3; attempt++) {
                worst = clock_step_run();
                printf("# run %d: worst latency across the steps: %lld us\n", attempt,
                       worst / 1000);
                if (worst < 40 * (long long) NSEC_PER_MSEC)
                        break;
        }
        assert_true(worst < 40 * (long long) NSEC_PER_MSEC);
}

static bool write_online(int cpu, const char *v) {
        char path[128];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        bool ok = write(fd, v, strlen(v)) == (ssize_t) strlen(v);
        close(fd);
        return ok;
}

/* The affinity of rtsoakd's probe of CPU cpu ("rtsoak-cpuN"), as /proc shows it. */
static bool probe_pinned(pid_t pid, int cpu) {
        char want[32], path[128];
        snprintf(want, sizeof(want), "rtsoak-cpu%d\n", cpu);
        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return false;
        bool pinned = false;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char p[300];
                snprintf(p, sizeof(p), "%s/%s/comm", path, de->d_name);
                char *comm = tu_read_file(p);
                bool it = comm && strcmp(comm, want) == 0;
                free(comm);
                if (!it)
                        continue;
                snprintf(p, sizeof(p), "%s/%s/status", path, de->d_name);
                char *st = tu_read_file(p);
                char *l = st ? strstr(st, "Cpus_allowed_list:") : NULL;
                int n = -1, end = 0;
                if (l && sscanf(l, "Cpus_allowed_list: %d%n", &n, &end) == 1)
                        pinned = n == cpu && l[end] == '\n';
                free(st);
        }
        closedir(d);
        return pinned;
}

static int count_text(const char *path, const char *text) {
        char *s = tu_read_file(path);
        int n = 0;
        for (char *p = s; p && (p = strstr(p, text)); p += strlen(text))
                n++;
        free(s);
        return n;
}

/* Waits for the nth occurrence of text; prints the log when it does not come. */
static bool wait_nth(const char *log, const char *text, int n, int timeout_ms) {
        for (int waited = 0; waited <= timeout_ms; waited += 20) {
                if (count_text(log, text) >= n)
                        return true;
                tu_sleep_ms(20);
        }
        char *t = tu_read_file(log);
        printf("# no %d x \"%s\" within %d ms; daemon log:\n%s\n", n, text, timeout_ms,
               t ? t : "(none)");
        free(t);
        return false;
}

/* CPU 1 goes offline under rtsoakd and comes back: after the start, for a moment only, and
 * while the probes are starting (each time an event each way, the probe pinned to CPU 1
 * again, the daemon lives on); and it is offline at the start and comes online later (said
 * once).  Offlining a CPU disturbs everything else on the machine, so only as root and on
 * request (the quick start's test command asks). */
static void test_machine_cpu_hotplug(void **state) {
        char errlog[600];
        const char *on = getenv("RTSOAK_TEST_HOTPLUG");
        if (geteuid() != 0 || !on || strcmp(on, "1") != 0) {
                printf("# skipped: set RTSOAK_TEST_HOTPLUG=1 to take CPU 1 offline for a few "
                       "seconds (as root, on a machine of your own)\n");
                skip();
        }
        if (access("/sys/devices/system/cpu/cpu1/online", W_OK) != 0) {
                printf("# skipped: CPU 1 cannot be taken offline here\n");
                skip();
        }
        fresh_local();
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        char *argv[48];
        const char *extra[] = { "--set", "Forensics.FlightRecorder=\"\"", "--duration", "60s",
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        unlink(errlog);

        /* 1. Offline under a running daemon, then back: seen at once (kernel uevents), not
         * only at the next 10 s look. */
        pid_t d = tu_spawn(argv, NULL, errlog);
        assert_true(tu_wait_for_text(errlog, "Ready:", 20000));
        assert_true(probe_pinned(d, 1));
        assert_true(write_online(1, "0"));
        bool seen = wait_nth(errlog, "CPU 1 went offline", 1, 12000);
        assert_true(write_online(1, "1"));
        assert_true(seen);
        assert_true(wait_nth(errlog, "CPU 1 is online again", 1, 12000));
        assert_true(probe_pinned(d, 1));

        /* 2. Offline for 50 ms only. */
        assert_true(write_online(1, "0"));
        tu_sleep_ms(50);
        assert_true(write_online(1, "1"));
        assert_true(wait_nth(errlog, "CPU 1 is online again", 2, 12000));
        assert_true(probe_pinned(d, 1));
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 20000), 0);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = "
                                         "'cpu_offline' AND cpu = 1"),
                         2);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = 'cpu_online' "
                                         "AND cpu = 1 AND message LIKE '%pinned to it again%'"),
                         2);

        /* 3. Offline while the probes start: not a failed start; READY, and the same events. */
        unlink(errlog);
        d = tu_spawn(argv, NULL, errlog);
        assert_true(tu_wait_for_text(errlog, "Run ", 20000));
        assert_true(write_online(1, "0"));
        seen = wait_nth(errlog, "Ready:", 1, 12000) &&
               wait_nth(errlog, "CPU 1 went offline", 1, 12000);
        assert_true(write_online(1, "1"));
        assert_true(seen);
        assert_true(wait_nth(errlog, "CPU 1 is online again", 1, 12000));
        assert_true(probe_pinned(d, 1));
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 20000), 0);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type IN "
                                         "('cpu_offline', 'cpu_online') AND cpu = 1"),
                         6);

        /* 4. Offline at the start (CPUs=all probes CPU 0 only), online later: said once. */
        unlink(errlog);
        assert_true(write_online(1, "0"));
        d = tu_spawn(argv, NULL, errlog);
        seen = wait_nth(errlog, "Ready: 1 probe thread", 1, 20000);
        assert_true(write_online(1, "1"));
        assert_true(seen);
        assert_true(wait_nth(errlog, "CPU 1 is online but not probed", 1, 12000));
        kill(d, SIGTERM);
        assert_int_equal(tu_wait(d, 20000), 0);
        assert_int_equal(query(local_db, "SELECT count(*) FROM events WHERE type = "
                                         "'cpu_unprobed' AND cpu = 1"),
                         1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kill9_fifty_times),
                cmocka_unit_test(test_pstore_after_reboot),
                cmocka_unit_test(test_flight_fifo),
                cmocka_unit_test(test_disk_full),
                cmocka_unit_test(test_retention_in_daemon),
                cmocka_unit_test(test_machine_clock_step),
                cmocka_unit_test(test_machine_cpu_hotplug),
        };
        /* FAULTS_ONLY=pattern runs the cases it matches, FAULTS_SKIP=pattern the others.  The
         * test_machine_* cases change the whole machine (its wall clock, its CPUs): the suite
         * runs them apart, alone. */
        if (getenv("FAULTS_ONLY"))
                cmocka_set_test_filter(getenv("FAULTS_ONLY"));
        if (getenv("FAULTS_SKIP"))
                cmocka_set_skip_filter(getenv("FAULTS_SKIP"));
        return RUN_TESTS_WITH(tests, setup, teardown);
}
