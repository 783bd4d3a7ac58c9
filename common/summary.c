/* SPDX-License-Identifier: MIT */
/* The summary codec: JSON through jansson, histograms as base64 of their stored form, and a
 * decoder that checks every field's type, range and length and names the first bad one. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "hist.h"
#include "json-path.h"
#include "macro.h"
#include "summary.h"
#include "text-json.h"
#include "text-safe.h"

/* Plausible wall-clock times: 2001-09-09 to 2200-01-01. */
#define TIME_MIN_NS INT64_C(1000000000000000000)
#define TIME_MAX_NS INT64_C(7258118400000000000)
#define DAY_NS (INT64_C(86400) * INT64_C(1000000000))

/* ---- freeing ---- */

void summary_done(struct summary *s) {
        free(s->machine.id);
        free(s->machine.hostname);
        free(s->machine.cpu_model);
        free(s->run.boot_id);
        free(s->run.kernel_release);
        free(s->run.kernel_version);
        free(s->run.kernel_cmdline);
        free(s->run.preempt_model);
        free(s->run.daemon_version);
        free(s->run.config_digest);
        free(s->run.release);
        free(s->run.probed_cpus);
        for (size_t i = 0; i < s->nintervals; i++) {
                struct summary_interval *iv = &s->intervals[i];
                free(iv->scenario);
                for (size_t c = 0; c < iv->ncpus; c++)
                        free(iv->cpus[c].hist);
                free(iv->cpus);
                for (size_t l = 0; l < iv->nloads; l++) {
                        free(iv->loads[l].generator);
                        for (size_t m = 0; m < iv->loads[l].nmetrics; m++) {
                                free(iv->loads[l].metrics[m].name);
                                free(iv->loads[l].metrics[m].unit);
                        }
                        free(iv->loads[l].metrics);
                }
                free(iv->loads);
                summary_traces_free(iv);
        }
        free(s->intervals);
        for (size_t i = 0; i < s->nevents; i++) {
                free(s->events[i].type);
                free(s->events[i].message);
                free(s->events[i].details);
        }
        free(s->events);
        summary_inventory_free(s);
        *s = (struct summary){};
}

/* ---- encoding ---- */

static json_t *u64(uint64_t v) {
        return v <= INT64_MAX ? json_integer((json_int_t) v) : NULL;
}

static json_t *str_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

/* json_object_set_new that remembers a failure (a NULL value: out of range or memory). */
static void put(json_t *o, const char *key, json_t *v, bool *ok) {
        if (!v || json_object_set_new(o, key, v) < 0)
                *ok = false;
}

static json_t *encode_interval(const struct summary_interval *iv, bool *ok) {
        json_t *o = json_object(), *cpus = json_array(), *loads = json_array();
        if (!o || !cpus || !loads) {
                json_decref(o);
                json_decref(cpus);
                json_decref(loads);
                *ok = false;
                return NULL;
        }
        put(o, "seq", u64(iv->seq), ok);
        put(o, "start_ns", json_integer(iv->start_ns), ok);
        put(o, "length_ns", u64(iv->length_ns), ok);
        put(o, "scenario", str_or_null(iv->scenario), ok);
        for (size_t i = 0; i < iv->ncpus; i++) {
                const struct summary_cpu *c = &iv->cpus[i];
                json_t *x = json_object();
                char *b64 = base64_encode(c->hist, c->hist_len);
                put(x, "cpu", json_integer(c->cpu), ok);
                put(x, "samples", u64(c->samples), ok);
                put(x, "min_ns", u64(c->min_ns), ok);
                put(x, "avg_ns", u64(c->avg_ns), ok);
                put(x, "max_ns", u64(c->max_ns), ok);
                put(x, "max_time_ns", json_integer(c->max_time_ns), ok);
                put(x, "violations", u64(c->violations), ok);
                put(x, "missed", u64(c->missed), ok);
                put(x, "hist_limit_us", json_integer(c->hist_limit_us), ok);
                put(x, "hist", b64 ? json_string(b64) : NULL, ok);
                free(b64);
                if (c->span_length_ns > 0) {
                        put(x, "start_ns", json_integer(c->span_start_ns), ok);
                        put(x, "length_ns", u64(c->span_length_ns), ok);
                }
                if (!x || json_array_append_new(cpus, x) < 0)
                        *ok = false;
        }
        for (size_t i = 0; i < iv->nloads; i++) {
                const struct summary_load *l = &iv->loads[i];
                json_t *x = json_object(), *ms = json_array();
                put(x, "generator", json_string(l->generator), ok);
                put(x, "up_ns", u64(l->up_ns), ok);
                put(x, "starts", json_integer(l->starts), ok);
                put(x, "exits", json_integer(l->exits), ok);
                for (size_t m = 0; m < l->nmetrics; m++) {
                        json_t *y = json_object();
                        put(y, "name", json_string(l->metrics[m].name), ok);
                        put(y, "unit", json_string(l->metrics[m].unit), ok);
                        put(y, "value",
                            isfinite(l->metrics[m].value) ? json_real(l->metrics[m].value) : NULL,
                            ok);
                        if (!y || json_array_append_new(ms, y) < 0)
                                *ok = false;
                }
                put(x, "metrics", ms, ok);
                if (!x || json_array_append_new(loads, x) < 0)
                        *ok = false;
        }
        put(o, "cpus", cpus, ok);
        put(o, "loads", loads, ok);
        if (iv->ntraces > 0 && summary_traces_encode(iv, o) < 0)
                *ok = false;
        return o;
}

int summary_encode(const struct summary *s, char **ret, size_t *ret_len) {
        bool ok = true;
        json_t *doc = json_object(), *m = json_object(), *r = json_object(), *ivs = json_array(),
               *evs = json_array();

        put(doc, "schema", json_string(SUMMARY_SCHEMA), &ok);
        put(m, "id", json_string(s->machine.id), &ok);
        put(m, "hostname", json_string(s->machine.hostname), &ok);
        put(m, "cpu_model", json_string(s->machine.cpu_model), &ok);
        put(m, "cpus", json_integer(s->machine.cpus), &ok);
        put(doc, "machine", m, &ok);
        put(r, "id", json_integer(s->run.id), &ok);
        put(r, "boot_id", json_string(s->run.boot_id), &ok);
        put(r, "kernel_release", json_string(s->run.kernel_release), &ok);
        put(r, "kernel_version", json_string(s->run.kernel_version), &ok);
        put(r, "kernel_cmdline", json_string(s->run.kernel_cmdline), &ok);
        put(r, "preempt_model", json_string(s->run.preempt_model), &ok);
        put(r, "daemon_version", json_string(s->run.daemon_version), &ok);
        put(r, "config_digest", json_string(s->run.config_digest), &ok);
        put(r, "start_ns", json_integer(s->run.start_ns), &ok);
        put(r, "threshold_ns", u64(s->run.threshold_ns), &ok);
        put(r, "probe_interval_ns", u64(s->run.probe_interval_ns), &ok);
        put(r, "interval_ns", u64(s->run.interval_ns), &ok);
        if (s->run.release)
                put(r, "release", json_string(s->run.release), &ok);
        if (s->run.nprobed_cpus > 0) {
                json_t *pc = json_array();
                for (size_t i = 0; pc && i < s->run.nprobed_cpus; i++)
                        if (json_array_append_new(pc, json_integer(s->run.probed_cpus[i])) < 0)
                                ok = false;
                put(r, "cpus", pc, &ok);
        }
        put(doc, "run", r, &ok);
        put(doc, "seq", u64(s->seq), &ok);
        for (size_t i = 0; i < s->nintervals; i++) {
                json_t *x = encode_interval(&s->intervals[i], &ok);
                if (!x || json_array_append_new(ivs, x) < 0)
                        ok = false;
        }
        put(doc, "intervals", ivs, &ok);
        for (size_t i = 0; i < s->nevents; i++) {
                const struct summary_event *e = &s->events[i];
                json_t *x = json_object();
                put(x, "id", u64(e->id), &ok);
                put(x, "time_ns", json_integer(e->time_ns), &ok);
                put(x, "type", json_string(e->type), &ok);
                put(x, "cpu", e->cpu >= 0 ? json_integer(e->cpu) : json_null(), &ok);
                put(x, "value", e->value >= 0 ? json_integer(e->value) : json_null(), &ok);
                put(x, "message", json_string(e->message ?: ""), &ok);
                if (e->details) {
                        /* Stored as an object; anything else here is a damaged row. */
                        json_t *dt = json_loads(e->details, JSON_REJECT_DUPLICATES, NULL);
                        if (!json_is_object(dt) || strlen(e->details) > SUMMARY_MAX_DETAILS) {
                                json_decref(dt);
                                dt = NULL;
                        }
                        put(x, "details", dt, &ok);
                }
                if (!x || json_array_append_new(evs, x) < 0)
                        ok = false;
        }
        put(doc, "events", evs, &ok);
        if (summary_inventory_encode(s, doc) < 0)
                ok = false;

        char *text = ok ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text)
                return ok ? -ENOMEM : -ERANGE;
        *ret = text;
        if (ret_len)
                *ret_len = strlen(text);
        return 0;
}

/* ---- decoding ---- */

struct dec {
        char *err;
        char path[160];    /* of the object being read: "intervals[3].cpus[0]" */
        uint64_t probe_ns; /* the run's probe period, for the bound on samples */
        uint64_t buckets;  /* non-empty histogram buckets so far */
        const char *scenarios[SUMMARY_MAX_SCENARIOS]; /* the different ones so far */
        size_t nscenarios;
};

static int bad(struct dec *d, const char *key, const char *fmt, ...) _printf_(3, 4);
static int bad(struct dec *d, const char *key, const char *fmt, ...) {
        char msg[SUMMARY_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(d->err, SUMMARY_ERROR_MAX, "%s%s%s: %s", d->path, *d->path && key ? "." : "",
                 key ?: "", msg);
        return -EBADMSG;
}

/* Refuses keys an object must not have: a misspelt field is an error, not ignored data. */
static int only_keys(struct dec *d, json_t *o, const char *const *keys) {
        const char *k;
        json_t *v;
        json_object_foreach (o, k, v) {
                bool known = false;
                for (const char *const *p = keys; *p; p++)
                        if (strcmp(*p, k) == 0)
                                known = true;
                if (!known)
                        return bad(d, k, "unknown field");
        }
        return 0;
}

static int get_int(struct dec *d, json_t *o, const char *key, int64_t min, int64_t max,
                   int64_t *ret) {
        json_t *v = json_object_get(o, key);
        if (!v)
                return bad(d, key, "missing");
        if (!json_is_integer(v))
                return bad(d, key, "not an integer");
        json_int_t x = json_integer_value(v);
        if (x < min || x > max)
                return bad(d, key, "%lld is out of range (%" PRId64 " to %" PRId64 ")",
                           (long long) x, min, max);
        *ret = x;
        return 0;
}

static int get_u64(struct dec *d, json_t *o, const char *key, uint64_t max, uint64_t *ret) {
        int64_t v = 0;
        int r = get_int(d, o, key, 0, (int64_t) MIN(max, (uint64_t) INT64_MAX), &v);
        if (r >= 0)
                *ret = (uint64_t) v;
        return r;
}

static int get_u32(struct dec *d, json_t *o, const char *key, uint32_t min, uint32_t max,
                   uint32_t *ret) {
        int64_t v = 0;
        int r = get_int(d, o, key, min, max, &v);
        if (r >= 0)
                *ret = (uint32_t) v;
        return r;
}

/* An integer or null (null: -1). */
static int get_opt_int(struct dec *d, json_t *o, const char *key, int64_t max, int64_t *ret) {
        json_t *v = json_object_get(o, key);
        if (v && json_is_null(v)) {
                *ret = -1;
                return 0;
        }
        return get_int(d, o, key, 0, max, ret);
}

/* Names, as the schema gives them (name-rule.h). */
const struct name_rule summary_name_release = { "a release name",
                                                NAME_LOWER | NAME_UPPER | NAME_DIGITS, "._+~:-", 1,
                                                SUMMARY_MAX_RELEASE };
const struct name_rule summary_name_scenario = { "a scenario name",
                                                 NAME_LOWER | NAME_UPPER | NAME_DIGITS, "-_", 1,
                                                 SUMMARY_MAX_SCENARIO };
const struct name_rule summary_name_generator = { "a load generator's name",
                                                  NAME_LOWER | NAME_DIGITS, "_", 1, 32 };
const struct name_rule summary_name_metric = { "a metric's name", NAME_LOWER | NAME_DIGITS, "_", 1,
                                               32 };
const struct name_rule summary_name_event_type = { "an event type", NAME_LOWER | NAME_DIGITS, "_",
                                                   1, 64 };
const struct name_rule summary_name_id = { "an identifier", NAME_HEX, "", 32, 32 };
const struct name_rule summary_name_digest = { "a digest", NAME_HEX, "", 64, 64 };

const char *summary_release_of(const struct summary_run *run) {
        return run->release ?: run->kernel_release;
}

/* The string member key of o, or null when nullable; NULL with an error otherwise. */
static json_t *get_string(struct dec *d, json_t *o, const char *key, bool nullable, int *ret_r) {
        json_t *v = json_object_get(o, key);
        *ret_r = 0;
        if (!v)
                *ret_r = bad(d, key, "missing");
        else if (nullable && json_is_null(v))
                return NULL;
        else if (!json_is_string(v))
                *ret_r = bad(d, key, "not a string");
        else if (strlen(json_string_value(v)) != json_string_length(v))
                *ret_r = bad(d, key, "contains a NUL character");
        else
                return v;
        return NULL;
}

/* Free text: one line, or lines (tabs and newlines) when multiline; never a control or
 * bidirectional formatting character (text-safe.h), which would forge lines and reorder words
 * wherever the text is shown. */
static int get_text(struct dec *d, json_t *o, const char *key, size_t minlen, size_t maxlen,
                    bool multiline, char **ret) {
        int r;
        json_t *v = get_string(d, o, key, false, &r);
        if (!v)
                return r;
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        char why[TEXT_WHY_MAX];
        if (!text_ok(s, multiline, why))
                return bad(d, key, "%s", why);
        if (len < minlen || len > maxlen)
                return bad(d, key, "length %zu is out of range (%zu to %zu)", len, minlen, maxlen);
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* A name of the kind rule; null (*ret NULL) when nullable. */
static int get_name(struct dec *d, json_t *o, const char *key, const struct name_rule *rule,
                    bool nullable, char **ret) {
        int r;
        json_t *v = get_string(d, o, key, nullable, &r);
        *ret = NULL;
        if (!v)
                return r;
        char why[NAME_WHY_MAX];
        if (!name_ok(rule, json_string_value(v), why))
                return bad(d, key, "%s", why);
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int get_array(struct dec *d, json_t *o, const char *key, size_t max, json_t **ret) {
        json_t *v = json_object_get(o, key);
        if (!v)
                return bad(d, key, "missing");
        if (!json_is_array(v))
                return bad(d, key, "not an array");
        if (json_array_size(v) > max)
                return bad(d, key, "%zu entries, at most %zu allowed", json_array_size(v), max);
        *ret = v;
        return 0;
}

static int get_object(struct dec *d, json_t *o, const char *key, json_t **ret) {
        json_t *v = json_object_get(o, key);
        if (!v)
                return bad(d, key, "missing");
        if (!json_is_object(v))
                return bad(d, key, "not an object");
        *ret = v;
        return 0;
}

/* Descends into a member for error paths; returns the length to cut back to. */
static size_t enter(struct dec *d, const char *key, ssize_t index) {
        size_t l = strlen(d->path);
        if (index >= 0)
                snprintf(d->path + l, sizeof(d->path) - l, "%s%s[%zd]", l ? "." : "", key, index);
        else
                snprintf(d->path + l, sizeof(d->path) - l, "%s%s", l ? "." : "", key);
        return l;
}

static void leave(struct dec *d, size_t l) {
        d->path[l] = 0;
}

/* The optional span of one CPU: both fields or neither, inside the interval. */
static int decode_cpu_span(struct dec *d, json_t *o, const struct summary_interval *iv,
                           struct summary_cpu *c) {
        bool has_start = json_object_get(o, "start_ns"),
             has_length = json_object_get(o, "length_ns");
        int r;
        if (!has_start && !has_length)
                return 0;
        if (!has_start || !has_length)
                return bad(d, has_start ? "length_ns" : "start_ns",
                           "missing (a CPU's span needs both start_ns and length_ns)");
        if ((r = get_int(d, o, "start_ns", TIME_MIN_NS, TIME_MAX_NS, &c->span_start_ns)) < 0 ||
            (r = get_u64(d, o, "length_ns", (uint64_t) DAY_NS * 2, &c->span_length_ns)) < 0)
                return r;
        if (c->span_length_ns == 0)
                return bad(d, "length_ns", "must be more than 0");
        if (c->span_start_ns < iv->start_ns ||
            c->span_start_ns + (int64_t) c->span_length_ns > iv->start_ns + (int64_t) iv->length_ns)
                return bad(d, "start_ns", "the CPU's span is not inside the interval");
        return 0;
}

static int decode_cpu(struct dec *d, json_t *o, const struct summary_interval *iv,
                      struct summary_cpu *c) {
        static const char *const keys[] = { "cpu",        "samples",  "min_ns",
                                            "avg_ns",     "max_ns",   "max_time_ns",
                                            "violations", "missed",   "hist_limit_us",
                                            "hist",       "start_ns", "length_ns",
                                            NULL };
        _cleanup_free_ char *b64 = NULL;
        int64_t t = 0;
        int r;

        if (!json_is_object(o))
                return bad(d, NULL, "not an object");
        if ((r = only_keys(d, o, keys)) < 0 ||
            (r = get_u32(d, o, "cpu", 0, SUMMARY_MAX_CPU_ID, &c->cpu)) < 0 ||
            (r = get_u64(d, o, "samples", UINT64_MAX, &c->samples)) < 0 ||
            (r = get_u64(d, o, "min_ns", (uint64_t) DAY_NS, &c->min_ns)) < 0 ||
            (r = get_u64(d, o, "avg_ns", (uint64_t) DAY_NS, &c->avg_ns)) < 0 ||
            (r = get_u64(d, o, "max_ns", (uint64_t) DAY_NS, &c->max_ns)) < 0 ||
            (r = get_int(d, o, "max_time_ns", 0, TIME_MAX_NS, &t)) < 0 ||
            (r = get_u64(d, o, "violations", UINT64_MAX, &c->violations)) < 0 ||
            (r = get_u64(d, o, "missed", UINT64_MAX, &c->missed)) < 0 ||
            (r = get_u32(d, o, "hist_limit_us", 1, HIST_LIMIT_US_MAX, &c->hist_limit_us)) < 0 ||
            (r = get_text(d, o, "hist", 0, SUMMARY_MAX_HIST_BYTES / 3 * 4 + 4, false, &b64)) < 0)
                return r;
        c->max_time_ns = t;
        if (c->samples > 0 && !(c->min_ns <= c->avg_ns && c->avg_ns <= c->max_ns))
                return bad(d, NULL, "min_ns <= avg_ns <= max_ns does not hold");
        if (c->violations > c->samples)
                return bad(d, "violations", "more than the samples");
        /* Counts are consistent with the time measured, so that sums over a farm's years stay
         * far from 2^63 (an upload claiming INT64_MAX samples broke every merge after it).  A
         * count above one per period but within four is stored: the verdict judges it (a probe
         * that counts more than its period allows did not measure, docs/verdict.md). */
        uint64_t probe = d->probe_ns ?: SUMMARY_MIN_PROBE_NS, periods = iv->length_ns / probe;
        if (c->samples > SUMMARY_MAX_SAMPLES_PER_PERIOD * periods + 16)
                return bad(d, "samples",
                           "%" PRIu64 " is more than %d per probe period (%" PRIu64
                           " ns) of the interval's %" PRIu64 " ns",
                           c->samples, SUMMARY_MAX_SAMPLES_PER_PERIOD, probe, iv->length_ns);
        if (c->missed > SUMMARY_MAX_MISSED_NS / probe)
                return bad(d, "missed", "more periods than two days hold");
        if (c->samples > 0 && (c->max_time_ns < iv->start_ns - DAY_NS ||
                               c->max_time_ns > iv->start_ns + (int64_t) iv->length_ns + DAY_NS))
                return bad(d, "max_time_ns", "not within a day of the interval");
        if ((r = decode_cpu_span(d, o, iv, c)) < 0)
                return r;
        r = base64_decode(b64, strlen(b64), &c->hist, &c->hist_len);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return bad(d, "hist", "not valid base64");

        /* The histogram must decode and hold exactly the samples: checked on the encoded
         * buckets, without an array of 100,000 of them for each CPU. */
        const char *reason = NULL;
        uint64_t total = 0;
        r = hist_validate(c->hist, c->hist_len, &total, &reason);
        if (r < 0)
                return bad(d, "hist", "%s", reason ?: "does not decode");
        if (total != c->samples)
                return bad(d, "hist", "holds %" PRIu64 " samples, the row says %" PRIu64, total,
                           c->samples);
        struct hist_shape shape;
        hist_shape(c->hist, c->hist_len, &shape);
        if (shape.limit_us != c->hist_limit_us)
                return bad(d, "hist", "its limit is %" PRIu32 " us, the row says %" PRIu32,
                           shape.limit_us, c->hist_limit_us);
        if (c->samples > 0 && (shape.lowest != hist_index(c->hist_limit_us, c->min_ns) ||
                               shape.highest != hist_index(c->hist_limit_us, c->max_ns)))
                return bad(d, "hist",
                           "its lowest and highest buckets do not hold min_ns and max_ns");
        d->buckets += shape.entries;
        if (d->buckets > SUMMARY_MAX_BUCKETS)
                return bad(d, "hist", "more than %" PRIu32 " non-empty buckets in the summary",
                           SUMMARY_MAX_BUCKETS);
        return 0;
}

static int decode_load(struct dec *d, json_t *o, struct summary_load *l) {
        static const char *const keys[] = {
                "generator", "up_ns", "starts", "exits", "metrics", NULL
        };
        static const char *const mkeys[] = { "name", "unit", "value", NULL };
        json_t *ms = NULL, *m;
        size_t i;
        int r;

        if (!json_is_object(o))
                return bad(d, NULL, "not an object");
        if ((r = only_keys(d, o, keys)) < 0 ||
            (r = get_name(d, o, "generator", &summary_name_generator, false, &l->generator)) < 0 ||
            (r = get_u64(d, o, "up_ns", (uint64_t) DAY_NS * 2, &l->up_ns)) < 0 ||
            (r = get_u32(d, o, "starts", 0, 1000000, &l->starts)) < 0 ||
            (r = get_u32(d, o, "exits", 0, 1000000, &l->exits)) < 0 ||
            (r = get_array(d, o, "metrics", SUMMARY_MAX_METRICS, &ms)) < 0)
                return r;
        l->metrics = calloc(json_array_size(ms) + 1, sizeof(*l->metrics));
        if (!l->metrics)
                return -ENOMEM;
        json_array_foreach (ms, i, m) {
                size_t at = enter(d, "metrics", (ssize_t) i);
                struct summary_metric *x = &l->metrics[l->nmetrics++];
                if (!json_is_object(m))
                        return bad(d, NULL, "not an object");
                if ((r = only_keys(d, m, mkeys)) < 0 ||
                    (r = get_name(d, m, "name", &summary_name_metric, false, &x->name)) < 0 ||
                    (r = get_text(d, m, "unit", 1, 32, false, &x->unit)) < 0)
                        return r;
                json_t *v = json_object_get(m, "value");
                if (!v)
                        return bad(d, "value", "missing");
                if (!json_is_number(v))
                        return bad(d, "value", "not a number");
                x->value = json_number_value(v);
                if (!isfinite(x->value) || x->value < 0 || x->value > 1e18)
                        return bad(d, "value", "out of range (0 to 1e18)");
                leave(d, at);
        }
        return 0;
}

static int decode_interval(struct dec *d, json_t *o, struct summary_interval *iv) {
        static const char *const keys[] = { "seq",  "start_ns", "length_ns", "scenario",
                                            "cpus", "loads",    "traces",    NULL };
        json_t *cpus = NULL, *loads = NULL, *x;
        int64_t start = 0;
        size_t i;
        int r;

        if (!json_is_object(o))
                return bad(d, NULL, "not an object");
        if ((r = only_keys(d, o, keys)) < 0 ||
            (r = get_u64(d, o, "seq", (uint64_t) INT64_MAX, &iv->seq)) < 0 ||
            (r = get_int(d, o, "start_ns", TIME_MIN_NS, TIME_MAX_NS, &start)) < 0 ||
            (r = get_u64(d, o, "length_ns", (uint64_t) DAY_NS * 2, &iv->length_ns)) < 0 ||
            (r = get_name(d, o, "scenario", &summary_name_scenario, true, &iv->scenario)) < 0 ||
            (r = get_array(d, o, "cpus", SUMMARY_MAX_CPUS, &cpus)) < 0 ||
            (r = get_array(d, o, "loads", SUMMARY_MAX_LOADS, &loads)) < 0)
                return r;
        iv->start_ns = start;
        if (iv->length_ns == 0)
                return bad(d, "length_ns", "must be more than 0");
        if (iv->scenario) {
                size_t k = 0;
                while (k < d->nscenarios && strcmp(d->scenarios[k], iv->scenario) != 0)
                        k++;
                if (k == SUMMARY_MAX_SCENARIOS)
                        return bad(d, "scenario", "more than %d different scenarios in the summary",
                                   SUMMARY_MAX_SCENARIOS);
                if (k == d->nscenarios)
                        d->scenarios[d->nscenarios++] = iv->scenario;
        }
        if (json_array_size(cpus) == 0)
                return bad(d, "cpus", "empty");
        iv->cpus = calloc(json_array_size(cpus), sizeof(*iv->cpus));
        iv->loads = calloc(json_array_size(loads) + 1, sizeof(*iv->loads));
        if (!iv->cpus || !iv->loads)
                return -ENOMEM;
        json_array_foreach (cpus, i, x) {
                size_t at = enter(d, "cpus", (ssize_t) i);
                r = decode_cpu(d, x, iv, &iv->cpus[iv->ncpus++]);
                if (r < 0)
                        return r;
                if (i > 0 && iv->cpus[i].cpu <= iv->cpus[i - 1].cpu)
                        return bad(d, "cpu", "CPUs must be listed once each, in ascending order");
                leave(d, at);
        }
        json_array_foreach (loads, i, x) {
                size_t at = enter(d, "loads", (ssize_t) i);
                r = decode_load(d, x, &iv->loads[iv->nloads++]);
                if (r < 0)
                        return r;
                leave(d, at);
        }
        return summary_traces_decode(o, d->path, iv, d->err);
}

/* How deeply v nests (a scalar: 0). */
static size_t json_depth(json_t *v) {
        size_t deepest = 0, i;
        const char *k;
        json_t *x;
        if (json_is_object(v))
                json_object_foreach (v, k, x)
                        deepest = MAX(deepest, json_depth(x));
        else if (json_is_array(v))
                json_array_foreach (v, i, x)
                        deepest = MAX(deepest, json_depth(x));
        else
                return 0;
        return deepest + 1;
}

/* The optional details of an event: free-form, but an object, shallow and small. */
static int get_details(struct dec *d, json_t *o, char **ret) {
        json_t *v = json_object_get(o, "details");
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return bad(d, "details", "not an object");
        /* jansson nests no deeper than its own limit, so this recursion is bounded. */
        if (json_depth(v) > SUMMARY_DETAILS_DEPTH)
                return bad(d, "details", "nested more than %d levels deep", SUMMARY_DETAILS_DEPTH);
        /* Its strings and member names are text like any other (multiline: a journal's
         * lines, a pstore record). */
        char path[TEXT_JSON_PATH_MAX], why[TEXT_WHY_MAX], at[TEXT_JSON_PATH_MAX + 16];
        if (!text_json_ok(v, true, path, why)) {
                snprintf(at, sizeof(at), "details.%s", path);
                return bad(d, at, "%s", why);
        }
        char *text = json_dumps(v, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        if (strlen(text) > SUMMARY_MAX_DETAILS) {
                size_t len = strlen(text);
                free(text);
                return bad(d, "details", "%zu bytes as compact JSON, more than %d", len,
                           SUMMARY_MAX_DETAILS);
        }
        *ret = text;
        return 0;
}

static int decode_event(struct dec *d, json_t *o, struct summary_event *e) {
        static const char *const keys[] = { "id",    "time_ns", "type",    "cpu",
                                            "value", "message", "details", NULL };
        int64_t cpu = -1, value = -1;
        int r;

        if (!json_is_object(o))
                return bad(d, NULL, "not an object");
        if ((r = only_keys(d, o, keys)) < 0 ||
            (r = get_u64(d, o, "id", (uint64_t) INT64_MAX, &e->id)) < 0 ||
            (r = get_int(d, o, "time_ns", TIME_MIN_NS, TIME_MAX_NS, &e->time_ns)) < 0 ||
            (r = get_name(d, o, "type", &summary_name_event_type, false, &e->type)) < 0 ||
            (r = get_opt_int(d, o, "cpu", SUMMARY_MAX_CPU_ID, &cpu)) < 0 ||
            (r = get_opt_int(d, o, "value", INT64_MAX, &value)) < 0 ||
            (r = get_text(d, o, "message", 0, SUMMARY_MAX_TEXT, true, &e->message)) < 0 ||
            (r = get_details(d, o, &e->details)) < 0)
                return r;
        if (e->id == 0)
                return bad(d, "id", "must be at least 1");
        e->cpu = (int32_t) cpu;
        e->value = value;
        return 0;
}

/* The optional members of run: release and the probed CPUs. */
static int decode_run_extras(struct dec *d, json_t *run, struct summary_run *r) {
        json_t *cpus = json_object_get(run, "cpus"), *x;
        size_t i;
        int q;
        char why[NAME_WHY_MAX];
        if (json_object_get(run, "release") &&
            (q = get_name(d, run, "release", &summary_name_release, false, &r->release)) < 0)
                return q;
        /* Without release, the run is judged under its kernel's: a name all the same. */
        if (!r->release && !name_ok(&summary_name_release, r->kernel_release, why))
                return bad(d, "release",
                           "missing, and kernel_release is not a release name (%s): send release "
                           "([Upload] Release=)",
                           why);
        if (!cpus)
                return 0;
        if ((q = get_array(d, run, "cpus", SUMMARY_MAX_CPUS, &cpus)) < 0)
                return q;
        if (json_array_size(cpus) == 0)
                return bad(d, "cpus", "empty (a run probes at least one CPU)");
        r->probed_cpus = calloc(json_array_size(cpus), sizeof(*r->probed_cpus));
        if (!r->probed_cpus)
                return -ENOMEM;
        json_array_foreach (cpus, i, x) {
                if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                    json_integer_value(x) > SUMMARY_MAX_CPU_ID)
                        return bad(d, "cpus", "entry %zu is not a CPU number (0 to %d)", i,
                                   SUMMARY_MAX_CPU_ID);
                uint32_t cpu = (uint32_t) json_integer_value(x);
                if (i > 0 && cpu <= r->probed_cpus[i - 1])
                        return bad(d, "cpus", "CPUs must be listed once each, in ascending order");
                r->probed_cpus[r->nprobed_cpus++] = cpu;
        }
        return 0;
}

static int decode_machine(struct dec *d, json_t *doc, struct summary_machine *m) {
        static const char *const keys[] = { "id", "hostname", "cpu_model", "cpus", NULL };
        json_t *o = NULL;
        int r;
        if ((r = get_object(d, doc, "machine", &o)) < 0)
                return r;
        size_t at = enter(d, "machine", -1);
        if ((r = only_keys(d, o, keys)) < 0 ||
            (r = get_name(d, o, "id", &summary_name_id, false, &m->id)) < 0 ||
            (r = get_text(d, o, "hostname", 1, 255, false, &m->hostname)) < 0 ||
            (r = get_text(d, o, "cpu_model", 0, 256, false, &m->cpu_model)) < 0 ||
            (r = get_u32(d, o, "cpus", 1, SUMMARY_MAX_CPUS, &m->cpus)) < 0)
                return r;
        leave(d, at);
        return 0;
}

static int decode_run(struct dec *d, json_t *doc, struct summary_run *x) {
        static const char *const keys[] = { "id",
                                            "boot_id",
                                            "kernel_release",
                                            "kernel_version",
                                            "kernel_cmdline",
                                            "preempt_model",
                                            "daemon_version",
                                            "config_digest",
                                            "start_ns",
                                            "threshold_ns",
                                            "probe_interval_ns",
                                            "interval_ns",
                                            "release",
                                            "cpus",
                                            NULL };
        json_t *run = NULL;
        int r;
        if ((r = get_object(d, doc, "run", &run)) < 0)
                return r;
        size_t at = enter(d, "run", -1);
        if ((r = only_keys(d, run, keys)) < 0 ||
            (r = get_int(d, run, "id", 1, INT64_MAX, &x->id)) < 0 ||
            (r = get_name(d, run, "boot_id", &summary_name_id, false, &x->boot_id)) < 0 ||
            (r = get_text(d, run, "kernel_release", 1, SUMMARY_MAX_RELEASE, false,
                          &x->kernel_release)) < 0 ||
            (r = get_text(d, run, "kernel_version", 0, 512, false, &x->kernel_version)) < 0 ||
            (r = get_text(d, run, "kernel_cmdline", 0, SUMMARY_MAX_CMDLINE, false,
                          &x->kernel_cmdline)) < 0 ||
            (r = get_text(d, run, "preempt_model", 0, 64, false, &x->preempt_model)) < 0 ||
            (r = get_text(d, run, "daemon_version", 1, 64, false, &x->daemon_version)) < 0 ||
            (r = get_name(d, run, "config_digest", &summary_name_digest, false,
                          &x->config_digest)) < 0 ||
            (r = get_int(d, run, "start_ns", TIME_MIN_NS, TIME_MAX_NS, &x->start_ns)) < 0 ||
            (r = get_u64(d, run, "threshold_ns", (uint64_t) DAY_NS, &x->threshold_ns)) < 0 ||
            (r = get_u64(d, run, "probe_interval_ns", (uint64_t) DAY_NS, &x->probe_interval_ns)) <
                    0 ||
            (r = get_u64(d, run, "interval_ns", (uint64_t) DAY_NS, &x->interval_ns)) < 0 ||
            (r = decode_run_extras(d, run, x)) < 0)
                return r;
        d->probe_ns = x->probe_interval_ns;
        leave(d, at);
        return 0;
}

/* The intervals (ascending seq) and the events: at least one of either. */
static int decode_lists(struct dec *d, json_t *doc, struct summary *s) {
        json_t *ivs = NULL, *evs = NULL, *x;
        size_t i, at;
        int r;
        if ((r = get_array(d, doc, "intervals", SUMMARY_MAX_INTERVALS, &ivs)) < 0 ||
            (r = get_array(d, doc, "events", SUMMARY_MAX_EVENTS, &evs)) < 0)
                return r;
        if (json_array_size(ivs) == 0 && json_array_size(evs) == 0)
                return bad(d, NULL, "neither intervals nor events: nothing to store");
        s->intervals = calloc(json_array_size(ivs) + 1, sizeof(*s->intervals));
        s->events = calloc(json_array_size(evs) + 1, sizeof(*s->events));
        if (!s->intervals || !s->events)
                return -ENOMEM;
        json_array_foreach (ivs, i, x) {
                at = enter(d, "intervals", (ssize_t) i);
                r = decode_interval(d, x, &s->intervals[s->nintervals++]);
                if (r < 0)
                        return r;
                if (i > 0 && s->intervals[i].seq <= s->intervals[i - 1].seq)
                        return bad(d, "seq", "intervals must be in ascending order of seq");
                leave(d, at);
        }
        json_array_foreach (evs, i, x) {
                at = enter(d, "events", (ssize_t) i);
                r = decode_event(d, x, &s->events[s->nevents++]);
                if (r < 0)
                        return r;
                leave(d, at);
        }
        return 0;
}

static int decode_doc(struct dec *d, json_t *doc, struct summary *s) {
        static const char *const keys[] = { "schema",    "machine", "run",       "seq",
                                            "intervals", "events",  "inventory", NULL };
        int r;

        if (!json_is_object(doc))
                return bad(d, NULL, "the summary is not a JSON object");
        json_t *schema = json_object_get(doc, "schema");
        if (!schema)
                return bad(d, "schema", "missing");
        if (!json_is_string(schema) || strcmp(json_string_value(schema), SUMMARY_SCHEMA) != 0)
                return bad(d, "schema", "unsupported version (this side understands %s)",
                           SUMMARY_SCHEMA);
        if ((r = only_keys(d, doc, keys)) < 0 || (r = decode_machine(d, doc, &s->machine)) < 0 ||
            (r = decode_run(d, doc, &s->run)) < 0 ||
            (r = get_u64(d, doc, "seq", (uint64_t) INT64_MAX, &s->seq)) < 0 ||
            (r = summary_inventory_decode(doc, s, d->err)) < 0)
                return r;
        return decode_lists(d, doc, s);
}

int summary_decode(const char *text, size_t len, struct summary *ret,
                   char err[static SUMMARY_ERROR_MAX]) {
        struct dec d = { .err = err };
        json_error_t je;
        struct summary s = {};

        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
                /* The parser's own words quote the text (a byte that is not UTF-8 among
                 * them): escaped, and the field named as the decoder would. */
                char path[JSON_PATH_MAX], what[sizeof(je.text) * 4];
                json_path_at(text, len, (size_t) MAX(je.position, 0), path);
                snprintf(err, SUMMARY_ERROR_MAX, "%s%smalformed JSON at line %d, column %d: %s",
                         path, *path ? ": " : "", je.line, je.column,
                         text_escape(je.text, what, sizeof(what)));
                return -EBADMSG;
        }
        int r = decode_doc(&d, doc, &s);
        json_decref(doc);
        if (r < 0) {
                if (r == -ENOMEM)
                        snprintf(err, SUMMARY_ERROR_MAX, "out of memory");
                summary_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}
