/* SPDX-License-Identifier: MIT */
/* The readiness check behind READY=1: reads back each probe thread's scheduling, affinity and
 * locked memory from the kernel (/proc/self/smaps VmFlags "lo"). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpuset.h"
#include "macro.h"
#include "notify.h"

bool notify_probes_measuring(struct probe **probes, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const struct probe *p = probes[i];
                if (probe_state(p) != PROBE_RUNNING)
                        return false;
                if (atomic_load_explicit(&p->progress, memory_order_relaxed) == 0 &&
                    atomic_load_explicit(&p->head, memory_order_relaxed) == 0)
                        return false;
        }
        return true;
}

struct locked_query {
        uintptr_t addr;
        bool found, locked;
};

/* Looks up the mapping of each address in /proc/self/smaps and whether the kernel marks it
 * locked (VM_LOCKED, shown as "lo" in VmFlags). */
static int query_locked(struct locked_query *q, size_t n) {
        FILE *f = fopen("/proc/self/smaps", "re");
        if (!f)
                return -errno;
        char line[1024];
        uintptr_t start = 0, end = 0;
        while (fgets(line, sizeof(line), f)) {
                unsigned long a, b;
                if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') &&
                    strchr(line, '-') < strchr(line, ' ')) {
                        start = a;
                        end = b;
                        continue;
                }
                if (strncmp(line, "VmFlags:", 8) != 0)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (q[i].addr >= start && q[i].addr < end) {
                                q[i].found = true;
                                q[i].locked = strstr(line + 8, " lo") != NULL;
                        }
        }
        fclose(f);
        return 0;
}

static bool cpu_online(int cpu) {
        struct cpuset online;
        if (cpuset_online(&online, NULL) < 0)
                return true;
        bool on = cpuset_contains(&online, cpu);
        cpuset_done(&online);
        return on;
}

int notify_verify_probes(struct probe **probes, size_t n, int priority, bool lock_memory, char *why,
                         size_t len) {
        for (size_t i = 0; i < n; i++) {
                struct probe *p = probes[i];
                struct sched_param sp;
                int policy, r;

                r = pthread_getschedparam(p->thread, &policy, &sp);
                if (r != 0) {
                        snprintf(why, len, "CPU %d: cannot read the probe thread's scheduling: %s",
                                 p->cpu, strerror(r));
                        return -r;
                }
                if (policy != SCHED_FIFO || sp.sched_priority != priority) {
                        snprintf(why, len,
                                 "CPU %d: the probe thread runs with policy %d priority %d, not "
                                 "SCHED_FIFO %d",
                                 p->cpu, policy, sp.sched_priority, priority);
                        return -EPERM;
                }

                cpu_set_t set;
                r = pthread_getaffinity_np(p->thread, sizeof(set), &set);
                if (r != 0) {
                        snprintf(why, len, "CPU %d: cannot read the probe thread's affinity: %s",
                                 p->cpu, strerror(r));
                        return -r;
                }
                /* A CPU taken offline meanwhile breaks the pinning: that is hotplug, recorded
                 * and undone when it returns, not a probe set up wrong. */
                if ((CPU_COUNT(&set) != 1 || !CPU_ISSET(p->cpu, &set)) && cpu_online(p->cpu)) {
                        snprintf(why, len, "CPU %d: the probe thread is not pinned to its CPU",
                                 p->cpu);
                        return -EINVAL;
                }

                if (!lock_memory)
                        continue;
                pthread_attr_t attr;
                void *stack = NULL;
                size_t stack_size = 0;
                r = pthread_getattr_np(p->thread, &attr);
                if (r != 0) {
                        snprintf(why, len, "CPU %d: cannot read the probe thread's stack: %s",
                                 p->cpu, strerror(r));
                        return -r;
                }
                pthread_attr_getstack(&attr, &stack, &stack_size);
                pthread_attr_destroy(&attr);
                /* The top of the stack (where it runs) and both ends of its ring. */
                struct locked_query q[] = {
                        { .addr = (uintptr_t) stack + stack_size - 1 },
                        { .addr = (uintptr_t) p->slots },
                        { .addr = (uintptr_t) (p->slots + p->nslots) - 1 },
                };
                const char *what[] = { "stack", "ring", "ring" };
                r = query_locked(q, ELEMENTSOF(q));
                if (r < 0) {
                        snprintf(why, len, "cannot read /proc/self/smaps: %s", strerror(-r));
                        return r;
                }
                for (size_t j = 0; j < ELEMENTSOF(q); j++)
                        if (!q[j].found || !q[j].locked) {
                                snprintf(why, len,
                                         "CPU %d: the probe thread's %s (at 0x%" PRIxPTR
                                         ") is not in locked memory",
                                         p->cpu, what[j], q[j].addr);
                                return -ENOMEM;
                        }
        }
        return 0;
}
