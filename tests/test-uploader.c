/* SPDX-License-Identifier: MIT */
/* The uploader's retry policy: exponential backoff with full jitter, capped, never shorter
 * than the server's Retry-After, and Retry-After in both of its forms. */
#include <string.h>

#include "tests.h"
#include "macro.h"
#include "http-reply.h"
#include "uploader.h"

#define S NSEC_PER_SEC

static void test_backoff_grows_and_caps(void **state) {
        /* The largest draw shows the cap of each attempt: 1, 2, 4, ... up to the maximum. */
        uint64_t top = UINT64_MAX;
        assert_int_equal(uploader_backoff(S, 300 * S, 0, 0, top), top % S);
        uint64_t expect_cap[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300 };
        for (unsigned a = 0; a < ELEMENTSOF(expect_cap); a++) {
                uint64_t cap = expect_cap[a] * S;
                /* Draws cover [1 ms, cap). */
                assert_int_equal(uploader_backoff(S, 300 * S, a, 0, cap - 1), cap - 1);
                assert_int_equal(uploader_backoff(S, 300 * S, a, 0, cap), NSEC_PER_MSEC);
                assert_true(uploader_backoff(S, 300 * S, a, 0, 0x123456789abcdefu) < cap);
        }
        /* Attempt numbers far beyond the cap do not overflow. */
        assert_true(uploader_backoff(S, 300 * S, 1000, 0, UINT64_MAX) < 300 * S);
}

static void test_backoff_honours_retry_after(void **state) {
        assert_int_equal(uploader_backoff(S, 300 * S, 0, 120 * S, 5), 120 * S);
        assert_int_equal(uploader_backoff(S, 300 * S, 8, S / 2, 200 * S), 200 * S);
}

static void test_retry_after(void **state) {
        const int64_t now = INT64_C(1796300000) * (int64_t) S; /* 2026-12-03T12:13:20Z */
        assert_int_equal(http_parse_retry_after(" 120\r\n", now), 120 * S);
        assert_int_equal(http_parse_retry_after("0", now), 0);
        assert_int_equal(http_parse_retry_after("", now), 0);
        assert_int_equal(http_parse_retry_after("soon", now), 0);
        assert_int_equal(http_parse_retry_after("12abc", now), 0);
        /* More than a day is taken as a day. */
        assert_int_equal(http_parse_retry_after("999999", now), 86400 * S);
        /* An HTTP date 90 s after now, and one in the past. */
        assert_int_equal(http_parse_retry_after("Thu, 03 Dec 2026 12:14:50 GMT", now), 90 * S);
        assert_int_equal(http_parse_retry_after("Thu, 03 Dec 2026 12:00:00 GMT", now), 0);
        /* A date in year 9999 (its nanoseconds do not fit 64 bits) is "a day", without a
         * signed overflow (UBSan stops this test on the code before the fix); and a clock
         * far off in either direction does not wrap the difference. */
        assert_int_equal(http_parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now), 86400 * S);
        assert_int_equal(http_parse_retry_after("Thu, 03 Dec 2026 12:14:50 GMT", INT64_MIN),
                         86400 * S);
        assert_int_equal(http_parse_retry_after("Thu, 03 Dec 2026 12:14:50 GMT", INT64_MAX), 0);
}

/* The reply as libcurl hands it over in pieces: the body cut at its size, the header, the
 * server's error in one line. */
static void test_reply(void **state) {
        struct http_reply r;
        char big[3000], msg[256], hdr[] = "retry-after: 7\r\n", other[] = "Allow: GET\r\n";
        memset(big, 'x', sizeof(big));
        http_reply_reset(&r);
        assert_int_equal(http_reply_on_body(big, 1, sizeof(big), &r), sizeof(big));
        assert_int_equal(http_reply_on_body(big, 3, 1000, &r), 3000);
        assert_int_equal(r.len, sizeof(r.body) - 1);
        assert_int_equal(strlen(r.body), sizeof(r.body) - 1);
        assert_int_equal(http_reply_on_header(other, 1, strlen(other), &r), strlen(other));
        assert_string_equal(r.retry_after, "");
        http_reply_on_header(hdr, 1, strlen(hdr), &r);
        assert_int_equal(http_parse_retry_after(r.retry_after, 0), 7 * S);

        http_reply_reset(&r);
        char json[] = "{\"error\": \"intervals[2].cpus: \\u0007 no\"}";
        http_reply_on_body(json, 1, strlen(json), &r);
        http_reply_message(&r, 400, msg, sizeof(msg));
        assert_string_equal(msg, "HTTP 400: intervals[2].cpus: \\x07 no");
        http_reply_reset(&r);
        char text[] = "Bad Gateway\r\n";
        http_reply_on_body(text, 1, strlen(text), &r);
        http_reply_message(&r, 502, msg, sizeof(msg));
        assert_string_equal(msg, "HTTP 502: Bad Gateway");
        /* What would colour a terminal, forge a line or turn words around shows as escapes. */
        http_reply_reset(&r);
        char evil[] = "{\"error\": \"\\u001b[31mok\\nHTTP 200: \\u202edelrots\"}";
        http_reply_on_body(evil, 1, strlen(evil), &r);
        http_reply_message(&r, 400, msg, sizeof(msg));
        assert_string_equal(msg, "HTTP 400: \\e[31mok\\nHTTP 200: \\u202edelrots");
        http_reply_reset(&r);
        http_reply_message(&r, 503, msg, sizeof(msg));
        assert_string_equal(msg, "HTTP 503: (no message)");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_backoff_grows_and_caps),
                cmocka_unit_test(test_backoff_honours_retry_after),
                cmocka_unit_test(test_retry_after),
                cmocka_unit_test(test_reply),
        };
        return RUN_TESTS(tests);
}
