/* SPDX-License-Identifier: MIT */
/* The run's record: what a run needs before it starts, its row in the local database (the
 * machine, the kernel, the configuration, the flight recorder), its events, and how it
 * ended. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "rt-setup.h"
#include "sha256.h"
#include "summary.h"
#include "timeutil.h"

void manager_add_event(struct manager *m, const char *type, int64_t value, const char *message) {
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = type,
                .cpu = -1,
                .value_ns = value,
                .message = message,
        };
        heartbeat_enter(&m->sd.hb_storage);
        int r = store_add_event(m->run.store, m->run.id, &ev);
        heartbeat_leave(&m->sd.hb_storage);
        if (r < 0)
                log_error("Failed to store a %s event (%s): %s", type, message,
                          store_error(m->run.store));
}

void manager_fail(struct manager *m, const char *fmt, ...) {
        va_list ap;
        m->end.failed = true;
        va_start(ap, fmt);
        vsnprintf(m->end.message, sizeof(m->end.message), fmt, ap);
        va_end(ap);
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
int manager_prepare_run(struct manager *m) {
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

/* The name the farm judges this run under: [Upload] Release=, else the kernel's release when
 * it makes a valid name (an odd one is still sent as the kernel's, and the farm judges by
 * that). */
static const char *run_release(const struct daemon_config *c, const struct sysinfo_run *si) {
        if (*c->upload_release)
                return c->upload_release;
        return summary_release_valid(si->kernel_release) ? si->kernel_release : NULL;
}

/* The run's row: the machine, the kernel, the configuration; earlier runs that did not end
 * cleanly are recorded as such on the way. */
int manager_begin_run_record(struct manager *m, const struct probe_params *pp, const char *text,
                             const char *cpus) {
        const struct sysinfo_run *si = &m->run.si;
        char digest[2 * SHA256_DIGEST_SIZE + 1];
        sha256_hex(text, strlen(text), digest);
        struct store_run_info info = {
                .machine_id = si->machine_id,
                .boot_id = si->boot_id,
                .hostname = si->hostname,
                .kernel_release = si->kernel_release,
                .kernel_version = si->kernel_version,
                .kernel_cmdline = si->kernel_cmdline,
                .preempt_model = si->preempt_model,
                .daemon_version = PROJECT_VERSION,
                .config_digest = digest,
                .config_text = text,
                .cpus = cpus,
                .release = run_release(&m->cfg, si),
                .priority = m->cfg.priority,
                .probe_interval_ns = m->cfg.probe_interval_ns,
                .interval_ns = m->cfg.interval_ns,
                .threshold_ns = m->cfg.threshold_ns,
                .hist_limit_us = pp->hist_limit_us,
                .start_ns = now_ns(CLOCK_REALTIME),
                .boot_ns = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_BOOTTIME),
                .kernel_leftovers = forensics_kernel_leftovers,
                .userdata = &m->run.forensics,
        };
        m->run.forensics = (struct forensics_params){
                .pstore_dir = m->cfg.pstore_dir,
                .journal_dir = m->cfg.journal_dir,
                .journal_lines = m->cfg.journal_lines,
                .pstore_max = 40 * 1024,
                .pstore_record_max = 16 * 1024,
                .journal_max = 16 * 1024,
        };
        unsigned unclean = 0;
        /* With upload on, everything from here on (the unclean ends of earlier runs too)
         * enters the outbox in the transaction that stores it. */
        if (m->up.token)
                store_set_outbox(m->run.store, true);
        int r = store_begin_run(m->run.store, &info, &m->run.id, &unclean);
        if (r < 0) {
                log_error("%s", store_error(m->run.store));
                return r;
        }
        if (unclean > 0)
                log_warning("%u earlier run(s) did not end cleanly; recorded as unclean_end events",
                            unclean);
        if (!store_vacuum_incremental(m->run.store))
                log_notice("%s was made before schema 4 and could not be rewritten for incremental "
                           "vacuum (larger than 256 MiB, or no room for the copy): pages freed by "
                           "retention are reused but the file does not shrink",
                           m->cfg.storage_path);
        return 0;
}

/* The trace flight recorder, or one notice of why there is none; both go into the run's
 * record and a "trace" event (which reaches the farm). */
int manager_start_tracing(struct manager *m, int64_t mono_to_real) {
        char msg[TRACE_MESSAGE_MAX];
        _cleanup_free_ char *json = NULL;
        struct tracing_params tp = {
                .cfg = &m->cfg,
                .probes = m->probes.p,
                .nprobes = m->probes.n,
                .mono_to_real_ns = mono_to_real,
        };
        int r = tracing_start(&tp, &m->tracing, &json, msg);
        if (r < 0)
                return r;
        if (m->tracing || !m->cfg.trace)
                log_info("T%s", msg + 1);
        else
                log_notice("T%s", msg + 1);
        heartbeat_enter(&m->sd.hb_storage);
        r = store_set_run_trace(m->run.store, m->run.id, json);
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = "trace",
                .cpu = -1,
                .value_ns = -1,
                .message = msg,
                .details = json,
        };
        if (r >= 0)
                r = store_add_event(m->run.store, m->run.id, &ev);
        heartbeat_leave(&m->sd.hb_storage);
        if (r < 0)
                log_error("Failed to record the trace flight recorder in the run: %s",
                          store_error(m->run.store));
        return 0;
}

/* After the main loop: the loads gone, the run recorded as ended, the last upload tried. */
int manager_finish_run(struct manager *m) {
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
