/* SPDX-License-Identifier: MIT */
/* rtsoakd: loads the configuration, starts one real-time probe thread per CPU, and runs the
 * main loop (signals, interval collection, systemd notification) until told to stop. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "collector.h"
#include "config.h"
#include "daemon-config.h"
#include "forensics.h"
#include "housekeeping.h"
#include "interval.h"
#include "load-records.h"
#include "loadsup.h"
#include "log.h"
#include "macro.h"
#include "notify.h"
#include "probe.h"
#include "reload.h"
#include "rt-setup.h"
#include "sha256.h"
#include "store.h"
#include "summary.h"
#include "sysinfo.h"
#include "timeutil.h"
#include "token-file.h"
#include "tracing.h"
#include "uploader.h"
#include "watchdog.h"

#define STACK_PREFAULT (64 * 1024)
/* A probe finishes within one period of being told to stop, unless something of higher
 * priority monopolises its CPU; then we stop without it rather than hang. */
#define STOP_TIMEOUT_NS (5 * NSEC_PER_SEC)

struct daemon {
        struct daemon_config cfg;
        struct cpuset cpus; /* resolved list */
        store *store;
        int64_t run_id;
        struct probe_control ctl;
        struct probe **probes;
        size_t nprobes;
        struct collector *collector;
        sd_event *event;
        sd_event_source *poll_source;
        bool stopping;
        int64_t stop_deadline_mono; /* give up waiting for probes to finish after this */
        bool failed;
        bool unavailable; /* what failed was this machine refusing to let it measure */
        char fail_message[512];
        int dma_fd;

        /* Load scenarios: the supervisor, and what the loads did in each interval not yet
         * stored (normally one or two; more only while storage fails). */
        struct uploader *uploader; /* NULL: no upload configured */
        char *token;

        struct loadsup *loads;
        struct load_records records;
        bool loads_recorded_to_end; /* stop() made the last, partial interval's record */
        uint64_t cur_k;             /* the interval now running */
        int64_t next_boundary_mono; /* when it ends */
        int64_t base_mono, mono_to_real;

        /* systemd: readiness, status, the watchdog, reloads. */
        const char *config_path;
        bool explicit_config;
        char *const *sets;
        struct sysinfo_run si;
        char *db_path; /* a copy the watchdog thread may read */
        _Atomic bool outbox_on;
        bool ready_sent;
        uint64_t backlog; /* pending outbox rows at the last look */
        int64_t last_status_mono;
        uint64_t poll_cap_usec; /* the main loop turns at least this often */
        struct heartbeat hb_collector, hb_storage, hb_uploader;
        struct heartbeat *parts[4]; /* what the watchdog checks besides the probes */
        struct watchdog *watchdog;
        uint64_t watchdog_period_ns;
        const char *test_hang; /* RTSOAKD_TEST_HANG (test-only), NULL: none */
        uint64_t test_hang_after_ns;
        /* Configurations replaced by a reload: the loads and the interval records may still
         * point at their scenarios, so they live until the end. */
        struct daemon_config *retired;
        size_t nretired;
        struct forensics_params forensics;
        struct flightrec *flight; /* NULL: no flight recorder */
        sd_event_source *flight_source;
        struct housekeeping *housekeeping;
        struct tracing *tracing; /* NULL: no flight recorder */
};

static void usage(FILE *f) {
        fprintf(f,
                "Usage: rtsoakd [OPTIONS]\n"
                "Measures timer wake-up latency on every configured CPU, forever, and stores\n"
                "per-interval worst cases and histograms.\n\n"
                "  -c, --config FILE        configuration file (default " DAEMON_CONFIG_PATH ");\n"
                "                           drop-ins are read from FILE.d/*.conf\n"
                "  -s, --set SECTION.KEY=VALUE\n"
                "                           override one key (repeatable, applied last)\n"
                "  -d, --duration TIME      stop cleanly after TIME (e.g. 30s, 1h)\n"
                "      --check-config       print the effective configuration and exit\n"
                "  -v, --verbose            log debug messages\n"
                "  -h, --help               show this help\n"
                "      --version            show the version\n"
                "\n"
                "Exit status: 0 after a clean stop, 1 failed, 64 usage error, 69 real-time\n"
                "scheduling or locked memory refused here, 78 configuration error.\n");
}

static void add_event(struct daemon *d, const char *type, int64_t value, const char *message) {
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = type,
                .cpu = -1,
                .value_ns = value,
                .message = message,
        };
        heartbeat_enter(&d->hb_storage);
        int r = store_add_event(d->store, d->run_id, &ev);
        heartbeat_leave(&d->hb_storage);
        if (r < 0)
                log_error("Failed to store a %s event (%s): %s", type, message,
                          store_error(d->store));
}

/* The trace flight recorder, or one notice of why there is none; both go into the run's
 * record and a "trace" event (which reaches the farm). */
static int start_tracing(struct daemon *d, int64_t mono_to_real) {
        char msg[TRACE_MESSAGE_MAX];
        _cleanup_free_ char *json = NULL;
        struct tracing_params tp = {
                .cfg = &d->cfg,
                .probes = d->probes,
                .nprobes = d->nprobes,
                .mono_to_real_ns = mono_to_real,
        };
        int r = tracing_start(&tp, &d->tracing, &json, msg);
        if (r < 0)
                return r;
        if (d->tracing || !d->cfg.trace)
                log_info("T%s", msg + 1);
        else
                log_notice("T%s", msg + 1);
        heartbeat_enter(&d->hb_storage);
        r = store_set_run_trace(d->store, d->run_id, json);
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = "trace",
                .cpu = -1,
                .value_ns = -1,
                .message = msg,
                .details = json,
        };
        if (r >= 0)
                r = store_add_event(d->store, d->run_id, &ev);
        heartbeat_leave(&d->hb_storage);
        if (r < 0)
                log_error("Failed to record the trace flight recorder in the run: %s",
                          store_error(d->store));
        return 0;
}

static void on_load_event(void *userdata, const char *type, int64_t value, const char *message) {
        add_event(userdata, type, value, message);
}

static void record_loads(struct daemon *d, uint64_t k, int64_t at_mono, int64_t now_mono) {
        struct load_record *rec = load_records_add(&d->records, k);
        if (!rec) {
                log_oom();
                return;
        }
        loadsup_snapshot(d->loads, at_mono, now_mono, rec);
}

static void annotate_interval(void *userdata, uint64_t k, bool again, struct store_interval *iv) {
        load_records_annotate(&((struct daemon *) userdata)->records, k, again, iv);
}

static void interval_written(void *userdata, uint64_t k) {
        load_records_written(&((struct daemon *) userdata)->records, k);
}

/* After a reload, a scenario with the same name and loads is the one running: it goes on. */
static bool scenario_same(const struct scenario *a, const struct scenario *b) {
        if (a == b)
                return true;
        if (!a || !b || strcmp(a->name, b->name) != 0 || a->nloads != b->nloads)
                return false;
        for (size_t i = 0; i < a->nloads; i++)
                if (strcmp(a->loads[i].text, b->loads[i].text) != 0)
                        return false;
        return true;
}

static void start_scenario(struct daemon *d, int64_t real_ns, int64_t now_mono) {
        char when[TIMESTAMP_MAX_LEN], msg[256];
        int64_t end;
        const struct schedule_step *st = schedule_at(&d->cfg, real_ns, NULL, &end);
        if (scenario_same(st->scenario, loadsup_scenario(d->loads)))
                return;
        snprintf(msg, sizeof(msg), "scenario %s: %zu load%s until %s", st->scenario->name,
                 st->scenario->nloads, st->scenario->nloads == 1 ? "" : "s",
                 format_timestamp_utc(when, end));
        log_info("Starting %s", msg);
        add_event(d, "scenario", -1, msg);
        int r = loadsup_set_scenario(d->loads, st->scenario, now_mono);
        if (r < 0)
                log_error_errno(r, "Failed to start scenario %s: %m", st->scenario->name);
}

/* At each interval boundary: record what the loads did in the interval that ended, and change
 * the scenario if the schedule says so. */
static void advance_intervals(struct daemon *d, int64_t now) {
        int64_t period = (int64_t) d->cfg.interval_ns;
        /* After stop(): the last interval's record is made, up to the stop. */
        if (d->loads_recorded_to_end)
                return;
        if (now >= d->next_boundary_mono)
                (void) loadsup_sweep(d->loads);
        while (now >= d->next_boundary_mono) {
                record_loads(d, d->cur_k, d->next_boundary_mono, now);
                d->cur_k++;
                if (!d->stopping)
                        start_scenario(d, d->next_boundary_mono + d->mono_to_real, now);
                d->next_boundary_mono += period;
        }
}

static void stop(struct daemon *d, const char *why) {
        if (d->stopping)
                return;
        log_info("Stopping (%s)", why);
        d->stopping = true;
        /* The probes first: what follows writes to the store, and a probe that kept going
         * meanwhile would measure past the end the run was asked for. */
        atomic_store_explicit(&d->ctl.stop, true, memory_order_release);
        d->stop_deadline_mono = now_ns(CLOCK_MONOTONIC) + STOP_TIMEOUT_NS;
        if (d->loads) {
                /* What the loads did up to the last boundary, and in the last, partial
                 * interval; then stop them. */
                int64_t now = now_ns(CLOCK_MONOTONIC);
                advance_intervals(d, now);
                record_loads(d, d->cur_k, now, now);
                d->loads_recorded_to_end = true;
                loadsup_stop(d->loads);
        }
        /* The watchdog ends with the service's running state; test faults that can be
         * released are, so that the stop completes. */
        watchdog_stop(d->watchdog);
        d->watchdog = NULL;
        atomic_store(&d->hb_uploader.test_hang, false);
        housekeeping_stop_cpu_checks(d->housekeeping);
        sd_notify(0, "STOPPING=1");
        /* Probes finish within one period; look again soon. */
        sd_event_source_set_time_relative(d->poll_source, 10 * 1000);
        sd_event_source_set_enabled(d->poll_source, SD_EVENT_ONESHOT);
}

/* Pending outbox rows: the upload backlog shown in the status. */
static void refresh_backlog(struct daemon *d) {
        struct store_upload_status us = {};
        if (!d->token)
                return;
        heartbeat_enter(&d->hb_storage);
        int r = store_get_upload_status(d->store, &us);
        heartbeat_leave(&d->hb_storage);
        if (r >= 0)
                d->backlog = us.pending;
        store_upload_status_done(&us);
}

/* One line for "systemctl status": the scenario, the worst wake-up of the interval now
 * running (what the probes publish for their open slot), and the upload backlog. */
static void notify_status(struct daemon *d) {
        const struct scenario *sc = d->loads ? loadsup_scenario(d->loads) : NULL;
        struct collector_stats st;
        char upload[64] = "upload off", last[64] = "last interval none";
        uint64_t worst = 0;
        int worst_cpu = -1;

        for (size_t i = 0; i < d->nprobes; i++) {
                uint64_t m = atomic_load_explicit(&d->probes[i]->open_max_ns, memory_order_relaxed);
                if (worst_cpu < 0 || m > worst) {
                        worst = m;
                        worst_cpu = d->probes[i]->cpu;
                }
        }
        collector_get_stats(d->collector, &st);
        if (d->token)
                snprintf(upload, sizeof(upload), "upload backlog %" PRIu64 " rows", d->backlog);
        /* Just after a boundary the open interval has little to show: the last one too. */
        if (st.intervals_written > 0)
                snprintf(last, sizeof(last), "last interval %.1f us (CPU %d)",
                         (double) st.last_max_ns / 1000.0, st.last_max_cpu);
        sd_notifyf(0,
                   "STATUS=Scenario %s; worst this interval %.1f us (CPU %d); %s; %s; %" PRIu64
                   " intervals stored, %" PRIu64 " violations",
                   sc ? sc->name : "none", (double) worst / 1000.0, worst_cpu, last, upload,
                   st.intervals_written, st.total_violations);
        d->last_status_mono = now_ns(CLOCK_MONOTONIC);
}

static bool probes_done(struct daemon *d) {
        for (size_t i = 0; i < d->nprobes; i++) {
                int s = probe_state(d->probes[i]);
                if (s != PROBE_DONE && s != PROBE_FAILED)
                        return false;
        }
        return true;
}

static void check_probe_failures(struct daemon *d) {
        for (size_t i = 0; i < d->nprobes; i++) {
                struct probe *p = d->probes[i];
                if (probe_state(p) == PROBE_FAILED && !d->failed) {
                        d->failed = true;
                        snprintf(d->fail_message, sizeof(d->fail_message),
                                 "probe on CPU %d failed (%s): %s", p->cpu, p->stage,
                                 strerror(-p->error));
                        log_error("%s", d->fail_message);
                        stop(d, "a probe failed");
                }
        }
}

/* Called from the watchdog thread once per stall, after its pings stopped: the stall goes
 * into storage through a connection of its own (the main thread may be the one stuck). */
static void on_watchdog_stall(void *userdata, const char *parts, uint64_t stalled_ns) {
        struct daemon *d = userdata;
        char err[STORE_ERROR_MAX], msg[768], span[TIMESPAN_MAX_LEN];
        store *s = NULL;

        snprintf(msg, sizeof(msg), "no progress for %s from: %s; systemd watchdog pings stopped",
                 format_timespan(span, stalled_ns / NSEC_PER_MSEC * NSEC_PER_MSEC), parts);
        int r = store_open(d->db_path, STORE_UPLOADER, &s, err);
        if (r < 0) {
                log_error("Watchdog: cannot record the stall in storage: %s", err);
                return;
        }
        store_set_outbox(s, atomic_load(&d->outbox_on));
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = "watchdog_stall",
                .cpu = -1,
                .value_ns = (int64_t) stalled_ns,
                .message = msg,
        };
        r = store_add_event(s, d->run_id, &ev);
        if (r < 0)
                log_error("Watchdog: cannot record the stall in storage: %s", store_error(s));
        else
                log_info("Watchdog: stall recorded as a watchdog_stall event");
        store_close(s);
}

/* Test-only (RTSOAKD_TEST_HANG): makes one part hang, as if stuck, for the watchdog tests. */
static int on_test_hang(sd_event_source *s, uint64_t usec, void *userdata) {
        struct daemon *d = userdata;
        (void) s;
        (void) usec;
        log_warning("Test fault RTSOAKD_TEST_HANG=%s: that part hangs now", d->test_hang);
        if (strcmp(d->test_hang, "collector") == 0)
                atomic_store(&d->hb_collector.test_hang, true);
        else if (strcmp(d->test_hang, "storage") == 0)
                atomic_store(&d->hb_storage.test_hang, true);
        else if (strcmp(d->test_hang, "uploader") == 0)
                atomic_store(&d->hb_uploader.test_hang, true);
        else
                atomic_store(&d->ctl.test_hang_cpu, d->probes[0]->cpu + 1);
        return 0;
}

static int parse_test_hang(struct daemon *d) {
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
        if (strcmp(v, "uploader") == 0 && !*d->cfg.upload_server) {
                log_error("RTSOAKD_TEST_HANG=uploader: no uploader runs ([Upload] Server= is "
                          "empty)");
                return -EINVAL;
        }
        d->test_hang_after_ns = 3 * NSEC_PER_SEC;
        if (after && parse_timespan(after, &d->test_hang_after_ns, &reason) < 0) {
                log_error("RTSOAKD_TEST_HANG_AFTER=%s: %s", after, reason);
                return -EINVAL;
        }
        d->test_hang = v;
        log_warning("Test fault RTSOAKD_TEST_HANG=%s set: that part will hang on purpose (for "
                    "tests only)",
                    v);
        return 0;
}

/* READY=1 once every probe thread measures, and runs (as the kernel says, not as we asked)
 * at its real-time priority, on its CPU, in locked memory; then the watchdog starts. */
static void check_ready(struct daemon *d) {
        char why[1024];
        int r;

        if (d->ready_sent || d->stopping || !notify_probes_measuring(d->probes, d->nprobes))
                return;
        /* A probed CPU that went offline during the start is recorded (and its probe pinned
         * again if it is back) before the probes are judged. */
        housekeeping_check_cpus(d->housekeeping);
        r = notify_verify_probes(d->probes, d->nprobes, (int) d->cfg.priority, d->cfg.lock_memory,
                                 why, sizeof(why));
        if (r < 0) {
                log_error("Not ready: %s", why);
                d->failed = true;
                snprintf(d->fail_message, sizeof(d->fail_message), "%s", why);
                stop(d, "the probes do not run as configured");
                return;
        }
        d->ready_sent = true;
        log_info("Ready: %zu probe thread(s) measuring at SCHED_FIFO %" PRIu64 ", pinned%s",
                 d->nprobes, d->cfg.priority,
                 d->cfg.lock_memory ? ", in locked memory" : " (memory not locked)");
        refresh_backlog(d);
        sd_notify(0, "READY=1");
        notify_status(d);

        if (d->watchdog_period_ns > 0) {
                /* Storage first: when the main thread is stuck in it, it is the cause. */
                d->parts[0] = &d->hb_storage;
                d->parts[1] = &d->hb_collector;
                d->parts[2] = &d->hb_uploader;
                d->parts[3] = NULL;
                struct watchdog_params wp = {
                        .period_ns = d->watchdog_period_ns,
                        .probes = d->probes,
                        .nprobes = d->nprobes,
                        .parts = d->parts,
                        .on_stall = on_watchdog_stall,
                        .userdata = d,
                };
                char span[TIMESPAN_MAX_LEN];
                r = watchdog_start(&wp, &d->watchdog);
                if (r < 0)
                        log_error_errno(r, "Failed to start the watchdog thread: %m");
                else
                        log_info("Watchdog: pinging systemd every %s while every part makes "
                                 "progress",
                                 format_timespan(span, d->watchdog_period_ns));
        }
        if (d->test_hang) {
                r = sd_event_add_time_relative(d->event, NULL, CLOCK_MONOTONIC,
                                               d->test_hang_after_ns / 1000, 1000, on_test_hang, d);
                if (r < 0)
                        log_error_errno(r, "Failed to arm the test fault: %m");
        }
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        struct daemon *d = userdata;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        uint64_t next_usec;
        int r;

        (void) s;
        (void) usec;
        heartbeat_beat(&d->hb_collector);
        tracing_log_notices(d->tracing);
        check_probe_failures(d);
        check_ready(d);
        /* The probes end a --duration themselves: stop here if its timer has not run yet, so
         * that the loads' last record is made before the last interval is written. */
        int64_t end = atomic_load_explicit(&d->ctl.end_mono_ns, memory_order_relaxed);
        if (end > 0 && now >= end)
                stop(d, "--duration reached");

        bool timed_out = d->stopping && !probes_done(d) && now > d->stop_deadline_mono;
        if (timed_out) {
                for (size_t i = 0; i < d->nprobes; i++) {
                        int st = probe_state(d->probes[i]);
                        if (st != PROBE_DONE && st != PROBE_FAILED)
                                log_error("The probe on CPU %d did not stop within 5 s (is a task "
                                          "of higher priority monopolising that CPU?); stopping "
                                          "without its last interval",
                                          d->probes[i]->cpu);
                }
                d->failed = true;
                snprintf(d->fail_message, sizeof(d->fail_message),
                         "a probe did not stop within 5 s");
        }
        if (d->stopping && (probes_done(d) || timed_out)) {
                /* Join only finished threads; one that never stopped is left to exit() (its
                 * memory is not freed either, it may still be writing to it). */
                for (size_t i = 0; i < d->nprobes; i++) {
                        int st = probe_state(d->probes[i]);
                        if (st == PROBE_DONE || st == PROBE_FAILED)
                                probe_join(d->probes[i]);
                }
                /* Storage may be failing: try a few times before giving up on the rest. */
                for (int attempt = 0; attempt < 5; attempt++) {
                        r = collector_poll(d->collector, now_ns(CLOCK_MONOTONIC), true);
                        if (r >= 0)
                                break;
                        struct timespec ts = { 0, 200 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
                if (r < 0) {
                        d->failed = true;
                        snprintf(d->fail_message, sizeof(d->fail_message),
                                 "could not store the last interval: %s", store_error(d->store));
                }
                return sd_event_exit(d->event, 0);
        }

        advance_intervals(d, now);
        r = collector_poll(d->collector, now, false);
        if (r > 0) {
                if (d->uploader)
                        uploader_poke(d->uploader);
                refresh_backlog(d);
        }
        if (d->ready_sent && !d->stopping &&
            (r > 0 || now - d->last_status_mono >= (int64_t) NSEC_PER_SEC))
                notify_status(d);

        if (d->stopping)
                next_usec = 10 * 1000;
        else if (r < 0)
                next_usec = 1000 * 1000; /* storage trouble: retry each second */
        else {
                /* Sleep until the next boundary has passed and every probe has had a few
                 * periods to hand its slot over, then look again; while a CPU is late,
                 * look every 20 ms. */
                int64_t due = collector_next_due(d->collector) +
                              2 * (int64_t) d->cfg.probe_interval_ns + 1000 * 1000;
                next_usec = due > now ? (uint64_t) (due - now) / 1000 : 20 * 1000;
                if (next_usec > 1000 * 1000)
                        next_usec = 1000 * 1000; /* also notices failed probes promptly */
                if (!d->ready_sent)
                        next_usec = MIN(next_usec, 20 * 1000);
        }
        next_usec = MIN(next_usec, d->poll_cap_usec);
        sd_event_source_set_time_relative(d->poll_source, next_usec);
        sd_event_source_set_enabled(d->poll_source, SD_EVENT_ONESHOT);
        return 0;
}

static void reload(struct daemon *d);

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct daemon *d = userdata;
        (void) s;
        if (si->ssi_signo == SIGHUP) {
                if (!d->stopping)
                        reload(d);
                return 0;
        }
        stop(d, si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        return 0;
}

static int on_flight(sd_event_source *s, uint64_t usec, void *userdata) {
        struct daemon *d = userdata;
        const struct scenario *sc = d->loads ? loadsup_scenario(d->loads) : NULL;
        int r = flightrec_write(d->flight, now_ns(CLOCK_REALTIME), d->run_id, sc ? sc->name : NULL,
                                d->probes, d->nprobes, load_records_last(&d->records));
        if (r < 0)
                log_debug_errno(r, "Failed to write the flight record, ignoring: %m");
        r = sd_event_source_set_time(s, usec + 1000 * 1000);
        return r < 0 ? r : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* A line per second into pstore's pmsg (or the configured path), if there is one. */
static int start_flight_recorder(struct daemon *d) {
        int r = flightrec_open(d->cfg.flight_recorder, &d->flight);
        if (r < 0) {
                log_full_errno(LOG_LEVEL_INFO, r,
                               "[Forensics] FlightRecorder=%s: %m; the last stored interval is "
                               "the only record of the last moments",
                               d->cfg.flight_recorder);
                return 0;
        }
        if (r == 0) {
                log_info("Flight record off ([Forensics] FlightRecorder=off)");
                return 0;
        }
        log_info("Flight record: a line per second into %s", d->cfg.flight_recorder);
        return sd_event_add_time_relative(d->event, &d->flight_source, CLOCK_MONOTONIC, 1000 * 1000,
                                          10 * 1000, on_flight, d);
}

static int on_duration(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        stop(userdata, "--duration reached");
        return 0;
}

/* The bearer token: the first line of the file, which only root should be able to read; a
 * file every user can read, or a server that gets it in clear, is warned about. */
static int read_token(const char *path, const char *server, char **ret) {
        char err[TOKEN_MESSAGE_MAX], warning[TOKEN_MESSAGE_MAX];
        int r = token_file_read(path, ret, err, warning);
        if (r < 0)
                return log_error_errno(r, "[Upload] TokenFile=%s%s", err,
                                       r == -ENOENT || r == -EACCES
                                               ? " (enroll the machine with \"rtsoak-server "
                                                 "enroll\" and store the token there)"
                                               : "");
        if (warning[0])
                log_warning("[Upload] TokenFile=%s", warning);
        if (token_in_clear(server))
                log_warning("[Upload] Server=%s: the token goes to another host over plain HTTP, "
                            "readable by anyone on the way (use https://)",
                            server);
        return 0;
}

static void on_uploader_alive(void *userdata) {
        struct daemon *d = userdata;
        heartbeat_beat(&d->hb_uploader);
}

/* The uploader thread drains the outbox at its own pace. */
static int start_uploader(struct daemon *d) {
        struct uploader_params up = {
                .db_path = d->cfg.storage_path,
                .server = d->cfg.upload_server,
                .token = d->token,
                .ca_file = d->cfg.upload_ca_file,
                .batch = d->cfg.upload_batch,
                .connect_timeout_ns = d->cfg.upload_connect_timeout_ns,
                .timeout_ns = d->cfg.upload_timeout_ns,
                .backoff_min_ns = NSEC_PER_SEC,
                .backoff_max_ns = d->cfg.upload_retry_max_ns,
                .machine_id = d->si.machine_id,
                .hostname = d->si.hostname,
                .cpu_model = d->si.cpu_model,
                .cpus = (uint32_t) d->cpus.n,
                .on_alive = on_uploader_alive,
                .alive_userdata = d,
                .alive_ns = d->poll_cap_usec * NSEC_PER_USEC,
        };
        int r = uploader_start(&up, &d->uploader);
        if (r < 0)
                return log_error_errno(r, "Failed to start the uploader: %m");
        atomic_store(&d->hb_uploader.active, true);
        log_info("Uploading to %s", d->cfg.upload_server);
        return 0;
}

static void stop_uploader(struct daemon *d) {
        atomic_store(&d->hb_uploader.active, false);
        uploader_stop(d->uploader);
        d->uploader = NULL;
}

/* SIGHUP: the configuration files again.  A bad one is refused and the running one stays; a
 * good one applies what can change live (the rotation and scenarios from the next interval
 * boundary, [Probe] Threshold= from the next interval, [Upload] at once) and keeps the keys
 * that need a restart at their running values.  The probes and the open interval go on. */
static void reload(struct daemon *d) {
        char err[CONF_ERROR_MAX], msg[2048], digest[2 * SHA256_DIGEST_SIZE + 1];
        struct reload_result rr;
        char *token = NULL, *text = NULL;
        int r;

        /* Before READY=1 a reload is still done, but systemd hears of neither. */
        if (d->ready_sent)
                sd_notifyf(0,
                           "RELOADING=1\nMONOTONIC_USEC=%" PRIu64
                           "\nSTATUS=Reloading the configuration",
                           (uint64_t) now_ns(CLOCK_MONOTONIC) / NSEC_PER_USEC);
        log_info("SIGHUP: reloading the configuration (%s)",
                 d->explicit_config || access(d->config_path, F_OK) == 0 ? d->config_path
                                                                         : "built-in defaults");
        r = reload_config(&d->cfg, d->config_path, d->explicit_config, d->sets, &rr, err);
        if (r < 0) {
                log_error("Configuration reload refused, the running configuration stays: %s", err);
                add_event(d, "config_reload_failed", -1, err);
                goto done;
        }
        /* [Load] User= needs a restart: the running one must exist for the new rotation. */
        if (daemon_config_check_load_user(&rr.cfg, d->cfg.load_user, err) < 0) {
                log_error("Configuration reload refused, the running configuration stays: %s", err);
                add_event(d, "config_reload_failed", -1, err);
                reload_result_done(&rr);
                goto done;
        }
        /* The token file is read again at every reload: a new token needs no restart. */
        bool upload_changed = strstr(rr.changed, "Upload.") != NULL;
        if (*rr.cfg.upload_server) {
                r = read_token(rr.cfg.upload_token_file, rr.cfg.upload_server, &token);
                if (r < 0) {
                        snprintf(msg, sizeof(msg), "[Upload] TokenFile=%s: cannot read the token",
                                 rr.cfg.upload_token_file);
                        log_error("Configuration reload refused, the running configuration "
                                  "stays");
                        add_event(d, "config_reload_failed", -1, msg);
                        reload_result_done(&rr);
                        goto done;
                }
        }
        struct daemon_config *a = realloc(d->retired, (d->nretired + 1) * sizeof(*a));
        if (!a) {
                log_oom();
                if (token)
                        explicit_bzero(token, strlen(token));
                free(token);
                reload_result_done(&rr);
                goto done;
        }
        if (token && (!d->token || strcmp(token, d->token) != 0)) {
                if (!upload_changed)
                        log_info("The upload token changed: the uploader restarts with it");
                upload_changed = true;
        }
        if (!upload_changed && token) {
                explicit_bzero(token, strlen(token));
                free(token);
                token = NULL;
        }
        d->retired = a;
        a[d->nretired++] = d->cfg;
        d->cfg = rr.cfg;
        rr.cfg = (struct daemon_config){};

        if (*rr.kept)
                log_warning("These keys need a restart and keep their running values: %s", rr.kept);
        atomic_store_explicit(&d->ctl.threshold_ns, d->cfg.threshold_ns, memory_order_relaxed);
        collector_set_threshold(d->collector, d->cfg.threshold_ns);
        if (upload_changed) {
                if (d->uploader)
                        stop_uploader(d);
                if (d->token)
                        explicit_bzero(d->token, strlen(d->token));
                free(d->token);
                d->token = token;
                store_set_outbox(d->store, d->token != NULL);
                atomic_store(&d->outbox_on, d->token != NULL);
                if (d->token && start_uploader(d) < 0)
                        log_error("Upload stays off until the next reload or restart");
                else if (!d->token)
                        log_info("Upload off");
                refresh_backlog(d);
        }

        text = daemon_config_text(&d->cfg);
        if (text)
                sha256_hex(text, strlen(text), digest);
        else
                snprintf(digest, sizeof(digest), "unknown");
        snprintf(msg, sizeof(msg), "configuration reloaded (digest %.16s): changed: %s%s%s", digest,
                 *rr.changed ? rr.changed : "nothing", *rr.kept ? "; kept until a restart: " : "",
                 rr.kept);
        log_info("%s%s", msg,
                 *rr.changed ? " (the rotation applies from the next interval boundary)" : "");
        add_event(d, "config_reloaded", -1, msg);
        reload_result_done(&rr);
        free(text);
done:
        if (d->ready_sent) {
                sd_notify(0, "READY=1");
                notify_status(d);
        }
}

static int resolve_cpus(struct daemon *d) {
        struct cpuset online;
        char a[1024];
        int r = cpuset_online(&online, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to read the online CPUs: %m");
        if (d->cfg.cpus.all) {
                d->cpus = online;
                return 0;
        }
        for (size_t i = 0; i < d->cfg.cpus.n; i++)
                if (!cpuset_contains(&online, d->cfg.cpus.cpus[i])) {
                        cpuset_format(&online, a, sizeof(a));
                        log_error(
                                "[Probe] CPUs=: CPU %d is not online on this machine (online: %s)",
                                d->cfg.cpus.cpus[i], a);
                        cpuset_done(&online);
                        return -EINVAL;
                }
        cpuset_done(&online);
        return cpuset_copy(&d->cpus, &d->cfg.cpus);
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC, read as tightly as we can. */
static int64_t mono_to_real_offset(void) {
        int64_t best_gap = INT64_MAX, off = 0;
        for (int i = 0; i < 5; i++) {
                int64_t r1 = now_ns(CLOCK_REALTIME), m = now_ns(CLOCK_MONOTONIC),
                        r2 = now_ns(CLOCK_REALTIME);
                if (r2 - r1 < best_gap) {
                        best_gap = r2 - r1;
                        off = r1 + (r2 - r1) / 2 - m;
                }
        }
        return off;
}

static int start_probes(struct daemon *d, const struct probe_params *pp) {
        int r;

        d->probes = calloc(d->cpus.n, sizeof(*d->probes));
        if (!d->probes)
                return log_oom();
        for (size_t i = 0; i < d->cpus.n; i++) {
                r = probe_new(d->cpus.cpus[i], pp, &d->ctl, &d->probes[i]);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the probe for CPU %d: %m",
                                               d->cpus.cpus[i]);
                d->nprobes++;
                r = probe_start(d->probes[i]);
                if (r < 0)
                        return log_error_errno(r, "Failed to start the probe thread for CPU %d: %m",
                                               d->cpus.cpus[i]);
        }

        /* Wait until every thread is pinned and real-time, or has said why it is not. */
        for (int waited_ms = 0;; waited_ms++) {
                bool all = true;
                for (size_t i = 0; i < d->nprobes; i++) {
                        struct probe *p = d->probes[i];
                        int s = probe_state(p);
                        if (s == PROBE_FAILED) {
                                /* Refused real-time scheduling: this machine does not let it
                                 * measure (exit 69, not restarted).  A failed pinning may be a
                                 * CPU going offline for a moment: 1, restarted. */
                                d->unavailable = strcmp(p->stage, "scheduler") == 0;
                                if (strcmp(p->stage, "scheduler") == 0) {
                                        char why[2048];
                                        rt_explain_sched_failure(p->error, pp->priority, NULL, why,
                                                                 sizeof(why));
                                        log_error("CPU %d: %s", p->cpu, why);
                                } else
                                        log_error("CPU %d: probe setup failed at %s: %s", p->cpu,
                                                  p->stage, strerror(-p->error));
                                return p->error;
                        }
                        if (s != PROBE_READY)
                                all = false;
                }
                if (all)
                        return 0;
                if (waited_ms > 10000) {
                        log_error("Probe threads did not become ready within 10 s");
                        return -ETIMEDOUT;
                }
                struct timespec ms = { 0, 1000 * 1000 };
                nanosleep(&ms, NULL);
        }
}

static void stop_probes(struct daemon *d) {
        atomic_store_explicit(&d->ctl.stop, true, memory_order_release);
        for (size_t i = 0; i < d->nprobes; i++)
                probe_join(d->probes[i]);
}

/* The name the farm judges this run under: [Upload] Release=, else the kernel's release when
 * it makes a valid name (an odd one is still sent as the kernel's, and the farm judges by
 * that). */
static const char *run_release(const struct daemon_config *c, const struct sysinfo_run *si) {
        if (*c->upload_release)
                return c->upload_release;
        return summary_release_valid(si->kernel_release) ? si->kernel_release : NULL;
}

/* What a run needs before anything starts: the CPUs, the heartbeats, the token, the store,
 * locked memory and the DMA latency hold (the load user was found by daemon_config_load()).
 * EXIT_SUCCESS to go on, else how to exit. */
static int prepare_run(struct daemon *d) {
        char err[STORE_ERROR_MAX];
        int r = resolve_cpus(d);
        if (r < 0)
                return EXIT_CONFIG;
        if (parse_test_hang(d) < 0)
                return EXIT_CONFIG;
        d->db_path = strdup(d->cfg.storage_path);
        if (!d->db_path)
                return log_oom(), EXIT_FAILURE;
        /* With a watchdog, every part shows life well within one ping period. */
        d->watchdog_period_ns = watchdog_period_ns();
        d->poll_cap_usec = 1000 * 1000;
        if (d->watchdog_period_ns > 0)
                d->poll_cap_usec = MIN(d->poll_cap_usec, d->watchdog_period_ns / 4 / 1000);
        d->poll_cap_usec = MAX(d->poll_cap_usec, 1000);
        d->hb_collector = (struct heartbeat){ .name = "collector", .beating = true };
        d->hb_storage = (struct heartbeat){ .name = "storage writer" };
        d->hb_uploader = (struct heartbeat){ .name = "uploader", .beating = true };
        d->hb_collector.same_thread = &d->hb_storage; /* both on the main thread */
        atomic_store(&d->hb_collector.active, true);
        atomic_store(&d->hb_storage.active, true);
        if (*d->cfg.upload_server) {
                r = read_token(d->cfg.upload_token_file, d->cfg.upload_server, &d->token);
                if (r < 0)
                        return EXIT_CONFIG;
        }
        sysinfo_read(&d->si);

        r = store_open(d->cfg.storage_path, STORE_WRITER, &d->store, err);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_FAILURE;
        }
        if (d->cfg.lock_memory) {
                char why[1024];
                r = rt_lock_memory(why, sizeof(why));
                if (r < 0) {
                        log_error("%s", why);
                        return EXIT_UNAVAILABLE;
                }
        } else
                log_warning("[Probe] LockMemory=no: page faults may be measured as latency");
        if (d->cfg.dma_latency_ns >= 0) {
                char why[512];
                d->dma_fd = rt_hold_dma_latency((uint32_t) (d->cfg.dma_latency_ns / 1000), why,
                                                sizeof(why));
                if (d->dma_fd < 0)
                        log_warning("%s", why);
        }

        /* Signals are handled by the event loop; block them before any thread exists so
         * that the probe threads never get interrupted by one. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        return EXIT_SUCCESS;
}

/* The run's row: the machine, the kernel, the configuration; earlier runs that did not end
 * cleanly are recorded as such on the way. */
static int begin_run_record(struct daemon *d, const struct probe_params *pp, const char *text,
                            const char *cpus) {
        const struct sysinfo_run *si = &d->si;
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
                .release = run_release(&d->cfg, si),
                .priority = d->cfg.priority,
                .probe_interval_ns = d->cfg.probe_interval_ns,
                .interval_ns = d->cfg.interval_ns,
                .threshold_ns = d->cfg.threshold_ns,
                .hist_limit_us = pp->hist_limit_us,
                .start_ns = now_ns(CLOCK_REALTIME),
                .boot_ns = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_BOOTTIME),
                .kernel_leftovers = forensics_kernel_leftovers,
                .userdata = &d->forensics,
        };
        d->forensics = (struct forensics_params){
                .pstore_dir = d->cfg.pstore_dir,
                .journal_dir = d->cfg.journal_dir,
                .journal_lines = d->cfg.journal_lines,
                .pstore_max = 40 * 1024,
                .pstore_record_max = 16 * 1024,
                .journal_max = 16 * 1024,
        };
        unsigned unclean = 0;
        /* With upload on, everything from here on (the unclean ends of earlier runs too)
         * enters the outbox in the transaction that stores it. */
        if (d->token)
                store_set_outbox(d->store, true);
        int r = store_begin_run(d->store, &info, &d->run_id, &unclean);
        if (r < 0) {
                log_error("%s", store_error(d->store));
                return r;
        }
        if (unclean > 0)
                log_warning("%u earlier run(s) did not end cleanly; recorded as unclean_end events",
                            unclean);
        if (!store_vacuum_incremental(d->store))
                log_notice("%s was made before schema 4 and could not be rewritten for incremental "
                           "vacuum (larger than 256 MiB, or no room for the copy): pages freed by "
                           "retention are reused but the file does not shrink",
                           d->cfg.storage_path);
        return 0;
}

/* The main loop's sources: signals, the poll, the flight record and housekeeping. */
static int setup_event_loop(struct daemon *d) {
        int r = sd_event_default(&d->event);
        if (r >= 0)
                r = sd_event_add_signal(d->event, NULL, SIGTERM, on_signal, d);
        if (r >= 0)
                r = sd_event_add_signal(d->event, NULL, SIGINT, on_signal, d);
        if (r >= 0)
                r = sd_event_add_signal(d->event, NULL, SIGHUP, on_signal, d);
        if (r >= 0)
                r = sd_event_add_time_relative(d->event, &d->poll_source, CLOCK_MONOTONIC,
                                               100 * 1000, 1000, on_poll, d);
        if (r >= 0)
                r = start_flight_recorder(d);
        if (r >= 0)
                r = housekeeping_start(d->event,
                                       &(struct housekeeping_params){
                                               .store = d->store,
                                               .run_id = d->run_id,
                                               .retention_ns = d->cfg.retention_ns,
                                               .probes = d->probes,
                                               .nprobes = d->nprobes,
                                               .all_cpus = d->cfg.cpus.all,
                                       },
                                       &d->housekeeping);
        if (r < 0)
                log_error_errno(r, "Failed to set up the event loop: %m");
        return r;
}

/* The probes measure from here on, and the loads start: their first interval is measured
 * under load. */
static int go(struct daemon *d, const struct probe_params *pp, int64_t off, uint64_t duration_ns) {
        struct loadsup_params lp = {
                .helper = d->cfg.load_helper,
                .user = d->cfg.load_user,
                .nice = (int) d->cfg.load_nice,
                .restart_delay_ns = d->cfg.restart_delay_ns,
                .restart_delay_max_ns = MAX(d->cfg.restart_delay_max_ns, d->cfg.restart_delay_ns),
                .stop_grace_ns = 500 * NSEC_PER_MSEC,
                .on_event = on_load_event,
                .userdata = d,
        };
        int64_t now_mono = now_ns(CLOCK_MONOTONIC), period = (int64_t) d->cfg.interval_ns;
        int r = loadsup_new(d->event, &lp, now_mono, &d->loads);
        if (r < 0)
                return log_oom();
        d->base_mono = pp->base_mono_ns;
        d->mono_to_real = off;
        d->cur_k = (uint64_t) ((now_mono - d->base_mono) / period);
        d->next_boundary_mono = d->base_mono + ((int64_t) d->cur_k + 1) * period;

        /* --duration is measured time: it counts from the probes' start, not from the set-up
         * before it, and the probes end it themselves, however late the main thread is to stop
         * them (a busy machine, a slow store write). */
        int64_t end = duration_ns > (uint64_t) (INT64_MAX - now_mono)
                              ? INT64_MAX /* centuries: never, without overflowing */
                              : now_mono + (int64_t) duration_ns;
        if (duration_ns > 0)
                atomic_store_explicit(&d->ctl.end_mono_ns, end, memory_order_relaxed);
        atomic_store_explicit(&d->ctl.go, true, memory_order_release);
        if (duration_ns > 0) {
                r = sd_event_add_time(d->event, NULL, CLOCK_MONOTONIC, (uint64_t) end / 1000, 1000,
                                      on_duration, d);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the --duration timer: %m");
        }
        start_scenario(d, now_mono + off, now_mono);
        return 0;
}

/* After the main loop: the loads gone, the run recorded as ended, the last upload tried. */
static int finish_run(struct daemon *d) {
        loadsup_free(d->loads);
        d->loads = NULL;
        tracing_stop(d->tracing);
        d->tracing = NULL;

        int64_t end = now_ns(CLOCK_REALTIME);
        int r = store_end_run(d->store, d->run_id, end, d->failed ? "error" : "clean",
                              d->failed ? d->fail_message : NULL);
        if (r < 0) {
                log_error("%s", store_error(d->store));
                return EXIT_FAILURE;
        }
        if (d->uploader) {
                /* The last interval leaves now if the server is there; if not, it stays in
                 * the outbox for the next start. */
                if (!uploader_flush(d->uploader, 2 * NSEC_PER_SEC))
                        log_info("Upload backlog kept for the next start");
                stop_uploader(d);
        }
        struct collector_stats st;
        collector_get_stats(d->collector, &st);
        log_info("Run %" PRId64 " ended %s: %" PRIu64 " intervals stored, %" PRIu64 " violations",
                 d->run_id, d->failed ? "with an error" : "cleanly", st.intervals_written,
                 st.total_violations);
        if (d->failed)
                return d->unavailable ? EXIT_UNAVAILABLE : EXIT_FAILURE;
        return EXIT_SUCCESS;
}

static int run(struct daemon *d, uint64_t duration_ns) {
        char span[TIMESPAN_MAX_LEN], span2[TIMESPAN_MAX_LEN], span3[TIMESPAN_MAX_LEN];
        int r = prepare_run(d);
        if (r != EXIT_SUCCESS)
                return r;
        /* The run's CPUs whole, however scattered: the farm learns from this list which CPUs
         * the run probes. */
        _cleanup_free_ char *cpus = malloc(CPUSET_TEXT_MAX);
        if (!cpus || cpuset_format(&d->cpus, cpus, CPUSET_TEXT_MAX) < 0)
                return log_oom(), EXIT_FAILURE;
        _cleanup_free_ char *text = daemon_config_text(&d->cfg);
        if (!text)
                return log_oom(), EXIT_FAILURE;

        /* Interval k starts at a multiple of the interval length in wall-clock time, so
         * that every CPU, and every machine of a farm, closes at the same boundary. */
        int64_t off = mono_to_real_offset();
        int64_t start_real = now_ns(CLOCK_MONOTONIC) + off;
        int64_t base_real = interval_align(start_real, (int64_t) d->cfg.interval_ns);
        struct probe_params pp = {
                .interval_ns = d->cfg.probe_interval_ns,
                .threshold_ns = d->cfg.threshold_ns,
                .hist_limit_us = (uint32_t) (d->cfg.hist_limit_ns / 1000),
                .period_ns = d->cfg.interval_ns,
                .base_mono_ns = base_real - off,
                .priority = (int) d->cfg.priority,
                .stack_prefault = STACK_PREFAULT,
        };

        atomic_store_explicit(&d->ctl.threshold_ns, d->cfg.threshold_ns, memory_order_relaxed);
        r = start_probes(d, &pp);
        if (r < 0) {
                stop_probes(d);
                return d->unavailable ? EXIT_UNAVAILABLE : EXIT_FAILURE;
        }
        r = begin_run_record(d, &pp, text, cpus);
        if (r >= 0 && (r = start_tracing(d, off)) < 0)
                log_oom();
        atomic_store(&d->outbox_on, d->token != NULL);
        if (r >= 0 && d->token)
                r = start_uploader(d);
        if (r >= 0) {
                struct collector_params cp = {
                        .period_ns = d->cfg.interval_ns,
                        .base_mono_ns = pp.base_mono_ns,
                        .run_start_mono_ns = now_ns(CLOCK_MONOTONIC),
                        .mono_to_real_ns = off,
                        .threshold_ns = d->cfg.threshold_ns,
                        .probe_interval_ns = d->cfg.probe_interval_ns,
                        .hist_limit_us = pp.hist_limit_us,
                        .grace_ns = 2 * NSEC_PER_SEC + 2 * d->cfg.probe_interval_ns,
                        .max_pending = d->cfg.hold_intervals,
                        .annotate = annotate_interval,
                        .written = interval_written,
                        .userdata = d,
                        .storage_beat = &d->hb_storage,
                        .traces = tracing_capture(d->tracing),
                };
                r = collector_new(&cp, d->store, d->run_id, d->probes, d->nprobes, &d->collector);
                if (r < 0)
                        log_oom();
        }
        if (r >= 0)
                r = setup_event_loop(d);
        if (r >= 0)
                r = go(d, &pp, off, duration_ns);
        if (r < 0) {
                stop_probes(d);
                return EXIT_FAILURE;
        }
        log_info("Run %" PRId64 ": probing CPUs %s at SCHED_FIFO %" PRIu64 " every %s, threshold "
                 "%s, intervals of %s into %s",
                 d->run_id, cpus, d->cfg.priority, format_timespan(span, d->cfg.probe_interval_ns),
                 format_timespan(span2, d->cfg.threshold_ns),
                 format_timespan(span3, d->cfg.interval_ns), d->cfg.storage_path);
        /* READY=1 follows from the main loop once the probes measure (check_ready()). */
        sd_notifyf(0, "STATUS=Run %" PRId64 ": starting the probes on CPUs %s", d->run_id, cpus);

        r = sd_event_loop(d->event);
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                stop_probes(d);
                d->failed = true;
                snprintf(d->fail_message, sizeof(d->fail_message), "event loop failed: %s",
                         strerror(-r));
        }
        /* Every load process is gone before the run is recorded as ended. */
        return finish_run(d);
}

static void daemon_done(struct daemon *d) {
        watchdog_stop(d->watchdog);
        tracing_stop(d->tracing);
        uploader_stop(d->uploader);
        if (d->token)
                explicit_bzero(d->token, strlen(d->token));
        free(d->token);
        loadsup_free(d->loads);
        load_records_free(&d->records);
        collector_free(d->collector);
        for (size_t i = 0; i < d->nprobes; i++)
                if (!d->probes[i]->thread_started)
                        probe_free(d->probes[i]);
        free(d->probes);
        sd_event_source_unref(d->poll_source);
        sd_event_source_unref(d->flight_source);
        housekeeping_free(d->housekeeping);
        flightrec_free(d->flight);
        sd_event_unref(d->event);
        store_close(d->store);
        if (d->dma_fd >= 0)
                close(d->dma_fd);
        cpuset_done(&d->cpus);
        daemon_config_free(&d->cfg);
        for (size_t i = 0; i < d->nretired; i++)
                daemon_config_free(&d->retired[i]);
        free(d->retired);
        free(d->db_path);
}

int main(int argc, char *argv[]) {
        enum { ARG_CHECK_CONFIG = 0x100, ARG_VERSION };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "set", required_argument, NULL, 's' },
                { "duration", required_argument, NULL, 'd' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        _cleanup_free_ char **sets = NULL;
        _cleanup_strv_free_ char **sources = NULL;
        const char *config = DAEMON_CONFIG_PATH;
        bool explicit_config = false, check = false;
        uint64_t duration = 0;
        size_t nsets = 0;
        char err[CONF_ERROR_MAX];
        struct daemon d = { .dma_fd = -1 };
        int c, r;

        log_set_program("rtsoakd");
        while ((c = getopt_long(argc, argv, ":c:s:d:vh", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        config = optarg;
                        explicit_config = true;
                        break;
                case 's': {
                        char **n = realloc(sets, (nsets + 2) * sizeof(char *));
                        if (!n)
                                return log_oom(), EXIT_FAILURE;
                        sets = n;
                        sets[nsets++] = optarg;
                        sets[nsets] = NULL;
                        break;
                }
                case 'd': {
                        const char *reason;
                        if (parse_timespan(optarg, &duration, &reason) < 0 || duration == 0) {
                                log_error("--duration %s: %s", optarg,
                                          duration == 0 && !reason ? "must be longer than 0"
                                                                   : reason);
                                return EXIT_USAGE;
                        }
                        break;
                }
                case ARG_CHECK_CONFIG:
                        check = true;
                        break;
                case 'v':
                        log_set_max_level(LOG_LEVEL_DEBUG);
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("rtsoakd %s\n", PROJECT_VERSION);
                        return EXIT_SUCCESS;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }
        if (optind < argc) {
                log_error("Unexpected argument '%s' (see --help)", argv[optind]);
                return EXIT_USAGE;
        }

        r = daemon_config_load(&d.cfg, config, explicit_config, sets, &sources, err);
        if (r < 0) {
                log_error("%s", err);
                daemon_config_free(&d.cfg);
                return EXIT_CONFIG;
        }

        if (check) {
                _cleanup_free_ char *text = daemon_config_text(&d.cfg);
                printf("# rtsoakd effective configuration\n");
                if (!sources || !sources[0])
                        printf("# from: built-in defaults\n");
                for (char **s = sources; s && *s; s++)
                        printf("# from: %s\n", *s);
                for (size_t i = 0; i < nsets; i++)
                        printf("# from: --set %s\n", sets[i]);
                fputs(text ?: "", stdout);
                daemon_config_free(&d.cfg);
                return text ? EXIT_SUCCESS : EXIT_FAILURE;
        }

        d.config_path = config;
        d.explicit_config = explicit_config;
        d.sets = sets;
        r = run(&d, duration);
        daemon_done(&d);
        return r;
}
