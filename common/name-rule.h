/* SPDX-License-Identifier: MIT */
/* Names: what identifies a thing between programs, URLs, files and configurations (a release,
 * a scenario, a group).  Each kind of name is one rule, an ASCII alphabet and a length; one
 * function checks them all, wherever such a name enters. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define NAME_WHY_MAX 192

enum {
        NAME_LOWER = 1 << 0,  /* a-z */
        NAME_UPPER = 1 << 1,  /* A-Z */
        NAME_DIGITS = 1 << 2, /* 0-9 */
        NAME_HEX = 1 << 3,    /* 0-9 and a-f: lowercase hexadecimal */
};

struct name_rule {
        const char *what; /* "a release name", for messages */
        unsigned classes;
        const char *punct; /* the other characters it may hold, "" for none */
        size_t min, max;   /* its length in bytes */
};

/* Whether s follows rule.  When not, why says what is wrong, its first bad byte before its
 * length: "'/' at byte 6: a release name may hold only letters, digits and . _ + ~ : -",
 * "length 300 is out of range (1 to 256)". */
bool name_ok(const struct name_rule *rule, const char *s, char why[static NAME_WHY_MAX]);
