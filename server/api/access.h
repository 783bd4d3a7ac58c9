/* SPDX-License-Identifier: MIT */
/* Who may read what: read tokens, the read access of each class of routes (the JSON API, the
 * dashboard, /metrics; the audit trail is for staff only), and the Host names the server
 * answers reads for (a defence against DNS rebinding). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "staff-tokens.h"
#include "sha256.h"

#define FARM_ACCESS_ERROR_MAX 512
#define FARM_HOSTS_MAX 64
#define FARM_ACCESS_LINK_HOST_MAX 260 /* a host name, or an IPv6 address in brackets */

/* How a class of routes is read.  AUTO: OPEN when the server listens on loopback only, TOKEN
 * otherwise. */
enum farm_read_mode {
        FARM_READ_AUTO,
        FARM_READ_OPEN,  /* anyone who can connect */
        FARM_READ_TOKEN, /* a read token or a staff token */
        FARM_READ_STAFF, /* a staff token */
};

enum farm_route_class {
        FARM_CLASS_API,       /* GET /api/v1/... */
        FARM_CLASS_DASHBOARD, /* pages and plots, and every other path */
        FARM_CLASS_METRICS,   /* /metrics */
        FARM_CLASS_AUDIT,     /* /api/v1/audit, /api/v1/notifications: staff only, always */
        FARM_CLASS_UPLOAD,    /* POST /api/v1/summaries: a machine's token (server-http.c) */
        FARM_CLASS_STAFF,     /* other POSTs: a staff token (server-http.c) */
};

struct farm_access_config {
        enum farm_read_mode api, dashboard, metrics;
        /* Names (and literal addresses) the Host header of a read may hold: "auto" (this
         * host's names and addresses, localhost), "*" (any), or a list separated by spaces or
         * commas. */
        const char *hosts;
        const char *listen; /* the address listened on, "ADDR:PORT" as bound */
};

typedef struct farm_access farm_access;

/* -EINVAL with err for a Host list that does not parse. */
int farm_access_new(const struct farm_access_config *c, farm_access **ret,
                    char err[static FARM_ACCESS_ERROR_MAX]);
void farm_access_free(farm_access *a);
/* One line for the start-up log: the effective modes and hosts. */
void farm_access_describe(const farm_access *a, char *buf, size_t size);

/* The name the dashboard's links use when [Notifications] DashboardURL= is not set: the first
 * name of a Hosts= list that is not a loopback name ("[ADDR6]" for an IPv6 address).  0, or
 * -ENOENT for Hosts=auto, Hosts=* or a list of loopback names only (the caller falls back on
 * the host's name or the address listened on). */
int farm_access_link_host(const struct farm_access_config *c, char *buf, size_t size);

/* The class of method on the routing path: its route's (the route table declares it,
 * routes.h), or for a path no route has, the class of where it lies. */
enum farm_route_class farm_route_class_of(const char *path, const char *method);

/* A refusal: status 401 (with the WWW-Authenticate value), 403 or 421, and why. */
struct farm_denial {
        unsigned status;
        const char *www_authenticate;
        const char *message;
};

/* Decides a read (API, dashboard, metrics, audit; other classes pass): 0 when it may go on
 * (ret_who: the reader or staff member whose token it carried, "" without one), 1 with ret
 * filled when refused, < 0 when the database failed (err says why). */
int farm_access_check(const farm_access *a, farm_db *db, enum farm_route_class cls,
                      const char *host, const char *authorization, struct farm_denial *ret,
                      char ret_who[static FARM_READER_NAME_MAX + 8], char *err);
