/* SPDX-License-Identifier: MIT */
/* Unit tests of the farm server's parts: the Authorization header, new tokens, machine ids
 * the per-machine token bucket, the verdict's rule, the query parameters and the query
 * API's step, percentile, regression and label helpers. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"
#include "macro.h"
#include "auth.h"
#include "db.h"
#include "params.h"
#include "metrics.h"
#include "query.h"
#include "comparison.h"
#include "histogram.h"
#include "steps.h"
#include "ratelimit.h"
#include "settings.h"
#include "encode-verdict.h"
#include "verdict.h"

#define TOKEN "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void test_authorization_header(void **state) {
        static const struct {
                const char *header;
                int r;
        } cases[] = {
                { "Bearer " TOKEN, 0 },
                { "bearer " TOKEN, 0 },
                { "Bearer   " TOKEN "  ", 0 },
                { NULL, -EINVAL },
                { "", -EINVAL },
                { "Bearer", -EINVAL },
                { "Bearer ", -EINVAL },
                { "Basic " TOKEN, -EINVAL },
                { "Bearer" TOKEN, -EINVAL },
                { "Bearer " TOKEN "0", -EINVAL },
                { "Bearer 00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
                  -EINVAL },
                { "Bearer 0011223344556677 899aabbccddeeff00112233445566778899aabbccddeeff0",
                  -EINVAL },
        };
        uint8_t expected[SHA256_DIGEST_SIZE], got[SHA256_DIGEST_SIZE];
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_update(&c, TOKEN, strlen(TOKEN));
        sha256_final(&c, expected);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                memset(got, 0, sizeof(got));
                int r = farm_token_from_header(cases[i].header, got);
                if (r != cases[i].r)
                        fail_msg("'%s': %d, expected %d", cases[i].header ?: "(null)", r,
                                 cases[i].r);
                if (r == 0)
                        assert_memory_equal(got, expected, sizeof(got));
        }
}

static void test_new_tokens(void **state) {
        char a[FARM_TOKEN_LEN + 1], b[FARM_TOKEN_LEN + 1], header[128];
        uint8_t ha[SHA256_DIGEST_SIZE], hb[SHA256_DIGEST_SIZE], parsed[SHA256_DIGEST_SIZE];
        assert_int_equal(farm_token_new(a, ha), 0);
        assert_int_equal(farm_token_new(b, hb), 0);
        assert_int_equal(strlen(a), FARM_TOKEN_LEN);
        assert_string_not_equal(a, b);
        assert_memory_not_equal(ha, hb, sizeof(ha));
        /* What enroll stores is what an upload with the token is checked against. */
        snprintf(header, sizeof(header), "Bearer %s", a);
        assert_int_equal(farm_token_from_header(header, parsed), 0);
        assert_memory_equal(parsed, ha, sizeof(ha));
}

static void test_machine_ids(void **state) {
        assert_true(farm_machine_id_valid("0123456789abcdef0123456789abcdef"));
        assert_false(farm_machine_id_valid("0123456789ABCDEF0123456789abcdef"));
        assert_false(farm_machine_id_valid("0123456789abcdef0123456789abcde"));
        assert_false(farm_machine_id_valid("0123456789abcdef0123456789abcdef0"));
        assert_false(farm_machine_id_valid("0123456789abcdef/123456789abcdef"));
        assert_false(farm_machine_id_valid(""));
}

static void test_token_bucket(void **state) {
        farm_ratelimit *rl;
        const int64_t s = 1000000000;
        assert_int_equal(farm_ratelimit_new(0, 1, &rl), -EINVAL);
        assert_int_equal(farm_ratelimit_new(1, 0, &rl), -EINVAL);
        assert_int_equal(farm_ratelimit_new(0.5, 3, &rl), 0);

        /* A full bucket of 3, then one request per 2 s. */
        for (int i = 0; i < 3; i++)
                assert_int_equal(farm_ratelimit_take(rl, "a", 10 * s), 0);
        assert_int_equal(farm_ratelimit_take(rl, "a", 10 * s), 2);
        assert_int_equal(farm_ratelimit_take(rl, "a", 11 * s), 1);
        assert_int_equal(farm_ratelimit_take(rl, "a", 12 * s), 0);
        assert_int_equal(farm_ratelimit_take(rl, "a", 12 * s), 2);
        /* Another key has its own bucket. */
        assert_int_equal(farm_ratelimit_take(rl, "b", 12 * s), 0);
        /* A long pause refills to the burst, not beyond. */
        for (int i = 0; i < 3; i++)
                assert_int_equal(farm_ratelimit_take(rl, "a", 1000 * s), 0);
        assert_true(farm_ratelimit_take(rl, "a", 1000 * s) > 0);
        /* Time going backwards does not add tokens. */
        assert_true(farm_ratelimit_take(rl, "a", 5 * s) > 0);
        farm_ratelimit_free(rl);
}

static void test_rule_scenarios(void **state) {
        struct farm_rule rule;
        char err[256];

        farm_rule_default(&rule);
        assert_int_equal(rule.nscenarios, 6);
        assert_string_equal(rule.scenarios[5].name, "mixed");
        assert_true(rule.scenarios[0].min_ns == 86400 * NSEC_PER_SEC);
        assert_true(rule.period_ns == 30 * 86400 * NSEC_PER_SEC);
        assert_true(rule.max_gap_ns == 15 * 60 * NSEC_PER_SEC);

        assert_int_equal(farm_rule_parse_scenarios(" idle 1d,cpu 1d 12h , net 30min", &rule, err,
                                                   sizeof(err)),
                         0);
        assert_int_equal(rule.nscenarios, 3);
        assert_string_equal(rule.scenarios[1].name, "cpu");
        assert_true(rule.scenarios[1].min_ns == 36 * 3600 * NSEC_PER_SEC);
        assert_true(rule.scenarios[2].min_ns == 30 * 60 * NSEC_PER_SEC);
        assert_int_equal(farm_rule_parse_scenarios("none", &rule, err, sizeof(err)), 0);
        assert_int_equal(rule.nscenarios, 0);
        assert_int_equal(farm_rule_parse_scenarios("", &rule, err, sizeof(err)), 0);
        assert_int_equal(rule.nscenarios, 0);

        static const struct {
                const char *text, *msg;
        } bad[] = {
                { "idle", "expected \"SCENARIO MINIMUM\"" },
                { "idle 1d, idle 2d", "listed twice" },
                { "idle 0", "longer than 0" },
                { "idle 5 parsecs", "5 parsecs" },
                { "idle 1d,, cpu 1d", "expected" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = '\0';
                assert_int_equal(farm_rule_parse_scenarios(bad[i].text, &rule, err, sizeof(err)),
                                 -EINVAL);
                if (!strstr(err, bad[i].msg))
                        fail_msg("%s: '%s' lacks '%s'", bad[i].text, err, bad[i].msg);
        }
}

static void test_params(void **state) {
        char err[FARM_PARAM_ERROR_MAX];
        int64_t t = 7;
        uint64_t u = 9;
        struct farm_page p;

        assert_int_equal(farm_param_time("at", NULL, 0, &t, err), 0);
        assert_int_equal(t, 7);
        assert_int_equal(farm_param_time("at", "2026-12-03T00:00:00Z", 0, &t, err), 0);
        assert_true(t == INT64_C(1796256000) * 1000000000);
        assert_int_equal(farm_param_time("at", "1796256000000000001", 0, &t, err), 0);
        assert_true(t == INT64_C(1796256000000000001));
        assert_int_equal(farm_param_time("from", "tuesday", 0, &t, err), -EINVAL);
        assert_non_null(strstr(err, "from=tuesday"));
        assert_int_equal(farm_param_span("step", "5min", &u, err), 0);
        assert_true(u == 300 * NSEC_PER_SEC);
        assert_int_equal(farm_param_span("step", "0", &u, err), -EINVAL);
        assert_non_null(strstr(err, "step=0"));
        assert_int_equal(farm_param_uint("cpu", "-1", 0, 10, &u, err), -EINVAL);
        assert_int_equal(farm_param_uint("cpu", "11", 0, 10, &u, err), -ERANGE);
        assert_non_null(strstr(err, "0..10"));
        assert_int_equal(farm_param_page(NULL, NULL, &p, err), 0);
        assert_int_equal(p.limit, FARM_PAGE_LIMIT_DEFAULT);
        assert_int_equal(p.offset, 0);
        assert_int_equal(farm_param_page("0", NULL, &p, err), -ERANGE);
        assert_non_null(strstr(err, "limit=0"));
        assert_int_equal(farm_param_page("10", "x", &p, err), -EINVAL);
        assert_non_null(strstr(err, "offset=x"));
}

/* Stores intervals seqs[0..n) of a 20-minute run of machine id, each on one CPU at 20 us
 * every millisecond, as they arrive right after the last of them. */
static void store_intervals(farm_db *db, const char *id, const uint64_t *seqs, size_t n) {
        struct summary_interval iv[16];
        struct summary_cpu cpu[16];
        char err[FARM_ERROR_MAX];
        const int64_t t0 = INT64_C(1793491200) * 1000000000, len = INT64_C(1200) * 1000000000;
        const uint64_t samples = (uint64_t) len / 1000000;
        static uint64_t counts[1000 + 40 * 8];
        uint8_t *hist = NULL;
        size_t hist_len = 0;
        int64_t now = t0;
        counts[20] = samples;
        assert_int_equal(hist_encode(1000, counts, &hist, &hist_len), 0);
        assert_true(n <= 16);
        for (size_t i = 0; i < n; i++) {
                now = MAX(now, t0 + ((int64_t) seqs[i] + 1) * len);
                cpu[i] = (struct summary_cpu){ .cpu = 0,
                                               .samples = samples,
                                               .min_ns = 20000,
                                               .avg_ns = 20000,
                                               .max_ns = 20000,
                                               .max_time_ns = t0 + (int64_t) seqs[i] * len,
                                               .hist_limit_us = 1000,
                                               .hist = hist,
                                               .hist_len = hist_len };
                iv[i] = (struct summary_interval){ .seq = seqs[i],
                                                   .start_ns = t0 + (int64_t) seqs[i] * len,
                                                   .length_ns = (uint64_t) len,
                                                   .scenario = "idle",
                                                   .cpus = &cpu[i],
                                                   .ncpus = 1 };
        }
        struct summary s = {
                .machine = { (char *) id, "lab1", "cpu", 1 },
                .run = { .id = 1,
                         .boot_id = "00000000000000000000000000000001",
                         .kernel_release = "k1",
                         .kernel_version = "#1",
                         .kernel_cmdline = "",
                         .preempt_model = "PREEMPT_RT",
                         .daemon_version = "0",
                         .config_digest = "0000000000000000000000000000000000000000000000000000000"
                                          "000000000",
                         .start_ns = t0,
                         .threshold_ns = 100000,
                         .probe_interval_ns = 1000000,
                         .interval_ns = (uint64_t) len },
                .seq = seqs[0],
                .intervals = iv,
                .nintervals = n,
        };
        struct farm_stored st;
        if (farm_store_summary(db, &s, now, &st, err) < 0)
                fail_msg("%s", err);
        free(hist);
}

/* An interval that arrives after later ones (an outbox catching up) fills the hole it had
 * left: its day can no longer be judged from the rollup's in-order gap, and is read from the
 * intervals. */
static void test_verdict_out_of_order(void **state) {
        char dir[] = "/tmp/rtsoak-parts-XXXXXX", path[64], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE] = { 1 };
        const char *id = "0123456789abcdef0123456789abcdef";
        const int64_t at = (INT64_C(1793491200) + 10 * 1200) * 1000000000;
        struct farm_rule rule;
        farm_db *db;
        json_t *v;
        struct farm_question q = { "k1", at, at, at };

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/farm.db", dir);
        assert_int_equal(farm_db_open(path, &db, err), 0);
        assert_int_equal(farm_enroll(db, id, hash, NULL, "test", NULL, 0, err), 1);
        farm_rule_default(&rule);
        rule.period_ns = 200 * 60 * NSEC_PER_SEC;
        rule.nscenarios = 0;

        /* Seqs 0-9 but 4, the later ones first: a 20-minute hole, over the 15 allowed, that
         * the day's in-order tracking cannot see. */
        store_intervals(db, id, (const uint64_t[]){ 5, 6, 7, 8, 9 }, 5);
        store_intervals(db, id, (const uint64_t[]){ 0, 1, 2, 3 }, 4);
        assert_int_equal(farm_verdict_json(db, &rule, &q, &v, err), 0);
        if (getenv("DEBUG_VERDICT"))
                json_dumpf(v, stderr, JSON_INDENT(1));
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "failed");
        json_t *p = json_array_get(json_object_get(v, "problems"), 0);
        assert_string_equal(json_string_value(json_object_get(p, "kind")), "gap");
        assert_int_equal(json_integer_value(json_object_get(p, "value_ns")),
                         INT64_C(1200) * 1000000000);
        json_decref(v);

        /* Seq 4 arrives late: no hole, 200 minutes covered. */
        store_intervals(db, id, (const uint64_t[]){ 4 }, 1);
        assert_int_equal(farm_verdict_json(db, &rule, &q, &v, err), 0);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "qualified");
        json_t *m = json_array_get(json_object_get(v, "machines"), 0);
        assert_int_equal(json_integer_value(json_object_get(m, "covered_ns")),
                         INT64_C(12000) * 1000000000);
        json_decref(v);
        /* The same upload again changes nothing. */
        store_intervals(db, id, (const uint64_t[]){ 4 }, 1);
        assert_int_equal(farm_verdict_json(db, &rule, &q, &v, err), 0);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "qualified");
        json_decref(v);

        farm_db_close(db);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
}

static void test_step_alignment(void **state) {
        static const struct {
                int64_t t;
                uint64_t step;
                int64_t floor;
        } cases[] = {
                { 0, 300, 0 },
                { 299, 300, 0 },
                { 300, 300, 300 },
                { 301, 300, 300 },
                { -1, 300, -300 },
                { -300, 300, -300 },
                { -301, 300, -600 },
                { 1793577900123, 1000, 1793577900000 },
                /* 5 min steps of an RFC 3339 minute: 2026-11-02T00:07:00Z -> 00:05. */
                { INT64_C(1793578020000000000), UINT64_C(300000000000),
                  INT64_C(1793577900000000000) },
                { INT64_MAX, 1, INT64_MAX },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (farm_step_floor(cases[i].t, cases[i].step) != cases[i].floor)
                        fail_msg("floor(%lld, %llu) = %lld, expected %lld", (long long) cases[i].t,
                                 (unsigned long long) cases[i].step,
                                 (long long) farm_step_floor(cases[i].t, cases[i].step),
                                 (long long) cases[i].floor);
        /* [from, to) touches the steps of from and of to - 1. */
        assert_int_equal(farm_steps_in(0, 300, 300), 1);
        assert_int_equal(farm_steps_in(0, 301, 300), 2);
        assert_int_equal(farm_steps_in(299, 301, 300), 2);
        assert_int_equal(farm_steps_in(-1, 1, 300), 2);
        /* 30 days at 5 minutes. */
        assert_int_equal(farm_steps_in(0, 30 * FARM_DAY_NS, UINT64_C(300000000000)), 8640);
}

static void test_percentiles(void **state) {
        struct hist h;
        struct farm_percentiles p;
        assert_int_equal(hist_init(&h, 1000), 0);
        /* 10,000 samples: 9,000 at 10 us, 900 at 20 us, 90 at 30 us, 9 at 40 us, one at 3
         * ms (over the 1 ms limit). */
        h.counts[10] = 9000;
        h.counts[20] = 900;
        h.counts[30] = 90;
        h.counts[40] = 9;
        h.counts[hist_index(1000, 3000000)] = 1;
        farm_percentiles(&h, 10000, 3000000, &p);
        assert_int_equal(p.p50_ns, 11000);
        assert_int_equal(p.p99_ns, 21000);    /* rank 9,900 */
        assert_int_equal(p.p99_9_ns, 31000);  /* rank 9,990 */
        assert_int_equal(p.p99_99_ns, 41000); /* rank 9,999 */
        /* The overflow sample is the top one: the maximum caps its log bucket's edge. */
        h.counts[40] = 8;
        h.counts[hist_index(1000, 3000000)] = 2;
        farm_percentiles(&h, 10000, 3000000, &p);
        assert_int_equal(p.p99_99_ns, 3000000);
        /* Never above the maximum, never below the minimum. */
        farm_percentiles(&h, 10500, 10600, &p);
        assert_int_equal(p.p50_ns, 10600);
        hist_reset(&h);
        farm_percentiles(&h, 0, 0, &p);
        assert_int_equal(p.p99_9_ns, 0);
        hist_done(&h);
}

static void test_regression_rule(void **state) {
        static const struct {
                uint64_t value, base, percent, min_diff;
                bool worse;
        } cases[] = {
                { 100000, 100000, 10, 5000, false },
                { 110000, 100000, 10, 5000, false }, /* exactly 10 %: not more */
                { 110001, 100000, 10, 5000, true },
                { 14000, 10000, 10, 5000, false }, /* 40 % but only 4 us */
                { 15000, 10000, 10, 5000, false }, /* exactly 5 us: not more */
                { 15001, 10000, 10, 5000, true },
                { 50000, 100000, 10, 5000, false }, /* better */
                { 200000, 100000, 1000, 5000, false },
                { 1200000, 100000, 1000, 5000, true },
                { 6000, 0, 10, 5000, true },
                { UINT64_MAX, UINT64_MAX / 2, 10, 0, true }, /* no wrap */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (farm_worse(cases[i].value, cases[i].base, cases[i].percent,
                               cases[i].min_diff) != cases[i].worse)
                        fail_msg("case %zu: %llu vs %llu", i, (unsigned long long) cases[i].value,
                                 (unsigned long long) cases[i].base);
}

static void test_label_escape(void **state) {
        char buf[64];
        assert_int_equal(farm_prom_escape("lab-7", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "lab-7");
        assert_int_equal(farm_prom_escape("a\"b\\c\nd", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "a\\\"b\\\\c\\nd");
        assert_int_equal(farm_prom_escape("", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "");
        assert_int_equal(farm_prom_escape("\"\"\"", buf, 6), -ENOBUFS);
        assert_int_equal(farm_prom_escape("\"\"\"", buf, 7), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_authorization_header), cmocka_unit_test(test_new_tokens),
                cmocka_unit_test(test_machine_ids),          cmocka_unit_test(test_token_bucket),
                cmocka_unit_test(test_rule_scenarios),       cmocka_unit_test(test_params),
                cmocka_unit_test(test_verdict_out_of_order), cmocka_unit_test(test_step_alignment),
                cmocka_unit_test(test_percentiles),          cmocka_unit_test(test_regression_rule),
                cmocka_unit_test(test_label_escape),
        };
        return RUN_TESTS(tests);
}
