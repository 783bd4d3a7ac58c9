/* SPDX-License-Identifier: MIT */
/* What the manager tells systemd: READY=1 once the probes measure as configured, a status
 * line, and the watchdog with the parts it checks; the test-only fault that makes one hang. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "notify.h"
#include "timeutil.h"

/* With a watchdog, every part shows life well within one ping period. */
void manager_init_heartbeats(struct manager *m) {
        struct manager_systemd *sd = &m->sd;
        sd->watchdog_period_ns = watchdog_period_ns();
        m->loop.poll_cap_usec = 1000 * 1000;
        if (sd->watchdog_period_ns > 0)
                m->loop.poll_cap_usec = MIN(m->loop.poll_cap_usec,
                                            sd->watchdog_period_ns / 4 / 1000);
        m->loop.poll_cap_usec = MAX(m->loop.poll_cap_usec, 1000);
        sd->hb_collector = (struct heartbeat){ .name = "collector", .beating = true };
        sd->hb_storage = (struct heartbeat){ .name = "storage writer" };
        sd->hb_uploader = (struct heartbeat){ .name = "uploader", .beating = true };
        sd->hb_collector.same_thread = &sd->hb_storage; /* both on the main thread */
        atomic_store(&sd->hb_collector.active, true);
        atomic_store(&sd->hb_storage.active, true);
}

/* One line for "systemctl status": the scenario, the worst wake-up of the interval now
 * running (what the probes publish for their open slot), and the upload backlog. */
void manager_notify_status(struct manager *m) {
        const struct scenario *sc = m->iv.loads ? loadsup_scenario(m->iv.loads) : NULL;
        struct collector_stats st;
        char upload[64] = "upload off", last[64] = "last interval none";
        uint64_t worst = 0;
        int worst_cpu = -1;

        for (size_t i = 0; i < m->probes.n; i++) {
                uint64_t v = atomic_load_explicit(&m->probes.p[i]->open_max_ns,
                                                  memory_order_relaxed);
                if (worst_cpu < 0 || v > worst) {
                        worst = v;
                        worst_cpu = m->probes.p[i]->cpu;
                }
        }
        collector_get_stats(m->iv.collector, &st);
        if (m->up.token)
                snprintf(upload, sizeof(upload), "upload backlog %" PRIu64 " rows", m->up.backlog);
        /* Just after a boundary the open interval has little to show: the last one too. */
        if (st.intervals_written > 0)
                snprintf(last, sizeof(last), "last interval %.1f us (CPU %d)",
                         (double) st.last_max_ns / 1000.0, st.last_max_cpu);
        sd_notifyf(0,
                   "STATUS=Scenario %s; worst this interval %.1f us (CPU %d); %s; %s; %" PRIu64
                   " intervals stored, %" PRIu64 " violations",
                   sc ? sc->name : "none", (double) worst / 1000.0, worst_cpu, last, upload,
                   st.intervals_written, st.total_violations);
        m->sd.last_status_mono = now_ns(CLOCK_MONOTONIC);
}

/* Called from the watchdog thread once per stall, after its pings stopped: the stall goes
 * into storage through a connection of its own (the main thread may be the one stuck). */
static void on_watchdog_stall(void *userdata, const char *parts, uint64_t stalled_ns) {
        struct manager *m = userdata;
        char err[STORE_ERROR_MAX], msg[768], span[TIMESPAN_MAX_LEN];
        store *s = NULL;

        snprintf(msg, sizeof(msg), "no progress for %s from: %s; systemd watchdog pings stopped",
                 format_timespan(span, stalled_ns / NSEC_PER_MSEC * NSEC_PER_MSEC), parts);
        int r = store_open(m->run.db_path, STORE_UPLOADER, &s, err);
        if (r < 0) {
                log_error("Watchdog: cannot record the stall in storage: %s", err);
                return;
        }
        store_set_outbox(s, atomic_load(&m->up.outbox_on));
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = "watchdog_stall",
                .cpu = -1,
                .value_ns = (int64_t) stalled_ns,
                .message = msg,
        };
        r = store_add_event(s, m->run.id, &ev);
        if (r < 0)
                log_error("Watchdog: cannot record the stall in storage: %s", store_error(s));
        else
                log_info("Watchdog: stall recorded as a watchdog_stall event");
        store_close(s);
}

static void start_watchdog(struct manager *m) {
        struct manager_systemd *sd = &m->sd;
        char span[TIMESPAN_MAX_LEN];
        /* Storage first: when the main thread is stuck in it, it is the cause. */
        sd->parts[0] = &sd->hb_storage;
        sd->parts[1] = &sd->hb_collector;
        sd->parts[2] = &sd->hb_uploader;
        sd->parts[3] = NULL;
        struct watchdog_params wp = {
                .period_ns = sd->watchdog_period_ns,
                .probes = m->probes.p,
                .nprobes = m->probes.n,
                .parts = sd->parts,
                .on_stall = on_watchdog_stall,
                .userdata = m,
        };
        int r = watchdog_start(&wp, &sd->watchdog);
        if (r < 0)
                log_error_errno(r, "Failed to start the watchdog thread: %m");
        else
                log_info("Watchdog: pinging systemd every %s while every part makes progress",
                         format_timespan(span, sd->watchdog_period_ns));
}

/* Test-only (RTSOAKD_TEST_HANG): makes one part hang, as if stuck, for the watchdog tests.  A
 * probe is told through the probes' control, which it reads at its next interval boundary. */
static int on_test_hang(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        const char *part = m->sd.test_hang.part;
        (void) s;
        (void) usec;
        log_warning("Test fault RTSOAKD_TEST_HANG=%s: that part hangs now", part);
        if (strcmp(part, "collector") == 0)
                atomic_store(&m->sd.hb_collector.test_hang, true);
        else if (strcmp(part, "storage") == 0)
                atomic_store(&m->sd.hb_storage.test_hang, true);
        else if (strcmp(part, "uploader") == 0)
                atomic_store(&m->sd.hb_uploader.test_hang, true);
        else
                atomic_store(&m->probes.ctl.test_hang_cpu, m->probes.p[0]->cpu + 1);
        return 0;
}

/* The test faults that can be released are, so that a stop completes. */
void manager_release_test_hang(struct manager *m) {
        atomic_store(&m->sd.hb_uploader.test_hang, false);
}

int manager_parse_test_hang(struct manager *m) {
        const char *v = getenv("RTSOAKD_TEST_HANG"), *after = getenv("RTSOAKD_TEST_HANG_AFTER");
        const char *reason = NULL;
        if (!v || !*v)
                return 0;
        if (strcmp(v, "collector") != 0 && strcmp(v, "storage") != 0 &&
            strcmp(v, "uploader") != 0 && strcmp(v, "probe") != 0) {
                log_error("RTSOAKD_TEST_HANG=%s: not one of collector, storage, uploader, probe",
                          v);
                return -EINVAL;
        }
        if (strcmp(v, "uploader") == 0 && !*m->cfg.upload_server) {
                log_error("RTSOAKD_TEST_HANG=uploader: no uploader runs ([Upload] Server= is "
                          "empty)");
                return -EINVAL;
        }
        m->sd.test_hang.after_ns = 3 * NSEC_PER_SEC;
        if (after && parse_timespan(after, &m->sd.test_hang.after_ns, &reason) < 0) {
                log_error("RTSOAKD_TEST_HANG_AFTER=%s: %s", after, reason);
                return -EINVAL;
        }
        m->sd.test_hang.part = v;
        log_warning("Test fault RTSOAKD_TEST_HANG=%s set: that part will hang on purpose (for "
                    "tests only)",
                    v);
        return 0;
}

static void arm_test_hang(struct manager *m) {
        int r = sd_event_add_time_relative(m->loop.event, NULL, CLOCK_MONOTONIC,
                                           m->sd.test_hang.after_ns / 1000, 1000, on_test_hang, m);
        if (r < 0)
                log_error_errno(r, "Failed to arm the test fault: %m");
}

/* READY=1 once every probe thread measures, and runs (as the kernel says, not as we asked)
 * at its real-time priority, on its CPU, in locked memory; then the watchdog starts.  <0 when
 * the probes do not run as configured: the run has failed, and is to stop. */
int manager_check_ready(struct manager *m) {
        char why[1024];

        if (m->sd.ready_sent || m->end.stopping ||
            !notify_probes_measuring(m->probes.p, m->probes.n))
                return 0;
        /* A probed CPU that went offline during the start is recorded (and its probe pinned
         * again if it is back) before the probes are judged. */
        housekeeping_check_cpus(m->loop.housekeeping);
        int r = notify_verify_probes(m->probes.p, m->probes.n, (int) m->cfg.priority,
                                     m->cfg.lock_memory, why, sizeof(why));
        if (r < 0) {
                log_error("Not ready: %s", why);
                manager_fail(m, "%s", why);
                return r;
        }
        m->sd.ready_sent = true;
        log_info("Ready: %zu probe thread(s) measuring at SCHED_FIFO %" PRIu64 ", pinned%s",
                 m->probes.n, m->cfg.priority,
                 m->cfg.lock_memory ? ", in locked memory" : " (memory not locked)");
        manager_refresh_backlog(m);
        sd_notify(0, "READY=1");
        manager_notify_status(m);

        if (m->sd.watchdog_period_ns > 0)
                start_watchdog(m);
        if (m->sd.test_hang.part)
                arm_test_hang(m);
        return 0;
}
