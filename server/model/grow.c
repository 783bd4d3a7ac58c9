/* SPDX-License-Identifier: MIT */
/* Arrays that grow one element at a time, and copies of text that may be absent. */
#include <stdlib.h>
#include <string.h>

#include "grow.h"

bool farm_grow(void **v, size_t n, size_t size) {
        if (n != 0 && (n < 16 || (n & (n - 1)) != 0))
                return true;
        void *x = realloc(*v, (n ? 2 * n : 16) * size);
        if (!x)
                return false;
        *v = x;
        return true;
}

char *farm_strdup_or_null(const char *s, bool *ok) {
        char *d = s ? strdup(s) : NULL;
        if (s && !d)
                *ok = false;
        return d;
}
