/* SPDX-License-Identifier: MIT */
/* What keeps rtsoakd fit for months: retention and vacuum in small steps, WAL checkpoints,
 * and noticing wall-clock steps and probed CPUs going offline and coming back. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cpuset.h"
#include "housekeeping.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

#define TICK_NS (10 * NSEC_PER_SEC)
#define MAINT_EVERY_TICKS 6 /* retention and checkpoint once a minute */
#define PRUNE_BATCH 200     /* intervals (and events) per transaction */
#define PRUNE_BATCHES 5     /* transactions per minute at most: the main loop stays responsive */
#define VACUUM_PAGES 512    /* pages returned to the file system per batch */
#define CLOCK_STEP_MIN_NS (10 * NSEC_PER_MSEC) /* smaller steps of the wall clock: no event */

struct housekeeping {
        struct housekeeping_params p;
        sd_event_source *tick, *clock, *uevent;
        int timer_fd, uevent_fd;
        uint64_t ticks;
        int64_t offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC as last seen */
        bool *offline;     /* per probe: its CPU was found offline */
        bool *unpinned;    /* per probe: could not be pinned back; not tried again */
        bool stopping;     /* the probes are stopping: no more CPU checks */
        uint64_t unprobed_told[CPU_SETSIZE / 64]; /* CPUs said to be online without a probe */
        struct store_prune_result pruned;
};

static void event(struct housekeeping *h, const char *type, int cpu, int64_t value,
                  const char *details, const char *fmt, ...) _printf_(6, 7);
static void event(struct housekeeping *h, const char *type, int cpu, int64_t value,
                  const char *details, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        log_notice("%s", msg);
        struct store_event ev = {
                .time_ns = now_ns(CLOCK_REALTIME),
                .type = type,
                .cpu = cpu,
                .value_ns = value,
                .message = msg,
                .details = details,
        };
        if (store_add_event(h->p.store, h->p.run_id, &ev) < 0)
                log_error("Failed to store a %s event (%s): %s", type, msg,
                          store_error(h->p.store));
}

/* ---- retention, vacuum, checkpoint ---- */

static void maintain(struct housekeeping *h) {
        if (h->p.retention_ns > 0) {
                int64_t before = now_ns(CLOCK_REALTIME) - (int64_t) h->p.retention_ns;
                for (int i = 0; i < PRUNE_BATCHES; i++) {
                        int r = store_prune(h->p.store, before, PRUNE_BATCH, VACUUM_PAGES,
                                            &h->pruned);
                        if (r < 0) {
                                log_warning("Retention: %s, will retry", store_error(h->p.store));
                                break;
                        }
                        if (r == 0)
                                break;
                }
                log_debug("Retention so far: %" PRIu64 " intervals, %" PRIu64 " events, %" PRIu64
                          " outbox rows deleted, %" PRIu64 " pages returned",
                          h->pruned.intervals, h->pruned.events, h->pruned.outbox,
                          h->pruned.pages_freed);
        }
        if (store_checkpoint(h->p.store) < 0)
                log_warning("WAL checkpoint: %s, ignoring", store_error(h->p.store));
}

/* ---- CPU hotplug ---- */

/* Only a probe thread that is still measuring has an affinity worth reading. */
static bool probe_alive(const struct probe *p) {
        int st = probe_state(p);
        return p->thread_started && (st == PROBE_READY || st == PROBE_RUNNING);
}

/* A probe whose CPU went offline has been moved elsewhere by the kernel (its affinity
 * broken): what it measures is no longer that CPU.  Say so, and pin it back when the CPU
 * returns. */
static bool pinned_to(const struct probe *p) {
        cpu_set_t set;
        if (!probe_alive(p) || pthread_getaffinity_np(p->thread, sizeof(set), &set) != 0)
                return true; /* nothing to say about it */
        /* A thread that has exited but is not joined yet has no kernel task any more:
         * glibc then asks about thread id 0, which is the caller, and gets the main thread's
         * affinity (every CPU).  The state is set before the thread exits, so reading it
         * again after the affinity tells whether the answer was the probe's. */
        if (!probe_alive(p))
                return true;
        return CPU_COUNT(&set) == 1 && CPU_ISSET(p->cpu, &set);
}

void housekeeping_stop_cpu_checks(struct housekeeping *h) {
        if (h)
                h->stopping = true;
}

void housekeeping_check_cpus(struct housekeeping *h) {
        struct cpuset online;
        /* Once the probes are told to stop, they exit one by one: nothing said about their
         * CPUs from then on would be true. */
        if (!h || h->stopping || h->p.nprobes == 0 || cpuset_online(&online, NULL) < 0)
                return;
        for (size_t i = 0; i < h->p.nprobes; i++) {
                struct probe *p = h->p.probes[i];
                bool on = cpuset_contains(&online, p->cpu);
                if (!on && !h->offline[i]) {
                        h->offline[i] = true;
                        event(h, "cpu_offline", p->cpu, -1, NULL,
                              "CPU %d went offline: its probe runs elsewhere until it returns, "
                              "so its intervals meanwhile do not describe CPU %d",
                              p->cpu, p->cpu);
                        continue;
                }
                if (!on || (!h->offline[i] && (h->unpinned[i] || pinned_to(p))))
                        continue;
                /* Back online, or online with its pinning broken: the kernel moved the probe
                 * away when the CPU went offline between two looks. */
                if (!h->offline[i])
                        event(h, "cpu_offline", p->cpu, -1, NULL,
                              "CPU %d went offline and came back between two checks (its probe "
                              "was moved off it): some of its intervals may not describe CPU %d",
                              p->cpu, p->cpu);
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(p->cpu, &set);
                int r = p->thread_started ? -pthread_setaffinity_np(p->thread, sizeof(set), &set)
                                          : -ESRCH;
                h->offline[i] = false;
                h->unpinned[i] = r < 0;
                event(h, "cpu_online", p->cpu, -1, NULL, "CPU %d is online again; its probe %s",
                      p->cpu, r < 0 ? "could not be pinned back to it" : "is pinned to it again");
        }
        /* With CPUs=all, a CPU that was offline at the start and is online now goes unmeasured
         * until a restart: said once per CPU and run. */
        for (size_t i = 0; h->p.all_cpus && i < online.n; i++) {
                int cpu = online.cpus[i];
                bool probed = false;
                for (size_t j = 0; j < h->p.nprobes && !probed; j++)
                        probed = h->p.probes[j]->cpu == cpu;
                if (probed || cpu < 0 || cpu >= CPU_SETSIZE ||
                    (h->unprobed_told[cpu / 64] & (UINT64_C(1) << (cpu % 64))))
                        continue;
                h->unprobed_told[cpu / 64] |= UINT64_C(1) << (cpu % 64);
                event(h, "cpu_unprobed", cpu, -1, NULL,
                      "CPU %d is online but not probed: it was offline when rtsoakd started "
                      "(CPUs=all); restart rtsoakd to measure it",
                      cpu);
        }
        cpuset_done(&online);
}

/* The kernel announces CPUs going offline and online as uevents: with them a change is seen
 * at once rather than at the next tick (which remains, should a notice be lost). */
static int on_uevent(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct housekeeping *h = userdata;
        bool cpu_change = false;
        for (;;) {
                char buf[4096];
                struct sockaddr_nl from;
                socklen_t fromlen = sizeof(from);
                ssize_t n = recvfrom(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT,
                                     (struct sockaddr *) &from, &fromlen);
                if (n < 0) {
                        if (errno == ENOBUFS) { /* notices lost: look anyway */
                                cpu_change = true;
                                continue;
                        }
                        break;
                }
                if (from.nl_pid != 0) /* only the kernel's own notices */
                        continue;
                buf[n] = '\0';
                /* "offline@/devices/system/cpu/cpu1", "online@...": ACTION@DEVPATH */
                const char *at = strchr(buf, '@');
                if (at && strncmp(at, "@/devices/system/cpu/cpu", 24) == 0 &&
                    (strncmp(buf, "offline@", 8) == 0 || strncmp(buf, "online@", 7) == 0))
                        cpu_change = true;
        }
        if (cpu_change)
                housekeeping_check_cpus(h);
        return 0;
}

static void watch_uevents(sd_event *e, struct housekeeping *h) {
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 /* the kernel's */ };
        int r = 0;
        h->uevent_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              NETLINK_KOBJECT_UEVENT);
        if (h->uevent_fd < 0 || bind(h->uevent_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                r = negative_errno();
        else
                r = sd_event_add_io(e, &h->uevent, h->uevent_fd, EPOLLIN, on_uevent, h);
        if (r < 0)
                log_debug_errno(r, "No kernel uevents (%m): CPU hotplug is seen every %u s",
                                (unsigned) (TICK_NS / NSEC_PER_SEC));
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        struct housekeeping *h = userdata;
        h->ticks++;
        housekeeping_check_cpus(h);
        /* The first time soon after the start (an old backlog goes from the first day on),
         * then once a minute. */
        if (h->ticks % MAINT_EVERY_TICKS == 1)
                maintain(h);
        int r = sd_event_source_set_time(s, usec + TICK_NS / 1000);
        return r < 0 ? r : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* ---- wall-clock steps ---- */

static int arm_clock_timer(struct housekeeping *h) {
        /* A realtime timer far in the future that the kernel cancels whenever the clock is
         * set: the cancellation is the notice. */
        struct itimerspec its = { .it_value = { .tv_sec = INT32_MAX } };
        if (timerfd_settime(h->timer_fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) <
            0)
                return -errno;
        return 0;
}

static int on_clock(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct housekeeping *h = userdata;
        uint64_t n;
        if (read(fd, &n, sizeof(n)) < 0 && errno != ECANCELED && errno != EAGAIN)
                return 0;
        /* Armed again before the offset is read: a step from here on cancels the new timer,
         * one before is in the offset; none goes unseen while the event is being stored. */
        int r = arm_clock_timer(h);
        if (r < 0)
                log_warning_errno(r, "Cannot watch the wall clock any more: %m");
        int64_t off = realtime_offset_ns(), step = off - h->offset_ns;
        uint64_t mag = (uint64_t) (step < 0 ? -step : step);
        h->offset_ns = off;
        /* Small steps are frequent on some machines (a hypervisor or a time daemon nudging
         * the clock several times a second) and mean nothing for latencies: not events. */
        if (mag < CLOCK_STEP_MIN_NS) {
                log_debug("Wall clock stepped by %" PRId64 " ns, below the event threshold", step);
                return 0;
        }
        char span[TIMESPAN_MAX_LEN], details[160];
        snprintf(details, sizeof(details), "{\"step_ns\":%" PRId64 ",\"offset_ns\":%" PRId64 "}",
                 step, off);
        event(h, "clock_step", -1, (int64_t) mag, details,
              "the wall clock was set %s by %s (settimeofday, NTP or PTP); latencies are "
              "measured on CLOCK_MONOTONIC and not affected, interval times keep the offset of "
              "the run's start",
              step < 0 ? "back" : "forward",
              format_timespan(span, (mag + NSEC_PER_MSEC / 2) / NSEC_PER_MSEC * NSEC_PER_MSEC));
        return 0;
}

int housekeeping_start(sd_event *e, const struct housekeeping_params *p,
                       struct housekeeping **ret) {
        struct housekeeping *h = calloc(1, sizeof(*h));
        int r;
        if (!h)
                return -ENOMEM;
        h->p = *p;
        h->timer_fd = -1;
        h->uevent_fd = -1;
        h->offline = calloc(p->nprobes + 1, sizeof(bool));
        h->unpinned = calloc(p->nprobes + 1, sizeof(bool));
        if (!h->offline || !h->unpinned) {
                housekeeping_free(h);
                return -ENOMEM;
        }
        h->offset_ns = realtime_offset_ns();
        r = sd_event_add_time_relative(e, &h->tick, CLOCK_MONOTONIC, TICK_NS / 1000, 100 * 1000,
                                       on_tick, h);
        if (r < 0) {
                housekeeping_free(h);
                return r;
        }
        h->timer_fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
        r = h->timer_fd < 0 ? negative_errno() : arm_clock_timer(h);
        if (r >= 0)
                r = sd_event_add_io(e, &h->clock, h->timer_fd, EPOLLIN, on_clock, h);
        if (r < 0)
                log_warning_errno(r, "Cannot watch the wall clock for steps, ignoring: %m");
        if (p->nprobes > 0)
                watch_uevents(e, h);
        *ret = h;
        return 0;
}

void housekeeping_free(struct housekeeping *h) {
        if (!h)
                return;
        sd_event_source_disable_unref(h->tick);
        sd_event_source_disable_unref(h->clock);
        sd_event_source_disable_unref(h->uevent);
        if (h->uevent_fd >= 0)
                close(h->uevent_fd);
        if (h->timer_fd >= 0)
                close(h->timer_fd);
        free(h->offline);
        free(h->unpinned);
        free(h);
}
