/* SPDX-License-Identifier: MIT */
/* Kernel comparisons from the per-day histograms: a release's worst case and p99.9 per machine
 * and scenario against another's, the regression rule, and a release's figures for the
 * verdict's regression check. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "comparison.h"
#include "inventories.h"
#include "db-internal.h"
#include "day-rows.h"
#include "macro.h"
#include "merge.h"
#include "params.h"
#include "timeutil.h"

bool farm_worse(uint64_t value, uint64_t base, uint64_t tolerance_percent,
                uint64_t min_difference_ns) {
        if (value <= base)
                return false;
        uint64_t diff = value - base;
        /* In 128 bits: base * percent must not wrap for any latency a day long. */
        unsigned __int128 allowed = (unsigned __int128) base * tolerance_percent / 100;
        return diff > min_difference_ns && (unsigned __int128) diff > allowed;
}

/* ---- GET /api/v1/kernels/{release}/compare ---------------------------------------------- */

struct cmp_list {
        struct farm_cmp_entry *v;
        size_t n;
};

/* The merge of one machine's days: a key is its scenario's index and the side. */
struct cmp_machine {
        struct farm_merge_set *set;
        struct cmp_list *list;
        size_t first; /* the machine's first entry in list: one per scenario, in index order */
        const char *machine;
};

static int cmp_scenario(struct cmp_machine *m, const char *scenario) {
        struct cmp_list *l = m->list;
        for (size_t i = m->first; i < l->n; i++)
                if (strcmp(l->v[i].scenario, scenario) == 0)
                        return (int) (i - m->first);
        if (!farm_grow((void **) &l->v, l->n, sizeof(*l->v)))
                return -ENOMEM;
        struct farm_cmp_entry *e = &l->v[l->n];
        *e = (struct farm_cmp_entry){ .scenario = strdup(scenario) };
        if (!e->scenario)
                return -ENOMEM;
        snprintf(e->machine, sizeof(e->machine), "%s", m->machine);
        return (int) (l->n++ - m->first);
}

static int cmp_row(void *userdata, const struct day_ref *ref, const char *scenario, int64_t cpu,
                   uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                   uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns, uint64_t violations,
                   const char **why) {
        struct cmp_machine *m = userdata;
        (void) cpu;
        int si = cmp_scenario(m, scenario);
        if (si < 0)
                return si;
        int r = farm_merge_set_add(m->set, (uint64_t) si * 2 + (uint64_t) ref->side, limit_us, blob,
                                   len, samples, min_ns, max_ns, max_time_ns, violations, why);
        return r < 0 ? r : 0;
}

static int cmp_key_done(void *userdata, uint64_t key, struct farm_acc *c) {
        struct cmp_machine *m = userdata;
        struct farm_cmp_side *x = &m->list->v[m->first + key / 2].side[key % 2];
        struct farm_percentiles p;
        farm_percentiles(&c->h, c->min_ns, c->max_ns, &p);
        *x = (struct farm_cmp_side){ .used = c->used,
                                     .worst_ns = c->max_ns,
                                     .p99_9_ns = p.p99_9_ns,
                                     .samples = c->samples,
                                     .violations = c->violations };
        return 0;
}

/* By machine, then run and day: a run's days next to each other are read together. */
static int ref_by_machine(const void *x, const void *y) {
        const struct day_ref *a = x, *b = y;
        int c = strcmp(a->machine, b->machine);
        if (c)
                return c;
        if (a->run != b->run)
                return a->run < b->run ? -1 : 1;
        return (a->day > b->day) - (a->day < b->day);
}

static int entry_order(const void *x, const void *y) {
        const struct farm_cmp_entry *a = x, *b = y;
        int c = strcmp(a->machine, b->machine);
        return c ? c : strcmp(a->scenario, b->scenario);
}

/* The entries of refs (sorted by machine here): one machine at a time, in as many passes over
 * its days as its scenarios' histograms take within the merge budget. */
static int cmp_merge(farm_db *db, struct day_refs *refs, int64_t to, struct cmp_list *list,
                     char *err) {
        if (refs->n > 1)
                qsort(refs->v, refs->n, sizeof(*refs->v), ref_by_machine);
        int r = 0;
        for (size_t i = 0, j; r >= 0 && i < refs->n; i = j) {
                for (j = i; j < refs->n && strcmp(refs->v[j].machine, refs->v[i].machine) == 0;)
                        j++;
                struct day_refs mine = { .v = refs->v + i, .n = j - i };
                struct cmp_machine m = { .list = list,
                                         .first = list->n,
                                         .machine = refs->v[i].machine };
                r = farm_merge_set_new(FARM_MERGE_BUDGET_BYTES, false, &m.set);
                while (r >= 0) {
                        r = day_refs_read(db, &mine, INT64_MIN, to, NULL, -1, NULL, cmp_row, &m,
                                          err);
                        if (r >= 0)
                                r = farm_merge_set_finish(m.set, cmp_key_done, &m);
                        if (r <= 0)
                                break;
                }
                farm_merge_set_free(m.set);
        }
        if (r >= 0 && list->n > 1)
                qsort(list->v, list->n, sizeof(*list->v), entry_order);
        return r;
}

/* Whether runs of the kernel are stored; reader lock held. */
static int kernel_known(sql_conn *c, const char *release, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT 1 FROM runs WHERE release = ? LIMIT 1", &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, release);
        int rc = sql_step(st);
        if (rc != SQL_ROW && rc != SQL_DONE)
                return farm_fail(c, rc, "cannot look up the kernel", err);
        return rc == SQL_ROW;
}

/* The runs and days of both kernels (the same days twice for a kernel compared with itself),
 * or -ENOENT when one of them has no runs. */
static int compare_refs(farm_db *db, const char *release, const char *with, int64_t now,
                        struct day_refs *refs, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        int r, rc;
        for (int side = 0; side < 2; side++) {
                const char *k = side ? with : release;
                if ((r = kernel_known(c, k, err)) < 0)
                        return r;
                if (r == 0) {
                        if (side)
                                snprintf(err, FARM_ERROR_MAX, "with=%.256s: no such kernel", k);
                        else
                                snprintf(err, FARM_ERROR_MAX, "no such kernel: %.256s", k);
                        return -ENOENT;
                }
        }
        r = farm_prepare(c,
                         "SELECT d.run, d.day, r.machine_id "
                         "FROM runs r JOIN run_days d ON d.run = r.id "
                         "WHERE r.release = ?",
                         &st, err);
        if (r < 0)
                return r;
        int64_t today = farm_step_floor(now, FARM_DAY_NS) / FARM_DAY_NS;
        for (int side = 0; side < 2; side++) {
                sql_reset(st);
                sql_bind_text(st, 1, side ? with : release);
                while ((rc = sql_step(st)) == SQL_ROW) {
                        struct day_ref x = { .run = sql_column_int64(st, 0),
                                             .day = sql_column_int64(st, 1),
                                             .all_cpus = true,
                                             .side = side };
                        x.whole = x.day < today;
                        snprintf(x.machine, sizeof(x.machine), "%s", sql_column_text(st, 2) ?: "");
                        if (day_refs_add(refs, &x) < 0) {
                                snprintf(err, FARM_ERROR_MAX, "out of memory");
                                return -ENOMEM;
                        }
                }
                if (rc != SQL_DONE)
                        return farm_fail(c, rc, "cannot list the days", err);
                if (strcmp(release, with) == 0) {
                        /* A kernel compared with itself: the same days on both sides. */
                        size_t n = refs->n;
                        for (size_t i = 0; i < n && day_refs_add(refs, &refs->v[i]) >= 0; i++)
                                refs->v[refs->n - 1].side = 1;
                        break;
                }
        }
        return 0;
}

/* Keeps of each side's days its newest `days` (the days of both sides counted apart), and
 * tells the days kept in ret. */
static void keep_newest_days(struct day_refs *refs, uint32_t days, struct farm_comparison *ret) {
        int64_t newest[2] = { INT64_MIN, INT64_MIN };
        for (size_t i = 0; i < refs->n; i++)
                newest[refs->v[i].side] = MAX(newest[refs->v[i].side], refs->v[i].day);
        size_t n = 0;
        for (size_t i = 0; i < refs->n; i++)
                if (refs->v[i].day > newest[refs->v[i].side] - (int64_t) days)
                        refs->v[n++] = refs->v[i];
        refs->n = n;
        ret->days = days;
        for (int side = 0; side < 2; side++) {
                bool any = newest[side] != INT64_MIN;
                ret->from_ns[side] = any ? (newest[side] - (int64_t) days + 1) * FARM_DAY_NS
                                         : INT64_MIN;
                ret->to_ns[side] = any ? (newest[side] + 1) * FARM_DAY_NS : INT64_MIN;
        }
}

static void cmp_list_free(struct cmp_list *list) {
        for (size_t i = 0; i < list->n; i++)
                free(list->v[i].scenario);
        free(list->v);
        *list = (struct cmp_list){};
}

void farm_comparison_done(struct farm_comparison *c) {
        struct cmp_list list = { .v = c->v, .n = c->n };
        cmp_list_free(&list);
        farm_inventory_differences_free(c->diff, c->ndiff);
        for (int side = 0; side < 2; side++)
                farm_machine_inventories_free(c->inv[side], c->ninv[side]);
        *c = (struct farm_comparison){};
}

/* How far a run's start may be stamped after its arrival and still order the runs (the
 * default ClockTolerance=: the comparison is asked without the rule). */
#define RUN_ORDER_TOLERANCE_NS ((int64_t) 120 * 1000000000)

/* Each machine's inventory for both kernels, and where they differ. */
static int compare_inventories(farm_db *db, const char *release, const char *with, int64_t now,
                               struct farm_comparison *ret, char *err) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        int r = 0;
        for (int side = 0; r >= 0 && side < 2; side++)
                r = farm_inventories_of_release(c, side ? with : release, now, INT64_MAX,
                                                RUN_ORDER_TOLERANCE_NS, &ret->inv[side],
                                                &ret->ninv[side], err);
        if (r >= 0 && farm_inventory_differences(ret->inv[0], ret->ninv[0], ret->inv[1],
                                                 ret->ninv[1], &ret->diff, &ret->ndiff) < 0) {
                snprintf(err, FARM_ERROR_MAX, "out of memory comparing inventories");
                r = -ENOMEM;
        }
        return r;
}

int farm_kernel_compare(farm_db *db, const char *release, const char *with,
                        uint64_t tolerance_percent, uint64_t min_difference_ns, uint32_t days,
                        int64_t now, struct farm_comparison *ret, char err[static FARM_ERROR_MAX]) {
        struct day_refs refs = {};
        struct cmp_list list = {};
        *ret = (struct farm_comparison){};
        int r = compare_refs(db, release, with, now, &refs, err);
        if (r >= 0 && days > 0)
                keep_newest_days(&refs, days, ret);
        if (r >= 0) {
                r = cmp_merge(db, &refs, INT64_MAX, &list, err);
                if (r == -ENOMEM)
                        snprintf(err, FARM_ERROR_MAX, "out of memory comparing kernels");
        }
        free(refs.v);
        if (r < 0) {
                cmp_list_free(&list);
                return r;
        }
        for (size_t i = 0; i < list.n; i++) {
                struct farm_cmp_entry *e = &list.v[i];
                const struct farm_cmp_side *k = &e->side[0], *w = &e->side[1];
                if (k->used && w->used) {
                        e->regression = farm_worse(k->p99_9_ns, w->p99_9_ns, tolerance_percent,
                                                   min_difference_ns) ||
                                        farm_worse(k->worst_ns, w->worst_ns, tolerance_percent,
                                                   min_difference_ns);
                        ret->in_both++;
                        ret->regressions += e->regression;
                } else
                        ret->only[k->used ? 0 : 1]++;
        }
        ret->v = list.v;
        ret->n = list.n;
        if ((r = compare_inventories(db, release, with, now, ret, err)) < 0) {
                farm_comparison_done(ret);
                return r;
        }
        snprintf(ret->rule, sizeof(ret->rule),
                 "regression when the kernel's p99.9 or worst case exceeds the other's by more "
                 "than %" PRIu64 " %% of it and by more than %" PRIu64 " ns",
                 tolerance_percent, min_difference_ns);
        return 0;
}

/* ---- the statistics of a release, for the verdict's regressions ------------------------ */

int farm_release_stats(farm_db *db, const char *release, const char *const *machines,
                       size_t nmachines, int64_t to_ns, int64_t known_ns,
                       struct farm_release_stat **ret, size_t *ret_n, char *err) {
        struct day_refs refs = {};
        struct cmp_list list = {};
        int r = 0, rc;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                _cleanup_reset_ sql_stmt *st = NULL;
                r = farm_prepare(c,
                                 "SELECT d.run, d.day, r.machine_id, d.last_end_ns, "
                                 "d.max_received_ns FROM runs r "
                                 "JOIN run_days d ON d.run = r.id "
                                 "WHERE r.release = ?1 AND d.first_start_ns < ?2",
                                 &st, err);
                if (r < 0)
                        return r;
                sql_bind_text(st, 1, release);
                sql_bind_int64(st, 2, to_ns);
                while (r >= 0 && (rc = sql_step(st)) == SQL_ROW) {
                        const char *m = sql_column_text(st, 2) ?: "";
                        bool wanted = !machines;
                        for (size_t i = 0; !wanted && i < nmachines; i++)
                                wanted = strcmp(machines[i], m) == 0;
                        if (!wanted)
                                continue;
                        struct day_ref x = { .run = sql_column_int64(st, 0),
                                             .day = sql_column_int64(st, 1),
                                             .all_cpus = true,
                                             .known_ns = known_ns };
                        /* Whole: the day ended by to_ns, and all of it was received by known_ns. */
                        x.whole = (x.day + 1) * FARM_DAY_NS <= to_ns &&
                                  sql_column_int64(st, 3) <= to_ns &&
                                  sql_column_int64(st, 4) <= known_ns;
                        snprintf(x.machine, sizeof(x.machine), "%s", m);
                        r = day_refs_add(&refs, &x);
                }
                if (r >= 0 && rc != SQL_DONE)
                        r = farm_fail(c, rc, "cannot list the days", err);
        }
        if (r >= 0)
                r = cmp_merge(db, &refs, to_ns, &list, err);
        free(refs.v);
        struct farm_release_stat *out = NULL;
        size_t n = 0;
        if (r >= 0 && list.n && !(out = calloc(list.n, sizeof(*out))))
                r = -ENOMEM;
        for (size_t i = 0; i < list.n; i++) {
                const struct farm_cmp_entry *e = &list.v[i];
                if (r >= 0 && e->side[0].used) {
                        struct farm_release_stat *o = &out[n++];
                        snprintf(o->machine, sizeof(o->machine), "%s", e->machine);
                        snprintf(o->scenario, sizeof(o->scenario), "%s", e->scenario);
                        o->worst_ns = e->side[0].worst_ns;
                        o->p99_9_ns = e->side[0].p99_9_ns;
                        o->samples = e->side[0].samples;
                }
                free(e->scenario);
        }
        free(list.v);
        if (r < 0) {
                free(out);
                return r;
        }
        *ret = out;
        *ret_n = n;
        return 0;
}
