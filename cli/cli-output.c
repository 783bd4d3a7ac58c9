/* SPDX-License-Identifier: MIT */
/* Implementation of the rtsoak command's output helpers. */
#include <errno.h>
#include <stdio.h>

#include "cli-output.h"
#include "timeutil.h"

char *fmt_us(char buf[static 32], uint64_t ns) {
        snprintf(buf, 32, "%llu.%01llu", (unsigned long long) (ns / 1000),
                 (unsigned long long) (ns % 1000 / 100));
        return buf;
}

int print_json(json_t *doc) {
        if (!doc)
                return -ENOMEM;
        if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
                return -EIO;
        fputc('\n', stdout);
        return 0;
}

json_t *json_u64(uint64_t v) {
        /* JSON integers in jansson are signed 64-bit; our counters never reach 2^63. */
        return json_integer((json_int_t) (v > INT64_MAX ? INT64_MAX : v));
}
