/* SPDX-License-Identifier: MIT */
/* Tests of the probe threads and their ring with real SCHED_FIFO threads: intervals are
 * contiguous, every wake-up is either a sample or a counted missed period, a full ring merges
 * intervals without losing samples, a probe given an end takes no sample and counts no period
 * after it, and setup failures say what failed. */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"
#include "hist.h"
#include "interval.h"
#include "macro.h"
#include "probe.h"
#include "timeutil.h"

#define LIMIT_US 1000

static bool can_rt(void) {
        struct sched_param sp = { .sched_priority = 1 };
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                return false;
        sp.sched_priority = 0;
        sched_setscheduler(0, SCHED_OTHER, &sp);
        return true;
}

static void sleep_ms(int ms) {
        struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
}

static struct probe_params params(uint64_t interval_ns, uint64_t period_ns) {
        int64_t now = now_ns(CLOCK_MONOTONIC);
        return (struct probe_params){
                .interval_ns = interval_ns,
                .threshold_ns = 50000,
                .hist_limit_us = LIMIT_US,
                .period_ns = period_ns,
                .base_mono_ns = interval_align(now, (int64_t) period_ns),
                .priority = 10,
                .stack_prefault = 16384,
        };
}

/* Started, pinned and waiting for go. */
static void ready(struct probe *p) {
        assert_int_equal(probe_start(p), 0);
        for (int i = 0; i < 5000 && probe_state(p) == PROBE_STARTING; i++)
                sleep_ms(1);
        assert_int_equal(probe_state(p), PROBE_READY);
}

static void start(struct probe *p, struct probe_control *ctl) {
        ready(p);
        atomic_store(&ctl->go, true);
}

struct totals {
        uint64_t samples, missed, slots, ring_full;
        int64_t first_start, last_end;
        uint64_t next_k;
        bool have;
};

static void consume(struct probe *p, struct totals *t) {
        struct probe_slot *s;
        while ((s = probe_peek(p))) {
                assert_true(s->last_k >= s->first_k);
                if (t->have && s->first_k != t->next_k)
                        fail_msg("slot covers %llu..%llu, expected to start at %llu",
                                 (unsigned long long) s->first_k, (unsigned long long) s->last_k,
                                 (unsigned long long) t->next_k);
                if (!t->have)
                        t->first_start = s->start_mono_ns;
                t->have = true;
                t->next_k = s->last_k + 1;
                t->last_end = s->end_mono_ns;
                /* The histogram holds exactly the samples; min/avg/max agree with it. */
                uint64_t total = 0, over = 0, over_strict = 0;
                for (uint32_t i = 0; i < hist_nbuckets(LIMIT_US); i++) {
                        total += s->hist[i];
                        if (i >= 50)
                                over += s->hist[i];
                        if (i >= 51)
                                over_strict += s->hist[i];
                }
                assert_int_equal(total, s->samples);
                if (s->samples > 0) {
                        assert_true(s->min_ns <= s->max_ns);
                        assert_true(s->sum_ns >= s->samples * s->min_ns);
                        assert_true(s->sum_ns <= s->samples * s->max_ns);
                        assert_true(s->max_time_mono_ns >= s->start_mono_ns);
                }
                /* Violations are samples over 50 us: between the 51 us and 50 us buckets. */
                assert_true(s->violations <= over && s->violations >= over_strict);
                assert_true(s->nviol <= PROBE_VIOL_MAX && s->nviol <= s->violations);
                for (uint32_t i = 0; i < s->nviol; i++)
                        assert_true(s->viol[i].value_ns > 50000);
                t->samples += s->samples;
                t->missed += s->missed;
                t->ring_full += s->ring_full;
                t->slots++;
                probe_release(p);
        }
}

static void test_intervals_contiguous(void **state) {
        struct probe_control ctl = {};
        struct probe *p;
        struct totals t = {};
        (void) state;
        if (!can_rt())
                skip();

        struct probe_params pp = params(500000, 50000000); /* 500 us, 50 ms intervals */
        assert_int_equal(probe_new(0, &pp, &ctl, &p), 0);
        start(p, &ctl);
        for (int i = 0; i < 40; i++) {
                sleep_ms(10);
                consume(p, &t);
        }
        atomic_store(&ctl.stop, true);
        for (int i = 0; i < 1000 && probe_state(p) != PROBE_DONE; i++)
                sleep_ms(1);
        assert_int_equal(probe_state(p), PROBE_DONE);
        consume(p, &t);
        assert_int_equal(probe_join(p), 0);

        /* About 400 ms of 50 ms intervals. */
        assert_true(t.slots >= 7 && t.slots <= 11);
        assert_int_equal(t.ring_full, 0);
        /* Every period was either measured or counted as missed. */
        uint64_t periods = (uint64_t) (t.last_end - t.first_start) / 500000;
        uint64_t seen = t.samples + t.missed;
        if (seen + 3 < periods || seen > periods + 3)
                fail_msg("%llu periods, %llu samples + %llu missed", (unsigned long long) periods,
                         (unsigned long long) t.samples, (unsigned long long) t.missed);
        probe_free(p);
}

static void test_full_ring_merges_without_loss(void **state) {
        struct probe_control ctl = {};
        struct probe *p;
        struct totals t = {};
        (void) state;
        if (!can_rt())
                skip();

        struct probe_params pp = params(1000000, 20000000); /* 1 ms, 20 ms intervals */
        assert_int_equal(probe_new(0, &pp, &ctl, &p), 0);
        start(p, &ctl);
        /* Read nothing for 15 intervals: the ring (8 slots) fills up. */
        sleep_ms(300);
        consume(p, &t);
        sleep_ms(60);
        atomic_store(&ctl.stop, true);
        for (int i = 0; i < 1000 && probe_state(p) != PROBE_DONE; i++) {
                consume(p, &t);
                sleep_ms(1);
        }
        consume(p, &t);
        assert_int_equal(probe_join(p), 0);

        assert_true(t.ring_full > 0);
        uint64_t periods = (uint64_t) (t.last_end - t.first_start) / 1000000;
        uint64_t seen = t.samples + t.missed;
        if (seen + 3 < periods || seen > periods + 3)
                fail_msg("%llu periods, %llu samples + %llu missed", (unsigned long long) periods,
                         (unsigned long long) t.samples, (unsigned long long) t.missed);
        probe_free(p);
}

/* A SCHED_FIFO thread above the probe, on its CPU, spinning from one time to another. */
struct spinner {
        int64_t from, to;
};

static void *spin_main(void *arg) {
        const struct spinner *s = arg;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        struct sched_param sp = { .sched_priority = 20 };
        if (sched_setaffinity(0, sizeof(set), &set) < 0 ||
            sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
                return (void *) 1;
        struct timespec at = { s->from / 1000000000, s->from % 1000000000 };
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        while (now_ns(CLOCK_MONOTONIC) < s->to)
                ;
        return NULL;
}

/* The run's end (--duration) is the probe's own: nothing is sampled or counted as missed
 * after it, though nobody tells the probe to stop, and though a stall runs across it. */
static void test_end_is_kept_across_a_stall(void **state) {
        struct probe_control ctl = {};
        struct probe *p;
        struct totals t = {};
        (void) state;
        if (!can_rt())
                skip();

        struct probe_params pp = params(1000000, 50000000); /* 1 ms, 50 ms intervals */
        assert_int_equal(probe_new(0, &pp, &ctl, &p), 0);
        ready(p);
        int64_t go = now_ns(CLOCK_MONOTONIC), end = go + 300 * 1000000LL;
        /* From 5 ms before the end to 30 ms after it. */
        struct spinner sp = { end - 5000000, end + 30000000 };
        pthread_t spin;
        assert_int_equal(pthread_create(&spin, NULL, spin_main, &sp), 0);
        atomic_store(&ctl.end_mono_ns, end);
        atomic_store(&ctl.go, true);
        for (int i = 0; i < 1000 && probe_state(p) != PROBE_DONE; i++) {
                consume(p, &t);
                sleep_ms(1);
        }
        void *spun;
        pthread_join(spin, &spun);
        assert_null(spun);
        assert_int_equal(probe_state(p), PROBE_DONE);
        consume(p, &t);
        assert_int_equal(probe_join(p), 0);

        /* 300 periods from go to the end at most; a few fewer by the probe's start. */
        uint64_t seen = t.samples + t.missed;
        if (seen > 300 || seen < 295)
                fail_msg("%llu samples + %llu missed, expected at most 300",
                         (unsigned long long) t.samples, (unsigned long long) t.missed);
        assert_true(t.missed >= 3);
        assert_true(t.last_end <= end);
        probe_free(p);
}

static void test_setup_failure_is_reported(void **state) {
        struct probe_control ctl = {};
        struct probe *p;
        (void) state;
        struct probe_params pp = params(1000000, 20000000);
        /* A CPU that does not exist cannot be pinned to. */
        assert_int_equal(probe_new(1000, &pp, &ctl, &p), 0);
        assert_int_equal(probe_start(p), 0);
        assert_int_equal(probe_join(p), 0);
        assert_int_equal(probe_state(p), PROBE_FAILED);
        assert_string_equal(p->stage, "affinity");
        assert_int_equal(p->error, -EINVAL);
        probe_free(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_intervals_contiguous),
                cmocka_unit_test(test_full_ring_merges_without_loss),
                cmocka_unit_test(test_end_is_kept_across_a_stall),
                cmocka_unit_test(test_setup_failure_is_reported),
        };
        return RUN_TESTS(tests);
}
