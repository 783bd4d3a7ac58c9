/* SPDX-License-Identifier: MIT */
/* The optional "traces" member of a summary's interval: the flight recorder's captures of its
 * violations, each an analysis object and the raw events (zlib, base64) or null. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "macro.h"
#include "summary.h"
#include "trace-analysis.h"
#include "trace-raw.h"

#define DAY_NS (INT64_C(86400) * INT64_C(1000000000))

void summary_traces_free(struct summary_interval *iv) {
        for (size_t i = 0; i < iv->ntraces; i++) {
                free(iv->traces[i].analysis);
                free(iv->traces[i].json);
                free(iv->traces[i].raw);
        }
        free(iv->traces);
        iv->traces = NULL;
        iv->ntraces = 0;
}

int summary_traces_encode(const struct summary_interval *iv, json_t *interval) {
        json_t *list = json_array();
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < iv->ntraces; i++) {
                const struct summary_trace *t = &iv->traces[i];
                json_t *x = json_object(), *a = json_loads(t->json, JSON_REJECT_DUPLICATES, NULL);
                char *b64 = t->raw ? base64_encode(t->raw, t->raw_len) : NULL;
                bool ok = x && json_is_object(a) && (!t->raw || b64) &&
                          json_object_set_new(x, "analysis", a) == 0;
                a = NULL;
                ok = ok && json_object_set_new(x, "raw", b64 ? json_string(b64) : json_null()) == 0;
                free(b64);
                json_decref(a);
                if (!ok || json_array_append_new(list, x) < 0) {
                        json_decref(list);
                        return -ERANGE;
                }
        }
        return json_object_set_new(interval, "traces", list) < 0 ? -ENOMEM : 0;
}

/* "path.key: message", or "path: message" without a key. */
_printf_(4, 5) static int bad(char *err, const char *path, const char *key, const char *fmt, ...) {
        char msg[SUMMARY_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(err, SUMMARY_ERROR_MAX, "%s%s%s: %s", path, key && *path ? "." : "", key ?: "",
                 msg);
        return -EBADMSG;
}

/* The raw events: null, or base64 of zlib data that inflates to text within the bounds. */
static int decode_raw(json_t *v, const char *at, struct summary_trace *t, size_t *budget,
                      char *err) {
        if (!v)
                return bad(err, at, "raw", "missing");
        if (json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return bad(err, at, "raw", "not a string or null");
        size_t len = json_string_length(v);
        if (len > (size_t) SUMMARY_MAX_TRACE_RAW / 3 * 4 + 4)
                return bad(err, at, "raw", "%zu bytes of base64, more than %d bytes decoded", len,
                           SUMMARY_MAX_TRACE_RAW);
        int r = base64_decode(json_string_value(v), len, &t->raw, &t->raw_len);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return bad(err, at, "raw", "not valid base64");
        if (t->raw_len > *budget)
                return bad(err, at, "raw", "the captures of this interval hold more than %d bytes",
                           SUMMARY_MAX_TRACE_RAW_TOTAL);
        *budget -= t->raw_len;
        char *text = NULL;
        r = trace_raw_inflate(t->raw, t->raw_len, TRACE_RAW_TEXT_MAX, &text, NULL);
        free(text);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return bad(err, at, "raw", "not zlib data of at most %u bytes of text",
                           TRACE_RAW_TEXT_MAX);
        return 0;
}

static int decode_one(json_t *x, const char *at, const struct summary_interval *iv,
                      struct summary_trace *t, size_t *budget, char *err) {
        char why[TRACE_ERROR_MAX];
        const char *k;
        json_t *v;
        if (!json_is_object(x))
                return bad(err, at, NULL, "not an object");
        json_object_foreach (x, k, v)
                if (strcmp(k, "analysis") != 0 && strcmp(k, "raw") != 0)
                        return bad(err, at, k, "unknown field");
        json_t *a = json_object_get(x, "analysis");
        if (!a)
                return bad(err, at, "analysis", "missing");
        t->analysis = calloc(1, sizeof(*t->analysis));
        if (!t->analysis)
                return -ENOMEM;
        int r = trace_analysis_from_json(a, t->analysis, why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* why names the field inside the analysis: "culprit.kind: ...". */
                snprintf(err, SUMMARY_ERROR_MAX, "%s.analysis.%s", at, why);
                return -EBADMSG;
        }
        const struct trace_analysis *an = t->analysis;
        int64_t end = iv->start_ns + (int64_t) iv->length_ns;
        if (an->time_ns < iv->start_ns - DAY_NS || an->time_ns > end + DAY_NS)
                return bad(err, at, "analysis.time_ns", "not within a day of the interval");
        bool cpu_known = false;
        for (size_t i = 0; i < iv->ncpus; i++)
                cpu_known |= (int) iv->cpus[i].cpu == an->cpu;
        if (!cpu_known)
                return bad(err, at, "analysis.cpu", "CPU %d is not one of the interval's", an->cpu);
        t->json = json_dumps(a, JSON_COMPACT);
        if (!t->json)
                return -ENOMEM;
        return decode_raw(json_object_get(x, "raw"), at, t, budget, err);
}

int summary_traces_decode(json_t *interval, const char *path, struct summary_interval *iv,
                          char err[static SUMMARY_ERROR_MAX]) {
        json_t *list = json_object_get(interval, "traces"), *x;
        char at[200];
        size_t i, budget = SUMMARY_MAX_TRACE_RAW_TOTAL;
        if (!list || json_is_null(list))
                return 0;
        if (!json_is_array(list))
                return bad(err, path, "traces", "not an array");
        if (json_array_size(list) > SUMMARY_MAX_TRACES)
                return bad(err, path, "traces", "%zu entries, at most %d allowed",
                           json_array_size(list), SUMMARY_MAX_TRACES);
        iv->traces = calloc(json_array_size(list) + 1, sizeof(*iv->traces));
        if (!iv->traces)
                return -ENOMEM;
        json_array_foreach (list, i, x) {
                snprintf(at, sizeof(at), "%s%straces[%zu]", path, *path ? "." : "", i);
                int r = decode_one(x, at, iv, &iv->traces[iv->ntraces++], &budget, err);
                if (r < 0)
                        return r;
        }
        return 0;
}
