/* SPDX-License-Identifier: MIT */
/* SHA-256 (FIPS 180-4), for configuration digests and, on the server, token hashes and the
 * HMAC that signs webhooks.  Small and dependency-free; speed is irrelevant for these uses. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32

struct sha256_ctx {
        uint32_t state[8];
        uint64_t length; /* bytes hashed so far */
        uint8_t block[64];
        size_t used;
};

void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);
void sha256_final(struct sha256_ctx *c, uint8_t out[static SHA256_DIGEST_SIZE]);
/* Hex digest of a buffer into out (65 bytes with the terminating NUL). */
char *sha256_hex(const void *data, size_t len, char out[static 2 * SHA256_DIGEST_SIZE + 1]);

/* HMAC-SHA256 (RFC 2104) of the parts, concatenated, under key. */
void hmac_sha256(const void *key, size_t key_len, const void *const *parts, const size_t *lens,
                 size_t nparts, uint8_t out[static SHA256_DIGEST_SIZE]);
/* Lowercase hex of a digest into out (65 bytes with the terminating NUL). */
char *sha256_digest_hex(const uint8_t d[static SHA256_DIGEST_SIZE],
                        char out[static 2 * SHA256_DIGEST_SIZE + 1]);
