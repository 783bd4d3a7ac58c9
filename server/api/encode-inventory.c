/* SPDX-License-Identifier: MIT */
/* A machine's inventory as the API answers it (encode-inventory.h). */
#include "encode-inventory.h"
#include "grow.h"
#include "json-time.h"

/* What identifies a version, and when it was found and received. */
static json_t *version_head(const struct farm_inventory_version *v) {
        json_t *o = json_pack("{s:I, s:I}", "run", (json_int_t) v->run, "version",
                              (json_int_t) v->version);
        if (o && (json_set_time(o, "time_ns", v->time_ns) < 0 ||
                  json_object_set_new(o, "after_ns",
                                      v->after_ns == FARM_NONE ? json_null()
                                                               : json_integer(v->after_ns)) < 0 ||
                  json_object_set_new(o, "after",
                                      v->after_ns == FARM_NONE ? json_null()
                                                               : json_time(v->after_ns)) < 0 ||
                  json_set_time(o, "received_ns", v->received_ns) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static json_t *version_json(const struct farm_inventory_version *v) {
        json_t *o = version_head(v);
        if (o && json_object_set_new(o, "digest", json_string(v->digest)) < 0)
                json_decref(o), o = NULL;
        if (o && json_object_set_new(o, "fields", inventory_to_json(&v->fields)) < 0)
                json_decref(o), o = NULL;
        return o;
}

json_t *farm_inventory_to_json(const char *machine, const struct farm_inventory_history *h) {
        json_t *cur = h->nversions ? version_json(&h->versions[h->nversions - 1]) : json_null();
        return cur ? json_pack("{s:s, s:I, s:o}", "machine", machine, "versions",
                               (json_int_t) h->nversions, "current", cur)
                   : NULL;
}

static json_t *change_json(const struct farm_inventory_history *h,
                           const struct farm_inventory_change *c) {
        json_t *fields = inventory_changes_to_json(c->v, c->n, "from", "to");
        json_t *o = fields ? version_head(&h->versions[c->to]) : NULL;
        json_t *prev = o ? version_head(&h->versions[c->from]) : NULL;
        if (!prev || json_object_set_new(o, "previous", prev) < 0 ||
            json_object_set(o, "fields", fields) < 0) {
                json_decref(o);
                o = NULL;
        }
        json_decref(fields);
        return o;
}

json_t *farm_inventory_changes_to_json(const struct farm_inventory_history *h) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < h->nchanges; i++)
                if (json_array_append_new(a, change_json(h, &h->changes[i])) < 0)
                        json_decref(a), a = NULL;
        return a;
}
