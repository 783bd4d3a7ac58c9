/* SPDX-License-Identifier: MIT */
/* The flight recorder's place in rtsoakd: started for the probes from [Trace], or one clear
 * notice of why not (the soak goes on without captures); what the run records about it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "daemon-config.h"
#include "probe.h"
#include "trace-capture.h"
#include "trace-recorder.h"

#define TRACE_MESSAGE_MAX 768

struct tracing;

struct tracing_params {
        const struct daemon_config *cfg;
        struct probe **probes;
        size_t nprobes;
        int64_t mono_to_real_ns;
};

/* Never fails the soak: *ret is NULL when the recorder is off or cannot run here.  ret_json
 * (malloc'ed) receives the run's record of it (state on/off/unavailable, the notice, whether
 * the kernel has the timerlat tracer, sizes) and message one sentence for the log and the
 * run's "trace" event.  Returns -ENOMEM only. */
int tracing_start(const struct tracing_params *p, struct tracing **ret, char **ret_json,
                  char message[static TRACE_MESSAGE_MAX]);
/* The capture thread, for the collector; NULL for NULL. */
struct trace_capture *tracing_capture(const struct tracing *t);
/* Logs what the capture thread has to say. */
void tracing_log_notices(struct tracing *t);
/* Stops capturing and removes the instance. */
void tracing_stop(struct tracing *t);
