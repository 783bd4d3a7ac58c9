/* SPDX-License-Identifier: MIT */
/* Inside the notifications: the notifier's state shared by its delivery part
 * (server-notify.c) and the part that watches the farm (server-notify-watch.c). */
#pragma once

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server-notify-channel.h"
#include "server-notify-store.h"
#include "server-notify.h"
#include "worker.h"

#define NOTIFY_ITEMS_KEPT 20 /* problems listed in a grouped notification; the rest counted */

/* Problem ids already seen, as 64-bit hashes (open addressing; 0 marks a free slot). */
struct seen_set {
        uint64_t *slots;
        size_t cap, n;
};

/* A problem of the verdict being made that was not seen before. */
struct pitem {
        enum notify_kind kind;
        char *id, *machine, *hostname, *message, *culprit;
        int64_t time_ns, end_ns;
};

struct sender {
        struct farm_notifier *n;
        const struct notify_channel *ch;
        const struct notify_transport_ops *ops;
        struct worker *worker;
};

struct farm_notifier {
        farm_db *db;
        const struct farm_rule *rule;
        const struct notify_config *cfg;
        char owner[NOTIFY_OWNER_MAX]; /* this instance, for the deliveries' leases */
        char host[256];
        char base_url[1024];
        atomic_bool stop;
        struct worker *checker;
        struct sender senders[NOTIFY_CHANNELS_MAX];
        size_t nsenders;
        struct farm_verdict_hooks hooks;
        /* Used only by the verdict log's thread: */
        struct seen_set seen;
        char *release; /* the verdict whose new problems are held */
        struct pitem *items;
        size_t nitems;
        int baseline;       /* -1 not known yet, 0 the first pass is still to come, 1 done */
        int64_t started_ns; /* when the server began to take uploads: the first pass learns
                             * what was received before it, and tells what came after */
        bool failing;       /* the last write failed (logged once) */
        /* Used only by the checker's thread: */
        int64_t pruned_ns;
        bool check_failing;
};

/* The channels that take a notification of kind for the groups ("a,b"): names into names
 * (NOTIFY_CHANNELS_MAX), how many. */
size_t notify_route(const struct farm_notifier *n, enum notify_kind kind, const char *groups,
                    const char *names[static NOTIFY_CHANNELS_MAX]);
/* Makes a notification (routed by its kind and groups) in c's open transaction: 1 made, 0 it
 * existed. */
int notify_make(struct farm_notifier *n, sql_conn *c, struct notify_new *nn, int64_t now_ns,
                int64_t not_before_ns, char *err);
/* Wakes the senders: something is due. */
void notify_wake(struct farm_notifier *n);
/* "/kernels/RELEASE" with the release escaped for a URL path. */
char *notify_kernel_path(const char *release);
/* Logs a failure of the watching part once per stretch of failures. */
void notify_failed(farm_db *db, bool *failing, int r, const char *what, const char *err);

/* ---- server-notify-watch.c ---- */
void notify_watch_init(struct farm_notifier *n, int64_t listening_ns);
void notify_watch_done(struct farm_notifier *n);
/* One pass of the checker: silences, waivers granted or withdrawn, old notifications. */
void notify_check(struct farm_notifier *n, int64_t now_ns);
