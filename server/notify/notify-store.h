/* SPDX-License-Identifier: MIT */
/* Notifications in the farm database: each notification once (by its key), its delivery to
 * each channel with a lease for the server instance that sends it, the problems already
 * seen, the engine's small state, and the lists of the API, on either store.  Only
 * server-notify-store.c speaks SQL about them (their schema is in server-schema.c). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "db.h"
#include "channels.h"
#include "params.h"
#include "sql.h"

#define NOTIFY_KEY_MAX 512
#define NOTIFY_OWNER_MAX 80

/* A notification to make. */
struct notify_new {
        const char *key; /* unique: a notification with this key is made once */
        enum notify_kind kind;
        const char *status; /* "firing", "resolved", "changed", "granted", "withdrawn", "test" */
        const char *machine_id, *hostname, *release, *series; /* or NULL */
        const char *groups;                                   /* the gating groups, "a,b" */
        const char *grp; /* the group of problems it collects (kind:machine:release), or NULL */
        int64_t event_ns;
        uint64_t count;
        const char *path;            /* the dashboard page that shows it */
        json_t *detail;              /* what the kind says (borrowed) */
        const char *const *channels; /* where it goes */
        size_t nchannels;
};

/* What runs inside a write transaction, on its connection c. */
typedef int (*notify_write_fn)(sql_conn *c, void *userdata, char *err);
/* Runs fn inside one write transaction of the farm database (rolled back when it fails). */
int notify_store_write(farm_db *db, notify_write_fn fn, void *userdata,
                       char err[static FARM_ERROR_MAX]);

/* ---- inside notify_store_write() ---- */

/* Makes n unless its key exists: 1 made (ret_id), 0 when it existed. */
int notify_store_insert(sql_conn *c, const struct notify_new *n, int64_t now_ns,
                        int64_t not_before_ns, int64_t *ret_id, char *err);
/* Records a problem id as seen: 1 when it is new, 0 when it was seen before. */
int notify_store_seen_add(sql_conn *c, const char *problem, const char *release, int64_t now_ns,
                          char *err);
/* The notification collecting the problems of grp that is still open at now (not sealed, not
 * due): 1 with its id, count and detail (new reference), or 0 and when the last one of grp
 * was due (ret_last_due_ns, INT64_MIN for none). */
int notify_store_open_group(sql_conn *c, const char *grp, int64_t now_ns, int64_t *ret_id,
                            uint64_t *ret_count, json_t **ret_detail, int64_t *ret_last_due_ns,
                            char *err);
int notify_store_group_update(sql_conn *c, int64_t id, uint64_t count, int64_t last_ns,
                              json_t *detail, const char *path, char *err);
/* The engine's state: a small text per key ("baseline", "silent:MACHINE" ...).  get: 1 with
 * *ret (malloc'd), 0 when absent. */
int notify_state_get(sql_conn *c, const char *key, char **ret, char *err);
int notify_state_set(sql_conn *c, const char *key, const char *value, int64_t now_ns, char *err);
int notify_state_del(sql_conn *c, const char *key, char *err);

/* ---- reading, outside a transaction ---- */

/* Whether the problem id was seen (by any server instance): 1 or 0. */
int notify_store_seen_has(farm_db *db, const char *problem, char err[static FARM_ERROR_MAX]);
/* A state from outside a transaction (the reader). */
int notify_state_read(farm_db *db, const char *key, char **ret, char err[static FARM_ERROR_MAX]);
/* Every state whose key starts with prefix: {"KEY": "VALUE", ...}. */
int notify_state_list(farm_db *db, const char *prefix, json_t **ret,
                      char err[static FARM_ERROR_MAX]);

/* ---- the sources the engine watches ---- */

struct notify_machine {
        char id[FARM_MACHINE_ID_LEN + 1];
        char *hostname, *groups;             /* groups: "a,b" */
        int64_t enrolled_ns, last_report_ns; /* INT64_MIN: never reported */
        int64_t quiet_until_ns; /* the end of the maintenance window in force or last ended
                                 * after the last report, INT64_MIN: none */
        bool in_window;         /* a maintenance window is in force at now */
};
/* The machines that gate now (gating, not revoked), for the silence check. */
int notify_store_gating_machines(farm_db *db, int64_t now_ns, struct notify_machine **ret,
                                 size_t *ret_n, char err[static FARM_ERROR_MAX]);
void notify_machines_free(struct notify_machine *v, size_t n);
/* A machine's hostname and groups now (-ENOENT for an unknown one). */
int notify_store_machine(farm_db *db, const char *id, struct notify_machine *ret,
                         char err[static FARM_ERROR_MAX]);

struct notify_audit {
        int64_t id, time_ns, waiver;
        char *who, *action, *release, *problem, *detail;
};
/* Waivers granted and withdrawn after audit row `after`, in order (at most 100). */
int notify_store_waiver_actions(farm_db *db, int64_t after, struct notify_audit **ret,
                                size_t *ret_n, char err[static FARM_ERROR_MAX]);
void notify_audit_free(struct notify_audit *v, size_t n);
/* The newest audit row's id (0: none). */
int notify_store_audit_last(farm_db *db, int64_t *ret, char err[static FARM_ERROR_MAX]);

/* The latest stable of every series as the verdict log has it: {"SERIES": "RELEASE" or null,
 * ...}, and the newest log row (ret_log_id) that decided it. */
int notify_store_latest_stable(farm_db *db, json_t **ret, int64_t *ret_log_id,
                               char err[static FARM_ERROR_MAX]);

/* ---- delivery ---- */

/* A delivery claimed for sending, with what the notification says. */
struct notify_claim {
        int64_t delivery, notification, attempts; /* attempts made before this one */
        char channel[NOTIFY_CHANNEL_NAME_MAX];
        json_t *row; /* the notification as the API lists it (without its deliveries) */
};
void notify_claim_done(struct notify_claim *c);
/* Takes the oldest due delivery of channel (nobody else holds it) and leases it to owner
 * until now + lease, sealing its notification (it collects no more problems): 1 with it in
 * ret, 0 when none is due. */
int notify_store_claim(farm_db *db, const char *channel, const char *owner, int64_t now_ns,
                       int64_t lease_ns, struct notify_claim *ret, char err[static FARM_ERROR_MAX]);
/* When the next delivery of channel is due (INT64_MAX: none pending). */
int notify_store_next_due(farm_db *db, const char *channel, int64_t *ret,
                          char err[static FARM_ERROR_MAX]);
enum notify_outcome {
        NOTIFY_SENT,
        NOTIFY_RETRY,      /* failed; try again at next_ns */
        NOTIFY_FAILED,     /* failed for good: the dead-letter list */
        NOTIFY_GIVEN_BACK, /* not tried (stopping): the lease is given back, no attempt counted */
};
/* Records what became of a claimed delivery (only while owner still holds it). */
int notify_store_finish(farm_db *db, int64_t delivery, const char *owner,
                        enum notify_outcome outcome, int64_t now_ns, int64_t next_ns,
                        const char *error, char err[static FARM_ERROR_MAX]);
/* Pending deliveries to channels the configuration no longer has: failed, saying so. */
int notify_store_orphans(farm_db *db, const struct notify_config *c, int64_t now_ns,
                         char err[static FARM_ERROR_MAX]);
/* Puts failed deliveries back to pending, due now: the one with id delivery, or (0) all of
 * them; returns how many. */
int notify_store_retry(farm_db *db, int64_t delivery, int64_t now_ns,
                       char err[static FARM_ERROR_MAX]);
/* Deletes notifications made and due before before_ns whose deliveries (if any) are all sent
 * or failed; how many. */
int notify_store_prune(farm_db *db, int64_t before_ns, char err[static FARM_ERROR_MAX]);

/* ---- the lists ---- */

struct notify_filter {
        const char *state;   /* of a delivery: "pending", "sent", "failed", or NULL */
        const char *kind;    /* or NULL */
        const char *machine; /* or NULL */
        const char *release; /* or NULL */
};
/* {"notifications": [...], "total", "limit", "offset"}: newest first, each with its
 * deliveries. */
int notify_store_list(farm_db *db, const struct notify_filter *f, const struct farm_page *page,
                      json_t **ret, char err[static FARM_ERROR_MAX]);
/* The samples of /metrics: rtsoak_notification_deliveries by channel and state, and
 * rtsoak_notification_oldest_pending_seconds. */
int notify_store_metric_deliveries(farm_db *db, FILE *f, char err[static FARM_ERROR_MAX]);
int notify_store_metric_oldest(farm_db *db, FILE *f, int64_t now_ns,
                               char err[static FARM_ERROR_MAX]);
