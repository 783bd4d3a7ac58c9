/* SPDX-License-Identifier: MIT */
/* The optional "inventory" member of a summary: the versions of the machine's inventory that
 * travel with the run, each with its number, when it took effect and its fields. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "summary.h"

/* Plausible wall-clock times, as the rest of the summary's. */
#define TIME_MIN_NS INT64_C(1000000000000000000)
#define TIME_MAX_NS INT64_C(7258118400000000000)

void summary_inventory_free(struct summary *s) {
        for (size_t i = 0; i < s->ninventory; i++)
                inventory_done(&s->inventory[i].fields);
        free(s->inventory);
        s->inventory = NULL;
        s->ninventory = 0;
}

static json_t *encode_one(const struct summary_inventory *v) {
        json_t *o = json_object(), *f = inventory_to_json(&v->fields);
        bool ok = o && f && v->version <= INT64_MAX &&
                  json_object_set_new(o, "version", json_integer((json_int_t) v->version)) == 0 &&
                  json_object_set_new(o, "time_ns", json_integer(v->time_ns)) == 0 &&
                  (v->after_ns == 0 ||
                   json_object_set_new(o, "after_ns", json_integer(v->after_ns)) == 0);
        if (ok && json_object_set_new(o, "fields", f) == 0)
                return o;
        if (!ok)
                json_decref(f);
        json_decref(o);
        return NULL;
}

int summary_inventory_encode(const struct summary *s, json_t *doc) {
        if (s->ninventory == 0)
                return 0;
        json_t *list = json_array();
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < s->ninventory; i++) {
                json_t *o = encode_one(&s->inventory[i]);
                if (!o || json_array_append_new(list, o) < 0) {
                        json_decref(list);
                        return -ERANGE;
                }
        }
        return json_object_set_new(doc, "inventory", list) < 0 ? -ENOMEM : 0;
}

/* "inventory[2].key: message", or "inventory[2]: message" without a key. */
_printf_(4, 5) static int bad(char *err, size_t index, const char *key, const char *fmt, ...) {
        char msg[SUMMARY_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(err, SUMMARY_ERROR_MAX, "inventory[%zu]%s%s: %s", index, key ? "." : "", key ?: "",
                 msg);
        return -EBADMSG;
}

/* A time member: required (time_ns) or optional (after_ns, 0 when absent). */
static int get_time(json_t *o, size_t i, const char *key, bool required, int64_t *ret, char *err) {
        json_t *v = json_object_get(o, key);
        *ret = 0;
        if (!v)
                return required ? bad(err, i, key, "missing") : 0;
        if (!json_is_integer(v) || json_integer_value(v) < TIME_MIN_NS ||
            json_integer_value(v) > TIME_MAX_NS)
                return bad(err, i, key, "not a time (integer nanoseconds, 2001 to 2200)");
        *ret = json_integer_value(v);
        return 0;
}

static int decode_one(json_t *o, size_t i, struct summary_inventory *prev,
                      struct summary_inventory *ret, char *err) {
        static const char *const keys[] = { "version", "time_ns", "after_ns", "fields" };
        char why[INVENTORY_WHY_MAX];
        const char *k;
        json_t *v;
        int r;
        if (!json_is_object(o))
                return bad(err, i, NULL, "not an object");
        json_object_foreach (o, k, v) {
                size_t n = 0;
                while (n < ELEMENTSOF(keys) && strcmp(keys[n], k) != 0)
                        n++;
                if (n == ELEMENTSOF(keys))
                        return bad(err, i, k, "unknown field");
        }
        v = json_object_get(o, "version");
        if (!v)
                return bad(err, i, "version", "missing");
        if (!json_is_integer(v) || json_integer_value(v) < 1)
                return bad(err, i, "version", "not an integer of at least 1");
        ret->version = (uint64_t) json_integer_value(v);
        if (prev && ret->version <= prev->version)
                return bad(err, i, "version", "versions must be in ascending order");
        if ((r = get_time(o, i, "time_ns", true, &ret->time_ns, err)) < 0 ||
            (r = get_time(o, i, "after_ns", false, &ret->after_ns, err)) < 0)
                return r;
        if (ret->after_ns > ret->time_ns)
                return bad(err, i, "after_ns", "later than time_ns");
        v = json_object_get(o, "fields");
        if (!v)
                return bad(err, i, "fields", "missing");
        if (!json_is_object(v))
                return bad(err, i, "fields", "not an object");
        if (json_object_size(v) > INVENTORY_MAX_FIELDS)
                return bad(err, i, "fields", "%zu fields, at most %d allowed", json_object_size(v),
                           INVENTORY_MAX_FIELDS);
        /* Each error of a field's begins with its name: "dmi.bios_version: ...". */
        r = inventory_from_json(v, &ret->fields, why);
        if (r == -EBADMSG)
                snprintf(err, SUMMARY_ERROR_MAX, "inventory[%zu].fields.%s", i, why);
        return r;
}

int summary_inventory_decode(json_t *doc, struct summary *s, char err[static SUMMARY_ERROR_MAX]) {
        json_t *list = json_object_get(doc, "inventory"), *x;
        size_t i;
        if (!list || json_is_null(list))
                return 0;
        if (!json_is_array(list)) {
                snprintf(err, SUMMARY_ERROR_MAX, "inventory: not an array");
                return -EBADMSG;
        }
        if (json_array_size(list) > SUMMARY_MAX_INVENTORY) {
                snprintf(err, SUMMARY_ERROR_MAX, "inventory: %zu entries, at most %d allowed",
                         json_array_size(list), SUMMARY_MAX_INVENTORY);
                return -EBADMSG;
        }
        s->inventory = calloc(json_array_size(list) + 1, sizeof(*s->inventory));
        if (!s->inventory)
                return -ENOMEM;
        json_array_foreach (list, i, x) {
                struct summary_inventory *prev = i ? &s->inventory[i - 1] : NULL;
                int r = decode_one(x, i, prev, &s->inventory[s->ninventory++], err);
                if (r < 0)
                        return r;
        }
        return 0;
}
