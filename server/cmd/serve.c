/* SPDX-License-Identifier: MIT */
/* Serving the farm: the TLS pair (options or systemd's credentials), the farm database, the
 * listening socket, the HTTP server and what runs beside it, and stopping on a signal within a
 * bounded time. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "macro.h"
#include "notifier.h"
#include "retention.h"
#include "serve.h"
#include "sql.h"
#include "timeutil.h"
#include "verdict-log.h"

#define PEM_MAX_BYTES (1 << 20)

static int read_pem(const char *what, const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
        if (fstat(fd, &st) < 0)
                return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
        if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > PEM_MAX_BYTES)
                return log_error_errno(EINVAL,
                                       "Cannot use the %s '%s': not a PEM file (empty, too "
                                       "large or not a regular file)",
                                       what, path);
        if (strcmp(what, "private key") == 0 && (st.st_mode & S_IROTH))
                log_warning("The private key '%s' is readable by every user of this machine "
                            "(chmod 600 %s, or pass it with LoadCredential=)",
                            path, path);
        _cleanup_free_ char *buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return log_oom();
        size_t got = 0;
        while (got < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + got, (size_t) st.st_size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return log_error_errno(errno, "Cannot read the %s '%s': %m", what, path);
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        buf[got] = '\0';
        if (!strstr(buf, "-----BEGIN "))
                return log_error_errno(EINVAL, "The %s '%s' is not in PEM format", what, path);
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Every connection is a descriptor: the soft limit (1024 by default, also under systemd) is
 * raised towards the hard one so that the connection limit, not EMFILE, is what bites. */
static void raise_fd_limit(unsigned connections) {
        struct rlimit rl;
        rlim_t want = (rlim_t) connections + 256;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
                return;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : MIN(want, rl.rlim_max);
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
                log_warning("Only %llu file descriptors: fewer than the %u connections allowed "
                            "(LimitNOFILE= raises it)",
                            (unsigned long long) rl.rlim_cur, connections);
}

/* The certificate and key that systemd's LoadCredential= passed (rtsoak-server.service), when
 * neither Certificate= nor Key= is set: both or neither. */
static int credentials(char **ret_cert, char **ret_key) {
        const char *dir = getenv("CREDENTIALS_DIRECTORY");
        if (!dir || !*dir)
                return 0;
        _cleanup_free_ char *cert = NULL, *key = NULL;
        if (asprintf(&cert, "%s/rtsoak-server.crt", dir) < 0 ||
            asprintf(&key, "%s/rtsoak-server.key", dir) < 0)
                return log_oom();
        bool has_cert = access(cert, F_OK) == 0, has_key = access(key, F_OK) == 0;
        if (has_cert != has_key) {
                log_error("The credentials hold %s but not %s: HTTPS needs both",
                          has_cert ? cert : key, has_cert ? key : cert);
                return -EINVAL;
        }
        if (has_cert) {
                *ret_cert = TAKE_PTR(cert);
                *ret_key = TAKE_PTR(key);
        }
        return 0;
}

/* What serve() needs before it opens anything: the TLS pair (options or systemd credentials),
 * the notification secrets, libcurl and a retention the verdict can live with.  0, or the exit
 * status to return. */
static int serve_prepare(const struct server_options *o, struct server_options *with_cred,
                         char **cred_cert, char **cred_key, char **cert, char **key) {
        if (!o->cert && !o->key && credentials(cred_cert, cred_key) < 0)
                return EXIT_CONFIG;
        if (*cred_cert) {
                *with_cred = *o;
                with_cred->cert = *cred_cert;
                with_cred->key = *cred_key;
                o = with_cred;
        }
        if (!!o->cert != !!o->key) {
                log_error("--cert and --key go together: HTTPS needs both");
                return EXIT_CONFIG;
        }
        if (o->cert && (read_pem("certificate", o->cert, cert) < 0 ||
                        read_pem("private key", o->key, key) < 0))
                return EXIT_CONFIG;
        char cerr[CONF_ERROR_MAX];
        if (notify_config_load_secrets(o->notify, cerr) < 0) {
                log_error("%s", cerr);
                return EXIT_CONFIG;
        }
        for (size_t i = 0; i < o->notify->nchannels; i++)
                if (o->notify->channels[i].secret_shared)
                        log_warning("%s: [Notify.%s] SecretFile=%s can be read by others than "
                                    "its owner (chmod 600 it)",
                                    o->notify->channels[i].secret_where,
                                    o->notify->channels[i].name,
                                    o->notify->channels[i].secret_file);
        /* Retention keeps what the verdict's period needs, and a month more. */
        if (o->retention_ns && o->retention_ns < o->rule.period_ns + 31 * 86400 * NSEC_PER_SEC) {
                char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
                log_error("[Server] Retention=%s is shorter than the verdict's Period=%s and a "
                          "month: the verdict needs those intervals",
                          format_timespan(a, o->retention_ns),
                          format_timespan(b, o->rule.period_ns));
                return EXIT_CONFIG;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                log_error("Cannot initialise libcurl (for the webhooks)");
                return EXIT_FAILURE;
        }
        return 0;
}

/* Opens the farm database and records the rule in force.  0, or the exit status. */
static int serve_open_db(const struct server_options *o, farm_db **ret) {
        char err[FARM_ERROR_MAX];
        farm_db *db;
        int r = farm_db_open_with(o->db_path, o->threads, &db, err);
        if (r < 0) {
                log_error_errno(r, "Cannot open the farm database: %s", err);
                return EXIT_FAILURE;
        }
        /* The rule in force from now on: a verdict about a moment judges with the rule of
         * that moment. */
        r = farm_rule_record(db, &o->rule, now_ns(CLOCK_REALTIME), err);
        if (r < 0) {
                log_error_errno(r, "Cannot record the verdict's rule: %s", err);
                farm_db_close(db);
                return EXIT_FAILURE;
        }
        int64_t size;
        if (farm_db_check_skipped(db, &size))
                log_info("The farm database is %.1f GiB: its integrity check at start is skipped "
                         "(it reads the whole file); run \"rtsoak-server check\" when convenient",
                         (double) size / (1 << 30));
        *ret = db;
        return 0;
}

/* The listening socket.  0, or the exit status. */
static int serve_listen(const struct server_options *o, int *fd,
                        char bound[static FARM_ADDRESS_MAX]) {
        int r = farm_listen(o->listen, fd, bound);
        if (r == -EINVAL) {
                log_error("Invalid --listen '%s': expected ADDR:PORT with a numeric address "
                          "(127.0.0.1:8470, [::1]:8470)",
                          o->listen);
                return EXIT_CONFIG;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s: %m%s", o->listen,
                                r == -EADDRINUSE ? " (is another server running on this port?)"
                                                 : "");
                return EXIT_UNAVAILABLE; /* address in use or not ours: cannot run here */
        }
        return 0;
}

/* What runs beside the HTTP server: notifications, the verdict log and retention.  Each that
 * cannot start is logged and left out. */
struct background {
        struct farm_notifier *notifier;
        struct farm_watcher *watcher;
        struct farm_pruner *pruner;
};

static void background_start(const struct server_options *o, farm_db *db, const char *bound,
                             bool https, int64_t listening_ns, struct background *b) {
        int r;
        *b = (struct background){};
        if (o->cache_warming_from)
                log_warning("%s: CacheWarming=/--cache-warming is obsolete and has no effect: the "
                            "server stores every day's histograms as their intervals arrive",
                            o->cache_warming_from);
        char link_host[FARM_ACCESS_LINK_HOST_MAX];
        bool named = farm_access_link_host(&o->access, link_host, sizeof(link_host)) >= 0;
        if (o->notify->enabled &&
            (r = farm_notifier_start(db, &o->rule, o->notify, bound, named ? link_host : NULL,
                                     https, listening_ns, &b->notifier)) < 0)
                log_warning_errno(r, "Cannot start the notifications: %m");
        if ((r = farm_watcher_start(db, &o->rule, farm_notifier_hooks(b->notifier), &b->watcher)) <
            0)
                log_warning_errno(r, "Cannot keep the verdict log: %m");
        if ((r = farm_pruner_start(db, &o->rule, o->retention_ns, &b->pruner)) < 0)
                log_warning_errno(r, "Cannot drop old intervals (Retention=): %m");
}

static void background_stop(struct background *b) {
        farm_pruner_stop(b->pruner);
        farm_watcher_stop(b->watcher);
        farm_notifier_stop(b->notifier);
        *b = (struct background){};
}

/* However long a request or a background pass still runs after a SIGTERM (the reads are
 * interrupted, farm_db_stop()), the process ends within STOP_DEADLINE_S: what is stored is
 * stored transactionally, and a client whose request is cut retries. */
#define STOP_DEADLINE_S 5

static void *stop_deadline_main(void *arg) {
        (void) arg;
        struct timespec t = { .tv_sec = STOP_DEADLINE_S };
        while (nanosleep(&t, &t) < 0 && errno == EINTR)
                ;
        log_error("Still stopping after %d s: exiting now", STOP_DEADLINE_S);
        _exit(EXIT_FAILURE);
}

static void stop_deadline_start(void) {
        pthread_t t;
        int r = -pthread_create(&t, NULL, stop_deadline_main, NULL);
        if (r < 0)
                log_warning_errno(r, "Cannot bound the time stopping takes: %m");
        else
                pthread_detach(t);
}

/* glibc's allocator as a command's work needs it, unless GLIBC_TUNABLES sets the threshold:
 * - every command: large blocks (a merged histogram is up to 800 KiB) from mmap(), so that,
 *   freed, they go back to the kernel at once instead of raising glibc's threshold and staying
 *   in the heap as resident memory after the request that needed them;
 * - serving: a page or answer over a month holds megabytes for the length of a request (its
 *   steps, the database's rows, the text being written), freed at its end; glibc handed each
 *   arena's freed top back to the kernel after every request, and the next one faulted it in
 *   again: a third of a 30-day machine page's CPU (bench/README.md).  Each arena keeps up to
 *   32 MiB free instead, and blocks of up to 4 MiB come from the arenas (a month of steps is
 *   written and sent in blocks of 1-2 MiB: 60-76 ms of CPU per request mapped afresh, 36-43
 *   kept). */
void server_malloc_tuning(bool serving) {
        const char *t = getenv("GLIBC_TUNABLES");
        if (!t || !strstr(t, "mmap_threshold"))
                mallopt(M_MMAP_THRESHOLD, serving ? 4 << 20 : 256 << 10);
        if (serving && (!t || !strstr(t, "trim_threshold")))
                mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

int cli_serve(const struct server_options *o) {
        _cleanup_free_ char *cert = NULL, *key = NULL, *cred_cert = NULL, *cred_key = NULL;
        char bound[FARM_ADDRESS_MAX];
        struct server_options with_cred;
        farm_http *http = NULL;
        farm_db *db = NULL;
        int fd = -1, r, sig;

        if ((r = serve_prepare(o, &with_cred, &cred_cert, &cred_key, &cert, &key)) != 0)
                return r;
        server_malloc_tuning(true);
        if (cred_cert)
                o = &with_cred;
        if ((r = serve_open_db(o, &db)) != 0) {
                curl_global_cleanup();
                return r;
        }
        if ((r = serve_listen(o, &fd, bound)) != 0) {
                farm_db_close(db);
                curl_global_cleanup();
                return r;
        }
        raise_fd_limit(o->limits.max_total);
        struct farm_access_config ac = o->access;
        ac.listen = bound;

        /* The worker threads inherit this mask, so the signals reach only sigwait() below. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct farm_http_config hc = {
                .listen_fd = fd,
                .tls_cert_pem = cert,
                .tls_key_pem = key,
                .threads = o->threads,
                .limits = o->limits,
                .access = ac,
                .connection_timeout_s = o->idle_timeout_s,
                .max_body_bytes = o->max_body_bytes,
                .rate_per_s = o->rate_per_s,
                .burst = o->burst,
                .rule = &o->rule,
        };
        int64_t listening_ns = now_ns(CLOCK_REALTIME);
        if (farm_http_start(&hc, db, &http) < 0) {
                close(fd);
                farm_db_close(db);
                curl_global_cleanup();
                return EXIT_FAILURE;
        }
        char shown[512];
        sql_target_shown(o->db_path, shown, sizeof(shown));
        log_info("Listening on %s://%s (database %s, %u threads)", cert ? "https" : "http", bound,
                 shown, o->threads);
        struct background bg;
        background_start(o, db, bound, cert != NULL, listening_ns, &bg);

        while (sigwait(&mask, &sig) != 0)
                ;
        log_info("Stopping on SIG%s", sigabbrev_np(sig) ?: "?");
        stop_deadline_start();
        farm_db_stop(db);
        farm_http_stop(http);
        background_stop(&bg);
        curl_global_cleanup();
        uint64_t commits, uploads;
        farm_db_commit_stats(db, &commits, &uploads);
        log_info("Stored %llu uploads in %llu commits", (unsigned long long) uploads,
                 (unsigned long long) commits);
        farm_db_close(db);
        return EXIT_SUCCESS;
}
