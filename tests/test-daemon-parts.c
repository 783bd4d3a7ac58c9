/* SPDX-License-Identifier: MIT */
/* Unit tests of the daemon's smaller parts: SHA-256 vectors, the preemption model, the
 * explanation of refused real-time scheduling fed with known files, hotplug checks, and the
 * load counts carried past an interval that was never stored. */
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "cpuset.h"
#include "housekeeping.h"
#include "load-records.h"
#include "loadsup.h"
#include "macro.h"
#include "probe.h"
#include "proc-sched.h"
#include "rt-setup.h"
#include "sha256.h"
#include "sysinfo.h"

static char dir[] = "/tmp/test-parts-XXXXXX";

static const char *file(const char *name, const char *text) {
        static char path[8][512];
        static int next;
        char *p = path[next++ % 8];
        snprintf(p, 512, "%s/%s", dir, name);
        if (text) {
                char cmd[1100];
                snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
                assert_int_equal(system(cmd), 0);
                FILE *f = fopen(p, "we");
                assert_non_null(f);
                fputs(text, f);
                fclose(f);
        }
        return p;
}

static void test_sha256(void **state) {
        static const struct {
                const char *in, *hex;
        } t[] = {
                { "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
                { "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
                { "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
        };
        char out[2 * SHA256_DIGEST_SIZE + 1];
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                assert_string_equal(sha256_hex(t[i].in, strlen(t[i].in), out), t[i].hex);

        /* One million 'a', fed in uneven pieces to exercise block boundaries. */
        struct sha256_ctx c;
        uint8_t d[SHA256_DIGEST_SIZE];
        char a[1000];
        memset(a, 'a', sizeof(a));
        sha256_init(&c);
        for (size_t done = 0, step = 1; done < 1000000; done += step, step = step % 997 + 1) {
                if (done + step > 1000000)
                        step = 1000000 - done;
                sha256_update(&c, a, step);
        }
        sha256_final(&c, d);
        static const uint8_t want[4] = { 0xcd, 0xc7, 0x6e, 0x5c };
        assert_memory_equal(d, want, 4);
}

static void test_preempt_model(void **state) {
        static const struct {
                const char *realtime, *version, *dynamic, *cmdline, *want;
        } t[] = {
                { "1\n", "#1 SMP PREEMPT_DYNAMIC", NULL, "", "PREEMPT_RT" },
                { "0\n", "#1 SMP PREEMPT_RT Fri Jan 1", NULL, "", "PREEMPT_RT" },
                { NULL, "#1 SMP PREEMPT_DYNAMIC", "none voluntary (full) lazy\n", "",
                  "PREEMPT_DYNAMIC (full)" },
                { NULL, "#1 SMP PREEMPT_DYNAMIC", "(none) voluntary full\n", "",
                  "PREEMPT_DYNAMIC (none)" },
                { NULL, "#1 SMP PREEMPT_DYNAMIC @0", NULL, "ro preempt=voluntary quiet",
                  "PREEMPT_DYNAMIC (voluntary)" },
                { NULL, "#1 SMP PREEMPT_DYNAMIC @0", NULL, "ro nopreempt=x", "PREEMPT_DYNAMIC" },
                { NULL, "#1 SMP PREEMPT Thu", NULL, "", "PREEMPT" },
                { NULL, "#1 SMP Debian 6.1.0", NULL, "", "PREEMPT_NONE or PREEMPT_VOLUNTARY" },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                char buf[64];
                const char *rt = t[i].realtime ? file("realtime", t[i].realtime)
                                               : file("no-such-file", NULL);
                const char *dyn = t[i].dynamic ? file("preempt", t[i].dynamic)
                                               : file("no-such-file", NULL);
                sysinfo_preempt_model(rt, t[i].version, dyn, t[i].cmdline, buf, sizeof(buf));
                if (strcmp(buf, t[i].want) != 0)
                        fail_msg("case %zu: got '%s', want '%s'", i, buf, t[i].want);
        }

        /* The real machine gives something, never an empty string. */
        struct sysinfo_run si;
        sysinfo_read(&si);
        assert_true(strlen(si.preempt_model) > 0);
        assert_int_equal(strlen(si.boot_id), 32);
        assert_true(strlen(si.kernel_release) > 0);
}

static void test_explain_sched_failure(void **state) {
        struct rlimit old;
        char why[2048];
        (void) state;
        getrlimit(RLIMIT_RTPRIO, &old);

        /* No capability and RLIMIT_RTPRIO 0: the limit is the cause. */
        struct rlimit zero = { 0, old.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_RTPRIO, &zero), 0);
        struct rt_paths p = {
                .proc_status = file("status-nocap", "Name:\tx\nCapEff:\t0000000000000000\n"),
                .proc_cgroup = file("cgroup-root", "4:cpu,cpuacct:/\n0::/\n"),
                .sched_rt_runtime = file("rt-950000", "950000\n"),
                .cgroup_root = file("cg", NULL),
        };
        rt_explain_sched_failure(-EPERM, 95, &p, why, sizeof(why));
        assert_non_null(strstr(why, "SCHED_FIFO priority 95 refused: Operation not permitted."));
        assert_non_null(strstr(why, "RLIMIT_RTPRIO is 0"));
        assert_non_null(strstr(why, "LimitRTPRIO=95"));
        assert_non_null(strstr(why, "Refusing to measure at SCHED_OTHER"));
        assert_null(strstr(why, "CONFIG_RT_GROUP_SCHED"));

        /* With the capability, the limit does not matter. */
        p.proc_status = file("status-cap", "CapEff:\t000001ffffffffff\n");
        rt_explain_sched_failure(-EPERM, 95, &p, why, sizeof(why));
        assert_null(strstr(why, "RLIMIT_RTPRIO is"));
        assert_non_null(strstr(why, "None of the usual causes applies"));

        /* A cgroup without an RT budget under CONFIG_RT_GROUP_SCHED. */
        file("cg/cpu/lab/rtsoak/cpu.rt_runtime_us", "0\n");
        p.proc_cgroup = file("cgroup-lab", "12:cpu,cpuacct:/lab/rtsoak\n");
        rt_explain_sched_failure(-EPERM, 80, &p, why, sizeof(why));
        assert_non_null(strstr(why, "CONFIG_RT_GROUP_SCHED"));
        assert_non_null(strstr(why, "/lab/rtsoak"));
        assert_non_null(strstr(why, "cpu.rt_runtime_us is 0"));

        /* Real-time throttled to nothing system-wide. */
        p.proc_cgroup = file("cgroup-root", NULL);
        p.sched_rt_runtime = file("rt-0", "0\n");
        rt_explain_sched_failure(-EPERM, 80, &p, why, sizeof(why));
        assert_non_null(strstr(why, "kernel.sched_rt_runtime_us is 0"));

        assert_int_equal(setrlimit(RLIMIT_RTPRIO, &old), 0);
}

/* A probe thread pinned to its CPU that has finished (as at a stop) but is not joined yet. */
static void *pinned_then_exit(void *arg) {
        struct probe *p = arg;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
                return (void *) 1;
        atomic_store_explicit(&p->state, PROBE_DONE, memory_order_release);
        return NULL;
}

/* Every stop of rtsoakd once recorded cpu_offline and cpu_online for every CPU: a check of the
 * CPUs that ran while the probe threads had exited but were not joined read each thread's
 * affinity as the main thread's (every CPU). */
static void test_hotplug_exited_probe(void **state) {
        (void) state;
        struct cpuset online;
        assert_int_equal(cpuset_online(&online, NULL), 0);
        size_t ncpus = online.n;
        int cpu0 = online.cpus[0];
        cpuset_done(&online);
        if (ncpus < 2) {
                skip(); /* with one CPU every affinity is "pinned" */
                return;
        }
        /* The main thread may run anywhere, as rtsoakd's does. */
        cpu_set_t all;
        CPU_ZERO(&all);
        for (int c = 0; c < CPU_SETSIZE; c++)
                CPU_SET(c, &all);
        sched_setaffinity(0, sizeof(all), &all);

        char err[STORE_ERROR_MAX];
        store *s = NULL;
        int64_t run = 0;
        assert_int_equal(store_open(file("hotplug.db", NULL), STORE_WRITER, &s, err), 0);
        struct store_run_info info = { .machine_id = "m",
                                       .boot_id = "b",
                                       .start_ns = 1,
                                       .hist_limit_us = 1000,
                                       .priority = 95 };
        assert_int_equal(store_begin_run(s, &info, &run, NULL), 0);

        struct probe_params pp = { .interval_ns = 200000,
                                   .threshold_ns = 100000,
                                   .hist_limit_us = 1000,
                                   .period_ns = 1000000000,
                                   .priority = 95 };
        struct probe_control ctl = {};
        struct probe *p = NULL;
        assert_int_equal(probe_new(cpu0, &pp, &ctl, &p), 0);
        assert_int_equal(pthread_create(&p->thread, NULL, pinned_then_exit, p), 0);
        p->thread_started = true;
        /* Until the kernel has let the thread go (its tid cleared). */
        for (int i = 0; i < 200 && probe_state(p) != PROBE_DONE; i++)
                usleep(1000);
        usleep(50 * 1000);

        sd_event *e = NULL;
        struct housekeeping *h = NULL;
        assert_int_equal(sd_event_new(&e), 0);
        struct housekeeping_params hp = { .store = s, .run_id = run, .probes = &p, .nprobes = 1 };
        assert_int_equal(housekeeping_start(e, &hp, &h), 0);
        housekeeping_check_cpus(h);

        struct store_event_row *ev = NULL;
        size_t n = 0;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_list_events(s, &f, NULL, 0, &ev, &n), 0);
        for (size_t i = 0; i < n; i++)
                fprintf(stderr, "# unexpected event: %s %s\n", ev[i].type, ev[i].message);
        assert_int_equal(n, 0);
        store_events_free(ev, n);

        housekeeping_free(h);
        sd_event_unref(e);
        probe_join(p);
        probe_free(p);
        store_close(s);
}

/* Starts and exits of an interval that was never stored go on to the next record of the same
 * scenario; not into another scenario's loads. */
static void test_load_counts_carried(void **state) {
        (void) state;
        struct load_record a = { .k = 4, .scenario = "work", .nloads = 2 };
        struct load_record b = { .k = 5, .scenario = "work", .nloads = 2 };
        const char *gens[] = { "cpu", "hackbench" };
        for (int i = 0; i < 2; i++) {
                a.loads[i] = (struct store_interval_load){ .generator = gens[i], .up_ns = 7 };
                b.loads[i] = (struct store_interval_load){ .generator = gens[i], .up_ns = 9 };
        }
        a.loads[0].starts = 1;
        a.loads[1].exits = 2;
        b.loads[1].starts = 1;
        assert_true(loadsup_record_carry(&a, &b));
        assert_int_equal(b.loads[0].starts, 1);
        assert_int_equal(b.loads[1].starts, 1);
        assert_int_equal(b.loads[1].exits, 2);
        assert_int_equal(b.loads[0].up_ns, 9); /* the running time is not carried */

        /* A counter that goes back counts nothing and starts again from there. */
        uint64_t last = 100;
        assert_int_equal(loadsup_counter_delta(150, &last), 50);
        assert_int_equal(last, 100); /* the caller moves it by the part it used */
        assert_int_equal(loadsup_counter_delta(7, &last), 0);
        assert_int_equal(last, 7);
        assert_int_equal(loadsup_counter_delta(9, &last), 2);

        struct load_record other = { .k = 6, .scenario = "idle", .nloads = 0 };
        assert_false(loadsup_record_carry(&b, &other));
        struct load_record quiet = { .k = 6, .scenario = "work", .nloads = 1 };
        quiet.loads[0] = (struct store_interval_load){ .generator = "cpu" };
        assert_true(loadsup_record_carry(&quiet, &other)); /* nothing to carry */
}

/* One load "cpu" of scenario "work" that started starts times in interval k. */
static void add_record(struct load_records *lr, uint64_t k, uint32_t starts) {
        struct load_record *r = load_records_add(lr, k);
        assert_non_null(r);
        r->scenario = "work";
        r->nloads = 1;
        r->loads[0] = (struct store_interval_load){ .generator = "cpu", .starts = starts };
}

/* A record is done with only when its interval's write succeeded: an interval written once
 * but refused (the write failed until the interval was dropped) passes its starts on to the
 * next; one stored does not, and a late CPU's second row of it carries none. */
static void test_load_records(void **state) {
        (void) state;
        struct load_records lr = {};
        struct store_interval iv = {};
        add_record(&lr, 0, 1);
        load_records_annotate(&lr, 0, false, &iv); /* its write fails: never told written */
        assert_string_equal(iv.scenario, "work");
        assert_int_equal(iv.loads[0].starts, 1);
        add_record(&lr, 1, 0);
        iv = (struct store_interval){};
        load_records_annotate(&lr, 1, false, &iv); /* interval 0 was dropped */
        assert_int_equal(iv.nloads, 1);
        assert_int_equal(iv.loads[0].starts, 1);
        load_records_written(&lr, 1);

        add_record(&lr, 2, 0);
        iv = (struct store_interval){};
        load_records_annotate(&lr, 2, false, &iv); /* 1 was stored: nothing passed on */
        assert_int_equal(iv.loads[0].starts, 0);
        load_records_written(&lr, 2);

        add_record(&lr, 3, 2);
        iv = (struct store_interval){};
        load_records_annotate(&lr, 3, false, &iv);
        assert_int_equal(iv.loads[0].starts, 2);
        load_records_written(&lr, 3);
        iv = (struct store_interval){};
        load_records_annotate(&lr, 3, true, &iv); /* a late CPU's row of 3 */
        assert_int_equal(iv.nloads, 1);
        assert_int_equal(iv.loads[0].starts, 0);
        assert_int_equal(load_records_last(&lr)->loads[0].starts, 2);

        /* Over the cap, the oldest record goes. */
        for (uint64_t k = 4; k < 4 + LOAD_RECORDS_MAX + 10; k++)
                add_record(&lr, k, 0);
        assert_int_equal(lr.n, LOAD_RECORDS_MAX);
        assert_int_equal(lr.r[0].k, 14);
        load_records_free(&lr);
}

/* A thread to read the policy of: named, at a policy, parked until told to go. */
struct subject {
        pthread_t t;
        _Atomic pid_t tid;
        _Atomic bool quit;
        const char *name;
};

static void *subject_main(void *arg) {
        struct subject *x = arg;
        pthread_setname_np(pthread_self(), x->name);
        x->tid = gettid();
        while (!x->quit)
                usleep(1000);
        return NULL;
}

static void subject_start(struct subject *x, const char *name, int policy, int prio) {
        pthread_attr_t a;
        struct sched_param sp = { .sched_priority = prio };
        *x = (struct subject){ .name = name };
        assert_int_equal(pthread_attr_init(&a), 0);
        pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&a, policy);
        pthread_attr_setschedparam(&a, &sp);
        assert_int_equal(pthread_create(&x->t, &a, subject_main, x), 0);
        pthread_attr_destroy(&a);
        while (!x->tid)
                usleep(1000);
        usleep(5000); /* the name is set before the tid is told */
}

static void subject_stop(struct subject *x) {
        x->quit = true;
        pthread_join(x->t, NULL);
}

struct reader {
        pthread_t t;
        const struct subject *fifo, *other;
        int other_nice; /* inherited from whoever started the test */
        long wrong;
        char what[128];
};

/* Reads both subjects many times; counts answers that are not theirs. */
static void *reader_main(void *arg) {
        struct reader *r = arg;
        for (int i = 0; i < 4000; i++) {
                char policy[16];
                int32_t prio = 0;
                int k = proc_thread_sched(r->fifo->tid, r->fifo->name, policy, sizeof(policy),
                                          &prio);
                if (k != 0 || strcmp(policy, "SCHED_FIFO") != 0 || prio != 37) {
                        if (!r->wrong++)
                                snprintf(r->what, sizeof(r->what), "%d %s %d", k, policy, prio);
                }
                k = proc_thread_sched(r->other->tid, r->other->name, policy, sizeof(policy), &prio);
                if (k != 0 || strcmp(policy, "SCHED_OTHER") != 0 || prio != r->other_nice) {
                        if (!r->wrong++)
                                snprintf(r->what, sizeof(r->what), "%d %s %d", k, policy, prio);
                }
        }
        return NULL;
}

/* A latency's culprit is named with its policy and priority from /proc: right for names with
 * spaces and ")", "gone" for a pid now another task's, and right when the capture threads
 * (one per CPU) read at the same time. */
static void test_proc_thread_sched(void **state) {
        (void) state;
        struct subject fifo, other;
        char policy[16] = "";
        int32_t prio = -99;
        struct sched_param sp = { .sched_priority = 37 };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                skip(); /* no real-time scheduling here */
        sp.sched_priority = 0;
        sched_setscheduler(0, SCHED_OTHER, &sp);
        subject_start(&fifo, "a) b (c", SCHED_FIFO, 37);
        subject_start(&other, "plain", SCHED_OTHER, 0);

        assert_int_equal(proc_thread_sched(fifo.tid, "a) b (c", policy, sizeof(policy), &prio), 0);
        assert_string_equal(policy, "SCHED_FIFO");
        assert_int_equal(prio, 37);
        assert_int_equal(proc_thread_sched(other.tid, "plain", policy, sizeof(policy), &prio), 0);
        assert_string_equal(policy, "SCHED_OTHER");
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t) other.tid);
        assert_int_equal(errno, 0);
        assert_int_equal(prio, nice);
        /* Another task's name at that pid, and no task at all: nothing is said. */
        strcpy(policy, "untouched");
        assert_int_equal(proc_thread_sched(other.tid, "plai", policy, sizeof(policy), &prio),
                         -ENOENT);
        assert_int_equal(proc_thread_sched(0, "plain", policy, sizeof(policy), &prio), -ENOENT);
        assert_string_equal(policy, "untouched");

        struct reader rd[4];
        for (size_t i = 0; i < ELEMENTSOF(rd); i++) {
                rd[i] = (struct reader){ .fifo = &fifo, .other = &other, .other_nice = nice };
                assert_int_equal(pthread_create(&rd[i].t, NULL, reader_main, &rd[i]), 0);
        }
        long wrong = 0;
        for (size_t i = 0; i < ELEMENTSOF(rd); i++) {
                pthread_join(rd[i].t, NULL);
                if (rd[i].wrong)
                        fprintf(stderr, "# reader %zu: %ld wrong answers, first: %s\n", i,
                                rd[i].wrong, rd[i].what);
                wrong += rd[i].wrong;
        }
        subject_stop(&fifo);
        subject_stop(&other);
        assert_int_equal(wrong, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sha256),
                cmocka_unit_test(test_preempt_model),
                cmocka_unit_test(test_explain_sched_failure),
                cmocka_unit_test(test_hotplug_exited_probe),
                cmocka_unit_test(test_load_counts_carried),
                cmocka_unit_test(test_load_records),
                cmocka_unit_test(test_proc_thread_sched),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
