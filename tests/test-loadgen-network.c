/* SPDX-License-Identifier: MIT */
/* The network load generator, run as the real rtsoak-load on loopback: what was sent
 * arrives, --rate and --size are honoured, a partner works, bad options are refused. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

static void test_tcp_arrives(void **state) {
        json_t *j = tu_load_json("1500ms",
                                 (const char *const[]){ "network", "--proto", "tcp", NULL });
        uint64_t tx = tu_load_count(j, "tx"), rx = tu_load_count(j, "rx");
        uint64_t txp = tu_load_count(j, "tx_packets"), rxp = tu_load_count(j, "rx_packets");
        printf("# TCP: %" PRIu64 " bytes sent, %" PRIu64 " received, %" PRIu64 "/%" PRIu64
               " messages\n",
               tx, rx, txp, rxp);
        assert_true(rx > 0 && rxp > 0);
        /* The sink drains its connections after the stop: everything sent arrives.  At most
         * what was still in flight when the drain time ran out may be missing. */
        assert_true(rx <= tx);
        assert_true(tx - rx <= 8u << 20);
        assert_true(tx - rx <= tx / 100);
        json_decref(j);
}

static void test_udp_arrives(void **state) {
        json_t *j = tu_load_json("1s", (const char *const[]){ "network", "--proto", "udp", NULL });
        uint64_t tx = tu_load_count(j, "tx_packets"), rx = tu_load_count(j, "rx_packets");
        printf("# UDP: %" PRIu64 " datagrams sent, %" PRIu64 " received\n", tx, rx);
        assert_true(rx > 0);
        assert_true(rx <= tx);
        /* Datagrams arrive whole. */
        assert_int_equal(tu_load_count(j, "rx"), rx * 1024);
        json_decref(j);
}

static void test_rate_honoured(void **state) {
        /* 50 Mbit/s in all, half of it TCP, half UDP, over 2 s. */
        json_t *j = tu_load_json("2s", (const char *const[]){ "network", "--rate", "50Mbit",
                                                              "--streams", "2", NULL });
        double mbit = (double) tu_load_count(j, "tx") * 8 / 2.0 / 1e6;
        double rx = (double) tu_load_count(j, "rx") * 8 / 2.0 / 1e6;
        printf("# requested 50 Mbit/s, sent %.2f, received %.2f\n", mbit, rx);
        assert_true(mbit >= 45 && mbit <= 55);
        /* At this rate loopback loses nothing worth mentioning. */
        assert_true(rx >= 45 && rx <= mbit);
        json_decref(j);
}

static void test_flat_out_is_faster(void **state) {
        json_t *j = tu_load_json(
                "1s", (const char *const[]){ "network", "--proto", "tcp", "--size", "16K", NULL });
        double mbit = tu_load_rate(j, "rx");
        printf("# flat out: %.0f Mbit/s received\n", mbit);
        /* Even a busy two-CPU VM moves far more than 50 Mbit/s over loopback. */
        assert_true(mbit > 500);
        json_decref(j);
}

static void test_size_honoured(void **state) {
        json_t *j = tu_load_json("1s", (const char *const[]){ "network", "--proto", "udp", "--size",
                                                              "1000", "--rate", "20Mbit", NULL });
        uint64_t txp = tu_load_count(j, "tx_packets"), rxp = tu_load_count(j, "rx_packets");
        assert_true(txp > 0 && rxp > 0);
        assert_int_equal(tu_load_count(j, "tx"), txp * 1000);
        assert_int_equal(tu_load_count(j, "rx"), rxp * 1000);
        json_decref(j);

        /* TCP: the byte stream is counted in messages of --size bytes. */
        j = tu_load_json("1s", (const char *const[]){ "network", "--proto", "tcp", "--size", "3000",
                                                      "--streams", "3", NULL });
        double per_tx = (double) tu_load_count(j, "tx") / (double) tu_load_count(j, "tx_packets");
        double per_rx = (double) tu_load_count(j, "rx") / (double) tu_load_count(j, "rx_packets");
        printf("# TCP --size 3000: %.2f bytes per message sent, %.2f received\n", per_tx, per_rx);
        assert_true(per_tx >= 3000 && per_tx < 3001);
        assert_true(per_rx >= 3000 && per_rx < 3001);
        json_decref(j);
}

/* A port nobody uses right now (the kernel's choice, released again). */
static unsigned free_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &a, &len), 0);
        close(fd);
        return ntohs(a.sin_port);
}

static void test_peer_and_listen(void **state) {
        char *dir = tu_mkdtemp("network"), out[256], bind_addr[64];
        snprintf(out, sizeof(out), "%s/listen.json", dir);
        snprintf(bind_addr, sizeof(bind_addr), "127.0.0.1:%u", free_port());
        char *largv[] = { (char *) tu_bin("RTSOAK_LOAD"),
                          "--json",
                          "network",
                          "--listen",
                          "--bind",
                          bind_addr,
                          NULL };
        pid_t pid = tu_spawn(largv, out, NULL);
        tu_sleep_ms(300);

        json_t *j = tu_load_json("1s", (const char *const[]){ "network", "--proto", "tcp", "--peer",
                                                              bind_addr, NULL });
        uint64_t sent = tu_load_count(j, "tx");
        /* Traffic goes to the partner: no local sink, nothing received here. */
        assert_int_equal(tu_load_count(j, "rx"), 0);
        json_decref(j);

        tu_sleep_ms(200);
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        char *text = tu_read_file(out);
        j = tu_json(text);
        uint64_t got = tu_load_count(j, "rx");
        printf("# partner received %" PRIu64 " of %" PRIu64 " bytes\n", got, sent);
        assert_true(sent > 0);
        assert_int_equal(got, sent);
        assert_int_equal(tu_load_count(j, "tx"), 0);
        json_decref(j);
        free(text);
        tu_rmdir(dir);
}

static void test_bad_options(void **state) {
        tu_load_refused((const char *const[]){ "network", "--size", "0", NULL },
                        "network: --size=0: out of range");
        tu_load_refused((const char *const[]){ "network", "--size", "65508", NULL },
                        "network: --size=65508: more than 65507 bytes, the largest UDP datagram");
        tu_load_refused((const char *const[]){ "network", "--proto", "tcp", "--size", "65K", NULL },
                        "network: --size=65K: out of range");
        tu_load_refused((const char *const[]){ "network", "--peer", "foo", NULL },
                        "network: --peer=foo: not HOST:PORT");
        tu_load_refused((const char *const[]){ "network", "--peer", "127.0.0.1", NULL },
                        "network: --peer=127.0.0.1: not HOST:PORT");
        tu_load_refused((const char *const[]){ "network", "--peer", "127.0.0.1:0", NULL },
                        "network: --peer=127.0.0.1:0: port must be between 1 and 65535");
        tu_load_refused((const char *const[]){ "network", "--peer", "localhost:80", NULL },
                        "network: --peer=localhost:80: not a numeric IPv4 or IPv6 address");
        tu_load_refused((const char *const[]){ "network", "--bind", "127.0.0.1:99999", NULL },
                        "network: --bind=127.0.0.1:99999: port must be between 0 and 65535");
        tu_load_refused(
                (const char *const[]){ "network", "--peer", "127.0.0.1:9", "--listen", NULL },
                "network: --listen:");
        tu_load_refused((const char *const[]){ "network", "--proto", "sctp", NULL },
                        "network: --proto=sctp: must be one of tcp, udp, both");
        tu_load_refused((const char *const[]){ "network", "--streams", "0", NULL },
                        "network: --streams=0: out of range");
}

static void test_stops_promptly(void **state) {
        char *argv[] = { (char *) tu_bin("RTSOAK_LOAD"), "network", "--streams", "2", NULL };
        pid_t pid = tu_spawn(argv, NULL, NULL);
        tu_sleep_ms(500);
        tu_load_stop_ms(pid);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tcp_arrives),   cmocka_unit_test(test_udp_arrives),
                cmocka_unit_test(test_rate_honoured), cmocka_unit_test(test_flat_out_is_faster),
                cmocka_unit_test(test_size_honoured), cmocka_unit_test(test_peer_and_listen),
                cmocka_unit_test(test_bad_options),   cmocka_unit_test(test_stops_promptly),
        };
        return RUN_TESTS(tests);
}
