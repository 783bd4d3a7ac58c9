/* SPDX-License-Identifier: MIT */
/* Common includes for the cmocka unit tests, and a main() helper that selects TAP output so
 * that meson counts every case. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Forks; returns in the child, which runs the tests.  See tap-filter.c. */
void tap_filter_begin(void);

#define RUN_TESTS_WITH(tests, setup, teardown)                         \
        ({                                                             \
                tap_filter_begin();                                    \
                if (getenv("TEST_FILTER"))                             \
                        cmocka_set_test_filter(getenv("TEST_FILTER")); \
                cmocka_set_message_output(CM_OUTPUT_TAP);              \
                cmocka_run_group_tests(tests, setup, teardown);        \
        })
#define RUN_TESTS(tests) RUN_TESTS_WITH(tests, NULL, NULL)

/* Removes a test's scratch directory and everything in it; returns 0 on success. */
int tests_remove_dir(const char *dir);

/* Runs the tests with dir (a mkdtemp template) created before and removed after. */
#define RUN_TESTS_IN_TMPDIR(tests, dir)                 \
        ({                                              \
                int _r_ = 1;                            \
                if (mkdtemp(dir)) {                     \
                        _r_ = RUN_TESTS(tests);         \
                        if (tests_remove_dir(dir) != 0) \
                                _r_ = 1;                \
                }                                       \
                _r_;                                    \
        })
