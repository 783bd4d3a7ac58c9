/* SPDX-License-Identifier: MIT */
/* A verdict's context: its own read snapshot of the farm database, the rule, waivers and
 * machine settings in force at the moment judged, and the filing of problems (counted while
 * the machine gated the release, waived, or listed as not counted). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict-internal.h"
#include "timeutil.h"

int vfail(struct vctx *v, int rc, const char *what) {
        return farm_fail(v->c, rc, what, v->err);
}

int vprep(struct vctx *v, const char *sql, sql_stmt **ret) {
        int r = farm_prepare(v->c, sql, ret, v->err);
        if (r >= 0)
                sql_reset(*ret);
        return r;
}

static char *dup_col(sql_stmt *st, int col) {
        const char *t = sql_column_text(st, col);
        return strdup(t ?: "");
}

/* The rule in force at `at`: the version recorded last before it, else the first recorded,
 * else the configured one (a farm database whose server never recorded one). */
static int load_rule(struct vctx *v, const struct farm_rule *configured) {
        static const char *const sql[] = {
                "SELECT rule FROM rule_versions WHERE from_ns <= ? ORDER BY from_ns DESC, id DESC "
                "LIMIT 1",
                "SELECT rule FROM rule_versions WHERE ? IS NOT NULL ORDER BY from_ns, id LIMIT 1",
        };
        for (size_t i = 0; i < ELEMENTSOF(sql); i++) {
                sql_stmt *st;
                int r = vprep(v, sql[i], &st);
                if (r < 0)
                        return r;
                sql_bind_int64(st, 1, v->at);
                int rc = sql_step(st);
                if (rc == SQL_ROW) {
                        json_error_t je;
                        const char *text = sql_column_text(st, 0);
                        json_auto_t *j = json_loads(text ?: "", 0, &je);
                        sql_reset(st);
                        char e[FARM_RULE_ERROR_MAX];
                        if (!j || farm_rule_from_json(j, &v->rule, e, sizeof(e)) < 0)
                                return farm_failf(v->db, -EBADMSG, v->err, "%s", e);
                        return 0;
                }
                sql_reset(st);
                if (rc != SQL_DONE)
                        return vfail(v, rc, "cannot read the rule's versions");
        }
        v->rule = *configured;
        return 0;
}

static int load_waivers(struct vctx *v) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT id, problem, reason, by, created_ns FROM waivers "
                      "WHERE kernel_release = ?1 AND created_ns <= ?2 "
                      "AND (withdrawn_ns IS NULL OR withdrawn_ns > ?2) ORDER BY id",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, v->release);
        sql_bind_int64(st, 2, v->at);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct vwaiver *w = realloc(v->waivers, (v->nwaivers + 1) * sizeof(*w));
                if (!w)
                        return -ENOMEM;
                v->waivers = w;
                w = &v->waivers[v->nwaivers++];
                *w = (struct vwaiver){ .id = sql_column_int64(st, 0),
                                       .problem = dup_col(st, 1),
                                       .reason = dup_col(st, 2),
                                       .by = dup_col(st, 3),
                                       .created_ns = sql_column_int64(st, 4) };
                if (!w->problem || !w->reason || !w->by)
                        return -ENOMEM;
        }
        sql_reset(st);
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the waivers");
}

int vctx_open(struct vctx *v, const struct farm_rule *configured) {
        /* One read snapshot: every query of the verdict sees the same farm (on PostgreSQL a
         * REPEATABLE READ READ ONLY transaction). */
        v->c = farm_snapshot(v->db, v->err);
        if (!v->c)
                return -EBUSY;
        if (!(v->out = calloc(1, sizeof(*v->out))) || !(v->out->release = strdup(v->release)))
                return -ENOMEM;
        const char *raw = getenv("RTSOAK_VERDICT_RAW");
        v->raw_only = raw && strcmp(raw, "1") == 0;
        const char *chunk = getenv("RTSOAK_VERDICT_CHUNK");
        char *end = NULL;
        unsigned long long n = chunk ? strtoull(chunk, &end, 10) : 0;
        v->chunk_rows = end && !*end && n > 0 && n <= VDAY_CHUNK_ROWS ? (size_t) n
                                                                      : VDAY_CHUNK_ROWS;
        int r = load_rule(v, configured);
        return r < 0 ? r : load_waivers(v);
}

void vctx_done(struct vctx *v) {
        if (v->c)
                farm_release(v->c);
        for (size_t i = 0; i < v->nwaivers; i++) {
                free(v->waivers[i].problem);
                free(v->waivers[i].reason);
                free(v->waivers[i].by);
        }
        free(v->waivers);
        farm_verdict_free(v->out);
        free(v->runflags);
}

/* ---- a machine's settings ------------------------------------------------------------------ */

bool vsetting_in_group(const struct vsetting *s, const char *group) {
        size_t n = strlen(group);
        for (const char *p = s->groups; p && (p = strstr(p, group)); p += n)
                if ((p == s->groups || p[-1] == ',') && (p[n] == ',' || !p[n]))
                        return true;
        return false;
}

int vspan_append(struct vspan **v, size_t *n, int64_t start, int64_t end) {
        if (*n > 0 && (*v)[*n - 1].end == start) {
                (*v)[*n - 1].end = end;
                return 0;
        }
        if (!farm_grow((void **) v, *n, sizeof(**v)))
                return -ENOMEM;
        (*v)[(*n)++] = (struct vspan){ start, end };
        return 0;
}

static int cmp_machine_ptr(const void *a, const void *b) {
        return strcmp((*(struct vmachine *const *) a)->id, (*(struct vmachine *const *) b)->id);
}

static int cmp_id_machine(const void *key, const void *m) {
        return strcmp(key, (*(struct vmachine *const *) m)->id);
}

/* The machine of ms (sorted by id in by_id) named id, or NULL. */
static struct vmachine *machine_named(struct vmachine **by_id, size_t n, const char *id) {
        struct vmachine **m = bsearch(id ?: "", by_id, n, sizeof(*by_id), cmp_id_machine);
        return m ? *m : NULL;
}

/* Each machine's settings versions in force by `at`, oldest first.  The settings a machine was
 * enrolled with (its first version) apply to all it sent before they first changed: data
 * stamped before its enrolment comes from a history replayed, or a clock behind (which the
 * clock rule sees).  One statement for every machine, in the order of their versions. */
static int load_settings(struct vctx *v, struct vmachine **by_id, size_t n) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT machine_id, from_ns, threshold_ns, gating, revoked, groups "
                      "FROM machine_settings ORDER BY machine_id, from_ns, id",
                      &st);
        if (r < 0)
                return r;
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct vmachine *m = machine_named(by_id, n, sql_column_text(st, 0));
                int64_t from = sql_column_int64(st, 1);
                if (!m || (m->nset > 0 && from > v->at))
                        continue;
                struct vsetting *s = realloc(m->set, (m->nset + 1) * sizeof(*s));
                if (!s) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                m->set = s;
                s[m->nset++] = (struct vsetting){ .from_ns = from,
                                                  .bound_ns = sql_column_int64(st, 2),
                                                  .gating = sql_column_int(st, 3) != 0,
                                                  .revoked = sql_column_int(st, 4) != 0,
                                                  .groups = dup_col(st, 5) };
                if (!s[m->nset - 1].groups) {
                        sql_reset(st);
                        return -ENOMEM;
                }
                if (m->nset == 1) {
                        m->enrolled_ns = s[0].from_ns;
                        s[0].from_ns = INT64_MIN;
                }
        }
        sql_reset(st);
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the machine's settings");
}

/* Each machine's maintenance windows known by `at`, by their start: one statement for all. */
static int load_windows(struct vctx *v, struct vmachine **by_id, size_t n) {
        sql_stmt *st;
        int r = vprep(
                v,
                "SELECT machine_id, greatest(from_ns, created_ns), CASE WHEN cancelled_ns IS "
                "NOT NULL AND cancelled_ns <= ?1 THEN least(to_ns, cancelled_ns) ELSE to_ns END "
                "FROM maintenance WHERE created_ns <= ?1 ORDER BY machine_id, 2",
                &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, v->at);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct vmachine *m = machine_named(by_id, n, sql_column_text(st, 0));
                int64_t s = sql_column_int64(st, 1), e = sql_column_int64(st, 2);
                if (m && e > s && (r = vspan_append(&m->windows, &m->nwindows, s, e)) < 0) {
                        sql_reset(st);
                        return r;
                }
        }
        sql_reset(st);
        return rc == SQL_DONE ? 0 : vfail(v, rc, "cannot read the maintenance windows");
}

int vmachines_load(struct vctx *v, struct vmachine *ms, size_t n) {
        if (n == 0)
                return 0;
        _cleanup_free_ struct vmachine **by_id = calloc(n, sizeof(*by_id));
        if (!by_id)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                ms[i].last_problem_ns = INT64_MIN;
                by_id[i] = &ms[i];
        }
        qsort(by_id, n, sizeof(*by_id), cmp_machine_ptr);
        int r = load_settings(v, by_id, n);
        return r < 0 ? r : load_windows(v, by_id, n);
}

/* The group that judged the release at t (docs/verdict.md, Terms). */
const char *vgroup_at(const struct vctx *v, int64_t t) {
        return t < v->group_from ? "default" : v->group;
}

/* Whether m has a run stamped by `at` (of any release), known by `known`. */
static int stamped_by_at(struct vctx *v, const struct vmachine *m, bool *ret) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT 1 FROM runs WHERE machine_id = ?1 AND start_ns <= ?2 AND "
                      "first_report_ns <= ?3 LIMIT 1",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, m->id);
        sql_bind_int64(st, 2, v->at);
        sql_bind_int64(st, 3, v->known);
        int rc = sql_step(st);
        sql_reset(st);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return vfail(v, rc, "cannot read the machine's runs");
        *ret = rc == SQL_ROW;
        return 0;
}

int vmachine_gate(struct vctx *v, struct vmachine *m) {
        int r;
        for (size_t i = 0; i < m->nset; i++) {
                const struct vsetting *s = &m->set[i];
                int64_t end = i + 1 < m->nset ? m->set[i + 1].from_ns : INT64_MAX;
                if (!s->gating || s->revoked || end <= s->from_ns)
                        continue;
                /* The part of the version before the group judged, under "default"; but the
                 * settings a machine was enrolled with apply to all it sent before: enrolled
                 * into the group, its own earlier data is the group's. */
                int64_t split = i == 0 && vsetting_in_group(s, v->group)
                                        ? s->from_ns
                                        : MAX(MIN(v->group_from, end), s->from_ns);
                if (split > s->from_ns && vsetting_in_group(s, "default") &&
                    (r = vspan_append(&m->gate, &m->ngate, s->from_ns, split)) < 0)
                        return r;
                if (end > split && vsetting_in_group(s, v->group) &&
                    (r = vspan_append(&m->gate, &m->ngate, split, end)) < 0)
                        return r;
        }
        /* Required only once known: ?known_at= a moment before a machine's enrolment answers
         * as the server did then, without it.  ?at= an earlier moment takes it in only when it
         * had sent data stamped by then (the settings it was enrolled with apply to the
         * history it replays): one enrolled later with nothing of that time did not gate then,
         * and enrolling it must not change what ?at= that moment says. */
        bool enrolled = m->nset && m->enrolled_ns <= v->known;
        if (enrolled && m->enrolled_ns > v->at && (r = stamped_by_at(v, m, &enrolled)) < 0)
                return r;
        m->gating = enrolled && vmachine_gates_at(m, v->at);
        if (!m->gating) {
                const struct vsetting *s = m->nset ? &m->set[m->nset - 1] : NULL;
                m->why_not = !enrolled    ? "not enrolled then"
                             : s->revoked ? "revoked"
                             : !s->gating ? "not gating"
                                          : "not in the release's gating group";
        }
        return 0;
}

void vmachine_done(struct vmachine *m) {
        for (size_t i = 0; i < m->nset; i++)
                free(m->set[i].groups);
        free(m->set);
        free(m->gate);
        free(m->hostname);
        free(m->scen);
        json_decref(m->scen_index);
        free(m->entries);
        free(m->segs);
        free(m->downs);
        free(m->open);
        free(m->open_next);
        free(m->clocks);
        free(m->windows);
        farm_strv_free(m->builds, m->nbuilds);
}

bool vmachine_gates_at(const struct vmachine *m, int64_t t) {
        for (size_t i = 0; i < m->ngate; i++)
                if (m->gate[i].start <= t && t < m->gate[i].end)
                        return true;
        return false;
}

int64_t vmachine_bound_at(const struct vmachine *m, int64_t t) {
        int64_t b = m->nset ? m->set[0].bound_ns : (int64_t) FARM_DEFAULT_THRESHOLD_NS;
        for (size_t i = 0; i < m->nset && m->set[i].from_ns <= t; i++)
                b = m->set[i].bound_ns;
        return b;
}

int64_t vmachine_min_bound(const struct vmachine *m) {
        int64_t b = m->nset ? m->set[0].bound_ns : (int64_t) FARM_DEFAULT_THRESHOLD_NS;
        for (size_t i = 0; i < m->nset; i++)
                b = MIN(b, m->set[i].bound_ns);
        return b;
}

/* ---- formatting ---------------------------------------------------------------------------- */

const char *vhost(const struct vmachine *m) {
        return m->hostname && *m->hostname ? m->hostname : m->id;
}

const char *vts(char buf[static VTEXT_MAX], int64_t ns) {
        _Static_assert(TIMESTAMP_MAX_LEN <= VTEXT_MAX, "timestamps fit");
        return format_timestamp_utc(buf, ns);
}

const char *vspan_text(char buf[static VTEXT_MAX], int64_t ns) {
        _Static_assert(TIMESPAN_MAX_LEN <= VTEXT_MAX, "spans fit");
        if (ns <= 0)
                return "0s";
        uint64_t u = (uint64_t) ns;
        if (u < 60 * NSEC_PER_SEC)
                return format_timespan(buf, u < 1000 ? u
                                            : u < NSEC_PER_MSEC
                                                    ? u / 1000 * 1000
                                                    : u / NSEC_PER_MSEC * NSEC_PER_MSEC);
        /* "29d 23h 59min": whole minutes, the zero parts left out; under a day the seconds
         * too ("15min 30s"), so that a span just over an allowance does not read as equal. */
        uint64_t min = u / (60 * NSEC_PER_SEC), d = min / 1440, h = min / 60 % 24, mi = min % 60,
                 sec = u / NSEC_PER_SEC % 60;
        int n = 0;
        buf[0] = '\0';
        if (d)
                n += snprintf(buf + n, VTEXT_MAX - (size_t) n, "%" PRIu64 "d", d);
        if (h)
                n += snprintf(buf + n, VTEXT_MAX - (size_t) n, "%s%" PRIu64 "h", n ? " " : "", h);
        if (mi || n == 0)
                n += snprintf(buf + n, VTEXT_MAX - (size_t) n, "%s%" PRIu64 "min", n ? " " : "",
                              mi);
        if (!d && sec)
                snprintf(buf + n, VTEXT_MAX - (size_t) n, " %" PRIu64 "s", sec);
        return buf;
}

void vevidence(struct farm_evidence *e, int64_t seq, int64_t start, int64_t length,
               const char *scenario, bool *ok) {
        *e = (struct farm_evidence){ .given = true,
                                     .seq = seq,
                                     .start_ns = start,
                                     .length_ns = length,
                                     .scenario = farm_strdup_or_null(
                                             scenario && *scenario ? scenario : NULL, ok) };
}

int vinterval_before(struct vctx *v, int64_t run, int64_t t, struct farm_evidence *ret, bool *ok) {
        sql_stmt *st;
        *ret = (struct farm_evidence){};
        int r = vprep(v,
                      "SELECT seq, start_ns, length_ns, scenario FROM intervals "
                      "WHERE run = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1",
                      &st);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, run);
        sql_bind_int64(st, 2, t);
        int rc = sql_step(st);
        if (rc == SQL_ROW)
                vevidence(ret, sql_column_int64(st, 0), sql_column_int64(st, 1),
                          sql_column_int64(st, 2), sql_column_text(st, 3), ok);
        sql_reset(st);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return vfail(v, rc, "cannot read an interval");
        return 0;
}

int vadd_scenario(struct vmachine *m, const char *name, int64_t ns) {
        /* Found by name in an index: a hostile history may name a new scenario in each of
         * hundreds of thousands of intervals. */
        if (!m->scen_index && !(m->scen_index = json_object()))
                return -ENOMEM;
        json_t *at = json_object_get(m->scen_index, name);
        if (at) {
                m->scen[json_integer_value(at)].covered_ns += ns;
                return 0;
        }
        if (!farm_grow((void **) &m->scen, m->nscen, sizeof(*m->scen)) ||
            json_object_set_new(m->scen_index, name, json_integer((json_int_t) m->nscen)) < 0)
                return -ENOMEM;
        snprintf(m->scen[m->nscen].name, sizeof(m->scen[m->nscen].name), "%s", name);
        m->scen[m->nscen++].covered_ns = ns;
        return 0;
}

/* ---- problems ------------------------------------------------------------------------------ */

/* A waiver of a gap given before gap ids named their end ("gap:MACHINE:START") covers that
 * silence only up to when it was given. */
static bool waiver_matches(const struct vwaiver *w, const char *id, enum farm_problem_kind kind,
                           int64_t end) {
        if (strcmp(w->problem, id) == 0)
                return true;
        if (kind != FARM_PROBLEM_GAP)
                return false;
        size_t n = strlen(w->problem);
        return strncmp(w->problem, id, n) == 0 && id[n] == ':' && strchr(w->problem + 4, ':') &&
               !strchr(strchr(w->problem + 4, ':') + 1, ':') && end <= w->created_ns;
}

void vproblem_head(struct farm_problem *p, enum farm_problem_kind kind, const struct vmachine *m,
                   int64_t time_ns, const char *id, const char *msg, bool *ok) {
        *p = (struct farm_problem){ .kind = kind,
                                    .id = farm_strdup_or_null(id, ok),
                                    .machine = farm_strdup_or_null(m->id, ok),
                                    .hostname = farm_strdup_or_null(m->hostname, ok),
                                    .message = farm_strdup_or_null(msg, ok),
                                    .time_ns = time_ns };
}

/* Moves p to the end of the array *list of *n elements of size bytes (the problem first in
 * each), unless FARM_VERDICT_PROBLEMS_LISTED are listed: then it is only freed. */
static int list_problem(void **list, size_t *n, size_t size, struct farm_problem *p) {
        if (*n >= FARM_VERDICT_PROBLEMS_LISTED) {
                farm_problem_done(p);
                return 1;
        }
        if (!farm_grow(list, *n, size)) {
                farm_problem_done(p);
                return -ENOMEM;
        }
        struct farm_problem *at = (struct farm_problem *) ((char *) *list + *n * size);
        memset(at, 0, size);
        *at = *p;
        *p = (struct farm_problem){};
        (*n)++;
        return 0;
}

static int file_not_counted(struct vctx *v, struct vmachine *m, enum farm_problem_kind kind,
                            int64_t t, struct farm_problem *p) {
        struct farm_verdict *o = v->out;
        char why[160];
        snprintf(why, sizeof(why), "%s did not gate group %s then", vhost(m), vgroup_at(v, t));
        m->not_counted++;
        o->not_counted_total++;
        v->not_counted_kinds[kind]++;
        int r = list_problem((void **) &o->not_counted, &o->nnot_counted, sizeof(*o->not_counted),
                             p);
        if (r != 0)
                return r < 0 ? r : 0;
        struct farm_uncounted_problem *u = &o->not_counted[o->nnot_counted - 1];
        return (u->why = strdup(why)) ? 0 : -ENOMEM;
}

static int file_waived(struct vctx *v, struct vmachine *m, const struct vwaiver *w,
                       struct farm_problem *p) {
        struct farm_verdict *o = v->out;
        if (!farm_grow((void **) &o->waived, o->nwaived, sizeof(*o->waived))) {
                farm_problem_done(p);
                return -ENOMEM;
        }
        struct farm_waived_problem *x = &o->waived[o->nwaived++];
        *x = (struct farm_waived_problem){ .problem = *p,
                                           .waiver = { .id = w->id,
                                                       .created_ns = w->created_ns,
                                                       .reason = strdup(w->reason),
                                                       .by = strdup(w->by) } };
        *p = (struct farm_problem){};
        m->waived++;
        return x->waiver.reason && x->waiver.by ? 0 : -ENOMEM;
}

int vproblem(struct vctx *v, struct vmachine *m, int64_t t, int64_t end, struct farm_problem *p,
             bool ok) {
        struct farm_verdict *o = v->out;
        enum farm_problem_kind kind = p->kind;
        if (!ok) {
                farm_problem_done(p);
                return -ENOMEM;
        }
        if (!vmachine_gates_at(m, t))
                return file_not_counted(v, m, kind, t, p);
        for (size_t i = 0; i < v->nwaivers; i++)
                if (waiver_matches(&v->waivers[i], p->id, kind, end))
                        return file_waived(v, m, &v->waivers[i], p);
        if (v->find && strcmp(v->find, p->id) == 0)
                v->found = true;
        if (v->sink)
                v->sink->problem(v->sink->userdata, v->release, p);
        m->last_problem_ns = MAX(m->last_problem_ns, end);
        m->problems++;
        o->problems_total++;
        o->problem_counts[kind]++;
        int r = list_problem((void **) &o->problems, &o->nproblems, sizeof(*o->problems), p);
        return r < 0 ? r : 0;
}
