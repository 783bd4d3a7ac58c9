/* SPDX-License-Identifier: MIT */
/* Values of PostgreSQL's binary result format (sql-pg.c asks for it where every column is of a
 * type listed here): numbers decoded, and written as PostgreSQL's text format shows them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Type OIDs of pg_type. */
#define PG_OID_BOOL 16
#define PG_OID_BYTEA 17
#define PG_OID_INT8 20
#define PG_OID_INT2 21
#define PG_OID_INT4 23
#define PG_OID_TEXT 25
#define PG_OID_FLOAT8 701
#define PG_OID_VARCHAR 1043
#define PG_OID_NUMERIC 1700

/* Whether a column of this type may be read in binary: one of the types above.  Any other type
 * (a timestamp, an array, float4 ...) keeps its statement's results in text. */
bool pg_binary_type(unsigned type);

/* The number in the binary value p (len bytes) of a number type (bool included): its integer
 * value (a float truncated toward zero and clamped, as SQLite reads one; a numeric's integer
 * part) and its value as a double.  False for the other types (text, bytea). */
bool pg_binary_number(const unsigned char *p, size_t len, unsigned type, int64_t *ret_int,
                      double *ret_double);

/* A double as SQLite makes an integer of it: truncated toward zero, clamped, NaN 0. */
int64_t pg_binary_truncated(double d);

/* The binary value p of a number type written as the text format gives it ("1"/"0" for a
 * truth value, as sql-pg.c reads text): into buf, NUL-terminated.  -EINVAL for another type or
 * a malformed value, -ENOBUFS when buf is too small (PG_BINARY_TEXT_MAX is enough but for a
 * numeric of very many digits). */
#define PG_BINARY_TEXT_MAX 64
int pg_binary_text(const unsigned char *p, size_t len, unsigned type, char *buf, size_t size);

/* The length of numeric p written as text (with its NUL), so that a buffer can be made for it. */
size_t pg_binary_numeric_text_len(const unsigned char *p, size_t len);
