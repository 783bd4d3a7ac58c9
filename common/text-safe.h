/* SPDX-License-Identifier: MIT */
/* Free text from outside (a machine's upload, a task's name, a server's answer, a staff
 * member's reason, a configuration value) that may reach a terminal, a log, a mail or a page:
 * control characters and Unicode's bidirectional overrides are what forge lines, colours and
 * reordered words there.  One rule, text_ok(), checked wherever such text enters; what got in
 * before the rule is escaped wherever it leaves. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TEXT_WHY_MAX 96

/* Refuses C0 controls (but tab and newline when multiline), DEL, C1 controls (U+0080-U+009F),
 * the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069) and bytes that are not UTF-8: false with why ("a control character U+001B
 * at byte 4"). */
bool text_ok(const char *s, bool multiline, char why[static TEXT_WHY_MAX]);

/* Copies s into buf (size > 0, always terminated) as text that text_ok(s, false) accepts: each
 * byte that is not part of a valid sequence, and each character text_ok refuses, becomes '?';
 * cut to fit only between characters.  For names taken from the kernel (a task's name is any
 * bytes) before they go into JSON and to the farm.  Returns buf. */
char *text_copy_utf8(const char *s, char *buf, size_t size);

/* Writes s into buf (size > 0, always terminated, cut to fit) with every character that
 * text_ok(s, false) refuses escaped: "\n", "\t", "\r", "\e", "\x7f", "\u202e", and invalid
 * bytes as "\xNN"; a backslash stays one backslash.  Returns buf. */
char *text_escape(const char *s, char *buf, size_t size);
/* The same, allocated (NULL without memory). */
char *text_escape_dup(const char *s);
/* The same for text that may have lines: tabs and newlines are kept. */
char *text_escape_lines_dup(const char *s);
/* The same, to a stream. */
void text_fputs(const char *s, FILE *f);

/* The entity that stands for c in XML and HTML, in text and in attribute values alike
 * ("&amp;", "&lt;", "&gt;", "&quot;", "&#39;"), or NULL for any other character. */
const char *markup_entity(unsigned char c);
/* s for XML or HTML to a stream: the five specials as entities, and what text_ok(s, true)
 * refuses escaped as text_escape_lines_dup() does (tabs and newlines kept). */
void markup_fputs(const char *s, FILE *f);
