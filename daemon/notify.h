/* SPDX-License-Identifier: MIT */
/* What rtsoakd tells systemd: when it is ready (the probe threads measure, at their real-time
 * priority, on their CPU, in locked memory, as the threads themselves run, not as asked). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "probe.h"

/* Whether every probe thread runs and has taken at least one sample. */
bool notify_probes_measuring(struct probe **probes, size_t n);

/* Checks each probe thread as the kernel runs it: SCHED_FIFO at priority, pinned to its CPU,
 * and (with lock_memory) its stack and ring in locked memory.  Returns 0, or -errno with what
 * is wrong in why. */
int notify_verify_probes(struct probe **probes, size_t n, int priority, bool lock_memory, char *why,
                         size_t len);
