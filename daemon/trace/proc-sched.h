/* SPDX-License-Identifier: MIT */
/* A thread's scheduling policy and priority as /proc says, for naming a latency's culprit. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The policy ("SCHED_FIFO" ...) and priority (real-time priority, or nice for the others) of
 * thread tid, if it is still the task named comm (a pid used again since is another task).
 * Safe to call from any thread at once.  0, or -ENOENT (gone, another task now, or a name
 * /proc shows otherwise than the trace: a worker's longer name, bytes the analysis replaced),
 * or -EBADMSG (a /proc line this code does not understand).  The policy is the one now, not
 * at the time of the latency (priority inheritance may have raised it then). */
int proc_thread_sched(pid_t tid, const char *comm, char *policy, size_t policy_size,
                      int32_t *ret_priority);
