/* SPDX-License-Identifier: MIT */
/* The series as JSON (docs/api.md): GET /api/v1/series and .../latest-stable, the typed
 * answers of the verdict log encoded at the edge, every member in its place. */
#include <errno.h>

#include "encode-series.h"
#include "timeutil.h"

static json_t *entry_json(const struct farm_series_entry *e) {
        char t[TIMESTAMP_MAX_LEN];
        bool since = e->since_ns != FARM_NONE;
        return json_pack("{s:s, s:s?, s:o, s:o, s:i, s:s, s:s?}", "series", e->series,
                         "latest_stable", e->latest_stable, "since",
                         since ? json_string(format_timestamp_utc(t, e->since_ns)) : json_null(),
                         "since_ns", since ? json_integer(e->since_ns) : json_null(), "releases",
                         e->releases, "newest", e->newest, "newest_verdict",
                         e->judged ? farm_verdict_status_name(e->newest_status) : NULL);
}

json_t *farm_series_list_to_json(const struct farm_series_list *l) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < l->n; i++)
                if (json_array_append_new(list, entry_json(&l->v[i])) < 0) {
                        json_decref(list);
                        return NULL;
                }
        return json_pack("{s:o}", "series", list);
}

json_t *farm_latest_stable_to_json(const struct farm_latest_stable *s) {
        char t[TIMESTAMP_MAX_LEN];
        json_t *o = entry_json(&s->entry), *hist = json_array();
        for (size_t i = 0; hist && i < s->nhistory; i++) {
                const struct farm_stable_change *h = &s->history[i];
                json_array_append_new(hist, json_pack("{s:s?, s:I, s:s}", "latest_stable",
                                                      h->latest_stable, "from_ns",
                                                      (json_int_t) h->from_ns, "from",
                                                      format_timestamp_utc(t, h->from_ns)));
        }
        if (!o || !hist) {
                json_decref(o);
                json_decref(hist);
                return NULL;
        }
        json_object_set_new(o, "at_ns", json_integer(s->at_ns));
        json_object_set_new(o, "at", json_string(format_timestamp_utc(t, s->at_ns)));
        json_object_set_new(o, "history", hist);
        return o;
}

int farm_series_json(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                     json_t **ret, char err[static FARM_ERROR_MAX]) {
        struct farm_series_list l;
        int r = farm_series(db, rule, q, &l, err);
        if (r < 0)
                return r;
        *ret = farm_series_list_to_json(&l);
        farm_series_list_done(&l);
        return *ret ? 0 : -ENOMEM;
}

int farm_latest_stable_json(farm_db *db, const struct farm_rule *rule, const char *series,
                            const struct farm_question *q, json_t **ret,
                            char err[static FARM_ERROR_MAX]) {
        struct farm_latest_stable s;
        int r = farm_latest_stable(db, rule, series, q, &s, err);
        if (r < 0)
                return r;
        *ret = farm_latest_stable_to_json(&s);
        farm_latest_stable_done(&s);
        return *ret ? 0 : -ENOMEM;
}
