/* SPDX-License-Identifier: MIT */
/* No regressions (docs/verdict.md, invariant 9): the baseline of a release is the newest
 * older release of its series that the verdict log had qualified at the moment judged; on
 * every gating machine and scenario that ran both, the release may not be worse in p99.9 or
 * worst case than the rule allows. */
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comparison.h"
#include "verdict-internal.h"
#include "log-read.h"

/* The newest older release of the series that the verdict log had qualified at the moment
 * judged, or "" for none: read, not judged, so that a verdict costs the same however many
 * releases its series holds. */
static int find_baseline(struct vctx *v, char *ret, size_t size) {
        struct farm_logged *list = NULL;
        size_t n = 0;
        int r = farm_log_qualified(v->c, &v->rule, v->at, v->known, &list, &n, v->err);
        if (r < 0)
                return r;
        snprintf(ret, size, "%s", farm_log_newest_qualified(list, n, v->series, v->release) ?: "");
        farm_logged_free(list, n);
        return 0;
}

static const struct farm_release_stat *find_stat(const struct farm_release_stat *s, size_t n,
                                                 const char *machine, const char *scenario) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(s[i].machine, machine) == 0 && strcmp(s[i].scenario, scenario) == 0)
                        return &s[i];
        return NULL;
}

static int regression(struct vctx *v, struct vmachine *m, const char *baseline,
                      const struct farm_release_stat *now, const struct farm_release_stat *base) {
        char id[FARM_PROBLEM_ID_MAX], msg[1024], a[VTEXT_MAX], b[VTEXT_MAX], c[VTEXT_MAX],
                d[VTEXT_MAX], t[VTEXT_MAX], inv[320];
        struct farm_regression reg = {};
        int r = vinventory_against(v, m->id, baseline, &reg, inv, sizeof(inv));
        if (r < 0) {
                farm_problem_done(&(struct farm_problem){ .kind = FARM_PROBLEM_REGRESSION,
                                                          .regression = reg });
                return r;
        }
        const char *scen = *now->scenario ? now->scenario : "none";
        snprintf(id, sizeof(id), "regression:%s:%s:%s", m->id, scen, baseline);
        snprintf(msg, sizeof(msg),
                 "%s, scenario %s: p99.9 %s and worst case %s against %s and %s under %s "
                 "(more than %u %% and %s worse)%s%s",
                 vhost(m), scen, vspan_text(a, (int64_t) now->p99_9_ns),
                 vspan_text(b, (int64_t) now->worst_ns), vspan_text(c, (int64_t) base->p99_9_ns),
                 vspan_text(d, (int64_t) base->worst_ns), baseline,
                 v->rule.regression_tolerance_pct,
                 vspan_text(t, (int64_t) v->rule.regression_min_diff_ns),
                 inv[0] ? "; the machine's inventory differs from the baseline's: " : "", inv);
        struct farm_problem p;
        bool ok = true;
        vproblem_head(&p, FARM_PROBLEM_REGRESSION, m, v->at, id, msg, &ok);
        reg.scenario = farm_strdup_or_null(scen, &ok);
        reg.baseline = farm_strdup_or_null(baseline, &ok);
        reg.release_stats = (struct farm_latency_stats){ (int64_t) now->p99_9_ns,
                                                         (int64_t) now->worst_ns };
        reg.baseline_stats = (struct farm_latency_stats){ (int64_t) base->p99_9_ns,
                                                          (int64_t) base->worst_ns };
        p.regression = reg;
        return vproblem(v, m, v->at, v->at, &p, ok);
}

/* ---- the statistics of a release, whole days only, remembered ----------------------------
 *
 * Merging a month of a farm's per-day histograms takes seconds (200 machines x 30 days x 8
 * CPUs, per release).  A regression compares whole UTC days only (the current day joins the
 * comparison when it is over), so the statistics of a release change once a day, or when data
 * arrives late: they are kept in memory and reused while the days they were merged from are
 * the same (their number, the intervals in them and the latest receipt).  The verdict log's
 * thread computes them once a day; every other verdict finds them. */

#define STATS_CACHE 16

struct stats_sig {
        int64_t days, intervals, max_received;
};

struct stats_entry {
        char *path, *release;
        uint64_t generation;
        int64_t dend;
        struct stats_sig sig;
        struct farm_release_stat *stats;
        size_t n;
        uint64_t used;
};

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_entry stats_cache[STATS_CACHE];
static uint64_t stats_tick;

/* The days of release up to day dend: what its statistics are made of.  *partly is set when
 * one of them is not all known by `known` (then the statistics are not remembered). */
static int stats_signature(struct vctx *v, const char *release, int64_t dend, struct stats_sig *ret,
                           bool *partly) {
        sql_stmt *st;
        int r = vprep(v,
                      "SELECT count(*), coalesce(sum(d.intervals), 0), "
                      "coalesce(max(d.max_received_ns), 0), "
                      "coalesce(max(CASE WHEN d.max_received_ns > ?3 THEN 1 ELSE 0 END), 0) "
                      "FROM run_days d "
                      "JOIN runs r ON d.run = r.id WHERE r.release = ?1 AND d.day <= ?2",
                      &st);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, release);
        sql_bind_int64(st, 2, dend);
        sql_bind_int64(st, 3, v->known);
        int rc = sql_step(st);
        if (rc == SQL_ROW) {
                *ret = (struct stats_sig){ sql_column_int64(st, 0), sql_column_int64(st, 1),
                                           sql_column_int64(st, 2) };
                *partly = sql_column_int(st, 3) != 0;
        }
        sql_reset(st);
        return rc == SQL_ROW ? 0 : vfail(v, rc, "cannot read the day rollups");
}

static struct stats_entry *stats_find(struct vctx *v, const char *release, int64_t dend,
                                      const struct stats_sig *sig) {
        for (size_t i = 0; i < STATS_CACHE; i++) {
                struct stats_entry *e = &stats_cache[i];
                if (e->release && e->generation == farm_db_generation(v->db) &&
                    strcmp(e->path, farm_db_path(v->db)) == 0 && strcmp(e->release, release) == 0 &&
                    e->dend == dend && memcmp(&e->sig, sig, sizeof(*sig)) == 0)
                        return e;
        }
        return NULL;
}

static void stats_remember(struct vctx *v, const char *release, int64_t dend,
                           const struct stats_sig *sig, const struct farm_release_stat *stats,
                           size_t n) {
        struct stats_entry *e = &stats_cache[0];
        for (size_t i = 1; i < STATS_CACHE; i++)
                if (stats_cache[i].used < e->used)
                        e = &stats_cache[i];
        free(e->path);
        free(e->release);
        free(e->stats);
        *e = (struct stats_entry){ .path = strdup(farm_db_path(v->db)),
                                   .release = strdup(release),
                                   .generation = farm_db_generation(v->db),
                                   .dend = dend,
                                   .sig = *sig,
                                   .stats = n ? malloc(n * sizeof(*stats)) : NULL,
                                   .n = n,
                                   .used = ++stats_tick };
        if (!e->path || !e->release || (n && !e->stats)) {
                free(e->path);
                free(e->release);
                free(e->stats);
                *e = (struct stats_entry){};
                return;
        }
        if (n)
                memcpy(e->stats, stats, n * sizeof(*stats));
}

/* The statistics of release per machine and scenario over the whole days before `at`. */
static int release_stats(struct vctx *v, const char *release, struct farm_release_stat **ret,
                         size_t *ret_n) {
        int64_t dend = v->at / FARM_DAY_NS - 1;
        struct stats_sig sig = {};
        bool partly = false;
        int r = stats_signature(v, release, dend, &sig, &partly);
        if (r < 0)
                return r;
        pthread_mutex_lock(&stats_lock);
        struct stats_entry *e = partly ? NULL : stats_find(v, release, dend, &sig);
        if (e) {
                e->used = ++stats_tick;
                *ret_n = e->n;
                *ret = e->n ? malloc(e->n * sizeof(**ret)) : NULL;
                if (e->n && *ret)
                        memcpy(*ret, e->stats, e->n * sizeof(**ret));
                pthread_mutex_unlock(&stats_lock);
                return e->n && !*ret ? -ENOMEM : 0;
        }
        pthread_mutex_unlock(&stats_lock);
        r = farm_release_stats(v->db, release, NULL, 0, (dend + 1) * FARM_DAY_NS, v->known, ret,
                               ret_n, v->err);
        if (r < 0 || partly)
                return r;
        pthread_mutex_lock(&stats_lock);
        stats_remember(v, release, dend, &sig, *ret, *ret_n);
        pthread_mutex_unlock(&stats_lock);
        return 0;
}

int vjudge_regressions(struct vctx *v, struct vmachine *machines, size_t n) {
        char baseline[512];
        struct farm_release_stat *now = NULL, *base = NULL;
        size_t nnow = 0, nbase = 0;
        int r;
        if (!v->rule.regression)
                return 0;
        if ((r = find_baseline(v, baseline, sizeof(baseline))) < 0 || !baseline[0])
                return r;
        if (!(v->out->baseline = strdup(baseline)))
                return -ENOMEM;
        r = release_stats(v, v->release, &now, &nnow);
        if (r >= 0)
                r = release_stats(v, baseline, &base, &nbase);
        for (size_t i = 0; r >= 0 && i < n; i++)
                for (size_t k = 0; r >= 0 && k < nnow; k++) {
                        if (strcmp(now[k].machine, machines[i].id) != 0 || !machines[i].gating)
                                continue;
                        const struct farm_release_stat *b = find_stat(base, nbase, now[k].machine,
                                                                      now[k].scenario);
                        uint64_t tol = v->rule.regression_tolerance_pct,
                                 min = v->rule.regression_min_diff_ns;
                        if (b && (farm_worse(now[k].p99_9_ns, b->p99_9_ns, tol, min) ||
                                  farm_worse(now[k].worst_ns, b->worst_ns, tol, min)))
                                r = regression(v, &machines[i], baseline, &now[k], b);
                }
        free(now);
        free(base);
        return r;
}
