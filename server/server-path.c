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

/* What is wrong with text (a decoded part of the target), in err; -EINVAL, or 0 when it is one
 * line of free text.  name: the query parameter whose value it is, or NULL. */
static int check_part(bool query, const char *name, const char *text,
                      char err[static FARM_PATH_ERROR_MAX]) {
        char why[TEXT_WHY_MAX], shown[96];
        if (text_ok(text, false, why))
                return 0;
        if (!query)
                snprintf(err, FARM_PATH_ERROR_MAX, "path: '%s': %s",
                         text_escape(text, shown, sizeof(shown)), why);
        else if (name)
                snprintf(err, FARM_PATH_ERROR_MAX, "query: %s=: %s",
                         text_escape(name, shown, sizeof(shown)), why);
        else
                snprintf(err, FARM_PATH_ERROR_MAX, "query: a parameter's name: %s", why);
        return -EINVAL;
}

/* Each segment of the path and each name and value of the query, decoded (its escapes are
 * valid by now), is one line of free text (text_ok()): what a route reads is text the rest of
 * the server takes, whatever it names. */
static int check_parts(const char *target, char err[static FARM_PATH_ERROR_MAX]) {
        size_t size = strlen(target) + 1;
        char *text = malloc(size), *name = malloc(size);
        bool query = false, value = false;
        int r = text && name ? 0 : -ENOMEM;
        for (const char *p = target; r >= 0;) {
                size_t len = strcspn(p, query ? "&=" : "/?");
                r = farm_segment_decode(p, len, text, size);
                if (r >= 0)
                        r = check_part(query, value ? name : NULL, text, err);
                if (r >= 0 && query && !value)
                        memcpy(name, text, strlen(text) + 1);
                if (r < 0 || !p[len])
                        break;
                value = query && p[len] == '=';
                query = query || p[len] == '?';
                p += len + 1;
        }
        free(text);
        free(name);
        return r;
}

/* Where p is, for messages: "path", "query", or "query: NAME=" in a parameter's value. */
static const char *part_of(const char *query, const char *p, char buf[static 96]) {
        if (!query || p <= query)
                return "path";
        const char *start = query + 1;
        for (const char *q = start; q < p; q++)
                if (*q == '&')
                        start = q + 1;
        const char *eq = memchr(start, '=', (size_t) (p - start));
        if (!eq)
                return "query";
        char name[64], shown[80];
        snprintf(name, sizeof(name), "%.*s", (int) MIN((size_t) (eq - start), sizeof(name) - 1),
                 start);
        snprintf(buf, 96, "query: %s=", text_escape(name, shown, sizeof(shown)));
        return buf;
}

int farm_target_check(const char *target, char err[static FARM_PATH_ERROR_MAX]) {
        const char *query = NULL;
        char where[96];
        for (const unsigned char *p = (const unsigned char *) target; *p; p++) {
                const char *part = part_of(query, (const char *) p, where);
                if (*p == '?' && !query)
                        query = (const char *) p;
                if (control(*p)) {
                        snprintf(err, FARM_PATH_ERROR_MAX,
                                 "%s: a control character (0x%02X) is not allowed", part, *p);
                        return -EINVAL;
                }
                if (*p != '%')
                        continue;
                int hi = hex((char) p[1]), lo = hi >= 0 ? hex((char) p[2]) : -1;
                if (hi < 0 || lo < 0) {
                        snprintf(err, FARM_PATH_ERROR_MAX,
                                 "%s: '%%' not followed by two hexadecimal digits", part);
                        return -EINVAL;
                }
                if (control((unsigned char) (hi * 16 + lo))) {
                        snprintf(err, FARM_PATH_ERROR_MAX,
                                 "%s: %%%c%c (an encoded control character) is not allowed", part,
                                 p[1], p[2]);
                        return -EINVAL;
                }
                p += 2;
        }
        int r = check_parts(target, err);
        if (r == -ENOMEM)
                snprintf(err, FARM_PATH_ERROR_MAX, "out of memory");
        return r;
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
