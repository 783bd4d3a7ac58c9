/* SPDX-License-Identifier: MIT */
/* What a verdict answers once its machines are judged: each gating machine's answer and what
 * it still misses, the machines that ran the release without gating it, the verdict itself and
 * the reasons that say why, in struct farm_verdict. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict-internal.h"

/* ---- what is missing ----------------------------------------------------------------------- */

static int missing_add(struct vctx *v, const struct farm_missing *item) {
        struct farm_verdict *o = v->out;
        if (!farm_grow((void **) &o->missing, o->nmissing, sizeof(*o->missing)))
                return -ENOMEM;
        o->missing[o->nmissing++] = *item;
        return 0;
}

static int missing_item(struct vctx *v, const struct vmachine *m, enum farm_missing_what what,
                        const char *scenario, int64_t covered, int64_t required, const char *msg) {
        bool ok = true;
        struct farm_missing item = { .what = what,
                                     .machine = farm_strdup_or_null(m->id, &ok),
                                     .hostname = farm_strdup_or_null(m->hostname, &ok),
                                     .scenario = farm_strdup_or_null(scenario, &ok),
                                     .covered_ns = covered,
                                     .required_ns = required,
                                     .message = farm_strdup_or_null(msg, &ok) };
        if (ok && missing_add(v, &item) == 0)
                return 0;
        farm_missing_done(&item);
        return -ENOMEM;
}

/* ---- a gating machine's scenarios ---------------------------------------------------------- */

static int64_t scen_covered(const struct vmachine *m, const char *name) {
        for (size_t k = 0; k < m->nscen; k++)
                if (strcmp(m->scen[k].name, name) == 0)
                        return m->scen[k].covered_ns;
        return 0;
}

static int scen_by_name(const void *a, const void *b) {
        return strcmp((*(const struct vscen *const *) a)->name,
                      (*(const struct vscen *const *) b)->name);
}

/* Adds a scenario to ma's list: required with its loads (req, or none), or not. */
static int cover_add(struct farm_verdict_machine *ma, const char *name, int64_t covered,
                     bool required, int64_t need, const struct farm_rule_loads *req) {
        if (!farm_grow((void **) &ma->scenarios, ma->nscenarios, sizeof(*ma->scenarios)))
                return -ENOMEM;
        struct farm_scenario_cover *c = &ma->scenarios[ma->nscenarios++];
        size_t n = req ? req->ngens : 0;
        *c = (struct farm_scenario_cover){ .name = strdup(name),
                                           .covered_ns = covered,
                                           .required = required,
                                           .required_ns = need,
                                           .loads = calloc(n + 1, sizeof(char *)) };
        if (!c->name || !c->loads)
                return -ENOMEM;
        for (; c->nloads < n; c->nloads++)
                if (!(c->loads[c->nloads] = strdup(req->gens[c->nloads])))
                        return -ENOMEM;
        return 0;
}

/* The required scenarios of a gating machine, and what of them is missing. */
static int required_scenarios(struct vctx *v, const struct vmachine *m,
                              struct farm_verdict_machine *ma, bool *pending) {
        char msg[512], a[VTEXT_MAX], b[VTEXT_MAX], c[VTEXT_MAX];
        for (size_t i = 0; i < v->rule.nscenarios; i++) {
                const char *name = v->rule.scenarios[i].name;
                int64_t need = (int64_t) v->rule.scenarios[i].min_ns, got = scen_covered(m, name);
                const struct farm_rule_loads *req = farm_rule_loads_of(&v->rule, name);
                int r = cover_add(ma, name, got, true, need, req);
                if (r < 0)
                        return r;
                if (got >= need || m->nentries == 0)
                        continue;
                if (got == 0)
                        snprintf(msg, sizeof(msg), "%s: scenario %s never ran%s (needs %s)",
                                 vhost(m), name, req ? " with its load" : "", vspan_text(a, need));
                else
                        snprintf(msg, sizeof(msg),
                                 "%s: scenario %s covered %s of %s, %s still missing", vhost(m),
                                 name, vspan_text(a, got), vspan_text(b, need),
                                 vspan_text(c, need - got));
                if ((r = missing_item(v, m, FARM_MISSING_SCENARIO, name, got, need, msg)) < 0)
                        return r;
                *pending = true;
        }
        return 0;
}

/* The others by name: the order they were met in differs between the day rollups and the
 * intervals read one by one. */
static int other_scenarios(struct vctx *v, const struct vmachine *m,
                           struct farm_verdict_machine *ma) {
        _cleanup_free_ const struct vscen **by = malloc(MAX(m->nscen, (size_t) 1) * sizeof(*by));
        if (!by)
                return -ENOMEM;
        for (size_t k = 0; k < m->nscen; k++)
                by[k] = &m->scen[k];
        qsort(by, m->nscen, sizeof(*by), scen_by_name);
        for (size_t k = 0; k < m->nscen; k++) {
                bool required = false;
                for (size_t i = 0; i < v->rule.nscenarios; i++)
                        required |= strcmp(by[k]->name, v->rule.scenarios[i].name) == 0;
                int r = required ? 0
                                 : cover_add(ma, *by[k]->name ? by[k]->name : "(none)",
                                             by[k]->covered_ns, false, 0, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- a machine's answer -------------------------------------------------------------------- */

/* The groups of the settings in force last ("a,b"). */
static int groups_of(const struct vmachine *m, struct farm_verdict_machine *ma) {
        const char *s = m->nset ? m->set[m->nset - 1].groups : "";
        while (s && *s) {
                const char *comma = strchr(s, ',');
                size_t n = comma ? (size_t) (comma - s) : strlen(s);
                if (!farm_grow((void **) &ma->groups, ma->ngroups, sizeof(*ma->groups)) ||
                    !(ma->groups[ma->ngroups] = strndup(s, n)))
                        return -ENOMEM;
                ma->ngroups++;
                s = comma ? comma + 1 : NULL;
        }
        return 0;
}

/* What the machine has not covered yet: its coverage, or that it has not run the release. */
static int machine_coverage(struct vctx *v, const struct vmachine *m, bool *pending) {
        char msg[512], a[VTEXT_MAX], b[VTEXT_MAX], c[VTEXT_MAX];
        int64_t period = (int64_t) v->rule.period_ns;
        if (m->nentries == 0) {
                snprintf(msg, sizeof(msg), "%s has not run %s%s", vhost(m), v->release,
                         m->runs ? " long enough to report an interval" : "");
                *pending = true;
                return missing_item(v, m, FARM_MISSING_NOT_RUN, NULL, 0, period, msg);
        }
        if (m->covered_ns >= period)
                return 0;
        snprintf(msg, sizeof(msg), "%s: %s of %s covered, %s still missing", vhost(m),
                 vspan_text(a, m->covered_ns), vspan_text(b, period),
                 vspan_text(c, period - m->covered_ns));
        *pending = true;
        return missing_item(v, m, FARM_MISSING_COVERAGE, NULL, m->covered_ns, period, msg);
}

static int machine_fill(struct vctx *v, const struct vmachine *m, struct farm_verdict_machine *ma) {
        bool pending = false, ran = m->nentries > 0, ok = true;
        int64_t period = (int64_t) v->rule.period_ns;
        int r = machine_coverage(v, m, &pending);
        *ma = (struct farm_verdict_machine){ .id = farm_strdup_or_null(m->id, &ok),
                                             .hostname = farm_strdup_or_null(m->hostname, &ok),
                                             .threshold_ns = vmachine_bound_at(m, v->at),
                                             .ran = ran,
                                             .runs = m->runs,
                                             .covered_ns = m->covered_ns,
                                             .clean_ns = m->clean_ns,
                                             .missing_ns = MAX(period - m->covered_ns, 0),
                                             .has_problem = m->problems > 0,
                                             .last_problem_ns = m->last_problem_ns,
                                             .first_ns = m->first_ns,
                                             .last_ns = m->last_ns,
                                             .problems = m->problems,
                                             .waived = m->waived,
                                             .not_counted = m->not_counted };
        if (r >= 0 && !ok)
                r = -ENOMEM;
        if (r >= 0)
                r = groups_of(m, ma);
        if (r >= 0)
                r = required_scenarios(v, m, ma, &pending);
        if (r >= 0)
                r = other_scenarios(v, m, ma);
        ma->status = m->problems > 0 ? FARM_MACHINE_FAILED
                     : pending       ? FARM_MACHINE_PENDING
                                     : FARM_MACHINE_COMPLETE;
        return r;
}

int vanswer_machine(struct vctx *v, const struct vmachine *m) {
        struct farm_verdict *o = v->out;
        if (!farm_grow((void **) &o->machines, o->nmachines, sizeof(*o->machines)))
                return -ENOMEM;
        return machine_fill(v, m, &o->machines[o->nmachines++]);
}

int vanswer_other(struct vctx *v, const struct vmachine *m) {
        struct farm_verdict *o = v->out;
        bool ok = true;
        if (!farm_grow((void **) &o->others, o->nothers, sizeof(*o->others)))
                return -ENOMEM;
        o->others[o->nothers++] = (struct farm_other_machine){
                .id = farm_strdup_or_null(m->id, &ok),
                .hostname = farm_strdup_or_null(m->hostname, &ok),
                .runs = m->runs,
                .why = m->why_not,
        };
        return ok ? 0 : -ENOMEM;
}

/* ---- the release --------------------------------------------------------------------------- */

static int reason(struct vctx *v, const char *text) {
        struct farm_verdict *o = v->out;
        if (!farm_grow((void **) &o->reasons, o->nreasons, sizeof(*o->reasons)) ||
            !(o->reasons[o->nreasons] = strdup(text)))
                return -ENOMEM;
        o->nreasons++;
        return 0;
}

/* ", 2 violation(s), 1 gap(s)" of counts by kind after line's len characters. */
static void kinds_text(char *line, size_t size, size_t len,
                       const uint64_t counts[FARM_PROBLEM_NKINDS]) {
        bool first = true;
        for (int k = 0; k < FARM_PROBLEM_NKINDS; k++)
                if (counts[k]) {
                        len += (size_t) snprintf(line + len, size - MIN(len, size),
                                                 "%s %" PRIu64 " %s", first ? "" : ",", counts[k],
                                                 farm_problem_kind_name(k));
                        first = false;
                }
}

static int failed_reasons(struct vctx *v) {
        const struct farm_verdict *o = v->out;
        char line[512];
        size_t len = (size_t) snprintf(line, sizeof(line),
                                       "%" PRIu64 " problem(s):", o->problems_total);
        kinds_text(line, sizeof(line), len, o->problem_counts);
        int r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < o->nproblems; i++)
                r = reason(v, o->problems[i].message);
        if (r >= 0 && o->problems_total > o->nproblems) {
                snprintf(line, sizeof(line), "... and %" PRIu64 " more",
                         o->problems_total - o->nproblems);
                r = reason(v, line);
        }
        return r;
}

static int no_gating_machine(struct vctx *v) {
        char line[512];
        snprintf(line, sizeof(line), "no machine gates group %s: nothing can qualify a release",
                 v->group);
        int r = reason(v, line);
        struct farm_missing item = { .what = FARM_MISSING_GATING_MACHINES,
                                     .message = strdup(line) };
        if (r >= 0 && (!item.message || (r = missing_add(v, &item)) < 0)) {
                farm_missing_done(&item);
                r = -ENOMEM;
        }
        return r;
}

static int decide(struct vctx *v, unsigned ngating, unsigned complete) {
        struct farm_verdict *o = v->out;
        char line[512], a[VTEXT_MAX];
        int r = 0;
        if (o->problems_total > 0) {
                o->status = FARM_VERDICT_FAILED;
                return failed_reasons(v);
        }
        o->status = FARM_VERDICT_PENDING;
        if (ngating == 0)
                return no_gating_machine(v);
        if (o->nmissing > 0) {
                for (size_t i = 0; r >= 0 && i < o->nmissing; i++)
                        r = reason(v, o->missing[i].message);
                return r;
        }
        snprintf(line, sizeof(line),
                 "all %u gating machine(s) of group %s ran %s for at least %s with every "
                 "required scenario and no problem",
                 complete, v->group, v->release, vspan_text(a, (int64_t) v->rule.period_ns));
        o->status = FARM_VERDICT_QUALIFIED;
        return reason(v, line);
}

/* Problems of machines that did not gate the release when they happened fail nothing, but a
 * release manager reading the text must not take "no problem" for "nothing happened". */
#define NOT_COUNTED_TOLD 10

static int not_counted_reasons(struct vctx *v) {
        const struct farm_verdict *o = v->out;
        char line[1024];
        if (o->not_counted_total == 0)
                return 0;
        size_t len = (size_t) snprintf(line, sizeof(line),
                                       "%" PRIu64 " problem(s) of machines that did not gate the "
                                       "release then, not counted:",
                                       o->not_counted_total);
        kinds_text(line, sizeof(line), len, v->not_counted_kinds);
        len = strlen(line);
        snprintf(line + len, sizeof(line) - len,
                 " (all of them under not_counted: rtsoak verdict --json, or the release's page)");
        int r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < MIN(o->nnot_counted, (size_t) NOT_COUNTED_TOLD); i++) {
                snprintf(line, sizeof(line), "not counted (%s): %s", o->not_counted[i].why,
                         o->not_counted[i].problem.message);
                r = reason(v, line);
        }
        if (r >= 0 && o->not_counted_total > NOT_COUNTED_TOLD) {
                snprintf(line, sizeof(line), "... and %" PRIu64 " more not counted",
                         o->not_counted_total - NOT_COUNTED_TOLD);
                r = reason(v, line);
        }
        return r;
}

static int waived_reasons(struct vctx *v) {
        const struct farm_verdict *o = v->out;
        char line[1024];
        int r = 0;
        if (o->nwaived == 0)
                return 0;
        snprintf(line, sizeof(line), "%zu problem(s) waived:", o->nwaived);
        r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < o->nwaived; i++) {
                const struct farm_waived_problem *p = &o->waived[i];
                snprintf(line, sizeof(line), "waived by %s (%s): %s", p->waiver.by,
                         p->waiver.reason, p->problem.message);
                r = reason(v, line);
        }
        return r;
}

int vanswer_release(struct vctx *v, unsigned ngating, unsigned ran, unsigned complete) {
        struct farm_verdict *o = v->out;
        snprintf(o->series, sizeof(o->series), "%s", v->series);
        snprintf(o->group, sizeof(o->group), "%s", v->group);
        o->group_source = v->group_source;
        o->at_ns = v->at;
        o->asked_ns = v->asked;
        o->rule = v->rule;
        o->gating_machines = ngating;
        o->machines_ran = ran;
        int r = decide(v, ngating, complete);
        if (r >= 0)
                r = waived_reasons(v);
        if (r >= 0)
                r = not_counted_reasons(v);
        return r;
}
