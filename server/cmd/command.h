/* SPDX-License-Identifier: MIT */
/* What rtsoak-server's commands share: the options they were given (from the configuration
 * file, then the command line), who acts, the farm database opened and JSON printed. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "channels.h"
#include "connlimit.h"
#include "db.h"
#include "rule.h"
#include "settings.h"

/* notifications: --state, --kind, --machine, --release and --limit as given. */
struct cli_notify_filter {
        const char *state, *kind, *machine, *release;
        const char *limit; /* text of --limit, or NULL */
};

struct server_options {
        const char *db_path;
        /* Serving: [Server] and [Access], --listen ... --cache-warming. */
        const char *listen;
        const char *cert, *key;
        unsigned threads;
        double rate_per_s;
        unsigned burst;
        size_t max_body_bytes;
        /* Where the obsolete CacheWarming=/--cache-warming was given (NULL: not), to say that
         * it has no effect: ingest keeps every day's histograms. */
        const char *cache_warming_from;
        struct farm_connlimit_config limits;
        unsigned idle_timeout_s;
        struct farm_access_config access;
        uint64_t retention_ns; /* [Server] Retention=: 0 keeps every interval */
        /* The commands' options. */
        struct farm_settings_change change; /* --bound, --gating, --groups, --label, --unlabel */
        const char *reason, *by, *at, *known_at, *from, *to, *before;
        const char *origin; /* kcidb: NULL is FARM_KCIDB_ORIGIN_DEFAULT */
        const char *watch;  /* kcidb --watch: the directory of the reports */
        bool json;
        unsigned chunk;                         /* migrate: intervals per transaction */
        struct cli_notify_filter notify_filter; /* notifications: --state, --kind ... */
        /* [Verdict], [Series.NAME], [Notifications] and [Notify.NAME]. */
        struct farm_rule rule;
        struct notify_config *notify;
};

/* A command: its arguments after its words (as many as its row of the command table allows);
 * returns the program's exit status. */
typedef int cli_command_fn(const struct server_options *o, char **args, int n);

/* Who does a staff action from the command line: --by, or the login behind sudo. */
const char *cli_who(const struct server_options *o);
/* Opens the farm database, logging why it cannot. */
int cli_open_db(const char *path, farm_db **ret);
/* Prints j indented on stdout: the exit status. */
int cli_print_json(json_t *j);
