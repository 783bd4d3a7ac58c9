/* SPDX-License-Identifier: MIT */
/* The manager's intervals: the collector that stores them, the loads of the scenario the
 * rotation prescribes, and at each interval boundary the record of what the loads did. */
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "timeutil.h"

static void on_load_event(void *userdata, const char *type, int64_t value, const char *message) {
        manager_add_event(userdata, type, value, message);
}

static void record_loads(struct manager *m, uint64_t k, int64_t at_mono, int64_t now_mono) {
        struct load_record *rec = load_records_add(&m->iv.records, k);
        if (!rec) {
                log_oom();
                return;
        }
        loadsup_snapshot(m->iv.loads, at_mono, now_mono, rec);
}

static void annotate_interval(void *userdata, uint64_t k, bool again, struct store_interval *iv) {
        load_records_annotate(&((struct manager *) userdata)->iv.records, k, again, iv);
}

static void interval_written(void *userdata, uint64_t k) {
        load_records_written(&((struct manager *) userdata)->iv.records, k);
}

int manager_start_collector(struct manager *m, const struct probe_params *pp,
                            int64_t mono_to_real) {
        struct collector_params cp = {
                .period_ns = m->cfg.interval_ns,
                .base_mono_ns = pp->base_mono_ns,
                .run_start_mono_ns = now_ns(CLOCK_MONOTONIC),
                .mono_to_real_ns = mono_to_real,
                .threshold_ns = m->cfg.threshold_ns,
                .probe_interval_ns = m->cfg.probe_interval_ns,
                .hist_limit_us = pp->hist_limit_us,
                .grace_ns = 2 * NSEC_PER_SEC + 2 * m->cfg.probe_interval_ns,
                .max_pending = m->cfg.hold_intervals,
                .annotate = annotate_interval,
                .written = interval_written,
                .userdata = m,
                .storage_beat = &m->sd.hb_storage,
                .traces = tracing_capture(m->tracing),
        };
        int r = collector_new(&cp, m->run.store, m->run.id, m->probes.p, m->probes.n,
                              &m->iv.collector);
        if (r < 0)
                log_oom();
        return r;
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

void manager_start_scenario(struct manager *m, int64_t real_ns, int64_t now_mono) {
        char when[TIMESTAMP_MAX_LEN], msg[256];
        int64_t end;
        const struct schedule_step *st = schedule_at(&m->cfg, real_ns, NULL, &end);
        if (scenario_same(st->scenario, loadsup_scenario(m->iv.loads)))
                return;
        snprintf(msg, sizeof(msg), "scenario %s: %zu load%s until %s", st->scenario->name,
                 st->scenario->nloads, st->scenario->nloads == 1 ? "" : "s",
                 format_timestamp_utc(when, end));
        log_info("Starting %s", msg);
        manager_add_event(m, "scenario", -1, msg);
        int r = loadsup_set_scenario(m->iv.loads, st->scenario, now_mono);
        if (r < 0)
                log_error_errno(r, "Failed to start scenario %s: %m", st->scenario->name);
}

/* The loads' supervisor and the interval clock from now_mono; the probes are told the run's
 * end (*ret_end, for --duration) and go. */
int manager_go(struct manager *m, const struct probe_params *pp, int64_t mono_to_real,
               int64_t now_mono, int64_t *ret_end) {
        struct loadsup_params lp = {
                .helper = m->cfg.load_helper,
                .user = m->cfg.load_user,
                .nice = (int) m->cfg.load_nice,
                .restart_delay_ns = m->cfg.restart_delay_ns,
                .restart_delay_max_ns = MAX(m->cfg.restart_delay_max_ns, m->cfg.restart_delay_ns),
                .stop_grace_ns = 500 * NSEC_PER_MSEC,
                .on_event = on_load_event,
                .userdata = m,
        };
        int64_t period = (int64_t) m->cfg.interval_ns;
        int r = loadsup_new(m->loop.event, &lp, now_mono, &m->iv.loads);
        if (r < 0)
                return log_oom();
        m->iv.mono_to_real = mono_to_real;
        m->iv.cur_k = (uint64_t) ((now_mono - pp->base_mono_ns) / period);
        m->iv.next_boundary_mono = pp->base_mono_ns + ((int64_t) m->iv.cur_k + 1) * period;

        /* --duration is measured time: it counts from the probes' start, not from the set-up
         * before it, and the probes end it themselves, however late the main thread is to stop
         * them (a busy machine, a slow store write). */
        uint64_t duration_ns = m->opts.duration_ns;
        int64_t end = duration_ns > (uint64_t) (INT64_MAX - now_mono)
                              ? INT64_MAX /* centuries: never, without overflowing */
                              : now_mono + (int64_t) duration_ns;
        if (duration_ns > 0)
                atomic_store_explicit(&m->probes.ctl.end_mono_ns, end, memory_order_relaxed);
        atomic_store_explicit(&m->probes.ctl.go, true, memory_order_release);
        *ret_end = end;
        return 0;
}

/* At each interval boundary: record what the loads did in the interval that ended, and change
 * the scenario if the schedule says so. */
void manager_advance_intervals(struct manager *m, int64_t now) {
        struct manager_intervals *iv = &m->iv;
        int64_t period = (int64_t) m->cfg.interval_ns;
        /* After stop(): the last interval's record is made, up to the stop. */
        if (iv->loads_recorded_to_end)
                return;
        if (now >= iv->next_boundary_mono)
                (void) loadsup_sweep(iv->loads);
        while (now >= iv->next_boundary_mono) {
                record_loads(m, iv->cur_k, iv->next_boundary_mono, now);
                iv->cur_k++;
                if (!m->end.stopping)
                        manager_start_scenario(m, iv->next_boundary_mono + iv->mono_to_real, now);
                iv->next_boundary_mono += period;
        }
}

/* At the stop: what the loads did up to the last boundary, and in the last, partial interval;
 * then they stop. */
void manager_stop_loads(struct manager *m) {
        if (!m->iv.loads)
                return;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        manager_advance_intervals(m, now);
        record_loads(m, m->iv.cur_k, now, now);
        m->iv.loads_recorded_to_end = true;
        loadsup_stop(m->iv.loads);
}
