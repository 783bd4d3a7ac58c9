/* SPDX-License-Identifier: MIT */
/* A machine's inventory as the farm shows it (farm_machine_inventory()): its versions, and the
 * changes between them with the fields that changed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventories.h"
#include "machines.h"
#include "query-internal.h"

/* The changes of h's versions, oldest first: i -> j where version j differs from i, the one
 * before it (a new run that found the machine as the last one left it is no change). */
static int changes_of(const struct farm_inventory_history *h, size_t **ret, size_t *ret_n) {
        size_t *to = NULL, n = 0;
        for (size_t j = 1; j < h->nversions; j++) {
                if (strcmp(h->versions[j].digest, h->versions[j - 1].digest) == 0)
                        continue;
                if (!farm_grow((void **) &to, n, sizeof(*to))) {
                        free(to);
                        return -ENOMEM;
                }
                to[n++] = j;
        }
        *ret = to;
        *ret_n = n;
        return 0;
}

/* The page of the changes, newest first, with the fields that changed. */
static int page_changes(struct farm_inventory_history *h, const struct farm_page *page) {
        _cleanup_free_ size_t *to = NULL;
        size_t n;
        if (changes_of(h, &to, &n) < 0)
                return -ENOMEM;
        h->total_changes = n;
        for (uint64_t k = page->offset; k < n && h->nchanges < page->limit; k++) {
                size_t j = to[n - 1 - k];
                if (!farm_grow((void **) &h->changes, h->nchanges, sizeof(*h->changes)))
                        return -ENOMEM;
                struct farm_inventory_change *c = &h->changes[h->nchanges];
                *c = (struct farm_inventory_change){ .from = j - 1, .to = j };
                if (farm_inventory_changes(&h->versions[j - 1], &h->versions[j], &c->v, &c->n) < 0)
                        return -ENOMEM;
                h->nchanges++;
        }
        return 0;
}

int farm_release_inventories(farm_db *db, const char *release, int64_t at, int64_t known,
                             int64_t tolerance_ns, struct farm_machine_inventory **ret,
                             size_t *ret_n, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        return farm_inventories_of_release(c, release, at, known, tolerance_ns, ret, ret_n, err);
}

int farm_machine_inventory(farm_db *db, const char *id, const struct farm_page *page,
                           const struct farm_clock_view *cv, struct farm_inventory_history *ret,
                           char err[static FARM_ERROR_MAX]) {
        *ret = (struct farm_inventory_history){};
        int r;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                if ((r = query_machine_known(c, id, err)) < 0)
                        return r;
                r = farm_inventories_of(c, id, NULL, INT64_MAX, cv->clock_tolerance_ns,
                                        &ret->versions, &ret->nversions, err);
        }
        if (r >= 0 && (r = page_changes(ret, page)) < 0)
                snprintf(err, FARM_ERROR_MAX, "out of memory reading an inventory");
        if (r < 0)
                farm_inventory_history_done(ret);
        return r;
}
