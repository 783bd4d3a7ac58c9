/* SPDX-License-Identifier: MIT */
/* Unit tests of what keeps hostile input out of the farm server and its clients: histograms
 * merged within a budget, raw request targets, request heads, parameter ranges, text escaping,
 * token files, file modes, read access and connection limits. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "file-mode.h"
#include "hist.h"
#include "macro.h"
#include "server-access.h"
#include "server-auth.h"
#include "server-connlimit.h"
#include "server-head.h"
#include "server-merge.h"
#include "server-params.h"
#include "server-path.h"
#include "store.h"
#include "json-path.h"
#include "summary.h"
#include "text-json.h"
#include "text-safe.h"
#include "token-file.h"

/* ---- histograms merged within a budget ---- */

#define KEYS 60
#define ROWS 4

/* The encoded rows of a key: ROWS histograms, the first ones with a 1 ms limit and the last
 * with 100 ms, so that keys grow while they merge. */
struct row {
        uint32_t limit;
        uint8_t *blob;
        size_t len;
        uint64_t samples, max_ns;
};
static struct row rows[KEYS][ROWS];

static void make_rows(void) {
        static uint64_t counts[HIST_LIMIT_US_MAX + 400];
        for (int k = 0; k < KEYS; k++)
                for (int i = 0; i < ROWS; i++) {
                        uint32_t limit = i < ROWS - 1 ? 1000 : HIST_LIMIT_US_MAX;
                        memset(counts, 0, sizeof(counts));
                        uint64_t at = (uint64_t) (k * 37 + i * 11) % 900 * 1000 + 500,
                                 far = (uint64_t) (k + 1) * 1000000 + 7000;
                        counts[hist_index(limit, at)] = 10 + (uint64_t) k;
                        counts[hist_index(limit, far)] = 1;
                        struct row *r = &rows[k][i];
                        r->limit = limit;
                        r->samples = 11 + (uint64_t) k;
                        r->max_ns = far;
                        assert_int_equal(hist_encode(limit, counts, &r->blob, &r->len), 0);
                }
}

struct collected {
        struct farm_acc acc[KEYS];
        uint64_t order[KEYS];
        size_t n;
};

static int collect(void *userdata, uint64_t key, struct farm_acc *acc) {
        struct collected *c = userdata;
        assert_true(key < KEYS);
        c->order[c->n++] = key;
        assert_int_equal(farm_acc_merge(&c->acc[key], acc), 0);
        return 0;
}

/* Row order as a query reads them: interval after interval, each with its keys ascending. */
static size_t merge_all(size_t budget, bool ordered, struct collected *out) {
        struct farm_merge_set *s;
        const char *why;
        size_t passes = 0;
        int r;
        assert_int_equal(farm_merge_set_new(budget, ordered, &s), 0);
        do {
                passes++;
                for (int i = 0; i < ROWS; i++)
                        for (int k = 0; k < KEYS; k++) {
                                struct row *x = &rows[k][i];
                                r = farm_merge_set_add(s, (uint64_t) k, x->limit, x->blob, x->len,
                                                       x->samples, 1000, x->max_ns, 5, 0, &why);
                                assert_true(r == 0 || r == 1);
                        }
                r = farm_merge_set_finish(s, collect, out);
                assert_true(r >= 0);
        } while (r == 1);
        assert_int_equal(farm_merge_set_keys(s), KEYS);
        /* The budget holds, but for the one key that may always merge. */
        if (budget != SIZE_MAX)
                assert_true(farm_merge_set_peak(s) <=
                            budget + hist_nbuckets(HIST_LIMIT_US_MAX) * 8);
        farm_merge_set_free(s);
        return passes;
}

static void test_merge_budget(void **state) {
        make_rows();
        struct collected *whole = calloc(1, sizeof(*whole)), *ordered = calloc(1, sizeof(*ordered)),
                         *any = calloc(1, sizeof(*any));
        assert_int_equal(merge_all(SIZE_MAX, true, whole), 1);
        /* Five of the largest histograms at once: many passes, the same result. */
        size_t budget = 5 * hist_nbuckets(HIST_LIMIT_US_MAX) * 8;
        size_t passes = merge_all(budget, true, ordered);
        assert_true(passes >= KEYS / 5);
        merge_all(budget, false, any);
        for (int k = 0; k < KEYS; k++) {
                /* Ordered: the keys are finished in ascending order, pass after pass. */
                assert_int_equal(ordered->order[k], (uint64_t) k);
                for (int m = 0; m < 2; m++) {
                        struct farm_acc *a = &whole->acc[k],
                                        *b = m ? &any->acc[k] : &ordered->acc[k];
                        assert_int_equal(a->samples, b->samples);
                        assert_int_equal(a->samples, ROWS * (11 + (uint64_t) k));
                        assert_int_equal(a->h.limit_us, b->h.limit_us);
                        assert_memory_equal(a->h.counts, b->h.counts, a->h.nbuckets * 8);
                }
        }
        for (int k = 0; k < KEYS; k++) {
                farm_acc_done(&whole->acc[k]);
                farm_acc_done(&ordered->acc[k]);
                farm_acc_done(&any->acc[k]);
                for (int i = 0; i < ROWS; i++)
                        free(rows[k][i].blob);
        }
        free(whole);
        free(ordered);
        free(any);
}

/* Sums saturate rather than wrap (an upload that claimed 2^63 samples made every merge after it
 * fail). */
static void test_acc_saturates(void **state) {
        struct farm_acc a = {}, b = {};
        a = (struct farm_acc){ .used = true, .samples = INT64_MAX - 5, .violations = INT64_MAX };
        assert_int_equal(hist_init(&a.h, 1000), 0);
        b = (struct farm_acc){ .used = true, .samples = 10, .violations = 10 };
        assert_int_equal(hist_init(&b.h, 1000), 0);
        assert_int_equal(farm_acc_merge(&a, &b), 0);
        assert_int_equal(a.samples, INT64_MAX);
        assert_int_equal(a.violations, INT64_MAX);
        farm_acc_done(&a);
        farm_acc_done(&b);
}

/* ---- the raw request target ---- */

static void test_target(void **state) {
        static const struct {
                const char *target, *err;
        } bad[] = {
                { "/api/v1/machines/0123%00/runs", "path: %00 (an encoded control character)" },
                { "/api/v1/machines?limit=1%00abc", "limit: %00" },
                { "/api/v1/machines?li%00mit=1", "query: %00" },
                { "/x%1b[31m", "path: %1b" },
                { "/x%7F", "path: %7F" },
                { "/x\x01", "path: a control character (0x01)" },
                { "/x?a=1&y=\x7f", "y: a control character (0x7F)" },
                { "/x?y\x7f", "query: a control character (0x7F)" },
                { "/x%zz", "path: '%' not followed by two hexadecimal digits" },
                { "/x%4", "path: '%' not followed" },
                { "/a b", "path: a space is not allowed (send it as %20)" },
                { "/x?y=a b", "y: a space is not allowed" },
                /* Bytes that are not UTF-8 text once decoded (PostgreSQL refuses them). */
                { "/api/v1/kernels?with=%FF", "with: not text once decoded: not UTF-8" },
                { "/kernels/%C3", "path: not text once decoded: not UTF-8" },
                { "/x?a=%C3%A9&b=%E2%80%AE", "b: not text once decoded: a bidirectional" },
                { "/x?%FF=1", "query: not text once decoded" },
        };
        char err[FARM_PATH_ERROR_MAX], *route;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(farm_target_check(bad[i].target, err), -EINVAL);
                if (!strstr(err, bad[i].err))
                        fail_msg("%s: '%s', not '%s'", bad[i].target, err, bad[i].err);
                assert_int_equal(farm_route_path(bad[i].target, &route), -EINVAL);
        }
        /* Decoded, each path segment and each query name and value is one line of text. */
        static const struct {
                const char *target, *err;
        } text[] = {
                { "/kernels/6.6%E2%80%AE-rt",
                  "path: not text once decoded: a bidirectional formatting character U+202E at "
                  "byte 12" },
                { "/x?scenario=a%C2%85",
                  "scenario: not text once decoded: a control character U+0085 at byte 1" },
                { "/x?a%FF=1", "query: not text once decoded: not UTF-8 (byte 0xFF at byte 1)" },
                { "/x/%C0%AF", "path: not text once decoded: not UTF-8 (byte 0xC0 at byte 3)" },
                { "/x?y=1&z=%ED%A0%80",
                  "z: not text once decoded: not UTF-8 (byte 0xED at byte 0)" },
                { "/x\xe2\x81\xa6/y", "path: not text once decoded: a bidirectional formatting" },
        };
        for (size_t i = 0; i < ELEMENTSOF(text); i++) {
                assert_int_equal(farm_target_check(text[i].target, err), -EINVAL);
                if (!strstr(err, text[i].err))
                        fail_msg("%s: '%s', not '%s'", text[i].target, err, text[i].err);
        }
        assert_int_equal(farm_target_check("/kernels/6.6.30-rt31%2Blab%3A2/verdict?scenario=a-b&"
                                           "from=2h%20ago&x=%C3%BC",
                                           err),
                         0);
        /* A '/' in a release stays in its segment; unreserved escapes are decoded, the others
         * kept (uppercase), and the query is not part of the path. */
        assert_int_equal(farm_route_path("/api/v1/kernels/5.10%2frt1/verdict?at=%41", &route), 0);
        assert_string_equal(route, "/api/v1/kernels/5.10%2Frt1/verdict");
        free(route);
        assert_int_equal(farm_route_path("/kernels/%36.6%20rt%25x%7e", &route), 0);
        assert_string_equal(route, "/kernels/6.6%20rt%25x~");
        free(route);
        char seg[64];
        assert_int_equal(farm_segment_decode("5.10%2Frt1", 10, seg, sizeof(seg)), 0);
        assert_string_equal(seg, "5.10/rt1");
        assert_int_equal(farm_segment_decode("a%00b", 5, seg, sizeof(seg)), -EINVAL);
        assert_int_equal(farm_segment_decode("a%0", 3, seg, sizeof(seg)), -EINVAL);
        assert_int_equal(farm_segment_decode("abcdef", 6, seg, 4), -ENOBUFS);
        char enc[64];
        assert_int_equal(farm_segment_encode("5.10/rt1 a%", enc, sizeof(enc)), 0);
        assert_string_equal(enc, "5.10%2Frt1%20a%25");
}

/* ---- a request head's framing ---- */

/* Splits head (a field a line) into fields as libmicrohttpd does: at the first colon, the
 * value's leading blanks left out.  Returns their number. */
static size_t split_head(char *head, struct farm_field *f, size_t size) {
        size_t n = 0;
        for (char *line = head; *line && n < size;) {
                char *end = line + strcspn(line, "\n"), *colon = strchr(line, ':');
                bool last = *end == '\0';
                *end = '\0';
                assert_non_null(colon);
                *colon++ = '\0';
                f[n++] = (struct farm_field){ .name = line, .value = colon + strspn(colon, " \t") };
                line = last ? end : end + 1;
        }
        return n;
}

static void test_head(void **state) {
        static const struct {
                const char *version, *head;
                unsigned status;
                const char *err;
        } cases[] = {
                { "HTTP/1.1", "Host: farm.lab\nContent-Length: 12", 0 },
                { "HTTP/1.1", "host: [::1]:8470\nTransfer-Encoding: CHUNKED", 0 },
                { "HTTP/1.1", "Host: FARM.LAB.\nX: a\tb", 0 },
                { "HTTP/1.1", "Host: %66arm:", 0 },
                { "HTTP/1.1", "Host:", 0 },
                { "HTTP/1.0", "Content-Length: 0", 0 },
                { "HTTP/1.1", "Host: h\nContent-Length : 5", 400,
                  "header \"Content-Length \": whitespace before the colon" },
                { "HTTP/1.1", "Host: h\nX\t: 1", 400,
                  "header \"X\\t\": whitespace before the colon" },
                { "HTTP/1.1", " X: 1\nHost: h", 400,
                  "header \" X\": a line that starts with whitespace" },
                { "HTTP/1.1", "Host: h\nX Y: 1", 400,
                  "header \"X Y\": byte 0x20 at 1 is not allowed in a field name" },
                { "HTTP/1.1", "Host: h\nX\xc3\xa9: 1", 400,
                  "header \"X\xc3\xa9\": byte 0xC3 at 1" },
                { "HTTP/1.1", "Host: h\n: 1", 400, "a header line without a field name" },
                { "HTTP/1.1", "Host: h\nTransfer-Encodingchunked:", 400,
                  "read as a folded Transfer-Encoding line" },
                { "HTTP/1.1", "Host: h\ncontent-length0: 5", 400,
                  "read as a folded Content-Length line" },
                { "HTTP/1.1", "Host: h\nX: a\rContent-Length: 5", 400,
                  "header \"X\": a control character (0x0D) in its value" },
                { "HTTP/1.1", "Host: h\nX: a\x7f", 400, "(0x7F)" },
                { "HTTP/1.1", "Host: h\nHOST: h", 400, "Host: given more than once" },
                { "HTTP/1.1", "Host: h\nAuthorization: a\nauthorization: b", 400,
                  "Authorization: given more than once" },
                { "HTTP/1.1", "Host: h\nContent-Length: 5\ncontent-length: 5", 400,
                  "Content-Length: given more than once" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked",
                  400, "Transfer-Encoding: given more than once" },
                { "HTTP/1.1", "Host: h\nContent-Length: 5x", 400,
                  "Content-Length: \"5x\": not a number of bytes" },
                { "HTTP/1.1", "Host: h\nContent-Length:", 400, "not a number of bytes" },
                { "HTTP/1.1", "Host: h\nContent-Length: 5\nTransfer-Encoding: chunked", 400,
                  "Content-Length and Transfer-Encoding together" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: gzip, chunked", 501,
                  "\"gzip, chunked\": only chunked is implemented" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: chunked, gzip", 400,
                  "the last coding must be chunked" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: xchunked", 400,
                  "the last coding must be chunked" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding:", 400,
                  "the last coding must be chunked" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: chunked,chunked", 400, "chunked twice" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: , chunked", 400,
                  "send \"chunked\" alone" },
                { "HTTP/1.1", "Host: h\nTransfer-Encoding: chunked;x=1", 400,
                  "send \"chunked\" alone" },
                { "HTTP/1.0", "Transfer-Encoding: chunked", 400,
                  "Transfer-Encoding: not allowed in an HTTP/1.0 request" },
                { "HTTP/1.1", "Content-Length: 0", 400, "Host: missing" },
                { "HTTP/1.2", "X: 1", 400, "Host: missing" },
                { "HTTP/1.1", "Host: a b", 400,
                  "Host: \"a b\": not a host name or address with an optional port" },
                { "HTTP/1.1", "Host: a/b", 400, "not a host name" },
                { "HTTP/1.1", "Host: u@h", 400, "not a host name" },
                { "HTTP/1.1", "Host: [::1", 400, "not a host name" },
                { "HTTP/1.1", "Host: h:80x", 400, "not a host name" },
                { "HTTP/1.1", "Host: h%4", 400, "not a host name" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char err[FARM_HEAD_ERROR_MAX] = "", *head = strdup(cases[i].head);
                struct farm_field f[8];
                size_t n = split_head(head, f, ELEMENTSOF(f));
                unsigned status = farm_head_check(cases[i].version, f, n, err);
                if (status != cases[i].status ||
                    (cases[i].err ? !strstr(err, cases[i].err) : status != 0))
                        fail_msg("%s: %u '%s', not %u '%s'", cases[i].head, status, err,
                                 cases[i].status, cases[i].err ?: "");
                free(head);
        }
}

/* ---- parameter ranges ---- */

static void test_param_ranges(void **state) {
        char err[FARM_PARAM_ERROR_MAX];
        int64_t t = 42;
        const int64_t now = INT64_C(1796300000000000000);
        assert_int_equal(farm_param_time("to", "9223372036854775807", now, &t, err), -ERANGE);
        assert_string_equal(err, "to=9223372036854775807: out of range (from 1970-01-01 to "
                                 "2200-01-01)");
        assert_int_equal(t, 42);
        assert_int_equal(farm_param_time("from", "@-1", now, &t, err), -ERANGE);
        assert_int_equal(farm_param_time("from", "2200-01-01T00:00:00Z", now, &t, err), -ERANGE);
        assert_int_equal(farm_param_time("from", "@0", now, &t, err), 0);
        assert_int_equal(t, 0);
        assert_int_equal(farm_param_time("to", "2199-12-31T23:59:59Z", now, &t, err), 0);
        /* "now" on a server whose clock is far off is refused, not wrapped. */
        assert_int_equal(farm_param_time("at", "1h ago", 0, &t, err), -ERANGE);
        uint64_t span = 7;
        assert_int_equal(farm_param_span("step", "3650d", &span, err), 0);
        assert_int_equal(farm_param_span("step", "3651d", &span, err), -EINVAL);
        assert_non_null(strstr(err, "step=3651d: longer than ten years"));
        struct farm_page p;
        assert_int_equal(farm_param_page("10", "9007199254740992", &p, err), 0);
        assert_int_equal(farm_param_page("10", "9007199254740993", &p, err), -ERANGE);
        assert_int_equal(farm_param_page("10", "9223372036854775807", &p, err), -ERANGE);
}

/* ---- text for terminals and logs ---- */

static void test_text_safe(void **state) {
        char why[TEXT_WHY_MAX], buf[128];
        assert_true(text_ok("lab-07 ü 6.6.15-rt22 ✓", false, why));
        assert_true(text_ok("two\nlines\tand a tab", true, why));
        assert_false(text_ok("two\nlines", false, why));
        assert_string_equal(why, "a control character U+000A at byte 3");
        assert_false(text_ok("\x1b[31mred", true, why));
        assert_false(text_ok("x\r", true, why));
        assert_false(text_ok("del\x7f", true, why));
        assert_false(text_ok("c1\xc2\x85", true, why));
        assert_string_equal(why, "a control character U+0085 at byte 2");
        assert_false(text_ok("a\xe2\x80\xae"
                             "b",
                             true, why));
        assert_string_equal(why, "a bidirectional formatting character U+202E at byte 1");
        assert_false(text_ok("\xe2\x81\xa6isolate", true, why));
        assert_false(text_ok("\xd8\x9c", true, why)); /* U+061C */
        assert_false(text_ok("bad \xff byte", true, why));
        assert_string_equal(why, "not UTF-8 (byte 0xFF at byte 4)");
        assert_false(text_ok("\xc0\xaf", true, why));     /* overlong '/' */
        assert_false(text_ok("\xed\xa0\x80", true, why)); /* a surrogate */

        assert_string_equal(
                text_escape("ok\n\x1b[31m\r\t\x7f\xc2\x85\xe2\x80\xae\xff ü", buf, sizeof(buf)),
                "ok\\n\\e[31m\\r\\t\\x7f\\u0085\\u202e\\xff ü");
        /* Cut to fit, never in the middle of an escape or a character. */
        assert_string_equal(text_escape("abc\x1b", buf, 5), "abc");
        assert_string_equal(text_escape("ab\xc3\xbc", buf, 4), "ab");
        char *d = text_escape_dup("\x01\x01\x01");
        assert_string_equal(d, "\\x01\\x01\\x01");
        free(d);
        d = text_escape_lines_dup("two\nlines\tand \xc2\x85\r");
        assert_string_equal(d, "two\nlines\tand \\u0085\\r");
        free(d);
        /* What rtsoakd makes of a task's name: '?' for each character the rule refuses. */
        assert_string_equal(text_copy_utf8("a\xe2\x80\xae"
                                           "b\xc2\x85"
                                           "c\x7f\xff\xe2\x81\xa6",
                                           buf, sizeof(buf)),
                            "a?b?c???");
        assert_true(text_ok(buf, false, why));
}

/* ---- names ---- */

static void test_names(void **state) {
        static const struct name_rule word = { "a word", NAME_LOWER | NAME_DIGITS, "_", 1, 8 };
        char why[NAME_WHY_MAX];
        assert_true(name_ok(&word, "ab_9", why));
        assert_false(name_ok(&word, "", why));
        assert_string_equal(why, "length 0 is out of range (1 to 8)");
        assert_false(name_ok(&word, "abcdefghi", why));
        assert_string_equal(why, "length 9 is out of range (1 to 8)");
        /* A character is told before the length, and shown only when printable ASCII. */
        assert_false(name_ok(&word, "abcdefgh/", why));
        assert_string_equal(why, "'/' at byte 8: a word may hold only a-z, 0-9 and _");
        assert_false(name_ok(&word, "a b", why));
        assert_string_equal(why, "a space at byte 1: a word may hold only a-z, 0-9 and _");
        assert_false(name_ok(&word, "a\xe2\x80\xae", why));
        assert_string_equal(why, "byte 0xE2 at byte 1: a word may hold only a-z, 0-9 and _");
        assert_false(name_ok(&word, "\x1b", why));
        assert_false(name_ok(&summary_name_id, "0123456789ABCDEF0123456789abcdef", why));
        assert_string_equal(why, "'A' at byte 10: an identifier may hold only lowercase "
                                 "hexadecimal digits");
        assert_true(name_ok(&summary_name_release, "6.6.30-rt31+lab~2:x_y", why));
        assert_false(name_ok(&summary_name_release, "6.6/rt", why));
        assert_string_equal(why, "'/' at byte 3: a release name may hold only letters, digits "
                                 "and . _ + ~ : -");
        assert_false(name_ok(&summary_name_scenario, "a.b", why));
        assert_string_equal(why, "'.' at byte 1: a scenario name may hold only letters, digits "
                                 "and - _");
        (void) state;
}

/* ---- free text in JSON documents ---- */

static void test_text_json(void **state) {
        char path[TEXT_JSON_PATH_MAX], why[TEXT_WHY_MAX];
        const char *doc = "{\"a\":[\"ok\",\"x\\u202ey\"],\"k\\u0085\":\"two\\nlines\","
                          "\"b\":{\"c\":\"\\u001b[31m\"}}";
        json_t *j = json_loads(doc, 0, NULL);
        assert_non_null(j);
        assert_false(text_json_ok(j, true, path, why));
        assert_string_equal(path, "a[1]");
        assert_string_equal(why, "a bidirectional formatting character U+202E at byte 1");
        json_t *k = json_pack("{s:s}", "k\xc2\x85", "v");
        assert_false(text_json_ok(k, true, path, why));
        assert_string_equal(path, "{name}");
        json_decref(k);

        /* Escaped where it leaves: text with lines keeps them. */
        json_t *e = json_deep_copy(j);
        assert_int_equal(text_json_escape(e), 0);
        char *text = json_dumps(e, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(text, "{\"a\":[\"ok\",\"x\\\\u202ey\"],\"b\":{\"c\":\"\\\\e[31m\"},"
                                  "\"k\\\\u0085\":\"two\\nlines\"}");
        assert_true(text_json_ok(e, true, path, why));
        free(text);
        json_decref(e);

        /* Repaired where this program reads back what it stored: one line, '?' for each. */
        assert_int_equal(text_json_repair(j), 0);
        text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        assert_string_equal(
                text, "{\"a\":[\"ok\",\"x?y\"],\"b\":{\"c\":\"?[31m\"},\"k?\":\"two?lines\"}");
        assert_true(text_json_ok(j, false, path, why));
        free(text);
        json_decref(j);
        (void) state;
}

/* ---- where in JSON text a parser stopped ---- */

static void test_json_path(void **state) {
        static const struct {
                const char *text, *path;
        } cases[] = {
                { "{\"a\":1,\"b\":[{\"c\":\"x\xff\"}]}", "b[0].c" },
                { "{\"a\":{\"b\":\"\\ud800\"}}", "a.b" },
                { "{\"a\":1,\"\xff\":2}", "{name}" },
                { "[1,\"[\",{\"x\":[\"}\",\"\xc0\xaf\"]}]", "[2].x[1]" },
                { "{\"a\":\"\\\"\",\"b\":\"\x01\"}", "b" },
                { "\"\xff\"", "" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_error_t je;
                char path[JSON_PATH_MAX];
                json_t *j = json_loads(cases[i].text, 0, &je);
                if (j)
                        fail_msg("case %zu parsed", i);
                json_path_at(cases[i].text, strlen(cases[i].text), (size_t) je.position, path);
                if (strcmp(path, cases[i].path) != 0)
                        fail_msg("case %zu: '%s', not '%s' (%s)", i, path, cases[i].path, je.text);
        }
        (void) state;
}

/* ---- token files and where a token goes ---- */

static void test_token_file(void **state) {
        char path[] = "/tmp/rtsoak-token-XXXXXX", err[TOKEN_MESSAGE_MAX], warn[TOKEN_MESSAGE_MAX];
        char *token = NULL;
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "  abc123 trailing\nsecond\n", 25), 25);
        close(fd);
        assert_int_equal(chmod(path, 0600), 0);
        assert_int_equal(token_file_read(path, &token, err, warn), 0);
        assert_string_equal(token, "abc123");
        assert_string_equal(warn, "");
        free(token);
        assert_int_equal(chmod(path, 0644), 0);
        assert_int_equal(token_file_read(path, &token, err, warn), 0);
        assert_non_null(strstr(warn, "is readable by every user of this machine"));
        free(token);
        fd = open(path, O_WRONLY | O_TRUNC);
        assert_int_equal(write(fd, "\n", 1), 1);
        close(fd);
        assert_int_equal(token_file_read(path, &token, err, warn), -EINVAL);
        assert_non_null(strstr(err, "no token in the file's first line"));
        unlink(path);
        assert_int_equal(token_file_read(path, &token, err, warn), -ENOENT);

        assert_true(token_in_clear("http://farm.lab:8470"));
        assert_true(token_in_clear("HTTP://10.0.0.5/"));
        assert_true(token_in_clear("http://user@192.168.1.2:80"));
        assert_true(token_in_clear("http://[2001:db8::1]:8470"));
        assert_true(token_in_clear("http://localhost.evil.example/"));
        assert_false(token_in_clear("https://farm.lab:8470"));
        assert_false(token_in_clear("http://127.0.0.1:8470"));
        assert_false(token_in_clear("http://127.1.2.3"));
        assert_false(token_in_clear("http://localhost:8470/x"));
        assert_false(token_in_clear("http://[::1]:8470"));
}

/* ---- files created with their mode whatever the umask ---- */

static void test_file_mode(void **state) {
        char dir[] = "/tmp/rtsoak-mode-XXXXXX", path[64];
        struct stat st;
        bool loose;
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/db", dir);
        mode_t old = umask(0);
        assert_int_equal(file_create_mode(path, 0640, NULL), 1);
        umask(old);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(file_create_mode(path, 0600, &loose), 0);
        assert_true(loose);
        unlink(path);
        old = umask(0077);
        assert_int_equal(file_create_mode(path, 0640, NULL), 1);
        umask(old);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        unlink(path);

        /* The local database and its lock file, as rtsoakd opens them. */
        char db[96], lock[104], err[STORE_ERROR_MAX];
        store *sto;
        snprintf(db, sizeof(db), "%s/rtsoak.db", dir);
        snprintf(lock, sizeof(lock), "%s.lock", db);
        old = umask(0022);
        assert_int_equal(store_open(db, STORE_WRITER, &sto, err), 0);
        umask(old);
        store_close(sto);
        assert_int_equal(stat(db, &st), 0);
        assert_int_equal(st.st_mode & 07777, STORE_FILE_MODE);
        assert_int_equal(stat(lock, &st), 0);
        assert_int_equal(st.st_mode & 07777, STORE_FILE_MODE);
        char cmd[200];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

/* ---- read access ---- */

static void test_access(void **state) {
        char err[FARM_ACCESS_ERROR_MAX], desc[512];
        farm_access *a;
        struct farm_access_config c = { .listen = "127.0.0.1:8470" };
        assert_int_equal(farm_access_new(&c, &a, err), 0);
        farm_access_describe(a, desc, sizeof(desc));
        assert_string_equal(desc, "API open, dashboard open, metrics open, audit staff; hosts "
                                  "localhost 127.0.0.1 ::1");
        farm_access_free(a);
        c.listen = "0.0.0.0:8470";
        c.metrics = FARM_READ_OPEN;
        assert_int_equal(farm_access_new(&c, &a, err), 0);
        farm_access_describe(a, desc, sizeof(desc));
        assert_non_null(strstr(desc, "API token, dashboard token, metrics open"));
        farm_access_free(a);
        /* A list keeps the loopback names, but for those it removes; an IPv6 address is
         * taken bracketed or not. */
        c.hosts = "farm.lab, [2001:db8::1] farm:8470 2001:db8::2";
        assert_int_equal(farm_access_new(&c, &a, err), 0);
        farm_access_describe(a, desc, sizeof(desc));
        assert_non_null(strstr(desc, "hosts localhost 127.0.0.1 ::1 farm.lab 2001:db8::1 farm "
                                     "2001:db8::2"));
        farm_access_free(a);
        c.hosts = "-localhost farm.lab -[::1],-127.0.0.1";
        assert_int_equal(farm_access_new(&c, &a, err), 0);
        farm_access_describe(a, desc, sizeof(desc));
        assert_non_null(strstr(desc, "; hosts farm.lab"));
        assert_null(strstr(desc, "farm.lab "));
        farm_access_free(a);
        c.hosts = "farm.lab -::1";
        assert_int_equal(farm_access_new(&c, &a, err), 0);
        farm_access_describe(a, desc, sizeof(desc));
        assert_non_null(strstr(desc, "; hosts localhost 127.0.0.1 farm.lab"));
        farm_access_free(a);
        c.hosts = "farm.lab -farm.example";
        assert_int_equal(farm_access_new(&c, &a, err), -EINVAL);
        assert_string_equal(err, "Hosts=farm.lab -farm.example: -farm.example removes a name the "
                                 "list does not hold (the loopback names localhost, 127.0.0.1 "
                                 "and ::1, or one listed before it)");
        c.hosts = "farm.lab -";
        assert_int_equal(farm_access_new(&c, &a, err), -EINVAL);
        assert_non_null(strstr(err, "Hosts=farm.lab -: expected"));

        /* The links' name: the first of the list that is not a loopback name. */
        static const struct {
                const char *hosts, *want;
        } links[] = {
                { "farm.lab.example", "farm.lab.example" },
                { "localhost 127.0.0.2 [::1] farm:8470 other", "farm" },
                { "-localhost 2001:db8::1", "[2001:db8::1]" },
                { "localhost", NULL },
                { "auto", NULL },
                { "*", NULL },
                { NULL, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                char host[FARM_ACCESS_LINK_HOST_MAX] = "";
                c.hosts = links[i].hosts;
                int r = farm_access_link_host(&c, host, sizeof(host));
                if (links[i].want) {
                        assert_int_equal(r, 0);
                        assert_string_equal(host, links[i].want);
                } else
                        assert_int_equal(r, -ENOENT);
        }
        c.hosts = "*.lab";
        assert_int_equal(farm_access_new(&c, &a, err), -EINVAL);
        assert_non_null(strstr(err, "Hosts=*.lab"));

        assert_int_equal(farm_route_class_of("/api/v1/summaries", "POST"), FARM_CLASS_UPLOAD);
        assert_int_equal(farm_route_class_of("/api/v1/audit", "GET"), FARM_CLASS_AUDIT);
        assert_int_equal(farm_route_class_of("/api/v1/audit/", "GET"), FARM_CLASS_AUDIT);
        assert_int_equal(farm_route_class_of("/api/v1/notifications", "GET"), FARM_CLASS_AUDIT);
        assert_int_equal(farm_route_class_of("/api/v1/auditx", "GET"), FARM_CLASS_API);
        assert_int_equal(farm_route_class_of("/api/v1/waivers/3/withdraw", "POST"),
                         FARM_CLASS_STAFF);
        assert_int_equal(farm_route_class_of("/metrics", "HEAD"), FARM_CLASS_METRICS);
        assert_int_equal(farm_route_class_of("/api/v1/machines", "GET"), FARM_CLASS_API);
        assert_int_equal(farm_route_class_of("/apix", "GET"), FARM_CLASS_DASHBOARD);
        assert_int_equal(farm_route_class_of("/plots/kernels/x/coverage.svg", "GET"),
                         FARM_CLASS_DASHBOARD);

        /* The token of Basic credentials is the password; the user name is not looked at. */
        uint8_t h1[SHA256_DIGEST_SIZE], h2[SHA256_DIGEST_SIZE];
        const char *token = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        char bearer[128];
        snprintf(bearer, sizeof(bearer), "Bearer %s", token);
        assert_int_equal(farm_token_from_authorization(bearer, h1), 0);
        /* base64("alice:" token) */
        assert_int_equal(farm_token_from_authorization(
                                 "Basic YWxpY2U6MDAxMTIyMzM0NDU1NjY3Nzg4OTlhYWJiY2NkZGVlZmYwMDExMj"
                                 "IzMzQ0NTU2Njc3ODg5OWFhYmJjY2RkZWVmZg==",
                                 h2),
                         0);
        assert_memory_equal(h1, h2, sizeof(h1));
        assert_int_equal(farm_token_from_authorization("Basic YWxpY2U6eA==", h2), -EINVAL);
        assert_int_equal(farm_token_from_authorization("Basic !!!", h2), -EINVAL);
        assert_int_equal(farm_token_from_authorization("Basic", h2), -EINVAL);
        assert_int_equal(farm_token_from_authorization("Digest x", h2), -EINVAL);
}

/* ---- connection limits and deadlines ---- */

static struct sockaddr_in v4(const char *a) {
        struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(4242) };
        inet_pton(AF_INET, a, &s.sin_addr);
        return s;
}

static struct sockaddr_in6 v6(const char *a) {
        struct sockaddr_in6 s = { .sin6_family = AF_INET6, .sin6_port = htons(4242) };
        inet_pton(AF_INET6, a, &s.sin6_addr);
        return s;
}

static void test_connection_limits(void **state) {
        struct farm_connlimit_config c = { .max_total = 5,
                                           .max_per_address = 2,
                                           .head_timeout_ns = 300 * NSEC_PER_MSEC,
                                           .request_timeout_ns = 600 * NSEC_PER_MSEC };
        farm_connlimit *l;
        struct farm_conn *conns[8];
        int fds[8][2];
        assert_int_equal(farm_connlimit_new(&c, &l), 0);
        struct sockaddr_in a = v4("10.0.0.1"), b = v4("10.0.0.2");
        struct sockaddr_in6 m = v6("::ffff:10.0.0.1"), p = v6("2001:db8:1:2::1"),
                            q = v6("2001:db8:1:2:ffff::9"), other = v6("2001:db8:1:3::1");
        for (int i = 0; i < 8; i++)
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]), 0);
        /* Two from 10.0.0.1, also as an IPv4-mapped IPv6 address; then no more from it. */
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        conns[0] = farm_connlimit_opened(l, fds[0][0], (struct sockaddr *) &a, sizeof(a));
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &m, sizeof(m)));
        conns[1] = farm_connlimit_opened(l, fds[1][0], (struct sockaddr *) &m, sizeof(m));
        assert_false(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &b, sizeof(b)));
        /* IPv6 counts per /64. */
        conns[2] = farm_connlimit_opened(l, fds[2][0], (struct sockaddr *) &p, sizeof(p));
        conns[3] = farm_connlimit_opened(l, fds[3][0], (struct sockaddr *) &q, sizeof(q));
        assert_false(farm_connlimit_admit(l, (struct sockaddr *) &p, sizeof(p)));
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &other, sizeof(other)));
        conns[4] = farm_connlimit_opened(l, fds[4][0], (struct sockaddr *) &other, sizeof(other));
        /* Five in all. */
        assert_false(farm_connlimit_admit(l, (struct sockaddr *) &b, sizeof(b)));
        farm_connlimit_closed(l, conns[1]);
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        conns[5] = farm_connlimit_opened(l, fds[5][0], (struct sockaddr *) &a, sizeof(a));
        assert_false(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        /* A connection whose request ended is being closed: it counts no more, although its
         * socket is not closed yet (a client reconnecting at once was refused). */
        farm_connlimit_done(l, conns[5]);
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        farm_connlimit_closed(l, conns[5]);

        /* Deadlines: conns[0] sends its head in time and is answered; conns[2] sends its head
         * but no answer comes within the request deadline; the others never finish a head. */
        farm_connlimit_head(l, conns[0]);
        farm_connlimit_done(l, conns[0]);
        farm_connlimit_head(l, conns[2]);
        usleep(450 * 1000);
        char byte;
        assert_int_equal(read(fds[3][1], &byte, 1), 0); /* shut down: end of stream */
        assert_string_equal(farm_connlimit_cut(l, conns[3]), "head-deadline");
        assert_null(farm_connlimit_cut(l, conns[2]));
        usleep(450 * 1000);
        assert_int_equal(read(fds[2][1], &byte, 1), 0);
        assert_string_equal(farm_connlimit_cut(l, conns[2]), "request-deadline");
        assert_string_equal(farm_connlimit_cut(l, conns[0]), "head-deadline");
        farm_connlimit_closed(l, conns[0]);
        farm_connlimit_closed(l, conns[2]);
        farm_connlimit_closed(l, conns[3]);
        farm_connlimit_closed(l, conns[4]);
        /* Counted out once each: two from one address again, then no more. */
        conns[6] = farm_connlimit_opened(l, fds[6][0], (struct sockaddr *) &a, sizeof(a));
        conns[7] = farm_connlimit_opened(l, fds[7][0], (struct sockaddr *) &a, sizeof(a));
        assert_false(farm_connlimit_admit(l, (struct sockaddr *) &a, sizeof(a)));
        assert_true(farm_connlimit_admit(l, (struct sockaddr *) &b, sizeof(b)));
        farm_connlimit_closed(l, conns[6]);
        farm_connlimit_closed(l, conns[7]);
        farm_connlimit_free(l);
        for (int i = 0; i < 8; i++) {
                close(fds[i][0]);
                close(fds[i][1]);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_merge_budget),
                cmocka_unit_test(test_acc_saturates),
                cmocka_unit_test(test_target),
                cmocka_unit_test(test_head),
                cmocka_unit_test(test_param_ranges),
                cmocka_unit_test(test_text_safe),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_text_json),
                cmocka_unit_test(test_json_path),
                cmocka_unit_test(test_token_file),
                cmocka_unit_test(test_file_mode),
                cmocka_unit_test(test_access),
                cmocka_unit_test(test_connection_limits),
        };
        return RUN_TESTS(tests);
}
