/* SPDX-License-Identifier: MIT */
/* The query parameters of the API: points in time, spans, whole numbers and pages.  Every
 * error message names the parameter and says what was expected, for a 400 answer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FARM_PARAM_ERROR_MAX 256
#define FARM_PAGE_LIMIT_DEFAULT 100
#define FARM_PAGE_LIMIT_MAX 1000
/* Points in time from a request lie in [1970-01-01, 2200-01-01) and spans are at most ten
 * years, so that a time plus a span, a window's length or a day more never leaves int64. */
#define FARM_TIME_MIN_NS INT64_C(0)
#define FARM_TIME_MAX_NS INT64_C(7258118400000000000)
#define FARM_SPAN_MAX_NS (UINT64_C(3650) * 86400 * 1000000000)
/* The largest ?offset=: a page beyond it could not be counted anyway. */
#define FARM_PAGE_OFFSET_MAX (UINT64_C(1) << 53)

/* A point in time: RFC 3339 ("2026-12-03T08:00:00Z"), Unix nanoseconds, "now" or a span in the
 * past ("2h ago"); now_ns anchors the relative forms.  value NULL leaves *ret untouched (the
 * caller's default) and returns 0.  -ERANGE outside [FARM_TIME_MIN_NS, FARM_TIME_MAX_NS). */
int farm_param_time(const char *name, const char *value, int64_t now_ns, int64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]);
/* A window [from, to) of ?from= and ?to=, where one given alone means span_ns from it or up to
 * it: 1 when neither is given (*ret untouched: the caller's default), 0 with both set, or
 * -EINVAL with err naming the parameter: a time refused by farm_param_time(), from not before
 * to, or a window that leaves [FARM_TIME_MIN_NS, FARM_TIME_MAX_NS] (a day up to 1970-01-01
 * begins before what any query takes). */
int farm_param_window(const char *from, const char *to, int64_t now_ns, int64_t span_ns,
                      int64_t *ret_from, int64_t *ret_to, char err[static FARM_PARAM_ERROR_MAX]);
/* A positive span ("5min", "1h") of at most FARM_SPAN_MAX_NS; NULL keeps *ret. */
int farm_param_span(const char *name, const char *value, uint64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]);
/* A whole number in [min, max]; NULL keeps *ret. */
int farm_param_uint(const char *name, const char *value, uint64_t min, uint64_t max, uint64_t *ret,
                    char err[static FARM_PARAM_ERROR_MAX]);

/* ?limit= (1..FARM_PAGE_LIMIT_MAX, default FARM_PAGE_LIMIT_DEFAULT) and ?offset= (default 0). */
struct farm_page {
        uint64_t limit, offset;
};
int farm_param_page(const char *limit, const char *offset, struct farm_page *ret,
                    char err[static FARM_PARAM_ERROR_MAX]);
/* The same with another largest page (a list whose items are small, such as steps). */
int farm_param_page_up_to(const char *limit, const char *offset, uint64_t max,
                          struct farm_page *ret, char err[static FARM_PARAM_ERROR_MAX]);
