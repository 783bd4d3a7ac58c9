/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "server-params.h"
#include "timeutil.h"

int farm_param_time(const char *name, const char *value, int64_t now_ns, int64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]) {
        const char *why = NULL;
        int64_t t;
        if (!value)
                return 0;
        int r = parse_timestamp(value, now_ns, &t, &why);
        if (r < 0) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: %s (expected RFC 3339 such as 2026-12-03T08:00:00Z, or Unix "
                         "nanoseconds)",
                         name, value, why ?: "not a point in time");
                return -EINVAL;
        }
        if (t < FARM_TIME_MIN_NS || t >= FARM_TIME_MAX_NS) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: out of range (from 1970-01-01 to 2200-01-01)", name, value);
                return -ERANGE;
        }
        *ret = t;
        return 0;
}

int farm_param_window(const char *from, const char *to, int64_t now_ns, int64_t span_ns,
                      int64_t *ret_from, int64_t *ret_to, char err[static FARM_PARAM_ERROR_MAX]) {
        int64_t f = 0, t = 0;
        if (!from && !to)
                return 1;
        if (farm_param_time("from", from, now_ns, &f, err) < 0 ||
            farm_param_time("to", to, now_ns, &t, err) < 0)
                return -EINVAL;
        /* The times are in range, and a span at most ten years: neither sum leaves int64. */
        if (!to)
                t = f + span_ns;
        else if (!from)
                f = t - span_ns;
        if (f < FARM_TIME_MIN_NS || t > FARM_TIME_MAX_NS) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: the window %s it %s (times are taken from 1970-01-01 to "
                         "2200-01-01); give both from= and to=",
                         from ? "from" : "to", from ?: to, from ? "from" : "up to",
                         from ? "ends after 2200-01-01" : "begins before 1970-01-01");
                return -EINVAL;
        }
        if (f >= t) {
                snprintf(err, FARM_PARAM_ERROR_MAX, "from=%.64s: not before to=%.64s",
                         from ?: "(default)", to ?: "(default)");
                return -EINVAL;
        }
        *ret_from = f;
        *ret_to = t;
        return 0;
}

int farm_param_span(const char *name, const char *value, uint64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]) {
        const char *why = NULL;
        uint64_t ns;
        if (!value)
                return 0;
        int r = parse_timespan(value, &ns, &why);
        if (r >= 0 && ns == 0) {
                r = -EINVAL;
                why = "must be longer than 0";
        } else if (r >= 0 && ns > FARM_SPAN_MAX_NS) {
                r = -ERANGE;
                why = "longer than ten years";
        }
        if (r < 0) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: %s (expected a span such as 5min or 1h)", name, value,
                         why ?: "not a span");
                return -EINVAL;
        }
        *ret = ns;
        return 0;
}

int farm_param_uint(const char *name, const char *value, uint64_t min, uint64_t max, uint64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]) {
        if (!value)
                return 0;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end || errno) {
                snprintf(err, FARM_PARAM_ERROR_MAX, "%s=%.64s: not a whole number", name, value);
                return -EINVAL;
        }
        if (v < min || v > max) {
                snprintf(err, FARM_PARAM_ERROR_MAX, "%s=%.64s: out of range %llu..%llu", name,
                         value, (unsigned long long) min, (unsigned long long) max);
                return -ERANGE;
        }
        *ret = v;
        return 0;
}

int farm_param_page(const char *limit, const char *offset, struct farm_page *ret,
                    char err[static FARM_PARAM_ERROR_MAX]) {
        return farm_param_page_up_to(limit, offset, FARM_PAGE_LIMIT_MAX, ret, err);
}

int farm_param_page_up_to(const char *limit, const char *offset, uint64_t max,
                          struct farm_page *ret, char err[static FARM_PARAM_ERROR_MAX]) {
        struct farm_page p = { .limit = FARM_PAGE_LIMIT_DEFAULT, .offset = 0 };
        int r = farm_param_uint("limit", limit, 1, max, &p.limit, err);
        if (r >= 0)
                r = farm_param_uint("offset", offset, 0, FARM_PAGE_OFFSET_MAX, &p.offset, err);
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}
