/* SPDX-License-Identifier: MIT */
/* rtsoak-server's configuration file (/etc/rtsoak/rtsoak-server.conf and its drop-ins, then
 * the --set assignments): read before the options, which override it. */
#pragma once

#include "command.h"

#define SERVER_DB_DEFAULT "/var/lib/rtsoak-server/farm.db"
#define SERVER_CONFIG_DEFAULT "/etc/rtsoak/rtsoak-server.conf"

/* Reads the file of --config FILE in argv (the default when none is given, which may be
 * absent) and the --set assignments of argv, checks every value, and sets in o what they say:
 * the database, serving, access, the verdict's rule and the notifications.  ret_path: the
 * file; ret_db: its [Server] Database= (o->db_path until an option overrides it).  0, or the
 * exit status with the error logged. */
int server_config_load(int argc, char **argv, struct server_options *o, const char **ret_path,
                       const char **ret_db);
