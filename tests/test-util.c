/* SPDX-License-Identifier: MIT */
/* Implementation of the integration test helpers.  Plain fork/exec with pipes, read with
 * poll(), so a hung child shows up as a timeout, not as a hung test. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"

void tu_result_done(struct tu_result *r) {
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
}

char *tu_mkdtemp(const char *name) {
        char *d;
        if (asprintf(&d, "/tmp/rtsoak-%s-XXXXXX", name) < 0 || !mkdtemp(d))
                fail_msg("cannot create a temporary directory");
        return d;
}

void tu_rmdir(char *dir) {
        char *cmd;
        if (!dir)
                return;
        if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0) {
                if (system(cmd) != 0)
                        fprintf(stderr, "# could not remove %s\n", dir);
                free(cmd);
        }
        free(dir);
}

const char *tu_bin(const char *env) {
        const char *p = getenv(env);
        if (!p)
                fail_msg("%s is not set (run the tests through meson)", env);
        return p;
}

void tu_daemon_argv(char **argv, char *set_db, const char *const *extra) {
        int n = 0;
        argv[n++] = (char *) tu_bin("RTSOAKD");
        argv[n++] = "--config";
        argv[n++] = "/dev/null";
        argv[n++] = "--set";
        argv[n++] = set_db;
        argv[n++] = "--set";
        argv[n++] = "Storage.Interval=1s";
        /* No load unless a test asks for one; the loads are the build's rtsoak-load. */
        argv[n++] = "--set";
        argv[n++] = "Schedule.Rotation=idle 1h";
        /* Not the machine's own pstore flight record (a test that wants one sets its own). */
        argv[n++] = "--set";
        argv[n++] = "Forensics.FlightRecorder=\"\"";
        /* No trace flight recorder either: tests/test-trace.c turns it on. */
        argv[n++] = "--set";
        argv[n++] = "Trace.Enabled=no";
        static char helper[4200];
        const char *load = getenv("RTSOAK_LOAD");
        if (load) {
                snprintf(helper, sizeof(helper), "Load.Helper=%s", load);
                argv[n++] = "--set";
                argv[n++] = helper;
        }
        /* Sanitizer builds cannot lock their shadow memory; the suite says so via env. */
        const char *san = getenv("RTSOAKD_TEST_SET");
        if (san && *san) {
                argv[n++] = "--set";
                argv[n++] = (char *) san;
        }
        for (; extra && *extra && n < 47; extra++)
                argv[n++] = (char *) *extra;
        argv[n] = NULL;
}

void tu_sleep_ms(int ms) {
        struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int status_of(int st) {
        if (WIFEXITED(st))
                return WEXITSTATUS(st);
        if (WIFSIGNALED(st))
                return 128 + WTERMSIG(st);
        return -1;
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void append(char **buf, size_t *len, const char *data, size_t n) {
        char *b = realloc(*buf, *len + n + 1);
        assert_non_null(b);
        memcpy(b + *len, data, n);
        *len += n;
        b[*len] = '\0';
        *buf = b;
}

int tu_run(char *const argv[], int timeout_ms, void (*setup)(void *), void *data,
           struct tu_result *ret) {
        int out[2], err[2];
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        assert_int_equal(pipe2(err, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(out[1], STDOUT_FILENO);
                dup2(err[1], STDERR_FILENO);
                if (setup)
                        setup(data);
                execv(argv[0], argv);
                fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        close(out[1]);
        close(err[1]);

        char *o = NULL, *e = NULL;
        size_t ol = 0, el = 0;
        append(&o, &ol, "", 0);
        append(&e, &el, "", 0);
        struct pollfd fds[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
        int open_fds = 2;
        int64_t deadline = mono_ms() + timeout_ms;
        bool killed = false;
        while (open_fds > 0) {
                int64_t left = deadline - mono_ms();
                if (left <= 0 && !killed) {
                        kill(pid, SIGKILL);
                        killed = true;
                        left = 1000;
                }
                int n = poll(fds, 2, (int) (left > 0 ? left : 1000));
                if (n < 0 && errno == EINTR)
                        continue;
                for (int i = 0; i < 2; i++) {
                        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        char buf[8192];
                        ssize_t r = read(fds[i].fd, buf, sizeof(buf));
                        if (r <= 0) {
                                close(fds[i].fd);
                                fds[i].fd = -1;
                                open_fds--;
                        } else if (i == 0)
                                append(&o, &ol, buf, (size_t) r);
                        else
                                append(&e, &el, buf, (size_t) r);
                }
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        ret->status = status_of(st);
        ret->out = o;
        ret->err = e;
        if (killed)
                fprintf(stderr, "# %s timed out after %d ms\n", argv[0], timeout_ms);
        return ret->status;
}

pid_t tu_spawn(char *const argv[], const char *out_path, const char *err_path) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int o = open(out_path ?: "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                int e = open(err_path ?: "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (o < 0 || e < 0)
                        _exit(126);
                dup2(o, STDOUT_FILENO);
                dup2(e, STDERR_FILENO);
                execv(argv[0], argv);
                _exit(127);
        }
        return pid;
}

int tu_wait(pid_t pid, int timeout_ms) {
        int64_t deadline = mono_ms() + timeout_ms;
        int st;
        for (;;) {
                pid_t r = waitpid(pid, &st, WNOHANG);
                if (r == pid)
                        return status_of(st);
                if (mono_ms() > deadline) {
                        fprintf(stderr, "# pid %d still running after %d ms: killing it\n", pid,
                                timeout_ms);
                        kill(pid, SIGKILL);
                        waitpid(pid, &st, 0);
                        return -1;
                }
                tu_sleep_ms(5);
        }
}

json_t *tu_json(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fail_msg("not JSON (%s at line %d): %.500s", e.text, e.line, text);
        return j;
}

long long tu_jint(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                fail_msg("'%s' is not an integer", key);
        return json_integer_value(v);
}

char *tu_read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t len = 0;
        if (!f)
                return strdup("");
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                append(&buf, &len, chunk, n);
        fclose(f);
        return buf ?: strdup("");
}

size_t tu_count_lines(const char *s, const char *prefix) {
        size_t n = 0, l = strlen(prefix);
        for (const char *p = s; p && *p;) {
                if (strncmp(p, prefix, l) == 0)
                        n++;
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        return n;
}

bool tu_wait_for(const char *path, bool (*found)(const char *text, void *arg), void *arg,
                 int timeout_ms) {
        for (int waited = 0;; waited += 20) {
                char *s = tu_read_file(path);
                bool ok = s && found(s, arg);
                free(s);
                if (ok)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                tu_sleep_ms(20);
        }
}

static bool holds_text(const char *text, void *arg) {
        return strstr(text, arg) != NULL;
}

bool tu_wait_for_text(const char *path, const char *text, int timeout_ms) {
        return tu_wait_for(path, holds_text, (void *) text, timeout_ms);
}

/* Runs rtsoak-server --db=db command name [extra1 [extra2]]: the token it printed. */
static void server_token(const char *db, const char *command, const char *name, const char *extra1,
                         const char *extra2, char token[static 80]) {
        char dbarg[600];
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db);
        char *argv[] = { (char *) tu_bin("RTSOAK_SERVER"),
                         dbarg,
                         (char *) command,
                         (char *) name,
                         (char *) extra1,
                         (char *) extra2,
                         NULL };
        struct tu_result r;
        if (tu_run(argv, 20000, NULL, NULL, &r) != 0)
                fail_msg("%s %s failed (%d): %s", command, name, r.status, r.err);
        /* Exactly one line: 64 lowercase hex digits. */
        assert_int_equal(strlen(r.out), 65);
        assert_int_equal(strspn(r.out, "0123456789abcdef"), 64);
        assert_true(r.out[64] == '\n');
        snprintf(token, 80, "%.64s", r.out);
        tu_result_done(&r);
}

void tu_server_enroll(const char *db, const char *id, const char *extra1, const char *extra2,
                      char token[static 80]) {
        server_token(db, "enroll", id, extra1, extra2, token);
}

void tu_server_admin_token(const char *db, const char *name, char token[static 80]) {
        server_token(db, "admin-token", name, NULL, NULL, token);
}

pid_t tu_server_start(const char *db, const char *log, const char *listen, const char *const *extra,
                      char *url, size_t url_size) {
        char dbarg[600];
        char *argv[24];
        int n = 0;
        snprintf(dbarg, sizeof(dbarg), "--db=%s", db);
        argv[n++] = (char *) tu_bin("RTSOAK_SERVER");
        argv[n++] = dbarg;
        argv[n++] = "--listen";
        argv[n++] = (char *) listen;
        for (; extra && *extra && n < 23; extra++)
                argv[n++] = (char *) *extra;
        argv[n] = NULL;
        unlink(log);
        pid_t pid = tu_spawn(argv, NULL, log);
        for (int i = 0; i < 1000; i++) {
                char *text = tu_read_file(log);
                char *at = strstr(text, "Listening on ");
                if (at) {
                        at += strlen("Listening on ");
                        snprintf(url, url_size, "%.*s", (int) strcspn(at, " \n"), at);
                        free(text);
                        return pid;
                }
                free(text);
                int st;
                if (waitpid(pid, &st, WNOHANG) == pid) /* it exited */
                        break;
                tu_sleep_ms(10);
        }
        fail_msg("rtsoak-server did not start: %s", tu_read_file(log));
        return -1;
}

void tu_make_cert(const char *cert, const char *key) {
        char cmd[2048];
        if (system("command -v openssl >/dev/null") != 0)
                skip();
        snprintf(cmd, sizeof(cmd),
                 "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                 "-addext subjectAltName=IP:127.0.0.1 -keyout '%s' -out '%s' 2>/dev/null",
                 key, cert);
        assert_int_equal(system(cmd), 0);
}

const char *tu_machine_id(void) {
        static char id[40];
        char *text = tu_read_file("/etc/machine-id");
        snprintf(id, sizeof(id), "%.32s", text);
        free(text);
        return id;
}

int64_t tu_process_cpu_ns(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int64_t sum = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char p[128];
                snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", (int) pid, de->d_name);
                FILE *f = fopen(p, "re");
                if (!f)
                        continue;
                long long ns;
                if (fscanf(f, "%lld", &ns) == 1)
                        sum += ns;
                fclose(f);
        }
        closedir(d);
        return sum;
}

void tu_load_argv(char **argv, const char *const *pre, const char *const *gen_argv) {
        int n = 0;
        argv[n++] = (char *) tu_bin("RTSOAK_LOAD");
        for (; pre && *pre && n < 62; pre++)
                argv[n++] = (char *) *pre;
        for (; *gen_argv && n < 63; gen_argv++)
                argv[n++] = (char *) *gen_argv;
        argv[n] = NULL;
}

pid_t tu_load_spawn(const char *const *gen_argv) {
        char *argv[64];
        tu_load_argv(argv, NULL, gen_argv);
        return tu_spawn(argv, NULL, NULL);
}

int64_t tu_load_stop_ms(pid_t pid) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 5000), 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t ms = (int64_t) (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
        printf("# stopped %lld ms after SIGTERM\n", (long long) ms);
        assert_true(ms < 1000);
        return ms;
}

void tu_load_refused(const char *const *gen_argv, const char *msg) {
        char *argv[64];
        struct tu_result r;
        tu_load_argv(argv, NULL, gen_argv);
        tu_run(argv, 10000, NULL, NULL, &r);
        /* A generator's bad option is a usage error of rtsoak-load (64). */
        if (r.status != 64 || !strstr(r.err, msg))
                fail_msg("expected exit 64 and '%s', got %d: %s", msg, r.status, r.err);
        tu_result_done(&r);
}

json_t *tu_load_json(const char *duration, const char *const *gen_argv) {
        char *argv[64];
        const char *pre[] = { "--json", duration ? "--duration" : NULL, duration, NULL };
        tu_load_argv(argv, pre, gen_argv);
        struct tu_result r;
        tu_run(argv, 30000, NULL, NULL, &r);
        if (r.status != 0)
                fail_msg("rtsoak-load exited with %d: %s", r.status, r.err);
        json_t *j = tu_json(r.out);
        tu_result_done(&r);
        return j;
}

static json_t *load_metric(json_t *j, const char *metric) {
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(j, "metrics"), i, m) {
                if (strcmp(json_string_value(json_object_get(m, "name")) ?: "", metric) == 0)
                        return m;
        }
        fail_msg("rtsoak-load reported no metric '%s'", metric);
        return NULL;
}

double tu_load_rate(json_t *j, const char *metric) {
        return json_number_value(json_object_get(load_metric(j, metric), "rate"));
}

uint64_t tu_load_count(json_t *j, const char *metric) {
        return (uint64_t) json_integer_value(json_object_get(load_metric(j, metric), "count"));
}

void tu_enroll_this_machine(const char *db, const char *token_file) {
        char token[80];
        tu_server_enroll(db, tu_machine_id(), NULL, NULL, token);
        FILE *f = fopen(token_file, "we");
        assert_non_null(f);
        fprintf(f, "%s\n", token);
        assert_int_equal(fclose(f), 0);
}

void tu_server_stop(pid_t pid) {
        kill(pid, SIGTERM);
        assert_int_equal(tu_wait(pid, 10000), 0);
}

void tu_remove_db(const char *path) {
        char p[4200];
        const char *suffix[] = { "", "-wal", "-shm", ".lock" };
        for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
                snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
                unlink(p);
        }
}
