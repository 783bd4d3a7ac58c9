/* SPDX-License-Identifier: MIT */
/* The "latest stable" verdict through the real HTTP API: days-long farm histories posted to
 * the real rtsoak-server with rtsoak-replay (10-minute intervals, two gating machines and one
 * that does not gate), then judged under a rule of 3 days (15-minute gaps, every built-in
 * scenario for 8 hours, generators down at most 10 minutes); the hostile cases are in
 * test-verdict-hostile.py. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "test-farmdb.h"

#define ID_A "a0000000000000000000000000000001"
#define ID_B "b0000000000000000000000000000002"
#define ID_C "c0000000000000000000000000000003"
#define SEC INT64_C(1000000000)
#define MINUTE (60 * SEC)
#define HOUR (60 * MINUTE)
#define DAY (24 * HOUR)
/* The fixed histories end here: a UTC midnight, so that the built-in rotation (six scenarios
 * of an hour, aligned to the epoch) starts over with idle. */
#define T_END (INT64_C(1793491200) * SEC)

/* Each test's history ends 15 days before the previous one's: a machine runs one kernel at a
 * time, and two histories of one machine at the same time are a problem of their own. */
static int64_t t_end(int test) {
        return T_END - test * 15 * DAY;
}

static char *dir;
static char db_path[512], log_path[512], base_url[128], config_path[512];
static pid_t server_pid;
static char token_a[80], token_b[80], token_c[80], admin_token[80];
static int next_run[3] = { 1, 1, 1 };

static void ns_arg(char buf[static 32], int64_t ns) {
        snprintf(buf, 32, "%lld", (long long) ns);
}

/* Posts a history of machine m (0: A, 1: B, 2: C) of release, ending at end_ns, with extra
 * replay options (NULL-terminated). */
static void history_run(int m, const char *release, int64_t days, int64_t end_ns, int run_id,
                        const char *const *extra) {
        static const char *const ids[] = { ID_A, ID_B, ID_C };
        const char *tokens[] = { token_a, token_b, token_c };
        char to[32], runid[16], ndays[16], *argv[48];
        size_t n = 0;
        struct tu_result r;

        ns_arg(to, end_ns);
        snprintf(runid, sizeof(runid), "%d", run_id);
        snprintf(ndays, sizeof(ndays), "%lld", (long long) days);
        const char *const base[] = { tu_bin("RTSOAK_REPLAY"),
                                     "--server",
                                     base_url,
                                     "--machine",
                                     ids[m],
                                     "--token",
                                     tokens[m],
                                     "--kernel",
                                     release,
                                     "--to",
                                     to,
                                     "--days",
                                     ndays,
                                     "--interval",
                                     "10min",
                                     "--batch",
                                     "500",
                                     "--cpus",
                                     "2",
                                     "--run-id",
                                     runid,
                                     "--quiet" };
        for (size_t i = 0; i < ELEMENTSOF(base); i++)
                argv[n++] = (char *) base[i];
        for (; extra && *extra; extra++) {
                assert_true(n < ELEMENTSOF(argv) - 1);
                argv[n++] = (char *) *extra;
        }
        argv[n] = NULL;
        tu_run(argv, 120000, NULL, NULL, &r);
        if (r.status != 0)
                fail_msg("rtsoak-replay %s for %s: status %d: %s", release, ids[m], r.status,
                         r.err);
        tu_result_done(&r);
}

/* A history in a run of its own (with room for the runs that --unclean and --restart add). */
static void history(int m, const char *release, int64_t days, int64_t end_ns,
                    const char *const *extra) {
        history_run(m, release, days, end_ns, next_run[m], extra);
        next_run[m] += 10;
}

static json_t *verdict_at(const char *release, int64_t at_ns) {
        char url[512];
        if (at_ns)
                snprintf(url, sizeof(url), "%s/api/v1/kernels/%s/verdict?at=%lld", base_url,
                         release, (long long) at_ns);
        else
                snprintf(url, sizeof(url), "%s/api/v1/kernels/%s/verdict", base_url, release);
        return tu_get_json(url, 200);
}

static const char *status_of(json_t *v) {
        return json_string_value(json_object_get(v, "verdict"));
}

static json_t *problem(json_t *v, size_t i) {
        return json_array_get(json_object_get(v, "problems"), i);
}

static const char *str(json_t *o, const char *key) {
        const char *s = json_string_value(json_object_get(o, key));
        if (!s)
                fail_msg("no string \"%s\" in %s", key, json_dumps(o, JSON_COMPACT));
        return s;
}

static json_t *machine_of(json_t *v, const char *id) {
        json_t *m;
        size_t i;
        json_array_foreach (json_object_get(v, "machines"), i, m)
                if (strcmp(str(m, "id"), id) == 0)
                        return m;
        fail_msg("machine %s not in the verdict", id);
        return NULL;
}

static void expect_status(json_t *v, const char *want) {
        if (strcmp(status_of(v), want) != 0)
                fail_msg("expected %s, got %s: %s", want, status_of(v),
                         json_dumps(json_object_get(v, "reasons"), JSON_COMPACT));
}

static int setup(void **state) {
        struct tu_result r;
        dir = tu_mkdtemp("verdict");
        tu_farm_target(dir, "farm", db_path, sizeof(db_path));
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        tu_server_enroll(db_path, ID_A, NULL, NULL, token_a);
        tu_server_enroll(db_path, ID_B, NULL, NULL, token_b);
        tu_server_enroll(db_path, ID_C, "--gating", "no", token_c);
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db_path);
        char *cmd[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "admin-token", "alice", NULL };
        tu_run(cmd, 20000, NULL, NULL, &r);
        assert_int_equal(r.status, 0);
        snprintf(admin_token, sizeof(admin_token), "%.*s", (int) strcspn(r.out, "\n"), r.out);
        assert_int_equal(strlen(admin_token), 64);
        tu_result_done(&r);
        /* The rule, shortened: 3 days, every built-in scenario for 8 hours. */
        snprintf(config_path, sizeof(config_path), "%s/server.conf", dir);
        FILE *cf = fopen(config_path, "w");
        assert_non_null(cf);
        fputs("[Verdict]\nPeriod=3d\nScenarios=idle 8h, cpu 8h, io 8h, net 8h, "
              "hackbench 8h, mixed 8h\nWatch=1s\n",
              cf);
        assert_int_equal(fclose(cf), 0);
        /* Days of history arrive in seconds: the per-machine rate limit is lifted. */
        static const char *extra[] = { "--rate",   "1000000", "--burst", "1000000",
                                       "--config", NULL,      NULL };
        extra[5] = config_path;
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", extra, base_url,
                                     sizeof(base_url));
        return 0;
}

static int teardown(void **state) {
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                tu_wait(server_pid, 10000);
        }
        tu_farm_drop(db_path);
        tu_rmdir(dir);
        return 0;
}

/* 4 clean days on both gating machines: qualified; and once they fall silent, failed. */
static void test_qualified_and_silence(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(0);
        history(0, "k-clean", 4, T, NULL);
        history(1, "k-clean", 4, T, NULL);
        json_t *v = verdict_at("k-clean", T + MINUTE);
        expect_status(v, "qualified");
        assert_int_equal(json_array_size(json_object_get(v, "problems")), 0);
        assert_int_equal(json_array_size(json_object_get(v, "missing")), 0);
        assert_int_equal(tu_jint(v, "gating_machines"), 2);
        json_t *m = json_array_get(json_object_get(v, "machines"), 0);
        assert_int_equal(tu_jint(m, "covered_ns"), 4 * DAY);
        assert_string_equal(str(m, "status"), "complete");
        /* Without a problem, all of it is clean. */
        assert_int_equal(tu_jint(m, "clean_ns"), 4 * DAY);
        assert_true(json_is_null(json_object_get(m, "last_problem_ns")));
        json_decref(v);

        /* 20 minutes later nothing more came: both machines are silent. */
        v = verdict_at("k-clean", T + 20 * MINUTE);
        expect_status(v, "failed");
        assert_int_equal(tu_jint(v, "problems_total"), 2);
        json_t *p = problem(v, 0);
        assert_string_equal(str(p, "kind"), "gap");
        assert_true(json_is_true(json_object_get(p, "ongoing")));
        assert_int_equal(tu_jint(p, "time_ns"), T);
        assert_int_equal(tu_jint(p, "value_ns"), 20 * MINUTE);
        assert_non_null(strstr(str(p, "message"), "silent since"));
        json_decref(v);
}

/* 2 days on one of them: pending, with what is missing. */
static void test_pending_coverage(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(1);
        history(0, "k-short", 4, T, NULL);
        history(1, "k-short", 2, T, NULL);
        json_t *v = verdict_at("k-short", T + MINUTE);
        expect_status(v, "pending");
        json_t *missing = json_object_get(v, "missing");
        assert_int_equal(json_array_size(missing), 1);
        json_t *mi = json_array_get(missing, 0);
        assert_string_equal(str(mi, "machine"), ID_B);
        assert_string_equal(str(mi, "what"), "coverage");
        assert_int_equal(tu_jint(mi, "covered_ns"), 2 * DAY);
        assert_int_equal(tu_jint(mi, "missing_ns"), DAY);
        assert_non_null(strstr(json_string_value(json_array_get(json_object_get(v, "reasons"), 0)),
                               "1d still missing"));
        json_decref(v);
}

/* One interval over the bound on one CPU: failed, naming it; asked about a moment before it,
 * the verdict is the one of that moment. */
static void test_violation_and_at(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(2);
        char spike[96], when[32];
        ns_arg(when, T - 12 * HOUR + 5 * MINUTE);
        /* With a trace capture that names the thread that ran instead of the probe. */
        snprintf(spike, sizeof(spike), "%s,1,500us,kworker/1:2", when);
        const char *const extra[] = { "--spike", spike, NULL };
        history(0, "k-spike", 4, T, extra);
        history(1, "k-spike", 4, T, NULL);

        json_t *v = verdict_at("k-spike", T + MINUTE);
        expect_status(v, "failed");
        assert_int_equal(tu_jint(v, "problems_total"), 1);
        json_t *p = problem(v, 0);
        assert_string_equal(str(p, "kind"), "violation");
        assert_string_equal(str(p, "machine"), ID_A);
        assert_int_equal(tu_jint(p, "cpu"), 1);
        assert_int_equal(tu_jint(p, "value_ns"), 500000);
        assert_int_equal(tu_jint(p, "threshold_ns"), 100000);
        assert_int_equal(tu_jint(p, "time_ns"), T - 12 * HOUR + 5 * MINUTE);
        json_t *iv = json_object_get(p, "interval");
        assert_int_equal(tu_jint(iv, "start_ns"), T - 12 * HOUR);
        assert_int_equal(tu_jint(iv, "length_ns"), 10 * MINUTE);
        /* 12:00 UTC: hour 12 of the six-hour rotation is idle. */
        assert_string_equal(str(p, "scenario"), "idle");
        assert_non_null(strstr(str(p, "message"), "CPU 1"));
        /* The problem says what the machine's flight recorder found, with the capture. */
        assert_string_equal(
                str(p, "culprit"),
                "thread kworker/1:2 (pid 4242, SCHED_FIFO 50) ran 475 µs of the 500 µs");
        assert_true(tu_jint(p, "trace") > 0);
        /* Clean coverage starts again after the spike's interval; the other machine's is all
         * of its coverage. */
        json_t *ma = machine_of(v, ID_A), *mb = machine_of(v, ID_B);
        assert_int_equal(tu_jint(ma, "last_problem_ns"), T - 12 * HOUR + 10 * MINUTE);
        assert_int_equal(tu_jint(ma, "clean_ns"), 12 * HOUR - 10 * MINUTE);
        assert_int_equal(tu_jint(mb, "clean_ns"), 4 * DAY);
        json_decref(v);
        /* Nine days later (history to T + 9 d): the streak spans rollup days. */
        history(0, "k-spike", 9, T + 9 * DAY, NULL);
        v = verdict_at("k-spike", T + 9 * DAY + MINUTE);
        ma = machine_of(v, ID_A);
        assert_int_equal(tu_jint(ma, "clean_ns"), 9 * DAY + 12 * HOUR - 10 * MINUTE);
        json_decref(v);

        /* Before the spike (and with 3.5 days covered), it qualified. */
        v = verdict_at("k-spike", T - 13 * HOUR);
        expect_status(v, "qualified");
        json_decref(v);
        /* Before 3 days were covered, it was pending. */
        v = verdict_at("k-spike", T - 2 * DAY);
        expect_status(v, "pending");
        json_decref(v);
}

/* A run that did not end cleanly: failed, with the run and its last interval. */
static void test_unclean_end(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(3);
        char when[32];
        ns_arg(when, T - 2 * DAY);
        const char *const extra[] = { "--unclean", when, NULL };
        int run = next_run[0];
        /* B has not run it: pending for B, but a problem fails the release anyway. */
        history(0, "k-crash", 4, T, extra);
        json_t *v = verdict_at("k-crash", T + MINUTE);
        expect_status(v, "failed");
        assert_int_equal(tu_jint(v, "problems_total"), 1);
        json_t *p = problem(v, 0);
        assert_string_equal(str(p, "kind"), "unclean_end");
        assert_string_equal(str(p, "machine"), ID_A);
        assert_int_equal(tu_jint(p, "run"), run);
        assert_true(tu_jint(p, "time_ns") <= T - 2 * DAY);
        assert_true(tu_jint(p, "time_ns") > T - 2 * DAY - 20 * MINUTE);
        assert_true(json_is_object(json_object_get(p, "interval")));
        json_decref(v);
}

/* A 20-minute silence fails; a 10-minute one (under the allowed 15) does not. */
static void test_gap(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(4);
        char a[64], b[64];
        char f1[32], t1[32], f2[32], t2[32];
        ns_arg(f1, T - 2 * DAY);
        ns_arg(t1, T - 2 * DAY + 20 * MINUTE);
        ns_arg(f2, T - 1 * DAY);
        ns_arg(t2, T - 1 * DAY + 10 * MINUTE);
        snprintf(a, sizeof(a), "%s,%s", f1, t1);
        snprintf(b, sizeof(b), "%s,%s", f2, t2);
        const char *const ea[] = { "--gap", a, NULL }, *const eb[] = { "--gap", b, NULL };
        history(0, "k-gap", 4, T, ea);
        history(1, "k-gap", 3, T, eb);
        json_t *v = verdict_at("k-gap", T + MINUTE);
        expect_status(v, "failed");
        assert_int_equal(tu_jint(v, "problems_total"), 1);
        json_t *p = problem(v, 0);
        assert_string_equal(str(p, "kind"), "gap");
        assert_string_equal(str(p, "machine"), ID_A);
        assert_int_equal(tu_jint(p, "time_ns"), T - 2 * DAY);
        assert_int_equal(tu_jint(p, "end_ns"), T - 2 * DAY + 20 * MINUTE);
        assert_int_equal(tu_jint(p, "value_ns"), 20 * MINUTE);
        assert_false(json_is_true(json_object_get(p, "ongoing")));
        json_decref(v);
}

/* A required scenario never run: pending, naming it for each machine. */
static void test_missing_scenario(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(5);
        const char *const extra[] = { "--rotation",
                                      "idle 1h, cpu 1h, io 1h, hackbench 1h, mixed 1h", NULL };
        history(0, "k-nonet", 4, T, extra);
        history(1, "k-nonet", 4, T, extra);
        json_t *v = verdict_at("k-nonet", T + MINUTE);
        expect_status(v, "pending");
        json_t *missing = json_object_get(v, "missing");
        assert_int_equal(json_array_size(missing), 2);
        for (size_t i = 0; i < 2; i++) {
                json_t *mi = json_array_get(missing, i);
                assert_string_equal(str(mi, "what"), "scenario");
                assert_string_equal(str(mi, "scenario"), "net");
                assert_int_equal(tu_jint(mi, "covered_ns"), 0);
                assert_non_null(strstr(str(mi, "message"), "net never ran"));
        }
        json_decref(v);
}

/* A gating machine that never ran the release: pending, naming it; a machine outside the
 * gating set is listed, not judged. */
static void test_not_run(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(6);
        history(0, "k-lonely", 4, T, NULL);
        history(2, "k-lonely", 3, T, NULL);
        /* B, enrolled after T, gates at T only with data of that time (docs/verdict.md,
         * invariant 4): a day of another kernel before. */
        history(1, "k-before", 1, T - 5 * DAY, NULL);
        json_t *v = verdict_at("k-lonely", T + MINUTE);
        expect_status(v, "pending");
        json_t *missing = json_object_get(v, "missing");
        assert_int_equal(json_array_size(missing), 1);
        assert_string_equal(str(json_array_get(missing, 0), "what"), "not_run");
        assert_string_equal(str(json_array_get(missing, 0), "machine"), ID_B);
        json_t *others = json_object_get(v, "other_machines");
        assert_int_equal(json_array_size(others), 1);
        assert_string_equal(str(json_array_get(others, 0), "id"), ID_C);
        assert_int_equal(tu_jint(v, "machines_ran"), 1);
        json_decref(v);
}

/* A generator down for 30 minutes fails; one down for 5 minutes does not. */
static void test_load_down(void **state) {
        /* Its own stretch of time: one machine runs one kernel at a time. */
        const int64_t T = t_end(7);
        char a[96], b[96], w1[32], w2[32];
        /* Hour 1 of a UTC day is the cpu scenario of the built-in rotation. */
        ns_arg(w1, T - 2 * DAY + HOUR);
        ns_arg(w2, T - 1 * DAY + HOUR);
        snprintf(a, sizeof(a), "%s,30min,cpu", w1);
        snprintf(b, sizeof(b), "%s,5min,cpu", w2);
        const char *const ea[] = { "--load-down", a, NULL }, *const eb[] = { "--load-down", b,
                                                                             NULL };
        history(0, "k-load", 4, T, ea);
        history(1, "k-load", 3, T, eb);
        json_t *v = verdict_at("k-load", T + MINUTE);
        expect_status(v, "failed");
        assert_int_equal(tu_jint(v, "problems_total"), 1);
        json_t *p = problem(v, 0);
        assert_string_equal(str(p, "kind"), "load_down");
        assert_string_equal(str(p, "machine"), ID_A);
        assert_string_equal(str(p, "generator"), "cpu");
        assert_string_equal(str(p, "scenario"), "cpu");
        assert_int_equal(tu_jint(p, "value_ns"), 30 * MINUTE);
        assert_int_equal(tu_jint(p, "time_ns"), T - 2 * DAY + HOUR);
        json_decref(v);
}

static void post_admin(const char *path, const char *token, const char *body, long want,
                       struct tu_reply *ret) {
        char url[512];
        snprintf(url, sizeof(url), "%s%s", base_url, path);
        tu_http("POST", url, token, body, ret);
        if (ret->status != want)
                fail_msg("POST %s: expected %ld, got %ld: %s", path, want, ret->status, ret->body);
}

/* A waived violation qualifies, with the waiver listed; the audit trail keeps who and when, and
 * the verdict before the waiver stays what it was.  This history ends now, so that the current
 * verdict is not failed for silence. */
static void test_waiver(void **state) {
        int64_t now = (int64_t) time(NULL) * SEC;
        char spike[96], when[32], body[512], path[256];
        struct tu_reply r;
        ns_arg(when, now - DAY);
        snprintf(spike, sizeof(spike), "%s,0,2ms", when);
        const char *const extra[] = { "--spike", spike, NULL };
        history(0, "k-waive", 4, now, extra);
        history(1, "k-waive", 4, now, NULL);

        json_t *v = verdict_at("k-waive", 0);
        expect_status(v, "failed");
        const char *id = str(problem(v, 0), "id");
        char problem_id[160];
        snprintf(problem_id, sizeof(problem_id), "%s", id);
        json_decref(v);

        /* Without a staff token, with an unknown problem, without a reason: refused. */
        snprintf(body, sizeof(body), "{\"problem\": \"%s\", \"reason\": \"hypervisor stall\"}",
                 problem_id);
        post_admin("/api/v1/kernels/k-waive/waivers", NULL, body, 401, &r);
        tu_reply_done(&r);
        post_admin("/api/v1/kernels/k-waive/waivers", token_a, body, 401, &r);
        tu_reply_done(&r);
        post_admin("/api/v1/kernels/k-waive/waivers", admin_token,
                   "{\"problem\": \"violation:nope\", \"reason\": \"x\"}", 404, &r);
        assert_non_null(strstr(r.body, "no unwaived problem"));
        tu_reply_done(&r);
        snprintf(path, sizeof(path), "{\"problem\": \"%s\"}", problem_id);
        post_admin("/api/v1/kernels/k-waive/waivers", admin_token, path, 400, &r);
        assert_non_null(strstr(r.body, "reason"));
        tu_reply_done(&r);
        post_admin("/api/v1/kernels/k-waive/waivers", admin_token, "{\"problem\": 3}", 400, &r);
        assert_non_null(strstr(r.body, "problem: expected a string"));
        tu_reply_done(&r);

        post_admin("/api/v1/kernels/k-waive/waivers", admin_token, body, 201, &r);
        int64_t waiver = tu_jint(r.json, "id");
        assert_string_equal(str(r.json, "by"), "alice");
        tu_reply_done(&r);

        v = verdict_at("k-waive", 0);
        expect_status(v, "qualified");
        json_t *waived = json_object_get(v, "waived");
        assert_int_equal(json_array_size(waived), 1);
        json_t *w = json_object_get(json_array_get(waived, 0), "waiver");
        assert_string_equal(str(w, "reason"), "hypervisor stall");
        assert_string_equal(str(w, "by"), "alice");
        int64_t created = tu_jint(w, "created_ns");
        json_decref(v);
        /* A second waiver of the same problem: it has none unwaived left. */
        post_admin("/api/v1/kernels/k-waive/waivers", admin_token, body, 404, &r);
        tu_reply_done(&r);

        /* Just before the waiver was given, the verdict was failed. */
        v = verdict_at("k-waive", created - 1);
        expect_status(v, "failed");
        json_decref(v);

        /* Withdrawn: failed again, and both steps are in the audit trail. */
        snprintf(path, sizeof(path), "/api/v1/waivers/%lld/withdraw", (long long) waiver);
        post_admin(path, admin_token, "{\"reason\": \"stall reproduced on bare metal\"}", 200, &r);
        tu_reply_done(&r);
        post_admin(path, admin_token, "{}", 404, &r);
        tu_reply_done(&r);
        v = verdict_at("k-waive", 0);
        expect_status(v, "failed");
        json_decref(v);
        char url[512];
        /* The audit trail names staff: only staff read it. */
        snprintf(url, sizeof(url), "%s/api/v1/audit", base_url);
        json_decref(tu_get_json(url, 401));
        tu_http("GET", url, admin_token, NULL, &r);
        assert_int_equal(r.status, 200);
        json_t *audit = json_incref(r.json);
        tu_reply_done(&r);
        json_t *entries = json_object_get(audit, "audit");
        assert_true(json_array_size(entries) >= 2);
        assert_string_equal(str(json_array_get(entries, 0), "action"), "unwaive");
        assert_string_equal(str(json_array_get(entries, 1), "action"), "waive");
        assert_string_equal(str(json_array_get(entries, 1), "who"), "alice");
        assert_string_equal(str(json_array_get(entries, 1), "problem"), problem_id);
        json_decref(audit);
        snprintf(url, sizeof(url), "%s/api/v1/kernels/k-waive/waivers", base_url);
        json_t *list = tu_get_json(url, 200);
        assert_int_equal(tu_jint(list, "total"), 1);
        json_t *withdrawn = json_object_get(json_array_get(json_object_get(list, "waivers"), 0),
                                            "withdrawn_ns");
        assert_true(json_is_integer(withdrawn));
        int64_t until = json_integer_value(withdrawn);
        json_decref(list);
        /* Asked at a moment in between: waived from the nanosecond it was given to the one
         * before it was withdrawn. */
        const struct {
                int64_t at;
                const char *status;
        } moments[] = { { created, "qualified" }, { until - 1, "qualified" }, { until, "failed" } };
        for (size_t i = 0; i < ELEMENTSOF(moments); i++) {
                v = verdict_at("k-waive", moments[i].at);
                expect_status(v, moments[i].status);
                json_decref(v);
        }
}

/* Every release with its verdict, in pages; bad parameters and unknown releases. */
static void test_kernels_and_errors(void **state) {
        char url[512];
        snprintf(url, sizeof(url), "%s/api/v1/kernels?at=%lld&limit=3", base_url,
                 (long long) (T_END + MINUTE));
        json_t *k = tu_get_json(url, 200);
        int64_t total = tu_jint(k, "total");
        assert_true(total >= 8);
        assert_int_equal(json_array_size(json_object_get(k, "kernels")), 3);
        assert_true(json_is_string(json_object_get(k, "next")));
        json_decref(k);

        /* All of them on one page: each with the verdict its own endpoint gives. */
        snprintf(url, sizeof(url), "%s/api/v1/kernels?at=%lld&limit=100", base_url,
                 (long long) (T_END + MINUTE));
        k = tu_get_json(url, 200);
        json_t *list = json_object_get(k, "kernels");
        assert_int_equal((int64_t) json_array_size(list), total);
        assert_true(json_is_null(json_object_get(k, "next")));
        size_t seen = 0;
        for (size_t i = 0; i < json_array_size(list); i++) {
                json_t *e = json_array_get(list, i);
                const char *rel = str(e, "release");
                static const struct {
                        const char *release, *verdict;
                } want[] = {
                        { "k-clean", "qualified" }, { "k-short", "pending" },
                        { "k-spike", "failed" },    { "k-crash", "failed" },
                        { "k-gap", "failed" },      { "k-nonet", "pending" },
                        { "k-lonely", "pending" },  { "k-load", "failed" },
                };
                for (size_t w = 0; w < ELEMENTSOF(want); w++)
                        if (strcmp(rel, want[w].release) == 0) {
                                assert_string_equal(str(e, "verdict"), want[w].verdict);
                                seen++;
                        }
        }
        assert_int_equal(seen, 8);
        json_decref(k);

        static const struct {
                const char *path, *needle;
                long status;
        } bad[] = {
                { "/api/v1/kernels/k-clean/verdict?at=yesterday-ish", "at=", 400 },
                { "/api/v1/kernels/k-clean/verdict?form=1", "form: unknown parameter", 400 },
                { "/api/v1/kernels?limit=0", "limit=0", 400 },
                { "/api/v1/kernels?limit=100000", "limit=100000", 400 },
                { "/api/v1/kernels?offset=-1", "offset=-1", 400 },
                { "/api/v1/kernels/no-such-kernel/verdict", "no such kernel release", 404 },
                { "/api/v1/kernels/k-clean/nothing", "no such resource", 404 },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct tu_reply r;
                snprintf(url, sizeof(url), "%s%s", base_url, bad[i].path);
                tu_http("GET", url, NULL, NULL, &r);
                if (r.status != bad[i].status || !strstr(r.body, bad[i].needle))
                        fail_msg("%s: expected %ld with '%s', got %ld: %s", bad[i].path,
                                 bad[i].status, bad[i].needle, r.status, r.body);
                tu_reply_done(&r);
        }
        struct tu_reply r;
        snprintf(url, sizeof(url), "%s/api/v1/kernels/k-clean/verdict", base_url);
        tu_http("POST", url, NULL, "{}", &r);
        assert_int_equal(r.status, 405);
        tu_reply_done(&r);

        /* /metrics: the verdict now, as the verdict log has it (Watch=1s here), as a state set,
         * of each release with data in the last qualification period and day (a bounded set of
         * labels): k-waive, which the machines ran until now; not the histories of a month
         * ago. */
        snprintf(url, sizeof(url), "%s/metrics", base_url);
        static const char *const lines[] = {
                "# TYPE rtsoak_kernel_verdict gauge\n",
                "\nrtsoak_kernel_verdict{release=\"k-waive\",verdict=\"failed\"} 1\n",
                "\nrtsoak_kernel_verdict{release=\"k-waive\",verdict=\"qualified\"} 0\n",
                "\nrtsoak_kernel_verdict{release=\"k-waive\",verdict=\"pending\"} 0\n",
        };
        for (int tries = 0;; tries++) {
                tu_http("GET", url, NULL, NULL, &r);
                assert_int_equal(r.status, 200);
                size_t i = 0;
                while (i < ELEMENTSOF(lines) && strstr(r.body, lines[i]))
                        i++;
                if (i == ELEMENTSOF(lines))
                        break;
                if (tries == 300) {
                        const char *have = strstr(r.body, "rtsoak_kernel_verdict{");
                        fail_msg("/metrics lacks line %zu; it has: %.600s", i, have ?: r.body);
                }
                tu_reply_done(&r);
                usleep(100 * 1000);
        }
        if (strstr(r.body, "rtsoak_kernel_verdict{release=\"k-clean\""))
                fail_msg("/metrics names a release without data for more than a period and a day");
        tu_reply_done(&r);
}

/* The command line: rtsoak-server verdict on the database, and its exit status. */
static void test_server_command(void **state) {
        char dbarg[600], at[32];
        struct tu_result r;
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db_path);
        ns_arg(at, T_END + MINUTE);
        static const struct {
                const char *release;
                int status;
        } cases[] = { { "k-clean", 0 }, { "k-spike", 1 }, { "k-short", 2 }, { "unknown", 3 } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *cmd[] = { (char *) tu_bin("RTSOAK_SERVER"),
                                dbarg,
                                "verdict",
                                (char *) cases[i].release,
                                "--at",
                                at,
                                NULL };
                tu_run(cmd, 30000, NULL, NULL, &r);
                if (r.status != cases[i].status)
                        fail_msg("verdict %s: expected %d, got %d: %s", cases[i].release,
                                 cases[i].status, r.status, r.err);
                tu_result_done(&r);
        }
        char *nowaive[] = {
                (char *) tu_bin("RTSOAK_SERVER"), dbarg, "waive", "k-spike", "x", NULL
        };
        tu_run(nowaive, 30000, NULL, NULL, &r);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "--reason"));
        tu_result_done(&r);
}

/* rtsoak verdict, as a gating script runs it: the verdict, its reasons and the exit status. */
static void test_cli(void **state) {
        char at[32];
        struct tu_result r;
        ns_arg(at, T_END + MINUTE);
        static const struct {
                const char *release, *needle;
                int status;
        } cases[] = {
                { "k-clean", "k-clean: QUALIFIED", 0 },
                { "k-spike", "CPU 1: latency 500us over the bound of 100us", 1 },
                { "k-short", "1d still missing", 2 },
                { "k-nonet", "scenario net never ran", 2 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *cmd[] = {
                        (char *) tu_bin("RTSOAK"), "verdict", "--server", base_url, "--at", at,
                        (char *) cases[i].release, NULL
                };
                tu_run(cmd, 30000, NULL, NULL, &r);
                if (r.status != cases[i].status || !strstr(r.out, cases[i].needle))
                        fail_msg("rtsoak verdict %s: expected %d and '%s', got %d: %s%s",
                                 cases[i].release, cases[i].status, cases[i].needle, r.status,
                                 r.out, r.err);
                tu_result_done(&r);
        }
        /* Under the violation's line, its culprit. */
        char *culprit_cmd[] = { (char *) tu_bin("RTSOAK"),
                                "verdict",
                                "--server",
                                base_url,
                                "--at",
                                at,
                                "k-spike",
                                NULL };
        tu_run(culprit_cmd, 30000, NULL, NULL, &r);
        const char *line = strstr(r.out, "CPU 1: latency 500us over the bound of 100us");
        if (!line || !strstr(line, "\n    culprit: thread kworker/1:2 (pid 4242, SCHED_FIFO 50) "
                                   "ran 475 µs of the 500 µs\n"))
                fail_msg("rtsoak verdict k-spike: no culprit under the violation: %s", r.out);
        tu_result_done(&r);
        /* --json: the server's answer, with the same exit status. */
        char *json_cmd[] = { (char *) tu_bin("RTSOAK"),
                             "verdict",
                             "--json",
                             "--server",
                             base_url,
                             "--at",
                             at,
                             "k-gap",
                             NULL };
        tu_run(json_cmd, 30000, NULL, NULL, &r);
        assert_int_equal(r.status, 1);
        json_t *j = tu_json(r.out);
        assert_string_equal(str(j, "verdict"), "failed");
        assert_int_equal(tu_jint(j, "problems_total"), 1);
        json_decref(j);
        tu_result_done(&r);
        /* Cannot tell: an unknown release, a server that is not there. */
        char *unknown[] = {
                (char *) tu_bin("RTSOAK"), "verdict", "--server", base_url, "k-none", NULL
        };
        tu_run(unknown, 30000, NULL, NULL, &r);
        assert_int_equal(r.status, 3);
        assert_non_null(strstr(r.err, "no such kernel release"));
        tu_result_done(&r);
        char *away[] = { (char *) tu_bin("RTSOAK"), "verdict", "--server",
                         "http://127.0.0.1:1",      "k-clean", NULL };
        tu_run(away, 30000, NULL, NULL, &r);
        assert_int_equal(r.status, 3);
        assert_non_null(strstr(r.err, "Cannot reach"));
        tu_result_done(&r);
        char *usage[] = { (char *) tu_bin("RTSOAK"), "verdict", "k-clean", NULL };
        tu_run(usage, 30000, NULL, NULL, &r);
        assert_int_equal(r.status, 64);
        assert_non_null(strstr(r.err, "--server"));
        tu_result_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_qualified_and_silence),
                cmocka_unit_test(test_pending_coverage),
                cmocka_unit_test(test_violation_and_at),
                cmocka_unit_test(test_unclean_end),
                cmocka_unit_test(test_gap),
                cmocka_unit_test(test_missing_scenario),
                cmocka_unit_test(test_not_run),
                cmocka_unit_test(test_load_down),
                cmocka_unit_test(test_waiver),
                cmocka_unit_test(test_kernels_and_errors),
                cmocka_unit_test(test_server_command),
                cmocka_unit_test(test_cli),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
