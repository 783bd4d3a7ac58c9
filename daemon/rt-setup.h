/* SPDX-License-Identifier: MIT */
/* Preparing the process for real-time measurement (locked memory, the PM QoS latency
 * request) and explaining, precisely, why the kernel refused real-time scheduling. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* mlockall(MCL_CURRENT|MCL_FUTURE); on failure writes what to do into why. */
int rt_lock_memory(char *why, size_t len);

/* Opens /dev/cpu_dma_latency and writes the request; the returned fd must stay open for as
 * long as the request should hold (closing it drops the request). */
int rt_hold_dma_latency(uint32_t latency_us, char *why, size_t len);

/* Explains why SCHED_FIFO at priority prio was refused with error (negative errno):
 * RLIMIT_RTPRIO and capabilities, kernel.sched_rt_runtime_us, and the RT budget of our cgroup
 * under CONFIG_RT_GROUP_SCHED.  Paths may be overridden for tests (NULL: the real ones). */
struct rt_paths {
        const char *proc_status;      /* /proc/self/status */
        const char *proc_cgroup;      /* /proc/self/cgroup */
        const char *sched_rt_runtime; /* /proc/sys/kernel/sched_rt_runtime_us */
        const char *cgroup_root;      /* /sys/fs/cgroup */
};
void rt_explain_sched_failure(int error, int prio, const struct rt_paths *paths, char *why,
                              size_t len);
