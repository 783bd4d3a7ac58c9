/* SPDX-License-Identifier: MIT */
/* The farm dashboard's routes: which page or plot answers a URL, for GET and HEAD. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dash-internal.h"
#include "path.h"

/* The part of url after prefix when url starts with it, else NULL. */
static const char *after(const char *url, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(url, prefix, n) == 0 ? url + n : NULL;
}

/* The part of s before suffix (into buf) when s ends with it. */
static bool strip_suffix(const char *s, const char *suffix, char *buf, size_t size) {
        size_t n = strlen(s), m = strlen(suffix);
        if (n <= m || strcmp(s + n - m, suffix) != 0 || n - m >= size)
                return false;
        snprintf(buf, size, "%.*s", (int) (n - m), s);
        return true;
}

void farm_dash_refusal(struct farm_answer *ret, unsigned status, const char *msg, int64_t now_ns) {
        *ret = (struct farm_answer){};
        struct dash x = { .now = now_ns, .a = ret };
        dash_fail_page(&x, status, "%s", msg);
}

int farm_dash_route(farm_db *db, const struct farm_rule *rule, const char *url,
                    const struct farm_args *args, int64_t now_ns, struct farm_answer *ret) {
        enum { OVERVIEW, MACHINE, KERNEL, PLOT_HIST, PLOT_LT, PLOT_COV } which;
        /* A machine id, or a release percent-encoded (three bytes for each of its characters at
         * most) and then decoded in place. */
        char key[3 * SUMMARY_MAX_RELEASE + 1] = "";
        const char *rest;
        int r;

        if (strcmp(url, "/") == 0)
                which = OVERVIEW;
        else if ((rest = after(url, "/plots/machines/"))) {
                if (strip_suffix(rest, "/histogram.svg", key, sizeof(key)))
                        which = PLOT_HIST;
                else if (strip_suffix(rest, "/longterm.svg", key, sizeof(key)))
                        which = PLOT_LT;
                else
                        return 0;
        } else if ((rest = after(url, "/plots/kernels/"))) {
                if (!strip_suffix(rest, "/coverage.svg", key, sizeof(key)))
                        return 0;
                which = PLOT_COV;
        } else if ((rest = after(url, "/machines/")) && *rest && !rest[strcspn(rest, "/")]) {
                which = MACHINE;
                snprintf(key, sizeof(key), "%.64s", rest);
        } else if ((rest = after(url, "/kernels/")) && *rest) {
                which = KERNEL;
                if (strlen(rest) >= sizeof(key))
                        rest = ""; /* longer than any release, even encoded */
                snprintf(key, sizeof(key), "%s", rest);
        } else
                return 0;

        *ret = (struct farm_answer){};
        struct dash x = { .db = db, .rule = rule, .now = now_ns, .args = args, .a = ret };
        /* The key is a segment of the routing path, still percent-encoded (a release stored
         * before the rule may hold a '/'): decoded here.  One longer than any release (or cut
         * to fit key) names nothing. */
        bool release = which == KERNEL || which == PLOT_COV;
        r = which == OVERVIEW ? 0
            : release         ? farm_release_segment(key, strlen(key), key)
                              : farm_segment_decode(key, strlen(key), key, sizeof(key));
        if (r == -EINVAL || (r < 0 && !release)) {
                dash_fail_page(&x, 404, "no such page: a bad escape in the path");
                return 1;
        }
        if (r < 0) {
                dash_fail_page(&x, 404, "no such kernel release");
                return 1;
        }
        switch (which) {
        case OVERVIEW:
                dash_page_overview(&x);
                break;
        case MACHINE:
                dash_page_machine(&x, key);
                break;
        case KERNEL:
                dash_page_kernel(&x, key);
                break;
        case PLOT_HIST:
                dash_plot_machine(&x, key, true);
                break;
        case PLOT_LT:
                dash_plot_machine(&x, key, false);
                break;
        case PLOT_COV:
                dash_plot_coverage(&x, key);
                break;
        }
        if (ret->status == 0) {
                snprintf(ret->err, sizeof(ret->err), "%s: no answer", url);
                dash_fail_internal(&x, -EIO, NULL);
        }
        return 1;
}
