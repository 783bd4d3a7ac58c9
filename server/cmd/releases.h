/* SPDX-License-Identifier: MIT */
/* The commands of rtsoak-server about releases: a release's verdict, waiving one of its
 * problems, withdrawing a waiver, and the waivers.  Each returns the program's exit status. */
#pragma once

#include "command.h"

/* verdict RELEASE [--at TIME] [--known-at TIME]: 0 qualified, 1 failed, 2 pending, 3 unknown. */
int cli_verdict(const struct server_options *o, char **args, int n);
/* kcidb RELEASE: the verdict as a KCIDB v5.3 report on stdout (docs/kcidb.md). */
int cli_kcidb(const struct server_options *o, char **args, int n);
/* kcidb --watch DIRECTORY: a report into it for each change of the verdict log, until a
 * signal (kcidb-watch.c). */
int cli_kcidb_watch(const struct server_options *o, const char *dir, const char *origin);
/* waive RELEASE PROBLEM_ID --reason TEXT: prints the waiver's id. */
int cli_waive(const struct server_options *o, char **args, int n);
/* unwaive WAIVER_ID */
int cli_unwaive(const struct server_options *o, char **args, int n);
/* waivers [RELEASE] */
int cli_waivers(const struct server_options *o, char **args, int n);
