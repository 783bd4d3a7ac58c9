/* SPDX-License-Identifier: MIT */
/* The verdict engine against a farm database of its own, without HTTP: histories stored
 * through the real ingest path (farm_store_summary), then judged; one or more hostile
 * histories per invariant of docs/verdict.md, with controls that must not fail, the rollups
 * against the intervals read one by one, and the migrations of farms of schema 5 and 6. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "macro.h"
#include "auth.h"
#include "db-internal.h"
#include "comparison.h"
#include "db.h"
#include "encode-series.h"
#include "encode-verdict.h"
#include "settings.h"
#include "verdict-log.h"
#include "log-read.h"
#include "retention.h"
#include "verdict.h"
#include "waivers.h"
#include "test-farmdb.h"
#include "test-util.h"
#include "tests.h"
#include "timeutil.h"
#include "trace-analysis.h"

#define SEC INT64_C(1000000000)
#define MIN_NS (60 * SEC)
#define HOUR (60 * MIN_NS)
#define DAY (24 * HOUR)
#define T0 (INT64_C(1793491200) * SEC) /* a UTC midnight */
#define M_A "a0000000000000000000000000000001"
#define M_B "b0000000000000000000000000000002"
#define PROBE_NS INT64_C(1000000) /* 1 ms */

static char dir[64], path[512];
static farm_db *db;
static struct farm_rule rule;

/* A history of one run: n intervals of len from start, on cpus CPUs probed every PROBE_NS. */
struct hist_spec {
        const char *machine, *release, *build, *scenario;
        int64_t run, start, len, received; /* received 0: right after each interval */
        int n, cpus;
        uint64_t seq0;
        int absent_cpu;    /* -1: none */
        int share_pct;     /* of the wake-ups delivered; 0 means 100 */
        uint64_t missed;   /* wake-ups missing from every interval besides */
        uint64_t max_ns;   /* worst latency on CPU 0 of the first interval; 0: 20 us */
        bool no_loads;     /* the scenario's generators absent */
        bool zero_loads;   /* present, up, no throughput */
        uint64_t probe_ns; /* 0: PROBE_NS */
        bool no_probed;    /* leave run.cpus out */
        bool trace;        /* a capture of CPU 0's worst wake-up in the first interval */
        bool reverse;      /* each upload's intervals latest first */
        struct summary_inventory *inventory; /* sent with the first upload */
        size_t ninventory;
};

#define CULPRIT "thread kworker/0:1 (pid 211, SCHED_FIFO 50) ran 412 µs of the 480 µs"

/* A capture of the flight recorder naming a kworker, for a violation due at when. */
static void fill_trace(struct summary_trace *t, struct trace_analysis *a, int64_t when,
                       uint64_t latency_ns) {
        *a = (struct trace_analysis){ .cpu = 0,
                                      .time_ns = when,
                                      .latency_ns = latency_ns,
                                      .culprit = { .kind = TRACE_CULPRIT_THREAD,
                                                   .name = "kworker/0:1",
                                                   .pid = 211,
                                                   .policy = "SCHED_FIFO",
                                                   .priority = 50,
                                                   .duration_ns = 412000,
                                                   .count = 1 } };
        snprintf(a->summary, sizeof(a->summary), "%s", CULPRIT);
        json_t *j = trace_analysis_to_json(a);
        *t = (struct summary_trace){ .analysis = a, .json = json_dumps(j, JSON_COMPACT) };
        assert_non_null(t->json);
        json_decref(j);
}

static const char *const gens_of_io[] = { "fileio" };

static void fill_cpu(struct summary_cpu *c, uint32_t cpu, uint64_t samples, uint64_t max_ns,
                     int64_t when) {
        static uint64_t counts[1000 + 40 * 8];
        memset(counts, 0, sizeof(counts));
        *c = (struct summary_cpu){ .cpu = cpu,
                                   .samples = samples,
                                   .min_ns = samples ? 20000 : 0,
                                   .avg_ns = samples ? 20000 : 0,
                                   .max_ns = samples ? max_ns : 0,
                                   .max_time_ns = when,
                                   .hist_limit_us = 1000 };
        if (samples) {
                counts[hist_index(1000, 20000)] += samples - (max_ns != 20000);
                if (max_ns != 20000)
                        counts[hist_index(1000, max_ns)] += 1;
        }
        assert_int_equal(hist_encode(1000, counts, &c->hist, &c->hist_len), 0);
}

static void store(const struct hist_spec *h) {
        char err[FARM_ERROR_MAX];
        uint32_t probed[8];
        uint64_t probe = h->probe_ns ?: PROBE_NS;
        for (int c = 0; c < h->cpus; c++)
                probed[c] = (uint32_t) c;
        for (int done = 0; done < h->n;) {
                int n = MIN(h->n - done, 200);
                struct summary_interval *iv = calloc((size_t) n, sizeof(*iv));
                struct summary_load *loads = calloc((size_t) n, sizeof(*loads));
                struct summary_metric *metric = calloc((size_t) n, sizeof(*metric));
                assert_non_null(iv);
                int64_t last_end = 0;
                struct summary_trace trace = {};
                struct trace_analysis analysis;
                for (int i = 0; i < n; i++) {
                        int k = done + (h->reverse ? n - 1 - i : i);
                        int64_t start = h->start + k * h->len;
                        iv[i] = (struct summary_interval){ .seq = h->seq0 + (uint64_t) k,
                                                           .start_ns = start,
                                                           .length_ns = (uint64_t) h->len,
                                                           .scenario = (char *) h->scenario };
                        iv[i].cpus = calloc((size_t) h->cpus, sizeof(struct summary_cpu));
                        uint64_t expected = (uint64_t) h->len / probe;
                        uint64_t samples = h->share_pct ? expected * (uint64_t) h->share_pct / 100
                                                        : expected;
                        samples -= h->missed;
                        for (int c = 0; c < h->cpus; c++) {
                                if (c == h->absent_cpu)
                                        continue;
                                fill_cpu(&iv[i].cpus[iv[i].ncpus++], (uint32_t) c, samples,
                                         c == 0 && k == 0 && h->max_ns ? h->max_ns : 20000,
                                         start + 1000);
                        }
                        if (h->scenario && strcmp(h->scenario, "io") == 0 && !h->no_loads) {
                                metric[i] = (struct summary_metric){ "write", "MiB/s",
                                                                     h->zero_loads ? 0 : 100 };
                                loads[i] =
                                        (struct summary_load){ .generator = (char *) gens_of_io[0],
                                                               .up_ns = (uint64_t) h->len,
                                                               .starts = 1,
                                                               .metrics = &metric[i],
                                                               .nmetrics = 1 };
                                iv[i].loads = &loads[i];
                                iv[i].nloads = 1;
                        }
                        if (h->trace && k == 0) {
                                fill_trace(&trace, &analysis, start + 1000, h->max_ns);
                                iv[i].traces = &trace;
                                iv[i].ntraces = 1;
                        }
                        last_end = start + h->len;
                }
                struct summary s = {
                        .machine = { (char *) h->machine, "host", "cpu", (uint32_t) h->cpus },
                        .run = { .id = h->run,
                                 .boot_id = "00000000000000000000000000000001",
                                 .kernel_release = (char *) h->release,
                                 .kernel_version = (char *) (h->build ?: "#1"),
                                 .kernel_cmdline = "",
                                 .preempt_model = "PREEMPT_RT",
                                 .daemon_version = "0",
                                 .config_digest = "00000000000000000000000000000000000000000000"
                                                  "00000000000000000000",
                                 .start_ns = T0, /* one daemon start for every run */
                                 .threshold_ns = 100000,
                                 .probe_interval_ns = probe,
                                 .interval_ns = (uint64_t) h->len,
                                 .probed_cpus = h->no_probed ? NULL : probed,
                                 .nprobed_cpus = h->no_probed ? 0 : (size_t) h->cpus },
                        .seq = h->seq0 + (uint64_t) done,
                        .intervals = iv,
                        .nintervals = (size_t) n,
                        .inventory = done == 0 ? h->inventory : NULL,
                        .ninventory = done == 0 ? h->ninventory : 0,
                };
                struct farm_stored st;
                if (farm_store_summary(db, &s, h->received ?: last_end, &st, err) < 0)
                        fail_msg("%s", err);
                for (int i = 0; i < n; i++) {
                        for (size_t c = 0; c < iv[i].ncpus; c++)
                                free(iv[i].cpus[c].hist);
                        free(iv[i].cpus);
                }
                free(trace.json);
                free(iv);
                free(loads);
                free(metric);
                done += n;
        }
}

static void enroll(const char *id) {
        char err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE] = { 0 };
        memcpy(hash, id, 8);
        assert_int_equal(farm_enroll(db, id, hash, NULL, "test", NULL, T0 - 100 * DAY, err), 1);
}

/* A machine setting changed at from (as the staff API records it). */
static void setting(const char *id, int64_t from, int64_t bound, int gating, const char *groups) {
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, gating, groups, "
                 "labels, revoked, by, reason) VALUES ('%s', %lld, %lld, %d, '%s', '{}', 0, "
                 "'test', 'test')",
                 id, (long long) from, (long long) bound, gating, groups);
        tu_farm_exec(path, sql);
}

static void sql(const char *text) {
        tu_farm_exec(path, text);
}

static json_t *ask_known(const char *release, int64_t at, int64_t known) {
        char err[FARM_ERROR_MAX];
        json_t *v = NULL;
        struct farm_question q = { release, at, known, known == INT64_MAX ? at : known };
        if (farm_verdict_json(db, &rule, &q, &v, err) < 0)
                fail_msg("%s", err);
        return v;
}

static json_t *ask(const char *release, int64_t at) {
        return ask_known(release, at, at);
}

static const char *status(json_t *v) {
        return json_string_value(json_object_get(v, "verdict"));
}

static int64_t count_kind(json_t *v, const char *list, const char *kind) {
        json_t *p;
        size_t i;
        int64_t n = 0;
        json_array_foreach (json_object_get(v, list), i, p)
                n += strcmp(json_string_value(json_object_get(p, "kind")), kind) == 0;
        return n;
}

static json_t *first_of(json_t *v, const char *kind) {
        json_t *p;
        size_t i;
        json_array_foreach (json_object_get(v, "problems"), i, p)
                if (strcmp(json_string_value(json_object_get(p, "kind")), kind) == 0)
                        return p;
        fail_msg("no %s problem in %s", kind, json_dumps(json_object_get(v, "reasons"), 0));
        return NULL;
}

static int64_t covered(json_t *v, const char *machine) {
        json_t *m;
        size_t i;
        json_array_foreach (json_object_get(v, "machines"), i, m)
                if (strcmp(json_string_value(json_object_get(m, "id")), machine) == 0)
                        return json_integer_value(json_object_get(m, "covered_ns"));
        fail_msg("machine %s not judged", machine);
        return -1;
}

static void expect(json_t *v, const char *want) {
        if (strcmp(status(v), want) != 0)
                fail_msg("expected %s, got %s: %s", want, status(v),
                         json_dumps(json_object_get(v, "reasons"), JSON_COMPACT));
}

static int setup(void **state) {
        char err[FARM_ERROR_MAX];
        snprintf(dir, sizeof(dir), "/tmp/rtsoak-engine-XXXXXX");
        assert_non_null(mkdtemp(dir));
        tu_farm_target(dir, "engine", path, sizeof(path));
        if (farm_db_open(path, &db, err) < 0)
                fail_msg("%s", err);
        farm_rule_default(&rule);
        rule.period_ns = 2 * DAY;
        rule.nscenarios = 0;
        rule.regression = false;
        enroll(M_A);
        return 0;
}

static int teardown(void **state) {
        char cmd[128];
        farm_db_close(db);
        tu_farm_drop(path);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static const struct hist_spec base = { .machine = M_A,
                                       .release = "6.6.1-rt1",
                                       .run = 1,
                                       .start = T0,
                                       .len = 10 * MIN_NS,
                                       .n = 6 * 48,
                                       .cpus = 2,
                                       .absent_cpu = -1 };

/* ---- controls ---- */

/* Two clean days: qualified, covered exactly, every day from its rollups and from its
 * intervals alike. */
static void test_clean_qualifies(void **state) {
        store(&base);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "qualified");
        assert_int_equal(covered(v, M_A), 2 * DAY);
        setenv("RTSOAK_VERDICT_RAW", "1", 1);
        setenv("RTSOAK_VERDICT_CHUNK", "3", 1);
        json_t *raw = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        unsetenv("RTSOAK_VERDICT_RAW");
        unsetenv("RTSOAK_VERDICT_CHUNK");
        assert_true(json_equal(v, raw));
        json_decref(v);
        json_decref(raw);
}

/* A history with a bit of everything: the rollups and the intervals read one by one give
 * the same verdict, field for field. */
static void test_rollups_match_intervals(void **state) {
        rule.nscenarios = 1;
        snprintf(rule.scenarios[0].name, sizeof(rule.scenarios[0].name), "io");
        rule.scenarios[0].min_ns = 6 * HOUR;
        struct hist_spec h = base;
        h.n = 6 * 10, h.scenario = "io", h.max_ns = 300000;
        store(&h); /* 0h-10h, a violation */
        h.seq0 = 100, h.start = T0 + 10 * HOUR, h.n = 6, h.absent_cpu = 1, h.max_ns = 0;
        store(&h); /* 10h-11h, CPU 1 absent */
        h.seq0 = 200, h.start = T0 + 11 * HOUR, h.n = 6 * 13, h.absent_cpu = -1;
        h.scenario = "idle";
        store(&h); /* 11h-24h */
        h.seq0 = 300, h.start = T0 + 30 * HOUR, h.n = 6 * 18, h.scenario = "io";
        store(&h); /* 30h-48h, after a silence */
        h.seq0 = 500, h.start = T0 + 2 * DAY, h.n = 6 * 48;
        store(&h); /* two clean days, read from their rollups */
        h.seq0 = 900, h.start = T0 + 4 * DAY, h.n = 6 * 12, h.zero_loads = true;
        store(&h);                                       /* io without throughput */
        h.seq0 = 1000, h.start = T0 + 2 * HOUR, h.n = 6; /* the same hour again */
        store(&h);
        struct hist_spec o = base;
        o.release = "6.6.0-rt0", o.run = 5, o.start = T0 + 25 * HOUR, o.n = 12;
        store(&o); /* another release in the silence */
        for (int64_t at = T0 + 12 * HOUR; at <= T0 + 5 * DAY; at += 9 * HOUR) {
                json_t *v = ask("6.6.1-rt1", at);
                setenv("RTSOAK_VERDICT_RAW", "1", 1);
                setenv("RTSOAK_VERDICT_CHUNK", "3", 1);
                json_t *raw = ask("6.6.1-rt1", at);
                unsetenv("RTSOAK_VERDICT_RAW");
                unsetenv("RTSOAK_VERDICT_CHUNK");
                char *a = json_dumps(v, JSON_COMPACT), *b = json_dumps(raw, JSON_COMPACT);
                if (strcmp(a, b) != 0)
                        fail_msg("at %lld:\nrollups:   %s\nintervals: %s", (long long) at, a, b);
                free(a);
                free(b);
                json_decref(v);
                json_decref(raw);
        }
}

/* The rows of the day rollups, as text. */
static char *rollup_rows(void) {
        static const struct {
                const char *sql;
                int nint; /* integer columns first, then text ones */
        } q[] = {
                { "SELECT run, day, intervals, covered_ns, first_start_ns, last_end_ns, "
                  "max_gap_ns, "
                  "gaps_known, max_ns, counted_ns, min_ratio_pm, max_skew_ns, max_received_ns, "
                  "max_missing_ns, cpu_hists FROM run_days ORDER BY run, day",
                  15 },
                { "SELECT run, day, covered_ns, counted_ns, down_ns, scenario, "
                  "coalesce(gens_all, '-') FROM run_day_scenarios ORDER BY run, day, scenario",
                  5 },
        };
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        sql_conn *c = tu_farm_open(path);
        for (size_t i = 0; i < ELEMENTSOF(q); i++) {
                sql_stmt *st = NULL;
                if (sql_prepare_once(c, q[i].sql, &st) < 0)
                        fail_msg("%s: %s", q[i].sql, sql_errmsg(c));
                while (sql_step(st) == SQL_ROW) {
                        for (int k = 0; k < sql_column_count(st); k++)
                                if (k < q[i].nint)
                                        fprintf(f, "%lld ", (long long) sql_column_int64(st, k));
                                else
                                        fprintf(f, "'%s' ", sql_column_text(st, k));
                        fputc('\n', f);
                }
                sql_finalize(st);
                fputs("--\n", f);
        }
        sql_close(c);
        fclose(f);
        return text;
}

/* h's intervals one per upload, in the order store() sends them. */
static void store_each(const struct hist_spec *h) {
        for (int i = 0; i < h->n; i++) {
                int first = i / 200 * 200, n = MIN(h->n - first, 200);
                int k = h->reverse ? first + (n - 1 - (i - first)) : i;
                struct hist_spec one = *h;
                one.n = 1, one.seq0 = h->seq0 + (uint64_t) k, one.start = h->start + k * h->len;
                one.max_ns = k == 0 ? h->max_ns : 0, one.trace = k == 0 && h->trace;
                store(&one);
        }
}

/* A history of uploads that fold (a day boundary inside one, a silence, late intervals, an
 * upload latest first, one overlapping the one before by minutes, scenarios with and without
 * their generators), stored as it comes
 * (up to 200 intervals an upload) and again one interval per upload: the same rollup rows,
 * late days with their gaps unknown. */
static void test_rollups_folded_as_one_by_one(void **state) {
        char *rows[2];
        for (int each = 0; each < 2; each++) {
                struct hist_spec v[9];
                for (size_t i = 0; i < ELEMENTSOF(v); i++)
                        v[i] = base, v[i].received = T0 + 10 * DAY, v[i].scenario = "io";
                v[0].n = 6 * 30, v[0].max_ns = 300000; /* 0h-30h: over midnight */
                v[1].seq0 = 200, v[1].start = T0 + 32 * HOUR, v[1].n = 30, v[1].scenario = "idle";
                v[2].seq0 = 300, v[2].start = T0 + 5 * HOUR, v[2].n = 6; /* late, overlapping */
                v[3].seq0 = 400, v[3].start = T0 + 40 * HOUR, v[3].n = 50, v[3].reverse = true;
                v[4].seq0 = 500, v[4].start = T0 + 50 * HOUR, v[4].n = 12, v[4].zero_loads = true;
                v[5].seq0 = 600, v[5].start = T0 + 52 * HOUR, v[5].n = 12, v[5].no_loads = true;
                v[6].seq0 = 700, v[6].start = T0 + 54 * HOUR, v[6].n = 12; /* after the holes */
                /* A day whose second upload starts 5 minutes before the first one's end. */
                v[7].seq0 = 800, v[7].start = T0 + 75 * HOUR, v[7].n = 6;
                v[8].seq0 = 900, v[8].start = T0 + 76 * HOUR - 5 * MIN_NS, v[8].n = 3;
                for (size_t i = 0; i < ELEMENTSOF(v); i++)
                        (each ? store_each : store)(&v[i]);
                rows[each] = rollup_rows();
                assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM run_days WHERE "
                                                   "gaps_known = 0"),
                                 4);
                assert_int_equal(tu_farm_int(path, "SELECT sum(intervals) FROM run_days"), 311);
                if (!each) {
                        teardown(state);
                        setup(state);
                }
        }
        if (strcmp(rows[0], rows[1]) != 0)
                fail_msg("folded:\n%s\none by one:\n%s", rows[0], rows[1]);
        free(rows[0]);
        free(rows[1]);
}

/* The intervals stored for machine id. */
static long long intervals_of(const char *id) {
        char q[256];
        snprintf(q, sizeof(q),
                 "SELECT count(*) FROM intervals i JOIN runs r ON r.id = i.run WHERE "
                 "r.machine_id = '%s'",
                 id);
        return tu_farm_int(path, q);
}

/* Retention drops a month's intervals but those the verdict reads one by one, at their edges:
 * a latency at the bound (not over it) and wake-ups at MinSamples= (not under it) go; a load
 * down, any machine's settings changed two days later, and a stricter rule recorded before
 * keep theirs. */
static void test_retention_edges(void **state) {
        static const char *const ids[] = { "c0000000000000000000000000000003",
                                           "d0000000000000000000000000000004",
                                           "e0000000000000000000000000000005" };
        char err[FARM_ERROR_MAX];
        uint64_t gone = 0;
        rule.min_samples_pm = 900;
        rule.probe_down_max_ns = (uint64_t) HOUR; /* the missed wake-ups are no probe down */
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                enroll(ids[i]);
        enroll(M_B);
        long long bound = tu_farm_int(path, "SELECT min(threshold_ns) FROM machine_settings "
                                            "WHERE machine_id = '" M_B "'");
        struct hist_spec h[5];
        for (size_t i = 0; i < ELEMENTSOF(h); i++)
                h[i] = base, h[i].n = 6, h[i].run = (int64_t) i + 1;
        h[1].machine = M_B, h[1].max_ns = (uint64_t) bound;                  /* at the bound */
        h[2].machine = ids[0], h[2].scenario = "io", h[2].zero_loads = true; /* a load down */
        h[3].machine = ids[1], h[3].share_pct = 90;                          /* at MinSamples */
        h[4].machine = ids[2], h[4].start = T0 + 10 * DAY;
        for (size_t i = 0; i < ELEMENTSOF(h); i++)
                store(&h[i]);
        assert_int_equal(tu_farm_int(path, "SELECT min(min_ratio_pm) FROM run_days"), 900);
        setting(M_B, T0 + 12 * DAY + HOUR, bound, 1, ""); /* two days after h[4]'s */
        const int64_t dec1 = T0 + 30 * DAY, jan1 = dec1 + 31 * DAY, feb1 = jan1 + 31 * DAY;
        assert_true(farm_retention_pass(db, &rule, jan1, &gone, err) >= 0);
        assert_int_equal(intervals_of(M_A), 0);
        assert_int_equal(intervals_of(M_B), 0);
        assert_int_equal(intervals_of(ids[0]), 6);
        assert_int_equal(intervals_of(ids[1]), 0);
        assert_int_equal(intervals_of(ids[2]), 6);
        /* December at MinSamples again, a rule asking for more recorded before the pass. */
        h[3].start = dec1 + DAY, h[3].seq0 = 100, h[3].run = 6;
        store(&h[3]);
        struct farm_rule strict = rule;
        strict.min_samples_pm = 950;
        assert_int_equal(farm_rule_record(db, &strict, dec1, err), 0);
        assert_true(farm_retention_pass(db, &rule, feb1, &gone, err) >= 0);
        assert_int_equal(intervals_of(ids[1]), 6);
}

/* ---- invariant 1: coverage is time measured ---- */

/* A probed CPU absent for two hours: those hours cover nothing, and it is a probe_down. */
static void test_cpu_absent(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24;
        store(&h);
        h.seq0 = 144, h.start = T0 + DAY, h.n = 12, h.absent_cpu = 1;
        store(&h);
        h.seq0 = 156, h.start = T0 + DAY + 2 * HOUR, h.n = 6 * 22, h.absent_cpu = -1;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 2 * DAY - 2 * HOUR);
        json_t *p = first_of(v, "probe_down");
        assert_int_equal(json_integer_value(json_object_get(p, "cpu")), 1);
        assert_int_equal(json_integer_value(json_object_get(p, "value_ns")), 2 * HOUR);
        assert_int_equal(json_integer_value(json_object_get(p, "time_ns")), T0 + DAY);
        /* The twelve intervals' downs are one stretch, to the end of the last. */
        assert_int_equal(json_integer_value(json_object_get(p, "end_ns")), T0 + DAY + 2 * HOUR);
        assert_non_null(
                strstr(json_string_value(json_object_get(p, "message")), "intervals 144-155"));
        assert_int_equal(count_kind(v, "problems", "probe_down"), 1);
        json_decref(v);
}

/* Probes that deliver half their wake-ups measure nothing; at 95 % they measure, but 30 s a
 * CPU did not measure in an interval is a problem; a VM's stall of 60 ms in every interval is
 * not. */
static void test_samples_share(void **state) {
        struct hist_spec h = base;
        h.share_pct = 50;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 0);
        assert_int_equal(count_kind(v, "problems", "probe_down"), 2);
        json_decref(v);
        h.release = "6.6.2-rt2", h.share_pct = 95, h.run = 2, h.start = T0 + 3 * DAY;
        store(&h);
        v = ask("6.6.2-rt2", T0 + 5 * DAY + MIN_NS);
        assert_int_equal(covered(v, M_A), 2 * DAY);
        assert_int_equal(count_kind(v, "problems", "probe_down"), 2);
        json_decref(v);
        h.release = "6.6.3-rt3", h.share_pct = 0, h.missed = 60, h.run = 3;
        h.start = T0 + 6 * DAY;
        store(&h);
        v = ask("6.6.3-rt3", T0 + 8 * DAY + MIN_NS);
        expect(v, "qualified");
        assert_int_equal(covered(v, M_A), 2 * DAY);
        json_decref(v);
}

/* A probe period of a second measures nothing, however consistent its counts. */
static void test_probe_period(void **state) {
        struct hist_spec h = base;
        h.probe_ns = (uint64_t) SEC;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 0);
        assert_non_null(strstr(json_string_value(json_object_get(first_of(v, "probe_down"), "id")),
                               ":all"));
        json_decref(v);
}

/* ---- invariant 2: time is counted once ---- */

/* The same two days again under other sequence numbers of the same run: covered once, and
 * (one run) no overlap. */
static void test_same_time_twice(void **state) {
        store(&base);
        struct hist_spec h = base;
        h.seq0 = 10000;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        assert_int_equal(covered(v, M_A), 2 * DAY);
        assert_int_equal(count_kind(v, "problems", "overlap"), 0);
        json_decref(v);
}

/* Two runs at the same time: covered once, and a problem. */
static void test_two_runs(void **state) {
        store(&base);
        struct hist_spec h = base;
        h.run = 2;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 2 * DAY);
        assert_int_equal(count_kind(v, "problems", "overlap"), 1);
        json_decref(v);
}

/* A version of the inventory at t: the BIOS and the modules loaded as given. */
static void inventory_version(struct summary_inventory *v, uint64_t version, int64_t t,
                              const char *bios, const char *modules) {
        *v = (struct summary_inventory){ .version = version,
                                         .time_ns = t,
                                         .after_ns = version > 1 ? t - 5 * MIN_NS : 0 };
        assert_int_equal(inventory_set(&v->fields, "dmi.bios_version", bios), 0);
        assert_int_equal(inventory_set(&v->fields, "modules.digest", modules), 0);
}

/* The machine changed during the release's data: a BIOS update (counted by the default rule)
 * is a machine_changed problem naming the field, a module loaded (not counted) is none; a
 * waiver of it qualifies the release; with InventoryFields= empty, nothing counts; asked
 * before the change, nothing is told. */
static void test_machine_changed(void **state) {
        struct summary_inventory inv[3];
        inventory_version(&inv[0], 1, T0, "1.0", "aaaa");
        inventory_version(&inv[1], 2, T0 + HOUR, "1.0", "bbbb");
        inventory_version(&inv[2], 3, T0 + 36 * HOUR, "1.1", "bbbb");
        /* Each version with the upload of its time: the first 30 hours, then the rest; the
         * run numbered 5 by the machine, 1 by the farm, so that the two cannot be taken for
         * each other. */
        struct hist_spec h = base;
        h.run = 5, h.n = 6 * 30, h.inventory = inv, h.ninventory = 2;
        store(&h);
        h.seq0 = 6 * 30, h.start = T0 + 30 * HOUR, h.n = 6 * 18;
        h.inventory = &inv[2], h.ninventory = 1;
        store(&h);
        for (int i = 0; i < 3; i++)
                inventory_done(&inv[i].fields);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(count_kind(v, "problems", "machine_changed"), 1);
        json_t *p = first_of(v, "machine_changed");
        assert_string_equal(json_string_value(json_object_get(p, "id")),
                            "machine_changed:" M_A ":5:3");
        assert_int_equal(json_integer_value(json_object_get(p, "version")), 3);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(p, "previous"), "version")), 2);
        json_t *fields = json_object_get(p, "fields");
        assert_int_equal(json_array_size(fields), 1);
        assert_string_equal(json_string_value(json_array_get(fields, 0)), "dmi.bios_version");
        assert_non_null(strstr(json_string_value(json_object_get(p, "message")),
                               "dmi.bios_version: 1.0 -> 1.1"));
        char *id = strdup(json_string_value(json_object_get(p, "id")));
        json_decref(v);

        /* Before the change was found: nothing to tell. */
        v = ask("6.6.1-rt1", T0 + 35 * HOUR);
        assert_int_equal(count_kind(v, "problems", "machine_changed"), 0);
        json_decref(v);

        /* No field counts: the same data qualifies. */
        struct farm_rule saved = rule;
        rule.inventory_fields[0] = '\0';
        v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "qualified");
        json_decref(v);
        rule = saved;

        /* Waived: the operator takes the two as one machine. */
        char err[FARM_ERROR_MAX];
        int64_t wid;
        assert_int_equal(farm_waive(db, &rule, "6.6.1-rt1", id, "BIOS 1.1 checked on lab-a",
                                    "alice", T0 + 2 * DAY + MIN_NS, &wid, err),
                         0);
        v = ask("6.6.1-rt1", T0 + 2 * DAY + 2 * MIN_NS);
        expect(v, "qualified");
        assert_int_equal(json_array_size(json_object_get(v, "waived")), 1);
        json_decref(v);
        free(id);
}

/* A machine whose clock runs ahead: its change, stamped after it arrived, counts from its
 * arrival (as its data does), not never. */
static void test_machine_changed_clock_ahead(void **state) {
        struct summary_inventory inv[2];
        inventory_version(&inv[0], 1, T0, "1.0", "aaaa");
        inventory_version(&inv[1], 2, T0 + 50 * HOUR, "1.1", "aaaa"); /* received at 48 h */
        struct hist_spec h = base;
        h.n = 6 * 30, h.inventory = inv, h.ninventory = 1;
        store(&h);
        h.seq0 = 6 * 30, h.start = T0 + 30 * HOUR, h.n = 6 * 18;
        h.inventory = &inv[1], h.ninventory = 1;
        store(&h);
        for (int i = 0; i < 2; i++)
                inventory_done(&inv[i].fields);
        /* Asked at the very moment it arrived: known then. */
        json_t *v = ask("6.6.1-rt1", T0 + 48 * HOUR);
        assert_int_equal(count_kind(v, "problems", "machine_changed"), 1);
        json_decref(v);
        v = ask("6.6.1-rt1", T0 + 48 * HOUR + MIN_NS);
        assert_int_equal(count_kind(v, "problems", "machine_changed"), 1);
        assert_int_equal(
                json_integer_value(json_object_get(first_of(v, "machine_changed"), "time_ns")),
                T0 + 48 * HOUR);
        json_decref(v);
}

/* ---- invariant 3: the server's clock ---- */

/* Two days stamped a day ahead of their arrival: nothing covered, a clock problem. */
static void test_clock_ahead(void **state) {
        struct hist_spec h = base;
        h.received = T0 - DAY + MIN_NS; /* everything arrives at once, a day early */
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 0);
        json_t *p = first_of(v, "clock");
        assert_true(json_integer_value(json_object_get(p, "value_ns")) >= 3 * DAY - 2 * MIN_NS);
        json_decref(v);
}

/* ---- invariant 4: a past verdict never changes behind anyone's back ---- */

/* Asserts that two verdicts are the same but for when they were asked; frees both. */
static void assert_same_verdict(json_t *then, json_t *again) {
        json_object_del(then, "asked_at");
        json_object_del(then, "asked_at_ns");
        json_object_del(again, "asked_at");
        json_object_del(again, "asked_at_ns");
        char *a = json_dumps(then, JSON_COMPACT), *b = json_dumps(again, JSON_COMPACT);
        assert_string_equal(a, b);
        free(a);
        free(b);
        json_decref(then);
        json_decref(again);
}

/* The verdict given at K, asked again with known_at=K after late data, a settings change and
 * a waiver: the same but for asked_at; with at=K it counts the late data. */
static void test_known_at(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24; /* day one */
        store(&h);
        int64_t k = T0 + DAY + 5 * MIN_NS;
        json_t *then = ask("6.6.1-rt1", k);
        /* Day two arrives (with a violation), the bound is changed. */
        h.seq0 = 144, h.start = T0 + DAY, h.n = 6 * 24, h.max_ns = 500000;
        store(&h);
        setting(M_A, T0 + 2 * DAY, 50000, 1, "default");
        assert_same_verdict(then, ask_known("6.6.1-rt1", k, k));
        /* About the moment the second day started, with all that came: 1 interval late. */
        json_t *late = ask_known("6.6.1-rt1", T0 + DAY + 10 * MIN_NS, INT64_MAX);
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(late, "late"), "intervals")), 1);
        json_decref(late);
}

/* A run that started before K but whose first upload came after it is not one of the
 * release's runs as known at K: not in its machine's count of runs.  (A machine whose only
 * run that is is not listed at all: the machines are read as known at K.) */
static void test_known_at_run_reported_later(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24;
        store(&h);
        int64_t k = T0 + DAY + 5 * MIN_NS;
        json_t *then = ask("6.6.1-rt1", k);
        /* Run 2 (its daemon started at T0, as every run here) sends day two's first hour an
         * hour after K. */
        h.run = 2, h.seq0 = 0, h.start = T0 + DAY, h.n = 6, h.received = k + HOUR;
        store(&h);
        assert_same_verdict(then, ask_known("6.6.1-rt1", k, k));
}

/* What a verdict log pass told its problem hook: the violations' ids. */
static struct {
        char *ids[8];
        int n;
        int64_t known_ns; /* 0: problems_known left NULL */
        int judged;       /* releases judged; of the last: */
        bool changed, late;
} told;

static void told_judged(void *userdata, const struct farm_verdict *verdict, const char *prev,
                        int64_t prev_id, bool changed, bool late, int64_t now_ns) {
        told.judged++;
        told.changed = changed;
        told.late = late;
}

static void told_problem(void *userdata, const char *release, const struct farm_problem *p) {
        if (p->kind == FARM_PROBLEM_VIOLATION && told.n < (int) ELEMENTSOF(told.ids))
                told.ids[told.n++] = strdup(p->id);
}

static int64_t told_known(void *userdata, int64_t now_ns) {
        return told.known_ns;
}

static int log_pass_telling(int64_t now, int64_t known, struct farm_log_mark *seen) {
        char err[FARM_ERROR_MAX];
        for (int i = 0; i < told.n; i++)
                free(told.ids[i]);
        told.n = 0;
        told.known_ns = known;
        told.judged = 0;
        struct farm_verdict_hooks hooks = { .problem = told_problem,
                                            .problems_known = known ? told_known : NULL,
                                            .judged = told_judged };
        if (farm_verdict_log_pass(db, &rule, now, seen, &hooks, NULL, err) < 0)
                fail_msg("%s", err);
        return told.n;
}

/* A pass whose problems are told from the data received by an earlier moment (the
 * notifications' first pass, which learns what was there when the server started) tells
 * only those, leaves its mark, and the next pass, with all the data, tells the rest: an
 * upload that arrived meanwhile is not lost. */
static void test_log_pass_problems_known(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24, h.max_ns = 500000; /* day one, a violation, received during it */
        store(&h);
        h.seq0 = 144, h.start = T0 + DAY; /* day two, another, received after k */
        store(&h);
        int64_t k = T0 + DAY + 5 * MIN_NS, now = T0 + 2 * DAY + MIN_NS;
        struct farm_log_mark seen = {};
        assert_int_equal(log_pass_telling(now, k, &seen), 1);
        assert_false(seen.started); /* the mark stays: the next pass judges every release */
        /* Failed already with the data received by k: the change is not the late upload's. */
        assert_int_equal(told.judged, 1);
        assert_true(told.changed);
        assert_false(told.late);
        char *first = strdup(told.ids[0]);
        assert_int_equal(log_pass_telling(now + MIN_NS, 0, &seen), 2);
        assert_true(strcmp(told.ids[0], first) == 0 || strcmp(told.ids[1], first) == 0);
        assert_true(seen.started);
        free(first);
        for (int i = 0; i < told.n; i++)
                free(told.ids[i]);
        told.n = 0;
}

/* The same first pass where the release was clean with the data received by k and the upload
 * received after it fails it: the change is the late upload's (the notifications tell it,
 * since the next pass finds it logged already), and only once. */
static void test_log_pass_late_verdict(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24; /* day one, clean */
        store(&h);
        h.seq0 = 144, h.start = T0 + DAY, h.n = 1, h.max_ns = 500000; /* fails it, after k */
        store(&h);
        /* k a little before the pass, as when a server starts: no silence from k to now. */
        int64_t k = T0 + DAY + 5 * MIN_NS, now = T0 + DAY + 15 * MIN_NS;
        struct farm_log_mark seen = {};
        assert_int_equal(log_pass_telling(now, k, &seen), 0); /* its problem: the next pass */
        assert_int_equal(told.judged, 1);
        assert_true(told.changed);
        assert_true(told.late);
        assert_int_equal(log_pass_telling(now + MIN_NS, 0, &seen), 1);
        assert_int_equal(told.judged, 1);
        assert_false(told.changed);
        assert_false(told.late);
        free(told.ids[0]);
        told.n = 0;
}

/* The watch thread's passes keep to their share of the time: with Watch=1ms, each wait from a
 * pass's end to the next one's start is at least (100 / FARM_WATCH_SHARE - 1) times that pass
 * (measured from inside it, so shorter than it was: the bound holds without slack).  Passes
 * run back to back otherwise, 1 ms apart. */
static struct {
        pthread_mutex_t lock;
        int n;
        int64_t start[64], end[64];
} passes = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int64_t pass_started(void *userdata, int64_t now) {
        pthread_mutex_lock(&passes.lock);
        if (passes.n < (int) ELEMENTSOF(passes.start))
                passes.start[passes.n] = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_unlock(&passes.lock);
        return now;
}

static void pass_ended(void *userdata, int64_t now) {
        pthread_mutex_lock(&passes.lock);
        if (passes.n < (int) ELEMENTSOF(passes.end))
                passes.end[passes.n++] = now_ns(CLOCK_MONOTONIC);
        pthread_mutex_unlock(&passes.lock);
}

static void test_watch_share(void **state) {
        assert_int_equal(farm_watch_wait_ns(60 * NSEC_PER_SEC, NSEC_PER_SEC), 60 * NSEC_PER_SEC);
        assert_int_equal(farm_watch_wait_ns(60 * NSEC_PER_SEC, 5 * NSEC_PER_SEC),
                         95 * NSEC_PER_SEC);
        assert_int_equal(farm_watch_wait_ns(0, UINT64_MAX / 2), UINT64_MAX);
        struct hist_spec h = base;
        h.n = 6 * 24;
        store(&h);
        struct farm_rule fast = rule;
        fast.watch_ns = NSEC_PER_MSEC;
        struct farm_verdict_hooks hooks = { .problems_known = pass_started,
                                            .pass_done = pass_ended };
        struct farm_watcher *w = NULL;
        assert_int_equal(farm_watcher_start(db, &fast, &hooks, &w), 0);
        /* Until 4 passes, or 2 once 3 s have gone by: on a busy machine a pass takes longer,
         * and the wait after it 19 times that (a 150 ms pass: 2.85 s); 60 s at most. */
        for (int i = 0; i < 6000; i++) {
                pthread_mutex_lock(&passes.lock);
                int n = passes.n;
                pthread_mutex_unlock(&passes.lock);
                if (n >= 4 || (n >= 2 && i >= 300))
                        break;
                usleep(10000);
        }
        farm_watcher_stop(w);
        assert_true(passes.n >= 2);
        const uint64_t factor = 100 / FARM_WATCH_SHARE - 1;
        for (int i = 0; i + 1 < passes.n; i++) {
                int64_t took = passes.end[i] - passes.start[i];
                int64_t waited = passes.start[i + 1] - passes.end[i];
                print_message("# pass %d: %" PRId64 " us, then %" PRId64 " us of wait\n", i,
                              took / 1000, waited / 1000);
                assert_true(waited >= took * (int64_t) factor);
        }
}

/* ---- invariant 5: settings have a history ---- */

/* A violation under a bound of 100 us stays one when the bound is widened afterwards, and
 * when the machine is un-gated afterwards; one while the machine did not gate is listed, not
 * counted. */
static void test_settings_afterwards(void **state) {
        struct hist_spec h = base;
        h.max_ns = 150000;
        store(&h);
        setting(M_A, T0 + 2 * DAY + HOUR, 200000, 0, "default");
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + 2 * HOUR);
        expect(v, "failed");
        assert_int_equal(count_kind(v, "problems", "violation"), 1);
        json_decref(v);
        enroll(M_B);
        setting(M_B, T0 - DAY, 100000, 0, "default"); /* not gating */
        h.machine = M_B, h.release = "6.6.2-rt2";
        store(&h);
        v = ask("6.6.2-rt2", T0 + 2 * DAY + MIN_NS);
        assert_int_equal(count_kind(v, "problems", "violation"), 0);
        assert_int_equal(count_kind(v, "not_counted", "violation"), 1);
        json_decref(v);
}

/* ---- invariant 6: silence ---- */

/* A 10-hour hole with 3 hours of another release in its middle: the silences before and
 * after remain, each a gap. */
static void test_partial_other_release(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 12;
        store(&h);                                             /* 0h-12h */
        h.seq0 = 1000, h.start = T0 + 22 * HOUR, h.n = 6 * 26; /* 22h-48h */
        store(&h);
        struct hist_spec o = base;
        o.release = "6.6.0-rt0", o.run = 5, o.start = T0 + 15 * HOUR, o.n = 18; /* 15h-18h */
        store(&o);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(count_kind(v, "problems", "gap"), 2);
        json_decref(v);
}

/* MaxGap= is the most a machine may be silent: a hole of exactly that is none, one a
 * nanosecond longer is a gap; the same for the silence since its last data. */
static void test_gap_at_max_gap(void **state) {
        int64_t g = (int64_t) rule.max_gap_ns;
        struct hist_spec h = base;
        h.n = 6 * 12;
        store(&h);                                   /* 0h-12h */
        h.seq0 = 1000, h.start = T0 + 12 * HOUR + g; /* after MaxGap exactly */
        store(&h);
        int64_t end = h.start + 12 * HOUR;
        h.seq0 = 2000, h.start = end + g + 1; /* after MaxGap and a nanosecond */
        store(&h);
        int64_t last = h.start + 12 * HOUR;
        json_t *v = ask("6.6.1-rt1", last + g);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        json_t *p = first_of(v, "gap");
        assert_int_equal(json_integer_value(json_object_get(p, "time_ns")), end);
        assert_int_equal(json_integer_value(json_object_get(p, "end_ns")), end + g + 1);
        json_decref(v);
        v = ask("6.6.1-rt1", last + g + 1);
        assert_int_equal(count_kind(v, "problems", "gap"), 2);
        json_decref(v);
}

/* A waiver that an older server stored before gap ids named their end ("gap:MACHINE:START")
 * covers the silence from START only if it had ended when the waiver was given: given a
 * nanosecond before its end, the gap stays a problem; given at its end, it is waived.  Nor
 * does "gap:MACHINE", or a START that is only the first digits of the gap's, cover it. */
static void test_legacy_gap_waiver(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 12;
        store(&h);                               /* 0h-12h */
        h.seq0 = 1000, h.start = T0 + 14 * HOUR; /* silent 12h-14h */
        store(&h);
        int64_t end = h.start, asked = h.start + 12 * HOUR;
        long long start = (long long) (T0 + 12 * HOUR);
        char sql[1024];
        snprintf(sql, sizeof(sql),
                 "INSERT INTO waivers (kernel_release, problem, reason, by, created_ns) VALUES "
                 "('6.6.1-rt1', 'gap:%s:%lld', 'older server', 'alice', %lld), "
                 "('6.6.1-rt1', 'gap:%s', 'older server', 'alice', %lld), "
                 "('6.6.1-rt1', 'gap:%s:%lld', 'older server', 'alice', %lld)",
                 M_A, start, (long long) (end - 1), M_A, (long long) end, M_A, start / 10,
                 (long long) end);
        tu_farm_exec(path, sql);
        json_t *v = ask("6.6.1-rt1", asked);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        assert_int_equal(count_kind(v, "waived", "gap"), 0);
        json_decref(v);
        snprintf(sql, sizeof(sql),
                 "UPDATE waivers SET created_ns = %lld WHERE problem = 'gap:%s:%lld'",
                 (long long) end, M_A, start);
        tu_farm_exec(path, sql);
        v = ask("6.6.1-rt1", asked);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        assert_int_equal(count_kind(v, "waived", "gap"), 1);
        json_decref(v);
}

/* Silent after the release's last data while it ran three later releases: the machine moved
 * on, no gap, once the first later interval is there (by the moment asked, as known then: one
 * received only after the question is not there); before it, the silence is an ongoing gap. */
static void test_silent_then_later_releases(void **state) {
        store(&base); /* 6.6.1-rt1, 0h-48h */
        const char *later[] = { "6.6.2-rt1", "6.6.3-rt1", "6.6.4-rt1" };
        for (int i = 0; i < 3; i++) {
                struct hist_spec o = base;
                o.release = later[i], o.run = 2 + i, o.seq0 = 1000 * (i + 1);
                o.start = T0 + (3 + i) * DAY, o.n = 6 * 12;
                /* Each release's 12 hours arrive at their end; the first's two days late. */
                o.received = i == 0 ? o.start + 2 * DAY : 0;
                store(&o);
        }
        json_t *v = ask("6.6.1-rt1", T0 + 7 * DAY);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        json_decref(v);
        /* Known before the first later release arrived and before the second began: ongoing. */
        v = ask_known("6.6.1-rt1", T0 + 3 * DAY + 6 * HOUR, T0 + 3 * DAY + 6 * HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        assert_true(json_is_true(json_object_get(first_of(v, "gap"), "ongoing")));
        json_decref(v);
        /* Known once the second arrived, though the first is still on its way: not ongoing. */
        v = ask_known("6.6.1-rt1", T0 + 4 * DAY + 13 * HOUR, T0 + 4 * DAY + 13 * HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        json_decref(v);
}

/* A later release's data stamped beyond the clock's tolerance is no report: the machine that
 * sent only such data after the release's last is silent; one valid interval after them ends
 * it (the first that counts is found, not the first stored). */
static void test_later_release_stamped_ahead(void **state) {
        store(&base); /* 6.6.1-rt1, 0h-48h */
        struct hist_spec o = base;
        o.release = "6.6.2-rt1", o.run = 2, o.seq0 = 1000, o.start = T0 + 3 * DAY, o.n = 6;
        o.received = o.start; /* an hour stamped 10-60 min ahead of its arrival */
        store(&o);
        json_t *v = ask("6.6.1-rt1", T0 + 3 * DAY + 2 * HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        assert_true(json_is_true(json_object_get(first_of(v, "gap"), "ongoing")));
        json_decref(v);
        o.seq0 = 2000, o.start = T0 + 3 * DAY + HOUR, o.received = 0; /* then an hour as sent */
        store(&o);
        v = ask("6.6.1-rt1", T0 + 3 * DAY + 3 * HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        json_decref(v);
}

/* A later run already reported by the moment asked, whose intervals then known do not count
 * (stamped ahead) and whose counting ones arrived only afterwards: the machine had not yet
 * reported anything since, as known then (an ongoing gap); once they are there, it had. */
static void test_later_release_counted_once_known(void **state) {
        store(&base); /* 6.6.1-rt1, 0h-48h */
        struct hist_spec o = base;
        o.release = "6.6.2-rt1", o.run = 2, o.seq0 = 1000, o.start = T0 + 3 * DAY, o.n = 6;
        o.received = o.start; /* its first hour stamped 10-60 min ahead of its arrival */
        store(&o);
        o.seq0 = 2000, o.start = T0 + 3 * DAY + HOUR, o.received = T0 + 5 * DAY; /* then late */
        store(&o);
        json_t *v = ask_known("6.6.1-rt1", T0 + 3 * DAY + 3 * HOUR, T0 + 3 * DAY + 3 * HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        assert_true(json_is_true(json_object_get(first_of(v, "gap"), "ongoing")));
        json_decref(v);
        v = ask("6.6.1-rt1", T0 + 5 * DAY + HOUR);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        json_decref(v);
}

/* A maintenance window declared in advance excuses the silence inside it; declared after the
 * silence began, it excuses only from its declaration on. */
static void test_maintenance(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 12;
        store(&h);
        h.seq0 = 1000, h.start = T0 + 20 * HOUR, h.n = 6 * 28;
        store(&h);
        char text[512];
        snprintf(text, sizeof(text),
                 "INSERT INTO maintenance (machine_id, from_ns, to_ns, reason, by, created_ns) "
                 "VALUES ('%s', %lld, %lld, 'bios', 'test', %lld)",
                 M_A, (long long) (T0 + 12 * HOUR), (long long) (T0 + 20 * HOUR),
                 (long long) (T0 + 6 * HOUR));
        sql(text);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        assert_int_equal(count_kind(v, "problems", "gap"), 0);
        json_decref(v);
        sql("UPDATE maintenance SET created_ns = created_ns + 10 * 3600000000000");
        v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        json_t *p = first_of(v, "gap");
        assert_int_equal(json_integer_value(json_object_get(p, "value_ns")), 4 * HOUR);
        json_decref(v);
}

/* A waiver of one gap does not waive the next one. */
static void test_gap_ids(void **state) {
        char err[FARM_ERROR_MAX];
        struct hist_spec h = base;
        h.n = 6 * 12;
        store(&h);
        h.seq0 = 1000, h.start = T0 + 13 * HOUR, h.n = 6 * 12;
        store(&h);
        h.seq0 = 2000, h.start = T0 + 26 * HOUR, h.n = 6 * 22;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        assert_int_equal(count_kind(v, "problems", "gap"), 2);
        const char *id = json_string_value(json_object_get(first_of(v, "gap"), "id"));
        int64_t wid;
        char *copy = strdup(id);
        json_decref(v);
        /* A reason is counted in characters, as every reason is: 1001 "é" are too many, 1000
         * are not (2000 bytes). */
        char reason[2 * 1001 + 1] = "";
        for (int i = 0; i < 1001; i++)
                strcat(reason, "\xc3\xa9");
        assert_int_equal(farm_waive(db, &rule, "6.6.1-rt1", copy, reason, "alice",
                                    T0 + 2 * DAY + MIN_NS, &wid, err),
                         -EINVAL);
        assert_non_null(strstr(err, "1001 characters"));
        reason[2 * 1000] = '\0';
        assert_int_equal(farm_waive(db, &rule, "6.6.1-rt1", copy, reason, "alice",
                                    T0 + 2 * DAY + MIN_NS, &wid, err),
                         0);
        v = ask("6.6.1-rt1", T0 + 2 * DAY + 2 * MIN_NS);
        assert_int_equal(count_kind(v, "problems", "gap"), 1);
        assert_int_equal(json_array_size(json_object_get(v, "waived")), 1);
        json_decref(v);
        free(copy);
}

/* ---- invariant 7: a load scenario counts only while its load ran ---- */

static void test_scenario_loads(void **state) {
        rule.nscenarios = 1;
        snprintf(rule.scenarios[0].name, sizeof(rule.scenarios[0].name), "io");
        rule.scenarios[0].min_ns = DAY;
        /* The generator absent all along: measured, but no io time, and its load down. */
        struct hist_spec h = base;
        h.scenario = "io", h.no_loads = true;
        store(&h);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(covered(v, M_A), 2 * DAY);
        assert_int_equal(count_kind(v, "problems", "load_down"), 2); /* a stretch, a total */
        json_decref(v);
        /* Up, but without throughput: the same. */
        h.release = "6.6.2-rt2", h.no_loads = false, h.zero_loads = true, h.run = 2;
        h.start = T0 + 3 * DAY;
        store(&h);
        v = ask("6.6.2-rt2", T0 + 5 * DAY + MIN_NS);
        expect(v, "failed");
        json_t *missing = json_object_get(v, "missing");
        assert_int_equal(json_array_size(missing), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(missing, 0), "what")),
                            "scenario");
        json_decref(v);
        /* With its load: qualified. */
        h.release = "6.6.3-rt3", h.zero_loads = false, h.run = 3, h.start = T0 + 6 * DAY;
        store(&h);
        v = ask("6.6.3-rt3", T0 + 8 * DAY + MIN_NS);
        expect(v, "qualified");
        json_decref(v);
}

/* ---- invariant 8: groups per series, builds ---- */

/* A machine of another branch's group does not block; two builds under one name fail. */
static void test_groups_and_builds(void **state) {
        enroll(M_B);
        setting(M_B, T0 - DAY, 100000, 1, "6.1-rt");
        setting(M_A, T0 - DAY, 100000, 1, "6.6-rt");
        store(&base);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "qualified");
        assert_string_equal(json_string_value(json_object_get(v, "group")), "6.6-rt");
        assert_int_equal(json_integer_value(json_object_get(v, "gating_machines")), 1);
        json_decref(v);
        setting(M_B, T0 - DAY + 1, 100000, 1, "6.6-rt");
        struct hist_spec h = base;
        h.machine = M_B, h.build = "#2 SMP PREEMPT_RT rebuilt";
        store(&h);
        v = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(count_kind(v, "problems", "mixed_builds"), 1);
        json_decref(v);
}

/* ---- invariants 9 and 10: regressions and the latest stable ---- */

/* A pass of the verdict log at now, as the server's thread makes one. */
static void log_pass_at(int64_t now) {
        char err[FARM_ERROR_MAX];
        struct farm_log_mark seen = {};
        if (farm_verdict_log_pass(db, &rule, now, &seen, NULL, NULL, err) < 0)
                fail_msg("%s", err);
}

static const char *baseline_of(json_t *v) {
        return json_string_value(json_object_get(v, "baseline"));
}

static char *latest_stable_at(int64_t at) {
        char err[FARM_ERROR_MAX];
        json_t *s = NULL;
        struct farm_question q = { NULL, at, at, at };
        assert_int_equal(farm_latest_stable_json(db, &rule, "6.6-rt", &q, &s, err), 0);
        const char *l = json_string_value(json_object_get(s, "latest_stable"));
        char *r = l ? strdup(l) : NULL;
        json_decref(s);
        return r;
}

/* The baseline is what the verdict log had qualified at the moment judged: none before the
 * log judged the older release (and asked about that moment again later, still none), the
 * older release once it did. */
static void test_regression_and_latest(void **state) {
        rule.regression = true;
        /* The BIOS updated between the two releases' runs: no machine_changed (each release's
         * data is of one system), but the regression says that the system differs. */
        struct summary_inventory inv[2];
        inventory_version(&inv[0], 1, T0, "1.0", "aaaa");
        inventory_version(&inv[1], 1, T0 + 3 * DAY, "1.1", "bbbb");
        /* Two kernels: their configurations differ whatever the machine, and are not it. */
        assert_int_equal(inventory_set(&inv[0].fields, "kconfig.digest", "1111"), 0);
        assert_int_equal(inventory_set(&inv[1].fields, "kconfig.digest", "2222"), 0);
        struct hist_spec b1 = base;
        b1.inventory = &inv[0], b1.ninventory = 1;
        store(&b1); /* 6.6.1-rt1 */
        struct hist_spec h = base;
        h.release = "6.6.10-rt5", h.run = 2, h.start = T0 + 3 * DAY, h.max_ns = 900000;
        h.inventory = &inv[1], h.ninventory = 1;
        store(&h);
        for (int i = 0; i < 2; i++)
                inventory_done(&inv[i].fields);
        json_t *v = ask("6.6.10-rt5", T0 + 5 * DAY + MIN_NS);
        assert_null(baseline_of(v));
        assert_int_equal(count_kind(v, "problems", "regression"), 0);
        json_decref(v);
        log_pass_at(T0 + 5 * DAY);
        v = ask("6.6.10-rt5", T0 + 5 * DAY + MIN_NS);
        expect(v, "failed");
        assert_string_equal(baseline_of(v), "6.6.1-rt1");
        assert_int_equal(count_kind(v, "problems", "regression"), 1);
        assert_int_equal(count_kind(v, "problems", "machine_changed"), 0);
        json_t *reg = first_of(v, "regression");
        json_t *differs = json_object_get(reg, "inventory_differs");
        assert_int_equal(json_array_size(differs), 1);
        assert_string_equal(json_string_value(json_array_get(differs, 0)), "dmi.bios_version");
        assert_non_null(strstr(json_string_value(json_object_get(reg, "message")),
                               "the machine's inventory differs from the baseline's: "
                               "dmi.bios_version: 1.0 -> 1.1"));
        json_decref(v);
        /* The comparison lists every field of the machine that differs, counted or not (not the
         * kernels' own: configuration, modules). */
        char err[FARM_ERROR_MAX];
        struct farm_comparison cmp;
        assert_int_equal(farm_kernel_compare(db, "6.6.10-rt5", "6.6.1-rt1", 10, 5000, 0,
                                             T0 + 5 * DAY + MIN_NS, &cmp, err),
                         0);
        assert_int_equal(cmp.ndiff, 1);
        assert_int_equal(cmp.diff[0].n, 1);
        assert_string_equal(cmp.diff[0].v[0].name, "dmi.bios_version");
        assert_string_equal(cmp.diff[0].v[0].old_value, "1.1");
        farm_comparison_done(&cmp);
        v = ask_known("6.6.10-rt5", T0 + 5 * DAY - MIN_NS, T0 + 5 * DAY + MIN_NS);
        assert_null(baseline_of(v));
        json_decref(v);
        /* The latest stable of 6.6-rt is the newest qualified: 6.6.1-rt1 (6.6.10-rt5 failed). */
        char *l = latest_stable_at(T0 + 5 * DAY + MIN_NS);
        assert_string_equal(l, "6.6.1-rt1");
        free(l);
}

/* The series' entry of a release asked at `at` (as known then). */
static json_t *series_at(int64_t at) {
        char err[FARM_ERROR_MAX];
        json_t *s = NULL;
        struct farm_question q = { NULL, at, at, at };
        assert_int_equal(farm_latest_stable_json(db, &rule, "6.6-rt", &q, &s, err), 0);
        return s;
}

/* "Since" is when the log last said qualified: a release that the log had pending and that
 * qualifies only as judged now has none. */
static void test_since_only_from_qualified(void **state) {
        struct hist_spec h = base;
        h.n = 6 * 24;
        store(&h);
        log_pass_at(T0 + DAY + MIN_NS); /* one day of two: pending */
        h.seq0 = 6 * 24, h.start = T0 + DAY;
        store(&h);
        json_t *s = series_at(T0 + 2 * DAY + MIN_NS);
        assert_string_equal(json_string_value(json_object_get(s, "latest_stable")), "6.6.1-rt1");
        assert_true(json_is_null(json_object_get(s, "since_ns")));
        json_decref(s);
        log_pass_at(T0 + 2 * DAY + MIN_NS);
        s = series_at(T0 + 2 * DAY + 2 * MIN_NS);
        assert_int_equal(json_integer_value(json_object_get(s, "since_ns")), T0 + 2 * DAY + MIN_NS);
        json_decref(s);
}

/* Two releases qualified by one pass: one change of the latest stable, to the newer. */
static void test_one_pass_one_change(void **state) {
        struct hist_spec newer = base;
        store(&base);
        newer.release = "6.6.2-rt1", newer.run = 2, newer.start = T0 + 2 * DAY;
        store(&newer);
        log_pass_at(T0 + 4 * DAY + MIN_NS);
        json_t *s = series_at(T0 + 4 * DAY + 2 * MIN_NS);
        json_t *hist = json_object_get(s, "history");
        assert_int_equal(json_array_size(hist), 1);
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(hist, 0), "latest_stable")),
                "6.6.2-rt1");
        json_decref(s);
        /* The releases with data since the newer one's last end, that moment included. */
        char err[FARM_ERROR_MAX];
        struct farm_logged *v;
        size_t n;
        assert_int_equal(farm_log_current(db, T0 + 4 * DAY, &v, &n, err), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].release, "6.6.2-rt1");
        assert_string_equal(v[0].status, "qualified");
        farm_logged_free(v, n);
        assert_int_equal(farm_log_current(db, T0 + 4 * DAY + 1, &v, &n, err), 0);
        assert_int_equal(n, 0);
        farm_logged_free(v, n);
}

/* Asked as known at a moment, the latest stable is not a release first reported after it,
 * though the log qualified it by the moment asked about: the newest release known then
 * failed, the one before it is the answer. */
static void test_latest_stable_as_known_then(void **state) {
        struct hist_spec c = base, b = base;
        store(&base); /* 6.6.1-rt1 */
        log_pass_at(T0 + 2 * DAY + MIN_NS);
        c.release = "6.6.3-rt1", c.run = 3, c.start = T0 + 2 * DAY, c.max_ns = 900000;
        store(&c);
        log_pass_at(T0 + 4 * DAY + MIN_NS);
        b.release = "6.6.2-rt1", b.run = 2, b.start = T0 + 4 * DAY;
        store(&b); /* first reported after T0 + 4 days and a minute */
        log_pass_at(T0 + 6 * DAY + MIN_NS);
        char err[FARM_ERROR_MAX];
        json_t *s = NULL;
        struct farm_question q = { NULL, T0 + 6 * DAY + 2 * MIN_NS, T0 + 4 * DAY + 2 * MIN_NS,
                                   T0 + 4 * DAY + 2 * MIN_NS };
        assert_int_equal(farm_latest_stable_json(db, &rule, "6.6-rt", &q, &s, err), 0);
        assert_string_equal(json_string_value(json_object_get(s, "latest_stable")), "6.6.1-rt1");
        json_decref(s);
        s = series_at(T0 + 6 * DAY + 2 * MIN_NS);
        assert_string_equal(json_string_value(json_object_get(s, "latest_stable")), "6.6.2-rt1");
        json_decref(s);
}

/* Sixty releases that never qualify below the newest: its verdict and the series' latest
 * stable read the log, whatever the number of releases (judging each older release for its
 * baseline, and each of those its own, never ends). */
static void test_long_series(void **state) {
        rule.regression = true;
        store(&base); /* 6.6.1-rt1, qualified from T0 + 2 days */
        char names[60][32];
        for (int k = 0; k < 60; k++) {
                struct hist_spec h = base;
                snprintf(names[k], sizeof(names[k]), "6.6.%d-rt1", k + 2);
                h.release = names[k], h.run = k + 2, h.n = 1;
                h.start = T0 + 2 * DAY + k * 20 * MIN_NS;
                store(&h);
        }
        log_pass_at(T0 + 3 * DAY);
        json_t *v = ask(names[59], T0 + 3 * DAY + MIN_NS);
        assert_string_equal(baseline_of(v), "6.6.1-rt1");
        json_decref(v);
        char *l = latest_stable_at(T0 + 3 * DAY + MIN_NS);
        assert_string_equal(l, "6.6.1-rt1");
        free(l);
}

/* A release whose data did not change is judged again in a pass in which an older release of
 * its series became qualified: its baseline changed, and so may its verdict. */
static void test_newer_release_judged_again(void **state) {
        rule.regression = true;
        struct hist_spec older = base, newer = base;
        newer.release = "6.6.2-rt1", newer.run = 2, newer.max_ns = 60000; /* worse, in bound */
        store(&newer);                                                    /* T0, two days */
        older.run = 3, older.start = T0 + 10 * DAY, older.n = 6 * 24;     /* one day of two */
        store(&older);
        char err[FARM_ERROR_MAX];
        struct farm_log_mark seen = {};
        assert_true(farm_verdict_log_pass(db, &rule, T0 + 11 * DAY + MIN_NS, &seen, NULL, NULL,
                                          err) >= 0);
        char *l = latest_stable_at(T0 + 11 * DAY + MIN_NS);
        assert_string_equal(l, "6.6.2-rt1"); /* no baseline yet: qualified */
        free(l);
        older.start = T0 + 11 * DAY, older.seq0 = 6 * 24;
        store(&older); /* its second day: qualified */
        assert_true(farm_verdict_log_pass(db, &rule, T0 + 12 * DAY + MIN_NS, &seen, NULL, NULL,
                                          err) >= 0);
        json_t *v = ask("6.6.2-rt1", T0 + 12 * DAY + MIN_NS);
        expect(v, "failed");
        assert_int_equal(count_kind(v, "problems", "regression"), 1);
        json_decref(v);
        l = latest_stable_at(T0 + 12 * DAY + 2 * MIN_NS);
        assert_string_equal(l, "6.6.1-rt1");
        free(l);
        /* The log has it: 6.6.2-rt1 was latest stable, then 6.6.1-rt1 again. */
        json_t *s = series_at(T0 + 12 * DAY + 2 * MIN_NS);
        json_t *hist = json_object_get(s, "history");
        assert_int_equal(json_array_size(hist), 2);
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(hist, 0), "latest_stable")),
                "6.6.1-rt1");
        json_decref(s);
}

/* Data that arrives long after a release's own (more than a period and a day), of another
 * release run by the same machine inside the first one's time: the two runs overlap, so the
 * first release is failed now.  The pass that stores it judges the first release again (its
 * own data did not change), and the series' latest stable no longer names it. */
static void test_late_data_of_another_release(void **state) {
        char err[FARM_ERROR_MAX];
        struct farm_log_mark seen = {};
        struct hist_spec newer = base, late = base;
        store(&base); /* 6.6.1-rt1, qualified from T0 + 2 days */
        newer.release = "6.6.2-rt1", newer.run = 2, newer.start = T0 + 3 * DAY;
        newer.max_ns = 900000; /* a violation: failed */
        store(&newer);
        assert_true(farm_verdict_log_pass(db, &rule, T0 + 5 * DAY + MIN_NS, &seen, NULL, NULL,
                                          err) >= 0);
        char *l = latest_stable_at(T0 + 5 * DAY + 2 * MIN_NS);
        assert_string_equal(l, "6.6.1-rt1");
        free(l);
        late.release = "5.4.0-rt1", late.run = 3, late.start = T0 + DAY, late.n = 6;
        store(&late); /* an hour inside 6.6.1-rt1's first day, stored nine days later */
        json_t *v = ask("6.6.1-rt1", T0 + 10 * DAY);
        expect(v, "failed");
        json_decref(v);
        assert_true(farm_verdict_log_pass(db, &rule, T0 + 10 * DAY + MIN_NS, &seen, NULL, NULL,
                                          err) >= 0);
        l = latest_stable_at(T0 + 10 * DAY + 2 * MIN_NS);
        if (l)
                fail_msg("latest stable of 6.6-rt: %s, failed since the late data", l);
}

static void test_version_order(void **state) {
        static const char *const sorted[] = { "6.6.9-rt1", "6.6.10-rc1-rt1", "6.6.10-rc2",
                                              "6.6.10",    "6.6.10-rt2",     "6.6.10-rt10",
                                              "6.12.0" };
        for (size_t i = 0; i < ELEMENTSOF(sorted); i++)
                for (size_t k = 0; k < ELEMENTSOF(sorted); k++) {
                        int c = farm_version_cmp(sorted[i], sorted[k]);
                        if ((i < k && c >= 0) || (i > k && c <= 0) || (i == k && c != 0))
                                fail_msg("%s vs %s: %d", sorted[i], sorted[k], c);
                }
        char series[FARM_SERIES_NAME_MAX], group[FARM_GROUP_NAME_MAX];
        farm_rule_series_of(&rule, "6.6.30-rt31", series, group);
        assert_string_equal(series, "6.6-rt");
        farm_rule_series_of(&rule, "6.12.0", series, group);
        assert_string_equal(series, "6.12");
        farm_rule_series_of(&rule, "6.1.0-18-rt-amd64", series, group);
        assert_string_equal(series, "6.1-rt");
        farm_rule_series_of(&rule, "6.1.0-18-amd64", series, group);
        assert_string_equal(series, "6.1");
        farm_rule_series_of(&rule, "6.1.0-start1", series, group);
        assert_string_equal(series, "6.1");
        assert_int_equal(farm_rule_series_set(&rule, "lab", "Releases", "6.6.*-lab*", series,
                                              sizeof(series)),
                         0);
        farm_rule_series_of(&rule, "6.6.30-lab2", series, group);
        assert_string_equal(series, "lab");
}

/* ---- migration ---- */

/* A farm of schema 5 with data: migrated at open, nothing lost, judged as if stored now.  On
 * PostgreSQL, whose schema began at version 6, migration 6's own step (what SQL alone does
 * not do: server-migrate.c) runs on the data with what it derives taken away. */
static void test_migration_from_5(void **state) {
        char err[FARM_ERROR_MAX];
        store(&base);
        json_t *before = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        if (tu_pg()) {
                sql("UPDATE runs SET probed_cpus = NULL; UPDATE intervals SET m_start_ns = NULL, "
                    "m_end_ns = NULL, min_ratio_pm = NULL, min_ratio_cpu = NULL, "
                    "counted_ns = NULL, missing_ns = NULL; DELETE FROM \"overlaps\"; "
                    "DELETE FROM load_downs; UPDATE run_days SET counted_ns = 0, "
                    "min_ratio_pm = 1000, max_missing_ns = 0; UPDATE run_day_scenarios SET "
                    "counted_ns = 0, gens_all = NULL, down_ns = 0");
                sql_conn *c = farm_writer(db);
                assert_int_equal(farm_begin_write(c, err), 0);
                if (farm_migrate_6(c, err) < 0)
                        fail_msg("%s", err);
                assert_int_equal(farm_commit(c, err), 0);
                farm_release(c);
        } else {
                farm_db_close(db);
                db = NULL;
                sql(TU_FARM_SCHEMA_10_DOWN);
                sql(TU_FARM_SCHEMA_9_DOWN);
                sql(TU_FARM_SCHEMA_8_DOWN);
                sql(TU_FARM_SCHEMA_7_DOWN);
                sql(TU_FARM_SCHEMA_6_DOWN);
                if (farm_db_open(path, &db, err) < 0)
                        fail_msg("%s", err);
        }
        json_t *after = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(after, "qualified");
        assert_int_equal(covered(after, M_A), covered(before, M_A));
        assert_int_equal(json_integer_value(json_object_get(after, "problems_total")), 0);
        json_decref(before);
        json_decref(after);
}

static long long schema_version(void) {
        return tu_farm_int(path, tu_pg() ? "SELECT CAST(value AS BIGINT) FROM farm_meta WHERE "
                                           "key = 'schema_version'"
                                         : "PRAGMA user_version");
}

/* A farm of schema 7 (before the trace captures, and the notifications after them) migrated
 * at open on either store, nothing lost; a capture stored afterwards is named under its violation
 * by the verdict. */
static void test_migration_to_8(void **state) {
        char err[FARM_ERROR_MAX];
        store(&base);
        json_t *before = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(before, "qualified");
        farm_db_close(db);
        db = NULL;
        /* The histogram cache before schema 12 held some days (here the first of each run): the
         * migration keeps them and merges the others. */
        sql("DELETE FROM hist_days WHERE day > (SELECT min(d.day) FROM run_days d WHERE d.run = "
            "hist_days.run)");
        long long cached = tu_farm_int(path, "SELECT count(*) FROM hist_days");
        assert_true(cached > 0);
        sql(tu_pg() ? TU_FARM_PG_SCHEMA_10_DOWN : TU_FARM_SCHEMA_10_DOWN);
        sql(tu_pg() ? TU_FARM_PG_SCHEMA_9_DOWN : TU_FARM_SCHEMA_9_DOWN);
        sql(tu_pg() ? TU_FARM_PG_SCHEMA_8_DOWN : TU_FARM_SCHEMA_8_DOWN);
        assert_int_equal(schema_version(), 7);
        if (farm_db_open(path, &db, err) < 0)
                fail_msg("%s", err);
        assert_int_equal(schema_version(), 12);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM traces"), 0);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM inventories"), 0);
        /* The day histograms of the data stored before, merged from it by the migration. */
        assert_true(tu_farm_int(path, "SELECT count(*) FROM run_day_hists") > 0);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM run_day_hists WHERE hist IS NULL"),
                         0);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM run_day_hists"),
                         tu_farm_int(path, "SELECT count(*) FROM (SELECT DISTINCT run, start_ns / "
                                           "86400000000000, coalesce(scenario, '') FROM "
                                           "intervals) d"));
        assert_int_equal(tu_farm_int(path, "SELECT sum(samples) FROM run_day_hists"),
                         tu_farm_int(path, "SELECT sum(samples) FROM interval_cpus"));
        /* And those of each CPU. */
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM run_days WHERE cpu_hists = 0"), 0);
        assert_true(tu_farm_int(path, "SELECT count(*) FROM hist_days") > cached);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM hist_days"),
                         tu_farm_int(path,
                                     "SELECT count(*) FROM (SELECT DISTINCT i.run, i.start_ns "
                                     "/ 86400000000000, coalesce(i.scenario, ''), c.cpu FROM "
                                     "intervals i JOIN interval_cpus c ON c.interval = "
                                     "i.id) d"));
        assert_int_equal(tu_farm_int(path, "SELECT sum(samples) FROM hist_days"),
                         tu_farm_int(path, "SELECT sum(samples) FROM interval_cpus"));
        json_t *after = ask("6.6.1-rt1", T0 + 2 * DAY + MIN_NS);
        expect(after, "qualified");
        assert_int_equal(covered(after, M_A), covered(before, M_A));
        json_decref(before);
        json_decref(after);

        /* A violation with its capture, on the migrated farm: the problem names the culprit. */
        struct hist_spec h = base;
        h.seq0 = 1000, h.start = T0 + 2 * DAY, h.n = 6, h.max_ns = 480000, h.trace = true;
        store(&h);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM traces WHERE culprit_pid = 211 "
                                           "AND culprit_kind = 'thread' AND raw IS NULL"),
                         1);
        json_t *v = ask("6.6.1-rt1", T0 + 2 * DAY + 2 * HOUR), *p;
        expect(v, "failed");
        size_t i, named = 0;
        json_array_foreach (json_object_get(v, "problems"), i, p) {
                const char *kind = json_string_value(json_object_get(p, "kind"));
                if (!kind || strcmp(kind, "violation") != 0)
                        continue;
                const char *c = json_string_value(json_object_get(p, "culprit"));
                if (!c || strcmp(c, CULPRIT) != 0)
                        fail_msg("the violation's culprit is %s", c ?: "null");
                assert_true(json_integer_value(json_object_get(p, "trace")) > 0);
                named++;
        }
        assert_int_equal(named, 1);
        json_decref(v);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_clean_qualifies, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rollups_match_intervals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rollups_folded_as_one_by_one, setup, teardown),
                cmocka_unit_test_setup_teardown(test_since_only_from_qualified, setup, teardown),
                cmocka_unit_test_setup_teardown(test_one_pass_one_change, setup, teardown),
                cmocka_unit_test_setup_teardown(test_latest_stable_as_known_then, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retention_edges, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cpu_absent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_samples_share, setup, teardown),
                cmocka_unit_test_setup_teardown(test_probe_period, setup, teardown),
                cmocka_unit_test_setup_teardown(test_same_time_twice, setup, teardown),
                cmocka_unit_test_setup_teardown(test_two_runs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_machine_changed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_machine_changed_clock_ahead, setup, teardown),
                cmocka_unit_test_setup_teardown(test_clock_ahead, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gap_at_max_gap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_legacy_gap_waiver, setup, teardown),
                cmocka_unit_test_setup_teardown(test_known_at, setup, teardown),
                cmocka_unit_test_setup_teardown(test_known_at_run_reported_later, setup, teardown),
                cmocka_unit_test_setup_teardown(test_settings_afterwards, setup, teardown),
                cmocka_unit_test_setup_teardown(test_silent_then_later_releases, setup, teardown),
                cmocka_unit_test_setup_teardown(test_partial_other_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_later_release_stamped_ahead, setup, teardown),
                cmocka_unit_test_setup_teardown(test_later_release_counted_once_known, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_maintenance, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gap_ids, setup, teardown),
                cmocka_unit_test_setup_teardown(test_scenario_loads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_groups_and_builds, setup, teardown),
                cmocka_unit_test_setup_teardown(test_regression_and_latest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_long_series, setup, teardown),
                cmocka_unit_test_setup_teardown(test_newer_release_judged_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_late_data_of_another_release, setup, teardown),
                cmocka_unit_test(test_version_order),
                cmocka_unit_test_setup_teardown(test_migration_from_5, setup, teardown),
                cmocka_unit_test_setup_teardown(test_migration_to_8, setup, teardown),
                cmocka_unit_test_setup_teardown(test_log_pass_problems_known, setup, teardown),
                cmocka_unit_test_setup_teardown(test_log_pass_late_verdict, setup, teardown),
                cmocka_unit_test_setup_teardown(test_watch_share, setup, teardown),
        };
        return RUN_TESTS(tests);
}
