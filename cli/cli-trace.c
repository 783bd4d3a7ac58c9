/* SPDX-License-Identifier: MIT */
/* The trace commands of rtsoak: lists of captures with their culprit, one capture explained
 * (timer and scheduling parts, what ran meanwhile), its raw events, and the status line. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-output.h"
#include "cli-trace.h"
#include "log.h"
#include "macro.h"
#include "text-safe.h"
#include "timeutil.h"
#include "trace-analysis.h"
#include "trace-raw.h"

/* Names and summaries hold task names, which any process chooses (bidirectional overrides,
 * bytes that are not UTF-8): escaped for the terminal, as every text from outside is. */
#define SAFE_MAX (4 * TRACE_SUMMARY_MAX)

static json_t *culprit_json(const struct trace_contrib *c) {
        bool thread = c->kind == TRACE_CULPRIT_THREAD;
        return json_pack("{s:s, s:s, s:o, s:o, s:o, s:I}", "kind", trace_culprit_kind_name(c->kind),
                         "name", c->name, "pid", thread ? json_integer(c->pid) : json_null(),
                         "policy", thread && c->policy[0] ? json_string(c->policy) : json_null(),
                         "priority",
                         thread && c->policy[0] ? json_integer(c->priority) : json_null(),
                         "duration_ns", (json_int_t) c->duration_ns);
}

/* The analysis stored with a row; on a damaged one, an error naming the capture. */
static int row_analysis(const struct store_trace_row *t, struct trace_analysis *ret) {
        char err[TRACE_ERROR_MAX];
        json_t *j = json_loads(t->analysis, 0, NULL);
        int r = j ? trace_analysis_from_stored_json(j, ret, err) : -EBADMSG;
        json_decref(j);
        if (r < 0)
                log_error("Trace capture %" PRId64 " is damaged: %s", t->id,
                          j ? err : "its analysis is not JSON");
        return r;
}

static json_t *row_json(const struct store_trace_row *t, const struct trace_analysis *a) {
        json_t *o = json_pack("{s:I, s:I, s:o, s:o, s:I, s:i, s:I, s:I, s:I, s:I, s:o, s:s, s:I}",
                              "id", (json_int_t) t->id, "run", (json_int_t) t->run_id, "interval",
                              t->seq >= 0 ? json_integer(t->seq) : json_null(), "time",
                              json_time(t->time_ns), "time_ns", (json_int_t) t->time_ns, "cpu",
                              t->cpu, "latency_ns", (json_int_t) a->latency_ns, "timer_ns",
                              (json_int_t) a->timer_ns, "sched_ns", (json_int_t) a->sched_ns,
                              "return_ns", (json_int_t) a->return_ns, "culprit",
                              culprit_json(&a->culprit), "summary", a->summary, "skipped",
                              (json_int_t) a->skipped);
        return o;
}

int cli_traces(store *s, const struct store_filter *f, size_t limit, bool json) {
        struct store_trace_row *t = NULL;
        size_t n = 0;
        int r = store_list_traces(s, f, limit, &t, &n);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        json_t *doc = json ? json_array() : NULL;
        if (!json && n == 0)
                printf("No trace captures in this window.\n");
        else if (!json)
                printf("%5s %-19s %5s %4s %12s  %s\n", "ID", "TIME", "RUN", "CPU", "LATENCY",
                       "CULPRIT");
        for (size_t i = 0; i < n && r >= 0; i++) {
                struct trace_analysis a;
                r = row_analysis(&t[i], &a);
                if (r < 0)
                        break;
                if (json) {
                        json_array_append_new(doc, row_json(&t[i], &a));
                        continue;
                }
                char ts[TIMESTAMP_MAX_LEN], us[32], sum[SAFE_MAX];
                fmt_us(us, t[i].latency_ns);
                printf("%5" PRId64 " %-19s %5" PRId64 " %4d %9s us  %s\n", t[i].id,
                       format_timestamp_local(ts, t[i].time_ns), t[i].run_id, t[i].cpu, us,
                       text_escape(a.summary, sum, sizeof(sum)));
        }
        if (json && r >= 0)
                r = print_json(doc);
        json_decref(doc);
        store_traces_free(t, n);
        return r;
}

/* The raw events' text, a line at a time, each escaped. */
static void raw_fputs(char *text) {
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = 0;
                text_fputs(line, stdout);
                fputc('\n', stdout);
        }
}

static void contrib_line(const struct trace_contrib *c) {
        char who[SAFE_MAX + 128], pid[96], us[32], name[SAFE_MAX];
        text_escape(c->name, name, sizeof(name));
        if (c->kind == TRACE_CULPRIT_THREAD && c->idle)
                snprintf(who, sizeof(who), "idle (nothing to run)");
        else if (c->kind == TRACE_CULPRIT_THREAD) {
                trace_contrib_who(c, pid, sizeof(pid));
                snprintf(who, sizeof(who), "%s (%s)", name, pid);
        } else if (c->kind == TRACE_CULPRIT_IRQ && c->irq >= 0)
                snprintf(who, sizeof(who), "%d (%s)", c->irq, name);
        else
                snprintf(who, sizeof(who), "%s", name);
        printf("    %-8s %-44s %10s us %5ux\n", trace_culprit_kind_name(c->kind), who,
               fmt_us(us, c->duration_ns), c->count);
}

/* One capture the way rtla's auto-analysis reads: the parts of the latency, the culprit and
 * what ran on the CPU meanwhile. */
static void print_analysis(const struct store_trace_row *t, const struct trace_analysis *a) {
        char ts[TIMESTAMP_MAX_LEN], b1[32], b2[32], b3[32], b4[32];
        printf("Trace %" PRId64 ": CPU %d, wake-up due %s (run %" PRId64, t->id, t->cpu,
               format_timestamp_local(ts, t->time_ns), t->run_id);
        if (t->seq >= 0)
                printf(", stored with interval %" PRId64, t->seq);
        printf(")\n\n");
        printf("  %-30s %10s us\n", "latency", fmt_us(b1, a->latency_ns));
        if (a->timer_seen) {
                printf("  %-30s %10s us  due time to the timer expiry that woke the probe\n",
                       "timer/IRQ latency", fmt_us(b2, a->timer_ns));
                if (a->switch_seen) {
                        printf("  %-30s %10s us  from there to the probe's switch-in\n",
                               "scheduling latency", fmt_us(b3, a->sched_ns));
                        printf("  %-30s %10s us  the probe's way back to its clock read\n",
                               "return to user space", fmt_us(b4, a->return_ns));
                } else
                        printf("  (the probe's switch-in is not in the events: no scheduling "
                               "part)\n");
        } else
                printf("  (the probe's wake-up is not in the events: no timer/scheduling "
                       "split)\n");
        char sum[SAFE_MAX];
        printf("\n  culprit: %s\n\n", text_escape(a->summary, sum, sizeof(sum)));
        printf("  What ran on CPU %d from the due time to the probe's switch-in:\n", t->cpu);
        for (size_t i = 0; i < a->ncontribs; i++)
                contrib_line(&a->contribs[i]);
        if (a->others_ns)
                printf("    %-53s %10s us\n", "(others)", fmt_us(b1, a->others_ns));
        printf("\n  %u events captured, reaching %s us before the due time%s; %" PRIu64
               " violation%s on this CPU not captured before this one.\n",
               a->nevents, fmt_us(b2, a->lookback_ns),
               a->marker_seen ? "" : " (the probe's marker is missing)", a->skipped,
               a->skipped == 1 ? "" : "s");
        if (t->raw_dropped)
                printf("  The raw events leave out the %" PRIu64 " oldest to fit the size cap.\n",
                       t->raw_dropped);
        printf("  Raw events: rtsoak trace %" PRId64 " --raw\n", t->id);
}

int cli_trace(store *s, int64_t id, bool raw, bool json) {
        struct store_trace_row t = {};
        struct trace_analysis a;
        int r = store_get_trace(s, id, raw, &t);
        if (r == -ENOENT) {
                log_error("trace %" PRId64 ": no such capture (rtsoak traces lists them)", id);
                return r;
        }
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        if (raw) {
                char *text = NULL;
                r = t.raw ? trace_raw_inflate(t.raw, t.raw_len, TRACE_RAW_TEXT_MAX, &text, NULL)
                          : -ENODATA;
                if (r == -ENODATA)
                        log_error("Trace capture %" PRId64 " has no raw events", id);
                else if (r < 0)
                        log_error("Trace capture %" PRId64 ": its raw events are damaged", id);
                else
                        raw_fputs(text);
                free(text);
        } else if ((r = row_analysis(&t, &a)) >= 0) {
                if (json) {
                        json_t *doc = row_json(&t, &a);
                        json_object_set_new(doc, "analysis", json_loads(t.analysis, 0, NULL));
                        r = print_json(doc);
                        json_decref(doc);
                } else
                        print_analysis(&t, &a);
        }
        store_trace_row_done(&t);
        return r;
}

json_t *cli_trace_status_json(store *s, int64_t run_id, uint64_t violations) {
        _cleanup_free_ char *text = NULL;
        struct store_trace_totals tt = {};
        if (store_get_run_trace(s, run_id, &text) < 0 || !text ||
            store_trace_totals(s, run_id, &tt) < 0)
                return json_null();
        json_t *o = json_loads(text, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return json_null();
        }
        json_object_set_new(o, "captures", json_u64(tt.captures));
        /* Every violation of the run was captured or not. */
        json_object_set_new(o, "skipped",
                            json_u64(violations > tt.captures ? violations - tt.captures : 0));
        return o;
}

void cli_trace_status_print(store *s, int64_t run_id, uint64_t violations) {
        json_t *o = cli_trace_status_json(s, run_id, violations);
        char span[TIMESPAN_MAX_LEN];
        const char *state = json_string_value(json_object_get(o, "state"));
        const char *notice = json_string_value(json_object_get(o, "notice")) ?: "";
        const char *tl = json_is_true(json_object_get(o, "timerlat"))
                                 ? "the kernel has the timerlat tracer"
                                 : "the kernel has no timerlat tracer";
        if (!state)
                printf("  Trace:    not recorded (a run of an rtsoakd without the flight "
                       "recorder)\n");
        else if (strcmp(state, "on") == 0)
                printf("  Trace:    on (instance %s, look-back %s, %" PRId64
                       " KiB per CPU); %" PRId64 " capture%s, %" PRId64
                       " violation%s not captured; %s\n",
                       json_string_value(json_object_get(o, "instance")) ?: "?",
                       format_timespan(span, (uint64_t) json_integer_value(
                                                     json_object_get(o, "lookback_ns"))),
                       (int64_t) json_integer_value(json_object_get(o, "buffer_kib")),
                       (int64_t) json_integer_value(json_object_get(o, "captures")),
                       json_integer_value(json_object_get(o, "captures")) == 1 ? "" : "s",
                       (int64_t) json_integer_value(json_object_get(o, "skipped")),
                       json_integer_value(json_object_get(o, "skipped")) == 1 ? "" : "s", tl);
        else if (strcmp(state, "off") == 0)
                printf("  Trace:    off (%s): violations are recorded without traces; %s\n", notice,
                       tl);
        else
                printf("  Trace:    unavailable: %s; violations are recorded without traces; %s\n",
                       notice, tl);
        json_decref(o);
}
