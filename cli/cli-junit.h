/* SPDX-License-Identifier: MIT */
/* rtsoak verdict --junit FILE: the verdict as JUnit XML, which CI systems (Jenkins, GitLab)
 * show as test results: one test case per gating machine. */
#pragma once

#include <jansson.h>

/* Writes verdict (the server's answer) of release to path, replacing it atomically; with
 * verdict NULL, one test case in error saying why the verdict cannot be told.  0, or -errno
 * (logged). */
int cli_junit_write(const char *path, const char *release, const char *server,
                    const json_t *verdict, const char *error);
