/* SPDX-License-Identifier: MIT */
/* Token buckets per machine behind one mutex.  Only authenticated machines get a bucket, so
 * the table is as large as the farm, and a linear search is fast enough. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
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
};

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
