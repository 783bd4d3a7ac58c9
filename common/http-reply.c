/* SPDX-License-Identifier: MIT */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "http-reply.h"
#include "macro.h"
#include "text-safe.h"
#include "timeutil.h"

#define RETRY_AFTER_MAX_S 86400

void http_reply_reset(struct http_reply *r) {
        r->len = 0;
        r->body[0] = 0;
        r->retry_after[0] = 0;
}

size_t http_reply_on_body(char *data, size_t size, size_t n, void *reply) {
        struct http_reply *r = reply;
        size_t len = size * n, room = sizeof(r->body) - 1 - r->len;
        memcpy(r->body + r->len, data, MIN(len, room));
        r->len += MIN(len, room);
        r->body[r->len] = 0;
        return len;
}

size_t http_reply_on_header(char *data, size_t size, size_t n, void *reply) {
        struct http_reply *r = reply;
        size_t len = size * n;
        if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0)
                snprintf(r->retry_after, sizeof(r->retry_after), "%.*s",
                         (int) MIN(len - 12, sizeof(r->retry_after) - 1), data + 12);
        return len;
}

void http_reply_message(const struct http_reply *r, long status, char *buf, size_t len) {
        json_t *j = json_loadb(r->body, r->len, 0, NULL);
        const char *msg = json_string_value(json_object_get(j, "error"));
        char text[sizeof(r->body)];
        snprintf(text, sizeof(text), "%s", msg && *msg ? msg : *r->body ? r->body : "(no message)");
        size_t tl = strlen(text);
        while (tl > 0 && strchr(" \t\r\n", text[tl - 1]))
                text[--tl] = '\0';
        json_decref(j);
        /* Escaped: whatever answers at the server's address may send escape sequences. */
        int n = snprintf(buf, len, "HTTP %ld: ", status);
        if (n >= 0 && (size_t) n < len)
                text_escape(text, buf + n, len - (size_t) n);
}

uint64_t http_parse_retry_after(const char *value, int64_t now_real_ns) {
        while (*value == ' ' || *value == '\t')
                value++;
        if (*value >= '0' && *value <= '9') {
                char *end;
                unsigned long long s = strtoull(value, &end, 10);
                while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
                        end++;
                if (*end)
                        return 0;
                return MIN(s, (unsigned long long) RETRY_AFTER_MAX_S) * NSEC_PER_SEC;
        }
        struct tm tm = {};
        const char *end = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (!end)
                return 0;
        /* A date in year 9999 (or whatever a server at that address says) must not wrap:
         * the seconds are checked before they become nanoseconds, and so is the difference. */
        time_t secs = timegm(&tm);
        int64_t t, wait;
        if (secs == (time_t) -1 ||
            __builtin_mul_overflow((int64_t) secs, (int64_t) NSEC_PER_SEC, &t))
                return secs > 0 ? RETRY_AFTER_MAX_S * NSEC_PER_SEC : 0;
        if (__builtin_sub_overflow(t, now_real_ns, &wait))
                return t > now_real_ns ? RETRY_AFTER_MAX_S * NSEC_PER_SEC : 0;
        if (wait <= 0)
                return 0;
        return (uint64_t) MIN(wait, (int64_t) RETRY_AFTER_MAX_S * (int64_t) NSEC_PER_SEC);
}
