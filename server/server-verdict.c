/* SPDX-License-Identifier: MIT */
/* The verdict engine (docs/verdict.md).  A verdict reads its own snapshot of the farm database
 * through a connection of its own (so that a verdict over a month of a farm never holds up
 * the uploads), resolves the release's series and gating group, judges every machine that
 * gated or ran the release, then the release as a whole (builds, regressions), and answers
 * with the evidence of every problem and of everything still missing. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-verdict-internal.h"

/* ---- the release and its group ------------------------------------------------------------- */

#define SEEN_AT2_KNOWN3 FARM_SQL_RUN_SEEN("", "?2", "?3")
#define SEEN_R_AT1_KNOWN3 FARM_SQL_RUN_SEEN("r.", "?1", "?3")

static int release_known(struct vctx *v, bool *ret) {
        sql_stmt *st;
        int r = vprep(v, "SELECT 1 FROM runs WHERE release = ?1 AND " SEEN_AT2_KNOWN3 " LIMIT 1",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(st, 3, v->known);
        int rc = sql_step(st);
        sql_reset(st);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return vfail(v, rc, "cannot look up the release");
        *ret = rc == SQL_ROW;
        return 0;
}

/* The series of the release and the group that judges it: the one configured, else the
 * series' own name; "default" judges the time before any machine was first recorded as a
 * member of that group (all of it when none was by `at`).  Membership is looked up over the
 * whole settings history, not at `at` alone: moving the group's machines out afterwards must
 * not hand the time they gated to "default", where their problems would not count.  And a
 * machine enrolled into the group counts from its enrolment, not from the start of the data
 * it replays: enrolling one must not take the time before from "default" (whose machines'
 * problems it would excuse), nor change what was said before it. */
static void resolve_group(struct vctx *v, const struct vmachine *ms, size_t n) {
        farm_rule_series_of(&v->rule, v->release, v->series, v->group);
        v->group_source = v->group[0] ? "configured" : "series";
        if (!v->group[0])
                snprintf(v->group, sizeof(v->group), "%s", v->series);
        v->group_from = INT64_MAX; /* no member by `at` */
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < ms[i].nset; k++) {
                        int64_t from = k == 0 ? ms[i].enrolled_ns : ms[i].set[k].from_ns;
                        if (from <= v->at && vsetting_in_group(&ms[i].set[k], v->group)) {
                                v->group_from = MIN(v->group_from, from);
                                break; /* the versions are in time order */
                        }
                }
        bool member = v->group_from != INT64_MAX;
        if (member && strcmp(v->group, "default") != 0)
                return;
        snprintf(v->group, sizeof(v->group), "default");
        v->group_source = member ? v->group_source : "default";
        v->group_from = INT64_MIN;
}

/* ---- the machines -------------------------------------------------------------------------- */

/* Every machine enrolled by `at`, and whether it ran the release (known by `known`). */
static int list_machines(struct vctx *v, struct vmachine **ret, size_t *ret_n) {
        sql_stmt *st;
        struct vmachine *ms = NULL;
        size_t n = 0;
        int r = vprep(v,
                      "SELECT m.id, EXISTS (SELECT 1 FROM runs r WHERE r.machine_id = m.id AND "
                      "r.release = ?2 AND " SEEN_R_AT1_KNOWN3 ") "
                      "FROM machines m WHERE EXISTS (SELECT 1 FROM "
                      "machine_settings s WHERE s.machine_id = m.id) ORDER BY m.id",
                      &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, v->at);
        sql_bind_text(st, 2, v->release);
        sql_bind_int64(st, 3, v->known);
        int rc;
        struct mrow {
                char id[FARM_MACHINE_ID_LEN + 1];
                bool ran;
        } *rows = NULL;
        size_t nrows = 0;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct mrow *x = realloc(rows, (nrows + 1) * sizeof(*x));
                if (!x)
                        break;
                rows = x;
                snprintf(rows[nrows].id, sizeof(rows[nrows].id), "%s",
                         sql_column_text(st, 0) ?: "");
                rows[nrows++].ran = sql_column_int(st, 1) != 0;
        }
        sql_reset(st);
        r = rc == SQL_DONE ? 0 : rc == SQL_ROW ? -ENOMEM : vfail(v, rc, "cannot list machines");
        if (r >= 0 && nrows && !(ms = calloc(nrows, sizeof(*ms))))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < nrows; i++) {
                struct vmachine *m = &ms[n++];
                snprintf(m->id, sizeof(m->id), "%s", rows[i].id);
                m->first_ns = INT64_MAX;
                m->last_ns = INT64_MIN;
                r = vmachine_load(v, m);
        }
        if (r >= 0)
                resolve_group(v, ms, n);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) {
                if (r >= 0)
                        r = vmachine_gate(v, &ms[i]);
                if (r >= 0 && (rows[i].ran || ms[i].gating))
                        ms[kept++] = ms[i];
                else
                        vmachine_done(&ms[i]); /* neither gates nor ran it: not its business */
        }
        free(rows);
        *ret = ms;
        *ret_n = kept;
        return r;
}

/* The hostname of a machine without a run of the release: that of its latest run known. */
static int plain_hostname(struct vctx *v, struct vmachine *m) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT hostname FROM runs WHERE machine_id = ?1 AND start_ns <= ?2 AND "
                      "first_report_ns <= ?3 ORDER BY start_ns DESC, id DESC LIMIT 1",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, m->id);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(st, 3, v->known);
        int rc = sql_step(st);
        if (rc == SQL_ROW && sql_column_text(st, 0))
                m->hostname = strdup(sql_column_text(st, 0));
        sql_reset(st);
        return rc == SQL_ROW || rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read a run");
}

/* ---- builds -------------------------------------------------------------------------------- */

/* The builds as the answer lists them: [{kernel_version, machines}]. */
static json_t *builds_list(json_t *builds) {
        json_t *list = json_array(), *machines;
        const char *key;
        json_object_foreach (builds, key, machines)
                if (!list || json_array_append_new(list, json_pack("{s:s, s:O}", "kernel_version",
                                                                   key, "machines", machines)) < 0)
                        break;
        return list;
}

/* Which builds of the release ran on gating machines; more than one is a problem. */
static int judge_builds(struct vctx *v, struct vmachine *ms, size_t n) {
        json_t *b;
        size_t k;
        int r;
        for (size_t i = 0; i < n; i++)
                json_array_foreach (ms[i].builds, k, b) {
                        json_t *list = json_object_get(v->builds, json_string_value(b));
                        if (!list) {
                                list = json_array();
                                if (!list ||
                                    json_object_set_new(v->builds, json_string_value(b), list) < 0)
                                        return -ENOMEM;
                        }
                        if (json_array_append_new(list, json_string(ms[i].id)) < 0)
                                return -ENOMEM;
                }
        if (json_object_size(v->builds) < 2)
                return 0;
        /* The digest of the set of builds: a further build is a further problem. */
        struct sha256_ctx h;
        uint8_t digest[SHA256_DIGEST_SIZE];
        char hex[17], id[FARM_PROBLEM_ID_MAX], msg[1024], t[VTEXT_MAX];
        size_t len = 0;
        const char *key;
        json_t *val;
        sha256_init(&h);
        json_object_foreach (v->builds, key, val) {
                sha256_update(&h, key, strlen(key) + 1);
                len += (size_t) snprintf(msg + len, sizeof(msg) - MIN(len, sizeof(msg)),
                                         "%s\"%s\" on %zu machine(s)", len ? ", " : "", key,
                                         json_array_size(val));
                if (len >= sizeof(msg))
                        len = sizeof(msg) - 1;
        }
        sha256_final(&h, digest);
        for (int i = 0; i < 8; i++)
                snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        snprintf(id, sizeof(id), "mixed_builds:%s:%s", v->release, hex);
        _cleanup_free_ char *builds = strdup(msg);
        if (!builds)
                return -ENOMEM;
        snprintf(msg, sizeof(msg),
                 "%s ran as %zu different kernel builds (uname -v): %s; name each build's "
                 "release on its machines ([Upload] Release=) to judge them apart",
                 v->release, json_object_size(v->builds), builds);
        /* Filed against the first gating machine that ran a build other than the first. */
        const char *first = json_object_iter_key(json_object_iter(v->builds));
        for (size_t i = 0; i < n; i++) {
                bool other = false;
                json_array_foreach (ms[i].builds, k, b)
                        other |= strcmp(json_string_value(b), first) != 0;
                if (!other)
                        continue;
                r = vproblem(v, &ms[i], K_MIXED_BUILDS, ms[i].first_ns, ms[i].first_ns,
                             json_pack("{s:s, s:s, s:s, s:s?, s:I, s:s, s:o, s:s}", "id", id,
                                       "kind", "mixed_builds", "machine", ms[i].id, "hostname",
                                       ms[i].hostname, "time_ns", (json_int_t) ms[i].first_ns,
                                       "time", vts(t, ms[i].first_ns), "builds",
                                       builds_list(v->builds), "message", msg));
                return r;
        }
        return 0;
}

/* ---- what is missing, and one machine's answer --------------------------------------------- */

static int missing_item(struct vctx *v, const struct vmachine *m, const char *what,
                        const char *scenario, int64_t covered, int64_t required, const char *msg) {
        json_t *j = json_pack("{s:s, s:s?, s:s, s:s?, s:I, s:I, s:I, s:s}", "machine", m->id,
                              "hostname", m->hostname, "what", what, "scenario", scenario,
                              "covered_ns", (json_int_t) covered, "required_ns",
                              (json_int_t) required, "missing_ns",
                              (json_int_t) MAX(required - covered, 0), "message", msg);
        return j && json_array_append_new(v->missing, j) == 0 ? 0 : -ENOMEM;
}

static int64_t scen_covered(const struct vmachine *m, const char *name) {
        for (size_t k = 0; k < m->nscen; k++)
                if (strcmp(m->scen[k].name, name) == 0)
                        return m->scen[k].covered_ns;
        return 0;
}

/* The scenarios of a gating machine, and what of them is missing. */
static int scen_by_name(const void *a, const void *b) {
        return strcmp((*(const struct vscen *const *) a)->name,
                      (*(const struct vscen *const *) b)->name);
}

static int machine_scenarios(struct vctx *v, const struct vmachine *m, json_t *scen,
                             bool *pending) {
        char msg[512], a[VTEXT_MAX], b[VTEXT_MAX], c[VTEXT_MAX];
        for (size_t i = 0; i < v->rule.nscenarios; i++) {
                const char *name = v->rule.scenarios[i].name;
                int64_t need = (int64_t) v->rule.scenarios[i].min_ns, got = scen_covered(m, name);
                const struct farm_rule_loads *req = farm_rule_loads_of(&v->rule, name);
                json_t *gens = json_array();
                for (size_t k = 0; gens && req && k < req->ngens; k++)
                        json_array_append_new(gens, json_string(req->gens[k]));
                if (json_array_append_new(scen,
                                          json_pack("{s:s, s:I, s:I, s:o}", "name", name,
                                                    "covered_ns", (json_int_t) got, "required_ns",
                                                    (json_int_t) need, "loads", gens)) < 0)
                        return -ENOMEM;
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
                int r = missing_item(v, m, "scenario", name, got, need, msg);
                if (r < 0)
                        return r;
                *pending = true;
        }
        /* The others by name: the order they were met in differs between the day rollups and
         * the intervals read one by one. */
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
                if (!required &&
                    json_array_append_new(scen,
                                          json_pack("{s:s, s:I, s:n, s:[]}", "name",
                                                    *by[k]->name ? by[k]->name : "(none)",
                                                    "covered_ns", (json_int_t) by[k]->covered_ns,
                                                    "required_ns", "loads")) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static json_t *groups_json(const struct vmachine *m) {
        json_t *g = json_array();
        const char *s = m->nset ? m->set[m->nset - 1].groups : "";
        while (g && s && *s) {
                const char *comma = strchr(s, ',');
                size_t n = comma ? (size_t) (comma - s) : strlen(s);
                json_array_append_new(g, json_stringn(s, n));
                s = comma ? comma + 1 : NULL;
        }
        return g;
}

static int machine_answer(struct vctx *v, struct vmachine *m, json_t **ret) {
        char msg[512], a[VTEXT_MAX], b[VTEXT_MAX], c[VTEXT_MAX], t1[VTEXT_MAX], t2[VTEXT_MAX],
                t3[VTEXT_MAX];
        int64_t period = (int64_t) v->rule.period_ns;
        bool pending = false, ran = m->nentries > 0;
        int r = 0;
        if (!ran) {
                snprintf(msg, sizeof(msg), "%s has not run %s%s", vhost(m), v->release,
                         m->runs ? " long enough to report an interval" : "");
                r = missing_item(v, m, "not_run", NULL, 0, period, msg);
                pending = true;
        } else if (m->covered_ns < period) {
                snprintf(msg, sizeof(msg), "%s: %s of %s covered, %s still missing", vhost(m),
                         vspan_text(a, m->covered_ns), vspan_text(b, period),
                         vspan_text(c, period - m->covered_ns));
                r = missing_item(v, m, "coverage", NULL, m->covered_ns, period, msg);
                pending = true;
        }
        json_t *scen = json_array();
        if (r < 0 || !scen || (r = machine_scenarios(v, m, scen, &pending)) < 0) {
                json_decref(scen);
                return r < 0 ? r : -ENOMEM;
        }
        bool problem = m->problems > 0;
        *ret = json_pack(
                "{s:s, s:s?, s:I, s:o, s:b, s:i, s:I, s:I, s:o, s:o, s:I, s:o, s:o, s:o, s:i, "
                "s:i, s:i, s:s}",
                "id", m->id, "hostname", m->hostname, "threshold_ns",
                (json_int_t) vmachine_bound_at(m, v->at), "groups", groups_json(m), "ran", ran,
                "runs", (int) m->runs, "covered_ns", (json_int_t) m->covered_ns, "clean_ns",
                (json_int_t) m->clean_ns, "last_problem_ns",
                problem ? json_integer(m->last_problem_ns) : json_null(), "last_problem",
                problem ? json_string(vts(t3, m->last_problem_ns)) : json_null(), "missing_ns",
                (json_int_t) MAX(period - m->covered_ns, 0), "first",
                ran ? json_string(vts(t1, m->first_ns)) : json_null(), "last",
                ran ? json_string(vts(t2, m->last_ns)) : json_null(), "scenarios", scen, "problems",
                (int) m->problems, "waived", (int) m->waived, "not_counted", (int) m->not_counted,
                "status",
                problem   ? "failed"
                : pending ? "pending"
                          : "complete");
        return *ret ? 0 : -ENOMEM;
}

/* ---- the release --------------------------------------------------------------------------- */

static int reason(struct vctx *v, const char *text) {
        return json_array_append_new(v->reasons, json_string(text)) < 0 ? -ENOMEM : 0;
}

/* ", 2 violation(s), 1 gap(s)" of counts by kind after line's len characters. */
static void kinds_text(char *line, size_t size, size_t len, const uint64_t counts[K_NKINDS]) {
        bool first = true;
        for (int k = 0; k < K_NKINDS; k++)
                if (counts[k]) {
                        len += (size_t) snprintf(line + len, size - MIN(len, size),
                                                 "%s %" PRIu64 " %s", first ? "" : ",", counts[k],
                                                 verdict_kind_names[k]);
                        first = false;
                }
}

static int failed_reasons(struct vctx *v) {
        char line[512];
        size_t len = (size_t) snprintf(line, sizeof(line), "%" PRIu64 " problem(s):", v->nproblems);
        kinds_text(line, sizeof(line), len, v->kind_counts);
        int r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < json_array_size(v->problems); i++)
                r = reason(v, json_string_value(
                                      json_object_get(json_array_get(v->problems, i), "message")));
        if (r >= 0 && v->nproblems > json_array_size(v->problems)) {
                snprintf(line, sizeof(line), "... and %" PRIu64 " more",
                         v->nproblems - json_array_size(v->problems));
                r = reason(v, line);
        }
        return r;
}

static const char *decide(struct vctx *v, unsigned ngating, unsigned complete, int *r) {
        char line[512], a[VTEXT_MAX];
        if (v->nproblems > 0) {
                *r = failed_reasons(v);
                return "failed";
        }
        if (ngating == 0) {
                snprintf(line, sizeof(line),
                         "no machine gates group %s: nothing can qualify a release", v->group);
                *r = reason(v, line);
                if (*r >= 0 && json_array_append_new(v->missing, json_pack("{s:s, s:s}", "what",
                                                                           "gating_machines",
                                                                           "message", line)) < 0)
                        *r = -ENOMEM;
                return "pending";
        }
        if (json_array_size(v->missing) > 0) {
                for (size_t i = 0; *r >= 0 && i < json_array_size(v->missing); i++)
                        *r = reason(v, json_string_value(json_object_get(
                                               json_array_get(v->missing, i), "message")));
                return "pending";
        }
        snprintf(line, sizeof(line),
                 "all %u gating machine(s) of group %s ran %s for at least %s with every "
                 "required scenario and no problem",
                 complete, v->group, v->release, vspan_text(a, (int64_t) v->rule.period_ns));
        *r = reason(v, line);
        return "qualified";
}

/* Problems of machines that did not gate the release when they happened fail nothing, but a
 * release manager reading the text must not take "no problem" for "nothing happened". */
#define NOT_COUNTED_TOLD 10

static int not_counted_reasons(struct vctx *v) {
        char line[1024];
        if (v->nnot_counted == 0)
                return 0;
        size_t len = (size_t) snprintf(line, sizeof(line),
                                       "%" PRIu64 " problem(s) of machines that did not gate the "
                                       "release then, not counted:",
                                       v->nnot_counted);
        kinds_text(line, sizeof(line), len, v->not_counted_kinds);
        len = strlen(line);
        snprintf(line + len, sizeof(line) - len,
                 " (all of them under not_counted: rtsoak verdict --json, or the release's page)");
        int r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < MIN(json_array_size(v->not_counted), NOT_COUNTED_TOLD);
             i++) {
                json_t *p = json_array_get(v->not_counted, i);
                snprintf(line, sizeof(line), "not counted (%s): %s",
                         json_string_value(json_object_get(p, "why")),
                         json_string_value(json_object_get(p, "message")));
                r = reason(v, line);
        }
        if (r >= 0 && v->nnot_counted > NOT_COUNTED_TOLD) {
                snprintf(line, sizeof(line), "... and %" PRIu64 " more not counted",
                         v->nnot_counted - NOT_COUNTED_TOLD);
                r = reason(v, line);
        }
        return r;
}

static int waived_reasons(struct vctx *v) {
        char line[1024];
        int r = 0;
        if (json_array_size(v->waived) == 0)
                return 0;
        snprintf(line, sizeof(line), "%zu problem(s) waived:", json_array_size(v->waived));
        r = reason(v, line);
        for (size_t i = 0; r >= 0 && i < json_array_size(v->waived); i++) {
                json_t *p = json_array_get(v->waived, i), *w = json_object_get(p, "waiver");
                snprintf(line, sizeof(line), "waived by %s (%s): %s",
                         json_string_value(json_object_get(w, "by")),
                         json_string_value(json_object_get(w, "reason")),
                         json_string_value(json_object_get(p, "message")));
                r = reason(v, line);
        }
        return r;
}

static json_t *answer(struct vctx *v, const char *status, json_t *machines, json_t *others,
                      json_t *baseline, unsigned ngating, unsigned ran) {
        json_t *counts = json_object(), *rule = farm_rule_to_json(&v->rule);
        char t[VTEXT_MAX], t2[VTEXT_MAX];
        for (int k = 0; counts && k < K_NKINDS; k++)
                json_object_set_new(counts, verdict_kind_names[k],
                                    json_integer((json_int_t) v->kind_counts[k]));
        if (rule)
                json_object_set(rule, "baseline", baseline);
        return json_pack(
                "{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:{s:I, s:I, s:I}, s:o, "
                "s:i, s:i, s:O, s:O, s:o, s:O, s:I, s:o, s:I, s:O, s:I, s:O, s:O, s:O, s:O}",
                "release", v->release, "series", v->series, "group", v->group, "group_source",
                v->group_source, "verdict", status, "at_ns", (json_int_t) v->at, "at",
                vts(t, v->at), "asked_at_ns", (json_int_t) v->asked, "asked_at", vts(t2, v->asked),
                "late", "intervals", (json_int_t) v->late.intervals, "events",
                (json_int_t) v->late.events, "covered_ns", (json_int_t) v->late.covered_ns, "rule",
                rule, "gating_machines", (int) ngating, "machines_ran", (int) ran, "machines",
                machines, "other_machines", others, "builds", builds_list(v->builds), "baseline",
                baseline, "problems_total", (json_int_t) v->nproblems, "problem_counts", counts,
                "problems_listed", (json_int_t) json_array_size(v->problems), "problems",
                v->problems, "not_counted_total", (json_int_t) v->nnot_counted, "not_counted",
                v->not_counted, "waived", v->waived, "missing", v->missing, "reasons", v->reasons);
}

static int judge_all(struct vctx *v, struct vmachine *ms, size_t n, json_t **ret_baseline) {
        int r = 0;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = vjudge_data(v, &ms[i]);
                if (r >= 0)
                        r = vjudge_gaps(v, &ms[i]);
                if (r >= 0 && !ms[i].hostname)
                        r = plain_hostname(v, &ms[i]);
        }
        if (r >= 0)
                r = judge_builds(v, ms, n);
        if (r >= 0)
                r = vjudge_regressions(v, ms, n, ret_baseline);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = vjudge_clean(v, &ms[i]);
        return r;
}

static int verdict_run(struct vctx *v, const struct farm_rule *configured, json_t **ret) {
        struct vmachine *ms = NULL;
        size_t n = 0;
        bool known = false;
        int r;
        json_auto_t *machines = json_array(), *others = json_array(), *baseline = json_null();
        if (!machines || !others)
                return -ENOMEM;
        if ((r = vctx_open(v, configured)) < 0 || (r = release_known(v, &known)) < 0)
                return r;
        if (!known)
                return farm_failf(v->db, -ENOENT, v->err, "no machine has run release %s",
                                  v->release);
        if ((r = list_machines(v, &ms, &n)) < 0 || (r = judge_all(v, ms, n, &baseline)) < 0)
                goto out;
        unsigned ngating = 0, ran = 0, complete = 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                struct vmachine *m = &ms[i];
                json_t *mj = NULL;
                if (!m->gating) {
                        if (json_array_append_new(others,
                                                  json_pack("{s:s, s:s?, s:i, s:s}", "id", m->id,
                                                            "hostname", m->hostname, "runs",
                                                            (int) m->runs, "why", m->why_not)) < 0)
                                r = -ENOMEM;
                        continue;
                }
                ngating++;
                ran += m->nentries > 0;
                if ((r = machine_answer(v, m, &mj)) < 0)
                        break;
                complete += strcmp(json_string_value(json_object_get(mj, "status")), "complete") ==
                            0;
                if (json_array_append_new(machines, mj) < 0)
                        r = -ENOMEM;
        }
        if (r < 0)
                goto out;
        const char *status = decide(v, ngating, complete, &r);
        if (r >= 0)
                r = waived_reasons(v);
        if (r >= 0)
                r = not_counted_reasons(v);
        if (r >= 0 && !(*ret = answer(v, status, machines, others, baseline, ngating, ran)))
                r = -ENOMEM;
out:
        for (size_t i = 0; i < n; i++)
                vmachine_done(&ms[i]);
        free(ms);
        return r;
}

int farm_verdict_ask(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                     json_t **ret, char err[static FARM_ERROR_MAX]) {
        struct vctx v = { .db = db,
                          .err = err,
                          .release = q->release,
                          .at = q->at_ns,
                          .known = q->known_ns,
                          .asked = q->asked_ns,
                          .sink = q->sink };
        int r = verdict_run(&v, rule, ret);
        vctx_done(&v);
        return r;
}

int farm_verdict(farm_db *db, const struct farm_rule *rule, const char *release, int64_t now_ns,
                 json_t **ret, char err[static FARM_ERROR_MAX]) {
        struct farm_question q = { release, now_ns, now_ns, now_ns };
        return farm_verdict_ask(db, rule, &q, ret, err);
}

const char *farm_verdict_status(const json_t *verdict) {
        return json_string_value(json_object_get(verdict, "verdict"));
}

int farm_verdict_has_problem(farm_db *db, const struct farm_rule *rule, const char *release,
                             const char *problem, int64_t now_ns, bool *ret,
                             char err[static FARM_ERROR_MAX]) {
        struct vctx v = { .db = db,
                          .err = err,
                          .release = release,
                          .at = now_ns,
                          .known = now_ns,
                          .asked = now_ns,
                          .find = problem };
        json_t *j = NULL;
        int r = verdict_run(&v, rule, &j);
        *ret = v.found;
        vctx_done(&v);
        json_decref(j);
        return r;
}

/* ---- the rule's versions ------------------------------------------------------------------- */

/* In a write transaction: servers of one PostgreSQL started at once record the rule once. */
static int rule_record_locked(sql_conn *c, const char *text, int64_t now_ns, char *err) {
        _cleanup_reset_ sql_stmt *sel = NULL, *ins = NULL;
        int r;
        if ((r = farm_prepare(c,
                              "SELECT rule FROM rule_versions ORDER BY from_ns DESC, id DESC "
                              "LIMIT 1",
                              &sel, err)) < 0 ||
            (r = farm_prepare(c, "INSERT INTO rule_versions (from_ns, rule) VALUES (?, ?)", &ins,
                              err)) < 0)
                return r;
        int rc = sql_step(sel);
        if (rc == SQL_ROW && strcmp(sql_column_text(sel, 0) ?: "", text) == 0)
                return 0;
        if (rc != SQL_ROW && rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the rule's versions", err);
        sql_reset(sel);
        sql_bind_int64(ins, 1, now_ns);
        sql_bind_text(ins, 2, text);
        return farm_step_done(ins, "cannot record the rule", err);
}

int farm_rule_record(farm_db *db, const struct farm_rule *rule, int64_t now_ns,
                     char err[static FARM_ERROR_MAX]) {
        json_auto_t *j = farm_rule_to_json(rule);
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (!text)
                return -ENOMEM;
        return FARM_WRITE_TRANSACTION(db, w, err, rule_record_locked(w, text, now_ns, err));
}

/* ---- kernels ------------------------------------------------------------------------------- */

/* The releases that sql selects (with since_ns as its parameter, if it has one). */
static int release_list(farm_db *db, const char *sql, int64_t since_ns, json_t **ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *list = json_array();
        int r = farm_prepare(c, sql, &st, err);
        if (r < 0)
                return r;
        if (!list)
                return -ENOMEM;
        if (strchr(sql, '?'))
                sql_bind_int64(st, 1, since_ns);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW)
                if (json_array_append_new(list, farm_json_col_text(st, 0)) < 0)
                        return -ENOMEM;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot list the releases", err);
        *ret = json_incref(list);
        return 0;
}

int farm_kernel_list(farm_db *db, json_t **ret, char err[static FARM_ERROR_MAX]) {
        return release_list(db, "SELECT DISTINCT release FROM runs ORDER BY 1", 0, ret, err);
}

struct krow {
        char *release;
        int machines, runs;
        int64_t first, last, covered;
};

#define SEEN_AT1_KNOWN2 FARM_SQL_RUN_SEEN("", "?1", "?2")
#define SEEN_Q_AT1_KNOWN4 FARM_SQL_RUN_SEEN("q.", "?1", "?4")
#define SEEN_R_AT1_KNOWN4 FARM_SQL_RUN_SEEN("r.", "?1", "?4")
#define KERNEL_RUN_START FARM_SQL_RUN_START("r.", "?5")

/* The releases the question q sees, a page of them, with their figures from the runs and days
 * it sees (days of data stamped by its moment and received by what it knows); their runs'
 * starts as the server takes them (a start stamped beyond tolerance_ns after the run arrived
 * counts from the arrival). */
static int kernel_rows(farm_db *db, const struct farm_question *q, int64_t tolerance_ns,
                       const struct farm_page *page, struct krow **ret, size_t *ret_n,
                       int64_t *ret_total, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL, *cnt = NULL;
        struct krow *rows = NULL;
        size_t n = 0;
        int r, rc;
        if ((r = farm_prepare(c, "SELECT count(DISTINCT release) FROM runs WHERE " SEEN_AT1_KNOWN2,
                              &cnt, err)) < 0)
                return r;
        sql_bind_int64(cnt, 1, q->at_ns);
        sql_bind_int64(cnt, 2, q->known_ns);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count the releases", err);
        *ret_total = sql_column_int64(cnt, 0);
        r = farm_prepare(c,
                         "SELECT r.release, count(DISTINCT r.machine_id), count(*), "
                         "min(" KERNEL_RUN_START "), max(" KERNEL_RUN_START "), "
                         "(SELECT coalesce(sum(d.counted_ns), "
                         "0) FROM run_days d JOIN runs q ON d.run = q.id "
                         "WHERE q.release = r.release AND d.last_end_ns <= ?1 AND "
                         "d.max_received_ns <= ?4 AND " SEEN_Q_AT1_KNOWN4 ") "
                         "FROM runs r WHERE " SEEN_R_AT1_KNOWN4 " GROUP BY r.release "
                         "ORDER BY max(" KERNEL_RUN_START ") DESC, r.release LIMIT ?2 OFFSET ?3",
                         &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, q->at_ns);
        sql_bind_int64(st, 2, (int64_t) page->limit);
        sql_bind_int64(st, 3, (int64_t) page->offset);
        sql_bind_int64(st, 4, q->known_ns);
        sql_bind_int64(st, 5, tolerance_ns);
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct krow *k = realloc(rows, (n + 1) * sizeof(*k));
                if (!k)
                        break;
                rows = k;
                const char *rel = sql_column_text(st, 0);
                rows[n++] = (struct krow){ strdup(rel ?: ""),       sql_column_int(st, 1),
                                           sql_column_int(st, 2),   sql_column_int64(st, 3),
                                           sql_column_int64(st, 4), sql_column_int64(st, 5) };
        }
        *ret = rows;
        *ret_n = n;
        if (rc != SQL_DONE)
                return rc == SQL_ROW ? -ENOMEM : farm_fail(c, rc, "cannot list the releases", err);
        return 0;
}

int farm_kernels_json(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                      const struct farm_page *page, json_t **ret, char err[static FARM_ERROR_MAX]) {
        json_auto_t *list = json_array();
        int64_t total = 0;
        struct krow *rows = NULL;
        size_t n = 0;
        if (!list)
                return -ENOMEM;
        int r = kernel_rows(db, q, (int64_t) rule->clock_tolerance_ns, page, &rows, &n, &total,
                            err);
        /* The verdicts are computed without the reader's lock: each has its own snapshot. */
        for (size_t i = 0; i < n; i++) {
                if (r >= 0 && !rows[i].release)
                        r = -ENOMEM;
                if (r >= 0) {
                        json_t *verdict = NULL;
                        char t1[VTEXT_MAX], t2[VTEXT_MAX];
                        struct farm_question kq = *q;
                        kq.release = rows[i].release;
                        r = farm_verdict_ask(db, rule, &kq, &verdict, err);
                        if (r >= 0) {
                                json_t *kj = json_pack(
                                        "{s:s, s:O, s:i, s:i, s:s, s:s, s:I, s:s, s:O, s:O, s:O}",
                                        "release", rows[i].release, "series",
                                        json_object_get(verdict, "series"), "machines",
                                        rows[i].machines, "runs", rows[i].runs, "first_run",
                                        vts(t1, rows[i].first), "last_run", vts(t2, rows[i].last),
                                        "covered_ns", (json_int_t) rows[i].covered, "verdict",
                                        farm_verdict_status(verdict), "problems",
                                        json_object_get(verdict, "problems_total"), "missing",
                                        json_object_get(verdict, "missing"), "reasons",
                                        json_object_get(verdict, "reasons"));
                                if (!kj || json_array_append_new(list, kj) < 0)
                                        r = -ENOMEM;
                                json_decref(verdict);
                        }
                }
                free(rows[i].release);
        }
        free(rows);
        if (r < 0)
                return r;
        *ret = json_pack("{s:O, s:I, s:I, s:I}", "kernels", list, "total", (json_int_t) total,
                         "limit", (json_int_t) page->limit, "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

/* ---- the question, from parameters --------------------------------------------------------- */

int farm_question_parse(const char *release, const char *at, const char *known_at, int64_t now_ns,
                        struct farm_question *ret, char err[static FARM_PARAM_ERROR_MAX]) {
        char t[VTEXT_MAX];
        *ret = (struct farm_question){ release, now_ns, now_ns, now_ns };
        if (at && farm_param_time("at", at, now_ns, &ret->at_ns, err) < 0)
                return -EINVAL;
        if (known_at && farm_param_time("known_at", known_at, now_ns, &ret->known_ns, err) < 0)
                return -EINVAL;
        const char *bad = ret->at_ns > now_ns + FARM_AT_FUTURE_SLACK_NS      ? "at"
                          : ret->known_ns > now_ns + FARM_AT_FUTURE_SLACK_NS ? "known_at"
                                                                             : NULL;
        if (bad) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "%s=%.64s: in the future (the server's clock reads %s): a verdict "
                         "judges what has happened",
                         bad, bad[0] == 'a' ? at : known_at, vts(t, now_ns));
                return -EINVAL;
        }
        if (known_at && !at)
                ret->at_ns = ret->known_ns;
        else if (at && !known_at)
                ret->known_ns = INT64_MAX; /* everything received since counts, as late data */
        else if (at && known_at && ret->at_ns > ret->known_ns) {
                snprintf(err, FARM_PARAM_ERROR_MAX,
                         "at=%.64s: after known_at: what was known at a moment says nothing of "
                         "a later one",
                         at);
                return -EINVAL;
        }
        return 0;
}
