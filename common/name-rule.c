/* SPDX-License-Identifier: MIT */
/* The one check of names against their rules, and the words that describe a rule. */
#include <stdio.h>
#include <string.h>

#include "name-rule.h"

static bool allowed(const struct name_rule *r, unsigned char c) {
        if (c == 0 || c >= 0x80)
                return false;
        if (((r->classes & NAME_LOWER) && c >= 'a' && c <= 'z') ||
            ((r->classes & NAME_UPPER) && c >= 'A' && c <= 'Z') ||
            ((r->classes & (NAME_DIGITS | NAME_HEX)) && c >= '0' && c <= '9') ||
            ((r->classes & NAME_HEX) && c >= 'a' && c <= 'f'))
                return true;
        return strchr(r->punct ?: "", c) != NULL;
}

/* The alphabet in words: "letters, digits and . _ + ~ : -". */
static void alphabet(const struct name_rule *r, char *buf, size_t size) {
        const char *parts[4];
        size_t n = 0;
        if (r->classes & NAME_HEX)
                parts[n++] = "lowercase hexadecimal digits";
        else if ((r->classes & NAME_LOWER) && (r->classes & NAME_UPPER))
                parts[n++] = "letters";
        else if (r->classes & NAME_LOWER)
                parts[n++] = "a-z";
        else if (r->classes & NAME_UPPER)
                parts[n++] = "A-Z";
        if ((r->classes & NAME_DIGITS) && !(r->classes & NAME_HEX))
                parts[n++] = (r->classes & NAME_LOWER) && !(r->classes & NAME_UPPER) ? "0-9"
                                                                                     : "digits";
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < n && o < size; i++)
                o += (size_t) snprintf(buf + o, size - o, "%s%s",
                                       i == 0                             ? ""
                                       : i + 1 == n && !*(r->punct ?: "") ? " and "
                                                                          : ", ",
                                       parts[i]);
        for (const char *p = r->punct ?: ""; *p && o < size; p++)
                o += (size_t) snprintf(buf + o, size - o, "%s%c",
                                       p == r->punct ? (n ? " and " : "") : " ", *p);
}

bool name_ok(const struct name_rule *rule, const char *s, char why[static NAME_WHY_MAX]) {
        size_t n = 0;
        for (; s[n]; n++) {
                unsigned char c = (unsigned char) s[n];
                if (allowed(rule, c))
                        continue;
                char a[96], shown[16];
                alphabet(rule, a, sizeof(a));
                if (c == ' ')
                        snprintf(shown, sizeof(shown), "a space");
                else if (c > 0x20 && c < 0x7f)
                        snprintf(shown, sizeof(shown), "'%c'", c);
                else
                        snprintf(shown, sizeof(shown), "byte 0x%02X", c);
                snprintf(why, NAME_WHY_MAX, "%s at byte %zu: %s may hold only %s", shown, n,
                         rule->what, a);
                return false;
        }
        if (n < rule->min || n > rule->max) {
                snprintf(why, NAME_WHY_MAX, "length %zu is out of range (%zu to %zu)", n, rule->min,
                         rule->max);
                return false;
        }
        return true;
}
