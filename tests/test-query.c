/* SPDX-License-Identifier: MIT */
/* Integration tests of rtsoak-server's query API and /metrics: the real server on loopback,
 * fed with real summaries (built with the codec) whose maxima and histograms the tests chose,
 * and asked over HTTP with libcurl. */
#include <curl/curl.h>
#include <regex.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "test-http.h"
#include "test-util.h"
#include "test-farmdb.h"
#include "hist.h"
#include "summary.h"
#include "timeutil.h"

#define SEC INT64_C(1000000000)
#define MIN_NS (60 * SEC)
#define HOUR_NS (60 * MIN_NS)
#define DAY_NS (24 * HOUR_NS)
/* UTC midnights, long past: their days are whole and cacheable. */
#define D0 INT64_C(1793577600000000000) /* 2026-11-02 */
#define D1 INT64_C(1793836800000000000) /* 2026-11-05 */
#define D2 INT64_C(1794268800000000000) /* 2026-11-10 */
#define LIMIT_US 1000

#define ID_A "a0000000000000000000000000000001" /* steps, filters, events, runs */
#define ID_B "b0000000000000000000000000000002" /* histograms */
#define ID_C "c0000000000000000000000000000003" /* compare: a regression */
#define ID_D "d0000000000000000000000000000004" /* compare: equal kernels */
#define ID_UNKNOWN "00000000000000000000000000000042"

static char *dir;
static char db_path[512], log_path[512], base_url[128];
static pid_t server_pid;
static char tok_a[80], tok_b[80], tok_c[80], tok_d[80];

/* ---- HTTP ---------------------------------------------------------------------------- */

static struct tu_reply http(const char *method, const char *path, const char *token,
                            const char *body) {
        struct tu_reply r;
        char url[2048];
        snprintf(url, sizeof(url), "%s%s", base_url, path);
        tu_http(method, url, token, body, &r);
        return r;
}

/* GET path, expecting 200 and JSON. */
static json_t *get_json(const char *fmt, ...) _printf_(1, 2);
static json_t *get_json(const char *fmt, ...) {
        char path[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(path, sizeof(path), fmt, ap);
        va_end(ap);
        struct tu_reply r = http("GET", path, NULL, NULL);
        if (r.status != 200)
                fail_msg("GET %s: %ld %s", path, r.status, r.body);
        json_t *j = tu_json(r.body);
        tu_reply_done(&r);
        return j;
}

/* GET path, expecting status and an error message that contains msg. */
static void expect_error(long status, const char *msg, const char *fmt, ...) _printf_(3, 4);
static void expect_error(long status, const char *msg, const char *fmt, ...) {
        char path[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(path, sizeof(path), fmt, ap);
        va_end(ap);
        struct tu_reply r = http("GET", path, NULL, NULL);
        json_t *j = tu_json(r.body);
        const char *e = json_string_value(json_object_get(j, "error"));
        if (r.status != status || !e || !strstr(e, msg))
                fail_msg("GET %s: expected %ld '%s', got %ld %s", path, status, msg, r.status,
                         r.body);
        json_decref(j);
        tu_reply_done(&r);
}

static json_t *jget(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        if (!v)
                fail_msg("no \"%s\" in %s", key, json_dumps(o, JSON_COMPACT));
        return v;
}

static long long ji(json_t *o, const char *key) {
        return tu_jint(o, key);
}

/* ---- fixtures: summaries with chosen maxima and histograms, posted for real ---------- */

/* What one CPU of one interval holds: its histogram's buckets (1 us wide below LIMIT_US) and
 * its exact maximum with its time. */
struct cpu_data {
        uint64_t counts[LIMIT_US + 400];
        uint64_t max_ns;
        int64_t max_offset_ns; /* after the interval's start */
        uint64_t violations;
};

typedef void (*cpu_fn)(uint64_t seq, unsigned cpu, struct cpu_data *d);

struct fixture {
        const char *machine, *token, *kernel, *hostname;
        int64_t run, run_start_ns;
        const char *scenario;
        uint64_t first_seq, n;
        int64_t start_ns;   /* of the interval first_seq */
        int64_t spacing_ns; /* between interval starts */
        unsigned ncpus;
        cpu_fn fn;
};

static uint64_t upload_seq = 1;

static void post(const struct fixture *f, uint64_t first, uint64_t n, const char *events_type,
                 uint64_t nevents, uint64_t first_event, int64_t event_time) {
        static struct cpu_data d;
        struct summary s = {};
        s.machine.id = strdup(f->machine);
        s.machine.hostname = strdup(f->hostname ?: "lab");
        s.machine.cpu_model = strdup("Test CPU");
        s.machine.cpus = f->ncpus;
        s.run.id = f->run;
        s.run.boot_id = strdup("fedcba9876543210fedcba9876543210");
        s.run.kernel_release = strdup(f->kernel);
        s.run.kernel_version = strdup("#1 SMP PREEMPT_RT");
        s.run.kernel_cmdline = strdup("quiet");
        s.run.preempt_model = strdup("PREEMPT_RT");
        s.run.daemon_version = strdup("0.1.0");
        s.run.config_digest =
                strdup("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
        s.run.start_ns = f->run_start_ns;
        s.run.threshold_ns = 100000;
        s.run.probe_interval_ns = 200000;
        s.run.interval_ns = (uint64_t) MIN_NS;
        s.seq = upload_seq++;
        s.nintervals = n;
        s.intervals = calloc(n + 1, sizeof(*s.intervals));
        for (uint64_t i = 0; i < n; i++) {
                struct summary_interval *iv = &s.intervals[i];
                uint64_t seq = first + i;
                iv->seq = seq;
                iv->start_ns = f->start_ns + (int64_t) (seq - f->first_seq) * f->spacing_ns;
                iv->length_ns = (uint64_t) MIN_NS;
                iv->scenario = f->scenario ? strdup(f->scenario) : NULL;
                iv->ncpus = f->ncpus;
                iv->cpus = calloc(f->ncpus, sizeof(*iv->cpus));
                for (unsigned c = 0; c < f->ncpus; c++) {
                        struct summary_cpu *x = &iv->cpus[c];
                        memset(&d, 0, sizeof(d));
                        f->fn(seq, c, &d);
                        uint64_t samples = 0;
                        for (size_t b = 0; b < ELEMENTSOF(d.counts); b++)
                                samples += d.counts[b];
                        *x = (struct summary_cpu){ .cpu = c,
                                                   .samples = samples,
                                                   .min_ns = 1000,
                                                   .avg_ns = 1000,
                                                   .max_ns = d.max_ns,
                                                   .max_time_ns = iv->start_ns + d.max_offset_ns,
                                                   .violations = d.violations,
                                                   .hist_limit_us = LIMIT_US };
                        if (samples) {
                                x->min_ns = 1000;
                                for (size_t b = 0; b < ELEMENTSOF(d.counts); b++)
                                        if (d.counts[b]) {
                                                x->min_ns = hist_bucket_lower_ns(LIMIT_US,
                                                                                 (uint32_t) b);
                                                break;
                                        }
                                x->avg_ns = x->min_ns;
                        }
                        assert_int_equal(hist_encode(LIMIT_US, d.counts, &x->hist, &x->hist_len),
                                         0);
                }
        }
        s.nevents = nevents;
        s.events = calloc(nevents + 1, sizeof(*s.events));
        for (uint64_t e = 0; e < nevents; e++)
                s.events[e] = (struct summary_event){
                        first_event + e, event_time + (int64_t) e * SEC, strdup(events_type),
                        (int) (e % 2),   (int64_t) (100000 + e),         strdup("event")
                };
        char *text;
        assert_int_equal(summary_encode(&s, &text, NULL), 0);
        summary_done(&s);
        struct tu_reply r = http("POST", "/api/v1/summaries", f->token, text);
        if (r.status != 200)
                fail_msg("upload: %ld %s", r.status, r.body);
        tu_reply_done(&r);
        free(text);
}

/* Posts every interval of f, in batches of at most 1000. */
static void post_all(const struct fixture *f) {
        for (uint64_t i = 0; i < f->n; i += 1000)
                post(f, f->first_seq + i, MIN(f->n - i, 1000), NULL, 0, 0, 0);
}

/* Machine A: two CPUs, a maximum that varies with the interval and CPU, and one spike. */
#define SPIKE_SEQ 47
#define SPIKE_CPU 1
#define SPIKE_NS 900000
#define SPIKE_OFFSET_NS 12345
static uint64_t a_max(uint64_t seq, unsigned cpu) {
        if (seq == SPIKE_SEQ && cpu == SPIKE_CPU)
                return SPIKE_NS;
        return 10000 + 997 * ((seq * 7 + cpu * 3) % 11);
}

static void a_cpu(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        d->max_ns = a_max(seq, cpu);
        d->max_offset_ns = seq == SPIKE_SEQ && cpu == SPIKE_CPU ? SPIKE_OFFSET_NS
                                                                : (int64_t) (1000 * cpu + seq);
        d->counts[5] = 100 + seq % 3;
        d->counts[hist_index(LIMIT_US, d->max_ns)] += 1;
        d->violations = d->max_ns > 100000;
}

/* Run 1 of A: hours 0-2 of D0 "idle", hour 2-3 "cpu"; run 2 (another kernel) on D0 + 1 day. */
static const struct fixture a_idle = { .machine = ID_A,
                                       .token = tok_a,
                                       .kernel = "6.6-rt1",
                                       .run = 1,
                                       .run_start_ns = D0,
                                       .scenario = "idle",
                                       .first_seq = 0,
                                       .n = 120,
                                       .start_ns = D0,
                                       .spacing_ns = MIN_NS,
                                       .ncpus = 2,
                                       .fn = a_cpu };
static const struct fixture a_cpu_load = { .machine = ID_A,
                                           .token = tok_a,
                                           .kernel = "6.6-rt1",
                                           .run = 1,
                                           .run_start_ns = D0,
                                           .scenario = "cpu",
                                           .first_seq = 120,
                                           .n = 60,
                                           .start_ns = D0 + 2 * HOUR_NS,
                                           .spacing_ns = MIN_NS,
                                           .ncpus = 2,
                                           .fn = a_cpu };
static const struct fixture a_run2 = { .machine = ID_A,
                                       .token = tok_a,
                                       .kernel = "6.6-rt2",
                                       .run = 2,
                                       .run_start_ns = D0 + DAY_NS,
                                       .scenario = "idle",
                                       .first_seq = 0,
                                       .n = 10,
                                       .start_ns = D0 + DAY_NS,
                                       .spacing_ns = MIN_NS,
                                       .ncpus = 2,
                                       .fn = a_cpu };

/* Machine B: a constructed distribution.  CPU 0 per interval: 990 samples at 10 us, 9 at
 * 50 us, 1 at 200 us (maximum 200.5 us); CPU 1: 999 at 20 us and one overflow at 1.5 ms. */
static void b_cpu(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        (void) seq;
        if (cpu == 0) {
                d->counts[10] = 990;
                d->counts[50] = 9;
                d->counts[200] = 1;
                d->max_ns = 200500;
        } else {
                d->counts[20] = 999;
                d->counts[hist_index(LIMIT_US, 1500000)] = 1;
                d->max_ns = 1500000;
                d->violations = 1;
        }
        d->max_offset_ns = 5;
}

/* 48 intervals over D1, one every 30 minutes. */
static const struct fixture b_day = { .machine = ID_B,
                                      .token = tok_b,
                                      .kernel = "6.6-rt1",
                                      .run = 1,
                                      .run_start_ns = D1,
                                      .scenario = "idle",
                                      .first_seq = 0,
                                      .n = 48,
                                      .start_ns = D1,
                                      .spacing_ns = 30 * MIN_NS,
                                      .ncpus = 2,
                                      .fn = b_cpu };

/* ---- setup --------------------------------------------------------------------------- */

static int setup(void **state) {
        (void) state;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        dir = tu_mkdtemp("query");
        tu_farm_target(dir, "farm", db_path, sizeof(db_path));
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        tu_server_enroll(db_path, ID_A, NULL, NULL, tok_a);
        tu_server_enroll(db_path, ID_B, NULL, NULL, tok_b);
        tu_server_enroll(db_path, ID_C, NULL, NULL, tok_c);
        tu_server_enroll(db_path, ID_D, NULL, NULL, tok_d);
        static const char *const extra[] = { "--rate", "1000000", "--burst", "1000000", NULL };
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", extra, base_url,
                                     sizeof(base_url));
        post_all(&a_idle);
        post_all(&a_cpu_load);
        post_all(&b_day);
        return 0;
}

static int teardown(void **state) {
        (void) state;
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                tu_wait(server_pid, 10000);
        }
        /* Under the sanitizers, what they found in the server is in its log. */
        char *log = tu_read_file(log_path);
        bool bad = strstr(log, "Sanitizer") || strstr(log, "runtime error:");
        if (bad)
                fprintf(stderr, "# server log:\n%s\n", log);
        free(log);
        tu_farm_drop(db_path);
        tu_rmdir(dir);
        curl_global_cleanup();
        return bad ? -1 : 0;
}

static long long db_int(const char *sql) {
        return tu_farm_int(db_path, sql);
}

static void db_exec(const char *sql) {
        tu_farm_exec(db_path, sql);
}

static const char *rfc3339(int64_t ns) {
        static char buf[4][64];
        static int k;
        time_t s = (time_t) (ns / SEC);
        struct tm tm;
        gmtime_r(&s, &tm);
        char *b = buf[k++ % 4];
        strftime(b, 64, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return b;
}

/* ---- intervals per step -------------------------------------------------------------- */

/* The 5-minute steps of 1-minute data hold the worst of their five intervals, with its CPU
 * and time; without step= every interval is its own step. */
static void test_steps(void **state) {
        (void) state;
        json_t *j = get_json("/api/v1/machines/" ID_A "/intervals?from=%s&to=%lld&step=5min",
                             rfc3339(D0), (long long) (D0 + 2 * HOUR_NS));
        json_t *steps = jget(j, "steps");
        assert_int_equal(json_array_size(steps), 24);
        assert_int_equal(ji(j, "total"), 24);
        assert_int_equal(ji(j, "step_ns"), 5 * MIN_NS);
        assert_true(json_is_null(jget(j, "next")));
        for (size_t k = 0; k < 24; k++) {
                json_t *s = json_array_get(steps, k);
                uint64_t max = 0, samples = 0;
                unsigned max_cpu = 0;
                for (uint64_t seq = 5 * k; seq < 5 * k + 5; seq++)
                        for (unsigned c = 0; c < 2; c++) {
                                if (a_max(seq, c) > max) {
                                        max = a_max(seq, c);
                                        max_cpu = c;
                                }
                                samples += 100 + seq % 3 + 1;
                        }
                assert_int_equal(ji(s, "start_ns"), D0 + (int64_t) k * 5 * MIN_NS);
                assert_string_equal(json_string_value(jget(s, "start")),
                                    rfc3339(D0 + (int64_t) k * 5 * MIN_NS));
                assert_int_equal(ji(s, "max_ns"), max);
                assert_int_equal(ji(s, "intervals"), 5);
                assert_int_equal(ji(s, "covered_ns"), 5 * MIN_NS);
                assert_int_equal(ji(s, "samples"), samples);
                assert_string_equal(json_string_value(json_array_get(jget(s, "kernels"), 0)),
                                    "6.6-rt1");
                assert_string_equal(json_string_value(json_array_get(jget(s, "scenarios"), 0)),
                                    "idle");
                if (k == SPIKE_SEQ / 5) {
                        assert_int_equal(max, SPIKE_NS);
                        assert_int_equal(ji(s, "max_cpu"), SPIKE_CPU);
                        assert_int_equal(ji(s, "max_time_ns"),
                                         D0 + SPIKE_SEQ * MIN_NS + SPIKE_OFFSET_NS);
                        assert_int_equal(ji(s, "violations"), 1);
                } else {
                        assert_int_equal(ji(s, "max_cpu"), max_cpu);
                        assert_int_equal(ji(s, "violations"), 0);
                }
        }
        json_decref(j);

        /* Default step: the interval length, so every interval of the window is a step. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld", (long long) D0,
                     (long long) (D0 + HOUR_NS));
        assert_int_equal(ji(j, "step_ns"), MIN_NS);
        assert_int_equal(ji(j, "total"), 60);
        json_t *s = json_array_get(jget(j, "steps"), SPIKE_SEQ);
        assert_int_equal(ji(s, "max_ns"), SPIKE_NS);
        assert_int_equal(ji(s, "intervals"), 1);
        json_decref(j);

        /* Default window: the 24 hours up to the latest data (all 180 intervals). */
        j = get_json("/api/v1/machines/" ID_A "/intervals?step=1h");
        assert_int_equal(ji(j, "total"), 3);
        assert_int_equal(ji(j, "to_ns"), D0 + 179 * MIN_NS + 1);
        json_decref(j);

        /* Steps without data are absent: 1 h steps over a day of 3 hours of data. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%s&to=%s&step=1h",
                     rfc3339(D0 - DAY_NS), rfc3339(D0 + DAY_NS));
        assert_int_equal(ji(j, "total"), 3);
        assert_int_equal(ji(json_array_get(jget(j, "steps"), 0), "start_ns"), D0);
        json_decref(j);
}

/* from is inclusive, to exclusive, in both forms. */
static void test_window_bounds(void **state) {
        (void) state;
        /* [10 min, 20 min): intervals 10-19, two steps of five. */
        json_t *j = get_json("/api/v1/machines/" ID_A "/intervals?from=%s&to=%lld&step=5min",
                             rfc3339(D0 + 10 * MIN_NS), (long long) (D0 + 20 * MIN_NS));
        assert_int_equal(ji(j, "total"), 2);
        assert_int_equal(ji(json_array_get(jget(j, "steps"), 0), "intervals"), 5);
        assert_int_equal(ji(json_array_get(jget(j, "steps"), 1), "intervals"), 5);
        json_decref(j);
        /* One ns later: interval 10 is out; one ns more at the end: interval 20 is in, in a
         * third step. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&step=5min",
                     (long long) (D0 + 10 * MIN_NS + 1), (long long) (D0 + 20 * MIN_NS + 1));
        assert_int_equal(ji(j, "total"), 3);
        json_t *steps = jget(j, "steps");
        assert_int_equal(ji(json_array_get(steps, 0), "start_ns"), D0 + 10 * MIN_NS);
        assert_int_equal(ji(json_array_get(steps, 0), "intervals"), 4);
        assert_int_equal(ji(json_array_get(steps, 2), "intervals"), 1);
        json_decref(j);
        /* RFC 3339 with an offset: 01:10+01:00 is 00:10Z ('+' encoded in the query). */
        j = get_json("/api/v1/machines/" ID_A
                     "/intervals?from=2026-11-02T01:10:00%%2B01:00&to=%lld&step=5min",
                     (long long) (D0 + 20 * MIN_NS));
        assert_int_equal(ji(j, "from_ns"), D0 + 10 * MIN_NS);
        assert_int_equal(ji(j, "total"), 2);
        json_decref(j);
}

static void test_cpu_and_scenario_filters(void **state) {
        (void) state;
        json_t *j = get_json("/api/v1/machines/" ID_A
                             "/intervals?from=%lld&to=%lld&step=5min&cpu=0",
                             (long long) D0, (long long) (D0 + HOUR_NS));
        json_t *steps = jget(j, "steps");
        assert_int_equal(json_array_size(steps), 12);
        for (size_t k = 0; k < 12; k++) {
                json_t *s = json_array_get(steps, k);
                uint64_t max = 0, samples = 0;
                for (uint64_t seq = 5 * k; seq < 5 * k + 5; seq++) {
                        max = MAX(max, a_max(seq, 0));
                        samples += 100 + seq % 3 + 1;
                }
                assert_int_equal(ji(s, "max_ns"), max);
                assert_int_equal(ji(s, "max_cpu"), 0);
                assert_int_equal(ji(s, "samples"), samples);
        }
        /* The spike is CPU 1's: CPU 0 does not show it. */
        assert_true(ji(json_array_get(steps, SPIKE_SEQ / 5), "max_ns") < SPIKE_NS);
        json_decref(j);
        /* A CPU that never reported: no step. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&cpu=5", (long long) D0,
                     (long long) (D0 + HOUR_NS));
        assert_int_equal(ji(j, "total"), 0);
        json_decref(j);

        /* Scenarios: hours 0-2 idle, hour 2-3 cpu. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&step=1h&scenario=cpu",
                     (long long) D0, (long long) (D0 + DAY_NS));
        assert_int_equal(ji(j, "total"), 1);
        json_t *s = json_array_get(jget(j, "steps"), 0);
        assert_int_equal(ji(s, "start_ns"), D0 + 2 * HOUR_NS);
        assert_int_equal(ji(s, "intervals"), 60);
        assert_string_equal(json_string_value(json_array_get(jget(s, "scenarios"), 0)), "cpu");
        assert_string_equal(json_string_value(jget(j, "scenario")), "cpu");
        json_decref(j);
        /* A step that holds both. */
        j = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&step=3h",
                     (long long) D0, (long long) (D0 + DAY_NS));
        s = json_array_get(jget(j, "steps"), 0);
        assert_int_equal(ji(s, "intervals"), 180);
        assert_int_equal(json_array_size(jget(s, "scenarios")), 2);
        json_decref(j);
}

/* limit/offset/next walk every step once, in order; total stays the same. */
static void test_pagination(void **state) {
        (void) state;
        json_t *all = get_json("/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&step=5min",
                               (long long) D0, (long long) (D0 + DAY_NS));
        json_t *all_steps = jget(all, "steps");
        assert_int_equal(ji(all, "total"), 36);
        char path[2048];
        snprintf(path, sizeof(path),
                 "/api/v1/machines/" ID_A "/intervals?from=%lld&to=%s&step=5min&limit=5",
                 (long long) D0, rfc3339(D0 + DAY_NS));
        size_t seen = 0, pages = 0;
        for (;;) {
                json_t *j = get_json("%s", path);
                pages++;
                assert_int_equal(ji(j, "total"), 36);
                assert_int_equal(ji(j, "limit"), 5);
                assert_int_equal(ji(j, "offset"), seen);
                json_t *steps = jget(j, "steps");
                for (size_t i = 0; i < json_array_size(steps); i++, seen++)
                        assert_int_equal(ji(json_array_get(steps, i), "start_ns"),
                                         ji(json_array_get(all_steps, seen), "start_ns"));
                json_t *next = jget(j, "next");
                if (json_is_null(next)) {
                        json_decref(j);
                        break;
                }
                assert_true(pages < 20);
                snprintf(path, sizeof(path), "%s", json_string_value(next));
                assert_non_null(strstr(path, "step=5min"));
                json_decref(j);
        }
        assert_int_equal(seen, 36);
        assert_int_equal(pages, 8);
        json_decref(all);
        /* Past the end: an empty page, the same total. */
        json_t *j = get_json("/api/v1/machines/" ID_A
                             "/intervals?from=%lld&to=%lld&step=5min&offset=100",
                             (long long) D0, (long long) (D0 + DAY_NS));
        assert_int_equal(json_array_size(jget(j, "steps")), 0);
        assert_int_equal(ji(j, "total"), 36);
        json_decref(j);
}

static void test_bad_parameters(void **state) {
        (void) state;
        const char *iv = "/api/v1/machines/" ID_A "/intervals";
        expect_error(400, "from=yesterday-ish", "%s?from=yesterday-ish", iv);
        expect_error(400, "to=2026-13-01", "%s?to=2026-13-01", iv);
        expect_error(400, "step=0", "%s?step=0", iv);
        expect_error(400, "step=", "%s?step=fast", iv);
        expect_error(400, "limit=0", "%s?limit=0", iv);
        expect_error(400, "limit=10001", "%s?limit=10001", iv);
        expect_error(400, "offset=-1", "%s?offset=-1", iv);
        expect_error(400, "cpu=-1", "%s?cpu=-1", iv);
        expect_error(400, "cpu=8192", "%s?cpu=8192", iv);
        expect_error(400, "form: unknown parameter", "%s?form=%lld", iv, (long long) D0);
        expect_error(400, "cpu: given more than once", "%s?cpu=0&cpu=1", iv);
        expect_error(400, "scenario=no way", "%s?scenario=no%%20way", iv);
        expect_error(400, "from=", "%s?from=%lld&to=%lld", iv, (long long) D0, (long long) D0);
        /* A year at 1 s: over 100,000 steps. */
        expect_error(400, "step=1s", "%s?from=%lld&to=%lld&step=1s", iv, (long long) D0,
                     (long long) (D0 + 365 * DAY_NS));
        expect_error(400, "form: unknown parameter", "/api/v1/machines/" ID_A "/histogram?form=1");
        expect_error(400, "cpu=x", "/api/v1/machines/" ID_A "/histogram?cpu=x");
        expect_error(400, "type=Bad", "/api/v1/machines/" ID_A "/events?type=Bad");
        expect_error(400, "from=never", "/api/v1/machines/" ID_A "/events?from=never");
        expect_error(400, "from: unknown parameter", "/api/v1/machines/" ID_A "/runs?from=0");
        expect_error(400, "limit=0", "/api/v1/machines?limit=0");
        expect_error(400, "with: required", "/api/v1/kernels/6.6-rt1/compare");
        expect_error(400, "tolerance=abc",
                     "/api/v1/kernels/6.6-rt1/compare?with=6.6-rt1&tolerance=abc");
        expect_error(400, "x: unknown parameter", "/metrics?x=1");

        const char *subs[] = { "intervals", "histogram", "events", "runs" };
        for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
                expect_error(404, "no such machine", "/api/v1/machines/" ID_UNKNOWN "/%s", subs[i]);
                expect_error(404, "no such machine", "/api/v1/machines/nothex/%s", subs[i]);
        }
        expect_error(404, "no such resource", "/api/v1/machines/" ID_A "/elsewhere");
        expect_error(404, "no such kernel: 9.9-nothing",
                     "/api/v1/kernels/9.9-nothing/compare?with=6.6-rt1");
        expect_error(404, "with=9.9-nothing: no such kernel",
                     "/api/v1/kernels/6.6-rt1/compare?with=9.9-nothing");

        struct tu_reply r = http("POST", "/api/v1/machines/" ID_A "/intervals", NULL, "{}");
        assert_int_equal(r.status, 405);
        assert_string_equal(r.allow, "GET, HEAD");
        tu_reply_done(&r);
        r = http("DELETE", "/metrics", NULL, NULL);
        assert_int_equal(r.status, 405);
        tu_reply_done(&r);
        r = http("HEAD", "/api/v1/machines/" ID_A "/runs", NULL, NULL);
        assert_int_equal(r.status, 200);
        tu_reply_done(&r);
}

/* ---- histograms ---------------------------------------------------------------------- */

static long long bucket(json_t *h, long long us) {
        json_t *b = jget(h, "buckets");
        for (size_t i = 0; i < json_array_size(b); i++)
                if (json_integer_value(json_array_get(json_array_get(b, i), 0)) == us)
                        return json_integer_value(json_array_get(json_array_get(b, i), 1));
        return 0;
}

static json_t *cpu_of(json_t *j, long long cpu) {
        json_t *l = jget(j, "cpus");
        for (size_t i = 0; i < json_array_size(l); i++)
                if (ji(json_array_get(l, i), "cpu") == cpu)
                        return json_array_get(l, i);
        fail_msg("no CPU %lld", cpu);
        return NULL;
}

static long long pct(json_t *h, const char *p) {
        return ji(jget(h, "percentiles"), p);
}

static void check_b_day(json_t *j, long long n) {
        json_t *c0 = cpu_of(j, 0), *c1 = cpu_of(j, 1), *all = jget(j, "all");
        assert_int_equal(ji(c0, "samples"), 1000 * n);
        assert_int_equal(bucket(c0, 10), 990 * n);
        assert_int_equal(bucket(c0, 50), 9 * n);
        assert_int_equal(bucket(c0, 200), 1 * n);
        assert_int_equal(json_array_size(jget(c0, "buckets")), 3);
        assert_int_equal(ji(c0, "overflow"), 0);
        assert_int_equal(ji(c0, "max_ns"), 200500);
        /* 99 % of the samples are in [10, 11) us, 99.9 % below 51 us, and the last 0.1 % at
         * 200 us: an upper bound, never above the exact maximum. */
        assert_int_equal(pct(c0, "p50_ns"), 11000);
        assert_int_equal(pct(c0, "p99_ns"), 11000);
        assert_int_equal(pct(c0, "p99_9_ns"), 51000);
        assert_int_equal(pct(c0, "p99_99_ns"), 200500);
        assert_int_equal(ji(c1, "samples"), 1000 * n);
        assert_int_equal(bucket(c1, 20), 999 * n);
        assert_int_equal(ji(c1, "overflow"), n);
        assert_int_equal(ji(c1, "max_ns"), 1500000);
        assert_int_equal(ji(c1, "violations"), n);
        /* All CPUs: the sum of both. */
        assert_int_equal(ji(all, "samples"), 2000 * n);
        assert_int_equal(bucket(all, 10), 990 * n);
        assert_int_equal(bucket(all, 20), 999 * n);
        assert_int_equal(ji(all, "overflow"), n);
        assert_int_equal(ji(all, "max_ns"), 1500000);
        assert_int_equal(pct(all, "p50_ns"), 21000);
        /* The top 0.05 % is the overflow: in its 12.5 % log bucket, capped by the maximum. */
        assert_true(pct(all, "p99_99_ns") > 1000000 && pct(all, "p99_99_ns") <= 1500000);
}

/* The rows of B's day in hist_days: how many, and their samples. */
#define B_DAY_ROWS                                                                      \
        "FROM hist_days h JOIN runs r ON h.run = r.id WHERE r.machine_id = '" ID_B "' " \
        "AND h.day = 20762"
_Static_assert(D1 / DAY_NS == 20762, "B's day");

/* The answer to path+query with the kept rows of every day and again from the intervals (the
 * rows marked as not kept, as a day whose histogram could not be kept): the same. */
static json_t *kept_and_merged(const char *path, const char *query) {
        json_t *kept = get_json("%s%s", path, query);
        db_exec("UPDATE run_days SET cpu_hists = 0");
        json_t *merged = get_json("%s%s", path, query);
        db_exec("UPDATE run_days SET cpu_hists = 1");
        if (!json_equal(kept, merged))
                fail_msg("%s%s: the kept rows and the intervals differ:\n%s\n%s", path, query,
                         json_dumps(kept, JSON_COMPACT), json_dumps(merged, JSON_COMPACT));
        json_decref(merged);
        return kept;
}

static void test_histogram_and_day_rows(void **state) {
        (void) state;
        const char *path = "/api/v1/machines/" ID_B "/histogram";
        char q[128];
        /* Kept at ingest, before any query: one row per scenario and CPU of the day. */
        assert_int_equal(db_int("SELECT count(*) " B_DAY_ROWS), 2);
        assert_int_equal(db_int("SELECT sum(h.samples) " B_DAY_ROWS), 2 * 48000);
        json_t *j = get_json("%s?from=%s&to=%s", path, rfc3339(D1), rfc3339(D1 + DAY_NS));
        check_b_day(j, 48);
        json_decref(j);
        snprintf(q, sizeof(q), "?from=%lld&to=%lld", (long long) D1, (long long) (D1 + DAY_NS));
        j = kept_and_merged(path, q);
        check_b_day(j, 48);
        json_decref(j);
        /* A window that covers the day and more reads the rows too. */
        snprintf(q, sizeof(q), "?from=%lld&to=%lld", (long long) (D1 - HOUR_NS),
                 (long long) (D1 + DAY_NS + HOUR_NS));
        j = kept_and_merged(path, q);
        check_b_day(j, 48);
        json_decref(j);
        /* A's days hold three hours and ten minutes of data: a window that holds all of a
         * day's data, though not all of the calendar day, reads its kept rows, the same as
         * its intervals. */
        snprintf(q, sizeof(q), "?from=%lld&to=%lld", (long long) D0,
                 (long long) (D0 + DAY_NS + HOUR_NS));
        j = kept_and_merged("/api/v1/machines/" ID_A "/histogram", q);
        int64_t all = ji(jget(j, "all"), "samples");
        json_decref(j);
        /* From an hour into D0: its first hour is not in the window, nor in the answer. */
        snprintf(q, sizeof(q), "?from=%lld&to=%lld", (long long) (D0 + HOUR_NS),
                 (long long) (D0 + DAY_NS + HOUR_NS));
        j = kept_and_merged("/api/v1/machines/" ID_A "/histogram", q);
        assert_true(ji(jget(j, "all"), "samples") > 0);
        assert_true(ji(jget(j, "all"), "samples") < all);
        json_decref(j);
        /* Part of the day: read from the intervals (6 of them in three hours). */
        j = get_json("%s?from=%lld&to=%lld", path, (long long) (D1 + HOUR_NS),
                     (long long) (D1 + 4 * HOUR_NS));
        check_b_day(j, 6);
        json_decref(j);
        /* One CPU, scenario filters. */
        snprintf(q, sizeof(q), "?from=%lld&to=%lld&cpu=1", (long long) D1,
                 (long long) (D1 + DAY_NS));
        j = kept_and_merged(path, q);
        assert_int_equal(json_array_size(jget(j, "cpus")), 1);
        assert_int_equal(ji(jget(j, "all"), "samples"), 48000);
        assert_int_equal(ji(jget(j, "all"), "overflow"), 48);
        json_decref(j);
        snprintf(q, sizeof(q), "?from=%lld&to=%lld&scenario=cpu", (long long) D1,
                 (long long) (D1 + DAY_NS));
        j = kept_and_merged(path, q);
        assert_int_equal(json_array_size(jget(j, "cpus")), 0);
        assert_int_equal(ji(jget(j, "all"), "samples"), 0);
        json_decref(j);
        /* Pagination of the CPUs. */
        j = get_json("%s?from=%lld&to=%lld&limit=1&offset=1", path, (long long) D1,
                     (long long) (D1 + DAY_NS));
        assert_int_equal(ji(j, "total"), 2);
        assert_int_equal(ji(json_array_get(jget(j, "cpus"), 0), "cpu"), 1);
        assert_true(json_is_null(jget(j, "next")));
        json_decref(j);

        /* A late interval of the day merges into its rows, and the answer has it; sent again
         * (a duplicate, not stored) it is not merged twice. */
        struct fixture late = b_day;
        late.first_seq = 100;
        late.n = 1;
        late.start_ns = D1 + 15 * MIN_NS; /* between two of the others */
        late.fn = a_cpu;                  /* CPU 0: 101 samples at 5 us and one at its maximum */
        uint64_t extra = 100 + 100 % 3 + 1;
        for (int again = 0; again < 2; again++) {
                post_all(&late);
                assert_int_equal(db_int("SELECT count(*) " B_DAY_ROWS), 2);
                assert_int_equal(db_int("SELECT sum(h.samples) " B_DAY_ROWS " AND h.cpu = 0"),
                                 48000 + extra);
        }
        snprintf(q, sizeof(q), "?from=%lld&to=%lld", (long long) D1, (long long) (D1 + DAY_NS));
        j = kept_and_merged(path, q);
        json_t *c0 = cpu_of(j, 0);
        assert_int_equal(ji(c0, "samples"), 48000 + extra);
        assert_int_equal(bucket(c0, 5), extra - 1);
        assert_int_equal(bucket(c0, 10), 48 * 990);
        json_decref(j);
}

/* ---- kernel comparison ---------------------------------------------------------------- */

static void cmp_base(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        (void) seq;
        (void) cpu;
        d->counts[8] = 990;
        d->counts[20] = 9;
        d->counts[30] = 1;
        d->max_ns = 30400;
}

/* Ten times worse tail: p99.9 at 101 us, worst 300 us. */
static void cmp_worse(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        (void) seq;
        (void) cpu;
        d->counts[8] = 990;
        d->counts[100] = 9;
        d->counts[300] = 1;
        d->max_ns = 300400;
        d->violations = 1;
}

/* A comparison's counts. */
static void expect_counts(json_t *j, long long total, long long in_both, long long only_kernel,
                          long long only_with, long long regressions) {
        assert_int_equal(ji(j, "total"), total);
        assert_int_equal(ji(j, "in_both"), in_both);
        assert_int_equal(ji(j, "only_kernel"), only_kernel);
        assert_int_equal(ji(j, "only_with"), only_with);
        assert_int_equal(ji(j, "regressions"), regressions);
}

/* days=N: each kernel's newest N days with data.  The new kernel's newest day is today (D's),
 * the base's D2: with one day, C's idle is the base's alone, its io (D2 + 1 day) in neither. */
static void compare_days(int64_t today) {
        json_t *all = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base");
        json_t *j = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base&days=1&limit=1");
        expect_counts(j, 2, 1, 0, 1, 0);
        json_t *c_idle = json_array_get(jget(j, "comparisons"), 0);
        assert_string_equal(json_string_value(jget(c_idle, "machine")), ID_C);
        assert_string_equal(json_string_value(jget(c_idle, "in")), "with");
        json_t *d = jget(j, "days");
        assert_int_equal(ji(d, "days"), 1);
        assert_int_equal(ji(jget(d, "kernel"), "from_ns"), today);
        assert_int_equal(ji(jget(d, "kernel"), "to_ns"), today + DAY_NS);
        assert_int_equal(ji(jget(d, "with"), "from_ns"), D2);
        assert_int_equal(ji(jget(d, "with"), "to_ns"), D2 + DAY_NS);
        assert_non_null(strstr(json_string_value(jget(j, "next")), "days=1"));
        json_decref(j);
        /* Days enough for all the data: the same comparisons as without days=. */
        j = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base&days=36500");
        assert_int_equal(ji(jget(j, "days"), "days"), 36500);
        json_object_del(j, "days");
        if (!json_equal(j, all))
                fail_msg("days=36500 and all days differ:\n%s\n%s", json_dumps(j, JSON_COMPACT),
                         json_dumps(all, JSON_COMPACT));
        json_decref(j);
        json_decref(all);
        /* Two days of the new kernel: today and yesterday, still not D2 + 1 day. */
        j = get_json("/api/v1/kernels/7.1-new/compare?with=7.1-new&days=2");
        assert_int_equal(ji(j, "total"), 1);
        assert_int_equal(ji(jget(jget(j, "days"), "kernel"), "from_ns"), today - DAY_NS);
        json_decref(j);
        expect_error(400, "days=0", "/api/v1/kernels/7.1-new/compare?with=7.0-base&days=0");
        expect_error(400, "days=36501", "/api/v1/kernels/7.1-new/compare?with=7.0-base&days=36501");
        expect_error(400, "days=", "/api/v1/kernels/7.1-new/compare?with=7.0-base&days=1d");
}

static void test_compare(void **state) {
        (void) state;
        int64_t today = (now_ns(CLOCK_REALTIME) / DAY_NS) * DAY_NS;
        /* C: base on D2, worse on D2 + 1 day, and an "io" scenario only on the new kernel. */
        const struct fixture base = { .kernel = "7.0-base",
                                      .run = 1,
                                      .run_start_ns = D2,
                                      .scenario = "idle",
                                      .first_seq = 0,
                                      .n = 30,
                                      .start_ns = D2,
                                      .spacing_ns = 10 * MIN_NS,
                                      .ncpus = 2,
                                      .fn = cmp_base };
        struct fixture f = base;
        f.machine = ID_C;
        f.token = tok_c;
        post_all(&f);
        f.kernel = "7.1-new";
        f.run = 2;
        f.run_start_ns = f.start_ns = D2 + DAY_NS;
        f.fn = cmp_worse;
        post_all(&f);
        f.scenario = "io";
        f.first_seq = 100;
        f.n = 3;
        f.start_ns = D2 + DAY_NS + 12 * HOUR_NS;
        post_all(&f);
        /* D: the same data under both kernels; the new one today (not cacheable yet). */
        struct fixture g = base;
        g.machine = ID_D;
        g.token = tok_d;
        post_all(&g);
        g.kernel = "7.1-new";
        g.run = 2;
        g.run_start_ns = g.start_ns = today;
        g.spacing_ns = MIN_NS;
        post_all(&g);

        json_t *j = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base");
        expect_counts(j, 3, 2, 1, 0, 1);
        assert_int_equal(ji(j, "tolerance_percent"), 10);
        assert_int_equal(ji(j, "min_difference_ns"), 5000);
        json_t *l = jget(j, "comparisons");
        json_t *c_idle = json_array_get(l, 0), *c_io = json_array_get(l, 1),
               *d_idle = json_array_get(l, 2);
        assert_string_equal(json_string_value(jget(c_idle, "machine")), ID_C);
        assert_string_equal(json_string_value(jget(c_idle, "scenario")), "idle");
        assert_true(json_is_true(jget(c_idle, "regression")));
        assert_int_equal(ji(jget(c_idle, "kernel"), "worst_ns"), 300400);
        assert_int_equal(ji(jget(c_idle, "with"), "worst_ns"), 30400);
        assert_int_equal(ji(jget(c_idle, "kernel"), "p99_9_ns"), 101000);
        assert_int_equal(ji(jget(c_idle, "with"), "p99_9_ns"), 21000);
        assert_int_equal(ji(jget(c_idle, "difference"), "worst_ns"), 300400 - 30400);
        assert_int_equal(ji(jget(c_idle, "kernel"), "samples"), 30 * 2 * 1000);
        assert_string_equal(json_string_value(jget(c_io, "scenario")), "io");
        assert_string_equal(json_string_value(jget(c_io, "in")), "kernel");
        assert_true(json_is_null(jget(c_io, "with")));
        assert_true(json_is_null(jget(c_io, "regression")));
        assert_string_equal(json_string_value(jget(d_idle, "machine")), ID_D);
        assert_true(json_is_false(jget(d_idle, "regression")));
        assert_int_equal(ji(jget(d_idle, "difference"), "worst_ns"), 0);
        assert_int_equal(ji(jget(d_idle, "difference"), "p99_9_ns"), 0);
        /* The same upload again (duplicates) changes nothing; a late interval of a past day
         * merges into that day. */
        long long io_samples = ji(jget(c_io, "kernel"), "samples");
        post_all(&f);
        json_t *again = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base");
        if (!json_equal(j, again))
                fail_msg("duplicates changed the comparison:\n%s\n%s", json_dumps(j, JSON_COMPACT),
                         json_dumps(again, JSON_COMPACT));
        json_decref(again);
        json_decref(j);
        f.first_seq = 200;
        f.n = 1;
        f.start_ns = D2 + DAY_NS + 20 * HOUR_NS;
        post_all(&f);
        j = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base");
        assert_int_equal(ji(jget(json_array_get(jget(j, "comparisons"), 1), "kernel"), "samples"),
                         io_samples + io_samples / 3);
        /* The past days were read from the day histograms of all CPUs kept at ingest; with
         * those rows gone (as a day whose histogram could not be kept) the intervals give the
         * same answer. */
        assert_true(db_int("SELECT count(*) FROM run_day_hists h JOIN runs r ON h.run = r.id "
                           "WHERE r.machine_id = '" ID_C "' AND h.hist IS NOT NULL") > 0);
        db_exec("UPDATE run_day_hists SET hist = NULL");
        json_t *from_intervals = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base");
        if (!json_equal(j, from_intervals))
                fail_msg("the day histograms and the intervals differ:\n%s\n%s",
                         json_dumps(j, JSON_COMPACT), json_dumps(from_intervals, JSON_COMPACT));
        json_decref(from_intervals);
        json_decref(j);
        /* A tolerance of 1000 % forgives a 10x tail; the other way round nothing is worse. */
        j = get_json("/api/v1/kernels/7.1-new/compare?with=7.0-base&tolerance=1000%%25");
        assert_int_equal(ji(j, "regressions"), 0);
        json_decref(j);
        j = get_json("/api/v1/kernels/7.0-base/compare?with=7.1-new");
        assert_int_equal(ji(j, "regressions"), 0);
        assert_int_equal(ji(j, "only_with"), 1);
        json_decref(j);
        /* A kernel compared with itself. */
        j = get_json("/api/v1/kernels/7.1-new/compare?with=7.1-new&limit=1");
        assert_int_equal(ji(j, "regressions"), 0);
        assert_int_equal(ji(j, "in_both"), 3);
        assert_non_null(json_string_value(jget(j, "next")));
        json_decref(j);
        compare_days(today);
}

/* ---- events, runs, machines ----------------------------------------------------------- */

static void test_events_and_runs(void **state) {
        (void) state;
        /* Run 1 of A ended uncleanly (the daemon records that in the run that ended); run 2
         * started a day later, with five violations. */
        post(&a_idle, 0, 0, "unclean_end", 1, 1, D0 + 3 * HOUR_NS);
        post_all(&a_run2);
        post(&a_run2, 0, 0, "violation", 5, 1, D0 + DAY_NS + 60 * SEC);

        json_t *j = get_json("/api/v1/machines/" ID_A "/runs");
        assert_int_equal(ji(j, "total"), 2);
        json_t *r2 = json_array_get(jget(j, "runs"), 0), *r1 = json_array_get(jget(j, "runs"), 1);
        assert_int_equal(ji(r2, "id"), 2);
        assert_string_equal(json_string_value(jget(r2, "kernel_release")), "6.6-rt2");
        assert_int_equal(ji(r2, "intervals"), 10);
        assert_true(json_is_null(jget(r2, "end")));
        assert_int_equal(ji(r1, "id"), 1);
        assert_int_equal(ji(r1, "intervals"), 180);
        assert_int_equal(ji(r1, "first_data_ns"), D0);
        assert_int_equal(ji(r1, "last_data_ns"), D0 + 180 * MIN_NS);
        assert_int_equal(ji(r1, "worst_latency_ns"), SPIKE_NS);
        assert_string_equal(json_string_value(jget(jget(r1, "end"), "how")), "unclean");
        assert_int_equal(ji(jget(r1, "end"), "time_ns"), D0 + 3 * HOUR_NS);
        json_decref(j);
        j = get_json("/api/v1/machines/" ID_A "/runs?limit=1");
        assert_string_equal(json_string_value(jget(j, "next")),
                            "/api/v1/machines/" ID_A "/runs?limit=1&offset=1");
        json_decref(j);

        /* Newest first, filtered by type and time. */
        j = get_json("/api/v1/machines/" ID_A "/events");
        assert_int_equal(ji(j, "total"), 6);
        json_t *ev = jget(j, "events");
        assert_int_equal(ji(json_array_get(ev, 0), "time_ns"), D0 + DAY_NS + 64 * SEC);
        assert_string_equal(json_string_value(jget(json_array_get(ev, 5), "type")), "unclean_end");
        assert_int_equal(ji(json_array_get(ev, 5), "run"), 1);
        json_decref(j);
        j = get_json("/api/v1/machines/" ID_A "/events?type=violation&from=%lld&to=%s&limit=2",
                     (long long) (D0 + DAY_NS + 61 * SEC), rfc3339(D0 + DAY_NS + 64 * SEC));
        /* [61 s, 64 s): the violations at 61, 62 and 63 s. */
        assert_int_equal(ji(j, "total"), 3);
        ev = jget(j, "events");
        assert_int_equal(json_array_size(ev), 2);
        assert_int_equal(ji(json_array_get(ev, 0), "time_ns"), D0 + DAY_NS + 63 * SEC);
        assert_int_equal(ji(json_array_get(ev, 0), "value"), 100003);
        json_t *next = jget(j, "next");
        assert_non_null(strstr(json_string_value(next), "offset=2"));
        json_t *j2 = get_json("%s", json_string_value(next));
        assert_int_equal(json_array_size(jget(j2, "events")), 1);
        assert_int_equal(ji(json_array_get(jget(j2, "events"), 0), "time_ns"),
                         D0 + DAY_NS + 61 * SEC);
        assert_true(json_is_null(jget(j2, "next")));
        json_decref(j2);
        json_decref(j);
        j = get_json("/api/v1/machines/" ID_A "/events?type=scenario");
        assert_int_equal(ji(j, "total"), 0);
        json_decref(j);
}

static void test_machines_list(void **state) {
        (void) state;
        json_t *j = get_json("/api/v1/machines?limit=3");
        assert_int_equal(ji(j, "total"), 4);
        json_t *l = jget(j, "machines");
        assert_int_equal(json_array_size(l), 3);
        assert_string_equal(json_string_value(jget(json_array_get(l, 0), "id")), ID_A);
        /* The fields of GET /api/v1/machines/{id}. */
        assert_int_equal(ji(json_array_get(l, 0), "worst_latency_ns"), SPIKE_NS);
        assert_non_null(json_object_get(json_array_get(l, 0), "latest_run"));
        const char *next = json_string_value(jget(j, "next"));
        assert_string_equal(next, "/api/v1/machines?limit=3&offset=3");
        json_t *j2 = get_json("%s", next);
        assert_int_equal(json_array_size(jget(j2, "machines")), 1);
        assert_string_equal(json_string_value(jget(json_array_get(jget(j2, "machines"), 0), "id")),
                            ID_D);
        assert_true(json_is_null(jget(j2, "next")));
        json_decref(j2);
        json_decref(j);
        j = get_json("/api/v1/machines");
        assert_int_equal(json_array_size(jget(j, "machines")), 4);
        json_decref(j);
}

/* ---- /metrics ------------------------------------------------------------------------ */

struct family {
        char name[128], type[32];
        bool help;
};

/* The value of the sample "name{labels}" (labels exactly as written), or -1. */
static double sample(const char *text, const char *series) {
        size_t n = strlen(series);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, series, n) == 0 && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
        return -1;
}

/* Checks the text exposition format line by line: HELP and TYPE before the samples of a
 * family, valid names, label values quoted with escapes, a number as the value. */
static void check_exposition(const char *text) {
        regex_t name_re, sample_re;
        assert_int_equal(regcomp(&name_re, "^[a-zA-Z_:][a-zA-Z0-9_:]*$", REG_EXTENDED | REG_NOSUB),
                         0);
        assert_int_equal(
                regcomp(&sample_re,
                        "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([a-zA-Z_][a-zA-Z0-9_]*=\""
                        "([^\"\\\\\n]|\\\\[\\\\\"n])*\",?)*\\})? ([-+0-9.eE]+|NaN|\\+Inf|-Inf)$",
                        REG_EXTENDED),
                0);
        struct family fam[32] = {};
        size_t nfam = 0, samples = 0;
        char *copy = strdup(text), *save = NULL;
        assert_true(text[strlen(text) - 1] == '\n');
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char name[128], rest[256];
                if (sscanf(line, "# HELP %127s %255[^\n]", name, rest) == 2) {
                        assert_int_equal(regexec(&name_re, name, 0, NULL, 0), 0);
                        assert_true(nfam < ELEMENTSOF(fam));
                        snprintf(fam[nfam].name, sizeof(fam[nfam].name), "%s", name);
                        fam[nfam++].help = true;
                        continue;
                }
                if (sscanf(line, "# TYPE %127s %255s", name, rest) == 2) {
                        assert_true(nfam > 0);
                        assert_string_equal(fam[nfam - 1].name, name);
                        assert_true(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0);
                        snprintf(fam[nfam - 1].type, sizeof(fam[0].type), "%s", rest);
                        continue;
                }
                regmatch_t m[2];
                if (regexec(&sample_re, line, 2, m, 0) != 0)
                        fail_msg("not a sample line: '%s'", line);
                snprintf(name, sizeof(name), "%.*s", (int) (m[1].rm_eo - m[1].rm_so), line);
                /* The sample belongs to the family announced last. */
                assert_true(nfam > 0);
                if (strcmp(name, fam[nfam - 1].name) != 0)
                        fail_msg("sample %s after the family %s", name, fam[nfam - 1].name);
                assert_true(fam[nfam - 1].help && fam[nfam - 1].type[0]);
                if (strcmp(fam[nfam - 1].type, "counter") == 0)
                        assert_non_null(strstr(name, "_total"));
                samples++;
        }
        /* Each family once. */
        for (size_t i = 0; i < nfam; i++)
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(fam[i].name, fam[k].name);
        assert_true(nfam >= 7);
        assert_true(samples > 0);
        free(copy);
        regfree(&name_re);
        regfree(&sample_re);
}

static void test_metrics(void **state) {
        (void) state;
        /* A hostname that needs escapes in a label value. */
        struct fixture h = b_day;
        h.hostname = "lab \"7\" \\ west";
        h.first_seq = 200;
        h.n = 1;
        h.start_ns = D1 + DAY_NS;
        post_all(&h);

        struct tu_reply r = http("GET", "/metrics", NULL, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
        check_exposition(r.body);
        char series[256];
        const char *labels_b = "{machine=\"" ID_B "\",hostname=\"lab \\\"7\\\" \\\\ west\"}";
        snprintf(series, sizeof(series), "rtsoak_machine_intervals_total%s", labels_b);
        assert_true(sample(r.body, series) == 48 + 1 + 1);
        assert_int_equal(db_int("SELECT count(*) FROM intervals i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '" ID_B "'"),
                         50);
        snprintf(series, sizeof(series), "rtsoak_machine_violations_total%s", labels_b);
        assert_true(sample(r.body, series) == 48 + 1);
        /* The latest interval of B is h's: its worst is 1.5 ms. */
        snprintf(series, sizeof(series), "rtsoak_machine_last_worst_latency_seconds%s", labels_b);
        assert_true(sample(r.body, series) == 0.0015);
        snprintf(series, sizeof(series), "rtsoak_machine_last_report_timestamp_seconds%s",
                 labels_b);
        assert_true(sample(r.body, series) > 1.7e9);
        double stored = sample(r.body, "rtsoak_reports_received_total{result=\"stored\"}");
        double dup = sample(r.body, "rtsoak_reports_received_total{result=\"duplicate\"}");
        double unauth = sample(r.body, "rtsoak_ingest_errors_total{reason=\"unauthorized\"}");
        double ok = sample(r.body, "rtsoak_http_requests_total{code=\"200\"}");
        assert_true(stored >= 10);
        assert_true(ok > stored);
        tu_reply_done(&r);

        /* One upload sent twice, one without a token. */
        upload_seq = 9000;
        post_all(&h);
        upload_seq = 9000;
        post_all(&h);
        r = http("POST", "/api/v1/summaries", NULL, "{}");
        assert_int_equal(r.status, 401);
        tu_reply_done(&r);
        r = http("GET", "/metrics", NULL, NULL);
        check_exposition(r.body);
        assert_true(sample(r.body, "rtsoak_reports_received_total{result=\"stored\"}") == stored);
        assert_true(sample(r.body, "rtsoak_reports_received_total{result=\"duplicate\"}") ==
                    dup + 2);
        assert_true(sample(r.body, "rtsoak_ingest_errors_total{reason=\"unauthorized\"}") ==
                    unauth + 1);
        assert_true(sample(r.body, "rtsoak_http_requests_total{code=\"401\"}") >= 1);
        tu_reply_done(&r);
}

/* A farm database of schema 3 (as the previous release left it, with intervals stored) is
 * migrated at start: the totals of the intervals are filled from their CPUs, and the queries
 * answer as they did for the same data stored by this release. */
static void test_migration_from_3(void **state) {
        (void) state;
        char path[512];
        if (tu_pg()) {
                /* PostgreSQL's schema began at version 6: it has no older one to migrate. */
                skip();
        }
        snprintf(path, sizeof(path),
                 "/api/v1/machines/" ID_A "/intervals?from=%lld&to=%lld&step=5min&limit=1000",
                 (long long) D0, (long long) (D0 + 2 * DAY_NS));
        struct tu_reply before = http("GET", path, NULL, NULL);
        assert_int_equal(before.status, 200);
        kill(server_pid, SIGTERM);
        assert_int_equal(tu_wait(server_pid, 10000), 0);
        server_pid = 0;
        db_exec(TU_FARM_SCHEMA_10_DOWN);
        db_exec(TU_FARM_SCHEMA_9_DOWN);
        db_exec(TU_FARM_SCHEMA_8_DOWN);
        db_exec(TU_FARM_SCHEMA_7_DOWN);
        db_exec(TU_FARM_SCHEMA_6_DOWN);
        db_exec("DROP INDEX intervals_query; DROP TABLE hist_days;"
                "ALTER TABLE intervals DROP COLUMN samples;"
                "ALTER TABLE intervals DROP COLUMN violations;"
                "ALTER TABLE intervals DROP COLUMN max_cpu;"
                "ALTER TABLE intervals DROP COLUMN max_time_ns;"
                "ALTER TABLE events DROP COLUMN details;"
                "PRAGMA user_version = 3;");
        static const char *const extra[] = { "--rate", "1000000", "--burst", "1000000", NULL };
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", extra, base_url,
                                     sizeof(base_url));
        /* Every day's rows of each CPU, merged once by the migration to schema 12. */
        assert_int_equal(db_int("SELECT count(*) FROM run_days WHERE cpu_hists = 0"), 0);
        assert_int_equal(db_int("SELECT sum(samples) FROM hist_days"),
                         db_int("SELECT sum(samples) FROM interval_cpus"));
        db_exec(TU_FARM_SCHEMA_10_DOWN);
        db_exec(TU_FARM_SCHEMA_9_DOWN);
        assert_int_equal(db_int("PRAGMA user_version"), 8);
        struct tu_reply after = http("GET", path, NULL, NULL);
        assert_int_equal(after.status, 200);
        json_t *a = tu_json(before.body), *b = tu_json(after.body);
        if (!json_equal(a, b))
                fail_msg("before: %s\nafter: %s", before.body, after.body);
        /* The spike step still names its CPU and time. */
        assert_int_equal(ji(json_array_get(jget(b, "steps"), SPIKE_SEQ / 5), "max_cpu"), SPIKE_CPU);
        json_decref(a);
        json_decref(b);
        tu_reply_done(&before);
        tu_reply_done(&after);
}

/* Every past day of A's, read from the rows kept at ingest, is what its intervals give: each
 * CPU, one CPU, one scenario. */
static void test_day_rows_against_intervals(void **state) {
        (void) state;
        char q[160];
        const char *path = "/api/v1/machines/" ID_A "/histogram";
        assert_true(db_int("SELECT count(*) FROM hist_days") > 0);
        assert_int_equal(db_int("SELECT sum(samples) FROM hist_days"),
                         db_int("SELECT sum(samples) FROM interval_cpus"));
        for (int k = 0; k < 3; k++) {
                snprintf(q, sizeof(q), "?from=%lld&to=%lld%s", (long long) D0,
                         (long long) (D0 + 3 * DAY_NS),
                         k == 0   ? ""
                         : k == 1 ? "&cpu=1"
                                  : "&scenario=idle");
                json_decref(kept_and_merged(path, q));
        }
}

/* ---- steps against the raw intervals ---------------------------------------------- */

#define ID_E "e0000000000000000000000000000005" /* steps: overlapping runs, equal maxima */
static char tok_e[80];

/* Machine E: every minute's maximum is 50 us, 60 us where minute % 7 == 3, at an offset of 0
 * or 1 us by minute: equal maxima within steps, between CPUs and between the two runs. */
static void e_data(uint64_t minute, unsigned cpu, struct cpu_data *d) {
        d->max_ns = minute % 7 == 3 ? 60000 : 50000;
        d->max_offset_ns = (int64_t) (minute % 2) * 1000;
        d->counts[5] = 100 + cpu;
        d->counts[hist_index(LIMIT_US, d->max_ns)] += 1;
}
static void e_cpu1(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        e_data(seq, cpu, d);
}
static void e_cpu2(uint64_t seq, unsigned cpu, struct cpu_data *d) {
        e_data(seq + 10, cpu, d);
}

/* One group of the reference: a step's intervals of one scenario and kernel. */
struct ref_group {
        int64_t k, min_start, min_run, n, covered, samples, violations, end;
        int64_t first_start, first_run; /* its first interval, by start then run */
        int64_t max, max_time, max_cpu, max_start, max_run;
        char scen[32], kern[32];
};

static int ref_group_cmp(const void *a, const void *b) {
        const struct ref_group *x = a, *y = b;
        if (x->k != y->k)
                return x->k < y->k ? -1 : 1;
        if (x->min_start != y->min_start)
                return x->min_start < y->min_start ? -1 : 1;
        return x->min_run < y->min_run ? -1 : x->min_run > y->min_run;
}

/* Whether (max, time, start, run) of b is a worse case than a's: the largest, then the
 * earliest time, the earliest interval, the lowest run. */
static bool ref_worse(const struct ref_group *a, const struct ref_group *b) {
        if (b->max != a->max)
                return b->max > a->max;
        if (b->max_time != a->max_time)
                return b->max_time < a->max_time;
        if (b->max_start != a->max_start)
                return b->max_start < a->max_start;
        return b->max_run < a->max_run;
}

/* The groups of machine E's raw rows in [from, to) at step, all CPUs (cpu < 0) or one. */
static size_t ref_groups(int64_t from, int64_t to, int64_t step, int cpu, const char *scenario,
                         struct ref_group *g, size_t max) {
        char sql[1024];
        snprintf(sql, sizeof(sql),
                 "SELECT i.start_ns, i.length_ns, coalesce(i.scenario, ''), r.kernel_release, "
                 "r.id, %s FROM runs r JOIN intervals i ON i.run = r.id %s WHERE r.machine_id = "
                 "'" ID_E "' AND i.start_ns >= %lld AND i.start_ns < %lld%s%s%s",
                 cpu < 0 ? "i.max_ns, i.max_cpu, i.max_time_ns, i.samples, i.violations"
                         : "c.max_ns, c.cpu, c.max_time_ns, c.samples, c.violations",
                 cpu < 0 ? "" : "JOIN interval_cpus c ON c.interval = i.id", (long long) from,
                 (long long) to, cpu < 0 ? "" : " AND c.cpu = ", cpu < 0 ? "" : (cpu ? "1" : "0"),
                 scenario ? " AND i.scenario = 'cpu'" : "");
        sql_conn *d = tu_farm_open(db_path);
        sql_stmt *st;
        assert_int_equal(sql_prepare_once(d, sql, &st), 0);
        int64_t first = from - from % step;
        size_t n = 0;
        while (sql_step(st) == SQL_ROW) {
                struct ref_group row = { .k = (sql_column_int64(st, 0) - first) / step,
                                         .min_start = sql_column_int64(st, 0),
                                         .min_run = sql_column_int64(st, 4),
                                         .n = 1,
                                         .covered = sql_column_int64(st, 1),
                                         .samples = sql_column_int64(st, 8),
                                         .violations = sql_column_int64(st, 9),
                                         .end = sql_column_int64(st, 0) + sql_column_int64(st, 1),
                                         .max = sql_column_int64(st, 5),
                                         .max_time = sql_column_int64(st, 7),
                                         .max_cpu = sql_column_int64(st, 6),
                                         .max_start = sql_column_int64(st, 0),
                                         .max_run = sql_column_int64(st, 4),
                                         .first_start = sql_column_int64(st, 0),
                                         .first_run = sql_column_int64(st, 4) };
                snprintf(row.scen, sizeof(row.scen), "%s", sql_column_text(st, 2));
                snprintf(row.kern, sizeof(row.kern), "%s", sql_column_text(st, 3));
                size_t i = 0;
                while (i < n && !(g[i].k == row.k && strcmp(g[i].scen, row.scen) == 0 &&
                                  strcmp(g[i].kern, row.kern) == 0))
                        i++;
                if (i == n) {
                        assert_true(n < max);
                        g[n++] = row;
                        continue;
                }
                if (row.first_start < g[i].first_start ||
                    (row.first_start == g[i].first_start && row.first_run < g[i].first_run)) {
                        g[i].first_start = row.first_start;
                        g[i].first_run = row.first_run;
                }
                g[i].min_start = MIN(g[i].min_start, row.min_start);
                g[i].min_run = MIN(g[i].min_run, row.min_run);
                g[i].n++;
                g[i].covered += row.covered;
                g[i].samples += row.samples;
                g[i].violations += row.violations;
                g[i].end = MAX(g[i].end, row.end);
                if (ref_worse(&g[i], &row)) {
                        g[i].max = row.max;
                        g[i].max_time = row.max_time;
                        g[i].max_cpu = row.max_cpu;
                        g[i].max_start = row.max_start;
                        g[i].max_run = row.max_run;
                }
        }
        sql_finalize(st);
        sql_close(d);
        qsort(g, n, sizeof(*g), ref_group_cmp);
        return n;
}

/* The names of a step (scenarios or kernels) in the order the answer lists them: by their
 * first interval (its start, then its run) over the whole window. */
static void ref_names(const struct ref_group *g, size_t n, bool kern, int64_t k, char *out,
                      size_t len) {
        const char *seen[64];
        int64_t first_start[64], first_run[64];
        size_t nseen = 0;
        bool in_step[64] = {};
        for (size_t i = 0; i < n; i++) {
                const char *name = kern ? g[i].kern : g[i].scen;
                size_t j = 0;
                while (j < nseen && strcmp(seen[j], name) != 0)
                        j++;
                if (j == nseen) {
                        seen[nseen++] = name;
                        first_start[j] = INT64_MAX;
                }
                if (g[i].first_start < first_start[j] ||
                    (g[i].first_start == first_start[j] && g[i].first_run < first_run[j])) {
                        first_start[j] = g[i].first_start;
                        first_run[j] = g[i].first_run;
                }
                if (g[i].k == k)
                        in_step[j] = true;
        }
        out[0] = '\0';
        for (bool any = true; any;) { /* the earliest name not written yet, in turn */
                any = false;
                size_t best = 0;
                for (size_t j = 0; j < nseen; j++)
                        if (first_start[j] != INT64_MIN &&
                            (!any || first_start[j] < first_start[best] ||
                             (first_start[j] == first_start[best] &&
                              first_run[j] < first_run[best]))) {
                                best = j;
                                any = true;
                        }
                if (!any)
                        break;
                if (in_step[best])
                        snprintf(out + strlen(out), len - strlen(out), "%s%s",
                                 strlen(out) ? "," : "",
                                 seen[best][0] || kern ? seen[best] : "null");
                first_start[best] = INT64_MIN;
        }
}

static void names_of(json_t *a, char *out, size_t len) {
        out[0] = '\0';
        size_t i;
        json_t *v;
        json_array_foreach (a, i, v) {
                snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? "," : "",
                         json_is_null(v) ? "null" : json_string_value(v));
        }
}

/* The answer's steps against the same steps made from machine E's raw rows. */
static void check_steps_against_rows(int64_t from, int64_t to, int64_t step, int cpu,
                                     const char *scenario) {
        static struct ref_group g[512];
        size_t ng = ref_groups(from, to, step, cpu, scenario, g, ELEMENTSOF(g));
        char cpu_arg[16] = "";
        if (cpu >= 0)
                snprintf(cpu_arg, sizeof(cpu_arg), "&cpu=%d", cpu);
        json_t *j = get_json("/api/v1/machines/" ID_E "/intervals?from=%lld&to=%lld&step=%llds%s%s",
                             (long long) from, (long long) to, (long long) (step / SEC), cpu_arg,
                             scenario ? "&scenario=cpu" : "");
        json_t *steps = jget(j, "steps");
        size_t k = 0;
        for (size_t i = 0; i < ng; k++) {
                json_t *s = json_array_get(steps, k);
                if (!s)
                        fail_msg("step %lld s, cpu %d: %zu steps, the rows make more",
                                 (long long) (step / SEC), cpu, k);
                struct ref_group w = g[i];
                int64_t n = 0, covered = 0, samples = 0, violations = 0;
                size_t first = i;
                for (; i < ng && g[i].k == g[first].k; i++) {
                        if (ref_worse(&w, &g[i]))
                                w = g[i];
                        n += g[i].n;
                        covered += g[i].covered;
                        samples += g[i].samples;
                        violations += g[i].violations;
                }
                char want[256], got[256];
                assert_int_equal(ji(s, "start_ns"), from - from % step + g[first].k * step);
                assert_int_equal(ji(s, "max_ns"), w.max);
                assert_int_equal(ji(s, "max_time_ns"), w.max_time);
                assert_int_equal(ji(s, "max_cpu"), w.max_cpu);
                assert_int_equal(ji(s, "intervals"), n);
                assert_int_equal(ji(s, "covered_ns"), covered);
                assert_int_equal(ji(s, "samples"), samples);
                assert_int_equal(ji(s, "violations"), violations);
                ref_names(g, ng, false, g[first].k, want, sizeof(want));
                names_of(jget(s, "scenarios"), got, sizeof(got));
                assert_string_equal(got, want);
                ref_names(g, ng, true, g[first].k, want, sizeof(want));
                names_of(jget(s, "kernels"), got, sizeof(got));
                assert_string_equal(got, want);
        }
        assert_int_equal(json_array_size(steps), k);
        json_decref(j);
}

/* Steps of intervals of two runs that overlap (two kernels, three scenarios with none), with
 * equal maxima everywhere: each step's worst case (the earliest of equals, then the first
 * run), totals and names in their order, as made from the raw rows, for steps that cut the
 * runs anywhere, all CPUs and each, and one scenario. */
static void test_steps_against_rows(void **state) {
        (void) state;
        tu_server_enroll(db_path, ID_E, NULL, NULL, tok_e);
        struct fixture e1 = { .machine = ID_E,
                              .token = tok_e,
                              .kernel = "6.6-rtE1",
                              .run = 1,
                              .run_start_ns = D2,
                              .scenario = "idle",
                              .first_seq = 0,
                              .n = 20,
                              .start_ns = D2,
                              .spacing_ns = MIN_NS,
                              .ncpus = 2,
                              .fn = e_cpu1 };
        post_all(&e1);
        e1.scenario = "cpu";
        e1.first_seq = 20;
        e1.start_ns = D2 + 20 * MIN_NS;
        post_all(&e1);
        struct fixture e2 = { .machine = ID_E,
                              .token = tok_e,
                              .kernel = "6.6-rtE2",
                              .run = 2,
                              .run_start_ns = D2 + 10 * MIN_NS,
                              .scenario = NULL,
                              .first_seq = 0,
                              .n = 30,
                              .start_ns = D2 + 10 * MIN_NS,
                              .spacing_ns = MIN_NS,
                              .ncpus = 2,
                              .fn = e_cpu2 };
        post_all(&e2);
        assert_int_equal(db_int("SELECT count(*) FROM intervals i JOIN runs r ON i.run = r.id "
                                "WHERE r.machine_id = '" ID_E "'"),
                         70);
        static const int64_t step_s[] = { 60, 120, 300, 420, 780, 3600 };
        for (size_t i = 0; i < ELEMENTSOF(step_s); i++)
                for (int cpu = -1; cpu < 2; cpu++) {
                        check_steps_against_rows(D2, D2 + HOUR_NS, step_s[i] * SEC, cpu, NULL);
                        check_steps_against_rows(D2 + 7 * MIN_NS, D2 + 41 * MIN_NS, step_s[i] * SEC,
                                                 cpu, NULL);
                }
        check_steps_against_rows(D2, D2 + HOUR_NS, 300 * SEC, -1, "cpu");
        check_steps_against_rows(D2, D2 + HOUR_NS, 420 * SEC, 1, "cpu");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_steps),
                cmocka_unit_test(test_window_bounds),
                cmocka_unit_test(test_cpu_and_scenario_filters),
                cmocka_unit_test(test_pagination),
                cmocka_unit_test(test_bad_parameters),
                cmocka_unit_test(test_histogram_and_day_rows),
                cmocka_unit_test(test_compare),
                cmocka_unit_test(test_events_and_runs),
                cmocka_unit_test(test_machines_list),
                cmocka_unit_test(test_metrics),
                cmocka_unit_test(test_day_rows_against_intervals),
                cmocka_unit_test(test_migration_from_3),
                cmocka_unit_test(test_steps_against_rows),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
