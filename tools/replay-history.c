/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's history of one machine: its intervals (each CPU's samples put into a real
 * histogram, the loads' throughput, synthetic trace captures) and events, a pure function of
 * the seed, the machine and the time. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "trace-analysis.h"
#include "trace-raw.h"

atomic_bool replay_failed;
atomic_uint replay_unsent_spikes, replay_unsent_downs;

void replay_new_boot_id(struct mstate *ms) {
        char text[128], hex[2 * SHA256_DIGEST_SIZE + 1];
        snprintf(text, sizeof(text), "boot %s %" PRIu64 " %" PRId64, ms->m->id, replay_opt.seed,
                 ms->run_id);
        sha256_hex(text, strlen(text), hex);
        snprintf(ms->boot_id, sizeof(ms->boot_id), "%.32s", hex);
}

_printf_(7, 8) int replay_add_event(struct worker *w, struct mstate *ms, int64_t time_ns,
                                    const char *type, int cpu, int64_t value, const char *fmt,
                                    ...) {
        if (w->nevents == w->cap_events) {
                size_t cap = w->cap_events ? 2 * w->cap_events : 16;
                struct summary_event *e = realloc(w->events, cap * sizeof(*e));
                if (!e)
                        return -ENOMEM;
                w->events = e;
                w->cap_events = cap;
        }
        char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        w->events[w->nevents++] = (struct summary_event){
                .id = ++ms->event_id,
                .time_ns = time_ns,
                .type = (char *) type,
                .cpu = cpu,
                .value = value,
                .message = msg,
        };
        return 0;
}

struct sample {
        uint64_t ns, count;
};

/* A trace capture of a spike as rtsoakd's flight recorder would make it: the named thread
 * held the CPU for 95 % of the latency, the timer interrupt for a little of the rest. */
static int make_trace(const struct spike *sp, struct summary_trace *t) {
        struct trace_analysis *a = calloc(1, sizeof(*a));
        t->analysis = a;
        if (!a)
                return -ENOMEM;
        uint64_t lat = sp->latency_ns;
        *a = (struct trace_analysis){
                .cpu = (int) sp->cpu,
                .time_ns = sp->time_ns,
                .latency_ns = lat,
                .timer_ns = MIN(lat / 100, 2000),
                .return_ns = MIN(lat / 100, 1000),
                .timer_seen = true,
                .switch_seen = true,
                .marker_seen = true,
                .lookback_ns = 20 * NSEC_PER_MSEC,
                .nevents = 4,
                .ncontribs = 2,
        };
        a->sched_ns = lat - a->timer_ns - a->return_ns;
        a->contribs[0] = (struct trace_contrib){ .kind = TRACE_CULPRIT_THREAD,
                                                 .pid = 4242,
                                                 .irq = -1,
                                                 .priority = 50,
                                                 .duration_ns = lat / 100 * 95,
                                                 .count = 1 };
        snprintf(a->contribs[0].name, sizeof(a->contribs[0].name), "%s", sp->culprit);
        snprintf(a->contribs[0].policy, sizeof(a->contribs[0].policy), "SCHED_FIFO");
        a->contribs[1] = (struct trace_contrib){ .kind = TRACE_CULPRIT_IRQ,
                                                 .pid = -1,
                                                 .irq = -1,
                                                 .duration_ns = lat / 100 * 3,
                                                 .count = 1 };
        snprintf(a->contribs[1].name, sizeof(a->contribs[1].name), "local_timer");
        trace_analysis_summarize(a);
        json_t *j = trace_analysis_to_json(a);
        t->json = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!t->json)
                return -ENOMEM;
        /* Raw events of the same story, as the machine would send them. */
        size_t len = 0;
        struct trace_event ev[3] = {
                { .ts_ns = -1000, .pid = 4242, .kind = TRACE_SWITCH },
                { .ts_ns = (int64_t) a->timer_ns, .pid = 4242, .kind = TRACE_WAKEUP },
                { .ts_ns = (int64_t) (lat - a->return_ns), .pid = 4242, .kind = TRACE_SWITCH },
        };
        snprintf(ev[0].u.sw.next_comm, TRACE_COMM_MAX, "%s", sp->culprit);
        snprintf(ev[0].u.sw.prev_comm, TRACE_COMM_MAX, "swapper/%u", sp->cpu);
        ev[0].u.sw.next_pid = 4242;
        ev[0].u.sw.next_prio = 49;
        snprintf(ev[1].u.wake.comm, TRACE_COMM_MAX, "rtsoak-cpu%u", sp->cpu);
        ev[1].u.wake.pid = 4000;
        ev[1].u.wake.target_cpu = (int32_t) sp->cpu;
        snprintf(ev[2].u.sw.prev_comm, TRACE_COMM_MAX, "%s", sp->culprit);
        snprintf(ev[2].u.sw.next_comm, TRACE_COMM_MAX, "rtsoak-cpu%u", sp->cpu);
        ev[2].u.sw.prev_pid = 4242;
        ev[2].u.sw.prev_prio = 49;
        ev[2].u.sw.next_pid = 4000;
        _cleanup_free_ char *text = NULL;
        size_t dropped;
        int r = trace_raw_text(ev, ELEMENTSOF(ev), (int) sp->cpu, 0, &text, &len);
        return r < 0 ? r : trace_raw_compress(text, len, 64 * 1024, &t->raw, &t->raw_len, &dropped);
}

/* One CPU of one interval: a plausible distribution around --latency (one sample at the
 * minimum, one at the maximum, most near the average, a thin tail between), plus the spikes,
 * put into a real histogram whose count is exactly the sample count. */
static int make_cpu(struct worker *w, struct mstate *ms, struct summary_cpu *out, uint32_t cpu,
                    int64_t t, const struct span *own, const struct spike *const *sp, size_t nsp) {
        struct sample s[24];
        size_t n = 0;
        uint64_t span_ns = (uint64_t) (own->to_ns - own->from_ns);
        uint64_t total = (uint64_t) ((double) (span_ns / replay_opt.probe_interval_ns) *
                                     replay_opt.samples_share),
                 left = total, missed = 0;
        uint64_t r = rnd(ms->key, (uint64_t) t, cpu);
        uint64_t L = replay_opt.latency_ns;
        uint64_t max0 = MAX(L - (uint64_t) ((double) L * 0.1 * frac(r)), 1);
        uint64_t min0 = MAX(L / 6, 1), avg0 = MAX(L / 3, min0);
        int64_t max_time = own->from_ns + (int64_t) (mix64(r) % span_ns);
        uint64_t best = 0;

        for (size_t i = 0; i < nsp && left > 0; i++, left--) {
                s[n++] = (struct sample){ sp[i]->latency_ns, 1 };
                if (sp[i]->latency_ns > replay_opt.probe_interval_ns)
                        missed += sp[i]->latency_ns / replay_opt.probe_interval_ns;
        }
        if (left > 0)
                s[n++] = (struct sample){ max0, 1 }, left--;
        if (left > 0)
                s[n++] = (struct sample){ min0, 1 }, left--;
        if (left > 0) {
                uint64_t q25 = left / 4, q20 = left / 5, tail = left / 20;
                uint64_t q50 = left - q25 - q20 - tail;
                s[n++] = (struct sample){ avg0, q50 };
                if (q25)
                        s[n++] = (struct sample){ avg0 > NSEC_PER_USEC ? avg0 - NSEC_PER_USEC : 0,
                                                  q25 };
                if (q20)
                        s[n++] = (struct sample){ avg0 + NSEC_PER_USEC, q20 };
                /* The tail: 8 steps from just above the average to just below the maximum. */
                for (unsigned k = 0; k < 8 && tail; k++) {
                        uint64_t c = tail / (8 - k);
                        tail -= c;
                        uint64_t lo = avg0 + 2 * NSEC_PER_USEC;
                        uint64_t v = lo + (max0 > lo ? (max0 - lo) * k / 8 : 0);
                        if (c)
                                s[n++] = (struct sample){ v, c };
                }
        }

        uint64_t mn = UINT64_MAX, mx = 0, viol = 0;
        unsigned __int128 sum = 0;
        for (size_t i = 0; i < n; i++) {
                /* Only the spikes may leave the typical range. */
                if (i >= nsp)
                        s[i].ns = MIN(MAX(s[i].ns, min0), max0);
                mn = MIN(mn, s[i].ns);
                if (s[i].ns > mx) {
                        mx = s[i].ns;
                        best = i;
                }
                sum += (unsigned __int128) s[i].ns * s[i].count;
                if (s[i].ns > replay_opt.threshold_ns)
                        viol += s[i].count;
        }
        if (best < nsp)
                max_time = sp[best]->time_ns;

        /* The histogram: only the touched buckets are cleared again. */
        for (size_t i = 0; i < n; i++) {
                uint32_t idx = hist_index(w->hist.limit_us, s[i].ns);
                if (!w->hist.counts[idx] && w->ntouched < ELEMENTSOF(w->touched))
                        w->touched[w->ntouched++] = idx;
                w->hist.counts[idx] += s[i].count;
        }
        uint8_t *buf = NULL;
        size_t len = 0;
        int ret = hist_encode(w->hist.limit_us, w->hist.counts, &buf, &len);
        for (size_t i = 0; i < w->ntouched; i++)
                w->hist.counts[w->touched[i]] = 0;
        w->ntouched = 0;
        if (ret < 0)
                return ret;

        *out = (struct summary_cpu){
                .cpu = cpu,
                .samples = total,
                .min_ns = total ? mn : 0,
                .avg_ns = total ? (uint64_t) (sum / total) : 0,
                .max_ns = total ? mx : 0,
                .max_time_ns = total ? max_time : own->from_ns,
                .violations = viol,
                .missed = missed,
                .hist_limit_us = w->hist.limit_us,
                .hist = buf,
                .hist_len = len,
        };
        return 0;
}

static uint64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
        int64_t lo = MAX(a0, b0), hi = MIN(a1, b1);
        return hi > lo ? (uint64_t) (hi - lo) : 0;
}

/* The part of [t, end) in which CPU c measured: the longest stretch outside its --probe-down
 * windows (empty: none). */
static struct span cpu_span(uint32_t c, int64_t t, int64_t end) {
        struct span best = { t, t };
        for (int64_t at = t; at < end;) {
                int64_t covered = at, next = end;
                for (size_t k = 0; k < replay_opt.npdowns; k++) {
                        const struct probe_down *d = &replay_opt.pdowns[k];
                        if (d->cpu != c)
                                continue;
                        if (d->from_ns <= at && d->to_ns > covered)
                                covered = d->to_ns;
                        else if (d->from_ns > at && d->from_ns < next)
                                next = d->from_ns;
                }
                if (covered > at) {
                        at = covered;
                        continue;
                }
                if (next - at > best.to_ns - best.from_ns)
                        best = (struct span){ at, next };
                at = next;
        }
        return best;
}

/* The CPUs of the interval [t, end) that measured, each over its own span, with the spikes
 * [first, last) that fell in it, and their violation events. */
static int make_interval_cpus(struct worker *w, struct mstate *ms, struct summary_interval *iv,
                              int64_t t, size_t first, size_t last) {
        int64_t end = t + (int64_t) replay_opt.interval_ns;
        char a[TIMESPAN_MAX_LEN];
        int r;

        for (uint32_t c = 0; c < replay_opt.cpus; c++) {
                struct span own = cpu_span(c, t, end);
                if (own.to_ns <= own.from_ns)
                        continue; /* absent from this interval */
                const struct spike *sp[16];
                size_t nsp = 0;
                for (size_t i = first; i < last; i++)
                        if (replay_opt.spikes[i].cpu == c && nsp < ELEMENTSOF(sp) &&
                            replay_opt.spikes[i].time_ns >= own.from_ns &&
                            replay_opt.spikes[i].time_ns < own.to_ns)
                                sp[nsp++] = &replay_opt.spikes[i];
                struct summary_cpu *x = &iv->cpus[iv->ncpus++];
                *x = (struct summary_cpu){};
                if ((r = make_cpu(w, ms, x, c, t, &own, sp, nsp)) < 0)
                        return r;
                if (own.from_ns != t || own.to_ns != end) {
                        x->span_start_ns = own.from_ns;
                        x->span_length_ns = (uint64_t) (own.to_ns - own.from_ns);
                }
                /* With --latency over --threshold the typical samples violate too: rtsoakd
                 * would record 32 of them one by one and count the rest in one event; here
                 * only the spikes are recorded one by one, the rest are counted. */
                uint64_t recorded = 0;
                for (size_t i = 0; i < nsp; i++)
                        recorded += sp[i]->latency_ns > replay_opt.threshold_ns;
                if (x->violations > recorded) {
                        r = replay_add_event(w, ms, t, "violations_unrecorded", (int) c,
                                             (int64_t) (x->violations - recorded),
                                             "%" PRIu64
                                             " more violations over %s on CPU %u in this "
                                             "interval were counted but not recorded one by one",
                                             x->violations - recorded,
                                             format_timespan(a, replay_opt.threshold_ns), c);
                        if (r < 0)
                                return r;
                }
                /* The synthetic captures of the spikes that name a thread. */
                for (size_t i = 0; i < nsp; i++)
                        if (sp[i]->culprit[0] && iv->ntraces < SUMMARY_MAX_TRACES) {
                                if (!iv->traces &&
                                    !(iv->traces = calloc(SUMMARY_MAX_TRACES, sizeof(*iv->traces))))
                                        return -ENOMEM;
                                if ((r = make_trace(sp[i], &iv->traces[iv->ntraces++])) < 0)
                                        return r;
                        }
                /* The violations, in time order as rtsoakd records them. */
                for (size_t i = 0; i < nsp; i++)
                        if (sp[i]->latency_ns > replay_opt.threshold_ns &&
                            (r = replay_add_event(w, ms, sp[i]->time_ns, "violation", (int) c,
                                                  (int64_t) sp[i]->latency_ns, "%s", "")) < 0)
                                return r;
        }
        return 0;
}

/* How much of [t, end) generator gen ran with all its metrics 0 (--load-zero). */
static uint64_t zero_ns(const char *gen, int64_t t, int64_t end) {
        uint64_t z = 0;
        for (size_t k = 0; k < replay_opt.nzeros; k++)
                if (strcmp(replay_opt.zeros[k].generator, gen) == 0)
                        z += overlap(t, end, replay_opt.zeros[k].from_ns,
                                     replay_opt.zeros[k].to_ns);
        return MIN(z, replay_opt.interval_ns);
}

/* The load generators of the interval [t, end) of scenario sc, and their exits. */
static int make_interval_loads(struct worker *w, struct mstate *ms, struct summary_interval *iv,
                               struct summary_metric *mets, const struct scenario *sc, int64_t t,
                               int64_t step_start) {
        int64_t end = t + (int64_t) replay_opt.interval_ns;
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        bool fresh = t == step_start || t == ms->run_start_ns;
        for (size_t i = 0; i < sc->nloads; i++) {
                const struct load_def *ld = &sc->loads[i];
                uint64_t up = replay_opt.interval_ns;
                uint32_t starts = fresh, exits = 0;
                for (size_t k = 0; k < replay_opt.ndowns; k++) {
                        const struct load_down *d = &replay_opt.downs[k];
                        if (strcmp(d->generator, ld->generator) != 0)
                                continue;
                        int64_t dend = d->time_ns + (int64_t) d->span_ns;
                        up -= MIN(up, overlap(t, end, d->time_ns, dend));
                        if (d->time_ns >= t && d->time_ns < end)
                                exits++;
                        if (dend >= t && dend < end)
                                starts++;
                }
                /* Up, but working only outside its --load-zero windows. */
                double working =
                        (double) up *
                        (double) (replay_opt.interval_ns - zero_ns(ld->generator, t, end)) /
                        (double) replay_opt.interval_ns;
                struct summary_metric *m = &mets[i * 4];
                for (size_t k = 0; k < ld->nmetrics; k++) {
                        double jitter =
                                1.0 +
                                0.05 * (2 * frac(rnd(ms->key, (uint64_t) t, 1000 + i * 8 + k)) - 1);
                        m[k] = (struct summary_metric){
                                .name = (char *) ld->metrics[k].name,
                                .unit = (char *) ld->metrics[k].unit,
                                .value = ld->metrics[k].full * jitter * working /
                                         (double) replay_opt.interval_ns,
                        };
                }
                iv->loads[i] = (struct summary_load){
                        .generator = (char *) ld->generator,
                        .up_ns = up,
                        .starts = starts,
                        .exits = exits,
                        .metrics = m,
                        .nmetrics = ld->nmetrics,
                };
        }
        for (size_t k = 0; k < replay_opt.ndowns; k++) {
                const struct load_down *d = &replay_opt.downs[k];
                if (d->time_ns < t || d->time_ns >= end)
                        continue;
                size_t idx = 0;
                for (; idx < sc->nloads; idx++)
                        if (strcmp(sc->loads[idx].generator, d->generator) == 0)
                                break;
                int64_t since = MAX(step_start, ms->run_start_ns);
                uint64_t ran = (uint64_t) (d->time_ns - since);
                int r = replay_add_event(
                        w, ms, d->time_ns, "load_exit", -1, 1,
                        "%s #%zu of scenario %s (pid %u) exited with status 1 after "
                        "%s; restarting in %s",
                        d->generator, idx + 1, sc->name,
                        (unsigned) (1000 + rnd(ms->key, (uint64_t) d->time_ns, k) % 60000),
                        format_timespan(a, ran / NSEC_PER_MSEC * NSEC_PER_MSEC),
                        format_timespan(b, d->span_ns));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Shifts every stamp of the interval and of the events from ev0 on (--clock-ahead). */
static void shift_stamps(struct worker *w, struct summary_interval *iv, size_t ev0, int64_t shift) {
        iv->start_ns += shift;
        for (size_t c = 0; c < iv->ncpus; c++) {
                iv->cpus[c].max_time_ns += shift;
                if (iv->cpus[c].span_length_ns)
                        iv->cpus[c].span_start_ns += shift;
        }
        for (size_t e = ev0; e < w->nevents; e++)
                w->events[e].time_ns += shift;
}

/* The interval that starts at t: 0 when made, 1 when no CPU measured in it (not sent). */
int replay_make_interval(struct worker *w, struct mstate *ms, int64_t t) {
        int64_t end = t + (int64_t) replay_opt.interval_ns, step_start;
        const struct schedule_step *st = replay_step_at(t, &step_start);
        const struct scenario *sc = st->scenario;
        struct summary_interval *iv = &w->ivs[w->nivs];
        size_t ev0 = w->nevents;
        int r;

        bool any = false;
        for (uint32_t c = 0; c < replay_opt.cpus && !any; c++) {
                struct span own = cpu_span(c, t, end);
                any = own.to_ns > own.from_ns;
        }
        if (!any)
                return 1;
        *iv = (struct summary_interval){
                .seq = ms->seq,
                .start_ns = t,
                .length_ns = replay_opt.interval_ns,
                .scenario = (char *) sc->name,
                .cpus = &w->cpus[w->nivs * replay_opt.cpus],
                .loads = &w->loads[w->nivs * 4],
                .nloads = sc->nloads,
        };
        w->nivs++; /* from here on, flushing frees what it holds */

        /* Spikes before this interval were in no interval that was sent. */
        while (ms->next_spike < replay_opt.nspikes &&
               replay_opt.spikes[ms->next_spike].time_ns < t) {
                if (ms->m == &replay_machines[0])
                        atomic_fetch_add(&replay_unsent_spikes, 1);
                ms->next_spike++;
        }
        size_t first = ms->next_spike, last = first;
        while (last < replay_opt.nspikes && replay_opt.spikes[last].time_ns < end)
                last++;
        ms->next_spike = last;

        if ((r = make_interval_cpus(w, ms, iv, t, first, last)) < 0 ||
            (r = make_interval_loads(w, ms, iv, &w->mets[(w->nivs - 1) * 16], sc, t, step_start)) <
                    0)
                return r;
        shift_stamps(w, iv, ev0, replay_clock_shift(t));
        ms->seq++;
        ms->last_data_ns = end;
        return 0;
}
