/* SPDX-License-Identifier: MIT */
/* SHA-256 written from the FIPS 180-4 description: message schedule of 64 words, eight
 * working variables, big-endian length padding. */
#include <string.h>

#include "sha256.h"

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, unsigned n) {
        return (x >> n) | (x << (32 - n));
}

static void compress(struct sha256_ctx *c, const uint8_t *blk) {
        uint32_t w[64], s[8];

        for (int t = 0; t < 16; t++)
                w[t] = (uint32_t) blk[4 * t] << 24 | (uint32_t) blk[4 * t + 1] << 16 |
                       (uint32_t) blk[4 * t + 2] << 8 | (uint32_t) blk[4 * t + 3];
        for (int t = 16; t < 64; t++) {
                uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
                uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
                w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }

        memcpy(s, c->state, sizeof(s));
        for (int t = 0; t < 64; t++) {
                uint32_t S1 = rotr(s[4], 6) ^ rotr(s[4], 11) ^ rotr(s[4], 25);
                uint32_t ch = (s[4] & s[5]) ^ (~s[4] & s[6]);
                uint32_t t1 = s[7] + S1 + ch + K[t] + w[t];
                uint32_t S0 = rotr(s[0], 2) ^ rotr(s[0], 13) ^ rotr(s[0], 22);
                uint32_t maj = (s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]);
                uint32_t t2 = S0 + maj;
                memmove(s + 1, s, 7 * sizeof(uint32_t));
                s[4] += t1;
                s[0] = t1 + t2;
        }
        for (int i = 0; i < 8; i++)
                c->state[i] += s[i];
}

void sha256_init(struct sha256_ctx *c) {
        static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
        memcpy(c->state, h0, sizeof(h0));
        c->length = 0;
        c->used = 0;
}

void sha256_update(struct sha256_ctx *c, const void *data, size_t len) {
        const uint8_t *p = data;
        c->length += len;
        while (len > 0) {
                size_t n = 64 - c->used;
                if (n > len)
                        n = len;
                memcpy(c->block + c->used, p, n);
                c->used += n;
                p += n;
                len -= n;
                if (c->used == 64) {
                        compress(c, c->block);
                        c->used = 0;
                }
        }
}

void sha256_final(struct sha256_ctx *c, uint8_t out[static SHA256_DIGEST_SIZE]) {
        uint64_t bits = c->length * 8;
        uint8_t pad = 0x80, zero = 0, len_be[8];

        sha256_update(c, &pad, 1);
        while (c->used != 56)
                sha256_update(c, &zero, 1);
        for (int i = 0; i < 8; i++)
                len_be[i] = (uint8_t) (bits >> (56 - 8 * i));
        sha256_update(c, len_be, 8);

        for (int i = 0; i < 8; i++) {
                out[4 * i] = (uint8_t) (c->state[i] >> 24);
                out[4 * i + 1] = (uint8_t) (c->state[i] >> 16);
                out[4 * i + 2] = (uint8_t) (c->state[i] >> 8);
                out[4 * i + 3] = (uint8_t) c->state[i];
        }
}

char *sha256_digest_hex(const uint8_t d[static SHA256_DIGEST_SIZE],
                        char out[static 2 * SHA256_DIGEST_SIZE + 1]) {
        static const char hex[] = "0123456789abcdef";
        for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
                out[2 * i] = hex[d[i] >> 4];
                out[2 * i + 1] = hex[d[i] & 15];
        }
        out[2 * SHA256_DIGEST_SIZE] = '\0';
        return out;
}

char *sha256_hex(const void *data, size_t len, char out[static 2 * SHA256_DIGEST_SIZE + 1]) {
        struct sha256_ctx c;
        uint8_t d[SHA256_DIGEST_SIZE];

        sha256_init(&c);
        sha256_update(&c, data, len);
        sha256_final(&c, d);
        return sha256_digest_hex(d, out);
}

/* The key padded to a block (hashed first when longer), XORed with the inner and the outer
 * pad: H((K ^ opad) || H((K ^ ipad) || message)). */
void hmac_sha256(const void *key, size_t key_len, const void *const *parts, const size_t *lens,
                 size_t nparts, uint8_t out[static SHA256_DIGEST_SIZE]) {
        uint8_t k[64] = { 0 }, pad[64], inner[SHA256_DIGEST_SIZE];
        struct sha256_ctx c;

        if (key_len > sizeof(k)) {
                sha256_init(&c);
                sha256_update(&c, key, key_len);
                sha256_final(&c, k);
        } else if (key_len > 0)
                memcpy(k, key, key_len);
        for (size_t i = 0; i < sizeof(pad); i++)
                pad[i] = k[i] ^ 0x36;
        sha256_init(&c);
        sha256_update(&c, pad, sizeof(pad));
        for (size_t i = 0; i < nparts; i++)
                sha256_update(&c, parts[i], lens[i]);
        sha256_final(&c, inner);
        for (size_t i = 0; i < sizeof(pad); i++)
                pad[i] = k[i] ^ 0x5c;
        sha256_init(&c);
        sha256_update(&c, pad, sizeof(pad));
        sha256_update(&c, inner, sizeof(inner));
        sha256_final(&c, out);
}
