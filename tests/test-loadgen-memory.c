/* SPDX-License-Identifier: MIT */
/* The memory load generator, run as the real rtsoak-load: it allocates at the requested rate,
 * its resident memory (from the kernel) stays near --hold, and bad options are refused. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

#define MiB (1024.0 * 1024.0)

/* VmRSS of pid in bytes, or -1 if it is gone. */
static int64_t rss_bytes(pid_t pid) {
        char path[64], line[256];
        long long kb = -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
                        break;
        fclose(f);
        return kb < 0 ? -1 : kb * 1024;
}

/* The largest and smallest VmRSS seen over window_ms, after a settling time. */
static void rss_range(const char *const *gen_argv, int window_ms, int64_t *ret_min,
                      int64_t *ret_max) {
        pid_t pid = tu_load_spawn(gen_argv);
        int64_t lo = INT64_MAX, hi = 0;
        tu_sleep_ms(500);
        for (int t = 0; t < window_ms; t += 20) {
                int64_t v = rss_bytes(pid);
                assert_true(v > 0);
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
                tu_sleep_ms(20);
        }
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        *ret_min = lo;
        *ret_max = hi;
}

static void test_rate_honoured(void **state) {
        json_t *j = tu_load_json("2s", (const char *const[]){ "memory", "--rate", "20M", NULL });
        double rate = tu_load_rate(j, "alloc"), ops = tu_load_rate(j, "ops");
        printf("# requested 20 MiB/s, got %.2f MiB/s (%+.1f %%), %.1f allocs/s\n", rate,
               (rate / 20 - 1) * 100, ops);
        assert_true(rate >= 20 * 0.85 && rate <= 20 * 1.15);
        /* 1 MiB chunks by default: as many allocations as MiB. */
        assert_true(ops >= 20 * 0.85 && ops <= 20 * 1.15);
        json_decref(j);
}

static void test_flat_out_does_more(void **state) {
        json_t *j = tu_load_json("1s", (const char *const[]){ "memory", "--rate", "0", NULL });
        double rate = tu_load_rate(j, "alloc");
        printf("# flat out: %.0f MiB/s\n", rate);
        /* Page faults on a noisy VM run at several hundred MiB/s at worst; a generator that
         * still paced itself would show about 1 MiB/s (the default rate). */
        assert_true(rate > 50);
        assert_string_equal(json_string_value(json_object_get(j, "options")),
                            "memory --rate=0 --chunk=1M --hold=16M --method=mmap");
        json_decref(j);
}

/* The resident size follows --hold: the chunks held are really touched (resident), and no
 * more than --hold is kept.  The difference between a small and a large --hold cancels
 * what the program itself uses (more under sanitizers). */
static void check_rss_follows_hold(const char *method) {
        int64_t small_lo, small_hi, big_lo, big_hi;
        rss_range((const char *const[]){ "memory", "--rate", "0", "--chunk", "1M", "--hold", "4M",
                                         "--method", method, NULL },
                  600, &small_lo, &small_hi);
        rss_range((const char *const[]){ "memory", "--rate", "0", "--chunk", "1M", "--hold", "64M",
                                         "--method", method, NULL },
                  1000, &big_lo, &big_hi);
        double extra_lo = (double) (big_lo - small_hi) / MiB;
        double extra_hi = (double) (big_hi - small_lo) / MiB;
        printf("# %s: --hold 4M: RSS %.1f..%.1f MiB; --hold 64M: RSS %.1f..%.1f MiB\n", method,
               (double) small_lo / MiB, (double) small_hi / MiB, (double) big_lo / MiB,
               (double) big_hi / MiB);
        /* 60 MiB more held: at least 45 of them resident at all times, never more than 60
         * plus a little slack for the allocator (and, built with AddressSanitizer, for its
         * runtime's own memory, which grows with the bookkeeping: 68.5 MiB seen). */
#if defined(__SANITIZE_ADDRESS__)
        const double slack = 16;
#else
        const double slack = 8;
#endif
        assert_true(extra_lo >= 45);
        assert_true(extra_hi <= 60 + slack);
}

static void test_rss_bounded_mmap(void **state) {
        check_rss_follows_hold("mmap");
}

static void test_rss_bounded_malloc(void **state) {
#if defined(__SANITIZE_ADDRESS__)
        /* AddressSanitizer keeps freed heap memory in quarantine: RSS grows by design. */
        skip();
#endif
        check_rss_follows_hold("malloc");
}

static void test_bad_options(void **state) {
        tu_load_refused((const char *const[]){ "memory", "--chunk", "2K", NULL },
                        "memory: --chunk=2K: out of range, must be between 4K and 1G");
        tu_load_refused((const char *const[]){ "memory", "--chunk", "2G", NULL },
                        "memory: --chunk=2G: out of range, must be between 4K and 1G");
        tu_load_refused((const char *const[]){ "memory", "--chunk", "32M", NULL },
                        "memory: --chunk=33554432 is larger than --hold=16777216");
        tu_load_refused((const char *const[]){ "memory", "--hold", "1G", "--chunk", "4K", NULL },
                        "memory: --hold=1073741824 is more than 65536 chunks of --chunk=4096");
        tu_load_refused((const char *const[]){ "memory", "--rate", "fast", NULL },
                        "memory: --rate=fast: not a number");
        tu_load_refused((const char *const[]){ "memory", "--method", "sbrk", NULL },
                        "memory: --method=sbrk: must be one of mmap, malloc");
}

static void test_stops_promptly(void **state) {
        /* Flat out with a large hold: stopping includes unmapping 256 MiB. */
        pid_t pid = tu_load_spawn((const char *const[]){ "memory", "--rate", "0", "--chunk", "4M",
                                                         "--hold", "256M", NULL });
        tu_sleep_ms(700);
        tu_load_stop_ms(pid);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rate_honoured),    cmocka_unit_test(test_flat_out_does_more),
                cmocka_unit_test(test_rss_bounded_mmap), cmocka_unit_test(test_rss_bounded_malloc),
                cmocka_unit_test(test_bad_options),      cmocka_unit_test(test_stops_promptly),
        };
        return RUN_TESTS(tests);
}
