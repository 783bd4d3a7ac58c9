/* SPDX-License-Identifier: MIT */
/* Unit tests of the rotation parser rtsoakd and rtsoak-replay share, table-driven: what it
 * accepts, each problem it reports with the item it names, and the step a time falls in. */
#include <errno.h>

#include "tests.h"
#include "macro.h"
#include "rotation.h"
#include "timeutil.h"

#define MIN_NS (60 * NSEC_PER_SEC)
#define H_NS (60 * MIN_NS)

/* The scenarios of these tests: their names are their identity. */
static const char *const names[] = { "idle", "cpu", "mixed" };

static const struct scenario *lookup(void *userdata, const char *name) {
        (void) userdata;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(names[i], name) == 0)
                        return (const struct scenario *) &names[i];
        return NULL;
}

static const char *name_of(const struct scenario *sc) {
        return *(const char *const *) sc;
}

struct seen {
        int calls;
        enum rotation_problem what;
        char item[64], span[64];
        bool reason;
};

static void problem(void *userdata, enum rotation_problem what, const char *item, const char *span,
                    const char *reason) {
        struct seen *s = userdata;
        s->calls++;
        s->what = what;
        snprintf(s->item, sizeof(s->item), "%s", item);
        snprintf(s->span, sizeof(s->span), "%s", span);
        s->reason = reason != NULL;
}

static int parse(const char *text, bool round_up, uint64_t max_ns, struct seen *seen,
                 struct schedule_step **steps, size_t *n, uint64_t *cycle) {
        struct rotation_params p = {
                .interval_ns = MIN_NS,
                .round_up = round_up,
                .max_step_ns = max_ns,
                .lookup = lookup,
                .problem = problem,
                .userdata = seen,
        };
        *seen = (struct seen){};
        return rotation_parse(text, &p, steps, n, cycle);
}

static void test_accepted(void **state) {
        static const struct {
                const char *text;
                bool round_up;
                const char *names;
                uint64_t cycle_ns;
        } t[] = {
                { "idle 1h", false, "idle", H_NS },
                { "  idle   1h ,cpu 30min,mixed 2h", false, "idle cpu mixed",
                  3 * H_NS + 30 * MIN_NS },
                { "cpu 90s", true, "cpu", 2 * MIN_NS }, /* rounded up to whole intervals */
                { "idle 1min, idle 1min", false, "idle idle", 2 * MIN_NS },
                { "idle 1h,", false, "idle", H_NS }, /* an empty last item is none */
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct schedule_step *steps = NULL;
                size_t n = 0;
                uint64_t cycle = 0;
                struct seen seen;
                char got[128] = "";
                if (parse(t[i].text, t[i].round_up, 0, &seen, &steps, &n, &cycle) < 0)
                        fail_msg("'%s' was refused (%d, '%s')", t[i].text, seen.what, seen.item);
                assert_int_equal(seen.calls, 0);
                uint64_t sum = 0;
                for (size_t k = 0; k < n; k++) {
                        snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", k ? " " : "",
                                 name_of(steps[k].scenario));
                        sum += steps[k].duration_ns;
                }
                assert_string_equal(got, t[i].names);
                assert_int_equal(cycle, t[i].cycle_ns);
                assert_int_equal(sum, cycle);
                free(steps);
        }
}

static void test_refused(void **state) {
        static char many[8192];
        size_t at = 0;
        for (int i = 0; i <= ROTATION_STEPS_MAX; i++)
                at += (size_t) snprintf(many + at, sizeof(many) - at, "%sidle 1min", i ? ", " : "");
        static const struct {
                const char *text;
                uint64_t max_ns;
                enum rotation_problem what;
                const char *item, *span;
                bool reason;
                int error;
        } t[] = {
                { "idle", 0, ROTATION_SYNTAX, "idle", "", false, -EINVAL },
                { "idle 1h, , cpu 1h", 0, ROTATION_SYNTAX, "", "", false, -EINVAL },
                { "idle 1h, bogus 1h", 0, ROTATION_UNKNOWN, "bogus", "1h", false, -EINVAL },
                { "idle 0", 0, ROTATION_BAD_SPAN, "idle", "0", false, -EINVAL },
                { "idle 1x", 0, ROTATION_BAD_SPAN, "idle", "1x", true, -EINVAL },
                { "idle 90s", 0, ROTATION_NOT_WHOLE, "idle", "90s", false, -EINVAL },
                { "idle 1h, cpu 3h", 2 * H_NS, ROTATION_TOO_LONG, "cpu", "3h", false, -EINVAL },
                { many, 0, ROTATION_TOO_MANY, "idle", "1min", false, -E2BIG },
                { "", 0, ROTATION_EMPTY, "", "", false, -EINVAL },
                { " , ,", 0, ROTATION_SYNTAX, "", "", false, -EINVAL },
        };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                struct schedule_step *steps = NULL;
                size_t n = 0;
                uint64_t cycle = 0;
                struct seen seen;
                int r = parse(t[i].text, false, t[i].max_ns, &seen, &steps, &n, &cycle);
                if (r >= 0)
                        fail_msg("'%.40s' was accepted", t[i].text);
                assert_int_equal(r, t[i].error);
                assert_int_equal(seen.calls, 1);
                assert_int_equal(seen.what, t[i].what);
                assert_string_equal(seen.item, t[i].item);
                assert_string_equal(seen.span, t[i].span);
                assert_int_equal(seen.reason, t[i].reason);
                assert_null(steps);
        }
}

/* Aligned to the epoch: the same step at the same wall-clock time, whenever it is asked. */
static void test_step_at(void **state) {
        struct schedule_step *steps = NULL;
        size_t n = 0;
        uint64_t cycle = 0;
        struct seen seen;
        (void) state;
        assert_int_equal(parse("idle 1h, cpu 30min, mixed 2h", false, 0, &seen, &steps, &n, &cycle),
                         0);
        static const struct {
                int64_t t;
                const char *name;
                int64_t start, end;
        } t[] = {
                { 0, "idle", 0, H_NS },
                { H_NS - 1, "idle", 0, H_NS },
                { H_NS, "cpu", H_NS, H_NS + 30 * MIN_NS },
                { H_NS + 30 * MIN_NS, "mixed", H_NS + 30 * MIN_NS, 3 * H_NS + 30 * MIN_NS },
                { 3 * H_NS + 30 * MIN_NS, "idle", 3 * H_NS + 30 * MIN_NS, 4 * H_NS + 30 * MIN_NS },
                { -1, "mixed", -2 * H_NS, 0 }, /* before the epoch too */
                { 1000 * (3 * H_NS + 30 * MIN_NS) + H_NS, "cpu",
                  1000 * (3 * H_NS + 30 * MIN_NS) + H_NS,
                  1000 * (3 * H_NS + 30 * MIN_NS) + H_NS + 30 * MIN_NS },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                int64_t start = 0, end = 0;
                const struct schedule_step *st = rotation_at(steps, n, cycle, t[i].t, &start, &end);
                assert_string_equal(name_of(st->scenario), t[i].name);
                assert_int_equal(start, t[i].start);
                assert_int_equal(end, t[i].end);
                assert_ptr_equal(rotation_at(steps, n, cycle, t[i].t, NULL, NULL), st);
        }
        free(steps);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accepted),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_step_at),
        };
        return RUN_TESTS(tests);
}
