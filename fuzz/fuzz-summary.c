/* SPDX-License-Identifier: MIT */
/* Fuzz target for the summary decoder, the first thing every byte from the network meets:
 * any input must be refused with a message or decoded into a summary that encodes again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct summary s;
        char err[SUMMARY_ERROR_MAX];
        if (summary_decode((const char *) data, size, &s, err) < 0) {
                /* A refusal always says why. */
                if (err[0] == 0)
                        abort();
                return 0;
        }
        /* What was accepted encodes, and decodes again to the same text. */
        char *a, *b;
        struct summary t;
        if (summary_encode(&s, &a, NULL) < 0 || summary_decode(a, strlen(a), &t, err) < 0 ||
            summary_encode(&t, &b, NULL) < 0 || strcmp(a, b) != 0)
                abort();
        free(a);
        free(b);
        summary_done(&s);
        summary_done(&t);
        return 0;
}
