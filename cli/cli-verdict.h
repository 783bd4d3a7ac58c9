/* SPDX-License-Identifier: MIT */
/* rtsoak verdict: asks a farm server whether a kernel release qualifies, for gating scripts. */
#pragma once

/* Exit statuses: the verdict, or that it cannot be told. */
#define VERDICT_EXIT_QUALIFIED 0
#define VERDICT_EXIT_FAILED 1
#define VERDICT_EXIT_PENDING 2
#define VERDICT_EXIT_UNKNOWN 3

/* argv[0] is "verdict". */
int cli_verdict(int argc, char **argv);
