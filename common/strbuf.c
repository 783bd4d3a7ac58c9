/* SPDX-License-Identifier: MIT */
/* Appending to a fixed buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "strbuf.h"

void strbuf_appendf(char *buf, size_t size, const char *fmt, ...) {
        size_t used = strnlen(buf, size);
        va_list ap;
        if (used + 1 >= size)
                return;
        va_start(ap, fmt);
        vsnprintf(buf + used, size - used, fmt, ap);
        va_end(ap);
}
