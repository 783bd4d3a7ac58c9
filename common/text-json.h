/* SPDX-License-Identifier: MIT */
/* Free text inside JSON documents: every string and member name of a document checked against
 * text_ok() with the path of the first that fails, escaped where a document leaves the server,
 * repaired where one this program stored before the rule is read back. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "text-safe.h"

#define TEXT_JSON_PATH_MAX 192

/* Whether every string and member name in v passes text_ok(s, multiline).  When not, path
 * names the first that fails relative to v ("kernel.journal.lines[3]", "" for v itself, a
 * member name as "kernel.{name}") and why says what is wrong with it. */
bool text_json_ok(json_t *v, bool multiline, char path[static TEXT_JSON_PATH_MAX],
                  char why[static TEXT_WHY_MAX]);

/* Escapes, as text_escape_lines_dup() does, every string and member name of v that
 * text_ok(s, true) refuses: for a document about to be sent, which may hold what was stored
 * before the rule.  0, or -ENOMEM. */
int text_json_escape(json_t *v);

/* Makes every string and member name of v that text_ok(s, false) refuses what
 * text_copy_utf8() makes of it (each refused character a '?'): for a document this program
 * wrote before the rule, read back.  0, or -ENOMEM. */
int text_json_repair(json_t *v);
