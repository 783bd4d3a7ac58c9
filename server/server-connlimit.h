/* SPDX-License-Identifier: MIT */
/* Connection limits of the HTTP server: how many connections one client address and all of
 * them may hold, and the deadlines of a request's head and of the whole request. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define FARM_CONNECTIONS_DEFAULT 1024
#define FARM_CONNECTIONS_PER_ADDRESS_DEFAULT 32
#define FARM_HEAD_TIMEOUT_DEFAULT "10s"
#define FARM_REQUEST_TIMEOUT_DEFAULT "2min"

struct farm_connlimit_config {
        unsigned max_total;          /* connections open at once */
        unsigned max_per_address;    /* from one IPv4 address or IPv6 /64 */
        uint64_t head_timeout_ns;    /* to send a whole request head, from the connection's
                                      * start or from the end of its previous answer */
        uint64_t request_timeout_ns; /* from the head to the end of the answer */
};

typedef struct farm_connlimit farm_connlimit;
struct farm_conn;

/* Starts the thread that closes the connections past their deadline. */
int farm_connlimit_new(const struct farm_connlimit_config *c, farm_connlimit **ret);
void farm_connlimit_free(farm_connlimit *l);

/* Whether a new connection from addr is let in (libmicrohttpd's accept policy); a refusal is
 * logged (at most one line per ten seconds, counting the others). */
bool farm_connlimit_admit(farm_connlimit *l, const struct sockaddr *addr, socklen_t len);
/* A connection was opened on socket fd: its head deadline starts.  NULL without memory (the
 * connection then has no deadline but its idle timeout). */
struct farm_conn *farm_connlimit_opened(farm_connlimit *l, int fd, const struct sockaddr *addr,
                                        socklen_t len);
void farm_connlimit_closed(farm_connlimit *l, struct farm_conn *c);
/* A request's head arrived: the request deadline starts. */
void farm_connlimit_head(farm_connlimit *l, struct farm_conn *c);
/* A request ended (answered or not), and with it the connection: every answer closes it (one
 * request per connection).  It no longer counts against the limits, so that a client that
 * connects again at once is not refused for the connection being closed; its socket stays
 * under the head deadline until it is closed. */
void farm_connlimit_done(farm_connlimit *l, struct farm_conn *c);
/* "head-deadline" or "request-deadline" when the connection was closed for that; NULL. */
const char *farm_connlimit_cut(farm_connlimit *l, const struct farm_conn *c);
