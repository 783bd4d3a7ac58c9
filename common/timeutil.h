/* SPDX-License-Identifier: MIT */
/* Time spans ("200us", "1h30min") and timestamps (RFC 3339, Unix nanoseconds, "2h ago"):
 * parsing with precise error reasons, and canonical formatting. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define TIMESPAN_MAX_LEN 64
#define TIMESTAMP_MAX_LEN 64

/* Parses a span such as "200us", "1.5ms", "1h 30min" into nanoseconds.  A unit is required
 * for anything but "0".  On error returns -EINVAL/-ERANGE and, when ret_reason is non-NULL,
 * points it at a static string saying what is wrong. */
int parse_timespan(const char *s, uint64_t *ret_ns, const char **ret_reason);

/* Formats nanoseconds with the largest unit that represents the value exactly
 * ("200us", "1min", "90s", "30d"), so that parse_timespan(format_timespan(x)) == x. */
char *format_timespan(char buf[static TIMESPAN_MAX_LEN], uint64_t ns);

/* Parses a point in time: "now", "@SECONDS[.FRACTION]", Unix nanoseconds (an integer of at
 * least 16 digits), RFC 3339 ("2026-12-03T08:00:00Z", "...+01:00", "2026-12-03 08:00:00",
 * "2026-12-03"; without an offset the local time zone applies), or a span in the past
 * ("2h ago", "-2h", or just "2h").  now_ns anchors relative forms. */
int parse_timestamp(const char *s, int64_t now_ns, int64_t *ret_ns, const char **ret_reason);

/* "2026-12-03T08:00:00.123456789Z" with as many fraction digits as needed (0, 3, 6 or 9). */
char *format_timestamp_utc(char buf[static TIMESTAMP_MAX_LEN], int64_t ns);
/* "2026-12-03 09:00:00 CET": the local time zone, named, for tables read by people. */
char *format_timestamp_local(char buf[static TIMESTAMP_MAX_LEN], int64_t ns);

int64_t now_ns(clockid_t clock);
/* CLOCK_REALTIME - CLOCK_MONOTONIC, read as tightly as we can: the realtime reads around a
 * monotonic one that are closest together, of five tries. */
int64_t realtime_offset_ns(void);
/* The time on clock ns nanoseconds from now, as the timespec that pthread_timedjoin_np() and
 * pthread_cond_timedwait() take. */
struct timespec timespec_from_now(clockid_t clock, int64_t ns);
