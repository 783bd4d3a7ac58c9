/* SPDX-License-Identifier: MIT */
/* Unit tests of the INI reader and of rtsoakd's key table: every default parses, every
 * key's bounds are enforced, errors name file, line and key, drop-ins apply in order. */
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "daemon-config.h"
#include "macro.h"

static char dir[] = "/tmp/test-conf-XXXXXX";

static void write_file(const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static int load(const char *name, char *const *sets, struct daemon_config *c, char *err) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return daemon_config_load(c, path, true, sets, NULL, err);
}

static void test_defaults(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        (void) state;
        write_file("empty.conf", "");
        assert_int_equal(load("empty.conf", NULL, &c, err), 0);
        assert_true(c.cpus.all);
        assert_int_equal(c.priority, 95);
        assert_int_equal(c.probe_interval_ns, 200000);
        assert_int_equal(c.threshold_ns, 100000);
        assert_int_equal(c.hist_limit_ns, 1000000);
        assert_true(c.lock_memory);
        assert_int_equal(c.dma_latency_ns, 0);
        assert_string_equal(c.storage_path, "/var/lib/rtsoak/rtsoak.db");
        assert_int_equal(c.interval_ns, 60 * NSEC_PER_SEC);
        daemon_config_free(&c);
}

static void test_values(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        (void) state;
        write_file("v.conf", "# comment\n; other comment\n\n[Probe]\n  CPUs = 0,2-3  \n"
                             "Priority=80\nInterval=1ms\nThreshold=50us\nHistogramLimit=2ms\n"
                             "LockMemory=no\nCpuDmaLatency=off\n[Storage]\nPath=/tmp/x.db\n"
                             "Interval=1h\n");
        assert_int_equal(load("v.conf", NULL, &c, err), 0);
        assert_int_equal(c.cpus.n, 3);
        assert_int_equal(c.priority, 80);
        assert_int_equal(c.probe_interval_ns, NSEC_PER_MSEC);
        assert_int_equal(c.threshold_ns, 50000);
        assert_int_equal(c.hist_limit_ns, 2 * NSEC_PER_MSEC);
        assert_false(c.lock_memory);
        assert_int_equal(c.dma_latency_ns, -1);
        assert_string_equal(c.storage_path, "/tmp/x.db");
        assert_int_equal(c.interval_ns, 3600 * NSEC_PER_SEC);
        daemon_config_free(&c);
}

/* [Forensics] FlightRecorder= is documented to be turned off with "off"; an empty assignment
 * means the default, /dev/pmsg0, as for every key. */
static void test_flight_recorder_off(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        (void) state;
        write_file("fr.conf", "[Forensics]\nFlightRecorder=off\n");
        assert_int_equal(load("fr.conf", NULL, &c, err), 0);
        assert_string_equal(c.flight_recorder, "");
        _cleanup_free_ char *text = daemon_config_text(&c);
        assert_non_null(strstr(text, "\nFlightRecorder=off\n"));
        daemon_config_free(&c);
        write_file("fr2.conf", "[Forensics]\nFlightRecorder=off\nFlightRecorder=\n");
        assert_int_equal(load("fr2.conf", NULL, &c, err), 0);
        assert_string_equal(c.flight_recorder, "/dev/pmsg0");
        daemon_config_free(&c);
        write_file("fr3.conf", "[Forensics]\nFlightRecorder=/run/fr\n");
        assert_int_equal(load("fr3.conf", NULL, &c, err), 0);
        assert_string_equal(c.flight_recorder, "/run/fr");
        daemon_config_free(&c);
}

static void test_errors(void **state) {
        static const struct {
                const char *text, *error; /* error after "<dir>/e.conf:" */
        } t[] = {
                { "[Probe]\nPriority=0\n", "2: [Probe] Priority=0: out of range (1 to 99)" },
                { "[Probe]\nPriority=100\n", "2: [Probe] Priority=100: out of range (1 to 99)" },
                { "[Probe]\nPriority=high\n", "2: [Probe] Priority=high: not a whole number" },
                { "[Probe]\nPriority=-5\n", "2: [Probe] Priority=-5: not a whole number" },
                { "[Probe]\nInterval=200\n",
                  "2: [Probe] Interval=200: missing unit (use ns, us, ms, s, min, h, d or w)" },
                { "[Probe]\nInterval=5us\n", "2: [Probe] Interval=5us: out of range (10us to 1s)" },
                { "[Probe]\nThreshold=2h\n", "2: [Probe] Threshold=2h: out of range (1us to 1h)" },
                { "[Probe]\nHistogramLimit=1500ns\n",
                  "2: [Probe] HistogramLimit=1500ns: must be a whole number of microseconds" },
                { "[Probe]\nHistogramLimit=1s\n",
                  "2: [Probe] HistogramLimit=1s: out of range (1us to 100ms)" },
                { "[Probe]\nCPUs=0-\n", "2: [Probe] CPUs=0-: expected a CPU number after '-'" },
                { "[Probe]\nLockMemory=maybe\n",
                  "2: [Probe] LockMemory=maybe: not a boolean (use yes or no)" },
                { "[Probe]\nCpuDmaLatency=never\n",
                  "2: [Probe] CpuDmaLatency=never: expected a number" },
                { "[Probe]\nCPUS=0\n", "2: unknown key CPUS= in section [Probe]" },
                { "[Probes]\nCPUs=0\n", "1: unknown section [Probes]" },
                { "CPUs=0\n", "1: CPUs= appears before any [Section] header" },
                { "[Probe\n", "1: section header without closing ']'" },
                { "[Probe]\njust words\n", "2: expected Key=Value, got \"just words\"" },
                { "[Probe]\n=5\n", "2: missing key before '='" },
                { "\n\n[Storage]\nInterval=90500ms\n",
                  "4: [Storage] Interval=90500ms: must be a whole number of seconds" },
                { "[Storage]\nInterval=0\n", "2: [Storage] Interval=0: out of range (1s to 1d)" },
                { "[Storage]\nPath=\nPath=\n[Probe]\nInterval=1s\n[Storage]\nInterval=5s\n",
                  "5: [Probe] Interval=1s is too long for [Storage] Interval=5s (set at " },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct daemon_config c;
                char err[CONF_ERROR_MAX], want[CONF_ERROR_MAX];
                write_file("e.conf", t[i].text);
                int r = load("e.conf", NULL, &c, err);
                daemon_config_free(&c);
                if (r >= 0)
                        fail_msg("case %zu accepted: %s", i, t[i].text);
                snprintf(want, sizeof(want), "%s/e.conf:%s", dir, t[i].error);
                if (strncmp(err, want, strlen(want)) != 0)
                        fail_msg("case %zu:\n got: %s\nwant: %s", i, err, want);
        }
}

static void test_dropins_and_sets(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX], path[512];
        char **sources = NULL;
        (void) state;
        snprintf(path, sizeof(path), "%s/main.conf.d", dir);
        mkdir(path, 0755);
        write_file("main.conf", "[Probe]\nPriority=10\nThreshold=1ms\n");
        write_file("main.conf.d/20-b.conf", "[Probe]\nPriority=30\n");
        write_file("main.conf.d/10-a.conf", "[Probe]\nPriority=20\nThreshold=\n");
        write_file("main.conf.d/ignored.txt", "garbage that must not be read\n");
        char *sets[] = { "Probe.Interval=500us", "Storage.Path=/tmp/y.db", NULL };
        snprintf(path, sizeof(path), "%s/main.conf", dir);
        assert_int_equal(daemon_config_load(&c, path, true, sets, &sources, err), 0);
        /* 20-b after 10-a; an empty assignment resets to the default; --set last. */
        assert_int_equal(c.priority, 30);
        assert_int_equal(c.threshold_ns, 100000);
        assert_int_equal(c.probe_interval_ns, 500000);
        assert_string_equal(c.storage_path, "/tmp/y.db");
        assert_non_null(sources);
        assert_string_equal(sources[0], path);
        assert_non_null(strstr(sources[1], "10-a.conf"));
        assert_non_null(strstr(sources[2], "20-b.conf"));
        assert_null(sources[3]);
        for (char **s = sources; *s; s++)
                free(*s);
        free(sources);
        daemon_config_free(&c);

        /* Errors in --set name the option. */
        char *bad[] = { "Probe.Priority=200", NULL };
        assert_true(daemon_config_load(&c, path, true, bad, NULL, err) < 0);
        assert_string_equal(err, "--set Probe.Priority=200: [Probe] Priority=200: out of range "
                                 "(1 to 99)");
        daemon_config_free(&c);
        char *bad2[] = { "Priority=200", NULL };
        assert_true(daemon_config_load(&c, path, true, bad2, NULL, err) < 0);
        assert_string_equal(err, "--set Priority=200: expected Section.Key=Value");
        daemon_config_free(&c);

        /* A missing explicit file is an error; a missing default one is not. */
        snprintf(path, sizeof(path), "%s/nope.conf", dir);
        assert_true(daemon_config_load(&c, path, true, NULL, NULL, err) < 0);
        assert_non_null(strstr(err, "nope.conf: cannot open: No such file or directory"));
        daemon_config_free(&c);
        assert_int_equal(daemon_config_load(&c, path, false, NULL, NULL, err), 0);
        daemon_config_free(&c);
}

static void test_print_roundtrip(void **state) {
        struct daemon_config c, d;
        char err[CONF_ERROR_MAX];
        (void) state;
        write_file("r.conf", "[Probe]\nCPUs=1,3-5\nInterval=1500us\nCpuDmaLatency=10us\n"
                             "[Storage]\nInterval=90s\n");
        assert_int_equal(load("r.conf", NULL, &c, err), 0);
        char *text = daemon_config_text(&c);
        assert_non_null(text);
        /* What --check-config prints is itself a valid configuration with the same meaning. */
        write_file("r2.conf", text);
        assert_int_equal(load("r2.conf", NULL, &d, err), 0);
        char *text2 = daemon_config_text(&d);
        assert_string_equal(text, text2);
        free(text);
        free(text2);
        daemon_config_free(&c);
        daemon_config_free(&d);
}

static void test_long_line(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        char *big = malloc(10000);
        (void) state;
        memset(big, 'a', 9999);
        big[9999] = '\0';
        memcpy(big, "[Storage]\nPath=", 15);
        write_file("long.conf", big);
        free(big);
        assert_true(load("long.conf", NULL, &c, err) < 0);
        assert_non_null(strstr(err, "long.conf:2: line too long"));
        daemon_config_free(&c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_flight_recorder_off),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_dropins_and_sets),
                cmocka_unit_test(test_print_roundtrip),
                cmocka_unit_test(test_long_line),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
