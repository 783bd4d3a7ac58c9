/* SPDX-License-Identifier: MIT */
/* Implementation of the rtsoak command's output helpers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli-output.h"
#include "text-safe.h"
#include "timeutil.h"

char *fmt_us(char buf[static 32], uint64_t ns) {
        snprintf(buf, 32, "%llu.%01llu", (unsigned long long) (ns / 1000),
                 (unsigned long long) (ns % 1000 / 100));
        return buf;
}

int print_json(json_t *doc) {
        if (!doc)
                return -ENOMEM;
        /* ASCII only: a C1 control or a bidirectional override from the server or a load
         * generator comes out as a \u escape, never raw on a terminal. */
        if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) < 0)
                return -EIO;
        fputc('\n', stdout);
        return 0;
}

json_t *json_u64(uint64_t v) {
        /* JSON integers in jansson are signed 64-bit; our counters never reach 2^63. */
        return json_integer((json_int_t) (v > INT64_MAX ? INT64_MAX : v));
}

const char *cli_text(const char *s) {
        static char *ring[8];
        static unsigned next;
        unsigned k = next++ % 8;
        free(ring[k]);
        ring[k] = text_escape_dup(s ?: "");
        return ring[k] ?: "";
}
