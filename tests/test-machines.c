/* SPDX-License-Identifier: MIT */
/* Integration tests of machine settings and maintenance windows: the real rtsoak-server's
 * commands and its staff API on loopback, with uploads of rtsoak-replay showing that a token
 * outlives every change of settings and dies with revocation. */
#include <curl/curl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <unistd.h>

#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "macro.h"
#include "timeutil.h"

#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
#define ID_UNKNOWN "00000000000000000000000000000042"

static char *dir;
static char db_path[512], dbarg[600], log_path[512], base_url[128];
static pid_t server_pid;
static char token_a[80], token_b[80], staff[80];

/* ---- helpers ------------------------------------------------------------------------------ */

/* rtsoak-server --db=DB args... (NULL-terminated): fails unless it exits with want and its
 * stderr holds needle (if given); its stdout is returned (malloc'd). */
static char *cli(int want, const char *needle, ...) {
        char *argv[32] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg };
        int n = 2;
        va_list ap;
        va_start(ap, needle);
        for (const char *a; (a = va_arg(ap, const char *)) && n < 31;)
                argv[n++] = (char *) a;
        va_end(ap);
        argv[n] = NULL;
        struct tu_result r;
        tu_run(argv, 30000, NULL, NULL, &r);
        if (r.status != want || (needle && !strstr(r.err, needle)))
                fail_msg("%s %s %s: expected %d and '%s', got %d: %s", argv[2], argv[3] ?: "",
                         argv[4] ?: "", want, needle ?: "", r.status, r.err);
        char *out = r.out;
        r.out = NULL;
        tu_result_done(&r);
        return out;
}

static long long db_int(const char *sql) {
        sqlite3 *d;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open_v2(db_path, &d, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_busy_timeout(d, 5000);
        if (sqlite3_prepare_v2(d, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(d));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(d);
        return v;
}

/* rtsoak-replay posting the last ten minutes of machine id with token as run run_id: its exit
 * status, and its stderr in err_out (malloc'd) when not NULL. */
static int replay(const char *id, const char *token, const char *run_id, char **err_out) {
        char url[200], tok[100], machine[100], run[64];
        snprintf(url, sizeof(url), "--server=%s", base_url);
        snprintf(tok, sizeof(tok), "--token=%s", token);
        snprintf(machine, sizeof(machine), "--machine=%s", id);
        snprintf(run, sizeof(run), "--run-id=%s", run_id);
        char *argv[] = { (char *) tu_bin("RTSOAK_REPLAY"),
                         url,
                         tok,
                         machine,
                         run,
                         "--from=10min ago",
                         "--to=now",
                         "--rotation=idle 1min",
                         "--quiet",
                         NULL };
        struct tu_result r;
        tu_run(argv, 60000, NULL, NULL, &r);
        int status = r.status;
        if (err_out) {
                *err_out = r.err;
                r.err = NULL;
        }
        tu_result_done(&r);
        return status;
}

static struct tu_reply api(const char *method, const char *path, const char *token,
                           const char *body) {
        char url[512];
        struct tu_reply r;
        snprintf(url, sizeof(url), "%s%s", base_url, path);
        tu_http(method, url, token, body, &r);
        return r;
}

static void expect_api_error(const char *method, const char *path, const char *token,
                             const char *body, long status, const char *needle) {
        struct tu_reply r = api(method, path, token, body);
        const char *e = r.json ? json_string_value(json_object_get(r.json, "error")) : NULL;
        if (r.status != status || !e || !strstr(e, needle))
                fail_msg("%s %s %s: expected %ld '%s', got %ld %s", method, path, body ?: "",
                         status, needle, r.status, r.body);
        tu_reply_done(&r);
}

static long long settings_versions(void) {
        return db_int("SELECT count(*) FROM machine_settings");
}

/* ---- set-up ------------------------------------------------------------------------------- */

static int setup(void **state) {
        (void) state;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        dir = tu_mkdtemp("machines");
        snprintf(db_path, sizeof(db_path), "%s/farm.db", dir);
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db_path);
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        char *out = cli(0, "Enrolled machine " ID_A, "enroll", ID_A, "--bound", "150us", "--groups",
                        "rack-a", "--label", "room=b2", "--by", "alice", "--reason",
                        "new machine in rack A", NULL);
        snprintf(token_a, sizeof(token_a), "%.64s", out);
        free(out);
        tu_server_enroll(db_path, ID_B, "--threshold", "80us", token_b);
        out = cli(0, NULL, "admin-token", "alice", NULL);
        snprintf(staff, sizeof(staff), "%.64s", out);
        free(out);
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", NULL, base_url,
                                     sizeof(base_url));
        return 0;
}

static int teardown(void **state) {
        (void) state;
        if (server_pid > 0)
                tu_server_stop(server_pid);
        tu_rmdir(dir);
        curl_global_cleanup();
        return 0;
}

/* ---- the commands ------------------------------------------------------------------------- */

/* Enrolment made version 1 with what was given; machine set adds versions while the server
 * runs, and the token keeps working through all of them. */
static void test_cli_settings(void **state) {
        (void) state;
        char *out = cli(0, NULL, "machine", "show", ID_A, "--json", NULL);
        json_t *j = tu_json(out), *cur = json_object_get(j, "settings");
        free(out);
        assert_int_equal(tu_jint(cur, "version"), 1);
        assert_int_equal(tu_jint(cur, "bound_ns"), 150000);
        assert_true(json_is_true(json_object_get(cur, "gating")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(cur, "groups"), 0)),
                            "rack-a");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(cur, "labels"), "room")), "b2");
        assert_string_equal(json_string_value(json_object_get(cur, "by")), "alice");
        assert_string_equal(json_string_value(json_object_get(cur, "reason")),
                            "new machine in rack A");
        json_decref(j);
        assert_int_equal(replay(ID_A, token_a, "1", NULL), 0);

        free(cli(0, "settings version 2 in force", "machine", "set", ID_A, "--gating", "no",
                 "--threshold", "300us", "--label", "os=debian 12", "--unlabel", "room", "--reason",
                 "VM with hypervisor stalls", "--by", "bob", NULL));
        free(cli(0, "Nothing changed", "machine", "set", ID_A, "--gating", "no", "--reason",
                 "again", NULL));
        out = cli(0, NULL, "machine", "show", ID_A, NULL);
        if (!strstr(out, "In force (version 2, since ") ||
            !strstr(out, "bound 300us, gating no, groups rack-a, labels os=debian 12") ||
            !strstr(out, "by bob: VM with hypervisor stalls") ||
            !strstr(out, "by alice: new machine in rack A"))
                fail_msg("machine show: %s", out);
        free(out);
        /* The machine's own columns, which the rest of the server reads, follow. */
        char url[256];
        snprintf(url, sizeof(url), "%s/api/v1/machines/" ID_A, base_url);
        j = tu_get_json(url, 200);
        assert_int_equal(tu_jint(j, "threshold_ns"), 300000);
        assert_false(json_is_true(json_object_get(j, "gating")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "groups"), 0)),
                            "rack-a");
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "labels"), "os")),
                            "debian 12");
        assert_null(json_object_get(json_object_get(j, "labels"), "room"));
        json_decref(j);
        /* Same token, new run. */
        assert_int_equal(replay(ID_A, token_a, "2", NULL), 0);
        assert_int_equal(db_int("SELECT count(*) FROM runs WHERE machine_id = '" ID_A "'"), 2);
        assert_true(db_int("SELECT count(*) FROM intervals i JOIN runs r ON i.run = r.id WHERE "
                           "r.machine_id = '" ID_A "' AND r.run_id = 2") >= 9);
        assert_int_equal(db_int("SELECT count(*) FROM audit WHERE action = 'machine_set' AND who "
                                "= 'bob' AND machine_id = '" ID_A "'"),
                         1);
}

static void test_cli_usage_errors(void **state) {
        (void) state;
        long long before = settings_versions(), windows = db_int("SELECT count(*) FROM "
                                                                 "maintenance");
        static const struct {
                const char *args[10];
                int status;
                const char *needle;
        } cases[] = {
                { { "machine", "set", ID_A, "--reason", "x" },
                  64,
                  "needs at least one of --bound" },
                { { "machine", "set", ID_A, "--gating", "no" }, 64, "needs --reason TEXT" },
                { { "machine", "set", ID_A, "--bound", "0", "--reason", "x" },
                  64,
                  "Invalid --bound '0'" },
                { { "machine", "set", ID_A, "--threshold", "2s", "--reason", "x" },
                  64,
                  "Invalid --threshold '2s'" },
                { { "machine", "set", ID_A, "--bound", "fast", "--reason", "x" },
                  64,
                  "Invalid --bound 'fast'" },
                { { "machine", "set", ID_A, "--groups", "Rack", "--reason", "x" },
                  64,
                  "--groups: 'Rack' is not a group name" },
                { { "machine", "set", ID_A, "--label", "nokey", "--reason", "x" },
                  64,
                  "--label: 'nokey': expected KEY=VALUE" },
                { { "machine", "set", ID_A, "--gating", "maybe", "--reason", "x" },
                  64,
                  "Invalid --gating 'maybe'" },
                { { "machine", "set", ID_A, "--gating", "yes", "--reason", "x", "--by", "a b" },
                  64,
                  "--by: 'a b' is not a name" },
                { { "machine", "set", ID_A, "--gating", "yes", "--reason", "" },
                  64,
                  "--reason: required" },
                { { "machine", "set", ID_A, "--gating", "yes", "--reason", "x", "--from", "+1h" },
                  64,
                  "--from is not an option of machine set" },
                { { "machine", "set", ID_UNKNOWN, "--gating", "yes", "--reason", "x" },
                  1,
                  "no machine " ID_UNKNOWN " is enrolled" },
                { { "machine", "set", "ABC", "--gating", "yes", "--reason", "x" },
                  64,
                  "Invalid machine id 'ABC'" },
                { { "machine", "show" }, 64, "machine show takes MACHINE_ID" },
                { { "machine", "show", ID_A, ID_B }, 64, "machine show takes MACHINE_ID" },
                { { "machine" }, 64, "machine needs a subcommand: set or show" },
                { { "machine", "delete", ID_A }, 64, "machine needs a subcommand" },
                { { "maintenance", "add", ID_A, "--from", "+1h", "--to", "+2h" },
                  64,
                  "maintenance add needs --reason TEXT" },
                { { "maintenance", "add", ID_A, "--to", "+2h", "--reason", "x" },
                  64,
                  "maintenance add needs --from TIME" },
                { { "maintenance", "add", ID_A, "--from", "2h ago", "--to", "+2h", "--reason",
                    "x" },
                  64,
                  "--from: " },
                { { "maintenance", "add", ID_A, "--from", "+1h", "--to", "+33d", "--reason", "x" },
                  64,
                  "--to: the window would last" },
                { { "maintenance", "add", ID_A, "--from", "soon", "--to", "+2h", "--reason", "x" },
                  64,
                  "Invalid --from 'soon'" },
                { { "maintenance", "add", ID_UNKNOWN, "--from", "+1h", "--to", "+2h", "--reason",
                    "x" },
                  1,
                  "no machine " ID_UNKNOWN },
                { { "maintenance", "cancel", "999", "--reason", "x" },
                  1,
                  "no maintenance window 999" },
                { { "maintenance", "cancel", "abc", "--reason", "x" }, 64, "Invalid window id" },
                { { "maintenance", "cancel", "1" }, 64, "maintenance cancel needs --reason" },
                { { "maintenance", "list", ID_A, "--reason", "x" },
                  64,
                  "--reason is not an option of maintenance list" },
                { { "enroll", ID_B, "--unlabel", "x" },
                  64,
                  "--unlabel is not an option of enroll" },
                { { "revoke", ID_B, "--json" }, 64, "--json is not an option of revoke" },
                { { "revoke", ID_B, "--reason", "a\tb" },
                  64,
                  "--reason: a control character U+0009" },
                { { "frobnicate" }, 64, "Unknown command 'frobnicate'" },
                { { "waive", "k", "p" }, 64, "waive needs --reason TEXT" },
                { { "verdict", "k", "--at", "never" }, 64, "Invalid --at=never" },
                { { "--gating", "yes" }, 64, "--gating belongs to a command, not to serving" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *const *a = cases[i].args;
                free(cli(cases[i].status, cases[i].needle, a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                         a[7], a[8], a[9], NULL));
        }
        /* Nothing of it was stored. */
        assert_int_equal(settings_versions(), before);
        assert_int_equal(db_int("SELECT count(*) FROM maintenance"), windows);
}

/* rtsoak-server --db=... ARGS run by /bin/sh with its standard output redirected (">FILE", or
 * through "script" for a terminal): what the shell saw on standard error and output. */
static char *shell_cli(const char *redirect, const char *const args[]) {
        char cmd[2048];
        int o = snprintf(cmd, sizeof(cmd), "'%s' '%s'", tu_bin("RTSOAK_SERVER"), dbarg);
        for (size_t i = 0; args[i]; i++)
                o += snprintf(cmd + o, sizeof(cmd) - (size_t) o, " '%s'", args[i]);
        snprintf(cmd + o, sizeof(cmd) - (size_t) o, " %s", redirect);
        char *argv[] = { "/bin/sh", "-c", cmd, NULL };
        struct tu_result r;
        tu_run(argv, 30000, NULL, NULL, &r);
        if (r.status != 0)
                fail_msg("%s: exit %d: %s", cmd, r.status, r.err);
        char *text = NULL;
        assert_true(asprintf(&text, "%s%s", r.err, r.out) > 0);
        tu_result_done(&r);
        return text;
}

/* The commands that print a token once say where it went: into the file the administrator
 * redirected it to (the README's enrolment), down a pipe, or above on a terminal. */
static void test_token_destination(void **state) {
        (void) state;
        static const char *const cmds[][3] = { { "enroll", "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0",
                                                 NULL },
                                               { "admin-token", "bob", NULL },
                                               { "read-token", "carol", NULL } };
        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
                char file[600], redirect[640], want[700];
                snprintf(file, sizeof(file), "%s/%s.token", dir, cmds[i][0]);
                snprintf(redirect, sizeof(redirect), ">'%s'", file);
                char *err = shell_cli(redirect, cmds[i]);
                snprintf(want, sizeof(want), "; the token in %s is shown only this once", file);
                if (!strstr(err, want) || strstr(err, "above"))
                        fail_msg("%s >FILE: %s", cmds[i][0], err);
                free(err);
                char *token = tu_read_file(file);
                assert_int_equal(strlen(token), 65);
                free(token);

                err = shell_cli("| cat >/dev/null", cmds[i]);
                if (!strstr(err, "; the token on standard output is shown only this once"))
                        fail_msg("%s | cat: %s", cmds[i][0], err);
                free(err);
        }
        /* On a terminal (script gives the command one). */
        if (system("command -v script >/dev/null") != 0) {
                print_message("# no script(1) (util-linux): the terminal case is not run\n");
                return;
        }
        char inner[1400];
        snprintf(inner, sizeof(inner), "script -qec \"'%s' '%s' read-token dave\" /dev/null",
                 tu_bin("RTSOAK_SERVER"), dbarg);
        char *argv[] = { "/bin/sh", "-c", inner, NULL };
        struct tu_result r;
        tu_run(argv, 30000, NULL, NULL, &r);
        if (r.status != 0 || !strstr(r.out, "; the token above is shown only this once"))
                fail_msg("on a terminal: exit %d: %s %s", r.status, r.out, r.err);
        tu_result_done(&r);
}

/* Revocation stops the token at once (the server is running); re-enrolment gives a new one,
 * the old one stays dead; the history keeps every step. */
static void test_revoke_and_rekey(void **state) {
        (void) state;
        char *err = NULL;
        assert_int_equal(replay(ID_B, token_b, "1", NULL), 0);
        free(cli(0, "Revoked machine " ID_B, "revoke", ID_B, "--reason", "sold", "--by", "carol",
                 NULL));
        assert_int_equal(replay(ID_B, token_b, "2", &err), 1);
        if (!strstr(err, "401"))
                fail_msg("a revoked token uploaded: %s", err);
        free(err);
        free(cli(0, "was revoked already", "revoke", ID_B, NULL));

        char *out = cli(0, "Re-keyed machine " ID_B, "enroll", ID_B, NULL), token[80];
        snprintf(token, sizeof(token), "%.64s", out);
        free(out);
        assert_string_not_equal(token, token_b);
        assert_int_equal(replay(ID_B, token_b, "3", NULL), 1);
        assert_int_equal(replay(ID_B, token, "3", NULL), 0);

        out = cli(0, NULL, "machine", "show", ID_B, "--json", NULL);
        json_t *j = tu_json(out), *h = json_object_get(j, "history");
        free(out);
        assert_int_equal(json_array_size(h), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(h, 0), "reason")),
                            "re-enrolled");
        assert_true(json_is_true(json_object_get(json_array_get(h, 1), "revoked")));
        assert_string_equal(json_string_value(json_object_get(json_array_get(h, 1), "by")),
                            "carol");
        assert_int_equal(tu_jint(json_array_get(h, 2), "bound_ns"), 80000); /* --threshold */
        json_decref(j);
        assert_int_equal(db_int("SELECT count(*) FROM audit WHERE machine_id = '" ID_B "' AND "
                                "action IN ('machine_enroll', 'machine_revoke', "
                                "'machine_rekey', 'machine_set')"),
                         4);
        snprintf(token_b, sizeof(token_b), "%s", token);
}

/* ---- the staff API ------------------------------------------------------------------------ */

static void test_api_settings(void **state) {
        (void) state;
        const char *path = "/api/v1/machines/" ID_A "/settings";
        long long before = settings_versions();
        expect_api_error("POST", path, NULL, "{\"gating\":true,\"reason\":\"x\"}", 401,
                         "staff token");
        expect_api_error("POST", path, token_a, "{\"gating\":true,\"reason\":\"x\"}", 401,
                         "staff token");
        expect_api_error("POST", path, staff, "{\"gating\":true}", 400, "reason: missing");
        expect_api_error("POST", path, staff, "{\"gating\":true,\"reason\":\"x\",\"colour\":1}",
                         400, "colour: unknown field");
        expect_api_error("POST", path, staff, "{\"gating\":true,\"reason\":\"x\"", 400,
                         "body.reason: not JSON");
        expect_api_error("POST", path, staff, "[1]", 400, "body: expected a JSON object");
        expect_api_error("POST", path, staff, "{\"gating\":true,\"gating\":false,\"reason\":\"x\"}",
                         400, "body.gating: not JSON: duplicate object key");
        expect_api_error("POST", path, staff, "{\"bound_ns\":2000000000,\"reason\":\"x\"}", 400,
                         "at most 1s");
        expect_api_error("POST", "/api/v1/machines/" ID_UNKNOWN "/settings", staff,
                         "{\"gating\":true,\"reason\":\"x\"}", 404, "no such machine");
        expect_api_error("POST", "/api/v1/machines/xyz/settings", staff,
                         "{\"gating\":true,\"reason\":\"x\"}", 404, "no such machine");
        expect_api_error("PUT", path, staff, "{}", 405, "method not allowed");
        expect_api_error("GET", "/api/v1/machines/" ID_A "/settings?colour=1", NULL, NULL, 400,
                         "colour: unknown parameter");
        assert_int_equal(settings_versions(), before);

        struct tu_reply r = api("POST", path, staff,
                                "{\"bound_ns\":120000,\"gating\":true,\"groups\":[\"rack-a\","
                                "\"6.6-rt\"],\"labels\":{\"os\":null,\"room\":\"c1\"},"
                                "\"reason\":\"back to bare metal\"}");
        if (r.status != 201)
                fail_msg("settings: %ld %s", r.status, r.body);
        assert_string_equal(json_string_value(json_object_get(r.json, "status")), "changed");
        json_t *s = json_object_get(r.json, "settings");
        assert_int_equal(tu_jint(s, "bound_ns"), 120000);
        assert_string_equal(json_string_value(json_object_get(s, "by")), "alice");
        assert_int_equal(json_array_size(json_object_get(s, "groups")), 2);
        assert_null(json_object_get(json_object_get(s, "labels"), "os"));
        long long version = tu_jint(r.json, "version");
        tu_reply_done(&r);
        r = api("POST", path, staff, "{\"gating\":true,\"reason\":\"retry\"}");
        assert_int_equal(r.status, 200);
        assert_string_equal(json_string_value(json_object_get(r.json, "status")), "unchanged");
        assert_int_equal(tu_jint(r.json, "version"), version);
        tu_reply_done(&r);
        assert_int_equal(settings_versions(), before + 1);
        assert_int_equal(db_int("SELECT count(*) FROM audit WHERE action = 'machine_set' AND "
                                "who = 'alice' AND detail LIKE '%back to bare metal'"),
                         1);

        /* The history, a page at a time, newest first. */
        char url[300];
        snprintf(url, sizeof(url), "%s%s?limit=1", base_url, path);
        json_t *j = tu_get_json(url, 200);
        assert_int_equal(tu_jint(j, "total"), version);
        assert_int_equal(tu_jint(json_array_get(json_object_get(j, "history"), 0), "version"),
                         version);
        const char *next = json_string_value(json_object_get(j, "next"));
        assert_non_null(next);
        snprintf(url, sizeof(url), "%s%s", base_url, next);
        json_decref(j);
        j = tu_get_json(url, 200);
        assert_int_equal(tu_jint(json_array_get(json_object_get(j, "history"), 0), "version"),
                         version - 1);
        json_decref(j);
        snprintf(url, sizeof(url), "%s/api/v1/machines/" ID_UNKNOWN "/settings", base_url);
        json_decref(tu_get_json(url, 404));

        /* The token survived. */
        assert_int_equal(replay(ID_A, token_a, "3", NULL), 0);
}

static void test_api_maintenance(void **state) {
        (void) state;
        char body[512], from[TIMESTAMP_MAX_LEN], to[TIMESTAMP_MAX_LEN], path[256];
        int64_t now = now_ns(CLOCK_REALTIME);
        const char *add = "/api/v1/machines/" ID_A "/maintenance";
        format_timestamp_utc(from, now + 3600 * INT64_C(1000000000));
        format_timestamp_utc(to, now + 4 * 3600 * INT64_C(1000000000));

        snprintf(body, sizeof(body), "{\"from\":\"%s\",\"to\":\"%s\",\"reason\":\"x\"}", from, to);
        expect_api_error("POST", add, NULL, body, 401, "staff token");
        snprintf(body, sizeof(body), "{\"from\":%lld,\"to\":\"%s\",\"reason\":\"x\"}",
                 (long long) (now - 2 * 3600 * INT64_C(1000000000)), to);
        expect_api_error("POST", add, staff, body, 400, "from: ");
        expect_api_error("POST", add, staff, body, 400, "waive its gap problem");
        snprintf(body, sizeof(body), "{\"from\":\"%s\",\"to\":\"%s\",\"reason\":\"x\"}", to, from);
        expect_api_error("POST", add, staff, body, 400, "is not after from");
        snprintf(body, sizeof(body), "{\"from\":\"%s\",\"to\":\"%s\"}", from, to);
        expect_api_error("POST", add, staff, body, 400, "reason: required");
        snprintf(body, sizeof(body), "{\"from\":\"tomorrow\",\"to\":\"%s\",\"reason\":\"x\"}", to);
        expect_api_error("POST", add, staff, body, 400, "from: expected RFC 3339");

        snprintf(body, sizeof(body), "{\"from\":\"%s\",\"to\":\"%s\",\"reason\":\"rack move\"}",
                 from, to);
        struct tu_reply r = api("POST", add, staff, body);
        if (r.status != 201)
                fail_msg("maintenance: %ld %s", r.status, r.body);
        long long id = tu_jint(r.json, "id");
        assert_string_equal(json_string_value(json_object_get(r.json, "state")), "scheduled");
        assert_string_equal(json_string_value(json_object_get(r.json, "by")), "alice");
        assert_string_equal(json_string_value(json_object_get(r.json, "machine")), ID_A);
        tu_reply_done(&r);
        /* A second one, from the command line, while the server runs. */
        free(cli(0, "Maintenance window", "maintenance", "add", ID_A, "--from", "now", "--to",
                 "+30min", "--reason", "kernel swap", "--by", "bob", NULL));

        char url[400];
        snprintf(url, sizeof(url), "%s/api/v1/maintenance?machine=" ID_A "&limit=1", base_url);
        json_t *j = tu_get_json(url, 200);
        assert_int_equal(tu_jint(j, "total"), 2);
        assert_int_equal(tu_jint(json_array_get(json_object_get(j, "windows"), 0), "id"), id);
        assert_string_equal(json_string_value(json_object_get(j, "next")),
                            "/api/v1/maintenance?machine=" ID_A "&limit=1&offset=1");
        json_decref(j);
        snprintf(url, sizeof(url), "%s/api/v1/machines/" ID_A "/maintenance", base_url);
        j = tu_get_json(url, 200);
        assert_int_equal(tu_jint(j, "total"), 2);
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(j, "windows"), 1), "state")),
                            "active");
        json_decref(j);
        expect_api_error("GET", "/api/v1/maintenance?machine=zzz", NULL, NULL, 400,
                         "machine: not a machine id");
        expect_api_error("GET", "/api/v1/maintenance?state=active", NULL, NULL, 400,
                         "state: unknown parameter");
        expect_api_error("POST", "/api/v1/maintenance", staff, "{}", 405, "method not allowed");

        snprintf(path, sizeof(path), "/api/v1/maintenance/%lld/cancel", id);
        expect_api_error("POST", path, staff, "{}", 400, "reason: required");
        expect_api_error("POST", path, staff, "{\"reason\":\"x\",\"when\":1}", 400,
                         "when: unknown field");
        expect_api_error("GET", path, NULL, NULL, 405, "method not allowed");
        expect_api_error("POST", "/api/v1/maintenance/424242/cancel", staff, "{\"reason\":\"x\"}",
                         404, "no such maintenance window");
        expect_api_error("POST", "/api/v1/maintenance/x/cancel", staff, "{\"reason\":\"x\"}", 404,
                         "no such maintenance window");
        r = api("POST", path, staff, "{\"reason\":\"moved to next week\"}");
        assert_int_equal(r.status, 200);
        assert_string_equal(json_string_value(json_object_get(r.json, "state")), "cancelled");
        assert_string_equal(json_string_value(json_object_get(r.json, "cancelled_by")), "alice");
        tu_reply_done(&r);
        expect_api_error("POST", path, staff, "{\"reason\":\"again\"}", 409, "cancelled already");

        /* The command line sees the same. */
        char *out = cli(0, NULL, "maintenance", "list", ID_A, NULL);
        if (!strstr(out, "cancelled  alice: rack move") || !strstr(out, "active     bob: kernel "
                                                                        "swap"))
                fail_msg("maintenance list: %s", out);
        free(out);
        assert_int_equal(db_int("SELECT count(*) FROM audit WHERE machine_id = '" ID_A "' AND "
                                "action LIKE 'maintenance_%'"),
                         3);
        /* The audit trail over the API names the machine of each of these. */
        snprintf(url, sizeof(url), "%s/api/v1/audit?limit=1", base_url);
        json_decref(tu_get_json(url, 401)); /* it names staff: only staff read it */
        struct tu_reply ar;
        tu_http("GET", url, staff, NULL, &ar);
        assert_int_equal(ar.status, 200);
        j = json_incref(ar.json);
        tu_reply_done(&ar);
        json_t *last = json_array_get(json_object_get(j, "audit"), 0);
        assert_string_equal(json_string_value(json_object_get(last, "action")),
                            "maintenance_cancel");
        assert_string_equal(json_string_value(json_object_get(last, "machine")), ID_A);
        assert_string_equal(json_string_value(json_object_get(last, "who")), "alice");
        json_decref(j);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cli_settings),     cmocka_unit_test(test_cli_usage_errors),
                cmocka_unit_test(test_revoke_and_rekey), cmocka_unit_test(test_token_destination),
                cmocka_unit_test(test_api_settings),     cmocka_unit_test(test_api_maintenance),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
