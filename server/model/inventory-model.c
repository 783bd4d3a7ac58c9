/* SPDX-License-Identifier: MIT */
/* A machine's inventory on the farm (inventory-model.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

void farm_machine_inventories_free(struct farm_machine_inventory *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                farm_inventory_version_done(&v[i].v);
        free(v);
}

bool farm_inventory_field_of_kernel(const char *name) {
        return strncmp(name, "kconfig.", 8) == 0 || strncmp(name, "kernel.", 7) == 0 ||
               strncmp(name, "modules.", 8) == 0;
}

/* Leaves the fields of the kernel out of changes. */
static size_t machine_fields_only(struct inventory_change *v, size_t n) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (!farm_inventory_field_of_kernel(v[i].name))
                        v[k++] = v[i];
        return k;
}

int farm_inventory_differences(const struct farm_machine_inventory *a, size_t na,
                               const struct farm_machine_inventory *b, size_t nb,
                               struct farm_inventory_difference **ret, size_t *ret_n) {
        struct farm_inventory_difference *d = NULL;
        size_t n = 0;
        for (size_t i = 0, k = 0; i < na && k < nb;) {
                int c = strcmp(a[i].machine, b[k].machine);
                if (c) {
                        c < 0 ? i++ : k++;
                        continue;
                }
                if (strcmp(a[i].v.digest, b[k].v.digest) != 0) {
                        struct farm_inventory_difference *x = realloc(d, (n + 1) * sizeof(*d));
                        if (!x)
                                goto oom;
                        d = x;
                        d[n] = (struct farm_inventory_difference){ .a = i, .b = k };
                        if (inventory_diff(&a[i].v.fields, &b[k].v.fields, &d[n].v, &d[n].n) < 0)
                                goto oom;
                        d[n].n = machine_fields_only(d[n].v, d[n].n);
                        if (d[n].n > 0)
                                n++;
                        else
                                free(d[n].v);
                }
                i++, k++;
        }
        *ret = d;
        *ret_n = n;
        return 0;
oom:
        farm_inventory_differences_free(d, n);
        return -ENOMEM;
}

void farm_inventory_differences_free(struct farm_inventory_difference *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].v);
        free(v);
}
