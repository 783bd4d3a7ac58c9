/* SPDX-License-Identifier: MIT */
/* Several rtsoak-server instances on one PostgreSQL farm database: uploads of the same and of
 * different machines through both at once stored exactly once, kill -9 of one in the middle of
 * uploads losing nothing it answered "stored", the histogram cache of one invalidated by an
 * upload through the other, one rate limit per machine for both, one writer of the verdict
 * log.  Run by pg-run.sh: a farm of several servers is a PostgreSQL one. */
#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "test-farmdb.h"
#include "test-http.h"
#include "test-summaries.h"
#include "test-util.h"

#define DAY_NS (86400 * INT64_C(1000000000))
#define NMACHINES 3
#define NSEQ 30

static const char *const machines[] = { "a0000000000000000000000000000001",
                                        "a0000000000000000000000000000002",
                                        "a0000000000000000000000000000003",
                                        "a0000000000000000000000000000004" };
static char *dir, target[512], tokens[4][80], log_a[512], log_b[512], url_a[128], url_b[128];
static pid_t pid_a, pid_b;
/* A UTC midnight four days ago: whole past days, whose histograms are cached. */
static int64_t day0;

static const char *const fast[] = { "--rate",          "1000000", "--burst", "1000000",
                                    "--cache-warming", "no",      NULL };

static pid_t start(const char *log, char *url, const char *const *extra) {
        return tu_server_start(target, log, "127.0.0.1:0", extra, url, 128);
}

static int setup(void **state) {
        if (!tu_pg()) {
                fprintf(stderr, "several servers share a farm only on PostgreSQL\n");
                return -1;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        dir = tu_mkdtemp("instances");
        tu_farm_target(dir, "instances", target, sizeof(target));
        snprintf(log_a, sizeof(log_a), "%s/a.log", dir);
        snprintf(log_b, sizeof(log_b), "%s/b.log", dir);
        for (int i = 0; i < 4; i++)
                tu_server_enroll(target, machines[i], NULL, NULL, tokens[i]);
        pid_a = start(log_a, url_a, fast);
        pid_b = start(log_b, url_b, fast);
        day0 = ((int64_t) time(NULL) / 86400 - 4) * DAY_NS;
        return 0;
}

static int teardown(void **state) {
        if (pid_a > 0)
                tu_server_stop(pid_a);
        if (pid_b > 0)
                tu_server_stop(pid_b);
        tu_farm_drop(target);
        tu_rmdir(dir);
        curl_global_cleanup();
        return 0;
}

/* ---- many uploads at once ------------------------------------------------------------------ */

struct post {
        char *url, *body, auth[128];
        struct tu_reply reply;
        CURL *easy;
        bool failed; /* no answer: the connection broke */
};

static void post_init(struct post *p, const char *base, int machine, const struct tu_spec *spec) {
        p->url = NULL;
        if (asprintf(&p->url, "%s/api/v1/summaries", base) < 0)
                fail_msg("out of memory");
        p->body = tu_summary_text(spec);
        snprintf(p->auth, sizeof(p->auth), "Authorization: Bearer %s", tokens[machine]);
        p->reply = (struct tu_reply){};
        p->failed = false;
}

static void post_done(struct post *p) {
        free(p->url);
        free(p->body);
        tu_reply_done(&p->reply);
}

/* Sends every post at once (several connections to each server); when kill_after is given,
 * kill -9 the server of victim once that many answers came. */
static void post_all(struct post *v, size_t n, size_t kill_after, pid_t *victim) {
        CURLM *multi = curl_multi_init();
        struct curl_slist *headers[n];
        for (size_t i = 0; i < n; i++) {
                headers[i] = curl_slist_append(NULL, v[i].auth);
                headers[i] = curl_slist_append(headers[i], "Expect:");
                v[i].easy = curl_easy_init();
                curl_easy_setopt(v[i].easy, CURLOPT_URL, v[i].url);
                curl_easy_setopt(v[i].easy, CURLOPT_POSTFIELDS, v[i].body);
                curl_easy_setopt(v[i].easy, CURLOPT_HTTPHEADER, headers[i]);
                curl_easy_setopt(v[i].easy, CURLOPT_TIMEOUT, 60L);
                curl_easy_setopt(v[i].easy, CURLOPT_WRITEFUNCTION, tu_http_on_body);
                curl_easy_setopt(v[i].easy, CURLOPT_WRITEDATA, &v[i].reply);
                curl_easy_setopt(v[i].easy, CURLOPT_PRIVATE, &v[i]);
                curl_multi_add_handle(multi, v[i].easy);
        }
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 6L);
        size_t answered = 0;
        int running = 1;
        while (running) {
                assert_int_equal(curl_multi_perform(multi, &running), CURLM_OK);
                CURLMsg *m;
                int left;
                while ((m = curl_multi_info_read(multi, &left))) {
                        struct post *p;
                        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &p);
                        if (m->data.result != CURLE_OK)
                                p->failed = true;
                        else
                                curl_easy_getinfo(p->easy, CURLINFO_RESPONSE_CODE,
                                                  &p->reply.status);
                        answered++;
                }
                if (victim && *victim > 0 && answered >= kill_after) {
                        kill(*victim, SIGKILL);
                        waitpid(*victim, NULL, 0);
                        *victim = 0;
                }
                if (running)
                        curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }
        for (size_t i = 0; i < n; i++) {
                curl_multi_remove_handle(multi, v[i].easy);
                curl_easy_cleanup(v[i].easy);
                curl_slist_free_all(headers[i]);
        }
        curl_multi_cleanup(multi);
}

static long long db(const char *sql) {
        return tu_farm_int(target, sql);
}

/* Nothing stored twice, and the day rollups are those of the intervals stored. */
static void expect_once(void) {
        assert_int_equal(db("SELECT count(*) FROM (SELECT run, seq FROM intervals GROUP BY run, "
                            "seq HAVING count(*) > 1) d"),
                         0);
        assert_int_equal(db("SELECT count(*) FROM (SELECT run, event_id FROM events GROUP BY "
                            "run, event_id HAVING count(*) > 1) d"),
                         0);
        assert_int_equal(db("SELECT count(*) FROM (SELECT interval, cpu FROM interval_cpus "
                            "GROUP BY interval, cpu HAVING count(*) > 1) d"),
                         0);
        assert_int_equal(db("SELECT count(*) FROM run_days d WHERE d.intervals <> (SELECT "
                            "count(*) FROM intervals i WHERE i.run = d.run AND i.start_ns >= "
                            "d.day * 86400000000000 AND i.start_ns < (d.day + 1) * "
                            "86400000000000)"),
                         0);
        /* Time counted once: a day's counted time is the sum of its intervals'. */
        assert_int_equal(db("SELECT count(*) FROM run_days d WHERE d.counted_ns <> (SELECT "
                            "coalesce(sum(counted_ns), 0) FROM intervals i WHERE i.run = d.run "
                            "AND i.start_ns >= d.day * 86400000000000 AND i.start_ns < "
                            "(d.day + 1) * 86400000000000)"),
                         0);
}

/* The same uploads, and uploads of different machines, through both servers at once: each
 * sent to both, some again with a batch grown since (as an uploader that did not hear the
 * answer sends it).  Every one is answered 200 and stored once. */
static void test_same_and_different_machines(void **state) {
        enum { PER = NSEQ * 2 + NSEQ / 2, N = NMACHINES * PER };
        struct post *v = calloc(N, sizeof(*v));
        size_t n = 0;
        for (int m = 0; m < NMACHINES; m++)
                for (int k = 0; k < NSEQ; k++) {
                        struct tu_spec s = { .machine = machines[m],
                                             .kernel = "6.6.15-rt22",
                                             .run = 1,
                                             .start_ns = day0,
                                             .seq = (uint64_t) k,
                                             .first_interval = (uint64_t) k,
                                             .nintervals = 1,
                                             .ncpus = 2,
                                             .max_ns = 20000,
                                             .first_event = (uint64_t) k + 1,
                                             .nevents = 1 };
                        post_init(&v[n++], url_a, m, &s);
                        post_init(&v[n++], url_b, m, &s);
                        if (k % 2 == 0) {
                                s.nintervals = 2; /* the batch grew meanwhile */
                                post_init(&v[n++], k % 4 ? url_a : url_b, m, &s);
                        }
                }
        assert_int_equal(n, N);
        post_all(v, n, 0, NULL);
        for (size_t i = 0; i < n; i++) {
                if (v[i].failed || v[i].reply.status != 200)
                        fail_msg("upload %zu: %ld %s", i, v[i].reply.status,
                                 v[i].reply.body ?: "(no answer)");
                post_done(&v[i]);
        }
        free(v);
        /* Seq 0..NSEQ - 1 of each machine (the grown batches add no new one). */
        assert_int_equal(db("SELECT count(*) FROM intervals"), NMACHINES * NSEQ);
        assert_int_equal(db("SELECT count(*) FROM events"), NMACHINES * NSEQ);
        assert_int_equal(db("SELECT count(*) FROM interval_cpus"), NMACHINES * NSEQ * 2);
        expect_once();
}

/* kill -9 of one server while uploads are in flight: every upload it answered 200 is stored;
 * the client sends what was not answered to the other server, and in the end every interval is
 * stored once. */
static void test_kill_one_mid_upload(void **state) {
        enum { N = 120 };
        struct post *v = calloc(N, sizeof(*v));
        long long before = db("SELECT count(*) FROM intervals");
        for (int k = 0; k < N; k++) {
                struct tu_spec s = { .machine = machines[k % NMACHINES],
                                     .kernel = "6.6.15-rt22",
                                     .run = 2,
                                     .start_ns = day0 + DAY_NS,
                                     .seq = (uint64_t) (k / NMACHINES),
                                     .first_interval = (uint64_t) (k / NMACHINES),
                                     .nintervals = 1,
                                     .ncpus = 2,
                                     .max_ns = 20000 };
                post_init(&v[k], url_a, k % NMACHINES, &s);
        }
        post_all(v, N, N / 3, &pid_a);
        assert_int_equal(pid_a, 0);
        size_t acked = 0, lost = 0;
        for (int k = 0; k < N; k++) {
                if (!v[k].failed && v[k].reply.status == 200) {
                        char sql[256];
                        acked++;
                        snprintf(sql, sizeof(sql),
                                 "SELECT count(*) FROM intervals i JOIN runs r ON i.run = r.id "
                                 "WHERE r.machine_id = '%s' AND r.run_id = 2 AND i.seq = %d",
                                 machines[k % NMACHINES], k / NMACHINES);
                        if (db(sql) != 1)
                                fail_msg("upload %d was answered 200 but is not stored", k);
                } else
                        lost++;
        }
        printf("# %zu uploads answered before the kill -9, %zu not\n", acked, lost);
        assert_true(acked >= N / 3 && lost > 0);
        /* The rest again, through the other server (the acknowledged ones too: duplicates). */
        for (int k = 0; k < N; k++) {
                char *body = v[k].body;
                v[k].body = NULL;
                post_done(&v[k]);
                v[k] = (struct post){ .body = body };
                if (asprintf(&v[k].url, "%s/api/v1/summaries", url_b) < 0)
                        fail_msg("out of memory");
                snprintf(v[k].auth, sizeof(v[k].auth), "Authorization: Bearer %s",
                         tokens[k % NMACHINES]);
        }
        post_all(v, N, 0, NULL);
        for (int k = 0; k < N; k++) {
                if (v[k].failed || v[k].reply.status != 200)
                        fail_msg("again %d: %ld %s", k, v[k].reply.status, v[k].reply.body ?: "");
                post_done(&v[k]);
        }
        free(v);
        assert_int_equal(db("SELECT count(*) FROM intervals") - before, N);
        expect_once();
        pid_a = start(log_a, url_a, fast);
}

/* A day's merged histogram cached through one server is dropped by an interval of that day
 * stored through the other, and the first server's next answer has it. */
static void test_cache_across_servers(void **state) {
        char path[256];
        snprintf(path, sizeof(path), "%s/api/v1/machines/%s/histogram?from=%lld&to=%lld", url_a,
                 machines[3], (long long) day0, (long long) (day0 + DAY_NS));
        struct tu_spec s = { .machine = machines[3],
                             .kernel = "6.6.15-rt22",
                             .run = 1,
                             .start_ns = day0,
                             .nintervals = 10,
                             .ncpus = 2,
                             .max_ns = 20000 };
        struct post p;
        post_init(&p, url_a, 3, &s);
        post_all(&p, 1, 0, NULL);
        assert_int_equal(p.reply.status, 200);
        post_done(&p);
        json_t *h = tu_get_json(path, 200);
        long long worst = json_integer_value(json_object_get(json_object_get(h, "all"), "max_ns"));
        json_decref(h);
        assert_true(db("SELECT count(*) FROM hist_days") > 0);

        /* Late: an interval of that day with a worse case, through B. */
        s.seq = s.first_interval = 500;
        s.nintervals = 1;
        s.max_ns = 900000;
        post_init(&p, url_b, 3, &s);
        post_all(&p, 1, 0, NULL);
        assert_int_equal(p.reply.status, 200);
        post_done(&p);
        h = tu_get_json(path, 200);
        long long after = json_integer_value(json_object_get(json_object_get(h, "all"), "max_ns"));
        json_decref(h);
        if (after <= worst || after < 900000)
                fail_msg("worst %lld before, %lld after the late interval through the other "
                         "server",
                         worst, after);
}

/* One bucket per machine for the farm: the burst spent through both servers together. */
static void test_rate_limit_shared(void **state) {
        char log_c[512], log_d[512], url_c[128], url_d[128];
        static const char *const slow[] = { "--rate", "0.001", "--burst", "3", NULL };
        snprintf(log_c, sizeof(log_c), "%s/c.log", dir);
        snprintf(log_d, sizeof(log_d), "%s/d.log", dir);
        pid_t c = start(log_c, url_c, slow), d = start(log_d, url_d, slow);
        /* Machine 2 has not sent through these servers' limit yet (the others' bucket rows
         * are of the same machines: the table is shared, which is the point). */
        const char *urls[] = { url_c, url_d, url_c, url_d };
        long want[] = { 200, 200, 200, 429 };
        tu_farm_exec(target, "DELETE FROM rate_buckets");
        for (int i = 0; i < 4; i++) {
                struct tu_spec s = { .machine = machines[2],
                                     .kernel = "6.6.15-rt22",
                                     .run = 3,
                                     .start_ns = day0 + 2 * DAY_NS,
                                     .seq = (uint64_t) i,
                                     .first_interval = (uint64_t) i,
                                     .nintervals = 1,
                                     .ncpus = 2,
                                     .max_ns = 20000 };
                struct post p;
                post_init(&p, urls[i], 2, &s);
                post_all(&p, 1, 0, NULL);
                if (p.reply.status != want[i])
                        fail_msg("upload %d: %ld, expected %ld", i, p.reply.status, want[i]);
                post_done(&p);
        }
        tu_server_stop(c);
        tu_server_stop(d);
}

/* Both servers pass over the verdict log every second; the log has each change once. */
static void test_one_verdict_log_writer(void **state) {
        char conf[512], confarg[600], log_c[512], log_d[512], url_c[128], url_d[128];
        snprintf(conf, sizeof(conf), "%s/watch.conf", dir);
        snprintf(confarg, sizeof(confarg), "--config=%s", conf);
        FILE *f = fopen(conf, "we");
        fputs("[Verdict]\nWatch=1s\n", f);
        fclose(f);
        const char *extra[] = { confarg, "--rate", "1000000", "--burst", "1000000", NULL };
        snprintf(log_c, sizeof(log_c), "%s/wc.log", dir);
        snprintf(log_d, sizeof(log_d), "%s/wd.log", dir);
        tu_farm_exec(target, "DELETE FROM verdict_log");
        pid_t c = start(log_c, url_c, extra), d = start(log_d, url_d, extra);
        for (int i = 0; i < 30 && db("SELECT count(*) FROM verdict_log") == 0; i++)
                tu_sleep_ms(200);
        tu_sleep_ms(2500); /* more passes of both */
        tu_server_stop(c);
        tu_server_stop(d);
        assert_true(db("SELECT count(*) FROM verdict_log") >= 1);
        /* No release has the same status logged twice in a row. */
        assert_int_equal(db("SELECT count(*) FROM verdict_log a JOIN verdict_log b ON "
                            "b.release = a.release AND b.id = (SELECT min(id) FROM verdict_log "
                            "x WHERE x.release = a.release AND x.id > a.id) "
                            "WHERE a.status = b.status"),
                         0);
        assert_int_equal(db("SELECT count(*) FROM (SELECT release FROM verdict_log GROUP BY "
                            "release HAVING count(*) > 1) d"),
                         0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_same_and_different_machines),
                cmocka_unit_test(test_kill_one_mid_upload),
                cmocka_unit_test(test_cache_across_servers),
                cmocka_unit_test(test_rate_limit_shared),
                cmocka_unit_test(test_one_verdict_log_writer),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
