/* SPDX-License-Identifier: MIT */
/* A stream that writes into a growing buffer in memory, as open_memstream() does, for answers
 * of megabytes: glibc's memory stream zero-fills and copies its buffer at each doubling, and a
 * large block from mmap() is faulted in afresh each time (a third of the server's CPU for a
 * month of steps, bench/README.md); this one grows by realloc(), which moves a large block's
 * pages instead of copying them, and writes only what is written. */
#pragma once

#include <stddef.h>
#include <stdio.h>

/* As open_memstream(): *buf (NUL-terminated) and *len are set at each fflush() and at
 * fclose(), after which the caller frees *buf.  Not seekable.  NULL with errno set on
 * failure. */
FILE *text_stream_open(char **buf, size_t *len);
