/* SPDX-License-Identifier: MIT */
/* A notification on its way out: the message as people read it (rendered from the stored
 * row), and the transports that carry it (a webhook's JSON POST, a mail through the local
 * MTA), each one descriptor. */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "channels.h"

#define NOTIFY_SCHEMA "rtsoak.notification/1"
#define NOTIFY_RESULT_MAX 512

/* What a notification says, for people: a title (a mail's subject), lines of text, and the
 * dashboard page that shows it. */
struct notify_text {
        char *title, *text, *url;
};
/* From a row as notify_store_list() and notify_store_claim() give it; base_url without the
 * trailing slash. */
int notify_render(const json_t *row, const char *base_url, struct notify_text *ret);
void notify_text_done(struct notify_text *t);
/* "3h 2min", "16min", "45s": a duration to two units, for people. */
const char *notify_span(char buf[static 32], int64_t ns);

/* One delivery to send. */
struct notify_message {
        const json_t *row; /* the notification (notify_store_claim()) */
        const struct notify_text *text;
        int64_t delivery;
        int64_t attempt; /* 1 for the first */
        const char *channel;
        const char *host; /* this server's host name */
};

/* What became of one attempt. */
struct notify_result {
        enum {
                NOTIFY_RESULT_SENT,
                NOTIFY_RESULT_TRANSIENT, /* worth trying again */
                NOTIFY_RESULT_PERMANENT, /* trying again will not help */
                NOTIFY_RESULT_ABORTED,   /* the server is stopping: not tried to the end */
        } what;
        int64_t retry_after_ns; /* what the receiver asked for, 0: nothing */
        char error[NOTIFY_RESULT_MAX];
};

struct notify_transport_ops {
        const char *name;
        /* One attempt; stop is set when the server stops (an attempt in flight may end
         * early, ABORTED). */
        void (*send)(const struct notify_channel *ch, const struct notify_message *m,
                     const atomic_bool *stop, struct notify_result *ret);
};
extern const struct notify_transport_ops notify_webhook_ops;
extern const struct notify_transport_ops notify_mail_ops;
extern const struct notify_transport_ops notify_smtp_ops;

/* The webhook's body (NOTIFY_SCHEMA), and its signature header's value: "sha256=" and the
 * hex HMAC-SHA256 of "TIMESTAMP.BODY" under the channel's secret. */
json_t *notify_webhook_payload(const struct notify_message *m);
void notify_webhook_signature(const uint8_t *secret, size_t secret_len, const char *timestamp,
                              const char *body, char ret[static 72]);
/* The whole mail that sendmail -t reads (or SMTP's DATA carries): headers and body. */
char *notify_mail_compose(const struct notify_channel *ch, const struct notify_message *m,
                          int64_t now_ns);
