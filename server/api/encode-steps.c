/* SPDX-License-Identifier: MIT */
/* The intervals query's answer as JSON: the window and step as an object, and its steps
 * written as text into it (a month at 5-minute steps is 8,640 of them). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer-json.h"
#include "encode-steps.h"
#include "query-internal.h"
#include "text-json.h"
#include "text-stream.h"
#include "timeutil.h"

#define NAMES_MAX FARM_STEP_NAMES_MAX

/* The steps of the page as the text of the elements of "steps": a month at 5-minute steps is
 * 8,640 steps, written as text straight away, since a JSON object per step made allocating
 * and freeing them most of the query's time.  NULL when out of memory. */
static char *steps_text_of(const struct farm_steps *fs, const struct farm_page *page) {
        char *steps_text = NULL;
        size_t steps_len = 0;
        FILE *f = text_stream_open(&steps_text, &steps_len);
        char *scen_json[NAMES_MAX] = {}, *kern_json[NAMES_MAX] = {};
        bool oom = !f;
        for (unsigned i = 0; !oom && i < fs->scenarios.n; i++) {
                json_t *j = fs->scenarios.s[i][0] ? json_string(fs->scenarios.s[i]) : json_null();
                oom = !j || !(scen_json[i] = json_dumps(j, JSON_ENCODE_ANY));
                json_decref(j);
        }
        for (unsigned i = 0; !oom && i < fs->kernels.n; i++) {
                /* A kernel's release is free text: escaped as every answer's (text-json.h). */
                json_t *j = json_string(fs->kernels.s[i]);
                oom = !j || text_json_escape(j) < 0 ||
                      !(kern_json[i] = json_dumps(j, JSON_ENCODE_ANY));
                json_decref(j);
        }
        uint64_t seen = 0;
        bool first_step = true;
        for (size_t k = 0; !oom && k < fs->n; k++) {
                if (seen++ < page->offset || seen > page->offset + page->limit)
                        continue;
                const struct farm_step *sp = &fs->v[k];
                char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
                fprintf(f,
                        "%s{\"start_ns\":%" PRId64 ",\"start\":\"%s\",\"max_ns\":%" PRIu64
                        ",\"max_cpu\":%" PRId64 ",\"max_time_ns\":%" PRId64
                        ",\"max_time\":\"%s\",\"samples\":%" PRIu64 ",\"violations\":%" PRIu64
                        ",\"intervals\":%" PRIu64 ",\"covered_ns\":%" PRIu64 ",\"scenarios\":[",
                        first_step ? "" : ",", sp->start_ns, format_timestamp_utc(t1, sp->start_ns),
                        (uint64_t) sp->max_ns, (int64_t) sp->max_cpu, sp->max_time_ns,
                        format_timestamp_utc(t2, sp->max_time_ns), (uint64_t) sp->samples,
                        (uint64_t) sp->violations, (uint64_t) sp->intervals,
                        (uint64_t) sp->covered_ns);
                first_step = false;
                bool comma = false;
                for (unsigned i = 0; i < fs->scenarios.n; i++)
                        if (sp->scenarios & (UINT64_C(1) << i)) {
                                fprintf(f, "%s%s", comma ? "," : "", scen_json[i]);
                                comma = true;
                        }
                fputs("],\"kernels\":[", f);
                comma = false;
                for (unsigned i = 0; i < fs->kernels.n; i++)
                        if (sp->kernels & (UINT64_C(1) << i)) {
                                fprintf(f, "%s%s", comma ? "," : "", kern_json[i]);
                                comma = true;
                        }
                fputs("]}", f);
        }
        for (unsigned i = 0; i < NAMES_MAX; i++) {
                free(scen_json[i]);
                free(kern_json[i]);
        }
        if (f && fclose(f) != 0)
                oom = true;
        if (oom) {
                free(steps_text);
                return NULL;
        }
        return steps_text;
}

void farm_api_intervals(farm_db *db, const char *id, const struct farm_args *args, int64_t now,
                        const char *path, struct farm_answer *a) {
        struct farm_intervals iv;
        if (farm_intervals_ask(db, id, args, now, &iv, a) <= 0)
                return;
        char *steps_text = steps_text_of(&iv.steps, &iv.page);
        bool oom = !steps_text;
        size_t n = iv.steps.n;
        farm_steps_done(&iv.steps);

        /* The rest of the answer is an object as usual, its "steps" put in as text. */
        json_t *o = json_object();
        if (oom || !o || farm_api_window_fields(o, id, iv.from, iv.to, iv.cpu, iv.scenario) < 0 ||
            json_object_set_new(o, "step_ns", json_integer((json_int_t) iv.step_ns)) < 0 ||
            json_object_set_new(o, "steps", json_null()) < 0 ||
            farm_api_add_page(o, path, args, &iv.page, n) < 0) {
                json_decref(o);
                free(steps_text);
                farm_api_json(a, NULL);
                return;
        }
        farm_api_json_spliced(a, o, &(struct farm_api_splice){ "steps", steps_text, true }, 1);
        json_decref(o);
        free(steps_text);
}
