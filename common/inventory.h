/* SPDX-License-Identifier: MIT */
/* A machine's inventory: named facts about what it is ("dmi.bios_version", "cmdline.isolcpus",
 * "kconfig.PREEMPT_RT"), each one line of text, kept sorted by name.  The same map in rtsoakd,
 * its database, the summary and the farm; one check of it wherever one enters. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "name-rule.h"
#include "text-safe.h"

/* The bounds of one inventory: far above what a machine has (some 100 fields of a few dozen
 * bytes), low enough that versions of it cost the farm little. */
#define INVENTORY_MAX_FIELDS 256
#define INVENTORY_MAX_NAME 64
#define INVENTORY_MAX_VALUE 4096
#define INVENTORY_MAX_TOTAL 65536 /* its names and values, summed */
#define INVENTORY_WHY_MAX (INVENTORY_MAX_NAME + TEXT_WHY_MAX + NAME_WHY_MAX)

/* A field's name: 1-64 ASCII letters, digits and . _ - (a kernel configuration option keeps
 * its capitals: "kconfig.NO_HZ_FULL"). */
extern const struct name_rule inventory_name_field;

struct inventory_field {
        char *name, *value;
};

struct inventory {
        struct inventory_field *fields; /* ascending by name, each once */
        size_t n, cap;
        size_t bytes;   /* the names' and values' lengths, summed */
        size_t dropped; /* fields inventory_set() left out to stay within the bounds */
};

void inventory_done(struct inventory *inv);
static inline void inventory_donep(struct inventory *inv) {
        inventory_done(inv);
}
#define _cleanup_inventory_ _cleanup_(inventory_donep)

/* Sets name (which must follow inventory_name_field) to value taken from the machine: each
 * character the text rule refuses becomes '?', a value longer than INVENTORY_MAX_VALUE is cut
 * (between characters) and ends in "...".  A field that would take the inventory past its
 * bounds is left out and counted in dropped.  -EINVAL for a bad name, -ENOMEM. */
int inventory_set(struct inventory *inv, const char *name, const char *value);
_printf_(3, 4) int inventory_setf(struct inventory *inv, const char *name, const char *fmt, ...);
/* Removes name; 0 also when it was not there. */
void inventory_remove(struct inventory *inv, const char *name);
/* The value of name, or NULL when absent. */
const char *inventory_get(const struct inventory *inv, const char *name);
/* Adds every field of src to inv (replacing those of the same name). */
int inventory_merge(struct inventory *inv, const struct inventory *src);
bool inventory_equal(const struct inventory *a, const struct inventory *b);

/* A field that differs between two inventories: its value in each, NULL where it is absent. */
struct inventory_change {
        const char *name, *old_value, *new_value;
};
/* The fields that differ from a to b, ascending by name; the strings are a's and b's. */
int inventory_diff(const struct inventory *a, const struct inventory *b,
                   struct inventory_change **ret, size_t *ret_n);

/* "version 2, 1 field(s) changed: thp.enabled: madvise -> never" ("(none)" for an absent value)
 * into buf, cut between characters with "..." to fit size (at least 64); ret_n gets how many
 * changed. */
int inventory_describe_changes(const struct inventory *a, const struct inventory *b,
                               uint64_t version, char *buf, size_t size, size_t *ret_n);

/* Changes as a JSON array of {"name", from_key: the old value, to_key: the new} (null where
 * absent); NULL without memory. */
json_t *inventory_changes_to_json(const struct inventory_change *v, size_t n, const char *from_key,
                                  const char *to_key);
/* As a JSON object of name: value, in name order (NULL without memory). */
json_t *inventory_to_json(const struct inventory *inv);
/* The compact JSON text of that object (allocated), and its SHA-256 in hex (65 bytes). */
char *inventory_to_text(const struct inventory *inv);
int inventory_digest(const struct inventory *inv, char ret[static 65]);
/* Reads an object of name: value checked field by field: every name by inventory_name_field,
 * every value a line of text (text_ok) of at most INVENTORY_MAX_VALUE bytes, the bounds of the
 * whole.  -EBADMSG with why naming the field ("dmi.bios_version: a control character U+001B at
 * byte 3", "{na me}: ..." for a bad name), or -ENOMEM. */
int inventory_from_json(json_t *o, struct inventory *ret, char why[static INVENTORY_WHY_MAX]);
/* The same from JSON text. */
int inventory_from_text(const char *text, struct inventory *ret,
                        char why[static INVENTORY_WHY_MAX]);
