/* SPDX-License-Identifier: MIT */
/* The hackbench load generator, run as the real rtsoak-load: exact message counts in every mode,
 * the bytes really written, the kind of task and channel used, bad options, prompt clean stops. */
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

/* Reads one field ("wchar") of /proc/self/io: it includes what reaped descendants did. */
static uint64_t self_io(const char *field) {
        char *s = tu_read_file("/proc/self/io");
        size_t l = strlen(field);
        uint64_t v = UINT64_MAX;
        for (char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, field, l) == 0 && p[l] == ':')
                        v = strtoull(p + l + 1, NULL, 10);
        free(s);
        if (v == UINT64_MAX)
                skip();
        return v;
}

/* Processes whose parent is pid (ours: orphans come to us, we are a child subreaper); the
 * first one found in *ret_child if not NULL. */
static size_t find_children(pid_t parent, pid_t *ret_child) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;
        assert_non_null(d);
        while ((de = readdir(d))) {
                char path[300], *s;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                s = tu_read_file(path);
                /* "pid (comm) state ppid ...": comm may hold spaces, so start after ')'. */
                char *p = strrchr(s, ')');
                char state;
                int ppid;
                if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == (int) parent) {
                        if (n == 0 && ret_child)
                                *ret_child = (pid_t) atoi(de->d_name);
                        n++;
                }
                free(s);
        }
        closedir(d);
        return n;
}

static size_t count_children(pid_t parent) {
        return find_children(parent, NULL);
}

static size_t count_dir(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        size_t n = 0;
        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* Counts the open descriptors of pid whose target starts with prefix ("pipe:", "socket:"). */
static size_t count_fds(pid_t pid, const char *prefix) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(path);
        struct dirent *de;
        size_t n = 0;
        if (!d)
                return 0;
        while ((de = readdir(d))) {
                char link[128], target[128];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
                ssize_t l = readlink(link, target, sizeof(target) - 1);
                if (l <= 0)
                        continue;
                target[l] = 0;
                if (strncmp(target, prefix, strlen(prefix)) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

/* Any child of ours, live or a zombie, is a worker that outlived rtsoak-load. */
static void assert_no_leftovers(void) {
        size_t n = count_children(getpid());
        if (n)
                fail_msg("%zu processes left behind", n);
}

struct mode {
        const char *pipe, *threads;
};
static const struct mode modes[] = {
        { "--pipe=no", "--threads=no" },
        { "--pipe=yes", "--threads=no" },
        { "--pipe=no", "--threads=yes" },
        { "--pipe=yes", "--threads=yes" },
};

static void test_exact_counts(void **state) {
        /* Different shapes per mode, so that a count that ignores one option shows. */
        static const char *const shapes[][4] = {
                { "3", "4", "25", "2" },
                { "2", "7", "10", "3" },
                { "4", "3", "40", "2" },
                { "1", "9", "15", "3" },
        };
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                const char *const *s = shapes[i];
                json_t *j = tu_load_json(
                        NULL,
                        (const char *const[]){ "hackbench", "--groups", s[0], "--fds", s[1],
                                               "--loops", s[2], "--rounds", s[3], "--datasize",
                                               "333", modes[i].pipe, modes[i].threads, NULL });
                uint64_t g = strtoull(s[0], NULL, 10), f = strtoull(s[1], NULL, 10),
                         l = strtoull(s[2], NULL, 10), n = strtoull(s[3], NULL, 10);
                printf("# %s %s: %llu messages in %llu rounds\n", modes[i].pipe, modes[i].threads,
                       (unsigned long long) tu_load_count(j, "messages"),
                       (unsigned long long) tu_load_count(j, "rounds"));
                assert_int_equal(tu_load_count(j, "messages"), n * g * f * f * l);
                assert_int_equal(tu_load_count(j, "rounds"), n);
                assert_string_equal(json_string_value(json_object_get(j, "end")), "finished");
                assert_true(tu_load_rate(j, "messages") > 0);
                json_decref(j);
                assert_no_leftovers();
        }
}

static void check_bytes(const struct mode *m, const char *datasize, uint64_t size) {
        /* 2 groups of 4 senders, each sending 30 messages to each of 4 receivers. */
        const uint64_t messages = 2 * 4 * 4 * 30;
        uint64_t w0 = self_io("wchar"), r0 = self_io("rchar");
        json_t *j = tu_load_json(NULL, (const char *const[]){ "hackbench", "--groups", "2", "--fds",
                                                              "4", "--loops", "30", "--rounds", "1",
                                                              "--datasize", datasize, m->pipe,
                                                              m->threads, NULL });
        uint64_t w = self_io("wchar") - w0, r = self_io("rchar") - r0;
        printf("# %s %s --datasize=%s: wrote %llu bytes, read %llu\n", m->pipe, m->threads,
               datasize, (unsigned long long) w, (unsigned long long) r);
        assert_int_equal(tu_load_count(j, "messages"), messages);
        /* Besides the messages: the JSON report and whatever the loader reads. */
        assert_true(w >= messages * size && w <= messages * size + 16384);
        assert_true(r >= messages * size && r <= messages * size + 262144);
        json_decref(j);
}

static void test_datasize_honoured(void **state) {
        /* What the workers write and read, from the kernel's accounting of the whole process
         * tree (reaped descendants add theirs to ours). */
        check_bytes(&modes[0], "4000", 4000);
        check_bytes(&modes[0], "7", 7);
        check_bytes(&modes[3], "10K", 10240);
        check_bytes(&modes[3], "1", 1);
}

static void check_continuous(const struct mode *m) {
        /* One round is 2 x 4 x 4 x 100 = 3200 messages. */
        const uint64_t per_round = 3200;
        json_t *j = tu_load_json("1500ms", (const char *const[]){ "hackbench", "--groups", "2",
                                                                  "--fds", "4", "--loops", "100",
                                                                  m->pipe, m->threads, NULL });
        uint64_t msgs = tu_load_count(j, "messages"), rounds = tu_load_count(j, "rounds");
        printf("# %s %s: %.0f msg/s, %.1f rounds/s (%llu rounds)\n", m->pipe, m->threads,
               tu_load_rate(j, "messages"), tu_load_rate(j, "rounds"), (unsigned long long) rounds);
        assert_true(tu_load_rate(j, "messages") > 0);
        assert_true(rounds >= 3);
        /* Every finished round delivered all its messages; the round under way when the stop
         * came counts what it delivered, at most one round's worth. */
        assert_true(msgs >= rounds * per_round && msgs <= (rounds + 1) * per_round);
        assert_string_equal(json_string_value(json_object_get(j, "end")), "duration reached");
        json_decref(j);
        assert_no_leftovers();
}

static void test_continuous(void **state) {
        check_continuous(&modes[0]);
        check_continuous(&modes[3]);
}

static void test_bad_options(void **state) {
        tu_load_refused((const char *const[]){ "hackbench", "--groups", "0", NULL },
                        "hackbench: --groups=0: out of range, must be between 1 and 1000");
        tu_load_refused((const char *const[]){ "hackbench", "--fds", "0", NULL },
                        "hackbench: --fds=0: out of range, must be between 1 and 1000");
        tu_load_refused((const char *const[]){ "hackbench", "--loops", "0", NULL },
                        "hackbench: --loops=0: out of range");
        tu_load_refused((const char *const[]){ "hackbench", "--datasize", "1M", NULL },
                        "hackbench: --datasize=1M: out of range, must be between 1 and 64K");
        tu_load_refused((const char *const[]){ "hackbench", "--datasize", "65537", NULL },
                        "hackbench: --datasize=65537: out of range");
        tu_load_refused(
                (const char *const[]){ "hackbench", "--groups", "100", "--fds", "21", NULL },
                "hackbench: --groups=100 --fds=21: too many tasks, 4200 senders and "
                "receivers");
        tu_load_refused((const char *const[]){ "hackbench", "--fds", "1000", NULL },
                        "hackbench: --groups=10 --fds=1000: too many tasks");
        tu_load_refused((const char *const[]){ "hackbench", "--pipe=maybe", NULL },
                        "hackbench: --pipe=maybe: not a boolean");
        tu_load_refused((const char *const[]){ "hackbench", "--rounds", "-1", NULL },
                        "hackbench: --rounds=-1: not a whole number");
        tu_load_refused((const char *const[]){ "hackbench", "--", "x", NULL },
                        "hackbench: takes no arguments after \"--\"");
}

static void check_stop(const struct mode *m) {
        /* A round of a billion loops never ends by itself: stopping must abandon it. */
        char *argv[64];
        char out[64];
        snprintf(out, sizeof(out), "/tmp/test-loadgen-hackbench.%d.json", (int) getpid());
        tu_load_argv(argv, (const char *const[]){ "--json", NULL },
                     (const char *const[]){ "hackbench", "--groups", "2", "--fds", "5", "--loops",
                                            "1000000000", m->pipe, m->threads, NULL });
        pid_t pid = tu_spawn(argv, out, NULL);
        bool threads = strcmp(m->threads, "--threads=yes") == 0;
        bool pipes = strcmp(m->pipe, "--pipe=yes") == 0;
        char task_dir[64];
        snprintf(task_dir, sizeof(task_dir), "/proc/%d/task", (int) pid);

        /* Wait until all 20 workers run, and look at what they are. */
        size_t workers = 0;
        for (int i = 0; i < 200 && workers < 20; i++) {
                tu_sleep_ms(10);
                workers = threads ? count_dir(task_dir) - 2 : count_children(pid);
        }
        tu_sleep_ms(200);
        pid_t child = 0;
        size_t tasks = count_dir(task_dir), children = find_children(pid, &child);
        /* Thread mode holds every channel itself; a forked worker holds its group's: five
         * channels of two ends each. */
        pid_t holder = threads ? pid : child;
        size_t npipe = count_fds(holder, "pipe:"), nsock = count_fds(holder, "socket:");
        printf("# %s %s: %zu threads, %zu child processes, %zu pipe and %zu socket fds\n", m->pipe,
               m->threads, tasks, children, npipe, nsock);
        if (threads) {
                assert_int_equal(children, 0);
                assert_true(tasks >= 22); /* runner, generator and 20 workers */
                assert_true(pipes ? npipe >= 20 && nsock == 0 : nsock >= 20);
        } else {
                assert_int_equal(children, 20);
                assert_true(tasks <= 3);
                /* Plus, in both cases, the pipe that tells the generator they are done. */
                assert_true(pipes ? npipe >= 10 && nsock == 0 : nsock >= 10 && npipe <= 2);
        }

        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        int64_t ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000;
        printf("# stopped %lld ms after SIGTERM\n", (long long) ms);
        assert_true(ms < 1000);
        assert_no_leftovers();

        char *text = tu_read_file(out);
        json_t *j = tu_json(text);
        free(text);
        unlink(out);
        assert_string_equal(json_string_value(json_object_get(j, "end")), "terminated");
        assert_true(tu_load_count(j, "messages") > 0);
        assert_int_equal(tu_load_count(j, "rounds"), 0);
        json_decref(j);
}

static void test_stops_promptly(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(modes); i++)
                check_stop(&modes[i]);
}

static int setup(void **state) {
        /* Orphaned workers would come to us, where assert_no_leftovers() sees them. */
        return prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 ? -1 : 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exact_counts),   cmocka_unit_test(test_datasize_honoured),
                cmocka_unit_test(test_continuous),     cmocka_unit_test(test_bad_options),
                cmocka_unit_test(test_stops_promptly),
        };
        return RUN_TESTS_WITH(tests, setup, NULL);
}
