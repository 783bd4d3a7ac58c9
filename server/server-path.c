/* SPDX-License-Identifier: MIT */
/* Checks and decodes the raw request target.  libmicrohttpd hands the access handler a path in
 * which "%00" has cut the string and "%2F" has become a separator; the routes read this one. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "server-path.h"
#include "text-safe.h"

static int hex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static bool control(unsigned char c) {
        return c < 0x20 || c == 0x7f;
}

static bool unreserved(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.' || c == '_' || c == '~';
}

/* What the part of the target at a fault is called in an error: "path", the name of the query
 * parameter whose value holds it (as sent, at most 64 bytes), or "query" (in a name). */
static void part_name(const char *target, const char *at, char *buf, size_t size) {
        const char *q = strchr(target, '?');
        if (!q || at < q) {
                snprintf(buf, size, "path");
                return;
        }
        const char *name = q + 1;
        for (const char *p = name; p < at; p++)
                if (*p == '&')
                        name = p + 1;
        const char *eq = memchr(name, '=', (size_t) (at - name));
        if (!eq || eq == name)
                snprintf(buf, size, "query");
        else
                snprintf(buf, size, "%.*s", (int) MIN(eq - name, 64), name);
}

/* Whether len bytes at p, a part of target (the path, or a name or a value of the query) whose
 * escapes are well formed, decode into text (buf, len + 1 bytes): UTF-8 without control or
 * bidirectional formatting characters.  What the server reads from a target it may write into
 * a database, an answer or a log; PostgreSQL refuses bytes that are not UTF-8, JSON too. */
static int decodes_to_text(const char *target, const char *p, size_t len, char *buf,
                           char err[static FARM_PATH_ERROR_MAX]) {
        char why[TEXT_WHY_MAX], part[72];
        size_t o = 0;
        for (size_t i = 0; i < len; i++)
                if (p[i] == '%') {
                        buf[o++] = (char) (hex(p[i + 1]) * 16 + hex(p[i + 2]));
                        i += 2;
                } else
                        buf[o++] = p[i];
        buf[o] = '\0';
        if (text_ok(buf, false, why))
                return 0;
        part_name(target, p, part, sizeof(part));
        snprintf(err, FARM_PATH_ERROR_MAX, "%s: not text once decoded: %s", part, why);
        return -EINVAL;
}

static int parts_text(const char *target, char err[static FARM_PATH_ERROR_MAX]) {
        _cleanup_free_ char *buf = malloc(strlen(target) + 1);
        if (!buf) {
                snprintf(err, FARM_PATH_ERROR_MAX, "out of memory checking the request target");
                return -ENOMEM;
        }
        size_t len = strcspn(target, "?");
        int r = decodes_to_text(target, target, len, buf, err);
        for (const char *p = target + len; r >= 0 && *p; p += len) {
                p++; /* the '?' or '&' */
                len = strcspn(p, "&");
                const char *eq = memchr(p, '=', len);
                size_t name = eq ? (size_t) (eq - p) : len;
                r = decodes_to_text(target, p, name, buf, err);
                if (r >= 0 && eq)
                        r = decodes_to_text(target, eq + 1, len - name - 1, buf, err);
        }
        return r;
}

int farm_target_check(const char *target, char err[static FARM_PATH_ERROR_MAX]) {
        for (const unsigned char *p = (const unsigned char *) target; *p; p++) {
                char why[64] = "", part[72];
                int hi = *p == '%' ? hex((char) p[1]) : 0,
                    lo = *p == '%' && hi >= 0 ? hex((char) p[2]) : 0;
                if (control(*p))
                        snprintf(why, sizeof(why), "a control character (0x%02X) is not allowed",
                                 *p);
                else if (*p == ' ')
                        snprintf(why, sizeof(why), "a space is not allowed (send it as %%20)");
                else if (hi < 0 || lo < 0)
                        snprintf(why, sizeof(why), "'%%' not followed by two hexadecimal digits");
                else if (*p == '%' && control((unsigned char) (hi * 16 + lo)))
                        snprintf(why, sizeof(why),
                                 "%%%c%c (an encoded control character) is not allowed", p[1],
                                 p[2]);
                if (why[0]) {
                        part_name(target, (const char *) p, part, sizeof(part));
                        snprintf(err, FARM_PATH_ERROR_MAX, "%s: %s", part, why);
                        return -EINVAL;
                }
                if (*p == '%')
                        p += 2;
        }
        return parts_text(target, err);
}

int farm_route_path(const char *target, char **ret) {
        char err[FARM_PATH_ERROR_MAX];
        if (farm_target_check(target, err) < 0)
                return -EINVAL;
        size_t n = strcspn(target, "?");
        char *out = malloc(n + 1), *o = out;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (target[i] != '%') {
                        *o++ = target[i];
                        continue;
                }
                unsigned char c = (unsigned char) (hex(target[i + 1]) * 16 + hex(target[i + 2]));
                if (unreserved(c))
                        *o++ = (char) c;
                else
                        o += sprintf(o, "%%%02X", c);
                i += 2;
        }
        *o = '\0';
        *ret = out;
        return 0;
}

int farm_segment_decode(const char *seg, size_t len, char *buf, size_t size) {
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                char c = seg[i];
                if (c == '%') {
                        int hi = i + 2 < len ? hex(seg[i + 1]) : -1,
                            lo = hi >= 0 ? hex(seg[i + 2]) : -1;
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char) (hi * 16 + lo);
                        i += 2;
                }
                if (c == '\0')
                        return -EINVAL;
                if (o + 1 >= size)
                        return -ENOBUFS;
                buf[o++] = c;
        }
        if (o >= size)
                return -ENOBUFS;
        buf[o] = '\0';
        return 0;
}

int farm_release_segment(const char *seg, size_t len, char ret[static SUMMARY_MAX_RELEASE + 1]) {
        if (len == 0)
                return -ENOBUFS;
        return farm_segment_decode(seg, len, ret, SUMMARY_MAX_RELEASE + 1);
}

int farm_segment_encode(const char *s, char *buf, size_t size) {
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                int n = unreserved(*p) ? 1 : 3;
                if (o + (size_t) n >= size)
                        return -ENOBUFS;
                if (n == 1)
                        buf[o] = (char) *p;
                else
                        snprintf(buf + o, 4, "%%%02X", *p);
                o += (size_t) n;
        }
        if (o >= size)
                return -ENOBUFS;
        buf[o] = '\0';
        return 0;
}
