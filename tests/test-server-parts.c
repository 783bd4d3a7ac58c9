/* SPDX-License-Identifier: MIT */
/* Unit tests of the farm server's parts: the Authorization header, new tokens, machine ids
 * and the per-machine token bucket. */
#include <errno.h>

#include "tests.h"
#include "macro.h"
#include "server-auth.h"
#include "server-db.h"
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_authorization_header),
                cmocka_unit_test(test_new_tokens),
                cmocka_unit_test(test_machine_ids),
                cmocka_unit_test(test_token_bucket),
        };
        return RUN_TESTS(tests);
}
