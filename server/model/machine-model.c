/* SPDX-License-Identifier: MIT */
/* What frees the machines as the farm lists them, and a machine's runs and events, with all
 * they hold. */
#include <stdlib.h>

#include "machine-model.h"
#include "verdict-model.h"

void farm_latest_run_done(struct farm_latest_run *r) {
        free(r->boot_id);
        free(r->kernel_release);
        free(r->kernel_version);
        free(r->preempt_model);
        *r = (struct farm_latest_run){};
}

void farm_machine_done(struct farm_machine *m) {
        free(m->id);
        free(m->hostname);
        free(m->cpu_model);
        farm_latest_run_done(&m->latest);
        farm_strv_free(m->groups, m->ngroups);
        for (size_t i = 0; i < m->nlabels; i++) {
                free(m->labels[i].key);
                free(m->labels[i].value);
        }
        free(m->labels);
        *m = (struct farm_machine){};
}

void farm_machine_list_done(struct farm_machine_list *l) {
        for (size_t i = 0; i < l->n; i++)
                farm_machine_done(&l->v[i]);
        free(l->v);
        *l = (struct farm_machine_list){};
}

void farm_run_done(struct farm_run *r) {
        free(r->boot_id);
        free(r->kernel_release);
        free(r->kernel_version);
        free(r->preempt_model);
        free(r->daemon_version);
        free(r->release);
        free(r->end.message);
        *r = (struct farm_run){};
}

void farm_run_page_done(struct farm_run_page *p) {
        for (size_t i = 0; i < p->n; i++)
                farm_run_done(&p->v[i]);
        free(p->v);
        *p = (struct farm_run_page){};
}

void farm_event_done(struct farm_event *e) {
        free(e->type);
        free(e->message);
        free(e->kernel_release);
        *e = (struct farm_event){};
}

void farm_event_page_done(struct farm_event_page *p) {
        for (size_t i = 0; i < p->n; i++)
                farm_event_done(&p->v[i]);
        free(p->v);
        *p = (struct farm_event_page){};
}
