/* SPDX-License-Identifier: MIT */
/* What the kernel left when a run died (pstore records, the journal of the dead boot), read
 * at the next start, and the flight recorder that leaves a line per second in pstore's pmsg. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "forensics.h"
#include "macro.h"
#include "timeutil.h"

/* JSON strings must be UTF-8: bytes other than printable ASCII, tab and newline become '.'.
 * Kernel logs are ASCII; a record that is not (compressed, binary) stays recognisable. */
static json_t *text_json(const char *buf, size_t len) {
        _cleanup_free_ char *t = malloc(len + 1);
        if (!t)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) buf[i];
                t[i] = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' ? (char) c : '.';
        }
        t[len] = 0;
        return json_string(t);
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The tail (at most max bytes) of one pstore record. */
static json_t *pstore_record(int dfd, const char *name, size_t max) {
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        _cleanup_free_ char *buf = NULL;
        json_t *o = json_object();
        struct stat st;

        json_object_set_new(o, "name", json_string(name));
        if (fd < 0 || fstat(fd, &st) < 0) {
                json_object_set_new(o, "error", json_string(strerror(errno)));
                return o;
        }
        if (!S_ISREG(st.st_mode)) {
                json_object_set_new(o, "error", json_string("not a regular file"));
                return o;
        }
        /* pstore files report their size; read from where the kept tail starts. */
        off_t from = st.st_size > (off_t) max ? st.st_size - (off_t) max : 0;
        buf = malloc(max);
        if (!buf)
                return o;
        ssize_t n = pread(fd, buf, max, from);
        if (n < 0) {
                json_object_set_new(o, "error", json_string(strerror(errno)));
                return o;
        }
        json_object_set_new(o, "size", json_integer(st.st_size));
        json_object_set_new(
                o, "mtime_ns",
                json_integer((json_int_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec));
        json_object_set_new(o, "truncated", json_boolean(from > 0));
        json_object_set_new(o, "text", text_json(buf, (size_t) n));
        return o;
}

/* Every record in the pstore directory, in name order, within the size caps; or a string
 * saying why there are none. */
static json_t *pstore_records(const struct forensics_params *p) {
        _cleanup_close_ int dfd = open(p->pstore_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char msg[512];
        if (dfd < 0) {
                snprintf(msg, sizeof(msg),
                         "cannot read %s: %s (pstore not mounted or not built "
                         "into this kernel)",
                         p->pstore_dir, strerror(errno));
                return json_string(msg);
        }
        DIR *dir = fdopendir(dup(dfd));
        if (!dir) {
                snprintf(msg, sizeof(msg), "cannot read %s: %s", p->pstore_dir, strerror(errno));
                return json_string(msg);
        }
        char **names = NULL;
        size_t n = 0, total = 0;
        struct dirent *de;
        while ((de = readdir(dir)) && n < 1000) {
                if (de->d_name[0] == '.')
                        continue;
                char **a = realloc(names, (n + 1) * sizeof(*a));
                if (!a)
                        break;
                names = a;
                if ((names[n] = strdup(de->d_name)))
                        n++;
        }
        closedir(dir);
        if (n == 0) {
                free(names);
                snprintf(msg, sizeof(msg), "%s is empty: the kernel left no records",
                         p->pstore_dir);
                return json_string(msg);
        }
        qsort(names, n, sizeof(*names), name_cmp);
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                size_t left = p->pstore_max > total ? p->pstore_max - total : 0;
                if (left < 256) {
                        json_t *o = json_object();
                        json_object_set_new(o, "name", json_string(names[i]));
                        json_object_set_new(o, "error", json_string("omitted: size cap reached"));
                        json_array_append_new(arr, o);
                } else {
                        json_t *o = pstore_record(dfd, names[i], MIN(left, p->pstore_record_max));
                        total += json_string_length(json_object_get(o, "text"));
                        json_array_append_new(arr, o);
                }
                free(names[i]);
        }
        free(names);
        return arr;
}

/* The last lines (at most p->journal_lines and p->journal_max bytes) of boot in the open
 * journal, up to until_us (0: its end), oldest first; NULL when there are none. */
static json_t *journal_lines(const struct forensics_params *p, sd_journal *j, const char *boot,
                             uint64_t until_us, bool *ret_truncated, int *ret_error) {
        char match[64];
        sd_journal_flush_matches(j);
        snprintf(match, sizeof(match), "_BOOT_ID=%s", boot);
        int r = sd_journal_add_match(j, match, 0);
        if (r >= 0)
                r = until_us ? sd_journal_seek_realtime_usec(j, until_us) : sd_journal_seek_tail(j);
        if (r < 0) {
                *ret_error = r;
                return NULL;
        }
        /* Newest first, then reversed. */
        json_t *lines = json_array();
        size_t bytes = 0;
        bool cut = false;
        while (json_array_size(lines) < p->journal_lines && (r = sd_journal_previous(j)) > 0) {
                const void *data;
                size_t len;
                uint64_t t = 0;
                if (sd_journal_get_data(j, "MESSAGE", &data, &len) < 0)
                        continue;
                data = (const char *) data + strlen("MESSAGE=");
                len -= MIN(len, strlen("MESSAGE="));
                len = MIN(len, 512u);
                const char *ident = "?";
                const void *id;
                size_t idlen;
                char idbuf[64] = "";
                if (sd_journal_get_data(j, "SYSLOG_IDENTIFIER", &id, &idlen) >= 0) {
                        idlen -= MIN(idlen, strlen("SYSLOG_IDENTIFIER="));
                        snprintf(idbuf, sizeof(idbuf), "%.*s", (int) MIN(idlen, 40u),
                                 (const char *) id + strlen("SYSLOG_IDENTIFIER="));
                        ident = idbuf;
                }
                (void) sd_journal_get_realtime_usec(j, &t);
                char ts[TIMESTAMP_MAX_LEN];
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s %s: %.*s", format_timestamp_utc(ts, (int64_t) t * 1000),
                             ident, (int) len, (const char *) data) < 0)
                        break;
                if (bytes + strlen(line) > p->journal_max) {
                        cut = true;
                        break;
                }
                bytes += strlen(line);
                json_array_append_new(lines, text_json(line, strlen(line)));
        }
        size_t n = json_array_size(lines);
        if (n == 0) {
                json_decref(lines);
                return NULL;
        }
        json_t *ordered = json_array();
        for (size_t i = n; i > 0; i--)
                json_array_append(ordered, json_array_get(lines, i - 1));
        json_decref(lines);
        *ret_truncated = cut || n >= p->journal_lines || r > 0;
        return ordered;
}

/* The journal's own boot ID of its last entry at or before t_us ("" when none). */
static void journal_boot_at(sd_journal *j, uint64_t t_us, char ret[static 33]) {
        const void *data;
        size_t len;
        ret[0] = '\0';
        sd_journal_flush_matches(j);
        if (sd_journal_seek_realtime_usec(j, t_us) < 0 || sd_journal_previous(j) <= 0 ||
            sd_journal_get_data(j, "_BOOT_ID", &data, &len) < 0 || len != strlen("_BOOT_ID=") + 32)
                return;
        snprintf(ret, 33, "%.32s", (const char *) data + strlen("_BOOT_ID="));
}

/* The last lines the journal holds of the dead run's boot, up to until_us (0: its end); or a
 * string saying why there are none.  Where the journal knows the boot by another ID than the
 * kernel's (in a container, journald stamps the container's boot), the journal boot that holds
 * the run's last data (last_us) is read instead, and said so. */
static json_t *journal_tail(const struct forensics_params *p, const char *boot, uint64_t until_us,
                            uint64_t last_us) {
        sd_journal *j = NULL;
        char msg[512], jboot[33] = "";
        bool truncated = false;
        int r, err = 0;

        if (p->journal_lines == 0)
                return json_string("not read ([Forensics] JournalLines=0)");
        r = *p->journal_dir ? sd_journal_open_directory(&j, p->journal_dir, 0)
                            : sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "cannot open the journal: %s", strerror(-r));
                return json_string(msg);
        }
        sd_journal_set_data_threshold(j, 1024);
        json_t *lines = journal_lines(p, j, boot, until_us, &truncated, &err);
        if (!lines && !err && last_us > 0) {
                journal_boot_at(j, last_us, jboot);
                if (*jboot && strcmp(jboot, boot) != 0)
                        lines = journal_lines(p, j, jboot, until_us, &truncated, &err);
        }
        sd_journal_close(j);
        if (err < 0) {
                snprintf(msg, sizeof(msg), "cannot read the journal: %s", strerror(-err));
                return json_string(msg);
        }
        if (!lines) {
                snprintf(msg, sizeof(msg),
                         "no journal entries of boot %s (journald not running, or its journal "
                         "not persistent: mkdir /var/log/journal)",
                         boot);
                return json_string(msg);
        }
        json_t *o = json_object();
        json_object_set_new(o, "boot_id", json_string(boot));
        if (*jboot && lines)
                /* The kernel's boot ID is not in the journal: it names boots its own way. */
                json_object_set_new(o, "journal_boot_id", json_string(jboot));
        json_object_set_new(o, "truncated", json_boolean(truncated));
        json_object_set_new(o, "lines", lines);
        return o;
}

char *forensics_kernel_leftovers(void *userdata, const struct store_unclean *u) {
        const struct forensics_params *p = userdata;
        json_t *o = json_object();
        if (!o)
                return NULL;
        if (!u->same_boot && u->last_of_boot)
                /* What pstore holds is from the boot that ended last, the one this run was
                 * the last of (older records would have been cleared or overwritten). */
                json_object_set_new(o, "pstore", pstore_records(p));
        else if (u->same_boot)
                json_object_set_new(o, "pstore",
                                    json_string("not read: the machine did not reboot, only the "
                                                "daemon died"));
        /* In the same boot the journal goes on: its lines up to shortly after the last data
         * (an interval, and the time a stop takes). */
        uint64_t until = u->same_boot ? (uint64_t) (u->last_seen_ns + (int64_t) u->interval_ns +
                                                    10 * NSEC_PER_SEC) /
                                                1000
                                      : 0;
        if (strlen(u->boot_id) == 32)
                json_object_set_new(o, "journal",
                                    journal_tail(p, u->boot_id, until,
                                                 (uint64_t) MAX(u->last_seen_ns, 0) / 1000));
        else
                json_object_set_new(o, "journal", json_string("the run's boot ID is unknown"));
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return text;
}

/* ---- the flight recorder ---- */

struct flightrec {
        int fd;
        char *path;
};

int flightrec_open(const char *path, struct flightrec **ret) {
        *ret = NULL;
        if (!path || !*path)
                return 0;
        /* A FIFO without a reader refuses O_WRONLY with ENXIO; O_RDWR opens it anyway.  Never
         * block: a line that cannot be written now is dropped. */
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 && errno == ENXIO)
                fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct flightrec *f = calloc(1, sizeof(*f));
        if (!f || !(f->path = strdup(path))) {
                free(f);
                close(fd);
                return -ENOMEM;
        }
        f->fd = fd;
        *ret = f;
        return 1;
}

void flightrec_free(struct flightrec *f) {
        if (!f)
                return;
        close(f->fd);
        free(f->path);
        free(f);
}

int flightrec_write(struct flightrec *f, int64_t real_ns, int64_t run_id, const char *scenario,
                    struct probe **probes, size_t nprobes, const struct load_record *loads) {
        char line[FLIGHTREC_LINE_MAX];
        size_t len = 0;
        int n;

        if (!f)
                return 0;
#define ADD(...)                                                           \
        do {                                                               \
                n = snprintf(line + len, sizeof(line) - len, __VA_ARGS__); \
                if (n < 0 || (size_t) n >= sizeof(line) - len)             \
                        goto full;                                         \
                len += (size_t) n;                                         \
        } while (0)
        ADD("rtsoak t=%" PRId64 ".%03d run=%" PRId64 " sc=%s max_us=", real_ns / NSEC_PER_SEC,
            (int) (real_ns % NSEC_PER_SEC / NSEC_PER_MSEC), run_id, scenario ?: "-");
        for (size_t i = 0; i < nprobes; i++) {
                uint64_t m = atomic_exchange_explicit(&probes[i]->recent_max_ns, 0,
                                                      memory_order_relaxed);
                ADD("%s%d:%" PRIu64 ".%" PRIu64, i ? "," : "", probes[i]->cpu, m / 1000,
                    m % 1000 / 100);
        }
        if (loads)
                for (size_t i = 0; i < loads->nloads; i++) {
                        const struct store_interval_load *l = &loads->loads[i];
                        ADD(" %s", l->generator);
                        for (size_t k = 0; k < l->nmetrics; k++)
                                ADD("%s%s=%.4g%s", k ? "," : ":", loads->metrics[i][k].name,
                                    loads->metrics[i][k].value, loads->metrics[i][k].unit);
                }
full:
#undef ADD
        len = MIN(len, sizeof(line) - 2);
        line[len++] = '\n';
        ssize_t w = write(f->fd, line, len);
        if (w < 0)
                return errno == EAGAIN ? 0 : -errno;
        return 0;
}
