/* SPDX-License-Identifier: MIT */
/* The forensics of a run that did not end cleanly: what the database knows about its last
 * moments, with what the kernel left, as the details of its unclean_end event. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "strbuf.h"
#include "timeutil.h"

/* Many CPUs would not fit the details: the worst ones are listed, the rest counted. */
#define FORENSICS_CPUS_MAX 256

static json_t *col_json_text(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? json_string((const char *) t) : json_null();
}

static int last_interval_loads(store *s, int64_t interval_id, json_t *loads) {
        _cleanup_stmt_ sqlite3_stmt *ld = NULL, *m = NULL;
        int rc, r;

        r = store_prepare(s,
                          "SELECT idx, generator, up_ns, starts, exits FROM interval_loads "
                          "WHERE interval_id = ? ORDER BY idx",
                          &ld);
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "SELECT metric, unit, value FROM interval_load_metrics "
                          "WHERE interval_id = ? AND idx = ? ORDER BY metric",
                          &m);
        if (r < 0)
                return r;
        sqlite3_bind_int64(ld, 1, interval_id);
        while ((rc = sqlite3_step(ld)) == SQLITE_ROW) {
                json_t *l = json_object(), *ms = json_array();
                json_object_set_new(l, "generator", col_json_text(ld, 1));
                json_object_set_new(l, "up_ns", json_integer(sqlite3_column_int64(ld, 2)));
                json_object_set_new(l, "starts", json_integer(sqlite3_column_int64(ld, 3)));
                json_object_set_new(l, "exits", json_integer(sqlite3_column_int64(ld, 4)));
                sqlite3_reset(m);
                sqlite3_bind_int64(m, 1, interval_id);
                sqlite3_bind_int64(m, 2, sqlite3_column_int64(ld, 0));
                while ((rc = sqlite3_step(m)) == SQLITE_ROW) {
                        json_t *x = json_object();
                        json_object_set_new(x, "name", col_json_text(m, 0));
                        json_object_set_new(x, "unit", col_json_text(m, 1));
                        json_object_set_new(x, "value", json_real(sqlite3_column_double(m, 2)));
                        json_array_append_new(ms, x);
                }
                json_object_set_new(l, "metrics", ms);
                json_array_append_new(loads, l);
                if (rc != SQLITE_DONE)
                        return store_fail(s, rc, "cannot read the last interval's throughput");
        }
        return rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot read the last interval's loads");
}

/* The run's last stored interval with each CPU's worst wake-up and the loads then; the short
 * form goes into summary. */
static int last_interval(store *s, int64_t run_id, json_t *doc, char *summary, size_t size) {
        _cleanup_stmt_ sqlite3_stmt *iv = NULL, *cpu = NULL;
        int rc, r;

        r = store_prepare(s,
                          "SELECT id, seq, start_ns, length_ns, scenario FROM intervals "
                          "WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                          &iv);
        if (r < 0)
                return r;
        sqlite3_bind_int64(iv, 1, run_id);
        rc = sqlite3_step(iv);
        if (rc == SQLITE_DONE) {
                json_object_set_new(doc, "last_interval", json_null());
                snprintf(summary, size, "no interval stored");
                return 0;
        }
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, "cannot read the last interval");

        int64_t interval_id = sqlite3_column_int64(iv, 0);
        json_t *li = json_object(), *cpus = json_array(), *loads = json_array();
        json_object_set_new(doc, "last_interval", li);
        json_object_set_new(li, "seq", json_integer(sqlite3_column_int64(iv, 1)));
        json_object_set_new(li, "start_ns", json_integer(sqlite3_column_int64(iv, 2)));
        json_object_set_new(li, "length_ns", json_integer(sqlite3_column_int64(iv, 3)));
        json_object_set_new(li, "scenario", col_json_text(iv, 4));

        r = store_prepare(s,
                          "SELECT cpu, samples, max_ns, max_time_ns, violations, missed, "
                          "CASE WHEN samples > 0 THEN sum_ns / samples ELSE 0 END "
                          "FROM interval_cpus WHERE interval_id = ? ORDER BY max_ns DESC, cpu",
                          &cpu);
        if (r < 0)
                return r;
        sqlite3_bind_int64(cpu, 1, interval_id);
        int64_t worst = -1, worst_cpu = -1, ncpus = 0;
        while ((rc = sqlite3_step(cpu)) == SQLITE_ROW) {
                if (ncpus++ == 0) {
                        worst = sqlite3_column_int64(cpu, 2);
                        worst_cpu = sqlite3_column_int64(cpu, 0);
                }
                if (ncpus > FORENSICS_CPUS_MAX)
                        continue;
                json_t *c = json_object();
                json_object_set_new(c, "cpu", json_integer(sqlite3_column_int64(cpu, 0)));
                json_object_set_new(c, "samples", json_integer(sqlite3_column_int64(cpu, 1)));
                json_object_set_new(c, "avg_ns", json_integer(sqlite3_column_int64(cpu, 6)));
                json_object_set_new(c, "max_ns", json_integer(sqlite3_column_int64(cpu, 2)));
                json_object_set_new(c, "max_time_ns", json_integer(sqlite3_column_int64(cpu, 3)));
                json_object_set_new(c, "violations", json_integer(sqlite3_column_int64(cpu, 4)));
                json_object_set_new(c, "missed", json_integer(sqlite3_column_int64(cpu, 5)));
                json_array_append_new(cpus, c);
        }
        json_object_set_new(li, "cpus", cpus);
        if (ncpus > FORENSICS_CPUS_MAX)
                json_object_set_new(li, "cpus_omitted", json_integer(ncpus - FORENSICS_CPUS_MAX));
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot read the last interval's CPUs");
        json_object_set_new(li, "loads", loads);
        r = last_interval_loads(s, interval_id, loads);
        if (r < 0)
                return r;

        const char *sc = (const char *) sqlite3_column_text(iv, 4);
        int len = snprintf(summary, size, "last interval %lld (scenario %s)",
                           (long long) sqlite3_column_int64(iv, 1), sc ?: "none");
        if (worst >= 0 && len >= 0 && (size_t) len < size)
                snprintf(summary + len, size - (size_t) len, ": worst %.1f us on CPU %lld",
                         (double) worst / 1000.0, (long long) worst_cpu);
        return 0;
}

/* The whole run's worst wake-up per CPU. */
static int run_worst(store *s, int64_t run_id, json_t *doc) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int rc, r = store_prepare(s,
                                  "SELECT c.cpu, max(c.max_ns), count(*) FROM interval_cpus c "
                                  "JOIN intervals i ON i.id = c.interval_id WHERE i.run_id = ? "
                                  "GROUP BY c.cpu ORDER BY c.cpu LIMIT ?",
                                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        sqlite3_bind_int(st, 2, FORENSICS_CPUS_MAX);
        json_t *a = json_array();
        json_object_set_new(doc, "run_max", a);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                json_t *c = json_object();
                json_object_set_new(c, "cpu", json_integer(sqlite3_column_int64(st, 0)));
                json_object_set_new(c, "max_ns", json_integer(sqlite3_column_int64(st, 1)));
                json_object_set_new(c, "intervals", json_integer(sqlite3_column_int64(st, 2)));
                json_array_append_new(a, c);
        }
        return rc == SQLITE_DONE ? 0 : store_fail(s, rc, "cannot read the run's worst case");
}

int store_unclean_details(store *s, const struct store_run_info *now, const struct store_unclean *u,
                          char **ret_details, char *summary, size_t summary_size) {
        _cleanup_stmt_ sqlite3_stmt *run = NULL;
        json_t *doc = json_object();
        char span[TIMESPAN_MAX_LEN];
        int r;

        if (!doc)
                return -ENOMEM;
        summary[0] = 0;
        json_object_set_new(doc, "run", json_integer(u->run_id));
        json_object_set_new(doc, "boot_id", json_string(u->boot_id));
        json_object_set_new(doc, "current_boot_id", json_string(now->boot_id ?: ""));
        json_object_set_new(doc, "rebooted", json_boolean(!u->same_boot));
        json_object_set_new(doc, "last_seen_ns", json_integer(u->last_seen_ns));

        r = last_interval(s, u->run_id, doc, summary, summary_size);
        if (r >= 0)
                r = run_worst(s, u->run_id, doc);
        if (r >= 0)
                r = store_prepare(s, "SELECT boot_ns FROM runs WHERE id = ?", &run);
        if (r < 0)
                goto out;
        sqlite3_bind_int64(run, 1, u->run_id);
        if (sqlite3_step(run) == SQLITE_ROW && sqlite3_column_type(run, 0) != SQLITE_NULL) {
                /* The dead boot was up at least until the run's last data. */
                int64_t boot = sqlite3_column_int64(run, 0);
                json_object_set_new(doc, "boot_ns", json_integer(boot));
                if (u->last_seen_ns > boot) {
                        json_object_set_new(doc, "uptime_ns", json_integer(u->last_seen_ns - boot));
                        strbuf_appendf(summary, summary_size, "; boot up %s at its last data",
                                       format_timespan(span, (uint64_t) (u->last_seen_ns - boot) /
                                                                     NSEC_PER_SEC * NSEC_PER_SEC));
                }
        } else
                json_object_set_new(doc, "boot_ns", json_null());

        if (now->kernel_leftovers) {
                _cleanup_free_ char *text = now->kernel_leftovers(now->userdata, u);
                json_t *k = text ? json_loads(text, 0, NULL) : NULL;
                if (json_is_object(k)) {
                        json_t *p = json_object_get(k, "pstore"),
                               *j = json_object_get(k, "journal");
                        if (json_is_array(p))
                                strbuf_appendf(summary, summary_size, "; pstore: %zu record%s",
                                               json_array_size(p),
                                               json_array_size(p) == 1 ? "" : "s");
                        if (json_is_object(j) && json_is_array(json_object_get(j, "lines")))
                                strbuf_appendf(summary, summary_size, "; journal: %zu lines",
                                               json_array_size(json_object_get(j, "lines")));
                        else if (json_is_string(j))
                                strbuf_appendf(summary, summary_size, "; journal: %s",
                                               json_string_value(j));
                        json_object_set_new(doc, "kernel", k);
                } else
                        json_decref(k);
        }

        char *text = json_dumps(doc, JSON_COMPACT);
        if (text && strlen(text) > STORE_DETAILS_MAX) {
                /* Only what the kernel left can be that large. */
                free(text);
                json_object_set_new(doc, "kernel", json_string("omitted: too large"));
                text = json_dumps(doc, JSON_COMPACT);
        }
        if (!text) {
                r = -ENOMEM;
                goto out;
        }
        if (strlen(text) > STORE_DETAILS_MAX) {
                free(text);
                r = store_failf(s, -E2BIG, "the forensics of run %lld do not fit",
                                (long long) u->run_id);
                goto out;
        }
        *ret_details = text;
        r = 0;
out:
        json_decref(doc);
        return r;
}
