/* SPDX-License-Identifier: MIT */
/* The network load: TCP and UDP streams from sender threads into a sink of our own (on
 * loopback by default) or to a partner elsewhere, counting what was sent and what arrived. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

enum { NET_METRIC_TX, NET_METRIC_RX, NET_METRIC_TX_PACKETS, NET_METRIC_RX_PACKETS };
enum { PROTO_TCP, PROTO_UDP, PROTO_BOTH };

/* The largest UDP payload over IPv4: 65535 - 20 (IP header) - 8 (UDP header). */
#define UDP_SIZE_MAX 65507
/* How long a blocked socket call may keep a thread from noticing a stop request. */
#define IO_TIMEOUT_MS 100
/* After a stop request, sinks keep reading what is still queued for this long at most. */
#define DRAIN_NS (200 * (int64_t) NSEC_PER_MSEC)
#define TCP_RECV_BUF (256 * 1024)
#define UDP_BATCH 32
#define MAX_CONNECTIONS 1024

struct network_opts {
        unsigned proto;
        uint64_t size;
        uint64_t rate; /* bits/s over all streams; 0: flat out */
        uint64_t streams;
        char *peer;
        char *bind;
        bool listen;
};

static const char *const protos[] = { "tcp", "udp", "both", NULL };

static const struct loadgen_opt network_opts[] = {
        { "proto", LOADGEN_OPT_ENUM, offsetof(struct network_opts, proto), 0, 0, "both", protos,
          "tcp, udp or both (each with --streams streams)" },
        { "size", LOADGEN_OPT_SIZE, offsetof(struct network_opts, size), 1, 64 * 1024, "1K", NULL,
          "bytes per message (one send(), one datagram); UDP at most 65507" },
        { "rate", LOADGEN_OPT_BITRATE, offsetof(struct network_opts, rate), 0,
          UINT64_C(400) * 1000 * 1000 * 1000, "0", NULL,
          "bits/s sent in all, split evenly over protocols and streams; 0: flat out" },
        { "streams", LOADGEN_OPT_UINT, offsetof(struct network_opts, streams), 1, 64, "1", NULL,
          "parallel streams per protocol" },
        { "peer", LOADGEN_OPT_STRING, offsetof(struct network_opts, peer), 0, 0, NULL, NULL,
          "HOST:PORT of a partner (rtsoak-load network --listen there) instead of a local sink; "
          "TCP connects to PORT, UDP datagrams go to PORT" },
        { "bind", LOADGEN_OPT_STRING, offsetof(struct network_opts, bind), 0, 0, NULL, NULL,
          "ADDRESS[:PORT] of the local sink (default 127.0.0.1:0; port 0: any free port)" },
        { "listen", LOADGEN_OPT_BOOL, offsetof(struct network_opts, listen), 0, 0, "no", NULL,
          "only run the sink on --bind, as the partner of another rtsoak-load's --peer" },
};

static const struct loadgen_metric network_metrics[] = {
        /* Bytes per second of wall time, shown in Mbit/s. */
        [NET_METRIC_TX] = { "tx", "Mbit/s", "bytes", 8e-6 },
        [NET_METRIC_RX] = { "rx", "Mbit/s", "bytes", 8e-6 },
        [NET_METRIC_TX_PACKETS] = { "tx_packets", "packets/s", "messages", 1.0 },
        [NET_METRIC_RX_PACKETS] = { "rx_packets", "packets/s", "messages", 1.0 },
};

/* ---- addresses ---- */

/* "1.2.3.4:80", "[::1]:80", and without need_port also "1.2.3.4", "::1" (port 0).  Only
 * numeric addresses: a load generator should not depend on name resolution. */
static int parse_address(const char *s, bool need_port, struct sockaddr_storage *ret,
                         socklen_t *ret_len, const char **reason) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *port = NULL;
        size_t hlen;

        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close) {
                        *reason = "unbalanced '['";
                        return -EINVAL;
                }
                hlen = (size_t) (close - s - 1);
                s++;
                if (close[1] == ':')
                        port = close + 2;
                else if (close[1] != 0) {
                        *reason = need_port ? "not HOST:PORT" : "not ADDRESS[:PORT]";
                        return -EINVAL;
                }
        } else {
                const char *colon = strchr(s, ':');
                if (colon && strchr(colon + 1, ':'))
                        colon = NULL; /* a bare IPv6 address */
                hlen = colon ? (size_t) (colon - s) : strlen(s);
                port = colon ? colon + 1 : NULL;
        }
        if ((need_port && !port) || hlen == 0) {
                *reason = need_port ? "not HOST:PORT" : "not ADDRESS[:PORT]";
                return -EINVAL;
        }
        if (hlen >= sizeof(host)) {
                *reason = "not a numeric IPv4 or IPv6 address";
                return -EINVAL;
        }
        memcpy(host, s, hlen);
        host[hlen] = 0;

        unsigned long p = 0;
        if (port) {
                char *end;
                errno = 0;
                p = strtoul(port, &end, 10);
                if (*port < '0' || *port > '9' || *end || errno || p > 65535 ||
                    (need_port && p == 0)) {
                        *reason = need_port ? "port must be between 1 and 65535"
                                            : "port must be between 0 and 65535";
                        return -EINVAL;
                }
        }

        memset(ret, 0, sizeof(*ret));
        struct sockaddr_in *in4 = (struct sockaddr_in *) ret;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ret;
        if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
                in4->sin_family = AF_INET;
                in4->sin_port = htons((uint16_t) p);
                *ret_len = sizeof(*in4);
        } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons((uint16_t) p);
                *ret_len = sizeof(*in6);
        } else {
                *reason = "not a numeric IPv4 or IPv6 address";
                return -EINVAL;
        }
        return 0;
}

static bool given(const char *s) {
        return s && *s;
}

static const char *sink_address(const struct network_opts *o) {
        return given(o->bind) ? o->bind : "127.0.0.1:0";
}

static bool uses(const struct network_opts *o, unsigned proto) {
        return o->proto == proto || o->proto == PROTO_BOTH;
}

static int network_check(const void *opts, char *const *args, char err[static LOADGEN_ERROR_MAX]) {
        const struct network_opts *o = opts;
        struct sockaddr_storage sa;
        socklen_t len;
        const char *reason;

        if (uses(o, PROTO_UDP) && o->size > UDP_SIZE_MAX) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "network: --size=%" PRIu64 ": more than %d bytes, the largest UDP "
                         "datagram (use --proto=tcp for larger messages)",
                         o->size, UDP_SIZE_MAX);
                return -EINVAL;
        }
        if (given(o->peer) && parse_address(o->peer, true, &sa, &len, &reason) < 0) {
                snprintf(err, LOADGEN_ERROR_MAX, "network: --peer=%s: %s", o->peer, reason);
                return -EINVAL;
        }
        if (given(o->bind) && parse_address(o->bind, false, &sa, &len, &reason) < 0) {
                snprintf(err, LOADGEN_ERROR_MAX, "network: --bind=%s: %s", o->bind, reason);
                return -EINVAL;
        }
        if (given(o->peer) && given(o->bind)) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "network: --bind=%s: there is no local sink with --peer", o->bind);
                return -EINVAL;
        }
        if (given(o->peer) && o->listen) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "network: --listen: the partner side takes --bind, not --peer");
                return -EINVAL;
        }
        return 0;
}

static int make_socket(int family, int type) {
        int fd = socket(family, type | SOCK_CLOEXEC, 0);
        return fd < 0 ? negative_errno() : fd;
}

static void set_timeouts(int fd) {
        struct timeval tv = { 0, IO_TIMEOUT_MS * 1000 };
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A bound sink socket: TCP listening, UDP with a receive buffer big enough to ride out a
 * scheduling hiccup of the sink threads. */
static int open_sink(const struct sockaddr_storage *sa, socklen_t len, int type) {
        int one = 1, fd = make_socket(sa->ss_family, type);
        if (fd < 0)
                return fd;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (type == SOCK_DGRAM) {
                int bytes = 4 << 20;
                if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0)
                        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
        }
        if (bind(fd, (const struct sockaddr *) sa, len) < 0 ||
            (type == SOCK_STREAM && listen(fd, 128) < 0)) {
                int r = negative_errno();
                close(fd);
                return r;
        }
        set_timeouts(fd);
        return fd;
}

static int network_probe(const void *opts, char *const *args, char why[static LOADGEN_ERROR_MAX]) {
        const struct network_opts *o = opts;
        struct sockaddr_storage sa;
        socklen_t len;
        const char *reason;

        if (given(o->peer))
                return 0;
        if (parse_address(sink_address(o), false, &sa, &len, &reason) < 0) {
                snprintf(why, LOADGEN_ERROR_MAX, "--bind=%s: %s", sink_address(o), reason);
                return -EINVAL;
        }
        /* Whether the sink can be bound at all (address present, port free, allowed). */
        for (unsigned p = PROTO_TCP; p <= PROTO_UDP; p++) {
                if (!uses(o, p))
                        continue;
                int fd = open_sink(&sa, len, p == PROTO_TCP ? SOCK_STREAM : SOCK_DGRAM);
                if (fd < 0) {
                        snprintf(why, LOADGEN_ERROR_MAX, "cannot bind the %s sink to %s: %s",
                                 p == PROTO_TCP ? "TCP" : "UDP", sink_address(o), strerror(-fd));
                        return fd;
                }
                close(fd);
        }
        return 0;
}

/* ---- counting ---- */

/* Counts kept per thread and published every few milliseconds: one shared atomic add per
 * message would make senders and sinks fight over the counters' cache line. */
struct tally {
        struct loadgen_ctx *ctx;
        unsigned bytes_metric, packets_metric;
        uint64_t bytes, packets;
        int64_t flushed_ns;
};

static void tally_flush(struct tally *t) {
        if (t->bytes)
                loadgen_add(t->ctx, t->bytes_metric, t->bytes);
        if (t->packets)
                loadgen_add(t->ctx, t->packets_metric, t->packets);
        t->bytes = t->packets = 0;
        t->flushed_ns = now_ns(CLOCK_MONOTONIC);
}

static void tally_add(struct tally *t, uint64_t bytes, uint64_t packets) {
        t->bytes += bytes;
        t->packets += packets;
        if (t->packets >= 256 || now_ns(CLOCK_MONOTONIC) - t->flushed_ns > 20 * 1000 * 1000)
                tally_flush(t);
}

/* ---- the generator's state ---- */

struct network;

struct sender {
        struct network *net;
        pthread_t thread;
        unsigned proto;
        uint64_t rate_bytes; /* bytes/s for this stream; 0: flat out */
};

struct connection {
        struct network *net;
        pthread_t thread;
        int fd;
        atomic_bool done; /* its thread has finished: join it, close fd */
};

struct network {
        struct loadgen_ctx *ctx;
        const struct network_opts *o;
        struct sockaddr_storage tcp_addr, udp_addr; /* where senders send to */
        socklen_t tcp_len, udp_len;
        int listen_fd, udp_fd;
        atomic_bool senders_done;
};

/* Sinks read on after a stop request until what was sent has arrived or DRAIN_NS passed:
 * the TCP byte counts then match exactly. */
static bool sink_done(struct network *net, int64_t *stop_seen_ns) {
        if (!loadgen_stopping(net->ctx))
                return false;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (*stop_seen_ns == 0)
                *stop_seen_ns = now;
        return now - *stop_seen_ns > DRAIN_NS;
}

static void *tcp_sink_main(void *arg) {
        struct connection *c = arg;
        struct network *net = c->net;
        struct tally t = { net->ctx, NET_METRIC_RX, NET_METRIC_RX_PACKETS, 0, 0, 0 };
        uint64_t total = 0, size = net->o->size;
        int64_t stop_seen = 0;
        char *buf = malloc(TCP_RECV_BUF);

        if (!buf) {
                atomic_store(&c->done, true);
                return NULL;
        }
        while (!sink_done(net, &stop_seen)) {
                ssize_t n = recv(c->fd, buf, TCP_RECV_BUF, 0);
                if (n == 0)
                        break;
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                continue;
                        break; /* reset by the peer: the sender reconnects */
                }
                /* Messages are counted as they complete in the byte stream. */
                uint64_t before = total / size;
                total += (uint64_t) n;
                tally_add(&t, (uint64_t) n, total / size - before);
        }
        tally_flush(&t);
        free(buf);
        atomic_store(&c->done, true);
        return NULL;
}

static void *udp_sink_main(void *arg) {
        struct network *net = arg;
        struct tally t = { net->ctx, NET_METRIC_RX, NET_METRIC_RX_PACKETS, 0, 0, 0 };
        /* As a partner, datagrams may be larger than our own --size. */
        size_t slot = net->o->listen ? 65536 : net->o->size;
        struct mmsghdr msgs[UDP_BATCH];
        struct iovec iov[UDP_BATCH];
        int64_t stop_seen = 0;
        char *buf = malloc(slot * UDP_BATCH);

        if (!buf)
                return NULL;
        for (;;) {
                bool stopping = loadgen_stopping(net->ctx);
                if (stopping && sink_done(net, &stop_seen))
                        break;
                memset(msgs, 0, sizeof(msgs));
                for (int i = 0; i < UDP_BATCH; i++) {
                        iov[i] = (struct iovec){ buf + (size_t) i * slot, slot };
                        msgs[i].msg_hdr.msg_iov = &iov[i];
                        msgs[i].msg_hdr.msg_iovlen = 1;
                }
                /* Once the senders are gone, only what is already queued. */
                bool drain = stopping && atomic_load(&net->senders_done);
                int n = recvmmsg(net->udp_fd, msgs, UDP_BATCH,
                                 drain ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
                if (n <= 0) {
                        if (drain && (n == 0 || errno == EAGAIN))
                                break;
                        continue;
                }
                uint64_t bytes = 0;
                for (int i = 0; i < n; i++)
                        bytes += msgs[i].msg_len;
                tally_add(&t, bytes, (uint64_t) n);
        }
        tally_flush(&t);
        free(buf);
        return NULL;
}

/* Connects with a bounded wait, so that a stop request is noticed. */
static int tcp_connect(struct network *net) {
        int fd = make_socket(net->tcp_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK);
        if (fd < 0)
                return fd;
        if (connect(fd, (struct sockaddr *) &net->tcp_addr, net->tcp_len) < 0) {
                if (errno != EINPROGRESS) {
                        int r = negative_errno();
                        close(fd);
                        return r;
                }
                for (;;) {
                        struct pollfd p = { fd, POLLOUT, 0 };
                        int n = poll(&p, 1, IO_TIMEOUT_MS);
                        if (loadgen_stopping(net->ctx)) {
                                close(fd);
                                return -ECANCELED;
                        }
                        if (n > 0)
                                break;
                }
                int e = 0;
                socklen_t elen = sizeof(e);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0 || e != 0) {
                        close(fd);
                        return e ? -e : -EIO;
                }
        }
        int flags = fcntl(fd, F_GETFL);
        (void) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        set_timeouts(fd);
        return fd;
}

static char *message_buffer(size_t size) {
        char *buf = malloc(size);
        /* Not all zeroes, in case something on the way compresses. */
        for (size_t i = 0; buf && i < size; i++)
                buf[i] = (char) (i * 131 + 7);
        return buf;
}

static void tcp_send_loop(struct sender *s, int fd, const char *buf, struct loadgen_pacer *p,
                          struct tally *t) {
        struct network *net = s->net;
        size_t size = net->o->size;

        while (loadgen_pace(net->ctx, p, size)) {
                size_t off = 0;
                while (off < size) {
                        ssize_t n = send(fd, buf + off, size - off, MSG_NOSIGNAL);
                        if (n > 0) {
                                off += (size_t) n;
                                tally_add(t, (uint64_t) n, 0);
                        } else if (errno == EAGAIN || errno == EINTR) {
                                if (loadgen_stopping(net->ctx))
                                        return;
                        } else {
                                loadgen_event(net->ctx, "connection_lost", -1,
                                              "TCP stream to the sink: %s; reconnecting",
                                              strerror(errno));
                                return;
                        }
                }
                tally_add(t, 0, 1);
        }
}

static void *tcp_sender_main(void *arg) {
        struct sender *s = arg;
        struct network *net = s->net;
        struct tally t = { net->ctx, NET_METRIC_TX, NET_METRIC_TX_PACKETS, 0, 0, 0 };
        struct loadgen_pacer p;
        char *buf = message_buffer(net->o->size);
        bool reported = false;

        if (!buf)
                return NULL;
        loadgen_pacer_init(&p, s->rate_bytes);
        while (!loadgen_stopping(net->ctx)) {
                int fd = tcp_connect(net);
                if (fd == -ECANCELED)
                        break;
                if (fd < 0) {
                        /* A partner that is not up yet: say so once, keep trying. */
                        if (!reported)
                                loadgen_event(net->ctx, "connect_failed", -1,
                                              "TCP connect to %s: %s; retrying",
                                              given(net->o->peer) ? net->o->peer : "the sink",
                                              strerror(-fd));
                        reported = true;
                        loadgen_sleep_until(net->ctx, now_ns(CLOCK_MONOTONIC) +
                                                              500 * (int64_t) NSEC_PER_MSEC);
                        continue;
                }
                reported = false;
                int64_t connected = now_ns(CLOCK_MONOTONIC);
                tcp_send_loop(s, fd, buf, &p, &t);
                close(fd);
                /* A sink that closes at once (full, or going away) is not hammered. */
                if (now_ns(CLOCK_MONOTONIC) - connected < 100 * (int64_t) NSEC_PER_MSEC)
                        loadgen_sleep_until(net->ctx, now_ns(CLOCK_MONOTONIC) +
                                                              100 * (int64_t) NSEC_PER_MSEC);
        }
        tally_flush(&t);
        free(buf);
        return NULL;
}

static void *udp_sender_main(void *arg) {
        struct sender *s = arg;
        struct network *net = s->net;
        struct tally t = { net->ctx, NET_METRIC_TX, NET_METRIC_TX_PACKETS, 0, 0, 0 };
        struct loadgen_pacer p;
        size_t size = net->o->size;
        char *buf = message_buffer(size);
        int fd = make_socket(net->udp_addr.ss_family, SOCK_DGRAM);

        if (!buf || fd < 0) {
                if (fd < 0)
                        loadgen_event(net->ctx, "socket_failed", -1, "UDP socket: %s",
                                      strerror(-fd));
                free(buf);
                if (fd >= 0)
                        close(fd);
                return NULL;
        }
        set_timeouts(fd);
        if (connect(fd, (struct sockaddr *) &net->udp_addr, net->udp_len) < 0)
                loadgen_event(net->ctx, "connect_failed", -1, "UDP connect: %s", strerror(errno));
        loadgen_pacer_init(&p, s->rate_bytes);
        while (loadgen_pace(net->ctx, &p, size)) {
                ssize_t n = send(fd, buf, size, MSG_NOSIGNAL);
                if (n > 0)
                        tally_add(&t, (uint64_t) n, 1);
                else if (errno == ECONNREFUSED)
                        /* Nobody listens (yet): an ICMP error came back.  Do not spin. */
                        loadgen_sleep_until(net->ctx,
                                            now_ns(CLOCK_MONOTONIC) + 10 * (int64_t) NSEC_PER_MSEC);
                /* EAGAIN (send buffer full for 100 ms), ENOBUFS: datagrams may be lost. */
        }
        tally_flush(&t);
        close(fd);
        free(buf);
        return NULL;
}

/* ---- running ---- */

static int start_sinks(struct network *net, pthread_t *udp_threads, size_t *n_udp) {
        const struct network_opts *o = net->o;
        struct sockaddr_storage sa;
        socklen_t len;
        const char *reason;
        int r;

        if (parse_address(sink_address(o), false, &sa, &len, &reason) < 0)
                return log_error_errno(EINVAL, "network: --bind=%s: %s", sink_address(o), reason);
        if (uses(o, PROTO_TCP)) {
                net->listen_fd = open_sink(&sa, len, SOCK_STREAM);
                if (net->listen_fd < 0)
                        return log_error_errno(net->listen_fd,
                                               "network: cannot start the TCP sink on %s: %m",
                                               sink_address(o));
                net->tcp_len = sizeof(net->tcp_addr);
                getsockname(net->listen_fd, (struct sockaddr *) &net->tcp_addr, &net->tcp_len);
        }
        if (uses(o, PROTO_UDP)) {
                net->udp_fd = open_sink(&sa, len, SOCK_DGRAM);
                if (net->udp_fd < 0)
                        return log_error_errno(net->udp_fd,
                                               "network: cannot start the UDP sink on %s: %m",
                                               sink_address(o));
                net->udp_len = sizeof(net->udp_addr);
                getsockname(net->udp_fd, (struct sockaddr *) &net->udp_addr, &net->udp_len);
                /* All sink threads read the one socket: the kernel hands each datagram to
                 * one of them, whichever streams it came from. */
                for (size_t i = 0; i < o->streams; i++) {
                        r = -pthread_create(&udp_threads[i], NULL, udp_sink_main, net);
                        if (r < 0)
                                return log_error_errno(r, "network: cannot start a sink: %m");
                        (*n_udp)++;
                }
        }
        if (o->listen) {
                char tcp[64] = "", udp[64] = "";
                if (net->listen_fd >= 0)
                        snprintf(tcp, sizeof(tcp), " TCP port %u",
                                 ntohs(((struct sockaddr_in *) &net->tcp_addr)->sin_port));
                if (net->udp_fd >= 0)
                        snprintf(udp, sizeof(udp), " UDP port %u",
                                 ntohs(((struct sockaddr_in *) &net->udp_addr)->sin_port));
                loadgen_event(net->ctx, "listening", -1, "sink on %s:%s%s", sink_address(o), tcp,
                              udp);
        }
        return 0;
}

/* The run thread accepts connections for the TCP sink, one thread per connection. */
static void accept_loop(struct network *net, struct connection **conns, size_t *n_conns) {
        while (!loadgen_stopping(net->ctx)) {
                /* Connections that ended (a partner that restarts reconnects): join them, so
                 * that a sink running for months holds only the live ones. */
                for (size_t i = 0; i < *n_conns;) {
                        if (!atomic_load(&conns[i]->done)) {
                                i++;
                                continue;
                        }
                        pthread_join(conns[i]->thread, NULL);
                        close(conns[i]->fd);
                        free(conns[i]);
                        conns[i] = conns[--*n_conns];
                }
                struct pollfd p = { net->listen_fd, POLLIN, 0 };
                if (poll(&p, 1, IO_TIMEOUT_MS) <= 0)
                        continue;
                int fd = accept4(net->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        /* Out of descriptors, say: the socket stays readable, do not spin. */
                        loadgen_sleep_until(net->ctx,
                                            now_ns(CLOCK_MONOTONIC) +
                                                    IO_TIMEOUT_MS * (int64_t) NSEC_PER_MSEC);
                        continue;
                }
                struct connection *c = malloc(sizeof(*c));
                if (!c || *n_conns >= MAX_CONNECTIONS) {
                        free(c);
                        close(fd);
                        continue;
                }
                *c = (struct connection){ .net = net, .fd = fd };
                set_timeouts(fd);
                if (pthread_create(&c->thread, NULL, tcp_sink_main, c) != 0) {
                        free(c);
                        close(fd);
                        continue;
                }
                conns[(*n_conns)++] = c;
        }
}

static int network_run(struct loadgen_ctx *ctx) {
        const struct network_opts *o = ctx->opts;
        struct network net = { .ctx = ctx, .o = o, .listen_fd = -1, .udp_fd = -1 };
        size_t nprotos = o->proto == PROTO_BOTH ? 2 : 1, n_senders = 0, n_udp = 0, n_conns = 0;
        pthread_t *udp_threads = calloc(o->streams, sizeof(pthread_t));
        struct sender *senders = calloc(2 * o->streams, sizeof(struct sender));
        struct connection **conns = calloc(MAX_CONNECTIONS, sizeof(struct connection *));
        int r = 0;

        if (!udp_threads || !senders || !conns) {
                r = log_oom();
                goto out;
        }
        if (given(o->peer)) {
                const char *reason;
                r = parse_address(o->peer, true, &net.tcp_addr, &net.tcp_len, &reason);
                if (r < 0) {
                        log_error("network: --peer=%s: %s", o->peer, reason);
                        goto out;
                }
                net.udp_addr = net.tcp_addr;
                net.udp_len = net.tcp_len;
        } else {
                r = start_sinks(&net, udp_threads, &n_udp);
                if (r < 0)
                        goto stop;
        }

        if (!o->listen) {
                /* The rate is shared evenly by the protocols, then by each one's streams. */
                uint64_t per_stream = o->rate / 8 / nprotos / o->streams;
                if (o->rate && per_stream == 0)
                        per_stream = 1;
                for (unsigned proto = PROTO_TCP; proto <= PROTO_UDP; proto++) {
                        if (!uses(o, proto))
                                continue;
                        for (size_t i = 0; i < o->streams; i++) {
                                struct sender *s = &senders[n_senders];
                                *s = (struct sender){ .net = &net,
                                                      .proto = proto,
                                                      .rate_bytes = per_stream };
                                r = -pthread_create(
                                        &s->thread, NULL,
                                        proto == PROTO_TCP ? tcp_sender_main : udp_sender_main, s);
                                if (r < 0) {
                                        log_error_errno(r, "network: cannot start a sender: %m");
                                        goto stop;
                                }
                                n_senders++;
                        }
                }
        }

        if (net.listen_fd >= 0)
                accept_loop(&net, conns, &n_conns);
        else
                while (loadgen_sleep_until(ctx, INT64_MAX))
                        ;
stop:
        atomic_store(&ctx->stop, true);
        for (size_t i = 0; i < n_senders; i++)
                pthread_join(senders[i].thread, NULL);
        atomic_store(&net.senders_done, true);
        for (size_t i = 0; i < n_conns; i++) {
                pthread_join(conns[i]->thread, NULL);
                close(conns[i]->fd);
                free(conns[i]);
        }
        for (size_t i = 0; i < n_udp; i++)
                pthread_join(udp_threads[i], NULL);
out:
        if (net.listen_fd >= 0)
                close(net.listen_fd);
        if (net.udp_fd >= 0)
                close(net.udp_fd);
        free(udp_threads);
        free(senders);
        free(conns);
        return r;
}

const struct loadgen_info loadgen_network_info = {
        .name = "network",
        .summary = "TCP and UDP streams into a sink of its own on loopback, or to a partner",
        .opts = network_opts,
        .nopts = ELEMENTSOF(network_opts),
        .opts_size = sizeof(struct network_opts),
        .metrics = network_metrics,
        .nmetrics = ELEMENTSOF(network_metrics),
        .check = network_check,
        .probe = network_probe,
        .run = network_run,
};
