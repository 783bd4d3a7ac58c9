/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's posting: each machine's history in batches, as summaries, with retries of
 * what is not the upload's fault; the threads that take the machines one by one. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "replay.h"

static atomic_size_t next_machine;

static void sleep_ns(uint64_t ns) {
        struct timespec ts = { (time_t) (ns / NSEC_PER_SEC), (long) (ns % NSEC_PER_SEC) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Posts one summary, retrying what is not the upload's fault (the network, 408, 429, 5xx)
 * with a short backoff.  Anything else the server refuses ends the replay. */
static int post(struct worker *w, struct mstate *ms, const char *body, size_t len,
                const char *what) {
        char msg[HTTP_REPLY_BODY_MAX + 128];
        uint64_t wait = 50 * NSEC_PER_MSEC;

        for (unsigned attempt = 1;; attempt++) {
                long status = 0;
                http_reply_reset(&w->reply);
                curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, ms->headers);
                curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
                CURLcode rc = curl_easy_perform(w->curl);
                if (rc == CURLE_OK) {
                        curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
                        if (status >= 200 && status < 300) {
                                w->stats.uploads++;
                                return 0;
                        }
                        http_reply_message(&w->reply, status, msg, sizeof(msg));
                        if (status != 408 && status != 429 && status < 500) {
                                log_error("Machine %s, %s: the server refused the upload: %s",
                                          ms->m->id, what, msg);
                                return -EBADMSG;
                        }
                } else
                        snprintf(msg, sizeof(msg), "%s: %s", replay_opt.server,
                                 curl_easy_strerror(rc));
                if (attempt >= REPLAY_MAX_TRIES || atomic_load(&replay_failed)) {
                        log_error("Machine %s, %s: giving up after %u attempts: %s", ms->m->id,
                                  what, attempt, msg);
                        return -EIO;
                }
                uint64_t ra = status ? MIN(http_parse_retry_after(w->reply.retry_after,
                                                                  now_ns(CLOCK_REALTIME)),
                                           REPLAY_RETRY_AFTER_MAX_NS)
                                     : 0;
                uint64_t delay = MAX(wait, ra);
                if (!replay_opt.quiet) {
                        char span[TIMESPAN_MAX_LEN];
                        log_warning("Machine %s, %s: %s; retrying in %s", ms->m->id, what, msg,
                                    format_timespan(span, delay / NSEC_PER_MSEC * NSEC_PER_MSEC));
                }
                w->stats.retries++;
                sleep_ns(delay);
                wait = MIN(wait * 2, 2 * NSEC_PER_SEC);
        }
}

static void batch_clear(struct worker *w) {
        for (size_t i = 0; i < w->nivs; i++) {
                for (size_t c = 0; c < w->ivs[i].ncpus; c++) {
                        free(w->ivs[i].cpus[c].hist);
                        w->ivs[i].cpus[c].hist = NULL;
                }
                summary_traces_free(&w->ivs[i]);
        }
        for (size_t i = 0; i < w->nevents; i++)
                free(w->events[i].message);
        w->nivs = 0;
        w->nevents = 0;
        replay_inventory_batch_clear(w);
}

/* Sends what the batch holds as one summary of the current run. */
static int flush(struct worker *w, struct mstate *ms) {
        if (w->nivs == 0 && w->nevents == 0)
                return 0;
        struct summary s = {
                .machine = { (char *) ms->m->id, ms->hostname,
                             (char *) "rtsoak-replay synthetic CPU", replay_opt.cpus },
                .run = { .id = ms->run_id,
                         .boot_id = ms->boot_id,
                         .kernel_release = (char *) replay_opt.kernel,
                         .kernel_version = (char *) replay_opt.kernel_version,
                         .kernel_cmdline = (char *) "quiet",
                         .preempt_model = (char *) replay_opt.preempt_model,
                         .daemon_version = (char *) PROJECT_VERSION,
                         .config_digest = replay_opt.config_digest,
                         .start_ns = ms->run_start_ns + replay_clock_shift(ms->run_start_ns),
                         .threshold_ns = replay_opt.threshold_ns,
                         .probe_interval_ns = replay_opt.probe_interval_ns,
                         .interval_ns = replay_opt.interval_ns,
                         .release = (char *) replay_opt.release,
                         .probed_cpus = replay_opt.probed,
                         .nprobed_cpus = replay_opt.nprobed },
                /* As unique in the run as the uploader's outbox row ids, and the same when the
                 * same history is posted again: the first interval's number, or for events
                 * alone the number the next interval would have. */
                .seq = w->nivs ? w->ivs[0].seq : ms->seq,
                .intervals = w->ivs,
                .nintervals = w->nivs,
                .events = w->events,
                .nevents = w->nevents,
                .inventory = w->invs,
                .ninventory = w->ninvs,
        };
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        int r = summary_encode(&s, &body, &len);
        if (r < 0) {
                batch_clear(w);
                return log_error_errno(r,
                                       "Machine %s: cannot encode a summary of run %" PRId64 ": %m",
                                       ms->m->id, ms->run_id);
        }
        char what[128];
        snprintf(what, sizeof(what), "run %" PRId64 " upload %" PRIu64, ms->run_id, s.seq);
        r = post(w, ms, body, len, what);
        if (r >= 0) {
                w->stats.intervals += w->nivs;
                w->stats.events += w->nevents;
                if (!ms->run_posted)
                        w->stats.runs++;
                ms->run_posted = true;
        }
        batch_clear(w);
        return r;
}

static bool in_gap(int64_t t) {
        for (size_t i = 0; i < replay_opt.ngaps; i++)
                if (t >= replay_opt.gaps[i].from_ns && t < replay_opt.gaps[i].to_ns)
                        return true;
        return false;
}

static void count_unsent_downs(const struct mstate *ms, int64_t t) {
        if (ms->m != &replay_machines[0])
                return;
        for (size_t k = 0; k < replay_opt.ndowns; k++)
                if (replay_opt.downs[k].time_ns >= t &&
                    replay_opt.downs[k].time_ns < t + (int64_t) replay_opt.interval_ns)
                        atomic_fetch_add(&replay_unsent_downs, 1);
}

/* Ends the current run: its last upload, with the unclean_end event that rtsoakd attaches to
 * a run that did not end cleanly (time: its last data). */
static int end_run(struct worker *w, struct mstate *ms, const struct run_end *e) {
        char ts[TIMESTAMP_MAX_LEN];
        if (e && e->unclean) {
                int64_t at =
                        ms->last_data_ns +
                        replay_clock_shift(ms->last_data_ns - (int64_t) replay_opt.interval_ns);
                int r = replay_add_event(
                        w, ms, at, "unclean_end", -1, -1,
                        "run %" PRId64 " (boot %s) did not end cleanly; its last data "
                        "is from %s (the daemon was killed, crashed, or the machine "
                        "lost power or reset)",
                        ms->run_id, ms->boot_id, fmt_time(ts, ms->last_data_ns));
                if (r < 0)
                        return log_oom();
        }
        return flush(w, ms);
}

/* Ends the run at e and starts the next after the reboot, from *t: *t the next run's start. */
static int restart(struct worker *w, struct mstate *ms, const struct run_end *e, int64_t *t) {
        int r = end_run(w, ms, e);
        if (r < 0)
                return r;
        int64_t next = align_up(e->time_ns + (int64_t) replay_opt.reboot_ns,
                                replay_opt.interval_ns);
        for (int64_t u = *t; u < next; u += (int64_t) replay_opt.interval_ns)
                count_unsent_downs(ms, u);
        *t = next;
        ms->run_id++;
        ms->run_start_ns = next;
        ms->last_data_ns = next;
        ms->seq = 0;
        ms->run_posted = false;
        replay_new_boot_id(ms);
        return replay_inventory_run_start(w, ms) < 0 ? log_oom() : 0;
}

static int replay_machine(struct worker *w, const struct machine *m) {
        char auth[600];
        struct mstate ms = {
                .m = m,
                .run_id = replay_opt.run_id,
                .key = replay_opt.seed,
        };
        for (const char *p = m->id; *p; p++)
                ms.key = mix64(ms.key ^ (uint64_t) (unsigned char) *p);
        if (replay_opt.hostname)
                snprintf(ms.hostname, sizeof(ms.hostname), "%s", replay_opt.hostname);
        else
                snprintf(ms.hostname, sizeof(ms.hostname), "replay-%.8s", m->id);

        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", m->token);
        ms.headers = curl_slist_append(NULL, "Content-Type: application/json");
        ms.headers = curl_slist_append(ms.headers, auth);
        explicit_bzero(auth, sizeof(auth));
        ms.headers = curl_slist_append(ms.headers, "Expect:");
        if (!ms.headers)
                return log_oom();

        int64_t t = align_up(replay_opt.from_ns, replay_opt.interval_ns);
        ms.run_start_ns = t;
        ms.last_data_ns = t;
        replay_new_boot_id(&ms);
        size_t next_end = 0;
        int r = replay_inventory_run_start(w, &ms);
        if (r < 0) {
                r = log_oom();
                goto out;
        }

        while (t + (int64_t) replay_opt.interval_ns <= replay_opt.to_ns) {
                if (atomic_load(&replay_failed)) {
                        r = -ECANCELED;
                        goto out;
                }
                const struct run_end *e = next_end < replay_opt.nends ? &replay_opt.ends[next_end]
                                                                      : NULL;
                if (e && t + (int64_t) replay_opt.interval_ns > e->time_ns) {
                        /* The run ends inside this interval: it is not closed, not sent. */
                        if ((r = restart(w, &ms, e, &t)) < 0)
                                goto out;
                        next_end++;
                        continue;
                }
                if ((r = replay_inventory_changes(w, &ms, t + (int64_t) replay_opt.interval_ns)) <
                    0) {
                        r = log_oom();
                        goto out;
                }
                if (in_gap(t)) {
                        count_unsent_downs(&ms, t);
                        t += (int64_t) replay_opt.interval_ns;
                        continue;
                }
                r = replay_make_interval(w, &ms, t);
                if (r < 0) {
                        batch_clear(w);
                        r = log_error_errno(r, "Machine %s: cannot make an interval: %m", m->id);
                        goto out;
                }
                if (r > 0) { /* every CPU down: nothing to send, its number unused */
                        ms.seq++;
                        count_unsent_downs(&ms, t);
                        t += (int64_t) replay_opt.interval_ns;
                        continue;
                }
                /* Full, or so many events (a --latency over --threshold on many CPUs) that
                 * the next interval could take them over the schema's limit. */
                if ((w->nivs >= replay_opt.batch || w->nevents >= SUMMARY_MAX_EVENTS / 2 ||
                     w->ninvs >= SUMMARY_MAX_INVENTORY - 1) &&
                    (r = flush(w, &ms)) < 0)
                        goto out;
                t += (int64_t) replay_opt.interval_ns;
        }
        /* An end after the last whole interval still ends the run. */
        r = end_run(w, &ms, next_end < replay_opt.nends ? &replay_opt.ends[next_end] : NULL);
        if (r >= 0)
                w->stats.machines++;
out:
        for (struct curl_slist *h = ms.headers; h; h = h->next)
                explicit_bzero(h->data, strlen(h->data));
        curl_slist_free_all(ms.headers);
        inventory_done(&ms.inv);
        return r;
}

void *replay_worker_main(void *arg) {
        struct worker *w = arg;
        for (;;) {
                size_t i = atomic_fetch_add(&next_machine, 1);
                if (i >= replay_nmachines || atomic_load(&replay_failed))
                        break;
                if (replay_machine(w, &replay_machines[i]) < 0) {
                        atomic_store(&replay_failed, true);
                        break;
                }
        }
        return NULL;
}

int replay_worker_init(struct worker *w) {
        int r = hist_init(&w->hist, REPLAY_HIST_LIMIT_US);
        if (r < 0)
                return r;
        w->ivs = calloc(replay_opt.batch, sizeof(*w->ivs));
        w->cpus = calloc((size_t) replay_opt.batch * replay_opt.cpus, sizeof(*w->cpus));
        w->loads = calloc((size_t) replay_opt.batch * 4, sizeof(*w->loads));
        w->mets = calloc((size_t) replay_opt.batch * 16, sizeof(*w->mets));
        w->curl = curl_easy_init();
        if (!w->ivs || !w->cpus || !w->loads || !w->mets || !w->curl)
                return -ENOMEM;
        char url[4200];
        size_t l = strlen(replay_opt.server);
        snprintf(url, sizeof(url), "%.*s/api/v1/summaries",
                 (int) (replay_opt.server[l - 1] == '/' ? l - 1 : l), replay_opt.server);
        curl_easy_setopt(w->curl, CURLOPT_URL, url);
        curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(w->curl, CURLOPT_TIMEOUT_MS, 120000L);
        curl_easy_setopt(w->curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(w->curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (replay_opt.ca_file)
                curl_easy_setopt(w->curl, CURLOPT_CAINFO, replay_opt.ca_file);
        curl_easy_setopt(w->curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, http_reply_on_body);
        curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, &w->reply);
        curl_easy_setopt(w->curl, CURLOPT_HEADERFUNCTION, http_reply_on_header);
        curl_easy_setopt(w->curl, CURLOPT_HEADERDATA, &w->reply);
        curl_easy_setopt(w->curl, CURLOPT_USERAGENT, "rtsoak-replay/" PROJECT_VERSION);
        return 0;
}

void replay_worker_done(struct worker *w) {
        batch_clear(w);
        curl_easy_cleanup(w->curl);
        hist_done(&w->hist);
        free(w->ivs);
        free(w->cpus);
        free(w->loads);
        free(w->mets);
        free(w->events);
}
