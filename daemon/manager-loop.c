/* SPDX-License-Identifier: MIT */
/* The manager's main loop: signals, the poll that hands closed intervals to storage and the
 * uploader, the stop and its end, the flight record and housekeeping. */
#include <signal.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "timeutil.h"

/* A probe finishes within one period of being told to stop, unless something of higher
 * priority monopolises its CPU; then we stop without it rather than hang. */
#define STOP_TIMEOUT_NS (5 * NSEC_PER_SEC)

void manager_stop(struct manager *m, const char *why) {
        if (m->end.stopping)
                return;
        log_info("Stopping (%s)", why);
        m->end.stopping = true;
        /* The probes first: what follows writes to the store, and a probe that kept going
         * meanwhile would measure past the end the run was asked for. */
        atomic_store_explicit(&m->probes.ctl.stop, true, memory_order_release);
        m->end.deadline_mono = now_ns(CLOCK_MONOTONIC) + STOP_TIMEOUT_NS;
        manager_stop_loads(m);
        /* The watchdog ends with the service's running state; test faults that can be
         * released are, so that the stop completes. */
        watchdog_stop(m->sd.watchdog);
        m->sd.watchdog = NULL;
        manager_release_test_hang(m);
        housekeeping_stop_cpu_checks(m->loop.housekeeping);
        sd_notify(0, "STOPPING=1");
        /* Probes finish within one period; look again soon. */
        sd_event_source_set_time_relative(m->loop.poll_source, 10 * 1000);
        sd_event_source_set_enabled(m->loop.poll_source, SD_EVENT_ONESHOT);
}

/* The probes are done (or given up on): the last intervals stored, then the loop ends. */
static int finish_stop(struct manager *m) {
        int r = 0;
        manager_join_finished_probes(m);
        /* Storage may be failing: try a few times before giving up on the rest. */
        for (int attempt = 0; attempt < 5; attempt++) {
                r = collector_poll(m->iv.collector, now_ns(CLOCK_MONOTONIC), true);
                if (r >= 0)
                        break;
                struct timespec ts = { 0, 200 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        if (r < 0)
                manager_fail(m, "could not store the last interval: %s", store_error(m->run.store));
        return sd_event_exit(m->loop.event, 0);
}

/* When to look again: r is what the collector's poll returned. */
static uint64_t next_poll_usec(const struct manager *m, int64_t now, int r) {
        uint64_t next_usec;
        if (m->end.stopping)
                next_usec = 10 * 1000;
        else if (r < 0)
                next_usec = 1000 * 1000; /* storage trouble: retry each second */
        else {
                /* Sleep until the next boundary has passed and every probe has had a few
                 * periods to hand its slot over, then look again; while a CPU is late,
                 * look every 20 ms. */
                int64_t due = collector_next_due(m->iv.collector) +
                              2 * (int64_t) m->cfg.probe_interval_ns + 1000 * 1000;
                next_usec = due > now ? (uint64_t) (due - now) / 1000 : 20 * 1000;
                if (next_usec > 1000 * 1000)
                        next_usec = 1000 * 1000; /* also notices failed probes promptly */
                if (!m->sd.ready_sent)
                        next_usec = MIN(next_usec, 20 * 1000);
        }
        return MIN(next_usec, m->loop.poll_cap_usec);
}

/* A probe that failed fails the run, and stops it. */
static void check_probe_failures(struct manager *m) {
        const struct probe *p = m->end.failed ? NULL : manager_failed_probe(m);
        if (!p)
                return;
        manager_fail(m, "probe on CPU %d failed (%s): %s", p->cpu, p->stage, strerror(-p->error));
        log_error("%s", m->end.message);
        manager_stop(m, "a probe failed");
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        int64_t now = now_ns(CLOCK_MONOTONIC);

        (void) s;
        (void) usec;
        heartbeat_beat(&m->sd.hb_collector);
        tracing_log_notices(m->tracing);
        check_probe_failures(m);
        if (manager_check_ready(m) < 0)
                manager_stop(m, "the probes do not run as configured");
        /* The probes end a --duration themselves: stop here if its timer has not run yet, so
         * that the loads' last record is made before the last interval is written. */
        int64_t end = atomic_load_explicit(&m->probes.ctl.end_mono_ns, memory_order_relaxed);
        if (end > 0 && now >= end)
                manager_stop(m, "--duration reached");
        if (m->end.stopping && manager_probes_finished(m, now))
                return finish_stop(m);

        manager_advance_intervals(m, now);
        int r = collector_poll(m->iv.collector, now, false);
        if (r > 0) {
                if (m->up.uploader)
                        uploader_poke(m->up.uploader);
                manager_refresh_backlog(m);
        }
        if (m->sd.ready_sent && !m->end.stopping &&
            (r > 0 || now - m->sd.last_status_mono >= (int64_t) NSEC_PER_SEC))
                manager_notify_status(m);

        sd_event_source_set_time_relative(m->loop.poll_source, next_poll_usec(m, now, r));
        sd_event_source_set_enabled(m->loop.poll_source, SD_EVENT_ONESHOT);
        return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        (void) s;
        if (si->ssi_signo == SIGHUP) {
                if (!m->end.stopping)
                        manager_reload(m);
                return 0;
        }
        manager_stop(m, si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        return 0;
}

static int on_duration(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        manager_stop(userdata, "--duration reached");
        return 0;
}

int manager_arm_duration(struct manager *m, int64_t end_mono) {
        int r = sd_event_add_time(m->loop.event, NULL, CLOCK_MONOTONIC, (uint64_t) end_mono / 1000,
                                  1000, on_duration, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the --duration timer: %m");
        return 0;
}

static int on_flight(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        const struct scenario *sc = m->iv.loads ? loadsup_scenario(m->iv.loads) : NULL;
        int r = flightrec_write(m->loop.flight, now_ns(CLOCK_REALTIME), m->run.id,
                                sc ? sc->name : NULL, m->probes.p, m->probes.n,
                                load_records_last(&m->iv.records));
        if (r < 0)
                log_debug_errno(r, "Failed to write the flight record, ignoring: %m");
        r = sd_event_source_set_time(s, usec + 1000 * 1000);
        return r < 0 ? r : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* A line per second into pstore's pmsg (or the configured path), if there is one. */
static int start_flight_recorder(struct manager *m) {
        int r = flightrec_open(m->cfg.flight_recorder, &m->loop.flight);
        if (r < 0) {
                log_full_errno(LOG_LEVEL_INFO, r,
                               "[Forensics] FlightRecorder=%s: %m; the last stored interval is "
                               "the only record of the last moments",
                               m->cfg.flight_recorder);
                return 0;
        }
        if (r == 0) {
                log_info("Flight record off ([Forensics] FlightRecorder=off)");
                return 0;
        }
        log_info("Flight record: a line per second into %s", m->cfg.flight_recorder);
        return sd_event_add_time_relative(m->loop.event, &m->loop.flight_source, CLOCK_MONOTONIC,
                                          1000 * 1000, 10 * 1000, on_flight, m);
}

/* The main loop's sources: signals, the poll, the flight record and housekeeping. */
int manager_setup_event_loop(struct manager *m) {
        int r = sd_event_default(&m->loop.event);
        if (r >= 0)
                r = sd_event_add_signal(m->loop.event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->loop.event, NULL, SIGINT, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->loop.event, NULL, SIGHUP, on_signal, m);
        if (r >= 0)
                r = sd_event_add_time_relative(m->loop.event, &m->loop.poll_source, CLOCK_MONOTONIC,
                                               100 * 1000, 1000, on_poll, m);
        if (r >= 0)
                r = start_flight_recorder(m);
        if (r >= 0)
                r = housekeeping_start(m->loop.event,
                                       &(struct housekeeping_params){
                                               .store = m->run.store,
                                               .run_id = m->run.id,
                                               .retention_ns = m->cfg.retention_ns,
                                               .probes = m->probes.p,
                                               .nprobes = m->probes.n,
                                               .all_cpus = m->cfg.cpus.all,
                                       },
                                       &m->loop.housekeeping);
        if (r < 0)
                log_error_errno(r, "Failed to set up the event loop: %m");
        return r;
}
