/* SPDX-License-Identifier: MIT */
/* The JSON form of a capture's analysis, and its reader: every member checked for type, range
 * and length, as for any input that comes from another machine (the farm server reads it out
 * of uploaded summaries). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "text-json.h"
#include "text-safe.h"
#include "trace-analysis.h"

#define DAY_NS (INT64_C(86400) * INT64_C(1000000000))
#define TIME_MIN_NS INT64_C(1000000000000000000)
#define TIME_MAX_NS INT64_C(7258118400000000000)
#define CPU_MAX 8191

/* ---- writing ---- */

static void set(json_t *o, const char *key, json_t *v, bool *ok) {
        if (!v || json_object_set_new(o, key, v) < 0)
                *ok = false;
}

static json_t *contrib_json(const struct trace_contrib *c, bool with_count) {
        bool ok = true;
        json_t *o = json_object();
        if (!o)
                return NULL;
        bool thread = c->kind == TRACE_CULPRIT_THREAD;
        set(o, "kind", json_string(trace_culprit_kind_name(c->kind)), &ok);
        set(o, "name", json_string(c->name), &ok);
        set(o, "pid", thread && c->pid >= 0 ? json_integer(c->pid) : json_null(), &ok);
        set(o, "irq",
            c->kind == TRACE_CULPRIT_IRQ && c->irq >= 0 ? json_integer(c->irq) : json_null(), &ok);
        set(o, "policy", thread && c->policy[0] ? json_string(c->policy) : json_null(), &ok);
        set(o, "priority", thread && c->policy[0] ? json_integer(c->priority) : json_null(), &ok);
        set(o, "duration_ns", json_integer((json_int_t) MIN(c->duration_ns, (uint64_t) DAY_NS)),
            &ok);
        if (with_count)
                set(o, "count", json_integer(c->count), &ok);
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *trace_analysis_to_json(const struct trace_analysis *a) {
        bool ok = true;
        json_t *o = json_object(), *list = json_array();
        if (!o || !list) {
                json_decref(o);
                json_decref(list);
                return NULL;
        }
        set(o, "cpu", json_integer(a->cpu), &ok);
        set(o, "time_ns", json_integer(a->time_ns), &ok);
        set(o, "latency_ns", json_integer((json_int_t) MIN(a->latency_ns, (uint64_t) DAY_NS)), &ok);
        set(o, "timer_ns", json_integer((json_int_t) MIN(a->timer_ns, (uint64_t) DAY_NS)), &ok);
        set(o, "sched_ns", json_integer((json_int_t) MIN(a->sched_ns, (uint64_t) DAY_NS)), &ok);
        set(o, "return_ns", json_integer((json_int_t) MIN(a->return_ns, (uint64_t) DAY_NS)), &ok);
        set(o, "timer_seen", json_boolean(a->timer_seen), &ok);
        set(o, "switch_seen", json_boolean(a->switch_seen), &ok);
        set(o, "marker_seen", json_boolean(a->marker_seen), &ok);
        set(o, "lookback_ns", json_integer((json_int_t) MIN(a->lookback_ns, (uint64_t) DAY_NS)),
            &ok);
        set(o, "events", json_integer(a->nevents), &ok);
        set(o, "skipped", json_integer((json_int_t) MIN(a->skipped, (uint64_t) INT64_MAX)), &ok);
        set(o, "culprit", contrib_json(&a->culprit, false), &ok);
        set(o, "summary", json_string(a->summary), &ok);
        for (size_t i = 0; i < a->ncontribs; i++)
                if (json_array_append_new(list, contrib_json(&a->contribs[i], true)) < 0)
                        ok = false;
        set(o, "contributors", list, &ok);
        set(o, "others_ns", json_integer((json_int_t) MIN(a->others_ns, (uint64_t) DAY_NS)), &ok);
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* ---- reading ---- */

struct rd {
        char *err;
        char path[64];
};

_printf_(3, 4) static int refuse(struct rd *d, const char *key, const char *fmt, ...) {
        char msg[TRACE_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(d->err, TRACE_ERROR_MAX, "%s%s%s: %s", d->path, *d->path ? "." : "", key, msg);
        return -EBADMSG;
}

static int num(struct rd *d, json_t *o, const char *key, int64_t lo, int64_t hi, bool nullable,
               int64_t *ret) {
        json_t *v = json_object_get(o, key);
        if (!v)
                return refuse(d, key, "missing");
        if (nullable && json_is_null(v)) {
                *ret = -1;
                return 0;
        }
        if (!json_is_integer(v))
                return refuse(d, key, nullable ? "not an integer or null" : "not an integer");
        json_int_t x = json_integer_value(v);
        if (x < lo || x > hi)
                return refuse(d, key, "%lld is out of range (%" PRId64 " to %" PRId64 ")",
                              (long long) x, lo, hi);
        *ret = x;
        return 0;
}

static int flag(struct rd *d, json_t *o, const char *key, bool *ret) {
        json_t *v = json_object_get(o, key);
        if (!v)
                return refuse(d, key, "missing");
        if (!json_is_boolean(v))
                return refuse(d, key, "not true or false");
        *ret = json_is_true(v);
        return 0;
}

/* Text into a fixed buffer: one line of free text (text_ok(), as every text field of the
 * summary), at least one byte unless it may be null. */
static int text(struct rd *d, json_t *o, const char *key, char *buf, size_t size, bool nullable) {
        json_t *v = json_object_get(o, key);
        char why[TEXT_WHY_MAX];
        buf[0] = 0;
        if (!v)
                return refuse(d, key, "missing");
        if (nullable && json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return refuse(d, key, "not a string");
        size_t len = json_string_length(v);
        const char *s = json_string_value(v);
        if (strlen(s) != len)
                return refuse(d, key, "contains a NUL character");
        if (!text_ok(s, false, why))
                return refuse(d, key, "%s", why);
        if (len == 0 || len >= size)
                return refuse(d, key, "length %zu is out of range (1 to %zu)", len, size - 1);
        memcpy(buf, s, len + 1);
        return 0;
}

static int only(struct rd *d, json_t *o, const char *const *keys) {
        const char *k;
        json_t *v;
        json_object_foreach (o, k, v) {
                const char *const *p = keys;
                while (*p && strcmp(*p, k) != 0)
                        p++;
                if (!*p)
                        return refuse(d, k, "unknown field");
        }
        return 0;
}

static int read_contrib(struct rd *d, json_t *o, bool with_count, struct trace_contrib *ret) {
        static const char *const keys[] = { "kind",     "name",        "pid",   "irq", "policy",
                                            "priority", "duration_ns", "count", NULL };
        struct trace_contrib c = { .prio = INT32_MIN };
        char kind[16];
        int64_t pid, irq, prio = 0, dur, count = 0;
        int r;
        if (!json_is_object(o))
                return refuse(d, "", "not an object");
        if ((r = only(d, o, keys)) < 0 || (r = text(d, o, "kind", kind, sizeof(kind), false)) < 0 ||
            (r = text(d, o, "name", c.name, sizeof(c.name), false)) < 0 ||
            (r = num(d, o, "pid", 0, INT32_MAX, true, &pid)) < 0 ||
            (r = num(d, o, "irq", 0, INT32_MAX, true, &irq)) < 0 ||
            (r = text(d, o, "policy", c.policy, sizeof(c.policy), true)) < 0 ||
            (r = num(d, o, "duration_ns", 0, DAY_NS, false, &dur)) < 0 ||
            (with_count && (r = num(d, o, "count", 0, UINT32_MAX, false, &count)) < 0))
                return r;
        /* A priority is a nice value (-20 to 19) or a real-time one (1 to 99): -1 is valid,
         * so null is told apart here rather than by num(). */
        json_t *pv = json_object_get(o, "priority");
        if (!pv)
                return refuse(d, "priority", "missing");
        if (!json_is_null(pv) && (r = num(d, o, "priority", -20, 99, false, &prio)) < 0)
                return r;
        int k = trace_culprit_kind_from_name(kind);
        if (k < 0)
                return refuse(d, "kind", "\"%s\" is not thread, irq, softirq or unknown", kind);
        if (k == TRACE_CULPRIT_THREAD && pid < 0)
                return refuse(d, "pid", "a thread needs its pid");
        if (k != TRACE_CULPRIT_THREAD && pid >= 0)
                return refuse(d, "pid", "only a thread has one");
        if (k != TRACE_CULPRIT_THREAD && (c.policy[0] || !json_is_null(pv)))
                return refuse(d, c.policy[0] ? "policy" : "priority", "only a thread has one");
        if (k != TRACE_CULPRIT_IRQ && irq >= 0)
                return refuse(d, "irq", "only an irq has one");
        if (!with_count && json_object_get(o, "count"))
                return refuse(d, "count", "unknown field");
        c.kind = (uint8_t) k;
        c.pid = (int32_t) pid;
        c.irq = (int32_t) irq;
        c.priority = (int32_t) prio;
        c.duration_ns = (uint64_t) dur;
        c.count = (uint32_t) count;
        c.idle = k == TRACE_CULPRIT_THREAD && pid == 0;
        *ret = c;
        return 0;
}

static int read_contribs(struct rd *d, json_t *o, struct trace_analysis *a) {
        json_t *list = json_object_get(o, "contributors"), *x;
        size_t i;
        if (!list)
                return refuse(d, "contributors", "missing");
        if (!json_is_array(list))
                return refuse(d, "contributors", "not an array");
        if (json_array_size(list) > TRACE_CONTRIB_MAX)
                return refuse(d, "contributors", "%zu entries, at most %d allowed",
                              json_array_size(list), TRACE_CONTRIB_MAX);
        size_t at = strlen(d->path);
        json_array_foreach (list, i, x) {
                snprintf(d->path + at, sizeof(d->path) - at, "%scontributors[%zu]", at ? "." : "",
                         i);
                int r = read_contrib(d, x, true, &a->contribs[a->ncontribs++]);
                if (r < 0)
                        return r;
                d->path[at] = 0;
        }
        return 0;
}

int trace_analysis_from_json(json_t *o, struct trace_analysis *ret,
                             char err[static TRACE_ERROR_MAX]) {
        static const char *const keys[] = {
                "cpu",        "time_ns",     "latency_ns",   "timer_ns",    "sched_ns", "return_ns",
                "timer_seen", "switch_seen", "marker_seen",  "lookback_ns", "events",   "skipped",
                "culprit",    "summary",     "contributors", "others_ns",   NULL
        };
        struct rd d = { .err = err };
        struct trace_analysis a = {};
        int64_t cpu, t, lat, tm, sc, rt, lb, nev, sk, oth;
        int r;

        if (!json_is_object(o))
                return refuse(&d, "trace", "not an object");
        if ((r = only(&d, o, keys)) < 0 || (r = num(&d, o, "cpu", 0, CPU_MAX, false, &cpu)) < 0 ||
            (r = num(&d, o, "time_ns", TIME_MIN_NS, TIME_MAX_NS, false, &t)) < 0 ||
            (r = num(&d, o, "latency_ns", 0, DAY_NS, false, &lat)) < 0 ||
            (r = num(&d, o, "timer_ns", 0, DAY_NS, false, &tm)) < 0 ||
            (r = num(&d, o, "sched_ns", 0, DAY_NS, false, &sc)) < 0 ||
            (r = num(&d, o, "return_ns", 0, DAY_NS, false, &rt)) < 0 ||
            (r = flag(&d, o, "timer_seen", &a.timer_seen)) < 0 ||
            (r = flag(&d, o, "switch_seen", &a.switch_seen)) < 0 ||
            (r = flag(&d, o, "marker_seen", &a.marker_seen)) < 0 ||
            (r = num(&d, o, "lookback_ns", 0, DAY_NS, false, &lb)) < 0 ||
            (r = num(&d, o, "events", 0, 100000000, false, &nev)) < 0 ||
            (r = num(&d, o, "skipped", 0, INT64_MAX, false, &sk)) < 0 ||
            (r = num(&d, o, "others_ns", 0, DAY_NS, false, &oth)) < 0 ||
            (r = text(&d, o, "summary", a.summary, sizeof(a.summary), false)) < 0)
                return r;
        json_t *cul = json_object_get(o, "culprit");
        if (!cul)
                return refuse(&d, "culprit", "missing");
        snprintf(d.path, sizeof(d.path), "culprit");
        if ((r = read_contrib(&d, cul, false, &a.culprit)) < 0)
                return r;
        d.path[0] = 0;
        if ((r = read_contribs(&d, o, &a)) < 0)
                return r;
        if (tm + sc + rt > lat)
                return refuse(&d, "latency_ns", "less than timer_ns + sched_ns + return_ns");
        a.cpu = (int) cpu;
        a.time_ns = t;
        a.latency_ns = (uint64_t) lat;
        a.timer_ns = (uint64_t) tm;
        a.sched_ns = (uint64_t) sc;
        a.return_ns = (uint64_t) rt;
        a.lookback_ns = (uint64_t) lb;
        a.nevents = (uint32_t) nev;
        a.skipped = (uint64_t) sk;
        a.others_ns = (uint64_t) oth;
        *ret = a;
        return 0;
}

int trace_analysis_from_stored_json(json_t *o, struct trace_analysis *ret,
                                    char err[static TRACE_ERROR_MAX]) {
        /* An earlier rtsoakd let C1 controls and bidirectional overrides of a task's name
         * through: such a name becomes what this one makes of it, rather than its capture and
         * its interval being refused. */
        if (text_json_repair(o) < 0) {
                snprintf(err, TRACE_ERROR_MAX, "out of memory");
                return -ENOMEM;
        }
        return trace_analysis_from_json(o, ret, err);
}
