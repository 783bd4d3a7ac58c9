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
#include "sha256.h"
#include "summary.h"
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

/* Longest escaped release in a file name: with ".json", and the ".tmp" beside it, within a
 * file system's 255 bytes. */
#define NAME_MAX_ESCAPED 200

/* A release's file name: its characters that a name takes, others as %XX; ".json".  A name
 * that would be too long is cut and made unique again with a digest of the release. */
static void file_name(const char *release, char *buf, size_t size) {
        char esc[3 * SUMMARY_MAX_RELEASE + 1], hex[2 * SHA256_DIGEST_SIZE + 1];
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *) release; *p && n + 4 < sizeof(esc);
             p++) {
                if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+~-",
                           *p) &&
                    !(p == (const unsigned char *) release && *p == '.'))
                        esc[n++] = (char) *p;
                else
                        n += (size_t) snprintf(esc + n, sizeof(esc) - n, "%%%02X", *p);
        }
        esc[n] = '\0';
        if (n <= NAME_MAX_ESCAPED) {
                snprintf(buf, size, "%s.json", esc);
                return;
        }
        size_t cut = NAME_MAX_ESCAPED - 17; /* room for "-" and 16 hex digits */
        if (esc[cut - 1] == '%')
                cut--;
        else if (cut >= 2 && esc[cut - 2] == '%')
                cut -= 2; /* not inside a %XX */
        sha256_hex(release, strlen(release), hex);
        snprintf(buf, size, "%.*s-%.16s.json", (int) cut, esc, hex);
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

/* The releases whose report could not be written: tried again at every look, without holding
 * the others back. */
struct retry {
        char **v;
        size_t n;
};

static bool retry_has(const struct retry *t, const char *release) {
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->v[i], release) == 0)
                        return true;
        return false;
}

/* The state file: the last log row written for, then a release to retry per line. */
static int64_t read_state(const char *dir, struct retry *t) {
        char path[4200], line[SUMMARY_MAX_RELEASE + 2];
        long long v = 0;
        snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        if (!fgets(line, sizeof(line), f) || sscanf(line, "%lld", &v) != 1 || v < 0)
                v = 0;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                char **x = *line ? realloc(t->v, (t->n + 1) * sizeof(*x)) : NULL;
                if (x && (x[t->n] = strdup(line)))
                        t->n++;
                if (x)
                        t->v = x;
        }
        fclose(f);
        return v;
}

static int write_state(const char *dir, int64_t last, const struct retry *t) {
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (!m)
                return -ENOMEM;
        fprintf(m, "%lld\n", (long long) last);
        for (size_t i = 0; i < t->n; i++)
                fprintf(m, "%s\n", t->v[i]);
        if (fclose(m) != 0) {
                free(text);
                return -ENOMEM;
        }
        int r = write_file(dir, STATE_FILE, text);
        free(text);
        return r;
}

/* Writes release's report; a failure puts it on *t (or keeps it there), a success takes it off. */
static void report_or_retry(farm_db *db, const struct server_options *o, const char *dir,
                            const char *release, const char *origin, struct retry *t) {
        bool was = retry_has(t, release);
        if (write_report(db, o, dir, release, origin) >= 0) {
                for (size_t i = 0; was && i < t->n; i++)
                        if (strcmp(t->v[i], release) == 0) {
                                free(t->v[i]);
                                t->v[i] = t->v[--t->n];
                                break;
                        }
                return;
        }
        char **x = was ? NULL : realloc(t->v, (t->n + 1) * sizeof(*x));
        if (x && (x[t->n] = strdup(release))) {
                t->v = x;
                t->n++;
        } else if (x)
                t->v = x;
}

/* One look at the log: a report for each release changed since *last and for each still to
 * retry; *last moves on past every row read. */
static void watch_once(farm_db *db, const struct server_options *o, const char *dir,
                       const char *origin, int64_t *last, struct retry *t) {
        char err[FARM_ERROR_MAX];
        char **changed = NULL;
        size_t n = 0;
        int64_t upto;
        size_t retries = t->n;
        int r = farm_log_changed_since(db, *last, &changed, &n, &upto, err);
        if (r < 0) {
                log_error_errno(r, "Cannot read the verdict log: %s", err);
                return;
        }
        for (size_t i = 0; i < n && !stopping; i++)
                if (!retry_has(t, changed[i]))
                        report_or_retry(db, o, dir, changed[i], origin, t);
        farm_strv_free(changed, n);
        /* Copies: a success takes its release off the list. */
        for (size_t i = t->n; i > 0 && !stopping; i--) {
                _cleanup_free_ char *rel = strdup(t->v[i - 1]);
                if (rel)
                        report_or_retry(db, o, dir, rel, origin, t);
        }
        if (stopping || (upto == *last && t->n == 0 && retries == 0))
                return;
        if ((r = write_state(dir, upto, t)) < 0) {
                log_error_errno(r, "Cannot write %s/" STATE_FILE ": %m", dir);
                return;
        }
        *last = upto;
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
        struct retry t = {};
        int64_t last = read_state(dir, &t);
        log_info("Writing a KCIDB report to %s for each change the verdict log records after row "
                 "%lld, looking every %llu ms",
                 dir, (long long) last, (unsigned long long) (o->rule.watch_ns / 1000000));
        while (!stopping) {
                /* A failure is said, and tried again at the next look. */
                watch_once(db, o, dir, origin, &last, &t);
                for (uint64_t slept = 0; !stopping && slept < o->rule.watch_ns;
                     slept += 100 * NSEC_PER_MSEC)
                        usleep(100 * 1000);
        }
        farm_db_close(db);
        if (t.n)
                log_warning("%zu report(s) still not written (the first: %s); the next start "
                            "tries them again",
                            t.n, t.v[0]);
        farm_strv_free(t.v, t.n);
        log_info("Stopping on a signal; the next start goes on after row %lld", (long long) last);
        return EXIT_SUCCESS;
}
