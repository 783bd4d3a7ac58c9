/* SPDX-License-Identifier: MIT */
/* A verdict's problems as JSON (docs/verdict.md, "Problems"): the members every problem has,
 * then each kind's own in their order, the message, and what a kind tells after it. */
#include "encode-verdict.h"
#include "grow.h"
#include "json-time.h"
#include "timeutil.h"

static json_t *evidence_json(const struct farm_evidence *e) {
        char t[TIMESTAMP_MAX_LEN];
        if (!e->given)
                return json_null();
        return json_pack("{s:I, s:I, s:s, s:I, s:s?}", "seq", (json_int_t) e->seq, "start_ns",
                         (json_int_t) e->start_ns, "start", format_timestamp_utc(t, e->start_ns),
                         "length_ns", (json_int_t) e->length_ns, "scenario", e->scenario);
}

json_t *farm_builds_to_json(const struct farm_builds *b) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < b->n; i++)
                if (json_array_append_new(list,
                                          json_pack("{s:s, s:o}", "kernel_version",
                                                    b->v[i].kernel_version, "machines",
                                                    farm_strings_to_json(b->v[i].machines,
                                                                         b->v[i].nmachines))) < 0)
                        break;
        return list;
}

/* The probe's or generator's that did not measure or run, in each shape's order. */
static json_t *down_json(const struct farm_problem *p) {
        const struct farm_down *d = &p->down;
        switch (d->shape) {
        case FARM_DOWN_RUN:
                return json_pack("{s:n, s:I}", "cpu", "run", (json_int_t) d->run);
        case FARM_DOWN_TOTAL:
                return json_pack("{s:s, s:I, s:b}", "generator", d->generator, "value_ns",
                                 (json_int_t) d->value_ns, "total", true);
        default:
                return json_pack("{s:I, s:I, s:s?, s:I, s:o}", "end_ns", (json_int_t) p->end_ns,
                                 "value_ns", (json_int_t) d->value_ns, "scenario", d->scenario,
                                 "run", (json_int_t) d->run, "interval",
                                 evidence_json(&d->interval));
        }
}

/* A list of strings, or null when not known. */
static json_t *strings_or_null(bool known, char *const *v, size_t n) {
        json_t *a = known ? json_array() : json_null();
        for (size_t i = 0; known && a && i < n; i++)
                if (json_array_append_new(a, json_string(v[i])) < 0)
                        json_decref(a), a = NULL;
        return a;
}

/* A machine_changed problem's versions and the fields that changed. */
static json_t *changed_json(const struct farm_machine_change *c) {
        json_t *fields = strings_or_null(true, c->fields, c->nfields);
        return fields ? json_pack("{s:I, s:I, s:{s:I, s:I}, s:o, s:o}", "run", (json_int_t) c->run,
                                  "version", (json_int_t) c->version, "previous", "run",
                                  (json_int_t) c->previous_run, "version",
                                  (json_int_t) c->previous_version, "after",
                                  c->after_ns == FARM_NONE ? json_null() : json_time(c->after_ns),
                                  "fields", fields)
                      : NULL;
}

/* What a kind says between the members every problem has and its message. */
static json_t *kind_json(const struct farm_problem *p) {
        switch (p->kind) {
        case FARM_PROBLEM_VIOLATION:
                return json_pack("{s:i, s:I, s:I, s:s?, s:I, s:o}", "cpu", p->violation.cpu,
                                 "value_ns", (json_int_t) p->violation.value_ns, "threshold_ns",
                                 (json_int_t) p->violation.threshold_ns, "scenario",
                                 p->violation.scenario, "run", (json_int_t) p->violation.run,
                                 "interval", evidence_json(&p->violation.interval));
        case FARM_PROBLEM_UNCLEAN_END:
                return json_pack("{s:I, s:o}", "run", (json_int_t) p->unclean.run, "interval",
                                 evidence_json(&p->unclean.interval));
        case FARM_PROBLEM_GAP:
                return json_pack("{s:I, s:I, s:b, s:o}", "end_ns", (json_int_t) p->end_ns,
                                 "value_ns", (json_int_t) p->gap.value_ns, "ongoing",
                                 p->gap.ongoing, "interval", evidence_json(&p->gap.interval));
        case FARM_PROBLEM_LOAD_DOWN:
        case FARM_PROBLEM_PROBE_DOWN:
                return down_json(p);
        case FARM_PROBLEM_CLOCK:
                return json_pack("{s:I, s:I, s:I}", "run", (json_int_t) p->clock.run, "value_ns",
                                 (json_int_t) p->clock.value_ns, "intervals",
                                 (json_int_t) p->clock.intervals);
        case FARM_PROBLEM_OVERLAP:
                return json_pack("{s:I, s:I, s:I, s:[I, I]}", "end_ns", (json_int_t) p->end_ns,
                                 "value_ns", (json_int_t) p->overlap.value_ns, "run",
                                 (json_int_t) p->overlap.run, "runs",
                                 (json_int_t) p->overlap.runs[0], (json_int_t) p->overlap.runs[1]);
        case FARM_PROBLEM_MIXED_BUILDS:
                return json_pack("{s:o}", "builds", farm_builds_to_json(&p->builds));
        case FARM_PROBLEM_REGRESSION:
                return json_pack(
                        "{s:s, s:s, s:{s:I, s:I}, s:{s:I, s:I}, s:o}", "scenario",
                        p->regression.scenario, "baseline", p->regression.baseline, "release_stats",
                        "p99_9_ns", (json_int_t) p->regression.release_stats.p99_9_ns, "worst_ns",
                        (json_int_t) p->regression.release_stats.worst_ns, "baseline_stats",
                        "p99_9_ns", (json_int_t) p->regression.baseline_stats.p99_9_ns, "worst_ns",
                        (json_int_t) p->regression.baseline_stats.worst_ns, "inventory_differs",
                        strings_or_null(p->regression.inventory_known,
                                        p->regression.inventory_fields,
                                        p->regression.ninventory_fields));
        case FARM_PROBLEM_DROPPED:
                return json_pack("{s:I, s:I, s:I}", "end_ns", (json_int_t) p->end_ns, "run",
                                 (json_int_t) p->dropped.run, "intervals",
                                 (json_int_t) p->dropped.intervals);
        case FARM_PROBLEM_MACHINE_CHANGED:
                return changed_json(&p->changed);
        default:
                return json_object();
        }
}

/* What a kind says after its message: the detail of an unclean end, the probe or generator of
 * a stretch, what the flight recorder names as a violation's cause. */
static json_t *tail_json(const struct farm_problem *p) {
        if (p->kind == FARM_PROBLEM_UNCLEAN_END)
                return json_pack("{s:s}", "detail", p->unclean.detail);
        if ((p->kind == FARM_PROBLEM_PROBE_DOWN || p->kind == FARM_PROBLEM_LOAD_DOWN) &&
            p->down.shape == FARM_DOWN_STRETCH)
                return p->kind == FARM_PROBLEM_PROBE_DOWN
                               ? json_pack("{s:i}", "cpu", p->down.cpu)
                               : json_pack("{s:s}", "generator", p->down.generator);
        if (p->kind == FARM_PROBLEM_VIOLATION && p->violation.traced)
                return json_pack("{s:s?, s:o}", "culprit", p->violation.culprit, "trace",
                                 p->violation.culprit ? json_integer(p->violation.trace)
                                                      : json_null());
        return json_object();
}

json_t *farm_problem_to_json(const struct farm_problem *p) {
        char t[TIMESTAMP_MAX_LEN];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:I, s:s}", "id", p->id, "kind",
                              farm_problem_kind_name(p->kind), "machine", p->machine, "hostname",
                              p->hostname, "time_ns", (json_int_t) p->time_ns, "time",
                              format_timestamp_utc(t, p->time_ns));
        if (!o || json_object_update_new(o, kind_json(p)) < 0 ||
            json_object_set_new(o, "message", json_string(p->message)) < 0 ||
            json_object_update_new(o, tail_json(p)) < 0 ||
            (p->has_end && json_object_set_new(o, "end", json_time(p->end_ns)) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *farm_uncounted_to_json(const struct farm_uncounted_problem *p) {
        json_t *o = farm_problem_to_json(&p->problem);
        if (o && json_object_set_new(o, "why", json_string(p->why)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *farm_waived_to_json(const struct farm_waived_problem *p) {
        char t[TIMESTAMP_MAX_LEN];
        const struct farm_waiver_brief *w = &p->waiver;
        json_t *o = farm_problem_to_json(&p->problem);
        if (o && json_object_set_new(o, "waiver",
                                     json_pack("{s:I, s:s, s:s, s:I, s:s}", "id",
                                               (json_int_t) w->id, "reason", w->reason, "by", w->by,
                                               "created_ns", (json_int_t) w->created_ns, "created",
                                               format_timestamp_utc(t, w->created_ns))) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}
