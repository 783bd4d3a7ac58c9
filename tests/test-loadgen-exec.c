/* SPDX-License-Identifier: MIT */
/* The exec load generator, run as the real rtsoak-load: the command is restarted and each
 * exit reported, its whole process group goes at the end, and nothing outlives SIGKILL. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

/* Field of /proc/PID/stat after the command name: 0 state, 1 ppid, 2 pgrp.  -1: gone. */
static long stat_field(pid_t pid, int field, char *state) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')'), st;
        long v[2];
        if (!p || sscanf(p + 2, "%c %ld %ld", &st, &v[0], &v[1]) != 3)
                return -1;
        if (state)
                *state = st;
        return field == 0 ? 0 : v[field - 1];
}

/* Live (not zombie) processes whose pgrp or ppid is the given value. */
static int count_procs(int field, long value, pid_t *ret_first) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        int n = 0;
        assert_non_null(d);
        while ((de = readdir(d))) {
                pid_t pid = atoi(de->d_name);
                char st = 0;
                if (pid <= 0 || stat_field(pid, field, &st) != value || st == 'Z')
                        continue;
                if (n++ == 0 && ret_first)
                        *ret_first = pid;
        }
        closedir(d);
        return n;
}

/* The command rtsoak-load started (its child), waiting up to 2 s for it. */
static pid_t command_of(pid_t load) {
        for (int i = 0; i < 200; i++) {
                pid_t child = 0;
                if (count_procs(1, load, &child) > 0)
                        return child;
                tu_sleep_ms(10);
        }
        fail_msg("rtsoak-load started no command");
        return -1;
}

static bool gone(pid_t pid) {
        char st = 0;
        return stat_field(pid, 0, &st) < 0 || st == 'Z';
}

static void run_load(const char *const *gen_argv, int timeout_ms, struct tu_result *r) {
        char *argv[64];
        tu_load_argv(argv, NULL, gen_argv);
        tu_run(argv, timeout_ms, NULL, NULL, r);
}

static void test_restarted_and_reported(void **state) {
        char *dir = tu_mkdtemp("exec"), script[512], log[256];
        snprintf(log, sizeof(log), "%s/runs", dir);
        snprintf(script, sizeof(script), "echo run >> '%s'", log);
        struct tu_result r;
        run_load((const char *const[]){ "--json", "-d", "3s", "exec", "--restart-delay", "200ms",
                                        "--", "sh", "-c", script, NULL },
                 20000, &r);
        assert_int_equal(r.status, 0);
        char *text = tu_read_file(log);
        size_t lines = tu_count_lines(text, "run");
        size_t exits = 0;
        for (const char *p = r.err;
             (p = strstr(p, "command_exit: 0 command exited with status 0 after")); p++)
                exits++;
        json_t *j = tu_json(r.out);
        uint64_t runs = tu_load_count(j, "runs");
        printf("# %zu runs in the file, %zu exits reported, %" PRIu64 " starts counted\n", lines,
               exits, runs);
        /* About 3 s / (200 ms + start-up): well over five, and every run is accounted for. */
        assert_true(lines >= 6 && lines <= 17);
        assert_true(exits == lines || exits + 1 == lines);
        assert_true(runs == lines || runs == lines + 1);
        json_decref(j);
        free(text);
        tu_result_done(&r);
        tu_rmdir(dir);
}

static void check_group_killed(const char *const *cmd, int min_procs) {
        char *argv[16];
        int n = 0;
        argv[n++] = (char *) tu_bin("RTSOAK_LOAD");
        argv[n++] = "exec";
        argv[n++] = "--";
        for (; *cmd; cmd++)
                argv[n++] = (char *) *cmd;
        argv[n] = NULL;
        pid_t load = tu_spawn(argv, NULL, NULL);
        pid_t cmd_pid = command_of(load);
        tu_sleep_ms(300);
        /* The command leads a process group of its own, with everything it started. */
        long pgid = stat_field(cmd_pid, 2, NULL);
        assert_int_equal(pgid, cmd_pid);
        assert_true(pgid != getpgrp());
        int procs = count_procs(2, pgid, NULL);
        printf("# %d processes in group %ld\n", procs, pgid);
        assert_true(procs >= min_procs);

        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        kill(load, SIGTERM);
        assert_int_equal(tu_wait(load, 5000), 0);
        int64_t ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000;
        printf("# rtsoak-load gone %lld ms after SIGTERM\n", (long long) ms);
        assert_true(ms < 1000);
        /* Nothing of the group is left: no live process has that pgrp. */
        for (int i = 0; i < 50 && count_procs(2, pgid, NULL) > 0; i++)
                tu_sleep_ms(10);
        assert_int_equal(count_procs(2, pgid, NULL), 0);
        assert_true(kill((pid_t) -pgid, 0) < 0 && errno == ESRCH);
}

static void test_group_killed_at_stop(void **state) {
        check_group_killed((const char *const[]){ "sleep", "1000", NULL }, 1);
        /* A shell with a background job: the grandchild goes too. */
        check_group_killed((const char *const[]){ "sh", "-c", "sleep 1000 & sleep 1000", NULL }, 3);
}

static void test_dies_with_rtsoak_load(void **state) {
        char *argv[] = { (char *) tu_bin("RTSOAK_LOAD"), "exec", "--", "sleep", "1000", NULL };
        pid_t load = tu_spawn(argv, NULL, NULL);
        pid_t cmd = command_of(load);
        tu_sleep_ms(200);
        assert_false(gone(cmd));
        kill(load, SIGKILL);
        tu_wait(load, 5000);
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        while (!gone(cmd) && now_ns(CLOCK_MONOTONIC) - t0 < 1000 * 1000000LL)
                tu_sleep_ms(10);
        printf("# command %s %lld ms after rtsoak-load was killed\n",
               gone(cmd) ? "gone" : "still there",
               (long long) (now_ns(CLOCK_MONOTONIC) - t0) / 1000000);
        if (!gone(cmd)) {
                kill(cmd, SIGKILL);
                fail_msg("the command outlived rtsoak-load");
        }
}

static void test_clean_signal_state(void **state) {
        /* rtsoak-load blocks SIGTERM, SIGINT, SIGHUP and ignores SIGPIPE; the command must
         * not inherit that.  Its output goes to rtsoak-load's stderr. */
        struct tu_result r;
        run_load((const char *const[]){ "-d", "500ms", "exec", "--restart-delay", "10s", "--",
                                        "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status", NULL },
                 10000, &r);
        assert_int_equal(r.status, 0);
        if (!strstr(r.err, "SigBlk:\t0000000000000000") ||
            !strstr(r.err, "SigIgn:\t0000000000000000"))
                fail_msg("signals blocked or ignored in the command: %s", r.err);
        tu_result_done(&r);
}

static void test_cpu_measured(void **state) {
        /* A busy shell: what rtsoak-load reports must match the scheduler's own accounting of
         * the shell's CPU time (read just before the stop), whatever else the machine does. */
        char *dir = tu_mkdtemp("exec"), out[256];
        snprintf(out, sizeof(out), "%s/out.json", dir);
        char *argv[] = {
                (char *) tu_bin("RTSOAK_LOAD"), "--json", "-d", "2s", "exec", "--", "sh", "-c",
                "while :; do :; done",          NULL
        };
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        pid_t load = tu_spawn(argv, out, NULL);
        pid_t cmd = command_of(load);
        tu_sleep_ms(1800 - (int) ((now_ns(CLOCK_MONOTONIC) - t0) / 1000000));
        int64_t sched_ns = tu_process_cpu_ns(cmd);
        assert_int_equal(tu_wait(load, 5000), 0);
        char *text = tu_read_file(out);
        json_t *j = tu_json(text);
        int64_t reported_ns = (int64_t) tu_load_count(j, "cpu");
        printf("# busy shell: %.3f s of CPU reported, %.3f s by the scheduler at 1.8 s (%.1f %% "
               "of a CPU)\n",
               (double) reported_ns / 1e9, (double) sched_ns / 1e9, tu_load_rate(j, "cpu"));
        assert_true(sched_ns > 0);
        /* Not less than what it had used 0.2 s before the end (minus 10 ms ticks), not more
         * than that plus the remaining wall time. */
        assert_true(reported_ns >= sched_ns - 20 * 1000000LL);
        assert_true(reported_ns <= sched_ns + 600 * 1000000LL);
        json_decref(j);
        free(text);
        tu_rmdir(dir);

        j = tu_load_json("1s", (const char *const[]){ "exec", "--", "sleep", "1000", NULL });
        double cpu = tu_load_rate(j, "cpu");
        printf("# sleep: %.2f %% of a CPU\n", cpu);
        assert_true(cpu < 5);
        assert_int_equal(tu_load_count(j, "runs"), 1);
        json_decref(j);
}

static void test_backoff(void **state) {
        /* A command failing at once: without backoff hundreds of runs, with it a handful
         * (0.1 + 0.2 + 0.4 + 0.4 ... s). */
        json_t *j = tu_load_json("2s", (const char *const[]){ "exec", "--restart-delay", "0",
                                                              "--backoff-max", "400ms", "--",
                                                              "false", NULL });
        uint64_t runs = tu_load_count(j, "runs");
        printf("# %" PRIu64 " runs with backoff\n", runs);
        assert_true(runs >= 4 && runs <= 9);
        json_decref(j);
}

static void expect_exit(const char *const *gen_argv, int status, const char *msg) {
        struct tu_result r;
        run_load(gen_argv, 10000, &r);
        assert_int_equal(r.status, status);
        if (!strstr(r.err, msg))
                fail_msg("expected '%s' in: %s", msg, r.err);
        tu_result_done(&r);
}

static void test_bad_commands(void **state) {
        expect_exit((const char *const[]){ "exec", NULL }, 64,
                    "exec: a command is required after --");
        expect_exit((const char *const[]){ "exec", "--", NULL }, 64,
                    "exec: a command is required after --");
        expect_exit((const char *const[]){ "exec", "--", "no-such-command-rtsoak", NULL }, 69,
                    "exec: cannot run here: command 'no-such-command-rtsoak' not found in PATH");
        expect_exit((const char *const[]){ "exec", "--", "/nonexistent/cmd", NULL }, 69,
                    "exec: cannot run here: command '/nonexistent/cmd': No such file");

        char *dir = tu_mkdtemp("exec"), path[256];
        snprintf(path, sizeof(path), "%s/not-executable", dir);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs("#!/bin/sh\n", f);
        fclose(f);
        chmod(path, 0644);
        char msg[512];
        snprintf(msg, sizeof(msg), "command '%s': not an executable file", path);
        /* root may execute nothing without an x bit either. */
        expect_exit((const char *const[]){ "exec", "--", path, NULL }, 69, msg);
        tu_rmdir(dir);

        expect_exit((const char *const[]){ "exec", "--restart-delay", "5", "--", "true", NULL }, 64,
                    "exec: --restart-delay=5:");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_restarted_and_reported),
                cmocka_unit_test(test_group_killed_at_stop),
                cmocka_unit_test(test_dies_with_rtsoak_load),
                cmocka_unit_test(test_clean_signal_state),
                cmocka_unit_test(test_cpu_measured),
                cmocka_unit_test(test_backoff),
                cmocka_unit_test(test_bad_commands),
        };
        return RUN_TESTS(tests);
}
