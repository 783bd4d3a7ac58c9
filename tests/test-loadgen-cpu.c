/* SPDX-License-Identifier: MIT */
/* The cpu load generator, run as the real rtsoak-load: the CPU time it uses (from the
 * scheduler's accounting) matches the requested duty cycle, and bad options are refused. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

/* Share of one CPU used by a running rtsoak-load cpu, measured over window_ms after a
 * settling time, so that start-up does not count. */
static double measured_share(const char *const *gen_argv, int window_ms) {
        pid_t pid = tu_load_spawn(gen_argv);
        tu_sleep_ms(500);
        int64_t c0 = tu_process_cpu_ns(pid), t0 = now_ns(CLOCK_MONOTONIC);
        tu_sleep_ms(window_ms);
        int64_t c1 = tu_process_cpu_ns(pid), t1 = now_ns(CLOCK_MONOTONIC);
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        assert_true(c0 >= 0 && c1 > c0);
        return (double) (c1 - c0) / (double) (t1 - t0);
}

static void check_share(const char *const *argv, double want) {
        double got = measured_share(argv, 4000);
        printf("# requested %.3f CPUs, used %.3f (%+.1f %%)\n", want, got, (got / want - 1) * 100);
        assert_true(got >= want * 0.95 && got <= want * 1.05);
}

static void test_duty_cycle_40(void **state) {
        check_share((const char *const[]){ "cpu", "--workers", "1", "--load", "40%", NULL }, 0.40);
}

static void test_duty_cycle_two_workers(void **state) {
        /* Two workers at 30 % each: 0.6 of a CPU in all, spread over both CPUs. */
        check_share((const char *const[]){ "cpu", "--workers", "2", "--load", "30%", "--period",
                                           "50ms", NULL },
                    0.60);
}

static void test_full_load_reports_work(void **state) {
        json_t *j = tu_load_json("1s", (const char *const[]){ "cpu", "--workers", "1", NULL });
        double ops = tu_load_rate(j, "ops"), cpu = tu_load_rate(j, "cpu");
        printf("# %.0f ops/s, %.1f %% of a CPU\n", ops, cpu);
        assert_true(ops > 100);
        /* One worker flat out uses most of a CPU even on a shared machine. */
        assert_true(cpu > 50 && cpu <= 101);
        assert_string_equal(json_string_value(json_object_get(j, "options")),
                            "cpu --workers=1 --load=100% --period=100ms --cache-size=1M "
                            "--method=mix");
        json_decref(j);
}

static void test_each_method_works(void **state) {
        for (const char *const *m = (const char *const[]){ "int", "float", "cache", NULL }; *m;
             m++) {
                json_t *j = tu_load_json("300ms", (const char *const[]){ "cpu", "--workers", "1",
                                                                         "--method", *m, NULL });
                assert_true(tu_load_count(j, "ops") > 0);
                json_decref(j);
        }
}

static void test_bad_options(void **state) {
        tu_load_refused((const char *const[]){ "cpu", "--load", "0", NULL },
                        "cpu: --load=0: out of range, must be between 0.01% and 100%");
        tu_load_refused((const char *const[]){ "cpu", "--load", "101%", NULL },
                        "cpu: --load=101%: more than 100%");
        tu_load_refused((const char *const[]){ "cpu", "--workers", "5000", NULL },
                        "cpu: --workers=5000: out of range, must be between 0 and 4096");
        tu_load_refused((const char *const[]){ "cpu", "--workers", "-1", NULL },
                        "cpu: --workers=-1: not a whole number");
        tu_load_refused((const char *const[]){ "cpu", "--period", "100", NULL },
                        "cpu: --period=100:");
        tu_load_refused((const char *const[]){ "cpu", "--method", "vector", NULL },
                        "cpu: --method=vector: must be one of mix, int, float, cache");
        tu_load_refused((const char *const[]){ "cpu", "--bogus", NULL },
                        "cpu: unknown option '--bogus'");
        tu_load_refused((const char *const[]){ "cpu", "--load", NULL },
                        "cpu: --load needs a value");
        tu_load_refused((const char *const[]){ "cpu", "--", "x", NULL },
                        "cpu: takes no arguments after \"--\"");
        tu_load_refused((const char *const[]){ "gpu", NULL }, "unknown load generator 'gpu'");
}

static void test_stops_promptly(void **state) {
        char *argv[] = { (char *) tu_bin("RTSOAK_LOAD"), "cpu", "--workers", "2", NULL };
        pid_t pid = tu_spawn(argv, NULL, NULL);
        tu_sleep_ms(500);
        tu_load_stop_ms(pid);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_duty_cycle_40),
                cmocka_unit_test(test_duty_cycle_two_workers),
                cmocka_unit_test(test_full_load_reports_work),
                cmocka_unit_test(test_each_method_works),
                cmocka_unit_test(test_bad_options),
                cmocka_unit_test(test_stops_promptly),
        };
        return RUN_TESTS(tests);
}
