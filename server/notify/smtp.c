/* SPDX-License-Identifier: MIT */
/* The mail channel over SMTP (SMTP=smtp://localhost:25): the same mail as for sendmail, handed
 * to an MTA's SMTP port with libcurl, for a server that may not run a setuid or setgid
 * program (the shipped systemd unit); the MTA's reply code decides what becomes of it. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "channel.h"
#include "timeutil.h"

struct reader {
        const char *text;
        size_t left;
};

static size_t on_read(char *buf, size_t size, size_t n, void *userdata) {
        struct reader *r = userdata;
        size_t k = MIN(size * n, r->left);
        memcpy(buf, r->text, k);
        r->text += k;
        r->left -= k;
        return k;
}

static int on_progress(void *stop, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
        (void) dltotal, (void) dlnow, (void) ultotal, (void) ulnow;
        return atomic_load((const atomic_bool *) stop) ? 1 : 0;
}

/* The envelope: "<a@b>" for each address of Mail= (already checked: no brackets in them). */
static struct curl_slist *recipients(const char *to) {
        struct curl_slist *list = NULL, *t;
        for (const char *p = to; *p;) {
                size_t len = strcspn(p, ", ");
                char addr[300];
                if (len > 0 && len < sizeof(addr) - 2) {
                        snprintf(addr, sizeof(addr), "<%.*s>", (int) len, p);
                        if (!(t = curl_slist_append(list, addr))) {
                                curl_slist_free_all(list);
                                return NULL;
                        }
                        list = t;
                }
                p += len;
                p += strspn(p, ", ");
        }
        return list;
}

static void smtp_send(const struct notify_channel *ch, const struct notify_message *m,
                      const atomic_bool *stop, struct notify_result *ret) {
        _cleanup_free_ char *mail = notify_mail_compose(ch, m, now_ns(CLOCK_REALTIME)),
                            *from = NULL;
        struct curl_slist *rcpt = recipients(ch->to);
        CURL *curl = mail && rcpt ? curl_easy_init() : NULL;
        *ret = (struct notify_result){ .what = NOTIFY_RESULT_TRANSIENT };
        /* Without From=, the envelope's sender is this server's own address. */
        if (!curl || asprintf(&from, "<%s%s%s>", ch->from ?: "rtsoak-server", ch->from ? "" : "@",
                              ch->from ? "" : m->host) < 0) {
                from = NULL;
                snprintf(ret->error, sizeof(ret->error), "out of memory");
                curl_slist_free_all(rcpt);
                if (curl)
                        curl_easy_cleanup(curl);
                return;
        }
        struct reader rd = { mail, strlen(mail) };
        char curl_err[CURL_ERROR_SIZE] = "";
        long timeout_ms = (long) (ch->timeout_ns / NSEC_PER_MSEC);
        curl_easy_setopt(curl, CURLOPT_URL, ch->smtp);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
        curl_easy_setopt(curl, CURLOPT_MAIL_FROM, from);
        curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, rcpt);
        curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(curl, CURLOPT_READDATA, &rd);
        curl_easy_setopt(curl, CURLOPT_CRLF, 1L); /* the mail's lines end in LF */
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
        if (ch->ca_file)
                curl_easy_setopt(curl, CURLOPT_CAINFO, ch->ca_file);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *) stop);
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        CURLcode cc = curl_easy_perform(curl);
        long code = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        if (cc == CURLE_OK)
                ret->what = NOTIFY_RESULT_SENT;
        else if (cc == CURLE_ABORTED_BY_CALLBACK)
                ret->what = NOTIFY_RESULT_ABORTED;
        else {
                snprintf(ret->error, sizeof(ret->error), "%s: %s (SMTP reply %ld)", ch->smtp,
                         *curl_err ? curl_err : curl_easy_strerror(cc), code);
                /* 5xx: the MTA refuses this mail (no such recipient, policy) for good. */
                if (code >= 500 && code < 600)
                        ret->what = NOTIFY_RESULT_PERMANENT;
        }
        curl_easy_cleanup(curl);
        curl_slist_free_all(rcpt);
}

const struct notify_transport_ops notify_smtp_ops = {
        .name = "smtp",
        .send = smtp_send,
};
