/* SPDX-License-Identifier: MIT */
/* The probe must see injected latency faithfully.  A SCHED_FIFO thread above the probe's
 * priority spins for S = 20 ms on one CPU, K = 10 times; rtsoakd must record exactly K
 * samples of at least S - I (I = probe period: the wake-up that was due soonest after the
 * spin began waits S minus at most I) with a worst case within 10 % of S.
 *
 * This machine is a VM whose own stalls reach a few milliseconds.  The threshold is set at
 * 10 ms, far above them, and each recorded violation is matched against the stall windows
 * the injector printed.  A violation that no injected stall explains, on the stalled CPU or
 * on the untouched control CPU, is evidence of host noise at the injected scale: that attempt
 * proves nothing either way and is repeated (up to three times), so noise can neither pass
 * nor fail the test. */
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "cpuset.h"
#include "macro.h"

#define STALL_US 20000
#define STALLS 10
#define PERIOD_US 100

struct stall {
        long long r0, r1;
};

enum outcome { PASSED, INCONCLUSIVE };

/* The injector: a SCHED_FIFO 90 spinner on cpu, count stalls of stall_us, gap_ms apart,
 * the first after delay_ms.  The strings live in buf. */
static void injector_argv(char **argv, char buf[5][24], int cpu, long stall_us, int count,
                          int gap_ms, int delay_ms) {
        snprintf(buf[0], 24, "--cpu=%d", cpu);
        snprintf(buf[1], 24, "--stall-us=%ld", stall_us);
        snprintf(buf[2], 24, "--count=%d", count);
        snprintf(buf[3], 24, "--gap-ms=%d", gap_ms);
        snprintf(buf[4], 24, "--delay-ms=%d", delay_ms);
        char *a[] = { (char *) tu_bin("STALL_INJECT"),
                      buf[0],
                      "--priority=90",
                      buf[1],
                      buf[2],
                      buf[3],
                      buf[4],
                      NULL };
        memcpy(argv, a, sizeof(a));
}

static enum outcome attempt(int target, int control) {
        char *dir = tu_mkdtemp("stall");
        char db[512], set_db[600], set_cpus[64], out[600], err[600];
        snprintf(db, sizeof(db), "%s/rtsoak.db", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", db);
        if (control >= 0)
                snprintf(set_cpus, sizeof(set_cpus), "Probe.CPUs=%d,%d", target, control);
        else
                snprintf(set_cpus, sizeof(set_cpus), "Probe.CPUs=%d", target);
        snprintf(out, sizeof(out), "%s/rtsoakd.out", dir);
        snprintf(err, sizeof(err), "%s/rtsoakd.err", dir);

        char *argv[48];
        const char *extra[] = { "--set",      "Probe.Interval=100us",
                                "--set",      "Probe.Priority=80",
                                "--set",      "Probe.Threshold=10ms",
                                "--set",      set_cpus,
                                "--duration", "5s",
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        pid_t pid = tu_spawn(argv, out, err);
        /* Stalls injected before the probes run would be missed: wait for them (a slow
         * start under a sanitizer on a busy machine can take seconds). */
        if (!tu_wait_for_text(err, "probing CPUs", 20000)) {
                tu_wait(pid, 1000);
                fail_msg("rtsoakd did not start probing within 20 s:\n%s", tu_read_file(err));
        }

        char *inj[8], inj_buf[5][24];
        injector_argv(inj, inj_buf, target, STALL_US, STALLS, 250, 300);
        struct tu_result ir;
        tu_run(inj, 20000, NULL, NULL, &ir);
        int st = tu_wait(pid, 20000);
        char *daemon_err = tu_read_file(err);
        if (st != 0)
                fail_msg("rtsoakd exited with %d:\n%s", st, daemon_err);
        assert_int_equal(ir.status, 0);

        struct stall stalls[STALLS];
        int nstalls = 0;
        for (char *line = ir.out; line && *line;) {
                if (nstalls < STALLS &&
                    sscanf(line, "stall %lld %lld", &stalls[nstalls].r0, &stalls[nstalls].r1) == 2)
                        nstalls++;
                line = strchr(line, '\n');
                if (line)
                        line++;
        }
        assert_int_equal(nstalls, STALLS);
        for (int i = 0; i < STALLS; i++)
                assert_true(stalls[i].r1 - stalls[i].r0 >= STALL_US * 1000LL);

        /* What rtsoakd recorded. */
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db);
        char *ev_argv[] = {
                (char *) tu_bin("RTSOAK"), dbarg, "events", "--json", "--type", "violation", NULL
        };
        struct tu_result er;
        assert_int_equal(tu_run(ev_argv, 20000, NULL, NULL, &er), 0);
        json_t *evdoc = tu_json(er.out);
        json_t *evs = json_object_get(evdoc, "events");
        assert_non_null(evs);

        int matched[STALLS] = {}, long_on_target = 0;
        bool noise = false;
        size_t i;
        json_t *e;
        json_array_foreach (evs, i, e) {
                int cpu = (int) json_integer_value(json_object_get(e, "cpu"));
                long long t = json_integer_value(json_object_get(e, "time_ns"));
                long long v = json_integer_value(json_object_get(e, "value_ns"));
                if (cpu != target) {
                        fprintf(stderr, "# noise: %lld us on control CPU %d\n", v / 1000, cpu);
                        noise = true;
                        continue;
                }
                bool found = false;
                for (int k = 0; k < STALLS; k++) {
                        /* Due during the spin (or just before it, not yet run), and woken at
                         * its end; 1 ms covers the clock read skew of the two processes. */
                        if (t >= stalls[k].r0 - 2 * PERIOD_US * 1000LL - 1000000 &&
                            t <= stalls[k].r1 && t + v >= stalls[k].r1 - 1000000) {
                                matched[k]++;
                                found = true;
                                /* Above: the VM's own stalls of several ms can land in
                                 * the same wake-up and add to it. */
                                if (v < (STALL_US - PERIOD_US - 50) * 1000LL ||
                                    v > STALL_US * 1250LL)
                                        fail_msg("stall %d: recorded %lld us, injected %d us", k,
                                                 v / 1000, STALL_US);
                                break;
                        }
                }
                if (!found) {
                        fprintf(stderr, "# noise: %lld us on CPU %d outside every injected stall\n",
                                v / 1000, cpu);
                        noise = true;
                }
                if (v >= (STALL_US - PERIOD_US - 50) * 1000LL)
                        long_on_target++;
        }
        json_decref(evdoc);
        if (noise) {
                tu_result_done(&ir);
                tu_result_done(&er);
                free(daemon_err);
                tu_rmdir(dir);
                return INCONCLUSIVE;
        }
        for (int k = 0; k < STALLS; k++)
                if (matched[k] != 1)
                        fail_msg("injected stall %d was recorded %d times (want once)", k,
                                 matched[k]);
        assert_int_equal(long_on_target, STALLS);

        /* The per-CPU report and the stored histogram agree with the events. */
        char cpuopt[32];
        snprintf(cpuopt, sizeof(cpuopt), "--cpu=%d", target);
        char *rep_argv[] = { (char *) tu_bin("RTSOAK"), dbarg, "report", "--json", cpuopt, NULL };
        struct tu_result rr;
        assert_int_equal(tu_run(rep_argv, 20000, NULL, NULL, &rr), 0);
        json_t *rep = tu_json(rr.out);
        json_t *row = json_array_get(json_object_get(rep, "cpus"), 0);
        assert_non_null(row);
        long long max = json_integer_value(json_object_get(row, "max_ns"));
        long long viol = json_integer_value(json_object_get(row, "violations"));
        long long missed = json_integer_value(json_object_get(row, "missed"));
        fprintf(stderr, "# CPU %d: max %lld us, %lld violations, %lld missed periods\n", target,
                max / 1000, viol, missed);
        assert_true(max >= STALL_US * 900LL && max <= STALL_US * 1100LL);
        assert_int_equal(viol, STALLS);
        /* Each stall slept through about S/I - 1 periods. */
        assert_true(missed >= STALLS * (STALL_US / PERIOD_US - 2));

        char *hist_argv[] = { (char *) tu_bin("RTSOAK"), dbarg,  "histogram",
                              "--format=json",           cpuopt, NULL };
        struct tu_result hr;
        assert_int_equal(tu_run(hist_argv, 20000, NULL, NULL, &hr), 0);
        json_t *hist = tu_json(hr.out);
        json_t *buckets = json_object_get(json_array_get(json_object_get(hist, "cpus"), 0),
                                          "all_buckets");
        long long long_samples = 0;
        json_array_foreach (buckets, i, e) {
                if (json_integer_value(json_object_get(e, "lower_ns")) >= 16000000)
                        long_samples += json_integer_value(json_object_get(e, "count"));
        }
        assert_int_equal(long_samples, STALLS);

        json_decref(rep);
        json_decref(hist);
        tu_result_done(&ir);
        tu_result_done(&er);
        tu_result_done(&rr);
        tu_result_done(&hr);
        free(daemon_err);
        tu_rmdir(dir);
        return PASSED;
}

static void test_injected_stalls(void **state) {
        struct cpuset online;
        (void) state;
        if (geteuid() != 0)
                skip();
        assert_int_equal(cpuset_online(&online, NULL), 0);
        int target = online.cpus[online.n - 1];
        int control = online.n > 1 ? online.cpus[0] : -1;
        cpuset_done(&online);

        for (int a = 1; a <= 3; a++) {
                if (attempt(target, control) == PASSED)
                        return;
                fprintf(stderr, "# attempt %d inconclusive: host noise at the injected scale\n", a);
        }
        fprintf(stderr, "# host noise reached 10 ms in three attempts: cannot tell\n");
        skip();
}

/* A probe starved by a task of higher priority cannot stop; rtsoakd must still stop in
 * bounded time, keep what the other CPUs measured, and say which CPU it gave up on. */
static void test_starved_probe_stop_is_bounded(void **state) {
        struct cpuset online;
        (void) state;
        if (geteuid() != 0)
                skip();
        assert_int_equal(cpuset_online(&online, NULL), 0);
        if (online.n < 2) {
                cpuset_done(&online);
                fprintf(stderr, "# needs two CPUs: one to starve, one to keep the machine going\n");
                skip();
        }
        int target = online.cpus[online.n - 1], other = online.cpus[0];
        cpuset_done(&online);

        char *dir = tu_mkdtemp("starved");
        char db[512], set_db[600], set_cpus[64], dbarg[600];
        snprintf(db, sizeof(db), "%s/rtsoak.db", dir);
        snprintf(set_db, sizeof(set_db), "Storage.Path=%s", db);
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db);
        snprintf(set_cpus, sizeof(set_cpus), "Probe.CPUs=%d,%d", other, target);

        /* The hog spins 8 s from t = 0.5 s; rtsoakd is asked to stop at t = 2 s. */
        char *inj[8], inj_buf[5][24];
        injector_argv(inj, inj_buf, target, 8000000, 1, 0, 500);
        pid_t hog = tu_spawn(inj, NULL, NULL);
        char *argv[48];
        const char *extra[] = { "--set", "Probe.Priority=80", "--set", set_cpus, "--duration", "2s",
                                NULL };
        tu_daemon_argv(argv, set_db, extra);
        struct tu_result r;
        tu_run(argv, 30000, NULL, NULL, &r);
        assert_int_equal(tu_wait(hog, 20000), 0);

        char want[128];
        snprintf(want, sizeof(want), "The probe on CPU %d did not stop within 5 s", target);
        if (r.status != 1 || !strstr(r.err, want))
                fail_msg("status %d, stderr:\n%s", r.status, r.err);

        char *st_argv[] = { (char *) tu_bin("RTSOAK"), dbarg, "status", "--json", NULL };
        struct tu_result sr;
        assert_int_equal(tu_run(st_argv, 20000, NULL, NULL, &sr), 0);
        json_t *st = tu_json(sr.out);
        assert_string_equal(json_string_value(json_object_get(st, "end_reason")), "error");
        /* The CPU that kept running has its data. */
        json_t *row = json_array_get(json_object_get(st, "cpus"), 0);
        assert_non_null(row);
        assert_int_equal(json_integer_value(json_object_get(row, "cpu")), other);
        assert_true(json_integer_value(json_object_get(row, "samples")) > 5000);
        json_decref(st);
        tu_result_done(&r);
        tu_result_done(&sr);
        tu_rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_injected_stalls),
                cmocka_unit_test(test_starved_probe_stop_is_bounded),
        };
        return RUN_TESTS(tests);
}
