/* SPDX-License-Identifier: MIT */
/* Unit tests of the farm server's parts: the Authorization header, new tokens, machine ids
 * the per-machine token bucket, and the query API's step, percentile, regression and label
 * helpers. */
#include <errno.h>

#include "tests.h"
#include "macro.h"
#include "server-auth.h"
#include "server-db.h"
#include "server-query.h"
#include "server-ratelimit.h"

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
        /* 10,000 samples: 9,000 at 10 us, 900 at 20 us, 90 at 30 us, 9 at 40 us, one at 3 ms
         * (over the 1 ms limit). */
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
                cmocka_unit_test(test_step_alignment),       cmocka_unit_test(test_percentiles),
                cmocka_unit_test(test_regression_rule),      cmocka_unit_test(test_label_escape),
        };
        return RUN_TESTS(tests);
}
