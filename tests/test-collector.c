/* SPDX-License-Identifier: MIT */
/* Tests of the collector on a real SQLite file, with the test playing the probes' part
 * (publishing slots into real rings), so that timing can be exact: a CPU late past its grace
 * time, slots that span several intervals, and the final flush. */
#include <sqlite3.h>
#include <stdatomic.h>

#include "tests.h"
#include "collector.h"
#include "hist.h"
#include "macro.h"
#include "store.h"

#define SEC INT64_C(1000000000)
#define OFFSET (INT64_C(1764748800) * SEC) /* realtime - monotonic */

static char dir[] = "/tmp/test-collector-XXXXXX";

struct rig {
        store *store;
        int64_t run;
        struct probe_control ctl;
        struct probe *probes[2];
        struct collector *c;
};

static void rig_up_annotated(struct rig *g, const char *name,
                             void (*annotate)(void *, uint64_t, bool, struct store_interval *),
                             void (*written)(void *, uint64_t), void *userdata) {
        char path[512], err[STORE_ERROR_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        assert_int_equal(store_open(path, STORE_WRITER, &g->store, err), 0);
        struct store_run_info info = { .machine_id = "m",
                                       .boot_id = "b",
                                       .start_ns = OFFSET,
                                       .hist_limit_us = 1000,
                                       .priority = 95 };
        assert_int_equal(store_begin_run(g->store, &info, &g->run, NULL), 0);
        struct probe_params pp = { .interval_ns = 200000,
                                   .threshold_ns = 100000,
                                   .hist_limit_us = 1000,
                                   .period_ns = SEC,
                                   .priority = 95 };
        for (int i = 0; i < 2; i++) {
                assert_int_equal(probe_new(i, &pp, &g->ctl, &g->probes[i]), 0);
                assert_int_equal(probe_alloc_ring(g->probes[i]), 0);
        }
        struct collector_params cp = { .period_ns = SEC,
                                       .mono_to_real_ns = OFFSET,
                                       .threshold_ns = 100000,
                                       .probe_interval_ns = 200000,
                                       .hist_limit_us = 1000,
                                       .grace_ns = 2 * SEC,
                                       .max_pending = 1024,
                                       .annotate = annotate,
                                       .written = written,
                                       .userdata = userdata };
        assert_int_equal(collector_new(&cp, g->store, g->run, g->probes, 2, &g->c), 0);
}

static void rig_up(struct rig *g, const char *name) {
        rig_up_annotated(g, name, NULL, NULL, NULL);
}

static void rig_down(struct rig *g) {
        collector_free(g->c);
        for (int i = 0; i < 2; i++)
                probe_free(g->probes[i]);
        store_close(g->store);
}

/* What a probe thread does at a boundary: fill the open slot, then publish it. */
static void publish(struct probe *p, uint64_t first_k, uint64_t last_k, uint64_t samples,
                    uint64_t lat_ns, bool final) {
        uint64_t head = atomic_load(&p->head), tail = atomic_load(&p->tail);
        assert_true(head + 1 - tail < p->nslots);
        struct probe_slot *s = &p->slots[head % p->nslots];
        s->first_k = first_k;
        s->last_k = last_k;
        s->start_mono_ns = (int64_t) first_k * SEC;
        s->end_mono_ns = (int64_t) (last_k + 1) * SEC;
        s->samples = samples;
        s->sum_ns = samples * lat_ns;
        s->min_ns = s->max_ns = lat_ns;
        s->max_time_mono_ns = s->start_mono_ns + 1000;
        s->ring_full = last_k - first_k;
        s->final = final;
        s->hist[hist_index(1000, lat_ns)] = samples;
        atomic_store_explicit(&p->head, head + 1, memory_order_release);
}

static void totals(struct rig *g, uint64_t *samples, uint64_t *rows) {
        struct store_cpu_report *rep;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_report(g->store, &f, &rep, &n), 0);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++) {
                samples[i] = rep[i].samples;
                rows[i] = rep[i].intervals;
        }
        store_report_free(rep, n);
}

static size_t count_events(struct rig *g, const char *type) {
        struct store_event_row *ev;
        size_t n;
        struct store_filter f = STORE_FILTER_ALL;
        assert_int_equal(store_list_events(g->store, &f, type, 0, &ev, &n), 0);
        store_events_free(ev, n);
        return n;
}

/* The calls of annotate: (k, again) pairs. */
struct calls {
        size_t n;
        uint64_t k[16];
        bool again[16];
};

static void note_calls(void *userdata, uint64_t k, bool again, struct store_interval *iv) {
        struct calls *c = userdata;
        (void) iv;
        if (c->n < 16) {
                c->k[c->n] = k;
                c->again[c->n++] = again;
        }
}

static void test_cpu_late_past_grace(void **state) {
        struct rig g = {};
        struct probe *a, *b;
        (void) state;
        struct calls calls = {};
        rig_up_annotated(&g, "late.db", note_calls, NULL, &calls);
        a = g.probes[0];
        b = g.probes[1];

        /* CPU 1 hands over interval 0 on time; CPU 0 is stalled across the boundary. */
        publish(b, 0, 0, 5000, 5000, false);
        assert_int_equal(collector_poll(g.c, SEC + SEC / 100, false), 0);

        /* CPU 1 goes on; at 3.1 s the grace for interval 0 has run out. */
        publish(b, 1, 1, 5000, 5000, false);
        publish(b, 2, 2, 5000, 5000, false);
        assert_int_equal(collector_poll(g.c, 3 * SEC + SEC / 10, false), 1);
        assert_int_equal(count_events(&g, "cpu_late"), 1);

        /* CPU 0 comes back with interval 0 and 1 at once: both are due now.  They must go in
         * two writes (one row per CPU and interval), not fail the interval forever. */
        publish(a, 0, 0, 4000, 20000000, false);
        publish(a, 1, 1, 5000, 6000, false);
        int r = collector_poll(g.c, 3 * SEC + SEC / 2, false);
        assert_int_equal(r, 2);
        /* Both under the interval being written, the second as a row of one stored before:
         * the loads' starts and exits must not be counted twice. */
        assert_int_equal(calls.n, 3);
        assert_true(calls.k[1] == calls.k[2] && !calls.again[1] && calls.again[2]);
        assert_false(calls.again[0]);

        /* Both stop; everything held is written. */
        publish(a, 2, 2, 2500, 6000, true);
        publish(b, 3, 3, 2500, 5000, true);
        assert_true(collector_poll(g.c, 4 * SEC, true) >= 1);

        uint64_t samples[2], rows[2];
        totals(&g, samples, rows);
        assert_int_equal(samples[0], 4000 + 5000 + 2500);
        assert_int_equal(samples[1], 3 * 5000 + 2500);
        assert_int_equal(rows[0], 3);
        assert_int_equal(rows[1], 4);
        assert_int_equal(count_events(&g, "cpu_late"), 1);

        struct collector_stats st;
        collector_get_stats(g.c, &st);
        assert_int_equal(st.write_failures, 0);
        assert_int_equal(st.slots_dropped, 0);
        rig_down(&g);
}

static void test_spanning_slot_and_final_flush(void **state) {
        struct rig g = {};
        (void) state;
        rig_up(&g, "span.db");

        /* CPU 0's ring was full for two boundaries: one slot covers intervals 0 to 2. */
        publish(g.probes[1], 0, 0, 5000, 5000, false);
        publish(g.probes[1], 1, 1, 5000, 5000, false);
        publish(g.probes[1], 2, 2, 5000, 5000, false);
        publish(g.probes[0], 0, 2, 15000, 7000, false);
        assert_true(collector_poll(g.c, 3 * SEC + SEC / 100, false) >= 1);
        assert_int_equal(count_events(&g, "ring_full"), 1);

        /* A final slot far ahead (a long stop after a pause) is still written. */
        publish(g.probes[0], 9, 9, 10, 7000, true);
        publish(g.probes[1], 9, 9, 10, 5000, true);
        assert_true(collector_poll(g.c, 10 * SEC, true) >= 1);

        uint64_t samples[2], rows[2];
        totals(&g, samples, rows);
        assert_int_equal(samples[0], 15010);
        assert_int_equal(samples[1], 15010);
        assert_int_equal(rows[0], 2);
        assert_int_equal(rows[1], 4);
        rig_down(&g);
}

static void note_annotated(void *userdata, uint64_t k, bool again, struct store_interval *iv) {
        (void) iv;
        (void) again;
        *(uint64_t *) userdata = k + 1;
}

/* Every probe has delivered interval 0, but the caller's clock (when it recorded what the
 * loads did) is still before the boundary: the interval waits, so that it is not written
 * without the loads' record, which the caller makes once its clock has passed the end. */
static void test_not_before_the_callers_boundary(void **state) {
        struct rig g = {};
        uint64_t annotated = 0; /* the last interval annotated, plus one */
        (void) state;
        rig_up_annotated(&g, "early.db", note_annotated, NULL, &annotated);
        publish(g.probes[0], 0, 0, 5000, 5000, false);
        publish(g.probes[1], 0, 0, 5000, 5000, false);
        assert_int_equal(collector_poll(g.c, SEC - SEC / 1000, false), 0);
        assert_int_equal(annotated, 0);
        assert_int_equal(collector_poll(g.c, SEC, false), 1);
        assert_int_equal(annotated, 1);
        publish(g.probes[0], 1, 1, 10, 5000, true);
        publish(g.probes[1], 1, 1, 10, 5000, true);
        assert_int_equal(collector_poll(g.c, SEC + SEC / 2, true), 1);
        assert_int_equal(annotated, 2);
        rig_down(&g);
}

/* What annotate was asked for, and what was told written. */
struct writes {
        struct calls annotated;
        size_t nwritten;
        uint64_t written[16];
};

static void note_write_annotated(void *userdata, uint64_t k, bool again,
                                 struct store_interval *iv) {
        note_calls(&((struct writes *) userdata)->annotated, k, again, iv);
}

static void note_written(void *userdata, uint64_t k) {
        struct writes *w = userdata;
        if (w->nwritten < 16)
                w->written[w->nwritten++] = k;
}

/* An interval is told written only once its write succeeded: while another connection holds
 * the database locked, annotate is asked (the write is tried) but nothing is told written,
 * and the retry after the lock is gone is.  (rtsoakd passes the loads' starts and exits of
 * an interval never told written on to the next one.) */
static void test_written_only_when_stored(void **state) {
        struct rig g = {};
        struct writes w = {};
        sqlite3 *other = NULL;
        char path[512];
        (void) state;
        rig_up_annotated(&g, "locked.db", note_write_annotated, note_written, &w);
        snprintf(path, sizeof(path), "%s/locked.db", dir);
        assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
        assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
        publish(g.probes[0], 0, 0, 5000, 5000, false);
        publish(g.probes[1], 0, 0, 5000, 5000, false);
        assert_true(collector_poll(g.c, SEC, false) < 0);
        assert_int_equal(w.annotated.n, 1);
        assert_int_equal(w.nwritten, 0);
        assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(other);
        assert_int_equal(collector_poll(g.c, SEC + SEC / 10, false), 1);
        assert_int_equal(w.annotated.n, 2);
        assert_int_equal(w.annotated.k[1], 0);
        assert_int_equal(w.nwritten, 1);
        assert_int_equal(w.written[0], 0);
        rig_down(&g);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpu_late_past_grace),
                cmocka_unit_test(test_written_only_when_stored),
                cmocka_unit_test(test_spanning_slot_and_final_flush),
                cmocka_unit_test(test_not_before_the_callers_boundary),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
