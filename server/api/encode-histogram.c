/* SPDX-License-Identifier: MIT */
/* The histogram query's answer as JSON: the window as an object, all CPUs merged and a page of
 * CPUs written as text into it while they are merged (a 100 ms range is 100,000 buckets). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer-json.h"
#include "encode-histogram.h"
#include "macro.h"
#include "query-internal.h"
#include "text-stream.h"
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
                FILE *f = text_stream_open(&h->all, &n);
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

void farm_api_histogram(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                        const char *path, struct farm_answer *a) {
        struct farm_histogram_query q;
        if (farm_histogram_ask(db, id, args, now, &q, a) <= 0)
                return;

        /* The CPUs as text straight away, the object around them afterwards (as the steps of
         * the intervals query). */
        struct hist_answer h = { .page = &q.page };
        char *cpus_text = NULL;
        uint64_t ncpus = 0;
        int r = 0;
        h.f = text_stream_open(&cpus_text, &h.len);
        if (!h.f)
                r = -ENOMEM;
        if (r >= 0)
                r = farm_histogram_merge(db, &q, hist_answer_cpu, &h, &ncpus, a->err);
        farm_histogram_query_done(&q);
        if (h.f && fclose(h.f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                free(cpus_text);
                free(h.all);
                if (r == -ENOMEM)
                        snprintf(a->err, sizeof(a->err), "out of memory merging histograms");
                query_internal(a, r);
                return;
        }
        if (h.cut)
                q.page.limit = h.shown;
        json_t *o = json_object();
        if (!o || farm_api_window_fields(o, id, q.from, q.to, q.cpu, q.scenario) < 0 ||
            json_object_set_new(o, "all", json_null()) < 0 ||
            json_object_set_new(o, "cpus", json_null()) < 0 ||
            farm_api_add_page(o, path, args, &q.page, ncpus) < 0)
                farm_api_json(a, NULL);
        else
                farm_api_json_spliced(
                        a, o,
                        (const struct farm_api_splice[]){ { "all", h.all, false },
                                                          { "cpus", cpus_text, true } },
                        2);
        json_decref(o);
        free(cpus_text);
        free(h.all);
}
