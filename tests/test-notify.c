/* SPDX-License-Identifier: MIT */
/* Integration tests of rtsoakd's systemd protocol, with this test in systemd's place: a
 * NOTIFY_SOCKET datagram listener sees READY=1, STATUS=, WATCHDOG=1, RELOADING=1 and STOPPING=1;
 * the test-only fault switch makes parts hang; SIGHUP reloads good and bad configurations. */
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "cpuset.h"
#include "macro.h"

static char *dir;
/* What a test started, ended by kill_leftovers() if the test failed before ending it. */
static pid_t daemon_pid = -1, server_pid = -1;

static int kill_leftovers(void **state) {
        (void) state;
        if (daemon_pid > 0) {
                kill(daemon_pid, SIGKILL);
                tu_wait(daemon_pid, 5000);
        }
        if (server_pid > 0) {
                kill(server_pid, SIGKILL);
                tu_wait(server_pid, 5000);
        }
        daemon_pid = server_pid = -1;
        return 0;
}

static int setup(void **state) {
        (void) state;
        dir = tu_mkdtemp("notify");
        return 0;
}

static int teardown(void **state) {
        (void) state;
        tu_rmdir(dir);
        dir = NULL;
        return 0;
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define MSGS_MAX 512

/* What the daemon sent, each datagram with the time it arrived. */
struct listener {
        int fd;
        char path[600];
        size_t n;
        struct {
                int64_t at_ms;
                char text[1024];
        } msgs[MSGS_MAX];
};

static void listener_open(struct listener *l, const char *name) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        l->n = 0;
        snprintf(l->path, sizeof(l->path), "%s/%s.sock", dir, name);
        assert_true(strlen(l->path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, l->path);
        l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(l->fd >= 0);
        assert_int_equal(bind(l->fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
}

static void listener_close(struct listener *l) {
        close(l->fd);
        unlink(l->path);
}

/* Receives for up to ms milliseconds. */
static void listener_pump(struct listener *l, int ms) {
        int64_t until = mono_ms() + ms;
        for (;;) {
                int64_t left = until - mono_ms();
                if (left <= 0)
                        return;
                struct timeval tv = { .tv_sec = left / 1000, .tv_usec = (left % 1000) * 1000 };
                setsockopt(l->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                char buf[1024];
                ssize_t k = recv(l->fd, buf, sizeof(buf) - 1, 0);
                if (k < 0)
                        continue;
                buf[k] = 0;
                if (l->n < MSGS_MAX) {
                        l->msgs[l->n].at_ms = mono_ms();
                        snprintf(l->msgs[l->n].text, sizeof(l->msgs[l->n].text), "%s", buf);
                        l->n++;
                }
        }
}

/* Index of the first message from index from that holds line ("READY=1") as one of its
 * lines, or -1. */
static ssize_t listener_find(const struct listener *l, size_t from, const char *line) {
        size_t len = strlen(line);
        for (size_t i = from; i < l->n; i++) {
                const char *p = l->msgs[i].text;
                while (p) {
                        if (strncmp(p, line, len) == 0 && (p[len] == '\n' || p[len] == 0))
                                return (ssize_t) i;
                        p = strchr(p, '\n');
                        if (p)
                                p++;
                }
        }
        return -1;
}

/* Waits up to ms for text in the log, receiving meanwhile. */
static bool listener_wait_log(struct listener *l, const char *log, const char *text, int ms) {
        int64_t until = mono_ms() + ms;
        for (;;) {
                char *t = tu_read_file(log);
                bool found = t && strstr(t, text);
                free(t);
                if (found)
                        return true;
                if (mono_ms() >= until)
                        return false;
                listener_pump(l, 50);
        }
}

/* Waits up to ms for a message holding line; its index or -1. */
static ssize_t listener_wait(struct listener *l, const char *line, size_t from, int ms) {
        int64_t until = mono_ms() + ms;
        ssize_t i;
        while ((i = listener_find(l, from, line)) < 0 && mono_ms() < until)
                listener_pump(l, 100);
        return i;
}

static size_t listener_count(const struct listener *l, const char *line, int64_t after_ms) {
        size_t n = 0;
        for (size_t i = 0; i < l->n; i++)
                if (l->msgs[i].at_ms > after_ms && strcmp(l->msgs[i].text, line) == 0)
                        n++;
        return n;
}

/* rtsoakd with its notify socket (and watchdog, if watchdog_usec) in its environment; the
 * test-only fault switch too if hang is set. */
static pid_t spawn_daemon(struct listener *l, const char *watchdog_usec, const char *hang,
                          char **argv, const char *log) {
        setenv("NOTIFY_SOCKET", l->path, 1);
        if (watchdog_usec)
                setenv("WATCHDOG_USEC", watchdog_usec, 1);
        if (hang) {
                setenv("RTSOAKD_TEST_HANG", hang, 1);
                setenv("RTSOAKD_TEST_HANG_AFTER", "2s", 1);
        }
        pid_t pid = tu_spawn(argv, NULL, log);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        unsetenv("RTSOAKD_TEST_HANG");
        unsetenv("RTSOAKD_TEST_HANG_AFTER");
        assert_true(pid > 0);
        daemon_pid = pid;
        return pid;
}

/* Threads of pid running SCHED_FIFO at prio, from the kernel's own view
 * (/proc/PID/task/TID/stat: rt_priority is field 40, policy field 41). */
static size_t fifo_threads(pid_t pid, int prio) {
        char path[64];
        size_t n = 0;
        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                char stat[128];
                snprintf(stat, sizeof(stat), "/proc/%d/task/%s/stat", (int) pid, e->d_name);
                char *text = tu_read_file(stat);
                if (!text)
                        continue;
                const char *p = strrchr(text, ')');
                int field = 2, rt_prio = -1, policy = -1;
                for (char *tok = p ? strtok((char *) p + 1, " ") : NULL; tok;
                     tok = strtok(NULL, " ")) {
                        field++;
                        if (field == 40)
                                rt_prio = atoi(tok);
                        else if (field == 41)
                                policy = atoi(tok);
                }
                if (policy == 1 /* SCHED_FIFO */ && rt_prio == prio)
                        n++;
                free(text);
        }
        closedir(d);
        return n;
}

static long long db_count(const char *db, const char *sql) {
        sqlite3 *h = NULL;
        sqlite3_stmt *st = NULL;
        long long n = -1;
        assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_busy_timeout(h, 5000);
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(h));
        if (sqlite3_step(st) == SQLITE_ROW)
                n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(h);
        return n;
}

static void test_ready_status_watchdog_stopping(void **state) {
        static struct listener l;
        char db[600], set_db[700], log[600], *argv[48];
        (void) state;
        if (geteuid() != 0)
                skip();
        snprintf(db, sizeof(db), "%s/ready.db", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", db);
        snprintf(log, sizeof(log), "%s/ready.log", dir);
        listener_open(&l, "ready");
        tu_daemon_argv(argv, set_db, NULL);
        pid_t pid = spawn_daemon(&l, "4000000", NULL, argv, log);

        ssize_t ready = listener_wait(&l, "READY=1", 0, 15000);
        if (ready < 0)
                fail_msg("no READY=1 within 15 s; log:\n%s", tu_read_file(log));
        /* As the kernel sees it when READY=1 has come: one SCHED_FIFO 95 thread per CPU. */
        struct cpuset online;
        assert_int_equal(cpuset_online(&online, NULL), 0);
        assert_int_equal(fifo_threads(pid, 95), online.n);
        cpuset_done(&online);
        /* When READY=1 arrived the daemon had already logged its real-time setup and that
         * every probe thread measures; a status came before (starting) and none said ready
         * earlier. */
        char *text = tu_read_file(log);
        assert_non_null(strstr(text, "probing CPUs"));
        assert_non_null(strstr(text, "Ready: "));
        assert_non_null(strstr(text, "measuring at SCHED_FIFO 95"));
        free(text);
        assert_true(ready > 0);
        assert_true(strncmp(l.msgs[0].text, "STATUS=Run 1: starting the probes", 33) == 0);

        listener_pump(&l, 8000);
        int64_t ready_ms = l.msgs[ready].at_ms;

        /* Status lines: "Scenario idle; worst this interval X us (CPU N); upload off; ...". */
        size_t statuses = 0;
        for (size_t i = (size_t) ready; i < l.n; i++) {
                const char *t = l.msgs[i].text;
                char scenario[32];
                double worst;
                int cpu;
                unsigned long long stored;
                if (strncmp(t, "STATUS=Scenario", 15) != 0)
                        continue;
                /* "...; last interval Y us (CPU M); upload off; N intervals stored, ..." or
                 * "last interval none" before the first. */
                char last[64];
                int n = 0;
                if (sscanf(t,
                           "STATUS=Scenario %31[^;]; worst this interval %lf us (CPU %d); %63[^;]; "
                           "upload off; %llu intervals stored%n",
                           scenario, &worst, &cpu, last, &stored, &n) != 5 ||
                    n == 0)
                        fail_msg("status line does not parse: %s", t);
                assert_string_equal(scenario, "idle");
                assert_true(worst >= 0);
                assert_true(cpu >= 0);
                double last_us;
                int last_cpu;
                if (stored == 0)
                        assert_string_equal(last, "last interval none");
                else if (sscanf(last, "last interval %lf us (CPU %d)", &last_us, &last_cpu) != 2 ||
                         last_us <= 0 || last_cpu < 0)
                        fail_msg("last interval does not parse: %s", t);
                statuses++;
        }
        assert_true(statuses >= 4);

        /* Pings every WATCHDOG_USEC / 2 = 2 s: about 4 in 8 s, none two periods apart. */
        int64_t prev = -1;
        size_t pings = 0;
        for (size_t i = 0; i < l.n; i++) {
                if (strcmp(l.msgs[i].text, "WATCHDOG=1") != 0 || l.msgs[i].at_ms < ready_ms)
                        continue;
                if (prev >= 0 && l.msgs[i].at_ms - prev > 3600)
                        fail_msg("%lld ms between two pings", (long long) (l.msgs[i].at_ms - prev));
                prev = l.msgs[i].at_ms;
                pings++;
        }
        assert_in_range(pings, 3, 6);

        size_t before = l.n;
        kill(pid, SIGTERM);
        assert_true(listener_wait(&l, "STOPPING=1", before, 10000) >= 0);
        assert_int_equal(tu_wait(pid, 15000), 0);
        daemon_pid = -1;
        listener_close(&l);
}

/* Makes part hang 2 s after READY=1 and checks that the pings stop, the log names the part
 * and a watchdog_stall event names it in storage. */
static void hang_test(const char *part, const char *expect, const char *const *extra,
                      bool sigterm_works) {
        static struct listener l;
        char db[600], set_db[700], log[600], *argv[48], sql[256];
        snprintf(db, sizeof(db), "%s/hang-%s.db", dir, part);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", db);
        snprintf(log, sizeof(log), "%s/hang-%s.log", dir, part);
        listener_open(&l, part);
        tu_daemon_argv(argv, set_db, extra);
        /* Checks every 2 s: a slow fsync on a busy disk is no stall at that scale. */
        pid_t pid = spawn_daemon(&l, "4000000", part, argv, log);

        if (listener_wait(&l, "READY=1", 0, 15000) < 0)
                fail_msg("no READY=1 within 15 s; log:\n%s", tu_read_file(log));
        if (!listener_wait_log(&l, log, "that part hangs now", 10000))
                fail_msg("the fault was not armed; log:\n%s", tu_read_file(log));
        int64_t hung_ms = mono_ms();
        assert_true(listener_count(&l, "WATCHDOG=1", 0) >= 1);

        char line[256];
        snprintf(line, sizeof(line), "from: %s; no more WATCHDOG=1 pings", expect);
        if (!listener_wait_log(&l, log, line, 10000))
                fail_msg("no stall of the %s logged; log:\n%s", expect, tu_read_file(log));
        int64_t stalled_ms = mono_ms();
        /* The stall is seen at the first or second check after the hang. */
        assert_true(stalled_ms - hung_ms < 7000);
        listener_pump(&l, 3000);
        /* A ping may have been on its way while the stall was logged; none after that. */
        assert_true(listener_count(&l, "WATCHDOG=1", stalled_ms + 200) == 0);

        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM events WHERE type = 'watchdog_stall' AND message LIKE "
                 "'%%from: %s;%%'",
                 expect);
        long long n = -1;
        for (int i = 0; i < 50 && n < 1; i++) {
                n = db_count(db, sql);
                if (n < 1)
                        tu_sleep_ms(100);
        }
        assert_int_equal(n, 1);

        if (sigterm_works) {
                size_t before = l.n;
                kill(pid, SIGTERM);
                assert_true(listener_wait(&l, "STOPPING=1", before, 10000) >= 0);
                assert_int_equal(tu_wait(pid, 15000), 0);
                daemon_pid = -1;
        } else {
                /* The main loop itself is stuck: what systemd's watchdog would do. */
                kill(pid, SIGKILL);
                tu_wait(pid, 5000);
                daemon_pid = -1;
        }
        listener_close(&l);
}

static void test_hang_collector(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        hang_test("collector", "collector", NULL, false);
}

static void test_hang_probe(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        hang_test("probe", "probe on CPU 0", NULL, true);
}

static void test_hang_storage(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        /* The main thread is stuck inside storage: storage is named first. */
        hang_test("storage", "storage writer, collector", NULL, false);
}

/* An enrolled machine and the real farm server on loopback; the token in token_file. */
static void start_farm(char *url, size_t url_size, char *token_file, size_t tf_size) {
        char farm_db[600], server_log[600];
        snprintf(farm_db, sizeof(farm_db), "%s/farm.db", dir);
        snprintf(server_log, sizeof(server_log), "%s/server.log", dir);
        snprintf(token_file, tf_size, "%s/token", dir);
        unlink(farm_db);
        tu_enroll_this_machine(farm_db, token_file);
        server_pid = tu_server_start(farm_db, server_log, "127.0.0.1:0", NULL, url, url_size);
}

static void stop_farm(void) {
        kill(server_pid, SIGTERM);
        tu_wait(server_pid, 10000);
        server_pid = -1;
}

static void test_hang_uploader(void **state) {
        char url[128], token_file[600], set_server[200], set_token[700];
        (void) state;
        if (geteuid() != 0)
                skip();
        start_farm(url, sizeof(url), token_file, sizeof(token_file));
        snprintf(set_server, sizeof(set_server), "Upload.Server=%s", url);
        snprintf(set_token, sizeof(set_token), "Upload.TokenFile=%s", token_file);
        const char *extra[] = { "--set", set_server, "--set", set_token, NULL };
        hang_test("uploader", "uploader", extra, true);
        stop_farm();
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

/* rtsoakd --config conf, with only what the build needs on the command line (so that the
 * file decides the rotation), and without the flight recorder, which would mount tracefs on
 * this machine where it is not mounted. */
static void config_argv(char **argv, const char *conf) {
        static char helper[4200];
        int n = 0;
        argv[n++] = (char *) tu_bin("RTSOAKD");
        argv[n++] = "--config";
        argv[n++] = (char *) conf;
        argv[n++] = "--set";
        argv[n++] = "Trace.Enabled=no";
        const char *load = getenv("RTSOAK_LOAD");
        if (load) {
                snprintf(helper, sizeof(helper), "Load.Helper=%s", load);
                argv[n++] = "--set";
                argv[n++] = helper;
        }
        const char *san = getenv("RTSOAKD_TEST_SET");
        if (san && *san) {
                argv[n++] = "--set";
                argv[n++] = (char *) san;
        }
        argv[n] = NULL;
}

static void test_sighup_reload(void **state) {
        static struct listener l;
        char db[600], conf[600], log[600], text[2048], sql[256], *argv[16];
        (void) state;
        if (geteuid() != 0)
                skip();
        snprintf(db, sizeof(db), "%s/reload.db", dir);
        snprintf(conf, sizeof(conf), "%s/rtsoakd.conf", dir);
        snprintf(log, sizeof(log), "%s/reload.log", dir);
        snprintf(text, sizeof(text),
                 "[Storage]\nPath=%s\nInterval=1s\n\n[Schedule]\nRotation=idle 1h\n\n"
                 "[Scenario.light]\nLoad=cpu --load 5%%\n",
                 db);
        write_file(conf, text);
        listener_open(&l, "reload");
        config_argv(argv, conf);
        pid_t pid = spawn_daemon(&l, NULL, NULL, argv, log);
        if (listener_wait(&l, "READY=1", 0, 15000) < 0)
                fail_msg("no READY=1 within 15 s; log:\n%s", tu_read_file(log));
        listener_pump(&l, 2500);

        /* A good change: another rotation, another threshold, and a key that needs a restart. */
        snprintf(text, sizeof(text),
                 "[Probe]\nPriority=80\nThreshold=250us\n\n[Storage]\nPath=%s\nInterval=1s\n\n"
                 "[Schedule]\nRotation=light 1h\n\n[Scenario.light]\nLoad=cpu --load 5%%\n",
                 db);
        write_file(conf, text);
        size_t before = l.n;
        kill(pid, SIGHUP);
        ssize_t rel = listener_wait(&l, "RELOADING=1", before, 10000);
        assert_true(rel >= 0);
        assert_non_null(strstr(l.msgs[rel].text, "MONOTONIC_USEC="));
        assert_true(listener_wait(&l, "READY=1", (size_t) rel, 10000) > rel);
        if (!tu_wait_for_text(log, "configuration reloaded", 5000))
                fail_msg("no reload logged:\n%s", tu_read_file(log));
        char *out = tu_read_file(log);
        assert_non_null(strstr(out, "changed: Probe.Threshold, Schedule.Rotation (from the next "
                                    "interval boundary: Probe.Threshold, Schedule.Rotation); kept "
                                    "until a restart: Probe.Priority=80 (running: 95)\n"));
        assert_non_null(strstr(out, "Probe.Priority=80 (running: 95)"));
        free(out);
        /* The next intervals run the new scenario; the probes never stopped (no second
         * run, and intervals of the first one on both sides of the reload). */
        long long n = 0;
        for (int i = 0; i < 60 && n < 2; i++) {
                tu_sleep_ms(100);
                n = db_count(db, "SELECT count(*) FROM intervals WHERE scenario = 'light'");
        }
        assert_true(n >= 2);
        assert_true(db_count(db, "SELECT count(*) FROM intervals WHERE scenario = 'idle'") >= 2);
        assert_int_equal(db_count(db, "SELECT count(*) FROM runs"), 1);
        assert_int_equal(db_count(db, "SELECT count(*) FROM events WHERE type = "
                                      "'config_reloaded' AND message LIKE '%Schedule.Rotation%'"),
                         1);
        assert_int_equal(db_count(db, "SELECT count(*) FROM events WHERE type = 'scenario' AND "
                                      "message LIKE 'scenario light%'"),
                         1);

        /* A bad change: refused with file and line, the running configuration stays. */
        snprintf(text, sizeof(text),
                 "[Storage]\nPath=%s\nInterval=1s\n\n[Schedule]\nRotation=idle 1h\n\n"
                 "[Probe]\nThreshold=banana\n",
                 db);
        write_file(conf, text);
        before = l.n;
        kill(pid, SIGHUP);
        rel = listener_wait(&l, "RELOADING=1", before, 10000);
        assert_true(rel >= 0);
        assert_true(listener_wait(&l, "READY=1", (size_t) rel, 10000) > rel);
        if (!tu_wait_for_text(log, "Configuration reload refused", 5000))
                fail_msg("no refusal logged:\n%s", tu_read_file(log));
        snprintf(sql, sizeof(sql), "%s:9", conf);
        out = tu_read_file(log);
        if (!strstr(out, sql))
                fail_msg("the refusal does not name %s:\n%s", sql, out);
        free(out);
        long long stored = db_count(db, "SELECT count(*) FROM intervals");
        tu_sleep_ms(2500);
        /* Still probing and still under the running rotation. */
        assert_true(db_count(db, "SELECT count(*) FROM intervals") >= stored + 1);
        assert_int_equal(kill(pid, 0), 0);
        assert_int_equal(db_count(db, "SELECT count(*) FROM events WHERE type = "
                                      "'config_reload_failed' AND message LIKE '%banana%'"),
                         1);
        assert_int_equal(db_count(db, "SELECT count(*) FROM events WHERE type = 'scenario' AND "
                                      "message LIKE 'scenario idle%'"),
                         1);

        before = l.n;
        kill(pid, SIGTERM);
        assert_true(listener_wait(&l, "STOPPING=1", before, 10000) >= 0);
        assert_int_equal(tu_wait(pid, 15000), 0);
        daemon_pid = -1;
        listener_close(&l);
}

/* A reload that turns upload on: the uploader starts, the intervals go out, the status shows
 * the backlog, without a restart. */
static void test_sighup_enables_upload(void **state) {
        static struct listener l;
        char db[600], conf[600], log[600], text[2048], url[128], token_file[600], *argv[16];
        (void) state;
        if (geteuid() != 0)
                skip();
        start_farm(url, sizeof(url), token_file, sizeof(token_file));
        snprintf(db, sizeof(db), "%s/reload-upload.db", dir);
        snprintf(conf, sizeof(conf), "%s/upload.conf", dir);
        snprintf(log, sizeof(log), "%s/reload-upload.log", dir);
        snprintf(text, sizeof(text),
                 "[Storage]\nPath=%s\nInterval=1s\n[Schedule]\nRotation=idle 1h\n", db);
        write_file(conf, text);
        listener_open(&l, "upload");
        config_argv(argv, conf);
        pid_t pid = spawn_daemon(&l, NULL, NULL, argv, log);
        if (listener_wait(&l, "READY=1", 0, 15000) < 0)
                fail_msg("no READY=1 within 15 s; log:\n%s", tu_read_file(log));
        listener_pump(&l, 1500);
        assert_int_equal(db_count(db, "SELECT count(*) FROM outbox"), 0);

        snprintf(text, sizeof(text),
                 "[Storage]\nPath=%s\nInterval=1s\n[Schedule]\nRotation=idle 1h\n"
                 "[Upload]\nServer=%s\nTokenFile=%s\n",
                 db, url, token_file);
        write_file(conf, text);
        size_t before = l.n;
        kill(pid, SIGHUP);
        ssize_t rel = listener_wait(&l, "RELOADING=1", before, 10000);
        assert_true(rel >= 0);
        assert_true(listener_wait(&l, "READY=1", (size_t) rel, 10000) > rel);
        if (!listener_wait_log(&l, log, "Uploading to", 5000))
                fail_msg("the uploader did not start:\n%s", tu_read_file(log));
        long long sent = 0;
        for (int i = 0; i < 100 && sent < 2; i++) {
                listener_pump(&l, 100);
                sent = db_count(db, "SELECT count(*) FROM outbox WHERE state = 'sent'");
        }
        if (sent < 2)
                fail_msg("%lld outbox rows sent; log:\n%s", sent, tu_read_file(log));
        bool backlog = false;
        for (size_t i = (size_t) rel; i < l.n; i++)
                if (strstr(l.msgs[i].text, "STATUS=") &&
                    strstr(l.msgs[i].text, "; upload backlog "))
                        backlog = true;
        assert_true(backlog);
        assert_int_equal(db_count(db, "SELECT count(*) FROM events WHERE type = 'config_reloaded' "
                                      "AND message LIKE '%Upload.Server, Upload.TokenFile%'"),
                         1);
        assert_int_equal(db_count(db, "SELECT count(*) FROM runs"), 1);
        /* The log says when what changed applies: the upload at once, nothing of a rotation
         * that did not change. */
        char *out = tu_read_file(log);
        if (!strstr(out, "changed: Upload.Server, Upload.TokenFile (at once: Upload.Server, "
                         "Upload.TokenFile)\n") ||
            strstr(out, "interval boundary"))
                fail_msg("the reload's log line:\n%s", out);
        free(out);

        before = l.n;
        kill(pid, SIGTERM);
        assert_true(listener_wait(&l, "STOPPING=1", before, 10000) >= 0);
        assert_int_equal(tu_wait(pid, 15000), 0);
        daemon_pid = -1;
        listener_close(&l);
        stop_farm();
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_ready_status_watchdog_stopping, kill_leftovers),
                cmocka_unit_test_teardown(test_hang_collector, kill_leftovers),
                cmocka_unit_test_teardown(test_hang_probe, kill_leftovers),
                cmocka_unit_test_teardown(test_hang_storage, kill_leftovers),
                cmocka_unit_test_teardown(test_hang_uploader, kill_leftovers),
                cmocka_unit_test_teardown(test_sighup_reload, kill_leftovers),
                cmocka_unit_test_teardown(test_sighup_enables_upload, kill_leftovers),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
