/* SPDX-License-Identifier: MIT */
/* The trace flight recorder in the real rtsoakd: a SCHED_FIFO thread above the probe's priority
 * spins for 20 ms on a probed CPU, ten times; every stall's capture must name that thread (its
 * name and pid), all but one with at least 90 % of its spin as its run (this VM can stall
 * inside an interrupt, which that capture rightly charges to the interrupt), while intervals
 * keep being stored, and the farm server that receives them must name it under the violations
 * of its verdict.  Two CPUs stalled together, and a CPU whose capture thread a real-time task
 * keeps from running, still give whole captures.  Without tracefs (a tmpfs mounted over it in a
 * mount namespace of rtsoakd's own), read-only or with the instance held by someone else, the soak
 * runs as before and says why there are no captures.
 *
 * rtsoakd runs in a mount namespace of its own (unshare -m) where tracefs is mounted as the
 * case needs, so that the machine's own mounts are left alone. */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "test-util.h"
#include "test-farmdb.h"
#include "cpuset.h"
#include "macro.h"

#define STALL_US 20000
#define STALLS 10
#define UNSHARE "/usr/bin/unshare"

/* What to mount at /sys/kernel/tracing in rtsoakd's namespace. */
enum mount_as { TRACEFS, TRACEFS_RO, TMPFS, UNMOUNTED };

/* Shell: tracefs at /sys/kernel/tracing, mounted there unless it already is (systemd mounts
 * it at boot; a second mount of it there fails). */
#define IS_TRACEFS "[ \"$(stat -f -c %T /sys/kernel/tracing)\" = tracefs ]"
#define MOUNT_TRACEFS \
        "{ mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || " IS_TRACEFS "; }"
/* The same read-only: where it is mounted already, a read-only bind of it in the namespace. */
#define MOUNT_TRACEFS_RO                                                                  \
        "{ mount -t tracefs -o ro nodev /sys/kernel/tracing 2>/dev/null || { " IS_TRACEFS \
        " && mount --bind /sys/kernel/tracing /sys/kernel/tracing && "                    \
        "mount -o remount,bind,ro /sys/kernel/tracing; }; }"

static const char *const scripts[] = {
        [TRACEFS] = MOUNT_TRACEFS " || exit 125; exec \"$@\"",
        [TRACEFS_RO] = MOUNT_TRACEFS_RO " || exit 125; exec \"$@\"",
        [TMPFS] = "mount -t tmpfs none /sys/kernel/tracing || exit 125; exec \"$@\"",
        /* Nothing on the kernel's mount point, as on a machine where nobody mounted it. */
        [UNMOUNTED] = "while umount /sys/kernel/tracing 2>/dev/null; do :; done; "
                      "[ \"$(stat -f -c %T /sys/kernel/tracing)\" = sysfs ] || exit 125; "
                      "exec \"$@\"",
};

struct soak {
        char *dir;
        char db[512], set_db[600], dbarg[600], err[600];
        pid_t pid;
};

/* The cases without a farm server run on the SQLite pass alone. */
static void skip_on_pg(void) {
        if (tu_pg()) {
                fprintf(stderr, "# no farm in this case: run by the SQLite pass\n");
                skip();
        }
}

static void need_root(void) {
        if (geteuid() != 0 || access(UNSHARE, X_OK) != 0) {
                fprintf(stderr, "# needs root and %s (SCHED_FIFO, a mount namespace)\n", UNSHARE);
                skip();
        }
}

/* rtsoakd in a mount namespace of its own, with the flight recorder on and extra settings. */
static void start(struct soak *s, const char *name, enum mount_as how, const char *const *extra) {
        s->dir = tu_mkdtemp(name);
        snprintf(s->db, sizeof(s->db), "%s/rtsoak.db", s->dir);
        snprintf(s->set_db, sizeof(s->set_db), "Storage.Path=%s", s->db);
        snprintf(s->dbarg, sizeof(s->dbarg), "--db=%s", s->db);
        snprintf(s->err, sizeof(s->err), "%s/rtsoakd.err", s->dir);
        char *daemon[48], *argv[56];
        const char *more[24] = { "--set", "Trace.Enabled=yes" };
        size_t n = 2;
        for (; extra && *extra && n < ELEMENTSOF(more) - 1; extra++)
                more[n++] = *extra;
        more[n] = NULL;
        tu_daemon_argv(daemon, s->set_db, more);
        size_t k = 0;
        argv[k++] = UNSHARE;
        argv[k++] = "-m";
        argv[k++] = "sh";
        argv[k++] = "-c";
        argv[k++] = (char *) scripts[how];
        argv[k++] = "sh";
        for (size_t i = 0; daemon[i] && k < ELEMENTSOF(argv) - 1; i++)
                argv[k++] = daemon[i];
        argv[k] = NULL;
        s->pid = tu_spawn(argv, NULL, s->err);
        if (!tu_wait_for_text(s->err, "probing CPUs", 30000)) {
                int st = tu_wait(s->pid, 1000);
                if (st == 125) {
                        fprintf(stderr, "# cannot mount in a mount namespace here\n");
                        skip();
                }
                fail_msg("rtsoakd did not start probing within 30 s (%d):\n%s", st,
                         tu_read_file(s->err));
        }
}

static char *finish(struct soak *s) {
        int st = tu_wait(s->pid, 30000);
        char *err = tu_read_file(s->err);
        if (st != 0)
                fail_msg("rtsoakd exited with %d:\n%s", st, err);
        return err;
}

static json_t *rtsoak_json(struct soak *s, const char *cmd, const char *arg) {
        char *argv[] = {
                (char *) tu_bin("RTSOAK"), s->dbarg, (char *) cmd, "--json", (char *) arg, NULL
        };
        struct tu_result r;
        if (tu_run(argv, 20000, NULL, NULL, &r) != 0)
                fail_msg("rtsoak %s failed: %s", cmd, r.err);
        json_t *j = tu_json(r.out);
        tu_result_done(&r);
        return j;
}

static char *rtsoak_text(struct soak *s, const char *cmd, const char *arg, const char *arg2) {
        char *argv[] = {
                (char *) tu_bin("RTSOAK"), s->dbarg, (char *) cmd, (char *) arg, (char *) arg2, NULL
        };
        struct tu_result r;
        if (tu_run(argv, 20000, NULL, NULL, &r) != 0)
                fail_msg("rtsoak %s %s failed: %s", cmd, arg ?: "", r.err);
        char *out = strdup(r.out);
        tu_result_done(&r);
        return out;
}

/* The intervals stored for the first CPU. */
static size_t intervals_stored(struct soak *s) {
        json_t *j = rtsoak_json(s, "report", NULL);
        size_t n = (size_t) tu_jint(json_array_get(json_object_get(j, "cpus"), 0), "intervals");
        json_decref(j);
        return n;
}

struct stall {
        long long r0, r1;
};

/* The injector: count stalls of stall_us at SCHED_FIFO prio on cpu, gap_ms apart, from when
 * ("--delay-ms=D" or "--at-ns=T"), printed into out; name_arg "--name-hex=H" or NULL.  Its leak
 * check is left out: built with AddressSanitizer, that check at exit scans its memory in a task of
 * its own at its priority on the stalled CPU, a stall of its own (tens of ms), rightly captured
 * with that task as the culprit.  Not wanted here. */
static pid_t spawn_stall(int cpu, int prio, int stall_us, int count, int gap_ms, const char *when,
                         const char *out, const char *name_arg) {
        char cpu_arg[24], prio_arg[24], stall[32], count_arg[24], gap[24];
        snprintf(cpu_arg, sizeof(cpu_arg), "--cpu=%d", cpu);
        snprintf(prio_arg, sizeof(prio_arg), "--priority=%d", prio);
        snprintf(stall, sizeof(stall), "--stall-us=%d", stall_us);
        snprintf(count_arg, sizeof(count_arg), "--count=%d", count);
        snprintf(gap, sizeof(gap), "--gap-ms=%d", gap_ms);
        char *argv[] = { (char *) tu_bin("STALL_INJECT"),
                         cpu_arg,
                         prio_arg,
                         stall,
                         count_arg,
                         gap,
                         (char *) when,
                         (char *) name_arg,
                         NULL };
        const char *asan = getenv("ASAN_OPTIONS");
        char *asan_was = asan ? strdup(asan) : NULL;
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        pid_t pid = tu_spawn(argv, out, NULL);
        if (asan_was)
                setenv("ASAN_OPTIONS", asan_was, 1);
        else
                unsetenv("ASAN_OPTIONS");
        free(asan_was);
        return pid;
}

/* The stall injector of these cases: STALL_US at SCHED_FIFO 90. */
static pid_t spawn_injector(int cpu, int count, int gap_ms, const char *when, const char *out) {
        return spawn_stall(cpu, 90, STALL_US, count, gap_ms, when, out, NULL);
}

/* The stalls the injector printed: exactly want of them. */
static void read_stalls(const char *out, struct stall *st, int want) {
        int n = 0;
        char *text = tu_read_file(out);
        for (char *line = text; line && *line && n < want; line = strchr(line, '\n')) {
                if (*line == '\n')
                        line++;
                if (sscanf(line, "stall %lld %lld", &st[n].r0, &st[n].r1) == 2)
                        n++;
        }
        free(text);
        assert_int_equal(n, want);
}

/* How many violations the run's status tells as not captured (rtsoak status: trace.skipped),
 * for the case that allows one stall without a capture; 0 elsewhere. */
static long long told_not_captured;

/* Whether a capture of the CPU after time t says that the probe skipped a capture before it
 * (its capture thread was still busy): a stall the recorder tells it missed. */
static bool skip_counted(json_t *tr, int cpu, long long t) {
        json_t *c;
        size_t i;
        json_array_foreach (tr, i, c)
                if (tu_jint(c, "cpu") == cpu && tu_jint(c, "time_ns") > t &&
                    tu_jint(c, "skipped") > 0)
                        return true;
        return false;
}

/* Every capture of CPU cpu, against the stalls' times: what a failure is to be read with. */
static void show_captures(json_t *tr, int cpu, const struct stall *st, int n) {
        json_t *t;
        size_t i;
        for (int k = 0; k < n; k++)
                fprintf(stderr, "# CPU %d stall %d: %lld..%lld\n", cpu, k, st[k].r0, st[k].r1);
        json_array_foreach (tr, i, t)
                if (tu_jint(t, "cpu") == cpu)
                        fprintf(stderr, "# capture %lld: at %lld, %lld us late, skipped %lld: %s\n",
                                tu_jint(t, "id"), tu_jint(t, "time_ns"),
                                tu_jint(t, "latency_ns") / 1000, tu_jint(t, "skipped"),
                                json_string_value(json_object_get(t, "summary")));
        fprintf(stderr, "# not captured by the run's status: %lld\n", told_not_captured);
}

/* Every stall has exactly one capture on cpu, naming the injector (thread stall-inject, its
 * pid); their ids into ids, and into ran whether the injector's run is at least 90 % of its
 * spin and at most the lateness (this VM can stall inside an interrupt for milliseconds: that
 * time is the interrupt's, rightly, and the caller allows a few such captures).  This VM can
 * also hold the CPU for a hundred milliseconds while the probe thread is current, which the
 * kernel charges to the probe itself, with the stall inside that lateness: one stall of the
 * CPU may have such a capture instead (the probe its culprit, late by more than three times
 * the spin), told as no capture; then every other stall has the injector's. */
static void captures_name_injector(json_t *tr, int cpu, pid_t ipid, const struct stall *st, int n,
                                   long long *ids, bool *ran) {
        json_t *t;
        size_t i;
        int named[STALLS] = {}, held = 0;
        char probe[32];
        snprintf(probe, sizeof(probe), "rtsoak-cpu%d", cpu);
        assert_true(json_is_array(tr));
        json_array_foreach (tr, i, t) {
                long long when = tu_jint(t, "time_ns"), lat = tu_jint(t, "latency_ns");
                json_t *c = json_object_get(t, "culprit");
                for (int k = 0; k < n; k++) {
                        /* The probe's late time (from its due time to its wake-up) overlaps
                         * the stall: this VM can hold the probe for milliseconds before the
                         * stall began, its due time then well before the stall. */
                        if (tu_jint(t, "cpu") != cpu || when > st[k].r1 || when + lat < st[k].r0)
                                continue;
                        const char *kind = json_string_value(json_object_get(c, "kind"));
                        const char *name = json_string_value(json_object_get(c, "name"));
                        long long pid = json_integer_value(json_object_get(c, "pid"));
                        long long dur = json_integer_value(json_object_get(c, "duration_ns"));
                        fprintf(stderr, "# CPU %d stall %d: %lld us late, %s\n", cpu, k, lat / 1000,
                                json_string_value(json_object_get(t, "summary")));
                        long long spun = st[k].r1 - st[k].r0;
                        bool injector = strcmp(kind ?: "", "thread") == 0 &&
                                        strcmp(name ?: "", "stall-inject") == 0 && pid == ipid;
                        if (!injector && strcmp(kind ?: "", "thread") == 0 &&
                            strcmp(name ?: "", probe) == 0 && lat > 3 * spun && held++ == 0) {
                                fprintf(stderr, "# CPU %d stall %d: held by the VM\n", cpu, k);
                                if (named[k] == 0)
                                        named[k] = -1; /* unless the injector's comes too */
                                continue;
                        }
                        if (!injector)
                                fail_msg("CPU %d stall %d: the culprit is %s %s pid %lld, not "
                                         "stall-inject pid %d",
                                         cpu, k, kind, name, pid, ipid);
                        /* At least 90 % of its spin, at most the lateness: it also ran
                         * before and after its spin (printing it, slow at first under
                         * AddressSanitizer). */
                        ran[k] = dur >= spun * 9 / 10 && dur <= lat;
                        if (!ran[k])
                                fprintf(stderr,
                                        "# CPU %d stall %d: the culprit ran %lld us, spun %lld us, "
                                        "%lld us late\n",
                                        cpu, k, dur / 1000, spun / 1000, lat / 1000);
                        named[k] = MAX(named[k], 0) + 1;
                        ids[k] = tu_jint(t, "id");
                }
        }
        int untold = held;
        for (int k = 0; k < n; k++) {
                if (named[k] < 0)
                        continue; /* held by the VM: no capture of it (ids[k] stays 0) */
                bool counted = named[k] == 0 && skip_counted(tr, cpu, st[k].r0);
                bool told = named[k] == 0 && !counted && told_not_captured > 0;
                if ((counted || told) && ++untold <= 1) {
                        told_not_captured -= told;
                        fprintf(stderr, "# CPU %d stall %d: no capture, told as not captured\n",
                                cpu, k);
                        continue;
                }
                if (named[k] != 1) {
                        show_captures(tr, cpu, st, n);
                        fail_msg("CPU %d stall %d has %d captures (want one)", cpu, k, named[k]);
                }
        }
}

/* How many of the captures are whole: the injector's run as its spin (ran), the
 * timer/scheduling split, and the probe's marker and the injector's switch to the probe in
 * their raw events.  Each of the others is shown whole, with the end of its raw events. */
static int captures_split(struct soak *s, const long long *ids, const bool *ran, int n) {
        int split = 0;
        for (int k = 0; k < n; k++) {
                char id[24];
                if (!ids[k])
                        continue; /* no capture, told by captures_name_injector() */
                snprintf(id, sizeof(id), "%lld", ids[k]);
                char *one = rtsoak_text(s, "trace", id, NULL);
                char *raw = rtsoak_text(s, "trace", id, "--raw");
                if (!strstr(one, "culprit: thread stall-inject (pid"))
                        fail_msg("rtsoak trace %s:\n%s", id, one);
                if (strstr(one, "timer/IRQ latency") && strstr(one, "scheduling latency") &&
                    strstr(raw, "tracing_mark_write: rtsoak late") &&
                    strstr(raw, "prev_comm=stall-inject") && ran[k])
                        split++;
                else
                        fprintf(stderr,
                                "# capture %s: not whole\n%s\n# the end of its raw events:\n%s\n",
                                id, one, raw + (strlen(raw) > 3000 ? strlen(raw) - 3000 : 0));
                free(one);
                free(raw);
        }
        return split;
}

/* The farm server of test_injected_stalls_named, stopped by its teardown when a check fails
 * first (so that a failing run leaves no server behind). */
/* The last online CPU, for the cases that stall one (as root). */
static int last_cpu(void) {
        struct cpuset online;
        need_root();
        assert_int_equal(cpuset_online(&online, NULL), 0);
        int cpu = online.cpus[online.n - 1];
        cpuset_done(&online);
        return cpu;
}

static pid_t farm_server;

static int stop_farm_server(void **state) {
        if (farm_server > 0)
                tu_server_stop(farm_server);
        farm_server = 0;
        return 0;
}

static void test_injected_stalls_named(void **state) {
        struct soak s;
        int target = last_cpu();

        /* The farm server the captures go to, on loopback, with this machine enrolled; its
         * database on the store the test runs on. */
        char *fdir = tu_mkdtemp("trace-farm");
        char farm[600], token[600], slog[600], url[256], set_srv[300], set_tok[700];
        tu_farm_target(fdir, "trace_farm", farm, sizeof(farm));
        snprintf(token, sizeof(token), "%s/token", fdir);
        snprintf(slog, sizeof(slog), "%s/server.log", fdir);
        tu_enroll_this_machine(farm, token);
        pid_t srv = farm_server = tu_server_start(farm, slog, "127.0.0.1:0", NULL, url,
                                                  sizeof(url));
        snprintf(set_srv, sizeof(set_srv), "Upload.Server=%s", url);
        snprintf(set_tok, sizeof(set_tok), "Upload.TokenFile=%s", token);

        /* Threshold above most of this VM's own stalls (the rest, on any CPU, are captured
         * too: the checks pick the stalls'); a capture per stall (they come 420 ms apart, time
         * for the capture thread on a busy machine); probes below the injector's priority. */
        const char *extra[] = { "--set",      "Probe.Interval=100us",
                                "--set",      "Probe.Priority=80",
                                "--set",      "Probe.Threshold=10ms",
                                "--set",      "Trace.RateLimitInterval=100ms",
                                "--set",      set_srv,
                                "--set",      set_tok,
                                "--duration", "6s",
                                NULL };
        start(&s, "trace-stall", TRACEFS, extra);
        char out[600];
        snprintf(out, sizeof(out), "%s/inject.out", s.dir);
        pid_t ipid = spawn_injector(target, STALLS, 400, "--delay-ms=300", out);
        assert_int_equal(tu_wait(ipid, 30000), 0);
        char *err = finish(&s);
        if (!strstr(err, "Trace flight recorder on:"))
                fail_msg("the flight recorder did not start:\n%s", err);

        struct stall st[STALLS];
        read_stalls(out, st, STALLS);

        /* Every stall: a capture on the target CPU that names the injector. */
        json_t *tr = rtsoak_json(&s, "traces", NULL);
        long long named_id[STALLS] = {}; /* the stalls' captures (not this VM's own stalls) */
        bool ran[STALLS] = {};
        captures_name_injector(tr, target, ipid, st, STALLS, named_id, ran);

        /* The stalls' captures explained, and their raw events.  A probe's marker freezes
         * the whole instance (tracing_on is the instance's) until the capture thread holds
         * that CPU on its own and lets the others record again: a stall whose probe woke in
         * that moment (another CPU's capture of this VM's own stall beyond the threshold) has
         * no wake-up in its events, and says so.  One such coincidence is allowed; each is
         * shown with the end of its raw events. */
        int split = captures_split(&s, named_id, ran, STALLS);
        if (split < STALLS - 1)
                fail_msg("%d of %d stalls' captures are whole", split, STALLS);
        json_decref(tr);

        /* The soak went on: an interval per second of the run, the status counts the
         * captures. */
        size_t iv = intervals_stored(&s);
        fprintf(stderr, "# %zu intervals stored\n", iv);
        assert_true(iv >= 5 && iv <= 8);
        json_t *status = rtsoak_json(&s, "status", NULL);
        json_t *trace = json_object_get(status, "trace");
        assert_string_equal(json_string_value(json_object_get(trace, "state")), "on");
        assert_true(tu_jint(trace, "captures") >= STALLS);
        assert_true(json_is_boolean(json_object_get(trace, "timerlat")));
        json_decref(status);

        /* On the farm: the verdict of this kernel names the injector under each of the
         * stalls' violations (captures uploaded with their intervals). */
        struct utsname un;
        uname(&un);
        char *vargv[] = {
                (char *) tu_bin("RTSOAK"), "verdict", "--json", "--server", url, un.release, NULL
        };
        struct tu_result vr;
        tu_run(vargv, 60000, NULL, NULL, &vr);
        json_t *v = tu_json(vr.out), *p;
        size_t stalled = 0, i;
        json_array_foreach (json_object_get(v, "problems"), i, p) {
                if (tu_jint(p, "cpu") != target || tu_jint(p, "value_ns") < STALL_US * 900LL)
                        continue;
                const char *c = json_string_value(json_object_get(p, "culprit"));
                /* This VM's own stall, later than any injected one, in an interval of the
                 * target: the interval's worst violation, its culprit the hypervisor. */
                if (tu_jint(p, "value_ns") > STALL_US * 1200LL && c &&
                    strstr(c, "(the timer interrupt came late: hardware, firmware or "
                              "hypervisor)")) {
                        fprintf(stderr, "# host noise, not an injected stall: %s\n", c);
                        continue;
                }
                char want[64];
                snprintf(want, sizeof(want), "thread stall-inject (pid %d, SCHED_FIFO 90)", ipid);
                if (!c || strncmp(c, want, strlen(want)) != 0)
                        fail_msg("the farm's problem %s has the culprit %s, not %s",
                                 json_string_value(json_object_get(p, "id")), c ?: "(none)", want);
                stalled++;
        }
        fprintf(stderr, "# %zu problems of the farm's verdict name the injector\n", stalled);
        assert_true(stalled >= 3);
        json_decref(v);
        tu_result_done(&vr);
        /* Stored as they came: the farm's captures of the target CPU name the injector. */
        char q[200];
        snprintf(q, sizeof(q),
                 "SELECT count(*) FROM traces WHERE cpu = %d AND culprit_name = 'stall-inject' "
                 "AND culprit_pid = %d AND raw IS NOT NULL",
                 target, ipid);
        long long stored = tu_farm_int(farm, q);
        fprintf(stderr, "# %lld captures naming the injector in the farm database (%s)\n", stored,
                tu_backend_name());
        assert_true(stored >= STALLS);
        tu_server_stop(srv);
        farm_server = 0;
        tu_farm_drop(farm);
        tu_rmdir(fdir);
        free(err);
        tu_rmdir(s.dir);
}

/* Task names are any bytes their process chose: none at all, bytes that are not UTF-8, a
 * bidirectional override, a C1 control.  Injectors so named stall a CPU: every interval is
 * still stored (the store once refused an analysis with an empty name, and with it every
 * later interval), each stall's capture names its injector by pid with the name made text
 * the farm takes (a '?' for each character the text rule refuses: the override and the C1
 * control once went through, and the farm then refused the interval), and `rtsoak traces`
 * prints no override. */
static void test_hostile_task_names(void **state) {
        static const struct {
                const char *hex, *name;
        } names[] = {
                { "--name-hex=", "<unnamed>" },
                { "--name-hex=ffe280aec28541", "???A" },
        };
        struct soak s;
        int target = last_cpu();
        const char *extra[] = { "--set",      "Probe.Interval=100us",
                                "--set",      "Probe.Priority=80",
                                "--set",      "Probe.Threshold=10ms",
                                "--set",      "Trace.RateLimitInterval=100ms",
                                "--duration", "5s",
                                NULL };
        start(&s, "trace-names", TRACEFS, extra);
        pid_t ipid[2];
        struct stall st[2][3];
        for (int k = 0; k < 2; k++) {
                char out[600];
                snprintf(out, sizeof(out), "%s/inject%d.out", s.dir, k);
                ipid[k] = spawn_stall(target, 90, STALL_US, 3, 400, "--delay-ms=300", out,
                                      names[k].hex);
                assert_int_equal(tu_wait(ipid[k], 30000), 0);
                read_stalls(out, st[k], 3);
        }
        char *err = finish(&s);
        if (strstr(err, "Failed to store"))
                fail_msg("an interval was refused:\n%s", err);
        size_t iv = intervals_stored(&s);
        fprintf(stderr, "# %zu intervals stored\n", iv);
        assert_true(iv >= 4);

        json_t *tr = rtsoak_json(&s, "traces", NULL), *t;
        size_t i;
        int named[2] = {};
        json_array_foreach (tr, i, t) {
                json_t *c = json_object_get(t, "culprit");
                long long pid = json_integer_value(json_object_get(c, "pid"));
                for (int k = 0; k < 2; k++) {
                        if (pid != ipid[k])
                                continue;
                        const char *name = json_string_value(json_object_get(c, "name"));
                        if (strcmp(name ?: "", names[k].name) != 0)
                                fail_msg("injector %d (pid %d) is named \"%s\", not \"%s\"", k,
                                         ipid[k], name, names[k].name);
                        named[k]++;
                }
        }
        json_decref(tr);
        fprintf(stderr, "# captures naming the injectors: %d and %d of 3 stalls each\n", named[0],
                named[1]);
        assert_true(named[0] >= 2 && named[1] >= 2);
        char *list = rtsoak_text(&s, "traces", NULL, NULL);
        if (strstr(list, "\xe2\x80\xae") || strstr(list, "\xc2\x85") || !strstr(list, "???A"))
                fail_msg("the name is not made text in rtsoak traces:\n%s", list);
        free(list);
        free(err);
        tu_rmdir(s.dir);
}

/* The last two online CPUs, for the cases that stall two (as root, on the SQLite pass); the
 * case is skipped on a machine with one. */
static void two_cpus(int cpus[2]) {
        struct cpuset online;
        need_root();
        skip_on_pg();
        assert_int_equal(cpuset_online(&online, NULL), 0);
        if (online.n < 2) {
                cpuset_done(&online);
                skip();
        }
        cpus[0] = online.cpus[online.n - 2];
        cpus[1] = online.cpus[online.n - 1];
        cpuset_done(&online);
}

/* rtsoakd for the two-CPU cases: probes at SCHED_FIFO 80 every 100 us, late beyond 10 ms, a
 * capture per CPU every 100 ms at most; returns a CLOCK_MONOTONIC time 0.5 s on to start the
 * stalls at. */
static long long start_two(struct soak *s, const char *name, const char *duration) {
        const char *extra[] = { "--set",      "Probe.Interval=100us",
                                "--set",      "Probe.Priority=80",
                                "--set",      "Probe.Threshold=10ms",
                                "--set",      "Trace.RateLimitInterval=100ms",
                                "--duration", duration,
                                NULL };
        start(s, name, TRACEFS, extra);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (long long) now.tv_sec * 1000000000LL + now.tv_nsec + 500000000LL;
}

/* Each of the probed CPUs has its capture thread, named after it and pinned to it (so that its
 * probe's wake-up of it is local). */
static void capture_threads_pinned(pid_t pid, const int *cpus, int n) {
        char dir[64];
        snprintf(dir, sizeof(dir), "/proc/%d/task", (int) pid);
        DIR *d = opendir(dir);
        assert_non_null(d);
        int found[8] = {};
        for (struct dirent *e; (e = readdir(d));) {
                char path[300], want[32];
                snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
                char *comm = tu_read_file(path);
                for (int k = 0; comm && k < n; k++) {
                        snprintf(want, sizeof(want), "rtsoak-trace%d\n", cpus[k]);
                        if (strcmp(comm, want) != 0)
                                continue;
                        snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
                        char *status = tu_read_file(path), line[64];
                        snprintf(line, sizeof(line), "Cpus_allowed_list:\t%d\n", cpus[k]);
                        if (!status || !strstr(status, line))
                                fail_msg("thread %s of rtsoakd is not pinned to CPU %d:\n%s",
                                         e->d_name, cpus[k], status);
                        free(status);
                        found[k]++;
                }
                free(comm);
        }
        closedir(d);
        for (int k = 0; k < n; k++)
                if (found[k] != 1)
                        fail_msg("rtsoakd has %d capture threads for CPU %d (want one)", found[k],
                                 cpus[k]);
}

/* Two CPUs stalled OVERLAP_US apart, PAIRS times: the first CPU's late probe freezes the
 * whole instance with its marker, and the second CPU's probe wakes while that capture is being
 * taken.  The capture thread holds only the first CPU, so the second records again before its
 * probe runs: both captures name their own injector, and both have the probe's wake-up and
 * switch-in (the timer/scheduling split).  Two of the twelve captures may be less than whole:
 * the other CPUs record again some 0.1 ms after a marker froze them, and this VM delays
 * wake-ups (an injector's too) and stalls on its own now and then.  With the hold disabled,
 * half of them are not whole. */
#define PAIRS 6
#define OVERLAP_US 400
static void test_overlapping_stalls(void **state) {
        struct soak s;
        int cpus[2];
        two_cpus(cpus);
        long long at = start_two(&s, "trace-overlap", "5s");
        pid_t ipid[2];
        char out[2][600];
        for (int c = 0; c < 2; c++) {
                char at_ns[40];
                snprintf(out[c], sizeof(out[c]), "%s/inject%d.out", s.dir, c);
                snprintf(at_ns, sizeof(at_ns), "--at-ns=%lld", at + c * OVERLAP_US * 1000LL);
                ipid[c] = spawn_injector(cpus[c], PAIRS, 500, at_ns, out[c]);
        }
        for (int c = 0; c < 2; c++)
                assert_int_equal(tu_wait(ipid[c], 30000), 0);
        capture_threads_pinned(s.pid, cpus, 2);
        char *err = finish(&s);
        if (!strstr(err, "Trace flight recorder on:"))
                fail_msg("the flight recorder did not start:\n%s", err);

        json_t *tr = rtsoak_json(&s, "traces", NULL);
        json_t *status = rtsoak_json(&s, "status", NULL);
        told_not_captured = tu_jint(json_object_get(status, "trace"), "skipped");
        char *trace_status = json_dumps(json_object_get(status, "trace"), JSON_COMPACT);
        fprintf(stderr, "# the run's trace status: %s\n", trace_status);
        free(trace_status);
        json_decref(status);
        struct stall st[2][PAIRS];
        long long ids[2 * PAIRS] = {};
        bool ran[2 * PAIRS] = {};
        for (int c = 0; c < 2; c++) {
                read_stalls(out[c], st[c], PAIRS);
                captures_name_injector(tr, cpus[c], ipid[c], st[c], PAIRS, ids + c * PAIRS,
                                       ran + c * PAIRS);
        }
        /* They did overlap: the second began while the first ran.  An injector's wake-up can
         * come late on this VM (its CPU was idle): such a pair is told, and at most two. */
        int apart = 0;
        for (int k = 0; k < PAIRS; k++)
                if (st[1][k].r0 <= st[0][k].r0 || st[1][k].r0 >= st[0][k].r1) {
                        fprintf(stderr,
                                "# pair %d: the stalls did not overlap (%lld..%lld, "
                                "%lld..%lld)\n",
                                k, st[0][k].r0, st[0][k].r1, st[1][k].r0, st[1][k].r1);
                        apart++;
                }
        if (apart > 2)
                fail_msg("%d of %d pairs of stalls did not overlap", apart, PAIRS);
        told_not_captured = 0;
        int split = captures_split(&s, ids, ran, 2 * PAIRS);
        fprintf(stderr, "# %d of %d captures are whole\n", split, 2 * PAIRS);
        if (split < 2 * PAIRS - 2)
                fail_msg("%d of %d captures are whole (the split, the marker, the injector's "
                         "switch)",
                         split, 2 * PAIRS);
        json_decref(tr);
        free(err);
        tu_rmdir(s.dir);
}

/* A real-time task above the capture threads but below the probes keeps CPU a busy for HOG_MS,
 * and a stall at SCHED_FIFO 90 makes a's probe late inside it: a's capture thread, pinned to a,
 * cannot run there, and every CPU's recording stays frozen until it can.  The probe lets it
 * run on another CPU after PROBE_RESCUE_NS, so a stall of CPU b later inside the hog still has
 * its wake-up in the events.  ROUNDS times; b's captures must be whole in all but one.
 * Without the probe's move, b's stalls get no capture at all (its look-back is frozen away). */
#define ROUNDS 4
#define HOG_MS 400
static void test_capture_thread_kept_out(void **state) {
        struct soak s;
        int cpus[2];
        two_cpus(cpus);
        int a = cpus[0], b = cpus[1];
        long long at = start_two(&s, "trace-kept-out", "6s");
        char out[3][600], when[3][40];
        const long long offset_ms[3] = { 0, 30, 200 }; /* the hog, a's stall, b's stall */
        for (int k = 0; k < 3; k++) {
                snprintf(out[k], sizeof(out[k]), "%s/inject%d.out", s.dir, k);
                snprintf(when[k], sizeof(when[k]), "--at-ns=%lld", at + offset_ms[k] * 1000000LL);
        }
        pid_t hog = spawn_stall(a, 50, HOG_MS * 1000, ROUNDS, 1000, when[0], out[0], NULL);
        pid_t ia = spawn_injector(a, ROUNDS, 1000, when[1], out[1]);
        pid_t ib = spawn_injector(b, ROUNDS, 1000, when[2], out[2]);
        assert_int_equal(tu_wait(hog, 30000), 0);
        assert_int_equal(tu_wait(ia, 30000), 0);
        assert_int_equal(tu_wait(ib, 30000), 0);
        char *err = finish(&s);
        if (!strstr(err, "Trace flight recorder on:"))
                fail_msg("the flight recorder did not start:\n%s", err);

        json_t *tr = rtsoak_json(&s, "traces", NULL);
        struct stall sa[ROUNDS], sb[ROUNDS];
        long long ida[ROUNDS] = {}, idb[ROUNDS] = {};
        bool rana[ROUNDS] = {}, ranb[ROUNDS] = {};
        read_stalls(out[1], sa, ROUNDS);
        read_stalls(out[2], sb, ROUNDS);
        captures_name_injector(tr, a, ia, sa, ROUNDS, ida, rana);
        captures_name_injector(tr, b, ib, sb, ROUNDS, idb, ranb);
        int whole = captures_split(&s, idb, ranb, ROUNDS);
        fprintf(stderr, "# %d of %d of CPU %d's captures inside CPU %d's hog are whole\n", whole,
                ROUNDS, b, a);
        if (whole < ROUNDS - 1)
                fail_msg("%d of %d captures are whole", whole, ROUNDS);
        json_decref(tr);
        free(err);
        tu_rmdir(s.dir);
}

/* A run where the recorder cannot work: intervals as before, and the reason, said once. */
static void unavailable(const char *name, enum mount_as how, const char *const *extra,
                        const char *why) {
        struct soak s;
        const char *base[12] = { "--set", "Probe.Threshold=1us", "--duration", "3s" };
        size_t n = 4;
        for (; extra && *extra; extra++)
                base[n++] = *extra;
        base[n] = NULL;
        start(&s, name, how, base);
        char *err = finish(&s);
        if (tu_count_lines(err, "rtsoakd: Trace flight recorder unavailable: ") != 1 ||
            !strstr(err, why))
                fail_msg("expected one notice saying \"%s\":\n%s", why, err);
        assert_true(intervals_stored(&s) >= 2);
        char *status = rtsoak_text(&s, "status", NULL, NULL);
        if (!strstr(status, "Trace:    unavailable: ") || !strstr(status, why) ||
            !strstr(status, "violations are recorded without traces"))
                fail_msg("rtsoak status does not say why there are no captures:\n%s", status);
        json_t *st = rtsoak_json(&s, "status", NULL);
        json_t *trace = json_object_get(st, "trace");
        assert_string_equal(json_string_value(json_object_get(trace, "state")), "unavailable");
        assert_int_equal(tu_jint(trace, "captures"), 0);
        /* Every violation (1 us: all of them) was left without a capture. */
        assert_true(tu_jint(trace, "skipped") > 1000);
        json_decref(st);
        char *traces = rtsoak_text(&s, "traces", NULL, NULL);
        assert_non_null(strstr(traces, "No trace captures"));
        free(traces);
        free(status);
        free(err);
        tu_rmdir(s.dir);
}

static void test_no_tracefs(void **state) {
        need_root();
        skip_on_pg();
        unavailable("trace-none", TMPFS, NULL, "/sys/kernel/tracing is not a tracefs");
}

/* tracefs not mounted at all: rtsoakd mounts it, as trace-cmd and rtla do, says so, and
 * records; the mount is its namespace's (the test's own stays as it was). */
static void test_tracefs_not_mounted(void **state) {
        need_root();
        skip_on_pg();
        struct statfs before, after;
        assert_int_equal(statfs("/sys/kernel/tracing", &before), 0);
        struct soak s;
        const char *extra[] = { "--set", "Probe.Threshold=1us", "--duration", "3s", NULL };
        start(&s, "trace-unmounted", UNMOUNTED, extra);
        char *err = finish(&s);
        if (!strstr(err, "rtsoakd: Trace flight recorder on: tracefs was not mounted: mounted it "
                         "at /sys/kernel/tracing; tracefs instance "))
                fail_msg("rtsoakd did not mount tracefs, or did not say so:\n%s", err);
        assert_true(intervals_stored(&s) >= 2);
        json_t *st = rtsoak_json(&s, "status", NULL);
        json_t *trace = json_object_get(st, "trace");
        assert_string_equal(json_string_value(json_object_get(trace, "state")), "on");
        assert_true(json_is_true(json_object_get(trace, "mounted")));
        /* Every sample is a violation (1 us): some were captured. */
        assert_true(tu_jint(trace, "captures") >= 1);
        json_decref(st);
        assert_int_equal(statfs("/sys/kernel/tracing", &after), 0);
        assert_int_equal(after.f_type, before.f_type);
        free(err);
        tu_rmdir(s.dir);
}

static void test_read_only(void **state) {
        need_root();
        skip_on_pg();
        unavailable("trace-ro", TRACEFS_RO, NULL, "is read-only here");
}

/* Someone else holds an instance of that name: rtsoakd leaves it alone. */
static void test_instance_busy(void **state) {
        need_root();
        skip_on_pg();
        const char *extra[] = { "--set", "Trace.Instance=rtsoak-test-busy", NULL };
        /* The holder: a shell in the same kind of namespace with a file of the instance open,
         * alive for as long as the run. */
        char *holder[] = { UNSHARE,
                           "-m",
                           "sh",
                           "-c",
                           MOUNT_TRACEFS
                           " || exit 125; "
                           "d=/sys/kernel/tracing/instances/rtsoak-test-busy; mkdir $d; "
                           "exec 3<$d/trace; sleep 6; exec 3<&-; rmdir $d",
                           NULL };
        pid_t h = tu_spawn(holder, NULL, NULL);
        tu_sleep_ms(500);
        unavailable("trace-busy", TRACEFS, extra, "is in use by another process");
        assert_int_equal(tu_wait(h, 20000), 0);
}

/* In tracefs at DIR's mount namespace: runs a copy of sleep named NAME and exits 0 when the
 * kernel's pid-to-name cache (saved_cmdlines) then holds NAME, 1 when not, 125 when tracefs
 * cannot be mounted. */
static int name_cached(const char *dir, const char *name, const char *before) {
        char script[1024];
        snprintf(script, sizeof(script),
                 "%s || exit 125; t=/sys/kernel/tracing; "
                 "%s cp /bin/sleep %s/%s && %s/%s 0.3 && grep -qw %s $t/saved_cmdlines",
                 MOUNT_TRACEFS, before ? before : "", dir, name, dir, name, name);
        char *argv[] = { UNSHARE, "-m", "sh", "-c", script, NULL };
        struct tu_result r;
        tu_run(argv, 20000, NULL, NULL, &r);
        int st = r.status;
        tu_result_done(&r);
        return st;
}

/* The recorder's instance does not make the kernel record task names at every context switch
 * (it is created with the top-level record-cmd off), and the option is back on afterwards.  A
 * plain instance, made the usual way, shows that the check sees such recording. */
#define PLAIN_INSTANCE                                     \
        "i=$t/instances/rtsoak-test-pos; mkdir $i && "     \
        "echo 1 > $i/events/sched/sched_switch/enable && " \
        "trap 'echo 0 > $i/events/sched/sched_switch/enable; rmdir $i' EXIT;"
static void test_no_comm_cache(void **state) {
        need_root();
        skip_on_pg();
        struct soak s;
        char ctl[16], chk[16], pos[16];
        snprintf(ctl, sizeof(ctl), "rsk-ctl-%d", (int) getpid() % 1000000);
        snprintf(chk, sizeof(chk), "rsk-chk-%d", (int) getpid() % 1000000);
        snprintf(pos, sizeof(pos), "rsk-pos-%d", (int) getpid() % 1000000);
        char *tmp = tu_mkdtemp("trace-comm-bin");
        int st = name_cached(tmp, ctl, "grep -qx 1 $t/options/record-cmd || exit 125;");
        if (st == 125 || st == 0) {
                fprintf(stderr, "# %s\n",
                        st == 125 ? "tracefs cannot be mounted here, or "
                                    "record-cmd is off"
                                  : "another tracer already records task "
                                    "names at every switch here");
                tu_rmdir(tmp);
                skip();
        }
        /* A kernel whose count of name recorders was left wrong (by a tracer before this
         * test) records no names for a plain instance either: nothing to compare with. */
        char pre[20];
        snprintf(pre, sizeof(pre), "rsk-pre-%d", (int) getpid() % 1000000);
        if (name_cached(tmp, pre, PLAIN_INSTANCE) != 0) {
                fprintf(stderr, "# a plain instance records no task names on this kernel\n");
                tu_rmdir(tmp);
                skip();
        }
        /* What a killed rtsoakd leaves: its instance, made with record-cmd off, events on.
         * Switching record-cmd while it is there would leave the kernel's count of name
         * recorders below zero (the plain instance below would then record nothing). */
        char *stale[] = { UNSHARE,
                          "-m",
                          "sh",
                          "-c",
                          MOUNT_TRACEFS
                          "; "
                          "t=/sys/kernel/tracing; i=$t/instances/rtsoak-test-comm; "
                          "rmdir $i 2>/dev/null; echo 0 > $t/options/record-cmd; mkdir $i; r=$?; "
                          "echo 1 > $t/options/record-cmd; [ $r = 0 ] && "
                          "echo 1 > $i/events/sched/sched_switch/enable && "
                          "echo 1 > $i/events/sched/sched_wakeup/enable",
                          NULL };
        struct tu_result r;
        tu_run(stale, 20000, NULL, NULL, &r);
        assert_int_equal(r.status, 0);
        tu_result_done(&r);
        const char *extra[] = { "--set", "Trace.Instance=rtsoak-test-comm", "--duration", "4s",
                                NULL };
        start(&s, "trace-comm", TRACEFS, extra);
        assert_true(tu_wait_for_text(s.err, "Trace flight recorder on", 10000));
        assert_int_equal(name_cached(tmp, chk, "grep -qx 1 $t/options/record-cmd || exit 7;"), 1);
        /* The check can fail: an instance made with record-cmd on records the names. */
        assert_int_equal(name_cached(tmp, pos, PLAIN_INSTANCE), 0);
        char *err = finish(&s);
        if (strstr(err, "comm cache upkeep is on"))
                fail_msg("the instance was made with the comm cache upkeep on:\n%s", err);
        free(err);
        tu_rmdir(tmp);
        tu_rmdir(s.dir);
}

/* With events enabled in another instance, record-cmd is left alone (switching it would
 * change that instance's name recording) and rtsoakd says that the upkeep is on. */
static void test_comm_cache_others(void **state) {
        need_root();
        skip_on_pg();
        char *other[] = {
                UNSHARE,
                "-m",
                "sh",
                "-c",
                MOUNT_TRACEFS
                "; "
                "i=/sys/kernel/tracing/instances/rtsoak-test-other; mkdir $i || exit 125; "
                "echo 1 > $i/events/irq/softirq_entry/enable; sleep 5; "
                "echo 0 > $i/events/irq/softirq_entry/enable; rmdir $i",
                NULL
        };
        pid_t h = tu_spawn(other, NULL, NULL);
        tu_sleep_ms(500);
        struct soak s;
        const char *extra[] = { "--set", "Trace.Instance=rtsoak-test-comm2", "--duration", "2s",
                                NULL };
        start(&s, "trace-comm2", TRACEFS, extra);
        char *err = finish(&s);
        if (!strstr(err, "the kernel's comm cache upkeep is on at every context switch (trace "
                         "events are enabled elsewhere, so options/record-cmd was left as it is)"))
                fail_msg("events were enabled elsewhere and rtsoakd did not say that the comm "
                         "cache upkeep is on, and why:\n%s",
                         err);
        assert_int_equal(tu_wait(h, 20000), 0);
        free(err);
        tu_rmdir(s.dir);
}

/* An instance left by an rtsoakd that was killed is taken over. */
static void test_stale_instance(void **state) {
        need_root();
        skip_on_pg();
        struct soak s;
        char *leftover[] = { UNSHARE,
                             "-m",
                             "sh",
                             "-c",
                             MOUNT_TRACEFS " || exit 125; "
                                           "i=/sys/kernel/tracing/instances/rtsoak-test-stale; "
                                           "rmdir $i 2>/dev/null; mkdir $i",
                             NULL };
        struct tu_result r;
        tu_run(leftover, 20000, NULL, NULL, &r);
        if (r.status == 125)
                skip();
        assert_int_equal(r.status, 0);
        tu_result_done(&r);
        const char *extra[] = { "--set", "Trace.Instance=rtsoak-test-stale", "--duration", "2s",
                                NULL };
        start(&s, "trace-stale", TRACEFS, extra);
        char *err = finish(&s);
        if (!strstr(err, "Trace flight recorder on: tracefs instance "
                         "/sys/kernel/tracing/instances/rtsoak-test-stale"))
                fail_msg("the stale instance was not taken over:\n%s", err);
        /* And removed at the end. */
        char *gone[] = { UNSHARE,
                         "-m",
                         "sh",
                         "-c",
                         MOUNT_TRACEFS " || exit 125; "
                                       "test ! -e /sys/kernel/tracing/instances/rtsoak-test-stale",
                         NULL };
        tu_run(gone, 20000, NULL, NULL, &r);
        assert_int_equal(r.status, 0);
        tu_result_done(&r);
        free(err);
        tu_rmdir(s.dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_injected_stalls_named, stop_farm_server),
                cmocka_unit_test(test_hostile_task_names),
                cmocka_unit_test(test_overlapping_stalls),
                cmocka_unit_test(test_capture_thread_kept_out),
                cmocka_unit_test(test_no_tracefs),
                cmocka_unit_test(test_tracefs_not_mounted),
                cmocka_unit_test(test_read_only),
                cmocka_unit_test(test_instance_busy),
                cmocka_unit_test(test_stale_instance),
                cmocka_unit_test(test_no_comm_cache),
                cmocka_unit_test(test_comm_cache_others),
        };
        return RUN_TESTS(tests);
}
