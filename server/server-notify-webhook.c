/* SPDX-License-Identifier: MIT */
/* The webhook channel: a notification as JSON (rtsoak.notification/1) POSTed with libcurl,
 * signed with HMAC-SHA256 of the channel's shared secret; what the receiver answered decides
 * whether it is sent, tried again or failed for good. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http-reply.h"
#include "macro.h"
#include "server-notify-channel.h"
#include "sha256.h"
#include "text-json.h"
#include "timeutil.h"

json_t *notify_webhook_payload(const struct notify_message *m) {
        const json_t *row = m->row;
        json_t *p = json_pack("{s:s, s:O?, s:I, s:I, s:s, s:O?, s:O?, s:s, s:s, s:s}", "schema",
                              NOTIFY_SCHEMA, "id", json_object_get(row, "id"), "delivery",
                              (json_int_t) m->delivery, "attempt", (json_int_t) m->attempt,
                              "channel", m->channel, "kind", json_object_get(row, "kind"), "status",
                              json_object_get(row, "status"), "title", m->text->title, "text",
                              m->text->text, "url", m->text->url);
        static const char *const copied[] = { "time",    "time_ns",    "last",    "last_ns",
                                              "created", "created_ns", "release", "series",
                                              "groups",  "count",      "detail" };
        for (size_t i = 0; p && i < ELEMENTSOF(copied); i++)
                json_object_set(p, copied[i], json_object_get(row, copied[i]) ?: json_null());
        const char *machine = json_string_value(json_object_get(row, "machine"));
        if (p)
                json_object_set_new(p, "machine",
                                    machine ? json_pack("{s:s, s:O?}", "id", machine, "hostname",
                                                        json_object_get(row, "hostname"))
                                            : json_null());
        return p;
}

void notify_webhook_signature(const uint8_t *secret, size_t secret_len, const char *timestamp,
                              const char *body, char ret[static 72]) {
        const void *parts[] = { timestamp, ".", body };
        const size_t lens[] = { strlen(timestamp), 1, strlen(body) };
        uint8_t mac[SHA256_DIGEST_SIZE];
        char hex[2 * SHA256_DIGEST_SIZE + 1];
        hmac_sha256(secret, secret_len, parts, lens, ELEMENTSOF(parts), mac);
        snprintf(ret, 72, "sha256=%s", sha256_digest_hex(mac, hex));
}

static int on_progress(void *stop, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
        (void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
        return atomic_load((const atomic_bool *) stop) ? 1 : 0;
}

/* The headers of one attempt; NULL when out of memory. */
static struct curl_slist *headers(const struct notify_channel *ch, const struct notify_message *m,
                                  const char *body) {
        char line[256], ts[32], sig[72];
        struct curl_slist *h = NULL, *t;
        snprintf(ts, sizeof(ts), "%lld", (long long) (now_ns(CLOCK_REALTIME) / NSEC_PER_SEC));
        const char *kind = json_string_value(json_object_get(m->row, "kind")) ?: "";
        const char *lines[6];
        size_t n = 0;
        lines[n++] = "Content-Type: application/json";
        lines[n++] = "Expect:"; /* no 100-continue round trip */
        char l_kind[64], l_del[64], l_ts[64];
        snprintf(l_kind, sizeof(l_kind), "X-Rtsoak-Event: %s", kind);
        snprintf(l_del, sizeof(l_del), "X-Rtsoak-Delivery: %lld", (long long) m->delivery);
        snprintf(l_ts, sizeof(l_ts), "X-Rtsoak-Timestamp: %s", ts);
        lines[n++] = l_kind;
        lines[n++] = l_del;
        lines[n++] = l_ts;
        if (ch->secret) {
                notify_webhook_signature(ch->secret, ch->secret_len, ts, body, sig);
                snprintf(line, sizeof(line), "X-Rtsoak-Signature: %s", sig);
                lines[n++] = line;
        }
        for (size_t i = 0; i < n; i++) {
                if (!(t = curl_slist_append(h, lines[i]))) {
                        curl_slist_free_all(h);
                        return NULL;
                }
                h = t;
        }
        return h;
}

/* What an answer means for the delivery. */
static void classify(long status, const struct http_reply *reply, struct notify_result *ret) {
        char msg[NOTIFY_RESULT_MAX];
        http_reply_message(reply, status, msg, sizeof(msg));
        if (status >= 200 && status < 300) {
                ret->what = NOTIFY_RESULT_SENT;
                return;
        }
        snprintf(ret->error, sizeof(ret->error), "%s", msg);
        ret->retry_after_ns = (int64_t) http_parse_retry_after(reply->retry_after,
                                                               now_ns(CLOCK_REALTIME));
        if (status == 408 || status == 425 || status == 429 || status >= 500)
                ret->what = NOTIFY_RESULT_TRANSIENT;
        else {
                ret->what = NOTIFY_RESULT_PERMANENT;
                if (status >= 300 && status < 400)
                        snprintf(ret->error, sizeof(ret->error),
                                 "HTTP %ld: a redirect (not followed: give the final URL)", status);
        }
}

static void webhook_send(const struct notify_channel *ch, const struct notify_message *m,
                         const atomic_bool *stop, struct notify_result *ret) {
        json_auto_t *payload = notify_webhook_payload(m);
        /* What was stored before the text rule leaves escaped (text-json.h). */
        _cleanup_free_ char *body = payload && text_json_escape(payload) == 0
                                            ? json_dumps(payload, JSON_COMPACT)
                                            : NULL;
        _cleanup_free_ struct http_reply *reply = calloc(1, sizeof(*reply));
        struct curl_slist *h = body ? headers(ch, m, body) : NULL;
        CURL *curl = h && reply ? curl_easy_init() : NULL;
        *ret = (struct notify_result){ .what = NOTIFY_RESULT_TRANSIENT };
        if (!curl) {
                snprintf(ret->error, sizeof(ret->error), "out of memory");
                curl_slist_free_all(h);
                return;
        }
        char curl_err[CURL_ERROR_SIZE] = "";
        long timeout_ms = (long) (ch->timeout_ns / NSEC_PER_MSEC);
        curl_easy_setopt(curl, CURLOPT_URL, ch->url);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(body));
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (ch->ca_file)
                curl_easy_setopt(curl, CURLOPT_CAINFO, ch->ca_file);
        curl_easy_setopt(curl, CURLOPT_USERAGENT, "rtsoak-server/" PROJECT_VERSION);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, http_reply_on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, reply);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, http_reply_on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, reply);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *) stop);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        http_reply_reset(reply);
        CURLcode cc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (cc == CURLE_ABORTED_BY_CALLBACK)
                ret->what = NOTIFY_RESULT_ABORTED;
        else if (cc != CURLE_OK)
                snprintf(ret->error, sizeof(ret->error), "%s",
                         *curl_err ? curl_err : curl_easy_strerror(cc));
        else
                classify(status, reply, ret);
        curl_easy_cleanup(curl);
        curl_slist_free_all(h);
}

const struct notify_transport_ops notify_webhook_ops = {
        .name = "webhook",
        .send = webhook_send,
};
