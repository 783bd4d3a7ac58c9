/* SPDX-License-Identifier: MIT */
/* The inventory's parsers of what the kernel writes as text: its command line, its
 * configuration, /proc/cpuinfo, /proc/meminfo, /proc/modules and sysfs's choices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventory-read.h"
#include "sha256.h"

/* ---- the command line ---------------------------------------------------------------------- */

/* Parameters that change what a latency measurement means: isolation and housekeeping, ticks
 * and RCU callbacks, idle and frequency, mitigations, interrupt threading, the preemption
 * mode, clocks and watchdogs, memory. */
static const char *const cmdline_params[] = {
        "isolcpus",
        "nohz_full",
        "nohz",
        "rcu_nocbs",
        "rcu_nocb_poll",
        "rcutree.kthread_prio",
        "irqaffinity",
        "kthread_cpus",
        "idle",
        "intel_idle.max_cstate",
        "processor.max_cstate",
        "cpuidle.off",
        "intel_pstate",
        "amd_pstate",
        "cpufreq.default_governor",
        "mitigations",
        "nosmt",
        "threadirqs",
        "preempt",
        "skew_tick",
        "tsc",
        "clocksource",
        "nosoftlockup",
        "nowatchdog",
        "nmi_watchdog",
        "transparent_hugepage",
        "numa_balancing",
        "hugepages",
        "default_hugepagesz",
        "audit",
};

/* Whether the n bytes at p name param, '-' and '_' being the same. */
static bool same_param(const char *p, size_t n, const char *param) {
        if (strlen(param) != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                char a = p[i] == '-' ? '_' : p[i], b = param[i] == '-' ? '_' : param[i];
                if (a != b)
                        return false;
        }
        return true;
}

/* The next parameter from *at as the kernel splits them: blanks between, a double quote
 * protecting blanks up to the next one.  Its text (quotes removed) into buf; false at the
 * end. */
static bool next_param(const char **at, char *buf, size_t size) {
        const char *p = *at;
        size_t n = 0;
        bool quoted = false;
        while (*p == ' ' || *p == '\t' || *p == '\n')
                p++;
        if (!*p)
                return false;
        for (; *p && (quoted || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
                if (*p == '"')
                        quoted = !quoted;
                else if (n + 1 < size)
                        buf[n++] = *p;
        }
        buf[n] = '\0';
        *at = p;
        return true;
}

int inventory_parse_cmdline(const char *cmdline, struct inventory *inv) {
        _cleanup_free_ char *buf = malloc(strlen(cmdline) + 1);
        if (!buf)
                return -ENOMEM;
        for (const char *at = cmdline; next_param(&at, buf, strlen(cmdline) + 1);) {
                if (strcmp(buf, "--") == 0)
                        break; /* the rest is init's */
                char *eq = strchr(buf, '=');
                size_t n = eq ? (size_t) (eq - buf) : strlen(buf);
                for (size_t i = 0; i < ELEMENTSOF(cmdline_params); i++) {
                        if (!same_param(buf, n, cmdline_params[i]))
                                continue;
                        char name[INVENTORY_MAX_NAME + 1];
                        snprintf(name, sizeof(name), "cmdline.%s", cmdline_params[i]);
                        int r = inventory_set(inv, name, eq ? eq + 1 : "");
                        if (r < 0)
                                return r;
                        break;
                }
        }
        return 0;
}

/* ---- the kernel's configuration ------------------------------------------------------------ */

static const char *const kconfig_options[] = {
        "PREEMPT_RT",
        "PREEMPT",
        "PREEMPT_VOLUNTARY",
        "PREEMPT_NONE",
        "PREEMPT_DYNAMIC",
        "PREEMPT_LAZY",
        "HZ",
        "HZ_PERIODIC",
        "NO_HZ_IDLE",
        "NO_HZ_FULL",
        "RCU_NOCB_CPU",
        "RCU_BOOST",
        "CPU_ISOLATION",
        "IRQ_FORCED_THREADING",
        "HIGH_RES_TIMERS",
        "CPU_FREQ",
        "CPU_IDLE",
        "TRANSPARENT_HUGEPAGE",
        "NUMA",
        "NUMA_BALANCING",
        "SMP",
        "NR_CPUS",
        "RT_GROUP_SCHED",
        "LOCKDEP",
        "PROVE_LOCKING",
        "DEBUG_PREEMPT",
        "DEBUG_ATOMIC_SLEEP",
        "DEBUG_OBJECTS",
        "KASAN",
        "KCSAN",
        "FTRACE",
        "FUNCTION_TRACER",
        "IRQSOFF_TRACER",
        "PREEMPT_TRACER",
        "SCHED_DEBUG",
};

#define DEFAULT_GOV "CPU_FREQ_DEFAULT_GOV_"

/* One line of a configuration: "CONFIG_X=v" or "# CONFIG_X is not set", as option and value
 * (into opt and val); false for any other line. */
static bool config_line(const char *line, size_t len, char *opt, size_t osize, char *val,
                        size_t vsize) {
        const char *p;
        size_t n;
        if (len > 9 && strncmp(line, "CONFIG_", 7) == 0 && (p = memchr(line, '=', len))) {
                n = (size_t) (p - line) - 7;
                size_t vlen = len - (size_t) (p + 1 - line);
                const char *v = p + 1;
                if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
                        v++;
                        vlen -= 2;
                }
                snprintf(opt, osize, "%.*s", (int) n, line + 7);
                snprintf(val, vsize, "%.*s", (int) vlen, v);
                return true;
        }
        if (len > 20 && strncmp(line, "# CONFIG_", 9) == 0 &&
            strncmp(line + len - 11, " is not set", 11) == 0) {
                snprintf(opt, osize, "%.*s", (int) (len - 20), line + 9);
                snprintf(val, vsize, "n");
                return true;
        }
        return false;
}

int inventory_parse_kconfig(const char *text, struct inventory *inv) {
        char opt[128], val[INVENTORY_MAX_VALUE + 1], name[INVENTORY_MAX_NAME + 1];
        for (const char *line = text; *line;) {
                size_t len = strcspn(line, "\n");
                int r = 0;
                if (config_line(line, len, opt, sizeof(opt), val, sizeof(val))) {
                        if (strncmp(opt, DEFAULT_GOV, strlen(DEFAULT_GOV)) == 0 &&
                            strcmp(val, "y") == 0) {
                                /* The governor's name as the kernel's sysfs writes it. */
                                for (char *c = opt + strlen(DEFAULT_GOV); *c; c++)
                                        *c = (char) (*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
                                r = inventory_set(inv, "kconfig.CPU_FREQ_DEFAULT_GOV",
                                                  opt + strlen(DEFAULT_GOV));
                        }
                        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(kconfig_options); i++)
                                if (strcmp(opt, kconfig_options[i]) == 0) {
                                        snprintf(name, sizeof(name), "kconfig.%s", opt);
                                        r = inventory_set(inv, name, val);
                                        break;
                                }
                }
                if (r < 0)
                        return r;
                line += len;
                if (*line)
                        line++;
        }
        return 0;
}

/* ---- /proc/cpuinfo, /proc/meminfo ---------------------------------------------------------- */

/* "key<blanks>: value" with the key trimmed, into key and value; false for other lines. */
static bool key_value(const char *line, size_t len, char *key, size_t ksize, const char **value,
                      size_t *vlen) {
        const char *colon = memchr(line, ':', len);
        if (!colon)
                return false;
        size_t k = (size_t) (colon - line);
        while (k > 0 && (line[k - 1] == ' ' || line[k - 1] == '\t'))
                k--;
        snprintf(key, ksize, "%.*s", (int) k, line);
        const char *v = colon + 1, *end = line + len;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        *value = v;
        *vlen = (size_t) (end - v);
        return true;
}

static const struct {
        const char *key, *field;
} cpuinfo_keys[] = {
        { "vendor_id", "cpu.vendor" },
        { "model name", "cpu.model_name" },
        { "cpu family", "cpu.family" },
        { "model", "cpu.model" },
        { "stepping", "cpu.stepping" },
        { "microcode", "cpu.microcode" },
        { "CPU implementer", "cpu.implementer" },
        { "CPU architecture", "cpu.architecture" },
        { "CPU variant", "cpu.variant" },
        { "CPU part", "cpu.part" },
        { "CPU revision", "cpu.revision" },
        { "Hardware", "cpu.hardware" },
};

/* Adds v (vlen bytes) to the field's distinct values, "a; b", unless it is one already. */
static int add_distinct(struct inventory *inv, const char *field, const char *v, size_t vlen) {
        const char *old = inventory_get(inv, field);
        if (!old)
                return inventory_setf(inv, field, "%.*s", (int) vlen, v);
        for (const char *p = old; *p;) {
                size_t n = strcspn(p, ";");
                if (n == vlen && strncmp(p, v, vlen) == 0)
                        return 0;
                p += n;
                p += strspn(p, "; ");
        }
        return inventory_setf(inv, field, "%s; %.*s", old, (int) vlen, v);
}

int inventory_parse_cpuinfo(const char *text, struct inventory *inv) {
        char key[64];
        for (const char *line = text; *line;) {
                size_t len = strcspn(line, "\n"), vlen;
                const char *v;
                if (key_value(line, len, key, sizeof(key), &v, &vlen) && vlen > 0)
                        for (size_t i = 0; i < ELEMENTSOF(cpuinfo_keys); i++)
                                if (strcmp(key, cpuinfo_keys[i].key) == 0) {
                                        int r = add_distinct(inv, cpuinfo_keys[i].field, v, vlen);
                                        if (r < 0)
                                                return r;
                                        break;
                                }
                line += len;
                if (*line)
                        line++;
        }
        return 0;
}

int inventory_parse_meminfo(const char *text, struct inventory *inv) {
        static const struct {
                const char *key, *field;
        } keys[] = {
                { "MemTotal", "memory.total_kib" },
                { "HugePages_Total", "memory.hugepages" },
                { "Hugepagesize", "memory.hugepage_kib" },
        };
        char key[64];
        for (const char *line = text; *line;) {
                size_t len = strcspn(line, "\n"), vlen;
                const char *v;
                if (key_value(line, len, key, sizeof(key), &v, &vlen))
                        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                                if (strcmp(key, keys[i].key) == 0) {
                                        /* "16315424 kB": the number. */
                                        int r = inventory_setf(inv, keys[i].field, "%.*s",
                                                               (int) strcspn(v, " \n"), v);
                                        if (r < 0)
                                                return r;
                                }
                line += len;
                if (*line)
                        line++;
        }
        return 0;
}

/* ---- /proc/modules, sysfs choices ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int inventory_parse_modules(const char *text, struct inventory *inv) {
        size_t n = 0, cap = 0;
        char **names = NULL;
        int r = 0;
        for (const char *line = text; *line && r >= 0;) {
                size_t len = strcspn(line, "\n"), k = strcspn(line, " \n");
                if (k > 0) {
                        char **a = n == cap ? realloc(names,
                                                      (cap = cap ? 2 * cap : 128) * sizeof(*names))
                                            : names;
                        if (!a || !(a[n] = strndup(line, k)))
                                r = -ENOMEM;
                        if (a)
                                names = a;
                        if (r >= 0)
                                n++;
                }
                line += len;
                if (*line)
                        line++;
        }
        if (r >= 0) {
                struct sha256_ctx c;
                uint8_t d[SHA256_DIGEST_SIZE];
                char hex[2 * SHA256_DIGEST_SIZE + 1];
                if (n > 0)
                        qsort(names, n, sizeof(*names), cmp_str);
                sha256_init(&c);
                for (size_t i = 0; i < n; i++) {
                        sha256_update(&c, names[i], strlen(names[i]));
                        sha256_update(&c, "\n", 1);
                }
                sha256_final(&c, d);
                r = inventory_setf(inv, "modules.count", "%zu", n);
                if (r >= 0)
                        r = inventory_set(inv, "modules.digest", sha256_digest_hex(d, hex));
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

bool inventory_selected(const char *text, char *buf, size_t size) {
        /* The '[' nearest before the first ']': a stray '[' earlier (an escape sequence's) is
         * not the choice's. */
        const char *close = strchr(text, ']'), *open = NULL;
        for (const char *p = text; close && p < close; p++)
                open = *p == '[' ? p : open;
        if (!open)
                return false;
        snprintf(buf, size, "%.*s", (int) (close - open - 1), open + 1);
        return true;
}
