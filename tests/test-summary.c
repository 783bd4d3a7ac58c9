/* SPDX-License-Identifier: MIT */
/* The summary codec: every field survives encode and decode, and every kind of bad input is
 * refused with the path of the field that is wrong. */
#include <errno.h>
#include <math.h>

#include "tests.h"
#include "base64.h"
#include "hist.h"
#include "macro.h"
#include "summary.h"

#define T0 INT64_C(1796300000000000000)

/* A summary with every field set to something distinctive. */
static void make(struct summary *s) {
        static uint64_t counts[4096];
        *s = (struct summary){};
        s->machine.id = strdup("0123456789abcdef0123456789abcdef");
        s->machine.hostname = strdup("rt-lab-07");
        s->machine.cpu_model = strdup("AMD EPYC 7302 \"Rome\"");
        s->machine.cpus = 8;
        s->run.id = 42;
        s->run.boot_id = strdup("fedcba9876543210fedcba9876543210");
        s->run.kernel_release = strdup("6.6.15-rt22");
        s->run.kernel_version = strdup("#1 SMP PREEMPT_RT Tue");
        s->run.kernel_cmdline = strdup("isolcpus=2-3 quiet nohz_full=2-3 \"x=\\\"q\\\"\"");
        s->run.preempt_model = strdup("PREEMPT_RT");
        s->run.daemon_version = strdup("0.1.0");
        s->run.config_digest =
                strdup("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
        s->run.start_ns = T0;
        s->run.threshold_ns = 100000;
        s->run.probe_interval_ns = 200000;
        s->run.interval_ns = 60000000000;
        s->run.release = strdup("6.6.15-rt22+lab~2:x_y");
        s->run.nprobed_cpus = 3;
        s->run.probed_cpus = calloc(3, sizeof(*s->run.probed_cpus));
        s->run.probed_cpus[0] = 0;
        s->run.probed_cpus[1] = 5;
        s->run.probed_cpus[2] = 7; /* probed, and missing from every interval */
        s->seq = 17;
        s->nintervals = 2;
        s->intervals = calloc(2, sizeof(*s->intervals));
        for (size_t i = 0; i < 2; i++) {
                struct summary_interval *iv = &s->intervals[i];
                iv->seq = 17 + i;
                iv->start_ns = T0 + (int64_t) i * 60000000000;
                iv->length_ns = 60000000000;
                iv->scenario = i == 0 ? strdup("mixed") : NULL;
                iv->ncpus = 2;
                iv->cpus = calloc(2, sizeof(*iv->cpus));
                for (size_t c = 0; c < 2; c++) {
                        struct summary_cpu *x = &iv->cpus[c];
                        memset(counts, 0, sizeof(counts));
                        counts[hist_index(1000, 3100)] = 1;
                        counts[hist_index(1000, 7000)] = 298999;
                        counts[hist_index(1000, 250000)] = 3;
                        *x = (struct summary_cpu){ .cpu = (uint32_t) (c * 5),
                                                   .samples = 299003,
                                                   .min_ns = 3100,
                                                   .avg_ns = 7200,
                                                   .max_ns = 250400,
                                                   .max_time_ns = iv->start_ns + 12345,
                                                   .violations = 3,
                                                   .missed = 1,
                                                   .hist_limit_us = 1000 };
                        assert_int_equal(hist_encode(1000, counts, &x->hist, &x->hist_len), 0);
                        /* CPU 5 of the second interval came online 10 s into it, for 20 s. */
                        if (i == 1 && c == 1) {
                                x->span_start_ns = iv->start_ns + 10000000000;
                                x->span_length_ns = 20000000000;
                        }
                }
                if (i == 0) {
                        iv->nloads = 1;
                        iv->loads = calloc(1, sizeof(*iv->loads));
                        iv->loads[0].generator = strdup("fileio");
                        iv->loads[0].up_ns = 59000000000;
                        iv->loads[0].starts = 2;
                        iv->loads[0].exits = 1;
                        iv->loads[0].nmetrics = 2;
                        iv->loads[0].metrics = calloc(2, sizeof(struct summary_metric));
                        iv->loads[0].metrics[0] = (struct summary_metric){ strdup("write"),
                                                                           strdup("MiB/s"), 1.25 };
                        iv->loads[0].metrics[1] = (struct summary_metric){ strdup("fsync"),
                                                                           strdup("fsyncs/s"), 0 };
                }
        }
        s->nevents = 2;
        s->events = calloc(2, sizeof(*s->events));
        s->events[0] = (struct summary_event){ 7, T0 + 12345, strdup("violation"),
                                               5, 250400,     strdup("") };
        s->events[1] = (struct summary_event){
                8,  T0 + 99, strdup("load_exit"),
                -1, 137,     strdup("fileio #3 killed by signal 9 \"KILL\"")
        };
        s->events[1].details = strdup("{\"boot_id\":\"ab\",\"last_interval\":{\"seq\":3,"
                                      "\"cpus\":[{\"cpu\":0,\"max_ns\":9000}]},\"kernel\":"
                                      "{\"pstore\":\"empty\"}}");
        /* Two versions of the inventory: the run's first, and one after a change. */
        s->ninventory = 2;
        s->inventory = calloc(2, sizeof(*s->inventory));
        s->inventory[0] = (struct summary_inventory){ .version = 1, .time_ns = T0 - 5 };
        s->inventory[1] =
                (struct summary_inventory){ .version = 2, .time_ns = T0 + 99, .after_ns = T0 + 50 };
        for (size_t i = 0; i < 2; i++) {
                struct inventory *f = &s->inventory[i].fields;
                assert_int_equal(inventory_set(f, "dmi.bios_version", "1.2.3"), 0);
                assert_int_equal(inventory_set(f, "kconfig.PREEMPT_RT", "y"), 0);
                assert_int_equal(inventory_set(f, "cmdline.threadirqs", ""), 0);
                assert_int_equal(
                        inventory_set(f, "sysctl.kernel.sched_rt_runtime_us", i ? "-1" : "950000"),
                        0);
        }
}

static void test_roundtrip_every_field(void **state) {
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX];
        size_t len;
        make(&a);
        assert_int_equal(summary_encode(&a, &text, &len), 0);
        assert_int_equal(summary_decode(text, len, &b, err), 0);

        assert_string_equal(b.machine.id, a.machine.id);
        assert_string_equal(b.machine.hostname, a.machine.hostname);
        assert_string_equal(b.machine.cpu_model, a.machine.cpu_model);
        assert_int_equal(b.machine.cpus, 8);
        assert_int_equal(b.run.id, 42);
        assert_string_equal(b.run.boot_id, a.run.boot_id);
        assert_string_equal(b.run.kernel_release, a.run.kernel_release);
        assert_string_equal(b.run.kernel_version, a.run.kernel_version);
        assert_string_equal(b.run.kernel_cmdline, a.run.kernel_cmdline);
        assert_string_equal(b.run.preempt_model, a.run.preempt_model);
        assert_string_equal(b.run.daemon_version, a.run.daemon_version);
        assert_string_equal(b.run.config_digest, a.run.config_digest);
        assert_int_equal(b.run.start_ns, T0);
        assert_int_equal(b.run.threshold_ns, 100000);
        assert_int_equal(b.run.probe_interval_ns, 200000);
        assert_int_equal(b.run.interval_ns, 60000000000);
        assert_string_equal(b.run.release, "6.6.15-rt22+lab~2:x_y");
        assert_int_equal(b.run.nprobed_cpus, 3);
        assert_int_equal(b.run.probed_cpus[1], 5);
        assert_int_equal(b.run.probed_cpus[2], 7);
        assert_int_equal(b.seq, 17);
        assert_int_equal(b.nintervals, 2);
        for (size_t i = 0; i < 2; i++) {
                struct summary_interval *x = &a.intervals[i], *y = &b.intervals[i];
                assert_int_equal(y->seq, x->seq);
                assert_int_equal(y->start_ns, x->start_ns);
                assert_int_equal(y->length_ns, x->length_ns);
                if (x->scenario)
                        assert_string_equal(y->scenario, x->scenario);
                else
                        assert_null(y->scenario);
                assert_int_equal(y->ncpus, 2);
                for (size_t c = 0; c < 2; c++) {
                        struct summary_cpu *p = &x->cpus[c], *q = &y->cpus[c];
                        assert_int_equal(q->cpu, p->cpu);
                        assert_int_equal(q->samples, p->samples);
                        assert_int_equal(q->min_ns, p->min_ns);
                        assert_int_equal(q->avg_ns, p->avg_ns);
                        assert_int_equal(q->max_ns, p->max_ns);
                        assert_int_equal(q->max_time_ns, p->max_time_ns);
                        assert_int_equal(q->violations, p->violations);
                        assert_int_equal(q->missed, p->missed);
                        assert_int_equal(q->hist_limit_us, p->hist_limit_us);
                        assert_int_equal(q->hist_len, p->hist_len);
                        assert_memory_equal(q->hist, p->hist, p->hist_len);
                        assert_int_equal(q->span_start_ns, p->span_start_ns);
                        assert_int_equal(q->span_length_ns, p->span_length_ns);
                }
                assert_int_equal(y->nloads, x->nloads);
        }
        struct summary_load *l = &b.intervals[0].loads[0];
        assert_string_equal(l->generator, "fileio");
        assert_int_equal(l->up_ns, 59000000000);
        assert_int_equal(l->starts, 2);
        assert_int_equal(l->exits, 1);
        assert_int_equal(l->nmetrics, 2);
        assert_string_equal(l->metrics[0].name, "write");
        assert_string_equal(l->metrics[0].unit, "MiB/s");
        assert_true(l->metrics[0].value == 1.25);
        assert_true(l->metrics[1].value == 0);
        assert_int_equal(b.nevents, 2);
        assert_int_equal(b.events[0].id, 7);
        assert_int_equal(b.events[0].time_ns, T0 + 12345);
        assert_string_equal(b.events[0].type, "violation");
        assert_int_equal(b.events[0].cpu, 5);
        assert_int_equal(b.events[0].value, 250400);
        assert_string_equal(b.events[0].message, "");
        assert_int_equal(b.events[1].cpu, -1);
        assert_int_equal(b.events[1].value, 137);
        assert_string_equal(b.events[1].message, a.events[1].message);
        assert_null(b.events[0].details);
        assert_string_equal(b.events[1].details, a.events[1].details);
        assert_int_equal(b.ninventory, 2);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(b.inventory[i].version, a.inventory[i].version);
                assert_int_equal(b.inventory[i].time_ns, a.inventory[i].time_ns);
                assert_int_equal(b.inventory[i].after_ns, a.inventory[i].after_ns);
                assert_true(inventory_equal(&b.inventory[i].fields, &a.inventory[i].fields));
        }
        assert_string_equal(
                inventory_get(&b.inventory[1].fields, "sysctl.kernel.sched_rt_runtime_us"), "-1");

        /* Encoding the decoded summary gives the same text. */
        char *again;
        assert_int_equal(summary_encode(&b, &again, NULL), 0);
        assert_string_equal(again, text);
        free(again);
        free(text);
        summary_done(&a);
        summary_done(&b);
}

/* Without the optional members of run and of a CPU: the summary of a daemon that does not
 * send them decodes as before, and the encoder writes none of them. */
static void test_optional_fields_absent(void **state) {
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX];
        make(&a);
        free(a.run.release);
        free(a.run.probed_cpus);
        a.run.release = NULL;
        a.run.probed_cpus = NULL;
        a.run.nprobed_cpus = 0;
        a.intervals[1].cpus[1].span_start_ns = 0;
        a.intervals[1].cpus[1].span_length_ns = 0;
        summary_inventory_free(&a);
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        assert_null(strstr(text, "\"release\""));
        assert_null(strstr(text, "\"inventory\""));
        assert_null(strstr(text, "\"interval_ns\":60000000000,\"cpus\""));
        /* The intervals' own start_ns and length_ns are the only ones. */
        size_t starts = 0;
        for (const char *p = text; (p = strstr(p, "\"length_ns\"")); p++)
                starts++;
        assert_int_equal(starts, 2);
        assert_int_equal(summary_decode(text, strlen(text), &b, err), 0);
        assert_null(b.run.release);
        assert_null(b.run.probed_cpus);
        assert_int_equal(b.run.nprobed_cpus, 0);
        assert_int_equal(b.intervals[1].cpus[1].span_length_ns, 0);
        assert_int_equal(b.ninventory, 0);
        free(text);
        summary_done(&a);
        summary_done(&b);
}

/* The release names that are valid, as rtsoakd and the decoder both judge them. */
static void test_release_names(void **state) {
        static const struct {
                const char *name;
                bool ok;
        } cases[] = {
                { "6.6.30-rt31", true },
                { "6.6.30-rt31-lab2", true },
                { "5.15.0-1034+deb~bpo:1", true },
                { "X_y.z", true },
                { "", false },
                { "6.6 rt", false },
                { "6.6/rt", false },
                { "6.6\trt", false },
                { "ä", false },
                { "6.6-rt\n", false },
        };
        char why[NAME_WHY_MAX];
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (name_ok(&summary_name_release, cases[i].name, why) != cases[i].ok)
                        fail_msg("'%s': expected %s", cases[i].name, cases[i].ok ? "valid" : "not");
        char name[SUMMARY_MAX_RELEASE + 2];
        memset(name, 'r', sizeof(name) - 1);
        name[SUMMARY_MAX_RELEASE + 1] = '\0';
        assert_false(name_ok(&summary_name_release, name, why));
        assert_string_equal(why, "length 257 is out of range (1 to 256)");
        name[SUMMARY_MAX_RELEASE] = '\0';
        assert_true(name_ok(&summary_name_release, name, why));
        assert_false(name_ok(&summary_name_release, "6.6/rt", why));
        assert_string_equal(why, "'/' at byte 3: a release name may hold only letters, digits "
                                 "and . _ + ~ : -");
}

/* Encodes the reference summary, replaces the first occurrence of from by to in the text,
 * and expects the decoder to refuse it with msg. */
static void refused(const char *from, const char *to, const char *msg) {
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX] = "";
        make(&a);
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        summary_done(&a);
        char *at = strstr(text, from);
        if (!at)
                fail_msg("'%s' not in %s", from, text);
        size_t fl = strlen(from), tl = strlen(to), n = strlen(text);
        char *bad = malloc(n - fl + tl + 1);
        memcpy(bad, text, (size_t) (at - text));
        memcpy(bad + (at - text), to, tl);
        memcpy(bad + (at - text) + tl, at + fl, n - (size_t) (at - text) - fl + 1);
        int r = summary_decode(bad, strlen(bad), &b, err);
        if (r != -EBADMSG || !strstr(err, msg))
                fail_msg("'%s' -> '%s': expected '%s', got %d '%s'", from, to, msg, r, err);
        free(bad);
        free(text);
}

static void test_refusals_name_the_field(void **state) {
        refused("\"rtsoak.summary/1\"", "\"rtsoak.summary/2\"",
                "schema: unsupported version (this side understands rtsoak.summary/1)");
        refused("{\"schema\"", "{\"extra\":1,\"schema\"", "extra: unknown field");
        refused("\"cpus\":8", "\"cpus\":\"8\"", "machine.cpus: not an integer");
        refused("\"cpus\":8", "\"cpus\":0", "machine.cpus: 0 is out of range (1 to 1024)");
        refused("\"id\":\"0123456789abcdef0123456789abcdef\"",
                "\"id\":\"0123456789ABCDEF0123456789abcdef\"",
                "machine.id: 'A' at byte 10: an identifier may hold only lowercase "
                "hexadecimal digits");
        refused("\"id\":\"0123456789abcdef0123456789abcdef\"", "\"id\":\"0123\"",
                "machine.id: length 4 is out of range (32 to 32)");
        refused("\"hostname\":\"rt-lab-07\",", "", "machine.hostname: missing");
        refused("\"id\":42", "\"id\":-42", "run.id: -42 is out of range");
        refused("\"seq\":17,\"intervals\"", "\"seq\":-1,\"intervals\"", "seq: -1 is out of range");
        refused("\"min_ns\":3100", "\"min_ns\":9000",
                "intervals[0].cpus[0]: min_ns <= avg_ns <= max_ns does not hold");
        refused("\"violations\":3", "\"violations\":300000000",
                "intervals[0].cpus[0].violations: more than the samples");
        refused("\"samples\":299003", "\"samples\":299004",
                "intervals[0].cpus[0].hist: holds 299003 samples, the row says 299004");
        refused("\"hist\":\"", "\"hist\":\"!!!!", "intervals[0].cpus[0].hist: not valid base64");
        refused("\"cpu\":5", "\"cpu\":0",
                "intervals[0].cpus[1].cpu: CPUs must be listed once each, in ascending order");
        refused("\"seq\":18", "\"seq\":17",
                "intervals[1].seq: intervals must be in ascending order of seq");
        refused("\"scenario\":\"mixed\"", "\"scenario\":\"mi xed\"",
                "intervals[0].scenario: a space at byte 2: a scenario name may hold only "
                "letters, digits and - _");
        refused("\"value\":1.25", "\"value\":-1.25",
                "intervals[0].loads[0].metrics[0].value: out of range (0 to 1e18)");
        refused("\"generator\":\"fileio\"", "\"generator\":7",
                "intervals[0].loads[0].generator: not a string");
        refused("\"type\":\"violation\"", "\"type\":\"Violation!\"",
                "events[0].type: 'V' at byte 0: an event type may hold only a-z, 0-9 and _");
        refused("\"length_ns\":60000000000", "\"length_ns\":0",
                "intervals[0].length_ns: must be more than 0");
        refused("\"start_ns\":1796300000000000000,\"length_ns\"", "\"start_ns\":5,\"length_ns\"",
                "intervals[0].start_ns: 5 is out of range");
        refused("\"message\":\"\"", "\"message\":\"a\\u0000b\"", "\\u0000 is not allowed");
        refused("\"message\":\"\"", "\"message\":\"\\u0007\"",
                "events[0].message: a control character U+0007 at byte 0");
        refused("\"details\":{\"boot_id\":\"ab\",\"last_interval\":{\"seq\":3,\"cpus\":[{"
                "\"cpu\":0,\"max_ns\":9000}]},\"kernel\":{\"pstore\":\"empty\"}}",
                "\"details\":\"text\"", "events[1].details: not an object");
        refused("\"details\":{\"boot_id\":\"ab\"",
                "\"details\":{\"x\":[[[[[[[[[1]]]]]]]]],\"boot_id\":\"ab\"",
                "events[1].details: nested more than 8 levels deep");
        refused("{\"schema\"", "{\"schema\":1,\"schema\"", "malformed JSON");
}

/* The optional additions are checked as strictly as the rest. */
static void test_refusals_of_optional_fields(void **state) {
        const char *rel = "\"release\":\"6.6.15-rt22+lab~2:x_y\"";
        refused(rel, "\"release\":\"6.6 rt\"",
                "run.release: a space at byte 3: a release name may hold only letters, "
                "digits and . _ + ~ : -");
        refused(rel, "\"release\":\"6.6/rt\"",
                "run.release: '/' at byte 3: a release name may hold only letters");
        refused(rel, "\"release\":\"\"", "run.release: length 0 is out of range (1 to 256)");
        refused(rel, "\"release\":7", "run.release: not a string");
        refused(rel, "\"release\":null", "run.release: not a string");
        char long_rel[400];
        snprintf(long_rel, sizeof(long_rel), "\"release\":\"%0257d\"", 0);
        refused(rel, long_rel, "run.release: length 257 is out of range (1 to 256)");

        const char *cpus = "\"cpus\":[0,5,7]";
        refused(cpus, "\"cpus\":[]", "run.cpus: empty (a run probes at least one CPU)");
        refused(cpus, "\"cpus\":[5,0]",
                "run.cpus: CPUs must be listed once each, in ascending order");
        refused(cpus, "\"cpus\":[0,0]", "run.cpus: CPUs must be listed once each");
        refused(cpus, "\"cpus\":[-1]", "run.cpus: entry 0 is not a CPU number (0 to 8191)");
        refused(cpus, "\"cpus\":[0,8192]", "run.cpus: entry 1 is not a CPU number");
        refused(cpus, "\"cpus\":[\"0\"]", "run.cpus: entry 0 is not a CPU number");
        refused(cpus, "\"cpus\":[1.5]", "run.cpus: entry 0 is not a CPU number");
        refused(cpus, "\"cpus\":\"0-7\"", "run.cpus: not an array");

        /* CPU 5 of the second interval (start T0 + 60 s): its span. */
        const char *span = "\"start_ns\":1796300070000000000,\"length_ns\":20000000000";
        refused(span, "\"start_ns\":1796300070000000000",
                "intervals[1].cpus[1].length_ns: missing (a CPU's span needs both start_ns and "
                "length_ns)");
        refused(span, "\"length_ns\":20000000000", "intervals[1].cpus[1].start_ns: missing");
        refused(span, "\"start_ns\":1796300070000000000,\"length_ns\":0",
                "intervals[1].cpus[1].length_ns: must be more than 0");
        refused(span, "\"start_ns\":1796300059000000000,\"length_ns\":20000000000",
                "intervals[1].cpus[1].start_ns: the CPU's span is not inside the interval");
        refused(span, "\"start_ns\":1796300070000000000,\"length_ns\":50000000001",
                "the CPU's span is not inside the interval");
        refused(span, "\"start_ns\":\"x\",\"length_ns\":20000000000",
                "intervals[1].cpus[1].start_ns: not an integer");
        refused(span, "\"start_ns\":1796300070000000000,\"length_ns\":-5",
                "intervals[1].cpus[1].length_ns: -5 is out of range");
}

/* The text of n copies of item joined by sep, between head and tail (allocated). */
static char *repeat(const char *head, const char *item, const char *sep, size_t n,
                    const char *tail) {
        size_t len = strlen(head) + n * (strlen(item) + strlen(sep)) + strlen(tail) + 1;
        char *t = malloc(len), *p = t;
        if (!t)
                abort(); /* no memory: nothing to test */
        p += sprintf(p, "%s", head);
        for (size_t i = 0; i < n; i++)
                p += sprintf(p, "%s%s", i ? sep : "", item);
        sprintf(p, "%s", tail);
        return t;
}

/* The reference summary with its inventory member (the last) replaced by value. */
static void refused_inventory(const char *value, const char *msg) {
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX] = "";
        make(&a);
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        summary_done(&a);
        char *at = strstr(text, ",\"inventory\":");
        assert_non_null(at);
        *at = '\0';
        char *bad = malloc(strlen(text) + strlen(value) + 32);
        if (!bad)
                abort();
        sprintf(bad, "%s,\"inventory\":%s}", text, value);
        int r = summary_decode(bad, strlen(bad), &b, err);
        if (r != -EBADMSG || !strstr(err, msg))
                fail_msg("inventory %.60s: expected '%s', got %d '%s'", value, msg, r, err);
        free(bad);
        free(text);
}

/* The inventory: an optional member, refused field by field like the rest, with the path of
 * the field: too long, control characters, bidirectional overrides, bad names, too many
 * fields or versions, versions out of order, times out of range. */
static void test_inventory_refused(void **state) {
        const char *v = "\"dmi.bios_version\":\"1.2.3\"";
        refused(v, "\"dmi.bios_version\":\"1.2\\u001b[31m\"",
                "inventory[0].fields.dmi.bios_version: a control character U+001B at byte 3");
        refused(v, "\"dmi.bios_version\":\"\\u202e1.2\"",
                "inventory[0].fields.dmi.bios_version: a bidirectional formatting character "
                "U+202E at byte 0");
        refused(v, "\"dmi.bios_version\":\"1\\n2\"",
                "inventory[0].fields.dmi.bios_version: a control character U+000A at byte 1");
        refused(v, "\"dmi.bios_version\":\"1\\u0085\"",
                "inventory[0].fields.dmi.bios_version: a control character U+0085 at byte 1");
        refused(v, "\"dmi.bios_version\":7", "inventory[0].fields.dmi.bios_version: not a string");
        refused(v, "\"dmi.bios version\":\"1\"",
                "inventory[0].fields.{dmi.bios version}: a space at byte 8: an inventory "
                "field's name may hold only letters, digits and . _ -");
        refused(v, "\"dmi.bios\\u001bversion\":\"1\"",
                "inventory[0].fields.{dmi.bios\\eversion}: byte 0x1B at byte 8");
        char *big = repeat("\"dmi.bios_version\":\"", "x", "", INVENTORY_MAX_VALUE + 1, "\"");
        refused(v, big, "inventory[0].fields.dmi.bios_version: length 4097 is more than 4096");
        free(big);
        char name[INVENTORY_MAX_NAME + 8];
        snprintf(name, sizeof(name), "\"%065d\":\"1\"", 0);
        refused(v, name, "length 65 is out of range (1 to 64)");
        /* 17 values of 4000 bytes: each allowed, more than 64 KiB together. */
        char *value = repeat("", "y", "", 4000, "");
        char *many = malloc(17 * 4100 + 100), *p = many;
        for (int i = 0; i < 17; i++)
                p += sprintf(p, "%s\"f%02d\":\"%s\"", i ? "," : "", i, value);
        refused(v, many, "the fields hold more than 65536 bytes of names and values");
        free(many);
        free(value);
        /* 257 fields: 254 and the three others. */
        many = malloc(257 * 16 + 10);
        p = many;
        for (int i = 0; i < 254; i++)
                p += sprintf(p, "%s\"f%03d\":\"\"", i ? "," : "", i);
        refused(v, many, "inventory[0].fields: 257 fields, at most 256 allowed");
        free(many);

        refused("\"version\":1,", "\"version\":0,",
                "inventory[0].version: not an integer of at least 1");
        refused("\"version\":1,", "\"version\":\"1\",",
                "inventory[0].version: not an integer of at least 1");
        refused("\"version\":2,", "\"version\":1,",
                "inventory[1].version: versions must be in ascending order");
        refused("\"time_ns\":1796299999999999995", "\"time_ns\":5",
                "inventory[0].time_ns: not a time");
        refused("\"after_ns\":1796300000000000050", "\"after_ns\":1796300000000000100",
                "inventory[1].after_ns: later than time_ns");
        refused("\"version\":1,", "\"version\":1,\"extra\":1,",
                "inventory[0].extra: unknown field");
        refused(",\"fields\":{\"cmdline", ",\"fieldz\":{\"cmdline",
                "inventory[0].fieldz: unknown field");
        refused_inventory("7", "inventory: not an array");
        refused_inventory("{}", "inventory: not an array");
        refused("\"fields\":{\"cmdline.threadirqs\"", "\"fields\":[],\"y\":{\"cmdline.threadirqs\"",
                "inventory[0].y: unknown field");

        /* 65 versions. */
        char *vs = repeat("[", "{\"version\":1,\"time_ns\":1796300000000000000,\"fields\":{}}", ",",
                          65, "]");
        refused_inventory(vs, "inventory: 65 entries, at most 64 allowed");
        free(vs);
        /* null, as absent: nothing. */
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX];
        make(&a);
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        strcpy(strstr(text, ",\"inventory\":"), ",\"inventory\":null}");
        assert_int_equal(summary_decode(text, strlen(text), &b, err), 0);
        assert_int_equal(b.ninventory, 0);
        free(text);
        summary_done(&a);
        summary_done(&b);
}

/* The example of docs/summary-schema.md is a valid summary. */
static void test_documented_example(void **state) {
        const char *src = getenv("RTSOAK_SRCDIR");
        char path[4096], err[SUMMARY_ERROR_MAX];
        if (!src)
                skip();
        snprintf(path, sizeof(path), "%s/docs/summary-schema.md", src);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        static char doc[1 << 17];
        size_t n = fread(doc, 1, sizeof(doc) - 1, f);
        fclose(f);
        doc[n] = '\0';
        char *start = strstr(doc, "## Example\n\n```json\n");
        assert_non_null(start);
        start = strchr(start, '{');
        char *end = strstr(start, "\n```");
        assert_non_null(end);
        struct summary s;
        int r = summary_decode(start, (size_t) (end - start), &s, err);
        if (r < 0)
                fail_msg("the documented example is refused: %s", err);
        assert_string_equal(s.run.release, "6.6-rt-lab2");
        assert_int_equal(s.run.nprobed_cpus, 2);
        assert_int_equal(s.intervals[0].cpus[1].span_length_ns, 10000000000);
        assert_int_equal(s.ninventory, 1);
        assert_string_equal(inventory_get(&s.inventory[0].fields, "thp.enabled"), "never");
        summary_done(&s);
        refused("\"events\":[", "\"events\":{", "malformed JSON");
}

/* Text that would forge a terminal line, colour it or reorder it is refused where it enters:
 * escape sequences, carriage returns, C1 controls, bidirectional overrides. */
static void test_control_and_bidi_refused(void **state) {
        refused("\"hostname\":\"rt-lab-07\"", "\"hostname\":\"lab\\u001b[31mred\"",
                "machine.hostname: a control character U+001B at byte 3");
        refused("\"hostname\":\"rt-lab-07\"", "\"hostname\":\"lab\\r\\nqualified\"",
                "machine.hostname: a control character U+000D at byte 3");
        refused("\"hostname\":\"rt-lab-07\"", "\"hostname\":\"lab\\nx\"",
                "machine.hostname: a control character U+000A");
        refused("\"kernel_release\":\"6.6.15-rt22\"", "\"kernel_release\":\"6.6\\u202e22tr\"",
                "run.kernel_release: a bidirectional formatting character U+202E at byte 3");
        refused("\"kernel_release\":\"6.6.15-rt22\"", "\"kernel_release\":\"6.6\\u2066x\"",
                "run.kernel_release: a bidirectional formatting character U+2066");
        refused("\"kernel_version\":\"", "\"kernel_version\":\"\\u0085", /* C1 NEL */
                "run.kernel_version: a control character U+0085 at byte 0");
        refused("\"preempt_model\":\"PREEMPT_RT\"", "\"preempt_model\":\"PREEMPT\\u007f\"",
                "run.preempt_model: a control character U+007F");
        refused("\"kernel_cmdline\":\"", "\"kernel_cmdline\":\"\\t",
                "run.kernel_cmdline: a control character U+0009");
        refused("\"message\":\"\"", "\"message\":\"ok\\u200fko\"",
                "events[0].message: a bidirectional formatting character U+200F at byte 2");
        refused("\"unit\":\"MiB/s\"", "\"unit\":\"MiB\\u0007\"",
                "intervals[0].loads[0].metrics[0].unit: a control character U+0007");
}

/* The limits: CPUs, scenarios, and samples consistent with the interval and the probe period
 * (an upload of INT64_MAX samples made every merge after it overflow). */
static void test_limits(void **state) {
        refused("\"cpus\":8", "\"cpus\":1025", "machine.cpus: 1025 is out of range (1 to 1024)");
        refused("\"cpu\":5", "\"cpu\":8192", "intervals[0].cpus[1].cpu: 8192 is out of range");
        /* 60 s at 1 ms is 60,000 periods: 240,016 samples may be, not more. */
        refused("\"probe_interval_ns\":200000", "\"probe_interval_ns\":1000000",
                "intervals[0].cpus[0].samples: 299003 is more than 4 per probe period (1000000 "
                "ns) of the interval's 60000000000 ns");
        refused("\"missed\":1", "\"missed\":864000001",
                "intervals[0].cpus[0].missed: more periods than two days hold");

        /* 1025 CPUs in an interval, and 65 scenarios in a summary. */
        struct summary a;
        char *text, err[SUMMARY_ERROR_MAX];
        make(&a);
        struct summary_interval *iv = &a.intervals[0];
        iv->cpus = realloc(iv->cpus, (SUMMARY_MAX_CPUS + 1) * sizeof(*iv->cpus));
        for (size_t c = 2; c <= SUMMARY_MAX_CPUS; c++) {
                iv->cpus[c] = iv->cpus[1];
                iv->cpus[c].cpu = (uint32_t) (c * 5);
                iv->cpus[c].hist = malloc(iv->cpus[1].hist_len);
                memcpy(iv->cpus[c].hist, iv->cpus[1].hist, iv->cpus[1].hist_len);
        }
        iv->ncpus = SUMMARY_MAX_CPUS + 1;
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        struct summary b;
        assert_int_equal(summary_decode(text, strlen(text), &b, err), -EBADMSG);
        assert_string_equal(err, "intervals[0].cpus: 1025 entries, at most 1024 allowed");
        free(text);
        summary_done(&a);

        make(&a);
        a.intervals = realloc(a.intervals, (SUMMARY_MAX_SCENARIOS + 1) * sizeof(*a.intervals));
        for (size_t i = 1; i <= SUMMARY_MAX_SCENARIOS; i++) {
                struct summary_interval *x = &a.intervals[i];
                if (i > 1)
                        *x = (struct summary_interval){ .ncpus = 1 };
                free(x->scenario);
                assert_true(asprintf(&x->scenario, "s%zu", i) > 0);
                x->seq = 17 + i;
                x->start_ns = T0 + (int64_t) i * 60000000000;
                x->length_ns = 60000000000;
                if (i > 1) {
                        x->cpus = calloc(1, sizeof(*x->cpus));
                        x->cpus[0] = a.intervals[0].cpus[0];
                        x->cpus[0].hist = malloc(x->cpus[0].hist_len);
                        memcpy(x->cpus[0].hist, a.intervals[0].cpus[0].hist, x->cpus[0].hist_len);
                        x->cpus[0].max_time_ns = x->start_ns;
                }
        }
        a.nintervals = SUMMARY_MAX_SCENARIOS + 1;
        assert_int_equal(summary_encode(&a, &text, NULL), 0);
        assert_int_equal(summary_decode(text, strlen(text), &b, err), -EBADMSG);
        assert_string_equal(err, "intervals[64].scenario: more than 64 different scenarios in "
                                 "the summary");
        free(text);
        summary_done(&a);
}

/* What a big real machine sends passes: 256 CPUs probed at 1 kHz for a day-long interval, with
 * HistogramLimit=100ms and a wide spread of latencies (a kernel that is not real-time under
 * load), within the server's default body limit. */
static void test_big_real_machine_passes(void **state) {
        enum { CPUS = 256 };
        const uint32_t limit = 100000;
        const uint64_t samples = 86400 * 1000;
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX];
        struct hist h;
        make(&a);
        a.machine.cpus = CPUS;
        a.run.probe_interval_ns = 1000000;
        a.run.interval_ns = 86400 * NSEC_PER_SEC;
        for (size_t c = 0; c < a.intervals[1].ncpus; c++)
                free(a.intervals[1].cpus[c].hist);
        free(a.intervals[1].cpus);
        a.nintervals = 1;
        struct summary_interval *iv = &a.intervals[0];
        iv->length_ns = 86400 * NSEC_PER_SEC;
        for (size_t c = 0; c < iv->ncpus; c++)
                free(iv->cpus[c].hist);
        iv->cpus = realloc(iv->cpus, CPUS * sizeof(*iv->cpus));
        iv->ncpus = CPUS;
        assert_int_equal(hist_init(&h, limit), 0);
        for (size_t c = 0; c < CPUS; c++) {
                /* Most samples at 3-80 us, a tail of one sample per bucket up to 20 ms, and a
                 * few beyond the exact range; different per CPU. */
                hist_reset(&h);
                uint64_t left = samples, n;
                for (uint32_t us = 80; us < 20000; us += 1 + (uint32_t) (c % 3)) {
                        h.counts[us]++;
                        left--;
                }
                h.counts[hist_index(limit, 150 * NSEC_PER_MSEC + c)] += 2;
                left -= 2;
                for (uint32_t us = 3; us < 80; us++) {
                        n = us == 79 ? left : left / 10;
                        h.counts[us] += n;
                        left -= n;
                }
                struct summary_cpu *x = &iv->cpus[c];
                *x = (struct summary_cpu){ .cpu = (uint32_t) c,
                                           .samples = samples,
                                           .min_ns = 3000,
                                           .avg_ns = 9000,
                                           .max_ns = 150 * NSEC_PER_MSEC + c,
                                           .max_time_ns = iv->start_ns + 1000,
                                           .violations = 40000,
                                           .missed = 300,
                                           .hist_limit_us = limit };
                assert_int_equal(hist_encode(limit, h.counts, &x->hist, &x->hist_len), 0);
        }
        hist_done(&h);
        size_t len;
        assert_int_equal(summary_encode(&a, &text, &len), 0);
        assert_true(len < 16 << 20);
        if (summary_decode(text, len, &b, err) != 0)
                fail_msg("%s", err);
        assert_int_equal(b.intervals[0].ncpus, CPUS);
        print_message("# a day of 256 CPUs at 1 kHz, 100 ms limit: %zu bytes\n", len);
        summary_done(&b);
        free(text);
        summary_done(&a);
}

/* Details up to the limit pass; one byte more is refused, naming the size. */
static void test_details_size_cap(void **state) {
        struct summary a, b;
        char *text, err[SUMMARY_ERROR_MAX] = "";
        for (int over = 0; over <= 1; over++) {
                make(&a);
                free(a.events[1].details);
                /* {"t":"xxx..."} is 8 bytes plus the string. */
                size_t n = SUMMARY_MAX_DETAILS - 8 + (size_t) over;
                char *d = malloc(n + 9);
                memcpy(d, "{\"t\":\"", 6);
                memset(d + 6, 'x', n);
                memcpy(d + 6 + n, "\"}", 3);
                a.events[1].details = d;
                if (over) {
                        /* The encoder refuses to send what the decoder would refuse. */
                        assert_int_equal(summary_encode(&a, &text, NULL), -ERANGE);
                        /* And the decoder refuses it from elsewhere. */
                        a.events[1].details = NULL;
                        assert_int_equal(summary_encode(&a, &text, NULL), 0);
                        char *at = strstr(text, "\"message\":\"fileio");
                        assert_non_null(at);
                        char *big = NULL;
                        assert_true(asprintf(&big, "%.*s\"details\":%s,%s", (int) (at - text), text,
                                             d, at) > 0);
                        assert_int_equal(summary_decode(big, strlen(big), &b, err), -EBADMSG);
                        assert_non_null(strstr(err, "events[1].details: 65537 bytes"));
                        free(big);
                        free(d);
                } else {
                        assert_int_equal(summary_encode(&a, &text, NULL), 0);
                        assert_int_equal(summary_decode(text, strlen(text), &b, err), 0);
                        assert_int_equal(strlen(b.events[1].details), SUMMARY_MAX_DETAILS);
                        summary_done(&b);
                }
                free(text);
                summary_done(&a);
        }
}

static void test_not_an_object_and_empty(void **state) {
        struct summary s;
        char err[SUMMARY_ERROR_MAX];
        assert_int_equal(summary_decode("[]", 2, &s, err), -EBADMSG);
        assert_string_equal(err, ": the summary is not a JSON object");
        assert_int_equal(summary_decode("", 0, &s, err), -EBADMSG);
        assert_non_null(strstr(err, "malformed JSON"));
        /* Text beyond len is not read. */
        assert_int_equal(summary_decode("{}garbage", 1, &s, err), -EBADMSG);
}

static void test_base64(void **state) {
        const char *cases[][2] = { { "", "" },
                                   { "f", "Zg==" },
                                   { "fo", "Zm8=" },
                                   { "foo", "Zm9v" },
                                   { "foob", "Zm9vYg==" },
                                   { "fooba", "Zm9vYmE=" },
                                   { "foobar", "Zm9vYmFy" } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *e = base64_encode((const uint8_t *) cases[i][0], strlen(cases[i][0]));
                assert_string_equal(e, cases[i][1]);
                uint8_t *d;
                size_t n;
                assert_int_equal(base64_decode(e, strlen(e), &d, &n), 0);
                assert_int_equal(n, strlen(cases[i][0]));
                if (n)
                        assert_memory_equal(d, cases[i][0], n);
                free(d);
                free(e);
        }
        const char *bad[] = { "Zg=", "Z===", "Zm9v=", "Zh==", "Zm8!", "=Zm8", "Zg==Zg==" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint8_t *d = NULL;
                size_t n;
                if (base64_decode(bad[i], strlen(bad[i]), &d, &n) != -EINVAL)
                        fail_msg("'%s' accepted", bad[i]);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip_every_field),
                cmocka_unit_test(test_refusals_name_the_field),
                cmocka_unit_test(test_control_and_bidi_refused),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_big_real_machine_passes),
                cmocka_unit_test(test_optional_fields_absent),
                cmocka_unit_test(test_release_names),
                cmocka_unit_test(test_refusals_of_optional_fields),
                cmocka_unit_test(test_inventory_refused),
                cmocka_unit_test(test_documented_example),
                cmocka_unit_test(test_details_size_cap),
                cmocka_unit_test(test_not_an_object_and_empty),
                cmocka_unit_test(test_base64),
        };
        return RUN_TESTS(tests);
}
