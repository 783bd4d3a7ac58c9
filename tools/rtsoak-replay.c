/* SPDX-License-Identifier: MIT */
/* rtsoak-replay: posts synthetic rtsoak.summary/1 histories to a real rtsoak-server, so that
 * weeks of farm history (spikes, gaps, unclean ends, loads going down) take seconds.  main():
 * the options, the machines, the posting threads and the final figures. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "replay.h"

/* Posts every machine's history from jobs threads; their figures added up into *total.  false
 * when there is no memory for the threads. */
static bool post_all(struct stats *total) {
        unsigned nworkers = (unsigned) MIN((size_t) replay_opt.jobs, replay_nmachines);
        struct worker *workers = calloc(nworkers, sizeof(*workers));
        if (!workers)
                return false;
        unsigned started = 0;
        for (unsigned i = 0; i < nworkers; i++) {
                int r = replay_worker_init(&workers[i]);
                if (r < 0) {
                        log_error_errno(r, "Cannot set up a worker: %m");
                        atomic_store(&replay_failed, true);
                        break;
                }
                r = -pthread_create(&workers[i].thread, NULL, replay_worker_main, &workers[i]);
                if (r < 0) {
                        log_error_errno(r, "Cannot start a worker thread: %m");
                        atomic_store(&replay_failed, true);
                        break;
                }
                started++;
        }
        for (unsigned i = 0; i < nworkers; i++) {
                if (i < started)
                        pthread_join(workers[i].thread, NULL);
                total->machines += workers[i].stats.machines;
                total->runs += workers[i].stats.runs;
                total->intervals += workers[i].stats.intervals;
                total->events += workers[i].stats.events;
                total->uploads += workers[i].stats.uploads;
                total->retries += workers[i].stats.retries;
                replay_worker_done(&workers[i]);
        }
        free(workers);
        return true;
}

/* What was posted in secs, and the --spike and --load-down times that fell in nothing sent. */
static void print_figures(const struct stats *total, double secs) {
        double rate = secs > 0 ? (double) (uint64_t) ((double) total->intervals / secs) : 0;
        if (!replay_opt.quiet && atomic_load(&replay_unsent_spikes))
                log_warning("%u --spike time(s) fell in no interval that was sent (a gap, or "
                            "between runs)",
                            atomic_load(&replay_unsent_spikes));
        if (!replay_opt.quiet && atomic_load(&replay_unsent_downs))
                log_warning("%u --load-down time(s) fell in no interval that was sent (a gap, "
                            "or between runs): no load_exit event for them",
                            atomic_load(&replay_unsent_downs));
        if (replay_opt.json) {
                json_auto_t *j = json_pack(
                        "{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b}", "machines",
                        (json_int_t) total->machines, "runs", (json_int_t) total->runs, "intervals",
                        (json_int_t) total->intervals, "events", (json_int_t) total->events,
                        "uploads", (json_int_t) total->uploads, "retries",
                        (json_int_t) total->retries, "seconds", secs, "intervals_per_second", rate,
                        "ok", !atomic_load(&replay_failed));
                if (j)
                        json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(12)),
                                putchar('\n');
        } else if (!replay_opt.quiet)
                printf("machines %" PRIu64 ", runs %" PRIu64 ", intervals %" PRIu64
                       ", events %" PRIu64 ", uploads %" PRIu64 ", seconds %.3f, "
                       "intervals/s %.0f\n",
                       total->machines, total->runs, total->intervals, total->events,
                       total->uploads, secs, rate);
}

static void free_all(void) {
        for (size_t i = 0; i < replay_nmachines; i++) {
                explicit_bzero(replay_machines[i].token, strlen(replay_machines[i].token));
                free(replay_machines[i].token);
        }
        free(replay_machines);
        free(replay_opt.spikes);
        free(replay_opt.gaps);
        free(replay_opt.ends);
        free(replay_opt.downs);
        free(replay_opt.pdowns);
        free(replay_opt.zeros);
        free(replay_opt.probed);
        free(replay_opt.steps);
}

int main(int argc, char **argv) {
        log_set_program("rtsoak-replay");
        int r = replay_parse_options(argc, argv);
        if (r > 0)
                return EXIT_SUCCESS;
        if (r < 0 || replay_parse_inventory() < 0)
                return EXIT_USAGE;
        r = replay_load_machines();
        if (r == -EINVAL)
                return EXIT_USAGE;
        if (r < 0)
                return EXIT_FAILURE;
        if (replay_opt.ca_file && access(replay_opt.ca_file, R_OK) < 0)
                return replay_usage_error("--ca", "cannot read '%s': %s", replay_opt.ca_file,
                                          strerror(errno)),
                       EXIT_USAGE;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        struct stats total = {};
        int64_t t0 = now_ns(CLOCK_MONOTONIC);
        if (!post_all(&total))
                return log_oom(), EXIT_FAILURE;
        /* Milliseconds are precise enough, and print as such in JSON. */
        print_figures(&total,
                      (double) ((now_ns(CLOCK_MONOTONIC) - t0) / (int64_t) NSEC_PER_MSEC) / 1e3);
        free_all();
        curl_global_cleanup();
        return atomic_load(&replay_failed) ? EXIT_FAILURE : EXIT_SUCCESS;
}
