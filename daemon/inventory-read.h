/* SPDX-License-Identifier: MIT */
/* What rtsoakd learns about the machine it measures (docs/inventory.md): DMI, the CPUs and their
 * microcode, topology, memory, the kernel's command line and configuration, clocksource,
 * governors, idle states, RT throttling, transparent hugepages, irqbalance and tuned. */
#pragma once

#include <stdbool.h>

#include "inventory.h"

/* The readers take the root of the tree they read: NULL or "" for the machine itself, else a
 * directory holding sys/, proc/, boot/ and etc/ as the machine's (without a trailing '/').
 *
 * What cannot change while the kernel runs, read once per run, before the probes start:
 * /proc/cpuinfo (on some kernels reading its "cpu MHz" interrupts every CPU), the kernel's
 * configuration (/proc/config.gz is the largest file read), its command line, DMI and the
 * device tree's model.  Fields the kernel does not show are absent. */
int inventory_read_boot(const char *root, struct inventory *ret);
/* What can change while it runs: the CPUs online, topology, SMT, microcode, NUMA nodes, memory,
 * clocksource, cpufreq, cpuidle, RT throttling and other sysctls, transparent hugepages,
 * irqbalance and tuned, the loaded modules.  Reads sysfs, procfs and /etc/tuned only; no
 * file it reads makes the kernel interrupt another CPU. */
int inventory_read_live(const char *root, struct inventory *ret);

/* ---- parsers of the kernel's texts (inventory-parse.c), for the readers and the tests ---- */

/* The RT-relevant parameters of a kernel command line as "cmdline.NAME" fields: the value after
 * '=' with quotes removed, "" for a parameter without one; the last of a repeated parameter
 * wins; nothing after "--" (init's arguments).  '-' and '_' are the same in a name, as for
 * the kernel. */
int inventory_parse_cmdline(const char *cmdline, struct inventory *inv);
/* The RT-relevant options of a kernel configuration as "kconfig.OPTION" fields ("y", "m", a
 * number or a string without its quotes, "n" for "is not set"); options it does not mention
 * are absent.  kconfig.CPU_FREQ_DEFAULT_GOV is the default governor's name. */
int inventory_parse_kconfig(const char *text, struct inventory *inv);
/* /proc/cpuinfo of x86 (vendor, model name, family, model, stepping, microcode) or arm64
 * (implementer, architecture, variant, part, revision) as "cpu.*" fields; a value that differs
 * between CPUs lists each distinct one, "a; b". */
int inventory_parse_cpuinfo(const char *text, struct inventory *inv);
/* /proc/meminfo: memory.total_kib, memory.hugepages, memory.hugepage_kib. */
int inventory_parse_meminfo(const char *text, struct inventory *inv);
/* /proc/modules: modules.count and modules.digest (SHA-256 of the sorted names, one per
 * line), which changes when a module is loaded or unloaded and not with its use count. */
int inventory_parse_modules(const char *text, struct inventory *inv);
/* The selected word of a sysfs choice ("always [madvise] never": "madvise") into buf; false
 * when there is no [word]. */
bool inventory_selected(const char *text, char *buf, size_t size);
