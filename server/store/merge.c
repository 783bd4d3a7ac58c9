/* SPDX-License-Identifier: MIT */
/* Merged histograms and the budgeted set of them.  The set is an open-addressing table of keys
 * with their state (merging now, waiting, finished); only the keys merging now hold a histogram,
 * and they hold at most the budget (one key always may, so that every pass finishes one). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "merge.h"

/* ---- one accumulator ----------------------------------------------------------------------- */

void farm_acc_done(struct farm_acc *c) {
        hist_done(&c->h);
        *c = (struct farm_acc){};
}

size_t farm_acc_bytes(const struct farm_acc *c) {
        return c->h.counts ? (size_t) c->h.nbuckets * sizeof(uint64_t) : 0;
}

/* Makes room for histograms of limit_us: a larger limit takes the buckets over (hist_merge
 * counts each at its highest value above the old limit, never lower). */
static int acc_limit(struct farm_acc *c, uint32_t limit_us) {
        if (c->h.counts && limit_us <= c->h.limit_us)
                return 0;
        struct hist n;
        int r = hist_init(&n, limit_us);
        if (r < 0)
                return r;
        n.saturate = true;
        if (c->h.counts && (r = hist_merge(&n, &c->h)) < 0) {
                hist_done(&n);
                return r;
        }
        hist_done(&c->h);
        c->h = n;
        return 0;
}

static void acc_stats(struct farm_acc *c, uint64_t samples, uint64_t min_ns, uint64_t max_ns,
                      int64_t max_time_ns, uint64_t violations) {
        if (samples > 0 && (!c->samples || min_ns < c->min_ns))
                c->min_ns = min_ns;
        if (samples > 0 && (!c->samples || max_ns > c->max_ns ||
                            (max_ns == c->max_ns && max_time_ns < c->max_time_ns))) {
                c->max_ns = max_ns;
                c->max_time_ns = max_time_ns;
        }
        /* Saturating at 2^63-1 (what JSON readers take): the schema bounds each interval's
         * counts, but sums over the years of a farm, or data stored before those bounds, must
         * not wrap. */
        if (__builtin_add_overflow(c->samples, samples, &c->samples) || c->samples > INT64_MAX)
                c->samples = INT64_MAX;
        if (__builtin_add_overflow(c->violations, violations, &c->violations) ||
            c->violations > INT64_MAX)
                c->violations = INT64_MAX;
        c->used = true;
}

int farm_acc_add(struct farm_acc *c, uint32_t limit_us, const void *blob, size_t len,
                 uint64_t samples, uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns,
                 uint64_t violations, const char **why) {
        uint64_t total = 0;
        if (limit_us == 0 || limit_us > HIST_LIMIT_US_MAX) {
                *why = "histogram limit out of range";
                return -EBADMSG;
        }
        int r = acc_limit(c, limit_us);
        if (r < 0)
                return r;
        if (len > 0 && (r = hist_decode_merge(&c->h, blob, len, &total, why)) < 0)
                return r;
        if (total != samples) {
                *why = "histogram does not hold the stored number of samples";
                return -EBADMSG;
        }
        acc_stats(c, samples, min_ns, max_ns, max_time_ns, violations);
        return 0;
}

int farm_acc_merge(struct farm_acc *dst, const struct farm_acc *src) {
        if (!src->used)
                return 0;
        int r = acc_limit(dst, src->h.limit_us);
        if (r >= 0)
                r = hist_merge(&dst->h, &src->h);
        if (r >= 0)
                acc_stats(dst, src->samples, src->min_ns, src->max_ns, src->max_time_ns,
                          src->violations);
        return r;
}

/* ---- the set --------------------------------------------------------------------------------- */

/* SKIPPED: a row of the key was not merged in this pass, so the key must not start merging
 * later in it (it would miss that row); it waits for the next pass. */
enum state { EMPTY, WAITING, SKIPPED, MERGING, FINISHED };

struct slot {
        uint64_t key;
        enum state state;
        struct farm_acc *acc; /* while MERGING */
};

struct farm_merge_set {
        size_t budget, bytes, peak;
        bool ordered;
        uint64_t cutoff; /* ordered: keys from here on wait for a later pass */
        struct slot *slots;
        size_t size, n; /* table size (a power of two) and keys in it */
        size_t merging, last_pass;
};

int farm_merge_set_new(size_t budget_bytes, bool ordered, struct farm_merge_set **ret) {
        struct farm_merge_set *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->budget = budget_bytes;
        s->ordered = ordered;
        s->cutoff = UINT64_MAX;
        *ret = s;
        return 0;
}

void farm_merge_set_free(struct farm_merge_set *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->size; i++)
                if (s->slots[i].acc) {
                        farm_acc_done(s->slots[i].acc);
                        free(s->slots[i].acc);
                }
        free(s->slots);
        free(s);
}

static size_t hash(uint64_t key) {
        key ^= key >> 33;
        key *= UINT64_C(0xff51afd7ed558ccd);
        key ^= key >> 33;
        return (size_t) key;
}

static struct slot *lookup(struct farm_merge_set *s, uint64_t key) {
        if (2 * (s->n + 1) > s->size) {
                size_t ns = s->size ? s->size * 2 : 64;
                struct slot *v = calloc(ns, sizeof(*v));
                if (!v)
                        return NULL;
                for (size_t i = 0; i < s->size; i++) {
                        if (s->slots[i].state == EMPTY)
                                continue;
                        size_t j = hash(s->slots[i].key) & (ns - 1);
                        while (v[j].state != EMPTY)
                                j = (j + 1) & (ns - 1);
                        v[j] = s->slots[i];
                }
                free(s->slots);
                s->slots = v;
                s->size = ns;
        }
        size_t j = hash(key) & (s->size - 1);
        for (; s->slots[j].state != EMPTY; j = (j + 1) & (s->size - 1))
                if (s->slots[j].key == key)
                        return &s->slots[j];
        s->slots[j] = (struct slot){ .key = key, .state = WAITING };
        s->n++;
        return &s->slots[j];
}

/* A key merging now goes back to waiting: what it merged is dropped, the next pass merges all
 * its rows again. */
static void drop(struct farm_merge_set *s, struct slot *x) {
        s->bytes -= farm_acc_bytes(x->acc);
        farm_acc_done(x->acc);
        free(x->acc);
        x->acc = NULL;
        x->state = SKIPPED;
        s->merging--;
}

/* Ordered: key and every key after it wait; the ones merging are dropped. */
static void cut(struct farm_merge_set *s, uint64_t key) {
        if (!s->ordered || key >= s->cutoff)
                return;
        s->cutoff = key;
        for (size_t i = 0; i < s->size; i++)
                if (s->slots[i].state == MERGING && s->slots[i].key >= key)
                        drop(s, &s->slots[i]);
}

/* Whether `more` bytes fit: always for the only key merging. */
static bool fits(const struct farm_merge_set *s, size_t more, bool alone) {
        return alone || s->bytes + more <= s->budget;
}

int farm_merge_set_add(struct farm_merge_set *s, uint64_t key, uint32_t limit_us, const void *blob,
                       size_t len, uint64_t samples, uint64_t min_ns, uint64_t max_ns,
                       int64_t max_time_ns, uint64_t violations, const char **why) {
        struct slot *x = lookup(s, key);
        if (!x)
                return -ENOMEM;
        if (x->state == FINISHED || x->state == SKIPPED || (s->ordered && key >= s->cutoff)) {
                if (x->state == WAITING)
                        x->state = SKIPPED;
                return 1;
        }
        size_t want = (size_t) hist_nbuckets(MIN(limit_us, HIST_LIMIT_US_MAX)) * sizeof(uint64_t);
        if (x->state == WAITING) {
                if (!fits(s, want, s->merging == 0)) {
                        /* Ordered, the larger keys make room for it; else it waits. */
                        cut(s, key);
                        if (!s->ordered || !fits(s, want, s->merging == 0)) {
                                x->state = SKIPPED;
                                return 1;
                        }
                        s->cutoff = key + 1;
                }
                x->acc = calloc(1, sizeof(*x->acc));
                if (!x->acc)
                        return -ENOMEM;
                x->state = MERGING;
                s->merging++;
        } else {
                size_t have = farm_acc_bytes(x->acc);
                if (want > have && !fits(s, want - have, s->merging == 1)) {
                        /* It would grow beyond the budget: ordered, the larger keys make room;
                         * else it is merged again in a later pass. */
                        if (s->ordered && key + 1 < s->cutoff)
                                cut(s, key + 1);
                        if (!fits(s, want - have, s->merging == 1)) {
                                drop(s, x);
                                cut(s, key);
                                return 1;
                        }
                }
        }
        size_t before = farm_acc_bytes(x->acc);
        int r = farm_acc_add(x->acc, limit_us, blob, len, samples, min_ns, max_ns, max_time_ns,
                             violations, why);
        s->bytes = s->bytes - before + farm_acc_bytes(x->acc);
        s->peak = MAX(s->peak, s->bytes);
        return r;
}

static int by_key(const void *a, const void *b) {
        uint64_t x = (*(struct slot *const *) a)->key, y = (*(struct slot *const *) b)->key;
        return x < y ? -1 : x > y;
}

int farm_merge_set_finish(struct farm_merge_set *s, farm_merge_fn fn, void *userdata) {
        _cleanup_free_ struct slot **done = calloc(MAX(s->merging, (size_t) 1), sizeof(*done));
        size_t n = 0;
        bool waiting = false;
        if (!done)
                return -ENOMEM;
        for (size_t i = 0; i < s->size; i++) {
                if (s->slots[i].state == MERGING)
                        done[n++] = &s->slots[i];
                if (s->slots[i].state == SKIPPED)
                        s->slots[i].state = WAITING;
                waiting = waiting || s->slots[i].state == WAITING;
        }
        qsort(done, n, sizeof(*done), by_key);
        int r = 0;
        for (size_t i = 0; i < n; i++) {
                if (r >= 0)
                        r = fn(userdata, done[i]->key, done[i]->acc);
                s->bytes -= farm_acc_bytes(done[i]->acc);
                farm_acc_done(done[i]->acc);
                free(done[i]->acc);
                done[i]->acc = NULL;
                done[i]->state = FINISHED;
        }
        s->merging = 0;
        s->last_pass = n;
        s->cutoff = UINT64_MAX;
        return r < 0 ? r : waiting;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

uint64_t farm_merge_set_nth_waiting(const struct farm_merge_set *s, size_t n) {
        _cleanup_free_ uint64_t *keys = malloc(MAX(s->n, (size_t) 1) * sizeof(*keys));
        size_t k = 0;
        if (!keys)
                return UINT64_MAX;
        for (size_t i = 0; i < s->size; i++)
                if (s->slots[i].state == WAITING || s->slots[i].state == SKIPPED)
                        keys[k++] = s->slots[i].key;
        if (n >= k)
                return UINT64_MAX;
        qsort(keys, k, sizeof(*keys), cmp_u64);
        return keys[n];
}

size_t farm_merge_set_last_pass(const struct farm_merge_set *s) {
        return s->last_pass;
}

uint64_t farm_merge_set_first_waiting(const struct farm_merge_set *s) {
        uint64_t first = UINT64_MAX;
        for (size_t i = 0; i < s->size; i++)
                if (s->slots[i].state == WAITING || s->slots[i].state == SKIPPED)
                        first = MIN(first, s->slots[i].key);
        return first;
}

size_t farm_merge_set_keys(const struct farm_merge_set *s) {
        return s->n;
}

size_t farm_merge_set_peak(const struct farm_merge_set *s) {
        return s->peak;
}

void farm_percentiles(const struct hist *h, uint64_t min_ns, uint64_t max_ns,
                      struct farm_percentiles *ret) {
        ret->p50_ns = hist_quantile_ns(h, 50, 100, min_ns, max_ns);
        ret->p99_ns = hist_quantile_ns(h, 99, 100, min_ns, max_ns);
        ret->p99_9_ns = hist_quantile_ns(h, 999, 1000, min_ns, max_ns);
        ret->p99_99_ns = hist_quantile_ns(h, 9999, 10000, min_ns, max_ns);
}
