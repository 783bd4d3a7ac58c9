/* SPDX-License-Identifier: MIT */
/* The routes of the machines: GET /api/v1/machines (a page), /api/v1/machines/{id} and
 * .../runs, answered from the typed results of the query layer, encoded here. */
#include <errno.h>

#include "encode-machine.h"
#include "machine-routes.h"
#include "machines.h"
#include "query-internal.h"

int farm_api_machines(farm_db *db, const struct farm_args *args, const char *path,
                      const struct farm_clock_view *cv, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        struct farm_machine_list l;
        uint64_t total = 0;

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        int r = farm_machine_page(db, &page, cv, &l, &total, a->err);
        if (r < 0)
                return query_internal(a, r);
        json_t *list = farm_machine_list_to_json(&l);
        farm_machine_list_done(&l);
        query_list_answer(a, json_object(), "machines", list, path, args, &page, total);
        return 0;
}

int farm_api_runs(farm_db *db, const char *id, const struct farm_args *args, const char *path,
                  const struct farm_clock_view *cv, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        struct farm_run_page runs;
        json_t *list = NULL;
        uint64_t total = 0;

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        int r = farm_machine_runs(db, id, &page, cv, &runs, a->err);
        if (r >= 0) {
                list = farm_runs_to_json(&runs);
                total = runs.total;
                farm_run_page_done(&runs);
        }
        return query_machine_list_answer(a, r, id, "runs", list, path, args, &page, total);
}

int farm_api_machine_json(farm_db *db, const char *id, const struct farm_clock_view *cv,
                          json_t **ret, char err[static FARM_ERROR_MAX]) {
        struct farm_machine_list l;
        int r = farm_machines(db, id, cv, &l, err);
        if (r < 0)
                return r;
        json_t *list = farm_machine_list_to_json(&l);
        farm_machine_list_done(&l);
        if (!list)
                return -ENOMEM;
        *ret = id ? json_incref(json_array_get(list, 0)) : json_pack("{s:O}", "machines", list);
        json_decref(list);
        return *ret ? 0 : -ENOMEM;
}
