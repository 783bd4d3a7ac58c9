/* SPDX-License-Identifier: MIT */
/* Tokens (a machine's, a staff member's, a reader's): 32 random bytes shown once as hex; the
 * farm database keeps only the SHA-256 of that text, so a copy of it lets no one in.  A token
 * presented is found by that hash and compared in full. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base64.h"
#include "macro.h"
#include "auth.h"
#include "db-internal.h"

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

int farm_token_rows(sql_stmt *st, const uint8_t token_hash[SHA256_DIGEST_SIZE], char *ret_name,
                    size_t size, int64_t *ret_more) {
        bool found = false;
        int r;

        /* The token is looked up by its SHA-256 in an index, not compared with every stored
         * hash: a farm of 10,000 machines made that scan cost 3-4 ms of CPU per upload.  The
         * lookup's time depends only on the hash of what was presented, and knowing where the
         * hash of a guess falls among the stored hashes does not help to find a token whose
         * hash is one of them (that takes a SHA-256 preimage of a 256-bit random token).  The
         * row found is still compared in full without an early exit. */
        while ((r = sql_step(st)) == SQL_ROW) {
                size_t len;
                const uint8_t *h = sql_column_blob(st, 1, &len);
                if (!h || len != SHA256_DIGEST_SIZE)
                        continue;
                uint8_t diff = 0;
                for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                        diff |= h[i] ^ token_hash[i];
                if (diff == 0 && sql_column_int(st, 2)) {
                        snprintf(ret_name, size, "%s", sql_column_text(st, 0));
                        if (ret_more)
                                *ret_more = sql_column_int64(st, 3);
                        found = true;
                }
        }
        if (r != SQL_DONE)
                return r == -EBUSY ? -EBUSY : -EIO;
        return found ? 0 : -EACCES;
}

int farm_token_lookup(farm_db *db, const char *sql, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char *ret_name, size_t size) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char err[FARM_ERROR_MAX];

        if (farm_prepare(c, sql, &st, err) < 0)
                return -EIO;
        sql_bind_blob(st, 1, token_hash, SHA256_DIGEST_SIZE);
        return farm_token_rows(st, token_hash, ret_name, size, NULL);
}
