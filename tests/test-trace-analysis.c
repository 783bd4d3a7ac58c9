/* SPDX-License-Identifier: MIT */
/* The analysis of a capture on event sequences written by hand (a higher-priority thread, a
 * hard interrupt, a softirq, a late timer while idle, a look-back that does not reach, a
 * switch the kernel did not trace), its JSON with every kind of bad input, the raw events'
 * size cap, and the traces member of the summary. */
#include <errno.h>
#include <jansson.h>

#include "tests.h"
#include "base64.h"
#include "hist.h"
#include "macro.h"
#include "summary.h"
#include "trace-analysis.h"
#include "trace-raw.h"

#define DUE INT64_C(1000000000)
#define US 1000
#define PROBE 500
#define T0 INT64_C(1796300000000000000)

/* ---- building event sequences ---- */

struct seq {
        struct trace_event ev[64];
        size_t n;
        int32_t cur; /* the current task */
};

static struct trace_event *add(struct seq *s, int64_t t_us, uint8_t kind) {
        struct trace_event *e = &s->ev[s->n++];
        *e = (struct trace_event){ .ts_ns = DUE + t_us * US, .pid = s->cur, .kind = kind };
        return e;
}

static void sw(struct seq *s, int64_t t, const char *prev, int32_t ppid, int32_t pprio,
               const char *next, int32_t npid, int32_t nprio) {
        struct trace_event *e = add(s, t, TRACE_SWITCH);
        snprintf(e->u.sw.prev_comm, TRACE_COMM_MAX, "%s", prev);
        snprintf(e->u.sw.next_comm, TRACE_COMM_MAX, "%s", next);
        e->u.sw.prev_pid = ppid;
        e->u.sw.prev_prio = pprio;
        e->u.sw.next_pid = npid;
        e->u.sw.next_prio = nprio;
        s->cur = npid;
}

static void wake(struct seq *s, int64_t t, const char *comm, int32_t pid, int32_t prio) {
        struct trace_event *e = add(s, t, TRACE_WAKEUP);
        snprintf(e->u.wake.comm, TRACE_COMM_MAX, "%s", comm);
        e->u.wake.pid = pid;
        e->u.wake.prio = prio;
}

static void vec(struct seq *s, int64_t t, bool entry) {
        struct trace_event *e = add(s, t, entry ? TRACE_VECTOR_ENTRY : TRACE_VECTOR_EXIT);
        snprintf(e->u.vector.name, TRACE_NAME_MAX, "local_timer");
        e->u.vector.vector = 236;
}

static void irq(struct seq *s, int64_t t, bool entry, int32_t nr, const char *name) {
        struct trace_event *e = add(s, t, entry ? TRACE_IRQ_ENTRY : TRACE_IRQ_EXIT);
        e->u.irq.irq = nr;
        snprintf(e->u.irq.name, TRACE_NAME_MAX, "%s", name);
}

static void softirq(struct seq *s, int64_t t, bool entry, uint32_t v) {
        add(s, t, entry ? TRACE_SOFTIRQ_ENTRY : TRACE_SOFTIRQ_EXIT)->u.softirq.vec = v;
}

/* The probe's timer expiring at t: the interrupt, the hrtimer, the probe's wake-up. */
static void timer_fires(struct seq *s, int64_t t) {
        vec(s, t, true);
        struct trace_event *e = add(s, t + 1, TRACE_HRTIMER_ENTRY);
        e->flags = TRACE_FLAG_HARDIRQ;
        e->u.hrtimer.function = 0xffffffff8142d170;
        wake(s, t + 2, "rtsoak-cpu1", PROBE, 4);
        add(s, t + 3, TRACE_HRTIMER_EXIT);
        vec(s, t + 5, false);
}

static void marker(struct seq *s, int64_t t) {
        snprintf(add(s, t, TRACE_MARKER)->u.marker.text, TRACE_TEXT_MAX, "rtsoak late");
}

/* The probe is switched in at t, from task name (pid, prio), and writes its marker. */
static void probe_in(struct seq *s, int64_t t, const char *name, int32_t pid, int32_t prio) {
        sw(s, t, name, pid, prio, "rtsoak-cpu1", PROBE, 4);
        s->cur = PROBE;
        marker(s, t + 3);
}

/* A thread at kernel priority prio spins from before the due time to 20 ms past it; the
 * probe runs then and writes its marker. */
static void spinner(struct seq *s, const char *name, int32_t pid, int32_t prio) {
        sw(s, -5000, "swapper/1", 0, 120, name, pid, prio);
        timer_fires(s, 4);
        probe_in(s, 20000, name, pid, prio);
}

static struct trace_analysis analyze(struct seq *s, uint64_t lat_us) {
        struct trace_wakeup w = {
                .cpu = 1, .probe_pid = PROBE, .due_ns = DUE, .latency_ns = lat_us * US
        };
        struct trace_analysis a;
        assert_int_equal(trace_analyze(s->ev, s->n, &w, &a), 0);
        return a;
}

/* ---- the cases ---- */

/* A SCHED_FIFO 90 thread spins from before the due time: the timer fires in time, the probe
 * waits for the spinner. */
static void test_higher_priority_thread(void **state) {
        struct seq s = { .cur = 0 };
        spinner(&s, "spinner", 77, 9);
        struct trace_analysis a = analyze(&s, 20002);
        assert_true(a.timer_seen && a.switch_seen && a.marker_seen);
        assert_int_equal(a.timer_ns, 5 * US);           /* the hrtimer expiry */
        assert_int_equal(a.sched_ns, (20000 - 5) * US); /* to the switch-in */
        assert_int_equal(a.return_ns, 2 * US);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_THREAD);
        assert_string_equal(a.culprit.name, "spinner");
        assert_int_equal(a.culprit.pid, 77);
        assert_int_equal(a.culprit.duration_ns, (20000 - 5) * US); /* less the interrupt */
        assert_string_equal(a.culprit.policy, "RT");
        assert_int_equal(a.culprit.priority, 90);
        assert_int_equal(a.lookback_ns, 5000 * US);
        assert_string_equal(a.summary,
                            "thread spinner (pid 77, RT 90) ran 20.00 ms of the 20.00 ms");
        /* The timer interrupt, and inside it the hrtimer callback that woke the probe. */
        assert_int_equal(a.ncontribs, 3);
        assert_string_equal(a.contribs[1].name, "local_timer");
        assert_int_equal(a.contribs[1].duration_ns, 3 * US);
        assert_int_equal(a.contribs[2].kind, TRACE_CULPRIT_IRQ);
        assert_string_equal(a.contribs[2].name, "hrtimer 0xffffffff8142d170");
        assert_int_equal(a.contribs[2].duration_ns, 2 * US);
        /* A policy learnt elsewhere (from /proc) shows in the summary. */
        snprintf(a.contribs[0].policy, sizeof(a.contribs[0].policy), "SCHED_FIFO");
        trace_analysis_summarize(&a);
        assert_string_equal(a.summary,
                            "thread spinner (pid 77, SCHED_FIFO 90) ran 20.00 ms of the 20.00 ms");
}

/* A switch record whose priority is no kernel priority (a damaged record): no policy is
 * guessed, and the analysis reads back as JSON (a priority out of range is refused there). */
static void test_priority_out_of_range(void **state) {
        static const int32_t bad[] = { 7586538, 140, -2, INT32_MIN + 1 };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct seq s = { .cur = 0 };
                spinner(&s, "spinner", 77, bad[i]);
                struct trace_analysis a = analyze(&s, 20002), back;
                assert_string_equal(a.culprit.name, "spinner");
                assert_string_equal(a.culprit.policy, "");
                assert_string_equal(a.summary,
                                    "thread spinner (pid 77) ran 20.00 ms of the 20.00 ms");
                char err[TRACE_ERROR_MAX];
                a.time_ns = T0;
                json_t *j = trace_analysis_to_json(&a);
                assert_non_null(j);
                if (trace_analysis_from_json(j, &back, err) < 0)
                        fail_msg("priority %d: %s", bad[i], err);
                json_decref(j);
        }
        /* The edges that are kernel priorities: deadline, and nice 19. */
        struct seq s = { .cur = 0 };
        spinner(&s, "batch", 78, 139);
        struct trace_analysis a = analyze(&s, 20002);
        assert_string_equal(a.culprit.policy, "SCHED_OTHER");
        assert_int_equal(a.culprit.priority, 19);
        s = (struct seq){ .cur = 0 };
        spinner(&s, "dl", 79, -1);
        a = analyze(&s, 20002);
        assert_string_equal(a.culprit.policy, "SCHED_DEADLINE");
}

/* A task's name is any bytes the task chose (prctl), even none: the analysis names it so
 * that its JSON can be written and reads back (the store refuses what does not), and two
 * stretches of one oddly named irq are one contributor. */
static void test_names_from_the_kernel(void **state) {
        static const struct {
                const char *comm, *name;
        } cases[] = {
                { "", "<unnamed>" },
                { "a\xff\xfe b", "a?? b" },
                { "\xc3", "?" },                  /* a sequence cut short */
                { "caf\xc3\xa9", "caf\xc3\xa9" }, /* UTF-8 stays */
                { "\xe2\x80\xae!", "?!" },        /* a bidirectional override */
                { "a\xc2\x85"
                  "b",
                  "a?b" }, /* a C1 control */
                { "x\x7fy", "x?y" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct seq s = { .cur = 0 };
                spinner(&s, cases[i].comm, 77, 9);
                struct trace_analysis a = analyze(&s, 20002), back;
                a.time_ns = T0;
                assert_string_equal(a.culprit.name, cases[i].name);
                json_t *j = trace_analysis_to_json(&a);
                if (!j)
                        fail_msg("case %zu: no JSON", i);
                char err[TRACE_ERROR_MAX];
                if (trace_analysis_from_json(j, &back, err) < 0)
                        fail_msg("case %zu: %s", i, err);
                assert_string_equal(back.culprit.name, cases[i].name);
                json_decref(j);
        }
        struct seq s = { .cur = 0 };
        sw(&s, -5000, "swapper/1", 0, 120, "spinner", 77, 9);
        irq(&s, -100, true, 30, "d\xffv");
        irq(&s, -50, false, 30, "d\xffv");
        irq(&s, 100, true, 30, "d\xffv");
        irq(&s, 200, false, 30, "d\xffv");
        timer_fires(&s, 400);
        probe_in(&s, 20000, "spinner", 77, 9);
        struct trace_analysis a = analyze(&s, 20002);
        size_t named = 0;
        for (size_t i = 0; i < a.ncontribs; i++)
                named += strcmp(a.contribs[i].name, "d?v") == 0;
        assert_int_equal(named, 1);
}

/* A device interrupt's handler runs across the due time; the timer interrupt waits for it. */
static void test_hard_irq(void **state) {
        struct seq s = { .cur = 0 };
        sw(&s, -1000, "swapper/1", 0, 120, "bash", 300, 120);
        irq(&s, -10, true, 11, "virtio0");
        irq(&s, 300, false, 11, "virtio0");
        timer_fires(&s, 301);
        probe_in(&s, 308, "bash", 300, 120);
        struct trace_analysis a = analyze(&s, 309);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_IRQ);
        assert_int_equal(a.culprit.irq, 11);
        assert_string_equal(a.culprit.name, "virtio0");
        assert_int_equal(a.culprit.duration_ns, 300 * US);
        assert_int_equal(a.timer_ns, 302 * US);
        assert_string_equal(a.summary, "irq 11 (virtio0) ran 300 µs of the 309 µs");
        /* The task under the interrupts is charged only its own time, between them. */
        assert_string_equal(a.contribs[1].name, "bash");
        assert_int_equal(a.contribs[1].duration_ns, 3 * US);
        assert_int_equal(a.contribs[1].count, 2);
        assert_string_equal(a.contribs[1].policy, "SCHED_OTHER");
        assert_int_equal(a.contribs[1].priority, 0);
        assert_string_equal(a.contribs[2].name, "local_timer");
}

/* A softirq (run on the way out of an interrupt) holds the CPU. */
static void test_softirq(void **state) {
        struct seq s = { .cur = 0 };
        sw(&s, -1000, "swapper/1", 0, 120, "iperf", 400, 120);
        irq(&s, -20, true, 24, "eth0");
        irq(&s, -15, false, 24, "eth0");
        softirq(&s, -14, true, 3);
        softirq(&s, 180, false, 3);
        timer_fires(&s, 181);
        sw(&s, 190, "iperf", 400, 120, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 192);
        struct trace_analysis a = analyze(&s, 191);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_SOFTIRQ);
        assert_string_equal(a.culprit.name, "NET_RX");
        assert_int_equal(a.culprit.duration_ns, 180 * US);
        assert_string_equal(a.summary, "softirq NET_RX ran 180 µs of the 191 µs");
}

/* Idle all along, and the timer's interrupt came 400 us late: nothing on the CPU is to blame. */
static void test_idle_late_timer(void **state) {
        struct seq s = { .cur = PROBE };
        sw(&s, -150, "rtsoak-cpu1", PROBE, 4, "swapper/1", 0, 120);
        timer_fires(&s, 400);
        sw(&s, 410, "swapper/1", 0, 120, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 413);
        struct trace_analysis a = analyze(&s, 412);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_UNKNOWN);
        assert_string_equal(a.culprit.name, "idle");
        assert_int_equal(a.timer_ns, 401 * US);
        if (!strstr(a.summary, "unknown: the CPU was idle 405 µs of the 412 µs"))
                fail_msg("summary: %s", a.summary);
}

/* The events start after the due time (look-back too short): the rest is not explained. */
static void test_not_covered(void **state) {
        struct seq s = { .cur = 90 };
        timer_fires(&s, 700);
        sw(&s, 900, "dd", 90, 120, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 902);
        struct trace_analysis a = analyze(&s, 901);
        assert_int_equal(a.lookback_ns, 0);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_UNKNOWN);
        assert_string_equal(a.culprit.name, "not in the trace");
        assert_int_equal(a.culprit.duration_ns, 700 * US);
        assert_non_null(strstr(a.summary, "came before the oldest traced event"));
}

/* Leaving the idle task is not traced by every kernel: the task seen next is charged from the
 * end of the interrupt that woke it. */
static void test_untraced_switch_from_idle(void **state) {
        struct seq s = { .cur = PROBE };
        sw(&s, -3000, "rtsoak-cpu1", PROBE, 4, "swapper/1", 0, 120);
        vec(&s, -60, true);
        wake(&s, -58, "stall", 66, 9);
        vec(&s, -50, false);
        s.cur = 66; /* no switch event */
        timer_fires(&s, 8);
        sw(&s, 20000, "stall", 66, 9, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 20004);
        struct trace_analysis a = analyze(&s, 20003);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_THREAD);
        assert_string_equal(a.culprit.name, "stall");
        assert_int_equal(a.culprit.pid, 66);
        assert_int_equal(a.culprit.priority, 90);
        assert_int_equal(a.culprit.duration_ns, (20000 - 5) * US);
}

/* The trace clock and the probe's clock read differ by a little: the switch-in may show a
 * moment after the probe read its clock.  The parts still add up to the latency. */
static void test_parts_add_up(void **state) {
        struct seq s = { .cur = 0 };
        sw(&s, -5000, "swapper/1", 0, 120, "spinner", 77, 9);
        timer_fires(&s, 4);
        sw(&s, 20000, "spinner", 77, 9, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 20003);
        struct trace_analysis a = analyze(&s, 19999);
        assert_int_equal(a.timer_ns + a.sched_ns + a.return_ns, 19999 * US);
        assert_int_equal(a.return_ns, 0);
        char err[TRACE_ERROR_MAX];
        struct trace_analysis b;
        a.time_ns = T0;
        json_t *j = trace_analysis_to_json(&a);
        assert_int_equal(trace_analysis_from_json(j, &b, err), 0);
        json_decref(j);
}

static void test_no_events(void **state) {
        struct seq s = { .cur = 0 };
        struct trace_analysis a = analyze(&s, 250);
        assert_false(a.timer_seen || a.switch_seen || a.marker_seen);
        assert_int_equal(a.culprit.kind, TRACE_CULPRIT_UNKNOWN);
        assert_int_equal(a.ncontribs, 1);
        assert_int_equal(a.culprit.duration_ns, 250 * US);
}

/* ---- JSON ---- */

static struct trace_analysis sample(void) {
        struct seq s = { .cur = 0 };
        sw(&s, -100, "swapper/1", 0, 120, "kworker/1:2", 211, 49);
        timer_fires(&s, 10);
        sw(&s, 480, "kworker/1:2", 211, 49, "rtsoak-cpu1", PROBE, 4);
        s.cur = PROBE;
        marker(&s, 482);
        struct trace_analysis a = analyze(&s, 481);
        a.time_ns = T0;
        a.skipped = 3;
        return a;
}

static void test_json_roundtrip(void **state) {
        struct trace_analysis a = sample(), b;
        char err[TRACE_ERROR_MAX];
        json_t *j = trace_analysis_to_json(&a);
        assert_non_null(j);
        assert_int_equal(trace_analysis_from_json(j, &b, err), 0);
        json_decref(j);
        assert_int_equal(b.cpu, 1);
        assert_int_equal(b.time_ns, T0);
        assert_int_equal(b.latency_ns, a.latency_ns);
        assert_int_equal(b.timer_ns, a.timer_ns);
        assert_int_equal(b.sched_ns, a.sched_ns);
        assert_int_equal(b.skipped, 3);
        assert_string_equal(b.summary, a.summary);
        assert_string_equal(b.summary,
                            "thread kworker/1:2 (pid 211, RT 50) ran 475 µs of the 481 µs");
        assert_int_equal(b.culprit.kind, TRACE_CULPRIT_THREAD);
        assert_int_equal(b.culprit.pid, 211);
        assert_int_equal(b.ncontribs, a.ncontribs);
        for (size_t i = 0; i < a.ncontribs; i++) {
                assert_string_equal(b.contribs[i].name, a.contribs[i].name);
                assert_int_equal(b.contribs[i].duration_ns, a.contribs[i].duration_ns);
                assert_int_equal(b.contribs[i].count, a.contribs[i].count);
        }
}

/* Each mutation of a good analysis must be refused, naming the field. */
static void test_json_refused(void **state) {
        static const struct {
                const char *path, *value; /* value as JSON; NULL removes the member */
                const char *error;
        } cases[] = {
                { "cpu", "-1", "cpu: -1 is out of range" },
                { "cpu", "8192", "cpu: 8192 is out of range" },
                { "time_ns", "5", "time_ns: 5 is out of range" },
                { "latency_ns", "\"20\"", "latency_ns: not an integer" },
                { "latency_ns", "1", "latency_ns: less than timer_ns + sched_ns + return_ns" },
                { "timer_seen", "1", "timer_seen: not true or false" },
                { "summary", "\"\"", "summary: length 0 is out of range" },
                { "summary", "\"a\\u0001b\"", "summary: a control character U+0001 at byte 1" },
                { "summary", NULL, "summary: missing" },
                { "extra", "1", "extra: unknown field" },
                { "culprit.kind", "\"demon\"", "culprit.kind: \"demon\" is not thread" },
                { "culprit.pid", "null", "culprit.pid: a thread needs its pid" },
                { "culprit.count", "1", "culprit.count: unknown field" },
                { "culprit.priority", "100", "culprit.priority: 100 is out of range" },
                { "contributors", "{}", "contributors: not an array" },
                { "contributors.0.kind", "\"irq\"", "contributors[0].pid: only a thread has one" },
                { "contributors.0.count", NULL, "contributors[0].count: missing" },
        };
        struct trace_analysis a = sample(), b;
        char err[TRACE_ERROR_MAX];
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *j = trace_analysis_to_json(&a), *o = j;
                char path[64];
                snprintf(path, sizeof(path), "%s", cases[i].path);
                char *key = path, *dot;
                while ((dot = strchr(key, '.'))) {
                        *dot = 0;
                        o = json_is_array(o) ? json_array_get(o, (size_t) atoi(key))
                                             : json_object_get(o, key);
                        key = dot + 1;
                }
                if (json_is_array(o))
                        o = json_array_get(o, (size_t) atoi(key));
                if (cases[i].value)
                        json_object_set_new(o, key,
                                            json_loads(cases[i].value, JSON_DECODE_ANY, NULL));
                else
                        json_object_del(o, key);
                int r = trace_analysis_from_json(j, &b, err);
                json_decref(j);
                if (r != -EBADMSG || !strstr(err, cases[i].error))
                        fail_msg("%s=%s: expected \"%s\", got %d \"%s\"", cases[i].path,
                                 cases[i].value ?: "(removed)", cases[i].error, r, err);
        }
}

/* ---- the raw events ---- */

static void test_raw_cap(void **state) {
        char *text = NULL, *back = NULL;
        size_t len = 0, blen, dropped;
        uint8_t *z;
        size_t zlen;
        FILE *f = open_memstream(&text, &len);
        /* Lines that do not compress much: 4000 of them. */
        for (unsigned i = 0; i < 4000; i++)
                fprintf(f, "+%7u.%03u us [001] event %08x %08x\n", i, i * 7 % 1000, i * 2654435761u,
                        i * 40503u);
        fclose(f);
        assert_int_equal(trace_raw_compress(text, len, 1 << 20, &z, &zlen, &dropped), 0);
        assert_int_equal(dropped, 0);
        assert_int_equal(trace_raw_inflate(z, zlen, TRACE_RAW_TEXT_MAX, &back, &blen), 0);
        assert_int_equal(blen, len);
        assert_memory_equal(back, text, len);
        free(back);
        free(z);
        /* Under a small cap the oldest lines go and the first line says how many. */
        assert_int_equal(trace_raw_compress(text, len, 8192, &z, &zlen, &dropped), 0);
        assert_true(zlen <= 8192);
        assert_true(dropped > 0 && dropped < 4000);
        assert_int_equal(trace_raw_inflate(z, zlen, TRACE_RAW_TEXT_MAX, &back, &blen), 0);
        char head[96];
        snprintf(head, sizeof(head), "[%zu earlier events of 4000 left out", dropped);
        assert_true(strncmp(back, head, strlen(head)) == 0);
        /* The newest line is kept. */
        assert_non_null(strstr(back, "+   3999."));
        /* Inflating beyond a bound, or what is not zlib, is refused. */
        char *x;
        assert_int_equal(trace_raw_inflate(z, zlen, 100, &x, NULL), -EBADMSG);
        assert_int_equal(
                trace_raw_inflate((const uint8_t *) "not zlib at all", 15, 1 << 20, &x, NULL),
                -EBADMSG);
        free(back);
        free(z);
        free(text);
}

/* ---- the summary's traces ---- */

static char *summary_with(const char *traces_json) {
        static uint64_t zeros[2048];
        uint8_t *h;
        size_t hlen;
        char *s = NULL;
        if (hist_encode(1000, zeros, &h, &hlen) < 0)
                return NULL;
        char *hb = base64_encode(h, hlen);
        free(h);
        if (asprintf(&s,
                     "{\"schema\":\"rtsoak.summary/1\",\"machine\":{\"id\":"
                     "\"0123456789abcdef0123456789abcdef\",\"hostname\":\"h\",\"cpu_model\":\"x\","
                     "\"cpus\":2},\"run\":{\"id\":1,\"boot_id\":"
                     "\"fedcba9876543210fedcba9876543210\",\"kernel_release\":\"6.6-rt\","
                     "\"kernel_version\":\"#1\",\"kernel_cmdline\":\"\",\"preempt_model\":\"RT\","
                     "\"daemon_version\":\"0.1.0\",\"config_digest\":"
                     "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\","
                     "\"start_ns\":%lld,\"threshold_ns\":100000,\"probe_interval_ns\":200000,"
                     "\"interval_ns\":60000000000},\"seq\":1,\"intervals\":[{\"seq\":1,"
                     "\"start_ns\":%lld,\"length_ns\":60000000000,\"scenario\":null,\"cpus\":[{"
                     "\"cpu\":1,\"samples\":0,\"min_ns\":0,\"avg_ns\":0,\"max_ns\":0,"
                     "\"max_time_ns\":%lld,\"violations\":0,\"missed\":0,\"hist_limit_us\":1000,"
                     "\"hist\":\"%s\"}],\"loads\":[]%s%s}],\"events\":[]}",
                     (long long) T0, (long long) T0, (long long) T0, hb, traces_json ? "," : "",
                     traces_json ?: "") < 0)
                s = NULL;
        free(hb);
        return s;
}

static void test_summary_traces(void **state) {
        struct trace_analysis a = sample();
        char err[SUMMARY_ERROR_MAX];
        uint8_t *z;
        size_t zlen, dropped;
        assert_int_equal(trace_raw_compress("one event\n", 10, 4096, &z, &zlen, &dropped), 0);
        char *b64 = base64_encode(z, zlen);
        json_t *aj = trace_analysis_to_json(&a);
        char *ajs = json_dumps(aj, JSON_COMPACT);
        json_decref(aj);
        char *good = NULL, *text = NULL;
        assert_true(asprintf(&good,
                             "\"traces\":[{\"analysis\":%s,\"raw\":\"%s\"},{\"analysis\":%s,"
                             "\"raw\":null}]",
                             ajs, b64, ajs) > 0);
        text = summary_with(good);
        struct summary s;
        if (summary_decode(text, strlen(text), &s, err) != 0)
                fail_msg("%s", err);
        assert_int_equal(s.intervals[0].ntraces, 2);
        struct summary_trace *t = &s.intervals[0].traces[0];
        assert_string_equal(t->analysis->summary, a.summary);
        assert_int_equal(t->raw_len, zlen);
        assert_memory_equal(t->raw, z, zlen);
        assert_null(s.intervals[0].traces[1].raw);
        /* What the codec writes, it reads back the same. */
        char *again;
        assert_int_equal(summary_encode(&s, &again, NULL), 0);
        struct summary s2;
        assert_int_equal(summary_decode(again, strlen(again), &s2, err), 0);
        assert_int_equal(s2.intervals[0].ntraces, 2);
        assert_string_equal(s2.intervals[0].traces[0].json, t->json);
        assert_int_equal(s2.intervals[0].traces[0].raw_len, zlen);
        summary_done(&s2);
        summary_done(&s);
        free(again);
        free(text);
        free(good);

        /* Refused, with the path of the field. */
        char *cpu3 = strdup(ajs);
        *strstr(cpu3, "\"cpu\":1") = 0;
        char *bad_cpu = NULL;
        assert_true(asprintf(&bad_cpu, "%s\"cpu\":3%s", cpu3, strstr(ajs, "\"cpu\":1") + 7) > 0);
        char *bad[][2] = {
                { "\"traces\":{}", "intervals[0].traces: not an array" },
                { "\"traces\":[1]", "intervals[0].traces[0]: not an object" },
                { "\"traces\":[{\"raw\":null}]", "intervals[0].traces[0].analysis: missing" },
                { NULL, "intervals[0].traces[0].raw: not valid base64" },
                { NULL, "intervals[0].traces[0].raw: not zlib data" },
                { NULL, "intervals[0].traces[0].analysis.cpu: CPU 3 is not one of the interval's" },
                { NULL, "intervals[0].traces[0].colour: unknown field" },
                { NULL, "intervals[0].traces[0].analysis.time_ns: missing" },
        };
        assert_true(asprintf(&bad[3][0], "\"traces\":[{\"analysis\":%s,\"raw\":\"%%%%\"}]", ajs) >
                    0);
        assert_true(asprintf(&bad[4][0], "\"traces\":[{\"analysis\":%s,\"raw\":\"bm90IHpsaWI=\"}]",
                             ajs) > 0);
        assert_true(asprintf(&bad[5][0], "\"traces\":[{\"analysis\":%s,\"raw\":null}]", bad_cpu) >
                    0);
        assert_true(asprintf(&bad[6][0], "\"traces\":[{\"analysis\":%s,\"raw\":null,\"colour\":1}]",
                             ajs) > 0);
        assert_true(asprintf(&bad[7][0], "\"traces\":[{\"analysis\":{\"cpu\":1},\"raw\":null}]") >
                    0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                text = summary_with(bad[i][0]);
                struct summary x;
                int r = summary_decode(text, strlen(text), &x, err);
                if (r != -EBADMSG || !strstr(err, bad[i][1]))
                        fail_msg("%s: expected \"%s\", got %d \"%s\"", bad[i][0], bad[i][1], r,
                                 err);
                free(text);
                if (i >= 3)
                        free(bad[i][0]);
        }
        /* More captures than an interval may carry. */
        char *many = NULL, *list = strdup("\"traces\":[");
        for (int i = 0; i <= SUMMARY_MAX_TRACES; i++) {
                char *n = NULL;
                assert_true(asprintf(&n, "%s%s{\"analysis\":%s,\"raw\":null}", list, i ? "," : "",
                                     ajs) > 0);
                free(list);
                list = n;
        }
        assert_true(asprintf(&many, "%s]", list) > 0);
        text = summary_with(many);
        struct summary x;
        assert_int_equal(summary_decode(text, strlen(text), &x, err), -EBADMSG);
        assert_non_null(strstr(err, "intervals[0].traces: 65 entries, at most 64 allowed"));
        free(text);
        free(many);
        free(list);
        free(bad_cpu);
        free(cpu3);
        free(ajs);
        free(b64);
        free(z);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_higher_priority_thread),
                cmocka_unit_test(test_priority_out_of_range),
                cmocka_unit_test(test_names_from_the_kernel),
                cmocka_unit_test(test_hard_irq),
                cmocka_unit_test(test_softirq),
                cmocka_unit_test(test_idle_late_timer),
                cmocka_unit_test(test_not_covered),
                cmocka_unit_test(test_untraced_switch_from_idle),
                cmocka_unit_test(test_parts_add_up),
                cmocka_unit_test(test_no_events),
                cmocka_unit_test(test_json_roundtrip),
                cmocka_unit_test(test_json_refused),
                cmocka_unit_test(test_raw_cap),
                cmocka_unit_test(test_summary_traces),
        };
        return RUN_TESTS(tests);
}
