/* SPDX-License-Identifier: MIT */
/* The systemd watchdog thread: every half WATCHDOG_USEC it compares each part's progress with
 * what it saw last time and pings systemd only when all of them moved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "timeutil.h"
#include "watchdog.h"
#include "worker.h"

#define MARK_UNKNOWN UINT64_MAX

struct watchdog {
        struct watchdog_params p;
        struct watchdog_state st;
        struct worker *thread;
};

void heartbeat_hang_point(struct heartbeat *h) {
        /* Test-only: behave like a part stuck in a call that never returns, until released
         * (at shutdown, for parts that can be). */
        while (atomic_load_explicit(&h->test_hang, memory_order_relaxed)) {
                struct timespec ts = { 0, 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

void heartbeat_enter(struct heartbeat *h) {
        if (!h)
                return;
        atomic_store_explicit(&h->busy_ns, now_ns(CLOCK_MONOTONIC), memory_order_release);
        if (atomic_load_explicit(&h->test_hang, memory_order_relaxed))
                heartbeat_hang_point(h);
}

uint64_t watchdog_period_ns(void) {
        uint64_t usec = 0;
        /* Unset $WATCHDOG_USEC and $WATCHDOG_PID: the load generators must not see them. */
        if (sd_watchdog_enabled(1, &usec) <= 0 || usec == 0)
                return 0;
        return usec * NSEC_PER_USEC / 2;
}

static uint64_t probe_mark(const struct probe *p) {
        /* Slots published and samples in the open slot: one of them moves with every
         * wake-up (the sample count restarts with each slot). */
        uint64_t head = atomic_load_explicit(&p->head, memory_order_relaxed);
        uint64_t n = atomic_load_explicit(&p->progress, memory_order_relaxed);
        return (head << 40) ^ n;
}

static void append(char *buf, size_t len, const char *what) {
        size_t used = strlen(buf);
        if (used < len)
                snprintf(buf + used, len - used, "%s%s", used ? ", " : "", what);
}

bool watchdog_check(const struct watchdog_params *p, struct watchdog_state *st, int64_t now,
                    char *stalled, size_t len) {
        bool ok = true;
        char what[64];

        stalled[0] = 0;
        for (size_t i = 0; i < p->nprobes; i++) {
                const struct probe *pr = p->probes[i];
                uint64_t m = probe_mark(pr);
                bool running = probe_state(pr) == PROBE_RUNNING;
                if (running && st->probe_marks[i] != MARK_UNKNOWN && m == st->probe_marks[i]) {
                        snprintf(what, sizeof(what), "probe on CPU %d", pr->cpu);
                        append(stalled, len, what);
                        ok = false;
                }
                st->probe_marks[i] = running ? m : MARK_UNKNOWN;
        }
        size_t nparts = 0;
        while (p->parts[nparts])
                nparts++;
        bool stuck[nparts + 1];
        for (size_t i = 0; i < nparts; i++) {
                struct heartbeat *h = p->parts[i];
                bool active = atomic_load_explicit(&h->active, memory_order_relaxed);
                uint64_t beats = atomic_load_explicit(&h->beats, memory_order_relaxed);
                int64_t busy = atomic_load_explicit(&h->busy_ns, memory_order_acquire);
                stuck[i] = false;
                if (active && busy != 0 && st->last_check_ns != 0 && busy <= st->last_check_ns)
                        stuck[i] = true; /* in one call since before the last check */
                if (active && h->beating && st->part_marks[i] != MARK_UNKNOWN &&
                    beats == st->part_marks[i])
                        stuck[i] = true;
                st->part_marks[i] = active ? beats : MARK_UNKNOWN;
        }
        /* A missed beat while the same thread is inside a call of another part: the thread
         * is stuck there, however recently the call began. */
        for (size_t i = 0; i < nparts; i++) {
                const struct heartbeat *o = p->parts[i]->same_thread;
                if (!stuck[i] || !o || atomic_load_explicit(&o->busy_ns, memory_order_acquire) == 0)
                        continue;
                for (size_t j = 0; j < nparts; j++)
                        if (p->parts[j] == o)
                                stuck[j] = true;
        }
        for (size_t i = 0; i < nparts; i++)
                if (stuck[i]) {
                        append(stalled, len, p->parts[i]->name);
                        ok = false;
                }
        st->last_check_ns = now;
        return ok;
}

static void watchdog_main(void *userdata, struct worker *thread) {
        struct watchdog *w = userdata;
        char stalled[512], span[TIMESPAN_MAX_LEN];
        int64_t last_ok = now_ns(CLOCK_MONOTONIC);
        bool stalling = false;

        sd_notify(0, "WATCHDOG=1");
        while (worker_wait(thread, w->p.period_ns)) {
                int64_t now = now_ns(CLOCK_MONOTONIC);
                if (watchdog_check(&w->p, &w->st, now, stalled, sizeof(stalled))) {
                        sd_notify(0, "WATCHDOG=1");
                        if (stalling)
                                log_notice("Watchdog: every part makes progress again; "
                                           "pinging systemd again");
                        stalling = false;
                        last_ok = now;
                        continue;
                }
                if (stalling)
                        continue;
                stalling = true;
                /* Log first and stop pinging: recording the event may itself hang when
                 * storage is what is stuck. */
                log_error("Watchdog: no progress for %s from: %s; no more WATCHDOG=1 pings "
                          "(systemd restarts rtsoakd when its WatchdogSec= runs out)",
                          format_timespan(span, (uint64_t) (now - last_ok) / NSEC_PER_MSEC *
                                                        NSEC_PER_MSEC),
                          stalled);
                if (w->p.on_stall)
                        w->p.on_stall(w->p.userdata, stalled, (uint64_t) (now - last_ok));
        }
}

static void watchdog_free(struct watchdog *w) {
        free(w->st.probe_marks);
        free(w->st.part_marks);
        free(w);
}

int watchdog_start(const struct watchdog_params *p, struct watchdog **ret) {
        size_t nparts = 0;
        while (p->parts[nparts])
                nparts++;
        struct watchdog *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->p = *p;
        w->st.probe_marks = malloc((p->nprobes + 1) * sizeof(uint64_t));
        w->st.part_marks = malloc((nparts + 1) * sizeof(uint64_t));
        if (!w->st.probe_marks || !w->st.part_marks) {
                watchdog_free(w);
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->nprobes; i++)
                w->st.probe_marks[i] = MARK_UNKNOWN;
        for (size_t i = 0; i < nparts; i++)
                w->st.part_marks[i] = MARK_UNKNOWN;
        int r = worker_start("rtsoak-watchdog", watchdog_main, w, &w->thread);
        if (r < 0) {
                watchdog_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

void watchdog_stop(struct watchdog *w) {
        if (!w)
                return;
        worker_stop(w->thread);
        watchdog_free(w);
}
