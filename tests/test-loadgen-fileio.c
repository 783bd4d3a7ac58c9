/* SPDX-License-Identifier: MIT */
/* The fileio load generator, run as the real rtsoak-load: real bytes in a scratch directory
 * (counted by the kernel too), the rate, read-back checks that catch a corrupted file, the
 * free-space floor, O_DIRECT, refusals, and no files left behind. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "timeutil.h"

#define MiB (1024.0 * 1024.0)

static void build_argv(char **argv, bool json, const char *duration, const char *const *gen_argv) {
        const char *pre[4];
        int k = 0;
        if (json)
                pre[k++] = "--json";
        if (duration) {
                pre[k++] = "--duration";
                pre[k++] = duration;
        }
        pre[k] = NULL;
        tu_load_argv(argv, pre, gen_argv);
}

/* Runs rtsoak-load --json to completion; returns its result, with the JSON in *ret_json
 * when it exited with 0. */
static void run_load(const char *duration, const char *const *gen_argv, struct tu_result *r,
                     json_t **ret_json) {
        char *argv[64];
        build_argv(argv, true, duration, gen_argv);
        tu_run(argv, 30000, NULL, NULL, r);
        *ret_json = r->status == 0 ? tu_json(r->out) : NULL;
}

/* Entries in dir other than "." and ".."; the first one's name in first (if non-NULL). */
static int count_entries(const char *dir, char *first, size_t len) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;
        assert_non_null(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                        if (n == 0 && first)
                                snprintf(first, len, "%s", de->d_name);
                        n++;
                }
        closedir(d);
        return n;
}

/* A field of /proc/PID/io ("wchar", "write_bytes"); -1 if absent. */
static int64_t proc_io(pid_t pid, const char *field) {
        char path[64], line[128];
        long long v = -1;
        snprintf(path, sizeof(path), "/proc/%d/io", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        size_t len = strlen(field);
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, len) == 0 && line[len] == ':') {
                        v = atoll(line + len + 1);
                        break;
                }
        fclose(f);
        return v;
}

static json_t *json_from_file(const char *path) {
        char *text = tu_read_file(path);
        assert_non_null(text);
        json_t *j = tu_json(text);
        free(text);
        return j;
}

/* The bytes it reports are the bytes the kernel saw it write, its files have the expected
 * names and size, at most one at a time per worker, and none is left afterwards. */
static void test_counts_real_bytes(void **state) {
        char *dir = tu_mkdtemp("fileio"), out[4200], *argv[64], name[256] = "", prefix[128];
        snprintf(out, sizeof(out), "%s.json", dir);
        build_argv(argv, true, NULL,
                   (const char *const[]){ "fileio", "--dir", dir, "--file-size", "4M",
                                          "--block-size", "64K", "--rate", "16M", "--min-free", "0",
                                          NULL });
        pid_t pid = tu_spawn(argv, out, NULL);
        snprintf(prefix, sizeof(prefix), "rtsoak-fileio.%d.0.", (int) pid);
        int64_t max_size = 0, wchar = -1, write_bytes = -1;
        int max_files = 0, names_ok = 0;
        for (int t = 0; t < 1600; t += 10) {
                int n = count_entries(dir, name, sizeof(name));
                max_files = n > max_files ? n : max_files;
                if (n > 0 && strncmp(name, prefix, strlen(prefix)) == 0) {
                        char path[4500];
                        struct stat st;
                        names_ok++;
                        snprintf(path, sizeof(path), "%s/%s", dir, name);
                        if (stat(path, &st) == 0 && st.st_size > max_size)
                                max_size = st.st_size;
                }
                wchar = proc_io(pid, "wchar");
                write_bytes = proc_io(pid, "write_bytes");
                tu_sleep_ms(10);
        }
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        json_t *j = json_from_file(out);
        uint64_t count = tu_load_count(j, "write");
        printf("# reported %.2f MiB written; the kernel counted %.2f MiB passed to write() and "
               "%.2f MiB sent to storage before SIGTERM; largest file %.2f MiB\n",
               (double) count / MiB, (double) wchar / MiB, (double) write_bytes / MiB,
               (double) max_size / MiB);
        assert_true(names_ok > 0);
        assert_int_equal(max_files, 1);
        assert_int_equal(max_size, 4 * 1024 * 1024);
        /* The count read after SIGTERM may include what was written while stopping: at
         * 16 MiB/s well below 2 MiB. */
        assert_true(wchar > 0 && count >= (uint64_t) wchar && count <= (uint64_t) wchar + 2 * MiB);
        if (write_bytes >= 0) /* with CONFIG_TASK_IO_ACCOUNTING */
                assert_true((double) write_bytes >= 0.9 * (double) wchar);
        /* Files read back: about one file behind the writes. */
        assert_true(tu_load_count(j, "read") + 4 * MiB + 64 * 1024 >= count);
        assert_true(tu_load_count(j, "fsync") >= 3);
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        json_decref(j);
        unlink(out);
        tu_rmdir(dir);
}

/* The rate is kept over whole files (each file's read-back is not paced): small files,
 * so that the last file's read-back does not weigh much in 2 s. */
static void test_rate_honoured(void **state) {
        char *dir = tu_mkdtemp("fileio");
        struct tu_result r;
        json_t *j;
        run_load("2s",
                 (const char *const[]){ "fileio", "--dir", dir, "--file-size", "2M", "--rate",
                                        "20M", "--min-free", "0", NULL },
                 &r, &j);
        assert_int_equal(r.status, 0);
        double rate = tu_load_rate(j, "write");
        printf("# requested 20 MiB/s, wrote %.2f MiB/s (%+.1f %%), read %.2f MiB/s\n", rate,
               (rate / 20 - 1) * 100, tu_load_rate(j, "read"));
        assert_true(rate >= 20 * 0.85 && rate <= 20 * 1.15);
        assert_null(strstr(r.err, "data_mismatch"));
        json_decref(j);
        tu_result_done(&r);
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        tu_rmdir(dir);
}

/* Overwrites a sector of a file the generator is still writing: the read-back check must
 * report it at that offset.  A clean run of two workers reports nothing. */
static void test_verify_catches_corruption(void **state) {
        char *dir = tu_mkdtemp("fileio"), err[4200], *argv[64], name[256];
        snprintf(err, sizeof(err), "%s.err", dir);
        build_argv(argv, false, NULL,
                   (const char *const[]){ "fileio", "--dir", dir, "--file-size", "4M", "--rate",
                                          "8M", "--min-free", "0", NULL });
        pid_t pid = tu_spawn(argv, NULL, err);
        bool corrupted = false;
        char *text = NULL, *hit = NULL;
        for (int t = 0; t < 4000 && !hit; t += 10) {
                if (!corrupted && count_entries(dir, name, sizeof(name)) == 1) {
                        char path[4500];
                        struct stat st;
                        snprintf(path, sizeof(path), "%s/%s", dir, name);
                        if (stat(path, &st) == 0 && st.st_size >= 1024 * 1024) {
                                int fd = open(path, O_WRONLY | O_CLOEXEC);
                                if (fd >= 0) {
                                        char junk[512];
                                        memset(junk, 0xa5, sizeof(junk));
                                        corrupted = pwrite(fd, junk, sizeof(junk), 4096) == 512;
                                        close(fd);
                                }
                        }
                }
                free(text);
                text = tu_read_file(err);
                hit = text ? strstr(text, "fileio: data_mismatch: ") : NULL;
                tu_sleep_ms(10);
        }
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        assert_true(corrupted);
        if (!hit)
                fail_msg("no data_mismatch reported; stderr: %s", text ?: "");
        long long offset = atoll(hit + strlen("fileio: data_mismatch: "));
        printf("# %.*s\n", (int) strcspn(hit, "\n"), hit);
        /* The first differing byte is in the overwritten sector (usually its first byte). */
        assert_true(offset >= 4096 && offset < 4096 + 512);
        free(text);
        unlink(err);
        assert_int_equal(count_entries(dir, NULL, 0), 0);

        struct tu_result r;
        json_t *j;
        run_load("1s",
                 (const char *const[]){ "fileio", "--dir", dir, "--file-size", "4M", "--workers",
                                        "2", "--min-free", "0", NULL },
                 &r, &j);
        assert_int_equal(r.status, 0);
        assert_true(tu_load_count(j, "read") >= 4 * 1024 * 1024);
        assert_null(strstr(r.err, "data_mismatch"));
        json_decref(j);
        tu_result_done(&r);
        tu_rmdir(dir);
}

/* With --min-free above what the file system has, nothing is written and the pause is
 * reported once (the free space is checked every second meanwhile). */
static void test_min_free_stops_writing(void **state) {
        char *dir = tu_mkdtemp("fileio");
        struct tu_result r;
        json_t *j;
        run_load("2500ms",
                 (const char *const[]){ "fileio", "--dir", dir, "--min-free", "1000T", NULL }, &r,
                 &j);
        assert_int_equal(r.status, 0);
        printf("# %s", r.err);
        assert_int_equal(tu_load_count(j, "write"), 0);
        assert_int_equal(tu_count_lines(r.err, "fileio: low_space: "), 1);
        assert_int_equal(tu_count_lines(r.err, "fileio: space_ok: "), 0);
        assert_non_null(strstr(r.err, "--min-free is 1000.0 TiB: writing paused"));
        json_decref(j);
        tu_result_done(&r);
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        tu_rmdir(dir);
}

/* --direct in dir: it works (bytes written and read back, checked), or the probe refuses
 * with the reason, naming the directory and its file system (fs).  Returns whether it
 * worked. */
static bool try_direct(const char *dir, const char *fs) {
        struct tu_result r;
        json_t *j;
        run_load("1s",
                 (const char *const[]){ "fileio", "--dir", dir, "--direct", "--file-size", "4M",
                                        "--min-free", "0", NULL },
                 &r, &j);
        bool worked = r.status == 0;
        if (worked) {
                printf("# O_DIRECT on %s: wrote %.1f MiB/s, read %.1f MiB/s\n", dir,
                       tu_load_rate(j, "write"), tu_load_rate(j, "read"));
                assert_true(tu_load_count(j, "write") > 0 && tu_load_count(j, "read") > 0);
                assert_null(strstr(r.err, "data_mismatch"));
                json_decref(j);
        } else {
                printf("# O_DIRECT on %s: %s", dir, r.err);
                assert_int_equal(r.status, 69);
                assert_non_null(strstr(r.err, "fileio: cannot run here: O_DIRECT is not "
                                              "supported on "));
                assert_non_null(strstr(r.err, dir));
                assert_non_null(strstr(r.err, fs));
        }
        tu_result_done(&r);
        return worked;
}

static void test_direct(void **state) {
        char tmpl[] = "/var/tmp/rtsoak-test-fileio.XXXXXX";
        char *dir = mkdtemp(tmpl);
        assert_non_null(dir);
        try_direct(dir, "(");
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        assert_int_equal(rmdir(dir), 0);

        /* tmpfs refused O_DIRECT before Linux 6.6 and takes it since: either is fine, as
         * long as a refusal is clean. */
        char shm[] = "/dev/shm/rtsoak-test-fileio.XXXXXX";
        if (mkdtemp(shm)) {
                if (try_direct(shm, "(tmpfs)"))
                        printf("# (tmpfs accepts O_DIRECT on this kernel)\n");
                assert_int_equal(count_entries(shm, NULL, 0), 0);
                rmdir(shm);
        }
}

static void expect_status(int status, const char *const *gen_argv, const char *msg) {
        char *argv[64];
        build_argv(argv, false, NULL, gen_argv);
        struct tu_result r;
        tu_run(argv, 10000, NULL, NULL, &r);
        assert_int_equal(r.status, status);
        if (!strstr(r.err, msg))
                fail_msg("expected '%s' in: %s", msg, r.err);
        tu_result_done(&r);
}

static void test_bad_options(void **state) {
        expect_status(64, (const char *const[]){ "fileio", "--block-size", "256", NULL },
                      "fileio: --block-size=256: out of range, must be between 512 and 64M");
        expect_status(64, (const char *const[]){ "fileio", "--block-size", "128M", NULL },
                      "fileio: --block-size=128M: out of range, must be between 512 and 64M");
        expect_status(64, (const char *const[]){ "fileio", "--workers", "0", NULL },
                      "fileio: --workers=0: out of range, must be between 1 and 64");
        expect_status(64, (const char *const[]){ "fileio", "--file-size", "1K", NULL },
                      "fileio: --file-size=1K: out of range, must be between 4K and 1T");
        expect_status(
                64,
                (const char *const[]){ "fileio", "--block-size", "1M", "--file-size", "64K", NULL },
                "fileio: --block-size=1048576 is larger than --file-size=65536");
        expect_status(64, (const char *const[]){ "fileio", "--direct", "--block-size", "6K", NULL },
                      "fileio: --direct needs --block-size and --file-size to be multiples of "
                      "4096 bytes");
        expect_status(64, (const char *const[]){ "fileio", "--rate", "1", "--workers", "2", NULL },
                      "fileio: --rate=1 is less than one byte per second");
        expect_status(64, (const char *const[]){ "fileio", "--fsync=maybe", NULL },
                      "fileio: --fsync=maybe: not a boolean");
        expect_status(64, (const char *const[]){ "fileio", "--dir", "", NULL },
                      "fileio: --dir must not be empty");
}

static void test_probe_refuses(void **state) {
        expect_status(69, (const char *const[]){ "fileio", "--dir", "/nonexistent/rtsoak", NULL },
                      "fileio: cannot run here: /nonexistent/rtsoak does not exist");
        expect_status(69, (const char *const[]){ "fileio", "--dir", "/etc/passwd", NULL },
                      "fileio: cannot run here: /etc/passwd is not a directory");
}

static void test_stops_promptly_and_cleans_up(void **state) {
        char *dir = tu_mkdtemp("fileio");
        char *argv[64];
        build_argv(argv, false, NULL,
                   (const char *const[]){ "fileio", "--dir", dir, "--workers", "2", "--file-size",
                                          "32M", "--min-free", "0", NULL });
        pid_t pid = tu_spawn(argv, NULL, NULL);
        /* Each worker holds one file at a time; between two files it holds none, so look a
         * few times (never more than two, the workers). */
        int files = 0, most = 0;
        for (int i = 0; i < 60 && (i < 8 || files == 0); i++) {
                tu_sleep_ms(50);
                files = count_entries(dir, NULL, 0);
                most = files > most ? files : most;
        }
        files = most;
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        int64_t ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000;
        printf("# %d files while running, stopped %lld ms after SIGTERM\n", files, (long long) ms);
        assert_true(files >= 1 && files <= 2);
        assert_true(ms < 1000);
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        tu_rmdir(dir);
}

static void test_leftovers_removed(void **state) {
        char *dir = tu_mkdtemp("fileio-left"), path[600], kept[600];
        /* A PID that is surely gone: a child we have reaped. */
        pid_t dead = fork();
        if (dead == 0)
                _exit(0);
        waitpid(dead, NULL, 0);
        snprintf(path, sizeof(path), "%s/rtsoak-fileio.%d.0.7", dir, (int) dead);
        snprintf(kept, sizeof(kept), "%s/rtsoak-fileio.%d.0.7", dir, (int) getpid());
        for (const char *p = path;; p = kept) {
                FILE *f = fopen(p, "we");
                assert_non_null(f);
                fputs("left", f);
                fclose(f);
                if (p == kept)
                        break;
        }
        char *argv[64];
        struct tu_result r;
        tu_load_argv(argv, (const char *const[]){ "--duration", "300ms", NULL },
                     (const char *const[]){ "fileio", "--dir", dir, "--file-size", "64K", NULL });
        assert_int_equal(tu_run(argv, 20000, NULL, NULL, &r), 0);
        /* The dead process's file is gone and said so; a live process's file is kept. */
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(access(kept, F_OK), 0);
        assert_non_null(strstr(r.err, "leftover_removed"));
        tu_result_done(&r);
        tu_rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_leftovers_removed),
                cmocka_unit_test(test_counts_real_bytes),
                cmocka_unit_test(test_rate_honoured),
                cmocka_unit_test(test_verify_catches_corruption),
                cmocka_unit_test(test_min_free_stops_writing),
                cmocka_unit_test(test_direct),
                cmocka_unit_test(test_bad_options),
                cmocka_unit_test(test_probe_refuses),
                cmocka_unit_test(test_stops_promptly_and_cleans_up),
        };
        return RUN_TESTS(tests);
}
