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
#include "server-db-internal.h"
#include "server-ratelimit.h"

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

/* Takes a token from the machine's row in one statement: refilled by the time since it was
 * last taken (by the database's clock, the same for every server), and taken only when there
 * is a whole one; no row back means none.  The table is unlogged: after a crash of the
 * database the buckets start full. */
static int take_shared(farm_ratelimit *rl, const char *key) {
        static const char *const take_sql =
                "INSERT INTO rate_buckets AS b (machine_id, tokens, at_us) "
                "VALUES (?1, ?3 - 1, CAST(extract(epoch FROM clock_timestamp()) * 1000000 "
                "AS BIGINT)) ON CONFLICT (machine_id) DO UPDATE SET "
                "tokens = least(?3, b.tokens + greatest(0, excluded.at_us - b.at_us) / 1e6 * ?2) "
                "- 1, at_us = excluded.at_us "
                "WHERE least(?3, b.tokens + greatest(0, excluded.at_us - b.at_us) / 1e6 * ?2) >= 1 "
                "RETURNING tokens";
        static const char *const left_sql =
                "SELECT least(?3, b.tokens + greatest(0, CAST(extract(epoch FROM "
                "clock_timestamp()) * 1000000 AS BIGINT) - b.at_us) / 1e6 * ?2) "
                "FROM rate_buckets b WHERE machine_id = ?1";
        char err[FARM_ERROR_MAX];
        _cleanup_release_ sql_conn *c = farm_reader(rl->shared);
        _cleanup_reset_ sql_stmt *take = NULL, *left = NULL;
        int r = farm_prepare(c, take_sql, &take, err);
        if (r < 0 || (r = farm_prepare(c, left_sql, &left, err)) < 0)
                return r;
        sql_bind_text(take, 1, key);
        sql_bind_double(take, 2, rl->rate_per_s);
        sql_bind_double(take, 3, rl->burst);
        r = sql_step(take);
        if (r < 0 || r == SQL_ROW)
                return r < 0 ? r : 0;
        sql_bind_text(left, 1, key);
        sql_bind_double(left, 2, rl->rate_per_s);
        sql_bind_double(left, 3, rl->burst);
        r = sql_step(left);
        if (r < 0)
                return r;
        double tokens = r == SQL_ROW ? sql_column_double(left, 0) : 0.0;
        return (int) MAX(1.0, ceil((1.0 - tokens) / rl->rate_per_s));
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
