/* SPDX-License-Identifier: MIT */
/* Implementation of the collector.  It runs on the main thread at normal priority and never
 * touches a probe's open slot: it only reads slots the probe has published. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        struct collector_stats stats;
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
        struct store_event *events;
        size_t nevents, cap_events;
        char **messages; /* owned strings referenced by events */
        size_t nmessages;
};

static void batch_done(struct batch *b) {
        for (size_t i = 0; i < b->nmessages; i++)
                free(b->messages[i]);
        free(b->messages);
        free(b->events);
        free(b->rows);
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

/* Writes, as one interval, the oldest held slot of every CPU that has one for interval k or
 * earlier: never two rows of one CPU in one interval (a CPU that was late past its grace time
 * may hold two by the time the next interval is due; the second goes into the next write).
 * Also records the CPUs that had nothing for k when its grace ran out.  Returns 1 when
 * something was stored. */
static int write_one(struct collector *c, uint64_t k, int64_t now_mono) {
        struct batch b = { .rows = calloc(c->nq, sizeof(*b.rows)) };
        bool *late = calloc(c->nq, sizeof(bool));
        int64_t start = INT64_MAX, end = INT64_MIN;
        uint64_t worst = 0;
        int worst_cpu = -1, r;

        if (!b.rows || !late) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < c->nq; i++) {
                struct cpu_queue *q = &c->q[i];
                struct held_slot *h = eligible(q, k);
                if (h) {
                        r = add_slot(c, &b, h, q->probe->cpu);
                        if (r < 0)
                                goto out;
                        const struct store_cpu_interval *row = &b.rows[b.nrows - 1];
                        start = MIN(start, row->start_ns);
                        end = MAX(end, row->start_ns + (int64_t) row->length_ns);
                        if (h->s.max_ns >= worst) {
                                worst = h->s.max_ns;
                                worst_cpu = q->probe->cpu;
                        }
                } else if (!q->finished && q->delivered_k < (int64_t) k &&
                           q->late_reported_k != k) {
                        r = batch_event(&b, to_real(c, now_mono), "cpu_late", q->probe->cpu, -1,
                                        "CPU %d had not handed over interval %" PRIu64 " when "
                                        "its grace time ran out; its data follows later",
                                        q->probe->cpu, k);
                        if (r < 0)
                                goto out;
                        late[i] = true;
                }
        }

        if (b.nrows == 0) {
                /* Every CPU is late (a stall of the whole machine): there is no interval to
                 * attach the events to, but they are worth keeping. */
                for (size_t i = 0; i < b.nevents; i++) {
                        heartbeat_enter(c->p.storage_beat);
                        r = store_add_event(c->store, c->run_id, &b.events[i]);
                        heartbeat_leave(c->p.storage_beat);
                        if (r < 0) {
                                log_error("Failed to store an event: %s", store_error(c->store));
                                goto out;
                        }
                }
        } else {
                struct store_interval iv = {
                        .run_id = c->run_id,
                        .seq = c->next_seq,
                        .start_ns = start,
                        .length_ns = (uint64_t) (end - start),
                        .cpus = b.rows,
                        .ncpus = b.nrows,
                        .events = b.events,
                        .nevents = b.nevents,
                };
                if (c->p.annotate)
                        c->p.annotate(c->p.userdata, k, &iv);
                heartbeat_enter(c->p.storage_beat);
                r = store_write_interval(c->store, &iv);
                heartbeat_leave(c->p.storage_beat);
                if (r < 0) {
                        c->stats.write_failures++;
                        log_error("Failed to store interval %" PRIu64 ": %s (keeping it in "
                                  "memory, will retry)",
                                  c->next_seq, store_error(c->store));
                        goto out;
                }
                c->next_seq++;
                c->stats.intervals_written++;
                c->stats.last_max_ns = worst;
                c->stats.last_max_cpu = worst_cpu;
        }

        /* Stored: only now forget what was written, so a failed write is retried whole. */
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
        r = b.nrows > 0;
out:
        free(late);
        batch_done(&b);
        return r;
}

static bool interval_complete(const struct collector *c, uint64_t k, int64_t now_mono) {
        int64_t end = interval_start(c->p.base_mono_ns, (int64_t) c->p.period_ns, k + 1);
        if (now_mono >= end + (int64_t) c->p.grace_ns)
                return true;
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

int collector_poll(struct collector *c, int64_t now_mono, bool final) {
        int written = 0, r;

        for (size_t i = 0; i < c->nq; i++) {
                r = drain(c, &c->q[i]);
                if (r < 0)
                        return r;
        }

        for (;;) {
                bool done_all = final || all_finished(c);
                if (!done_all && !interval_complete(c, c->write_k, now_mono))
                        break;
                if (done_all && !anything_held(c))
                        break;
                do {
                        r = write_one(c, c->write_k, now_mono);
                        if (r < 0)
                                return r;
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
        return written;
}

void collector_set_threshold(struct collector *c, uint64_t threshold_ns) {
        c->p.threshold_ns = threshold_ns;
}
