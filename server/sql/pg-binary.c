/* SPDX-License-Identifier: MIT */
/* Values of PostgreSQL's binary result format: integers, floats, truth values and numerics
 * decoded, and written as PostgreSQL's text format shows them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg-binary.h"

/* Numeric's sign field. */
#define NUMERIC_NEG 0x4000
#define NUMERIC_NAN 0xC000
#define NUMERIC_PINF 0xD000
#define NUMERIC_NINF 0xF000

bool pg_binary_type(unsigned type) {
        switch (type) {
        case PG_OID_BOOL:
        case PG_OID_BYTEA:
        case PG_OID_INT8:
        case PG_OID_INT2:
        case PG_OID_INT4:
        case PG_OID_TEXT:
        case PG_OID_FLOAT8:
        case PG_OID_VARCHAR:
        case PG_OID_NUMERIC:
                return true;
        default:
                return false;
        }
}

/* An unsigned big-endian integer of n bytes. */
static uint64_t be(const unsigned char *p, size_t n) {
        uint64_t v = 0;
        for (size_t k = 0; k < n; k++)
                v = v << 8 | p[k];
        return v;
}

static double double_of(const unsigned char *p) {
        union {
                uint64_t u;
                double d;
        } v = { .u = be(p, 8) };
        return v.d;
}

int64_t pg_binary_truncated(double d) {
        if (d != d)
                return 0;
        if (d >= 9223372036854775807.0)
                return INT64_MAX;
        if (d <= -9223372036854775808.0)
                return INT64_MIN;
        return (int64_t) d;
}

/* ---- numeric ------------------------------------------------------------------------------- */

struct numeric {
        int ndigits, weight, dscale;
        unsigned sign;
        const unsigned char *digits; /* ndigits of base 10,000, two bytes each */
};

static bool numeric_of(const unsigned char *p, size_t len, struct numeric *ret) {
        if (len < 8)
                return false;
        *ret = (struct numeric){ .ndigits = (int16_t) be(p, 2),
                                 .weight = (int16_t) be(p + 2, 2),
                                 .sign = (unsigned) be(p + 4, 2),
                                 .dscale = (int16_t) be(p + 6, 2),
                                 .digits = p + 8 };
        return ret->ndigits >= 0 && ret->dscale >= 0 && len >= 8 + 2 * (size_t) ret->ndigits;
}

static int digit_of(const struct numeric *n, int k) {
        return k >= 0 && k < n->ndigits ? (int) be(n->digits + 2 * k, 2) : 0;
}

size_t pg_binary_numeric_text_len(const unsigned char *p, size_t len) {
        struct numeric n;
        if (!numeric_of(p, len, &n))
                return PG_BINARY_TEXT_MAX;
        /* A sign, the integer part's groups of 4 digits, the point and the scale's digits. */
        return 16 + 4 * (size_t) (n.weight >= 0 ? n.weight + 1 : 1) + (size_t) n.dscale + 4;
}

/* As PostgreSQL's numeric_out: the integer part (0 when there is none), then dscale digits
 * after the point. */
static int numeric_text(const unsigned char *p, size_t len, char *buf, size_t size) {
        struct numeric n;
        if (!numeric_of(p, len, &n))
                return -EINVAL;
        const char *special = n.sign == NUMERIC_NAN    ? "NaN"
                              : n.sign == NUMERIC_PINF ? "Infinity"
                              : n.sign == NUMERIC_NINF ? "-Infinity"
                                                       : NULL;
        if (special)
                return snprintf(buf, size, "%s", special) < (int) size ? 0 : -ENOBUFS;
        if (size < pg_binary_numeric_text_len(p, len))
                return -ENOBUFS;
        char *o = buf;
        if (n.sign == NUMERIC_NEG)
                *o++ = '-';
        if (n.weight < 0)
                *o++ = '0';
        for (int k = 0; k <= n.weight; k++)
                o += sprintf(o, k == 0 ? "%d" : "%04d", digit_of(&n, k));
        if (n.dscale > 0) {
                char *point = o;
                *o++ = '.';
                for (int k = n.weight + 1; o - point - 1 < n.dscale; k++)
                        o += sprintf(o, "%04d", digit_of(&n, k));
                o = point + 1 + n.dscale; /* the last group cut to the scale */
        }
        *o = '\0';
        return 0;
}

/* ---- floats -------------------------------------------------------------------------------- */

/* As PostgreSQL's float8out (extra_float_digits 1): the fewest significant digits that read
 * back as d, in fixed notation for decimal exponents from -4 to 14, else as 1.5e+20. */
static int double_text(double d, char *buf, size_t size) {
        if (size < PG_BINARY_TEXT_MAX)
                return -ENOBUFS;
        if (isnan(d))
                return snprintf(buf, size, "NaN"), 0;
        if (isinf(d))
                return snprintf(buf, size, d > 0 ? "Infinity" : "-Infinity"), 0;
        char e[40];
        int digits = 1;
        for (; digits < 17; digits++) {
                snprintf(e, sizeof(e), "%.*e", digits - 1, d);
                if (strtod(e, NULL) == d)
                        break;
        }
        snprintf(e, sizeof(e), "%.*e", digits - 1, d);
        int exp = atoi(strchr(e, 'e') + 1);
        if (exp >= -4 && exp < 15)
                snprintf(buf, size, "%.*f", digits - 1 - exp > 0 ? digits - 1 - exp : 0, d);
        else
                snprintf(buf, size, "%s", e);
        return 0;
}

/* ---- numbers ------------------------------------------------------------------------------- */

bool pg_binary_number(const unsigned char *p, size_t len, unsigned type, int64_t *ret_int,
                      double *ret_double) {
        *ret_int = 0;
        *ret_double = 0;
        switch (type) {
        case PG_OID_BOOL:
                *ret_int = len >= 1 && p[0] != 0;
                break;
        case PG_OID_INT2:
                *ret_int = len == 2 ? (int16_t) be(p, 2) : 0;
                break;
        case PG_OID_INT4:
                *ret_int = len == 4 ? (int32_t) be(p, 4) : 0;
                break;
        case PG_OID_INT8:
                *ret_int = len == 8 ? (int64_t) be(p, 8) : 0;
                break;
        case PG_OID_FLOAT8:
                *ret_double = len == 8 ? double_of(p) : 0;
                *ret_int = pg_binary_truncated(*ret_double);
                return true;
        case PG_OID_NUMERIC: {
                /* Read from its text, as the text format is read: the same value to the bit. */
                char small[PG_BINARY_TEXT_MAX], *text = small;
                size_t need = pg_binary_numeric_text_len(p, len);
                if (need > sizeof(small) && !(text = malloc(need)))
                        return true; /* out of memory: 0 */
                if (numeric_text(p, len, text, need > sizeof(small) ? need : sizeof(small)) >= 0) {
                        *ret_double = strtod(text, NULL);
                        *ret_int = strpbrk(text, ".IN") ? pg_binary_truncated(*ret_double)
                                                        : strtoll(text, NULL, 10);
                }
                if (text != small)
                        free(text);
                return true;
        }
        default:
                return false;
        }
        *ret_double = (double) *ret_int;
        return true;
}

int pg_binary_text(const unsigned char *p, size_t len, unsigned type, char *buf, size_t size) {
        int64_t v;
        double d;
        if (type == PG_OID_NUMERIC)
                return numeric_text(p, len, buf, size);
        if (!pg_binary_number(p, len, type, &v, &d))
                return -EINVAL;
        if (type == PG_OID_FLOAT8)
                return double_text(d, buf, size);
        return snprintf(buf, size, "%lld", (long long) v) < (int) size ? 0 : -ENOBUFS;
}
