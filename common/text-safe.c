/* SPDX-License-Identifier: MIT */
/* Checking and escaping the characters that take over a terminal or a log line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text-safe.h"

/* The code point of the UTF-8 character at s and its length, or length 0 for a byte that
 * does not start a valid (shortest-form, not surrogate) sequence. */
static size_t decode(const unsigned char *s, uint32_t *cp) {
        unsigned char c = s[0];
        if (c < 0x80) {
                *cp = c;
                return 1;
        }
        size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (n == 0)
                return 0;
        uint32_t v = c & (0x7F >> n);
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                v = v << 6 | (s[i] & 0x3F);
        }
        if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
            (v >= 0xD800 && v <= 0xDFFF))
                return 0;
        *cp = v;
        return n;
}

static bool unsafe(uint32_t cp, bool multiline) {
        if (cp < 0x20)
                return !(multiline && (cp == '\t' || cp == '\n'));
        return cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E ||
               cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

bool text_ok(const char *s, bool multiline, char why[static TEXT_WHY_MAX]) {
        const unsigned char *p = (const unsigned char *) s;
        for (size_t at = 0; p[at];) {
                uint32_t cp;
                size_t n = decode(p + at, &cp);
                if (n == 0) {
                        snprintf(why, TEXT_WHY_MAX, "not UTF-8 (byte 0x%02X at byte %zu)", p[at],
                                 at);
                        return false;
                }
                if (unsafe(cp, multiline)) {
                        snprintf(why, TEXT_WHY_MAX, "%s U+%04X at byte %zu",
                                 cp < 0x100 ? "a control character"
                                            : "a bidirectional formatting character",
                                 (unsigned) cp, at);
                        return false;
                }
                at += n;
        }
        return true;
}

char *text_copy_utf8(const char *s, char *buf, size_t size) {
        const unsigned char *p = (const unsigned char *) s;
        size_t out = 0;
        for (size_t at = 0; p[at];) {
                uint32_t cp;
                size_t n = decode(p + at, &cp);
                bool keep = n > 0 && !unsafe(cp, false);
                size_t w = keep ? n : 1;
                if (out + w >= size)
                        break;
                if (keep)
                        memcpy(buf + out, p + at, n);
                else
                        buf[out] = '?';
                out += w;
                at += n ? n : 1;
        }
        buf[out] = 0;
        return buf;
}

/* The escape of one character, or NULL when it stays as it is. */
static const char *escape_of(const unsigned char *p, size_t n, uint32_t cp, bool multiline,
                             char tmp[static 16]) {
        if (n == 0) {
                snprintf(tmp, 16, "\\x%02x", p[0]);
                return tmp;
        }
        if (!unsafe(cp, multiline))
                return NULL;
        switch (cp) {
        case '\n':
                return "\\n";
        case '\t':
                return "\\t";
        case '\r':
                return "\\r";
        case 0x1B:
                return "\\e";
        default:
                snprintf(tmp, 16, cp < 0x80 ? "\\x%02x" : "\\u%04x", (unsigned) cp);
                return tmp;
        }
}

/* Writes s escaped into buf (size > 0, cut to fit between characters); with buf NULL, only
 * counts.  Returns the length of the escaped text, written or not. */
static size_t escape_into(const char *s, bool multiline, char *buf, size_t size) {
        const unsigned char *p = (const unsigned char *) (s ?: "");
        size_t o = 0;
        while (*p) {
                uint32_t cp = 0;
                char tmp[16];
                size_t n = decode(p, &cp);
                const char *e = escape_of(p, n, cp, multiline, tmp);
                size_t len = e ? strlen(e) : n;
                if (buf && o + len >= size)
                        break;
                if (buf)
                        memcpy(buf + o, e ?: (const char *) p, len);
                o += len;
                p += n ?: 1;
        }
        if (buf)
                buf[o] = '\0';
        return o;
}

char *text_escape(const char *s, char *buf, size_t size) {
        escape_into(s, false, buf, size);
        return buf;
}

/* Allocated to the size the escapes take (a text may be megabytes of raw trace events). */
static char *escape_dup(const char *s, bool multiline) {
        size_t size = escape_into(s, multiline, NULL, 0) + 1;
        char *buf = malloc(size);
        if (buf)
                escape_into(s, multiline, buf, size);
        return buf;
}

char *text_escape_dup(const char *s) {
        return escape_dup(s, false);
}

char *text_escape_lines_dup(const char *s) {
        return escape_dup(s, true);
}

void text_fputs(const char *s, FILE *f) {
        char *e = text_escape_dup(s);
        fputs(e ?: "", f);
        free(e);
}

const char *markup_entity(unsigned char c) {
        switch (c) {
        case '&':
                return "&amp;";
        case '<':
                return "&lt;";
        case '>':
                return "&gt;";
        case '"':
                return "&quot;";
        case '\'':
                return "&#39;";
        default:
                return NULL;
        }
}

void markup_fputs(const char *s, FILE *f) {
        char *safe = escape_dup(s, true);
        for (const unsigned char *p = (const unsigned char *) (safe ?: ""); *p; p++) {
                const char *e = markup_entity(*p);
                if (e)
                        fputs(e, f);
                else
                        fputc(*p, f);
        }
        free(safe);
}
