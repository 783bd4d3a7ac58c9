/* SPDX-License-Identifier: MIT */
/* Reading the inventory where the kernel shows it: sysfs, procfs, the kernel's configuration and
 * tuned's profile file, under a root ("" for the machine itself, a copy of its tree in tests).
 * Every path is fixed; a file that is not there or cannot be read leaves its field out. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <zlib.h>

#include "cpuset.h"
#include "inventory-read.h"
#include "sha256.h"

#define CPU_DIR "/sys/devices/system/cpu"
#define DMI_DIR "/sys/class/dmi/id"
#define MAX_IDLE_STATES 16
#define KCONFIG_MAX (8u << 20) /* a kernel configuration is some 300 KiB */
#define PROC_TEXT_MAX (4u << 20)

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

/* The first line of path, blanks at its end cut, into buf; false when it cannot be read.  A
 * NUL ends it too (the device tree's strings). */
static bool read_line(const char *path, char *buf, size_t size) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || !fgets(buf, (int) size, f))
                return false;
        size_t n = strcspn(buf, "\n");
        while (n > 0 && isspace((unsigned char) buf[n - 1]))
                n--;
        buf[n] = '\0';
        return true;
}

/* Room for a line one byte longer than a value may be, so that inventory_set() sees a longer one
 * as such and marks the cut. */
#define LINE_MAX_READ (INVENTORY_MAX_VALUE + 2)

/* The first line of root/rel into buf (see read_line()). */
static bool read_line_at(const char *root, const char *rel, char *buf, size_t size) {
        char path[PATH_MAX];
        if ((size_t) snprintf(path, sizeof(path), "%s%s", root, rel) >= sizeof(path))
                return false;
        return read_line(path, buf, size);
}

/* A field from the first line of root/rel, if it can be read (and, for DMI, is not empty). */
static int field_from(struct inventory *inv, const char *root, const char *name, const char *rel,
                      bool skip_empty) {
        char buf[LINE_MAX_READ];
        if (!read_line_at(root, rel, buf, sizeof(buf)) || (skip_empty && !*buf))
                return 0;
        return inventory_set(inv, name, buf);
}

/* The whole of root/rel, at most max bytes (NULL when it cannot be read). */
static char *read_text(const char *root, const char *rel, size_t max) {
        char path[PATH_MAX];
        if ((size_t) snprintf(path, sizeof(path), "%s%s", root, rel) >= sizeof(path))
                return NULL;
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        size_t n = 0, cap = 16384;
        char *t = f ? malloc(cap) : NULL;
        if (!t)
                return NULL;
        for (size_t got; (got = fread(t + n, 1, cap - n - 1, f)) > 0;) {
                n += got;
                if (n + 1 == cap && cap < max) {
                        char *a = realloc(t, cap *= 2);
                        if (!a) {
                                free(t);
                                return NULL;
                        }
                        t = a;
                }
                if (n + 1 == cap)
                        break;
        }
        t[n] = '\0';
        return t;
}

/* ---- what cannot change while the kernel runs ---------------------------------------------- */

static int read_dmi(struct inventory *inv, const char *root) {
        static const char *const keys[] = { "sys_vendor",   "product_name", "product_version",
                                            "board_vendor", "board_name",   "board_version",
                                            "bios_vendor",  "bios_version", "bios_date",
                                            "bios_release" };
        char path[128], name[64];
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++) {
                snprintf(path, sizeof(path), DMI_DIR "/%s", keys[i]);
                snprintf(name, sizeof(name), "dmi.%s", keys[i]);
                r = field_from(inv, root, name, path, true);
        }
        if (r >= 0)
                r = field_from(inv, root, "dt.model", "/sys/firmware/devicetree/base/model", true);
        return r;
}

/* The running kernel's release: the root's /proc/sys/kernel/osrelease, else uname's. */
static bool kernel_release(const char *root, char *buf, size_t size) {
        struct utsname u;
        if (read_line_at(root, "/proc/sys/kernel/osrelease", buf, size) && *buf &&
            !strchr(buf, '/'))
                return true;
        if (*root || uname(&u) < 0)
                return false;
        snprintf(buf, size, "%s", u.release);
        return true;
}

/* The running kernel's configuration: /proc/config.gz, else /boot/config-RELEASE (zlib reads
 * either, compressed or not): its source, its SHA-256 and its RT-relevant options. */
static int read_kconfig(struct inventory *inv, const char *root) {
        char release[256], rel[300], path[PATH_MAX];
        const char *source = "/proc/config.gz";
        snprintf(path, sizeof(path), "%s%s", root, source);
        gzFile f = gzopen(path, "rb");
        if (!f && kernel_release(root, release, sizeof(release))) {
                snprintf(rel, sizeof(rel), "/boot/config-%s", release);
                source = rel;
                snprintf(path, sizeof(path), "%s%s", root, source);
                f = gzopen(path, "rb");
        }
        if (!f)
                return 0;
        size_t n = 0, cap = 512 * 1024;
        char *t = malloc(cap);
        int got = 0;
        while (t && n + 1 < KCONFIG_MAX && (got = gzread(f, t + n, (unsigned) (cap - n - 1))) > 0) {
                n += (size_t) got;
                char *a = n + 1 == cap && cap < KCONFIG_MAX ? realloc(t, cap *= 2) : t;
                if (!a)
                        free(t);
                t = a;
        }
        gzclose(f);
        if (!t)
                return -ENOMEM;
        t[n] = '\0';
        char hex[2 * SHA256_DIGEST_SIZE + 1];
        int r = got < 0 || n == 0 ? 0 : inventory_set(inv, "kconfig.source", source);
        if (r >= 0 && got >= 0 && n > 0)
                r = inventory_set(inv, "kconfig.digest", sha256_hex(t, n, hex));
        if (r >= 0 && got >= 0)
                r = inventory_parse_kconfig(t, inv);
        free(t);
        return r;
}

int inventory_read_boot(const char *root, struct inventory *ret) {
        root = root ?: "";
        _cleanup_free_ char *cpuinfo = read_text(root, "/proc/cpuinfo", PROC_TEXT_MAX);
        _cleanup_free_ char *cmdline = read_text(root, "/proc/cmdline", PROC_TEXT_MAX);
        int r = read_dmi(ret, root);
        if (r >= 0 && cpuinfo)
                r = inventory_parse_cpuinfo(cpuinfo, ret);
        if (r >= 0 && cmdline)
                r = inventory_parse_cmdline(cmdline, ret);
        if (r >= 0)
                r = read_kconfig(ret, root);
        /* The machine's own kernel only (a tree of files has none). */
        struct utsname un;
        if (r >= 0 && !*root && uname(&un) == 0)
                r = inventory_set(ret, "uname.machine", un.machine);
        return r;
}

/* ---- per CPU ------------------------------------------------------------------------------- */

/* A value of each of a set of CPUs. */
struct cpu_value {
        char value[64];
        int cpu;
};
struct per_cpu {
        struct cpu_value *v;
        size_t n, cap;
};

static int per_cpu_add(struct per_cpu *p, int cpu, const char *value) {
        if (p->n == p->cap) {
                size_t cap = p->cap ? 2 * p->cap : 16;
                void *a = realloc(p->v, cap * sizeof(*p->v));
                if (!a)
                        return -ENOMEM;
                p->v = a;
                p->cap = cap;
        }
        snprintf(p->v[p->n].value, sizeof(p->v[p->n].value), "%s", value);
        p->v[p->n++].cpu = cpu;
        return 0;
}

/* One field for a value the CPUs hold: the value when all agree, else "VALUE:CPUS" for each
 * distinct value (in the order of its first CPU), space-separated: "performance:0-3
 * powersave:4-7". */
static int per_cpu_field(struct inventory *inv, const char *name, struct per_cpu *p) {
        _cleanup_free_ char *out = NULL, *list = malloc(CPUSET_TEXT_MAX);
        size_t len = 0;
        int r = 0;
        bool one = true;
        for (size_t i = 1; i < p->n; i++)
                one &= strcmp(p->v[i].value, p->v[0].value) == 0;
        if (p->n == 0 || one) {
                r = p->n ? inventory_set(inv, name, p->v[0].value) : 0;
                goto out;
        }
        FILE *f = list ? open_memstream(&out, &len) : NULL;
        if (!f) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < p->n; i++) {
                bool seen = false;
                for (size_t j = 0; j < i; j++)
                        seen |= strcmp(p->v[j].value, p->v[i].value) == 0;
                if (seen)
                        continue;
                int cpus[CPUSET_MAX_CPU + 1];
                struct cpuset set = { .cpus = cpus };
                for (size_t j = i; j < p->n; j++)
                        if (strcmp(p->v[j].value, p->v[i].value) == 0)
                                cpus[set.n++] = p->v[j].cpu;
                cpuset_format(&set, list, CPUSET_TEXT_MAX);
                fprintf(f, "%s%s:%s", ftell(f) ? " " : "", p->v[i].value, list);
        }
        r = fclose(f) == 0 ? inventory_set(inv, name, out) : -ENOMEM;
out:
        free(p->v);
        *p = (struct per_cpu){};
        return r;
}

static int cmp_cpu(const void *a, const void *b) {
        const struct cpu_value *x = a, *y = b;
        return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

/* Topology of the online CPUs: sockets (physical packages), cores (a package's and die's
 * core ids), threads; SMT's control and state; microcode revision per CPU, where the microcode
 * driver shows it (it changes with a late load). */
static int read_topology(struct inventory *inv, const char *root, const struct cpuset *online) {
        char path[160], pkg[32], die[32], core[32], rev[64];
        _cleanup_free_ char *seen = calloc(online->n + 1, 96);
        struct per_cpu microcode = {};
        size_t sockets = 0, cores = 0;
        int r = seen ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < online->n; i++) {
                int cpu = online->cpus[i];
                char *key = seen + i * 96;
                snprintf(path, sizeof(path), CPU_DIR "/cpu%d/topology/physical_package_id", cpu);
                if (!read_line_at(root, path, pkg, sizeof(pkg)))
                        continue;
                snprintf(path, sizeof(path), CPU_DIR "/cpu%d/topology/die_id", cpu);
                if (!read_line_at(root, path, die, sizeof(die)))
                        snprintf(die, sizeof(die), "0");
                snprintf(path, sizeof(path), CPU_DIR "/cpu%d/topology/core_id", cpu);
                if (!read_line_at(root, path, core, sizeof(core)))
                        snprintf(core, sizeof(core), "%d", cpu);
                snprintf(key, 96, "%s/%s/%s", pkg, die, core);
                bool new_pkg = true, new_core = true;
                for (size_t j = 0; j < i; j++) {
                        const char *other = seen + j * 96;
                        new_core &= strcmp(other, key) != 0;
                        new_pkg &= strncmp(other, pkg, strlen(pkg)) != 0 ||
                                   other[strlen(pkg)] != '/';
                }
                sockets += new_pkg;
                cores += new_core;
                snprintf(path, sizeof(path), CPU_DIR "/cpu%d/microcode/version", cpu);
                if (read_line_at(root, path, rev, sizeof(rev)))
                        r = per_cpu_add(&microcode, cpu, rev);
        }
        if (r >= 0 && sockets > 0)
                r = inventory_setf(inv, "cpu.sockets", "%zu", sockets);
        if (r >= 0 && cores > 0)
                r = inventory_setf(inv, "cpu.cores", "%zu", cores);
        if (r >= 0)
                r = inventory_setf(inv, "cpu.threads", "%zu", online->n);
        if (r >= 0 && microcode.n > 0)
                r = per_cpu_field(inv, "cpu.microcode", &microcode);
        free(microcode.v);
        if (r >= 0)
                r = field_from(inv, root, "cpu.smt", CPU_DIR "/smt/control", true);
        if (r >= 0)
                r = field_from(inv, root, "cpu.smt_active", CPU_DIR "/smt/active", true);
        return r;
}

static int is_policy(const struct dirent *e) {
        return strncmp(e->d_name, "policy", 6) == 0;
}

/* cpufreq's policies: the driver, governor and limits of the CPUs each covers. */
static int read_cpufreq(struct inventory *inv, const char *root) {
        static const struct {
                const char *file, *field;
        } attrs[] = {
                { "scaling_driver", "cpufreq.driver" },
                { "scaling_governor", "cpufreq.governor" },
                { "scaling_min_freq", "cpufreq.min_khz" },
                { "scaling_max_freq", "cpufreq.max_khz" },
        };
        struct per_cpu v[ELEMENTSOF(attrs)] = {};
        char path[PATH_MAX], cpus[4096], value[64];
        struct dirent **ents = NULL;
        snprintf(path, sizeof(path), "%s" CPU_DIR "/cpufreq", root);
        /* In the policies' order (policyN covers CPU N first), whatever readdir()'s. */
        int nents = scandir(path, &ents, is_policy, versionsort);
        /* A CPU counts in the first policy that names it: policies that overlap (the kernel
         * makes none) must not give one CPU two values. */
        _cleanup_free_ bool *taken = calloc(CPUSET_MAX_CPU + 1, sizeof(bool));
        int r = taken ? 0 : -ENOMEM;
        for (int k = 0; r >= 0 && k < nents; k++) {
                struct cpuset set = {};
                const char *policy = ents[k]->d_name;
                snprintf(path, sizeof(path), CPU_DIR "/cpufreq/%s/affected_cpus", policy);
                /* "0 1 2 3": a list of single CPUs, as cpuset_parse() takes them with commas. */
                if (!read_line_at(root, path, cpus, sizeof(cpus)))
                        continue;
                for (char *c = cpus; *c; c++)
                        *c = *c == ' ' ? ',' : *c;
                if (cpuset_parse(cpus, &set, NULL) < 0)
                        continue;
                for (size_t a = 0; r >= 0 && a < ELEMENTSOF(attrs); a++) {
                        snprintf(path, sizeof(path), CPU_DIR "/cpufreq/%s/%s", policy,
                                 attrs[a].file);
                        if (!read_line_at(root, path, value, sizeof(value)))
                                continue;
                        for (size_t i = 0; r >= 0 && i < set.n; i++)
                                if (!taken[set.cpus[i]])
                                        r = per_cpu_add(&v[a], set.cpus[i], value);
                }
                for (size_t i = 0; i < set.n; i++)
                        taken[set.cpus[i]] = true;
                cpuset_done(&set);
        }
        for (int k = 0; k < nents; k++)
                free(ents[k]);
        free(ents);
        for (size_t a = 0; a < ELEMENTSOF(attrs); a++) {
                if (r >= 0 && v[a].n > 0) {
                        qsort(v[a].v, v[a].n, sizeof(*v[a].v), cmp_cpu);
                        r = per_cpu_field(inv, attrs[a].field, &v[a]);
                }
                free(v[a].v);
        }
        if (r >= 0)
                r = field_from(inv, root, "cpufreq.boost", CPU_DIR "/cpufreq/boost", true);
        if (r >= 0)
                r = field_from(inv, root, "cpufreq.intel_pstate", CPU_DIR "/intel_pstate/status",
                               true);
        if (r >= 0)
                r = field_from(inv, root, "cpufreq.no_turbo", CPU_DIR "/intel_pstate/no_turbo",
                               true);
        return r;
}

/* A cpuidle state's name as a field name's part: what the rule does not allow becomes '_'. */
static void state_name(const char *name, char *buf, size_t size) {
        size_t n = 0;
        for (; name[n] && n + 1 < size; n++)
                buf[n] = isalnum((unsigned char) name[n]) || name[n] == '-' || name[n] == '.'
                                 ? name[n]
                                 : '_';
        buf[n] = '\0';
}

/* The idle states of the online CPUs: cpuidle.state.NAME "enabled", "disabled", or per CPU. */
static int read_cpuidle(struct inventory *inv, const char *root, const struct cpuset *online) {
        struct per_cpu v[MAX_IDLE_STATES] = {};
        char names[MAX_IDLE_STATES][48] = {}, path[160], buf[64], name[INVENTORY_MAX_NAME + 1];
        int r = 0;
        for (size_t i = 0; r >= 0 && i < online->n; i++)
                for (int k = 0; r >= 0 && k < MAX_IDLE_STATES; k++) {
                        snprintf(path, sizeof(path), CPU_DIR "/cpu%d/cpuidle/state%d/name",
                                 online->cpus[i], k);
                        if (!read_line_at(root, path, buf, sizeof(buf)))
                                break;
                        if (!names[k][0])
                                state_name(buf, names[k], sizeof(names[k]));
                        snprintf(path, sizeof(path), CPU_DIR "/cpu%d/cpuidle/state%d/disable",
                                 online->cpus[i], k);
                        if (read_line_at(root, path, buf, sizeof(buf)))
                                r = per_cpu_add(&v[k], online->cpus[i],
                                                strcmp(buf, "0") == 0 ? "enabled" : "disabled");
                }
        for (int k = 0; k < MAX_IDLE_STATES; k++) {
                snprintf(name, sizeof(name), "cpuidle.state.%s", names[k]);
                if (r >= 0 && v[k].n > 0)
                        r = per_cpu_field(inv, name, &v[k]);
                free(v[k].v);
        }
        if (r >= 0)
                r = field_from(inv, root, "cpuidle.driver", CPU_DIR "/cpuidle/current_driver",
                               true);
        if (r >= 0)
                r = field_from(inv, root, "cpuidle.governor",
                               CPU_DIR "/cpuidle/current_governor_ro", true);
        return r;
}

/* Whether irqbalance and tuned run: a process of that name in /proc (tuned, a script, has its
 * name as the kernel's name for the process). */
static int read_services(struct inventory *inv, const char *root) {
        static const char *const services[] = { "irqbalance", "tuned" };
        bool running[ELEMENTSOF(services)] = {};
        char path[PATH_MAX], comm[32], name[64];
        snprintf(path, sizeof(path), "%s/proc", root);
        _cleanup_(closedirp) DIR *d = opendir(path);
        if (!d)
                return 0;
        for (struct dirent *e; (e = readdir(d));) {
                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%.32s/comm", e->d_name);
                if (!read_line_at(root, path, comm, sizeof(comm)))
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(services); i++)
                        running[i] |= strcmp(comm, services[i]) == 0;
        }
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(services); i++) {
                snprintf(name, sizeof(name), "service.%s", services[i]);
                r = inventory_set(inv, name, running[i] ? "running" : "not running");
        }
        if (r >= 0)
                r = field_from(inv, root, "tuned.profile", "/etc/tuned/active_profile", true);
        return r;
}

/* A field from a text of procfs read by parse. */
static int parse_file(struct inventory *inv, const char *root, const char *rel,
                      int (*parse)(const char *, struct inventory *)) {
        _cleanup_free_ char *t = read_text(root, rel, PROC_TEXT_MAX);
        return t ? parse(t, inv) : 0;
}

/* Files of one line each, read at every check. */
static const struct {
        const char *field, *path;
        bool selected; /* a sysfs choice: the [word] */
} live_files[] = {
        { "cpu.online", CPU_DIR "/online" },
        { "cpu.isolated", CPU_DIR "/isolated" },
        { "cpu.nohz_full", CPU_DIR "/nohz_full" },
        { "numa.nodes", "/sys/devices/system/node/online" },
        { "clocksource.current",
          "/sys/devices/system/clocksource/clocksource0/current_clocksource" },
        { "clocksource.available",
          "/sys/devices/system/clocksource/clocksource0/available_clocksource" },
        { "sysctl.kernel.sched_rt_runtime_us", "/proc/sys/kernel/sched_rt_runtime_us" },
        { "sysctl.kernel.sched_rt_period_us", "/proc/sys/kernel/sched_rt_period_us" },
        { "sysctl.kernel.timer_migration", "/proc/sys/kernel/timer_migration" },
        { "sysctl.kernel.numa_balancing", "/proc/sys/kernel/numa_balancing" },
        { "sysctl.kernel.nmi_watchdog", "/proc/sys/kernel/nmi_watchdog" },
        { "irq.default_affinity", "/proc/irq/default_smp_affinity" },
        { "thp.enabled", "/sys/kernel/mm/transparent_hugepage/enabled", true },
        { "thp.defrag", "/sys/kernel/mm/transparent_hugepage/defrag", true },
};

int inventory_read_live(const char *root, struct inventory *ret) {
        char buf[LINE_MAX_READ], word[64], path[PATH_MAX];
        struct cpuset online = {};
        int r = 0;
        root = root ?: "";
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(live_files); i++) {
                if (!read_line_at(root, live_files[i].path, buf, sizeof(buf)))
                        continue;
                if (live_files[i].selected && inventory_selected(buf, word, sizeof(word)))
                        r = inventory_set(ret, live_files[i].field, word);
                else if (*buf || !live_files[i].selected)
                        r = inventory_set(ret, live_files[i].field, buf);
        }
        snprintf(path, sizeof(path), "%s" CPU_DIR "/online", root);
        if (r >= 0 && cpuset_online(&online, path) >= 0) {
                r = read_topology(ret, root, &online);
                if (r >= 0)
                        r = read_cpuidle(ret, root, &online);
        }
        cpuset_done(&online);
        if (r >= 0)
                r = read_cpufreq(ret, root);
        if (r >= 0)
                r = parse_file(ret, root, "/proc/meminfo", inventory_parse_meminfo);
        if (r >= 0)
                r = parse_file(ret, root, "/proc/modules", inventory_parse_modules);
        if (r >= 0)
                r = read_services(ret, root);
        return r;
}
