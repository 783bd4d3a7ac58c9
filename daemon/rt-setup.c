/* SPDX-License-Identifier: MIT */
/* Implementation of the real-time preparation and of the diagnosis of refusals.  A daemon
 * that quietly measured at SCHED_OTHER would produce worthless numbers, so every refusal
 * is turned into a message that says which limit applies and how to lift it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "macro.h"
#include "rt-setup.h"
#include "strbuf.h"

static const char *limit_str(rlim_t v, char *buf, size_t len) {
        if (v == RLIM_INFINITY)
                return "unlimited";
        snprintf(buf, len, "%llu", (unsigned long long) v);
        return buf;
}

int rt_lock_memory(char *why, size_t len) {
        if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0)
                return 0;
        int e = errno;
        struct rlimit rl = {};
        char a[32];
        getrlimit(RLIMIT_MEMLOCK, &rl);
        why[0] = '\0';
        strbuf_appendf(why, len, "mlockall(MCL_CURRENT|MCL_FUTURE) failed: %s. ", strerror(e));
        if (e == ENOMEM || e == EPERM)
                strbuf_appendf(
                        why, len,
                        "RLIMIT_MEMLOCK is %s bytes, too small to lock the daemon's memory; set "
                        "LimitMEMLOCK=infinity in the service unit (or raise 'memlock' in "
                        "/etc/security/limits.conf, or ulimit -l unlimited), or run as root. "
                        "Without locked memory a page fault inside a measurement shows up as "
                        "latency the kernel did not cause.",
                        limit_str(rl.rlim_cur, a, sizeof(a)));
        return -e;
}

int rt_hold_dma_latency(uint32_t latency_us, char *why, size_t len) {
        int fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                snprintf(why, len,
                         "cannot open /dev/cpu_dma_latency: %s; deep C-states stay allowed and "
                         "their exit latency will be part of the measurement%s",
                         strerror(e),
                         e == EACCES ? " (needs root, or DeviceAllow=/dev/cpu_dma_latency rw)"
                                     : "");
                return -e;
        }
        /* The kernel keeps the request while this fd is open; it takes a binary s32. */
        int32_t v = (int32_t) latency_us;
        if (write(fd, &v, sizeof(v)) != (ssize_t) sizeof(v)) {
                int e = errno ? errno : EIO;
                snprintf(why, len, "cannot write /dev/cpu_dma_latency: %s", strerror(e));
                close(fd);
                return -e;
        }
        return fd;
}

static bool read_line(const char *path, char *buf, size_t len) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || !fgets(buf, (int) len, f))
                return false;
        buf[strcspn(buf, "\n")] = '\0';
        return true;
}

static bool has_cap_sys_nice(const char *status_path) {
        _cleanup_fclose_ FILE *f = fopen(status_path, "re");
        char line[256];
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "CapEff:", 7) == 0) {
                        unsigned long long caps = strtoull(line + 7, NULL, 16);
                        return caps & (1ULL << 23); /* CAP_SYS_NICE */
                }
        return false;
}

/* The cgroup v1 "cpu" hierarchy path of this process, or NULL. */
static bool cpu_cgroup_path(const char *cgroup_file, char *buf, size_t len) {
        _cleanup_fclose_ FILE *f = fopen(cgroup_file, "re");
        char line[1024];
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f)) {
                char *ctrl = strchr(line, ':'), *path;
                if (!ctrl)
                        continue;
                path = strchr(ctrl + 1, ':');
                if (!path)
                        continue;
                *path++ = '\0';
                path[strcspn(path, "\n")] = '\0';
                /* The controller list is comma separated: "cpu,cpuacct" or "cpu". */
                char *save = NULL;
                for (char *tok = strtok_r(ctrl + 1, ",", &save); tok;
                     tok = strtok_r(NULL, ",", &save))
                        if (strcmp(tok, "cpu") == 0) {
                                snprintf(buf, len, "%s", path);
                                return true;
                        }
        }
        return false;
}

void rt_explain_sched_failure(int error, int prio, const struct rt_paths *paths, char *why,
                              size_t len) {
        const char *status = paths && paths->proc_status ? paths->proc_status : "/proc/self/status";
        const char *cgfile = paths && paths->proc_cgroup ? paths->proc_cgroup : "/proc/self/cgroup";
        const char *rtfile = paths && paths->sched_rt_runtime
                                     ? paths->sched_rt_runtime
                                     : "/proc/sys/kernel/sched_rt_runtime_us";
        const char *cgroot = paths && paths->cgroup_root ? paths->cgroup_root : "/sys/fs/cgroup";
        struct rlimit rl = {};
        char a[32], line[256], cg[512];
        bool cause = false;

        why[0] = '\0';
        strbuf_appendf(why, len, "SCHED_FIFO priority %d refused: %s.", prio, strerror(-error));

        getrlimit(RLIMIT_RTPRIO, &rl);
        bool capable = has_cap_sys_nice(status);
        if (!capable && (rl.rlim_cur == RLIM_INFINITY ? false : rl.rlim_cur < (rlim_t) prio)) {
                strbuf_appendf(why, len,
                               " RLIMIT_RTPRIO is %s and the process lacks CAP_SYS_NICE: set "
                               "LimitRTPRIO=%d (or higher) in the service unit, 'rtprio' in "
                               "/etc/security/limits.conf or ulimit -r %d, or run as root.",
                               limit_str(rl.rlim_cur, a, sizeof(a)), prio, prio);
                cause = true;
        }

        if (read_line(rtfile, line, sizeof(line))) {
                long long v = strtoll(line, NULL, 10);
                if (v == 0) {
                        strbuf_appendf(
                                why, len,
                                " kernel.sched_rt_runtime_us is 0, so real-time tasks get no CPU "
                                "time at all: set it to -1 or 950000 (sysctl "
                                "kernel.sched_rt_runtime_us=950000).");
                        cause = true;
                }
        }

        if (cpu_cgroup_path(cgfile, cg, sizeof(cg))) {
                char path[1024];
                snprintf(path, sizeof(path), "%s/cpu%s/cpu.rt_runtime_us", cgroot,
                         strcmp(cg, "/") == 0 ? "" : cg);
                if (read_line(path, line, sizeof(line)) && strtoll(line, NULL, 10) == 0) {
                        strbuf_appendf(
                                why, len,
                                " The kernel has CONFIG_RT_GROUP_SCHED and our cgroup %s has no "
                                "real-time budget (%s is 0): write a budget into it (e.g. "
                                "echo 950000 > %s, after giving its parents one), or move "
                                "rtsoakd to the root cpu cgroup.",
                                cg, path, path);
                        cause = true;
                }
        }

        if (!cause)
                strbuf_appendf(
                        why, len,
                        " None of the usual causes applies (RLIMIT_RTPRIO %s, CAP_SYS_NICE %s, "
                        "sched_rt_runtime_us and the cgroup RT budget are not 0); check "
                        "security modules and container restrictions.",
                        limit_str(rl.rlim_cur, a, sizeof(a)), capable ? "present" : "absent");
        strbuf_appendf(why, len,
                       " Refusing to measure at SCHED_OTHER: the numbers would be worthless.");
}
