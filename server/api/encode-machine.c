/* SPDX-License-Identifier: MIT */
/* The machines and a machine's runs and events as JSON (docs/api.md): the typed results of the
 * query layer encoded at the edge, every member in its place. */
#include <errno.h>

#include "encode-machine.h"
#include "json-time.h"

/* An integer, or null for FARM_NONE. */
static json_t *int_or_null(int64_t v) {
        return v == FARM_NONE ? json_null() : json_integer(v);
}

/* The latest run of a machine, or null. */
static json_t *latest_run_json(const struct farm_machine *m) {
        if (!m->has_latest)
                return json_null();
        const struct farm_latest_run *l = &m->latest;
        json_t *o = json_pack(
                "{s:o, s:s?, s:s?, s:s?, s:s?, s:o, s:o, s:o}", "id", int_or_null(l->id), "boot_id",
                l->boot_id, "kernel_release", l->kernel_release, "kernel_version",
                l->kernel_version, "preempt_model", l->preempt_model, "worst_latency_ns",
                int_or_null(l->worst_latency_ns), "interval_ns", int_or_null(l->interval_ns),
                "clock_ahead_ns", int_or_null(l->clock_ahead_ns));
        if (o && (json_set_time(o, "start_ns", l->start_ns) < 0 ||
                  json_set_time(o, "first_report_ns", l->first_report_ns) < 0))
                json_decref(o), o = NULL;
        return o;
}

/* {"groups": [...], "labels": {...}}: the settings in force. */
static json_t *settings_brief_json(const struct farm_machine *m) {
        json_t *groups = json_array(), *labels = json_object();
        for (size_t i = 0; groups && i < m->ngroups; i++)
                json_array_append_new(groups, json_string(m->groups[i]));
        for (size_t i = 0; labels && i < m->nlabels; i++)
                json_object_set_new(labels, m->labels[i].key, json_string(m->labels[i].value));
        return json_pack("{s:o, s:o}", "groups", groups, "labels", labels);
}

/* What the clock view adds: its last data, whether it is silent, its clock ahead. */
static int clock_fields(json_t *o, const struct farm_machine *m) {
        if (json_set_time(o, "last_data_ns", m->last_data_ns) < 0 ||
            json_object_set_new(o, "silent", json_boolean(m->silent)) < 0 ||
            json_object_set_new(o, "clock_ahead_ns", int_or_null(m->clock_ahead_ns)) < 0)
                return -ENOMEM;
        return 0;
}

json_t *farm_machine_to_json(const struct farm_machine *m) {
        json_t *o = json_pack(
                "{s:s, s:s?, s:s?, s:o, s:o, s:b, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                "id", m->id, "hostname", m->hostname, "cpu_model", m->cpu_model, "cpus",
                int_or_null(m->cpus), "threshold_ns", int_or_null(m->threshold_ns), "gating",
                m->gating, "enrolled_ns", int_or_null(m->enrolled_ns), "revoked", m->revoked,
                "revoked_ns", int_or_null(m->revoked_ns), "last_report_ns",
                int_or_null(m->last_report_ns), "kernel",
                m->has_latest && m->latest.kernel_release ? json_string(m->latest.kernel_release)
                                                          : json_null(),
                "worst_latency_ns", int_or_null(m->worst_latency_ns), "latest_run",
                latest_run_json(m), "intervals", int_or_null(m->intervals), "events",
                int_or_null(m->events));
        /* "revoked" is the flag: the time of the revocation is "revoked_at". */
        if (o &&
            (json_object_update_new(o, settings_brief_json(m)) < 0 ||
             json_set_time(o, "enrolled_ns", m->enrolled_ns) < 0 ||
             json_set_time(o, "last_report_ns", m->last_report_ns) < 0 || clock_fields(o, m) < 0 ||
             json_object_set_new(o, "revoked_at",
                                 m->revoked ? json_time(m->revoked_ns) : json_null()) < 0))
                json_decref(o), o = NULL;
        return o;
}

json_t *farm_machine_list_to_json(const struct farm_machine_list *l) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < l->n; i++)
                if (json_array_append_new(list, farm_machine_to_json(&l->v[i])) < 0) {
                        json_decref(list);
                        return NULL;
                }
        return list;
}

/* What the machine stamped of a run, and how it ended. */
static json_t *run_stamps_json(const struct farm_run *r) {
        const struct farm_run_end *e = &r->end;
        int64_t start = r->start_ns == FARM_NONE ? 0 : r->start_ns,
                last = r->last_data_ns == FARM_NONE ? 0 : r->last_data_ns;
        json_t *end = e->unclean ? json_pack("{s:s, s:o, s:o, s:s?}", "how", "unclean", "time_ns",
                                             int_or_null(e->time_ns), "time", json_time(e->time_ns),
                                             "message", e->message)
                                 : json_null();
        return json_pack("{s:o, s:s?, s:s?, s:s?, s:s?, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, "
                         "s:o, s:o, s:I, s:o, s:o}",
                         "id", int_or_null(r->id), "boot_id", r->boot_id, "kernel_release",
                         r->kernel_release, "kernel_version", r->kernel_version, "preempt_model",
                         r->preempt_model, "daemon_version", r->daemon_version, "start_ns",
                         int_or_null(r->start_ns), "start", json_time(start), "interval_ns",
                         int_or_null(r->interval_ns), "threshold_ns", int_or_null(r->threshold_ns),
                         "first_data_ns", int_or_null(r->first_data_ns), "first_data",
                         r->has_data ? json_time(r->first_data_ns) : json_null(), "last_data_ns",
                         int_or_null(r->last_data_ns), "last_data",
                         r->has_data ? json_time(last) : json_null(), "intervals",
                         (json_int_t) r->intervals, "worst_latency_ns",
                         int_or_null(r->worst_latency_ns), "end", end);
}

json_t *farm_run_to_json(const struct farm_run *r) {
        json_t *o = run_stamps_json(r);
        /* When the server received it: its first upload, its latest interval. */
        if (o && (json_set_time(o, "first_report_ns", r->first_report_ns) < 0 ||
                  json_set_time(o, "last_received_ns", r->last_received_ns) < 0 ||
                  json_object_set_new(o, "clock_ahead_ns", int_or_null(r->clock_ahead_ns)) < 0))
                json_decref(o), o = NULL;
        return o;
}

json_t *farm_runs_to_json(const struct farm_run_page *p) {
        json_t *list = json_array();
        /* A run that cannot be told in JSON is left out of the list, not the list failed. */
        for (size_t i = 0; list && i < p->n; i++)
                json_array_append_new(list, farm_run_to_json(&p->v[i]));
        return list;
}

json_t *farm_event_to_json(const struct farm_event *e) {
        return json_pack("{s:o, s:o, s:o, s:o, s:s?, s:o, s:o, s:s?, s:s?}", "run",
                         int_or_null(e->run), "id", int_or_null(e->id), "time_ns",
                         int_or_null(e->time_ns), "time",
                         json_time(e->time_ns == FARM_NONE ? 0 : e->time_ns), "type", e->type,
                         "cpu", int_or_null(e->cpu), "value", int_or_null(e->value), "message",
                         e->message, "kernel_release", e->kernel_release);
}

json_t *farm_events_to_json(const struct farm_event_page *p) {
        json_t *list = json_array();
        /* An event that cannot be told in JSON is left out of the list, not the list failed. */
        for (size_t i = 0; list && i < p->n; i++)
                json_array_append_new(list, farm_event_to_json(&p->v[i]));
        return list;
}
