/* SPDX-License-Identifier: MIT */
/* The verdict and the kernel list as JSON (docs/api.md): the typed results encoded at the
 * edge, every member in its place, as the routes and the verdict command answer them. */
#include <errno.h>

#include "encode-verdict.h"
#include "macro.h"
#include "timeutil.h"

json_t *farm_strings_to_json(char *const *v, size_t n) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < n; i++)
                if (json_array_append_new(list, json_string(v[i])) < 0) {
                        json_decref(list);
                        return NULL;
                }
        return list;
}

json_t *farm_missing_to_json(const struct farm_missing *v, size_t n) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < n; i++) {
                const struct farm_missing *m = &v[i];
                json_t *j = m->what == FARM_MISSING_GATING_MACHINES
                                    ? json_pack("{s:s, s:s}", "what",
                                                farm_missing_what_name(m->what), "message",
                                                m->message)
                                    : json_pack("{s:s, s:s?, s:s, s:s?, s:I, s:I, s:I, s:s}",
                                                "machine", m->machine, "hostname", m->hostname,
                                                "what", farm_missing_what_name(m->what), "scenario",
                                                m->scenario, "covered_ns",
                                                (json_int_t) m->covered_ns, "required_ns",
                                                (json_int_t) m->required_ns, "missing_ns",
                                                (json_int_t) MAX(m->required_ns - m->covered_ns, 0),
                                                "message", m->message);
                if (json_array_append_new(list, j) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        return list;
}

static json_t *scenarios_json(const struct farm_verdict_machine *m) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < m->nscenarios; i++) {
                const struct farm_scenario_cover *c = &m->scenarios[i];
                json_t *j = c->required
                                    ? json_pack("{s:s, s:I, s:I, s:o}", "name", c->name,
                                                "covered_ns", (json_int_t) c->covered_ns,
                                                "required_ns", (json_int_t) c->required_ns, "loads",
                                                farm_strings_to_json(c->loads, c->nloads))
                                    : json_pack("{s:s, s:I, s:n, s:[]}", "name", c->name,
                                                "covered_ns", (json_int_t) c->covered_ns,
                                                "required_ns", "loads");
                if (json_array_append_new(list, j) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        return list;
}

static json_t *time_or_null(bool given, int64_t ns) {
        char t[TIMESTAMP_MAX_LEN];
        return given ? json_string(format_timestamp_utc(t, ns)) : json_null();
}

static json_t *machine_json(const struct farm_verdict_machine *m) {
        return json_pack(
                "{s:s, s:s?, s:I, s:o, s:b, s:i, s:I, s:I, s:o, s:o, s:I, s:o, s:o, s:o, s:i, "
                "s:i, s:i, s:s}",
                "id", m->id, "hostname", m->hostname, "threshold_ns", (json_int_t) m->threshold_ns,
                "groups", farm_strings_to_json(m->groups, m->ngroups), "ran", m->ran, "runs",
                (int) m->runs, "covered_ns", (json_int_t) m->covered_ns, "clean_ns",
                (json_int_t) m->clean_ns, "last_problem_ns",
                m->has_problem ? json_integer(m->last_problem_ns) : json_null(), "last_problem",
                time_or_null(m->has_problem, m->last_problem_ns), "missing_ns",
                (json_int_t) m->missing_ns, "first", time_or_null(m->ran, m->first_ns), "last",
                time_or_null(m->ran, m->last_ns), "scenarios", scenarios_json(m), "problems",
                (int) m->problems, "waived", (int) m->waived, "not_counted", (int) m->not_counted,
                "status", farm_machine_status_name(m->status));
}

/* Each of n elements of size bytes from v, as each_json makes it. */
static json_t *list_json(const void *v, size_t n, size_t size,
                         json_t *(*each_json)(const void *) ) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < n; i++)
                if (json_array_append_new(list, each_json((const char *) v + i * size)) < 0) {
                        json_decref(list);
                        return NULL;
                }
        return list;
}

static json_t *machine_each(const void *m) {
        return machine_json(m);
}

static json_t *other_each(const void *x) {
        const struct farm_other_machine *m = x;
        return json_pack("{s:s, s:s?, s:i, s:s}", "id", m->id, "hostname", m->hostname, "runs",
                         (int) m->runs, "why", m->why);
}

static json_t *problem_each(const void *p) {
        return farm_problem_to_json(p);
}

static json_t *uncounted_each(const void *p) {
        return farm_uncounted_to_json(p);
}

static json_t *waived_each(const void *p) {
        return farm_waived_to_json(p);
}

static json_t *counts_json(const uint64_t counts[FARM_PROBLEM_NKINDS]) {
        json_t *o = json_object();
        for (int k = 0; o && k < FARM_PROBLEM_NKINDS; k++)
                json_object_set_new(o, farm_problem_kind_name(k),
                                    json_integer((json_int_t) counts[k]));
        return o;
}

/* The rule the verdict judged with, and the release it compared with. */
static json_t *rule_json(const struct farm_verdict *v, json_t *baseline) {
        json_t *rule = farm_rule_to_json(&v->rule);
        if (rule)
                json_object_set(rule, "baseline", baseline);
        return rule;
}

json_t *farm_verdict_to_json(const struct farm_verdict *v) {
        char t[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        json_auto_t *baseline = v->baseline ? json_string(v->baseline) : json_null();
        return json_pack(
                "{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:{s:I, s:I, s:I}, s:o, "
                "s:i, s:i, s:o, s:o, s:o, s:O, s:I, s:o, s:I, s:o, s:I, s:o, s:o, s:o, s:o}",
                "release", v->release, "series", v->series, "group", v->group, "group_source",
                farm_group_source_name(v->group_source), "verdict",
                farm_verdict_status_name(v->status), "at_ns", (json_int_t) v->at_ns, "at",
                format_timestamp_utc(t, v->at_ns), "asked_at_ns", (json_int_t) v->asked_ns,
                "asked_at", format_timestamp_utc(t2, v->asked_ns), "late", "intervals",
                (json_int_t) v->late.intervals, "events", (json_int_t) v->late.events, "covered_ns",
                (json_int_t) v->late.covered_ns, "rule", rule_json(v, baseline), "gating_machines",
                (int) v->gating_machines, "machines_ran", (int) v->machines_ran, "machines",
                list_json(v->machines, v->nmachines, sizeof(*v->machines), machine_each),
                "other_machines", list_json(v->others, v->nothers, sizeof(*v->others), other_each),
                "builds", farm_builds_to_json(&v->builds), "baseline", baseline, "problems_total",
                (json_int_t) v->problems_total, "problem_counts", counts_json(v->problem_counts),
                "problems_listed", (json_int_t) v->nproblems, "problems",
                list_json(v->problems, v->nproblems, sizeof(*v->problems), problem_each),
                "not_counted_total", (json_int_t) v->not_counted_total, "not_counted",
                list_json(v->not_counted, v->nnot_counted, sizeof(*v->not_counted), uncounted_each),
                "waived", list_json(v->waived, v->nwaived, sizeof(*v->waived), waived_each),
                "missing", farm_missing_to_json(v->missing, v->nmissing), "reasons",
                farm_strings_to_json(v->reasons, v->nreasons));
}

/* A kernel of the list says what is missing and why in its first FARM_KERNEL_LIST_ITEMS items
 * and how many there are: a pending release lists every gating machine's coverage and
 * scenarios (1,400 items with 200 machines), which a page of 100 such releases would repeat
 * into tens of megabytes.  Its verdict has them all. */
static json_t *kernel_each(const void *x) {
        const struct farm_kernel *k = x;
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        size_t nm = MIN(k->nmissing, FARM_KERNEL_LIST_ITEMS);
        size_t nr = MIN(k->nreasons, FARM_KERNEL_LIST_ITEMS);
        return json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:s, s:I, s:o, s:I, s:o, s:I}",
                         "release", k->release, "series", k->series, "machines", k->machines,
                         "runs", k->runs, "first_run", format_timestamp_utc(t1, k->first_run_ns),
                         "last_run", format_timestamp_utc(t2, k->last_run_ns), "covered_ns",
                         (json_int_t) k->covered_ns, "verdict", farm_verdict_status_name(k->status),
                         "problems", (json_int_t) k->problems, "missing",
                         farm_missing_to_json(k->missing, nm), "missing_total",
                         (json_int_t) k->nmissing, "reasons", farm_strings_to_json(k->reasons, nr),
                         "reasons_total", (json_int_t) k->nreasons);
}

json_t *farm_kernel_page_to_json(const struct farm_kernel_page *p) {
        return json_pack("{s:o, s:I, s:I, s:I}", "kernels",
                         list_json(p->v, p->n, sizeof(*p->v), kernel_each), "total",
                         (json_int_t) p->total, "limit", (json_int_t) p->limit, "offset",
                         (json_int_t) p->offset);
}

int farm_verdict_json(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                      json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        int r = farm_verdict_ask(db, rule, q, &v, err);
        if (r < 0)
                return r;
        *ret = farm_verdict_to_json(v);
        return *ret ? 0 : -ENOMEM;
}
