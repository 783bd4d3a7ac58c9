/* SPDX-License-Identifier: MIT */
/* Setting up, reading and removing rtsoakd's tracefs instance.  Everything is done through the
 * instance's own files: the top-level buffer, its tracer and its events stay as other tools
 * left them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "macro.h"
#include "trace-recorder.h"

#define TRACEFS_MAGIC 0x74726163
#define SYSFS_MAGIC 0x62656572
#define READ_MAX (1u << 20)

/* The whole of a tracefs file (they report size 0), NUL-terminated. */
static int read_text(const char *path, char **ret) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap);
        int r = 0;
        while (buf) {
                if (cap - len < 2) {
                        char *n = cap < READ_MAX ? realloc(buf, cap * 2) : NULL;
                        if (!n) {
                                r = -E2BIG;
                                break;
                        }
                        buf = n;
                        cap *= 2;
                }
                ssize_t k = read(fd, buf + len, cap - len - 1);
                if (k < 0) {
                        r = -errno;
                        break;
                }
                if (k == 0)
                        break;
                len += (size_t) k;
        }
        close(fd);
        if (!buf)
                return -ENOMEM;
        if (r < 0) {
                free(buf);
                return r;
        }
        buf[len] = 0;
        *ret = buf;
        return 0;
}

static int write_at(const char *dir, const char *file, const char *value) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = write(fd, value, strlen(value));
        int r = k < 0 ? -errno : (size_t) k == strlen(value) ? 0 : -EIO;
        close(fd);
        return r;
}

static int read_at(const char *dir, const char *file, char **ret) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        return read_text(path, ret);
}

bool trace_kernel_has_timerlat(const char *path) {
        _cleanup_free_ char *t = NULL;
        if (read_at(path, "available_tracers", &t) < 0)
                return false;
        char *save = NULL;
        for (char *w = strtok_r(t, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
                if (strcmp(w, "timerlat") == 0)
                        return true;
        return false;
}

/* tracing_cpumask text for a list of CPUs but those i with skip[i] (skip NULL: none): 32-bit
 * groups, most significant first.  No allocation: a capture thread writes it while every CPU's
 * recording waits. */
#define CPUMASK_TEXT_MAX 1100
static void cpumask_text(const int *cpus, const bool *skip, size_t n, char *buf, size_t size) {
        int top = 0;
        for (size_t i = 0; i < n; i++)
                if (!skip || !skip[i])
                        top = MAX(top, cpus[i]);
        size_t used = 0;
        for (int w = top / 32; w >= 0 && used < size; w--) {
                uint32_t bits = 0;
                for (size_t i = 0; i < n; i++)
                        if ((!skip || !skip[i]) && cpus[i] / 32 == w)
                                bits |= 1u << (cpus[i] % 32);
                used += (size_t) snprintf(buf + used, size - used, w == top / 32 ? "%x" : ",%08x",
                                          bits);
        }
}

/* Mounts tracefs on path, as trace-cmd and rtla (libtracefs) do when it is not mounted. */
static int mount_tracefs(const char *path, char *why) {
        if (mount("nodev", path, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
                return 0;
        int r = -errno;
        snprintf(why, TRACE_WHY_MAX,
                 "tracefs is not mounted at %s and mounting it failed: %s (mount it with "
                 "\"mount -t tracefs nodev %s\"; under systemd \"systemctl start "
                 "sys-kernel-tracing.mount\")",
                 path, strerror(-r), path);
        return r;
}

/* Is path a tracefs?  An empty directory of sysfs there is the kernel's mount point with
 * nothing on it: tracefs is mounted on it (*ret_mounted).  Anything else mounted there was
 * put there on purpose and is left alone.  Fills why when it is no tracefs. */
static int check_mount(const char *path, bool *ret_mounted, char *why) {
        struct statfs sf;
        *ret_mounted = false;
        if (statfs(path, &sf) == 0 && (uint32_t) sf.f_type == SYSFS_MAGIC) {
                int r = mount_tracefs(path, why);
                if (r < 0)
                        return r;
                *ret_mounted = true;
        }
        if (statfs(path, &sf) < 0) {
                int r = -errno;
                snprintf(why, TRACE_WHY_MAX,
                         "%s: %s; tracefs is not there (mount it with \"mount -t tracefs nodev "
                         "%s\", or set [Trace] Path=)",
                         path, strerror(-r), path);
                return r;
        }
        if ((uint32_t) sf.f_type != TRACEFS_MAGIC) {
                snprintf(why, TRACE_WHY_MAX,
                         "%s is not a tracefs (mount it with \"mount -t tracefs nodev %s\", or "
                         "set [Trace] Path=)",
                         path, path);
                return -ENODEV;
        }
        return 0;
}

/* Whether any trace event is enabled, at the top level or in any instance (true when that
 * cannot be read). */
static bool events_enabled_anywhere(const char *path) {
        _cleanup_free_ char *top = NULL, *inst = NULL;
        if (read_at(path, "set_event", &top) < 0 || top[strspn(top, " \n")])
                return true;
        if (asprintf(&inst, "%s/instances", path) < 0)
                return true;
        DIR *d = opendir(inst);
        if (!d)
                return errno != ENOENT;
        bool any = false;
        for (struct dirent *e; !any && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *rel = NULL, *set = NULL;
                any = asprintf(&rel, "instances/%s/set_event", e->d_name) < 0 ||
                      read_at(path, rel, &set) < 0 || set[strspn(set, " \n")];
        }
        closedir(d);
        return any;
}

/* mkdir of the instance with the kernel's pid-to-name cache upkeep off for it.
 *
 * An instance copies the top-level trace options when it is created, and record-cmd is a
 * top-level option only: with it on (the kernel's default), every context switch on the
 * machine then also records both tasks' names in saved_cmdlines, under one lock shared by all
 * CPUs.  Under hackbench that cost the probe 3-5 % of its CPU time per wake-up.  The recorder
 * needs no such cache (sched_switch and sched_wakeup carry the names), so the option is
 * switched off for the instant of the mkdir and switched back on at once.
 *
 * Only while no event is enabled anywhere: switching record-cmd also starts or stops the
 * kernel's name recording for every enabled event of every instance, and it stops it for
 * events that never started it (those of an instance made with record-cmd off, such as
 * another rtsoakd's), which leaves the kernel's count of users below zero and its name
 * recording off for every tool until reboot.  When events are enabled elsewhere, or the option
 * cannot be written (a read-only tracefs but for the instances), the instance is made as it is
 * and rec->comm_cache says so, rec->comm_cache_why which of the two it was. */
static int mkdir_without_comm_cache(const char *path, const char *dir, struct trace_recorder *rec) {
        _cleanup_free_ char *v = NULL;
        bool on = read_at(path, "options/record-cmd", &v) >= 0 && v[0] == '1';
        bool others = on && events_enabled_anywhere(path);
        bool off = on && !others && write_at(path, "options/record-cmd", "0") >= 0;
        int r = mkdir(dir, 0750) < 0 ? -errno : 0;
        if (off)
                (void) write_at(path, "options/record-cmd", "1");
        rec->comm_cache = on && !off;
        rec->comm_cache_why = !rec->comm_cache ? ""
                              : others         ? "trace events are enabled elsewhere, so "
                                                 "options/record-cmd was left as it is"
                                               : "options/record-cmd is not writable here";
        return r;
}

/* mkdir of the instance; a leftover of an rtsoakd that was killed is removed first (before
 * anything else is looked at: its events are still enabled). */
static int make_instance(const char *path, const char *dir, struct trace_recorder *rec, char *why) {
        int r = rmdir(dir) < 0 ? -errno : 0;
        if (r == 0 || r == -ENOENT || r == -EROFS || r == -EACCES || r == -EPERM)
                r = mkdir_without_comm_cache(path, dir, rec);
        if (r == 0)
                return 0;
        if (r == -EBUSY || r == -EEXIST) {
                snprintf(why, TRACE_WHY_MAX,
                         "the tracefs instance %s is in use by another process (another "
                         "rtsoakd? set [Trace] Instance= to a name of its own): %s",
                         dir, strerror(-r));
                return -EBUSY;
        }
        if (r == -ENOENT)
                snprintf(why, TRACE_WHY_MAX,
                         "%s/instances does not exist: this kernel's tracefs has no instances",
                         path);
        else if (r == -EROFS)
                snprintf(why, TRACE_WHY_MAX,
                         "tracefs at %s is read-only here (under systemd: "
                         "ReadWritePaths=%s/instances)",
                         path, path);
        else
                snprintf(why, TRACE_WHY_MAX, "cannot create the tracefs instance %s: %s", dir,
                         strerror(-r));
        return r;
}

/* The wake-up filter on a scheduler wake-up event; where the kernel refuses it, every wake-up
 * is recorded, which costs more but loses nothing. */
static void filter_wakeups(struct trace_recorder *r, const char *sys, const char *ev,
                           const char *filter) {
        char rel[160];
        if (!filter || strcmp(sys, "sched") != 0 ||
            (strncmp(ev, "sched_wakeup", 12) != 0 && strcmp(ev, "sched_waking") != 0))
                return;
        snprintf(rel, sizeof(rel), "events/%s/%s/filter", sys, ev);
        if (write_at(r->dir, rel, filter) < 0)
                r->filter_refused = true;
}

/* Enables one "system:event" and learns its format; a missing one is noted, not fatal. */
static int enable_event(struct trace_recorder *r, const struct trace_params *p, const char *spec) {
        char sys[64], ev[64], rel[160];
        _cleanup_free_ char *fmt = NULL;
        /* "?system:event": only some architectures have it; no notice where missing. */
        bool optional = spec[0] == '?';
        if (sscanf(spec + optional, "%63[^:]:%63s", sys, ev) != 2)
                return -EINVAL;
        snprintf(rel, sizeof(rel), "events/%s/%s/format", sys, ev);
        int k = read_at(r->dir, rel, &fmt);
        if (k >= 0)
                k = trace_formats_add(&r->formats, sys, ev, fmt);
        if (k >= 0) {
                filter_wakeups(r, sys, ev, p->wakeup_filter);
                snprintf(rel, sizeof(rel), "events/%s/%s/enable", sys, ev);
                k = write_at(r->dir, rel, "1");
        }
        if (k < 0 && !optional) {
                size_t l = strlen(r->missing);
                snprintf(r->missing + l, sizeof(r->missing) - l, "%s%s", l ? " " : "", spec);
        }
        return k;
}

static int setup_events(struct trace_recorder *r, const struct trace_params *p, char *why) {
        _cleanup_free_ char *list = strdup(p->events), *hp = NULL, *he = NULL, *pf = NULL;
        const char *reason = NULL;
        size_t enabled = 0;
        if (!list)
                return -ENOMEM;
        int k = read_at(p->path, "events/header_page", &hp);
        if (k >= 0)
                k = read_at(p->path, "events/header_event", &he);
        if (k < 0) {
                snprintf(why, TRACE_WHY_MAX, "cannot read %s/events/header_page: %s", p->path,
                         strerror(-k));
                return k;
        }
        k = trace_formats_header(&r->formats, hp, he, &reason);
        if (k < 0) {
                snprintf(why, TRACE_WHY_MAX, "%s", reason);
                return k;
        }
        char *save = NULL;
        for (char *s = strtok_r(list, " ,\t", &save); s; s = strtok_r(NULL, " ,\t", &save))
                if (enable_event(r, p, s) >= 0)
                        enabled++;
        /* The marker: its format, and the trigger that freezes the buffers when it is hit. */
        k = read_at(r->dir, "events/ftrace/print/format", &pf);
        if (k >= 0)
                k = trace_formats_add(&r->formats, "ftrace", "print", pf);
        if (k < 0 || enabled == 0) {
                snprintf(why, TRACE_WHY_MAX,
                         k < 0 ? "the trace marker's format (events/ftrace/print) is not readable"
                               : "none of the [Trace] Events= exists in this kernel (%s)",
                         r->missing);
                return k < 0 ? k : -ENOENT;
        }
        r->trigger = write_at(r->dir, "events/ftrace/print/trigger", "traceoff") >= 0;
        return 0;
}

static int64_t read_kib(const char *dir, const char *file) {
        _cleanup_free_ char *t = NULL;
        if (read_at(dir, file, &t) < 0)
                return -1;
        return strtoll(t, NULL, 10);
}

static int set_cpu_buffer(struct trace_recorder *r, int cpu, uint64_t kib) {
        char rel[64], val[32];
        snprintf(rel, sizeof(rel), "per_cpu/cpu%d/buffer_size_kb", cpu);
        snprintf(val, sizeof(val), "%" PRIu64, kib);
        return write_at(r->dir, rel, val);
}

static int setup_buffers(struct trace_recorder *r, const struct trace_params *p, char *why) {
        int k;
        r->buffer_kib = p->buffer_kib;
        if (r->buffer_kib == 0) {
                uint64_t bytes = p->lookback_ns * TRACE_AUTO_BYTES_PER_S / 1000000000ull;
                r->buffer_kib = MAX((bytes + 1023) / 1024, (uint64_t) TRACE_AUTO_MIN_KIB);
                r->buffer_kib = MIN(r->buffer_kib, (uint64_t) TRACE_BUFFER_MAX_KIB);
        }
        /* CPUs not probed get the smallest buffer and record nothing. */
        if ((k = write_at(r->dir, "trace_clock", "mono")) < 0 ||
            (k = write_at(r->dir, "buffer_size_kb", "4")) < 0 ||
            (k = trace_recorder_hold(r, NULL)) < 0) {
                snprintf(why, TRACE_WHY_MAX, "cannot set up the tracefs instance %s: %s", r->dir,
                         strerror(-k));
                return k;
        }
        (void) write_at(r->dir, "options/overwrite", "1");
        for (size_t i = 0; i < r->ncpus; i++) {
                k = set_cpu_buffer(r, r->cpus[i], r->buffer_kib);
                if (k < 0) {
                        snprintf(why, TRACE_WHY_MAX,
                                 "cannot give CPU %d a trace buffer of %" PRIu64 " KiB: %s",
                                 r->cpus[i], r->buffer_kib, strerror(-k));
                        return k;
                }
        }
        int64_t sub = read_kib(r->dir, "buffer_subbuf_size_kb");
        r->page_size = sub > 0 ? (size_t) sub * 1024 : (size_t) sysconf(_SC_PAGESIZE);
        return 0;
}

/* Opens file of the instance for writing into *fd; why names it when it cannot be. */
static int open_w(struct trace_recorder *r, const char *file, int *fd, char *why) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", r->dir, file);
        *fd = open(path, O_WRONLY | O_CLOEXEC);
        if (*fd >= 0)
                return 0;
        int e = errno;
        snprintf(why, TRACE_WHY_MAX, "cannot open %s: %s", path, strerror(e));
        return -e;
}

static int open_files(struct trace_recorder *r, char *why) {
        char path[1024];
        int k;
        /* tracing_cpumask is kept open: a capture writes it twice, and opening it costs more
         * than the write. */
        if ((k = open_w(r, "tracing_on", &r->on_fd, why)) < 0 ||
            (k = open_w(r, "trace_marker", &r->marker_fd, why)) < 0 ||
            (k = open_w(r, "tracing_cpumask", &r->cpumask_fd, why)) < 0)
                return k;
        for (size_t i = 0; i < r->ncpus; i++) {
                snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace_pipe_raw", r->dir, r->cpus[i]);
                r->pipe_fds[i] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                if (r->pipe_fds[i] < 0) {
                        int e = errno;
                        snprintf(why, TRACE_WHY_MAX, "cannot open %s: %s", path, strerror(e));
                        return -e;
                }
        }
        return 0;
}

int trace_recorder_open(const struct trace_params *p, struct trace_recorder **ret,
                        char why[static TRACE_WHY_MAX]) {
        struct trace_recorder *r = calloc(1, sizeof(*r));
        int k;
        if (!r)
                return -ENOMEM;
        r->on_fd = r->marker_fd = r->cpumask_fd = -1;
        r->cpus = calloc(p->ncpus, sizeof(int));
        r->pipe_fds = calloc(p->ncpus, sizeof(int));
        if (!r->cpus || !r->pipe_fds ||
            asprintf(&r->dir, "%s/instances/%s", p->path, p->instance) < 0) {
                r->dir = NULL;
                trace_recorder_close(r);
                return -ENOMEM;
        }
        r->ncpus = p->ncpus;
        for (size_t i = 0; i < p->ncpus; i++) {
                r->cpus[i] = p->cpus[i];
                r->pipe_fds[i] = -1;
        }
        k = check_mount(p->path, &r->mounted, why);
        if (k >= 0)
                k = make_instance(p->path, r->dir, r, why);
        if (k < 0) {
                free(r->dir);
                r->dir = NULL; /* not ours to remove */
                trace_recorder_close(r);
                return k;
        }
        /* Nothing is recorded until everything is in place. */
        if ((k = write_at(r->dir, "tracing_on", "0")) < 0)
                snprintf(why, TRACE_WHY_MAX, "cannot write %s/tracing_on: %s", r->dir,
                         strerror(-k));
        if (k >= 0)
                k = setup_buffers(r, p, why);
        if (k >= 0)
                k = setup_events(r, p, why);
        if (k >= 0)
                k = open_files(r, why);
        if (k >= 0 && (k = trace_recorder_set_on(r, true)) < 0)
                snprintf(why, TRACE_WHY_MAX, "cannot start recording: %s", strerror(-k));
        if (k < 0) {
                trace_recorder_close(r);
                return k;
        }
        r->total_kib = (uint64_t) MAX(read_kib(r->dir, "buffer_total_size_kb"), 0);
        *ret = r;
        return 0;
}

void trace_recorder_close(struct trace_recorder *r) {
        if (!r)
                return;
        if (r->on_fd >= 0) {
                /* Tracing off first; a failure changes nothing (the instance goes below). A
                 * (void) cast does not silence warn_unused_result under _FORTIFY_SOURCE. */
                ssize_t w = write(r->on_fd, "0", 1);
                (void) w;
        }
        for (size_t i = 0; r->pipe_fds && i < r->ncpus; i++)
                if (r->pipe_fds[i] >= 0)
                        close(r->pipe_fds[i]);
        if (r->on_fd >= 0)
                close(r->on_fd);
        if (r->marker_fd >= 0)
                close(r->marker_fd);
        if (r->cpumask_fd >= 0)
                close(r->cpumask_fd);
        /* Removing the instance frees its buffers and turns its events off. */
        if (r->dir)
                (void) rmdir(r->dir);
        trace_formats_done(&r->formats);
        free(r->dir);
        free(r->cpus);
        free(r->pipe_fds);
        free(r);
}

int trace_recorder_set_on(struct trace_recorder *r, bool on) {
        if (write(r->on_fd, on ? "1" : "0", 1) != 1)
                return -errno;
        return 0;
}

int trace_recorder_hold(struct trace_recorder *r, const bool *held) {
        if (held && r->ncpus < 2)
                return -EOPNOTSUPP;
        char mask[CPUMASK_TEXT_MAX];
        cpumask_text(r->cpus, held, r->ncpus, mask, sizeof(mask));
        if (r->cpumask_fd < 0) /* while the instance is set up */
                return write_at(r->dir, "tracing_cpumask", mask);
        ssize_t k = write(r->cpumask_fd, mask, strlen(mask));
        return k < 0 ? -errno : (size_t) k == strlen(mask) ? 0 : -EIO;
}

int trace_recorder_drain(struct trace_recorder *r, size_t idx, int64_t min_ts,
                         struct trace_event **ret, size_t *ret_n, bool *ret_lost,
                         int64_t *ret_oldest) {
        uint8_t *page = malloc(r->page_size);
        struct trace_event *ev = NULL;
        size_t n = 0, cap = 0;
        int k = 0;
        *ret_lost = false;
        *ret_oldest = INT64_MAX;
        if (!page)
                return -ENOMEM;
        /* A buffer holds at most its size: a bound on the reads, should the kernel keep
         * handing out pages. */
        for (uint64_t pages = 0; pages <= r->buffer_kib * 1024 / r->page_size + 4; pages++) {
                ssize_t got = read(r->pipe_fds[idx], page, r->page_size);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0 && errno != EAGAIN) {
                        k = -errno;
                        break;
                }
                if (got <= 0)
                        break;
                bool lost = false;
                int64_t first;
                k = trace_page_decode(&r->formats, page, (size_t) got, min_ts, &ev, &n, &cap, &lost,
                                      &first);
                if (k < 0)
                        break;
                /* Only a loss before the first page means the look-back was cut short. */
                if (pages == 0)
                        *ret_lost = lost;
                *ret_oldest = MIN(*ret_oldest, first);
        }
        free(page);
        if (k < 0) {
                free(ev);
                return k;
        }
        *ret = ev;
        *ret_n = n;
        return 0;
}

int64_t trace_recorder_grow(struct trace_recorder *r, size_t idx) {
        if (r->buffer_kib >= TRACE_BUFFER_MAX_KIB)
                return 0;
        uint64_t kib = MIN(r->buffer_kib * 2, (uint64_t) TRACE_BUFFER_MAX_KIB);
        int k = set_cpu_buffer(r, r->cpus[idx], kib);
        if (k < 0)
                return k;
        /* All probed CPUs alike: they see the same loads. */
        for (size_t i = 0; i < r->ncpus; i++)
                if (i != idx)
                        (void) set_cpu_buffer(r, r->cpus[i], kib);
        r->buffer_kib = kib;
        r->total_kib = (uint64_t) MAX(read_kib(r->dir, "buffer_total_size_kb"), 0);
        return (int64_t) kib;
}
