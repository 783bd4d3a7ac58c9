/* SPDX-License-Identifier: MIT */
/* rtsoakd uploading to the real rtsoak-server on loopback: every interval arrives exactly
 * once and in order, across a server outage and across kill -9 of the daemon, a row the
 * server refuses does not hold up the rest, and a change of the machine's inventory under a
 * running daemon is recorded and arrives. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpuset.h"
#include "macro.h"
#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "test-farmdb.h"
#include "timeutil.h"

static char *dir, local_db[512], farm_db[512], server_log[512], token_file[512], url[128],
        set_db[600], set_server[200], set_token[600];

static int setup(void **state) {
        dir = tu_mkdtemp("upload");
        snprintf(local_db, sizeof(local_db), "%s/rtsoak.db", dir);
        tu_farm_target(dir, "farm", farm_db, sizeof(farm_db));
        snprintf(server_log, sizeof(server_log), "%s/server.log", dir);
        snprintf(token_file, sizeof(token_file), "%s/token", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", local_db);
        snprintf(set_token, sizeof(set_token), "Upload.TokenFile=%s", token_file);
        tu_enroll_this_machine(farm_db, token_file);
        return 0;
}

static int teardown(void **state) {
        tu_farm_drop(farm_db);
        tu_rmdir(dir);
        dir = NULL;
        return 0;
}

static void fresh_local(void) {
        tu_remove_db(local_db);
        /* The farm keeps the machine's enrollment; its data goes (what refers to a run
         * first: PostgreSQL enforces the references). */
        tu_farm_exec(farm_db, "DELETE FROM interval_load_metrics; DELETE FROM interval_loads; "
                              "DELETE FROM interval_cpus; DELETE FROM events; DELETE FROM uploads; "
                              "DELETE FROM intervals; DELETE FROM run_day_scenarios; DELETE FROM "
                              "run_days; DELETE FROM load_downs; DELETE FROM hist_days; DELETE "
                              "FROM run_day_hists; DELETE FROM inventories; DELETE "
                              "FROM \"overlaps\"; DELETE FROM verdict_log; DELETE FROM runs;");
}

static pid_t start_server_at(const char *listen) {
        return tu_server_start(farm_db, server_log, listen, NULL, url, sizeof(url));
}

static pid_t start_tls_server(const char *cert, const char *key) {
        char certarg[700], keyarg[700];
        snprintf(certarg, sizeof(certarg), "--cert=%s", cert);
        snprintf(keyarg, sizeof(keyarg), "--key=%s", key);
        const char *extra[] = { certarg, keyarg, NULL };
        return tu_server_start(farm_db, server_log, "127.0.0.1:0", extra, url, sizeof(url));
}

static char set_ca[700] = "Upload.CAFile=";

static char set_release[300] = "Upload.Release=";

static char set_check[64] = "Inventory.Check=5min";

/* The tested tree every run declares (sent in its inventory). */
#define GIT_URL "https://git.kernel.org/pub/scm/linux/kernel/git/rt/linux-stable-rt.git"
#define GIT_COMMIT "0123456789abcdef0123456789abcdef01234567"

static pid_t start_daemon(const char *duration, const char *errlog) {
        char *argv[48];
        snprintf(set_server, sizeof(set_server), "Upload.Server=%s", url);
        const char *extra[] = { "--set",
                                set_server,
                                "--set",
                                set_token,
                                "--set",
                                "Upload.RetryMax=1s",
                                "--set",
                                "Upload.Batch=5",
                                "--set",
                                "Probe.Threshold=50ms",
                                "--set",
                                set_ca,
                                "--set",
                                set_release,
                                "--set",
                                set_check,
                                "--set",
                                "Upload.GitURL=" GIT_URL,
                                "--set",
                                "Upload.GitCommit=" GIT_COMMIT,
                                duration ? "--duration" : NULL,
                                duration,
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        return tu_spawn(argv, NULL, errlog);
}

/* A sorted list of "run:seq" of the local database's intervals, or the farm's (either SQLite
 * file, or the farm on PostgreSQL). */
static char *interval_list(const char *path, const char *sql) {
        sql_conn *db = tu_farm_open(path);
        sql_stmt *st;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (sql_prepare_once(db, sql, &st) < 0)
                fail_msg("%s: %s", sql, sql_errmsg(db));
        while (sql_step(st) == SQL_ROW)
                fprintf(f, "%lld:%lld\n", (long long) sql_column_int64(st, 0),
                        (long long) sql_column_int64(st, 1));
        sql_finalize(st);
        sql_close(db);
        fclose(f);
        return buf;
}

static long long query(const char *path, const char *sql) {
        return tu_farm_int(path, sql);
}

#define LOCAL_LIST "SELECT run_id, seq FROM intervals ORDER BY run_id, seq"
#define FARM_LIST                                                                       \
        "SELECT r.run_id, i.seq FROM intervals i JOIN runs r ON r.id = i.run ORDER BY " \
        "r.run_id, i.seq"

/* Every interval stored here is on the server, once (the farm's uniqueness makes "once" a
 * matter of equal lists). */
static void expect_all_arrived(void) {
        char *local = interval_list(local_db, LOCAL_LIST);
        char *farm = NULL;
        /* The last upload may still be on its way when a killed daemon was restarted. */
        for (int i = 0; i < 50; i++) {
                free(farm);
                farm = interval_list(farm_db, FARM_LIST);
                if (strcmp(local, farm) == 0)
                        break;
                tu_sleep_ms(100);
        }
        if (strcmp(local, farm) != 0)
                fail_msg("local intervals:\n%s\nfarm intervals:\n%s", local, farm);
        assert_true(strlen(local) > 0);
        printf("# %zu intervals arrived once each\n", tu_count_lines(local, ""));
        free(local);
        free(farm);
        assert_int_equal(query(local_db, "SELECT count(*) FROM outbox WHERE state != 'sent'"), 0);
}

/* One text column of the first row of sql. */
static char *query_text(const char *path, const char *sql) {
        sql_conn *db = tu_farm_open(path);
        sql_stmt *st;
        if (sql_prepare_once(db, sql, &st) < 0)
                fail_msg("%s: %s", sql, sql_errmsg(db));
        assert_int_equal(sql_step(st), SQL_ROW);
        const char *t = sql_column_text(st, 0);
        char *v = strdup(t ?: "(null)");
        sql_finalize(st);
        sql_close(db);
        return v;
}

/* The farm knows the run by the name it is judged under and the CPUs it probes: what
 * [Upload] Release= says (else uname -r), and the CPUs rtsoakd recorded for the run. */
static void expect_run_identity(const char *release) {
        struct utsname u;
        assert_int_equal(uname(&u), 0);
        char *farm_release = query_text(farm_db, "SELECT release FROM runs ORDER BY id DESC");
        char *farm_kernel = query_text(farm_db, "SELECT kernel_release FROM runs ORDER BY id "
                                                "DESC");
        if (strcmp(farm_release, release ?: u.release) != 0 || strcmp(farm_kernel, u.release))
                fail_msg("the farm has release %s, kernel %s; expected %s, %s", farm_release,
                         farm_kernel, release ?: u.release, u.release);
        free(farm_release);
        free(farm_kernel);
        char *local_release = query_text(local_db, "SELECT release FROM runs ORDER BY id DESC");
        assert_string_equal(local_release, release ?: u.release);
        free(local_release);

        char *local = query_text(local_db, "SELECT cpus FROM runs ORDER BY id DESC");
        char *farm = query_text(farm_db, "SELECT probed_cpus FROM runs ORDER BY id DESC");
        struct cpuset a = {}, b = {};
        const char *why;
        if (cpuset_parse(local, &a, &why) < 0 || cpuset_parse(farm, &b, &why) < 0 || a.n != b.n ||
            a.n == 0 || memcmp(a.cpus, b.cpus, a.n * sizeof(int)) != 0)
                fail_msg("probed CPUs: rtsoakd recorded %s, the farm has %s", local, farm);
        cpuset_done(&a);
        cpuset_done(&b);
        free(local);
        free(farm);
}

static void test_uploads_in_order(void **state) {
        if (geteuid() != 0)
                skip();
        fresh_local();
        pid_t srv = start_server_at("127.0.0.1:0");
        pid_t d = start_daemon("4s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        expect_all_arrived();
        /* In order: an upload received after another one of the run has a later first row. */
        assert_int_equal(query(farm_db, "SELECT count(*) FROM uploads u1 JOIN uploads u2 ON "
                                        "u2.received_ns > u1.received_ns AND u2.run = u1.run "
                                        "WHERE u2.seq <= u1.seq"),
                         0);
        /* The events came along (the scenario event at least). */
        assert_true(query(farm_db, "SELECT count(*) FROM events WHERE type = 'scenario'") >= 1);
        expect_run_identity(NULL);
        tu_server_stop(srv);
}

static void test_release_and_cpus_sent(void **state) {
        if (geteuid() != 0)
                skip();
        fresh_local();
        pid_t srv = start_server_at("127.0.0.1:0");
        snprintf(set_release, sizeof(set_release), "Upload.Release=6.6.30-rt31+lab~2:test_x");
        pid_t d = start_daemon("3s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        snprintf(set_release, sizeof(set_release), "Upload.Release=");
        expect_all_arrived();
        expect_run_identity("6.6.30-rt31+lab~2:test_x");
        tu_server_stop(srv);
}

static void test_server_outage(void **state) {
        char listen[64];
        if (geteuid() != 0)
                skip();
        fresh_local();
        /* Learn a free port, then let the daemon find the server gone. */
        pid_t srv = start_server_at("127.0.0.1:0");
        tu_server_stop(srv);
        snprintf(listen, sizeof(listen), "%s", url + strlen("http://"));
        pid_t d = start_daemon("9s", NULL);
        tu_sleep_ms(4000);
        assert_true(query(local_db, "SELECT count(*) FROM outbox WHERE state = 'pending'") >= 3);
        assert_true(query(local_db, "SELECT last_error IS NOT NULL FROM upload_status") == 1);
        srv = start_server_at(listen);
        assert_int_equal(tu_wait(d, 30000), 0);
        expect_all_arrived();
        tu_server_stop(srv);
}

static void test_kill9_mid_upload(void **state) {
        char errlog[600];
        if (geteuid() != 0)
                skip();
        fresh_local();
        snprintf(errlog, sizeof(errlog), "%s/daemon.log", dir);
        pid_t srv = start_server_at("127.0.0.1:0");
        /* Killed at different moments of its upload cycle, restarted each time. */
        const int after_ms[] = { 1300, 2150, 1770, 2600 };
        for (size_t i = 0; i < ELEMENTSOF(after_ms); i++) {
                pid_t d = start_daemon(NULL, errlog);
                tu_sleep_ms(after_ms[i]);
                kill(d, SIGKILL);
                tu_wait(d, 5000);
        }
        /* A last run that ends cleanly sends what the killed ones left behind. */
        pid_t d = start_daemon("3s", errlog);
        assert_int_equal(tu_wait(d, 30000), 0);
        expect_all_arrived();
        assert_true(query(local_db, "SELECT count(DISTINCT run_id) FROM intervals") >= 4);
        /* Each kill was found at the next start, and the farm heard of it. */
        assert_true(query(farm_db, "SELECT count(*) FROM events WHERE type = 'unclean_end'") >= 4);
        tu_server_stop(srv);
}

static void test_refused_row_does_not_block(void **state) {
        if (geteuid() != 0)
                skip();
        fresh_local();
        /* A first run without upload creates the database; then an event the server will
         * refuse (a control character in its message) is queued ahead of everything. */
        char *argv[48];
        const char *extra[] = { "--duration", "1500ms", NULL };
        tu_daemon_argv(argv, set_db, extra);
        struct tu_result r;
        assert_int_equal(tu_run(argv, 30000, NULL, NULL, &r), 0);
        tu_result_done(&r);
        /* rtsoakd's own database is SQLite, whatever the farm's. */
        tu_farm_exec(local_db, "INSERT INTO events (run_id, time_ns, type, message) VALUES "
                               "(1, 1796300000000000000, 'note', 'bell' || char(7));"
                               "INSERT INTO outbox (run_id, event_id, created_ns) VALUES "
                               "(1, last_insert_rowid(), 0);");

        pid_t srv = start_server_at("127.0.0.1:0");
        pid_t d = start_daemon("4s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        /* Set aside with the server's reason, recorded as an event, and nothing else held up:
         * the intervals of the new run arrived. */
        assert_int_equal(query(local_db, "SELECT count(*) FROM outbox WHERE state = 'rejected' AND "
                                         "message LIKE 'HTTP 400: events[0].message: a "
                                         "control character U+0007%'"),
                         1);
        assert_int_equal(query(local_db, "SELECT count(*) FROM outbox WHERE state = 'pending'"), 0);
        assert_true(query(local_db, "SELECT count(*) FROM events WHERE type = 'upload_rejected'") >=
                    1);
        assert_true(query(farm_db, "SELECT count(*) FROM intervals i JOIN runs r ON r.id = i.run "
                                   "WHERE r.run_id = 2") >= 3);
        /* rtsoak status says so. */
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", local_db);
        char *st_argv[] = { (char *) tu_bin("RTSOAK"), dbarg, "status", NULL };
        assert_int_equal(tu_run(st_argv, 20000, NULL, NULL, &r), 0);
        if (!strstr(r.out, "1 refused by the server") || !strstr(r.out, "control character"))
                fail_msg("status:\n%s", r.out);
        tu_result_done(&r);
        tu_server_stop(srv);
}

/* The local database is replaced (moved aside after damage, say): its run 1 is not the farm's
 * run 1, and the server refuses every row of it (409).  Each refused interval is set aside
 * with one upload_rejected event; a refused event (that one too) gets a rejection kept here
 * only.  Before, every refusal queued another upload_rejected event of the same refused run:
 * the uploader went round forever and the database grew. */
static void test_refused_run_does_not_loop(void **state) {
        if (geteuid() != 0)
                skip();
        fresh_local();
        pid_t srv = start_server_at("127.0.0.1:0");
        pid_t d = start_daemon("2500ms", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        assert_true(query(farm_db, "SELECT count(*) FROM intervals") >= 1);
        tu_remove_db(local_db);
        d = start_daemon("4s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        tu_server_stop(srv);

        long long intervals = query(local_db, "SELECT count(*) FROM outbox WHERE state = "
                                              "'rejected' AND interval_id IS NOT NULL");
        long long rejected = query(local_db, "SELECT count(*) FROM outbox WHERE state = "
                                             "'rejected'");
        long long events = query(local_db, "SELECT count(*) FROM events WHERE type = "
                                           "'upload_rejected'");
        long long queued = query(local_db, "SELECT count(*) FROM outbox o JOIN events e ON "
                                           "e.id = o.event_id WHERE e.type = 'upload_rejected'");
        printf("# %lld rows refused (%lld intervals), %lld upload_rejected events, %lld of them "
               "queued for upload\n",
               rejected, intervals, events, queued);
        assert_true(intervals >= 1);
        assert_int_equal(query(local_db, "SELECT count(*) FROM outbox WHERE state = 'rejected' "
                                         "AND message NOT LIKE 'HTTP 409: run.%'"),
                         0);
        /* Each queued rejection is of a refused interval; one event per refused row. */
        assert_true(queued <= intervals);
        assert_true(events <= rejected);
}

static void test_missing_token_is_a_config_error(void **state) {
        char *argv[48];
        const char *extra[] = { "--set", "Upload.Server=http://127.0.0.1:9", "--set",
                                "Upload.TokenFile=/nonexistent/token", NULL };
        tu_daemon_argv(argv, set_db, extra);
        struct tu_result r;
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 78);
        assert_non_null(strstr(r.err, "[Upload] TokenFile=/nonexistent/token: cannot read"));
        tu_result_done(&r);
}

static void test_tls(void **state) {
        char cert[600], key[600];
        if (geteuid() != 0)
                skip();
        snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
        snprintf(key, sizeof(key), "%s/key.pem", dir);
        tu_make_cert(cert, key);

        /* The certificate is checked: against the system's CAs it fails and nothing is
         * sent, the error is kept for rtsoak status. */
        fresh_local();
        pid_t srv = start_tls_server(cert, key);
        assert_int_equal(strncmp(url, "https://", 8), 0);
        snprintf(set_ca, sizeof(set_ca), "Upload.CAFile=");
        pid_t d = start_daemon("3s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        assert_int_equal(query(farm_db, "SELECT count(*) FROM intervals"), 0);
        assert_true(query(local_db, "SELECT count(*) FROM outbox WHERE state = 'pending'") >= 2);
        assert_int_equal(query(local_db, "SELECT last_error LIKE '%certificate%' FROM "
                                         "upload_status"),
                         1);

        /* With the server's CA given, everything pending and new arrives. */
        snprintf(set_ca, sizeof(set_ca), "Upload.CAFile=%s", cert);
        d = start_daemon("3s", NULL);
        assert_int_equal(tu_wait(d, 30000), 0);
        expect_all_arrived();
        snprintf(set_ca, sizeof(set_ca), "Upload.CAFile=");
        tu_server_stop(srv);
}

#define THP "/sys/kernel/mm/transparent_hugepage/enabled"

/* Writes text to path (the file standing in for the kernel's). */
static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

/* One run that sees the stand-in change: SIGHUP makes the reload check it, else the periodic
 * check finds it; found names which did. */
static void run_with_change(const char *stand_in, const char *check, bool reload,
                            const char *found) {
        char errlog[600];
        snprintf(errlog, sizeof(errlog), "%s/inventory-%s.err", dir, reload ? "reload" : "check");
        snprintf(set_check, sizeof(set_check), "Inventory.Check=%s", check);
        write_text(stand_in, "always madvise [never]\n");
        pid_t d = start_daemon(NULL, errlog);
        if (!tu_wait_for_text(errlog, "Ready", 20000))
                fail_msg("rtsoakd did not get ready: %s", tu_read_file(errlog));
        write_text(stand_in, "[always] madvise never\n");
        if (reload)
                assert_int_equal(kill(d, SIGHUP), 0);
        if (!tu_wait_for_text(errlog, found, 20000))
                fail_msg("the change was not found at %s: %s", reload ? "a reload" : "a check",
                         tu_read_file(errlog));
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(tu_wait(d, 20000), 0);
}

/* The local record of run: its versions, and the one change. */
static void expect_local_change(int run) {
        char runarg[32], dbarg[600];
        snprintf(runarg, sizeof(runarg), "--run=%d", run);
        snprintf(dbarg, sizeof(dbarg), "--db=%s", local_db);
        char *argv[] = { (char *) tu_bin("RTSOAK"), dbarg, "inventory", "--json", runarg, NULL };
        struct tu_result r;
        if (tu_run(argv, 20000, NULL, NULL, &r) != 0)
                fail_msg("rtsoak inventory failed (%d): %s", r.status, r.err);
        json_t *j = tu_json(r.out);
        tu_result_done(&r);
        assert_int_equal(tu_jint(j, "version"), 2);
        json_t *fields = json_object_get(j, "fields");
        assert_string_equal(json_string_value(json_object_get(fields, "thp.enabled")), "always");
        json_t *h = json_object_get(j, "history");
        assert_int_equal(json_array_size(h), 2);
        json_t *ch = json_object_get(json_array_get(h, 1), "changes");
        assert_int_equal(json_array_size(ch), 1);
        json_t *c = json_array_get(ch, 0);
        assert_string_equal(json_string_value(json_object_get(c, "field")), "thp.enabled");
        assert_string_equal(json_string_value(json_object_get(c, "old")), "never");
        assert_string_equal(json_string_value(json_object_get(c, "new")), "always");
        /* The change took effect after the check before it and by the one that found it. */
        assert_true(json_is_string(json_object_get(json_array_get(h, 1), "after")));
        json_decref(j);
}

/* The machine page as headless Chromium renders it (where it is installed) shows the change. */
static void expect_page_in_browser(const char *page_url) {
        const char *chromium = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
        char profile[600], dir_arg[700];
        if (!chromium) {
                printf("# chromium is not installed: the page is checked over HTTP only\n");
                return;
        }
        snprintf(profile, sizeof(profile), "%s/chromium-profile", dir);
        snprintf(dir_arg, sizeof(dir_arg), "--user-data-dir=%s", profile);
        char *argv[] = { (char *) chromium, "--headless=new",
                         "--no-sandbox",    "--disable-gpu",
                         "--no-first-run",  "--disable-dev-shm-usage",
                         dir_arg,           "--dump-dom",
                         (char *) page_url, NULL };
        struct tu_result r;
        if (tu_run(argv, 120000, NULL, NULL, &r) != 0 ||
            !strstr(r.out, "<code>thp.enabled</code> <code>never</code> → <code>always</code>"))
                fail_msg("Chromium does not show the change (%d): %.2000s", r.status, r.err);
        tu_result_done(&r);
}

/* What the farm shows of the two runs' inventories: four versions, three changes (each run
 * found "never" at its start and changed to "always"), on the API and the machine's page. */
static void expect_farm_inventory(void) {
        char u[800];
        snprintf(u, sizeof(u), "%s/api/v1/machines", url);
        json_t *ms = tu_get_json(u, 200);
        const char *id = json_string_value(
                json_object_get(json_array_get(json_object_get(ms, "machines"), 0), "id"));
        assert_non_null(id);
        snprintf(u, sizeof(u), "%s/api/v1/machines/%s/inventory", url, id);
        json_t *inv = tu_get_json(u, 200);
        assert_int_equal(tu_jint(inv, "versions"), 4);
        assert_int_equal(tu_jint(inv, "total"), 3);
        json_t *cur = json_object_get(inv, "current");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(cur, "fields"), "thp.enabled")),
                "always");
        assert_int_equal(tu_jint(cur, "run"), 2);
        assert_string_equal(json_string_value(json_object_get(json_object_get(cur, "fields"),
                                                              "kernel.git_commit")),
                            GIT_COMMIT);
        assert_int_equal(tu_jint(cur, "version"), 2);
        const char *want_from[] = { "never", "always", "never" },
                   *want_to[] = { "always", "never", "always" };
        for (size_t k = 0; k < 3; k++) {
                json_t *c = json_array_get(json_object_get(inv, "changes"), k);
                json_t *fs = json_object_get(c, "fields");
                assert_int_equal(json_array_size(fs), 1);
                json_t *f = json_array_get(fs, 0);
                assert_string_equal(json_string_value(json_object_get(f, "name")), "thp.enabled");
                assert_string_equal(json_string_value(json_object_get(f, "from")), want_from[k]);
                assert_string_equal(json_string_value(json_object_get(f, "to")), want_to[k]);
        }
        /* A change within a run says when the check before still found the old one. */
        assert_true(json_is_string(
                json_object_get(json_array_get(json_object_get(inv, "changes"), 0), "after")));
        /* The verdict of the kernel: each change of thp.enabled (counted by the default
         * rule) during its data is a machine_changed problem naming it. */
        struct utsname un;
        assert_int_equal(uname(&un), 0);
        snprintf(u, sizeof(u), "%s/api/v1/kernels/%s/verdict", url, un.release);
        json_t *v = tu_get_json(u, 200), *p;
        size_t i, changed = 0;
        char ids[3][200], staff[80];
        json_array_foreach (json_object_get(v, "problems"), i, p) {
                if (strcmp(json_string_value(json_object_get(p, "kind")), "machine_changed") != 0)
                        continue;
                json_t *fs = json_object_get(p, "fields");
                assert_int_equal(json_array_size(fs), 1);
                assert_string_equal(json_string_value(json_array_get(fs, 0)), "thp.enabled");
                assert_true(changed < 3);
                snprintf(ids[changed++], sizeof(ids[0]), "%s",
                         json_string_value(json_object_get(p, "id")));
        }
        assert_int_equal(changed, 3);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "failed");
        json_decref(v);
        /* The KCIDB report's checkout names the tree the runs declared. */
        snprintf(u, sizeof(u), "%s/api/v1/kernels/%s/kcidb", url, un.release);
        json_t *report = tu_get_json(u, 200);
        json_t *ck = json_array_get(json_object_get(report, "checkouts"), 0);
        assert_string_equal(json_string_value(json_object_get(ck, "git_repository_url")), GIT_URL);
        assert_string_equal(json_string_value(json_object_get(ck, "git_commit_hash")), GIT_COMMIT);
        json_decref(report);
        /* Waived, each change is no problem of the release any more. */
        tu_server_admin_token(farm_db, "alice", staff);
        snprintf(u, sizeof(u), "%s/api/v1/kernels/%s/waivers", url, un.release);
        for (size_t k = 0; k < changed; k++) {
                char body[400];
                snprintf(body, sizeof(body),
                         "{\"problem\": \"%s\", \"reason\": \"THP set on purpose\"}", ids[k]);
                struct tu_reply w = {};
                tu_http("POST", u, staff, body, &w);
                assert_int_equal(w.status, 201);
                tu_reply_done(&w);
        }
        snprintf(u, sizeof(u), "%s/api/v1/kernels/%s/verdict", url, un.release);
        v = tu_get_json(u, 200);
        changed = 0;
        json_array_foreach (json_object_get(v, "problems"), i, p)
                changed += strcmp(json_string_value(json_object_get(p, "kind")),
                                  "machine_changed") == 0;
        assert_int_equal(changed, 0);
        assert_int_equal(json_array_size(json_object_get(v, "waived")), 3);
        /* Qualified, unless this VM's own stall of 50 ms made a violation (said, and then
         * the only kind of problem left). */
        const char *status = json_string_value(json_object_get(v, "verdict"));
        if (strcmp(status, "qualified") != 0) {
                char *reasons = json_dumps(json_object_get(v, "reasons"), 0);
                printf("# %s: %s\n", status, reasons);
                free(reasons);
                json_array_foreach (json_object_get(v, "problems"), i, p) {
                        printf("# left: %s\n", json_string_value(json_object_get(p, "message")));
                        assert_string_equal(json_string_value(json_object_get(p, "kind")),
                                            "violation");
                }
                assert_string_equal(status, "failed");
                assert_true(json_array_size(json_object_get(v, "problems")) > 0);
        }
        json_decref(v);
        snprintf(u, sizeof(u), "%s/machines/%s", url, id);
        struct tu_reply page = {};
        tu_http("GET", u, NULL, NULL, &page);
        if (!strstr(page.body, "<code>thp.enabled</code> <code>never</code> → <code>always</code>"))
                fail_msg("the machine page does not show the change:\n%s", page.body);
        tu_reply_done(&page);
        expect_page_in_browser(u);
        json_decref(inv);
        json_decref(ms);
}

/* A file of the kernel's changed under a running rtsoakd (a stand-in bind-mounted over it, in
 * a mount namespace of this test's own): found at a reload, and by the periodic check, each
 * recorded as a version with its event, and uploaded to the farm with it. */
static void test_inventory_change(void **state) {
        char stand_in[600];
        (void) state;
        if (geteuid() != 0)
                skip();
        if (access(THP, R_OK) != 0) {
                printf("# SKIP the kernel has no %s\n", THP);
                skip();
        }
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                printf("# SKIP no mount namespace here: %s\n", strerror(errno));
                skip();
        }
        snprintf(stand_in, sizeof(stand_in), "%s/thp", dir);
        write_text(stand_in, "always madvise [never]\n");
        assert_int_equal(mount(stand_in, THP, NULL, MS_BIND, NULL), 0);
        fresh_local();
        /* The machine's bound the daemon's threshold, and a rule these seconds of data can
         * meet: its verdict qualifies but for the changes. */
        char dbarg[700];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", farm_db);
        char *set_bound[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg,     "machine", "set",
                              (char *) tu_machine_id(),         "--bound", "50ms",    "--reason",
                              "the test's threshold",           NULL };
        struct tu_result br;
        if (tu_run(set_bound, 20000, NULL, NULL, &br) != 0)
                fail_msg("rtsoak-server machine set: %s", br.err);
        tu_result_done(&br);
        const char *rule[] = { "--set", "Verdict.Period=1s",     "--set", "Verdict.Scenarios=none",
                               "--set", "Verdict.MinSamples=0%", NULL };
        pid_t srv = tu_server_start(farm_db, server_log, "127.0.0.1:0", rule, url, sizeof(url));
        run_with_change(stand_in, "1h", true, "found at a reload");
        run_with_change(stand_in, "1s", false, "found at a periodic check");
        umount(THP);
        snprintf(set_check, sizeof(set_check), "Inventory.Check=5min");
        expect_local_change(1);
        expect_local_change(2);
        expect_all_arrived();
        /* Each run's version 1 and its change reached the farm with their events. */
        assert_int_equal(query(farm_db, "SELECT count(*) FROM events WHERE type = 'inventory'"), 2);
        assert_int_equal(query(farm_db, "SELECT count(*) FROM events WHERE type = "
                                        "'inventory_changed' AND message LIKE "
                                        "'%thp.enabled: never -> always%'"),
                         2);
        assert_int_equal(query(local_db, "SELECT count(*) FROM inventory"), 4);
        expect_farm_inventory();
        tu_server_stop(srv);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_uploads_in_order),
                cmocka_unit_test(test_release_and_cpus_sent),
                cmocka_unit_test(test_server_outage),
                cmocka_unit_test(test_kill9_mid_upload),
                cmocka_unit_test(test_refused_row_does_not_block),
                cmocka_unit_test(test_refused_run_does_not_loop),
                cmocka_unit_test(test_missing_token_is_a_config_error),
                cmocka_unit_test(test_tls),
                cmocka_unit_test(test_inventory_change),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
