/* SPDX-License-Identifier: MIT */
/* rtsoak: reads the local database and reports on it (status, per-CPU report, merged
 * histogram in cyclictest's format, events, trace captures), as tables for people or JSON for
 * scripts. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-filters.h"
#include "cli-inventory.h"
#include "cli-output.h"
#include "cli-stable.h"
#include "cli-trace.h"
#include "cli-verdict.h"
#include "config.h"
#include "hist.h"
#include "log.h"
#include "loadgen.h"
#include "macro.h"
#include "store.h"
#include "timeutil.h"

#define DEFAULT_DB "/var/lib/rtsoak/rtsoak.db"

struct args {
        const char *db;
        const char *command;
        bool json;
        struct store_filter filter;
        bool run_last;
        const char *format;
        const char *type;
        uint64_t limit;
        bool have_limit;
        bool by_scenario;
        bool raw;
        int64_t id;     /* trace ID */
        unsigned given; /* OPT_* bits of the options that were given */
};

enum {
        OPT_SINCE = 1 << 0,
        OPT_UNTIL = 1 << 1,
        OPT_RUN = 1 << 2,
        OPT_CPU = 1 << 3,
        OPT_FORMAT = 1 << 4,
        OPT_TYPE = 1 << 5,
        OPT_LIMIT = 1 << 6,
        OPT_JSON = 1 << 7,
        OPT_SCENARIO = 1 << 8,
        OPT_BY_SCENARIO = 1 << 9,
        OPT_RAW = 1 << 10,
};

struct command {
        const char *name;
        unsigned allowed; /* OPT_* bits the command accepts */
        int (*run)(store *s, const struct args *a);
};

static void usage(FILE *f) {
        fprintf(f,
                "Usage: rtsoak [--db PATH] COMMAND [OPTIONS]\n\n"
                "Commands:\n"
                "  status                 the current or last run and its worst cases so far\n"
                "  report                 per CPU: samples, min, avg, max, p50, p99, p99.9,\n"
                "                         violations, missed periods\n"
                "  histogram              the merged latency histogram\n"
                "  events                 violations and other events\n"
                "  traces                 the trace flight recorder's captures of violations,\n"
                "                         each with its culprit\n"
                "  trace ID               one capture: the timer and scheduling parts of the\n"
                "                         latency and what ran on the CPU meanwhile\n"
                "  inventory              what the machine is (DMI, CPUs, kernel command line\n"
                "                         and configuration, tuning) and how it changed in the "
                "run\n"
                "  verdict --server URL RELEASE\n"
                "                         whether a kernel release qualifies as latest stable\n"
                "                         (exit 0 qualified, 1 failed, 2 pending, 3 cannot tell;\n"
                "                         see rtsoak verdict --help)\n"
                "  latest-stable --server URL SERIES\n"
                "                         the newest qualified release of a series (exit 0;\n"
                "                         2 when none has qualified yet)\n\n"
                "Options:\n"
                "  --db PATH              database (default " DEFAULT_DB ")\n"
                "  --json                 JSON for scripts instead of a table\n"
                "  --since TIME           only intervals/events from TIME on\n"
                "  --until TIME           only intervals/events before TIME\n"
                "                         TIME: RFC 3339 (2026-12-03T08:00:00Z), @SECONDS,\n"
                "                         Unix nanoseconds, now, or a span ago (2h, \"2h ago\")\n"
                "  --run ID|last          only one run\n"
                "  --cpu N                only one CPU (report, histogram, events)\n"
                "  --format F             histogram: cyclictest (default), json or csv;\n"
                "                         --json is short for --format json\n"
                "  --limit N              histogram: exact buckets to print, in us;\n"
                "                         events: at most N, the newest\n"
                "  --type T               events: only this type (violation, unclean_end, ...)\n"
                "  --scenario NAME        report, histogram: only intervals of this scenario\n"
                "  --by-scenario          report: one table per scenario, with the throughput\n"
                "                         of each load generator\n"
                "  --raw                  trace: the captured events as text\n"
                "  -h, --help             show this help\n"
                "      --version          show the version\n"
                "\n"
                "Exit status: 0 done, 1 failed (no or damaged database), 64 usage error (also a\n"
                "--run, --cpu, --scenario or --type that the database does not know).\n"
                "verdict and latest-stable answer 0/1/2/3 (see rtsoak verdict --help).\n");
}

static int resolve_run(store *s, const struct args *a, struct store_filter *f) {
        *f = a->filter;
        if (a->run_last) {
                struct store_run run;
                int r = store_get_run(s, 0, &run);
                if (r < 0) {
                        log_error("%s", store_error(s));
                        return r;
                }
                f->run_id = run.id;
                store_run_done(&run);
        }
        return 0;
}

static uint64_t avg_ns(const struct store_cpu_report *c) {
        return c->samples ? (uint64_t) (c->sum_ns / c->samples) : 0;
}

/* One report row over all CPUs, for the "all" line. */
static int report_total(const struct store_cpu_report *rows, size_t n,
                        struct store_cpu_report *ret) {
        uint32_t limit = 1;
        for (size_t i = 0; i < n; i++)
                limit = MAX(limit, rows[i].hist.limit_us);
        *ret = (struct store_cpu_report){ .cpu = -1,
                                          .min_ns = UINT64_MAX,
                                          .max_time_ns = INT64_MIN };
        int r = hist_init(&ret->hist, limit);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const struct store_cpu_report *c = &rows[i];
                ret->intervals += c->intervals;
                ret->samples += c->samples;
                ret->sum_ns += c->sum_ns;
                ret->violations += c->violations;
                ret->missed += c->missed;
                if (c->samples && c->min_ns < ret->min_ns)
                        ret->min_ns = c->min_ns;
                if (c->samples && (c->max_ns > ret->max_ns || ret->max_time_ns == INT64_MIN)) {
                        ret->max_ns = c->max_ns;
                        ret->max_time_ns = c->max_time_ns;
                }
                r = hist_merge(&ret->hist, &c->hist);
                if (r < 0)
                        return r;
        }
        if (ret->samples == 0)
                ret->min_ns = 0;
        return 0;
}

static json_t *report_json_row(const struct store_cpu_report *c) {
        json_t *o = json_object();
        if (c->cpu >= 0)
                json_object_set_new(o, "cpu", json_integer(c->cpu));
        json_object_set_new(o, "samples", json_u64(c->samples));
        json_object_set_new(o, "min_ns", json_u64(c->min_ns));
        json_object_set_new(o, "avg_ns", json_u64(avg_ns(c)));
        json_object_set_new(o, "max_ns", json_u64(c->max_ns));
        json_object_set_new(o, "p50_ns",
                            json_u64(hist_quantile_ns(&c->hist, 1, 2, c->min_ns, c->max_ns)));
        json_object_set_new(o, "p99_ns",
                            json_u64(hist_quantile_ns(&c->hist, 99, 100, c->min_ns, c->max_ns)));
        /* The server's name, p99_9_ns; p999_ns is kept for the scripts written before. */
        uint64_t p999 = hist_quantile_ns(&c->hist, 999, 1000, c->min_ns, c->max_ns);
        json_object_set_new(o, "p99_9_ns", json_u64(p999));
        json_object_set_new(o, "p999_ns", json_u64(p999));
        json_object_set_new(o, "violations", json_u64(c->violations));
        json_object_set_new(o, "missed", json_u64(c->missed));
        json_set_time(o, "max_time_ns", c->samples ? c->max_time_ns : JSON_TIME_NONE);
        json_object_set_new(o, "intervals", json_u64(c->intervals));
        json_set_time(o, "first_ns", c->intervals ? c->first_ns : JSON_TIME_NONE);
        json_set_time(o, "last_ns", c->intervals ? c->last_ns : JSON_TIME_NONE);
        return o;
}

static void report_table_row(const struct store_cpu_report *c) {
        char a[32], b[32], d[32], e[32], f[32], g[32], cpu[16];
        if (c->cpu >= 0)
                snprintf(cpu, sizeof(cpu), "%d", c->cpu);
        else
                snprintf(cpu, sizeof(cpu), "all");
        printf("%4s %14" PRIu64 " %9s %9s %9s %9s %9s %9s %10" PRIu64 " %8" PRIu64 "\n", cpu,
               c->samples, fmt_us(a, c->min_ns), fmt_us(b, avg_ns(c)), fmt_us(d, c->max_ns),
               fmt_us(e, hist_quantile_ns(&c->hist, 1, 2, c->min_ns, c->max_ns)),
               fmt_us(f, hist_quantile_ns(&c->hist, 99, 100, c->min_ns, c->max_ns)),
               fmt_us(g, hist_quantile_ns(&c->hist, 999, 1000, c->min_ns, c->max_ns)),
               c->violations, c->missed);
}

static void report_table_header(void) {
        printf("%4s %14s %9s %9s %9s %9s %9s %9s %10s %8s\n", "CPU", "samples", "min", "avg", "max",
               "p50", "p99", "p99.9", "violations", "missed");
}

/* The table: the header, a row per CPU, and the total when there is more than one CPU. */
static void report_table(const struct store_cpu_report *rows, size_t n,
                         const struct store_cpu_report *total) {
        report_table_header();
        for (size_t i = 0; i < n; i++)
                report_table_row(&rows[i]);
        if (n > 1)
                report_table_row(total);
}

/* The rows into doc as "cpus", then the total as "total". */
static void report_json_cpus(json_t *doc, const struct store_cpu_report *rows, size_t n,
                             const struct store_cpu_report *total) {
        json_t *cpus = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(cpus, report_json_row(&rows[i]));
        json_object_set_new(doc, "cpus", cpus);
        json_object_set_new(doc, "total", report_json_row(total));
}

/* The report of f per CPU (*rows, *n) and over every CPU (*total); the caller frees both,
 * whatever this returns (errors are logged). */
static int load_report(store *s, const struct store_filter *f, struct store_cpu_report **rows,
                       size_t *n, struct store_cpu_report *total) {
        int r = store_report(s, f, rows, n);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        return report_total(*rows, *n, total);
}

static int report_by_scenario(store *s, const struct args *a, struct store_filter *f);

static bool value_is_latency(const char *type) {
        return strcmp(type, "violation") == 0;
}

static int cmd_report(store *s, const struct args *a) {
        struct store_cpu_report *rows = NULL, total = {};
        struct store_filter f;
        size_t n = 0;
        int r;

        r = resolve_run(s, a, &f);
        if (r < 0)
                return r;
        if (a->by_scenario)
                return report_by_scenario(s, a, &f);
        r = load_report(s, &f, &rows, &n, &total);
        if (r < 0)
                goto out;

        if (a->json) {
                json_t *doc = json_object();
                json_object_set_new(doc, "since",
                                    f.since_ns == INT64_MIN ? json_null() : json_time(f.since_ns));
                json_object_set_new(doc, "until",
                                    f.until_ns == INT64_MAX ? json_null() : json_time(f.until_ns));
                json_object_set_new(doc, "run", f.run_id ? json_integer(f.run_id) : json_null());
                report_json_cpus(doc, rows, n, &total);
                r = print_json(doc);
                json_decref(doc);
        } else if (n == 0) {
                printf("No intervals stored in this window.\n");
        } else {
                char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
                int64_t first = INT64_MAX, last = INT64_MIN;
                for (size_t i = 0; i < n; i++) {
                        first = MIN(first, rows[i].first_ns);
                        last = MAX(last, rows[i].last_ns);
                }
                printf("Latency from %s to %s, in microseconds:\n",
                       format_timestamp_local(t1, first), format_timestamp_local(t2, last));
                report_table(rows, n, &total);
                if (total.samples > 0) {
                        char m[32];
                        for (size_t i = 0; i < n; i++)
                                if (rows[i].max_ns == total.max_ns) {
                                        printf("Worst case %s us on CPU %d, due at %s.\n",
                                               fmt_us(m, total.max_ns), rows[i].cpu,
                                               format_timestamp_local(t1, rows[i].max_time_ns));
                                        break;
                                }
                }
        }
out:
        hist_done(&total.hist);
        store_report_free(rows, n);
        return r;
}

static json_t *scenario_loads_json(const struct store_scenario *sc) {
        json_t *loads = json_array(), *cur = NULL;
        int idx = -1;
        for (size_t i = 0; i < sc->nloads; i++) {
                const struct store_load_summary *l = &sc->loads[i];
                if (!cur || l->idx != idx) {
                        idx = l->idx;
                        cur = json_object();
                        json_object_set_new(cur, "index", json_integer(l->idx + 1));
                        json_object_set_new(cur, "generator", json_string(l->generator));
                        json_object_set_new(cur, "intervals", json_u64(l->intervals));
                        json_object_set_new(cur, "up_ns", json_u64(l->up_ns));
                        json_object_set_new(
                                cur, "up_fraction",
                                json_real(l->length_ns ? (double) l->up_ns / (double) l->length_ns
                                                       : 0.0));
                        json_object_set_new(cur, "starts", json_u64(l->starts));
                        json_object_set_new(cur, "exits", json_u64(l->exits));
                        json_object_set_new(cur, "metrics", json_array());
                        json_array_append_new(loads, cur);
                }
                if (l->metric)
                        json_array_append_new(json_object_get(cur, "metrics"),
                                              json_pack("{s:s, s:s, s:f}", "name", l->metric,
                                                        "unit", l->unit, "avg", l->avg));
        }
        return loads;
}

static void scenario_loads_table(const struct store_scenario *sc) {
        int idx = -1;
        char rate[64];
        if (sc->nloads == 0) {
                printf("Loads: none\n");
                return;
        }
        printf("Loads (average throughput while the scenario ran):\n");
        for (size_t i = 0; i < sc->nloads; i++) {
                const struct store_load_summary *l = &sc->loads[i];
                if (l->idx != idx) {
                        idx = l->idx;
                        double share = l->length_ns
                                               ? 100.0 * (double) l->up_ns / (double) l->length_ns
                                               : 0;
                        printf("%s  %-10s #%d  ran %5.1f%% of the time, %" PRIu64 " exit%s:",
                               idx == sc->loads[0].idx ? "" : "\n", l->generator, l->idx + 1, share,
                               l->exits, l->exits == 1 ? "" : "s");
                }
                if (l->metric)
                        printf("  %s %s", l->metric,
                               loadgen_format_rate(rate, sizeof(rate), l->avg, l->unit));
        }
        printf("\n");
}

static int report_by_scenario(store *s, const struct args *a, struct store_filter *f) {
        struct store_scenario *sc = NULL;
        size_t nsc = 0;
        json_t *doc = a->json ? json_array() : NULL;
        int r = store_list_scenarios(s, f, &sc, &nsc);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        if (nsc == 0 && !a->json)
                printf("No intervals stored in this window.\n");
        for (size_t i = 0; i < nsc && r >= 0; i++) {
                struct store_cpu_report *rows = NULL, total = {};
                size_t n = 0;
                struct store_filter g = *f;
                g.scenario = sc[i].name;
                r = load_report(s, &g, &rows, &n, &total);
                if (r >= 0 && a->json) {
                        json_t *o = json_object();
                        json_object_set_new(o, "scenario", json_string(sc[i].name));
                        json_object_set_new(o, "intervals", json_u64(sc[i].intervals));
                        json_object_set_new(o, "length_ns", json_u64(sc[i].length_ns));
                        json_object_set_new(o, "first", json_time(sc[i].first_ns));
                        json_object_set_new(o, "last", json_time(sc[i].last_ns));
                        report_json_cpus(o, rows, n, &total);
                        json_object_set_new(o, "loads", scenario_loads_json(&sc[i]));
                        json_array_append_new(doc, o);
                } else if (r >= 0) {
                        char span[TIMESPAN_MAX_LEN];
                        printf("%sScenario %s: %" PRIu64 " interval%s, %s\n", i ? "\n" : "",
                               *sc[i].name ? sc[i].name : "(none)", sc[i].intervals,
                               sc[i].intervals == 1 ? "" : "s",
                               format_timespan(span,
                                               sc[i].length_ns / NSEC_PER_SEC * NSEC_PER_SEC));
                        report_table(rows, n, &total);
                        scenario_loads_table(&sc[i]);
                }
                hist_done(&total.hist);
                store_report_free(rows, n);
        }
        if (doc && r >= 0) {
                json_t *top = json_pack("{s:o}", "scenarios", doc);
                r = print_json(top);
                json_decref(top);
        } else if (doc)
                json_decref(doc);
        store_scenarios_free(sc, nsc);
        return r;
}

static json_t *opt_time(int64_t t) {
        return t == INT64_MIN ? json_null() : json_time(t);
}

/* The upload outbox: null when nothing was ever queued (no [Upload] Server=). */
static json_t *upload_json(store *s) {
        struct store_upload_status st = {};
        if (store_get_upload_status(s, &st) < 0)
                return json_null();
        json_t *o = json_null();
        if (st.pending + st.sent + st.rejected > 0) {
                o = json_object();
                json_object_set_new(o, "pending", json_u64(st.pending));
                json_object_set_new(o, "sent", json_u64(st.sent));
                json_object_set_new(o, "rejected", json_u64(st.rejected));
                json_object_set_new(o, "oldest_pending", opt_time(st.oldest_pending_ns));
                json_object_set_new(o, "last_success", opt_time(st.last_success_ns));
                json_object_set_new(o, "last_error_time", opt_time(st.last_error_ns));
                json_object_set_new(o, "last_error",
                                    st.last_error ? json_string(st.last_error) : json_null());
                json_object_set_new(o, "last_rejection",
                                    st.last_rejection ? json_string(st.last_rejection)
                                                      : json_null());
        }
        store_upload_status_done(&st);
        return o;
}

static void upload_table(store *s) {
        struct store_upload_status st = {};
        char t[TIMESTAMP_MAX_LEN], span[TIMESPAN_MAX_LEN];
        if (store_get_upload_status(s, &st) < 0 || st.pending + st.sent + st.rejected == 0) {
                store_upload_status_done(&st);
                return;
        }
        printf("\nUpload:   %" PRIu64 " pending", st.pending);
        if (st.oldest_pending_ns != INT64_MIN) {
                int64_t age = now_ns(CLOCK_REALTIME) - st.oldest_pending_ns;
                printf(" (oldest from %s ago)",
                       format_timespan(span,
                                       age > 0 ? (uint64_t) age / NSEC_PER_SEC * NSEC_PER_SEC : 0));
        }
        printf(", %" PRIu64 " sent, %" PRIu64 " refused by the server\n", st.sent, st.rejected);
        if (st.last_success_ns != INT64_MIN)
                printf("  Last success: %s\n", format_timestamp_local(t, st.last_success_ns));
        if (st.last_error_ns != INT64_MIN)
                printf("  Last error:   %s: %s\n", format_timestamp_local(t, st.last_error_ns),
                       cli_text(st.last_error));
        if (st.last_rejection)
                printf("  Last refusal: %s\n", cli_text(st.last_rejection));
        store_upload_status_done(&st);
}

static const char *state_of(const char *db, const struct store_run *run) {
        if (!run->end_reason)
                return store_writer_active(db) ? "running" : "not running, did not end cleanly";
        if (strcmp(run->end_reason, "clean") == 0)
                return "ended cleanly";
        if (strcmp(run->end_reason, "unclean") == 0)
                return "ended uncleanly (found at the next start)";
        return "ended with an error";
}

/* How the run before run_id ended, the first thing to know after a crash: 0 with ret, 1 when
 * run_id is the first, < 0 (logged) when it cannot be read. */
static int previous_run(store *s, int64_t run_id, struct store_run_end *ret) {
        int r = store_get_previous_run_end(s, run_id, ret);
        if (r == -ENOENT)
                return 1;
        if (r < 0)
                log_error("%s", store_error(s));
        return r;
}

static json_t *previous_json(const struct store_run_end *p) {
        return json_pack("{s:I, s:o, s:o, s:o}", "run", (json_int_t) p->id, "end_reason",
                         p->end_reason ? json_string(p->end_reason) : json_null(), "end",
                         p->end_ns == INT64_MIN ? json_null() : json_time(p->end_ns), "end_message",
                         p->end_message ? json_string(p->end_message) : json_null());
}

/* One line (two for an unclean end, with where its forensics are).  A run's start records
 * how the run before it ended, so the previous run always has its end. */
static void previous_print(const struct store_run_end *p) {
        char t[TIMESTAMP_MAX_LEN];
        const char *why = p->end_reason ?: "none recorded";
        if (strcmp(why, "unclean") == 0)
                printf("  Previous: %s\n            (found at this run's start; rtsoak events "
                       "--type unclean_end --run %" PRId64 " shows what the kernel left)\n",
                       cli_text(p->end_message ?: "it did not end cleanly"), p->id);
        else if (strcmp(why, "clean") == 0 && p->end_ns != INT64_MIN)
                printf("  Previous: run %" PRId64 " ended cleanly at %s\n", p->id,
                       format_timestamp_local(t, p->end_ns));
        else
                printf("  Previous: run %" PRId64 ", end: %s%s%s\n", p->id, why,
                       p->end_message ? ": " : "", cli_text(p->end_message ?: ""));
}

static int cmd_status(store *s, const struct args *a) {
        _cleanup_(store_run_done) struct store_run run = {};
        _cleanup_(store_run_end_done) struct store_run_end prev = {};
        struct store_cpu_report *rows = NULL, total = {};
        struct store_filter f = STORE_FILTER_ALL;
        char sp1[TIMESPAN_MAX_LEN], sp2[TIMESPAN_MAX_LEN], sp3[TIMESPAN_MAX_LEN];
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        size_t n = 0;
        int r;

        r = store_get_run(s, a->filter.run_id, &run);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        int has_prev = previous_run(s, run.id, &prev);
        if (has_prev < 0)
                return has_prev;
        f.run_id = run.id;
        r = load_report(s, &f, &rows, &n, &total);
        if (r < 0)
                goto out;
        const char *state = state_of(a->db, &run);

        if (a->json) {
                json_t *doc = json_object();
                json_object_set_new(doc, "run", json_integer(run.id));
                json_object_set_new(doc, "state", json_string(state));
                json_object_set_new(doc, "running",
                                    json_boolean(!run.end_reason && store_writer_active(a->db)));
                json_object_set_new(doc, "end_reason",
                                    run.end_reason ? json_string(run.end_reason) : json_null());
                json_object_set_new(doc, "previous",
                                    has_prev == 0 ? previous_json(&prev) : json_null());
                json_object_set_new(doc, "machine_id", json_string(run.machine_id));
                json_object_set_new(doc, "boot_id", json_string(run.boot_id));
                json_object_set_new(doc, "hostname", json_string(run.hostname));
                json_object_set_new(doc, "kernel_release", json_string(run.kernel_release));
                json_object_set_new(doc, "kernel_version", json_string(run.kernel_version));
                json_object_set_new(doc, "preempt_model", json_string(run.preempt_model));
                json_object_set_new(doc, "config_digest", json_string(run.config_digest));
                json_object_set_new(doc, "cpus_probed", json_string(run.cpus));
                json_object_set_new(doc, "priority", json_u64(run.priority));
                json_object_set_new(doc, "probe_interval_ns", json_u64(run.probe_interval_ns));
                json_object_set_new(doc, "interval_ns", json_u64(run.interval_ns));
                json_object_set_new(doc, "threshold_ns", json_u64(run.threshold_ns));
                json_object_set_new(doc, "start", json_time(run.start_ns));
                json_object_set_new(doc, "last_seen",
                                    run.last_seen_ns == INT64_MIN ? json_null()
                                                                  : json_time(run.last_seen_ns));
                json_object_set_new(doc, "end",
                                    run.end_ns == INT64_MIN ? json_null() : json_time(run.end_ns));
                report_json_cpus(doc, rows, n, &total);
                json_object_set_new(doc, "upload", upload_json(s));
                json_object_set_new(doc, "trace",
                                    cli_trace_status_json(s, run.id, total.violations));
                json_object_set_new(doc, "inventory", cli_inventory_status_json(s, run.id));
                r = print_json(doc);
                json_decref(doc);
                goto out;
        }

        printf("Run %" PRId64 ": %s\n", run.id, state);
        if (has_prev == 0)
                previous_print(&prev);
        printf("  Machine:  %s (%s), boot %s\n", cli_text(run.hostname), run.machine_id,
               run.boot_id);
        printf("  Kernel:   %s %s, %s\n", cli_text(run.kernel_release),
               cli_text(run.kernel_version), cli_text(run.preempt_model));
        printf("  Probing:  CPUs %s at SCHED_FIFO %" PRIu64 ", every %s, threshold %s, "
               "intervals of %s\n",
               run.cpus, run.priority, format_timespan(sp1, run.probe_interval_ns),
               format_timespan(sp2, run.threshold_ns), format_timespan(sp3, run.interval_ns));
        printf("  Started:  %s\n", format_timestamp_local(t1, run.start_ns));
        if (run.last_seen_ns != INT64_MIN)
                printf("  Data to:  %s\n", format_timestamp_local(t1, run.last_seen_ns));
        if (run.end_ns != INT64_MIN)
                printf("  Ended:    %s (%s)\n", format_timestamp_local(t2, run.end_ns),
                       run.end_reason);
        cli_trace_status_print(s, run.id, total.violations);
        cli_inventory_status_print(s, run.id);
        if (n == 0)
                printf("\nNo interval stored yet (the first closes at the next interval "
                       "boundary).\n");
        else {
                printf("\nWorst cases so far, in microseconds:\n");
                report_table(rows, n, &total);
        }
        upload_table(s);
out:
        hist_done(&total.hist);
        store_report_free(rows, n);
        return r;
}

/* The block cyclictest -h prints: one line per microsecond below limit with a column per
 * thread (here per CPU), then the summary lines. */
static void histogram_cyclictest(const struct store_cpu_report *rows, size_t n, uint32_t limit) {
        printf("# Histogram\n");
        for (uint32_t us = 0; us < limit; us++) {
                printf("%06u", us);
                for (size_t i = 0; i < n; i++)
                        printf("%s%06" PRIu64, i == 0 ? " " : "\t", rows[i].hist.counts[us]);
                printf("\n");
        }
        printf("# Total:");
        for (size_t i = 0; i < n; i++)
                printf(" %09" PRIu64, rows[i].samples - hist_overflows(&rows[i].hist, limit));
        printf("\n# Min Latencies:");
        for (size_t i = 0; i < n; i++)
                printf(" %05" PRIu64, rows[i].min_ns / 1000);
        printf("\n# Avg Latencies:");
        for (size_t i = 0; i < n; i++)
                printf(" %05" PRIu64, avg_ns(&rows[i]) / 1000);
        printf("\n# Max Latencies:");
        for (size_t i = 0; i < n; i++)
                printf(" %05" PRIu64, rows[i].max_ns / 1000);
        printf("\n# Histogram Overflows:");
        for (size_t i = 0; i < n; i++)
                printf(" %05" PRIu64, hist_overflows(&rows[i].hist, limit));
        printf("\n");
}

/* Every bucket that holds a sample, with its edges. */
static void histogram_csv(const struct store_cpu_report *rows, size_t n) {
        printf("cpu,lower_ns,upper_ns,count\n");
        for (size_t i = 0; i < n; i++)
                for (uint32_t b = 0; b < rows[i].hist.nbuckets; b++) {
                        uint64_t c = rows[i].hist.counts[b];
                        if (!c)
                                continue;
                        uint64_t up = hist_bucket_upper_ns(rows[i].hist.limit_us, b);
                        printf("%d,%" PRIu64 ",", rows[i].cpu,
                               hist_bucket_lower_ns(rows[i].hist.limit_us, b));
                        if (up != UINT64_MAX)
                                printf("%" PRIu64, up);
                        printf(",%" PRIu64 "\n", c);
                }
}

/* A CPU's report with its histogram, as the server names them: limit_us, overflow (samples at
 * or above it), buckets ([us, count] of the exact 1 us buckets below it); and every bucket
 * with its edges, the logarithmic ones too. */
static json_t *histogram_json_cpu(const struct store_cpu_report *row) {
        json_t *o = report_json_row(row), *buckets = json_array(), *all = json_array();
        uint32_t limit = row->hist.limit_us;
        uint64_t overflow = hist_overflows(&row->hist, limit);
        json_object_set_new(o, "limit_us", json_integer(limit));
        json_object_set_new(o, "limit_ns", json_u64((uint64_t) limit * 1000));
        json_object_set_new(o, "overflow", json_u64(overflow));
        json_object_set_new(o, "overflows", json_u64(overflow));
        for (uint32_t b = 0; b < row->hist.nbuckets; b++) {
                uint64_t c = row->hist.counts[b];
                if (!c)
                        continue;
                uint64_t up = hist_bucket_upper_ns(limit, b);
                if (b < limit)
                        json_array_append_new(buckets,
                                              json_pack("[I, I]", (json_int_t) b, (json_int_t) c));
                json_t *e = json_object();
                json_object_set_new(e, "lower_ns", json_u64(hist_bucket_lower_ns(limit, b)));
                json_object_set_new(e, "upper_ns", up == UINT64_MAX ? json_null() : json_u64(up));
                json_object_set_new(e, "count", json_u64(c));
                json_array_append_new(all, e);
        }
        json_object_set_new(o, "buckets", buckets);
        json_object_set_new(o, "all_buckets", all);
        return o;
}

static int histogram_json(const struct store_cpu_report *rows, size_t n) {
        json_t *doc = json_object(), *cpus = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(cpus, histogram_json_cpu(&rows[i]));
        json_object_set_new(doc, "cpus", cpus);
        int r = print_json(doc);
        json_decref(doc);
        return r;
}

/* The exact range cyclictest's format shows: the stored histograms' (the first CPU's, as
 * merged), or --limit within it; -EINVAL (logged) for a --limit outside it. */
static int cyclictest_limit(const struct args *a, const struct store_cpu_report *rows, size_t n,
                            uint32_t *ret) {
        uint32_t limit = n > 0 ? rows[0].hist.limit_us : 0;
        if (a->have_limit) {
                if (a->limit == 0 || a->limit > limit) {
                        log_error("--limit %" PRIu64 ": must be between 1 and %u, the "
                                  "exact range of the stored histograms (us)",
                                  a->limit, limit);
                        return -EINVAL;
                }
                limit = (uint32_t) a->limit;
        }
        *ret = limit;
        return 0;
}

static int cmd_histogram(store *s, const struct args *a) {
        struct store_cpu_report *rows = NULL;
        struct store_filter f;
        const char *format = a->format ?: a->json ? "json" : "cyclictest";
        size_t n = 0;
        int r;

        if (a->json && strcmp(format, "json") != 0) {
                log_error("--json and --format %s contradict each other", format);
                return -EINVAL;
        }
        if (a->have_limit && strcmp(format, "cyclictest") != 0) {
                log_error("--limit applies to --format cyclictest only");
                return -EINVAL;
        }
        r = resolve_run(s, a, &f);
        if (r < 0)
                return r;
        if (a->by_scenario)
                return report_by_scenario(s, a, &f);
        r = store_report(s, &f, &rows, &n);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }

        if (strcmp(format, "cyclictest") == 0) {
                uint32_t limit;
                r = cyclictest_limit(a, rows, n, &limit);
                if (r >= 0)
                        histogram_cyclictest(rows, n, limit);
        } else if (strcmp(format, "csv") == 0)
                histogram_csv(rows, n);
        else
                r = histogram_json(rows, n);
        store_report_free(rows, n);
        return r;
}

static int64_t jint(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return json_is_integer(v) ? (int64_t) json_integer_value(v) : -1;
}

static const char *jstr(json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key)) ?: "?";
}

/* The lines of text t, the last max of them, each indented. */
static void print_tail(const char *t, size_t max) {
        size_t lines = 0;
        for (const char *p = t; *p; p++)
                lines += *p == '\n' || !p[1];
        for (const char *p = t; *p; lines--) {
                size_t len = strcspn(p, "\n");
                if (lines <= max)
                        printf("      %s\n", cli_text(strndupa(p, len)));
                p += len + (p[len] == '\n');
        }
}

/* The forensic details of an event (an unclean end), readably, below its line. */
static void print_details(const char *text) {
        json_t *d = json_loads(text, 0, NULL), *x;
        char t[TIMESTAMP_MAX_LEN], span[TIMESPAN_MAX_LEN], us[32];
        size_t i;
        if (!json_is_object(d)) {
                printf("    details: %s\n", cli_text(text));
                json_decref(d);
                return;
        }
        if (!json_object_get(d, "boot_id")) {
                /* Not an unclean end: the details as they are. */
                printf("    details: %s\n", cli_text(text));
                json_decref(d);
                return;
        }
        printf("    boot %s (now %s, %s)", jstr(d, "boot_id"), jstr(d, "current_boot_id"),
               json_is_true(json_object_get(d, "rebooted")) ? "rebooted since" : "same boot");
        if (jint(d, "uptime_ns") >= 0)
                printf(", up %s at the last data",
                       format_timespan(span, (uint64_t) jint(d, "uptime_ns") / NSEC_PER_SEC *
                                                     NSEC_PER_SEC));
        printf("\n");
        json_t *li = json_object_get(d, "last_interval");
        if (json_is_object(li)) {
                printf("    last interval %" PRId64 " from %s, %s, scenario %s\n", jint(li, "seq"),
                       format_timestamp_local(t, jint(li, "start_ns")),
                       format_timespan(span, (uint64_t) MAX(jint(li, "length_ns"), 0)),
                       json_is_string(json_object_get(li, "scenario")) ? jstr(li, "scenario")
                                                                       : "none");
                json_array_foreach (json_object_get(li, "cpus"), i, x) {
                        fmt_us(us, (uint64_t) MAX(jint(x, "max_ns"), 0));
                        printf("      CPU %3" PRId64 ": max %s us, %" PRId64 " samples, %" PRId64
                               " violations\n",
                               jint(x, "cpu"), us, jint(x, "samples"), jint(x, "violations"));
                }
                json_array_foreach (json_object_get(li, "loads"), i, x) {
                        size_t k;
                        json_t *m;
                        printf("      load %s:", jstr(x, "generator"));
                        json_array_foreach (json_object_get(x, "metrics"), k, m)
                                printf(" %s %.6g %s", jstr(m, "name"),
                                       json_number_value(json_object_get(m, "value")),
                                       jstr(m, "unit"));
                        printf("\n");
                }
        }
        json_array_foreach (json_object_get(d, "run_max"), i, x) {
                fmt_us(us, (uint64_t) MAX(jint(x, "max_ns"), 0));
                printf("    run worst CPU %" PRId64 ": %s us over %" PRId64 " intervals\n",
                       jint(x, "cpu"), us, jint(x, "intervals"));
        }
        json_t *k = json_object_get(d, "kernel");
        if (json_is_string(k))
                printf("    kernel: %s\n", cli_text(json_string_value(k)));
        json_t *ps = json_object_get(k, "pstore");
        if (json_is_string(ps))
                printf("    pstore: %s\n", cli_text(json_string_value(ps)));
        json_array_foreach (ps, i, x) {
                printf("    pstore %s (%" PRId64 " bytes%s):\n", jstr(x, "name"), jint(x, "size"),
                       json_is_true(json_object_get(x, "truncated")) ? ", tail shown" : "");
                print_tail(jstr(x, "text"), 20);
        }
        json_t *j = json_object_get(k, "journal");
        if (json_is_string(j))
                printf("    journal: %s\n", cli_text(json_string_value(j)));
        else if (json_is_object(j)) {
                json_t *lines = json_object_get(j, "lines");
                printf("    journal of that boot, last %zu lines:\n", json_array_size(lines));
                json_array_foreach (lines, i, x)
                        if (json_array_size(lines) - i <= 20)
                                printf("      %s\n", cli_text(json_string_value(x)));
        }
        json_decref(d);
}

static int cmd_events(store *s, const struct args *a) {
        struct store_event_row *ev = NULL;
        struct store_filter f;
        size_t n = 0;
        int r;

        r = resolve_run(s, a, &f);
        if (r < 0)
                return r;
        r = store_list_events(s, &f, a->type, a->have_limit ? (size_t) a->limit : 0, &ev, &n);
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        if (a->json) {
                json_t *doc = json_object(), *arr = json_array();
                for (size_t i = 0; i < n; i++) {
                        json_t *o = json_object();
                        json_object_set_new(o, "id", json_integer(ev[i].id));
                        json_object_set_new(o, "run", json_integer(ev[i].run_id));
                        json_object_set_new(o, "time", json_time(ev[i].time_ns));
                        json_object_set_new(o, "time_ns", json_integer(ev[i].time_ns));
                        json_object_set_new(o, "type", json_string(ev[i].type));
                        json_object_set_new(o, "cpu",
                                            ev[i].cpu >= 0 ? json_integer(ev[i].cpu) : json_null());
                        /* Latencies are nanoseconds; other events carry a plain number (an exit
                         * status, a count, free bytes). */
                        bool ns = value_is_latency(ev[i].type);
                        json_object_set_new(o, "value_ns",
                                            ns && ev[i].value_ns >= 0 ? json_integer(ev[i].value_ns)
                                                                      : json_null());
                        json_object_set_new(o, "value",
                                            ev[i].value_ns >= 0 ? json_integer(ev[i].value_ns)
                                                                : json_null());
                        json_object_set_new(o, "message", json_string(ev[i].message));
                        if (ev[i].details)
                                json_object_set_new(o, "details",
                                                    json_loads(ev[i].details, 0, NULL)
                                                            ?: json_null());
                        json_array_append_new(arr, o);
                }
                json_object_set_new(doc, "events", arr);
                r = print_json(doc);
                json_decref(doc);
        } else if (n == 0) {
                printf("No events in this window.\n");
        } else {
                printf("%-23s %5s %-22s %4s %12s  %s\n", "TIME", "RUN", "TYPE", "CPU", "VALUE",
                       "MESSAGE");
                for (size_t i = 0; i < n; i++) {
                        char t[TIMESTAMP_MAX_LEN], v[32] = "-", c[16] = "-";
                        if (ev[i].value_ns >= 0 && value_is_latency(ev[i].type)) {
                                fmt_us(v, (uint64_t) ev[i].value_ns);
                                strcat(v, " us");
                        } else if (ev[i].value_ns >= 0)
                                snprintf(v, sizeof(v), "%" PRId64, ev[i].value_ns);
                        if (ev[i].cpu >= 0)
                                snprintf(c, sizeof(c), "%d", ev[i].cpu);
                        printf("%-23s %5" PRId64 " %-22s %4s %12s  %s\n",
                               format_timestamp_local(t, ev[i].time_ns), ev[i].run_id, ev[i].type,
                               c, v, cli_text(ev[i].message));
                        if (ev[i].details)
                                print_details(ev[i].details);
                }
        }
        store_events_free(ev, n);
        return r;
}

static int cmd_traces(store *s, const struct args *a) {
        struct store_filter f;
        int r = resolve_run(s, a, &f);
        if (r < 0)
                return r;
        return cli_traces(s, &f, a->have_limit ? (size_t) a->limit : 0, a->json);
}

static int cmd_trace(store *s, const struct args *a) {
        return cli_trace(s, a->id, a->raw, a->json);
}

static int cmd_inventory(store *s, const struct args *a) {
        struct store_filter f;
        int r = resolve_run(s, a, &f);
        return r < 0 ? r : cli_inventory(s, f.run_id, a->json);
}

static const struct command commands[] = {
        { "status", OPT_RUN | OPT_JSON, cmd_status },
        { "report",
          OPT_SINCE | OPT_UNTIL | OPT_RUN | OPT_CPU | OPT_JSON | OPT_SCENARIO | OPT_BY_SCENARIO,
          cmd_report },
        { "histogram",
          OPT_SINCE | OPT_UNTIL | OPT_RUN | OPT_CPU | OPT_FORMAT | OPT_LIMIT | OPT_JSON |
                  OPT_SCENARIO,
          cmd_histogram },
        { "events", OPT_SINCE | OPT_UNTIL | OPT_RUN | OPT_CPU | OPT_TYPE | OPT_LIMIT | OPT_JSON,
          cmd_events },
        { "traces", OPT_SINCE | OPT_UNTIL | OPT_RUN | OPT_CPU | OPT_LIMIT | OPT_JSON, cmd_traces },
        { "trace", OPT_RAW | OPT_JSON, cmd_trace },
        { "inventory", OPT_RUN | OPT_JSON, cmd_inventory },
};

static const struct command *find_command(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, name) == 0)
                        return &commands[i];
        return NULL;
}

static const char *const option_names[] = { "--since",    "--until",       "--run",   "--cpu",
                                            "--format",   "--type",        "--limit", "--json",
                                            "--scenario", "--by-scenario", "--raw" };

static int parse_uint_arg(const char *opt, const char *v, uint64_t max, uint64_t *ret) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *v == '-' || *end || errno == ERANGE || x > max) {
                log_error("%s %s: expected a whole number from 0 to %" PRIu64, opt, v, max);
                return -EINVAL;
        }
        *ret = x;
        return 0;
}

enum {
        ARG_DB = 0x100,
        ARG_JSON,
        ARG_SINCE,
        ARG_UNTIL,
        ARG_RUN,
        ARG_CPU,
        ARG_FORMAT,
        ARG_TYPE,
        ARG_LIMIT,
        ARG_SCENARIO,
        ARG_BY_SCENARIO,
        ARG_RAW,
        ARG_VERSION
};

/* --since or --until (c): -1 to go on, else the exit status. */
static int take_time(int c, const char *arg, int64_t now, struct args *a) {
        const char *reason;
        int64_t t;
        if (parse_timestamp(arg, now, &t, &reason) < 0) {
                log_error("%s %s: %s", c == ARG_SINCE ? "--since" : "--until", arg, reason);
                return EXIT_USAGE;
        }
        if (c == ARG_SINCE) {
                a->filter.since_ns = t;
                a->given |= OPT_SINCE;
        } else {
                a->filter.until_ns = t;
                a->given |= OPT_UNTIL;
        }
        return -1;
}

/* --run: last, or a run's id. */
static int take_run(const char *arg, struct args *a) {
        uint64_t v;
        a->given |= OPT_RUN;
        if (strcmp(arg, "last") == 0) {
                a->run_last = true;
                return -1;
        }
        if (parse_uint_arg("--run", arg, INT64_MAX, &v) < 0)
                return EXIT_USAGE;
        if (v == 0) {
                log_error("--run %s: run ids start at 1", arg);
                return EXIT_USAGE;
        }
        a->filter.run_id = (int64_t) v;
        return -1;
}

/* One of the options that select or shape what a command shows, with its value (arg) into
 * *a: -1 to go on, else the exit status. */
static int take_option(int c, const char *arg, int64_t now, struct args *a) {
        uint64_t v;
        switch (c) {
        case ARG_SINCE:
        case ARG_UNTIL:
                return take_time(c, arg, now, a);
        case ARG_RUN:
                return take_run(arg, a);
        case ARG_CPU:
                a->given |= OPT_CPU;
                if (parse_uint_arg("--cpu", arg, 8191, &v) < 0)
                        return EXIT_USAGE;
                a->filter.cpu = (int) v;
                break;
        case ARG_FORMAT:
                a->given |= OPT_FORMAT;
                a->format = arg;
                break;
        case ARG_TYPE:
                a->given |= OPT_TYPE;
                a->type = arg;
                break;
        case ARG_LIMIT:
                a->given |= OPT_LIMIT;
                if (parse_uint_arg("--limit", arg, UINT32_MAX, &a->limit) < 0)
                        return EXIT_USAGE;
                a->have_limit = true;
                break;
        case ARG_SCENARIO:
                a->given |= OPT_SCENARIO;
                a->filter.scenario = arg;
                break;
        case ARG_BY_SCENARIO:
                a->given |= OPT_BY_SCENARIO;
                a->by_scenario = true;
                break;
        case ARG_RAW:
                a->given |= OPT_RAW;
                a->raw = true;
                break;
        }
        return -1;
}

/* The options before the command into *a; -1 to go on, else the exit status. */
static int parse_options(int argc, char *argv[], int64_t now, struct args *a) {
        static const struct option options[] = {
                { "db", required_argument, NULL, ARG_DB },
                { "json", no_argument, NULL, ARG_JSON },
                { "since", required_argument, NULL, ARG_SINCE },
                { "until", required_argument, NULL, ARG_UNTIL },
                { "run", required_argument, NULL, ARG_RUN },
                { "cpu", required_argument, NULL, ARG_CPU },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "type", required_argument, NULL, ARG_TYPE },
                { "limit", required_argument, NULL, ARG_LIMIT },
                { "scenario", required_argument, NULL, ARG_SCENARIO },
                { "by-scenario", no_argument, NULL, ARG_BY_SCENARIO },
                { "raw", no_argument, NULL, ARG_RAW },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c, status;

        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_DB:
                        a->db = optarg;
                        break;
                case ARG_JSON:
                        a->json = true;
                        a->given |= OPT_JSON;
                        break;
                case ARG_SINCE ... ARG_RAW:
                        if ((status = take_option(c, optarg, now, a)) >= 0)
                                return status;
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("rtsoak %s\n", PROJECT_VERSION);
                        return EXIT_SUCCESS;
                default:
                        log_getopt_error(c, argv);
                        return EXIT_USAGE;
                }

        return -1;
}

/* The command and its operand (trace's ID) into *a; -1 to go on, else the exit status. */
static int parse_operands(int argc, char *argv[], struct args *a) {
        uint64_t v;

        if (optind >= argc) {
                usage(stderr);
                return EXIT_USAGE;
        }
        a->command = argv[optind];
        /* trace takes the capture's ID; the other commands take no argument. */
        if (strcmp(a->command, "trace") == 0) {
                if (optind + 1 >= argc) {
                        log_error("trace: which capture? (rtsoak trace ID; rtsoak traces lists "
                                  "them)");
                        return EXIT_USAGE;
                }
                if (parse_uint_arg("trace", argv[optind + 1], INT64_MAX, &v) < 0)
                        return EXIT_USAGE;
                if (v == 0) {
                        log_error("trace %s: capture IDs start at 1", argv[optind + 1]);
                        return EXIT_USAGE;
                }
                a->id = (int64_t) v;
                optind++;
        }
        if (optind + 1 < argc) {
                log_error("Unexpected argument '%s' (see --help)", argv[optind + 1]);
                return EXIT_USAGE;
        }
        return -1;
}

/* Options that do not fit the command or each other; -1 when they do, else the exit
 * status. */
static int check_options(const struct args *a, const struct command *cmd) {
        for (size_t i = 0; i < ELEMENTSOF(option_names); i++)
                if ((a->given & (1u << i)) && !(cmd->allowed & (1u << i))) {
                        log_error("%s does not apply to '%s' (see --help)", option_names[i],
                                  cmd->name);
                        return EXIT_USAGE;
                }
        if (a->by_scenario && (a->given & OPT_SCENARIO)) {
                log_error("--by-scenario and --scenario exclude each other");
                return EXIT_USAGE;
        }
        if (a->raw && a->json) {
                log_error("--raw and --json exclude each other");
                return EXIT_USAGE;
        }
        if (a->filter.since_ns != INT64_MIN && a->filter.until_ns != INT64_MAX &&
            a->filter.since_ns >= a->filter.until_ns) {
                log_error("--since must be before --until");
                return EXIT_USAGE;
        }

        if (a->format && strcmp(a->format, "cyclictest") != 0 && strcmp(a->format, "json") != 0 &&
            strcmp(a->format, "csv") != 0) {
                log_error("--format %s: unknown format (use cyclictest, json or csv)", a->format);
                return EXIT_USAGE;
        }
        return -1;
}

int main(int argc, char *argv[]) {
        struct args a = { .db = DEFAULT_DB, .filter = STORE_FILTER_ALL };
        _cleanup_(store_closep) store *s = NULL;
        char err[STORE_ERROR_MAX];
        int r;

        log_set_program("rtsoak");
        /* verdict asks a farm server, not the local database: it has options of its own. */
        if (argc > 1 && strcmp(argv[1], "verdict") == 0)
                return cli_verdict(argc - 1, argv + 1);
        if (argc > 1 && strcmp(argv[1], "latest-stable") == 0)
                return cli_latest_stable(argc - 1, argv + 1);
        /* They come first: after --db they would be taken for an unknown command. */
        static const char *const valued[] = { "--db",   "--since", "--until",
                                              "--run",  "--cpu",   "--format",
                                              "--type", "--limit", "--scenario" };
        for (int i = 2; i < argc; i++) {
                bool value = false;
                for (size_t k = 0; k < ELEMENTSOF(valued); k++)
                        value |= strcmp(argv[i - 1], valued[k]) == 0;
                if (value || strcmp(argv[i], "--") == 0)
                        continue;
                if (strcmp(argv[i], "verdict") == 0 || strcmp(argv[i], "latest-stable") == 0) {
                        log_error("%s asks a farm server, not a local database: rtsoak %s "
                                  "--server URL ... (its options after the command, no --db)",
                                  argv[i], argv[i]);
                        return EXIT_USAGE;
                }
        }
        int status = parse_options(argc, argv, now_ns(CLOCK_REALTIME), &a);
        if (status < 0)
                status = parse_operands(argc, argv, &a);
        if (status >= 0)
                return status;
        const struct command *cmd = find_command(a.command);
        if (!cmd) {
                log_error("Unknown command '%s' (use status, report, histogram, events, traces "
                          "or trace)",
                          a.command);
                return EXIT_USAGE;
        }
        if ((status = check_options(&a, cmd)) >= 0)
                return status;

        r = store_open(a.db, STORE_READONLY, &s, err);
        if (r < 0) {
                log_error("%s", err);
                return EXIT_FAILURE;
        }
        /* A filter that names nothing the database knows is a mistake, not an empty answer. */
        r = cli_check_filters(s, &a.filter, a.type);
        if (r < 0)
                return r == -ENOENT ? EXIT_USAGE : EXIT_FAILURE;
        r = cmd->run(s, &a);
        /* A capture ID the database does not know is a usage error, as a --run it does not
         * know is. */
        if (r == -ENOENT && cmd->run == cmd_trace)
                return EXIT_USAGE;
        /* An option that does not fit the data (--limit past the histograms' range). */
        if (r == -EINVAL)
                return EXIT_USAGE;
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
