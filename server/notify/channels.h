/* SPDX-License-Identifier: MIT */
/* What the server's configuration says about notifications: the [Notifications] section and
 * one [Notify.NAME] section per channel (a webhook or mail), and which channels a
 * notification of a kind and gating groups goes to. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf-parser.h"

#define NOTIFY_CHANNELS_MAX 16
#define NOTIFY_CHANNEL_NAME_MAX 33 /* with the NUL */
#define NOTIFY_WHERE_MAX 300       /* "file:line" */
#define NOTIFY_GROUPS_MAX 32
#define NOTIFY_GROUP_MAX 65
#define NOTIFY_SECRET_MIN 16 /* bytes of a webhook's shared secret */
#define NOTIFY_SECRET_MAX 4096
#define NOTIFY_RECIPIENTS_MAX 32

/* What a notification is about.  The names are those of the configuration's Kinds=, the API
 * and the webhook's "kind". */
enum notify_kind {
        NK_SILENCE,     /* a gating machine fell silent, or reported again */
        NK_VIOLATION,   /* the verdict's problems of a gating machine, grouped ... */
        NK_UNCLEAN_END, /* ... per machine, kind and release */
        NK_LOAD_DOWN,
        NK_PROBE_DOWN,
        NK_CLOCK,
        NK_OVERLAP,
        NK_VERDICT,       /* a release's verdict changed */
        NK_WAIVER,        /* a waiver granted or withdrawn */
        NK_LATEST_STABLE, /* a series' latest stable changed */
        NK_TEST,          /* rtsoak-server notifications test CHANNEL */
        NK_COUNT,
};
extern const char *const notify_kind_names[NK_COUNT];
/* The kind named s, or -1. */
int notify_kind_from_name(const char *s);

enum notify_transport {
        NOTIFY_NONE,
        NOTIFY_WEBHOOK,
        NOTIFY_MAIL,
};

struct notify_channel {
        char name[NOTIFY_CHANNEL_NAME_MAX];
        char where[NOTIFY_WHERE_MAX]; /* where its section was first seen, for later errors */
        enum notify_transport transport;
        char *url;                                         /* Webhook= */
        char *secret_file, secret_where[NOTIFY_WHERE_MAX]; /* SecretFile= */
        char *ca_file;                                     /* CAFile= */
        char *to;                                          /* Mail=: "a@b.example, c@d.example" */
        char *from;                                        /* From=, or NULL: the MTA's */
        char *sendmail;                                    /* Sendmail= */
        char *smtp;                                        /* SMTP=: instead of sendmail */
        char *subject_prefix;                              /* SubjectPrefix= */
        uint64_t timeout_ns, retry_delay_ns, retry_max_ns;
        unsigned retries;
        uint32_t kinds; /* 1 << notify_kind */
        size_t ngroups; /* 0: every group */
        char groups[NOTIFY_GROUPS_MAX][NOTIFY_GROUP_MAX];
        /* Read when the server starts (notify_config_load_secrets()). */
        uint8_t *secret;
        size_t secret_len;
        bool secret_shared; /* the file can be read by others than its owner */
};

struct notify_config {
        bool enabled;        /* [Notifications] Enabled= */
        char *dashboard_url; /* DashboardURL=: "" derives it from the listening address */
        uint64_t check_ns;   /* Check=: how often silent machines are looked for */
        uint64_t group_wait_ns, group_interval_ns; /* GroupWait=, GroupInterval= */
        uint64_t keep_ns; /* Keep=: delivered and failed notifications kept (0: forever) */
        size_t nchannels;
        struct notify_channel channels[NOTIFY_CHANNELS_MAX];
};

/* The defaults of the [Notifications] keys (the rows are in the server's table). */
#define NOTIFY_CHECK_DEFAULT "15s"
#define NOTIFY_GROUP_WAIT_DEFAULT "30s"
#define NOTIFY_GROUP_INTERVAL_DEFAULT "10min"
#define NOTIFY_KEEP_DEFAULT "90d"

/* The conf_table entry of the [Notify.NAME] sections; obj + offset is the notify_config. */
int notify_channel_assign(struct notify_config *c, const char *where, const char *name,
                          const char *key, const char *value, char err[static CONF_ERROR_MAX]);
void notify_channels_print(const struct notify_config *c, FILE *f);
/* What can only be checked once every file is read: each channel has a transport and only
 * the keys of its transport (then its transport and defaults are set).  err names the
 * section's file and line (dashboard_where: where DashboardURL= was set). */
int notify_config_check(struct notify_config *c, const char *dashboard_where,
                        char err[static CONF_ERROR_MAX]);
/* Reads every webhook's SecretFile= (serving only: the commands need no secret). */
int notify_config_load_secrets(struct notify_config *c, char err[static CONF_ERROR_MAX]);
void notify_config_free(struct notify_config *c);

const struct notify_channel *notify_channel_find(const struct notify_config *c, const char *name);
/* Whether channel ch takes a notification of kind for the gating groups (comma-separated;
 * NULL or "" for none: then only channels without Groups= take it). */
bool notify_channel_wants(const struct notify_channel *ch, enum notify_kind kind,
                          const char *groups);
