/* SPDX-License-Identifier: MIT */
/* Fills a farm database with a simulated farm for the query and verdict benchmarks: M
 * machines × C CPUs × D days of intervals under the built-in six-scenario rotation, stored
 * through the server's own storage path (farm_store_summary: the same rows, rollups and
 * indexes an upload makes), without HTTP and JSON, which would only make the filling slower.
 * Machines report in turn, a batch of up to 1000 intervals each (FARM_FILL_BATCH), as a farm's
 * uploads interleave in the file.  A few machines get a latency spike, so that a verdict has
 * evidence to gather.
 *
 *   farm-fill DB MACHINES CPUS DAYS INTERVAL_S END_UNIX_S RELEASE [RUN_ID [SPIKES yes|no]] */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hist.h"
#include "auth.h"
#include "db.h"
#include "settings.h"
#include "timeutil.h"

#define SEC INT64_C(1000000000)
#define BATCH 1000
#define VARIANTS 16
#define THREADS 4

/* Intervals per stored summary (1 to BATCH; FARM_FILL_BATCH, default BATCH): a daemon
 * catching up after an outage uploads many at once, one reporting in time one. */
static int64_t batch = BATCH;

struct gen {
        const char *name;
        const char *metric, *unit;
        double value;
};

static const struct {
        const char *name;
        unsigned nloads;
        struct gen loads[4];
} rotation[] = {
        { "idle", 0, {} },
        { "cpu", 1, { { "cpu", "bogo_ops_rate", "1/s", 2.1e6 } } },
        { "io", 1, { { "fileio", "write_rate", "B/s", 3.1e8 } } },
        { "net", 1, { { "network", "tx_rate", "bit/s", 9.4e9 } } },
        { "hackbench", 1, { { "hackbench", "msg_rate", "1/s", 4.4e5 } } },
        { "mixed",
          4,
          { { "cpu", "bogo_ops_rate", "1/s", 8.4e5 },
            { "network", "tx_rate", "bit/s", 1e6 },
            { "fileio", "write_rate", "B/s", 1048576 },
            { "memory", "alloc_rate", "B/s", 1048576 } } },
};

struct filler {
        farm_db *db;
        unsigned thread, machines, cpus;
        int64_t start, ilen, nint, t0;
        uint64_t samples;
        const char *release, *ids, *hosts;
        uint8_t **hist;
        size_t *hist_len;
        uint64_t *hist_max;
        int64_t run_id;
        bool spikes;
        bool failed;
};

/* One thread stores the batches of every THREADS-th machine: the threads' uploads share
 * group commits as a busy server's do. */
static void *fill(void *userdata) {
        struct filler *f = userdata;
        farm_db *db = f->db;
        unsigned machines = f->machines, cpus = f->cpus;
        int64_t start = f->start, ilen = f->ilen, nint = f->nint, t0 = f->t0;
        uint64_t samples = f->samples;
        const char *release = f->release;
        uint8_t **hist = f->hist;
        size_t *hist_len = f->hist_len;
        uint64_t *hist_max = f->hist_max;
        char err[FARM_ERROR_MAX];
        struct summary_interval *ivs = calloc(BATCH, sizeof(*ivs));
        struct summary_cpu *cpu = calloc((size_t) BATCH * cpus, sizeof(*cpu));
        struct summary_load *loads = calloc((size_t) BATCH * 4, sizeof(*loads));
        struct summary_metric *metrics = calloc((size_t) BATCH * 4, sizeof(*metrics));
        if (!ivs || !cpu || !loads || !metrics) {
                f->failed = true;
                goto out;
        }
        int64_t stored = 0;
        for (int64_t first = 0; first < nint; first += batch) {
                int64_t n = MIN(batch, nint - first);
                for (unsigned m = f->thread; m < machines; m += THREADS) {
                        for (int64_t k = 0; k < n; k++) {
                                int64_t seq = first + k, s = start + seq * ilen;
                                unsigned sc = (unsigned) ((s / (3600 * SEC)) % 6);
                                struct summary_interval *iv = &ivs[k];
                                *iv = (struct summary_interval){
                                        .seq = (uint64_t) seq,
                                        .start_ns = s,
                                        .length_ns = (uint64_t) ilen,
                                        .scenario = (char *) rotation[sc].name,
                                        .cpus = &cpu[k * cpus],
                                        .ncpus = cpus,
                                        .loads = &loads[k * 4],
                                        .nloads = rotation[sc].nloads,
                                };
                                for (unsigned c = 0; c < cpus; c++) {
                                        unsigned v = (unsigned) ((seq * 7 + c * 3 + m) % VARIANTS);
                                        uint64_t mx = hist_max[v];
                                        /* Machines 3 and 11 have one spike each. */
                                        bool spike = f->spikes && (m == 3 || m == 11) && c == 1 &&
                                                     seq == nint / 2 + m;
                                        iv->cpus[c] = (struct summary_cpu){
                                                .cpu = c,
                                                .samples = samples,
                                                .min_ns = 8000,
                                                .avg_ns = 14000,
                                                .max_ns = spike ? 450000 : mx,
                                                .max_time_ns = s + ilen / 2,
                                                .violations = spike,
                                                .hist_limit_us = 1000,
                                                .hist = hist[v],
                                                .hist_len = hist_len[v],
                                        };
                                }
                                for (unsigned l = 0; l < rotation[sc].nloads; l++) {
                                        const struct gen *g = &rotation[sc].loads[l];
                                        metrics[k * 4 + l] = (struct summary_metric){
                                                (char *) g->metric, (char *) g->unit, g->value
                                        };
                                        iv->loads[l] = (struct summary_load){
                                                .generator = (char *) g->name,
                                                .up_ns = (uint64_t) ilen,
                                                .starts = seq % 360 == 0,
                                                .metrics = &metrics[k * 4 + l],
                                                .nmetrics = 1,
                                        };
                                }
                        }
                        struct summary su = {
                                .machine = { (char *) f->ids + m * (FARM_MACHINE_ID_LEN + 1),
                                             (char *) f->hosts + m * 32, "QEMU Virtual CPU", cpus },
                                .run = { .id = f->run_id,
                                         .boot_id = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f",
                                         .kernel_release = (char *) release,
                                         .kernel_version = "#1 SMP PREEMPT_RT",
                                         .kernel_cmdline = "quiet isolcpus=1",
                                         .preempt_model = "PREEMPT_RT",
                                         .daemon_version = "0.1",
                                         .config_digest = "0000000000000000000000000000000000000000"
                                                          "000000000000000000000000",
                                         .start_ns = start,
                                         .threshold_ns = 100000,
                                         .probe_interval_ns = 1000000,
                                         .interval_ns = (uint64_t) ilen },
                                .seq = (uint64_t) first,
                                .intervals = ivs,
                                .nintervals = (size_t) n,
                        };
                        struct farm_stored st;
                        /* Received when its last interval ended, as on a real farm: the
                         * verdict then finds no late data and no clock ahead. */
                        int64_t received = ivs[n - 1].start_ns + (int64_t) ivs[n - 1].length_ns;
                        if (farm_store_summary(db, &su, received, &st, err) < 0) {
                                fprintf(stderr, "farm-fill: %s\n", err);
                                f->failed = true;
                                goto out;
                        }
                        stored += n;
                }
                double el = (double) (now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
                if (f->thread == 0)
                        fprintf(stderr, "farm-fill: %lld of %lld intervals, %.0f/s, %.0f s\n",
                                (long long) stored * THREADS, (long long) nint * machines,
                                (double) stored * THREADS / el, el);
        }
out:
        free(ivs);
        free(cpu);
        free(loads);
        free(metrics);
        return NULL;
}

int main(int argc, char **argv) {
        if (argc < 8 || argc > 10) {
                fprintf(stderr, "usage: farm-fill DB MACHINES CPUS DAYS INTERVAL_S END_UNIX_S "
                                "RELEASE [RUN_ID [SPIKES yes|no]]\n");
                return 2;
        }
        /* A second release on the same machines takes a run of its own (RUN_ID), after the
         * first one's; without spikes, it can qualify as the other's baseline. */
        int64_t run_id = argc > 8 ? atoll(argv[8]) : 1;
        if (getenv("FARM_FILL_BATCH"))
                batch = atoll(getenv("FARM_FILL_BATCH"));
        bool spikes = argc <= 9 || strcmp(argv[9], "no") != 0;
        const char *path = argv[1], *release = argv[7];
        unsigned machines = (unsigned) atoi(argv[2]), cpus = (unsigned) atoi(argv[3]);
        int64_t days = atoll(argv[4]), ilen = atoll(argv[5]) * SEC, end = atoll(argv[6]) * SEC;
        if (!machines || !cpus || cpus > 256 || days <= 0 || ilen <= 0 || end <= 0 || run_id < 1 ||
            batch < 1 || batch > BATCH) {
                fprintf(stderr, "farm-fill: bad arguments\n");
                return 2;
        }
        end -= end % ilen;
        int64_t start = end - days * 86400 * SEC, nint = (end - start) / ilen;
        uint64_t samples = (uint64_t) (ilen / 1000000); /* a 1 ms probe */
        char err[FARM_ERROR_MAX];
        farm_db *db;
        if (farm_db_open(path, &db, err) < 0) {
                fprintf(stderr, "farm-fill: %s\n", err);
                return 1;
        }

        /* A few histogram shapes, encoded once: most samples 8-20 us, a tail to the max. */
        uint8_t *hist[VARIANTS];
        size_t hist_len[VARIANTS];
        uint64_t hist_max[VARIANTS];
        for (unsigned v = 0; v < VARIANTS; v++) {
                struct hist h;
                hist_init(&h, 1000);
                uint64_t left = samples;
                for (unsigned us = 8; us <= 20 && left; us++) {
                        uint64_t c = us == 20 ? left : MIN(left, samples / 14 + v * 7);
                        h.counts[hist_index(1000, us * 1000)] += c;
                        left -= c;
                }
                /* The tail: a few samples up to the interval's maximum. */
                uint64_t mx = 30000 + v * 2500;
                uint64_t *c13 = &h.counts[hist_index(1000, 13000)];
                for (uint64_t t = 25000; t <= mx && *c13 > 1; t += 5000) {
                        h.counts[hist_index(1000, t)]++;
                        (*c13)--;
                }
                hist_max[v] = mx;
                hist_encode(1000, h.counts, &hist[v], &hist_len[v]);
                hist_done(&h);
        }

        char ids[machines][FARM_MACHINE_ID_LEN + 1], hosts[machines][32];
        for (unsigned m = 0; m < machines; m++) {
                uint8_t hash[SHA256_DIGEST_SIZE];
                char token[FARM_TOKEN_LEN + 1];
                snprintf(ids[m], sizeof(ids[m]), "f%031x", m);
                snprintf(hosts[m], sizeof(hosts[m]), "rt%04u", m);
                farm_token_new(token, hash);
                if (farm_enroll(db, ids[m], hash, NULL, "farm-fill", NULL, start, err) < 0) {
                        fprintf(stderr, "farm-fill: %s\n", err);
                        return 1;
                }
        }

        struct filler f[THREADS];
        pthread_t th[THREADS];
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        for (unsigned t = 0; t < THREADS; t++) {
                f[t] = (struct filler){ .db = db,
                                        .thread = t,
                                        .machines = machines,
                                        .cpus = cpus,
                                        .start = start,
                                        .ilen = ilen,
                                        .nint = nint,
                                        .samples = samples,
                                        .release = release,
                                        .ids = &ids[0][0],
                                        .hosts = &hosts[0][0],
                                        .hist = hist,
                                        .hist_len = hist_len,
                                        .run_id = run_id,
                                        .spikes = spikes,
                                        .hist_max = hist_max,
                                        .t0 = t0 };
                pthread_create(&th[t], NULL, fill, &f[t]);
        }
        int ret = 0;
        for (unsigned t = 0; t < THREADS; t++) {
                pthread_join(th[t], NULL);
                ret |= f[t].failed;
        }
        if (ret)
                return 1;
        farm_db_close(db);
        for (unsigned v = 0; v < VARIANTS; v++)
                free(hist[v]);
        return 0;
}
