/* SPDX-License-Identifier: MIT */
/* rtsoak-server kcidb --watch DIRECTORY: a KCIDB report written for each release whose verdict
 * the verdict log records a change of, as the log goes on, for the operator's kcidb-submit to
 * send (the farm holds no KCIDB credentials).  Each report replaces the release's file at once
 * (written aside, then renamed); the last log row written for is kept in the directory, so that
 * a restart goes on where it stopped. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcidb.h"
#include "log-read.h"
#include "log.h"
#include "releases.h"
#include "timeutil.h"

#define STATE_FILE ".rtsoak-kcidb-last"

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
        (void) sig;
        stopping = 1;
}

/* text into dir/name, replacing it at once; -errno. */
static int write_file(const char *dir, const char *name, const char *text) {
        char path[4200], tmp[4300];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text), done = 0;
        while (done < len) {
                ssize_t k = write(fd, text + done, len - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        int e = k < 0 ? -errno : -EIO;
                        close(fd);
                        unlink(tmp);
                        return e;
                }
                done += (size_t) k;
        }
        if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
                int e = -errno;
                unlink(tmp);
                return e;
        }
        return 0;
}

/* A release's file name: its characters that a name takes, others as %XX; ".json". */
static void file_name(const char *release, char *buf, size_t size) {
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *) release; *p && n + 4 < size; p++) {
                if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+~-",
                           *p) &&
                    !(p == (const unsigned char *) release && *p == '.'))
                        buf[n++] = (char) *p;
                else
                        n += (size_t) snprintf(buf + n, size - n, "%%%02X", *p);
        }
        snprintf(buf + n, size - n, ".json");
}

/* The report of release as of now into its file. */
static int write_report(farm_db *db, const struct server_options *o, const char *dir,
                        const char *release, const char *origin) {
        char err[FARM_ERROR_MAX], name[1100];
        int64_t now = now_ns(CLOCK_REALTIME);
        struct farm_question q = { release, now, now, now };
        json_t *j = NULL;
        int r = farm_kcidb_report(db, &o->rule, &q, origin, &j, err);
        if (r < 0) {
                log_error_errno(r, "Cannot report %s: %s", release, err);
                return r;
        }
        char *text = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
        json_decref(j);
        if (!text)
                return log_oom();
        file_name(release, name, sizeof(name));
        r = write_file(dir, name, text);
        free(text);
        if (r < 0)
                return log_error_errno(r, "Cannot write %s/%s: %m", dir, name);
        log_info("KCIDB report of %s written to %s/%s", release, dir, name);
        return 0;
}

static int64_t read_state(const char *dir) {
        char path[4200];
        long long v = 0;
        snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
        FILE *f = fopen(path, "re");
        if (f) {
                if (fscanf(f, "%lld", &v) != 1 || v < 0)
                        v = 0;
                fclose(f);
        }
        return v;
}

/* One look at the log: a report for each release changed since *last; *last moved on once
 * every one of them was written. */
static int watch_once(farm_db *db, const struct server_options *o, const char *dir,
                      const char *origin, int64_t *last) {
        char err[FARM_ERROR_MAX], text[32];
        char **changed = NULL;
        size_t n = 0;
        int64_t upto;
        int r = farm_log_changed_since(db, *last, &changed, &n, &upto, err);
        if (r < 0)
                return log_error_errno(r, "Cannot read the verdict log: %s", err);
        for (size_t i = 0; r >= 0 && i < n && !stopping; i++)
                r = write_report(db, o, dir, changed[i], origin);
        farm_strv_free(changed, n);
        if (r < 0 || stopping || upto == *last)
                return r;
        snprintf(text, sizeof(text), "%lld\n", (long long) upto);
        if ((r = write_file(dir, STATE_FILE, text)) < 0)
                return log_error_errno(r, "Cannot write %s/" STATE_FILE ": %m", dir);
        *last = upto;
        return 0;
}

int cli_kcidb_watch(const struct server_options *o, const char *dir, const char *origin) {
        struct stat sb;
        farm_db *db = NULL;
        if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || access(dir, W_OK) < 0) {
                log_error("--watch %s: not a directory this user can write to", dir);
                return EXIT_USAGE;
        }
        if (o->rule.watch_ns == 0) {
                log_error("--watch: [Verdict] Watch=0 keeps no verdict log, whose changes this "
                          "follows");
                return EXIT_CONFIG;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        int64_t last = read_state(dir);
        log_info("Writing a KCIDB report to %s for each change the verdict log records after row "
                 "%lld, looking every %llu ms",
                 dir, (long long) last, (unsigned long long) (o->rule.watch_ns / 1000000));
        while (!stopping) {
                /* A failure is said, and tried again at the next look. */
                (void) watch_once(db, o, dir, origin, &last);
                for (uint64_t slept = 0; !stopping && slept < o->rule.watch_ns;
                     slept += 100 * NSEC_PER_MSEC)
                        usleep(100 * 1000);
        }
        farm_db_close(db);
        log_info("Stopping on a signal; the next start goes on after row %lld", (long long) last);
        return EXIT_SUCCESS;
}
