/* SPDX-License-Identifier: MIT */
/* Implementation of CPU list parsing and formatting.  The list syntax is the one of
 * /sys/devices/system/cpu/online and taskset -c, so users can paste either. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuset.h"
#include "macro.h"

void cpuset_done(struct cpuset *s) {
        free(s->cpus);
        *s = (struct cpuset){};
}

int cpuset_copy(struct cpuset *dst, const struct cpuset *src) {
        struct cpuset c = { .all = src->all, .n = src->n };
        if (src->n > 0) {
                c.cpus = malloc(src->n * sizeof(int));
                if (!c.cpus)
                        return -ENOMEM;
                memcpy(c.cpus, src->cpus, src->n * sizeof(int));
        }
        *dst = c;
        return 0;
}

static int fail(const char **ret_reason, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return -EINVAL;
}

static int parse_cpu(const char **p, int *ret) {
        long v = 0;
        if (!isdigit((unsigned char) **p))
                return -EINVAL;
        for (; isdigit((unsigned char) **p); (*p)++) {
                v = v * 10 + (**p - '0');
                if (v > CPUSET_MAX_CPU)
                        return -ERANGE;
        }
        *ret = (int) v;
        return 0;
}

int cpuset_parse(const char *s, struct cpuset *ret, const char **ret_reason) {
        /* A bitmap over the whole range keeps this simple and rejects duplicates for free. */
        _cleanup_free_ unsigned char *bits = NULL;
        struct cpuset r = {};
        const char *p = s;
        int r_;

        while (isspace((unsigned char) *p))
                p++;
        if (strcmp(p, "all") == 0) {
                *ret = (struct cpuset){ .all = true };
                return 0;
        }
        if (!*p)
                return fail(ret_reason, "empty CPU list");

        bits = calloc(CPUSET_MAX_CPU + 1, 1);
        if (!bits)
                return -ENOMEM;

        for (;;) {
                int a, b;
                while (isspace((unsigned char) *p))
                        p++;
                r_ = parse_cpu(&p, &a);
                if (r_ == -ERANGE)
                        return fail(ret_reason, "CPU number too large (at most 8191)");
                if (r_ < 0)
                        return fail(ret_reason, "expected a CPU number");
                b = a;
                while (isspace((unsigned char) *p))
                        p++;
                if (*p == '-') {
                        p++;
                        while (isspace((unsigned char) *p))
                                p++;
                        r_ = parse_cpu(&p, &b);
                        if (r_ == -ERANGE)
                                return fail(ret_reason, "CPU number too large (at most 8191)");
                        if (r_ < 0)
                                return fail(ret_reason, "expected a CPU number after '-'");
                        if (b < a)
                                return fail(ret_reason, "range goes backwards");
                }
                for (int c = a; c <= b; c++) {
                        if (!bits[c])
                                r.n++;
                        bits[c] = 1;
                }
                while (isspace((unsigned char) *p))
                        p++;
                if (*p == '\0')
                        break;
                if (*p != ',')
                        return fail(ret_reason, "expected ',' between CPUs");
                p++;
        }

        r.cpus = malloc(r.n * sizeof(int));
        if (!r.cpus)
                return -ENOMEM;
        for (int c = 0, i = 0; c <= CPUSET_MAX_CPU; c++)
                if (bits[c])
                        r.cpus[i++] = c;
        *ret = r;
        return 0;
}

int cpuset_format(const struct cpuset *s, char *buf, size_t len) {
        size_t off = 0;

        if (len == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        if (s->all) {
                if (len < 4)
                        return -ENOBUFS;
                memcpy(buf, "all", 4);
                return 0;
        }
        for (size_t i = 0; i < s->n;) {
                size_t j = i;
                while (j + 1 < s->n && s->cpus[j + 1] == s->cpus[j] + 1)
                        j++;
                int w;
                if (j == i)
                        w = snprintf(buf + off, len - off, "%s%d", off ? "," : "", s->cpus[i]);
                else
                        w = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", s->cpus[i],
                                     s->cpus[j]);
                if (w < 0 || (size_t) w >= len - off)
                        return -ENOBUFS;
                off += (size_t) w;
                i = j + 1;
        }
        return 0;
}

bool cpuset_contains(const struct cpuset *s, int cpu) {
        if (s->all)
                return true;
        for (size_t i = 0; i < s->n; i++)
                if (s->cpus[i] == cpu)
                        return true;
        return false;
}

int cpuset_online(struct cpuset *ret, const char *path) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[4096];

        f = fopen(path ?: "/sys/devices/system/cpu/online", "re");
        if (!f)
                return negative_errno();
        if (!fgets(line, sizeof(line), f))
                return -EIO;
        line[strcspn(line, "\n")] = '\0';
        return cpuset_parse(line, ret, NULL);
}
