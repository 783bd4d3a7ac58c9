/* SPDX-License-Identifier: MIT */
/* What a load generator calls while it runs: events, sleeping until a deadline, pacing to a
 * rate, and the hooks that do nothing for a generator that needs none.  Below the registry
 * (loadgen.c), which points at the generators. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "macro.h"
#include "timeutil.h"

int loadgen_check_nothing(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]) {
        return 0;
}

int loadgen_probe_nothing(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]) {
        return 0;
}

void loadgen_event(struct loadgen_ctx *ctx, const char *type, int64_t value, const char *fmt, ...) {
        char msg[400], line[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* One line per event; newlines in the message would split it. */
        for (char *p = msg; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        int n = snprintf(line, sizeof(line), "%s %" PRId64 " %s\n", type, value, msg);
        if (n < 0)
                return;
        if ((size_t) n >= sizeof(line)) {
                n = sizeof(line) - 1;
                line[n - 1] = '\n';
        }
        if (ctx->event_fd >= 0) {
                /* A pipe write of less than PIPE_BUF bytes is atomic: workers may race. */
                ssize_t w = write(ctx->event_fd, line, (size_t) n);
                (void) w;
        } else
                fprintf(stderr, "%s: %s: %s", ctx->info->name, type, line + strlen(type) + 1);
}

bool loadgen_sleep_until(struct loadgen_ctx *ctx, int64_t deadline_ns) {
        /* Slices of at most 50 ms, so that a stop request is noticed promptly. */
        for (;;) {
                if (loadgen_stopping(ctx))
                        return false;
                int64_t now = now_ns(CLOCK_MONOTONIC);
                if (now >= deadline_ns)
                        return true;
                int64_t until = MIN(deadline_ns, now + 50 * (int64_t) NSEC_PER_MSEC);
                struct timespec ts = { until / (int64_t) NSEC_PER_SEC,
                                       until % (int64_t) NSEC_PER_SEC };
                clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
}

void loadgen_pacer_init(struct loadgen_pacer *p, uint64_t rate) {
        *p = (struct loadgen_pacer){ .rate = rate, .start_ns = now_ns(CLOCK_MONOTONIC) };
}

bool loadgen_pace(struct loadgen_ctx *ctx, struct loadgen_pacer *p, uint64_t n) {
        if (p->rate == 0)
                return !loadgen_stopping(ctx);
        p->done += n;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        /* When the work is more than a second behind (the machine stalled us), forget the
         * debt instead of bursting to repay it. */
        double behind_s = (double) (now - p->start_ns) / 1e9 - (double) p->done / (double) p->rate;
        if (behind_s > 1.0)
                p->start_ns += (int64_t) ((behind_s - 1.0) * 1e9);
        int64_t due = p->start_ns + (int64_t) ((double) p->done * 1e9 / (double) p->rate);
        if (due > now)
                return loadgen_sleep_until(ctx, due);
        return !loadgen_stopping(ctx);
}
