/* SPDX-License-Identifier: MIT */
/* The histogram query: a machine's histograms of a window merged per CPU (from the per-day
 * cache where it can), for GET .../histogram and the dashboard's histogram plot. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "macro.h"
#include "hist-cache.h"
#include "merge.h"
#include "histogram.h"
#include "query-internal.h"
#include "steps.h"
#include "timeutil.h"

/* A page of the histogram query holds fewer CPUs than asked for rather than more text. */
#define HIST_TEXT_MAX ((size_t) 16 << 20)

/* ---- a merged histogram as JSON text ---- */

/* {"samples", "min_ns", "max_ns", ..., "buckets": [[us, count], ...], "overflow": N,
 * "percentiles": {...}} (with "cpu" first when cpu >= 0), as text: the buckets of a 100 ms range
 * are 100,000 pairs, which as JSON objects took 20 MB per CPU.  Buckets are the exact 1 us ones
 * below limit_us; samples at or above it are counted in "overflow" (their logarithmic buckets,
 * 12.5 % wide, still take part in the percentiles). */
static void acc_text(FILE *f, const struct farm_acc *c, int64_t cpu) {
        struct farm_percentiles p = {};
        char t[TIMESTAMP_MAX_LEN];
        uint64_t overflow = 0;
        uint32_t limit = c->h.counts ? c->h.limit_us : 0;
        bool any = c->samples > 0;
        if (cpu >= 0)
                fprintf(f, "{\"cpu\":%" PRId64 ",", cpu);
        else
                fputc('{', f);
        fprintf(f, "\"samples\":%" PRIu64 ",\"violations\":%" PRIu64 ",\"limit_us\":%" PRIu32,
                c->samples, c->violations, limit);
        if (any)
                fprintf(f,
                        ",\"min_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"max_time_ns\":%" PRId64
                        ",\"max_time\":\"%s\"",
                        c->min_ns, c->max_ns, c->max_time_ns,
                        format_timestamp_utc(t, c->max_time_ns));
        else
                fputs(",\"min_ns\":null,\"max_ns\":null,\"max_time_ns\":null,\"max_time\":null", f);
        fputs(",\"buckets\":[", f);
        bool first = true;
        for (uint32_t i = 0; c->h.counts && i < c->h.nbuckets; i++) {
                if (!c->h.counts[i])
                        continue;
                if (i >= limit) {
                        sat_add(&overflow, c->h.counts[i]);
                        continue;
                }
                /* At most 2^63-1, what JSON readers take (merges saturate at 2^64-1). */
                fprintf(f, "%s[%" PRIu32 ",%" PRIu64 "]", first ? "" : ",", i,
                        MIN(c->h.counts[i], (uint64_t) INT64_MAX));
                first = false;
        }
        fprintf(f, "],\"overflow\":%" PRIu64 ",\"percentiles\":", overflow);
        if (c->h.counts)
                farm_percentiles(&c->h, c->min_ns, c->max_ns, &p);
        if (any)
                fprintf(f,
                        "{\"p50_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 ",\"p99_9_ns\":%" PRIu64
                        ",\"p99_99_ns\":%" PRIu64 "}}",
                        p.p50_ns, p.p99_ns, p.p99_9_ns, p.p99_99_ns);
        else
                fputs("{\"p50_ns\":null,\"p99_ns\":null,\"p99_9_ns\":null,\"p99_99_ns\":null}}", f);
}

/* ---- GET /api/v1/machines/{id}/histogram ------------------------------------------------ */

/* The runs and days of the machine that hold data in [from, to), and which of them are
 * cached; reader lock held. */
static int window_refs(sql_conn *c, const char *id, int64_t from, int64_t to, int64_t now,
                       struct day_refs *refs, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT d.run, d.day, EXISTS (SELECT 1 FROM hist_days h "
                             "WHERE h.run = d.run AND h.day = d.day) "
                             "FROM runs r JOIN run_days d ON d.run = r.id "
                             "WHERE r.machine_id = ?1 AND d.day >= ?2 AND d.day <= ?3",
                             &st, err);
        if (r < 0)
                return r;
        int64_t today = farm_step_floor(now, DAY_NS) / DAY_NS;
        sql_bind_text(st, 1, id);
        sql_bind_int64(st, 2, farm_step_floor(from, DAY_NS) / DAY_NS);
        sql_bind_int64(st, 3, farm_step_floor(to - 1, DAY_NS) / DAY_NS);
        while ((r = sql_step(st)) == SQL_ROW) {
                struct day_ref x = { .run = sql_column_int64(st, 0),
                                     .day = sql_column_int64(st, 1),
                                     .cached = sql_column_int(st, 2) };
                x.whole = x.day < today && x.day * DAY_NS >= from && (x.day + 1) * DAY_NS <= to;
                if (day_refs_add(refs, &x) < 0) {
                        snprintf(err, FARM_ERROR_MAX, "out of memory");
                        return -ENOMEM;
                }
        }
        if (r != SQL_DONE)
                return farm_fail(c, r, "cannot list the days", err);
        return 0;
}

/* The merge of a window's histograms CPU by CPU: the first pass merges every row into all as
 * well, and as many CPUs as the budget holds, the smallest first; later passes read only the
 * CPUs left. */
struct window_merge {
        struct farm_merge_set *set;
        struct farm_acc all;
        bool first_pass;
        bool enough; /* fn needs no more CPUs */
        farm_cpu_hist_fn fn;
        void *userdata;
};

static int window_row(void *userdata, const struct day_ref *ref, const char *scenario, int64_t cpu,
                      uint32_t limit_us, const void *blob, size_t len, uint64_t samples,
                      uint64_t min_ns, uint64_t max_ns, int64_t max_time_ns, uint64_t violations,
                      const char **why) {
        struct window_merge *w = userdata;
        if (cpu < 0 || cpu >= CPU_MAX) {
                *why = "CPU out of range";
                return -EBADMSG;
        }
        int r = 0;
        if (w->first_pass)
                r = farm_acc_add(&w->all, limit_us, blob, len, samples, min_ns, max_ns, max_time_ns,
                                 violations, why);
        if (r >= 0)
                r = farm_merge_set_add(w->set, (uint64_t) cpu, limit_us, blob, len, samples, min_ns,
                                       max_ns, max_time_ns, violations, why);
        return r < 0 ? r : 0;
}

static int window_cpu_done(void *userdata, uint64_t key, struct farm_acc *acc) {
        struct window_merge *w = userdata;
        if (w->enough)
                return 0;
        int r = w->fn(w->userdata, (int64_t) key, acc, &w->all);
        w->enough = r > 0;
        return MIN(r, 0);
}

/* Merges refs' histograms of [from, to) (of one scenario and CPU when given), calling fn for each
 * CPU in ascending order, with all complete, until fn returns 1 (it needs no more); *ret_ncpus:
 * how many CPUs hold data. */
static int window_hists(farm_db *db, const struct day_refs *refs, int64_t from, int64_t to,
                        const char *scenario, int64_t cpu, farm_cpu_hist_fn fn, void *userdata,
                        uint64_t *ret_ncpus, char *err) {
        struct window_merge w = { .first_pass = true, .fn = fn, .userdata = userdata };
        int r = day_refs_fill(db, refs, err);
        if (r >= 0 && (r = farm_merge_set_new(FARM_MERGE_BUDGET_BYTES, true, &w.set)) < 0)
                snprintf(err, FARM_ERROR_MAX, "out of memory");
        /* After the first pass, each reads only the CPUs that the next pass can take (twice
         * as many as the last one merged), not every row left. */
        int64_t range[2] = { 0, CPU_MAX };
        while (r >= 0) {
                r = day_refs_read(db, refs, from, to, scenario, cpu, range, window_row, &w, err);
                if (r >= 0 && w.first_pass && !w.all.used)
                        r = fn(userdata, -1, NULL, &w.all); /* no data at all */
                w.first_pass = false;
                if (r >= 0)
                        r = farm_merge_set_finish(w.set, window_cpu_done, &w);
                /* Every CPU was seen by the first pass (their count is known): once fn has
                 * what it needs, the others are not merged. */
                if (r > 0 && w.enough)
                        r = 0;
                if (r <= 0)
                        break;
                range[0] = (int64_t) farm_merge_set_first_waiting(w.set);
                uint64_t last = farm_merge_set_nth_waiting(
                        w.set, 2 * MAX(farm_merge_set_last_pass(w.set), (size_t) 1));
                range[1] = last == UINT64_MAX ? CPU_MAX : (int64_t) last - 1;
        }
        if (r >= 0 && ret_ncpus)
                *ret_ncpus = farm_merge_set_keys(w.set);
        farm_merge_set_free(w.set);
        farm_acc_done(&w.all);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory merging histograms");
        return r;
}

int farm_machine_hists(farm_db *db, const char *machine_id, int64_t from, int64_t to, int64_t now,
                       farm_cpu_hist_fn fn, void *userdata, char err[static FARM_ERROR_MAX]) {
        struct day_refs refs = {};
        int r;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                r = window_refs(c, machine_id, from, to, now, &refs, err);
        }
        if (r >= 0)
                r = window_hists(db, &refs, from, to, NULL, -1, fn, userdata, NULL, err);
        free(refs.v);
        return r;
}

/* The answer of the histogram query, written as its CPUs are merged. */
struct hist_answer {
        FILE *f;
        const struct farm_page *page;
        uint64_t rank, shown;
        bool cut;   /* the page ended early: the text reached HIST_TEXT_MAX */
        char *all;  /* the text of all, once known */
        size_t len; /* of what f holds */
};

static int hist_answer_cpu(void *userdata, int64_t cpu, const struct farm_acc *acc,
                           const struct farm_acc *all) {
        struct hist_answer *h = userdata;
        if (!h->all) {
                size_t n = 0;
                FILE *f = open_memstream(&h->all, &n);
                if (!f)
                        return -ENOMEM;
                acc_text(f, all, -1);
                if (fclose(f) != 0)
                        return -ENOMEM;
        }
        if (cpu < 0)
                return 0;
        uint64_t rank = h->rank++;
        if (h->cut || rank < h->page->offset || rank >= h->page->offset + h->page->limit)
                return 0;
        if (h->shown > 0)
                fputc(',', h->f);
        acc_text(h->f, acc, cpu);
        h->shown++;
        fflush(h->f);
        /* A page ends early rather than grow past HIST_TEXT_MAX ("next" goes on from there). */
        if (h->len >= HIST_TEXT_MAX)
                h->cut = true;
        if (ferror(h->f))
                return -ENOMEM;
        /* 1 once the page is full: the CPUs after it need not be merged. */
        return h->cut || h->rank >= h->page->offset + h->page->limit;
}

int query_histogram(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                    const char *path, struct farm_answer *a) {
        char perr[FARM_PARAM_ERROR_MAX];
        struct query_machine m;
        struct farm_page page;
        int64_t from, to, cpu;
        const char *scenario = farm_args_get(args, "scenario");
        struct day_refs refs = {};
        int r;

        if (!query_parse_cpu(args, &cpu, a) || (scenario && !query_scenario_ok(scenario, a)) ||
            !query_param_ok(farm_param_page(farm_args_get(args, "limit"),
                                            farm_args_get(args, "offset"), &page, perr),
                            perr, a))
                return 0;
        if (args->unpaged && !farm_args_get(args, "limit"))
                page.limit = CPU_MAX;
        {
                _cleanup_release_ sql_conn *c = farm_reader(db);
                if ((r = query_machine_lookup(c, id, &m, a)) <= 0 ||
                    !query_parse_window(args, now, &m, &from, &to, a))
                        return r;
                r = window_refs(c, id, from, to, now, &refs, a->err);
        }

        /* The CPUs as text straight away, the object around them afterwards (as the steps of
         * the intervals query). */
        struct hist_answer h = { .page = &page };
        char *cpus_text = NULL;
        uint64_t ncpus = 0;
        h.f = r >= 0 ? open_memstream(&cpus_text, &h.len) : NULL;
        if (r >= 0 && !h.f)
                r = -ENOMEM;
        if (r >= 0)
                r = window_hists(db, &refs, from, to, scenario, cpu, hist_answer_cpu, &h, &ncpus,
                                 a->err);
        free(refs.v);
        if (h.f && fclose(h.f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(cpus_text);
                free(h.all);
                if (r == -ENOMEM)
                        snprintf(a->err, sizeof(a->err), "out of memory merging histograms");
                return query_internal(a, r);
        }
        if (h.cut)
                page.limit = h.shown;
        json_t *o = json_object();
        char *head = NULL, *text = NULL;
        const char *marker = "\"cpus\":[]";
        if (!o || query_window_fields(o, id, from, to, cpu, scenario) < 0 ||
            json_object_set_new(o, "all", json_null()) < 0 ||
            json_object_set_new(o, "cpus", json_array()) < 0 ||
            query_add_page(o, path, args, &page, ncpus) < 0 ||
            !(head = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)) || !strstr(head, marker) ||
            !strstr(head, "\"all\":null")) {
                json_decref(o);
                free(head);
                free(cpus_text);
                free(h.all);
                query_json(a, NULL);
                return 0;
        }
        json_decref(o);
        /* Strings in the head are escaped, so the markers can only be the places of the lists. */
        char *at_all = strstr(head, "\"all\":null"), *at_cpus = strstr(head, marker);
        if (asprintf(&text, "%.*s\"all\":%s%.*s\"cpus\":[%s]%s", (int) (at_all - head), head,
                     h.all ?: "null", (int) (at_cpus - at_all - strlen("\"all\":null")),
                     at_all + strlen("\"all\":null"), cpus_text ?: "",
                     at_cpus + strlen(marker)) < 0)
                text = NULL;
        free(head);
        free(cpus_text);
        free(h.all);
        if (!text) {
                query_json(a, NULL);
                return 0;
        }
        a->status = 200;
        a->text = text;
        a->content_type = "application/json";
        return 0;
}
