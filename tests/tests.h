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

#define RUN_TESTS_WITH(tests, setup, teardown)                  \
        ({                                                      \
                tap_filter_begin();                             \
                cmocka_set_message_output(CM_OUTPUT_TAP);       \
                cmocka_run_group_tests(tests, setup, teardown); \
        })
#define RUN_TESTS(tests) RUN_TESTS_WITH(tests, NULL, NULL)
