/* SPDX-License-Identifier: MIT */
/* Unit tests of the systemd glue's logic: the watchdog's progress checks (probes, beating
 * parts, a part stuck inside one call) and the configuration reload (live keys, keys kept
 * until a restart, refusals). */
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"
#include "macro.h"
#include "reload.h"
#include "timeutil.h"
#include "watchdog.h"

static void test_watchdog_check(void **state) {
        struct probe *pr[2];
        struct heartbeat storage = { .name = "storage writer" };
        struct heartbeat collector = { .name = "collector", .beating = true };
        struct heartbeat uploader = { .name = "uploader", .beating = true };
        struct heartbeat *parts[] = { &storage, &collector, &uploader, NULL };
        uint64_t pm[2] = { UINT64_MAX, UINT64_MAX }, hm[3] = { UINT64_MAX, UINT64_MAX, UINT64_MAX };
        struct watchdog_state st = { .probe_marks = pm, .part_marks = hm };
        char why[256];
        (void) state;

        for (int i = 0; i < 2; i++) {
                pr[i] = calloc(1, sizeof(struct probe));
                assert_non_null(pr[i]);
                pr[i]->cpu = i + 2;
                atomic_store(&pr[i]->state, PROBE_RUNNING);
        }
        atomic_store(&storage.active, true);
        atomic_store(&collector.active, true);
        struct watchdog_params p = { .probes = pr, .nprobes = 2, .parts = parts };

        /* The first check only learns where everything stands. */
        assert_true(watchdog_check(&p, &st, 1000, why, sizeof(why)));
        /* Nothing moved: both probes and the collector; the idle storage and the inactive
         * uploader are fine. */
        assert_false(watchdog_check(&p, &st, 2000, why, sizeof(why)));
        assert_string_equal(why, "probe on CPU 2, probe on CPU 3, collector");

        /* Everything moves: samples, a new slot (the sample count restarting), beats. */
        atomic_store(&pr[0]->progress, 7);
        atomic_store(&pr[1]->head, 1);
        heartbeat_beat(&collector);
        assert_true(watchdog_check(&p, &st, 3000, why, sizeof(why)));
        assert_string_equal(why, "");

        /* The uploader, once active, must beat too; a probe that stopped running is not
         * expected to move. */
        atomic_store(&uploader.active, true);
        atomic_store(&pr[0]->progress, 8);
        atomic_store(&pr[1]->state, PROBE_DONE);
        heartbeat_beat(&collector);
        assert_true(watchdog_check(&p, &st, 4000, why, sizeof(why)));
        atomic_store(&pr[0]->progress, 9);
        heartbeat_beat(&collector);
        assert_false(watchdog_check(&p, &st, 5000, why, sizeof(why)));
        assert_string_equal(why, "uploader");

        /* Storage: a call that began after the last check is fine; one that was already
         * running at the last check is stuck; leaving it clears that. */
        heartbeat_beat(&uploader);
        atomic_store(&pr[0]->progress, 10);
        heartbeat_beat(&collector);
        atomic_store(&storage.busy_ns, 5500);
        assert_true(watchdog_check(&p, &st, 6000, why, sizeof(why)));
        heartbeat_beat(&uploader);
        atomic_store(&pr[0]->progress, 11);
        heartbeat_beat(&collector);
        assert_false(watchdog_check(&p, &st, 7000, why, sizeof(why)));
        assert_string_equal(why, "storage writer");
        heartbeat_leave(&storage);
        heartbeat_beat(&uploader);
        atomic_store(&pr[0]->progress, 12);
        heartbeat_beat(&collector);
        assert_true(watchdog_check(&p, &st, 8000, why, sizeof(why)));

        /* The collector misses its beat while its thread entered storage after the last
         * check: storage is where it is stuck, and is named first. */
        collector.same_thread = &storage;
        heartbeat_beat(&uploader);
        atomic_store(&pr[0]->progress, 13);
        atomic_store(&storage.busy_ns, 8500);
        assert_false(watchdog_check(&p, &st, 9000, why, sizeof(why)));
        assert_string_equal(why, "storage writer, collector");

        for (int i = 0; i < 2; i++)
                free(pr[i]);
}

static char *dir;

static const char *write_conf(const char *name, const char *text) {
        static char path[4][600];
        static int k;
        char *p = path[k++ % 4];
        snprintf(p, 600, "%s/%s", dir, name);
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
        return p;
}

static void load(struct daemon_config *c, const char *path) {
        char err[CONF_ERROR_MAX];
        if (daemon_config_load(c, path, true, NULL, NULL, err) < 0)
                fail_msg("%s", err);
}

static void test_reload(void **state) {
        struct daemon_config cur;
        struct reload_result rr;
        char err[CONF_ERROR_MAX];
        (void) state;

        const char *path = write_conf("a.conf", "[Storage]\nInterval=2s\n\n[Schedule]\n"
                                                "Rotation=idle 1h\n");
        load(&cur, path);

        /* Nothing changed. */
        assert_int_equal(reload_config(&cur, path, true, NULL, &rr, err), 0);
        assert_string_equal(rr.changed, "");
        assert_string_equal(rr.kept, "");
        assert_string_equal(rr.applies, "");
        reload_result_done(&rr);

        /* The README's step 4: only [Upload] changes, which applies at once (no word of the
         * rotation); [Forensics] is read at start and waits for a restart. */
        write_conf("a.conf", "[Storage]\nInterval=2s\n\n[Schedule]\nRotation=idle 1h\n\n"
                             "[Upload]\nServer=https://farm.lab.example:8470\n"
                             "CAFile=/etc/rtsoak/farm-ca.pem\n\n[Forensics]\nJournalLines=7\n");
        assert_int_equal(reload_config(&cur, path, true, NULL, &rr, err), 0);
        assert_string_equal(rr.changed, "Upload.Server, Upload.CAFile");
        assert_string_equal(rr.applies, "at once: Upload.Server, Upload.CAFile");
        assert_string_equal(rr.kept, "Forensics.JournalLines=7 (running: 100)");
        reload_result_done(&rr);

        /* Live keys change; restart-only keys keep their running values, with a note. */
        write_conf("a.conf", "[Probe]\nPriority=80\nThreshold=250us\nCPUs=0\n\n[Storage]\n"
                             "Interval=2s\n\n[Schedule]\nRotation=cpu 2h\n\n[Upload]\nBatch=5\n\n"
                             "[Scenario.cpu]\nLoad=cpu --load 5%\n");
        assert_int_equal(reload_config(&cur, path, true, NULL, &rr, err), 0);
        assert_string_equal(
                rr.changed,
                "Probe.Threshold, Upload.Batch, Schedule.Rotation, Scenario definitions");
        assert_string_equal(rr.kept,
                            "Probe.CPUs=0 (running: all), Probe.Priority=80 (running: 95)");
        assert_string_equal(rr.applies, "at once: Upload.Batch; from the next interval boundary: "
                                        "Probe.Threshold, Schedule.Rotation, Scenario definitions");
        assert_int_equal(rr.cfg.priority, 95);
        assert_true(rr.cfg.cpus.all);
        assert_int_equal(rr.cfg.threshold_ns, 250 * NSEC_PER_USEC);
        assert_int_equal(rr.cfg.upload_batch, 5);
        assert_int_equal(rr.cfg.nsteps, 1);
        assert_string_equal(rr.cfg.steps[0].scenario->name, "cpu");
        assert_int_equal(rr.cfg.steps[0].scenario->nloads, 1);
        reload_result_done(&rr);

        /* A bad file: refused with its file and line. */
        write_conf("a.conf", "[Storage]\nInterval=2s\n[Probe]\nThreshold=soon\n");
        assert_true(reload_config(&cur, path, true, NULL, &rr, err) < 0);
        char where[700];
        snprintf(where, sizeof(where), "%s:4", path);
        if (!strstr(err, where))
                fail_msg("%s does not name %s", err, where);

        /* Good on its own, but not with the running interval: the rotation's 3s is no whole
         * number of the 2s intervals that keep running. */
        write_conf("a.conf", "[Storage]\nInterval=1s\n[Schedule]\nRotation=idle 3s\n");
        assert_true(reload_config(&cur, path, true, NULL, &rr, err) < 0);
        assert_non_null(strstr(err, "with the running values of keys that need a restart"));

        /* The --set assignments of the command line still come last. */
        write_conf("a.conf", "[Storage]\nInterval=2s\n[Probe]\nThreshold=300us\n");
        char *sets[] = { "Probe.Threshold=400us", NULL };
        assert_int_equal(reload_config(&cur, path, true, sets, &rr, err), 0);
        assert_int_equal(rr.cfg.threshold_ns, 400 * NSEC_PER_USEC);
        reload_result_done(&rr);

        assert_true(reload_needs_restart("Storage", "Path"));
        assert_true(reload_needs_restart("Load", "User"));
        assert_true(reload_needs_restart("Probe", "Interval"));
        assert_false(reload_needs_restart("Probe", "Threshold"));
        assert_false(reload_needs_restart("Upload", "Server"));
        assert_true(reload_needs_restart("Upload", "Release")); /* a run keeps its name */
        assert_false(reload_needs_restart("Schedule", "Rotation"));
        assert_true(reload_needs_restart("Forensics", "FlightRecorder")); /* opened at start */
        assert_true(reload_needs_restart("Trace", "Enabled"));
        assert_int_equal(reload_applies("Upload", "TokenFile"), RELOAD_AT_ONCE);
        assert_int_equal(reload_applies("Probe", "Threshold"), RELOAD_NEXT_INTERVAL);
        /* The inventory check's timer is set again by the reload. */
        assert_int_equal(reload_applies("Inventory", "Check"), RELOAD_AT_ONCE);
        daemon_config_free(&cur);
}

static int setup(void **state) {
        (void) state;
        char tmpl[] = "/tmp/rtsoak-notify-parts-XXXXXX";
        dir = strdup(mkdtemp(tmpl));
        return dir ? 0 : -1;
}

static int teardown(void **state) {
        (void) state;
        tests_remove_dir(dir);
        free(dir);
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_watchdog_check),
                cmocka_unit_test(test_reload),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
