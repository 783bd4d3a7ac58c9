/* SPDX-License-Identifier: MIT */
/* Connection limits: a count per client address (IPv6 per /64, which one host gets at least),
 * a list of open connections with their deadline, and a thread that shuts down the sockets of
 * those past it.  Without a deadline a client that sends one byte of its head every 29 seconds
 * keeps a connection forever (the idle timeout starts again at every byte). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "server-connlimit.h"
#include "timeutil.h"

#define KEY_LEN 16
#define ADDRESS_TEXT_MAX 64
/* Refusals and cuts are logged at most once per window; the others are counted. */
#define LOG_WINDOW_NS (10 * (int64_t) NSEC_PER_SEC)
#define REAP_PERIOD_NS (250 * (int64_t) NSEC_PER_MSEC)

enum phase { PHASE_HEAD, PHASE_REQUEST };

struct farm_conn {
        struct farm_conn *prev, *next;
        int fd;
        uint8_t key[KEY_LEN];
        enum phase phase;
        int64_t deadline_ns; /* CLOCK_MONOTONIC */
        const char *cut;     /* why it was shut down, or NULL */
        bool counted;        /* in its address's count and the total */
        char address[ADDRESS_TEXT_MAX];
};

struct address_count {
        uint8_t key[KEY_LEN];
        unsigned n;
};

/* One kind of limit that bites, for the log. */
struct bite {
        const char *what; /* "refused", "closed" */
        const char *why;
        uint64_t pending; /* since the last line */
        int64_t last_log_ns;
        char last_address[ADDRESS_TEXT_MAX];
};

enum { BITE_ADDRESS, BITE_TOTAL, BITE_HEAD, BITE_REQUEST, BITE_MAX };

struct farm_connlimit {
        struct farm_connlimit_config cfg;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t reaper;
        bool stop;
        struct farm_conn *conns;
        unsigned total;
        struct address_count *counts; /* the addresses with connections, unordered */
        unsigned ncounts, acounts;
        struct bite bites[BITE_MAX];
        char why[BITE_MAX][160];
};

static int64_t mono_ns(void) {
        return now_ns(CLOCK_MONOTONIC);
}

/* The address as a key: IPv4 (also IPv4-mapped IPv6) in full, IPv6 as its /64. */
static void address_key(const struct sockaddr *sa, socklen_t len, uint8_t key[static KEY_LEN],
                        char text[static ADDRESS_TEXT_MAX]) {
        memset(key, 0, KEY_LEN);
        snprintf(text, ADDRESS_TEXT_MAX, "-");
        if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                memcpy(key + 12, &in->sin_addr, 4);
                inet_ntop(AF_INET, &in->sin_addr, text, ADDRESS_TEXT_MAX);
        } else if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
                        memcpy(key + 12, in6->sin6_addr.s6_addr + 12, 4);
                        inet_ntop(AF_INET, in6->sin6_addr.s6_addr + 12, text, ADDRESS_TEXT_MAX);
                } else {
                        memcpy(key, in6->sin6_addr.s6_addr, 8);
                        key[15] = 6; /* apart from every IPv4 address */
                        inet_ntop(AF_INET6, &in6->sin6_addr, text, ADDRESS_TEXT_MAX);
                }
        }
}

static struct address_count *count_of(farm_connlimit *l, const uint8_t key[static KEY_LEN]) {
        for (unsigned i = 0; i < l->ncounts; i++)
                if (memcmp(l->counts[i].key, key, KEY_LEN) == 0)
                        return &l->counts[i];
        return NULL;
}

/* Logs that a limit bit, or counts it when a line went out less than LOG_WINDOW_NS ago; the
 * reaper writes the count later.  Lock held. */
static void bite(farm_connlimit *l, int kind, const char *address, int64_t now) {
        struct bite *b = &l->bites[kind];
        snprintf(b->last_address, sizeof(b->last_address), "%s", address);
        if (b->last_log_ns && now - b->last_log_ns < LOG_WINDOW_NS) {
                b->pending++;
                return;
        }
        b->last_log_ns = now;
        log_warning("Connection limit: %s a connection from %s: %s", b->what, address, b->why);
}

/* The counts of the window that ended, in one line per kind.  Lock held. */
static void flush_bites(farm_connlimit *l, int64_t now) {
        for (int k = 0; k < BITE_MAX; k++) {
                struct bite *b = &l->bites[k];
                if (!b->pending || now - b->last_log_ns < LOG_WINDOW_NS)
                        continue;
                log_warning("Connection limit: %s %" PRIu64 " more connection(s) in the last "
                            "%llds (the last from %s): %s",
                            b->what, b->pending,
                            (long long) ((now - b->last_log_ns) / (int64_t) NSEC_PER_SEC),
                            b->last_address, b->why);
                b->pending = 0;
                b->last_log_ns = now;
        }
}

bool farm_connlimit_admit(farm_connlimit *l, const struct sockaddr *addr, socklen_t len) {
        uint8_t key[KEY_LEN];
        char text[ADDRESS_TEXT_MAX];
        address_key(addr, len, key, text);
        pthread_mutex_lock(&l->lock);
        const struct address_count *ac = count_of(l, key);
        int kind = -1;
        if (l->total >= l->cfg.max_total)
                kind = BITE_TOTAL;
        else if (ac && ac->n >= l->cfg.max_per_address)
                kind = BITE_ADDRESS;
        if (kind >= 0)
                bite(l, kind, text, mono_ns());
        pthread_mutex_unlock(&l->lock);
        return kind < 0;
}

struct farm_conn *farm_connlimit_opened(farm_connlimit *l, int fd, const struct sockaddr *addr,
                                        socklen_t len) {
        struct farm_conn *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->fd = fd;
        address_key(addr, len, c->key, c->address);
        pthread_mutex_lock(&l->lock);
        struct address_count *ac = count_of(l, c->key);
        if (!ac && l->ncounts == l->acounts) {
                unsigned na = l->acounts ? l->acounts * 2 : 64;
                struct address_count *v = realloc(l->counts, na * sizeof(*v));
                if (!v) {
                        pthread_mutex_unlock(&l->lock);
                        free(c);
                        return NULL;
                }
                l->counts = v;
                l->acounts = na;
        }
        if (!ac) {
                ac = &l->counts[l->ncounts++];
                memcpy(ac->key, c->key, KEY_LEN);
                ac->n = 0;
        }
        ac->n++;
        l->total++;
        c->counted = true;
        c->phase = PHASE_HEAD;
        c->deadline_ns = mono_ns() + (int64_t) l->cfg.head_timeout_ns;
        c->next = l->conns;
        if (l->conns)
                l->conns->prev = c;
        l->conns = c;
        pthread_mutex_unlock(&l->lock);
        return c;
}

/* Takes c out of the counts (once).  Lock held. */
static void uncount(farm_connlimit *l, struct farm_conn *c) {
        if (!c->counted)
                return;
        struct address_count *ac = count_of(l, c->key);
        if (ac && --ac->n == 0)
                *ac = l->counts[--l->ncounts];
        l->total--;
        c->counted = false;
}

void farm_connlimit_closed(farm_connlimit *l, struct farm_conn *c) {
        if (!c)
                return;
        pthread_mutex_lock(&l->lock);
        uncount(l, c);
        if (c->prev)
                c->prev->next = c->next;
        else
                l->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        pthread_mutex_unlock(&l->lock);
        free(c);
}

static void set_phase(farm_connlimit *l, struct farm_conn *c, enum phase p, uint64_t timeout_ns) {
        if (!c)
                return;
        pthread_mutex_lock(&l->lock);
        c->phase = p;
        c->deadline_ns = mono_ns() + (int64_t) timeout_ns;
        pthread_mutex_unlock(&l->lock);
}

void farm_connlimit_head(farm_connlimit *l, struct farm_conn *c) {
        set_phase(l, c, PHASE_REQUEST, l->cfg.request_timeout_ns);
}

void farm_connlimit_done(farm_connlimit *l, struct farm_conn *c) {
        if (!c)
                return;
        pthread_mutex_lock(&l->lock);
        uncount(l, c);
        pthread_mutex_unlock(&l->lock);
        set_phase(l, c, PHASE_HEAD, l->cfg.head_timeout_ns);
}

const char *farm_connlimit_cut(farm_connlimit *l, const struct farm_conn *c) {
        if (!c)
                return NULL;
        pthread_mutex_lock(&l->lock);
        const char *cut = c->cut;
        pthread_mutex_unlock(&l->lock);
        return cut;
}

/* Shuts down the sockets past their deadline: libmicrohttpd's thread sees the end of the
 * stream and closes the connection itself (the socket stays open until it says "closed",
 * which needs this lock, so the descriptor cannot have been reused). */
static void reap(farm_connlimit *l, int64_t now) {
        for (struct farm_conn *c = l->conns; c; c = c->next) {
                if (c->cut || now < c->deadline_ns)
                        continue;
                bool head = c->phase == PHASE_HEAD;
                c->cut = head ? "head-deadline" : "request-deadline";
                (void) shutdown(c->fd, SHUT_RDWR);
                bite(l, head ? BITE_HEAD : BITE_REQUEST, c->address, now);
        }
        flush_bites(l, now);
}

static void *reaper_main(void *arg) {
        farm_connlimit *l = arg;
        pthread_mutex_lock(&l->lock);
        while (!l->stop) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int64_t t = (int64_t) ts.tv_sec * (int64_t) NSEC_PER_SEC + ts.tv_nsec +
                            REAP_PERIOD_NS;
                ts.tv_sec = (time_t) (t / (int64_t) NSEC_PER_SEC);
                ts.tv_nsec = (long) (t % (int64_t) NSEC_PER_SEC);
                pthread_cond_timedwait(&l->cond, &l->lock, &ts);
                if (!l->stop)
                        reap(l, mono_ns());
        }
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

int farm_connlimit_new(const struct farm_connlimit_config *c, farm_connlimit **ret) {
        farm_connlimit *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->cfg = *c;
        l->bites[BITE_ADDRESS] = (struct bite){ .what = "refused" };
        l->bites[BITE_TOTAL] = (struct bite){ .what = "refused" };
        l->bites[BITE_HEAD] = (struct bite){ .what = "closed" };
        l->bites[BITE_REQUEST] = (struct bite){ .what = "closed" };
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        char(*why)[160] = l->why;
        snprintf(why[BITE_ADDRESS], sizeof(why[0]), "%u connections open from that address",
                 c->max_per_address);
        snprintf(why[BITE_TOTAL], sizeof(why[0]), "%u connections open in all", c->max_total);
        snprintf(why[BITE_HEAD], sizeof(why[0]), "no whole request head within %s",
                 format_timespan(a, c->head_timeout_ns));
        snprintf(why[BITE_REQUEST], sizeof(why[0]), "request not answered within %s",
                 format_timespan(b, c->request_timeout_ns));
        for (int k = 0; k < BITE_MAX; k++)
                l->bites[k].why = why[k];
        pthread_mutex_init(&l->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->cond, &ca);
        pthread_condattr_destroy(&ca);
        int r = -pthread_create(&l->reaper, NULL, reaper_main, l);
        if (r < 0) {
                pthread_cond_destroy(&l->cond);
                pthread_mutex_destroy(&l->lock);
                free(l);
                return r;
        }
        (void) pthread_setname_np(l->reaper, "deadlines");
        *ret = l;
        return 0;
}

void farm_connlimit_free(farm_connlimit *l) {
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        l->stop = true;
        pthread_cond_signal(&l->cond);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->reaper, NULL);
        for (struct farm_conn *c = l->conns, *n; c; c = n) {
                n = c->next;
                free(c);
        }
        free(l->counts);
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->lock);
        free(l);
}
