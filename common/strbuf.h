/* SPDX-License-Identifier: MIT */
/* Text added to the end of a fixed buffer: what does not fit is cut, never written past the
 * buffer's end, and the buffer stays NUL-terminated. */
#pragma once

#include <stddef.h>

#include "macro.h"

/* Appends printf-style text to the NUL-terminated text in buf (size bytes). */
_printf_(3, 4) void strbuf_appendf(char *buf, size_t size, const char *fmt, ...);
