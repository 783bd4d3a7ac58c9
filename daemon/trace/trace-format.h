/* SPDX-License-Identifier: MIT */
/* Reading the kernel's ring buffer: the event formats tracefs describes (events/SYS/NAME/format)
 * and the binary pages of per_cpu/cpuN/trace_pipe_raw, decoded into struct trace_event. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace-event.h"

#define TRACE_FIELDS_MAX 24

struct trace_field {
        char name[32];
        uint16_t offset, size;
        bool is_signed;
        bool data_loc; /* __data_loc: a u32 of (length << 16 | offset from the record's start) */
        bool rel_loc;  /* __rel_loc: the offset counts from the end of the field */
        bool array;    /* char name[N] */
        bool pointer;  /* shown in hexadecimal */
};

struct trace_format {
        int id;
        char system[32], name[48];
        uint8_t kind; /* enum trace_kind; TRACE_OTHER for events without special meaning */
        bool new_task;
        struct trace_field fields[TRACE_FIELDS_MAX];
        size_t nfields;
};

struct trace_formats {
        struct trace_format *v;
        size_t n;
        /* From events/header_page: where a page's data size sits and where its data starts. */
        size_t commit_offset, commit_size, data_offset;
};

void trace_formats_done(struct trace_formats *f);
/* Parses the text of events/SYSTEM/NAME/format and adds the event; -EBADMSG if it does not
 * read as one, or lacks a field its kind needs. */
int trace_formats_add(struct trace_formats *f, const char *system, const char *name,
                      const char *text);
/* Parses events/header_page; -EBADMSG (with a reason) for a layout we cannot read. */
int trace_formats_header(struct trace_formats *f, const char *header_page, const char *header_event,
                         const char **ret_reason);

/* Decodes one page of trace_pipe_raw (size bytes), appending the events from min_ts on to
 * *ev (grown as needed).  Events of unknown ids are skipped.  *ret_lost is set when the page
 * says events were lost before it (overwritten); *ret_first (optional) receives the time of
 * its first event, INT64_MAX for none.  Returns the number of events added or -errno. */
int trace_page_decode(const struct trace_formats *f, const uint8_t *page, size_t size,
                      int64_t min_ts, struct trace_event **ev, size_t *n, size_t *cap,
                      bool *ret_lost, int64_t *ret_first);
