/* SPDX-License-Identifier: MIT */
/* Machine tokens: 32 random bytes shown once as hex; the farm database keeps only the SHA-256
 * of that text, so a copy of the database does not let anyone upload. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base64.h"
#include "macro.h"
#include "auth.h"

static bool is_token(const char *s, size_t len) {
        if (len != FARM_TOKEN_LEN)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static void token_hash(const char *token, uint8_t ret_hash[static SHA256_DIGEST_SIZE]) {
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_update(&c, token, FARM_TOKEN_LEN);
        sha256_final(&c, ret_hash);
}

int farm_token_new(char ret_token[static FARM_TOKEN_LEN + 1],
                   uint8_t ret_hash[static SHA256_DIGEST_SIZE]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[FARM_TOKEN_BYTES];
        size_t got = 0;

        while (got < sizeof(raw)) {
                ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t) n;
        }
        for (size_t i = 0; i < sizeof(raw); i++) {
                ret_token[2 * i] = hex[raw[i] >> 4];
                ret_token[2 * i + 1] = hex[raw[i] & 0xf];
        }
        ret_token[FARM_TOKEN_LEN] = '\0';
        explicit_bzero(raw, sizeof(raw));
        token_hash(ret_token, ret_hash);
        return 0;
}

int farm_token_from_header(const char *authorization, uint8_t ret_hash[static SHA256_DIGEST_SIZE]) {
        if (!authorization)
                return -EINVAL;
        /* The scheme is case-insensitive (RFC 9110 11.1); one or more spaces follow it. */
        if (strncasecmp(authorization, "Bearer ", 7) != 0)
                return -EINVAL;
        const char *t = authorization + 7;
        t += strspn(t, " ");
        size_t len = strlen(t);
        while (len > 0 && t[len - 1] == ' ')
                len--;
        if (!is_token(t, len))
                return -EINVAL;
        token_hash(t, ret_hash);
        return 0;
}

int farm_token_from_authorization(const char *authorization,
                                  uint8_t ret_hash[static SHA256_DIGEST_SIZE]) {
        if (!authorization || strncasecmp(authorization, "Basic ", 6) != 0)
                return farm_token_from_header(authorization, ret_hash);
        const char *b = authorization + 6;
        b += strspn(b, " ");
        size_t len = strcspn(b, " ");
        if (b[len + strspn(b + len, " ")] != '\0' || len > 4 * FARM_TOKEN_LEN)
                return -EINVAL;
        _cleanup_free_ uint8_t *raw = NULL;
        size_t n = 0;
        if (base64_decode(b, len, &raw, &n) < 0 || !raw)
                return -EINVAL;
        const char *colon = memchr(raw, ':', n);
        if (!colon)
                return -EINVAL;
        const char *t = colon + 1;
        size_t tl = n - (size_t) (t - (const char *) raw);
        int r = is_token(t, tl) ? 0 : -EINVAL;
        if (r == 0)
                token_hash(t, ret_hash);
        explicit_bzero(raw, n);
        return r;
}
