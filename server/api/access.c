/* SPDX-License-Identifier: MIT */
/* Read access: the mode of each class of routes, the Host allow-list, and the read tokens in
 * the farm database.  Uploads and staff requests carry their own tokens (server-http.c); this
 * decides the reads, which were open to anyone who could connect. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "macro.h"
#include "access.h"
#include "auth.h"
#include "db-internal.h"
#include "routes.h"

#define HOST_NAME_LEN 256

struct farm_access {
        enum farm_read_mode mode[3]; /* API, dashboard, metrics: never AUTO */
        bool loopback;
        bool any_host;
        char *hosts[FARM_HOSTS_MAX];
        unsigned nhosts;
};

static const char *mode_name(enum farm_read_mode m) {
        return m == FARM_READ_OPEN ? "open" : m == FARM_READ_TOKEN ? "token" : "staff";
}

/* The host part of "ADDR:PORT" or "[ADDR6]:PORT", or of a Host header (the port optional). */
static void host_part(const char *s, char buf[static HOST_NAME_LEN]) {
        buf[0] = '\0';
        if (s[0] == '[') {
                const char *e = strchr(s, ']');
                if (e && (size_t) (e - s - 1) < HOST_NAME_LEN)
                        snprintf(buf, HOST_NAME_LEN, "%.*s", (int) (e - s - 1), s + 1);
                return;
        }
        size_t n = strcspn(s, ":");
        if (n < HOST_NAME_LEN)
                snprintf(buf, HOST_NAME_LEN, "%.*s", (int) n, s);
}

static bool is_loopback(const char *host) {
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static int add_host(farm_access *a, const char *name, size_t len) {
        if (len == 0)
                return 0;
        if (len >= HOST_NAME_LEN || a->nhosts == FARM_HOSTS_MAX)
                return -EINVAL;
        for (unsigned i = 0; i < a->nhosts; i++)
                if (strlen(a->hosts[i]) == len && strncasecmp(a->hosts[i], name, len) == 0)
                        return 0;
        a->hosts[a->nhosts] = strndup(name, len);
        return a->hosts[a->nhosts++] ? 0 : -ENOMEM;
}

/* 1 when name was in the list (and is no longer), 0 when it was not. */
static int remove_host(farm_access *a, const char *name) {
        for (unsigned i = 0; i < a->nhosts; i++)
                if (strcasecmp(a->hosts[i], name) == 0) {
                        free(a->hosts[i]);
                        memmove(a->hosts + i, a->hosts + i + 1,
                                (--a->nhosts - i) * sizeof(a->hosts[0]));
                        return 1;
                }
        return 0;
}

/* The loopback names, in every list: a client on the server's own host (a Prometheus scraping
 * 127.0.0.1) names it so, and no other site's page can (DNS rebinding sends the page's own
 * name).  A list removes them with "-NAME". */
static int loopback_hosts(farm_access *a) {
        static const char *const local[] = { "localhost", "127.0.0.1", "::1" };
        int r = 0;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(local); i++)
                r = add_host(a, local[i], strlen(local[i]));
        return r;
}

/* This host's names and addresses: what clients on the lab network use. */
static int auto_hosts(farm_access *a, const char *listen_host) {
        int r = loopback_hosts(a);
        if (r >= 0 && strcmp(listen_host, "0.0.0.0") != 0 && strcmp(listen_host, "::") != 0)
                r = add_host(a, listen_host, strlen(listen_host));
        if (r < 0 || a->loopback)
                return r;
        char name[HOST_NAME_LEN] = "";
        if (gethostname(name, sizeof(name) - 1) == 0 && name[0])
                r = add_host(a, name, strlen(name));
        struct ifaddrs *ifs = NULL;
        if (r >= 0 && getifaddrs(&ifs) == 0) {
                for (struct ifaddrs *i = ifs; r >= 0 && i; i = i->ifa_next) {
                        char text[INET6_ADDRSTRLEN] = "";
                        if (!i->ifa_addr)
                                continue;
                        if (i->ifa_addr->sa_family == AF_INET)
                                inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr,
                                          text, sizeof(text));
                        else if (i->ifa_addr->sa_family == AF_INET6)
                                inet_ntop(AF_INET6,
                                          &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, text,
                                          sizeof(text));
                        if (text[0] && !strchr(text, '%')) /* link-local with a zone: skip */
                                r = add_host(a, text, strlen(text));
                }
                freeifaddrs(ifs);
        }
        /* More names than the list holds: the first ones stand, the rest need Hosts=. */
        return r == -EINVAL ? 0 : r;
}

/* A list of names, with the loopback names unless it removes them ("-localhost"). */
static int list_hosts(farm_access *a, const char *hosts, char err[static FARM_ACCESS_ERROR_MAX]) {
        int r = loopback_hosts(a);
        for (const char *p = hosts; r >= 0 && *p;) {
                p += strspn(p, " ,");
                size_t n = strcspn(p, " ,");
                bool removal = n > 0 && *p == '-';
                char h[HOST_NAME_LEN], bare[HOST_NAME_LEN];
                if (n >= sizeof(h))
                        return -EINVAL;
                /* "[::1]" and "name:8470" are taken as the name alone, "::1" as it is. */
                snprintf(h, sizeof(h), "%.*s", (int) (n - removal), p + removal);
                struct in6_addr a6;
                if (inet_pton(AF_INET6, h, &a6) == 1)
                        snprintf(bare, sizeof(bare), "%s", h);
                else
                        host_part(h, bare);
                if (n > 0 && (!bare[0] || strchr(bare, '*')))
                        return -EINVAL;
                if (removal && remove_host(a, bare) == 0) {
                        snprintf(err, FARM_ACCESS_ERROR_MAX,
                                 "Hosts=%.200s: -%s removes a name the list does not hold (the "
                                 "loopback names localhost, 127.0.0.1 and ::1, or one listed "
                                 "before it)",
                                 hosts, bare);
                        return -EINVAL;
                }
                if (!removal)
                        r = add_host(a, bare, strlen(bare));
                p += n;
        }
        return r;
}

int farm_access_new(const struct farm_access_config *c, farm_access **ret,
                    char err[static FARM_ACCESS_ERROR_MAX]) {
        char listen_host[HOST_NAME_LEN];
        farm_access *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        host_part(c->listen ?: "", listen_host);
        a->loopback = is_loopback(listen_host);
        enum farm_read_mode modes[3] = { c->api, c->dashboard, c->metrics };
        for (int i = 0; i < 3; i++)
                a->mode[i] = modes[i] != FARM_READ_AUTO ? modes[i]
                             : a->loopback              ? FARM_READ_OPEN
                                                        : FARM_READ_TOKEN;
        const char *hosts = c->hosts && *c->hosts ? c->hosts : "auto";
        int r = 0;
        err[0] = '\0';
        if (strcmp(hosts, "*") == 0)
                a->any_host = true;
        else if (strcmp(hosts, "auto") == 0)
                r = auto_hosts(a, listen_host);
        else
                r = list_hosts(a, hosts, err);
        if (r < 0) {
                if (r == -ENOMEM)
                        snprintf(err, FARM_ACCESS_ERROR_MAX, "out of memory");
                else if (!err[0])
                        snprintf(err, FARM_ACCESS_ERROR_MAX,
                                 "Hosts=%.200s: expected \"auto\", \"*\" or up to %d host "
                                 "names or addresses, separated by spaces or commas",
                                 hosts, FARM_HOSTS_MAX);
                farm_access_free(a);
                return r;
        }
        *ret = a;
        return 0;
}

int farm_access_link_host(const struct farm_access_config *c, char *buf, size_t size) {
        const char *hosts = c->hosts && *c->hosts ? c->hosts : "auto";
        if (strcmp(hosts, "auto") == 0 || strcmp(hosts, "*") == 0)
                return -ENOENT;
        char err[FARM_ACCESS_ERROR_MAX];
        farm_access *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        int r = list_hosts(a, hosts, err);
        for (unsigned i = 0; r >= 0 && i < a->nhosts; i++) {
                const char *h = a->hosts[i];
                if (strcasecmp(h, "localhost") == 0 || is_loopback(h))
                        continue;
                snprintf(buf, size, strchr(h, ':') ? "[%s]" : "%s", h);
                farm_access_free(a);
                return 0;
        }
        farm_access_free(a);
        return r < 0 ? r : -ENOENT;
}

void farm_access_free(farm_access *a) {
        if (!a)
                return;
        for (unsigned i = 0; i < a->nhosts; i++)
                free(a->hosts[i]);
        free(a);
}

void farm_access_describe(const farm_access *a, char *buf, size_t size) {
        int n = snprintf(buf, size, "API %s, dashboard %s, metrics %s, audit staff; hosts ",
                         mode_name(a->mode[0]), mode_name(a->mode[1]), mode_name(a->mode[2]));
        size_t o = n > 0 ? (size_t) n : 0;
        if (a->any_host && o < size)
                snprintf(buf + o, size - o, "any");
        for (unsigned i = 0; i < a->nhosts && o < size; i++)
                o += (size_t) snprintf(buf + o, size - o, "%s%s", i ? " " : "", a->hosts[i]);
}

/* Whether path is prefix or below it. */
static bool path_under(const char *path, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

enum farm_route_class farm_route_class_of(const char *path, const char *method) {
        const struct farm_route *route = farm_route_find(path);
        if (route)
                return farm_route_access(route, method);
        /* A path no route has is answered 404, after this check: by where it lies, so that
         * a reader without the access of its class learns nothing of which paths exist. */
        /* What names the staff or tells what they were told: the audit trail and the
         * notifications sent (with their recipients). */
        static const char *const staff_reads[] = { "/api/v1/audit", "/api/v1/notifications" };
        if (strcmp(path, "/api/v1/summaries") == 0)
                return FARM_CLASS_UPLOAD;
        for (size_t i = 0; i < ELEMENTSOF(staff_reads); i++)
                if (path_under(path, staff_reads[i]))
                        return FARM_CLASS_AUDIT;
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
                return FARM_CLASS_STAFF;
        if (strcmp(path, "/metrics") == 0)
                return FARM_CLASS_METRICS;
        if (strcmp(path, "/api") == 0 || strncmp(path, "/api/", 5) == 0)
                return FARM_CLASS_API;
        return FARM_CLASS_DASHBOARD;
}

static bool host_allowed(const farm_access *a, const char *host) {
        if (a->any_host || !host)
                return true; /* HTTP/1.0 without Host: not a browser's request */
        char h[HOST_NAME_LEN];
        host_part(host, h);
        size_t n = strlen(h);
        if (n > 0 && h[n - 1] == '.') /* "farm.lab." is "farm.lab" */
                h[--n] = '\0';
        for (unsigned i = 0; i < a->nhosts; i++)
                if (strcasecmp(a->hosts[i], h) == 0)
                        return true;
        return false;
}

static int deny(struct farm_denial *ret, unsigned status, const char *scheme, const char *msg) {
        *ret = (struct farm_denial){ .status = status, .www_authenticate = scheme, .message = msg };
        return 1;
}

int farm_access_check(const farm_access *a, farm_db *db, enum farm_route_class cls,
                      const char *host, const char *authorization, struct farm_denial *ret,
                      char ret_who[static FARM_READER_NAME_MAX + 8], char *err) {
        char name[MAX(FARM_READER_NAME_MAX, FARM_ADMIN_NAME_MAX) + 1];
        uint8_t hash[SHA256_DIGEST_SIZE];
        ret_who[0] = '\0';
        if (cls == FARM_CLASS_UPLOAD || cls == FARM_CLASS_STAFF)
                return 0;
        if (!host_allowed(a, host))
                return deny(ret, 421, NULL,
                            "Host: not a name this server answers to (its [Access] Hosts= "
                            "setting lists them)");
        enum farm_read_mode mode = cls == FARM_CLASS_AUDIT ? FARM_READ_STAFF : a->mode[cls];
        if (mode == FARM_READ_OPEN)
                return 0;
        /* A browser asks its user for the token when the page answers Basic. */
        const char *scheme = cls == FARM_CLASS_DASHBOARD ? "Basic realm=\"rtsoak farm\", "
                                                           "charset=\"UTF-8\""
                                                         : "Bearer realm=\"rtsoak farm\"";
        if (!authorization || farm_token_from_authorization(authorization, hash) < 0)
                return deny(ret, 401, scheme,
                            mode == FARM_READ_STAFF ? "a staff token is needed"
                                                    : "a read token (or a staff token) is needed");
        int r = farm_admin_authenticate(db, hash, name);
        if (r == 0) {
                snprintf(ret_who, FARM_READER_NAME_MAX + 8, "staff:%s", name);
                return 0;
        }
        if (r != -EACCES) {
                snprintf(err, FARM_ERROR_MAX, "cannot check the staff token");
                return r;
        }
        r = mode == FARM_READ_TOKEN ? farm_reader_authenticate(db, hash, name) : -EACCES;
        if (r == 0) {
                snprintf(ret_who, FARM_READER_NAME_MAX + 8, "reader:%s", name);
                return 0;
        }
        if (r != -EACCES) {
                snprintf(err, FARM_ERROR_MAX, "cannot check the read token");
                return r;
        }
        /* A valid read token where a staff token is needed is a 403: the client is known. */
        if (mode == FARM_READ_STAFF && farm_reader_authenticate(db, hash, name) == 0)
                return deny(ret, 403, NULL, "a staff token is needed: a read token is not one");
        return deny(ret, 401, scheme, "missing, invalid or revoked token");
}
