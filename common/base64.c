/* SPDX-License-Identifier: MIT */
/* Base64 encoding and strict decoding. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const uint8_t *data, size_t len) {
        char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
        if (!out)
                return NULL;
        size_t i = 0;
        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t) data[i] << 16 | (uint32_t) data[i + 1] << 8 | data[i + 2];
                *o++ = alphabet[v >> 18];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = alphabet[(v >> 6) & 63];
                *o++ = alphabet[v & 63];
        }
        if (len - i == 1) {
                uint32_t v = (uint32_t) data[i] << 16;
                *o++ = alphabet[v >> 18];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = '=';
                *o++ = '=';
        } else if (len - i == 2) {
                uint32_t v = (uint32_t) data[i] << 16 | (uint32_t) data[i + 1] << 8;
                *o++ = alphabet[v >> 18];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = alphabet[(v >> 6) & 63];
                *o++ = '=';
        }
        *o = 0;
        return out;
}

static int value_of(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(const char *text, size_t len, uint8_t **ret, size_t *ret_len) {
        if (len % 4 != 0)
                return -EINVAL;
        if (len == 0) {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        size_t pad = text[len - 1] == '=' ? (text[len - 2] == '=' ? 2 : 1) : 0;
        uint8_t *out = malloc(len / 4 * 3), *o = out;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 4) {
                bool last = i + 4 == len;
                int v[4];
                for (int k = 0; k < 4; k++) {
                        v[k] = value_of(text[i + k]);
                        /* '=' only as the padding of the last group. */
                        if (v[k] < 0 && !(last && text[i + k] == '=' && k >= 4 - (int) pad)) {
                                free(out);
                                return -EINVAL;
                        }
                        if (v[k] < 0)
                                v[k] = 0;
                }
                uint32_t x = (uint32_t) v[0] << 18 | (uint32_t) v[1] << 12 | (uint32_t) v[2] << 6 |
                             (uint32_t) v[3];
                *o++ = (uint8_t) (x >> 16);
                if (!last || pad < 2)
                        *o++ = (uint8_t) (x >> 8);
                if (!last || pad < 1)
                        *o++ = (uint8_t) x;
                /* Bits the padding leaves unused must be zero: one text, one encoding. */
                if (last && ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))) {
                        free(out);
                        return -EINVAL;
                }
        }
        *ret = out;
        *ret_len = (size_t) (o - out);
        return 0;
}
