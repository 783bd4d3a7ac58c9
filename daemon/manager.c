/* SPDX-License-Identifier: MIT */
/* The manager's life: made from the configuration main() loaded, it prepares the run, starts
 * the probes and everything around them, runs the main loop and records how the run ended.
 * The manager's parts call only parts below them: run and upload at the bottom; probes,
 * intervals and status above them; reload; the main loop; this file at the top. */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config.h"
#include "interval.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "rt-setup.h"
#include "timeutil.h"

#define STACK_PREFAULT (64 * 1024)

struct manager *manager_new(struct daemon_config *cfg, const struct manager_options *o) {
        struct manager *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->cfg = *cfg;
        *cfg = (struct daemon_config){};
        m->opts = *o;
        m->probes.dma_fd = -1;
        return m;
}

/* Locked memory and the DMA latency hold: EXIT_SUCCESS to go on, else how to exit. */
static int prepare_realtime(struct manager *m) {
        if (m->cfg.lock_memory) {
                char why[1024];
                int r = rt_lock_memory(why, sizeof(why));
                if (r < 0) {
                        log_error("%s", why);
                        return EXIT_UNAVAILABLE;
                }
        } else
                log_warning("[Probe] LockMemory=no: page faults may be measured as latency");
        if (m->cfg.dma_latency_ns >= 0) {
                char why[512];
                m->probes.dma_fd = rt_hold_dma_latency((uint32_t) (m->cfg.dma_latency_ns / 1000),
                                                       why, sizeof(why));
                if (m->probes.dma_fd < 0)
                        log_warning("%s", why);
        }
        return EXIT_SUCCESS;
}

/* Signals are handled by the event loop; block them before any thread exists so that the
 * probe threads never get interrupted by one. */
static void block_signals(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
}

/* What a run needs before anything starts: the CPUs, the heartbeats, the token, the store,
 * locked memory and the DMA latency hold (the load user was found by daemon_config_load()).
 * EXIT_SUCCESS to go on, else how to exit. */
static int prepare_run(struct manager *m) {
        char err[STORE_ERROR_MAX];
        int r = manager_resolve_cpus(m);
        if (r < 0)
                return EXIT_CONFIG;
        if (manager_parse_test_hang(m) < 0)
                return EXIT_CONFIG;
        m->run.db_path = strdup(m->cfg.storage_path);
        if (!m->run.db_path)
                return log_oom(), EXIT_FAILURE;
        manager_init_heartbeats(m);
        if (*m->cfg.upload_server) {
                r = manager_read_token(m->cfg.upload_token_file, m->cfg.upload_server,
                                       &m->up.token);
                if (r < 0)
                        return EXIT_CONFIG;
        }
        sysinfo_read(&m->run.si);
        if (manager_inventory_read_boot(m) < 0)
                return EXIT_FAILURE;

        r = store_open(m->cfg.storage_path, STORE_WRITER, &m->run.store, err);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_FAILURE;
        }
        r = prepare_realtime(m);
        if (r != EXIT_SUCCESS)
                return r;
        block_signals();
        return EXIT_SUCCESS;
}

/* After the main loop: the loads gone, the run recorded as ended, the last upload tried. */
static int finish_run(struct manager *m) {
        loadsup_free(m->iv.loads);
        m->iv.loads = NULL;
        tracing_stop(m->tracing);
        m->tracing = NULL;

        int64_t end = now_ns(CLOCK_REALTIME);
        int r = store_end_run(m->run.store, m->run.id, end, m->end.failed ? "error" : "clean",
                              m->end.failed ? m->end.message : NULL);
        if (r < 0) {
                log_error("%s", store_error(m->run.store));
                return EXIT_FAILURE;
        }
        if (m->up.uploader) {
                /* The last interval leaves now if the server is there; if not, it stays in
                 * the outbox for the next start. */
                if (!uploader_flush(m->up.uploader, 2 * NSEC_PER_SEC))
                        log_info("Upload backlog kept for the next start");
                manager_stop_uploader(m);
        }
        struct collector_stats st;
        collector_get_stats(m->iv.collector, &st);
        log_info("Run %" PRId64 " ended %s: %" PRIu64 " intervals stored, %" PRIu64 " violations",
                 m->run.id, m->end.failed ? "with an error" : "cleanly", st.intervals_written,
                 st.total_violations);
        if (m->end.failed)
                return m->end.unavailable ? EXIT_UNAVAILABLE : EXIT_FAILURE;
        return EXIT_SUCCESS;
}

/* What the probes are told.  Interval k starts at a multiple of the interval length in
 * wall-clock time, so that every CPU, and every machine of a farm, closes at the same
 * boundary. */
static struct probe_params probe_params(const struct daemon_config *c, int64_t mono_to_real) {
        int64_t start_real = now_ns(CLOCK_MONOTONIC) + mono_to_real;
        int64_t base_real = interval_align(start_real, (int64_t) c->interval_ns);
        return (struct probe_params){
                .interval_ns = c->probe_interval_ns,
                .threshold_ns = c->threshold_ns,
                .hist_limit_us = (uint32_t) (c->hist_limit_ns / 1000),
                .period_ns = c->interval_ns,
                .base_mono_ns = base_real - mono_to_real,
                .priority = (int) c->priority,
                .stack_prefault = STACK_PREFAULT,
        };
}

/* The probes measure from here on, and the loads start: their first interval is measured
 * under load.  --duration is measured time: it counts from the probes' start. */
static int go(struct manager *m, const struct probe_params *pp, int64_t mono_to_real) {
        int64_t now_mono = now_ns(CLOCK_MONOTONIC), end;
        int r = manager_go(m, pp, mono_to_real, now_mono, &end);
        if (r >= 0 && m->opts.duration_ns > 0)
                r = manager_arm_duration(m, end);
        if (r >= 0)
                manager_start_scenario(m, now_mono + mono_to_real, now_mono);
        return r;
}

/* Everything around the probes, once they are ready: the run's record, the flight recorder,
 * the uploader, the collector and the main loop; then the probes measure and the loads
 * start. */
static int start_around_probes(struct manager *m, const struct probe_params *pp, int64_t off,
                               const char *text, const char *cpus) {
        int r = manager_begin_run_record(m, pp, text, cpus);
        if (r >= 0 && (r = manager_start_tracing(m, off)) < 0)
                log_oom();
        if (r >= 0)
                r = manager_inventory_record_first(m);
        atomic_store(&m->up.outbox_on, m->up.token != NULL);
        if (r >= 0 && m->up.token)
                r = manager_start_uploader(m);
        if (r >= 0)
                r = manager_start_collector(m, pp, off);
        if (r >= 0)
                r = manager_setup_event_loop(m);
        if (r >= 0)
                r = manager_inventory_arm(m);
        if (r >= 0)
                r = go(m, pp, off);
        return r;
}

/* The probes, and everything around them; EXIT_SUCCESS once they measure, else how to
 * exit. */
static int start(struct manager *m, const char *cpus) {
        char span[TIMESPAN_MAX_LEN], span2[TIMESPAN_MAX_LEN], span3[TIMESPAN_MAX_LEN];
        _cleanup_free_ char *text = daemon_config_text(&m->cfg);
        if (!text)
                return log_oom(), EXIT_FAILURE;

        int64_t off = realtime_offset_ns();
        struct probe_params pp = probe_params(&m->cfg, off);
        atomic_store_explicit(&m->probes.ctl.threshold_ns, m->cfg.threshold_ns,
                              memory_order_relaxed);
        int r = manager_start_probes(m, &pp);
        if (r < 0) {
                manager_stop_probes(m);
                return m->end.unavailable ? EXIT_UNAVAILABLE : EXIT_FAILURE;
        }
        r = start_around_probes(m, &pp, off, text, cpus);
        if (r < 0) {
                manager_stop_probes(m);
                return EXIT_FAILURE;
        }
        log_info("Run %" PRId64 ": probing CPUs %s at SCHED_FIFO %" PRIu64 " every %s, threshold "
                 "%s, intervals of %s into %s",
                 m->run.id, cpus, m->cfg.priority, format_timespan(span, m->cfg.probe_interval_ns),
                 format_timespan(span2, m->cfg.threshold_ns),
                 format_timespan(span3, m->cfg.interval_ns), m->cfg.storage_path);
        /* READY=1 follows from the main loop once the probes measure (manager_check_ready()). */
        sd_notifyf(0, "STATUS=Run %" PRId64 ": starting the probes on CPUs %s", m->run.id, cpus);
        return EXIT_SUCCESS;
}

int manager_run(struct manager *m) {
        int r = prepare_run(m);
        if (r != EXIT_SUCCESS)
                return r;
        /* The run's CPUs whole, however scattered: the farm learns from this list which CPUs
         * the run probes. */
        _cleanup_free_ char *cpus = malloc(CPUSET_TEXT_MAX);
        if (!cpus || cpuset_format(&m->probes.cpus, cpus, CPUSET_TEXT_MAX) < 0)
                return log_oom(), EXIT_FAILURE;
        r = start(m, cpus);
        if (r != EXIT_SUCCESS)
                return r;

        r = sd_event_loop(m->loop.event);
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                manager_stop_probes(m);
                manager_fail(m, "event loop failed: %s", strerror(-r));
        }
        /* Every load process is gone before the run is recorded as ended. */
        return finish_run(m);
}

void manager_free(struct manager *m) {
        if (!m)
                return;
        watchdog_stop(m->sd.watchdog);
        tracing_stop(m->tracing);
        uploader_stop(m->up.uploader);
        if (m->up.token)
                explicit_bzero(m->up.token, strlen(m->up.token));
        free(m->up.token);
        loadsup_free(m->iv.loads);
        load_records_free(&m->iv.records);
        collector_free(m->iv.collector);
        for (size_t i = 0; i < m->probes.n; i++)
                if (!m->probes.p[i]->thread_started)
                        probe_free(m->probes.p[i]);
        free(m->probes.p);
        sd_event_source_unref(m->loop.poll_source);
        sd_event_source_unref(m->loop.flight_source);
        housekeeping_free(m->loop.housekeeping);
        manager_inventory_free(m);
        flightrec_free(m->loop.flight);
        sd_event_unref(m->loop.event);
        store_close(m->run.store);
        if (m->probes.dma_fd >= 0)
                close(m->probes.dma_fd);
        cpuset_done(&m->probes.cpus);
        daemon_config_free(&m->cfg);
        for (size_t i = 0; i < m->retired.n; i++)
                daemon_config_free(&m->retired.cfgs[i]);
        free(m->retired.cfgs);
        free(m->run.db_path);
        free(m);
}
