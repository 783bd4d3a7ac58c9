/* SPDX-License-Identifier: MIT */
/* What one kernel trace event and one kernel entry cost on this machine, without rtsoakd.
 *
 * Two SCHED_FIFO threads pinned to one CPU hand it to each other with sched_yield(): every
 * call is one system call and one context switch, and with sched:sched_switch enabled in a
 * tracefs instance of this tool's own, one recorded event.  A third case times a null system
 * call (getppid) for the cost of entering the kernel alone.  Rounds alternate the order of
 * tracing off and on; the figures are medians over the rounds.
 *
 * Usage (as root, tracefs mounted at /sys/kernel/tracing):
 *     build/bench/event-cost [--rounds 9] [--loops 200000] [--cpu N]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define INSTANCE "/sys/kernel/tracing/instances/rtsoak-bench-evcost"
#define MAX_ROUNDS 101

static long loops = 200000;
static int cpu = -1;
static pthread_barrier_t start;

static int64_t now_ns(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t) t.tv_sec * 1000000000 + t.tv_nsec;
}

static int put(const char *file, const char *value) {
        char path[256];
        snprintf(path, sizeof(path), INSTANCE "/%s", file);
        FILE *f = fopen(path, "w");
        if (!f) {
                fprintf(stderr, "event-cost: cannot open %s: %s\n", path, strerror(errno));
                return -1;
        }
        int r = fputs(value, f) < 0 ? -1 : 0;
        if (fclose(f) != 0)
                r = -1;
        if (r < 0)
                fprintf(stderr, "event-cost: cannot write '%s' to %s\n", value, path);
        return r;
}

static int pin_fifo(void) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        struct sched_param sp = { .sched_priority = 90 };
        int r = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        if (r == 0)
                r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
        return r;
}

static void *yielder(void *arg) {
        (void) arg;
        if (pin_fifo() != 0) {
                fprintf(stderr, "event-cost: cannot pin a SCHED_FIFO thread to CPU %d\n", cpu);
                exit(2);
        }
        pthread_barrier_wait(&start);
        for (long i = 0; i < loops; i++)
                sched_yield();
        return NULL;
}

/* ns per hand-over of the CPU between two threads (a system call and a switch each). */
static double switch_ns(void) {
        pthread_t a, b;
        pthread_barrier_init(&start, NULL, 3);
        if (pthread_create(&a, NULL, yielder, NULL) != 0 ||
            pthread_create(&b, NULL, yielder, NULL) != 0) {
                fprintf(stderr, "event-cost: cannot start threads\n");
                exit(2);
        }
        pthread_barrier_wait(&start);
        int64_t t0 = now_ns();
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        int64_t t1 = now_ns();
        pthread_barrier_destroy(&start);
        return (double) (t1 - t0) / (2.0 * (double) loops);
}

static void *null_calls(void *arg) {
        double *out = arg;
        if (pin_fifo() != 0)
                exit(2);
        int64_t t0 = now_ns();
        for (long i = 0; i < loops; i++)
                syscall(SYS_getppid);
        *out = (double) (now_ns() - t0) / (double) loops;
        return NULL;
}

static double syscall_ns(void) {
        pthread_t t;
        double out = 0;
        if (pthread_create(&t, NULL, null_calls, &out) != 0)
                exit(2);
        pthread_join(t, NULL);
        return out;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return (x > y) - (x < y);
}

static double median(double *v, int n) {
        qsort(v, (size_t) n, sizeof(*v), cmp);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int set_up(void) {
        if (mkdir(INSTANCE, 0755) < 0 && errno != EEXIST) {
                fprintf(stderr, "event-cost: cannot make %s: %s (is tracefs mounted?)\n", INSTANCE,
                        strerror(errno));
                return -1;
        }
        /* As rtsoakd's recorder sets its instance up by default. */
        if (put("trace_clock", "mono") < 0 || put("buffer_size_kb", "656") < 0 ||
            put("options/overwrite", "1") < 0 || put("tracing_on", "1") < 0)
                return -1;
        return 0;
}

static int usage(void) {
        fprintf(stderr, "usage: event-cost [--rounds N (1-%d)] [--loops N] [--cpu N]\n",
                MAX_ROUNDS);
        return 2;
}

int main(int argc, char **argv) {
        int rounds = 9;
        for (int i = 1; i < argc; i++) {
                char *end = NULL;
                long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
                bool ok = end && *end == '\0';
                if (!strcmp(argv[i], "--rounds") && ok && v >= 1 && v <= MAX_ROUNDS)
                        rounds = (int) v;
                else if (!strcmp(argv[i], "--loops") && ok && v >= 1000)
                        loops = v;
                else if (!strcmp(argv[i], "--cpu") && ok && v >= 0 && v < CPU_SETSIZE)
                        cpu = (int) v;
                else
                        return usage();
                i++;
        }
        if (cpu < 0)
                cpu = (int) sysconf(_SC_NPROCESSORS_ONLN) - 1;
        if (set_up() < 0)
                return 1;
        double off[MAX_ROUNDS], on[MAX_ROUNDS], diff[MAX_ROUNDS], sys[MAX_ROUNDS];
        printf("# %d rounds of %ld hand-overs on CPU %d; ns per hand-over (one sched_yield and "
               "one switch)\n",
               rounds, loops, cpu);
        for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < 2; k++) {
                        bool trace = (k + r) % 2 == 1;
                        if (put("events/sched/sched_switch/enable", trace ? "1" : "0") < 0)
                                return 1;
                        (trace ? on : off)[r] = switch_ns();
                }
                (void) put("events/sched/sched_switch/enable", "0");
                sys[r] = syscall_ns();
                diff[r] = on[r] - off[r];
                printf("round %2d  switch off %7.1f  on %7.1f  on-off %+6.1f  null syscall %7.1f\n",
                       r + 1, off[r], on[r], diff[r], sys[r]);
        }
        (void) put("tracing_on", "0");
        if (rmdir(INSTANCE) < 0)
                fprintf(stderr, "event-cost: cannot remove %s: %s\n", INSTANCE, strerror(errno));
        double d = median(diff, rounds);
        double o = median(off, rounds);
        printf("median    switch off %7.1f  on %7.1f  on-off %+6.1f (%+.1f %%)  null syscall "
               "%7.1f\n",
               o, median(on, rounds), d, 100.0 * d / o, median(sys, rounds));
        return 0;
}
