/* SPDX-License-Identifier: MIT */
/* The manager's probe threads: which CPUs, starting them until each is pinned and real-time
 * (or says why not), noticing one that failed, and waiting for them at the end. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "rt-setup.h"
#include "timeutil.h"

int manager_resolve_cpus(struct manager *m) {
        struct cpuset online;
        char a[1024];
        int r = cpuset_online(&online, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to read the online CPUs: %m");
        if (m->cfg.cpus.all) {
                m->probes.cpus = online;
                return 0;
        }
        for (size_t i = 0; i < m->cfg.cpus.n; i++)
                if (!cpuset_contains(&online, m->cfg.cpus.cpus[i])) {
                        cpuset_format(&online, a, sizeof(a));
                        log_error(
                                "[Probe] CPUs=: CPU %d is not online on this machine (online: %s)",
                                m->cfg.cpus.cpus[i], a);
                        cpuset_done(&online);
                        return -EINVAL;
                }
        cpuset_done(&online);
        return cpuset_copy(&m->probes.cpus, &m->cfg.cpus);
}

/* A probe that failed its set-up, said in the log.  Refused real-time scheduling: this machine
 * does not let it measure (exit 69, not restarted).  A failed pinning may be a CPU going
 * offline for a moment: 1, restarted. */
static int setup_failed(struct manager *m, const struct probe *p, int priority) {
        m->end.unavailable = strcmp(p->stage, "scheduler") == 0;
        if (strcmp(p->stage, "scheduler") == 0) {
                char why[2048];
                rt_explain_sched_failure(p->error, priority, NULL, why, sizeof(why));
                log_error("CPU %d: %s", p->cpu, why);
        } else
                log_error("CPU %d: probe setup failed at %s: %s", p->cpu, p->stage,
                          strerror(-p->error));
        return p->error;
}

/* Waits until every thread is pinned and real-time, or has said why it is not. */
static int wait_ready(struct manager *m, int priority) {
        for (int waited_ms = 0;; waited_ms++) {
                bool all = true;
                for (size_t i = 0; i < m->probes.n; i++) {
                        struct probe *p = m->probes.p[i];
                        int s = probe_state(p);
                        if (s == PROBE_FAILED)
                                return setup_failed(m, p, priority);
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

int manager_start_probes(struct manager *m, const struct probe_params *pp) {
        const struct cpuset *cpus = &m->probes.cpus;
        int r;

        m->probes.p = calloc(cpus->n, sizeof(*m->probes.p));
        if (!m->probes.p)
                return log_oom();
        for (size_t i = 0; i < cpus->n; i++) {
                r = probe_new(cpus->cpus[i], pp, &m->probes.ctl, &m->probes.p[i]);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the probe for CPU %d: %m",
                                               cpus->cpus[i]);
                m->probes.n++;
                r = probe_start(m->probes.p[i]);
                if (r < 0)
                        return log_error_errno(r, "Failed to start the probe thread for CPU %d: %m",
                                               cpus->cpus[i]);
        }
        return wait_ready(m, pp->priority);
}

void manager_stop_probes(struct manager *m) {
        atomic_store_explicit(&m->probes.ctl.stop, true, memory_order_release);
        for (size_t i = 0; i < m->probes.n; i++)
                probe_join(m->probes.p[i]);
}

static bool probe_finished(const struct probe *p) {
        int s = probe_state(p);
        return s == PROBE_DONE || s == PROBE_FAILED;
}

static bool probes_done(const struct manager *m) {
        for (size_t i = 0; i < m->probes.n; i++)
                if (!probe_finished(m->probes.p[i]))
                        return false;
        return true;
}

const struct probe *manager_failed_probe(const struct manager *m) {
        for (size_t i = 0; i < m->probes.n; i++)
                if (probe_state(m->probes.p[i]) == PROBE_FAILED)
                        return m->probes.p[i];
        return NULL;
}

bool manager_probes_finished(struct manager *m, int64_t now) {
        if (probes_done(m))
                return true;
        if (now <= m->end.deadline_mono)
                return false;
        for (size_t i = 0; i < m->probes.n; i++)
                if (!probe_finished(m->probes.p[i]))
                        log_error("The probe on CPU %d did not stop within 5 s (is a task of "
                                  "higher priority monopolising that CPU?); stopping without its "
                                  "last interval",
                                  m->probes.p[i]->cpu);
        manager_fail(m, "a probe did not stop within 5 s");
        return true;
}

/* Joins only finished threads; one that never stopped is left to exit() (its memory is not
 * freed either, it may still be writing to it). */
void manager_join_finished_probes(struct manager *m) {
        for (size_t i = 0; i < m->probes.n; i++)
                if (probe_finished(m->probes.p[i]))
                        probe_join(m->probes.p[i]);
}
