/* SPDX-License-Identifier: MIT */
/* What the notifier watches: the problems, verdicts and latest stable releases of the
 * verdict log's passes (its hooks), and, every Check=, the gating machines' silences and the
 * waivers granted or withdrawn.  Each notification is made inside the write transaction that
 * records it as told, so that server instances sharing a database tell it once. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "notify-internal.h"
#include "verdict.h"
#include "timeutil.h"

#define PRUNE_EVERY_NS (3600 * (int64_t) NSEC_PER_SEC)
#define REASONS_KEPT 12

/* ---- the problems already seen ---- */

static uint64_t hash_id(const char *s) {
        uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 0x100000001b3u;
        return h ?: 1;
}

static bool seen_has(const struct seen_set *s, uint64_t h) {
        for (size_t i = s->cap ? h % s->cap : 0; s->cap && s->slots[i]; i = (i + 1) % s->cap)
                if (s->slots[i] == h)
                        return true;
        return false;
}

static void seen_add(struct seen_set *s, uint64_t h) {
        if ((s->n + 1) * 2 > s->cap) {
                size_t cap = s->cap ? s->cap * 2 : 4096;
                uint64_t *slots = calloc(cap, sizeof(*slots));
                if (!slots)
                        return; /* only a cache: the database knows */
                for (size_t i = 0; i < s->cap; i++)
                        if (s->slots[i]) {
                                size_t k = s->slots[i] % cap;
                                while (slots[k])
                                        k = (k + 1) % cap;
                                slots[k] = s->slots[i];
                        }
                free(s->slots);
                s->slots = slots;
                s->cap = cap;
        }
        size_t i = h % s->cap;
        while (s->slots[i] && s->slots[i] != h)
                i = (i + 1) % s->cap;
        if (!s->slots[i]) {
                s->slots[i] = h;
                s->n++;
        }
}

/* ---- the verdict log's hooks ---- */

static void items_clear(struct farm_notifier *n) {
        for (size_t i = 0; i < n->nitems; i++) {
                struct pitem *p = &n->items[i];
                free(p->id);
                free(p->machine);
                free(p->hostname);
                free(p->message);
                free(p->culprit);
        }
        free(n->items);
        n->items = NULL;
        n->nitems = 0;
        free(n->release);
        n->release = NULL;
}

/* Whether the first pass (which only learns what there is) is done. */
static int baseline_done(struct farm_notifier *n) {
        char err[FARM_ERROR_MAX] = "", *v = NULL;
        if (n->baseline < 0) {
                int r = notify_state_read(n->db, "baseline", &v, err);
                free(v);
                if (r < 0)
                        return r;
                n->baseline = r;
        }
        return n->baseline;
}

static char *dup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

static void hook_problem(void *userdata, const char *release, const struct farm_problem *p) {
        struct farm_notifier *n = userdata;
        char err[FARM_ERROR_MAX] = "";
        const char *id = p->id;
        int kind = notify_kind_from_name(farm_problem_kind_name(p->kind));
        if (kind < NK_VIOLATION || kind > NK_OVERLAP)
                return; /* silences are told by the checker; release-wide problems by verdicts */
        if (!n->release || strcmp(n->release, release) != 0) {
                items_clear(n);
                if (!(n->release = strdup(release)))
                        return;
        }
        uint64_t h = hash_id(id);
        if (seen_has(&n->seen, h))
                return;
        int r = notify_store_seen_has(n->db, id, err);
        if (r != 0) {
                if (r > 0)
                        seen_add(&n->seen, h);
                return; /* an error: the next pass finds it again */
        }
        struct pitem *x = realloc(n->items, (n->nitems + 1) * sizeof(*x));
        if (!x)
                return;
        n->items = x;
        const char *culprit = p->kind == FARM_PROBLEM_VIOLATION ? p->violation.culprit : NULL;
        x[n->nitems++] = (struct pitem){ .kind = kind,
                                         .id = strdup(id),
                                         .machine = strdup(p->machine),
                                         .hostname = dup_or_null(p->hostname),
                                         .message = dup_or_null(p->message),
                                         .culprit = dup_or_null(culprit),
                                         .time_ns = p->time_ns,
                                         .end_ns = p->has_end ? p->end_ns : p->time_ns };
}

static int cmp_items(const void *a, const void *b) {
        const struct pitem *x = a, *y = b;
        int c = x->kind - y->kind;
        if (!c)
                c = strcmp(x->machine, y->machine);
        if (!c)
                c = x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
        return c ? c : strcmp(x->id, y->id);
}

struct problems_args {
        struct farm_notifier *n;
        const struct farm_verdict *verdict;
        int64_t now;
        bool announce;
        size_t added; /* problems announced */
};

static json_t *item_json(const struct pitem *p) {
        char t[TIMESTAMP_MAX_LEN];
        return json_pack("{s:s, s:s, s:I, s:s?, s:s?}", "id", p->id, "time",
                         format_timestamp_utc(t, p->time_ns), "time_ns", (json_int_t) p->time_ns,
                         "message", p->message, "culprit", p->culprit);
}

/* The machine's page around the problems, with them highlighted. */
static void machine_path(char *buf, size_t size, const char *machine, int64_t from, int64_t to) {
        int64_t hour = 3600 * (int64_t) NSEC_PER_SEC;
        snprintf(buf, size,
                 "/machines/%s?from=%" PRId64 "&to=%" PRId64 "&hl_from=%" PRId64 "&hl_to=%" PRId64,
                 machine, from - hour, MAX(to, from + 1) + hour, from, MAX(to, from + 1));
}

/* Adds items [a, b) (new problems of one machine and kind) to the notification collecting
 * them, or makes one: due after GroupWait=, and not before GroupInterval= after the last. */
static int group_add(sql_conn *c, struct problems_args *a, const struct pitem *v, size_t from,
                     size_t to, char *err) {
        struct farm_notifier *n = a->n;
        const char *release = a->verdict->release;
        char grp[NOTIFY_KEY_MAX], key[NOTIFY_KEY_MAX], path[256];
        snprintf(grp, sizeof(grp), "%s:%s:%s", notify_kind_names[v[from].kind], v[from].machine,
                 release);
        int64_t id = 0, last_due, first = v[from].time_ns, last = v[to - 1].end_ns;
        uint64_t count = 0;
        json_t *detail = NULL;
        int r = notify_store_open_group(c, grp, a->now, &id, &count, &detail, &last_due, err);
        if (r < 0)
                return r;
        if (r == 0 && !(detail = json_pack("{s:[], s:I}", "items", "first_ns", (json_int_t) first)))
                return -ENOMEM;
        json_t *items = json_object_get(detail, "items");
        for (size_t i = from; i < to; i++)
                if (json_array_size(items) < NOTIFY_ITEMS_KEPT)
                        json_array_append_new(items, item_json(&v[i]));
        first = MIN(first, json_integer_value(json_object_get(detail, "first_ns")) ?: first);
        json_object_set_new(detail, "first_ns", json_integer(first));
        machine_path(path, sizeof(path), v[from].machine, first, last);
        count += to - from;
        if (r > 0)
                r = notify_store_group_update(c, id, count, last, detail, path, err);
        else {
                snprintf(key, sizeof(key), "%s:%s", grp, v[from].id);
                struct notify_new nn = { .key = key,
                                         .kind = v[from].kind,
                                         .status = "firing",
                                         .machine_id = v[from].machine,
                                         .hostname = v[from].hostname,
                                         .release = release,
                                         .series = a->verdict->series,
                                         .groups = a->verdict->group,
                                         .grp = grp,
                                         .event_ns = first,
                                         .count = count,
                                         .path = path,
                                         .detail = detail };
                int64_t due = a->now + (int64_t) n->cfg->group_wait_ns;
                if (last_due != INT64_MIN)
                        due = MAX(due, last_due + (int64_t) n->cfg->group_interval_ns);
                r = notify_make(n, c, &nn, a->now, due, err);
        }
        json_decref(detail);
        return r;
}

/* In one transaction: each new problem recorded as seen and, after the first pass, added to
 * the notification of its machine and kind. */
static int problems_in(sql_conn *c, void *userdata, char *err) {
        struct problems_args *a = userdata;
        struct farm_notifier *n = a->n;
        struct pitem *v = n->items;
        int r = 0;
        for (size_t i = 0; r >= 0 && i < n->nitems;) {
                size_t j = i, start = i, k = i; /* the new ones move to the group's front */
                while (j < n->nitems && v[j].kind == v[i].kind &&
                       strcmp(v[j].machine, v[i].machine) == 0)
                        j++;
                for (size_t x = i; r >= 0 && x < j; x++) {
                        r = notify_store_seen_add(c, v[x].id, a->verdict->release, a->now, err);
                        if (r > 0) {
                                struct pitem t = v[k];
                                v[k++] = v[x];
                                v[x] = t;
                        }
                }
                if (r >= 0 && a->announce && k > start)
                        r = group_add(c, a, v, start, k, err);
                a->added += k - start;
                i = j;
        }
        return r;
}

static void tell_problems(struct farm_notifier *n, const struct farm_verdict *verdict, int64_t now,
                          bool announce) {
        char err[FARM_ERROR_MAX] = "";
        if (!n->release || n->nitems == 0 || strcmp(n->release, verdict->release) != 0)
                return;
        qsort(n->items, n->nitems, sizeof(*n->items), cmp_items);
        struct problems_args a = { n, verdict, now, announce, 0 };
        int r = notify_store_write(n->db, problems_in, &a, err);
        notify_failed(n->db, &n->failing, r, "cannot record problems", err);
        if (r >= 0)
                for (size_t i = 0; i < n->nitems; i++)
                        seen_add(&n->seen, hash_id(n->items[i].id));
        if (r >= 0 && announce && a.added > 0)
                log_info("Notifications: %zu new problem(s) of %s", a.added, n->release);
}

struct verdict_args {
        struct farm_notifier *n;
        const struct farm_verdict *v;
        const char *prev;
        int64_t prev_id, now;
};

/* The verdict's counts of problems by kind, as the notification records them. */
static json_t *counts_json(const struct farm_verdict *v) {
        json_t *o = json_object();
        for (int k = 0; o && k < FARM_PROBLEM_NKINDS; k++)
                if (json_object_set_new(o, farm_problem_kind_name(k),
                                        json_integer((json_int_t) v->problem_counts[k])) < 0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

static int verdict_in(sql_conn *c, void *userdata, char *err) {
        struct verdict_args *a = userdata;
        const char *release = a->v->release, *status = farm_verdict_status_name(a->v->status);
        char key[NOTIFY_KEY_MAX];
        json_auto_t *kept = json_array();
        for (size_t i = 0; kept && i < MIN(a->v->nreasons, (size_t) REASONS_KEPT); i++)
                json_array_append_new(kept, json_string(a->v->reasons[i]));
        json_auto_t *detail =
                json_pack("{s:s?, s:s, s:I, s:o, s:I, s:O, s:I}", "from", a->prev, "to", status,
                          "problems_total", (json_int_t) a->v->problems_total, "problem_counts",
                          counts_json(a->v), "missing", (json_int_t) a->v->nmissing, "reasons",
                          kept, "reasons_total", (json_int_t) a->v->nreasons);
        _cleanup_free_ char *path = notify_kernel_path(release);
        if (!detail || !path)
                return -ENOMEM;
        snprintf(key, sizeof(key), "verdict:%s:%" PRId64 ":%s", release, a->prev_id, status);
        struct notify_new nn = { .key = key,
                                 .kind = NK_VERDICT,
                                 .status = "changed",
                                 .release = release,
                                 .series = a->v->series,
                                 .groups = a->v->group,
                                 .event_ns = a->now,
                                 .path = path,
                                 .detail = detail };
        return notify_make(a->n, c, &nn, a->now, a->now, err);
}

static void hook_judged(void *userdata, const struct farm_verdict *v, const char *prev,
                        int64_t prev_id, bool changed, bool late, int64_t now) {
        struct farm_notifier *n = userdata;
        char err[FARM_ERROR_MAX] = "";
        int base = baseline_done(n);
        if (base < 0) {
                items_clear(n);
                return;
        }
        tell_problems(n, v, now, base > 0);
        items_clear(n);
        /* A release seen for the first time is pending: that is no change to tell.  The first
         * pass tells only a change that data received since the notifier started made (the
         * next pass would find that change logged already). */
        if (!changed || (!base && !late) || (!prev && v->status == FARM_VERDICT_PENDING))
                return;
        struct verdict_args a = { n, v, prev, prev_id, now };
        int r = notify_store_write(n->db, verdict_in, &a, err);
        notify_failed(n->db, &n->failing, r, "cannot record a verdict's change", err);
}

struct stable_args {
        struct farm_notifier *n;
        const char *series, *to, *from; /* from: as told before, NULL for none */
        const char *group;              /* that judges the series */
        int64_t log_id, now;
        bool announce;
};

/* The gating group that judges a release's series now (from its verdict). */
static char *group_of(struct farm_notifier *n, const char *release, int64_t now) {
        char err[FARM_ERROR_MAX];
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        if (!release || farm_verdict(n->db, n->rule, release, now, &v, err) < 0)
                return strdup("");
        return strdup(v->group);
}

static int stable_in(sql_conn *c, void *userdata, char *err) {
        struct stable_args *a = userdata;
        char key[NOTIFY_KEY_MAX], *from = NULL;
        snprintf(key, sizeof(key), "stable:%s", a->series);
        int r = notify_state_get(c, key, &from, err);
        _cleanup_free_ char *was = from;
        /* Told by another instance meanwhile, or nothing to tell. */
        if (r < 0 || strcmp(was ?: "", a->from ?: "") != 0 || (r == 0 && !a->to))
                return r < 0 ? r : 0;
        if ((r = notify_state_set(c, key, a->to ?: "", a->now, err)) < 0 || !a->announce)
                return r;
        const char *old = a->from;
        _cleanup_free_ char *path = a->to ? notify_kernel_path(a->to) : strdup("/");
        json_auto_t *detail = json_pack("{s:s?, s:s?}", "from", old, "to", a->to);
        if (!path || !detail)
                return -ENOMEM;
        snprintf(key, sizeof(key), "latest_stable:%s:%s:%s:%" PRId64, a->series, old ?: "",
                 a->to ?: "", a->log_id);
        struct notify_new nn = { .key = key,
                                 .kind = NK_LATEST_STABLE,
                                 .status = "changed",
                                 .release = a->to ?: old,
                                 .series = a->series,
                                 .groups = a->group,
                                 .event_ns = a->now,
                                 .path = path,
                                 .detail = detail };
        return notify_make(a->n, c, &nn, a->now, a->now, err);
}

static int set_baseline(sql_conn *c, void *userdata, char *err) {
        char now[32];
        snprintf(now, sizeof(now), "%" PRId64, *(int64_t *) userdata);
        return notify_state_set(c, "baseline", now, *(int64_t *) userdata, err);
}

static void hook_pass_done(void *userdata, int64_t now) {
        struct farm_notifier *n = userdata;
        char err[FARM_ERROR_MAX] = "";
        json_t *best = NULL, *rel;
        const char *series;
        int64_t log_id = 0;
        int base = baseline_done(n);
        int r = base < 0 ? base : notify_store_latest_stable(n->db, &best, &log_id, err);
        json_object_foreach (best, series, rel) {
                char key[NOTIFY_KEY_MAX], *told = NULL;
                const char *to = json_string_value(rel);
                snprintf(key, sizeof(key), "stable:%s", series);
                if (r < 0 || (r = notify_state_read(n->db, key, &told, err)) < 0 ||
                    strcmp(told ?: "", to ?: "") == 0) {
                        free(told);
                        continue;
                }
                const char *from = told && *told ? told : NULL;
                _cleanup_free_ char *group = base > 0 ? group_of(n, to ?: from, now) : NULL;
                struct stable_args a = { n, series, to, from, group ?: "", log_id, now, base > 0 };
                r = notify_store_write(n->db, stable_in, &a, err);
                free(told);
        }
        json_decref(best);
        if (r >= 0 && base == 0 && (r = notify_store_write(n->db, set_baseline, &now, err)) >= 0) {
                n->baseline = 1;
                log_info("Notifications: the first pass of the verdict log is done; problems, "
                         "verdicts and latest stable releases are told from now on");
        }
        notify_failed(n->db, &n->failing, r, "cannot record the latest stable releases", err);
        notify_wake(n);
}

/* ---- silences ---- */

struct silence_args {
        struct farm_notifier *n;
        const struct notify_machine *m;
        int64_t since, now;
        bool ended;    /* tell the end (the machine reported again, or no longer gates) */
        int64_t until; /* of the silence that ended */
        const char *why;
};

static int silence_in(sql_conn *c, void *userdata, char *err) {
        struct silence_args *a = userdata;
        const struct notify_machine *m = a->m;
        char state[NOTIFY_KEY_MAX], key[NOTIFY_KEY_MAX], since[32], path[64], *cur = NULL;
        snprintf(state, sizeof(state), "silent:%s", m->id);
        int r = notify_state_get(c, state, &cur, err);
        _cleanup_free_ char *told = cur;
        if (r < 0 || (a->ended ? r == 0 || strtoll(told, NULL, 10) != a->since : r > 0))
                return r < 0 ? r : 0; /* another instance told it, or nothing to tell */
        snprintf(since, sizeof(since), "%" PRId64, a->since);
        snprintf(key, sizeof(key), "silence%s:%s:%s", a->ended ? "_end" : "", m->id, since);
        snprintf(path, sizeof(path), "/machines/%s", m->id);
        json_auto_t *detail =
                a->ended
                        ? json_pack("{s:I, s:I, s:s}", "since_ns", (json_int_t) a->since,
                                    "until_ns", (json_int_t) a->until, "why", a->why)
                        : json_pack("{s:I, s:I, s:I, s:o, s:b}", "since_ns", (json_int_t) a->since,
                                    "detected_ns", (json_int_t) a->now, "max_gap_ns",
                                    (json_int_t) a->n->rule->max_gap_ns, "last_report_ns",
                                    m->last_report_ns != INT64_MIN ? json_integer(m->last_report_ns)
                                                                   : json_null(),
                                    "never_reported", m->last_report_ns == INT64_MIN);
        if (!detail)
                return -ENOMEM;
        struct notify_new nn = { .key = key,
                                 .kind = NK_SILENCE,
                                 .status = a->ended ? "resolved" : "firing",
                                 .machine_id = m->id,
                                 .hostname = *m->hostname ? m->hostname : NULL,
                                 .groups = m->groups,
                                 .event_ns = a->ended ? a->until : a->since,
                                 .path = path,
                                 .detail = detail };
        if ((r = notify_make(a->n, c, &nn, a->now, a->now, err)) < 0)
                return r;
        return a->ended ? notify_state_del(c, state, err)
                        : notify_state_set(c, state, since, a->now, err);
}

/* Since when the machine is silent: its last report (or its enrolment), or the end of a
 * maintenance window after it. */
static int64_t silent_since(const struct notify_machine *m) {
        int64_t t = m->last_report_ns != INT64_MIN ? m->last_report_ns : m->enrolled_ns;
        return MAX(t, m->quiet_until_ns);
}

static int check_machine(struct farm_notifier *n, const struct notify_machine *m, const char *told,
                         int64_t now, char *err) {
        struct silence_args a = { .n = n, .m = m, .now = now };
        if (told) {
                a.since = strtoll(told, NULL, 10);
                if (m->last_report_ns == INT64_MIN || m->last_report_ns <= a.since)
                        return 0; /* still silent */
                a.ended = true;
                a.why = "reported";
                a.until = m->last_report_ns;
        } else {
                a.since = silent_since(m);
                if (m->in_window || now - a.since <= (int64_t) n->rule->max_gap_ns)
                        return 0;
        }
        return notify_store_write(n->db, silence_in, &a, err);
}

static void check_silences(struct farm_notifier *n, int64_t now) {
        char err[FARM_ERROR_MAX] = "", key[64];
        struct notify_machine *ms = NULL;
        size_t nm = 0;
        json_t *told = NULL, *v;
        const char *k;
        int r = notify_store_gating_machines(n->db, now, &ms, &nm, err);
        if (r >= 0)
                r = notify_state_list(n->db, "silent:", &told, err);
        for (size_t i = 0; r >= 0 && i < nm; i++) {
                snprintf(key, sizeof(key), "silent:%s", ms[i].id);
                r = check_machine(n, &ms[i], json_string_value(json_object_get(told, key)), now,
                                  err);
                json_object_del(told, key);
        }
        /* What is left was told of machines that no longer gate: their silence ends. */
        json_object_foreach (told, k, v) {
                struct notify_machine m;
                if (r < 0 || notify_store_machine(n->db, k + strlen("silent:"), &m, err) < 0)
                        continue;
                struct silence_args a = { n,        &m,   strtoll(json_string_value(v), NULL, 10),
                                          now,      true, now,
                                          "ungated" };
                r = notify_store_write(n->db, silence_in, &a, err);
                free(m.hostname);
                free(m.groups);
        }
        json_decref(told);
        notify_machines_free(ms, nm);
        notify_failed(n->db, &n->check_failing, r, "cannot check for silent machines", err);
}

/* ---- waivers ---- */

struct waiver_args {
        struct farm_notifier *n;
        const struct notify_audit *w;
        const struct farm_verdict *verdict; /* of the release now, or NULL */
        int64_t now;
};

static int waiver_in(sql_conn *c, void *userdata, char *err) {
        struct waiver_args *a = userdata;
        const struct notify_audit *w = a->w;
        char key[64], id[32], *cur = NULL;
        int r = notify_state_get(c, "audit", &cur, err);
        int64_t cursor = r > 0 ? strtoll(cur, NULL, 10) : 0;
        free(cur);
        if (r < 0 || cursor >= w->id)
                return r < 0 ? r : 0;
        bool granted = strcmp(w->action, "waive") == 0;
        _cleanup_free_ char *path = notify_kernel_path(w->release);
        json_auto_t *detail =
                json_pack("{s:I, s:s, s:s, s:s, s:s?}", "waiver", (json_int_t) w->waiver, "problem",
                          w->problem, "reason", w->detail, "by", w->who, "verdict",
                          a->verdict ? farm_verdict_status_name(a->verdict->status) : NULL);
        if (!path || !detail)
                return -ENOMEM;
        snprintf(key, sizeof(key), "waiver:%" PRId64, w->id);
        struct notify_new nn = { .key = key,
                                 .kind = NK_WAIVER,
                                 .status = granted ? "granted" : "withdrawn",
                                 .release = w->release,
                                 .series = a->verdict ? a->verdict->series : NULL,
                                 .groups = a->verdict ? a->verdict->group : "",
                                 .event_ns = w->time_ns,
                                 .path = path,
                                 .detail = detail };
        snprintf(id, sizeof(id), "%" PRId64, w->id);
        if ((r = notify_make(a->n, c, &nn, a->now, a->now, err)) < 0)
                return r;
        return notify_state_set(c, "audit", id, a->now, err);
}

static int start_audit(sql_conn *c, void *userdata, char *err) {
        char *cur = NULL, v[32];
        int r = notify_state_get(c, "audit", &cur, err);
        free(cur);
        if (r != 0)
                return r < 0 ? r : 0;
        snprintf(v, sizeof(v), "%" PRId64, ((int64_t *) userdata)[0]);
        return notify_state_set(c, "audit", v, ((int64_t *) userdata)[1], err);
}

static void check_waivers(struct farm_notifier *n, int64_t now) {
        char err[FARM_ERROR_MAX] = "", *cur = NULL;
        struct notify_audit *v = NULL;
        size_t nv = 0;
        int r = notify_state_read(n->db, "audit", &cur, err);
        if (r == 0) {
                /* The first look: what was done before is not news. */
                int64_t args[2] = { 0, now };
                if ((r = notify_store_audit_last(n->db, &args[0], err)) >= 0)
                        r = notify_store_write(n->db, start_audit, args, err);
        } else if (r > 0)
                r = notify_store_waiver_actions(n->db, strtoll(cur, NULL, 10), &v, &nv, err);
        free(cur);
        for (size_t i = 0; r >= 0 && i < nv; i++) {
                struct farm_verdict *verdict = NULL;
                if (farm_verdict(n->db, n->rule, v[i].release, now, &verdict, err) < 0)
                        verdict = NULL;
                struct waiver_args a = { n, &v[i], verdict, now };
                r = notify_store_write(n->db, waiver_in, &a, err);
                farm_verdict_free(verdict);
        }
        notify_audit_free(v, nv);
        notify_failed(n->db, &n->check_failing, r, "cannot read the waivers", err);
}

void notify_check(struct farm_notifier *n, int64_t now) {
        char err[FARM_ERROR_MAX] = "";
        check_silences(n, now);
        check_waivers(n, now);
        notify_wake(n);
        if (n->cfg->keep_ns && now - n->pruned_ns >= PRUNE_EVERY_NS) {
                int r = notify_store_prune(n->db, now - (int64_t) n->cfg->keep_ns, err);
                if (r > 0)
                        log_info("Notifications: deleted %d older than Keep=", r);
                if (r >= 0)
                        n->pruned_ns = now;
        }
}

/* The first pass on a farm learns the problems of what was received before the notifier
 * started, so that enabling notifications does not send the history; an upload that arrives
 * while that pass runs (a first pass over a large farm takes a while) is told by the next. */
static int64_t hook_problems_known(void *userdata, int64_t now) {
        struct farm_notifier *n = userdata;
        return baseline_done(n) == 0 ? MIN(n->started_ns, now) : now;
}

void notify_watch_init(struct farm_notifier *n, int64_t listening_ns) {
        n->baseline = -1;
        n->started_ns = listening_ns;
        n->hooks = (struct farm_verdict_hooks){ .userdata = n,
                                                .problems_known = hook_problems_known,
                                                .problem = hook_problem,
                                                .judged = hook_judged,
                                                .pass_done = hook_pass_done };
}

void notify_watch_done(struct farm_notifier *n) {
        items_clear(n);
        free(n->seen.slots);
        n->seen = (struct seen_set){};
}
