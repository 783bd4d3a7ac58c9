/* SPDX-License-Identifier: MIT */
/* Arrays that grow one element at a time, and integers and copies of text that may be absent:
 * what the typed results of the verdict, the lists and the queries are built with. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An integer that is not known (a NULL of the store, a time not given): encoded as null. */
#define FARM_NONE INT64_MIN

/* Room for element n of the array *v of n elements (of size bytes), which grows by doubling
 * from 16 (16, 32, 64...): a machine's history may hold hundreds of thousands of them.  false
 * without memory (*v unchanged). */
bool farm_grow(void **v, size_t n, size_t size);

/* A copy of s, or NULL for NULL; *ok is cleared when s could not be copied. */
char *farm_strdup_or_null(const char *s, bool *ok);
