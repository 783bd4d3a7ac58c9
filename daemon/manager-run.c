/* SPDX-License-Identifier: MIT */
/* The run's record: its row in the local database (the machine, the kernel, the
 * configuration, the flight recorder), its events, and how it fails. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
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

/* The name the farm judges this run under: [Upload] Release=, else the kernel's release.  One
 * that is not a release name is not sent: with uploads on, daemon_config_load() refused it
 * before (the farm would refuse every upload); without, nothing is sent anyway. */
static const char *run_release(const struct daemon_config *c, const struct sysinfo_run *si) {
        char why[NAME_WHY_MAX];
        if (*c->upload_release)
                return c->upload_release;
        return name_ok(&summary_name_release, si->kernel_release, why) ? si->kernel_release : NULL;
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
