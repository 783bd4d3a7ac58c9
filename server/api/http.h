/* SPDX-License-Identifier: MIT */
/* The HTTP side of rtsoak-server: the listening socket, the libmicrohttpd daemon and its
 * worker threads, the API routes and the request log. */
#pragma once

#include <stddef.h>

#include "access.h"
#include "connlimit.h"
#include "db.h"
#include "verdict.h"

#define FARM_ADDRESS_MAX 128
#define FARM_LISTEN_DEFAULT "127.0.0.1:8470"
#define FARM_MAX_BODY_DEFAULT ((size_t) 16 << 20)
/* A worker waits for the commit of the upload it stored, so the workers bound how many uploads
 * can share one commit (and its fsync): 8 store 2-4 per commit under load. */
#define FARM_THREADS_DEFAULT 8
#define FARM_CONNECTION_TIMEOUT_S_DEFAULT 30

struct farm_http_config {
        int listen_fd;                          /* bound and listening; the daemon takes it over */
        const char *tls_cert_pem, *tls_key_pem; /* both (HTTPS) or neither */
        unsigned threads;
        struct farm_connlimit_config limits;
        struct farm_access_config access;
        unsigned connection_timeout_s; /* idle, reset by every byte */
        size_t max_body_bytes;
        double rate_per_s;
        unsigned burst;
        const struct farm_rule *rule; /* of the verdicts; must outlive the server */
};

typedef struct farm_http farm_http;

/* Parses "ADDR:PORT" or "[ADDR6]:PORT" (numeric only), binds and listens.  -EINVAL for an
 * address that does not parse; otherwise the bind or listen error.  ret_bound is the address
 * really bound (port 0 picks a free port). */
int farm_listen(const char *address, int *ret_fd, char ret_bound[static FARM_ADDRESS_MAX]);

/* Starts serving; the database must outlive the server. */
int farm_http_start(const struct farm_http_config *c, farm_db *db, farm_http **ret);
/* Stops accepting, finishes or aborts the requests in flight, joins the threads. */
void farm_http_stop(farm_http *h);
