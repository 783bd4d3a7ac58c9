/* SPDX-License-Identifier: MIT */
/* Load generator options: units, bounds, quoting, the canonical text, and errors that name
 * the generator and the option. */
#include "tests.h"
#include "loadgen.h"
#include "macro.h"

static void parse_ok(const char *line, const char *canonical) {
        struct loadgen_spec s = {};
        char err[LOADGEN_ERROR_MAX];
        if (loadgen_parse_line(line, &s, err) < 0)
                fail_msg("'%s' refused: %s", line, err);
        assert_string_equal(s.text, canonical);
        /* The canonical text parses back to itself. */
        struct loadgen_spec s2 = {};
        assert_int_equal(loadgen_parse_line(s.text, &s2, err), 0);
        assert_string_equal(s2.text, s.text);
        loadgen_spec_done(&s2);
        loadgen_spec_done(&s);
}

static void parse_fails(const char *line, const char *msg) {
        struct loadgen_spec s = {};
        char err[LOADGEN_ERROR_MAX] = "";
        assert_true(loadgen_parse_line(line, &s, err) < 0);
        if (!strstr(err, msg))
                fail_msg("'%s': expected '%s' in '%s'", line, msg, err);
        assert_null(s.info);
}

static void test_registry(void **state) {
        assert_int_equal(loadgen_registry_size, 6);
        for (size_t i = 0; i < loadgen_registry_size; i++) {
                const struct loadgen_info *g = loadgen_registry[i];
                assert_ptr_equal(loadgen_find(g->name), g);
                /* Every hook is set: the core never checks for NULL. */
                assert_non_null(g->check);
                assert_non_null(g->probe);
                assert_non_null(g->run);
                assert_true(g->nmetrics <= LOADGEN_MAX_METRICS);
        }
        assert_null(loadgen_find("nope"));
}

static void test_canonical(void **state) {
        parse_ok("cpu", "cpu --workers=0 --load=100% --period=100ms --cache-size=1M --method=mix");
        parse_ok("cpu --load 37.5 --cache-size=64K --workers 3",
                 "cpu --workers=3 --load=37.50% --period=100ms --cache-size=64K --method=mix");
        parse_ok("  cpu\t--period '250ms'  ",
                 "cpu --workers=0 --load=100% --period=250ms --cache-size=1M --method=mix");
        parse_ok("cpu --cache-size 1.5M",
                 "cpu --workers=0 --load=100% --period=100ms --cache-size=1536K --method=mix");
}

static void test_errors(void **state) {
        parse_fails("", "empty load generator line");
        parse_fails("cpu --load '40%", "unterminated ' quote");
        parse_fails("cpu --cache-size 1X", "cpu: --cache-size=1X: unknown unit");
        parse_fails("cpu --cache-size 2K", "must be between 4K and 1G");
        parse_fails("cpu --cache-size 0.3", "not a whole number of bytes");
        parse_fails("cpu --period", "cpu: --period needs a value");
        parse_fails("cpu load=4", "cpu: unexpected argument 'load=4'");
        parse_fails("cpu --no-workers", "unknown option '--no-workers'");
        parse_fails("fpu", "unknown load generator 'fpu' (known: cpu, fileio, network, hackbench, "
                           "memory, exec)");
}

static void test_split(void **state) {
        char **v = NULL;
        char err[LOADGEN_ERROR_MAX];
        assert_int_equal(
                loadgen_split("exec -- sh -c 'make -j4 \"all\"' a\\ b \"x\\\"y\"", &v, err), 0);
        const char *want[] = { "exec", "--", "sh", "-c", "make -j4 \"all\"", "a b", "x\"y", NULL };
        for (size_t i = 0; want[i]; i++)
                assert_string_equal(v[i], want[i]);
        assert_null(v[7]);
        strv_freep(&v);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_registry),
                cmocka_unit_test(test_canonical),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_split),
        };
        return RUN_TESTS(tests);
}
