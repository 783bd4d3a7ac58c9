/* SPDX-License-Identifier: MIT */
/* The fileio load: workers writing, fsyncing, reading back (and checking) and unlinking files
 * in one directory, at a chosen byte rate or flat out, never filling the file system. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

enum { FILEIO_METRIC_WRITE, FILEIO_METRIC_READ, FILEIO_METRIC_FSYNC };

/* O_DIRECT buffers and transfer sizes are aligned to this: the largest logical block size
 * in common use (4Kn disks), so that --direct works on any device. */
#define DIRECT_ALIGN 4096
/* Every 512-byte sector of a file starts with this stamp, so that a misplaced or stale
 * sector is told apart from a correct one. */
#define SECTOR 512
/* How often free space is checked while a file is being written. */
#define SPACE_CHECK_NS (100 * (int64_t) NSEC_PER_MSEC)
/* How long run() waits for workers after a stop request before cleaning up for them. */
#define STOP_GRACE_NS (250 * (int64_t) NSEC_PER_MSEC)

struct fileio_opts {
        char *dir;
        uint64_t block_size;
        uint64_t file_size;
        uint64_t workers;
        uint64_t rate; /* bytes/s written, all workers together; 0: flat out */
        uint64_t min_free;
        bool fsync;
        bool direct;
        bool verify;
};

static const struct loadgen_opt fileio_opts[] = {
        { "dir", LOADGEN_OPT_STRING, offsetof(struct fileio_opts, dir), 0, 0, "/var/tmp", NULL,
          "directory the files are written in" },
        { "block-size", LOADGEN_OPT_SIZE, offsetof(struct fileio_opts, block_size), 512,
          UINT64_C(64) << 20, "64K", NULL, "size of each write and read" },
        { "file-size", LOADGEN_OPT_SIZE, offsetof(struct fileio_opts, file_size), 4096,
          UINT64_C(1) << 40, "64M", NULL, "size of each file before it is read back and removed" },
        { "workers", LOADGEN_OPT_UINT, offsetof(struct fileio_opts, workers), 1, 64, "1", NULL,
          "worker threads, each with its own file" },
        { "rate", LOADGEN_OPT_BYTERATE, offsetof(struct fileio_opts, rate), 0, 0, "0", NULL,
          "bytes written per second by all workers together; 0: flat out" },
        { "min-free", LOADGEN_OPT_SIZE, offsetof(struct fileio_opts, min_free), 0, 0, "1G", NULL,
          "free space to leave on the file system; writing pauses below it" },
        { "fsync", LOADGEN_OPT_BOOL, offsetof(struct fileio_opts, fsync), 0, 0, "yes", NULL,
          "fsync each file before reading it back" },
        { "direct", LOADGEN_OPT_BOOL, offsetof(struct fileio_opts, direct), 0, 0, "no", NULL,
          "bypass the page cache (O_DIRECT)" },
        { "verify", LOADGEN_OPT_BOOL, offsetof(struct fileio_opts, verify), 0, 0, "yes", NULL,
          "check that what is read back is what was written" },
};

static const struct loadgen_metric fileio_metrics[] = {
        [FILEIO_METRIC_WRITE] = { "write", "MiB/s", "bytes", 1.0 / 1048576 },
        [FILEIO_METRIC_READ] = { "read", "MiB/s", "bytes", 1.0 / 1048576 },
        [FILEIO_METRIC_FSYNC] = { "fsync", "fsyncs/s", "fsyncs", 1.0 },
};

/* What all workers share. */
struct fileio_shared {
        atomic_bool low_space; /* a "low_space" event is out and no "space_ok" yet */
        atomic_int error;      /* the first worker error */
};

struct fileio_worker {
        struct loadgen_ctx *ctx;
        const struct fileio_opts *o;
        struct fileio_shared *shared;
        unsigned index;
        pthread_t thread;
        atomic_bool done;
        struct loadgen_pacer pacer;
        uint8_t *wbuf, *rbuf;
        /* The file being worked on, so that run() can remove it for a worker stuck in a
         * system call when the stop grace time is over.  The lock is never held across I/O
         * other than creating and removing the file. */
        pthread_mutex_t lock;
        bool has_file, abandoned;
        char path[4200];
        int64_t last_space_check_ns;
};

static char *format_size(char buf[static 32], uint64_t v) {
        static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB" };
        double x = (double) v;
        unsigned u = 0;
        while (x >= 1024 && u + 1 < ELEMENTSOF(units)) {
                x /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, 32, "%" PRIu64 " bytes", v);
        else
                snprintf(buf, 32, "%.1f %s", x, units[u]);
        return buf;
}

static int fileio_check(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]) {
        const struct fileio_opts *o = opts;
        if (!o->dir || !o->dir[0]) {
                snprintf(err, LOADGEN_ERROR_MAX, "fileio: --dir must not be empty");
                return -EINVAL;
        }
        if (o->block_size > o->file_size) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "fileio: --block-size=%" PRIu64 " is larger than --file-size=%" PRIu64,
                         o->block_size, o->file_size);
                return -EINVAL;
        }
        if (o->direct && (o->block_size % DIRECT_ALIGN || o->file_size % DIRECT_ALIGN)) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "fileio: --direct needs --block-size and --file-size to be multiples of "
                         "%d bytes (got %" PRIu64 " and %" PRIu64 ")",
                         DIRECT_ALIGN, o->block_size, o->file_size);
                return -EINVAL;
        }
        if (o->rate > 0 && o->rate < o->workers) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "fileio: --rate=%" PRIu64 " is less than one byte per second for each of "
                         "the %" PRIu64 " workers",
                         o->rate, o->workers);
                return -EINVAL;
        }
        return 0;
}

/* The file system's name for messages ("tmpfs"), from the few that matter here. */
static const char *fs_name(const char *dir) {
        static const struct {
                long magic;
                const char *name;
        } table[] = {
                { TMPFS_MAGIC, "tmpfs" },
                { EXT4_SUPER_MAGIC, "ext4" },
                { XFS_SUPER_MAGIC, "xfs" },
                { BTRFS_SUPER_MAGIC, "btrfs" },
                { NFS_SUPER_MAGIC, "nfs" },
                { RAMFS_MAGIC, "ramfs" },
                { OVERLAYFS_SUPER_MAGIC, "overlayfs" },
                { SQUASHFS_MAGIC, "squashfs" },
                { 0x65735546, "fuse" },
                { 0xf2f52010, "f2fs" },
                { 0x5346544e, "ntfs" },
                { MSDOS_SUPER_MAGIC, "vfat" },
        };
        struct statfs s;
        if (statfs(dir, &s) < 0)
                return "unknown file system";
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if ((long) s.f_type == table[i].magic)
                        return table[i].name;
        return "unknown file system";
}

/* Tries what the workers will do: create a file in the directory and, with --direct, write
 * one aligned block through O_DIRECT (which tmpfs refused before Linux 6.6, and some FUSE
 * and network file systems still refuse, with EINVAL on open or on the first write). */
static int fileio_probe(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]) {
        const struct fileio_opts *o = opts;
        struct stat st;
        char path[4200];
        int r = 0;

        if (stat(o->dir, &st) < 0) {
                r = negative_errno();
                if (r == -ENOENT)
                        snprintf(why, LOADGEN_ERROR_MAX, "%s does not exist", o->dir);
                else
                        snprintf(why, LOADGEN_ERROR_MAX, "cannot access %s: %s", o->dir,
                                 strerror(-r));
                return r;
        }
        if (!S_ISDIR(st.st_mode)) {
                snprintf(why, LOADGEN_ERROR_MAX, "%s is not a directory", o->dir);
                return -ENOTDIR;
        }
        if (access(o->dir, W_OK | X_OK) < 0) {
                r = negative_errno();
                snprintf(why, LOADGEN_ERROR_MAX, "%s is not writable: %s", o->dir, strerror(-r));
                return r;
        }

        snprintf(path, sizeof(path), "%s/rtsoak-fileio.%d.probe", o->dir, (int) getpid());
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | (o->direct ? O_DIRECT : 0),
                      0600);
        if (fd < 0) {
                r = negative_errno();
                if (o->direct && r == -EINVAL)
                        snprintf(why, LOADGEN_ERROR_MAX, "O_DIRECT is not supported on %s (%s)",
                                 o->dir, fs_name(o->dir));
                else
                        snprintf(why, LOADGEN_ERROR_MAX, "cannot create files in %s (%s): %s",
                                 o->dir, fs_name(o->dir), strerror(-r));
                return r;
        }
        if (o->direct) {
                void *buf = NULL;
                r = -posix_memalign(&buf, DIRECT_ALIGN, DIRECT_ALIGN);
                if (r == 0) {
                        memset(buf, 0x5a, DIRECT_ALIGN);
                        if (pwrite(fd, buf, DIRECT_ALIGN, 0) != DIRECT_ALIGN)
                                r = errno == EINVAL ? -EINVAL : negative_errno();
                        free(buf);
                }
                if (r == -EINVAL)
                        snprintf(why, LOADGEN_ERROR_MAX, "O_DIRECT is not supported on %s (%s)",
                                 o->dir, fs_name(o->dir));
                else if (r < 0)
                        snprintf(why, LOADGEN_ERROR_MAX, "cannot write to %s (%s): %s", o->dir,
                                 fs_name(o->dir), strerror(-r));
        }
        close(fd);
        (void) unlink(path);
        return r;
}

/* ---- data ---- */

static uint64_t mix64(uint64_t x) {
        x += 0x9e3779b97f4a7c15u;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
        return x ^ (x >> 31);
}

/* The write buffer holds random bytes once; before each write only the stamps change: the
 * file's tag and the byte offset at the start of every sector.  Checking a block read back
 * is then re-stamping the write buffer for that offset and one memcmp. */
static void fill_random(uint8_t *buf, size_t len, uint64_t seed) {
        for (size_t i = 0; i < len; i += sizeof(uint64_t)) {
                uint64_t v = mix64(seed + i);
                memcpy(buf + i, &v, MIN(sizeof(v), len - i));
        }
}

static void stamp(uint8_t *buf, size_t len, uint64_t tag, uint64_t offset) {
        for (size_t i = 0; i + 2 * sizeof(uint64_t) <= len; i += SECTOR) {
                uint64_t pos = offset + i;
                memcpy(buf + i, &tag, sizeof(tag));
                memcpy(buf + i + sizeof(tag), &pos, sizeof(pos));
        }
}

/* ---- free space ---- */

static int free_bytes(const struct fileio_opts *o, uint64_t *ret) {
        struct statvfs s;
        if (statvfs(o->dir, &s) < 0)
                return negative_errno();
        /* f_bavail, not f_bfree: the blocks reserved for root are not ours to fill. */
        *ret = (uint64_t) s.f_bavail * (uint64_t) s.f_frsize;
        return 0;
}

static void report_low_space(struct fileio_worker *w, uint64_t avail) {
        char a[32], b[32];
        if (!atomic_exchange(&w->shared->low_space, true))
                loadgen_event(w->ctx, "low_space", (int64_t) avail,
                              "%s has %s free, --min-free is %s: writing paused", w->o->dir,
                              format_size(a, avail), format_size(b, w->o->min_free));
}

/* Waits until writing need more bytes leaves --min-free free, checking once a second.
 * Returns 1 when there is room, 0 when stopping, <0 on error. */
static int wait_for_space(struct fileio_worker *w, uint64_t need) {
        uint64_t avail;
        for (;;) {
                int r = free_bytes(w->o, &avail);
                if (r < 0)
                        return log_error_errno(r, "fileio: cannot get the free space of %s: %m",
                                               w->o->dir);
                w->last_space_check_ns = now_ns(CLOCK_MONOTONIC);
                if (avail >= need && avail - need >= w->o->min_free)
                        break;
                report_low_space(w, avail);
                if (!loadgen_sleep_until(w->ctx, w->last_space_check_ns + (int64_t) NSEC_PER_SEC))
                        return 0;
        }
        if (atomic_exchange(&w->shared->low_space, false)) {
                char a[32];
                loadgen_event(w->ctx, "space_ok", (int64_t) avail,
                              "%s has %s free again: writing resumed", w->o->dir,
                              format_size(a, avail));
        }
        return 1;
}

/* ---- one file ---- */

static int pwrite_full(int fd, const uint8_t *buf, size_t len, uint64_t offset) {
        while (len > 0) {
                ssize_t n = pwrite(fd, buf, len, (off_t) offset);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return -EIO;
                buf += n;
                len -= (size_t) n;
                offset += (uint64_t) n;
        }
        return 0;
}

/* Reads up to len bytes; returns the count (short only at the end of the file) or -errno. */
static ssize_t pread_full(int fd, uint8_t *buf, size_t len, uint64_t offset) {
        size_t got = 0;
        while (got < len) {
                ssize_t n = pread(fd, buf + got, len - got, (off_t) (offset + got));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        return (ssize_t) got;
}

static void remove_file(struct fileio_worker *w) {
        pthread_mutex_lock(&w->lock);
        if (w->has_file && !w->abandoned)
                (void) unlink(w->path);
        w->has_file = false;
        pthread_mutex_unlock(&w->lock);
}

static int create_file(struct fileio_worker *w, uint64_t n) {
        int fd = -EINTR;
        pthread_mutex_lock(&w->lock);
        /* Checked under the lock: once run() has cleaned up for a stuck worker, no new file
         * may appear behind its back. */
        if (!loadgen_stopping(w->ctx) && !w->abandoned) {
                snprintf(w->path, sizeof(w->path), "%s/rtsoak-fileio.%d.%u.%" PRIu64, w->o->dir,
                         (int) getpid(), w->index, n);
                fd = open(w->path,
                          O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | (w->o->direct ? O_DIRECT : 0),
                          0600);
                if (fd < 0)
                        fd = negative_errno();
                else
                        w->has_file = true;
        }
        pthread_mutex_unlock(&w->lock);
        return fd;
}

/* Whether writing the rest of the file (remaining bytes) would go below --min-free; checked
 * at most every SPACE_CHECK_NS, because other writers share the file system. */
static int space_running_out(struct fileio_worker *w, uint64_t remaining) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        uint64_t avail;
        if (now - w->last_space_check_ns < SPACE_CHECK_NS)
                return 0;
        w->last_space_check_ns = now;
        int r = free_bytes(w->o, &avail);
        if (r < 0)
                return log_error_errno(r, "fileio: cannot get the free space of %s: %m", w->o->dir);
        if (avail >= remaining && avail - remaining >= w->o->min_free)
                return 0;
        report_low_space(w, avail);
        return 1;
}

static void check_block(struct fileio_worker *w, uint64_t tag, uint64_t offset, size_t len,
                        bool *reported) {
        stamp(w->wbuf, len, tag, offset);
        if (*reported || memcmp(w->rbuf, w->wbuf, len) == 0)
                return;
        size_t i = 0;
        while (i < len && w->rbuf[i] == w->wbuf[i])
                i++;
        loadgen_event(w->ctx, "data_mismatch", (int64_t) (offset + i),
                      "%s: byte %" PRIu64 " read back as 0x%02x, written as 0x%02x", w->path,
                      offset + i, w->rbuf[i], w->wbuf[i]);
        *reported = true; /* one event per file: the first bad byte says enough */
}

/* Writes, syncs, reads back and removes file number n.  Returns 0, -ENOSPC when space ran
 * out (the file is gone again), or another -errno after logging. */
static int fileio_cycle(struct fileio_worker *w, uint64_t n) {
        struct loadgen_ctx *ctx = w->ctx;
        const struct fileio_opts *o = w->o;
        uint64_t tag = mix64(((uint64_t) getpid() << 32) ^ ((uint64_t) w->index << 48) ^ n);
        bool reported = false;
        int r = 0;

        _cleanup_close_ int fd = create_file(w, n);
        if (fd == -EINTR)
                return 0; /* stopping */
        if (fd < 0) {
                if (fd == -ENOSPC || fd == -EDQUOT)
                        return -ENOSPC;
                return log_error_errno(fd, "fileio: cannot create %s: %m", w->path);
        }

        for (uint64_t off = 0; off < o->file_size; off += o->block_size) {
                size_t len = (size_t) MIN(o->block_size, o->file_size - off);
                r = space_running_out(w, o->file_size - off);
                if (r != 0) {
                        r = r > 0 ? -ENOSPC : r;
                        goto out;
                }
                stamp(w->wbuf, len, tag, off);
                r = pwrite_full(fd, w->wbuf, len, off);
                if (r < 0) {
                        if (r == -ENOSPC || r == -EDQUOT) {
                                r = -ENOSPC;
                                goto out;
                        }
                        log_error_errno(r, "fileio: cannot write %s: %m", w->path);
                        goto out;
                }
                loadgen_add(ctx, FILEIO_METRIC_WRITE, len);
                if (!loadgen_pace(ctx, &w->pacer, len))
                        goto out;
        }

        if (o->fsync) {
                if (fsync(fd) < 0) {
                        r = negative_errno();
                        if (r == -ENOSPC || r == -EDQUOT) {
                                r = -ENOSPC;
                                goto out;
                        }
                        log_error_errno(r, "fileio: cannot fsync %s: %m", w->path);
                        goto out;
                }
                loadgen_add(ctx, FILEIO_METRIC_FSYNC, 1);
        }
        /* Read back from the disk, not from the page cache: after the fsync every page is
         * clean, and DONTNEED drops clean pages, so the reads below go to the device.
         * Without --fsync, DONTNEED only starts writeback of the dirty pages and drops
         * none of them, and the read-back mostly comes from memory.  O_DIRECT bypasses
         * the cache anyway. */
        if (!o->direct)
                (void) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (loadgen_stopping(ctx))
                goto out;

        for (uint64_t off = 0; off < o->file_size; off += o->block_size) {
                size_t len = (size_t) MIN(o->block_size, o->file_size - off);
                ssize_t got = pread_full(fd, w->rbuf, len, off);
                if (got < 0) {
                        r = log_error_errno((int) got, "fileio: cannot read %s: %m", w->path);
                        goto out;
                }
                loadgen_add(ctx, FILEIO_METRIC_READ, (uint64_t) got);
                if ((size_t) got < len) {
                        loadgen_event(ctx, "data_mismatch", (int64_t) (off + (uint64_t) got),
                                      "%s: file ends at %" PRIu64 ", %" PRIu64
                                      " bytes were written",
                                      w->path, off + (uint64_t) got, o->file_size);
                        break;
                }
                if (o->verify)
                        check_block(w, tag, off, len, &reported);
                if (loadgen_stopping(ctx))
                        break;
        }
out:
        remove_file(w);
        return r;
}

static void *fileio_worker_main(void *arg) {
        struct fileio_worker *w = arg;
        struct loadgen_ctx *ctx = w->ctx;
        int r = 0;

        for (uint64_t n = 0; !loadgen_stopping(ctx); n++) {
                r = wait_for_space(w, w->o->file_size);
                if (r <= 0)
                        break;
                r = fileio_cycle(w, n);
                if (r == -ENOSPC) {
                        /* Out of space although statvfs said otherwise (quota, reserved
                         * blocks, a race with another writer): back off for a second. */
                        uint64_t avail = 0;
                        (void) free_bytes(w->o, &avail);
                        report_low_space(w, avail);
                        r = 0;
                        if (!loadgen_sleep_until(ctx,
                                                 now_ns(CLOCK_MONOTONIC) + (int64_t) NSEC_PER_SEC))
                                break;
                } else if (r < 0)
                        break;
        }
        if (r < 0) {
                int expected = 0;
                atomic_compare_exchange_strong(&w->shared->error, &expected, r);
                atomic_store(&ctx->stop, true);
        }
        atomic_store(&w->done, true);
        return NULL;
}

/* Waits for a worker until the grace deadline; a worker still stuck in a system call after
 * that (an fsync on a slow disk) is left to the process exit, but its file is removed now. */
static bool join_or_abandon(struct fileio_worker *w, int64_t deadline_ns) {
        while (!atomic_load(&w->done) && now_ns(CLOCK_MONOTONIC) < deadline_ns) {
                struct timespec ts = { 0, 5 * NSEC_PER_MSEC };
                nanosleep(&ts, NULL);
        }
        if (atomic_load(&w->done)) {
                pthread_join(w->thread, NULL);
                return true;
        }
        pthread_mutex_lock(&w->lock);
        if (w->has_file)
                (void) unlink(w->path);
        w->abandoned = true;
        pthread_mutex_unlock(&w->lock);
        return false;
}

/* Files of an earlier fileio that was killed before it could unlink them: over a months-long
 * soak with restarts they would fill the disk.  Only files of processes that are gone. */
static void remove_leftovers(struct loadgen_ctx *ctx, const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d))) {
                int pid, end = 0;
                if (sscanf(de->d_name, "rtsoak-fileio.%d.%n", &pid, &end) != 1 || end == 0 ||
                    pid <= 0 || (kill(pid, 0) == 0 || errno != ESRCH))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) == 0)
                        loadgen_event(ctx, "leftover_removed", -1,
                                      "removed %s/%s, left behind by a fileio that was killed", dir,
                                      de->d_name);
        }
        closedir(d);
}

static int fileio_run(struct loadgen_ctx *ctx) {
        const struct fileio_opts *o = ctx->opts;
        remove_leftovers(ctx, o->dir);
        size_t n = o->workers, started = 0;
        struct fileio_shared *shared = calloc(1, sizeof(*shared));
        struct fileio_worker *w = calloc(n, sizeof(*w));
        bool all_joined = true;
        int r = 0;

        if (!shared || !w) {
                free(shared);
                free(w);
                return log_oom();
        }
        for (size_t i = 0; i < n; i++) {
                /* --rate is the total: each worker keeps its own share, so a worker that is
                 * slowed down (or waits for space) does not make the others speed up. */
                uint64_t share = o->rate / n + (i < o->rate % n ? 1 : 0);
                w[i] = (struct fileio_worker){
                        .ctx = ctx, .o = o, .shared = shared, .index = (unsigned) i
                };
                pthread_mutex_init(&w[i].lock, NULL);
                loadgen_pacer_init(&w[i].pacer, share);
                void *a = NULL, *b = NULL;
                if (posix_memalign(&a, DIRECT_ALIGN, o->block_size) != 0 ||
                    posix_memalign(&b, DIRECT_ALIGN, o->block_size) != 0) {
                        free(a);
                        r = log_oom();
                        break;
                }
                w[i].wbuf = a;
                w[i].rbuf = b;
                fill_random(w[i].wbuf, o->block_size, mix64(i + 1) ^ (uint64_t) getpid());
                r = -pthread_create(&w[i].thread, NULL, fileio_worker_main, &w[i]);
                if (r < 0) {
                        free(w[i].wbuf);
                        free(w[i].rbuf);
                        log_error_errno(r, "fileio: cannot start worker %zu: %m", i);
                        break;
                }
                started++;
        }
        if (r < 0)
                atomic_store(&ctx->stop, true);

        /* Workers stop on their own (or fail and stop everybody); wait for that. */
        while (loadgen_sleep_until(ctx, now_ns(CLOCK_MONOTONIC) + (int64_t) NSEC_PER_SEC))
                ;
        int64_t deadline = now_ns(CLOCK_MONOTONIC) + STOP_GRACE_NS;
        for (size_t i = 0; i < started; i++) {
                if (!join_or_abandon(&w[i], deadline)) {
                        all_joined = false;
                        continue;
                }
                free(w[i].wbuf);
                free(w[i].rbuf);
                pthread_mutex_destroy(&w[i].lock);
        }
        if (r == 0)
                r = atomic_load(&shared->error);
        if (!all_joined) {
                /* A worker still runs and uses its slot and the shared state: leave them
                 * to the process exit, which follows shortly. */
                log_warning("fileio: a worker is still busy in a system call; its file was "
                            "removed");
                return r;
        }
        free(w);
        free(shared);
        return r;
}

const struct loadgen_info loadgen_fileio_info = {
        .name = "fileio",
        .summary = "write, fsync, read back and remove files in a directory",
        .opts = fileio_opts,
        .nopts = ELEMENTSOF(fileio_opts),
        .opts_size = sizeof(struct fileio_opts),
        .metrics = fileio_metrics,
        .nmetrics = ELEMENTSOF(fileio_metrics),
        .check = fileio_check,
        .probe = fileio_probe,
        .run = fileio_run,
};
