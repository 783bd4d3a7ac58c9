/* SPDX-License-Identifier: MIT */
/* Unit tests of time span and timestamp parsing and formatting, table-driven. */
#include "tests.h"
#include "macro.h"
#include "timeutil.h"

static void test_timespan_valid(void **state) {
        static const struct {
                const char *in;
                uint64_t ns;
        } t[] = {
                { "0", 0 },
                { "200us", 200 * NSEC_PER_USEC },
                { "200 us", 200 * NSEC_PER_USEC },
                { "200\xc2\xb5s", 200 * NSEC_PER_USEC },
                { "1ms", NSEC_PER_MSEC },
                { "1.5ms", 1500 * NSEC_PER_USEC },
                { "60s", 60 * NSEC_PER_SEC },
                { "1min", 60 * NSEC_PER_SEC },
                { "1m", 60 * NSEC_PER_SEC },
                { "1h", 3600 * NSEC_PER_SEC },
                { "1h30min", 5400 * NSEC_PER_SEC },
                { "1h 30min 15s", 5415 * NSEC_PER_SEC },
                { "30d", 30 * 86400 * NSEC_PER_SEC },
                { "2w", 14 * 86400 * NSEC_PER_SEC },
                { "400d", 400 * 86400 * NSEC_PER_SEC },
                { "1ns", 1 },
                { "0.000001s", 1000 },
                { "  5s  ", 5 * NSEC_PER_SEC },
                { "18446744073709551615ns", UINT64_MAX },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                uint64_t v = 0;
                const char *reason = NULL;
                int r = parse_timespan(t[i].in, &v, &reason);
                if (r < 0)
                        fail_msg("'%s': %s", t[i].in, reason);
                assert_int_equal(v, t[i].ns);
        }
}

static void test_timespan_invalid(void **state) {
        static const struct {
                const char *in;
                const char *reason;
        } t[] = {
                { "", "empty value" },
                { "200", "missing unit (use ns, us, ms, s, min, h, d or w)" },
                { "5 5s", "missing unit (use ns, us, ms, s, min, h, d or w)" },
                { "5parsecs", "unknown unit (use ns, us, ms, s, min, h, d or w)" },
                { "-5s", "negative time span" },
                { "s", "expected a number" },
                { "1.s", "expected digits after '.'" },
                { "18446744073709551616ns", "number too large" },
                { "18446744073709551615s", "time span too large" },
                { "10000000000000000000ns 10000000000000000000ns", "time span too large" },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                uint64_t v = 12345;
                const char *reason = NULL;
                int r = parse_timespan(t[i].in, &v, &reason);
                if (r >= 0)
                        fail_msg("'%s' was accepted as %llu", t[i].in, (unsigned long long) v);
                assert_string_equal(reason, t[i].reason);
                assert_int_equal(v, 12345);
        }
}

static void test_timespan_format_roundtrip(void **state) {
        static const struct {
                uint64_t ns;
                const char *out;
        } t[] = {
                { 0, "0" },
                { 200 * NSEC_PER_USEC, "200us" },
                { 1500 * NSEC_PER_USEC, "1500us" },
                { NSEC_PER_MSEC, "1ms" },
                { 60 * NSEC_PER_SEC, "1min" },
                { 90 * NSEC_PER_SEC, "90s" },
                { 3600 * NSEC_PER_SEC, "1h" },
                { 30 * 86400 * NSEC_PER_SEC, "30d" },
                { 14 * 86400 * NSEC_PER_SEC, "2w" },
                { 1, "1ns" },
                { 1001, "1001ns" },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                char buf[TIMESPAN_MAX_LEN];
                uint64_t back;
                assert_string_equal(format_timespan(buf, t[i].ns), t[i].out);
                assert_int_equal(parse_timespan(buf, &back, NULL), 0);
                assert_int_equal(back, t[i].ns);
        }
}

static void test_timestamp(void **state) {
        const int64_t now = INT64_C(1764748800) * 1000000000; /* 2025-12-03T08:00:00Z */
        static const struct {
                const char *in;
                int64_t ns;
        } t[] = {
                { "now", INT64_C(1764748800000000000) },
                { "2025-12-03T08:00:00Z", INT64_C(1764748800000000000) },
                { "2025-12-03t08:00:00z", INT64_C(1764748800000000000) },
                { "2025-12-03T09:00:00+01:00", INT64_C(1764748800000000000) },
                { "2025-12-03T08:00:00.5Z", INT64_C(1764748800500000000) },
                { "2025-12-03T08:00:00.123456789Z", INT64_C(1764748800123456789) },
                { "2025-12-03 08:00:00", INT64_C(1764748800000000000) }, /* TZ=UTC below */
                { "2025-12-03", INT64_C(1764720000000000000) },
                { "2024-02-29T00:00:00Z", INT64_C(1709164800000000000) },
                { "@1764748800", INT64_C(1764748800000000000) },
                { "@1764748800.25", INT64_C(1764748800250000000) },
                { "@-0.5", INT64_C(-500000000) },
                { "@-1.5", INT64_C(-1500000000) },
                { "1764748800000000000", INT64_C(1764748800000000000) },
                { "2h ago", INT64_C(1764741600000000000) },
                { "-2h", INT64_C(1764741600000000000) },
                { "2h", INT64_C(1764741600000000000) },
                { "+1min", INT64_C(1764748860000000000) },
        };
        (void) state;
        setenv("TZ", "UTC", 1);
        tzset();
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                int64_t v = 0;
                const char *reason = NULL;
                if (parse_timestamp(t[i].in, now, &v, &reason) < 0)
                        fail_msg("'%s': %s", t[i].in, reason);
                if (v != t[i].ns)
                        fail_msg("'%s': got %lld, want %lld", t[i].in, (long long) v,
                                 (long long) t[i].ns);
        }
}

static void test_timestamp_invalid(void **state) {
        static const char *const bad[] = {
                "",
                "yesterday",
                "1764748800", /* seconds without @: refused, not read as 1970 */
                "2025-13-01",
                "2025-02-29", /* not a leap year */
                "2025-12-03T25:00:00Z",
                "2025-12-03T08:00:00+1",
                "2025-12-03T08:00:00Zjunk",
                "2025-12-03T08",
                "@",
                "@12x",
                "@ 5",
                "@+5",
                "@-",
                "99999999999999999999999",
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int64_t v;
                const char *reason = NULL;
                if (parse_timestamp(bad[i], 0, &v, &reason) >= 0)
                        fail_msg("'%s' was accepted", bad[i]);
                assert_non_null(reason);
        }
}

static void test_timestamp_format(void **state) {
        char buf[TIMESTAMP_MAX_LEN];
        (void) state;
        assert_string_equal(format_timestamp_utc(buf, INT64_C(1764748800000000000)),
                            "2025-12-03T08:00:00Z");
        assert_string_equal(format_timestamp_utc(buf, INT64_C(1764748800123000000)),
                            "2025-12-03T08:00:00.123Z");
        assert_string_equal(format_timestamp_utc(buf, INT64_C(1764748800123456000)),
                            "2025-12-03T08:00:00.123456Z");
        assert_string_equal(format_timestamp_utc(buf, INT64_C(1764748800123456789)),
                            "2025-12-03T08:00:00.123456789Z");
        assert_string_equal(format_timestamp_utc(buf, -1), "1969-12-31T23:59:59.999999999Z");
        /* What we print, we parse back. */
        int64_t v;
        assert_int_equal(parse_timestamp("2025-12-03T08:00:00.123456789Z", 0, &v, NULL), 0);
        assert_string_equal(format_timestamp_utc(buf, v), "2025-12-03T08:00:00.123456789Z");
}

/* A deadline past a second boundary carries into tv_sec; tv_nsec stays below a second. */
static void test_timespec_from_now(void **state) {
        (void) state;
        for (int i = 0; i < 200; i++) {
                int64_t before = now_ns(CLOCK_MONOTONIC);
                struct timespec ts = timespec_from_now(CLOCK_MONOTONIC, 999999999);
                int64_t after = now_ns(CLOCK_MONOTONIC);
                int64_t t = (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
                assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
                assert_true(t >= before + 999999999 && t <= after + 999999999);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_timespan_valid),
                cmocka_unit_test(test_timespec_from_now),
                cmocka_unit_test(test_timespan_invalid),
                cmocka_unit_test(test_timespan_format_roundtrip),
                cmocka_unit_test(test_timestamp),
                cmocka_unit_test(test_timestamp_invalid),
                cmocka_unit_test(test_timestamp_format),
        };
        return RUN_TESTS(tests);
}
