/* SPDX-License-Identifier: MIT */
/* A verdict's typed parts: the names of their kinds and states, and what frees each of them
 * with all it holds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verdict-model.h"

const char *farm_problem_kind_name(enum farm_problem_kind kind) {
        static const char *const names[FARM_PROBLEM_NKINDS] = {
                [FARM_PROBLEM_VIOLATION] = "violation",
                [FARM_PROBLEM_UNCLEAN_END] = "unclean_end",
                [FARM_PROBLEM_GAP] = "gap",
                [FARM_PROBLEM_LOAD_DOWN] = "load_down",
                [FARM_PROBLEM_PROBE_DOWN] = "probe_down",
                [FARM_PROBLEM_CLOCK] = "clock",
                [FARM_PROBLEM_OVERLAP] = "overlap",
                [FARM_PROBLEM_MIXED_BUILDS] = "mixed_builds",
                [FARM_PROBLEM_REGRESSION] = "regression",
                [FARM_PROBLEM_DROPPED] = "dropped",
                [FARM_PROBLEM_MACHINE_CHANGED] = "machine_changed",
        };
        return (unsigned) kind < FARM_PROBLEM_NKINDS ? names[kind] : "?";
}

const char *farm_verdict_status_name(enum farm_verdict_status status) {
        return status == FARM_VERDICT_QUALIFIED ? "qualified"
               : status == FARM_VERDICT_FAILED  ? "failed"
                                                : "pending";
}

const char *farm_machine_status_name(enum farm_machine_status status) {
        return status == FARM_MACHINE_COMPLETE ? "complete"
               : status == FARM_MACHINE_FAILED ? "failed"
                                               : "pending";
}

const char *farm_missing_what_name(enum farm_missing_what what) {
        static const char *const names[] = {
                [FARM_MISSING_NOT_RUN] = "not_run",
                [FARM_MISSING_COVERAGE] = "coverage",
                [FARM_MISSING_SCENARIO] = "scenario",
                [FARM_MISSING_GATING_MACHINES] = "gating_machines",
        };
        return (unsigned) what < ELEMENTSOF(names) ? names[what] : "?";
}

const char *farm_group_source_name(enum farm_group_source source) {
        return source == FARM_GROUP_CONFIGURED ? "configured"
               : source == FARM_GROUP_SERIES   ? "series"
                                               : "default";
}

const struct farm_evidence *farm_problem_evidence(const struct farm_problem *p) {
        switch (p->kind) {
        case FARM_PROBLEM_VIOLATION:
                return &p->violation.interval;
        case FARM_PROBLEM_UNCLEAN_END:
                return &p->unclean.interval;
        case FARM_PROBLEM_GAP:
                return &p->gap.interval;
        case FARM_PROBLEM_LOAD_DOWN:
        case FARM_PROBLEM_PROBE_DOWN:
                return &p->down.interval;
        default:
                return NULL;
        }
}

void farm_strv_free(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

void farm_evidence_done(struct farm_evidence *e) {
        free(e->scenario);
        *e = (struct farm_evidence){};
}

void farm_builds_done(struct farm_builds *b) {
        for (size_t i = 0; i < b->n; i++) {
                free(b->v[i].kernel_version);
                farm_strv_free(b->v[i].machines, b->v[i].nmachines);
        }
        free(b->v);
        *b = (struct farm_builds){};
}

static int build_copy(const struct farm_build *b, struct farm_build *ret) {
        *ret = (struct farm_build){ .kernel_version = strdup(b->kernel_version),
                                    .machines = calloc(b->nmachines + 1, sizeof(char *)) };
        if (!ret->kernel_version || !ret->machines)
                return -ENOMEM;
        for (; ret->nmachines < b->nmachines; ret->nmachines++)
                if (!(ret->machines[ret->nmachines] = strdup(b->machines[ret->nmachines])))
                        return -ENOMEM;
        return 0;
}

int farm_builds_copy(const struct farm_builds *b, struct farm_builds *ret) {
        *ret = (struct farm_builds){ .v = calloc(b->n + 1, sizeof(*b->v)) };
        int r = ret->v ? 0 : -ENOMEM;
        for (; r >= 0 && ret->n < b->n; ret->n++)
                r = build_copy(&b->v[ret->n], &ret->v[ret->n]);
        if (r < 0)
                farm_builds_done(ret);
        return r;
}

void farm_problem_done(struct farm_problem *p) {
        free(p->id);
        free(p->machine);
        free(p->hostname);
        free(p->message);
        switch (p->kind) {
        case FARM_PROBLEM_VIOLATION:
                free(p->violation.scenario);
                farm_evidence_done(&p->violation.interval);
                free(p->violation.culprit);
                break;
        case FARM_PROBLEM_UNCLEAN_END:
                farm_evidence_done(&p->unclean.interval);
                free(p->unclean.detail);
                break;
        case FARM_PROBLEM_GAP:
                farm_evidence_done(&p->gap.interval);
                break;
        case FARM_PROBLEM_LOAD_DOWN:
        case FARM_PROBLEM_PROBE_DOWN:
                free(p->down.scenario);
                farm_evidence_done(&p->down.interval);
                free(p->down.generator);
                break;
        case FARM_PROBLEM_MIXED_BUILDS:
                farm_builds_done(&p->builds);
                break;
        case FARM_PROBLEM_REGRESSION:
                free(p->regression.scenario);
                free(p->regression.baseline);
                for (size_t i = 0; i < p->regression.ninventory_fields; i++)
                        free(p->regression.inventory_fields[i]);
                free(p->regression.inventory_fields);
                break;
        case FARM_PROBLEM_MACHINE_CHANGED:
                for (size_t i = 0; i < p->changed.nfields; i++)
                        free(p->changed.fields[i]);
                free(p->changed.fields);
                break;
        default:
                break;
        }
        *p = (struct farm_problem){};
}

void farm_missing_done(struct farm_missing *m) {
        free(m->machine);
        free(m->hostname);
        free(m->scenario);
        free(m->message);
        *m = (struct farm_missing){};
}

void farm_missing_list_free(struct farm_missing *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                farm_missing_done(&v[i]);
        free(v);
}

void farm_verdict_machine_done(struct farm_verdict_machine *m) {
        free(m->id);
        free(m->hostname);
        farm_strv_free(m->groups, m->ngroups);
        for (size_t i = 0; i < m->nscenarios; i++) {
                free(m->scenarios[i].name);
                farm_strv_free(m->scenarios[i].loads, m->scenarios[i].nloads);
        }
        free(m->scenarios);
        *m = (struct farm_verdict_machine){};
}

static void problems_free(struct farm_verdict *v) {
        for (size_t i = 0; i < v->nproblems; i++)
                farm_problem_done(&v->problems[i]);
        free(v->problems);
        for (size_t i = 0; i < v->nnot_counted; i++) {
                farm_problem_done(&v->not_counted[i].problem);
                free(v->not_counted[i].why);
        }
        free(v->not_counted);
        for (size_t i = 0; i < v->nwaived; i++) {
                farm_problem_done(&v->waived[i].problem);
                free(v->waived[i].waiver.reason);
                free(v->waived[i].waiver.by);
        }
        free(v->waived);
}

void farm_verdict_free(struct farm_verdict *v) {
        if (!v)
                return;
        free(v->release);
        for (size_t i = 0; i < v->nmachines; i++)
                farm_verdict_machine_done(&v->machines[i]);
        free(v->machines);
        for (size_t i = 0; i < v->nothers; i++) {
                free(v->others[i].id);
                free(v->others[i].hostname);
        }
        free(v->others);
        farm_builds_done(&v->builds);
        free(v->baseline);
        problems_free(v);
        farm_missing_list_free(v->missing, v->nmissing);
        farm_strv_free(v->reasons, v->nreasons);
        free(v);
}
