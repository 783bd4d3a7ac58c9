/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "buf-grow.h"

int grow_bytes(char **buf, size_t *cap, size_t need) {
        if (need <= *cap)
                return 0;
        size_t n = *cap ? *cap : 4096;
        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return -ENOMEM;
                n *= 2;
        }
        char *b = realloc(*buf, n);
        if (!b)
                return -ENOMEM;
        *buf = b;
        *cap = n;
        return 0;
}
