/* SPDX-License-Identifier: MIT */
/* Starting and stopping the flight recorder (daemon/trace/) for rtsoakd's probes, and the
 * record a run keeps of it. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "timeutil.h"
#include "tracing.h"

/* The capture threads' SCHED_FIFO priority while they freeze and copy: above every load,
 * below every probe. */
#define CAPTURE_PRIORITY 1

struct tracing {
        struct trace_recorder *rec;
        struct trace_capture *cap;
};

static char *record_json(const struct daemon_config *cfg, const char *state, const char *notice,
                         bool timerlat, const struct trace_recorder *rec) {
        json_t *o = json_pack("{s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:I}", "state", state, "notice",
                              notice, "timerlat", timerlat, "path", cfg->trace_path, "instance",
                              cfg->trace_instance, "lookback_ns",
                              (json_int_t) cfg->trace_lookback_ns, "buffer_kib",
                              (json_int_t) (rec ? rec->buffer_kib : 0), "kernel_kib",
                              (json_int_t) (rec ? rec->total_kib : 0));
        if (o && rec) {
                json_object_set_new(o, "comm_cache", json_boolean(rec->comm_cache));
                json_object_set_new(o, "mounted", json_boolean(rec->mounted));
        }
        if (o && rec && rec->missing[0])
                json_object_set_new(o, "missing_events", json_string(rec->missing));
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return text;
}

static const char *timerlat_text(bool timerlat) {
        return timerlat ? "the kernel has the timerlat tracer"
                        : "the kernel has no timerlat tracer";
}

/* The instance on the probed CPUs (cpus), and the capture threads (for probes, which they
 * copy). */
static int open_recorder(const struct tracing_params *p, const int *cpus,
                         const struct trace_capture_probe *probes, struct tracing *t,
                         char why[static TRACE_WHY_MAX]) {
        const struct daemon_config *cfg = p->cfg;
        struct trace_params tp = {
                .path = cfg->trace_path,
                .instance = cfg->trace_instance,
                .lookback_ns = cfg->trace_lookback_ns,
                .buffer_kib = (cfg->trace_buffer_bytes + 1023) / 1024,
                .events = cfg->trace_events,
                .wakeup_filter = cfg->trace_all_wakeups ? NULL : TRACE_WAKEUP_FILTER,
                .cpus = cpus,
                .ncpus = p->nprobes,
        };
        int r = trace_recorder_open(&tp, &t->rec, why);
        if (r < 0)
                return r;
        struct trace_capture_params cp = {
                .recorder = t->rec,
                .probes = probes,
                .nprobes = p->nprobes,
                .lookback_ns = cfg->trace_lookback_ns,
                .rate_interval_ns = cfg->trace_rate_interval_ns,
                .rate_burst = (uint32_t) cfg->trace_rate_burst,
                .raw_max = cfg->trace_raw_max,
                .mono_to_real_ns = p->mono_to_real_ns,
                .priority = CAPTURE_PRIORITY,
        };
        r = trace_capture_start(&cp, &t->cap);
        if (r < 0)
                snprintf(why, TRACE_WHY_MAX, "cannot start the capture threads: %s", strerror(-r));
        return r;
}

static void on_message(const struct tracing_params *p, const struct trace_recorder *rec,
                       const char *tl, char message[static TRACE_MESSAGE_MAX]) {
        const char *path = p->cfg->trace_path;
        char span[TIMESPAN_MAX_LEN];
        snprintf(message, TRACE_MESSAGE_MAX,
                 "trace flight recorder on: %s%s%stracefs instance %s, %zu CPU%s, look-back %s, "
                 "%" PRIu64 " KiB per CPU (%" PRIu64 " KiB of kernel memory)%s%s%s%s%s%s%s; %s",
                 rec->mounted ? "tracefs was not mounted: mounted it at " : "",
                 rec->mounted ? path : "", rec->mounted ? "; " : "", rec->dir, p->nprobes,
                 p->nprobes == 1 ? "" : "s", format_timespan(span, p->cfg->trace_lookback_ns),
                 rec->buffer_kib, rec->total_kib, rec->missing[0] ? "; not in this kernel: " : "",
                 rec->missing,
                 rec->trigger ? ""
                              : "; no trigger on the marker (the "
                                "buffers freeze a little later)",
                 rec->filter_refused ? "; the kernel refused the wake-up filter (every "
                                       "wake-up is recorded)"
                                     : "",
                 rec->comm_cache ? "; the kernel's comm cache upkeep is on at every context "
                                   "switch ("
                                 : "",
                 rec->comm_cache ? rec->comm_cache_why : "", rec->comm_cache ? ")" : "", tl);
}

int tracing_start(const struct tracing_params *p, struct tracing **ret, char **ret_json,
                  char message[static TRACE_MESSAGE_MAX]) {
        const struct daemon_config *cfg = p->cfg;
        char why[TRACE_WHY_MAX] = "";
        bool timerlat = trace_kernel_has_timerlat(cfg->trace_path);
        const char *tl = timerlat_text(timerlat);
        *ret = NULL;
        if (!cfg->trace) {
                snprintf(message, TRACE_MESSAGE_MAX,
                         "trace flight recorder off ([Trace] Enabled=no); %s", tl);
                *ret_json = record_json(cfg, "off", "[Trace] Enabled=no", timerlat, NULL);
                return *ret_json ? 0 : -ENOMEM;
        }

        _cleanup_free_ int *cpus = calloc(p->nprobes, sizeof(int));
        _cleanup_free_ struct trace_capture_probe *probes = calloc(p->nprobes, sizeof(*probes));
        struct tracing *t = calloc(1, sizeof(*t));
        if (!cpus || !probes || !t) {
                free(t);
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->nprobes; i++) {
                cpus[i] = p->probes[i]->cpu;
                probes[i] = (struct trace_capture_probe){
                        .cpu = p->probes[i]->cpu,
                        .tid = &p->probes[i]->tid,
                        .trace = &p->probes[i]->trace,
                };
        }
        int r = open_recorder(p, cpus, probes, t, why);
        /* The recorder may have mounted tracefs: what the kernel offers is known now. */
        timerlat = trace_kernel_has_timerlat(cfg->trace_path);
        tl = timerlat_text(timerlat);
        if (r < 0) {
                tracing_stop(t);
                snprintf(message, TRACE_MESSAGE_MAX,
                         "trace flight recorder unavailable: %s; violations are recorded "
                         "without traces; %s",
                         why, tl);
                *ret_json = record_json(cfg, "unavailable", why, timerlat, NULL);
                return *ret_json ? 0 : -ENOMEM;
        }
        on_message(p, t->rec, tl, message);
        *ret_json = record_json(cfg, "on", "", timerlat, t->rec);
        if (!*ret_json) {
                tracing_stop(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

struct trace_capture *tracing_capture(const struct tracing *t) {
        return t ? t->cap : NULL;
}

void tracing_log_notices(struct tracing *t) {
        char buf[TRACE_NOTICE_MAX];
        while (t && t->cap && trace_capture_notice(t->cap, buf))
                log_notice("Trace flight recorder: %s", buf);
}

void tracing_stop(struct tracing *t) {
        if (!t)
                return;
        tracing_log_notices(t);
        trace_capture_stop(t->cap);
        trace_recorder_close(t->rec);
        free(t);
}
