/* SPDX-License-Identifier: MIT */
/* Crash forensics: what the kernel left about a run that died (read at the next start), and
 * the flight recorder, a line per second where a warm reset does not erase it (pstore pmsg). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "loadsup.h"
#include "probe.h"
#include "store.h"

struct forensics_params {
        const char *pstore_dir;  /* /sys/fs/pstore */
        const char *journal_dir; /* "": the system's journal */
        size_t journal_lines;    /* 0: do not read the journal */
        size_t pstore_max;       /* bytes of pstore text kept in all */
        size_t pstore_record_max;
        size_t journal_max; /* bytes of journal text kept */
};

/* store_run_info.kernel_leftovers with a struct forensics_params as userdata: a JSON object
 * with "pstore" (records, or why there are none) and "journal" (the dead boot's last lines,
 * or why there are none). */
char *forensics_kernel_leftovers(void *userdata, const struct store_unclean *u);

#define FLIGHTREC_LINE_MAX 512

struct flightrec;
/* Opens path (a pmsg device, a file or a FIFO) for writing.  Returns 1 when open, 0 when path
 * is empty (no recorder), -errno on failure. */
int flightrec_open(const char *path, struct flightrec **ret);
void flightrec_free(struct flightrec *f);
/* Writes one line: the time, the run, the scenario, each probe's worst latency since the
 * previous line (taking it from the probe), and the loads' throughput of the last closed
 * interval.  One write(2), never blocking; a full FIFO drops the line. */
int flightrec_write(struct flightrec *f, int64_t real_ns, int64_t run_id, const char *scenario,
                    struct probe **probes, size_t nprobes, const struct load_record *loads);
