/* SPDX-License-Identifier: MIT */
/* Load generator for rtsoak-server's ingest: enrolls N machines (or reads their tokens), encodes
 * every summary up front with the shared codec (one one-minute interval of an 8-CPU machine,
 * realistic histograms, loads with metrics, two events; every (machine, run, seq) distinct), then
 * posts them over K connections at a time with libcurl's multi interface until all are sent or
 * the time is up.  It prints the summaries per second answered "stored", the answers by status,
 * the latency percentiles and, with --server-pid, the server's CPU time per summary.
 *
 * Usage: ingest-load --url http://127.0.0.1:PORT
 *                    (--enroll RTSOAK_SERVER --db DB | --tokens FILE)
 *                    [--machines N] [--connections K] [--count N] [--duration SECONDS]
 *                    [--run-id N] [--server-pid PID] [--rate PER_SECOND] [--json]
 * --rate paces the summaries (the N-th is sent no earlier than N / rate seconds after the
 * first): a farm's steady load beside another measurement, rather than the most it takes.
 * A tokens file has one "MACHINE_ID TOKEN" line per machine. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"
#include "summary.h"

#define NCPUS 8
#define HIST_LIMIT_US 1000
#define PROBE_INTERVAL_NS 200000
#define SAMPLES_PER_CPU (60 * 1000000000ull / PROBE_INTERVAL_NS) /* 300,000 a minute */
#define THRESHOLD_NS 100000
#define MINUTE_NS (60 * INT64_C(1000000000))
#define STATUS_SLOTS 600
/* Run r started RUN_EPOCH_S + r seconds after 1970; the default run id is the time now. */
#define RUN_EPOCH_S INT64_C(1700000000)

struct machine {
        char id[33];
        char token[80];
        struct curl_slist *headers;
};

#define SERVERS_MAX 8

struct options {
        const char *url[SERVERS_MAX], *enroll_bin, *db, *tokens;
        unsigned nurls, npids;
        unsigned machines, connections;
        unsigned long count;
        double duration_s;
        double rate; /* summaries per second; 0: as fast as answered */
        int64_t run_id;
        long server_pid[SERVERS_MAX];
        long db_pid; /* a PostgreSQL postmaster: its processes' CPU is the database's */
        bool json;
};

struct body {
        char *text;
        size_t len;
};

struct slot {
        CURL *easy;
        size_t index; /* of the summary in flight */
        uint64_t start_ns;
        char reply[512];
        size_t reply_len;
};

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

_Noreturn static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("ingest-load: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(EXIT_FAILURE);
}

static char *xstrdup(const char *s) {
        char *d = strdup(s);
        if (!d)
                die("out of memory");
        return d;
}

static void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n, size);
        if (!p)
                die("out of memory");
        return p;
}

/* splitmix64: deterministic, so that a run can be repeated byte for byte. */
static uint64_t next_rand(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

static uint64_t rand_below(uint64_t *state, uint64_t n) {
        return n ? next_rand(state) % n : 0;
}

/* ---- machines and tokens ---------------------------------------------------------------- */

static void enroll_one(const char *bin, const char *db, struct machine *m) {
        int fds[2];
        if (pipe(fds) < 0)
                die("pipe: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0)
                die("fork: %s", strerror(errno));
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                dup2(fds[1], STDOUT_FILENO);
                if (null >= 0)
                        dup2(null, STDERR_FILENO);
                close(fds[0]);
                close(fds[1]);
                execl(bin, bin, "--db", db, "enroll", m->id, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        size_t got = 0;
        for (;;) {
                ssize_t n = read(fds[0], m->token + got, sizeof(m->token) - 1 - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
        }
        close(fds[0]);
        m->token[got] = '\0';
        m->token[strcspn(m->token, "\n")] = '\0';
        int st;
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
            strlen(m->token) != 64)
                die("%s --db %s enroll %s failed (run it by hand to see why)", bin, db, m->id);
}

static struct machine *load_machines(const struct options *o, unsigned *ret_n) {
        struct machine *ms;
        unsigned n = 0;
        if (o->tokens) {
                FILE *f = fopen(o->tokens, "re");
                if (!f)
                        die("cannot open %s: %s", o->tokens, strerror(errno));
                char line[256];
                ms = xcalloc(o->machines, sizeof(*ms));
                while (n < o->machines && fgets(line, sizeof(line), f)) {
                        if (sscanf(line, "%32s %79s", ms[n].id, ms[n].token) == 2)
                                n++;
                }
                fclose(f);
                if (n == 0)
                        die("no \"MACHINE_ID TOKEN\" line in %s", o->tokens);
        } else {
                ms = xcalloc(o->machines, sizeof(*ms));
                for (n = 0; n < o->machines; n++) {
                        snprintf(ms[n].id, sizeof(ms[n].id), "be4c%028u", n);
                        enroll_one(o->enroll_bin, o->db, &ms[n]);
                }
        }
        for (unsigned i = 0; i < n; i++) {
                char auth[128];
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ms[i].token);
                ms[i].headers = curl_slist_append(NULL, auth);
                ms[i].headers = curl_slist_append(ms[i].headers, "Content-Type: application/json");
                ms[i].headers = curl_slist_append(ms[i].headers, "Expect:");
                if (!ms[i].headers)
                        die("out of memory");
        }
        *ret_n = n;
        return ms;
}

/* ---- summaries -------------------------------------------------------------------------- */

/* One CPU's minute: 300,000 wake-ups between 3 and 60 us, most of them at 5-12 us, and a few
 * outliers above 80 us (now and then one over the histogram's 1 ms limit). */
static void make_cpu(struct summary_cpu *c, uint32_t cpu, int64_t start_ns, uint64_t *rnd) {
        static uint64_t counts[2048];
        uint32_t nb = hist_nbuckets(HIST_LIMIT_US);
        uint64_t total = 0, sum_ns = 0, violations = 0;
        uint32_t lo = UINT32_MAX, hi = 0;

        memset(counts, 0, sizeof(counts[0]) * nb);
        /* A skewed body: weight peaks at the mode and decays geometrically above it. */
        uint32_t mode = 5 + (uint32_t) rand_below(rnd, 4);
        double weights[61], wsum = 0;
        for (uint32_t us = 3; us <= 60; us++) {
                double w = us <= mode ? exp(-0.9 * (double) (mode - us))
                                      : exp(-0.18 * (double) (us - mode));
                w *= 0.9 + 0.2 * (double) rand_below(rnd, 1000) / 1000.0;
                weights[us] = w;
                wsum += w;
        }
        for (uint32_t us = 3; us <= 60; us++) {
                uint64_t n = (uint64_t) llround((double) SAMPLES_PER_CPU * weights[us] / wsum);
                if (n == 0)
                        continue;
                counts[us] += n;
                total += n;
                sum_ns += n * (us * 1000 + 500);
                lo = us < lo ? us : lo;
                hi = us > hi ? us : hi;
        }
        /* Outliers. */
        unsigned outliers = (unsigned) rand_below(rnd, 5);
        uint64_t max_ns = (uint64_t) hi * 1000 + rand_below(rnd, 1000);
        for (unsigned i = 0; i < outliers; i++) {
                uint64_t ns = 80000 + rand_below(rnd, 400000);
                if (rand_below(rnd, 50) == 0)
                        ns = 1200000 + rand_below(rnd, 3000000);
                counts[hist_index(HIST_LIMIT_US, ns)]++;
                total++;
                sum_ns += ns;
                violations += ns > THRESHOLD_NS;
                if (ns > max_ns)
                        max_ns = ns;
        }
        *c = (struct summary_cpu){
                .cpu = cpu,
                .samples = total,
                .min_ns = (uint64_t) lo * 1000 + rand_below(rnd, 1000),
                .avg_ns = sum_ns / total,
                .max_ns = max_ns,
                .max_time_ns = start_ns + (int64_t) rand_below(rnd, (uint64_t) MINUTE_NS),
                .violations = violations,
                .missed = 0,
                .hist_limit_us = HIST_LIMIT_US,
        };
        if (c->avg_ns > c->max_ns)
                c->avg_ns = c->max_ns;
        if (c->avg_ns < c->min_ns)
                c->avg_ns = c->min_ns;
        if (hist_encode(HIST_LIMIT_US, counts, &c->hist, &c->hist_len) < 0)
                die("hist_encode failed");
}

static void set_metric(struct summary_metric *m, const char *name, const char *unit, double v) {
        m->name = xstrdup(name);
        m->unit = xstrdup(unit);
        m->value = v;
}

static void make_loads(struct summary_interval *iv, uint64_t *rnd) {
        double jitter = 0.95 + 0.1 * (double) rand_below(rnd, 1000) / 1000.0;
        iv->nloads = 3;
        iv->loads = xcalloc(3, sizeof(*iv->loads));

        struct summary_load *l = &iv->loads[0];
        l->generator = xstrdup("cpu");
        l->up_ns = (uint64_t) MINUTE_NS;
        l->starts = 1;
        l->nmetrics = 1;
        l->metrics = xcalloc(1, sizeof(*l->metrics));
        set_metric(&l->metrics[0], "ops", "ops/s", 1.85e6 * jitter);

        l = &iv->loads[1];
        l->generator = xstrdup("fileio");
        l->up_ns = (uint64_t) MINUTE_NS - 250000000;
        l->starts = 1;
        l->nmetrics = 3;
        l->metrics = xcalloc(3, sizeof(*l->metrics));
        set_metric(&l->metrics[0], "write", "MiB/s", 212.5 * jitter);
        set_metric(&l->metrics[1], "read", "MiB/s", 388.0 * jitter);
        set_metric(&l->metrics[2], "fsync", "fsyncs/s", 41.0 * jitter);

        l = &iv->loads[2];
        l->generator = xstrdup("network");
        l->up_ns = (uint64_t) MINUTE_NS;
        l->starts = 1;
        l->nmetrics = 2;
        l->metrics = xcalloc(2, sizeof(*l->metrics));
        set_metric(&l->metrics[0], "throughput", "Mbit/s", 9400.0 * jitter);
        set_metric(&l->metrics[1], "packets", "packets/s", 287000.0 * jitter);
}

/* The upload of machine m with sequence number seq: one one-minute interval, two events. */
static void make_summary(struct summary *s, const struct machine *m, unsigned mi, int64_t run_id,
                         uint64_t seq) {
        char buf[128];
        uint64_t rnd = ((uint64_t) mi << 32) ^ seq ^ ((uint64_t) run_id << 12);
        int64_t run_start = (RUN_EPOCH_S + run_id) * INT64_C(1000000000);
        int64_t start = run_start + (int64_t) seq * MINUTE_NS;

        *s = (struct summary){};
        s->machine.id = xstrdup(m->id);
        snprintf(buf, sizeof(buf), "rt-lab-%05u", mi);
        s->machine.hostname = xstrdup(buf);
        s->machine.cpu_model = xstrdup("Intel(R) Xeon(R) E-2278G CPU @ 3.40GHz");
        s->machine.cpus = NCPUS;
        s->run.id = run_id;
        snprintf(buf, sizeof(buf), "%016" PRIx64 "%016" PRIx64, (uint64_t) run_id,
                 UINT64_C(0xb007000000000000) | mi);
        s->run.boot_id = xstrdup(buf);
        s->run.kernel_release = xstrdup("6.6.15-rt22");
        s->run.kernel_version = xstrdup("#1 SMP PREEMPT_RT Tue Feb  6 10:12:41 UTC 2024");
        s->run.kernel_cmdline = xstrdup(
                "BOOT_IMAGE=/boot/vmlinuz-6.6.15-rt22 root=UUID=3f1c2a6e-9b1d-4c55-8d0e-"
                "7a2b9c4d1e0f ro quiet isolcpus=2-7 nohz_full=2-7 rcu_nocbs=2-7 "
                "intel_pstate=disable processor.max_cstate=1 idle=poll");
        s->run.preempt_model = xstrdup("PREEMPT_RT");
        s->run.daemon_version = xstrdup("0.1.0");
        s->run.config_digest =
                xstrdup("5d41402abc4b2a76b9719d911017c592aa5e3c1b9f0e6e3d2c1b0a9f8e7d6c5b");
        s->run.start_ns = run_start;
        s->run.threshold_ns = THRESHOLD_NS;
        s->run.probe_interval_ns = PROBE_INTERVAL_NS;
        s->run.interval_ns = (uint64_t) MINUTE_NS;
        s->seq = seq;

        s->nintervals = 1;
        s->intervals = xcalloc(1, sizeof(*s->intervals));
        struct summary_interval *iv = &s->intervals[0];
        iv->seq = seq;
        iv->start_ns = start;
        iv->length_ns = (uint64_t) MINUTE_NS;
        iv->scenario = xstrdup("mixed");
        iv->ncpus = NCPUS;
        iv->cpus = xcalloc(NCPUS, sizeof(*iv->cpus));
        uint64_t worst = 0;
        uint32_t worst_cpu = 0;
        for (uint32_t c = 0; c < NCPUS; c++) {
                make_cpu(&iv->cpus[c], c, start, &rnd);
                if (iv->cpus[c].max_ns > worst) {
                        worst = iv->cpus[c].max_ns;
                        worst_cpu = c;
                }
        }
        make_loads(iv, &rnd);

        s->nevents = 2;
        s->events = xcalloc(2, sizeof(*s->events));
        snprintf(buf, sizeof(buf), "latency %" PRIu64 " ns over the threshold on CPU %u", worst,
                 worst_cpu);
        s->events[0] = (struct summary_event){ .id = 2 * seq + 1,
                                               .time_ns = iv->cpus[worst_cpu].max_time_ns,
                                               .type = xstrdup("violation"),
                                               .cpu = (int32_t) worst_cpu,
                                               .value = (int64_t) worst,
                                               .message = xstrdup(buf) };
        s->events[1] = (struct summary_event){ .id = 2 * seq + 2,
                                               .time_ns = start,
                                               .type = xstrdup("scenario"),
                                               .cpu = -1,
                                               .value = -1,
                                               .message = xstrdup("mixed: cpu, fileio, network") };
}

/* ---- the load ---------------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
        struct slot *s = userdata;
        size_t len = size * n, room = sizeof(s->reply) - 1 - s->reply_len;
        size_t take = len < room ? len : room;
        memcpy(s->reply + s->reply_len, data, take);
        s->reply_len += take;
        s->reply[s->reply_len] = '\0';
        return len;
}

/* What is left to send, and where the requests go. */
struct feed {
        CURLM *multi;
        const struct body *bodies;
        const struct machine *ms;
        unsigned nm;
        size_t next, count;
        uint64_t deadline;
        unsigned running;
        uint64_t t0;
        double rate;
};

/* Starts the next summary on slot s, if any is left and the time is not up.  The easy handle
 * goes back to the same multi handle, whose connection cache keeps a connection alive where
 * the server does (rtsoak-server closes each after its answer). */
static void launch(struct feed *f, struct slot *s) {
        if (f->next >= f->count || mono_ns() >= f->deadline)
                return;
        if (f->rate > 0) { /* paced: wait for the summary's moment */
                uint64_t due = f->t0 + (uint64_t) ((double) f->next * 1e9 / f->rate), now;
                while ((now = mono_ns()) < due) {
                        struct timespec ts = { (time_t) ((due - now) / 1000000000),
                                               (long) ((due - now) % 1000000000) };
                        nanosleep(&ts, NULL);
                }
                if (now >= f->deadline)
                        return;
        }
        s->index = f->next++;
        s->reply_len = 0;
        s->reply[0] = '\0';
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, f->bodies[s->index].text);
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t) f->bodies[s->index].len);
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, f->ms[s->index % f->nm].headers);
        s->start_ns = mono_ns();
        if (curl_multi_add_handle(f->multi, s->easy) != CURLM_OK)
                die("curl_multi_add_handle failed");
        f->running++;
}

static int read_proc_cpu(long pid, double *ret_s) {
        char path[64], buf[2048];
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        unsigned long long utime, stime;
        /* After ") ": state(3) ... utime is field 14, stime 15. */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                         &stime) != 2)
                return -EBADMSG;
        *ret_s = (double) (utime + stime) / (double) sysconf(_SC_CLK_TCK);
        return 0;
}

/* The CPU time of the servers, and of the database's processes (the postmaster and its
 * children: the backends of the connections, the WAL writer, the checkpointer ...). */
static void cpu_now(const struct options *o, double *ret_servers, double *ret_db) {
        double sum = 0, v;
        for (unsigned i = 0; i < o->npids; i++) {
                if (read_proc_cpu(o->server_pid[i], &v) < 0)
                        die("cannot read /proc/%ld/stat", o->server_pid[i]);
                sum += v;
        }
        *ret_servers = sum;
        *ret_db = NAN;
        if (o->db_pid <= 0)
                return;
        sum = 0;
        DIR *d = opendir("/proc");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char path[300], buf[1024];
                long pid = strtol(de->d_name, NULL, 10), ppid = 0;
                if (pid <= 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[n] = '\0';
                const char *p = strrchr(buf, ')');
                if (p && sscanf(p + 2, "%*c %ld", &ppid) == 1 &&
                    (pid == o->db_pid || ppid == o->db_pid) && read_proc_cpu(pid, &v) >= 0)
                        sum += v;
        }
        if (d)
                closedir(d);
        *ret_db = sum;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *sorted, size_t n, double q) {
        if (n == 0)
                return NAN;
        size_t i = (size_t) ceil(q * (double) n);
        i = i == 0 ? 0 : i - 1;
        return (double) sorted[i < n ? i : n - 1] / 1e6;
}

static void help(void) {
        printf("ingest-load --url URL... (--enroll RTSOAK_SERVER --db DB | --tokens FILE)\n"
               "            [--machines N] [--connections K] [--count N] [--duration SECONDS]\n"
               "            [--run-id N] [--server-pid PID]... [--db-pid POSTMASTER] [--rate N]\n"
               "            [--json]\n"
               "(--url and --server-pid repeated: several servers of one farm, the connections "
               "spread over them)\n");
}

static void parse(int argc, char **argv, struct options *o) {
        static const struct option opts[] = {
                { "url", required_argument, NULL, 'u' },
                { "enroll", required_argument, NULL, 'e' },
                { "db", required_argument, NULL, 'd' },
                { "tokens", required_argument, NULL, 't' },
                { "machines", required_argument, NULL, 'm' },
                { "connections", required_argument, NULL, 'k' },
                { "count", required_argument, NULL, 'n' },
                { "duration", required_argument, NULL, 'D' },
                { "rate", required_argument, NULL, 'R' },
                { "run-id", required_argument, NULL, 'r' },
                { "server-pid", required_argument, NULL, 'p' },
                { "db-pid", required_argument, NULL, 'P' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 'u':
                        if (o->nurls == SERVERS_MAX)
                                die("at most %d --url", SERVERS_MAX);
                        o->url[o->nurls++] = optarg;
                        break;
                case 'e':
                        o->enroll_bin = optarg;
                        break;
                case 'd':
                        o->db = optarg;
                        break;
                case 't':
                        o->tokens = optarg;
                        break;
                case 'm':
                        o->machines = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'k':
                        o->connections = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'n':
                        o->count = strtoul(optarg, NULL, 10);
                        break;
                case 'D':
                        o->duration_s = strtod(optarg, NULL);
                        break;
                case 'R':
                        o->rate = strtod(optarg, NULL);
                        if (!(o->rate > 0))
                                die("--rate=%s: not a positive number", optarg);
                        break;
                case 'r':
                        o->run_id = strtoll(optarg, NULL, 10);
                        break;
                case 'p':
                        if (o->npids == SERVERS_MAX)
                                die("at most %d --server-pid", SERVERS_MAX);
                        o->server_pid[o->npids++] = strtol(optarg, NULL, 10);
                        break;
                case 'P':
                        o->db_pid = strtol(optarg, NULL, 10);
                        break;
                case 'j':
                        o->json = true;
                        break;
                case 'h':
                        help();
                        exit(EXIT_SUCCESS);
                default:
                        exit(2);
                }
        }
        if (!o->nurls || (!o->tokens && !(o->enroll_bin && o->db)) || o->machines == 0 ||
            o->connections == 0 || o->count == 0 || o->run_id <= 0) {
                help();
                exit(2);
        }
}

int main(int argc, char **argv) {
        struct options o = {
                .machines = 100,
                .connections = 8,
                .count = 10000,
                .run_id = (int64_t) time(NULL) - RUN_EPOCH_S,
        };
        parse(argc, argv, &o);
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                die("curl_global_init failed");

        unsigned nm;
        uint64_t t = mono_ns();
        struct machine *ms = load_machines(&o, &nm);
        double enroll_s = (double) (mono_ns() - t) / 1e9;

        /* Every body is ready before the first request: the client spends its CPU on HTTP
         * only while it measures.  Summary i is upload i / nm of machine i % nm. */
        t = mono_ns();
        struct body *bodies = xcalloc(o.count, sizeof(*bodies));
        size_t total_bytes = 0;
        for (size_t i = 0; i < o.count; i++) {
                struct summary s;
                make_summary(&s, &ms[i % nm], (unsigned) (i % nm), o.run_id, i / nm);
                if (summary_encode(&s, &bodies[i].text, &bodies[i].len) < 0)
                        die("summary_encode failed");
                total_bytes += bodies[i].len;
                summary_done(&s);
        }
        double encode_s = (double) (mono_ns() - t) / 1e9;

        char url[SERVERS_MAX][512];
        for (unsigned i = 0; i < o.nurls; i++)
                snprintf(url[i], sizeof(url[i]), "%s/api/v1/summaries", o.url[i]);
        CURLM *multi = curl_multi_init();
        if (!multi)
                die("curl_multi_init failed");
        curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long) o.connections);
        curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) o.connections);
        struct slot *slots = xcalloc(o.connections, sizeof(*slots));
        uint64_t *lat = xcalloc(o.count, sizeof(*lat));
        unsigned long status[STATUS_SLOTS] = {};
        unsigned long stored = 0, duplicate = 0, transport_errors = 0, done = 0, connects = 0;
        size_t nlat = 0;

        double cpu0 = NAN, cpu1 = NAN, db0 = NAN, db1 = NAN;
        cpu_now(&o, &cpu0, &db0);
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        uint64_t t0 = mono_ns(),
                 deadline = o.duration_s > 0 ? t0 + (uint64_t) (o.duration_s * 1e9) : UINT64_MAX;

        for (unsigned k = 0; k < o.connections; k++) {
                struct slot *s = &slots[k];
                s->easy = curl_easy_init();
                if (!s->easy)
                        die("curl_easy_init failed");
                curl_easy_setopt(s->easy, CURLOPT_URL, url[k % o.nurls]);
                curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(s->easy, CURLOPT_TIMEOUT, 60L);
                curl_easy_setopt(s->easy, CURLOPT_TCP_NODELAY, 1L);
                curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_body);
                curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
                curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
        }
        struct feed f = { multi, bodies, ms, nm, 0, o.count, deadline, 0, t0, o.rate };
        for (unsigned k = 0; k < o.connections; k++)
                launch(&f, &slots[k]);
        while (f.running > 0) {
                int still;
                if (curl_multi_perform(multi, &still) != CURLM_OK)
                        die("curl_multi_perform failed");
                CURLMsg *msg;
                int left;
                while ((msg = curl_multi_info_read(multi, &left))) {
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        struct slot *s;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &s);
                        uint64_t end = mono_ns();
                        CURLcode rc = msg->data.result;
                        curl_multi_remove_handle(multi, s->easy);
                        f.running--;
                        done++;
                        if (rc != CURLE_OK) {
                                transport_errors++;
                                if (transport_errors <= 3)
                                        fprintf(stderr, "ingest-load: summary %zu: %s\n", s->index,
                                                curl_easy_strerror(rc));
                        } else {
                                long code = 0, nconn = 0;
                                curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
                                curl_easy_getinfo(s->easy, CURLINFO_NUM_CONNECTS, &nconn);
                                connects += (unsigned long) nconn;
                                status[code > 0 && code < STATUS_SLOTS ? code : 0]++;
                                lat[nlat++] = end - s->start_ns;
                                if (code == 200 && strstr(s->reply, "\"status\":\"stored\""))
                                        stored++;
                                else if (code == 200)
                                        duplicate++;
                                else if (status[code > 0 && code < STATUS_SLOTS ? code : 0] <= 3)
                                        fprintf(stderr, "ingest-load: summary %zu: %ld %s\n",
                                                s->index, code, s->reply);
                        }
                        launch(&f, s);
                }
                if (f.running > 0)
                        curl_multi_poll(multi, NULL, 0, 100, NULL);
        }
        uint64_t t1 = mono_ns();
        getrusage(RUSAGE_SELF, &ru1);
        cpu_now(&o, &cpu1, &db1);

        double elapsed = (double) (t1 - t0) / 1e9;
        double client_cpu = (double) (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                            (double) (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
                            (double) (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                            (double) (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
        double server_cpu = cpu1 - cpu0;
        qsort(lat, nlat, sizeof(*lat), cmp_u64);
        double rate = (double) stored / elapsed;
        double p50 = pct_ms(lat, nlat, 0.50), p90 = pct_ms(lat, nlat, 0.90),
               p99 = pct_ms(lat, nlat, 0.99), pmax = nlat ? (double) lat[nlat - 1] / 1e6 : NAN;
        double cpu_per = stored ? server_cpu / (double) stored * 1e6 : NAN;
        double db_per = stored ? (db1 - db0) / (double) stored * 1e6 : NAN;

        char statuses[1024] = "";
        size_t sl = 0;
        for (int c = 0; c < STATUS_SLOTS; c++)
                if (status[c])
                        sl += (size_t) snprintf(statuses + sl, sizeof(statuses) - sl,
                                                "%s\"%d\":%lu", sl ? "," : "", c, status[c]);

        if (o.json)
                printf("{\"sent\":%lu,\"stored\":%lu,\"duplicate\":%lu,\"transport_errors\":%lu,"
                       "\"status\":{%s},\"elapsed_s\":%.6f,\"rate\":%.3f,\"p50_ms\":%.3f,"
                       "\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"server_cpu_s\":%.3f,"
                       "\"server_cpu_us_per_summary\":%.1f,\"db_cpu_us_per_summary\":%.1f,"
                       "\"client_cpu_s\":%.3f,"
                       "\"connects\":%lu,\"machines\":%u,\"connections\":%u,"
                       "\"body_bytes_avg\":%.0f,\"run_id\":%" PRId64 ",\"enroll_s\":%.3f,"
                       "\"encode_s\":%.3f}\n",
                       done, stored, duplicate, transport_errors, statuses, elapsed, rate, p50, p90,
                       p99, pmax, server_cpu, cpu_per, o.db_pid > 0 ? db_per : -1.0, client_cpu,
                       connects, nm, o.connections, (double) total_bytes / (double) o.count,
                       o.run_id, enroll_s, encode_s);
        else {
                printf("machines %u, connections %u, run id %" PRId64 ", body %.0f bytes on "
                       "average (encoded in %.2f s)\n",
                       nm, o.connections, o.run_id, (double) total_bytes / (double) o.count,
                       encode_s);
                printf("sent %lu in %.3f s: stored %lu (%.1f summaries/s), duplicate %lu, "
                       "transport errors %lu\n",
                       done, elapsed, stored, rate, duplicate, transport_errors);
                printf("status: {%s}, new connections: %lu\n", statuses, connects);
                printf("latency ms: p50 %.2f, p90 %.2f, p99 %.2f, max %.2f\n", p50, p90, p99, pmax);
                if (o.npids > 0)
                        printf("server CPU %.2f s: %.0f us per stored summary\n", server_cpu,
                               cpu_per);
                if (o.db_pid > 0)
                        printf("database CPU %.2f s: %.0f us per stored summary\n", db1 - db0,
                               db_per);
                printf("client CPU %.2f s\n", client_cpu);
        }

        for (unsigned k = 0; k < o.connections; k++)
                curl_easy_cleanup(slots[k].easy);
        curl_multi_cleanup(multi);
        for (unsigned i = 0; i < nm; i++)
                curl_slist_free_all(ms[i].headers);
        for (size_t i = 0; i < o.count; i++)
                free(bodies[i].text);
        free(bodies);
        free(lat);
        free(slots);
        free(ms);
        curl_global_cleanup();
        return transport_errors == 0 && stored + duplicate == done ? EXIT_SUCCESS : 3;
}
