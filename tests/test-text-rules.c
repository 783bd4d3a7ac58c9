/* SPDX-License-Identifier: MIT */
/* One text rule, applied everywhere, on the real server over loopback: every string field that
 * docs/summary-schema.md lists (read from the document, so that a field added there is tried
 * too) carries each class of character the rule refuses; the same classes go into the API's
 * path segments and name parameters, staff bodies and every documented key of rtsoak-server's
 * configuration; release names at the schema's limit are reached by every route and one byte
 * more by none; what an older server stored leaves escaped. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>

#include "tests.h"
#include "macro.h"
#include "test-farmdb.h"
#include "test-http.h"
#include "test-util.h"

#define ID_A "a0000000000000000000000000000001"
#define T0 INT64_C(1796300000000000000) /* 2026-12-03T12:13:20Z */
#define MARK "@@MARK@@"
#define FIELDS_MAX 128

static char *dir, db_path[600], log_path[600], base_url[128], token_a[80], staff_token[80];
static const char *schema_doc, *server_conf_doc;
static pid_t server_pid;

/* ---- what the rule refuses ---- */

/* A class of refused characters: as it is written inside a JSON string (raw bytes or an
 * escape), and percent-encoded for a URL (NULL: the same bytes as json, encoded). */
struct refused {
        const char *what, *json, *url;
};

static const struct refused refused[] = {
        { "C0 ESC, escaped", "\\u001b", "%1B" },
        { "C0 CR, escaped", "\\r", "%0D" },
        { "C0 raw", "\x01", NULL },
        { "NUL, escaped", "\\u0000", "%00" },
        { "DEL raw", "\x7f", NULL },
        { "DEL escaped", "\\u007f", "%7F" },
        { "C1 U+0080", "\xc2\x80", NULL },
        { "C1 U+0085", "\xc2\x85", NULL },
        { "C1 U+009B, escaped", "\\u009b", "%C2%9B" },
        { "C1 U+009F", "\xc2\x9f", NULL },
        { "U+202A", "\xe2\x80\xaa", NULL },
        { "U+202B", "\xe2\x80\xab", NULL },
        { "U+202C", "\xe2\x80\xac", NULL },
        { "U+202D", "\xe2\x80\xad", NULL },
        { "U+202E", "\xe2\x80\xae", NULL },
        { "U+202E, escaped", "\\u202e", "%E2%80%AE" },
        { "U+2066", "\xe2\x81\xa6", NULL },
        { "U+2067", "\xe2\x81\xa7", NULL },
        { "U+2068", "\xe2\x81\xa8", NULL },
        { "U+2069", "\xe2\x81\xa9", NULL },
        { "U+061C", "\xd8\x9c", NULL },
        { "U+200E", "\xe2\x80\x8e", NULL },
        { "U+200F", "\xe2\x80\x8f", NULL },
        { "not UTF-8 (0xFF)", "\xff", NULL },
        { "a lone continuation byte", "\x80", NULL },
        { "a sequence cut short", "\xe2\x80", NULL },
        { "an overlong '/'", "\xc0\xaf", NULL },
        { "an overlong 3-byte form", "\xe0\x80\xaf", NULL },
        { "an overlong 4-byte form", "\xf0\x80\x80\xaf", NULL },
        { "a surrogate", "\xed\xa0\x80", NULL },
        { "a low surrogate", "\xed\xbf\xbf", NULL },
        { "a surrogate, escaped", "\\ud800", "%ED%A0%80" },
        { "a low surrogate, escaped", "\\udc00", "%ED%B0%80" },
};

/* The class's bytes percent-encoded (every byte), into buf. */
static const char *url_of(const struct refused *c, char *buf, size_t size) {
        if (c->url)
                return c->url;
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *) c->json; *p && o + 4 < size; p++)
                o += (size_t) snprintf(buf + o, size - o, "%%%02X", *p);
        buf[o] = '\0';
        return buf;
}

/* The raw bytes of the class, for an argument or a file (NULL for the ones written only as a
 * JSON escape, and for NUL, which neither can hold). */
static const char *bytes_of(const struct refused *c) {
        return strchr(c->json, '\\') ? NULL : c->json;
}

/* ---- a summary that holds every object of the schema ---- */

#define ANALYSIS                                                                          \
        "{\"cpu\":0,\"time_ns\":%" PRId64 ",\"latency_ns\":480000,\"timer_ns\":10000,"    \
        "\"sched_ns\":470000,\"return_ns\":0,\"timer_seen\":true,\"switch_seen\":true,"   \
        "\"marker_seen\":true,\"lookback_ns\":20000000,\"events\":12,\"skipped\":0,"      \
        "\"culprit\":{\"kind\":\"thread\",\"name\":\"%s\",\"pid\":211,\"irq\":null,"      \
        "\"policy\":\"SCHED_FIFO\",\"priority\":50,\"duration_ns\":475000},"              \
        "\"summary\":\"thread %s ran 475 us of the 480 us\",\"contributors\":[{\"kind\":" \
        "\"thread\",\"name\":\"%s\",\"pid\":211,\"irq\":null,\"policy\":\"SCHED_FIFO\","  \
        "\"priority\":50,\"duration_ns\":475000,\"count\":1}],\"others_ns\":0}"

/* The summary of run (machine ID_A, one CPU) as a JSON object: release NULL for none, the
 * culprit's task name given. */
static json_t *summary(int64_t run, const char *kernel, const char *release, const char *task) {
        char analysis[2048];
        snprintf(analysis, sizeof(analysis), ANALYSIS, T0 + 5, task, task, task);
        json_t *a = tu_json(analysis);
        json_t *s = json_pack(
                "{s:s, s:{s:s, s:s, s:s, s:i}, s:{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, "
                "s:I, s:I, s:I, s:[i]}, s:I, s:[{s:I, s:I, s:I, s:s, s:[{s:i, s:I, s:I, s:I, s:I, "
                "s:I, s:I, s:I, s:i, s:s}], s:[{s:s, s:I, s:i, s:i, s:[{s:s, s:s, s:f}]}], "
                "s:[{s:o, s:n}]}], s:[{s:I, s:I, s:s, s:i, s:I, s:s, s:{s:s, s:[s]}}]}",
                "schema", "rtsoak.summary/1", "machine", "id", ID_A, "hostname", "lab1",
                "cpu_model", "x86 cpu", "cpus", 1, "run", "id", (json_int_t) run, "boot_id",
                "fedcba9876543210fedcba9876543210", "kernel_release", kernel, "kernel_version",
                "#1 SMP", "kernel_cmdline", "quiet", "preempt_model", "PREEMPT_RT",
                "daemon_version", "0.1.0", "config_digest",
                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", "start_ns",
                (json_int_t) T0, "threshold_ns", (json_int_t) 100000, "probe_interval_ns",
                (json_int_t) 200000, "interval_ns", (json_int_t) 60000000000, "cpus", 0, "seq",
                (json_int_t) 1, "intervals", "seq", (json_int_t) 1, "start_ns", (json_int_t) T0,
                "length_ns", (json_int_t) 60000000000, "scenario", "mixed", "cpus", "cpu", 0,
                "samples", (json_int_t) 1001, "min_ns", (json_int_t) 4000, "avg_ns",
                (json_int_t) 11483, "max_ns", (json_int_t) 2500000, "max_time_ns",
                (json_int_t) (T0 + 5), "violations", (json_int_t) 1, "missed", (json_int_t) 0,
                "hist_limit_us", 1000, "hist", "AegHBAEF5wfpBwE=", "loads", "generator", "cpu",
                "up_ns", (json_int_t) 60000000000, "starts", 1, "exits", 0, "metrics", "name",
                "ops", "unit", "ops/s", "value", 12.5, "traces", "analysis", a, "raw", "events",
                "id", (json_int_t) 1, "time_ns", (json_int_t) (T0 + 5), "type", "violation", "cpu",
                0, "value", (json_int_t) 2500000, "message", "latency over the bound", "details",
                "note", "a note", "lines", "a line");
        assert_non_null(s);
        if (release)
                json_object_set_new(json_object_get(s, "run"), "release", json_string(release));
        return s;
}

/* Uploads body as machine ID_A; reads of the API and staff requests. */
static struct tu_reply post_text(const char *body) {
        return tu_http_at(base_url, "POST", "/api/v1/summaries", token_a, body);
}

static struct tu_reply get(const char *path, const char *bearer) {
        return tu_http_at(base_url, "GET", path, bearer, NULL);
}

static struct tu_reply post(const char *path, const char *body) {
        return tu_http_at(base_url, "POST", path, staff_token, body);
}

static long post_json(json_t *s, char **ret_body) {
        char *text = json_dumps(s, JSON_COMPACT);
        struct tu_reply r = post_text(text);
        long status = r.status;
        if (ret_body)
                *ret_body = strdup(r.body);
        tu_reply_done(&r);
        free(text);
        return status;
}

/* ---- the string fields of the schema, from its document ---- */

/* The paths ("intervals[].traces[].analysis.culprit.name") of every row whose type is a string
 * in the tables under the document's headings: a heading names the object of its tables in
 * backquotes ("#### `a.b`, `a.c[]`": both), "Top level" the summary itself; the tables under
 * any other heading are not about fields. */
static size_t schema_fields(char fields[][128], size_t max) {
        char *doc = tu_read_file(schema_doc);
        char objects[4][96];
        size_t nobjects = 0, n = 0;
        for (char *line = strtok(doc, "\n"); line; line = strtok(NULL, "\n")) {
                if (line[0] == '#') {
                        nobjects = 0;
                        if (strstr(line, "Top level"))
                                objects[nobjects++][0] = '\0';
                        for (char *p = strchr(line, '`'); p && nobjects < ELEMENTSOF(objects);) {
                                char *e = strchr(p + 1, '`');
                                if (!e)
                                        break;
                                snprintf(objects[nobjects++], sizeof(objects[0]), "%.*s",
                                         (int) (e - p - 1), p + 1);
                                p = strchr(e + 1, '`');
                        }
                        continue;
                }
                if (strncmp(line, "| `", 3) != 0 || nobjects == 0)
                        continue;
                char *type = strchr(line + 1, '|');
                if (!type || strncmp(type, "| string", 8) != 0)
                        continue;
                for (char *p = line + 2; p < type && (p = strchr(p, '`')) && p < type;) {
                        char *e = strchr(p + 1, '`');
                        for (size_t k = 0; e && k < nobjects && n < max; k++)
                                snprintf(fields[n++], sizeof(fields[0]), "%s%s%.*s", objects[k],
                                         *objects[k] ? "." : "", (int) (e - p - 1), p + 1);
                        p = e ? e + 1 : type;
                }
        }
        free(doc);
        return n;
}

/* The object that holds the last member of path (arrays: their first element), and that
 * member's name in ret_key. */
static json_t *holder(json_t *doc, const char *path, char ret_key[static 64]) {
        char copy[128];
        snprintf(copy, sizeof(copy), "%s", path);
        json_t *o = doc;
        char *save = NULL;
        for (char *tok = strtok_r(copy, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
                size_t len = strlen(tok);
                bool array = len > 2 && strcmp(tok + len - 2, "[]") == 0;
                if (array)
                        tok[len - 2] = '\0';
                if (!save || !*save) {
                        snprintf(ret_key, 64, "%s", tok);
                        return o;
                }
                o = json_object_get(o, tok);
                if (array)
                        o = json_array_get(o, 0);
                if (!json_is_object(o))
                        fail_msg("%s: %s is not in the summary", path, tok);
        }
        fail_msg("%s: an empty path", path);
        return NULL;
}

/* path with each "[]" as "[0]": how the server names the field. */
static void concrete(const char *path, char *buf, size_t size) {
        size_t o = 0;
        for (const char *p = path; *p && o + 4 < size; p++)
                o += (size_t) snprintf(buf + o, size - o, p[0] == '[' && p[1] == ']' ? "[0" : "%c",
                                       *p);
        buf[o] = '\0';
}

/* The text of doc with the string at path (which holds value) as value with the class in its
 * middle, written into the JSON text as the class says. */
static char *with_class(json_t *doc, const char *path, const struct refused *c) {
        char key[64];
        json_t *o = holder(doc, path, key), *was = json_incref(json_object_get(o, key));
        char *old = strdup(json_string_value(was) ?: "");
        json_object_set_new(o, key, json_string(MARK));
        char *text = json_dumps(doc, JSON_COMPACT);
        json_object_set_new(o, key, was);
        char *at = strstr(text, "\"" MARK "\"");
        assert_non_null(at);
        size_t half = strlen(old) / 2;
        char *out = NULL;
        assert_true(asprintf(&out, "%.*s\"%.*s%s%s\"%s", (int) (at - text), text, (int) half, old,
                             c->json, old + half, at + strlen(MARK) + 2) > 0);
        free(old);
        free(text);
        return out;
}

/* Every string field of the schema, each class of refused character in it: 400 naming the
 * field, and nothing stored. */
static void test_schema_text_fields(void **state) {
        static char fields[FIELDS_MAX][128];
        size_t n = schema_fields(fields, FIELDS_MAX);
        bool culprit = false, contributor = false;
        for (size_t i = 0; i < n; i++) {
                culprit |= strcmp(fields[i], "intervals[].traces[].analysis.culprit.name") == 0;
                contributor |= strcmp(fields[i],
                                      "intervals[].traces[].analysis.contributors[].name") == 0;
        }
        print_message("# %zu string fields in %s\n", n, schema_doc);
        /* The document is what is walked: a table it no longer holds is a failure, not a pass. */
        assert_true(n >= 25);
        assert_true(culprit && contributor);
        /* And the strings of an event's details, values and member names. */
        strcpy(fields[n++], "events[].details.note");
        strcpy(fields[n++], "events[].details.{name}");

        /* The summary they go into is taken as it is. */
        json_t *good = summary(1, "6.6-rt", "6.6-rt-lab2", "kworker/0:1");
        char *body = NULL;
        if (post_json(good, &body) != 200)
                fail_msg("the summary without a refused character: %s", body);
        free(body);
        json_decref(good);

        json_t *doc = summary(2, "6.6-rt", "6.6-rt-lab2", "kworker/0:1");
        size_t posts = 0;
        for (size_t i = 0; i < n; i++) {
                char field[160];
                concrete(fields[i], field, sizeof(field));
                for (size_t k = 0; k < ELEMENTSOF(refused); k++) {
                        char *text;
                        if (strcmp(fields[i], "events[].details.{name}") == 0) {
                                /* A member name: the class in the key. */
                                char *plain = json_dumps(doc, JSON_COMPACT), *at;
                                assert_non_null(at = strstr(plain, "\"note\":"));
                                assert_true(asprintf(&text, "%.*s\"no%ste\":%s", (int) (at - plain),
                                                     plain, refused[k].json, at + 7) > 0);
                                free(plain);
                        } else
                                text = with_class(doc, fields[i], &refused[k]);
                        struct tu_reply r = post_text(text);
                        char want[200];
                        snprintf(want, sizeof(want), "%s: ", field);
                        /* The parser stops after a member name it refuses (a NUL): the
                         * member is named as far as it goes. */
                        if (strstr(field, "{name}"))
                                snprintf(want, sizeof(want), "events[0].details.");
                        const char *err = json_string_value(json_object_get(r.json, "error"));
                        if (r.status != 400 || !err || strncmp(err, want, strlen(want)) != 0)
                                fail_msg("%s with %s: expected 400 naming it, got %ld %s",
                                         fields[i], refused[k].what, r.status, r.body);
                        tu_reply_done(&r);
                        free(text);
                        posts++;
                }
        }
        json_decref(doc);
        print_message("# %zu summaries refused, each naming its field\n", posts);
        assert_int_equal(tu_farm_int(db_path, "SELECT count(*) FROM runs WHERE run_id = 2"), 0);
        (void) state;
}

/* ---- the API ---- */

/* tmpl with its "%s" replaced by value, into buf. */
static const char *fill(char *buf, size_t size, const char *tmpl, const char *value) {
        const char *at = strstr(tmpl, "%s");
        assert_non_null(at);
        snprintf(buf, size, "%.*s%s%s", (int) (at - tmpl), tmpl, value, at + 2);
        return buf;
}

/* 400 whose error starts with want: the JSON's "error", or a page's <p id="error">. */
static void expect_400(const char *what, struct tu_reply *r, const char *want) {
        const char *err = json_string_value(json_object_get(r->json, "error"));
        const char *page = r->json ? NULL : strstr(r->body, "id=\"error\">");
        if (page)
                err = page + strlen("id=\"error\">");
        if (r->status != 400 || !err || strncmp(err, want, strlen(want)) != 0)
                fail_msg("%s: expected 400 starting '%s', got %ld %s", what, want, r->status,
                         r->body);
        tu_reply_done(r);
}

/* Each class in each path segment and parameter that names something, and in each text field
 * of a staff body: 400 naming the part. */
static void test_api_names_and_bodies(void **state) {
        static const struct {
                const char *path, *want; /* "%s": the name with the class in it */
        } targets[] = {
                { "/api/v1/kernels/6.6%s-rt/verdict", "path: " },
                { "/api/v1/kernels/6.6%s-rt/waivers", "path: " },
                { "/api/v1/kernels/6.6%s-rt/compare?with=6.6-rt-lab2", "path: " },
                { "/api/v1/kernels/6.6-rt-lab2/compare?with=6.6%s-rt", "with: " },
                { "/kernels/6.6%s-rt", "path: " },
                { "/kernels/6.6-rt-lab2?compare=6.6%s-rt", "compare: " },
                { "/plots/kernels/6.6%s-rt/coverage.svg", "path: " },
                { "/api/v1/series/6.6%s-rt/latest-stable", "path: " },
                { "/api/v1/machines/" ID_A "/histogram?scenario=mi%sxed", "scenario: " },
                { "/api/v1/machines/" ID_A "/events?type=viol%sation", "type: " },
                { "/machines/" ID_A "?window=kernel:6.6%s-rt", "window: " },
                { "/api/v1/notifications?release=6.6%s-rt", "release: " },
                { "/api/v1/traces?machine=" ID_A "&from=2h%sago", "from: " },
                { "/api/v1/kernels?li%smit=1", "query" },
        };
        static const struct {
                const char *path, *body, *want; /* body "%s": the class */
        } bodies[] = {
                { "/api/v1/kernels/6.6-rt-lab2/waivers", "{\"problem\":\"p\",\"reason\":\"ok%s\"}",
                  "reason" },
                { "/api/v1/kernels/6.6-rt-lab2/waivers", "{\"problem\":\"p%s\",\"reason\":\"ok\"}",
                  "problem" },
                { "/api/v1/machines/" ID_A "/settings", "{\"gating\":true,\"reason\":\"r%s\"}",
                  "reason" },
                { "/api/v1/machines/" ID_A "/settings",
                  "{\"labels\":{\"rack\":\"a%s\"},\"reason\":\"r\"}", "labels" },
                { "/api/v1/machines/" ID_A "/settings", "{\"groups\":[\"a%s\"],\"reason\":\"r\"}",
                  "groups" },
                { "/api/v1/machines/" ID_A "/maintenance",
                  "{\"from\":1,\"to\":2,\"reason\":\"r%s\"}", "reason" },
        };
        for (size_t k = 0; k < ELEMENTSOF(refused); k++) {
                char buf[64], path[512], body[512];
                const char *enc = url_of(&refused[k], buf, sizeof(buf));
                for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
                        fill(path, sizeof(path), targets[i].path, enc);
                        struct tu_reply r = get(path, staff_token);
                        char what[600];
                        snprintf(what, sizeof(what), "GET %s (%s)", path, refused[k].what);
                        expect_400(what, &r, targets[i].want);
                }
                for (size_t i = 0; i < ELEMENTSOF(bodies); i++) {
                        fill(body, sizeof(body), bodies[i].body, refused[k].json);
                        struct tu_reply r = post(bodies[i].path, body);
                        const char *err = json_string_value(json_object_get(r.json, "error"));
                        /* "reason: ..." from the check, "body.reason: not JSON" from the
                         * parser (a byte that is not UTF-8). */
                        if (r.status != 400 || !err ||
                            (strncmp(err, bodies[i].want, strlen(bodies[i].want)) != 0 &&
                             (strncmp(err, "body.", 5) != 0 ||
                              strncmp(err + 5, bodies[i].want, strlen(bodies[i].want)) != 0)))
                                fail_msg("POST %s %s (%s): expected 400 naming %s, got %ld %s",
                                         bodies[i].path, body, refused[k].what, bodies[i].want,
                                         r.status, r.body);
                        tu_reply_done(&r);
                }
        }
        /* Names follow their rule beyond the text rule. */
        struct tu_reply r = get("/api/v1/machines/" ID_A "/histogram?scenario=a.b", NULL);
        expect_400("scenario=a.b", &r, "scenario=a.b: '.' at byte 1: a scenario name");
        r = get("/api/v1/machines/" ID_A "/events?type=Violation", NULL);
        expect_400("type=Violation", &r, "type=Violation: 'V' at byte 0: an event type");
        assert_int_equal(tu_farm_int(db_path, "SELECT count(*) FROM waivers"), 0);
        assert_int_equal(tu_farm_int(db_path, "SELECT count(*) FROM maintenance"), 0);
        (void) state;
}

/* ---- rtsoak-server's configuration ---- */

/* Every key etc/rtsoak-server.conf documents ("#Key=value" under "[Section]" or "#[Section]"),
 * set with each class in its value: the configuration is refused (78) naming the key. */
static void test_server_configuration(void **state) {
        /* Refused before the store is opened: the PostgreSQL pass would repeat the SQLite
         * pass's 464 processes. */
        if (tu_pg()) {
                print_message("# refused before the store is opened: run by the SQLite pass\n");
                skip();
        }
        /* One of each family: C0, DEL, C1, two bidirectional, not UTF-8, overlong, surrogate. */
        static const size_t some[] = { 2, 4, 7, 14, 20, 23, 26, 29 };
        char *doc = tu_read_file(server_conf_doc), section[64] = "";
        size_t keys = 0;
        for (char *line = strtok(doc, "\n"); line; line = strtok(NULL, "\n")) {
                if (line[0] == '[' || (line[0] == '#' && line[1] == '[')) {
                        const char *name = line + (line[0] == '#' ? 2 : 1);
                        snprintf(section, sizeof(section), "%.*s", (int) strcspn(name, "]"), name);
                        continue;
                }
                char *eq = strchr(line, '='), *space = strchr(line, ' ');
                if (line[0] != '#' || !eq || !section[0] || (space && space < eq) ||
                    !isalpha((unsigned char) line[1]))
                        continue;
                keys++;
                for (size_t j = 0; j < ELEMENTSOF(some); j++) {
#if defined(__SANITIZE_ADDRESS__)
                        /* Sanitized, a process costs four times as much (its start and the leak
                         * check at exit: 464 of them were 60 s): one family per key, in turn,
                         * still every key and every family; the plain build runs them all. */
                        if (j != keys % ELEMENTSOF(some))
                                continue;
#endif
                        const struct refused *c = &refused[some[j]];
                        char set[1024], want[256], db[700];
                        snprintf(set, sizeof(set), "%s.%.*s=%s%s", section, (int) (eq - line - 1),
                                 line + 1, bytes_of(c), eq + 1);
                        snprintf(want, sizeof(want), "[%s] %.*s=: ", section, (int) (eq - line - 1),
                                 line + 1);
                        snprintf(db, sizeof(db), "--db=%s", db_path);
                        char *argv[] = { (char *) tu_bin("RTSOAK_SERVER"),
                                         "--config",
                                         "/dev/null",
                                         "--set",
                                         set,
                                         db,
                                         "check",
                                         NULL };
                        struct tu_result res;
                        tu_run(argv, 20000, NULL, NULL, &res);
                        if (res.status != 78 || !strstr(res.err, want))
                                fail_msg("--set '%s' (%s): expected 78 naming %s, got %d: %s", set,
                                         c->what, want, res.status, res.err);
                        tu_result_done(&res);
                }
        }
        free(doc);
        print_message("# %zu documented keys of rtsoak-server's configuration\n", keys);
        assert_true(keys >= 40);
        (void) state;
}

/* ---- release names at the schema's limit ---- */

/* A release name of n bytes: "6.6.30-rt31+" and then ":x" pairs, so that its encoding in a
 * path is longer than n (a ':' and a '+' are three bytes each). */
static char *release_of_length(size_t n) {
        char *s = malloc(n + 1);
        snprintf(s, n + 1, "6.6.30-rt31+");
        for (size_t i = strlen(s); i < n; i++)
                s[i] = (i % 2) ? 'x' : ':';
        s[n] = '\0';
        return s;
}

static char *encoded(const char *s) {
        char *e = malloc(3 * strlen(s) + 1);
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                o += (size_t) sprintf(e + o, strchr("+:/", *p) ? "%%%02X" : "%c", *p);
        return e;
}

static void expect_status(const char *path, const char *bearer, long status, const char *text) {
        struct tu_reply r = get(path, bearer);
        if (r.status != status || (text && !strstr(r.body, text)))
                fail_msg("GET %.200s: expected %ld with '%.80s', got %ld %.300s", path, status,
                         text ?: "", r.status, r.body);
        tu_reply_done(&r);
}

/* Every route that names a release takes one of exactly SUMMARY_MAX_RELEASE bytes (256),
 * however long its encoding: listed, judged, waived, compared, paged, plotted, notified. One
 * byte more is refused at upload and is no route's. */
static void test_release_at_the_limit(void **state) {
        char path[4096], body[512], *err = NULL;
        _cleanup_free_ char *r256 = release_of_length(256), *r257 = release_of_length(257);
        _cleanup_free_ char *e256 = encoded(r256), *e257 = encoded(r257);
        json_t *s = summary(3, "6.6-rt", r256, "kworker/0:1");
        if (post_json(s, &err) != 200)
                fail_msg("a release of 256 bytes: %s", err);
        free(err);
        json_decref(s);
        expect_status("/api/v1/kernels", NULL, 200, r256);
        snprintf(path, sizeof(path), "/api/v1/kernels/%s/verdict", e256);
        struct tu_reply r = get(path, NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(json_string_value(json_object_get(r.json, "release")), r256);
        json_t *problems = json_object_get(r.json, "problems");
        const char *problem = json_string_value(json_object_get(json_array_get(problems, 0), "id"));
        if (!problem)
                fail_msg("no problem to waive: %.400s", r.body);
        snprintf(body, sizeof(body), "{\"problem\":\"%s\",\"reason\":\"known\"}", problem);
        tu_reply_done(&r);
        static const char *const routes[] = { "/api/v1/kernels/%s/waivers",
                                              "/api/v1/kernels/%s/compare?with=6.6-rt-lab2",
                                              "/api/v1/kernels/6.6-rt-lab2/compare?with=%s",
                                              "/kernels/%s",
                                              "/kernels/6.6-rt-lab2?compare=%s",
                                              "/plots/kernels/%s/coverage.svg",
                                              "/api/v1/notifications?release=%s" };
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                fill(path, sizeof(path), routes[i], e256);
                expect_status(path, staff_token, 200, NULL);
        }
        snprintf(path, sizeof(path), "/api/v1/kernels/%s/waivers", e256);
        r = post(path, body);
        if (r.status != 201)
                fail_msg("waiving %s: %ld %s", problem, r.status, r.body);
        tu_reply_done(&r);
        expect_status(path, NULL, 200, "\"reason\":\"known\"");

        /* One byte more. */
        s = summary(4, "6.6-rt", r257, "kworker/0:1");
        assert_int_equal(post_json(s, &err), 400);
        assert_non_null(strstr(err, "run.release: length 257 is out of range (1 to 256)"));
        free(err);
        json_decref(s);
        static const char *const none[] = { "/api/v1/kernels/%s/verdict",
                                            "/api/v1/kernels/%s/waivers",
                                            "/api/v1/kernels/%s/compare?with=6.6-rt-lab2",
                                            "/kernels/%s", "/plots/kernels/%s/coverage.svg" };
        for (size_t i = 0; i < ELEMENTSOF(none); i++) {
                fill(path, sizeof(path), none[i], e257);
                expect_status(path, NULL, 404, NULL);
        }
        snprintf(path, sizeof(path), "/api/v1/kernels/%s/waivers", e257);
        r = post(path, body);
        assert_int_equal(r.status, 404);
        tu_reply_done(&r);
        snprintf(path, sizeof(path), "/api/v1/notifications?release=%s", e257);
        expect_status(path, staff_token, 400, "release: ");

        /* Without run.release the kernel's release is the name: the same limit and rule. */
        _cleanup_free_ char *k256 = release_of_length(256), *k257 = release_of_length(257);
        k256[0] = k257[0] = '7';
        s = summary(5, k256, NULL, "kworker/0:1");
        if (post_json(s, &err) != 200)
                fail_msg("a kernel's release of 256 bytes: %s", err);
        free(err);
        json_decref(s);
        _cleanup_free_ char *ek256 = encoded(k256);
        snprintf(path, sizeof(path), "/api/v1/kernels/%s/verdict", ek256);
        expect_status(path, NULL, 200, k256);
        s = summary(6, k257, NULL, "kworker/0:1");
        assert_int_equal(post_json(s, &err), 400);
        assert_non_null(strstr(err, "run.kernel_release: length 257 is out of range (1 to 256)"));
        free(err);
        json_decref(s);
        s = summary(6, "6.6.30 rt31 (test build)", NULL, "kworker/0:1");
        assert_int_equal(post_json(s, &err), 400);
        assert_non_null(strstr(err, "run.release: missing, and kernel_release is not a release "
                                    "name (a space at byte 6"));
        free(err);
        json_decref(s);
        (void) state;
}

/* ---- what an older server stored ---- */

/* Whether text holds a character the rule refuses but a JSON answer may carry escaped: a C1
 * control or a bidirectional formatting character, raw. */
static const char *raw_refused(const char *text) {
        for (const unsigned char *p = (const unsigned char *) text; *p; p++) {
                if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        return "a C1 control";
                if ((p[0] == 0xe2 && p[1] == 0x80 &&
                     ((p[2] >= 0xaa && p[2] <= 0xae) || p[2] == 0x8e || p[2] == 0x8f)) ||
                    (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9) ||
                    (p[0] == 0xd8 && p[1] == 0x9c))
                        return "a bidirectional formatting character";
                if ((*p < 0x20 && *p != '\n' && *p != '\t' && *p != '\r') || *p == 0x7f)
                        return "a control character";
        }
        return NULL;
}

/* A task's name with a C1 control and a bidirectional override, as an older server stored it
 * (written here straight into the database): every answer that shows it escapes it. */
static void test_stored_before_the_rule(void **state) {
        json_t *s = summary(7, "6.6-rt", "6.6-rt-legacy", "legacytask");
        char *err = NULL;
        if (post_json(s, &err) != 200)
                fail_msg("%s", err);
        free(err);
        json_decref(s);
        const char *chr = tu_pg() ? "chr" : "char";
        char sql[1024];
        snprintf(sql, sizeof(sql),
                 "UPDATE traces SET culprit_name = 'le' || %s(8238) || 'gacy' || %s(133), "
                 "summary = replace(summary, 'legacytask', 'le' || %s(8238) || 'gacy' || %s(133)), "
                 "analysis = replace(analysis, 'legacytask', 'le' || %s(8238) || 'gacy' || "
                 "%s(133)) WHERE culprit_name = 'legacytask'",
                 chr, chr, chr, chr, chr, chr);
        tu_farm_exec(db_path, sql);
        assert_int_equal(
                tu_farm_int(db_path, "SELECT count(*) FROM traces WHERE culprit_name LIKE 'le%'"),
                1);
        long long id = tu_farm_int(db_path, "SELECT id FROM traces WHERE culprit_name LIKE 'le%'");
        char path[256];
        const char *paths[3] = { "/api/v1/traces?machine=" ID_A, path, "/machines/" ID_A };
        snprintf(path, sizeof(path), "/api/v1/traces/%lld", id);
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                struct tu_reply r = get(paths[i], NULL);
                const char *bad = raw_refused(r.body);
                if (r.status != 200 || bad)
                        fail_msg("GET %s: %ld, %s: %.600s", paths[i], r.status, bad ?: "", r.body);
                if (i < 2 && !strstr(r.body, "le\\\\u202egacy\\\\u0085"))
                        fail_msg("GET %s: the name not escaped: %.600s", paths[i], r.body);
                tu_reply_done(&r);
        }
        (void) state;
}

/* ---- the server ---- */

static int setup(void **state) {
        dir = tu_mkdtemp("rtsoak-text-rules");
        tu_farm_target(dir, "farm", db_path, sizeof(db_path));
        print_message("# farm on %s\n", tu_backend_name());
        snprintf(log_path, sizeof(log_path), "%s/server.log", dir);
        tu_server_enroll(db_path, ID_A, NULL, NULL, token_a);
        tu_server_admin_token(db_path, "alice", staff_token);
        static const char *const extra[] = { "--rate",          "100000", "--burst", "100000",
                                             "--cache-warming", "no",     NULL };
        server_pid = tu_server_start(db_path, log_path, "127.0.0.1:0", extra, base_url,
                                     sizeof(base_url));
        (void) state;
        return 0;
}

static int teardown(void **state) {
        if (server_pid > 0)
                tu_server_stop(server_pid);
        char *log = tu_read_file(log_path);
        /* Refused, never failed: no internal error, no crash. */
        bool internal = log && strstr(log, "Internal server error");
        free(log);
        tu_farm_drop(db_path);
        tu_rmdir(dir);
        (void) state;
        return internal ? -1 : 0;
}

int main(int argc, char **argv) {
        signal(SIGPIPE, SIG_IGN);
        if (argc < 3) {
                fprintf(stderr, "usage: %s docs/summary-schema.md etc/rtsoak-server.conf\n",
                        argv[0]);
                return 2;
        }
        schema_doc = argv[1];
        server_conf_doc = argv[2];
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_schema_text_fields),
                cmocka_unit_test(test_api_names_and_bodies),
                cmocka_unit_test(test_server_configuration),
                cmocka_unit_test(test_release_at_the_limit),
                cmocka_unit_test(test_stored_before_the_rule),
        };
        return RUN_TESTS_WITH(tests, setup, teardown);
}
