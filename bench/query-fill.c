/* SPDX-License-Identifier: MIT */
/* Fills a farm database for the query benchmark (bench/query.py) through the server's own
 * store path (farm_store_summary), in-process: months of one-minute intervals are too many to
 * send over HTTP in a benchmark's time. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "macro.h"
#include "db-internal.h"
#include "db.h"
#include "settings.h"
#include "timeutil.h"

#define MIN_NS (60 * INT64_C(1000000000))
#define LIMIT_US 1000

static const char *const scenarios[] = { "idle", "cpu", "io", "net", "hackbench", "mixed" };

/* xorshift64*: a fixed sequence, so that every fill is the same farm. */
static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) {
        rnd_state ^= rnd_state >> 12;
        rnd_state ^= rnd_state << 25;
        rnd_state ^= rnd_state >> 27;
        return rnd_state * 2685821657736338717ull;
}

/* One CPU of one interval: 300,000 samples (a minute at 200 us) in a body of about 15
 * buckets between 3 and 18 us, a thin tail, and now and then an outlier up to 2 ms. */
static void make_cpu(struct summary_cpu *x, uint32_t cpu, int64_t start_ns, uint64_t *counts,
                     bool worse) {
        uint32_t n = hist_nbuckets(LIMIT_US);
        uint64_t left = 300000, max_ns = 0;
        memset(counts, 0, n * sizeof(*counts));
        for (uint32_t us = 3; us < 18; us++) {
                uint64_t c = us == 17 ? left / 2 : left / 3 + rnd() % 100;
                c = MIN(c, left);
                counts[us] += c;
                left -= c;
                max_ns = us * 1000 + 999;
        }
        for (int k = 0; k < 5 && left > 0; k++) {
                uint64_t us = 18 + rnd() % (worse ? 60 : 30);
                counts[us]++;
                left--;
                max_ns = MAX(max_ns, us * 1000 + rnd() % 1000);
        }
        if (rnd() % 500 == 0 && left > 0) {
                uint64_t ns = 100000 + rnd() % 1900000;
                counts[hist_index(LIMIT_US, ns)]++;
                left--;
                max_ns = MAX(max_ns, ns);
        }
        counts[5] += left;
        free(x->hist);
        *x = (struct summary_cpu){ .cpu = cpu,
                                   .samples = 300000,
                                   .min_ns = 3000,
                                   .avg_ns = 6000,
                                   .max_ns = max_ns,
                                   .max_time_ns = start_ns + (int64_t) (rnd() % (uint64_t) MIN_NS),
                                   .violations = max_ns > 100000,
                                   .hist_limit_us = LIMIT_US };
        if (hist_encode(LIMIT_US, counts, &x->hist, &x->hist_len) < 0)
                abort();
}

static void usage(void) {
        fprintf(stderr, "usage: query-fill --db PATH [--machines N] [--days D] [--cpus C] "
                        "[--today-minutes M]\n");
        exit(EXIT_CONFIG);
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "db", required_argument, NULL, 'd' },
                { "machines", required_argument, NULL, 'm' },
                { "days", required_argument, NULL, 'D' },
                { "cpus", required_argument, NULL, 'c' },
                { "today-minutes", required_argument, NULL, 't' },
                {},
        };
        const char *path = NULL;
        unsigned machines = 1, days = 30, cpus = 8, today_minutes = 0;
        char err[FARM_ERROR_MAX];
        int o;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (o) {
                case 'd':
                        path = optarg;
                        break;
                case 'm':
                        machines = (unsigned) atoi(optarg);
                        break;
                case 'D':
                        days = (unsigned) atoi(optarg);
                        break;
                case 'c':
                        cpus = (unsigned) atoi(optarg);
                        break;
                case 't':
                        today_minutes = (unsigned) atoi(optarg);
                        break;
                default:
                        usage();
                }
        }
        if (!path || !machines || !days || !cpus || cpus > 256)
                usage();

        farm_db *db;
        if (farm_db_open(path, &db, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        /* Only for filling a benchmark's farm: the server itself always syncs. */
        if (!farm_is_pg(db))
                sql_exec(db->wc, "PRAGMA synchronous = OFF");

        int64_t now = now_ns(CLOCK_REALTIME);
        int64_t today = now / FARM_DAY_NS * FARM_DAY_NS, first = today - days * FARM_DAY_NS;
        uint64_t total = (uint64_t) days * 1440 + today_minutes, half = (uint64_t) days / 2 * 1440;
        uint64_t *counts = calloc(hist_nbuckets(LIMIT_US), sizeof(uint64_t));
        struct summary_interval *ivs = calloc(SUMMARY_MAX_INTERVALS, sizeof(*ivs));
        for (size_t i = 0; i < SUMMARY_MAX_INTERVALS; i++)
                ivs[i].cpus = calloc(cpus, sizeof(struct summary_cpu));
        int64_t t0 = now_ns(CLOCK_MONOTONIC);

        for (unsigned m = 0; m < machines; m++) {
                char id[FARM_MACHINE_ID_LEN + 1], host[32];
                uint8_t hash[SHA256_DIGEST_SIZE] = {};
                snprintf(id, sizeof(id), "%032x", m + 1);
                snprintf(host, sizeof(host), "lab%u", m + 1);
                memcpy(hash, &m, sizeof(m));
                hash[31] = 0x5a;
                if (farm_enroll(db, id, hash, NULL, "query-fill", NULL, now, err) < 0) {
                        fprintf(stderr, "%s\n", err);
                        return 1;
                }
                /* Two runs: the first half of the days with the older kernel, then the new one,
                 * whose tail is a little worse. */
                for (int run = 1; run <= 2; run++) {
                        uint64_t from = run == 1 ? 0 : half, to = run == 1 ? half : total;
                        struct summary s = {
                                .machine = { id, host, (char *) "Bench CPU", cpus },
                                .run = { run, (char *) "fedcba9876543210fedcba9876543210",
                                         run == 1 ? (char *) "6.6.30-rt30" : (char *) "6.6.40-rt36",
                                         (char *) "#1 SMP PREEMPT_RT", (char *) "quiet",
                                         (char *) "PREEMPT_RT", (char *) "0.1.0",
                                         (char *) "00112233445566778899aabbccddeeff0011223344556"
                                                  "6778899aabbccddeeff",
                                         first + (int64_t) from * MIN_NS, 100000, 200000,
                                         (uint64_t) MIN_NS },
                                .intervals = ivs,
                        };
                        for (uint64_t k = from; k < to; k += SUMMARY_MAX_INTERVALS) {
                                size_t n = (size_t) MIN((uint64_t) SUMMARY_MAX_INTERVALS, to - k);
                                for (size_t i = 0; i < n; i++) {
                                        struct summary_interval *iv = &ivs[i];
                                        iv->seq = k + i;
                                        iv->start_ns = first + (int64_t) (k + i) * MIN_NS;
                                        iv->length_ns = (uint64_t) MIN_NS;
                                        iv->scenario = (char *)
                                                scenarios[(k + i) / 60 % ELEMENTSOF(scenarios)];
                                        iv->ncpus = cpus;
                                        for (unsigned c = 0; c < cpus; c++)
                                                make_cpu(&iv->cpus[c], c, iv->start_ns, counts,
                                                         run == 2);
                                }
                                s.seq = k;
                                s.nintervals = n;
                                struct farm_stored st;
                                if (farm_store_summary(db, &s, now, &st, err) < 0) {
                                        fprintf(stderr, "%s\n", err);
                                        return 1;
                                }
                        }
                }
                fprintf(stderr, "machine %u/%u filled (%.0f s)\n", m + 1, machines,
                        (double) (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
        }
        for (size_t i = 0; i < SUMMARY_MAX_INTERVALS; i++) {
                for (unsigned c = 0; c < cpus; c++)
                        free(ivs[i].cpus[c].hist);
                free(ivs[i].cpus);
        }
        free(ivs);
        free(counts);
        farm_db_close(db);
        printf("%u machines, %llu intervals of %u CPUs each, from %lld (%u days before today)\n",
               machines, (unsigned long long) total, cpus, (long long) first, days);
        return 0;
}
