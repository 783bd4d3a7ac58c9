/* SPDX-License-Identifier: MIT */
/* Base64 (RFC 4648, standard alphabet, padded): how histograms travel inside JSON. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Allocated, NUL-terminated; NULL when out of memory. */
char *base64_encode(const uint8_t *data, size_t len);
/* Strict: only the alphabet, with the right padding and length.  -EINVAL if not base64,
 * -ENOMEM; on success *ret (allocated, may be NULL for empty input) and *ret_len. */
int base64_decode(const char *text, size_t len, uint8_t **ret, size_t *ret_len);
