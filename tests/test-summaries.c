/* SPDX-License-Identifier: MIT */
/* Summaries for the farm server's tests, encoded with the codec the machines use. */
#include <stdlib.h>
#include <string.h>

#include "tests.h"
#include "hist.h"
#include "macro.h"
#include "summary.h"
#include "test-summaries.h"

char *tu_summary_text(const struct tu_spec *p) {
        static uint64_t counts[8192];
        struct summary s = {};
        s.machine.id = strdup(p->machine);
        s.machine.hostname = strdup("rt-lab-07");
        s.machine.cpu_model = strdup("Test CPU");
        s.machine.cpus = (uint32_t) p->ncpus;
        s.run.id = p->run;
        s.run.boot_id = strdup("fedcba9876543210fedcba9876543210");
        s.run.kernel_release = strdup(p->kernel);
        s.run.kernel_version = strdup("#1 SMP PREEMPT_RT");
        s.run.kernel_cmdline = strdup("quiet");
        s.run.preempt_model = strdup("PREEMPT_RT");
        s.run.daemon_version = strdup("0.1.0");
        s.run.config_digest =
                strdup("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
        s.run.start_ns = p->start_ns;
        s.run.threshold_ns = 100000;
        s.run.probe_interval_ns = 200000;
        s.run.interval_ns = (uint64_t) TU_MIN_NS;
        s.seq = p->seq;
        s.nintervals = p->nintervals;
        s.intervals = calloc(p->nintervals + 1, sizeof(*s.intervals));
        for (size_t i = 0; i < p->nintervals; i++) {
                struct summary_interval *iv = &s.intervals[i];
                uint64_t seq = p->first_interval + i;
                iv->seq = seq;
                iv->start_ns = p->start_ns + (int64_t) seq * TU_MIN_NS;
                iv->length_ns = (uint64_t) TU_MIN_NS;
                iv->scenario = strdup("mixed");
                iv->ncpus = p->ncpus;
                iv->cpus = calloc(p->ncpus, sizeof(*iv->cpus));
                for (size_t c = 0; c < p->ncpus; c++) {
                        struct summary_cpu *x = &iv->cpus[c];
                        uint64_t max = p->max_ns + 1000 * seq + 10 * c;
                        uint64_t samples = p->measured ? (uint64_t) TU_MIN_NS / 200000 : 1000;
                        memset(counts, 0, sizeof(counts));
                        counts[hist_index(1000, 5000)] = samples - 1;
                        counts[hist_index(1000, max)] += 1;
                        *x = (struct summary_cpu){ .cpu = (uint32_t) c,
                                                   .samples = samples,
                                                   .min_ns = 5000,
                                                   .avg_ns = 5100,
                                                   .max_ns = max,
                                                   .max_time_ns = iv->start_ns + 777,
                                                   .violations = !p->measured || max > 100000,
                                                   .hist_limit_us = 1000 };
                        assert_int_equal(hist_encode(1000, counts, &x->hist, &x->hist_len), 0);
                }
                iv->nloads = 1;
                iv->loads = calloc(1, sizeof(*iv->loads));
                iv->loads[0].generator = strdup("cpu");
                iv->loads[0].up_ns = (uint64_t) TU_MIN_NS;
                iv->loads[0].starts = 1;
                iv->loads[0].nmetrics = 2;
                iv->loads[0].metrics = calloc(2, sizeof(struct summary_metric));
                iv->loads[0].metrics[0] = (struct summary_metric){ strdup("ops"), strdup("ops/s"),
                                                                   1234.5 };
                iv->loads[0].metrics[1] = (struct summary_metric){ strdup("loops"),
                                                                   strdup("loops/s"), 7 };
        }
        s.nevents = p->nevents;
        s.events = calloc(p->nevents + 1, sizeof(*s.events));
        for (size_t e = 0; e < p->nevents; e++)
                s.events[e] = (struct summary_event){
                        p->first_event + e,        p->start_ns + (int64_t) e,
                        strdup("violation"),       0,
                        (int64_t) (p->max_ns + e), strdup("over the threshold")
                };
        char *text;
        assert_int_equal(summary_encode(&s, &text, NULL), 0);
        summary_done(&s);
        return text;
}
