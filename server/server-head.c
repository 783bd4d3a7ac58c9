/* SPDX-License-Identifier: MIT */
/* The checks of a request head's fields (RFC 9110 section 5, RFC 9112 sections 3.2, 5 and 6)
 * on what libmicrohttpd hands over.  What it decides before us and what it hides from us are
 * in docs/security.md ("Framing"). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "server-head.h"
#include "text-safe.h"

/* A field name as shown in an error: escaped, and cut to leave room for the rest. */
#define NAME_SHOWN_MAX 96

/* The characters of a token (RFC 9110 section 5.6.2). */
static bool tchar(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool ows(char c) {
        return c == ' ' || c == '\t';
}

/* The fields that frame the body.  libmicrohttpd 0.9.75 appends a folded line to the name of
 * the field it continues ("Transfer-Encoding:\r\n chunked" arrives as a field named
 * "Transfer-Encodingchunked" with an empty value), which would hide the field from its own
 * framing while a proxy that unfolds the line frames the body by it. */
static const char *const framing_fields[] = { "Content-Length", "Transfer-Encoding" };

static unsigned bad_name(const char *name, char err[static FARM_HEAD_ERROR_MAX]) {
        char shown[NAME_SHOWN_MAX];
        size_t at = 0;
        while (tchar((unsigned char) name[at]))
                at++;
        if (at > 0 && name[at] == '\0') {
                for (size_t i = 0; i < ELEMENTSOF(framing_fields); i++) {
                        size_t n = strlen(framing_fields[i]);
                        if (strncasecmp(name, framing_fields[i], n) == 0 && name[n]) {
                                snprintf(err, FARM_HEAD_ERROR_MAX,
                                         "header \"%s\": read as a folded %s line (folded "
                                         "lines are not accepted)",
                                         text_escape(name, shown, sizeof(shown)),
                                         framing_fields[i]);
                                return 400;
                        }
                }
                return 0;
        }
        text_escape(name, shown, sizeof(shown));
        if (!name[0])
                snprintf(err, FARM_HEAD_ERROR_MAX, "a header line without a field name");
        else if (at == 0 && ows(name[0]))
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "header \"%s\": a line that starts with whitespace (a folded line, or "
                         "whitespace after the request line)",
                         shown);
        else if (name[at + strspn(name + at, " \t")] == '\0')
                snprintf(err, FARM_HEAD_ERROR_MAX, "header \"%s\": whitespace before the colon",
                         shown);
        else
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "header \"%s\": byte 0x%02X at %zu is not allowed in a field name (a "
                         "token; folded lines are not accepted)",
                         shown, (unsigned char) name[at], at);
        return 400;
}

static unsigned bad_value(const struct farm_field *f, char err[static FARM_HEAD_ERROR_MAX]) {
        for (const unsigned char *p = (const unsigned char *) f->value; *p; p++)
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
                        char shown[NAME_SHOWN_MAX];
                        snprintf(err, FARM_HEAD_ERROR_MAX,
                                 "header \"%s\": a control character (0x%02X) in its value",
                                 text_escape(f->name, shown, sizeof(shown)), *p);
                        return 400;
                }
        return 0;
}

/* Fields that may appear once, each with its first value. */
enum { ONCE_HOST, ONCE_LENGTH, ONCE_CODING, ONCE_AUTHORIZATION, ONCE_N };
static const char *const once_names[ONCE_N] = { "Host", "Content-Length", "Transfer-Encoding",
                                                "Authorization" };

/* The last coding of a Transfer-Encoding list, and whether chunked is in it more than once
 * or any other coding at all. */
struct codings {
        unsigned n, chunked, other;
        char last[32];
};

static void parse_codings(const char *v, struct codings *ret) {
        *ret = (struct codings){};
        for (const char *p = v;;) {
                p += strspn(p, " \t");
                size_t len = strcspn(p, ",");
                size_t name = strcspn(p, ";,");
                while (name > 0 && ows(p[name - 1]))
                        name--;
                if (name > 0) {
                        bool chunked = name == 7 && strncasecmp(p, "chunked", 7) == 0;
                        ret->n++;
                        ret->chunked += chunked;
                        ret->other += !chunked;
                        snprintf(ret->last, sizeof(ret->last), "%.*s", (int) MIN(name, 31), p);
                }
                if (!p[len])
                        break;
                p += len + 1;
        }
}

/* RFC 9112 section 6: chunked must be the last coding (400, the length of the body is
 * unknown otherwise); another coding is not implemented here (501). */
static unsigned bad_coding(const char *v, bool http10, char err[static FARM_HEAD_ERROR_MAX]) {
        char shown[64];
        struct codings c;
        if (http10) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Transfer-Encoding: not allowed in an HTTP/1.0 request");
                return 400;
        }
        if (strcasecmp(v, "chunked") == 0)
                return 0;
        parse_codings(v, &c);
        text_escape(v, shown, sizeof(shown));
        if (c.n == 0 || strcasecmp(c.last, "chunked") != 0) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Transfer-Encoding: \"%s\": the last coding must be chunked (the length "
                         "of the body is not known otherwise)",
                         shown);
                return 400;
        }
        if (c.chunked > 1) {
                snprintf(err, FARM_HEAD_ERROR_MAX, "Transfer-Encoding: \"%s\": chunked twice",
                         shown);
                return 400;
        }
        if (c.other > 0) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Transfer-Encoding: \"%s\": only chunked is implemented", shown);
                return 501;
        }
        snprintf(err, FARM_HEAD_ERROR_MAX,
                 "Transfer-Encoding: \"%s\": send \"chunked\" alone (no other text)", shown);
        return 400;
}

static bool host_char(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("-._~!$&'()*+,;=", c));
}

/* uri-host [ ":" port ] (RFC 3986 section 3.2.2): a name or an IPv4 address, or an address in
 * brackets; percent-escapes in a name. */
static bool host_ok(const char *h) {
        const char *p = h;
        bool literal = *p == '[';
        p += literal;
        while (*p && *p != (literal ? ']' : ':')) {
                bool escape = *p == '%' && strchr("0123456789abcdefABCDEF", p[1] ?: 'x') &&
                              strchr("0123456789abcdefABCDEF", p[2] ?: 'x');
                if (!host_char((unsigned char) *p) && !(literal && *p == ':') && !escape)
                        return false;
                p += escape ? 3 : 1;
        }
        if (literal && *p++ != ']')
                return false;
        if (*p == ':')
                p += 1 + strspn(p + 1, "0123456789");
        return *p == '\0';
}

static unsigned bad_framing(const char *const once[static ONCE_N], bool http10,
                            char err[static FARM_HEAD_ERROR_MAX]) {
        char shown[64];
        const char *length = once[ONCE_LENGTH], *host = once[ONCE_HOST];
        if (length && (!length[0] || length[strspn(length, "0123456789")])) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Content-Length: \"%s\": not a number of bytes (digits only)",
                         text_escape(length, shown, sizeof(shown)));
                return 400;
        }
        if (length && once[ONCE_CODING]) {
                snprintf(err, FARM_HEAD_ERROR_MAX, "Content-Length and Transfer-Encoding together");
                return 400;
        }
        if (once[ONCE_CODING]) {
                unsigned status = bad_coding(once[ONCE_CODING], http10, err);
                if (status)
                        return status;
        }
        if (!host && !http10) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Host: missing (an HTTP/1.1 request names the host it is for)");
                return 400;
        }
        if (host && !host_ok(host)) {
                snprintf(err, FARM_HEAD_ERROR_MAX,
                         "Host: \"%s\": not a host name or address with an optional port",
                         text_escape(host, shown, sizeof(shown)));
                return 400;
        }
        return 0;
}

unsigned farm_head_check(const char *version, const struct farm_field *fields, size_t n,
                         char err[static FARM_HEAD_ERROR_MAX]) {
        const char *once[ONCE_N] = {};
        unsigned status;
        for (size_t i = 0; i < n; i++) {
                if ((status = bad_name(fields[i].name, err)) ||
                    (status = bad_value(&fields[i], err)))
                        return status;
                for (size_t k = 0; k < ONCE_N; k++) {
                        if (strcasecmp(fields[i].name, once_names[k]) != 0)
                                continue;
                        if (once[k]) {
                                snprintf(err, FARM_HEAD_ERROR_MAX, "%s: given more than once",
                                         once_names[k]);
                                return 400;
                        }
                        once[k] = fields[i].value;
                }
        }
        return bad_framing(once, version && strcmp(version, "HTTP/1.0") == 0, err);
}
