/* SPDX-License-Identifier: MIT */
/* The table of routes (server-routes.h): a path no row matches is not answered by anything
 * else, so a new route is added here, and tests/test-routes.py holds the table against
 * docs/api.md and fuzzes every row's parameters. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "server-routes.h"

#define J FARM_ROUTE_JSON
#define H FARM_ROUTE_HTML
#define PAGE "limit offset"
#define TIMES "at known_at"
#define WINDOW "window from to hl_from hl_to"

/* One row a line: the test reads them from this file. */
const struct farm_route farm_routes[] = {
        { "POST", "/api/v1/summaries", "", J },
        { "GET", "/api/v1/machines", PAGE, J },
        { "GET", "/api/v1/machines/{id}", "", J },
        { "GET", "/api/v1/machines/{id}/intervals", "from to step cpu scenario " PAGE, J },
        { "GET", "/api/v1/machines/{id}/histogram", "from to cpu scenario " PAGE, J },
        { "GET", "/api/v1/machines/{id}/events", "from to type " PAGE, J },
        { "GET", "/api/v1/machines/{id}/runs", PAGE, J },
        { "GET POST", "/api/v1/machines/{id}/settings", PAGE, J },
        { "GET POST", "/api/v1/machines/{id}/maintenance", PAGE, J },
        { "GET", "/api/v1/maintenance", "machine " PAGE, J },
        { "POST", "/api/v1/maintenance/{id}/cancel", "", J },
        { "GET", "/api/v1/kernels", TIMES " " PAGE, J },
        { "GET", "/api/v1/kernels/{release}/verdict", TIMES, J },
        { "GET POST", "/api/v1/kernels/{release}/waivers", PAGE, J },
        { "GET", "/api/v1/kernels/{release}/compare", "with tolerance min_difference " PAGE, J },
        { "GET", "/api/v1/waivers", PAGE, J },
        { "POST", "/api/v1/waivers/{id}/withdraw", "", J },
        { "GET", "/api/v1/series", TIMES, J },
        { "GET", "/api/v1/series/{series}/latest-stable", TIMES, J },
        { "GET", "/api/v1/audit", PAGE, J },
        { "GET", "/api/v1/notifications", "state kind machine release " PAGE, J },
        { "GET", "/api/v1/traces", "machine from to cpu limit", J },
        { "GET", "/api/v1/traces/{id}", "", J },
        { "GET", "/api/v1/traces/{id}/raw", "", J },
        { "GET", "/metrics", "", J },
        { "GET", "/", "", H },
        { "GET", "/machines/{id}", WINDOW, H },
        { "GET", "/kernels/{release}", "compare", H },
        { "GET", "/plots/machines/{id}/histogram.svg", WINDOW, H },
        { "GET", "/plots/machines/{id}/longterm.svg", WINDOW, H },
        { "GET", "/plots/kernels/{release}/coverage.svg", "", H },
        { "GET", "/traces/{id}.txt", "", J },
};
const unsigned farm_routes_n = ELEMENTSOF(farm_routes);

/* Whether the segment seg (n bytes) matches the pattern segment pat (up to '/' or its end). */
static bool segment_matches(const char *pat, size_t pn, const char *seg, size_t n) {
        if (pn == 0 || pat[0] != '{')
                return pn == n && memcmp(pat, seg, n) == 0;
        const char *close = memchr(pat, '}', pn);
        size_t suffix = close ? pn - (size_t) (close + 1 - pat) : 0;
        return n > suffix && memcmp(seg + n - suffix, close + 1, suffix) == 0;
}

static bool matches(const char *pattern, const char *path) {
        while (*pattern == '/' && *path == '/') {
                pattern++, path++;
                size_t pn = strcspn(pattern, "/"), n = strcspn(path, "/");
                if (!segment_matches(pattern, pn, path, n))
                        return false;
                pattern += pn, path += n;
        }
        return !*pattern && !*path;
}

const struct farm_route *farm_route_find(const char *path) {
        for (unsigned i = 0; i < farm_routes_n; i++)
                if (matches(farm_routes[i].pattern, path))
                        return &farm_routes[i];
        return NULL;
}

/* The next space-separated word of *p (its length in *len), or NULL at the end. */
static const char *next_word(const char **p, size_t *len) {
        *p += strspn(*p, " ");
        if (!**p)
                return NULL;
        const char *w = *p;
        *len = strcspn(w, " ");
        *p += *len;
        return w;
}

static bool has_word(const char *list, const char *word) {
        size_t n = strlen(word), k;
        for (const char *w; (w = next_word(&list, &k));)
                if (k == n && strncmp(w, word, n) == 0)
                        return true;
        return false;
}

bool farm_route_takes(const struct farm_route *route, const char *method) {
        return has_word(route->methods, strcmp(method, "HEAD") == 0 ? "GET" : method);
}

int farm_route_check_args(const struct farm_route *route, const struct farm_args *args,
                          char err[static FARM_ERROR_MAX]) {
        if (args->too_many) {
                snprintf(err, FARM_ERROR_MAX, "too many query parameters (at most %d)",
                         FARM_ARGS_MAX);
                return -EINVAL;
        }
        for (unsigned i = 0; i < args->n; i++) {
                const char *name = args->a[i].name;
                if (!has_word(route->params, name)) {
                        char list[256] = "";
                        size_t o = 0, k;
                        const char *p = route->params;
                        for (const char *w; o < sizeof(list) && (w = next_word(&p, &k));)
                                o += (size_t) snprintf(list + o, sizeof(list) - o, "%s%.*s",
                                                       o ? ", " : "", (int) k, w);
                        snprintf(err, FARM_ERROR_MAX,
                                 "%.64s: unknown parameter (this %s takes: %s)", name,
                                 route->format == FARM_ROUTE_HTML ? "page" : "query",
                                 o ? list : "none");
                        return -EINVAL;
                }
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(args->a[j].name, name) == 0) {
                                snprintf(err, FARM_ERROR_MAX, "%.64s: given more than once", name);
                                return -EINVAL;
                        }
        }
        return 0;
}
