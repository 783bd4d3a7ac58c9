/* SPDX-License-Identifier: MIT */
/* The verdict as JUnit XML: a test suite for the release, a test case per gating machine
 * (failed with its problem lines, skipped with what is still missing while pending, passed
 * when complete), the verdict's reasons as the suite's output. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-junit.h"
#include "log.h"
#include "macro.h"
#include "text-safe.h"

static const char *str(const json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

static void property(FILE *f, const char *name, const char *value) {
        fprintf(f, "      <property name=\"%s\" value=\"", name);
        markup_fputs(value, f);
        fputs("\"/>\n", f);
}

/* The lines of machine id in a list of the verdict ("problems", "missing"), how many. */
static size_t lines_of(FILE *f, const json_t *verdict, const char *list, const char *id) {
        size_t n = 0, i;
        json_t *p;
        json_array_foreach (json_object_get(verdict, list), i, p)
                if (strcmp(str(p, "machine") ?: "", id) == 0) {
                        markup_fputs(str(p, "message"), f);
                        fputc('\n', f);
                        n++;
                }
        return n;
}

/* A machine's case lasts the time it measured the release (docs/notifications.md), in whole
 * milliseconds: the suite's time is their exact sum. */
static int64_t case_ms(const json_t *m) {
        json_int_t ns = json_integer_value(json_object_get(m, "covered_ns"));
        return ns > 0 ? (int64_t) ((ns + 500000) / 1000000) : 0;
}

static void put_seconds_ms(FILE *f, int64_t ms) {
        fprintf(f, "%" PRId64 ".%03" PRId64, ms / 1000, ms % 1000);
}

static void testcase(FILE *f, const char *release, const json_t *verdict, const json_t *m) {
        const char *id = str(m, "id") ?: "", *host = str(m, "hostname"),
                   *status = str(m, "status") ?: "";
        json_int_t problems = json_integer_value(json_object_get(m, "problems"));
        fputs("    <testcase classname=\"rtsoak.", f);
        markup_fputs(release, f);
        fputs("\" name=\"", f);
        markup_fputs(host && *host ? host : id, f);
        fprintf(f, " (%s)\" time=\"", id);
        put_seconds_ms(f, case_ms(m));
        fputs("\">\n", f);
        if (strcmp(status, "failed") == 0) {
                fprintf(f, "      <failure type=\"rtsoak.problem\" message=\"%lld problem(s)\">",
                        (long long) problems);
                size_t listed = lines_of(f, verdict, "problems", id);
                if ((json_int_t) listed < problems)
                        fprintf(f, "... and %lld more (the verdict lists the first ones)\n",
                                (long long) (problems - (json_int_t) listed));
                fputs("</failure>\n", f);
        } else if (strcmp(status, "complete") != 0) {
                fputs("      <skipped message=\"pending\">", f);
                if (lines_of(f, verdict, "missing", id) == 0)
                        fputs("still pending\n", f);
                fputs("</skipped>\n", f);
        }
        fputs("    </testcase>\n", f);
}

struct suite_counts {
        size_t tests, failures, errors, skipped;
        int64_t ms; /* the sum of the cases' times */
};

static void count_cases(const json_t *verdict, struct suite_counts *n) {
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(verdict, "machines"), i, m) {
                const char *s = str(m, "status") ?: "";
                n->tests++;
                n->failures += strcmp(s, "failed") == 0;
                n->skipped += strcmp(s, "failed") != 0 && strcmp(s, "complete") != 0;
                n->ms += case_ms(m);
        }
}

/* A release without a gating machine: one case that says so (pending, or failed on problems
 * of no machine). */
static void no_machine_case(FILE *f, const char *release, const json_t *verdict) {
        fputs("    <testcase classname=\"rtsoak.", f);
        markup_fputs(release, f);
        fputs("\" name=\"gating machines\" time=\"0.000\">\n      <skipped message=\"pending\">",
              f);
        size_t i;
        json_t *r;
        json_array_foreach (json_object_get(verdict, "reasons"), i, r) {
                markup_fputs(json_string_value(r), f);
                fputc('\n', f);
        }
        fputs("</skipped>\n    </testcase>\n", f);
}

static void write_suite(FILE *f, const char *release, const char *server, const json_t *verdict,
                        const char *error) {
        struct suite_counts n = { .errors = error ? 1 : 0 };
        size_t i;
        json_t *m;
        if (verdict)
                count_cases(verdict, &n);
        else
                n.tests = 1;
        bool none = verdict && n.tests == 0;
        if (none)
                n.tests = n.skipped = 1;
        /* <testsuites> has no skipped count: Jenkins' schema (tests/jenkins-xunit-junit-10.xsd)
         * refuses it, and readers count the suites' own. */
        fprintf(f,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<testsuites name=\"rtsoak verdict\" tests=\"%zu\" failures=\"%zu\" "
                "errors=\"%zu\" time=\"",
                n.tests, n.failures, n.errors);
        put_seconds_ms(f, n.ms);
        fputs("\">\n  <testsuite name=\"", f);
        markup_fputs(release, f);
        fprintf(f, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"",
                n.tests, n.failures, n.errors, n.skipped);
        put_seconds_ms(f, n.ms);
        fputs("\">\n    <properties>\n", f);
        property(f, "release", release);
        property(f, "server", server);
        if (verdict) {
                property(f, "verdict", str(verdict, "verdict"));
                property(f, "series", str(verdict, "series"));
                property(f, "group", str(verdict, "group"));
                property(f, "at", str(verdict, "at"));
        }
        fputs("    </properties>\n", f);
        if (error) {
                fputs("    <testcase classname=\"rtsoak.", f);
                markup_fputs(release, f);
                fputs("\" name=\"verdict\" time=\"0.000\">\n      <error type=\"rtsoak.unknown\" "
                      "message=\"the verdict cannot be told\">",
                      f);
                markup_fputs(error, f);
                fputs("</error>\n    </testcase>\n", f);
        }
        json_array_foreach (json_object_get(verdict, "machines"), i, m)
                testcase(f, release, verdict, m);
        if (none)
                no_machine_case(f, release, verdict);
        fputs("    <system-out>", f);
        json_array_foreach (json_object_get(verdict, "reasons"), i, m) {
                markup_fputs(json_string_value(m), f);
                fputc('\n', f);
        }
        fputs("</system-out>\n  </testsuite>\n</testsuites>\n", f);
}

int cli_junit_write(const char *path, const char *release, const char *server,
                    const json_t *verdict, const char *error) {
        _cleanup_free_ char *tmp = NULL;
        if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return log_oom();
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Cannot write %s: %m", path);
        FILE *f = fdopen(fd, "w");
        if (!f) {
                int r = log_error_errno(errno, "Cannot write %s: %m", path);
                close(fd);
                unlink(tmp);
                return r;
        }
        write_suite(f, release, server, verdict, error);
        /* Readable like any report (mkostemp makes it 0600). */
        if (fchmod(fd, 0644) < 0 || fflush(f) != 0 || ferror(f)) {
                int r = log_error_errno(errno ?: EIO, "Cannot write %s: %m", path);
                fclose(f);
                unlink(tmp);
                return r;
        }
        if (fclose(f) != 0 || rename(tmp, path) < 0) {
                int r = log_error_errno(errno, "Cannot write %s: %m", path);
                unlink(tmp);
                return r;
        }
        return 0;
}
