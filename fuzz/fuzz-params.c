/* SPDX-License-Identifier: MIT */
/* Fuzz target for what a request's target carries: the raw path and query checks, the routing
 * path and its segments, and every query parameter parser (times, spans, whole numbers,
 * pages).  Whatever is accepted stays in the ranges that the queries' arithmetic relies on. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"
#include "path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_value(const char *v) {
        char err[FARM_PARAM_ERROR_MAX];
        static const int64_t nows[] = { 0, INT64_C(1796300000000000000), INT64_MAX, INT64_MIN };
        for (size_t i = 0; i < sizeof(nows) / sizeof(*nows); i++) {
                int64_t t = -42;
                if (farm_param_time("t", v, nows[i], &t, err) >= 0 &&
                    (t < FARM_TIME_MIN_NS || t >= FARM_TIME_MAX_NS))
                        abort();
        }
        uint64_t span = 0, n = 0;
        if (farm_param_span("s", v, &span, err) >= 0 && (span == 0 || span > FARM_SPAN_MAX_NS))
                abort();
        if (farm_param_uint("n", v, 3, 8191, &n, err) >= 0 && (n < 3 || n > 8191))
                abort();
        struct farm_page p;
        if (farm_param_page(v, v, &p, err) >= 0 &&
            (p.limit < 1 || p.limit > FARM_PAGE_LIMIT_MAX || p.offset > FARM_PAGE_OFFSET_MAX))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char err[FARM_PATH_ERROR_MAX], seg[512];
        char *target = strndup((const char *) data, size), *path = NULL;
        if (!target)
                abort();
        int r = farm_route_path(target, &path);
        if ((r < 0) != (farm_target_check(target, err) < 0))
                abort();
        if (r >= 0) {
                /* Every segment of the routing path decodes, and holds no NUL. */
                for (char *s = path; *s;) {
                        size_t len = strcspn(s, "/");
                        int d = farm_segment_decode(s, len, seg, sizeof(seg));
                        if (d == -EINVAL || (d >= 0 && strlen(seg) > len))
                                abort();
                        s += len + (s[len] == '/');
                }
                free(path);
        }
        /* The query's values, decoded as libmicrohttpd does (but up to the first NUL). */
        char *q = strchr(target, '?');
        for (char *kv = q ? strtok(q + 1, "&") : NULL; kv; kv = strtok(NULL, "&")) {
                char *v = strchr(kv, '=');
                v = v ? v + 1 : kv;
                if (farm_segment_decode(v, strlen(v), seg, sizeof(seg)) == 0)
                        check_value(seg);
                check_value(v);
        }
        /* A value as it is, and a segment encoded and decoded again. */
        check_value(target);
        char enc[3 * 64 + 1];
        if (size < 64 && farm_segment_encode(target, enc, sizeof(enc)) == 0 &&
            (farm_segment_decode(enc, strlen(enc), seg, sizeof(seg)) != 0 || strcmp(seg, target)))
                abort();
        free(target);
        return 0;
}
