/* SPDX-License-Identifier: MIT */
/* Table-driven INI configuration: one row per key with its parser, field offset, bounds and
 * default.  Errors name the file, line, section and key, and what is wrong. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct conf_item;

struct conf_type {
        const char *name; /* shown in errors: "a time span", "a number" ... */
        /* Parses value into field; on error returns <0 and sets *ret_reason. */
        int (*parse)(const struct conf_item *item, const char *value, void *field,
                     const char **ret_reason);
        /* Formats the field so that parsing the text gives the same value back. */
        void (*format)(const struct conf_item *item, const void *field, char *buf, size_t len);
        /* Frees what parse allocated (always set; no-op for plain values). */
        void (*done)(void *field);
};

struct conf_item {
        const char *section;
        const char *key;
        const struct conf_type *type;
        size_t offset;
        uint64_t min, max; /* bounds, in the field's own unit (ns for spans) */
        const char *def;   /* default, as text: the single source of every default */
};

extern const struct conf_type conf_type_timespan;     /* uint64_t, nanoseconds */
extern const struct conf_type conf_type_timespan_us;  /* uint64_t, whole microseconds only */
extern const struct conf_type conf_type_timespan_s;   /* uint64_t ns, whole seconds only */
extern const struct conf_type conf_type_timespan_off; /* int64_t ns (whole us), -1: "off" */
extern const struct conf_type conf_type_uint;         /* uint64_t */
extern const struct conf_type conf_type_bool;         /* bool */
extern const struct conf_type conf_type_string;       /* char * (owned) */
extern const struct conf_type conf_type_path_off;     /* char * (owned), "" for "off" */
extern const struct conf_type conf_type_cpuset;       /* struct cpuset */
extern const struct conf_type conf_type_size;         /* uint64_t bytes; "auto" (0) if min is 0 */

#define CONF_ERROR_MAX 1024

/* Sections named "<prefix>NAME" whose keys the owner handles (see conf_table). */
struct conf_dynamic {
        const char *prefix;
        int (*assign)(void *obj, const char *where, const char *name, const char *key,
                      const char *value, char err[static CONF_ERROR_MAX]);
        void (*print)(const void *obj, FILE *f);
};

struct conf_table {
        const struct conf_item *items;
        size_t n;
        /* Optional: sections named "<prefix>NAME" (e.g. "Scenario.mixed") whose keys the
         * owner handles itself; assign returns <0 with a message in err (without "where"). */
        const char *dynamic_prefix;
        int (*dynamic_assign)(void *obj, const char *where, const char *name, const char *key,
                              const char *value, char err[static CONF_ERROR_MAX]);
        void (*dynamic_print)(const void *obj, FILE *f);
        /* Optional: further kinds of such sections, each with its own prefix. */
        const struct conf_dynamic *dynamics;
        size_t ndynamics;
};

/* Sets every field to its default. */
int conf_defaults(const struct conf_table *t, void *obj, char err[static CONF_ERROR_MAX]);
/* Frees what the fields own. */
void conf_free(const struct conf_table *t, void *obj);

/* origins (optional, t->n entries, initially NULL) receives for each key where it was last
 * set ("file:line" or "--set ..."), so that checks across keys can say where to look. */
int conf_parse_file(const struct conf_table *t, const char *path, void *obj, char **origins,
                    char err[static CONF_ERROR_MAX]);
/* "Section.Key=Value" from the command line (the key is what follows the last dot, so
 * "Scenario.mixed.Load=..." works); origin names it in errors ("--set"). */
int conf_parse_assignment(const struct conf_table *t, const char *assignment, const char *origin,
                          void *obj, char **origins, char err[static CONF_ERROR_MAX]);

/* Defaults, then main_path (an error if missing only when required), then every
 * "<main_path>.d/NAME.conf" in byte order of their names, then the assignments in order.
 * ret_sources (optional) receives a newly allocated, NULL-terminated list of the files read. */
int conf_load(const struct conf_table *t, const char *main_path, bool required,
              char *const *assignments, void *obj, char **origins, char ***ret_sources,
              char err[static CONF_ERROR_MAX]);

/* Where the key stored at offset was last set, or "default". */
const char *conf_origin(const struct conf_table *t, char *const *origins, size_t offset);
void conf_origins_free(const struct conf_table *t, char **origins);

/* Writes the effective configuration as INI, sections in table order. */
void conf_print(const struct conf_table *t, const void *obj, FILE *f);
