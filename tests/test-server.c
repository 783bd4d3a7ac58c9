/* SPDX-License-Identifier: MIT */
/* Integration tests of rtsoak-server: the real binary on loopback with a real farm database,
 * driven with libcurl; what it stores is read back with SQLite, and every refused request is
 * checked to leave the database as it was. */
#include <curl/curl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "test-summaries.h"
#include "test-farmdb.h"
#include "hist.h"
#include "sha256.h"
#include "summary.h"

#define T0 INT64_C(1796300000000000000)
#define MIN_NS (60 * INT64_C(1000000000))
#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "fedcba9876543210fedcba9876543210"
#define ID_C "c0ffee00c0ffee00c0ffee00c0ffee00"
#define ID_UNKNOWN "00000000000000000000000000000042"

static char *dir;
static char db_path[512], log_path[512], base_url[128];
static pid_t server_pid;
static char token_a[80], token_b[80], token_c[80];
static unsigned requests; /* made to the main server: one log line each */

/* ---- the server and its command line ---------------------------------------------------- */

static void run_server(char *const *cmd, const char *expect_err, int expect_status) {
        struct tu_result r;
        tu_run(cmd, 20000, NULL, NULL, &r);
        if (r.status != expect_status || (expect_err && !strstr(r.err, expect_err)))
                fail_msg("%s %s: expected status %d and '%s', got %d: %s", cmd[1], cmd[2],
                         expect_status, expect_err ?: "", r.status, r.err);
        tu_result_done(&r);
}

static void enroll(const char *db, const char *id, const char *extra1, const char *extra2,
                   char token[static 80]) {
        tu_server_enroll(db, id, extra1, extra2, token);
}

/* The servers started and not yet stopped: a case that fails half-way leaves its own, which
 * the teardown stops. */
static pid_t servers_up[8];

static pid_t start_server(const char *db, const char *log, const char *const *extra, char *url,
                          size_t url_size) {
        pid_t pid = tu_server_start(db, log, "127.0.0.1:0", extra, url, url_size);
        for (size_t i = 0; pid > 0 && i < ELEMENTSOF(servers_up); i++)
                if (servers_up[i] == 0) {
                        servers_up[i] = pid;
                        break;
                }
        return pid;
}

static int stop_server(pid_t pid) {
        for (size_t i = 0; i < ELEMENTSOF(servers_up); i++)
                if (servers_up[i] == pid)
                        servers_up[i] = 0;
        kill(pid, SIGTERM);
        return tu_wait(pid, 10000);
}

/* ---- HTTP with libcurl ------------------------------------------------------------------- */

/* One request; auth is the whole Authorization header value or NULL. */
static struct tu_reply http_at(const char *base, const char *cainfo, const char *method,
                               const char *path, const char *auth, const char *body, size_t len) {
        struct tu_reply r;
        char url[512];
        snprintf(url, sizeof(url), "%s%s", base, path);
        tu_http_request(&(struct tu_request){ .method = method,
                                              .url = url,
                                              .authorization = auth,
                                              .body = body,
                                              .body_len = len,
                                              .cainfo = cainfo },
                        &r);
        return r;
}

static struct tu_reply http(const char *method, const char *path, const char *auth,
                            const char *body, size_t len) {
        requests++;
        return http_at(base_url, NULL, method, path, auth, body, len);
}

static const char *bearer(const char *token) {
        static char buf[128];
        snprintf(buf, sizeof(buf), "Bearer %s", token);
        return buf;
}

static struct tu_reply upload(const char *token, const char *text) {
        return http("POST", "/api/v1/summaries", token ? bearer(token) : NULL, text, strlen(text));
}

/* The "error" of a JSON error reply; fails if the reply is not one. */
static const char *error_of(struct tu_reply *r) {
        static char msg[1024];
        json_t *j = tu_json(r->body);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (!e)
                fail_msg("no \"error\" in %s", r->body);
        snprintf(msg, sizeof(msg), "%s", e);
        json_decref(j);
        return msg;
}

static void expect_error(struct tu_reply *r, long status, const char *msg) {
        if (r->status != status || !strstr(error_of(r), msg))
                fail_msg("expected %ld '%s', got %ld %s", status, msg, r->status, r->body);
}

/* ---- summaries built with the codec (test-summaries.c) ---------------------------------- */

/* Machine A, run 1: two intervals (seq 0, 1) of three CPUs, three events. */
static const struct tu_spec run1 = { .machine = ID_A,
                                     .kernel = "6.6.15-rt22",
                                     .run = 1,
                                     .start_ns = T0,
                                     .seq = 0,
                                     .first_interval = 0,
                                     .nintervals = 2,
                                     .ncpus = 3,
                                     .max_ns = 80000,
                                     .first_event = 1,
                                     .nevents = 3 };
/* Its worst: interval 1, CPU 2. */
#define RUN1_WORST_NS (80000 + 1000 + 20)

/* Replaces the first from in text by to (allocated). */
static char *replace(const char *text, const char *from, const char *to) {
        const char *at = strstr(text, from);
        if (!at)
                fail_msg("'%s' not in %s", from, text);
        size_t fl = strlen(from), tl = strlen(to), n = strlen(text), pre = (size_t) (at - text);
        char *out = malloc(n - fl + tl + 1);
        memcpy(out, text, pre);
        memcpy(out + pre, to, tl);
        memcpy(out + pre + tl, at + fl, n - pre - fl + 1);
        return out;
}

/* ---- the farm database, read with SQLite ------------------------------------------------- */

static const char *const tables[] = { "machines",      "runs",           "intervals",
                                      "interval_cpus", "interval_loads", "interval_load_metrics",
                                      "events",        "uploads" };
#define NTABLES ELEMENTS(tables)
#define ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

struct snapshot {
        long long rows[8];
        char machines[4096]; /* every column of every machine */
};

static long long db_int(sql_conn *d, const char *sql) {
        sql_stmt *st;
        if (sql_prepare_once(d, sql, &st) != 0)
                fail_msg("%s: %s", sql, sql_errmsg(d));
        if (sql_step(st) != SQL_ROW)
                fail_msg("%s: no row: %s", sql, sql_errmsg(d));
        long long v = sql_column_int64(st, 0);
        sql_finalize(st);
        return v;
}

static void snapshot(struct snapshot *s) {
        sql_conn *d = tu_farm_open(db_path);
        char sql[128];
        _Static_assert(ELEMENTS(tables) == ELEMENTS(s->rows), "one count per table");
        for (size_t i = 0; i < NTABLES; i++) {
                snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", tables[i]);
                s->rows[i] = db_int(d, sql);
        }
        sql_stmt *st;
        /* string_agg in the statement API's dialect; hex() is SQLite's, encode() PostgreSQL's. */
        assert_int_equal(
                sql_prepare_once(d,
                                 tu_pg() ? "SELECT string_agg(id || ':' || "
                                           "encode(token_hash, 'hex') || ':' || "
                                           "threshold_ns || ':' || gating || ':' || "
                                           "coalesce(CAST(revoked_ns AS TEXT), '-') || "
                                           "':' || coalesce(CAST(last_report_ns AS "
                                           "TEXT), '-'), ',') FROM "
                                           "(SELECT * FROM machines ORDER BY id) m"
                                         : "SELECT string_agg(id || ':' || hex(token_hash) "
                                           "|| ':' || threshold_ns || ':' || gating || "
                                           "':' || coalesce(revoked_ns, '-') || ':' || "
                                           "coalesce(last_report_ns, '-'), ',') FROM "
                                           "(SELECT * FROM machines ORDER BY id) m",
                                 &st),
                0);
        assert_int_equal(sql_step(st), SQL_ROW);
        snprintf(s->machines, sizeof(s->machines), "%s", sql_column_text(st, 0) ?: "");
        sql_finalize(st);
        sql_close(d);
}

static void assert_unchanged(const struct snapshot *a, const char *what) {
        struct snapshot b;
        snapshot(&b);
        for (size_t i = 0; i < NTABLES; i++)
                if (a->rows[i] != b.rows[i])
                        fail_msg("%s changed %s: %lld rows, now %lld", what, tables[i], a->rows[i],
                                 b.rows[i]);
        if (strcmp(a->machines, b.machines) != 0)
                fail_msg("%s changed machines: %s -> %s", what, a->machines, b.machines);
}

static long long rows(const char *table) {
        sql_conn *d = tu_farm_open(db_path);
        char sql[128];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
        long long n = db_int(d, sql);
        sql_close(d);
        return n;
}

static json_t *get_machine(const char *id) {
        char path[128];
        snprintf(path, sizeof(path), "/api/v1/machines/%s", id);
        struct tu_reply r = http("GET", path, NULL, NULL, 0);
        if (r.status != 200)
                fail_msg("GET %s: %ld %s", path, r.status, r.body);
        json_t *j = tu_json(r.body);
        tu_reply_done(&r);
        return j;
}

/* ---- the tests --------------------------------------------------------------------------- */

static int setup(void **state) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        dir = tu_mkdtemp("server");
        tu_farm_target(dir, "farm", db_path, sizeof(db_path));
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        enroll(db_path, ID_A, "--threshold=50us", "--gating=no", token_a);
        enroll(db_path, ID_B, NULL, NULL, token_b);
        enroll(db_path, ID_C, NULL, NULL, token_c);
        server_pid = start_server(db_path, log_path, NULL, base_url, sizeof(base_url));
        return 0;
}

static int teardown(void **state) {
        if (server_pid > 0)
                stop_server(server_pid);
        for (size_t i = 0; i < ELEMENTSOF(servers_up); i++)
                if (servers_up[i] > 0)
                        stop_server(servers_up[i]);
        tu_farm_drop(db_path);
        tu_rmdir(dir);
        curl_global_cleanup();
        return 0;
}

/* enroll: a fresh token each time, only its SHA-256 in the database; the machine's settings
 * as given; a machine id that is not one is a usage error. */
static void test_enroll(void **state) {
        char hex[2 * SHA256_DIGEST_SIZE + 1], sql[256];
        sql_conn *d = tu_farm_open(db_path);
        sha256_hex(token_a, strlen(token_a), hex);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM machines WHERE id = '%s' AND %s = '%s' "
                 "AND threshold_ns = 50000 AND gating = 0 AND revoked_ns IS NULL",
                 ID_A, tu_pg() ? "encode(token_hash, 'hex')" : "lower(hex(token_hash))", hex);
        assert_int_equal(db_int(d, sql), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM machines WHERE id = '%s' AND "
                 "threshold_ns = 100000 AND gating = 1",
                 ID_B);
        assert_int_equal(db_int(d, sql), 1);
        sql_close(d);
        assert_string_not_equal(token_a, token_b);
        /* The token itself is nowhere in the file, or the database's dump. */
        char *raw = tu_farm_dump(db_path);
        assert_null(memmem(raw, strlen(raw), token_a, 64));
        free(raw);

        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db_path);
        char *bad_id[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "enroll", "0123ABCD", NULL };
        run_server(bad_id, "Invalid machine id '0123ABCD'", 64);
        char *bad_threshold[] = { (char *) tu_bin("RTSOAK_SERVER"),
                                  dbarg,
                                  "enroll",
                                  ID_UNKNOWN,
                                  "--threshold=fast",
                                  NULL };
        run_server(bad_threshold, "Invalid --threshold 'fast'", 64);
        char *bad_gating[] = { (char *) tu_bin("RTSOAK_SERVER"),
                               dbarg,
                               "enroll",
                               ID_UNKNOWN,
                               "--gating=maybe",
                               NULL };
        run_server(bad_gating, "expected yes or no", 64);
        char *revoke_unknown[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "revoke", ID_UNKNOWN,
                                   NULL };
        run_server(revoke_unknown, "no machine " ID_UNKNOWN " is enrolled", 1);
        assert_int_equal(rows("machines"), 3);
}

/* A valid summary is stored, row for row, and the machine query shows it. */
static void test_upload_stored(void **state) {
        char *text = tu_summary_text(&run1);
        struct tu_reply r = upload(token_a, text);
        if (r.status != 200)
                fail_msg("upload: %ld %s", r.status, r.body);
        json_t *j = tu_json(r.body);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "stored");
        assert_int_equal(tu_jint(j, "intervals"), 2);
        assert_int_equal(tu_jint(j, "events"), 3);
        json_decref(j);
        tu_reply_done(&r);
        free(text);

        assert_int_equal(rows("runs"), 1);
        assert_int_equal(rows("intervals"), 2);
        assert_int_equal(rows("interval_cpus"), 6);
        assert_int_equal(rows("interval_loads"), 2);
        assert_int_equal(rows("interval_load_metrics"), 4);
        assert_int_equal(rows("events"), 3);
        assert_int_equal(rows("uploads"), 1);

        /* Every CPU row holds the values sent, and its histogram as the codec encoded it. */
        sql_conn *d = tu_farm_open(db_path);
        sql_stmt *st;
        assert_int_equal(sql_prepare_once(d,
                                          "SELECT i.seq, c.cpu, c.samples, c.max_ns, c.hist, "
                                          "r.machine_id, r.run_id, r.kernel_release "
                                          "FROM interval_cpus c JOIN intervals i ON "
                                          "c.interval = i.id JOIN runs r ON i.run = r.id "
                                          "ORDER BY i.seq, c.cpu",
                                          &st),
                         0);
        static uint64_t counts[8192];
        for (int i = 0; i < 2; i++)
                for (int c = 0; c < 3; c++) {
                        assert_int_equal(sql_step(st), SQL_ROW);
                        uint64_t max = 80000 + 1000 * (uint64_t) i + 10 * (uint64_t) c;
                        uint8_t *hist;
                        size_t hist_len;
                        memset(counts, 0, sizeof(counts));
                        counts[hist_index(1000, 5000)] = 999;
                        counts[hist_index(1000, max)] += 1;
                        assert_int_equal(hist_encode(1000, counts, &hist, &hist_len), 0);
                        assert_int_equal(sql_column_int64(st, 0), i);
                        assert_int_equal(sql_column_int64(st, 1), c);
                        assert_int_equal(sql_column_int64(st, 2), 1000);
                        assert_int_equal(sql_column_int64(st, 3), max);
                        size_t len;
                        const void *blob = sql_column_blob(st, 4, &len);
                        assert_int_equal(len, hist_len);
                        assert_memory_equal(blob, hist, hist_len);
                        assert_string_equal(sql_column_text(st, 5), ID_A);
                        assert_int_equal(sql_column_int64(st, 6), 1);
                        assert_string_equal(sql_column_text(st, 7), "6.6.15-rt22");
                        free(hist);
                }
        assert_int_equal(sql_step(st), SQL_DONE);
        sql_finalize(st);
        assert_int_equal(db_int(d, "SELECT count(*) FROM events WHERE event_id IN (1, 2, 3) AND "
                                   "type = 'violation' AND cpu = 0"),
                         3);
        assert_int_equal(db_int(d, "SELECT sum(value) FROM events"), 3 * 80000 + 3);
        assert_int_equal(db_int(d, "SELECT count(*) FROM interval_load_metrics "
                                   "WHERE name = 'ops' AND unit = 'ops/s' AND value = 1234.5"),
                         2);
        sql_close(d);

        json_t *m = get_machine(ID_A);
        assert_string_equal(json_string_value(json_object_get(m, "id")), ID_A);
        assert_string_equal(json_string_value(json_object_get(m, "kernel")), "6.6.15-rt22");
        assert_int_equal(tu_jint(m, "worst_latency_ns"), RUN1_WORST_NS);
        assert_int_equal(tu_jint(m, "threshold_ns"), 50000);
        assert_true(json_is_false(json_object_get(m, "gating")));
        assert_true(json_is_false(json_object_get(m, "revoked")));
        assert_true(tu_jint(m, "last_report_ns") > 0);
        json_t *latest = json_object_get(m, "latest_run");
        assert_int_equal(tu_jint(latest, "id"), 1);
        assert_int_equal(tu_jint(latest, "worst_latency_ns"), RUN1_WORST_NS);
        json_decref(m);

        /* The list has every enrolled machine; B has reported nothing. */
        struct tu_reply l = http("GET", "/api/v1/machines", NULL, NULL, 0);
        assert_int_equal(l.status, 200);
        json_t *all = tu_json(l.body);
        json_t *list = json_object_get(all, "machines");
        assert_int_equal(json_array_size(list), 3);
        json_t *b = json_array_get(list, 2);
        assert_string_equal(json_string_value(json_object_get(b, "id")), ID_B);
        assert_true(json_is_null(json_object_get(b, "last_report_ns")));
        assert_true(json_is_null(json_object_get(b, "worst_latency_ns")));
        assert_true(json_is_null(json_object_get(b, "kernel")));
        assert_true(json_is_true(json_object_get(b, "gating")));
        json_decref(all);
        tu_reply_done(&l);
}

/* The same upload again is stored once; an upload that overlaps a stored one stores only
 * what is new; a later run with a new kernel becomes the machine's current kernel, while its
 * worst latency stays the worst of all runs. */
/* Uploads the summary of spec with machine A's token and checks the answer: 200 "stored",
 * with so many new and already stored intervals and events. */
static void expect_stored(const struct tu_spec *spec, long long intervals, long long dup_intervals,
                          long long events, long long dup_events) {
        char *text = tu_summary_text(spec);
        struct tu_reply r = upload(token_a, text);
        assert_int_equal(r.status, 200);
        json_t *j = tu_json(r.body);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "stored");
        assert_int_equal(tu_jint(j, "intervals"), intervals);
        assert_int_equal(tu_jint(j, "duplicate_intervals"), dup_intervals);
        assert_int_equal(tu_jint(j, "events"), events);
        assert_int_equal(tu_jint(j, "duplicate_events"), dup_events);
        json_decref(j);
        tu_reply_done(&r);
        free(text);
}

static void test_duplicates_and_latest_run(void **state) {
        struct snapshot before;
        snapshot(&before);
        char *text = tu_summary_text(&run1);
        struct tu_reply r = upload(token_a, text);
        assert_int_equal(r.status, 200);
        json_t *j = tu_json(r.body);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "duplicate");
        assert_int_equal(tu_jint(j, "intervals"), 0);
        assert_int_equal(tu_jint(j, "events"), 0);
        json_decref(j);
        tu_reply_done(&r);
        free(text);
        for (size_t i = 0; i < NTABLES; i++) {
                struct snapshot after;
                snapshot(&after);
                assert_int_equal(after.rows[i], before.rows[i]);
        }

        /* Upload seq 1: interval 1 (stored) and interval 2 (new), events 3 (stored) and 4. */
        struct tu_spec overlap = run1;
        overlap.seq = 1;
        overlap.first_interval = 1;
        overlap.first_event = 3;
        overlap.nevents = 2;
        expect_stored(&overlap, 1, 1, 1, 1);
        assert_int_equal(rows("intervals"), 3);
        assert_int_equal(rows("interval_cpus"), 9);
        assert_int_equal(rows("events"), 4);
        assert_int_equal(rows("uploads"), 2);

        /* A retry under a known key that carries more than the first try (the uploader did not
         * hear our answer and its batch has grown since): the new interval is stored, the
         * known ones once. */
        struct tu_spec grown = run1;
        grown.nintervals = 4;
        expect_stored(&grown, 1, 3, 0, 3);
        assert_int_equal(rows("intervals"), 4);
        assert_int_equal(rows("uploads"), 2);

        /* Run 2, later, on a new kernel with lower latencies. */
        struct tu_spec run2 = run1;
        run2.run = 2;
        run2.kernel = "6.6.16-rt23";
        run2.start_ns = T0 + 3600 * INT64_C(1000000000);
        run2.nintervals = 1;
        run2.max_ns = 20000;
        text = tu_summary_text(&run2);
        r = upload(token_a, text);
        assert_int_equal(r.status, 200);
        tu_reply_done(&r);
        free(text);

        json_t *m = get_machine(ID_A);
        assert_string_equal(json_string_value(json_object_get(m, "kernel")), "6.6.16-rt23");
        /* Interval 3 of run 1, CPU 2, is the worst of all. */
        assert_int_equal(tu_jint(m, "worst_latency_ns"), 80000 + 3000 + 20);
        json_t *latest = json_object_get(m, "latest_run");
        assert_int_equal(tu_jint(latest, "id"), 2);
        assert_int_equal(tu_jint(latest, "worst_latency_ns"), 20000 + 20);
        assert_string_equal(json_string_value(json_object_get(latest, "kernel_release")),
                            "6.6.16-rt23");
        json_decref(m);

        /* Run 1 again under another boot id: the run's identity does not change. */
        struct snapshot mid;
        snapshot(&mid);
        struct tu_spec again = run1;
        again.seq = 9;
        again.first_interval = 9;
        text = tu_summary_text(&again);
        char *other = replace(text, "fedcba9876543210fedcba9876543210",
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        r = upload(token_a, other);
        expect_error(&r, 409, "run.boot_id");
        tu_reply_done(&r);
        free(other);
        free(text);
        assert_unchanged(&mid, "a conflicting run");
}

/* Uploads sent at the same time over many connections are all stored, and the same upload
 * sent twice at once is stored once: one "stored", one "duplicate". */
static void test_concurrent_uploads(void **state) {
        enum { N = 16 };
        CURL *easy[N + 1];
        struct tu_reply replies[N + 1] = {};
        char *texts[N + 1];
        struct curl_slist *headers = NULL;
        char url[256], auth[128];
        long long intervals_before = rows("intervals"), uploads_before = rows("uploads");

        snprintf(url, sizeof(url), "%s/api/v1/summaries", base_url);
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token_a);
        headers = curl_slist_append(headers, auth);
        CURLM *multi = curl_multi_init();
        assert_non_null(multi);
        for (int i = 0; i <= N; i++) {
                struct tu_spec p = run1;
                p.run = 3;
                p.start_ns = T0 + 7200 * INT64_C(1000000000);
                /* The last one repeats the first. */
                p.seq = (uint64_t) (i < N ? i : 0);
                p.first_interval = p.seq;
                p.nintervals = 1;
                p.first_event = 100 + p.seq;
                p.nevents = 1;
                texts[i] = tu_summary_text(&p);
                easy[i] = curl_easy_init();
                curl_easy_setopt(easy[i], CURLOPT_URL, url);
                curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, texts[i]);
                curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, headers);
                curl_easy_setopt(easy[i], CURLOPT_TIMEOUT, 20L);
                curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, tu_http_on_body);
                curl_easy_setopt(easy[i], CURLOPT_WRITEDATA, &replies[i]);
                curl_multi_add_handle(multi, easy[i]);
                requests++;
        }
        int running = 1;
        while (running) {
                assert_int_equal(curl_multi_perform(multi, &running), CURLM_OK);
                if (running)
                        curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }
        int stored = 0, duplicate = 0;
        for (int i = 0; i <= N; i++) {
                curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &replies[i].status);
                if (replies[i].status != 200)
                        fail_msg("upload %d: %ld %s", i, replies[i].status, replies[i].body ?: "");
                json_t *j = tu_json(replies[i].body);
                const char *st = json_string_value(json_object_get(j, "status"));
                if (i == 0 || i == N) {
                        stored += strcmp(st, "stored") == 0;
                        duplicate += strcmp(st, "duplicate") == 0;
                } else
                        assert_string_equal(st, "stored");
                json_decref(j);
                curl_multi_remove_handle(multi, easy[i]);
                curl_easy_cleanup(easy[i]);
                tu_reply_done(&replies[i]);
                free(texts[i]);
        }
        curl_multi_cleanup(multi);
        curl_slist_free_all(headers);
        assert_int_equal(stored, 1);
        assert_int_equal(duplicate, 1);
        assert_int_equal(rows("intervals"), intervals_before + N);
        assert_int_equal(rows("uploads"), uploads_before + N);
}

/* Group commit: uploads sent at once over many connections share commits, and each is still
 * stored exactly once and on its own: the same upload twice in one batch is stored once, and an
 * upload refused inside a batch (a conflicting run) undoes only itself.  Its own server, so
 * that the rate limit does not get in the way and the commit count can be read at the stop. */
static void test_group_commit(void **state) {
        enum { NEW = 40, DUP = 8, CONFLICT = 4, N = NEW + DUP + CONFLICT };
        char db2[600], log2[600], url[128], tok[80], auth[128], target[256];
        CURL *easy[N];
        struct tu_reply replies[N] = {};
        char *texts[N];

        tu_farm_target(dir, "group", db2, sizeof(db2));
        snprintf(log2, sizeof(log2), "%s/group.log", dir);
        enroll(db2, ID_A, NULL, NULL, tok);
        /* All N at once from one address: more than the default per address. */
        const char *extra[] = { "--rate=100000", "--burst=100000",
                                "--set=Server.ConnectionsPerAddress=100", NULL };
        pid_t pid = start_server(db2, log2, extra, url, sizeof(url));
        snprintf(auth, sizeof(auth), "Bearer %s", tok);
        snprintf(target, sizeof(target), "%s/api/v1/summaries", url);

        /* Run 6 is stored first, so that the uploads claiming another boot id for it are
         * refused whenever they come. */
        struct tu_spec p6 = run1;
        p6.run = 6;
        p6.nintervals = 1;
        p6.nevents = 1;
        char *text6 = tu_summary_text(&p6);
        struct tu_reply r = http_at(url, NULL, "POST", "/api/v1/summaries", auth, text6,
                                    strlen(text6));
        assert_int_equal(r.status, 200);
        tu_reply_done(&r);

        struct curl_slist *headers = NULL;
        char header[160];
        snprintf(header, sizeof(header), "Authorization: %s", auth);
        headers = curl_slist_append(headers, header);
        headers = curl_slist_append(headers, "Expect:");
        CURLM *multi = curl_multi_init();
        assert_non_null(multi);
        for (int i = 0; i < N; i++) {
                if (i < NEW + DUP) {
                        /* Run 5: NEW uploads, then the first DUP of them again. */
                        struct tu_spec p = run1;
                        p.run = 5;
                        p.start_ns = T0 + 3 * 3600 * INT64_C(1000000000);
                        p.seq = (uint64_t) (i < NEW ? i : i - NEW);
                        p.first_interval = p.seq;
                        p.nintervals = 1;
                        p.first_event = 1 + p.seq;
                        p.nevents = 1;
                        texts[i] = tu_summary_text(&p);
                } else {
                        struct tu_spec p = p6;
                        p.seq = p.first_interval = (uint64_t) (i - NEW - DUP + 1);
                        char *t = tu_summary_text(&p);
                        texts[i] = replace(t, "fedcba9876543210fedcba9876543210",
                                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
                        free(t);
                }
                easy[i] = curl_easy_init();
                curl_easy_setopt(easy[i], CURLOPT_URL, target);
                curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, texts[i]);
                curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, headers);
                curl_easy_setopt(easy[i], CURLOPT_TIMEOUT, 20L);
                curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, tu_http_on_body);
                curl_easy_setopt(easy[i], CURLOPT_WRITEDATA, &replies[i]);
                curl_multi_add_handle(multi, easy[i]);
        }
        int running = 1;
        while (running) {
                assert_int_equal(curl_multi_perform(multi, &running), CURLM_OK);
                if (running)
                        curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }

        int stored[NEW] = {}, duplicate[NEW] = {}, answered_200 = 1; /* run 6 */
        for (int i = 0; i < N; i++) {
                curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &replies[i].status);
                if (i >= NEW + DUP)
                        expect_error(&replies[i], 409, "run.boot_id");
                else {
                        if (replies[i].status != 200)
                                fail_msg("upload %d: %ld %s", i, replies[i].status,
                                         replies[i].body ?: "");
                        json_t *j = tu_json(replies[i].body);
                        const char *st = json_string_value(json_object_get(j, "status"));
                        int seq = i < NEW ? i : i - NEW;
                        stored[seq] += strcmp(st, "stored") == 0;
                        duplicate[seq] += strcmp(st, "duplicate") == 0;
                        json_decref(j);
                        answered_200++;
                }
                curl_multi_remove_handle(multi, easy[i]);
                curl_easy_cleanup(easy[i]);
                tu_reply_done(&replies[i]);
                free(texts[i]);
        }
        curl_multi_cleanup(multi);
        curl_slist_free_all(headers);
        free(text6);
        for (int seq = 0; seq < NEW; seq++) {
                assert_int_equal(stored[seq], 1);
                assert_int_equal(duplicate[seq], seq < DUP ? 1 : 0);
        }

        sql_conn *d = tu_farm_open(db2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals"), NEW + 1);
        assert_int_equal(db_int(d, "SELECT count(*) FROM uploads"), NEW + 1);
        assert_int_equal(db_int(d, "SELECT count(*) FROM events"), NEW + 1);
        assert_int_equal(db_int(d, "SELECT count(*) FROM interval_cpus"), 3 * (NEW + 1));
        assert_int_equal(db_int(d, "SELECT count(DISTINCT seq) FROM intervals i JOIN runs r "
                                   "ON i.run = r.id WHERE r.run_id = 5"),
                         NEW);
        assert_int_equal(db_int(d, "SELECT count(*) FROM runs WHERE run_id = 6 AND boot_id = "
                                   "'fedcba9876543210fedcba9876543210'"),
                         1);
        sql_close(d);

        /* Every upload answered 200 was in a commit, and none was answered before it. */
        assert_int_equal(stop_server(pid), 0);
        char *log = tu_read_file(log2);
        const char *at = strstr(log, "Stored ");
        assert_non_null(at);
        unsigned long long uploads = 0, commits = 0;
        assert_int_equal(sscanf(at, "Stored %llu uploads in %llu commits", &uploads, &commits), 2);
        assert_int_equal(uploads, answered_200);
        assert_true(commits >= 1 && commits <= uploads);
        free(log);
}

struct bad {
        const char *name;
        const char *from, *to; /* replaced in the valid summary of machine A */
        const char *auth;      /* NULL: none, "A"/"B"/"C": that machine's token */
        long status;
        const char *msg;
};

/* Every refused upload answers the right status and says why, and changes nothing. */
static void test_bad_uploads(void **state) {
        static const struct bad cases[] = {
                { "malformed JSON", "}]}", "}]", "A", 400, "malformed JSON" },
                { "not an object", NULL, "[1,2]", "A", 400, "not a JSON object" },
                { "wrong type", "\"cpus\":3", "\"cpus\":\"3\"", "A", 400,
                  "machine.cpus: not an integer" },
                { "missing field", "\"boot_id\":\"fedcba9876543210fedcba9876543210\",", "", "A",
                  400, "run.boot_id: missing" },
                { "unknown field", "\"seq\":5,", "\"seq\":5,\"extra\":1,", "A", 400,
                  "extra: unknown field" },
                { "unknown schema version", "rtsoak.summary/1", "rtsoak.summary/2", "A", 400,
                  "schema: unsupported version" },
                { "deep field", "\"max_ns\":85000", "\"max_ns\":1", "A", 400,
                  "intervals[0].cpus[0]" },
                { "no token", NULL, NULL, NULL, 401, "missing, invalid or revoked token" },
                { "not bearer", NULL, NULL, "Basic dXNlcjpwYXNz", 401,
                  "missing, invalid or revoked token" },
                { "malformed token", NULL, NULL, "Bearer 1234", 401,
                  "missing, invalid or revoked token" },
                { "unknown token", NULL, NULL,
                  "Bearer 00000000000000000000000000000000000000000000000000000000000000ff", 401,
                  "missing, invalid or revoked token" },
                { "another machine's token", NULL, NULL, "B", 403, "machine.id" },
        };
        struct tu_spec p = run1;
        p.seq = 5;
        p.first_interval = 5;
        p.first_event = 50;
        char *valid = tu_summary_text(&p);
        struct snapshot before;
        snapshot(&before);

        for (size_t i = 0; i < ELEMENTS(cases); i++) {
                const struct bad *c = &cases[i];
                char *text = c->from ? replace(valid, c->from, c->to)
                                     : strdup(c->to ? c->to : valid);
                const char *auth = c->auth;
                if (auth && strcmp(auth, "A") == 0)
                        auth = bearer(token_a);
                else if (auth && strcmp(auth, "B") == 0)
                        auth = bearer(token_b);
                struct tu_reply r = http("POST", "/api/v1/summaries", auth, text, strlen(text));
                if (r.status != c->status || !strstr(error_of(&r), c->msg))
                        fail_msg("%s: expected %ld '%s', got %ld %s", c->name, c->status, c->msg,
                                 r.status, r.body);
                tu_reply_done(&r);
                free(text);
                assert_unchanged(&before, c->name);
        }

        /* Over the size limit: refused from its Content-Length, without reading it. */
        size_t big = (size_t) 17 << 20;
        char *huge = malloc(big);
        memset(huge, ' ', big);
        struct tu_reply r = http("POST", "/api/v1/summaries", bearer(token_a), huge, big);
        expect_error(&r, 413, "over the limit");
        tu_reply_done(&r);
        assert_unchanged(&before, "an oversized body");

        /* The same without a Content-Length (chunked): the connection is closed once the body
         * passes the limit, without an answer, and the server goes on. */
        CURL *c = curl_easy_init();
        struct curl_slist *headers = NULL;
        char url[256], auth[128];
        snprintf(url, sizeof(url), "%s/api/v1/summaries", base_url);
        snprintf(auth, sizeof(auth), "Authorization: %s", bearer(token_a));
        headers = curl_slist_append(headers, auth);
        headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, huge);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) big);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tu_http_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (rc == CURLE_OK && status >= 200)
                fail_msg("chunked oversized body answered %ld %s", status, r.body ?: "");
        requests++;
        tu_reply_done(&r);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        free(huge);
        assert_unchanged(&before, "an oversized chunked body");

        /* A revoked token is refused exactly like an unknown one. */
        struct tu_reply unknown = http("POST", "/api/v1/summaries",
                                       "Bearer 0000000000000000000000000000000000000000000000000000"
                                       "0000000000ee",
                                       valid, strlen(valid));
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db_path);
        char *revoke[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "revoke", ID_C, NULL };
        run_server(revoke, "Revoked", 0);
        snapshot(&before);
        char *for_c = replace(valid, ID_A, ID_C);
        r = upload(token_c, for_c);
        expect_error(&r, 401, "missing, invalid or revoked token");
        assert_int_equal(unknown.status, 401);
        assert_string_equal(r.body, unknown.body);
        tu_reply_done(&r);
        tu_reply_done(&unknown);
        assert_unchanged(&before, "a revoked token");
        json_t *m = get_machine(ID_C);
        assert_true(json_is_true(json_object_get(m, "revoked")));
        json_decref(m);

        /* Enrolling again gives a new token; the old one stays refused. */
        char fresh[80];
        enroll(db_path, ID_C, NULL, NULL, fresh);
        r = upload(token_c, for_c);
        assert_int_equal(r.status, 401);
        tu_reply_done(&r);
        r = upload(fresh, for_c);
        if (r.status != 200)
                fail_msg("re-keyed token: %ld %s", r.status, r.body);
        tu_reply_done(&r);
        free(for_c);
        free(valid);
}

static void test_query_errors(void **state) {
        struct tu_reply r = http("GET", "/api/v1/machines/" ID_UNKNOWN, NULL, NULL, 0);
        expect_error(&r, 404, "no such machine");
        tu_reply_done(&r);
        r = http("GET", "/api/v1/machines/not-a-machine-id", NULL, NULL, 0);
        expect_error(&r, 404, "no such machine");
        tu_reply_done(&r);
        r = http("GET", "/api/v2/elsewhere", NULL, NULL, 0);
        expect_error(&r, 404, "no such resource");
        tu_reply_done(&r);
        r = http("DELETE", "/api/v1/machines/" ID_A, NULL, NULL, 0);
        expect_error(&r, 405, "method not allowed");
        assert_string_equal(r.allow, "GET, HEAD");
        tu_reply_done(&r);
        r = http("GET", "/api/v1/summaries", bearer(token_a), NULL, 0);
        expect_error(&r, 405, "method not allowed");
        assert_string_equal(r.allow, "POST");
        tu_reply_done(&r);
        r = http("POST", "/api/v1/machines", NULL, "{}", 2);
        expect_error(&r, 405, "method not allowed");
        tu_reply_done(&r);
}

/* A machine that sends faster than its bucket refills is told when to come back; another
 * machine is not affected, and the refused request stores nothing. */
static void test_rate_limit(void **state) {
        char db2[600], log2[600], url[128], tok_a[80], tok_b[80];
        tu_farm_target(dir, "rate", db2, sizeof(db2));
        snprintf(log2, sizeof(log2), "%s/rate.log", dir);
        enroll(db2, ID_A, NULL, NULL, tok_a);
        enroll(db2, ID_B, NULL, NULL, tok_b);
        const char *extra[] = { "--rate=0.01", "--burst=3", NULL };
        pid_t pid = start_server(db2, log2, extra, url, sizeof(url));
        char auth_a[128], auth_b[128];
        snprintf(auth_a, sizeof(auth_a), "Bearer %s", tok_a);
        snprintf(auth_b, sizeof(auth_b), "Bearer %s", tok_b);
        char *text = tu_summary_text(&run1);
        for (int i = 0; i < 3; i++) {
                struct tu_reply r = http_at(url, NULL, "POST", "/api/v1/summaries", auth_a, text,
                                            strlen(text));
                assert_int_equal(r.status, 200);
                tu_reply_done(&r);
        }
        struct tu_reply r = http_at(url, NULL, "POST", "/api/v1/summaries", auth_a, text,
                                    strlen(text));
        expect_error(&r, 429, "too many requests");
        assert_true(atoi(r.retry_after) >= 1);
        tu_reply_done(&r);
        /* B's own bucket is full: its first request goes through (and is refused for the
         * machine id, which proves it got past the limit). */
        r = http_at(url, NULL, "POST", "/api/v1/summaries", auth_b, text, strlen(text));
        assert_int_equal(r.status, 403);
        tu_reply_done(&r);
        free(text);
        assert_int_equal(stop_server(pid), 0);
}

/* Errors of the command line: a port in use, unreadable TLS files, a bad address. */
static void test_command_line_errors(void **state) {
        char dbarg[600], listen[128], other[512];
        tu_farm_target(dir, "other", other, sizeof(other));
        snprintf(dbarg, sizeof(dbarg), "--db=%s", other);
        snprintf(listen, sizeof(listen), "--listen=%s", base_url + strlen("http://"));
        char *in_use[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, listen, NULL };
        run_server(in_use, "Address already in use", 69);
        char *no_cert[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg,
                            "--listen=127.0.0.1:0",           "--cert=/nonexistent/cert.pem",
                            "--key=/nonexistent/key.pem",     NULL };
        run_server(no_cert, "Cannot read the certificate '/nonexistent/cert.pem'", 78);
        char *half_tls[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "--cert=/dev/null", NULL };
        run_server(half_tls, "--cert and --key go together", 78);
        char *bad_listen[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "--listen=localhost",
                               NULL };
        run_server(bad_listen, "Invalid --listen 'localhost'", 78);
        char *bad_cmd[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "frobnicate", NULL };
        run_server(bad_cmd, "Unknown command 'frobnicate'", 64);
        char *not_ours[] = { (char *) tu_bin("RTSOAK_SERVER"), "--db=/dev/null", "enroll", ID_A,
                             NULL };
        run_server(not_ours, "Cannot open the farm database", 1);

        /* The configuration file: errors name the file and line; its settings apply, and the
         * options override them. */
        char conf[600], confarg[700], db2[600], log2[600], url2[128];
        snprintf(conf, sizeof(conf), "%s/server.conf", dir);
        snprintf(confarg, sizeof(confarg), "--config=%s", conf);
        FILE *f = fopen(conf, "we");
        fputs("[Server]\n# one key misspelt\nThreds=2\n", f);
        fclose(f);
        char *bad_conf[] = { (char *) tu_bin("RTSOAK_SERVER"), confarg, NULL };
        snprintf(db2, sizeof(db2),
                 "server.conf:3: unknown key Threds= in section [Server] (did "
                 "you mean Threads=?)");
        run_server(bad_conf, db2, 78);
        char *missing_conf[] = { (char *) tu_bin("RTSOAK_SERVER"), "--config=/nonexistent.conf",
                                 NULL };
        run_server(missing_conf, "/nonexistent.conf: cannot open", 78);
        tu_farm_target(dir, "conf", db2, sizeof(db2));
        snprintf(log2, sizeof(log2), "%s/conf.log", dir);
        f = fopen(conf, "we");
        fprintf(f, "[Server]\nDatabase=%s\nThreads=3\nListen=127.0.0.1:1\n", db2);
        fclose(f);
        const char *extra[] = { confarg, NULL };
        /* --listen (given by the helper) overrides Listen=. */
        pid_t pid = tu_server_start(db2, log2, "127.0.0.1:0", extra, url2, sizeof(url2));
        char *text = tu_read_file(log2);
        char want[700];
        snprintf(want, sizeof(want), "(database %s, 3 threads)", db2);
        if (!strstr(text, want))
                fail_msg("expected '%s' in: %s", want, text);
        free(text);
        assert_int_equal(stop_server(pid), 0);
}

/* HTTPS with a certificate made here, verified by the client. */
static void test_tls(void **state) {
        char cert[600], key[600], db2[600], log2[600], url[128];
        snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
        snprintf(key, sizeof(key), "%s/key.pem", dir);
        tu_make_cert(cert, key);
        tu_farm_target(dir, "tls", db2, sizeof(db2));
        snprintf(log2, sizeof(log2), "%s/tls.log", dir);
        char certarg[700], keyarg[700];
        snprintf(certarg, sizeof(certarg), "--cert=%s", cert);
        snprintf(keyarg, sizeof(keyarg), "--key=%s", key);
        const char *extra[] = { certarg, keyarg, NULL };
        pid_t pid = start_server(db2, log2, extra, url, sizeof(url));
        assert_int_equal(strncmp(url, "https://", 8), 0);
        struct tu_reply r = http_at(url, cert, "GET", "/api/v1/machines", NULL, NULL, 0);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"machines\":[]"));
        tu_reply_done(&r);
        assert_int_equal(stop_server(pid), 0);
}

/* A trace capture of the run run_id due at t, with raw events. */
static void add_trace(sql_conn *d, int64_t run_id, int64_t t) {
        sql_stmt *st = NULL;
        assert_int_equal(sql_prepare_once(d,
                                          "INSERT INTO traces (run, seq, cpu, time_ns, latency_ns, "
                                          "summary, culprit_kind, culprit_name, culprit_pid, "
                                          "culprit_ns, analysis, raw) SELECT id, 0, 0, ?2, "
                                          "500000, 'thread x (pid 1) ran 400 µs of the 500 µs', "
                                          "'thread', 'x', 1, 400000, '{}', ?3 FROM runs WHERE "
                                          "run_id = ?1",
                                          &st),
                         0);
        sql_bind_int64(st, 1, run_id);
        sql_bind_int64(st, 2, t);
        sql_bind_blob(st, 3, "raw", 3);
        assert_int_equal(sql_step_done(st), 0);
        assert_int_equal(sql_changes(st), 1);
        sql_finalize(st);
}

/* Posts p (with run, start and measured as given) to the server at url. */
static void post_spec(const char *url, const char *auth, struct tu_spec p) {
        char *text = tu_summary_text(&p);
        struct tu_reply r = http_at(url, NULL, "POST", "/api/v1/summaries", auth, text,
                                    strlen(text));
        if (r.status != 200)
                fail_msg("POST run %" PRId64 ": %ld %s", p.run, r.status, r.body);
        tu_reply_done(&r);
        free(text);
}

/* Retention: prune drops the intervals of whole months before the one given (on PostgreSQL
 * their partitions), keeps the day rollups and the runs, and the trace captures of those months
 * without their raw events; data of a dropped month that arrives afterwards is stored again.
 * What the verdict reads interval by interval stays: a violation, a day whose probes did not
 * measure.  A --before inside the verdict's period and a month is refused. */
static void test_retention(void **state) {
        char db2[600], log2[600], url[128], tok[80], auth[128], before[64], dbarg[700];
        tu_farm_target(dir, "retention", db2, sizeof(db2));
        snprintf(log2, sizeof(log2), "%s/retention.log", dir);
        enroll(db2, ID_A, NULL, NULL, tok);
        const char *extra[] = { "--rate=100000", "--burst=100000", NULL };
        pid_t pid = start_server(db2, log2, extra, url, sizeof(url));
        snprintf(auth, sizeof(auth), "Bearer %s", tok);
        /* 2026-06-15, 2026-07-15 and 2026-08-14, two measured intervals each (runs 10-12);
         * in June also run 13 with a latency over the bound and run 14 whose probes delivered
         * 1000 wake-ups a minute (both kept). */
        const int64_t day = 86400 * INT64_C(1000000000), jun15 = INT64_C(1781481600) * 1000000000;
        for (int m = 0; m < 3; m++) {
                struct tu_spec p = run1;
                p.run = 10 + m;
                p.start_ns = jun15 + m * 30 * day;
                p.nevents = 0;
                p.measured = true;
                post_spec(url, auth, p);
        }
        struct tu_spec over = run1, unmeasured = run1;
        over.run = 13;
        over.start_ns = unmeasured.start_ns = jun15 + 3600 * INT64_C(1000000000);
        over.nevents = unmeasured.nevents = 0;
        over.measured = true;
        over.max_ns = 150000;
        unmeasured.run = 14;
        unmeasured.start_ns += 7200 * INT64_C(1000000000);
        post_spec(url, auth, over);
        post_spec(url, auth, unmeasured);
        sql_conn *d = tu_farm_open(db2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals"), 10);
        assert_int_equal(db_int(d, "SELECT count(*) FROM run_days"), 5);
        long long samples = db_int(d, "SELECT sum(samples) FROM interval_cpus");
        add_trace(d, 10, jun15 + 1000);
        add_trace(d, 12, jun15 + 60 * day + 1000);
        sql_close(d);

        snprintf(dbarg, sizeof(dbarg), "--db=%s", db2);
        char *recent[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "prune", "--before=now", NULL };
        run_server(recent, "inside the verdict's Period=30d and a month", 64);
        /* Before 2026-08-20: June and July go, August stays; June's runs 13 and 14 stay. */
        snprintf(before, sizeof(before), "--before=2026-08-20T00:00:00Z");
        char *prune[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "prune", before, NULL };
        run_server(prune, tu_pg() ? "Dropped 1 month(s)" : "4 intervals", 0);
        d = tu_farm_open(db2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals"), 6);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals i JOIN runs r ON r.id = i.run "
                                   "WHERE r.run_id IN (13, 14)"),
                         4);
        assert_int_equal(db_int(d, "SELECT count(*) FROM interval_cpus"), 6 * 3);
        assert_int_equal(db_int(d, "SELECT count(*) FROM interval_loads"), 6);
        assert_int_equal(db_int(d, "SELECT count(*) FROM run_days"), 5);
        assert_int_equal(db_int(d, "SELECT count(*) FROM runs"), 5);
        /* Every day keeps its histograms of each CPU, those of the months that went too (the
         * machine page reads them there): runs 10 to 14. */
        assert_int_equal(db_int(d, "SELECT count(DISTINCT run) FROM hist_days"), 5);
        assert_int_equal(db_int(d, "SELECT sum(samples) FROM hist_days"), samples);
        assert_int_equal(db_int(d, "SELECT count(*) FROM traces"), 2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM traces WHERE raw IS NOT NULL AND "
                                   "time_ns > 1785542400000000000"),
                         1);
        assert_int_equal(db_int(d, "SELECT count(*) FROM traces WHERE raw IS NOT NULL"), 1);
        if (tu_pg())
                assert_int_equal(db_int(d, "SELECT count(*) FROM pg_tables WHERE tablename IN "
                                           "('intervals_p202607', 'interval_cpus_p202607')"),
                                 0);
        sql_close(d);

        /* A late interval of July: its partition is made again by the running server. */
        struct tu_spec p = run1;
        p.run = 11;
        p.start_ns = jun15 + 30 * day;
        p.seq = p.first_interval = 5;
        p.nintervals = 1;
        p.nevents = 0;
        p.measured = true;
        post_spec(url, auth, p);
        assert_int_equal(stop_server(pid), 0);
        d = tu_farm_open(db2);
        assert_int_equal(db_int(d, "SELECT count(*) FROM intervals"), 7);
        sql_close(d);
        char *none[] = { (char *) tu_bin("RTSOAK_SERVER"), dbarg, "prune", NULL };
        run_server(none, "prune needs --before TIME", 64);
}

/* SIGTERM stops the server cleanly, after one log line for every request it answered. */
static void test_stop_and_request_log(void **state) {
        assert_int_equal(stop_server(server_pid), 0);
        server_pid = 0;
        char *log = tu_read_file(log_path);
        size_t lines = tu_count_lines(log, "rtsoak-server: request ");
        if (lines != requests)
                fail_msg("%zu request log lines for %u requests:\n%s", lines, requests, log);
        assert_non_null(strstr(log, "method=POST path=/api/v1/summaries status=200 in="));
        assert_non_null(strstr(log, "machine=" ID_A));
        assert_non_null(strstr(log, "remote=127.0.0.1:"));
        assert_non_null(strstr(log, "status=413 in=0 "));
        /* The chunked one: refused after the limit, not after the whole body. */
        const char *chunked = strstr(log, "status=413 in=1");
        assert_non_null(chunked);
        assert_true(strtoull(chunked + strlen("status=413 in="), NULL, 10) <=
                    ((size_t) 16 << 20) + 256 * 1024);
        assert_non_null(strstr(log, "Stopping on"));
        free(log);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_enroll),
                cmocka_unit_test(test_upload_stored),
                cmocka_unit_test(test_duplicates_and_latest_run),
                cmocka_unit_test(test_concurrent_uploads),
                cmocka_unit_test(test_group_commit),
                cmocka_unit_test(test_bad_uploads),
                cmocka_unit_test(test_query_errors),
                cmocka_unit_test(test_rate_limit),
                cmocka_unit_test(test_command_line_errors),
                cmocka_unit_test(test_tls),
                cmocka_unit_test(test_retention),
                cmocka_unit_test(test_stop_and_request_log),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
