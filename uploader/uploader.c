/* SPDX-License-Identifier: MIT */
/* Implementation of the uploader thread.  It has its own database connection, never touches
 * the probes or the collector, and only ever updates outbox rows: an interval's commit never
 * waits for the network. */
#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "config.h"
#include "cpuset.h"
#include "http-reply.h"
#include "log.h"
#include "macro.h"
#include "store.h"
#include "summary.h"
#include "timeutil.h"
#include "uploader.h"
#include "worker.h"

struct uploader {
        struct uploader_params p;
        char *server, *token, *ca_file, *db_path, *machine_id, *hostname, *cpu_model;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool poked;
        atomic_bool stop;
        atomic_bool drained; /* the outbox was empty at the last look after the last poke */

        pthread_mutex_t stats_lock;
        struct uploader_stats stats;

        /* thread only */
        store *store;
        CURL *curl;
        struct http_reply reply;
};

uint64_t uploader_backoff(uint64_t min_ns, uint64_t max_ns, unsigned attempt,
                          uint64_t retry_after_ns, uint64_t rnd) {
        uint64_t cap = min_ns;
        for (unsigned i = 0; i < attempt && cap < max_ns; i++)
                cap = cap > max_ns / 2 ? max_ns : cap * 2;
        cap = MIN(cap, max_ns);
        /* Full jitter: machines of a farm that lost the server together do not come back in
         * step.  At least a millisecond, so that a zero draw does not spin. */
        uint64_t wait = cap ? rnd % cap : 0;
        wait = MAX(wait, NSEC_PER_MSEC);
        return MAX(wait, retry_after_ns);
}

static void touch(struct uploader *u) {
        pthread_mutex_lock(&u->stats_lock);
        u->stats.last_progress_mono = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_unlock(&u->stats_lock);
        if (u->p.on_alive)
                u->p.on_alive(u->p.alive_userdata);
}

/* The longest wait between two signs of life. */
static uint64_t alive_slice(const struct uploader *u) {
        return u->p.alive_ns ? MIN(u->p.alive_ns, NSEC_PER_SEC) : NSEC_PER_SEC;
}

/* Waits up to ns or until poked or stopped; returns false when stopping. */
static bool wait_for(struct uploader *u, uint64_t ns) {
        struct timespec ts = timespec_from_now(CLOCK_MONOTONIC, (int64_t) ns);
        pthread_mutex_lock(&u->lock);
        while (!u->poked && !atomic_load(&u->stop))
                if (pthread_cond_timedwait(&u->cond, &u->lock, &ts) == ETIMEDOUT)
                        break;
        u->poked = false;
        pthread_mutex_unlock(&u->lock);
        return !atomic_load(&u->stop);
}

/* Sleeps for a backoff: only stop ends it early (a poke means new rows, not a healthy
 * server). */
static bool sleep_for(struct uploader *u, uint64_t ns) {
        int64_t until = now_ns(CLOCK_MONOTONIC) + (int64_t) ns;
        for (;;) {
                int64_t left = until - now_ns(CLOCK_MONOTONIC);
                if (left <= 0)
                        return !atomic_load(&u->stop);
                if (!wait_for(u, (uint64_t) MIN(left, (int64_t) alive_slice(u))))
                        return false;
                touch(u);
        }
}

void uploader_poke(struct uploader *u) {
        pthread_mutex_lock(&u->lock);
        atomic_store(&u->drained, false);
        u->poked = true;
        pthread_cond_signal(&u->cond);
        pthread_mutex_unlock(&u->lock);
}

/* Lets a stop abandon a transfer in progress. */
static int on_progress(void *userdata, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
        struct uploader *u = userdata;
        if (u->p.on_alive)
                u->p.on_alive(u->p.alive_userdata); /* a transfer in progress is life too */
        return atomic_load(&u->stop) ? 1 : 0;
}

static int setup_curl(struct uploader *u, struct curl_slist **headers) {
        char url[4200], auth[600];
        u->curl = curl_easy_init();
        if (!u->curl)
                return -ENOMEM;
        snprintf(url, sizeof(url), "%s/api/v1/summaries", u->server);
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", u->token);
        *headers = curl_slist_append(*headers, "Content-Type: application/json");
        *headers = curl_slist_append(*headers, auth); /* copies it */
        explicit_bzero(auth, sizeof(auth));
        *headers = curl_slist_append(*headers, "Expect:");
        if (!*headers)
                return -ENOMEM;
        curl_easy_setopt(u->curl, CURLOPT_URL, url);
        curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, *headers);
        curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(u->curl, CURLOPT_CONNECTTIMEOUT_MS,
                         (long) (u->p.connect_timeout_ns / NSEC_PER_MSEC));
        curl_easy_setopt(u->curl, CURLOPT_TIMEOUT_MS, (long) (u->p.timeout_ns / NSEC_PER_MSEC));
        curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (u->ca_file && *u->ca_file)
                curl_easy_setopt(u->curl, CURLOPT_CAINFO, u->ca_file);
        curl_easy_setopt(u->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, http_reply_on_body);
        curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, &u->reply);
        curl_easy_setopt(u->curl, CURLOPT_HEADERFUNCTION, http_reply_on_header);
        curl_easy_setopt(u->curl, CURLOPT_HEADERDATA, &u->reply);
        curl_easy_setopt(u->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(u->curl, CURLOPT_XFERINFODATA, u);
        curl_easy_setopt(u->curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(u->curl, CURLOPT_USERAGENT, "rtsoakd/" PROJECT_VERSION);
        return 0;
}

/* The CPUs the run probes, from the list it recorded ("0-3,6"); none (the server then takes
 * every CPU of the machine) when the text is not a list, as in a damaged row. */
static int probed_cpus(const char *text, uint32_t **ret, size_t *ret_n) {
        struct cpuset set = {};
        const char *reason;
        *ret = NULL;
        *ret_n = 0;
        if (!text || strcmp(text, "all") == 0 || cpuset_parse(text, &set, &reason) < 0)
                return 0;
        uint32_t *cpus = calloc(set.n ? set.n : 1, sizeof(*cpus));
        if (!cpus) {
                cpuset_done(&set);
                return -ENOMEM;
        }
        for (size_t i = 0; i < set.n; i++)
                cpus[i] = (uint32_t) set.cpus[i];
        *ret = cpus;
        *ret_n = set.n;
        cpuset_done(&set);
        return 0;
}

static int build_summary(struct uploader *u, const struct store_outbox_row *rows, size_t n,
                         struct summary *s, struct store_run *run) {
        char why[NAME_WHY_MAX];
        int r = store_get_run(u->store, rows[0].run_id, run);
        if (r < 0)
                return r;
        *s = (struct summary){
                .machine = { u->machine_id, u->hostname, u->cpu_model, u->p.cpus },
                .run = { .id = run->id,
                         .boot_id = run->boot_id,
                         .kernel_release = run->kernel_release,
                         .kernel_version = run->kernel_version,
                         .kernel_cmdline = run->kernel_cmdline,
                         .preempt_model = run->preempt_model,
                         .daemon_version = run->daemon_version,
                         .config_digest = run->config_digest,
                         .start_ns = run->start_ns,
                         .threshold_ns = run->threshold_ns,
                         .probe_interval_ns = run->probe_interval_ns,
                         .interval_ns = run->interval_ns,
                         .release = run->release && name_ok(&summary_name_release, run->release,
                                                            why)
                                            ? run->release
                                            : NULL },
                .seq = (uint64_t) rows[0].id,
        };
        r = probed_cpus(run->cpus, &s->run.probed_cpus, &s->run.nprobed_cpus);
        if (r < 0)
                return r;
        return store_outbox_summary(u->store, rows, n, s);
}

/* Frees what build_summary() allocated (the identity strings belong to others). */
static void summary_release(struct summary *s) {
        free(s->run.probed_cpus);
        s->machine = (struct summary_machine){};
        s->run = (struct summary_run){};
        summary_done(s);
}

enum outcome { OUT_SENT, OUT_RETRY, OUT_REJECTED };

/* Marks a row refused with why, and records an upload_rejected event.  For a refused
 * interval that event goes to the server too (the farm should know what it did not get).  For
 * a refused event it stays here: when the server refuses the run itself (its boot id, after
 * the local database was replaced; a field of the run), it refuses that event as well, and
 * each refusal would queue another, forever. */
static int set_aside(struct uploader *u, const struct store_outbox_row *rows, const char *msg) {
        int64_t now = now_ns(CLOCK_REALTIME);
        int r = store_outbox_mark(u->store, rows, 1, STORE_OUTBOX_REJECTED, now, msg);
        if (r < 0)
                return r;
        char text[SUMMARY_MAX_TEXT];
        snprintf(text, sizeof(text), "outbox row %" PRId64 " set aside: %s", rows[0].id, msg);
        struct store_event ev = { now, "upload_rejected", -1, -1, text };
        return rows[0].event_id > 0 ? store_add_event_local(u->store, rows[0].run_id, &ev)
                                    : store_add_event(u->store, rows[0].run_id, &ev);
}

static enum outcome upload(struct uploader *u, const char *body, size_t len, char *msg,
                           size_t msglen, uint64_t *retry_after) {
        long status = 0;
        http_reply_reset(&u->reply);
        curl_easy_setopt(u->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(u->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
        CURLcode rc = curl_easy_perform(u->curl);
        if (rc != CURLE_OK) {
                snprintf(msg, msglen, "%s: %s", u->server, curl_easy_strerror(rc));
                return OUT_RETRY;
        }
        curl_easy_getinfo(u->curl, CURLINFO_RESPONSE_CODE, &status);
        *retry_after = http_parse_retry_after(u->reply.retry_after, now_ns(CLOCK_REALTIME));
        if (status >= 200 && status < 300)
                return OUT_SENT;
        http_reply_message(&u->reply, status, msg, msglen);
        /* Refused for what it carries: set it aside.  Anything else is about the connection,
         * the token or the server (a redirect, 401 after re-keying, 404 from a proxy, 429,
         * 5xx): retry, the rows are not at fault. */
        if (status == 400 || status == 409 || status == 413 || status == 422)
                return OUT_REJECTED;
        return OUT_RETRY;
}

static void stats_add(struct uploader *u, enum outcome o, size_t rows) {
        pthread_mutex_lock(&u->stats_lock);
        u->stats.uploads++;
        if (o == OUT_SENT)
                u->stats.rows_sent += rows;
        else if (o == OUT_REJECTED)
                u->stats.rows_rejected += rows;
        else
                u->stats.failures++;
        u->stats.last_progress_mono = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_unlock(&u->stats_lock);
}

/* Where the sending stands between rounds. */
struct sending {
        unsigned attempt;   /* failed attempts in a row, for the back-off */
        size_t single_left; /* after a refused batch: one row at a time, to find it */
        char msg[HTTP_REPLY_BODY_MAX + 64];
};

#define STOP_SENDING UINT64_MAX

/* The rows could not become a summary (r); how long to wait before the next round. */
static uint64_t not_built(struct uploader *u, const struct store_outbox_row *rows, size_t n, int r,
                          struct sending *g) {
        if (n > 1) {
                /* Find the row that cannot be sent; the others go on. */
                log_warning("Uploader: cannot build a summary of %zu rows (%s); trying them one "
                            "by one",
                            n, r == -ERANGE ? "a value out of range" : store_error(u->store));
                g->single_left = n;
                return 0;
        }
        if (r == -EBADMSG || r == -ERANGE) {
                /* This row's own data cannot become a summary (damaged, out of range): the
                 * server would refuse it too; keep it out of the way. */
                snprintf(g->msg, sizeof(g->msg), "cannot build the summary: %s",
                         r == -ERANGE ? "a value out of range" : store_error(u->store));
                log_error("Uploader: outbox row %" PRId64 ": %s", rows[0].id, g->msg);
                r = set_aside(u, rows, g->msg);
                if (g->single_left)
                        g->single_left--;
                return r < 0 ? NSEC_PER_SEC : 0;
        }
        /* Memory, a busy or failing database: try again in a moment. */
        log_error("Uploader: cannot build a summary: %s", store_error(u->store));
        return 5 * NSEC_PER_SEC;
}

/* What the server said of the rows (o); how long to wait before the next round. */
static uint64_t after_upload(struct uploader *u, const struct store_outbox_row *rows, size_t n,
                             enum outcome o, uint64_t retry_after, struct sending *g) {
        int64_t now = now_ns(CLOCK_REALTIME);
        int r;
        stats_add(u, o, n);
        if (o == OUT_SENT) {
                r = store_outbox_mark(u->store, rows, n, STORE_OUTBOX_SENT, now, NULL);
                g->attempt = 0;
                if (g->single_left)
                        g->single_left = g->single_left > n ? g->single_left - n : 0;
        } else if (o == OUT_REJECTED && n > 1) {
                /* Which row is it?  Send them one by one. */
                log_warning("Uploader: a batch of %zu was refused (%s); sending them one by one", n,
                            g->msg);
                g->single_left = n;
                r = 0;
        } else if (o == OUT_REJECTED) {
                log_error("Uploader: outbox row %" PRId64 " refused, set aside: %s", rows[0].id,
                          g->msg);
                r = set_aside(u, rows, g->msg);
                if (g->single_left)
                        g->single_left--;
        } else {
                r = store_outbox_mark(u->store, rows, n, STORE_OUTBOX_RETRY, now, g->msg);
                uint64_t rnd = 0;
                if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                        rnd = (uint64_t) now;
                uint64_t wait = uploader_backoff(u->p.backoff_min_ns, u->p.backoff_max_ns,
                                                 g->attempt++, retry_after, rnd);
                char span[TIMESPAN_MAX_LEN];
                log_warning("Uploader: %s; %zu row(s) pending, retrying in %s", g->msg, n,
                            format_timespan(span, wait / NSEC_PER_MSEC * NSEC_PER_MSEC));
                if (r < 0)
                        log_error("Uploader: %s", store_error(u->store));
                return wait;
        }
        if (r < 0) {
                /* The server has them but we could not note it (a full disk?): they go again
                 * later, which the server stores once; do not spin. */
                log_error("Uploader: %s", store_error(u->store));
                return 5 * NSEC_PER_SEC;
        }
        return 0;
}

/* Sends rows as one summary; how long to wait before the next round, or STOP_SENDING. */
static uint64_t send_rows(struct uploader *u, const struct store_outbox_row *rows, size_t n,
                          struct sending *g) {
        struct summary s = {};
        struct store_run run = {};
        char *body = NULL;
        size_t len = 0;
        int r = build_summary(u, rows, n, &s, &run);
        if (r >= 0)
                r = summary_encode(&s, &body, &len);
        summary_release(&s);
        store_run_done(&run);
        if (r < 0)
                return not_built(u, rows, n, r, g);

        uint64_t retry_after = 0;
        enum outcome o = upload(u, body, len, g->msg, sizeof(g->msg), &retry_after);
        free(body);
        if (atomic_load(&u->stop) && o == OUT_RETRY)
                return STOP_SENDING; /* abandoned by the stop, not a failure of the server */
        return after_upload(u, rows, n, o, retry_after, g);
}

static void *uploader_main(void *arg) {
        struct uploader *u = arg;
        struct curl_slist *headers = NULL;
        char err[STORE_ERROR_MAX];
        struct sending g = {};
        int r;

        /* Opening may have to wait for the writer's migration; it keeps trying. */
        while ((r = store_open(u->db_path, STORE_UPLOADER, &u->store, err)) < 0) {
                log_error("Uploader: %s; retrying", err);
                if (!sleep_for(u, 5 * NSEC_PER_SEC))
                        goto out;
        }
        store_set_outbox(u->store, true);
        r = setup_curl(u, &headers);
        if (r < 0) {
                log_error_errno(r, "Uploader: cannot set up libcurl: %m");
                goto out;
        }

        while (!atomic_load(&u->stop)) {
                struct store_outbox_row *rows = NULL;
                size_t n = 0;
                uint64_t wait;
                touch(u);
                r = store_outbox_next(u->store, g.single_left ? 1 : u->p.batch, &rows, &n);
                if (r < 0) {
                        log_error("Uploader: %s", store_error(u->store));
                        wait = 5 * NSEC_PER_SEC;
                } else if (n == 0) {
                        g.single_left = 0;
                        pthread_mutex_lock(&u->lock);
                        if (!u->poked)
                                atomic_store(&u->drained, true);
                        pthread_mutex_unlock(&u->lock);
                        wait_for(u, alive_slice(u));
                        wait = 0;
                } else
                        wait = send_rows(u, rows, n, &g);
                free(rows);
                if (wait == STOP_SENDING || (wait > 0 && !sleep_for(u, wait)))
                        break;
        }
out:
        curl_easy_cleanup(u->curl);
        for (struct curl_slist *h = headers; h; h = h->next)
                explicit_bzero(h->data, strlen(h->data)); /* one of them holds the token */
        curl_slist_free_all(headers);
        store_close(u->store);
        return NULL;
}

bool uploader_url_ok(const char *url, char *why, size_t len) {
        for (const unsigned char *p = (const unsigned char *) url; *p; p++)
                if (*p < 0x20 || *p == 0x7f) {
                        snprintf(why, len, "a control character (0x%02x) in the URL", *p);
                        return false;
                }
        if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
                snprintf(why, len, "not an http:// or https:// URL");
                return false;
        }
        if (strpbrk(url, "?#")) {
                snprintf(why, len, "a query or fragment (? or #): the server's URL takes none");
                return false;
        }
        CURLU *h = curl_url();
        if (!h) {
                snprintf(why, len, "out of memory");
                return false;
        }
        CURLUcode rc = curl_url_set(h, CURLUPART_URL, url, 0);
        char *host = NULL;
        if (rc == CURLUE_OK)
                rc = curl_url_get(h, CURLUPART_HOST, &host, 0);
        if (rc != CURLUE_OK)
                snprintf(why, len, "not a valid URL: %s", curl_url_strerror(rc));
        else if (!*host)
                snprintf(why, len, "no host in the URL");
        bool ok = rc == CURLUE_OK && *host;
        curl_free(host);
        curl_url_cleanup(h);
        return ok;
}

static void uploader_free(struct uploader *u) {
        /* The token is a secret: do not leave it in freed memory. */
        if (u->token)
                explicit_bzero(u->token, strlen(u->token));
        char *strs[] = { u->server,     u->token,    u->ca_file,  u->db_path,
                         u->machine_id, u->hostname, u->cpu_model };
        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                free(strs[i]);
        pthread_cond_destroy(&u->cond);
        pthread_mutex_destroy(&u->lock);
        pthread_mutex_destroy(&u->stats_lock);
        free(u);
}

static void global_init(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

int uploader_start(const struct uploader_params *p, struct uploader **ret) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        struct uploader *u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        /* curl_global_init is not thread-safe: once, before any thread uses curl. */
        pthread_once(&once, global_init);
        u->p = *p;
        u->server = strdup(p->server);
        u->token = strdup(p->token);
        u->ca_file = strdup(p->ca_file ?: "");
        u->db_path = strdup(p->db_path);
        u->machine_id = strdup(p->machine_id);
        u->hostname = strdup(p->hostname);
        u->cpu_model = strdup(p->cpu_model);
        pthread_mutex_init(&u->lock, NULL);
        pthread_mutex_init(&u->stats_lock, NULL);
        cond_init_monotonic(&u->cond);
        u->stats.last_progress_mono = now_ns(CLOCK_MONOTONIC);
        int r = 0;
        if (!u->server || !u->token || !u->ca_file || !u->db_path || !u->machine_id ||
            !u->hostname || !u->cpu_model)
                r = -ENOMEM;
        else
                r = -pthread_create(&u->thread, NULL, uploader_main, u);
        if (r < 0) {
                uploader_free(u);
                return r;
        }
        (void) pthread_setname_np(u->thread, "rtsoak-upload");
        *ret = u;
        return 0;
}

bool uploader_flush(struct uploader *u, uint64_t timeout_ns) {
        int64_t until = now_ns(CLOCK_MONOTONIC) + (int64_t) timeout_ns;
        uploader_poke(u);
        while (!atomic_load(&u->drained)) {
                if (now_ns(CLOCK_MONOTONIC) >= until)
                        return false;
                struct timespec ts = { 0, 20 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        return true;
}

void uploader_stop(struct uploader *u) {
        if (!u)
                return;
        atomic_store(&u->stop, true);
        uploader_poke(u);
        pthread_join(u->thread, NULL);
        uploader_free(u);
}

void uploader_get_stats(struct uploader *u, struct uploader_stats *ret) {
        pthread_mutex_lock(&u->stats_lock);
        *ret = u->stats;
        pthread_mutex_unlock(&u->stats_lock);
}
