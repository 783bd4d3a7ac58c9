/* SPDX-License-Identifier: MIT */
/* Times the dashboard's pages built in-process on a farm database (made by farm-fill): the
 * machine page over 30 days, its two plots, the kernel page and the overview: the first build
 * of a page (as the first visitor waits for it) and the median of the next N builds (without
 * the HTTP round trip).
 *
 *   dash-render DB MACHINE_ID RELEASE END_UNIX_S [N] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dash.h"
#include "metrics.h"
#include "query.h"
#include "db.h"
#include "verdict.h"
#include "timeutil.h"

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
        return x < y ? -1 : x > y;
}

/* The query under the long-term plot: 30 days of 5-minute steps, all in one answer. */
static int time_intervals(farm_db *db, const struct farm_rule *rule, const char *id, int64_t now,
                          unsigned n) {
        struct farm_counters counters = { .rule = rule }; /* the clock view of the steps */
        struct farm_args args = { .unpaged = true };
        char url[128], from[32], to[32];
        int64_t *t = calloc(n + 1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        snprintf(url, sizeof(url), "/api/v1/machines/%s/intervals", id);
        snprintf(from, sizeof(from), "%lld", (long long) (now - 30 * INT64_C(86400000000000)));
        snprintf(to, sizeof(to), "%lld", (long long) now);
        args.a[0].name = "from";
        args.a[0].value = from;
        args.a[1].name = "to";
        args.a[1].value = to;
        args.a[2].name = "step";
        args.a[2].value = "5min";
        args.n = 3;
        for (unsigned i = 0; i <= n; i++) {
                struct farm_answer a;
                int64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
                farm_query_route(db, &counters, url, &args, now, &a);
                t[i] = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
                if (a.status != 200) {
                        fprintf(stderr, "%s: status %u\n", url, a.status);
                        farm_answer_done(&a);
                        free(t);
                        return -EIO;
                }
                farm_answer_done(&a);
        }
        qsort(t + 1, n, sizeof(*t), cmp_i64);
        printf("%-62s CPU: median of %u %8.1f ms\n",
               "  of which the intervals query (8640 steps, JSON)", n, t[1 + n / 2] / 1e6);
        free(t);
        return 0;
}

/* Builds url (with one parameter, or none) n + 1 times: the first and the median of the rest,
 * in ms. */
static int time_page(farm_db *db, const struct farm_rule *rule, const char *url, const char *name,
                     const char *value, int64_t now, unsigned n) {
        struct farm_args args = {};
        int64_t *t = calloc(2 * (n + 1), sizeof(*t)), *cpu = t + n + 1;
        size_t bytes = 0;
        if (!t)
                return -ENOMEM;
        if (name) {
                args.a[0].name = name;
                args.a[0].value = value;
                args.n = 1;
        }
        for (unsigned i = 0; i <= n; i++) {
                struct farm_answer a;
                int64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
                if (farm_dash_route(db, rule, url, &args, now, &a) != 1 || a.status != 200) {
                        fprintf(stderr, "%s: status %u: %s\n", url, a.status,
                                a.text ? a.text : a.err);
                        farm_answer_done(&a);
                        free(t);
                        return -EIO;
                }
                t[i] = now_ns(CLOCK_MONOTONIC) - t0;
                cpu[i] = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
                bytes = strlen(a.text);
                farm_answer_done(&a);
        }
        int64_t first = t[0];
        qsort(t + 1, n, sizeof(*t), cmp_i64);
        qsort(cpu + 1, n, sizeof(*t), cmp_i64);
        printf("%s%s%s%s%s\n  wall: first %.1f ms, median of %u %.1f ms; CPU: median %.1f ms; "
               "%zu bytes\n",
               url, name ? "?" : "", name ?: "", name ? "=" : "", value ?: "", first / 1e6, n,
               t[1 + n / 2] / 1e6, cpu[1 + n / 2] / 1e6, bytes);
        free(t);
        return 0;
}

int main(int argc, char **argv) {
        char err[FARM_ERROR_MAX], url[512];
        struct farm_rule rule;
        farm_db *db;

        if (argc < 5) {
                fprintf(stderr, "Usage: %s DB MACHINE_ID RELEASE END_UNIX_S [N]\n", argv[0]);
                return 2;
        }
        int64_t now = strtoll(argv[4], NULL, 10) * INT64_C(1000000000);
        unsigned n = argc > 5 ? (unsigned) strtoul(argv[5], NULL, 10) : 10;
        if (n == 0)
                n = 1;
        farm_rule_default(&rule);
        if (farm_db_open(argv[1], &db, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        int r = 0;
        snprintf(url, sizeof(url), "/machines/%s", argv[2]);
        r = r ?: time_page(db, &rule, url, "window", "30d", now, n);
        r = r ?: time_intervals(db, &rule, argv[2], now, n);
        r = r ?: time_page(db, &rule, url, "window", "1d", now, n);
        snprintf(url, sizeof(url), "/plots/machines/%s/histogram.svg", argv[2]);
        r = r ?: time_page(db, &rule, url, "window", "30d", now, n);
        snprintf(url, sizeof(url), "/plots/machines/%s/longterm.svg", argv[2]);
        r = r ?: time_page(db, &rule, url, "window", "30d", now, n);
        snprintf(url, sizeof(url), "/kernels/%s", argv[3]);
        r = r ?: time_page(db, &rule, url, NULL, NULL, now, n);
        r = r ?: time_page(db, &rule, "/", NULL, NULL, now, n);
        farm_db_close(db);
        return r < 0 ? 1 : 0;
}
