/* SPDX-License-Identifier: MIT */
/* What frees a capture and a list of them. */
#include <stdlib.h>

#include "capture-model.h"

void farm_capture_done(struct farm_capture *c) {
        free(c->machine);
        free(c->summary);
        free(c->culprit_kind);
        free(c->culprit_name);
        free(c->analysis);
        *c = (struct farm_capture){};
}

void farm_capture_list_done(struct farm_capture_list *l) {
        for (size_t i = 0; i < l->n; i++)
                farm_capture_done(&l->v[i]);
        free(l->v);
        *l = (struct farm_capture_list){};
}
