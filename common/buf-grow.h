/* SPDX-License-Identifier: MIT */
/* A buffer that grows by doubling, so that text arriving in many small pieces (an HTTP answer
 * of megabytes in 16 KiB pieces) costs linear time, not a copy of everything per piece. */
#pragma once

#include <stddef.h>

/* Makes *buf (with *cap bytes allocated) hold at least need bytes. 0, or -ENOMEM with *buf
 * and *cap unchanged. */
int grow_bytes(char **buf, size_t *cap, size_t need);
