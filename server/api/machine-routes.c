/* SPDX-License-Identifier: MIT */
/* The routes of the machines: GET /api/v1/machines (a page), /api/v1/machines/{id}, .../runs
 * and .../events, answered from the typed results of the query layer, encoded here. */
#include <errno.h>

#include "answer-json.h"
#include "encode-inventory.h"
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
        farm_api_list_answer(a, json_object(), "machines", list, path, args, &page, total);
        return 0;
}

/* The answer of a machine's list: {"machine": id, key: list, and the page}; or of r, what
 * reading the list returned, when it failed (list the answer's, or freed). */
static int machine_list_answer(struct farm_answer *a, int r, const char *id, const char *key,
                               json_t *list, const char *path, const struct farm_args *args,
                               const struct farm_page *page, uint64_t total) {
        if (r == -ENOENT) {
                query_error(a, 404, "no such machine");
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);
        json_t *o = json_object();
        if (o && json_object_set_new(o, "machine", json_string(id)) < 0)
                json_decref(o), o = NULL;
        farm_api_list_answer(a, o, key, list, path, args, page, total);
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
        return machine_list_answer(a, r, id, "runs", list, path, args, &page, total);
}

int farm_api_inventory(farm_db *db, const char *id, const struct farm_args *args, const char *path,
                       const struct farm_clock_view *cv, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        _cleanup_inventory_history_ struct farm_inventory_history h = {};

        if (!query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        int r = farm_machine_inventory(db, id, &page, cv, &h, a->err);
        if (r == -ENOENT) {
                query_error(a, 404, "no such machine");
                return 0;
        }
        if (r < 0)
                return query_internal(a, r);
        json_t *o = farm_inventory_to_json(id, &h);
        farm_api_list_answer(a, o, "changes", farm_inventory_changes_to_json(&h), path, args, &page,
                             h.total_changes);
        return 0;
}

static bool event_type_ok(const char *s, struct farm_answer *a) {
        char why[NAME_WHY_MAX];
        bool ok = name_ok(&summary_name_event_type, s, why);
        if (!ok)
                query_error(a, 400, "type=%.64s: %s", s, why);
        return ok;
}

int farm_api_events(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                    const char *path, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct farm_page page;
        struct farm_event_page events;
        int64_t from = INT64_MIN, to = INT64_MAX;
        const char *type = farm_args_get(args, "type");
        json_t *list = NULL;
        uint64_t total = 0;

        if ((type && !event_type_ok(type, a)) ||
            !query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("from", farm_args_get(args, "from"), now, &from, perr),
                            perr, a) ||
            !query_param_ok(farm_param_time("to", farm_args_get(args, "to"), now, &to, perr), perr,
                            a))
                return 0;
        if (from >= to) {
                query_error(a, 400, "from=%.64s: not before to=%.64s",
                            farm_args_get(args, "from") ?: "", farm_args_get(args, "to") ?: "");
                return 0;
        }
        int r = farm_machine_events(db, id, from, to, type, &page, &events, a->err);
        if (r >= 0) {
                list = farm_events_to_json(&events);
                total = events.total;
                farm_event_page_done(&events);
        }
        return machine_list_answer(a, r, id, "events", list, path, args, &page, total);
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
