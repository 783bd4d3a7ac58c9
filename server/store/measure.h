/* SPDX-License-Identifier: MIT */
/* What an interval measured (docs/verdict.md, invariant 1): the span every probed CPU covered
 * and the smallest share of the wake-ups its probe period allows that a probed CPU delivered.
 * Pure functions of the interval and its run, used at ingest and by the verdict alike. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "summary.h"

/* A CPU that delivered more wake-ups than its period allows: not a measurement. */
#define FARM_RATIO_IMPOSSIBLE (-1)

struct farm_measure {
        bool measured; /* the probed CPUs' spans intersect */
        int64_t start_ns, end_ns;
        int32_t min_ratio_pm;   /* 0-1000, 0 for a probed CPU missing, -1: impossible */
        int32_t min_ratio_cpu;  /* the CPU with it; -1 when no CPU is probed */
        int64_t max_missing_ns; /* the longest time a probed CPU did not measure */
};

/* The share (per mille) of the wake-ups a CPU delivered over span_ns at a probe period of
 * probe_ns: 1000 for a span shorter than one period, FARM_RATIO_IMPOSSIBLE for more than the
 * period allows (one more than the count, and 0.1 % for the rounding of the span's ends). */
int32_t farm_cpu_ratio_pm(uint64_t samples, uint64_t span_ns, uint64_t probe_ns);

/* Wake-ups missing over span_ns (0 when none or more than allowed). */
uint64_t farm_cpu_missing(uint64_t samples, uint64_t span_ns, uint64_t probe_ns);
/* How long a CPU did not measure in an interval of length_ns: the wake-ups it missed over its
 * span, and the part of the interval its span leaves out; all of it when absent (samples
 * UINT64_MAX) or when it counted more than the period allows. */
int64_t farm_cpu_missing_ns(uint64_t samples, uint64_t span_ns, uint64_t length_ns,
                            uint64_t probe_ns);

/* Measures iv of a run that probes the ascending CPUs probed[0..n-1] every probe_ns. */
void farm_measure_interval(const struct summary_interval *iv, const uint32_t *probed, size_t n,
                           uint64_t probe_ns, struct farm_measure *ret);

/* Parses a CPU list ("0-3,5") into an allocated ascending array. */
int farm_cpu_list_parse(const char *text, uint32_t **ret, size_t *ret_n);
/* Formats ascending CPUs as a list ("0-3,5"), allocated. */
char *farm_cpu_list_format(const uint32_t *cpus, size_t n);
