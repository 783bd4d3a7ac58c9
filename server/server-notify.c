/* SPDX-License-Identifier: MIT */
/* The notifier: its threads (the checker, one sender per channel), routing, and delivery:
 * a sender leases the oldest due delivery of its channel from the farm database, renders
 * it, hands it to the channel's transport and records what became of it, retrying with
 * backoff until the channel's Retries= are spent (then it is on the dead-letter list). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "server-notify-internal.h"
#include "timeutil.h"

/* A sender looks at the database at least this often: deliveries queued by another server
 * instance or by the command line are noticed within it. */
#define POLL_NS (2 * (int64_t) NSEC_PER_SEC)

size_t notify_route(const struct farm_notifier *n, enum notify_kind kind, const char *groups,
                    const char *names[static NOTIFY_CHANNELS_MAX]) {
        size_t k = 0;
        for (size_t i = 0; i < n->cfg->nchannels; i++)
                if (notify_channel_wants(&n->cfg->channels[i], kind, groups))
                        names[k++] = n->cfg->channels[i].name;
        return k;
}

int notify_make(struct farm_notifier *n, sql_conn *c, struct notify_new *nn, int64_t now_ns,
                int64_t not_before_ns, char *err) {
        const char *names[NOTIFY_CHANNELS_MAX];
        nn->channels = names;
        nn->nchannels = notify_route(n, nn->kind, nn->groups, names);
        int r = notify_store_insert(c, nn, now_ns, not_before_ns, NULL, err);
        nn->channels = NULL;
        return r;
}

void notify_wake(struct farm_notifier *n) {
        for (size_t i = 0; i < n->nsenders; i++)
                worker_wake(n->senders[i].worker);
}

char *notify_url_escape(const char *prefix, const char *text) {
        static const char hex[] = "0123456789ABCDEF";
        char *p = malloc(strlen(prefix) + 3 * strlen(text) + 1), *o = p;
        if (!p)
                return NULL;
        o = stpcpy(o, prefix);
        for (const unsigned char *s = (const unsigned char *) text; *s; s++)
                if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                    (*s >= '0' && *s <= '9') || strchr("-._~", *s))
                        *o++ = (char) *s;
                else {
                        *o++ = '%';
                        *o++ = hex[*s >> 4];
                        *o++ = hex[*s & 15];
                }
        *o = '\0';
        return p;
}

char *notify_kernel_path(const char *release) {
        return notify_url_escape("/kernels/", release);
}

void notify_failed(farm_db *db, bool *failing, int r, const char *what, const char *err) {
        if (r < 0 && farm_db_stopping(db))
                return; /* the server is stopping: nothing to try again */
        if (r >= 0) {
                if (*failing)
                        log_info("Notifications: %s works again", what);
                *failing = false;
                return;
        }
        if (!*failing && *err)
                log_warning_errno(r, "Notifications: %s: %s; trying again", what, err);
        else if (!*failing)
                log_warning_errno(r, "Notifications: %s: %m; trying again", what);
        *failing = true;
}

/* ---- delivery ---- */

static uint64_t random64(void) {
        uint64_t x;
        if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t) sizeof(x))
                x = (uint64_t) now_ns(CLOCK_MONOTONIC) * 0x9e3779b97f4a7c15u;
        return x;
}

/* The wait before attempt+1: RetryDelay= doubled per attempt up to RetryMax=, the second
 * half of it drawn at random (channels failing together do not come back in step), never
 * shorter than what the receiver asked for (up to RetryMax=). */
static int64_t backoff(const struct notify_channel *ch, int64_t attempt, int64_t retry_after) {
        uint64_t d = ch->retry_delay_ns;
        for (int64_t i = 1; i < attempt && d < ch->retry_max_ns; i++)
                d = d > ch->retry_max_ns / 2 ? ch->retry_max_ns : d * 2;
        d = MIN(d, ch->retry_max_ns);
        uint64_t wait = d / 2 + random64() % (d / 2 + 1);
        return (int64_t) MAX(wait, MIN((uint64_t) MAX(retry_after, 0), ch->retry_max_ns));
}

static void record(struct sender *s, const struct notify_claim *c,
                   const struct notify_result *res) {
        const struct notify_channel *ch = s->ch;
        int64_t now = now_ns(CLOCK_REALTIME), attempt = c->attempts + 1, next = 0;
        enum notify_outcome out;
        char err[FARM_ERROR_MAX], why[NOTIFY_RESULT_MAX + 64];
        snprintf(why, sizeof(why), "%s", res->error);
        switch (res->what) {
        case NOTIFY_RESULT_SENT:
                out = NOTIFY_SENT;
                break;
        case NOTIFY_RESULT_ABORTED:
                out = NOTIFY_GIVEN_BACK;
                break;
        case NOTIFY_RESULT_TRANSIENT:
                out = attempt > (int64_t) ch->retries ? NOTIFY_FAILED : NOTIFY_RETRY;
                if (out == NOTIFY_FAILED)
                        snprintf(why, sizeof(why), "%s (attempt %" PRId64 ", the last)", res->error,
                                 attempt);
                else
                        next = now + backoff(ch, attempt, res->retry_after_ns);
                break;
        default:
                out = NOTIFY_FAILED;
        }
        int r = notify_store_finish(s->n->db, c->delivery, s->n->owner, out, now, next,
                                    out == NOTIFY_SENT || out == NOTIFY_GIVEN_BACK ? NULL : why,
                                    err);
        if (r < 0)
                log_warning_errno(r, "Notification %" PRId64 " to %s: %s", c->notification,
                                  ch->name, err);
        else if (out == NOTIFY_SENT)
                log_info("Notification %" PRId64 " (%s) sent to %s", c->notification,
                         json_string_value(json_object_get(c->row, "kind")), ch->name);
        else if (out == NOTIFY_RETRY)
                log_warning("Notification %" PRId64 " to %s, attempt %" PRId64 ": %s; trying "
                            "again in %.1f s",
                            c->notification, ch->name, attempt, res->error,
                            (double) (next - now) / 1e9);
        else if (out == NOTIFY_FAILED)
                log_error("Notification %" PRId64 " to %s failed: %s (it is on the dead-letter "
                          "list: rtsoak-server notifications --state failed)",
                          c->notification, ch->name, why);
}

static void send_one(struct sender *s, const struct notify_claim *c) {
        struct notify_text text;
        struct notify_result res = { .what = NOTIFY_RESULT_PERMANENT };
        if (notify_render(c->row, s->n->base_url, &text) < 0) {
                snprintf(res.error, sizeof(res.error), "cannot render the notification");
                res.what = NOTIFY_RESULT_TRANSIENT;
        } else {
                struct notify_message m = { .row = c->row,
                                            .text = &text,
                                            .delivery = c->delivery,
                                            .attempt = c->attempts + 1,
                                            .channel = s->ch->name,
                                            .host = s->n->host };
                s->ops->send(s->ch, &m, &s->n->stop, &res);
                notify_text_done(&text);
        }
        record(s, c, &res);
}

/* Sends what is due; returns how long to sleep. */
static int64_t deliver_due(struct sender *s, bool *failing) {
        char err[FARM_ERROR_MAX] = "";
        int64_t lease = 2 * (int64_t) s->ch->timeout_ns + 60 * (int64_t) NSEC_PER_SEC, next;
        int r;
        while (!atomic_load(&s->n->stop)) {
                struct notify_claim c;
                r = notify_store_claim(s->n->db, s->ch->name, s->n->owner, now_ns(CLOCK_REALTIME),
                                       lease, &c, err);
                notify_failed(s->n->db, failing, r, "cannot read the deliveries", err);
                if (r <= 0)
                        break;
                send_one(s, &c);
                notify_claim_done(&c);
        }
        r = notify_store_next_due(s->n->db, s->ch->name, &next, err);
        if (r < 0 || next == INT64_MAX)
                return POLL_NS;
        return MIN(MAX(next - now_ns(CLOCK_REALTIME), (int64_t) NSEC_PER_MSEC), POLL_NS);
}

static void sender_main(void *arg, struct worker *w) {
        struct sender *s = arg;
        bool failing = false;
        int64_t wait;
        do
                wait = deliver_due(s, &failing);
        while (worker_wait(w, (uint64_t) wait));
}

static void checker_main(void *arg, struct worker *w) {
        struct farm_notifier *n = arg;
        do
                notify_check(n, now_ns(CLOCK_REALTIME));
        while (worker_wait(w, n->cfg->check_ns));
}

/* ---- the verdict log's hooks (server-notify-watch.c does the work) ---- */

const struct farm_verdict_hooks *farm_notifier_hooks(struct farm_notifier *n) {
        return n ? &n->hooks : NULL;
}

/* ---- start and stop ---- */

static void base_url(struct farm_notifier *n, const char *bound, const char *link_host, bool tls) {
        const char *u = n->cfg->dashboard_url;
        if (u && *u) {
                snprintf(n->base_url, sizeof(n->base_url), "%s", u);
                size_t l = strlen(n->base_url);
                while (l > 0 && n->base_url[l - 1] == '/')
                        n->base_url[--l] = '\0';
                return;
        }
        /* The name clients use ([Access] Hosts=), else, listening on every address, the
         * host's name; else the address listened on. */
        const char *colon = strrchr(bound, ':');
        bool any = strncmp(bound, "0.0.0.0:", 8) == 0 || strncmp(bound, "[::]:", 5) == 0;
        if ((link_host || any) && colon)
                snprintf(n->base_url, sizeof(n->base_url), "%s://%s%s", tls ? "https" : "http",
                         link_host ?: n->host, colon);
        else
                snprintf(n->base_url, sizeof(n->base_url), "%s://%s", tls ? "https" : "http",
                         bound);
}

void farm_notifier_stop(struct farm_notifier *n) {
        if (!n)
                return;
        atomic_store(&n->stop, true);
        worker_stop(n->checker);
        for (size_t i = 0; i < n->nsenders; i++)
                worker_stop(n->senders[i].worker);
        notify_watch_done(n);
        free(n);
}

int farm_notifier_start(farm_db *db, const struct farm_rule *rule, const struct notify_config *cfg,
                        const char *bound, const char *link_host, bool tls, int64_t listening_ns,
                        struct farm_notifier **ret) {
        char err[FARM_ERROR_MAX] = "";
        struct farm_notifier *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->db = db;
        n->rule = rule;
        n->cfg = cfg;
        if (gethostname(n->host, sizeof(n->host) - 1) < 0 || !*n->host)
                snprintf(n->host, sizeof(n->host), "localhost");
        snprintf(n->owner, sizeof(n->owner), "%.40s:%d:%08" PRIx32, n->host, (int) getpid(),
                 (uint32_t) random64());
        base_url(n, bound, link_host, tls);
        notify_watch_init(n, listening_ns);
        int r = notify_store_orphans(db, cfg, now_ns(CLOCK_REALTIME), err);
        if (r < 0)
                log_warning_errno(r, "Notifications: %s", err);
        r = worker_start("notify-check", checker_main, n, &n->checker);
        for (size_t i = 0; r >= 0 && i < cfg->nchannels; i++) {
                struct sender *s = &n->senders[n->nsenders];
                char name[16];
                *s = (struct sender){ .n = n,
                                      .ch = &cfg->channels[i],
                                      .ops = cfg->channels[i].transport == NOTIFY_WEBHOOK
                                                     ? &notify_webhook_ops
                                             : cfg->channels[i].smtp ? &notify_smtp_ops
                                                                     : &notify_mail_ops };
                snprintf(name, sizeof(name), "notify-%zu", i);
                if ((r = worker_start(name, sender_main, s, &s->worker)) >= 0)
                        n->nsenders++;
        }
        if (r < 0) {
                farm_notifier_stop(n);
                return r;
        }
        log_info("Notifications: %zu channel(s), links to %s", cfg->nchannels, n->base_url);
        if (rule->watch_ns == 0)
                log_warning("Notifications: [Verdict] Watch=0 keeps no verdict log: only "
                            "silences and waivers are told, no problems, verdicts or latest "
                            "stable releases");
        *ret = n;
        return 0;
}

/* ---- a test notification ---- */

struct test_args {
        const struct notify_config *cfg;
        const char *channel, *who;
        int64_t now, id;
};

static int test_in(sql_conn *c, void *userdata, char *err) {
        struct test_args *a = userdata;
        char key[NOTIFY_KEY_MAX];
        const char *names[] = { a->channel };
        json_auto_t *detail = json_pack("{s:s, s:s}", "channel", a->channel, "by", a->who);
        snprintf(key, sizeof(key), "test:%s:%" PRId64, a->channel, a->now);
        struct notify_new nn = { .key = key,
                                 .kind = NK_TEST,
                                 .status = "test",
                                 .groups = "",
                                 .event_ns = a->now,
                                 .path = "/",
                                 .detail = detail,
                                 .channels = names,
                                 .nchannels = 1 };
        if (!detail)
                return -ENOMEM;
        return notify_store_insert(c, &nn, a->now, a->now, &a->id, err);
}

int farm_notify_test(farm_db *db, const struct notify_config *cfg, const char *channel,
                     const char *who, int64_t now_ns, int64_t *ret_id,
                     char err[static FARM_ERROR_MAX]) {
        struct test_args a = { cfg, channel, who, now_ns, 0 };
        if (!notify_channel_find(cfg, channel)) {
                snprintf(err, FARM_ERROR_MAX, "the configuration has no channel [Notify.%s]",
                         channel);
                return -ENOENT;
        }
        int r = notify_store_write(db, test_in, &a, err);
        if (r >= 0)
                *ret_id = a.id;
        return r < 0 ? r : 0;
}

/* ---- the list of the API ---- */

int farm_notifications_json(farm_db *db, const char *state, const char *kind, const char *machine,
                            const char *release, const struct farm_page *page, json_t **ret,
                            char err[static FARM_ERROR_MAX]) {
        struct notify_filter f = { state, kind, machine, release };
        const char *bad = NULL;
        if (state && strcmp(state, "pending") != 0 && strcmp(state, "sent") != 0 &&
            strcmp(state, "failed") != 0)
                bad = "state: expected pending, sent or failed";
        else if (kind && notify_kind_from_name(kind) < 0)
                bad = "kind: not a kind of notification";
        else if (machine && !farm_machine_id_valid(machine))
                bad = "machine: not a machine id (32 lowercase hex digits)";
        else if (release && (!*release || strlen(release) > SUMMARY_MAX_RELEASE))
                bad = "release: empty, or longer than any release name";
        if (bad) {
                snprintf(err, FARM_ERROR_MAX, "%s", bad);
                return -EINVAL;
        }
        return notify_store_list(db, &f, page, ret, err);
}
