/* SPDX-License-Identifier: MIT */
/* Token buckets per machine behind one mutex.  Only authenticated machines get a bucket, so
 * the table is as large as the farm, and a linear search is fast enough.  On PostgreSQL the
 * buckets are rows of the farm database that every server of the farm shares. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "db-internal.h"
#include "ratelimit.h"

#define KEY_MAX 64

struct bucket {
        char key[KEY_MAX + 1];
        double tokens;
        int64_t last_ns;
};

struct farm_ratelimit {
        pthread_mutex_t lock;
        double rate_per_s, burst;
        struct bucket *buckets;
        size_t n, allocated;
        farm_db *shared; /* PostgreSQL: the buckets are its rows */
};

void farm_ratelimit_share(farm_ratelimit *rl, farm_db *db) {
        rl->shared = farm_is_pg(db) ? db : NULL;
}

/* A machine's bucket is refilled by the time since a token was last taken from it (by the
 * database's clock, the same for every server) and a token taken only when there is a whole
 * one.  The table is unlogged: after a crash of the database the buckets start full. */
#define SQL_NOW_US "CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)"
#define SQL_REFILLED(B, NOW) \
        "least(?3, " B ".tokens + greatest(0, " NOW " - " B ".at_us) / 1e6 * ?2)"
#define SQL_TAKE(MACHINES)                                                                         \
        "INSERT INTO rate_buckets AS b (machine_id, tokens, at_us) " MACHINES                      \
        " ON CONFLICT (machine_id) DO UPDATE SET tokens = " SQL_REFILLED(                          \
                "b",                                                                               \
                "excluded.at_us") " - 1, at_us = excluded.at_us WHERE " SQL_REFILLED("b",          \
                                                                                     "excluded."   \
                                                                                     "at_us") " >" \
                                                                                              "= " \
                                                                                              "1 " \
                                                                                              "RE" \
                                                                                              "TU" \
                                                                                              "RN" \
                                                                                              "IN" \
                                                                                              "G " \
                                                                                              "ma" \
                                                                                              "ch" \
                                                                                              "in" \
                                                                                              "e_" \
                                                                                              "id"

/* A statement on the buckets, with the rate (parameter 2) and the burst (3) bound. */
static int prepare_bucket(farm_ratelimit *rl, sql_conn *c, const char *sql, sql_stmt **ret) {
        char err[FARM_ERROR_MAX];
        int r = farm_prepare(c, sql, ret, err);
        if (r < 0)
                return r;
        sql_bind_double(*ret, 2, rl->rate_per_s);
        sql_bind_double(*ret, 3, rl->burst);
        return 0;
}

/* After a refusal: seconds until the bucket of key (on c) holds a whole token, at least 1. */
static int retry_after_shared(farm_ratelimit *rl, sql_conn *c, const char *key) {
        _cleanup_reset_ sql_stmt *left = NULL;
        int r = prepare_bucket(
                rl, c,
                "SELECT " SQL_REFILLED("b",
                                       SQL_NOW_US) " FROM rate_buckets b WHERE machine_id = ?1",
                &left);
        if (r < 0)
                return r;
        sql_bind_text(left, 1, key);
        r = sql_step(left);
        if (r < 0)
                return r;
        double tokens = r == SQL_ROW ? sql_column_double(left, 0) : 0.0;
        return (int) MAX(1.0, ceil((1.0 - tokens) / rl->rate_per_s));
}

/* Takes a token from the machine's row in one statement; no row back means none. */
static int take_shared(farm_ratelimit *rl, const char *key) {
        _cleanup_release_ sql_conn *c = farm_reader(rl->shared);
        _cleanup_reset_ sql_stmt *take = NULL;
        int r = prepare_bucket(rl, c, SQL_TAKE("VALUES (?1, ?3 - 1, " SQL_NOW_US ")"), &take);
        if (r < 0)
                return r;
        sql_bind_text(take, 1, key);
        r = sql_step(take);
        if (r < 0 || r == SQL_ROW)
                return r < 0 ? r : 0;
        return retry_after_shared(rl, c, key);
}

/* The token's machine found and a token taken from its bucket in one statement (one round
 * trip to the database for both, where an upload makes four): the bucket is taken from only
 * for an enrolled, unrevoked machine. */
static int admit_shared(farm_ratelimit *rl, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                        char ret_machine_id[static FARM_MACHINE_ID_LEN + 1]) {
        _cleanup_release_ sql_conn *c = farm_reader(rl->shared);
        _cleanup_reset_ sql_stmt *st = NULL;
        int64_t taken = 0;
        int r = prepare_bucket(rl, c,
                               "WITH m AS (SELECT id, token_hash, revoked_ns IS NULL AS usable "
                               "FROM machines WHERE token_hash = ?1), t AS (" SQL_TAKE(
                                       "SELECT id, ?3 - 1, " SQL_NOW_US
                                       " FROM m WHERE usable") ") SELECT id, token_hash, usable, "
                                                               "(SELECT count(*) FROM t "
                                                               "WHERE t.machine_id = m.id) FROM m",
                               &st);
        if (r < 0)
                return -EIO;
        sql_bind_blob(st, 1, token_hash, SHA256_DIGEST_SIZE);
        r = farm_token_rows(st, token_hash, ret_machine_id, FARM_MACHINE_ID_LEN + 1, &taken);
        if (r < 0 || taken > 0)
                return r;
        return retry_after_shared(rl, c, ret_machine_id);
}

int farm_ratelimit_new(double rate_per_s, unsigned burst, farm_ratelimit **ret) {
        if (!(rate_per_s > 0) || burst < 1)
                return -EINVAL;
        farm_ratelimit *rl = calloc(1, sizeof(*rl));
        if (!rl)
                return -ENOMEM;
        pthread_mutex_init(&rl->lock, NULL);
        rl->rate_per_s = rate_per_s;
        rl->burst = burst;
        *ret = rl;
        return 0;
}

void farm_ratelimit_free(farm_ratelimit *rl) {
        if (!rl)
                return;
        pthread_mutex_destroy(&rl->lock);
        free(rl->buckets);
        free(rl);
}

static struct bucket *find(farm_ratelimit *rl, const char *key, int64_t now_ns) {
        for (size_t i = 0; i < rl->n; i++)
                if (strcmp(rl->buckets[i].key, key) == 0)
                        return &rl->buckets[i];
        if (rl->n == rl->allocated) {
                size_t a = MAX(rl->allocated * 2, (size_t) 16);
                struct bucket *b = realloc(rl->buckets, a * sizeof(*b));
                if (!b)
                        return NULL;
                rl->buckets = b;
                rl->allocated = a;
        }
        struct bucket *b = &rl->buckets[rl->n++];
        *b = (struct bucket){ .tokens = rl->burst, .last_ns = now_ns };
        snprintf(b->key, sizeof(b->key), "%s", key);
        return b;
}

int farm_ratelimit_admit(farm_ratelimit *rl, farm_db *db,
                         const uint8_t token_hash[SHA256_DIGEST_SIZE],
                         char ret_machine_id[static FARM_MACHINE_ID_LEN + 1], int64_t now_ns) {
        if (rl->shared)
                return admit_shared(rl, token_hash, ret_machine_id);
        int r = farm_authenticate(db, token_hash, ret_machine_id);
        return r < 0 ? r : farm_ratelimit_take(rl, ret_machine_id, now_ns);
}

int farm_ratelimit_take(farm_ratelimit *rl, const char *key, int64_t now_ns) {
        if (rl->shared)
                return take_shared(rl, key);
        int r = 0;
        pthread_mutex_lock(&rl->lock);
        struct bucket *b = find(rl, key, now_ns);
        if (!b) {
                r = -ENOMEM;
                goto out;
        }
        if (now_ns > b->last_ns) {
                b->tokens = MIN(rl->burst,
                                b->tokens + (double) (now_ns - b->last_ns) / 1e9 * rl->rate_per_s);
                b->last_ns = now_ns;
        }
        if (b->tokens >= 1.0)
                b->tokens -= 1.0;
        else
                r = (int) MAX(1.0, ceil((1.0 - b->tokens) / rl->rate_per_s));
out:
        pthread_mutex_unlock(&rl->lock);
        return r;
}
