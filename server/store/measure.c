/* SPDX-License-Identifier: MIT */
/* What an interval measured: the probed CPUs' common span and the smallest share of expected
 * wake-ups any of them delivered (docs/verdict.md, invariant 1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "measure.h"

int32_t farm_cpu_ratio_pm(uint64_t samples, uint64_t span_ns, uint64_t probe_ns) {
        if (probe_ns == 0)
                return 0;
        uint64_t expected = span_ns / probe_ns;
        if (samples > expected + 1 + expected / 1000)
                return FARM_RATIO_IMPOSSIBLE;
        if (expected == 0 || samples >= expected)
                return 1000;
        /* samples < expected <= 2^63 / 10 us: the product cannot wrap for any real span. */
        return (int32_t) ((unsigned __int128) samples * 1000 / expected);
}

uint64_t farm_cpu_missing(uint64_t samples, uint64_t span_ns, uint64_t probe_ns) {
        if (probe_ns == 0)
                return 0;
        uint64_t expected = span_ns / probe_ns;
        return samples < expected ? expected - samples : 0;
}

int64_t farm_cpu_missing_ns(uint64_t samples, uint64_t span_ns, uint64_t length_ns,
                            uint64_t probe_ns) {
        if (samples == UINT64_MAX || probe_ns == 0 ||
            farm_cpu_ratio_pm(samples, span_ns, probe_ns) == FARM_RATIO_IMPOSSIBLE)
                return (int64_t) length_ns;
        uint64_t missing = farm_cpu_missing(samples, span_ns, probe_ns) * probe_ns;
        return (int64_t) MIN(missing + (length_ns > span_ns ? length_ns - span_ns : 0), length_ns);
}

static const struct summary_cpu *find_cpu(const struct summary_interval *iv, uint32_t cpu) {
        size_t lo = 0, hi = iv->ncpus;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (iv->cpus[mid].cpu == cpu)
                        return &iv->cpus[mid];
                if (iv->cpus[mid].cpu < cpu)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

void farm_measure_interval(const struct summary_interval *iv, const uint32_t *probed, size_t n,
                           uint64_t probe_ns, struct farm_measure *ret) {
        int64_t start = iv->start_ns, end = iv->start_ns + (int64_t) iv->length_ns;
        int32_t min = 1000, min_cpu = -1;
        int64_t missing = 0;
        bool all = true;

        for (size_t i = 0; i < n; i++) {
                const struct summary_cpu *c = find_cpu(iv, probed[i]);
                int32_t ratio;
                if (!c) {
                        ratio = 0;
                        all = false;
                        missing = (int64_t) iv->length_ns;
                } else {
                        int64_t s = c->span_length_ns ? c->span_start_ns : iv->start_ns;
                        uint64_t len = c->span_length_ns ?: iv->length_ns;
                        ratio = farm_cpu_ratio_pm(c->samples, len, probe_ns);
                        start = MAX(start, s);
                        end = MIN(end, s + (int64_t) len);
                        missing = MAX(missing, farm_cpu_missing_ns(c->samples, len, iv->length_ns,
                                                                   probe_ns));
                }
                if (min_cpu < 0 || ratio < min) {
                        min = ratio;
                        min_cpu = (int32_t) probed[i];
                }
        }
        *ret = (struct farm_measure){
                .measured = all && n > 0 && end > start,
                .start_ns = start,
                .end_ns = end,
                .min_ratio_pm = n > 0 ? min : 0,
                .min_ratio_cpu = min_cpu,
                .max_missing_ns = n > 0 ? missing : (int64_t) iv->length_ns,
        };
}

int farm_cpu_list_parse(const char *text, uint32_t **ret, size_t *ret_n) {
        uint32_t *v = NULL;
        size_t n = 0, cap = 0;
        const char *p = text;
        while (*p) {
                char *end;
                unsigned long a = strtoul(p, &end, 10), b = a;
                if (end == p)
                        goto bad;
                p = end;
                if (*p == '-') {
                        b = strtoul(p + 1, &end, 10);
                        if (end == p + 1)
                                goto bad;
                        p = end;
                }
                if (b < a || b > SUMMARY_MAX_CPU_ID || (n > 0 && a <= v[n - 1]))
                        goto bad;
                for (unsigned long c = a; c <= b; c++) {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 16;
                                uint32_t *x = realloc(v, cap * sizeof(*x));
                                if (!x) {
                                        free(v);
                                        return -ENOMEM;
                                }
                                v = x;
                        }
                        v[n++] = (uint32_t) c;
                }
                if (*p == ',')
                        p++;
                else if (*p)
                        goto bad;
        }
        *ret = v;
        *ret_n = n;
        return 0;
bad:
        free(v);
        return -EINVAL;
}

char *farm_cpu_list_format(const uint32_t *cpus, size_t n) {
        /* At most 8192 CPUs, "NNNN," each. */
        size_t cap = n * 11 + 1, len = 0;
        char *s = malloc(cap);
        if (!s)
                return NULL;
        s[0] = '\0';
        for (size_t i = 0; i < n;) {
                size_t j = i;
                while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
                        j++;
                if (j > i)
                        len += (size_t) snprintf(s + len, cap - len, "%s%u-%u", len ? "," : "",
                                                 cpus[i], cpus[j]);
                else
                        len += (size_t) snprintf(s + len, cap - len, "%s%u", len ? "," : "",
                                                 cpus[i]);
                i = j + 1;
        }
        return s;
}
