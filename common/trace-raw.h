/* SPDX-License-Identifier: MIT */
/* The raw events of a capture, kept as their text compressed with zlib under a size cap: what
 * the machine stores, uploads and the dashboard hands out for download. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct trace_event;

/* The events of CPU cpu as text (allocated), a line each, with times relative to due and the
 * name of the task that ran then: what a capture's raw events are before compression. */
int trace_raw_text(const struct trace_event *ev, size_t n, int cpu, int64_t due, char **ret,
                   size_t *ret_len);

/* The most text a stored capture inflates to; more is refused as damaged. */
#define TRACE_RAW_TEXT_MAX (32u << 20)

/* Compresses the lines of text into at most max bytes.  When they do not fit, the oldest lines
 * are left out (those nearest the late wake-up are the last) and a first line says how many.
 * *ret_dropped receives the number of lines left out. */
int trace_raw_compress(const char *text, size_t len, size_t max, uint8_t **ret, size_t *ret_len,
                       size_t *ret_dropped);
/* The text back (NUL-terminated); -EBADMSG if data is not zlib or inflates beyond max_out. */
int trace_raw_inflate(const uint8_t *data, size_t len, size_t max_out, char **ret, size_t *ret_len);
