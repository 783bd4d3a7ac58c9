/* SPDX-License-Identifier: MIT */
/* GET /api/v1/kernels/{release}/compare: a release against another, per machine and scenario
 * (store/comparison.c compares them), encoded as JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer-json.h"
#include "encode-compare.h"
#include "json-time.h"
#include "query-internal.h"

static json_t *cmp_side_json(const struct farm_cmp_side *c) {
        if (!c->used)
                return json_null();
        return json_pack("{s:I, s:I, s:I, s:I}", "worst_ns", (json_int_t) c->worst_ns, "p99_9_ns",
                         (json_int_t) c->p99_9_ns, "samples", (json_int_t) c->samples, "violations",
                         (json_int_t) c->violations);
}

static json_t *cmp_entry_json(const struct farm_cmp_entry *e) {
        const struct farm_cmp_side *k = &e->side[0], *w = &e->side[1];
        bool both = k->used && w->used;
        json_t *diff = both ? json_pack("{s:I, s:I}", "worst_ns",
                                        (json_int_t) k->worst_ns - (json_int_t) w->worst_ns,
                                        "p99_9_ns",
                                        (json_int_t) k->p99_9_ns - (json_int_t) w->p99_9_ns)
                            : json_null();
        return json_pack("{s:s, s:o, s:s, s:o, s:o, s:o, s:o}", "machine", e->machine, "scenario",
                         e->scenario[0] ? json_string(e->scenario) : json_null(), "in",
                         both      ? "both"
                         : k->used ? "kernel"
                                   : "with",
                         "kernel", cmp_side_json(k), "with", cmp_side_json(w), "difference", diff,
                         "regression", both ? json_boolean(e->regression) : json_null());
}

/* The machines whose inventories for the two kernels differ, with the fields that do. */
static json_t *inventory_differences_json(const struct farm_comparison *c) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < c->ndiff; i++) {
                const struct farm_inventory_difference *d = &c->diff[i];
                const struct farm_inventory_version *a = &c->inv[0][d->a].v,
                                                    *b = &c->inv[1][d->b].v;
                json_t *fields = inventory_changes_to_json(d->v, d->n, "kernel", "with");
                json_t *o = fields ? json_pack("{s:s, s:{s:I, s:I, s:s}, s:{s:I, s:I, s:s}, s:o}",
                                               "machine", c->inv[0][d->a].machine, "kernel", "run",
                                               (json_int_t) a->run, "version",
                                               (json_int_t) a->version, "digest", a->digest, "with",
                                               "run", (json_int_t) b->run, "version",
                                               (json_int_t) b->version, "digest", b->digest,
                                               "fields", fields)
                                   : NULL;
                if (json_array_append_new(list, o) < 0)
                        json_decref(list), list = NULL;
        }
        return list;
}

/* The days compared when days= was asked: how many, and each kernel's. */
static json_t *days_json(const struct farm_comparison *c) {
        json_t *o = json_pack("{s:I}", "days", (json_int_t) c->days);
        for (int side = 0; o && side < 2; side++) {
                json_t *w = json_object();
                if (!w || json_object_set_new(o, side ? "with" : "kernel", w) < 0 ||
                    json_set_time(w, "from_ns", c->from_ns[side]) < 0 ||
                    json_set_time(w, "to_ns", c->to_ns[side]) < 0)
                        json_decref(o), o = NULL;
        }
        return o;
}

int farm_api_compare(farm_db *db, const char *release, const struct farm_args *args, int64_t now,
                     const char *path, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX], tol[32], err[FARM_ERROR_MAX];
        struct farm_page page;
        uint64_t tolerance = FARM_COMPARE_TOLERANCE_PERCENT_DEFAULT,
                 min_diff = FARM_COMPARE_MIN_DIFFERENCE_NS_DEFAULT, days = 0;
        const char *with = farm_args_get(args, "with"), *t = farm_args_get(args, "tolerance");
        struct farm_comparison cmp;
        int r;

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_span("min_difference", farm_args_get(args, "min_difference"),
                                            &min_diff, perr),
                            perr, a) ||
            !query_param_ok(farm_param_uint("days", farm_args_get(args, "days"), 1,
                                            FARM_COMPARE_DAYS_MAX, &days, perr),
                            perr, a))
                return 0;
        if (t) {
                /* A percentage, with or without its sign. */
                snprintf(tol, sizeof(tol), "%s", t);
                size_t n = strlen(tol);
                if (n > 0 && tol[n - 1] == '%')
                        tol[n - 1] = '\0';
                if (strlen(t) >= sizeof(tol) ||
                    farm_param_uint("tolerance", tol, 0, 1000, &tolerance, perr) < 0) {
                        query_error(a, 400,
                                    "tolerance=%.64s: expected a percentage 0-1000 (10 or 10%%)",
                                    t);
                        return 0;
                }
        }
        if (!with || !with[0]) {
                query_error(a, 400, "with: required, the kernel release to compare with");
                return 0;
        }

        r = farm_kernel_compare(db, release, with, tolerance, min_diff, (uint32_t) days, now, &cmp,
                                err);
        if (r == -ENOENT) {
                query_error(a, 404, "%s", err);
                return 0;
        }
        if (r < 0) {
                snprintf(a->err, sizeof(a->err), "%s", err);
                return query_internal(a, r);
        }
        json_t *o = json_object(), *items = json_array();
        for (size_t i = page.offset; o && items && i < cmp.n && i < page.offset + page.limit; i++)
                json_array_append_new(items, cmp_entry_json(&cmp.v[i]));
        size_t n = cmp.n;
        if (!o || !items ||
            json_object_update_new(
                    o, json_pack("{s:s, s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:o}", "kernel",
                                 release, "with", with, "tolerance_percent", (json_int_t) tolerance,
                                 "min_difference_ns", (json_int_t) min_diff, "rule", cmp.rule,
                                 "regressions", (json_int_t) cmp.regressions, "in_both",
                                 (json_int_t) cmp.in_both, "only_kernel", (json_int_t) cmp.only[0],
                                 "only_with", (json_int_t) cmp.only[1], "comparisons", items)) <
                    0 ||
            json_object_set_new(o, "inventory_differences", inventory_differences_json(&cmp)) < 0 ||
            (cmp.days && json_object_set_new(o, "days", days_json(&cmp)) < 0) ||
            farm_api_add_page(o, path, args, &page, n) < 0) {
                farm_comparison_done(&cmp);
                json_decref(o);
                farm_api_json(a, NULL);
                return 0;
        }
        farm_comparison_done(&cmp);
        farm_api_json(a, o);
        return 0;
}
