/* SPDX-License-Identifier: MIT */
/* Writing the local database: runs, one transaction per interval with its per-CPU rows and
 * events, and the detection of runs that never ended. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "store-internal.h"
#include "timeutil.h"

static int bind_u64(store *s, sqlite3_stmt *st, int idx, uint64_t v, const char *what) {
        /* SQLite integers are signed 64-bit; nothing we count can get near 2^63 in a
         * lifetime, so a value that large means a bug upstream: refuse it loudly. */
        if (v > INT64_MAX)
                return store_failf(s, -ERANGE, "%s value %" PRIu64 " does not fit the database",
                                   what, v);
        sqlite3_bind_int64(st, idx, (int64_t) v);
        return 0;
}

static int step_done(store *s, sqlite3_stmt *st, const char *what) {
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, what);
        return 0;
}

static void rollback(store *s) {
        if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Starts a write transaction.  Should an earlier ROLLBACK have failed (the connection still
 * inside a transaction), that one is ended first, so one bad moment cannot block every later
 * write. */
static int begin(store *s) {
        rollback(s);
        return store_exec(s, "BEGIN IMMEDIATE");
}

static int insert_event(store *s, int64_t run_id, int64_t interval_id,
                        const struct store_event *ev) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "INSERT INTO events (run_id, interval_id, time_ns, type, cpu, "
                              "value_ns, message, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                              &st);
        if (r < 0)
                return r;
        if (run_id > 0)
                sqlite3_bind_int64(st, 1, run_id);
        if (interval_id > 0)
                sqlite3_bind_int64(st, 2, interval_id);
        sqlite3_bind_int64(st, 3, ev->time_ns);
        sqlite3_bind_text(st, 4, ev->type, -1, SQLITE_STATIC);
        if (ev->cpu >= 0)
                sqlite3_bind_int(st, 5, ev->cpu);
        if (ev->value_ns >= 0)
                sqlite3_bind_int64(st, 6, ev->value_ns);
        sqlite3_bind_text(st, 7, ev->message ?: "", -1, SQLITE_STATIC);
        if (ev->details)
                sqlite3_bind_text(st, 8, ev->details, -1, SQLITE_STATIC);
        return step_done(s, st, "cannot store event");
}

void store_set_outbox(store *s, bool on) {
        s->outbox = on;
}

static int insert_outbox(store *s, int64_t run_id, int64_t interval_id, int64_t event_id,
                         int64_t now_ns) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "INSERT INTO outbox (run_id, interval_id, event_id, created_ns) "
                              "VALUES (?, ?, ?, ?)",
                              &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run_id);
        if (interval_id > 0)
                sqlite3_bind_int64(st, 2, interval_id);
        if (event_id > 0)
                sqlite3_bind_int64(st, 3, event_id);
        sqlite3_bind_int64(st, 4, now_ns);
        return step_done(s, st, "cannot add to the upload outbox");
}

int store_add_event_local(store *s, int64_t run_id, const struct store_event *ev) {
        return insert_event(s, run_id, 0, ev);
}

int store_begin(store *s) {
        return begin(s);
}

void store_rollback(store *s) {
        rollback(s);
}

int store_insert_event(store *s, int64_t run_id, const struct store_event *ev, int64_t *ret_id) {
        int r = insert_event(s, run_id, 0, ev);
        if (r < 0)
                return r;
        *ret_id = sqlite3_last_insert_rowid(s->db);
        return s->outbox && run_id > 0 ? insert_outbox(s, run_id, 0, *ret_id, ev->time_ns) : 0;
}

int store_add_event(store *s, int64_t run_id, const struct store_event *ev) {
        int64_t id;
        if (!s->outbox || run_id <= 0)
                return insert_event(s, run_id, 0, ev);
        /* The event and its outbox row, or neither. */
        int r = begin(s);
        if (r >= 0)
                r = store_insert_event(s, run_id, ev, &id);
        if (r >= 0)
                r = store_exec(s, "COMMIT");
        if (r < 0)
                rollback(s);
        return r;
}

static int insert_outbox(store *s, int64_t run_id, int64_t interval_id, int64_t event_id,
                         int64_t now_ns);

static int mark_unclean_runs(store *s, const struct store_run_info *now, unsigned *ret_count) {
        _cleanup_stmt_ sqlite3_stmt *sel = NULL, *upd = NULL;
        unsigned n = 0;
        int r, rc;

        r = store_prepare(s,
                          "SELECT r.id, r.boot_id, r.start_ns, r.last_seen_ns, r.interval_ns, "
                          "NOT EXISTS (SELECT 1 FROM runs l WHERE l.boot_id = r.boot_id AND "
                          "l.id > r.id) FROM runs r WHERE r.end_reason IS NULL ORDER BY r.id",
                          &sel);
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "UPDATE runs SET end_reason = 'unclean', end_ns = ?, end_message = ? "
                          "WHERE id = ?",
                          &upd);
        if (r < 0)
                return r;

        while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
                int64_t id = sqlite3_column_int64(sel, 0);
                const char *boot = (const char *) sqlite3_column_text(sel, 1);
                int64_t start = sqlite3_column_int64(sel, 2);
                bool seen = sqlite3_column_type(sel, 3) != SQLITE_NULL;
                int64_t last = seen ? sqlite3_column_int64(sel, 3) : start;
                struct store_unclean u = {
                        .run_id = id,
                        .boot_id = boot ?: "",
                        .same_boot = boot && now->boot_id && strcmp(boot, now->boot_id) == 0,
                        .last_of_boot = sqlite3_column_int(sel, 5) != 0,
                        .last_seen_ns = last,
                        .interval_ns = sqlite3_column_int64(sel, 4),
                };
                _cleanup_free_ char *details = NULL;
                char ts[TIMESTAMP_MAX_LEN], msg[1024], summary[512] = "";

                /* What is known about the end goes into the details; a short form of it into
                 * the message, for whoever reads only that. */
                r = store_unclean_details(s, now, &u, &details, summary, sizeof(summary));
                if (r < 0)
                        return r;
                snprintf(msg, sizeof(msg),
                         "run %lld (boot %s) did not end cleanly; its last data is from %s "
                         "(the daemon was killed, crashed, or the machine lost power or reset)%s%s",
                         (long long) id, boot ?: "?", format_timestamp_utc(ts, last),
                         *summary ? "; " : "", summary);

                sqlite3_reset(upd);
                sqlite3_bind_int64(upd, 1, last);
                sqlite3_bind_text(upd, 2, msg, -1, SQLITE_TRANSIENT);
                sqlite3_bind_int64(upd, 3, id);
                r = step_done(s, upd, "cannot mark run as ended uncleanly");
                if (r < 0)
                        return r;

                struct store_event ev = {
                        .time_ns = last,
                        .type = "unclean_end",
                        .cpu = -1,
                        .value_ns = -1,
                        .message = msg,
                        .details = details,
                };
                r = insert_event(s, id, 0, &ev);
                if (r >= 0 && s->outbox)
                        r = insert_outbox(s, id, 0, sqlite3_last_insert_rowid(s->db), ev.time_ns);
                if (r < 0)
                        return r;
                n++;
        }
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot look for unfinished runs");
        *ret_count = n;
        return 0;
}

int store_begin_run(store *s, const struct store_run_info *in, int64_t *ret_run_id,
                    unsigned *ret_unclean) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        unsigned unclean = 0;
        int r;

        r = begin(s);
        if (r < 0)
                return r;
        r = mark_unclean_runs(s, in, &unclean);
        if (r < 0)
                goto fail;

        r = store_prepare(s,
                          "INSERT INTO runs (machine_id, boot_id, hostname, kernel_release, "
                          "kernel_version, kernel_cmdline, preempt_model, daemon_version, "
                          "config_digest, config, cpus, priority, probe_interval_ns, interval_ns, "
                          "threshold_ns, hist_limit_us, start_ns, boot_ns, release) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          &st);
        if (r < 0)
                goto fail;
        const char *texts[] = {
                in->machine_id,     in->boot_id,        in->hostname,      in->kernel_release,
                in->kernel_version, in->kernel_cmdline, in->preempt_model, in->daemon_version,
                in->config_digest,  in->config_text,    in->cpus
        };
        for (size_t i = 0; i < ELEMENTSOF(texts); i++)
                sqlite3_bind_text(st, (int) i + 1, texts[i] ?: "", -1, SQLITE_STATIC);
        if ((r = bind_u64(s, st, 12, in->priority, "priority")) < 0 ||
            (r = bind_u64(s, st, 13, in->probe_interval_ns, "probe interval")) < 0 ||
            (r = bind_u64(s, st, 14, in->interval_ns, "interval")) < 0 ||
            (r = bind_u64(s, st, 15, in->threshold_ns, "threshold")) < 0)
                goto fail;
        sqlite3_bind_int64(st, 16, in->hist_limit_us);
        sqlite3_bind_int64(st, 17, in->start_ns);
        if (in->boot_ns > 0)
                sqlite3_bind_int64(st, 18, in->boot_ns);
        sqlite3_bind_text(st, 19, in->release, -1, SQLITE_STATIC);
        r = step_done(s, st, "cannot record the new run");
        if (r < 0)
                goto fail;

        int64_t id = sqlite3_last_insert_rowid(s->db);
        r = store_exec(s, "COMMIT");
        if (r < 0)
                goto fail;
        *ret_run_id = id;
        if (ret_unclean)
                *ret_unclean = unclean;
        return 0;
fail:
        rollback(s);
        return r;
}

int store_end_run(store *s, int64_t run_id, int64_t end_ns, const char *reason,
                  const char *message) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                              "UPDATE runs SET end_ns = ?, end_reason = ?, end_message = ? "
                              "WHERE id = ?",
                              &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, end_ns);
        sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
        if (message)
                sqlite3_bind_text(st, 3, message, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, run_id);
        r = step_done(s, st, "cannot record the end of the run");
        if (r < 0)
                return r;
        if (sqlite3_changes(s->db) != 1)
                return store_failf(s, -ENOENT, "run %lld does not exist", (long long) run_id);
        return 0;
}

static int insert_cpu_row(store *s, sqlite3_stmt *st, int64_t interval_id,
                          const struct store_cpu_interval *c) {
        _cleanup_free_ uint8_t *encoded = NULL;
        const uint8_t *blob = c->hist_encoded;
        size_t blob_len = c->hist_encoded_len;
        int r;

        if (c->hist) {
                r = hist_encode(c->hist_limit_us, c->hist, &encoded, &blob_len);
                if (r < 0)
                        return store_failf(s, r, "cannot encode histogram of CPU %d", c->cpu);
                blob = encoded;
        }

        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, interval_id);
        sqlite3_bind_int(st, 2, c->cpu);
        sqlite3_bind_int64(st, 3, c->start_ns);
        if ((r = bind_u64(s, st, 4, c->length_ns, "length")) < 0 ||
            (r = bind_u64(s, st, 5, c->samples, "samples")) < 0 ||
            (r = bind_u64(s, st, 6, c->samples ? c->min_ns : 0, "min")) < 0 ||
            (r = bind_u64(s, st, 7, c->max_ns, "max")) < 0 ||
            (r = bind_u64(s, st, 8, c->sum_ns, "sum")) < 0)
                return r;
        sqlite3_bind_int64(st, 9, c->max_time_ns);
        if ((r = bind_u64(s, st, 10, c->violations, "violations")) < 0 ||
            (r = bind_u64(s, st, 11, c->missed, "missed")) < 0)
                return r;
        sqlite3_bind_int64(st, 12, c->hist_limit_us);
        sqlite3_bind_blob(st, 13, blob, (int) blob_len, SQLITE_STATIC);
        return step_done(s, st, "cannot store per-CPU interval");
}

static int insert_loads(store *s, int64_t interval_id, const struct store_interval *iv) {
        _cleanup_stmt_ sqlite3_stmt *ld = NULL, *m = NULL;
        int r;

        if (iv->nloads == 0)
                return 0;
        r = store_prepare(s,
                          "INSERT INTO interval_loads (interval_id, idx, generator, up_ns, "
                          "starts, exits) VALUES (?, ?, ?, ?, ?, ?)",
                          &ld);
        if (r < 0)
                return r;
        r = store_prepare(s,
                          "INSERT INTO interval_load_metrics (interval_id, idx, metric, unit, "
                          "value) VALUES (?, ?, ?, ?, ?)",
                          &m);
        if (r < 0)
                return r;
        for (size_t i = 0; i < iv->nloads; i++) {
                const struct store_interval_load *l = &iv->loads[i];
                sqlite3_reset(ld);
                sqlite3_bind_int64(ld, 1, interval_id);
                sqlite3_bind_int64(ld, 2, (int64_t) i);
                sqlite3_bind_text(ld, 3, l->generator, -1, SQLITE_STATIC);
                if ((r = bind_u64(s, ld, 4, l->up_ns, "load up time")) < 0)
                        return r;
                sqlite3_bind_int64(ld, 5, l->starts);
                sqlite3_bind_int64(ld, 6, l->exits);
                r = step_done(s, ld, "cannot store interval load");
                if (r < 0)
                        return r;
                for (size_t k = 0; k < l->nmetrics; k++) {
                        double v = l->metrics[k].value;
                        sqlite3_reset(m);
                        sqlite3_bind_int64(m, 1, interval_id);
                        sqlite3_bind_int64(m, 2, (int64_t) i);
                        sqlite3_bind_text(m, 3, l->metrics[k].name, -1, SQLITE_STATIC);
                        sqlite3_bind_text(m, 4, l->metrics[k].unit, -1, SQLITE_STATIC);
                        /* NaN would be stored as NULL and break the NOT NULL constraint. */
                        sqlite3_bind_double(m, 5, isfinite(v) ? v : 0.0);
                        r = step_done(s, m, "cannot store load throughput");
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int store_write_interval(store *s, const struct store_interval *iv) {
        _cleanup_stmt_ sqlite3_stmt *ins = NULL, *cpu = NULL, *seen = NULL;
        int r;

        r = begin(s);
        if (r < 0)
                return r;

        r = store_prepare(s,
                          "INSERT INTO intervals (run_id, seq, start_ns, length_ns, scenario) "
                          "VALUES (?, ?, ?, ?, ?)",
                          &ins);
        if (r < 0)
                goto fail;
        sqlite3_bind_int64(ins, 1, iv->run_id);
        if ((r = bind_u64(s, ins, 2, iv->seq, "sequence")) < 0)
                goto fail;
        sqlite3_bind_int64(ins, 3, iv->start_ns);
        if ((r = bind_u64(s, ins, 4, iv->length_ns, "length")) < 0)
                goto fail;
        if (iv->scenario)
                sqlite3_bind_text(ins, 5, iv->scenario, -1, SQLITE_STATIC);
        r = step_done(s, ins, "cannot store interval");
        if (r < 0)
                goto fail;
        int64_t interval_id = sqlite3_last_insert_rowid(s->db);

        r = insert_loads(s, interval_id, iv);
        if (r < 0)
                goto fail;

        r = store_prepare(s,
                          "INSERT INTO interval_cpus (interval_id, cpu, start_ns, length_ns, "
                          "samples, min_ns, max_ns, sum_ns, max_time_ns, violations, missed, "
                          "hist_limit_us, hist) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          &cpu);
        if (r < 0)
                goto fail;
        for (size_t i = 0; i < iv->ncpus; i++) {
                r = insert_cpu_row(s, cpu, interval_id, &iv->cpus[i]);
                if (r < 0)
                        goto fail;
        }

        for (size_t i = 0; i < iv->nevents; i++) {
                r = insert_event(s, iv->run_id, interval_id, &iv->events[i]);
                if (r < 0)
                        goto fail;
        }
        r = store_insert_traces(s, iv->run_id, interval_id, iv->traces, iv->ntraces);
        if (r < 0)
                goto fail;

        if (s->outbox) {
                r = insert_outbox(s, iv->run_id, interval_id, 0,
                                  iv->start_ns + (int64_t) iv->length_ns);
                if (r < 0)
                        goto fail;
        }

        r = store_prepare(s, "UPDATE runs SET last_seen_ns = ? WHERE id = ?", &seen);
        if (r < 0)
                goto fail;
        sqlite3_bind_int64(seen, 1, iv->start_ns + (int64_t) iv->length_ns);
        sqlite3_bind_int64(seen, 2, iv->run_id);
        r = step_done(s, seen, "cannot update the run");
        if (r < 0)
                goto fail;

        r = store_exec(s, "COMMIT");
        if (r < 0)
                goto fail;
        return 0;
fail:
        rollback(s);
        return r;
}
