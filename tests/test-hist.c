/* SPDX-License-Identifier: MIT */
/* Unit tests of the histogram maths (bucket layout, merging, percentiles, sparse encoding)
 * and of interval arithmetic, including the counts a year at 5 kHz reaches. */
#include "tests.h"
#include "hist.h"
#include "interval.h"
#include "macro.h"

/* A year of 5 kHz wake-ups on one CPU. */
#define YEAR_SAMPLES (UINT64_C(5000) * 86400 * 365)

static void test_layout_consistent(void **state) {
        static const uint32_t limits[] = { 1, 7, 37, 100, 1000, 12345, HIST_LIMIT_US_MAX };
        (void) state;
        for (size_t l = 0; l < ELEMENTSOF(limits); l++) {
                uint32_t lim = limits[l], n = hist_nbuckets(lim);
                for (uint32_t i = 0; i < n; i++) {
                        uint64_t lo = hist_bucket_lower_ns(lim, i),
                                 up = hist_bucket_upper_ns(lim, i);
                        if (hist_index(lim, lo) != i)
                                fail_msg("limit %u: lower bound %llu of bucket %u lands in %u", lim,
                                         (unsigned long long) lo, i, hist_index(lim, lo));
                        if (i + 1 < n) {
                                assert_true(up > lo);
                                assert_int_equal(up, hist_bucket_lower_ns(lim, i + 1));
                                assert_int_equal(hist_index(lim, up - 1), i);
                        } else
                                assert_int_equal(up, UINT64_MAX);
                }
        }
}

static void test_index_exact_and_log(void **state) {
        (void) state;
        /* 1 us exact buckets below the limit, as cyclictest -h counts them. */
        assert_int_equal(hist_index(1000, 0), 0);
        assert_int_equal(hist_index(1000, 999), 0);
        assert_int_equal(hist_index(1000, 1000), 1);
        assert_int_equal(hist_index(1000, 999999), 999);
        /* At the limit the log buckets begin: 8 per octave. */
        assert_int_equal(hist_index(1000, 1000000), 1000);
        assert_int_equal(hist_index(1000, 1124999), 1000);
        assert_int_equal(hist_index(1000, 1125000), 1001);
        /* Small limits keep distinct sub-buckets: 1 us limit, [1, 1.125) us is bucket 1. */
        assert_int_equal(hist_index(1, 1124), 1);
        assert_int_equal(hist_index(1, 1125), 2);
        /* The largest limit has fewer octaves, so that no bound overflows 64 bits. */
        assert_int_equal(hist_octaves(HIST_LIMIT_US_MAX), 37);
        assert_int_equal(hist_octaves(1000), 40);
        assert_true(hist_bucket_lower_ns(HIST_LIMIT_US_MAX, hist_nbuckets(HIST_LIMIT_US_MAX) - 1) >
                    UINT64_C(6000000000000000000));
        assert_int_equal(hist_index(1000, 2000000), 1008);
        /* 20 ms: octave 4 (16..32 ms), sub-bucket (20-16)*8/16 = 2. */
        assert_int_equal(hist_index(1000, 20000000), 1000 + 4 * 8 + 2);
        assert_int_equal(hist_bucket_lower_ns(1000, 1034), 20000000);
        assert_int_equal(hist_bucket_upper_ns(1000, 1034), 22000000);
        /* Anything beyond the last octave lands in the open last bucket. */
        assert_int_equal(hist_index(1000, UINT64_MAX), hist_nbuckets(1000) - 1);
        /* The log buckets are at most 12.5 % wide relative to their lower bound. */
        for (uint32_t i = 1000; i + 1 < hist_nbuckets(1000); i++) {
                uint64_t lo = hist_bucket_lower_ns(1000, i), up = hist_bucket_upper_ns(1000, i);
                assert_true((up - lo) * 8 <= lo);
        }
}

static void test_quantiles(void **state) {
        struct hist h;
        (void) state;
        assert_int_equal(hist_init(&h, 1000), 0);
        /* Empty: 0. */
        assert_int_equal(hist_quantile_ns(&h, 1, 2, 0, 0), 0);

        /* 100 samples, one in each of 0..99 us. */
        for (uint64_t us = 0; us < 100; us++)
                h.counts[hist_index(1000, us * 1000 + 500)]++;
        assert_int_equal(hist_quantile_ns(&h, 1, 2, 500, 99500), 50000);
        assert_int_equal(hist_quantile_ns(&h, 99, 100, 500, 99500), 99000);
        /* The 100th sample's bucket ends at 100 us, but the true max is below: clamp. */
        assert_int_equal(hist_quantile_ns(&h, 999, 1000, 500, 99500), 99500);
        /* Rank 1 lands in bucket 0, whose upper edge is 1 us. */
        assert_int_equal(hist_quantile_ns(&h, 1, 1000, 500, 99500), 1000);

        /* A year of samples at 5 us and a handful of 900 us outliers. */
        hist_reset(&h);
        h.counts[5] = YEAR_SAMPLES - 10;
        h.counts[900] = 10;
        assert_int_equal(hist_total(&h), YEAR_SAMPLES);
        assert_int_equal(hist_quantile_ns(&h, 1, 2, 5000, 900500), 6000);
        assert_int_equal(hist_quantile_ns(&h, 999, 1000, 5000, 900500), 6000);
        /* The 10 outliers are past the 99.99999999th percentile. */
        assert_int_equal(hist_quantile_ns(&h, 9999999999, 10000000000, 5000, 900500), 6000);
        assert_int_equal(hist_quantile_ns(&h, 1, 1, 5000, 900500), 900500);

        /* Overflow samples: p99.9 in a log bucket, clamped to the exact max. */
        hist_reset(&h);
        h.counts[10] = 1;
        h.counts[hist_index(1000, 20000000)] = 999;
        assert_int_equal(hist_quantile_ns(&h, 999, 1000, 10000, 20100000), 20100000);
        assert_int_equal(hist_overflows(&h, 1000), 999);
        hist_done(&h);
}

static void test_merge(void **state) {
        struct hist a, b, c;
        (void) state;
        assert_int_equal(hist_init(&a, 1000), 0);
        assert_int_equal(hist_init(&b, 1000), 0);
        a.counts[3] = YEAR_SAMPLES;
        b.counts[3] = YEAR_SAMPLES;
        b.counts[1300] = 7;
        assert_int_equal(hist_merge(&a, &b), 0);
        assert_int_equal(a.counts[3], 2 * YEAR_SAMPLES);
        assert_int_equal(a.counts[1300], 7);

        /* 256 CPUs for a year still fit comfortably. */
        for (int i = 0; i < 254; i++)
                assert_int_equal(hist_merge(&a, &b), 0);
        assert_int_equal(a.counts[3], 256 * YEAR_SAMPLES);

        /* A wrap is reported, not silently taken. */
        b.counts[3] = UINT64_MAX;
        assert_int_equal(hist_merge(&a, &b), -EOVERFLOW);

        /* Different limits: a 100 us-limit histogram's overflow bucket [100, 112.5) us
         * merges into the bucket of its highest value (112.499 us) in a 1 ms-limit one. */
        assert_int_equal(hist_init(&c, 100), 0);
        c.counts[hist_index(100, 105000)] = 4;
        c.counts[50] = 2;
        hist_reset(&a);
        assert_int_equal(hist_merge(&a, &c), 0);
        assert_int_equal(a.counts[50], 2);
        assert_int_equal(a.counts[112], 4);
        assert_int_equal(hist_total(&a), 6);
        hist_done(&a);
        hist_done(&b);
        hist_done(&c);
}

static void test_encode_decode(void **state) {
        struct hist h, d;
        uint8_t *buf;
        size_t len;
        uint64_t total;
        (void) state;

        assert_int_equal(hist_init(&h, 1000), 0);
        assert_int_equal(hist_init(&d, 1000), 0);
        h.counts[0] = 1;
        h.counts[5] = YEAR_SAMPLES;
        h.counts[999] = 3;
        h.counts[hist_nbuckets(1000) - 1] = 2;
        assert_int_equal(hist_encode(1000, h.counts, &buf, &len), 0);
        /* Four non-zero buckets: a few bytes each, not 10 KiB. */
        assert_true(len < 40);
        assert_int_equal(hist_decode_merge(&d, buf, len, &total, NULL), 0);
        assert_int_equal(total, YEAR_SAMPLES + 6);
        assert_memory_equal(d.counts, h.counts, h.nbuckets * sizeof(uint64_t));
        free(buf);

        /* An empty histogram encodes to its header and decodes to nothing. */
        hist_reset(&h);
        assert_int_equal(hist_encode(1000, h.counts, &buf, &len), 0);
        hist_reset(&d);
        assert_int_equal(hist_decode_merge(&d, buf, len, &total, NULL), 0);
        assert_int_equal(total, 0);
        free(buf);
        hist_done(&h);
        hist_done(&d);
}

static void test_decode_malformed(void **state) {
        static const struct {
                uint8_t bytes[16];
                size_t len;
                const char *reason;
        } t[] = {
                { { 1 }, 1, "histogram too short" },
                { { 2, 0x88, 0x07 }, 3, "unknown histogram format version" },
                { { 1, 0 }, 2, "histogram limit out of range" },
                { { 1, 0xe8, 0x07, 5 }, 4, "truncated histogram entry" },
                { { 1, 0xe8, 0x07, 5, 0x80 }, 5, "truncated histogram entry" },
                { { 1, 0xe8, 0x07, 5, 1, 0, 1 }, 7, "histogram buckets out of order" },
                { { 1, 0xe8, 0x07, 0xff, 0x7f, 1 }, 6, "histogram bucket index out of range" },
                { { 1, 0xe8, 0x07, 5, 0 }, 5, "histogram entry with zero count" },
                { { 1, 0xe8, 0x07, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1,
                    1 },
                  16,
                  "histogram count overflows" },
                { { 1, 0xe8, 0x07, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f },
                  14,
                  "truncated histogram entry" },
        };
        struct hist d;
        (void) state;
        assert_int_equal(hist_init(&d, 1000), 0);
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                const char *reason = NULL;
                uint64_t total;
                hist_reset(&d);
                int r = hist_decode_merge(&d, t[i].bytes, t[i].len, &total, &reason);
                if (r != -EBADMSG)
                        fail_msg("case %zu: got %d", i, r);
                assert_string_equal(reason, t[i].reason);
                /* Nothing was merged from a blob that failed validation. */
                assert_int_equal(hist_total(&d), 0);
        }
        hist_done(&d);
}

static void test_interval_arithmetic(void **state) {
        const int64_t minute = 60 * (int64_t) NSEC_PER_SEC;
        (void) state;
        /* Boundaries are whole multiples of the period since the epoch. */
        int64_t t = INT64_C(1764748812345678901); /* 2025-12-03T08:00:12.345678901Z */
        assert_int_equal(interval_align(t, minute), INT64_C(1764748800000000000));
        assert_int_equal(interval_align(INT64_C(1764748800000000000), minute),
                         INT64_C(1764748800000000000));
        assert_int_equal(interval_align(-1, minute), -minute);

        int64_t base = INT64_C(1000000000000);
        assert_int_equal(interval_index(base, minute, base), 0);
        assert_int_equal(interval_index(base, minute, base + minute - 1), 0);
        assert_int_equal(interval_index(base, minute, base + minute), 1);
        assert_int_equal(interval_start(base, minute, 3), base + 3 * minute);

        /* A year of 1 s intervals on a monotonic clock that has run for a year already. */
        const int64_t sec = (int64_t) NSEC_PER_SEC, year = 365 * 86400 * sec;
        base = year;
        assert_int_equal(interval_index(base, sec, base + year), 365 * 86400);
        assert_int_equal(interval_start(base, sec, 365 * 86400), 2 * year);

        /* Missed periods: a 20 ms stall at 200 us is 100 whole periods. */
        assert_int_equal(interval_missed(20 * NSEC_PER_MSEC, 200 * NSEC_PER_USEC), 100);
        assert_int_equal(interval_missed(199999, 200000), 0);
        assert_int_equal(interval_missed(200000, 200000), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_layout_consistent),
                cmocka_unit_test(test_index_exact_and_log),
                cmocka_unit_test(test_quantiles),
                cmocka_unit_test(test_merge),
                cmocka_unit_test(test_encode_decode),
                cmocka_unit_test(test_decode_malformed),
                cmocka_unit_test(test_interval_arithmetic),
        };
        return RUN_TESTS(tests);
}
