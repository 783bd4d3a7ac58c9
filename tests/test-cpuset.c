/* SPDX-License-Identifier: MIT */
/* Unit tests of CPU list parsing and formatting, table-driven. */
#include "tests.h"
#include "cpuset.h"
#include "macro.h"

static void test_parse_format(void **state) {
        static const struct {
                const char *in, *out;
                size_t n;
        } t[] = {
                { "all", "all", 0 },     { "0", "0", 1 },           { "0,2-3", "0,2-3", 3 },
                { "3,2,1,0", "0-3", 4 }, { "0-3,2", "0-3", 4 },     { " 1 , 5 - 7 ", "1,5-7", 4 },
                { "8191", "8191", 1 },   { "0-255", "0-255", 256 },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct cpuset s;
                char buf[256];
                const char *reason = NULL;
                if (cpuset_parse(t[i].in, &s, &reason) < 0)
                        fail_msg("'%s': %s", t[i].in, reason);
                assert_int_equal(s.n, t[i].n);
                assert_int_equal(cpuset_format(&s, buf, sizeof(buf)), 0);
                assert_string_equal(buf, t[i].out);
                cpuset_done(&s);
        }
}

static void test_parse_invalid(void **state) {
        static const struct {
                const char *in, *reason;
        } t[] = {
                { "", "empty CPU list" },
                { "x", "expected a CPU number" },
                { "1,", "expected a CPU number" },
                { "1-", "expected a CPU number after '-'" },
                { "3-1", "range goes backwards" },
                { "1;2", "expected ',' between CPUs" },
                { "8192", "CPU number too large (at most 8191)" },
                { "-1", "expected a CPU number" },
                { "0-99999999999", "CPU number too large (at most 8191)" },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct cpuset s;
                const char *reason = NULL;
                if (cpuset_parse(t[i].in, &s, &reason) >= 0)
                        fail_msg("'%s' was accepted", t[i].in);
                assert_string_equal(reason, t[i].reason);
        }
}

static void test_contains_and_online(void **state) {
        struct cpuset s, on;
        char tmp[] = "/tmp/test-cpuset-XXXXXX";
        (void) state;
        assert_int_equal(cpuset_parse("0,2-3", &s, NULL), 0);
        assert_true(cpuset_contains(&s, 2));
        assert_false(cpuset_contains(&s, 1));
        cpuset_done(&s);

        int fd = mkstemp(tmp);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "0-3,8\n", 6), 6);
        close(fd);
        assert_int_equal(cpuset_online(&on, tmp), 0);
        assert_int_equal(on.n, 5);
        assert_true(cpuset_contains(&on, 8));
        cpuset_done(&on);
        unlink(tmp);

        /* The real file parses too. */
        assert_int_equal(cpuset_online(&on, NULL), 0);
        assert_true(on.n >= 1);
        cpuset_done(&on);
}

static void test_format_small_buffer(void **state) {
        struct cpuset s;
        char buf[4];
        (void) state;
        assert_int_equal(cpuset_parse("0,2,4,6", &s, NULL), 0);
        assert_int_equal(cpuset_format(&s, buf, sizeof(buf)), -ENOBUFS);
        cpuset_done(&s);

        /* The longest list there is (every other CPU, to the largest) fits CPUSET_TEXT_MAX,
         * and one longer than 1,023 characters is not cut. */
        static char text[CPUSET_TEXT_MAX], back[CPUSET_TEXT_MAX];
        size_t at = 0;
        for (int c = 0; c <= CPUSET_MAX_CPU; c += 2)
                at += (size_t) snprintf(text + at, sizeof(text) - at, "%s%d", c ? "," : "", c);
        assert_true(at > 1023);
        assert_int_equal(cpuset_parse(text, &s, NULL), 0);
        assert_int_equal(cpuset_format(&s, back, sizeof(back)), 0);
        assert_string_equal(back, text);
        cpuset_done(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_format),
                cmocka_unit_test(test_parse_invalid),
                cmocka_unit_test(test_contains_and_online),
                cmocka_unit_test(test_format_small_buffer),
        };
        return RUN_TESTS(tests);
}
