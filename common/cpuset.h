/* SPDX-License-Identifier: MIT */
/* CPU lists as the kernel writes them ("0,2-3"): parsing into a sorted set, formatting back,
 * and reading which CPUs are online. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The kernel's own limit (CONFIG_NR_CPUS tops out at 8192). */
#define CPUSET_MAX_CPU 8191

struct cpuset {
        bool all;  /* "all": resolved against the online CPUs at start */
        size_t n;  /* number of CPUs in cpus[] */
        int *cpus; /* sorted, unique */
};

void cpuset_done(struct cpuset *s);
int cpuset_copy(struct cpuset *dst, const struct cpuset *src);
/* "all" or a list of CPUs and ranges: "0", "0,2-3", "1-7:2" is not supported. */
int cpuset_parse(const char *s, struct cpuset *ret, const char **ret_reason);
/* The longest list cpuset_format() makes: every other CPU up to the largest, "8190," each. */
#define CPUSET_TEXT_MAX ((CPUSET_MAX_CPU + 1) / 2 * 5 + 8)
/* Formats as a compact list ("0,2-3") or "all"; returns -ENOBUFS if len is too small. */
int cpuset_format(const struct cpuset *s, char *buf, size_t len);
bool cpuset_contains(const struct cpuset *s, int cpu);
/* Reads /sys/devices/system/cpu/online (or the file given, for tests). */
int cpuset_online(struct cpuset *ret, const char *path);
