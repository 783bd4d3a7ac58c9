/* SPDX-License-Identifier: MIT */
/* Implementation of the collector.  It runs on the main thread at normal priority and never
 * touches a probe's open slot: it only reads slots the probe has published. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector.h"
#include "hist.h"
#include "interval.h"
#include "log.h"
#include "macro.h"
#include "timeutil.h"

/* A published slot, copied out of the ring.  The histogram is kept in its compact stored
 * form: while storage is failing, many of these may be held, and all memory is locked. */
struct held_slot {
        struct probe_slot s; /* s.hist is NULL */
        uint8_t *hist;
        size_t hist_len;
};

struct cpu_queue {
        struct probe *probe;
        struct held_slot *items;
        size_t n, cap;
        int64_t delivered_k;      /* last_k of the newest slot taken, -1 before the first */
        uint64_t dropped;         /* slots dropped while storage failed */
        bool finished;            /* its final slot has been taken */
        uint64_t late_reported_k; /* avoid repeating the "late" event for one interval */
};

struct collector {
        struct collector_params p;
        store *store;
        int64_t run_id;
        struct cpu_queue *q;
        size_t nq;
        uint64_t write_k;  /* next interval index to write */
        uint64_t next_seq; /* sequence number of the next stored interval */
        int64_t stored_k;  /* the last interval index a row was stored for, or -1 */
        struct collector_stats stats;
        /* Captures taken from the flight recorder, not yet stored; and whether one is still
         * being taken (the interval it belongs to waits for it, within its grace time). */
        struct trace_capture_result **captures;
        size_t ncaptures;
        bool capture_busy;

        /* Storage failing (a full disk): since when, why, and what it cost so far.  Recorded
         * as an event once writing works again. */
        struct {
                bool active;
                int error;
                int64_t since_real_ns;
                uint64_t failures, max_held, dropped_before;
                int64_t until_real_ns;
                bool report; /* recovered: the event is still to be stored */
                uint64_t held, dropped;
        } trouble;
};

int collector_new(const struct collector_params *params, store *st, int64_t run_id,
                  struct probe **probes, size_t nprobes, struct collector **ret) {
        struct collector *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->q = calloc(nprobes, sizeof(*c->q));
        if (!c->q) {
                free(c);
                return -ENOMEM;
        }
        c->p = *params;
        c->store = st;
        c->run_id = run_id;
        c->nq = nprobes;
        for (size_t i = 0; i < nprobes; i++) {
                c->q[i].probe = probes[i];
                c->q[i].delivered_k = -1;
                c->q[i].late_reported_k = UINT64_MAX;
        }
        c->write_k = interval_index(params->base_mono_ns, (int64_t) params->period_ns,
                                    params->run_start_mono_ns);
        c->stored_k = -1;
        *ret = c;
        return 0;
}

static void held_free(struct held_slot *h) {
        free(h->hist);
}

void collector_free(struct collector *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->nq; i++) {
                for (size_t j = 0; j < c->q[i].n; j++)
                        held_free(&c->q[i].items[j]);
                free(c->q[i].items);
        }
        free(c->q);
        for (size_t i = 0; i < c->ncaptures; i++)
                trace_capture_result_free(c->captures[i]);
        free(c->captures);
        free(c);
}

void collector_get_stats(const struct collector *c, struct collector_stats *ret) {
        *ret = c->stats;
}

int64_t collector_next_due(const struct collector *c) {
        return interval_start(c->p.base_mono_ns, (int64_t) c->p.period_ns, c->write_k + 1);
}

/* Moves published slots out of a probe's ring into our queue. */
static int drain(struct collector *c, struct cpu_queue *q) {
        struct probe_slot *s;

        while ((s = probe_peek(q->probe))) {
                if (q->n == q->cap) {
                        size_t cap = q->cap ? q->cap * 2 : 4;
                        struct held_slot *a = realloc(q->items, cap * sizeof(*a));
                        if (!a)
                                return -ENOMEM;
                        q->items = a;
                        q->cap = cap;
                }
                struct held_slot *h = &q->items[q->n];
                int r = hist_encode(c->p.hist_limit_us, s->hist, &h->hist, &h->hist_len);
                if (r < 0)
                        return r;
                q->n++;
                h->s = *s;
                h->s.hist = NULL;
                q->delivered_k = (int64_t) s->last_k;
                if (s->final)
                        q->finished = true;
                probe_release(q->probe);

                /* Storage has failed for a long time: keep the newest, count what goes. */
                if (q->n > c->p.max_pending) {
                        held_free(&q->items[0]);
                        memmove(q->items, q->items + 1, (q->n - 1) * sizeof(*q->items));
                        q->n--;
                        c->stats.slots_dropped++;
                        q->dropped++;
                        log_error("CPU %d: storage has failed for %zu intervals; dropping the "
                                  "oldest held interval (%" PRIu64 " dropped so far)",
                                  q->probe->cpu, c->p.max_pending, c->stats.slots_dropped);
                }
        }
        return 0;
}

static int64_t to_real(const struct collector *c, int64_t mono) {
        return mono + c->p.mono_to_real_ns;
}

struct batch {
        struct store_cpu_interval *rows;
        size_t nrows;
        struct store_trace *traces; /* of the captures held that go with this interval */
        size_t ntraces, nforget;    /* stored, and held ones done with once it is */
        struct store_event *events;
        size_t nevents, cap_events;
        char **messages; /* owned strings referenced by events */
        size_t nmessages;
        int64_t start, end; /* the span of the rows, wall clock */
        uint64_t worst;     /* the worst latency of the rows, and its CPU */
        int worst_cpu;
};

static void batch_done(struct batch *b) {
        for (size_t i = 0; i < b->nmessages; i++)
                free(b->messages[i]);
        free(b->messages);
        free(b->events);
        free(b->rows);
        free(b->traces);
}

/* The captures held whose violation was due before end_mono go with this interval (they are
 * held in due order). */
static int attach_traces(struct collector *c, struct batch *b, int64_t end_mono,
                         struct store_interval *iv) {
        size_t n = 0;
        while (n < c->ncaptures && c->captures[n]->due_mono_ns < end_mono)
                n++;
        if (n == 0)
                return 0;
        b->traces = calloc(n, sizeof(*b->traces));
        if (!b->traces)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct trace_capture_result *t = c->captures[i];
                if (!t->analysis_json)
                        continue; /* out of memory when it was taken: dropped below */
                b->traces[b->ntraces++] = (struct store_trace){
                        .cpu = t->cpu,
                        .time_ns = to_real(c, t->due_mono_ns),
                        .latency_ns = t->analysis.latency_ns,
                        .analysis = t->analysis_json,
                        .raw = t->raw,
                        .raw_len = t->raw_len,
                        .raw_events = t->raw_events,
                        .raw_dropped = t->raw_dropped,
                };
        }
        b->nforget = n;
        iv->traces = b->traces;
        iv->ntraces = b->ntraces;
        return 0;
}

/* Stored: the first n captures held are done with. */
static void forget_traces(struct collector *c, size_t n) {
        if (n == 0)
                return;
        for (size_t i = 0; i < n; i++)
                trace_capture_result_free(c->captures[i]);
        memmove(c->captures, c->captures + n, (c->ncaptures - n) * sizeof(*c->captures));
        c->ncaptures -= n;
}

/* Takes the flight recorder's finished captures of violations due before before_mono into
 * our own list, in due order.  The others stay in their rate-limit window, where a worse
 * violation may still replace them. */
static int take_traces(struct collector *c, int64_t before_mono) {
        struct trace_capture_result **got = NULL;
        size_t n = 0;
        if (!c->p.traces)
                return 0;
        int r = trace_capture_take(c->p.traces, before_mono, &got, &n, &c->capture_busy);
        if (r < 0 || n == 0) {
                free(got);
                return r;
        }
        struct trace_capture_result **a = realloc(c->captures, (c->ncaptures + n) * sizeof(*a));
        if (!a) {
                for (size_t i = 0; i < n; i++)
                        trace_capture_result_free(got[i]);
                free(got);
                return -ENOMEM;
        }
        c->captures = a;
        /* Later takes hold later violations, except a capture that waited in a rate-limit
         * window: keep the list sorted. */
        for (size_t i = 0; i < n; i++) {
                size_t at = c->ncaptures;
                while (at > 0 && c->captures[at - 1]->due_mono_ns > got[i]->due_mono_ns) {
                        c->captures[at] = c->captures[at - 1];
                        at--;
                }
                c->captures[at] = got[i];
                c->ncaptures++;
        }
        free(got);
        return 0;
}

_printf_(6, 7) static int batch_event(struct batch *b, int64_t time, const char *type, int cpu,
                                      int64_t value, const char *fmt, ...) {
        char *msg = NULL;
        if (fmt) {
                va_list ap;
                va_start(ap, fmt);
                int r = vasprintf(&msg, fmt, ap);
                va_end(ap);
                if (r < 0)
                        return -ENOMEM;
                char **m = realloc(b->messages, (b->nmessages + 1) * sizeof(char *));
                if (!m) {
                        free(msg);
                        return -ENOMEM;
                }
                b->messages = m;
                b->messages[b->nmessages++] = msg;
        }
        if (b->nevents == b->cap_events) {
                size_t cap = b->cap_events ? b->cap_events * 2 : 16;
                struct store_event *e = realloc(b->events, cap * sizeof(*e));
                if (!e)
                        return -ENOMEM;
                b->events = e;
                b->cap_events = cap;
        }
        b->events[b->nevents++] = (struct store_event){
                .time_ns = time, .type = type, .cpu = cpu, .value_ns = value, .message = msg
        };
        return 0;
}

static int add_slot(struct collector *c, struct batch *b, const struct held_slot *h, int cpu) {
        const struct probe_slot *s = &h->s;
        int64_t start = MAX(s->start_mono_ns, c->p.run_start_mono_ns);
        int64_t end = MAX(s->end_mono_ns, start);
        char a[TIMESPAN_MAX_LEN];
        int r;

        b->rows[b->nrows++] = (struct store_cpu_interval){
                .cpu = cpu,
                .start_ns = to_real(c, start),
                .length_ns = (uint64_t) (end - start),
                .samples = s->samples,
                .min_ns = s->samples ? s->min_ns : 0,
                .max_ns = s->max_ns,
                .sum_ns = s->sum_ns,
                .violations = s->violations,
                .missed = s->missed,
                .max_time_ns = to_real(c, s->max_time_mono_ns),
                .hist_limit_us = c->p.hist_limit_us,
                .hist_encoded = h->hist,
                .hist_encoded_len = h->hist_len,
        };

        for (uint32_t i = 0; i < s->nviol; i++) {
                r = batch_event(b, to_real(c, s->viol[i].time_mono_ns), "violation", cpu,
                                (int64_t) s->viol[i].value_ns, NULL);
                if (r < 0)
                        return r;
        }
        if (s->violations > s->nviol) {
                r = batch_event(b, to_real(c, start), "violations_unrecorded", cpu,
                                (int64_t) (s->violations - s->nviol),
                                "%" PRIu64 " more violations over %s on CPU %d in this interval "
                                "were counted but not recorded one by one (at most %d are)",
                                s->violations - s->nviol, format_timespan(a, c->p.threshold_ns),
                                cpu, PROBE_VIOL_MAX);
                if (r < 0)
                        return r;
        }
        if (s->ring_full > 0) {
                r = batch_event(b, to_real(c, start), "ring_full", cpu, -1,
                                "the collector fell behind CPU %d: %" PRIu64 " interval "
                                "boundaries passed with its ring full, so this row covers "
                                "intervals %" PRIu64 " to %" PRIu64 " (no sample was lost)",
                                cpu, s->ring_full, s->first_k, s->last_k);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The oldest held slot of a CPU, if it belongs to interval k or earlier. */
static struct held_slot *eligible(struct cpu_queue *q, uint64_t k) {
        return q->n > 0 && q->items[0].s.first_k <= k ? &q->items[0] : NULL;
}

static bool any_eligible(struct collector *c, uint64_t k) {
        for (size_t i = 0; i < c->nq; i++)
                if (eligible(&c->q[i], k))
                        return true;
        return false;
}

/* Into b, the oldest held slot of every CPU that has one for interval k or earlier, and a
 * cpu_late event for each CPU that had nothing for k when its grace ran out (late[i]). */
static int gather(struct collector *c, uint64_t k, int64_t now_mono, struct batch *b, bool *late) {
        for (size_t i = 0; i < c->nq; i++) {
                struct cpu_queue *q = &c->q[i];
                struct held_slot *h = eligible(q, k);
                int r;
                if (h) {
                        r = add_slot(c, b, h, q->probe->cpu);
                        if (r < 0)
                                return r;
                        const struct store_cpu_interval *row = &b->rows[b->nrows - 1];
                        b->start = MIN(b->start, row->start_ns);
                        b->end = MAX(b->end, row->start_ns + (int64_t) row->length_ns);
                        if (h->s.max_ns >= b->worst) {
                                b->worst = h->s.max_ns;
                                b->worst_cpu = q->probe->cpu;
                        }
                } else if (!q->finished && q->delivered_k < (int64_t) k &&
                           q->late_reported_k != k) {
                        r = batch_event(b, to_real(c, now_mono), "cpu_late", q->probe->cpu, -1,
                                        "CPU %d had not handed over interval %" PRIu64 " when "
                                        "its grace time ran out; its data follows later",
                                        q->probe->cpu, k);
                        if (r < 0)
                                return r;
                        late[i] = true;
                }
        }
        return 0;
}

/* Every CPU is late (a stall of the whole machine): there is no interval to attach the events
 * to, but they are worth keeping. */
static int store_events_alone(struct collector *c, const struct batch *b) {
        for (size_t i = 0; i < b->nevents; i++) {
                heartbeat_enter(c->p.storage_beat);
                int r = store_add_event(c->store, c->run_id, &b->events[i]);
                heartbeat_leave(c->p.storage_beat);
                if (r < 0) {
                        log_error("Failed to store an event: %s", store_error(c->store));
                        return r;
                }
        }
        return 0;
}

/* The batch as interval k, with its loads' record and its captures, in one transaction. */
static int store_batch(struct collector *c, struct batch *b, uint64_t k) {
        struct store_interval iv = {
                .run_id = c->run_id,
                .seq = c->next_seq,
                .start_ns = b->start,
                .length_ns = (uint64_t) (b->end - b->start),
                .cpus = b->rows,
                .ncpus = b->nrows,
                .events = b->events,
                .nevents = b->nevents,
        };
        if (c->p.annotate)
                c->p.annotate(c->p.userdata, k, (int64_t) k == c->stored_k, &iv);
        int64_t end_mono = interval_start(c->p.base_mono_ns, (int64_t) c->p.period_ns, k + 1);
        int r = attach_traces(c, b, end_mono, &iv);
        if (r < 0)
                return r;
        heartbeat_enter(c->p.storage_beat);
        r = store_write_interval(c->store, &iv);
        heartbeat_leave(c->p.storage_beat);
        if (r < 0) {
                c->stats.write_failures++;
                log_error("Failed to store interval %" PRIu64 ": %s (keeping it in "
                          "memory, will retry)",
                          c->next_seq, store_error(c->store));
                return r;
        }
        c->next_seq++;
        c->stored_k = (int64_t) k;
        if (c->p.written)
                c->p.written(c->p.userdata, k);
        c->stats.intervals_written++;
        forget_traces(c, b->nforget);
        c->stats.last_max_ns = b->worst;
        c->stats.last_max_cpu = b->worst_cpu;
        return 0;
}

/* Stored: only now forget what was written, so a failed write is retried whole. */
static void forget_written(struct collector *c, uint64_t k, const bool *late) {
        for (size_t i = 0; i < c->nq; i++) {
                struct cpu_queue *q = &c->q[i];
                if (late[i])
                        q->late_reported_k = k;
                struct held_slot *h = eligible(q, k);
                if (!h)
                        continue;
                c->stats.total_violations += h->s.violations;
                held_free(h);
                memmove(q->items, q->items + 1, (q->n - 1) * sizeof(*q->items));
                q->n--;
        }
}

/* Writes, as one interval, the oldest held slot of every CPU that has one for interval k or
 * earlier: never two rows of one CPU in one interval (a CPU that was late past its grace time
 * may hold two by the time the next interval is due; the second goes into the next write).
 * Also records the CPUs that had nothing for k when its grace ran out.  Returns 1 when
 * something was stored. */
static int write_one(struct collector *c, uint64_t k, int64_t now_mono) {
        struct batch b = {
                .rows = calloc(c->nq, sizeof(*b.rows)),
                .start = INT64_MAX,
                .end = INT64_MIN,
                .worst_cpu = -1,
        };
        bool *late = calloc(c->nq, sizeof(bool));
        int r = b.rows && late ? 0 : -ENOMEM;

        if (r >= 0)
                r = gather(c, k, now_mono, &b, late);
        if (r >= 0)
                r = b.nrows == 0 ? store_events_alone(c, &b) : store_batch(c, &b, k);
        if (r >= 0) {
                forget_written(c, k, late);
                r = b.nrows > 0;
        }
        free(late);
        batch_done(&b);
        return r;
}

static bool interval_complete(const struct collector *c, uint64_t k, int64_t now_mono) {
        int64_t end = interval_start(c->p.base_mono_ns, (int64_t) c->p.period_ns, k + 1);
        /* Not before its end by the caller's clock, even when every probe has delivered it:
         * the caller recorded what the loads did up to now_mono, and a probe may have passed
         * the boundary after that (the main thread preempted between its reading of the clock
         * and this poll).  Written earlier, the interval would go without its loads. */
        if (now_mono < end)
                return false;
        if (now_mono >= end + (int64_t) c->p.grace_ns)
                return true;
        /* A capture being taken may belong to this interval: wait for it (within the grace
         * time; a later one goes with the next interval). */
        if (c->capture_busy)
                return false;
        for (size_t i = 0; i < c->nq; i++)
                if (!c->q[i].finished && c->q[i].delivered_k < (int64_t) k)
                        return false;
        return true;
}

static bool all_finished(const struct collector *c) {
        for (size_t i = 0; i < c->nq; i++)
                if (!c->q[i].finished)
                        return false;
        return true;
}

static bool anything_held(const struct collector *c) {
        for (size_t i = 0; i < c->nq; i++)
                if (c->q[i].n > 0)
                        return true;
        return false;
}

/* Intervals held in memory: the most slots any CPU holds. */
static uint64_t held_intervals(const struct collector *c) {
        uint64_t n = 0;
        for (size_t i = 0; i < c->nq; i++)
                n = MAX(n, (uint64_t) c->q[i].n);
        return n;
}

static uint64_t dropped_intervals(const struct collector *c) {
        uint64_t n = 0;
        for (size_t i = 0; i < c->nq; i++)
                n = MAX(n, c->q[i].dropped);
        return n;
}

static void storage_failed(struct collector *c, int error, int64_t now_mono) {
        /* A failure before the last one was reported continues it. */
        if (!c->trouble.active && !c->trouble.report) {
                c->trouble.error = error;
                c->trouble.since_real_ns = to_real(c, now_mono);
                c->trouble.failures = 0;
                c->trouble.max_held = 0;
                c->trouble.dropped_before = dropped_intervals(c);
        }
        c->trouble.active = true;
        c->trouble.report = false;
        c->trouble.failures++;
        c->trouble.max_held = MAX(c->trouble.max_held, held_intervals(c));
}

static void storage_recovered(struct collector *c, int64_t now_mono) {
        if (!c->trouble.active)
                return;
        c->trouble.active = false;
        c->trouble.report = true;
        c->trouble.until_real_ns = to_real(c, now_mono);
        /* The interval just written was held too. */
        c->trouble.held = MAX(c->trouble.max_held, held_intervals(c) + 1);
        c->trouble.dropped = dropped_intervals(c) - c->trouble.dropped_before;
}

/* Stores the event that says storage failed, how long, and what was held and dropped. */
static void report_trouble(struct collector *c) {
        char msg[512], since[TIMESTAMP_MAX_LEN], span[TIMESPAN_MAX_LEN], details[256];
        if (!c->trouble.report)
                return;
        int64_t len = c->trouble.until_real_ns - c->trouble.since_real_ns;
        snprintf(msg, sizeof(msg),
                 "the database could not be written from %s for %s (%s, %" PRIu64 " failed "
                 "writes); %" PRIu64 " interval%s held in memory and written now, %" PRIu64
                 " dropped (at most %zu are held per CPU)",
                 format_timestamp_utc(since, c->trouble.since_real_ns),
                 format_timespan(span, (uint64_t) MAX(len, 0) / NSEC_PER_MSEC * NSEC_PER_MSEC),
                 strerror(-c->trouble.error), c->trouble.failures, c->trouble.held,
                 c->trouble.held == 1 ? "" : "s", c->trouble.dropped, c->p.max_pending);
        snprintf(details, sizeof(details),
                 "{\"since_ns\":%" PRId64 ",\"until_ns\":%" PRId64
                 ",\"errno\":%d,\"failures\":%" PRIu64 ",\"held\":%" PRIu64 ",\"dropped\":%" PRIu64
                 ",\"hold_max\":%zu}",
                 c->trouble.since_real_ns, c->trouble.until_real_ns, -c->trouble.error,
                 c->trouble.failures, c->trouble.held, c->trouble.dropped, c->p.max_pending);
        struct store_event ev = {
                .time_ns = c->trouble.until_real_ns,
                .type = c->trouble.error == -ENOSPC ? "storage_full" : "storage_error",
                .cpu = -1,
                .value_ns = (int64_t) c->trouble.dropped,
                .message = msg,
                .details = details,
        };
        if (store_add_event(c->store, c->run_id, &ev) < 0) {
                log_error("Failed to store the %s event, will retry: %s", ev.type,
                          store_error(c->store));
                return;
        }
        log_notice("Storage works again: %s", msg);
        c->trouble.report = false;
}

int collector_poll(struct collector *c, int64_t now_mono, bool final) {
        int written = 0, r;

        for (size_t i = 0; i < c->nq; i++) {
                r = drain(c, &c->q[i]);
                if (r < 0)
                        return r;
        }
        /* Captures go with the interval their violation was due in, once it closed (those of
         * the open one stay in their rate-limit window); at the end, every one, and one still
         * being taken gets a moment to finish. */
        int64_t period = (int64_t) c->p.period_ns;
        int64_t before =
                final ? INT64_MAX
                      : interval_start(c->p.base_mono_ns, period,
                                       interval_index(c->p.base_mono_ns, period, now_mono));
        for (int wait = 0; wait < (final ? 100 : 1); wait++) {
                r = take_traces(c, before);
                if (r < 0)
                        log_error_errno(r, "Failed to take the flight recorder's captures, "
                                           "ignoring: %m");
                if (!c->capture_busy)
                        break;
                struct timespec ts = { 0, 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }

        for (;;) {
                bool done_all = final || all_finished(c);
                if (!done_all && !interval_complete(c, c->write_k, now_mono))
                        break;
                if (done_all && !anything_held(c))
                        break;
                do {
                        r = write_one(c, c->write_k, now_mono);
                        if (r < 0) {
                                storage_failed(c, r, now_mono);
                                return r;
                        }
                        if (r > 0)
                                storage_recovered(c, now_mono);
                        written += r;
                } while (any_eligible(c, c->write_k));
                /* Step past intervals no CPU has anything for (slots that covered several). */
                c->write_k++;
                if (done_all) {
                        /* Remaining slots may start far ahead; jump to the oldest. */
                        uint64_t min_k = UINT64_MAX;
                        for (size_t i = 0; i < c->nq; i++)
                                for (size_t j = 0; j < c->q[i].n; j++)
                                        min_k = MIN(min_k, c->q[i].items[j].s.first_k);
                        if (min_k != UINT64_MAX && min_k > c->write_k)
                                c->write_k = min_k;
                }
        }
        report_trouble(c);
        return written;
}

void collector_set_threshold(struct collector *c, uint64_t threshold_ns) {
        c->p.threshold_ns = threshold_ns;
}
