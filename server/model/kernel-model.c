/* SPDX-License-Identifier: MIT */
/* What frees a page of the kernel list. */
#include <stdlib.h>

#include "kernel-model.h"

void farm_kernel_page_done(struct farm_kernel_page *p) {
        for (size_t i = 0; i < p->n; i++) {
                struct farm_kernel *k = &p->v[i];
                free(k->release);
                farm_missing_list_free(k->missing, k->nmissing);
                farm_strv_free(k->reasons, k->nreasons);
        }
        free(p->v);
        *p = (struct farm_kernel_page){};
}
