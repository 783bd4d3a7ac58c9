/* SPDX-License-Identifier: MIT */
/* The latest stable release of each series, and the verdict log that says since when: a
 * thread re-judges every release with recent data once a period (by default a minute) and
 * records each change of its verdict. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "log.h"
#include "macro.h"
#include "db-internal.h"
#include "verdict-log.h"
#include "log-read.h"
#include "timeutil.h"
#include "worker.h"

/* The rule in force at `at` as the verdict uses it (the series may have been configured
 * otherwise since). */
static int rule_at(farm_db *db, const struct farm_rule *configured, int64_t at,
                   struct farm_rule *ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT rule FROM rule_versions ORDER BY from_ns <= ?1 DESC, "
                             "CASE WHEN from_ns <= ?1 THEN -from_ns ELSE from_ns END, id DESC "
                             "LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, at);
        int rc = sql_step(st);
        *ret = *configured;
        if (rc == SQL_ROW) {
                json_auto_t *j = json_loads(sql_column_text(st, 0) ?: "", 0, NULL);
                char e[FARM_RULE_ERROR_MAX];
                if (!j || farm_rule_from_json(j, ret, e, sizeof(e)) < 0)
                        return farm_failf(db, -EBADMSG, err, "%s", e);
        } else if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the rule", err);
        return 0;
}

struct srel {
        char *release;
        char series[FARM_SERIES_NAME_MAX];
};

static int cmp_srel(const void *a, const void *b) {
        const struct srel *x = a, *y = b;
        int c = strcmp(x->series, y->series);
        return c ? c : farm_version_cmp(y->release, x->release); /* newest first */
}

static void srels_free(struct srel *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i].release);
        free(v);
}

#define SEEN_AT1_KNOWN2 FARM_SQL_RUN_SEEN("", "?1", "?2")

/* The releases run by q's moment, with their series, by series and newest first. */
static int releases(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                    struct srel **ret, size_t *ret_n, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        struct srel *v = NULL;
        size_t n = 0;
        int r = farm_prepare(c, "SELECT DISTINCT release FROM runs WHERE " SEEN_AT1_KNOWN2, &st,
                             err);
        if (r < 0)
                return r;
        sql_bind_int64(st, 1, q->at_ns);
        sql_bind_int64(st, 2, q->known_ns);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                struct srel *x = realloc(v, (n + 1) * sizeof(*x));
                if (!x)
                        break;
                v = x;
                char group[FARM_GROUP_NAME_MAX];
                v[n].release = strdup(sql_column_text(st, 0) ?: "");
                farm_rule_series_of(rule, v[n].release ?: "", v[n].series, group);
                if (!v[n++].release)
                        break;
        }
        if (rc != SQL_DONE) {
                srels_free(v, n);
                return rc == SQL_ROW ? -ENOMEM : farm_fail(c, rc, "cannot list the releases", err);
        }
        if (n > 0)
                qsort(v, n, sizeof(*v), cmp_srel);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* The log as it was at q's moment: what it held by then, as far as what was known (with
 * ?at=T alone, the log of T; it never changes behind anyone's back). */
static int64_t log_moment(const struct farm_question *q) {
        return MIN(q->at_ns, MIN(q->known_ns, q->asked_ns));
}

/* Since when the log has release qualified without a change (by known), or FARM_NONE. */
static int since_of(farm_db *db, const char *release, int64_t known, int64_t *ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT status, at_ns FROM verdict_log WHERE release = ? AND "
                             "at_ns <= ? ORDER BY at_ns DESC, id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, release);
        sql_bind_int64(st, 2, known);
        int rc = sql_step(st);
        *ret = FARM_NONE;
        if (rc == SQL_ROW && strcmp(sql_column_text(st, 0) ?: "", "qualified") == 0)
                *ret = sql_column_int64(st, 1);
        return rc == SQL_ROW || rc == SQL_DONE
                       ? 0
                       : farm_fail(c, rc, "cannot read the verdict log", err);
}

/* The entry of the series whose releases are v[from..to), newest first: its newest release
 * judged, and its latest stable, the newest release qualified (that one, when it is; else the
 * newest that the verdict log had qualified at the moment asked about, in logged). */
static int series_entry(farm_db *db, const struct farm_rule *configured,
                        const struct farm_question *q, const struct srel *v, size_t from, size_t to,
                        const struct farm_logged *logged, size_t nlogged,
                        struct farm_series_entry *ret, char *err) {
        struct farm_question k = *q;
        const char *stable = NULL;
        _cleanup_verdict_ struct farm_verdict *newest = NULL;
        bool ok = true;
        *ret = (struct farm_series_entry){ .since_ns = FARM_NONE, .releases = (int) (to - from) };
        snprintf(ret->series, sizeof(ret->series), "%s", v[from].series);
        k.release = v[from].release;
        int r = farm_verdict_ask(db, configured, &k, &newest, err);
        if (r == -ENOENT)
                r = 0;
        else if (r >= 0) {
                ret->judged = true;
                ret->newest_status = newest->status;
                if (newest->status == FARM_VERDICT_QUALIFIED)
                        stable = v[from].release;
        }
        if (r >= 0 && !stable)
                stable = farm_log_newest_qualified(logged, nlogged, v[from].series,
                                                   v[from].release);
        if (r >= 0 && stable)
                r = since_of(db, stable, log_moment(q), &ret->since_ns, err);
        if (r < 0)
                return r;
        ret->latest_stable = farm_strdup_or_null(stable, &ok);
        ret->newest = farm_strdup_or_null(v[from].release, &ok);
        if (!ok) {
                farm_series_entry_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* What the verdict log had for the releases at q's moment. */
static int logged_at(farm_db *db, const struct farm_rule *at_rule, const struct farm_question *q,
                     struct farm_logged **ret, size_t *ret_n, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        return farm_log_qualified(c, at_rule, q->at_ns, q->known_ns, ret, ret_n, err);
}

int farm_series(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                struct farm_series_list *ret, char err[static FARM_ERROR_MAX]) {
        struct farm_rule at_rule;
        struct srel *v = NULL;
        struct farm_logged *logged = NULL;
        size_t n = 0, nlogged = 0;
        *ret = (struct farm_series_list){};
        int r = rule_at(db, rule, q->at_ns, &at_rule, err);
        if (r < 0 || (r = releases(db, &at_rule, q, &v, &n, err)) < 0)
                return r;
        r = logged_at(db, &at_rule, q, &logged, &nlogged, err);
        for (size_t i = 0; i < n && r >= 0;) {
                size_t k = i;
                while (k < n && strcmp(v[k].series, v[i].series) == 0)
                        k++;
                if (!farm_grow((void **) &ret->v, ret->n, sizeof(*ret->v)))
                        r = -ENOMEM;
                else if ((r = series_entry(db, rule, q, v, i, k, logged, nlogged, &ret->v[ret->n],
                                           err)) >= 0)
                        ret->n++;
                i = k;
        }
        srels_free(v, n);
        farm_logged_free(logged, nlogged);
        if (r < 0)
                farm_series_list_done(ret);
        return r < 0 ? r : 0;
}

/* Adds the latest stable best (NULL: none) from at_ns to the front of the history of s. */
static int history_add(struct farm_latest_stable *s, const char *best, int64_t at_ns) {
        bool ok = true;
        char *copy = farm_strdup_or_null(best, &ok);
        if (!ok || !farm_grow((void **) &s->history, s->nhistory, sizeof(*s->history))) {
                free(copy);
                return -ENOMEM;
        }
        memmove(s->history + 1, s->history, s->nhistory * sizeof(*s->history));
        s->history[0] = (struct farm_stable_change){ copy, at_ns };
        s->nhistory++;
        return 0;
}

/* Drops the newest change of the history of s. */
static void history_drop_first(struct farm_latest_stable *s) {
        free(s->history[0].latest_stable);
        memmove(s->history, s->history + 1, --s->nhistory * sizeof(*s->history));
}

/* The history of the latest stable of series from the verdict log (by known), into s: newest
 * first. */
static int history(farm_db *db, const char *series, int64_t known, struct farm_latest_stable *s,
                   char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        json_auto_t *status = json_object();
        char *current = NULL;
        int r = farm_prepare(c,
                             "SELECT release, status, at_ns FROM verdict_log WHERE series = ? "
                             "AND at_ns <= ? ORDER BY at_ns, id",
                             &st, err);
        if (r < 0)
                return r;
        if (!status)
                return -ENOMEM;
        sql_bind_text(st, 1, series);
        sql_bind_int64(st, 2, known);
        int rc;
        while ((rc = sql_step(st)) == SQL_ROW) {
                const char *rel = sql_column_text(st, 0) ?: "",
                           *st_s = sql_column_text(st, 1) ?: "", *best = NULL, *key;
                json_t *val;
                json_object_set_new(status, rel, json_boolean(strcmp(st_s, "qualified") == 0));
                json_object_foreach (status, key, val)
                        if (json_is_true(val) && (!best || farm_version_cmp(key, best) > 0))
                                best = key;
                if (strcmp(best ?: "", current ?: "") == 0)
                        continue;
                free(current);
                current = best ? strdup(best) : NULL;
                /* One pass logs its releases one after the other at one moment: what held
                 * at that moment is the last of them, not each step on the way. */
                int64_t at = sql_column_int64(st, 2);
                if (s->nhistory && s->history[0].from_ns == at) {
                        history_drop_first(s);
                        if (s->nhistory &&
                            strcmp(s->history[0].latest_stable ?: "", best ?: "") == 0)
                                continue;
                }
                if (history_add(s, best, at) < 0) {
                        free(current);
                        return -ENOMEM;
                }
        }
        free(current);
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the verdict log", err);
        return 0;
}

int farm_latest_stable(farm_db *db, const struct farm_rule *rule, const char *series,
                       const struct farm_question *q, struct farm_latest_stable *ret,
                       char err[static FARM_ERROR_MAX]) {
        struct farm_rule at_rule;
        struct srel *v = NULL;
        size_t n = 0, from = 0, to = 0;
        *ret = (struct farm_latest_stable){ .at_ns = q->at_ns };
        int r = rule_at(db, rule, q->at_ns, &at_rule, err);
        if (r < 0 || (r = releases(db, &at_rule, q, &v, &n, err)) < 0)
                return r;
        while (from < n && strcmp(v[from].series, series) != 0)
                from++;
        for (to = from; to < n && strcmp(v[to].series, series) == 0;)
                to++;
        struct farm_logged *logged = NULL;
        size_t nlogged = 0;
        if (from == to)
                r = farm_failf(db, -ENOENT, err, "no release of series %s has run", series);
        if (r >= 0)
                r = logged_at(db, &at_rule, q, &logged, &nlogged, err);
        if (r >= 0)
                r = series_entry(db, rule, q, v, from, to, logged, nlogged, &ret->entry, err);
        farm_logged_free(logged, nlogged);
        if (r >= 0)
                r = history(db, series, log_moment(q), ret, err);
        srels_free(v, n);
        if (r < 0)
                farm_latest_stable_done(ret);
        return r < 0 ? r : 0;
}

/* ---- the verdict log ----------------------------------------------------------------------- */

/* Longer than an upload takes from its arrival to its commit (lock waits end after 10 s). */
#define LOG_OVERLAP_NS (120 * (int64_t) NSEC_PER_SEC)

/* The releases whose verdict may have changed since the pass that saw *seen (all zero: every
 * release): those with data in the last period (a silence grows with time), those whose
 * machines stored intervals or events since within a period and a day of their data (the
 * release's own, or another release's run on the same machine: an overlap, or a silence that
 * the machine's other work excuses), those never logged, and all of them when staff changed
 * anything since (settings, windows, waivers: the audit trail has it).  "Since" is by row id,
 * read in one snapshot with the ids: on SQLite a row gets its id when it is written by the one
 * writer, so no row committed after the snapshot has a smaller id.  On PostgreSQL several
 * transactions write at once and one that took a smaller id may commit later: the uploads
 * received up to LOG_OVERLAP_NS before the previous pass are judged again as well (an upload
 * takes far less from its arrival to its commit).  *seen is updated. */
static int releases_to_judge(farm_db *db, const struct farm_rule *rule, int64_t now,
                             struct farm_log_mark *seen, json_t **ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL, *mark = NULL;
        json_auto_t *list = json_array();
        int r = farm_prepare(c,
                             "SELECT coalesce((SELECT max(id) FROM intervals), 0), "
                             "coalesce((SELECT max(id) FROM events), 0), "
                             "coalesce((SELECT max(id) FROM audit), 0)",
                             &mark, err);
        if (r < 0 ||
            (r = farm_prepare(c,
                              "SELECT DISTINCT release FROM runs r WHERE ?5 <> 0 OR "
                              "r.last_end_ns >= ?1 OR NOT EXISTS (SELECT 1 FROM verdict_log l "
                              "WHERE l.release = r.release) OR EXISTS (SELECT 1 FROM runs o "
                              "WHERE o.machine_id = r.machine_id AND "
                              "coalesce(o.first_start_ns, o.start_ns) < "
                              "coalesce(r.last_end_ns, r.start_ns) + ?6 AND "
                              "coalesce(o.last_end_ns, o.start_ns) > "
                              "coalesce(r.first_start_ns, r.start_ns) - ?6 AND "
                              "(o.id IN (SELECT run FROM intervals WHERE id > ?2) OR o.id IN "
                              "(SELECT run FROM events WHERE id > ?3) OR EXISTS (SELECT 1 FROM "
                              "uploads u WHERE u.run = o.id AND u.received_ns > ?4))) "
                              "ORDER BY 1",
                              &st, err)) < 0)
                return r;
        if ((r = sql_begin(c, SQL_TXN_SNAPSHOT)) < 0)
                return farm_fail(c, r, "cannot begin reading", err);
        struct farm_log_mark now_seen = {};
        if ((r = sql_step(mark)) == SQL_ROW) {
                now_seen = (struct farm_log_mark){ sql_column_int64(mark, 0),
                                                   sql_column_int64(mark, 1),
                                                   sql_column_int64(mark, 2) };
                bool all = !seen->started || now_seen.audit_id > seen->audit_id;
                sql_bind_int64(st, 1, now - (int64_t) rule->period_ns - FARM_DAY_NS);
                sql_bind_int64(st, 2, seen->interval_id);
                sql_bind_int64(st, 3, seen->event_id);
                sql_bind_int64(st, 4, farm_is_pg(db) ? seen->pass_ns - LOG_OVERLAP_NS : INT64_MAX);
                sql_bind_int64(st, 5, all);
                sql_bind_int64(st, 6, (int64_t) rule->period_ns + FARM_DAY_NS);
                while ((r = sql_step(st)) == SQL_ROW)
                        if (json_array_append_new(list, farm_json_col_text(st, 0)) < 0) {
                                r = -ENOMEM;
                                break;
                        }
        }
        sql_rollback(c);
        if (r != SQL_DONE)
                return r == -ENOMEM ? r : farm_fail(c, r, "cannot list the releases", err);
        now_seen.started = true;
        now_seen.pass_ns = now;
        *seen = now_seen;
        *ret = json_incref(list);
        return 0;
}

/* Records v's status unless it is the last one logged for the release: 1 if recorded.  The
 * status logged before (or "" for none) and its row go to prev and prev_id.  In a write
 * transaction: on PostgreSQL under the farm's lock of changes, so that two servers never both
 * log the same change. */
static int log_change_locked(sql_conn *c, const struct farm_verdict *v, int64_t now,
                             char prev[static 16], int64_t *prev_id, char *err) {
        _cleanup_reset_ sql_stmt *sel = NULL, *ins = NULL;
        const char *release = v->release, *status = farm_verdict_status_name(v->status);
        int r;
        if ((r = farm_prepare(c,
                              "SELECT status, id FROM verdict_log WHERE release = ? ORDER BY "
                              "at_ns DESC, id DESC LIMIT 1",
                              &sel, err)) < 0 ||
            (r = farm_prepare(c,
                              "INSERT INTO verdict_log (release, series, status, at_ns, "
                              "problems, missing) VALUES (?, ?, ?, ?, ?, ?)",
                              &ins, err)) < 0)
                return r;
        sql_bind_text(sel, 1, release);
        int rc = sql_step(sel);
        snprintf(prev, 16, "%s", rc == SQL_ROW ? sql_column_text(sel, 0) ?: "" : "");
        *prev_id = rc == SQL_ROW ? sql_column_int64(sel, 1) : 0;
        if (rc == SQL_ROW && strcmp(sql_column_text(sel, 0) ?: "", status) == 0)
                return 0;
        if (rc != SQL_ROW && rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the verdict log", err);
        sql_bind_text(ins, 1, release);
        sql_bind_text(ins, 2, v->series);
        sql_bind_text(ins, 3, status);
        sql_bind_int64(ins, 4, now);
        sql_bind_int64(ins, 5, (int64_t) v->problems_total);
        sql_bind_int64(ins, 6, (int64_t) v->nmissing);
        r = farm_step_done(ins, "cannot write the verdict log", err);
        return r < 0 ? r : 1;
}

static int log_change(farm_db *db, const struct farm_verdict *v, int64_t now, char prev[static 16],
                      int64_t *prev_id, char *err) {
        return FARM_WRITE_TRANSACTION(db, w, err, log_change_locked(w, v, now, prev, prev_id, err));
}

/* On PostgreSQL the servers of a farm take turns: the one that holds the verdict log's lock
 * runs the pass, the others let it be (0: not this time). */
static int pass_lock(sql_conn *c, bool take, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             take ? "SELECT pg_try_advisory_lock(" FARM_LOCK_VERDICT_LOG ")"
                                  : "SELECT pg_advisory_unlock(" FARM_LOCK_VERDICT_LOG ")",
                             &st, err);
        if (r < 0)
                return r;
        r = sql_step(st);
        if (r != SQL_ROW)
                return farm_fail(c, r, "cannot take the verdict log's lock", err);
        return sql_column_int(st, 0);
}

/* The problems of release's verdict from the data received by known_ns, told to sink; that
 * verdict's status into status ("" where the release had no data by then). */
static int tell_known(farm_db *db, const struct farm_rule *rule, const char *release,
                      int64_t now_ns, int64_t known_ns, const struct farm_problem_sink *sink,
                      char status[static 16], char *err) {
        struct farm_question q = { release, now_ns, known_ns, now_ns, sink };
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        int r = farm_verdict_ask(db, rule, &q, &v, err);
        snprintf(status, 16, "%s", r >= 0 ? farm_verdict_status_name(v->status) : "");
        return r == -ENOENT ? 0 : r;
}

/* Judges release in a pass: logs a change, tells the hooks.  1 when the release went to or
 * from qualified (the baseline of the newer releases of its series may have changed), else 0. */
static int judge_one(farm_db *db, const struct farm_rule *rule, const char *release, int64_t now_ns,
                     int64_t told_by, bool partial, const struct farm_verdict_hooks *h,
                     struct farm_problem_sink *sink, int *changed, char *err) {
        struct farm_question q = { release, now_ns, now_ns, now_ns,
                                   h->problem && !partial ? sink : NULL };
        char prev[16] = "", known[16] = "";
        int64_t prev_id = 0;
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        int r = 0;
        if (partial && (r = tell_known(db, rule, release, now_ns, told_by, sink, known, err)) < 0)
                return r;
        r = farm_verdict_ask(db, rule, &q, &v, err);
        if (r == -ENOENT)
                return 0;
        if (r >= 0)
                r = log_change(db, v, now_ns, prev, &prev_id, err);
        const char *status = r >= 0 ? farm_verdict_status_name(v->status) : "";
        bool stable_changed = r > 0 && (strcmp(prev, "qualified") == 0) !=
                                               (strcmp(status, "qualified") == 0);
        if (r > 0) {
                log_info("Release %s is now %s", release, status);
                (*changed)++;
        }
        if (r >= 0 && h->judged)
                h->judged(h->userdata, v, *prev ? prev : NULL, prev_id, r > 0,
                          partial && strcmp(known, status) != 0, now_ns);
        return r < 0 ? r : stable_changed;
}

/* Every release to judge, in the order their baselines need: by series, oldest first.  A
 * release whose data did not change is judged again when an older release of its series went
 * to or from qualified in the same pass (its baseline comes from the log). */
static int log_pass(farm_db *db, const struct farm_rule *rule, int64_t now_ns,
                    struct farm_log_mark *seen, const struct farm_verdict_hooks *hooks,
                    struct worker *worker, char *err) {
        static const struct farm_verdict_hooks none = {};
        const struct farm_verdict_hooks *h = hooks ?: &none;
        struct farm_problem_sink sink = { h->problem, h->userdata };
        int64_t told_by = h->problems_known ? h->problems_known(h->userdata, now_ns) : now_ns;
        bool partial = h->problem && told_by < now_ns; /* see problems_known */
        struct farm_question all_q = { NULL, now_ns, now_ns, now_ns };
        struct farm_rule at_rule;
        json_auto_t *list = NULL, *wanted = json_object();
        struct srel *all = NULL;
        size_t nall = 0, i;
        json_t *rel;
        int changed = 0;
        bool stopped = false;
        struct farm_log_mark mark = *seen;
        int r = releases_to_judge(db, rule, now_ns, &mark, &list, err);
        if (r >= 0 && !wanted)
                r = -ENOMEM;
        json_array_foreach (r >= 0 ? list : NULL, i, rel)
                if (json_object_set(wanted, json_string_value(rel), json_true()) < 0)
                        r = -ENOMEM;
        if (r >= 0 && (r = rule_at(db, rule, now_ns, &at_rule, err)) >= 0)
                r = releases(db, &at_rule, &all_q, &all, &nall, err);
        /* releases() lists each series newest first: walk each backwards. */
        for (size_t from = 0, to; r >= 0 && from < nall && !stopped; from = to) {
                bool dirty = false;
                for (to = from; to < nall && strcmp(all[to].series, all[from].series) == 0;)
                        to++;
                for (size_t k = to; k-- > from && r >= 0;) {
                        if (!dirty && !json_object_get(wanted, all[k].release))
                                continue;
                        if ((stopped = worker && !worker_wait(worker, 0)))
                                break;
                        r = judge_one(db, rule, all[k].release, now_ns, told_by, partial, h, &sink,
                                      &changed, err);
                        dirty |= r > 0;
                }
        }
        srels_free(all, nall);
        if (r < 0)
                return r;
        if (stopped)
                return changed;
        if (!partial)
                *seen = mark; /* only once every release of the pass was judged */
        if (h->pass_done)
                h->pass_done(h->userdata, now_ns);
        return changed;
}

int farm_verdict_log_pass(farm_db *db, const struct farm_rule *rule, int64_t now_ns,
                          struct farm_log_mark *seen, const struct farm_verdict_hooks *hooks,
                          struct worker *worker, char err[static FARM_ERROR_MAX]) {
        if (!farm_is_pg(db))
                return log_pass(db, rule, now_ns, seen, hooks, worker, err);
        /* The lock is the session's: held on a connection kept for the pass. */
        _cleanup_release_ sql_conn *c = farm_writer(db);
        int r = pass_lock(c, true, err);
        if (r <= 0)
                return r;
        r = log_pass(db, rule, now_ns, seen, hooks, worker, err);
        char ignored[FARM_ERROR_MAX];
        pass_lock(c, false, ignored);
        return r;
}

struct farm_watcher {
        farm_db *db;
        const struct farm_rule *rule;
        const struct farm_verdict_hooks *hooks;
        struct worker *worker;
};

uint64_t farm_watch_wait_ns(uint64_t watch_ns, uint64_t pass_ns) {
        const uint64_t factor = 100 / FARM_WATCH_SHARE - 1;
        uint64_t spaced = pass_ns > UINT64_MAX / factor ? UINT64_MAX : pass_ns * factor;
        return MAX(watch_ns, spaced);
}

/* Says when the passes start or stop being spaced out beyond Watch=. */
static void say_spacing(bool *spaced, uint64_t watch_ns, uint64_t pass_ns, uint64_t wait_ns) {
        if ((wait_ns > watch_ns) == *spaced)
                return;
        *spaced = wait_ns > watch_ns;
        if (*spaced)
                log_notice("Verdict log: a pass took %" PRIu64 " ms, more than %d %% of Watch=; "
                           "the next in %" PRIu64 " s, so that the log keeps to that share",
                           pass_ns / NSEC_PER_MSEC, FARM_WATCH_SHARE, wait_ns / NSEC_PER_SEC);
        else
                log_notice("Verdict log: a pass took %" PRIu64 " ms; passes every Watch= again",
                           pass_ns / NSEC_PER_MSEC);
}

static void watcher_main(void *arg, struct worker *worker) {
        struct farm_watcher *w = arg;
        bool failing = false, spaced = false;
        struct farm_log_mark seen = {};
        /* The first pass counts from the start: while the notifier has not caught up, a pass is
         * not taken as done and the next one judges everything again. */
        int64_t start = now_ns(CLOCK_MONOTONIC);
        uint64_t wait_ns;
        do {
                char err[FARM_ERROR_MAX] = "";
                bool first = !seen.started;
                int64_t t0 = now_ns(CLOCK_MONOTONIC);
                int r = farm_verdict_log_pass(w->db, w->rule, now_ns(CLOCK_REALTIME), &seen,
                                              w->hooks, worker, err);
                int64_t t1 = now_ns(CLOCK_MONOTONIC);
                if (r < 0 && !failing && !farm_db_stopping(w->db))
                        log_warning("Verdict log: %s; trying again", err);
                failing = r < 0;
                if (first && seen.started)
                        log_info("Verdict log: first pass done in %" PRId64 " ms, %d change(s)",
                                 (t1 - start) / (int64_t) NSEC_PER_MSEC, r);
                /* Not before the first pass that counts: a start's passes while the notifier
                 * catches up judge every release, and the log is not dated until one is done. */
                wait_ns = seen.started ? farm_watch_wait_ns(w->rule->watch_ns, (uint64_t) (t1 - t0))
                                       : w->rule->watch_ns;
                say_spacing(&spaced, w->rule->watch_ns, (uint64_t) (t1 - t0), wait_ns);
        } while (worker_wait(worker, wait_ns));
}

int farm_watcher_start(farm_db *db, const struct farm_rule *rule,
                       const struct farm_verdict_hooks *hooks, struct farm_watcher **ret) {
        *ret = NULL;
        if (rule->watch_ns == 0)
                return 0;
        struct farm_watcher *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (struct farm_watcher){ .db = db, .rule = rule, .hooks = hooks };
        int r = worker_start("verdict-log", watcher_main, w, &w->worker);
        if (r < 0) {
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

void farm_watcher_stop(struct farm_watcher *w) {
        if (!w)
                return;
        worker_stop(w->worker);
        free(w);
}
