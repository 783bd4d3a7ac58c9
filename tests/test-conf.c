/* SPDX-License-Identifier: MIT */
/* Unit tests of the INI reader and of rtsoakd's key table: every default parses, every
 * key's bounds are enforced, errors name file, line and key, drop-ins apply in order. */
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "daemon-config.h"
#include "macro.h"
#include "text-safe.h"

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

/* An unknown section lists every section, an unknown key every key of its section (the
 * programs' one listing of what they take: tests/check-man-options.sh holds the documents
 * against it), in a file and in a --set alike. */
static void test_unknown_lists_what_is_taken(void **state) {
        const struct conf_table *t = &daemon_config_table;
        char err[CONF_ERROR_MAX], want[128];
        struct daemon_config c;
        (void) state;
        write_file("u.conf", "[Probe]\n[Nosuch]\n");
        assert_true(load("u.conf", NULL, &c, err) < 0);
        daemon_config_free(&c);
        for (size_t i = 0; i < t->n; i++) {
                snprintf(want, sizeof(want), "[%s]", t->items[i].section);
                if (!strstr(err, want))
                        fail_msg("%s is not in: %s", want, err);
        }
        assert_non_null(strstr(err, "u.conf:2: unknown section [Nosuch]; the sections: [Probe], "));
        assert_non_null(strstr(err, ", [Scenario.NAME]"));
        for (size_t i = 0; i < t->n; i++) {
                char set[128], file[128];
                const char *s = t->items[i].section;
                snprintf(set, sizeof(set), "%s.Nosuch=1", s);
                snprintf(file, sizeof(file), "[%s]\nNosuch=1\n", s);
                for (int how = 0; how < 2; how++) {
                        char *sets[] = { set, NULL };
                        write_file("u.conf", how ? file : "");
                        assert_true(load("u.conf", how ? NULL : sets, &c, err) < 0);
                        daemon_config_free(&c);
                        snprintf(want, sizeof(want),
                                 "unknown key Nosuch= in section [%s]; [%s] takes ", s, s);
                        if (!strstr(err, want))
                                fail_msg("want '%s' in: %s", want, err);
                        /* Each key of the section, and no other: as many '=' as rows. */
                        const char *list = strstr(err, " takes ") + 6;
                        size_t rows = 0, listed = 0;
                        for (size_t j = 0; j < t->n; j++) {
                                if (strcmp(t->items[j].section, s) != 0)
                                        continue;
                                rows++;
                                snprintf(want, sizeof(want), " %s=", t->items[j].key);
                                if (!strstr(list, want))
                                        fail_msg("[%s] %s= is not listed: %s", s, t->items[j].key,
                                                 err);
                        }
                        for (const char *p = list; (p = strchr(p, '=')); p++)
                                listed++;
                        if (listed != rows)
                                fail_msg("[%s] has %zu keys, %zu listed: %s", s, rows, listed, err);
                }
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

/* Every key of the table, and a scenario's Load=, with each class of character the text rule
 * refuses in the middle of its value, in a file and with --set: refused, naming where and the
 * key.  A tab is a blank, as anywhere in a line. */
static void test_text_rule(void **state) {
        static const char *const refused[] = {
                "\x01",         "\x1b[31m", "\r",           "\n",           "\x7f",
                "\xc2\x85",     "\xc2\x9b", "\xe2\x80\xaa", "\xe2\x80\xae", "\xe2\x81\xa6",
                "\xe2\x81\xa9", "\xd8\x9c", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xff",
                "\x80",         "\xe2\x80", "\xc0\xaf",     "\xe0\x80\xaf", "\xed\xa0\x80",
        };
        const struct conf_table *t = &daemon_config_table;
        size_t tried = 0;
        write_file("empty.conf", "");
        for (size_t i = 0; i <= t->n; i++) {
                const char *section = i < t->n ? t->items[i].section : "Scenario.mine";
                const char *key = i < t->n ? t->items[i].key : "Load";
                /* Between two copies of the default: in the value, not at its ends (where a
                 * blank, a CR among them, is stripped as in any line). */
                const char *def = i < t->n && *t->items[i].def && strlen(t->items[i].def) < 64
                                          ? t->items[i].def
                                          : "ab";
                for (size_t k = 0; k < ELEMENTSOF(refused); k++) {
                        struct daemon_config c;
                        char text[1024], set[1024], want[1024], err[CONF_ERROR_MAX];
                        /* A newline cannot be inside a line of a file, only in a --set. */
                        if (strcmp(refused[k], "\n") != 0) {
                                snprintf(text, sizeof(text), "[%s]\n%s=%s%s%s\n", section, key, def,
                                         refused[k], def);
                                write_file("t.conf", text);
                                int r = load("t.conf", NULL, &c, err);
                                daemon_config_free(&c);
                                snprintf(want, sizeof(want), "%s/t.conf:2: [%s] %s=: ", dir,
                                         section, key);
                                if (r >= 0 || strncmp(err, want, strlen(want)) != 0)
                                        fail_msg("[%s] %s= with class %zu: %d %s", section, key, k,
                                                 r, err);
                        }
                        snprintf(set, sizeof(set), "%s.%s=%s%s%s", section, key, def, refused[k],
                                 def);
                        char *sets[] = { set, NULL };
                        int r = load("empty.conf", sets, &c, err);
                        daemon_config_free(&c);
                        snprintf(want, sizeof(want), ": [%s] %s=: ", section, key);
                        if (r >= 0 || strncmp(err, "--set ", 6) != 0 || !strstr(err, want) ||
                            text_ok(err, false, (char[TEXT_WHY_MAX]){}) == false)
                                fail_msg("--set %s.%s= with class %zu: %d %s", section, key, k, r,
                                         err);
                        tried++;
                }
        }
        assert_true(tried > 20 * ELEMENTSOF(refused));
        /* A tab inside a value is a blank; a bidirectional override in a section's name is not
         * a name. */
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        write_file("t.conf", "[Schedule]\nRotation=idle\t1h\n");
        assert_int_equal(load("t.conf", NULL, &c, err), 0);
        daemon_config_free(&c);
        write_file("t.conf", "[Scenario.mi\xe2\x80\xaene]\nLoad=cpu\n");
        assert_true(load("t.conf", NULL, &c, err) < 0);
        assert_non_null(strstr(err, "t.conf:2: [Scenario.mi"));
        daemon_config_free(&c);
        (void) state;
}

/* With uploads on and no [Upload] Release=, the kernel's release is the run's name: one that
 * is not a release name is refused before a run starts, rather than every upload by the farm. */
static void test_release_of_the_kernel(void **state) {
        struct daemon_config c;
        char err[CONF_ERROR_MAX];
        char *up[] = { "Upload.Server=http://127.0.0.1:9", NULL },
             *named[] = { "Upload.Server=http://127.0.0.1:9", "Upload.Release=lab-kernel-1", NULL };
        write_file("empty.conf", "");
        assert_int_equal(load("empty.conf", up, &c, err), 0);
        assert_int_equal(daemon_config_check_release(&c, "6.1.0-18-rt-amd64", err), 0);
        assert_int_equal(daemon_config_check_release(&c, "5.15.0-1034+deb~bpo:1", err), 0);
        assert_int_equal(daemon_config_check_release(&c, "5.10.0/rt1", err), -EINVAL);
        assert_string_equal(err, "[Upload] Release= is not set and this kernel's release "
                                 "\"5.10.0/rt1\" (uname -r) is not a release name ('/' at byte 6: "
                                 "a release name may hold only letters, digits and . _ + ~ : -): "
                                 "the farm would refuse every upload; set [Upload] Release=");
        assert_int_equal(daemon_config_check_release(&c, "6.6 \xe2\x80\xae", err), -EINVAL);
        assert_non_null(strstr(err, "\"6.6 \\u202e\""));
        daemon_config_free(&c);
        assert_int_equal(load("empty.conf", named, &c, err), 0);
        assert_int_equal(daemon_config_check_release(&c, "5.10.0/rt1", err), 0);
        daemon_config_free(&c);
        assert_int_equal(load("empty.conf", NULL, &c, err), 0);
        assert_int_equal(daemon_config_check_release(&c, "5.10.0/rt1", err), 0);
        daemon_config_free(&c);
        (void) state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_flight_recorder_off),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_unknown_lists_what_is_taken),
                cmocka_unit_test(test_dropins_and_sets),
                cmocka_unit_test(test_print_roundtrip),
                cmocka_unit_test(test_long_line),
                cmocka_unit_test(test_text_rule),
                cmocka_unit_test(test_release_of_the_kernel),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
