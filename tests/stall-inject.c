/* SPDX-License-Identifier: MIT */
/* Test helper that injects known latency: a SCHED_FIFO thread pinned to one CPU spins for a
 * fixed time, a fixed number of times, and prints each stall's window so that a test can
 * match what rtsoakd recorded against what really happened.  The windows are printed at the
 * end, at SCHED_OTHER: printing one at once would lengthen its stall (the first print most,
 * by hundreds of microseconds), and a stall must end where its spin does.  --at-ns starts the
 * stalls at a given CLOCK_MONOTONIC time, one every --gap-ms from then, so that two injectors on
 * two CPUs can stall them a known time apart.  --name-hex gives the task a name of any bytes
 * (hex; "" for none), as any process may choose. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

static long long now(clockid_t c) {
        struct timespec ts;
        clock_gettime(c, &ts);
        return (long long) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int main(int argc, char *argv[]) {
        static const struct option opts[] = {
                { "cpu", required_argument, NULL, 'c' },
                { "priority", required_argument, NULL, 'p' },
                { "stall-us", required_argument, NULL, 's' },
                { "count", required_argument, NULL, 'n' },
                { "gap-ms", required_argument, NULL, 'g' },
                { "delay-ms", required_argument, NULL, 'd' },
                { "at-ns", required_argument, NULL, 'a' },
                { "name-hex", required_argument, NULL, 'N' },
                {},
        };
        int cpu = 0, prio = 90, count = 10, c;
        long stall_us = 20000, gap_ms = 250, delay_ms = 1000;
        long long at_ns = 0;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (c) {
                case 'c':
                        cpu = atoi(optarg);
                        break;
                case 'p':
                        prio = atoi(optarg);
                        break;
                case 's':
                        stall_us = atol(optarg);
                        break;
                case 'n':
                        count = atoi(optarg);
                        break;
                case 'g':
                        gap_ms = atol(optarg);
                        break;
                case 'd':
                        delay_ms = atol(optarg);
                        break;
                case 'a':
                        at_ns = atoll(optarg);
                        break;
                case 'N': {
                        char name[16] = "";
                        size_t len = strlen(optarg) / 2;
                        for (size_t i = 0; i < len && i < sizeof(name) - 1; i++) {
                                unsigned v;
                                if (sscanf(optarg + 2 * i, "%2x", &v) != 1) {
                                        fprintf(stderr, "stall-inject: --name-hex=%s: not hex\n",
                                                optarg);
                                        return 2;
                                }
                                name[i] = (char) v;
                        }
                        if (prctl(PR_SET_NAME, name) < 0) {
                                fprintf(stderr, "stall-inject: PR_SET_NAME: %s\n", strerror(errno));
                                return 1;
                        }
                        break;
                }
                default:
                        fprintf(stderr,
                                "usage: stall-inject --cpu N --priority P --stall-us U "
                                "--count K --gap-ms G (--delay-ms D | --at-ns T) [--name-hex H]\n");
                        return 2;
                }

        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
                fprintf(stderr, "stall-inject: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
                return 1;
        }
        struct sched_param sp = { .sched_priority = prio };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
                fprintf(stderr, "stall-inject: SCHED_FIFO %d: %s\n", prio, strerror(errno));
                return 1;
        }
        long long *win = calloc((size_t) (count > 0 ? count : 1) * 2, sizeof(*win));
        if (!win) {
                fprintf(stderr, "stall-inject: out of memory\n");
                return 1;
        }
        mlockall(MCL_CURRENT | MCL_FUTURE);

        if (!at_ns)
                sleep_ms(delay_ms);
        for (int i = 0; i < count; i++) {
                long long due = at_ns + i * gap_ms * 1000000LL;
                struct timespec ts = { due / 1000000000LL, due % 1000000000LL };
                while (at_ns && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                        ;
                long long m0 = now(CLOCK_MONOTONIC), r0 = now(CLOCK_REALTIME);
                long long end = m0 + stall_us * 1000LL, m1;
                while ((m1 = now(CLOCK_MONOTONIC)) < end)
                        ;
                /* Realtime and monotonic advance together over 20 ms: derive the end. */
                win[2 * i] = r0;
                win[2 * i + 1] = r0 + (m1 - m0);
                /* The last stall too: what exiting costs (much, with AddressSanitizer) must
                 * not lengthen it at this priority. */
                if (!at_ns || i == count - 1)
                        sleep_ms(gap_ms);
        }
        struct sched_param other = { .sched_priority = 0 };
        sched_setscheduler(0, SCHED_OTHER, &other);
        for (int i = 0; i < count; i++)
                printf("stall %lld %lld\n", win[2 * i], win[2 * i + 1]);
        free(win);
        return 0;
}
