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

#include "verdict-internal.h"

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
        v->group_source = v->group[0] ? FARM_GROUP_CONFIGURED : FARM_GROUP_SERIES;
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
        v->group_source = member ? v->group_source : FARM_GROUP_DEFAULT;
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
        }
        if (r >= 0)
                r = vmachines_load(v, ms, n);
        v->min_bound = INT64_MAX;
        for (size_t i = 0; r >= 0 && i < n; i++)
                v->min_bound = MIN(v->min_bound, vmachine_min_bound(&ms[i]));
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

/* Adds machine to the build version of the release (a new one at the end). */
static int build_add(struct farm_builds *b, const char *version, const char *machine) {
        size_t i = 0;
        while (i < b->n && strcmp(b->v[i].kernel_version, version) != 0)
                i++;
        if (i == b->n) {
                if (!farm_grow((void **) &b->v, b->n, sizeof(*b->v)))
                        return -ENOMEM;
                b->v[b->n] = (struct farm_build){ .kernel_version = strdup(version) };
                if (!b->v[b->n++].kernel_version)
                        return -ENOMEM;
        }
        struct farm_build *x = &b->v[i];
        if (!farm_grow((void **) &x->machines, x->nmachines, sizeof(*x->machines)) ||
            !(x->machines[x->nmachines] = strdup(machine)))
                return -ENOMEM;
        x->nmachines++;
        return 0;
}

/* "mixed_builds:RELEASE:DIGEST" (the digest of the set of builds: a further build is a further
 * problem) and the message, of builds b. */
static void builds_text(const struct vctx *v, const struct farm_builds *b,
                        char id[static FARM_PROBLEM_ID_MAX], char *msg, size_t size) {
        struct sha256_ctx h;
        uint8_t digest[SHA256_DIGEST_SIZE];
        char hex[17], list[1024];
        size_t len = 0;
        sha256_init(&h);
        for (size_t i = 0; i < b->n; i++) {
                const char *key = b->v[i].kernel_version;
                sha256_update(&h, key, strlen(key) + 1);
                len += (size_t) snprintf(list + len, sizeof(list) - MIN(len, sizeof(list)),
                                         "%s\"%s\" on %zu machine(s)", len ? ", " : "", key,
                                         b->v[i].nmachines);
                if (len >= sizeof(list))
                        len = sizeof(list) - 1;
        }
        sha256_final(&h, digest);
        for (int i = 0; i < 8; i++)
                snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        snprintf(id, FARM_PROBLEM_ID_MAX, "mixed_builds:%s:%s", v->release, hex);
        snprintf(msg, size,
                 "%s ran as %zu different kernel builds (uname -v): %s; name each build's "
                 "release on its machines ([Upload] Release=) to judge them apart",
                 v->release, b->n, list);
}

/* Which builds of the release ran on gating machines; more than one is a problem. */
static int judge_builds(struct vctx *v, struct vmachine *ms, size_t n) {
        struct farm_builds *b = &v->out->builds;
        char id[FARM_PROBLEM_ID_MAX], msg[1024];
        int r;
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < ms[i].nbuilds; k++)
                        if ((r = build_add(b, ms[i].builds[k], ms[i].id)) < 0)
                                return r;
        if (b->n < 2)
                return 0;
        builds_text(v, b, id, msg, sizeof(msg));
        /* Filed against the first gating machine that ran a build other than the first. */
        const char *first = b->v[0].kernel_version;
        for (size_t i = 0; i < n; i++) {
                bool other = false, ok = true;
                for (size_t k = 0; k < ms[i].nbuilds; k++)
                        other |= strcmp(ms[i].builds[k], first) != 0;
                if (!other)
                        continue;
                struct farm_problem p;
                vproblem_head(&p, FARM_PROBLEM_MIXED_BUILDS, &ms[i], ms[i].first_ns, id, msg, &ok);
                if (farm_builds_copy(b, &p.builds) < 0)
                        ok = false;
                return vproblem(v, &ms[i], ms[i].first_ns, ms[i].first_ns, &p, ok);
        }
        return 0;
}

/* ---- the verdict --------------------------------------------------------------------------- */

static int judge_all(struct vctx *v, struct vmachine *ms, size_t n) {
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
                r = vjudge_regressions(v, ms, n);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = vjudge_clean(v, &ms[i]);
        return r;
}

static int answer_machines(struct vctx *v, const struct vmachine *ms, size_t n) {
        unsigned ngating = 0, ran = 0, complete = 0;
        int r = 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                const struct vmachine *m = &ms[i];
                if (!m->gating) {
                        r = vanswer_other(v, m);
                        continue;
                }
                ngating++;
                ran += m->nentries > 0;
                if ((r = vanswer_machine(v, m)) >= 0)
                        complete += v->out->machines[v->out->nmachines - 1].status ==
                                    FARM_MACHINE_COMPLETE;
        }
        return r < 0 ? r : vanswer_release(v, ngating, ran, complete);
}

static int verdict_run(struct vctx *v, const struct farm_rule *configured,
                       struct farm_verdict **ret) {
        struct vmachine *ms = NULL;
        size_t n = 0;
        bool known = false;
        int r;
        if ((r = vctx_open(v, configured)) < 0 || (r = release_known(v, &known)) < 0)
                return r;
        if (!known)
                return farm_failf(v->db, -ENOENT, v->err, "no machine has run release %s",
                                  v->release);
        if ((r = list_machines(v, &ms, &n)) >= 0 && (r = judge_all(v, ms, n)) >= 0 &&
            (r = answer_machines(v, ms, n)) >= 0)
                *ret = TAKE_PTR(v->out);
        for (size_t i = 0; i < n; i++)
                vmachine_done(&ms[i]);
        free(ms);
        return r;
}

/* The context and what its parts read for it (each freed by its own file, which reads through
 * the context: freeing them here keeps context.c below them). */
static void verdict_done(struct vctx *v) {
        vinventories_done(v);
        vrun_days_done(v);
        vrelease_runs_done(v);
        vctx_done(v);
}

int farm_verdict_ask(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                     struct farm_verdict **ret, char err[static FARM_ERROR_MAX]) {
        struct vctx v = { .db = db,
                          .err = err,
                          .release = q->release,
                          .at = q->at_ns,
                          .known = q->known_ns,
                          .asked = q->asked_ns,
                          .sink = q->sink };
        int r = verdict_run(&v, rule, ret);
        verdict_done(&v);
        return r;
}

int farm_verdict(farm_db *db, const struct farm_rule *rule, const char *release, int64_t now_ns,
                 struct farm_verdict **ret, char err[static FARM_ERROR_MAX]) {
        struct farm_question q = { release, now_ns, now_ns, now_ns };
        return farm_verdict_ask(db, rule, &q, ret, err);
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
        _cleanup_verdict_ struct farm_verdict *verdict = NULL;
        int r = verdict_run(&v, rule, &verdict);
        *ret = v.found;
        verdict_done(&v);
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
