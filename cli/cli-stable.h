/* SPDX-License-Identifier: MIT */
/* rtsoak latest-stable: which release of a series a farm server calls latest stable. */
#pragma once

/* argv[0] is "latest-stable".  Exit 0 with the release printed, 2 when the series has none
 * yet, 3 when it cannot be told, 64 for a usage error. */
int cli_latest_stable(int argc, char **argv);
