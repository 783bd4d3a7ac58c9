/* SPDX-License-Identifier: MIT */
/* rtsoakd must refuse to measure without real-time scheduling or locked memory, and say which
 * limit is in the way and how to lift it.  Each case runs the real daemon in a process that
 * really has the limit: an unprivileged user with RLIMIT_RTPRIO 0, one with a tiny
 * RLIMIT_MEMLOCK, and root inside a cgroup that has no real-time budget. */
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "macro.h"

#define NOBODY 65534

static char *dir;
static char set_db[600], daemon_copy[600];

struct limits {
        rlim_t rtprio, memlock;
        const char *cgroup_procs; /* cgroup.procs file to join, or NULL */
        bool drop_root;
};

static void child_setup(void *data) {
        const struct limits *l = data;
        if (l->cgroup_procs) {
                FILE *f = fopen(l->cgroup_procs, "we");
                if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0) {
                        fprintf(stderr, "cannot join %s: %m\n", l->cgroup_procs);
                        _exit(125);
                }
        }
        /* Only lower limits (raising a hard limit needs CAP_SYS_RESOURCE, which containers
         * often drop); RLIM_INFINITY means "leave as it is". */
        struct rlimit rt = { l->rtprio, l->rtprio }, ml = { l->memlock, l->memlock };
        if ((l->rtprio != RLIM_INFINITY && setrlimit(RLIMIT_RTPRIO, &rt) < 0) ||
            (l->memlock != RLIM_INFINITY && setrlimit(RLIMIT_MEMLOCK, &ml) < 0)) {
                fprintf(stderr, "setrlimit: %m\n");
                _exit(125);
        }
        if (l->drop_root && (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)) {
                fprintf(stderr, "cannot become nobody: %m\n");
                _exit(125);
        }
}

static void run_daemon(struct limits *l, const char *extra_set, struct tu_result *r) {
        char *argv[] = { daemon_copy, "--config", "/dev/null", "--set", set_db,
                         /* As in every test outside a mount namespace: no tracefs mount. */
                         "--set", "Trace.Enabled=no", "--duration", "2s",
                         extra_set ? "--set" : NULL, (char *) extra_set, NULL };
        tu_run(argv, 20000, child_setup, l, r);
}

static int setup(void **state) {
        (void) state;
        dir = tu_mkdtemp("rt-refusal");
        chmod(dir, 0777);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s/rtsoak.db", dir);
        /* The build tree may sit where an unprivileged user cannot reach (under /root, or a
         * 0700 directory): run a copy from our world-readable directory. */
        snprintf(daemon_copy, sizeof(daemon_copy), "%s/rtsoakd", dir);
        char cmd[1400];
        snprintf(cmd, sizeof(cmd), "install -m 0755 '%s' '%s'", tu_bin("RTSOAKD"), daemon_copy);
        if (system(cmd) != 0)
                return -1;
        return 0;
}

static int teardown(void **state) {
        (void) state;
        tu_rmdir(dir);
        return 0;
}

static void test_no_rtprio(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        struct limits l = { .rtprio = 0, .memlock = RLIM_INFINITY, .drop_root = true };
        struct tu_result r;
        /* Without locking, so that the scheduler is the first thing refused. */
        run_daemon(&l, "Probe.LockMemory=no", &r);
        if (r.status == 0 || !strstr(r.err, "SCHED_FIFO priority 95 refused") ||
            !strstr(r.err, "RLIMIT_RTPRIO is 0") || !strstr(r.err, "LimitRTPRIO=95") ||
            !strstr(r.err, "Refusing to measure at SCHED_OTHER"))
                fail_msg("status %d, stderr:\n%s", r.status, r.err);
        /* Nothing was measured, so no run was recorded. */
        assert_null(strstr(r.err, "Run 1"));
        tu_result_done(&r);
}

static void test_no_memlock(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        if (getenv("RTSOAKD_TEST_SET"))
                skip(); /* sanitizer builds run without locked memory */
        /* Locking comes before the probes start, so this fails first whatever RTPRIO is. */
        struct limits l = { .rtprio = RLIM_INFINITY, .memlock = 64 * 1024, .drop_root = true };
        struct tu_result r;
        run_daemon(&l, NULL, &r);
        if (r.status == 0 || !strstr(r.err, "mlockall(MCL_CURRENT|MCL_FUTURE) failed") ||
            !strstr(r.err, "RLIMIT_MEMLOCK is 65536 bytes") ||
            !strstr(r.err, "LimitMEMLOCK=infinity"))
                fail_msg("status %d, stderr:\n%s", r.status, r.err);
        tu_result_done(&r);
}

static void test_cgroup_without_rt_budget(void **state) {
        (void) state;
        if (geteuid() != 0)
                skip();
        /* Needs cgroup v1's cpu controller with CONFIG_RT_GROUP_SCHED. */
        if (access("/sys/fs/cgroup/cpu/cpu.rt_runtime_us", W_OK) < 0) {
                fprintf(stderr, "# no cgroup v1 cpu.rt_runtime_us here: cannot test\n");
                skip();
        }
        char cg[256], procs[300];
        snprintf(cg, sizeof(cg), "/sys/fs/cgroup/cpu/rtsoak-test-%d", getpid());
        if (mkdir(cg, 0755) < 0) {
                fprintf(stderr, "# cannot create %s: %s\n", cg, strerror(errno));
                skip();
        }
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
        /* A new group starts with a real-time budget of 0. */
        char *budget_path;
        assert_true(asprintf(&budget_path, "%s/cpu.rt_runtime_us", cg) > 0);
        char *budget = tu_read_file(budget_path);
        free(budget_path);
        bool zero = atoi(budget) == 0;
        free(budget);

        struct limits l = { .rtprio = RLIM_INFINITY,
                            .memlock = RLIM_INFINITY,
                            .cgroup_procs = procs };
        struct tu_result r;
        if (zero)
                run_daemon(&l, NULL, &r);
        rmdir(cg);
        if (!zero) {
                fprintf(stderr, "# new cgroups get a real-time budget here: cannot test\n");
                skip();
        }
        if (r.status == 0 || !strstr(r.err, "CONFIG_RT_GROUP_SCHED") ||
            !strstr(r.err, "rtsoak-test-") || !strstr(r.err, "has no real-time budget"))
                fail_msg("status %d, stderr:\n%s", r.status, r.err);
        tu_result_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_rtprio),
                cmocka_unit_test(test_no_memlock),
                cmocka_unit_test(test_cgroup_without_rt_budget),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
