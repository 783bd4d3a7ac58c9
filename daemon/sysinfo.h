/* SPDX-License-Identifier: MIT */
/* What a run records about the machine it ran on: machine and boot ids, host name, kernel
 * release, version and command line, and the preemption model. */
#pragma once

#include <stddef.h>

struct sysinfo_run {
        char machine_id[33];
        char boot_id[33];
        char hostname[256];
        char kernel_release[256];
        char kernel_version[512];
        char kernel_cmdline[4096];
        char preempt_model[64];
        char cpu_model[257]; /* /proc/cpuinfo "model name" */
};

/* Fills everything it can; fields it cannot learn are set to "unknown". */
void sysinfo_read(struct sysinfo_run *ret);

/* "PREEMPT_RT", "PREEMPT_DYNAMIC (full)", "PREEMPT", "PREEMPT_VOLUNTARY", "PREEMPT_NONE":
 * from /sys/kernel/realtime, the version string, and the dynamic mode when debugfs shows it.
 * Arguments allow tests to feed known inputs (NULL: read the real files). */
void sysinfo_preempt_model(const char *realtime_file, const char *uname_version,
                           const char *dynamic_file, const char *cmdline, char *buf, size_t len);
