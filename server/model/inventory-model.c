/* SPDX-License-Identifier: MIT */
/* A machine's inventory on the farm (inventory-model.h). */
#include <stdlib.h>

#include "inventory-model.h"

void farm_inventory_version_done(struct farm_inventory_version *v) {
        inventory_done(&v->fields);
}

void farm_inventory_history_done(struct farm_inventory_history *h) {
        for (size_t i = 0; i < h->nversions; i++)
                farm_inventory_version_done(&h->versions[i]);
        free(h->versions);
        for (size_t i = 0; i < h->nchanges; i++)
                free(h->changes[i].v);
        free(h->changes);
        *h = (struct farm_inventory_history){};
}

int farm_inventory_changes(const struct farm_inventory_version *a,
                           const struct farm_inventory_version *b, struct inventory_change **ret,
                           size_t *ret_n) {
        static const struct inventory none = {};
        return inventory_diff(a ? &a->fields : &none, &b->fields, ret, ret_n);
}
