/* SPDX-License-Identifier: MIT */
/* Kernel function names by address (/proc/kallsyms) for the hrtimer callbacks an analysis
 * names, learnt as they are met and kept for the run; shared by the capture threads. */
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "trace-analysis.h"

#define TRACE_SYMBOLS_MAX 64

struct trace_symbol {
        uint64_t addr;
        char name[48]; /* "" when kallsyms does not have it (or hides addresses) */
};

struct trace_symbols {
        pthread_mutex_t lock; /* everything below */
        struct trace_symbol sym[TRACE_SYMBOLS_MAX];
        size_t n;
};

void trace_symbols_init(struct trace_symbols *s);
void trace_symbols_done(struct trace_symbols *s);
/* "hrtimer 0xffffffff8142d170" becomes "hrtimer hrtimer_wakeup" where kallsyms tells. */
void trace_symbols_name_hrtimers(struct trace_symbols *s, struct trace_analysis *a);
