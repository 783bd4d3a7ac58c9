/* SPDX-License-Identifier: MIT */
/* Fuzz target for the Retry-After header as the uploader reads it from the farm server (or
 * from whatever answers at its address): never more than a day, whatever the text and the
 * clock. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-reply.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Clocks of 1970, of today, far ahead and before the epoch. */
        static const int64_t nows[] = { 0, INT64_C(1796300000000000000), INT64_MAX, INT64_MIN, -1 };
        struct http_reply r;
        http_reply_reset(&r);
        /* The header as libcurl hands it over, name included. */
        char line[256] = "Retry-After:";
        size_t n = MIN(size, sizeof(line) - 13);
        memcpy(line + 12, data, n);
        line[12 + n] = '\0';
        http_reply_on_header(line, 1, strlen(line), &r);
        for (size_t i = 0; i < ELEMENTSOF(nows); i++)
                if (http_parse_retry_after(r.retry_after, nows[i]) > 86400 * NSEC_PER_SEC)
                        abort();
        return 0;
}
