/* SPDX-License-Identifier: MIT */
/* A thread's scheduling policy and priority as /proc says, for naming a latency's culprit. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The policy ("SCHED_FIFO" ...) and priority (real-time priority, or nice for the others) of
 * thread tid, if it is still the task named comm (a pid used again since is another task).
 * Safe to call from any thread at once.  0, or -ENOENT (gone, or another task now), or
 * -EBADMSG (a /proc line this code does not understand). */
int proc_thread_sched(pid_t tid, const char *comm, char *policy, size_t policy_size,
                      int32_t *ret_priority);
