/* SPDX-License-Identifier: MIT */
/* Implementation of the histogram maths declared in hist.h.  Everything that reads stored or
 * received bytes checks bounds before use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"

uint64_t hist_bucket_lower_ns(uint32_t limit_us, uint32_t i) {
        if (i < limit_us)
                return (uint64_t) i * NSEC_PER_USEC;
        uint32_t j = i - limit_us;
        unsigned octave = j / HIST_LOG_SUB, sub = j % HIST_LOG_SUB;
        uint64_t base = (uint64_t) limit_us * NSEC_PER_USEC << octave;
        return base + sub * (base / HIST_LOG_SUB);
}

uint64_t hist_bucket_upper_ns(uint32_t limit_us, uint32_t i) {
        if (i + 1 >= hist_nbuckets(limit_us))
                return UINT64_MAX;
        return hist_bucket_lower_ns(limit_us, i + 1);
}

int hist_init(struct hist *h, uint32_t limit_us) {
        if (limit_us == 0 || limit_us > HIST_LIMIT_US_MAX)
                return -EINVAL;
        h->limit_us = limit_us;
        h->nbuckets = hist_nbuckets(limit_us);
        h->saturate = false;
        h->counts = calloc(h->nbuckets, sizeof(uint64_t));
        return h->counts ? 0 : -ENOMEM;
}

void hist_done(struct hist *h) {
        free(h->counts);
        *h = (struct hist){};
}

void hist_reset(struct hist *h) {
        memset(h->counts, 0, h->nbuckets * sizeof(uint64_t));
}

bool hist_used_range(const struct hist *h, uint32_t *ret_lowest, uint32_t *ret_highest) {
        uint32_t lo = 0, hi = h->nbuckets;
        while (lo < h->nbuckets && h->counts[lo] == 0)
                lo++;
        while (hi > lo && h->counts[hi - 1] == 0)
                hi--;
        *ret_lowest = lo < h->nbuckets ? lo : 0;
        *ret_highest = hi > lo ? hi - 1 : 0;
        return lo < h->nbuckets;
}

uint64_t hist_total(const struct hist *h) {
        uint64_t t = 0;
        for (uint32_t i = 0; i < h->nbuckets; i++)
                t += h->counts[i];
        return t;
}

uint64_t hist_overflows(const struct hist *h, uint32_t limit_us) {
        uint64_t t = 0;
        for (uint32_t i = 0; i < h->nbuckets; i++)
                if (hist_bucket_lower_ns(h->limit_us, i) >= (uint64_t) limit_us * NSEC_PER_USEC)
                        t += h->counts[i];
        return t;
}

static uint64_t bucket_highest_ns(uint32_t limit_us, uint32_t i) {
        uint64_t u = hist_bucket_upper_ns(limit_us, i);
        return u == UINT64_MAX ? hist_bucket_lower_ns(limit_us, i) : u - 1;
}

static int add_count(struct hist *dst, uint32_t i, uint64_t c) {
        if (__builtin_add_overflow(dst->counts[i], c, &dst->counts[i])) {
                if (!dst->saturate)
                        return -EOVERFLOW;
                dst->counts[i] = UINT64_MAX;
        }
        return 0;
}

int hist_merge_counts(struct hist *dst, uint32_t src_limit_us, const uint64_t *src_counts) {
        uint32_t n = hist_nbuckets(src_limit_us);
        int r;

        for (uint32_t i = 0; i < n; i++) {
                if (!src_counts[i])
                        continue;
                uint32_t j = src_limit_us == dst->limit_us
                                     ? i
                                     : hist_index(dst->limit_us,
                                                  bucket_highest_ns(src_limit_us, i));
                r = add_count(dst, j, src_counts[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int hist_merge(struct hist *dst, const struct hist *src) {
        return hist_merge_counts(dst, src->limit_us, src->counts);
}

uint64_t hist_quantile_ns(const struct hist *h, uint64_t num, uint64_t den, uint64_t min_ns,
                          uint64_t max_ns) {
        uint64_t total = hist_total(h), cum = 0;
        if (total == 0 || den == 0)
                return 0;

        /* rank = ceil(total * num / den), in 128 bits: a year of samples times 999 does not
         * fit 64 bits comfortably on a merged farm histogram. */
        unsigned __int128 rank = ((unsigned __int128) total * num + den - 1) / den;
        if (rank == 0)
                rank = 1;

        for (uint32_t i = 0; i < h->nbuckets; i++) {
                cum += h->counts[i];
                if (cum >= rank) {
                        uint64_t v = hist_bucket_upper_ns(h->limit_us, i);
                        if (v > max_ns)
                                v = max_ns;
                        if (v < min_ns)
                                v = min_ns;
                        return v;
                }
        }
        return max_ns;
}

#define HIST_FORMAT_VERSION 1

static int put_varint(uint8_t **p, uint8_t *end, uint64_t v) {
        do {
                if (*p >= end)
                        return -ENOBUFS;
                uint8_t b = v & 0x7f;
                v >>= 7;
                *(*p)++ = b | (v ? 0x80 : 0);
        } while (v);
        return 0;
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        for (unsigned shift = 0;; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                if (shift > 63)
                        return -EBADMSG;
                uint8_t b = *(*p)++;
                uint64_t part = (uint64_t) (b & 0x7f);
                if (shift == 63 && part > 1)
                        return -EBADMSG;
                v |= part << shift;
                if (!(b & 0x80))
                        break;
        }
        *ret = v;
        return 0;
}

int hist_encode(const uint32_t limit_us, const uint64_t *counts, uint8_t **ret_buf,
                size_t *ret_len) {
        uint32_t n = hist_nbuckets(limit_us), nonzero = 0;
        for (uint32_t i = 0; i < n; i++)
                nonzero += counts[i] != 0;

        /* Worst case: 10 bytes per varint. */
        size_t cap = 1 + 10 + (size_t) nonzero * 20;
        uint8_t *buf = malloc(cap), *p = buf, *end = buf + cap;
        if (!buf)
                return -ENOMEM;

        *p++ = HIST_FORMAT_VERSION;
        put_varint(&p, end, limit_us);
        uint64_t prev = 0;
        bool first = true;
        for (uint32_t i = 0; i < n; i++) {
                if (!counts[i])
                        continue;
                /* First index as is, then the gap to the previous index. */
                put_varint(&p, end, first ? i : i - prev);
                put_varint(&p, end, counts[i]);
                prev = i;
                first = false;
        }
        /* Room for the worst case was taken; what is kept (in caches, in memory until
         * written) is what the encoding needs, about a tenth of it. */
        size_t len = (size_t) (p - buf);
        uint8_t *shrunk = realloc(buf, len);
        *ret_buf = shrunk ?: buf;
        *ret_len = len;
        return 0;
}

static int bad(const char **ret_reason, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return -EBADMSG;
}

/* Walks an encoded histogram; with dst NULL it only validates (against check's counts, when
 * given, for wraps).  Validating first means a corrupt blob never leaves a half-merged
 * destination behind.  (With a different limit several source buckets can land in one; a
 * wrap there is still reported, though after a partial merge: 2^64 samples do not happen.) */
static int decode_walk(struct hist *dst, const struct hist *check, const uint8_t *buf, size_t len,
                       uint64_t *ret_total, const char **ret_reason) {
        const uint8_t *p = buf, *end = buf + len;
        uint64_t limit, total = 0, idx = 0;
        bool first = true;

        if (len < 2)
                return bad(ret_reason, "histogram too short");
        if (*p++ != HIST_FORMAT_VERSION)
                return bad(ret_reason, "unknown histogram format version");
        if (get_varint(&p, end, &limit) < 0 || limit == 0 || limit > HIST_LIMIT_US_MAX)
                return bad(ret_reason, "histogram limit out of range");

        uint32_t n = hist_nbuckets((uint32_t) limit);
        while (p < end) {
                uint64_t step, count;
                if (get_varint(&p, end, &step) < 0 || get_varint(&p, end, &count) < 0)
                        return bad(ret_reason, "truncated histogram entry");
                if (!first && step == 0)
                        return bad(ret_reason, "histogram buckets out of order");
                if (__builtin_add_overflow(idx, step, &idx) || idx >= n)
                        return bad(ret_reason, "histogram bucket index out of range");
                if (count == 0)
                        return bad(ret_reason, "histogram entry with zero count");
                if (__builtin_add_overflow(total, count, &total))
                        return bad(ret_reason, "histogram count overflows");
                first = false;

                if (check && !check->saturate && (uint32_t) limit == check->limit_us &&
                    check->counts[idx] > UINT64_MAX - count)
                        return bad(ret_reason, "merged histogram count overflows");
                if (dst) {
                        uint32_t j = (uint32_t) limit == dst->limit_us
                                             ? (uint32_t) idx
                                             : hist_index(dst->limit_us,
                                                          bucket_highest_ns((uint32_t) limit,
                                                                            (uint32_t) idx));
                        if (add_count(dst, j, count) < 0)
                                return bad(ret_reason, "merged histogram count overflows");
                }
        }
        if (ret_total)
                *ret_total = total;
        return 0;
}

int hist_decode_merge(struct hist *dst, const uint8_t *buf, size_t len, uint64_t *ret_total,
                      const char **ret_reason) {
        int r = decode_walk(NULL, dst, buf, len, ret_total, ret_reason);
        if (r < 0)
                return r;
        return decode_walk(dst, NULL, buf, len, NULL, ret_reason);
}

int hist_validate(const uint8_t *buf, size_t len, uint64_t *ret_total, const char **ret_reason) {
        return decode_walk(NULL, NULL, buf, len, ret_total, ret_reason);
}

void hist_shape(const uint8_t *buf, size_t len, struct hist_shape *ret) {
        const uint8_t *p = buf, *end = buf + len;
        uint64_t limit = 0, idx = 0, step, count;
        *ret = (struct hist_shape){};
        if (len < 2)
                return;
        p++; /* the version */
        if (get_varint(&p, end, &limit) < 0 || limit > HIST_LIMIT_US_MAX)
                return;
        ret->limit_us = (uint32_t) limit;
        while (p < end && get_varint(&p, end, &step) == 0 && get_varint(&p, end, &count) == 0) {
                idx += step;
                if (ret->entries++ == 0)
                        ret->lowest = (uint32_t) idx;
                ret->highest = (uint32_t) idx;
        }
}
