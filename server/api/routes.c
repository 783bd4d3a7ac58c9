/* SPDX-License-Identifier: MIT */
/* The table of routes (routes.h): a path no row matches is not answered by anything else, so a
 * new route is added here; tests/dump-routes.c prints it for tests/test-routes.py, which holds
 * it against docs/api.md and fuzzes every row's parameters. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "captures.h"
#include "comparison.h"
#include "day-rows.h"
#include "macro.h"
#include "params.h"
#include "routes.h"
#include "steps.h"
#include "traces.h"

#define J FARM_ROUTE_JSON
#define H FARM_ROUTE_HTML
#define API FARM_CLASS_API
#define DASH FARM_CLASS_DASHBOARD

/* The parameters of a route: a list ended by a row without name. */
#define P(...) ((const struct farm_route_param[]){ __VA_ARGS__, {} })
#define NONE ((const struct farm_route_param[]){ {} })
#define TEXT(n) \
        { n, FARM_PARAM_TEXT, 0, 0, false }
#define TIME(n) \
        { n, FARM_PARAM_TIME, 0, 0, false }
#define SPAN(n) \
        { n, FARM_PARAM_SPAN, 0, 0, false }
#define UINT(n, lo, hi) \
        { n, FARM_PARAM_UINT, lo, hi, false }
#define PERCENT(n, lo, hi) \
        { n, FARM_PARAM_PERCENT, lo, hi, false }
/* A page of a list: ?limit= (1..max) and ?offset=. */
#define PAGE_UP_TO(max) UINT("limit", 1, max), UINT("offset", 0, FARM_PAGE_OFFSET_MAX)
#define PAGE PAGE_UP_TO(FARM_PAGE_LIMIT_MAX)
/* A question to the verdict: the moment judged, and what was known then. */
#define QUESTION TIME("at"), TIME("known_at")
#define CPU UINT("cpu", 0, FARM_CPU_MAX - 1)
/* A machine's page and plots: a named window or one between two times, and a span shown. */
#define WINDOW TEXT("window"), TIME("from"), TIME("to"), TIME("hl_from"), TIME("hl_to")

/* In each row, the parameters in the order their handler reads them (the first wrong one is
 * named). */
const struct farm_route farm_routes[] = {
        { "POST", "/api/v1/summaries", FARM_CLASS_UPLOAD, NONE, J },
        { "GET", "/api/v1/machines", API, P(PAGE), J },
        { "GET", "/api/v1/machines/{id}", API, NONE, J },
        { "GET", "/api/v1/machines/{id}/intervals", API,
          P(CPU, TEXT("scenario"), PAGE_UP_TO(FARM_STEPS_PAGE_MAX), SPAN("step"), TIME("from"),
            TIME("to")),
          J },
        { "GET", "/api/v1/machines/{id}/histogram", API,
          P(CPU, TEXT("scenario"), PAGE, TIME("from"), TIME("to")), J },
        { "GET", "/api/v1/machines/{id}/events", API,
          P(TEXT("type"), PAGE, TIME("from"), TIME("to")), J },
        { "GET", "/api/v1/machines/{id}/runs", API, P(PAGE), J },
        { "GET", "/api/v1/machines/{id}/inventory", API, P(PAGE), J },
        { "GET POST", "/api/v1/machines/{id}/settings", API, P(PAGE), J },
        { "GET POST", "/api/v1/machines/{id}/maintenance", API, P(PAGE), J },
        { "GET", "/api/v1/maintenance", API, P(PAGE, TEXT("machine")), J },
        { "POST", "/api/v1/maintenance/{id}/cancel", API, NONE, J },
        { "GET", "/api/v1/kernels", API, P(QUESTION, PAGE), J },
        { "GET", "/api/v1/kernels/{release}/verdict", API, P(QUESTION), J },
        { "GET", "/api/v1/kernels/{release}/kcidb", API, P(QUESTION, TEXT("origin")), J },
        { "GET POST", "/api/v1/kernels/{release}/waivers", API, P(PAGE), J },
        { "GET", "/api/v1/kernels/{release}/compare", API,
          P(PAGE, SPAN("min_difference"), PERCENT("tolerance", 0, 1000), TEXT("with"),
            UINT("days", 1, FARM_COMPARE_DAYS_MAX)),
          J },
        { "GET", "/api/v1/waivers", API, P(PAGE), J },
        { "POST", "/api/v1/waivers/{id}/withdraw", API, NONE, J },
        { "GET", "/api/v1/series", API, P(QUESTION), J },
        { "GET", "/api/v1/series/{series}/latest-stable", API, P(QUESTION), J },
        { "GET", "/api/v1/audit", FARM_CLASS_AUDIT, P(PAGE), J },
        { "GET", "/api/v1/notifications", FARM_CLASS_AUDIT,
          P(PAGE, TEXT("state"), TEXT("kind"), TEXT("machine"), TEXT("release")), J },
        { "GET", "/api/v1/traces", API,
          P(TEXT("machine"), TIME("from"), TIME("to"), CPU, UINT("limit", 1, FARM_TRACES_LIST_MAX)),
          J },
        { "GET", "/api/v1/traces/{id}", API, NONE, J },
        { "GET", "/api/v1/traces/{id}/raw", API, NONE, J },
        { "GET", "/metrics", FARM_CLASS_METRICS, NONE, J },
        { "GET", "/", DASH, NONE, H },
        { "GET", "/machines/{id}", DASH, P(WINDOW), H },
        { "GET", "/kernels/{release}", DASH, P(TEXT("compare")), H },
        { "GET", "/plots/machines/{id}/histogram.svg", DASH, P(WINDOW), H },
        { "GET", "/plots/machines/{id}/longterm.svg", DASH, P(WINDOW), H },
        { "GET", "/plots/kernels/{release}/coverage.svg", DASH, NONE, H },
        { "GET", "/traces/{id}.txt", DASH, NONE, J },
};
const unsigned farm_routes_n = ELEMENTSOF(farm_routes);

const char *farm_param_type_name(enum farm_param_type t) {
        static const char *const names[FARM_PARAM_TYPE_N] = {
                [FARM_PARAM_TEXT] = "text",       [FARM_PARAM_TIME] = "time",
                [FARM_PARAM_SPAN] = "span",       [FARM_PARAM_UINT] = "uint",
                [FARM_PARAM_PERCENT] = "percent",
        };
        return t < FARM_PARAM_TYPE_N ? names[t] : "?";
}

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

const char *farm_route_allow(const struct farm_route *route, char *buf, size_t size) {
        size_t o = 0, k;
        const char *p = route->methods;
        buf[0] = '\0';
        for (const char *w; o < size && (w = next_word(&p, &k));) {
                bool get = k == 3 && strncmp(w, "GET", 3) == 0;
                o += (size_t) snprintf(buf + o, size - o, "%s%.*s%s", o ? ", " : "", (int) k, w,
                                       get ? ", HEAD" : "");
        }
        return buf;
}

enum farm_route_class farm_route_access(const struct farm_route *route, const char *method) {
        if (route->access == FARM_CLASS_UPLOAD || route->access == FARM_CLASS_AUDIT)
                return route->access;
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
                return FARM_CLASS_STAFF;
        return route->access;
}

static const struct farm_route_param *param_of(const struct farm_route *route, const char *name) {
        for (const struct farm_route_param *p = route->params; p->name; p++)
                if (strcmp(p->name, name) == 0)
                        return p;
        return NULL;
}

/* The value of a parameter against its type and limits (value given, not NULL). */
static int check_value(const struct farm_route_param *p, const char *value, int64_t now_ns,
                       char err[static FARM_PARAM_ERROR_MAX]) {
        char number[32];
        int64_t t;
        uint64_t u;
        switch (p->type) {
        case FARM_PARAM_TIME:
                return farm_param_time(p->name, value, now_ns, &t, err);
        case FARM_PARAM_SPAN:
                return farm_param_span(p->name, value, &u, err);
        case FARM_PARAM_UINT:
                return farm_param_uint(p->name, value, p->min, p->max, &u, err);
        case FARM_PARAM_PERCENT: {
                /* A percentage, with or without its sign. */
                snprintf(number, sizeof(number), "%s", value);
                size_t n = strlen(number);
                if (n > 0 && number[n - 1] == '%')
                        number[n - 1] = '\0';
                if (strlen(value) < sizeof(number) &&
                    farm_param_uint(p->name, number, p->min, p->max, &u, err) >= 0)
                        return 0;
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: expected a percentage %llu-%llu (10 or 10%%)", p->name, value,
                         (unsigned long long) p->min, (unsigned long long) p->max);
                return -EINVAL;
        }
        default:
                return 0;
        }
}

/* "colour: unknown parameter (this query takes: from, to)". */
static int unknown(const struct farm_route *route, const char *name,
                   char err[static FARM_ERROR_MAX]) {
        char list[256] = "";
        size_t o = 0;
        for (const struct farm_route_param *p = route->params; p->name && o < sizeof(list); p++)
                o += (size_t) snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", p->name);
        snprintf(err, FARM_ERROR_MAX, "%.64s: unknown parameter (this %s takes: %s)", name,
                 route->format == FARM_ROUTE_HTML ? "page" : "query", o ? list : "none");
        return -EINVAL;
}

int farm_route_check_args(const struct farm_route *route, const struct farm_args *args,
                          int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        char perr[FARM_PARAM_ERROR_MAX];
        if (args->too_many) {
                snprintf(err, FARM_ERROR_MAX, "too many query parameters (at most %d)",
                         FARM_ARGS_MAX);
                return -EINVAL;
        }
        for (unsigned i = 0; i < args->n; i++) {
                const char *name = args->a[i].name;
                const struct farm_route_param *p = param_of(route, name);
                if (!p)
                        return unknown(route, name, err);
                for (unsigned j = 0; j < i && !p->repeatable; j++)
                        if (strcmp(args->a[j].name, name) == 0) {
                                snprintf(err, FARM_ERROR_MAX, "%.64s: given more than once", name);
                                return -EINVAL;
                        }
        }
        /* The values, in the order of the route's rows. */
        for (const struct farm_route_param *p = route->params; p->name; p++) {
                const char *v = NULL;
                for (unsigned i = 0; i < args->n && !v; i++)
                        if (strcmp(args->a[i].name, p->name) == 0)
                                v = args->a[i].value; /* NULL: "?name", the route's to read */
                if (v && check_value(p, v, now_ns, perr) < 0) {
                        snprintf(err, FARM_ERROR_MAX, "%s", perr);
                        return -EINVAL;
                }
        }
        return 0;
}
