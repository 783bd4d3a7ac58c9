/* SPDX-License-Identifier: MIT */
/* What frees the series as "which release is latest stable?" answers them. */
#include <stdlib.h>

#include "series-model.h"

void farm_series_entry_done(struct farm_series_entry *e) {
        free(e->latest_stable);
        free(e->newest);
        *e = (struct farm_series_entry){};
}

void farm_series_list_done(struct farm_series_list *l) {
        for (size_t i = 0; i < l->n; i++)
                farm_series_entry_done(&l->v[i]);
        free(l->v);
        *l = (struct farm_series_list){};
}

void farm_latest_stable_done(struct farm_latest_stable *s) {
        farm_series_entry_done(&s->entry);
        for (size_t i = 0; i < s->nhistory; i++)
                free(s->history[i].latest_stable);
        free(s->history);
        *s = (struct farm_latest_stable){};
}
