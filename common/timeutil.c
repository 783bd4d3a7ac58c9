/* SPDX-License-Identifier: MIT */
/* Implementation of time span and timestamp parsing and formatting.  All arithmetic is
 * overflow-checked: a configuration value must never wrap silently. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "timeutil.h"

static const struct {
        const char *name;
        uint64_t ns;
} units[] = {
        /* Longest names first so that "ms" is not read as "m" followed by "s". */
        { "nsec", 1 },
        { "ns", 1 },
        { "usec", NSEC_PER_USEC },
        { "us", NSEC_PER_USEC },
        { "\xc2\xb5s", NSEC_PER_USEC }, /* µs, MICRO SIGN */
        { "\xce\xbcs", NSEC_PER_USEC }, /* μs, GREEK SMALL LETTER MU */
        { "msec", NSEC_PER_MSEC },
        { "ms", NSEC_PER_MSEC },
        { "seconds", NSEC_PER_SEC },
        { "second", NSEC_PER_SEC },
        { "sec", NSEC_PER_SEC },
        { "s", NSEC_PER_SEC },
        { "minutes", 60 * NSEC_PER_SEC },
        { "minute", 60 * NSEC_PER_SEC },
        { "min", 60 * NSEC_PER_SEC },
        { "m", 60 * NSEC_PER_SEC },
        { "hours", 3600 * NSEC_PER_SEC },
        { "hour", 3600 * NSEC_PER_SEC },
        { "hr", 3600 * NSEC_PER_SEC },
        { "h", 3600 * NSEC_PER_SEC },
        { "days", 86400 * NSEC_PER_SEC },
        { "day", 86400 * NSEC_PER_SEC },
        { "d", 86400 * NSEC_PER_SEC },
        { "weeks", 7 * 86400 * NSEC_PER_SEC },
        { "week", 7 * 86400 * NSEC_PER_SEC },
        { "w", 7 * 86400 * NSEC_PER_SEC },
};

static int fail(const char **ret_reason, const char *reason, int error) {
        if (ret_reason)
                *ret_reason = reason;
        return error;
}

int parse_timespan(const char *s, uint64_t *ret_ns, const char **ret_reason) {
        uint64_t total = 0;
        bool any = false;

        if (!s)
                return fail(ret_reason, "empty value", -EINVAL);

        for (const char *p = s;;) {
                uint64_t whole = 0, frac_num = 0, frac_den = 1, unit = 0;
                bool digits = false;

                while (isspace((unsigned char) *p))
                        p++;
                if (!*p)
                        break;

                if (*p == '-')
                        return fail(ret_reason, "negative time span", -ERANGE);
                if (*p == '+')
                        return fail(ret_reason, "unexpected '+'", -EINVAL);

                for (; isdigit((unsigned char) *p); p++) {
                        if (__builtin_mul_overflow(whole, 10, &whole) ||
                            __builtin_add_overflow(whole, (uint64_t) (*p - '0'), &whole))
                                return fail(ret_reason, "number too large", -ERANGE);
                        digits = true;
                }
                if (*p == '.') {
                        p++;
                        if (!isdigit((unsigned char) *p))
                                return fail(ret_reason, "expected digits after '.'", -EINVAL);
                        for (; isdigit((unsigned char) *p); p++) {
                                /* Nanoseconds are the finest unit: digits past 18 are noise. */
                                if (frac_den < UINT64_C(1000000000000000000)) {
                                        frac_num = frac_num * 10 + (uint64_t) (*p - '0');
                                        frac_den *= 10;
                                }
                                digits = true;
                        }
                }
                if (!digits)
                        return fail(ret_reason, "expected a number", -EINVAL);

                while (isspace((unsigned char) *p))
                        p++;

                for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                        size_t l = strlen(units[i].name);
                        if (strncmp(p, units[i].name, l) == 0 && !isalpha((unsigned char) p[l])) {
                                unit = units[i].ns;
                                p += l;
                                break;
                        }
                }
                if (unit == 0) {
                        if (*p == '\0' && !any && whole == 0 && frac_num == 0) {
                                /* A bare "0" is unambiguous. */
                                any = true;
                                break;
                        }
                        if (*p == '\0' || isspace((unsigned char) *p) ||
                            isdigit((unsigned char) *p))
                                return fail(ret_reason,
                                            "missing unit (use ns, us, ms, s, min, h, d or w)",
                                            -EINVAL);
                        return fail(ret_reason, "unknown unit (use ns, us, ms, s, min, h, d or w)",
                                    -EINVAL);
                }

                uint64_t v;
                if (__builtin_mul_overflow(whole, unit, &v))
                        return fail(ret_reason, "time span too large", -ERANGE);
                /* frac_num/frac_den < 1, and unit <= 6.05e14, so this cannot overflow 128 bits. */
                unsigned __int128 f = (unsigned __int128) frac_num * unit / frac_den;
                if (__builtin_add_overflow(v, (uint64_t) f, &v) ||
                    __builtin_add_overflow(total, v, &total))
                        return fail(ret_reason, "time span too large", -ERANGE);
                any = true;
        }

        if (!any)
                return fail(ret_reason, "empty value", -EINVAL);
        *ret_ns = total;
        return 0;
}

char *format_timespan(char buf[static TIMESPAN_MAX_LEN], uint64_t ns) {
        static const struct {
                const char *name;
                uint64_t ns;
        } out[] = {
                { "w", 7 * 86400 * NSEC_PER_SEC },
                { "d", 86400 * NSEC_PER_SEC },
                { "h", 3600 * NSEC_PER_SEC },
                { "min", 60 * NSEC_PER_SEC },
                { "s", NSEC_PER_SEC },
                { "ms", NSEC_PER_MSEC },
                { "us", NSEC_PER_USEC },
                { "ns", 1 },
        };

        if (ns == 0) {
                snprintf(buf, TIMESPAN_MAX_LEN, "0");
                return buf;
        }
        for (size_t i = 0; i < ELEMENTSOF(out); i++)
                if (ns % out[i].ns == 0) {
                        snprintf(buf, TIMESPAN_MAX_LEN, "%llu%s",
                                 (unsigned long long) (ns / out[i].ns), out[i].name);
                        break;
                }
        return buf;
}

int64_t now_ns(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (int64_t) ts.tv_sec * (int64_t) NSEC_PER_SEC + ts.tv_nsec;
}

int64_t realtime_offset_ns(void) {
        int64_t best_gap = INT64_MAX, off = 0;
        for (int i = 0; i < 5; i++) {
                int64_t r1 = now_ns(CLOCK_REALTIME), m = now_ns(CLOCK_MONOTONIC),
                        r2 = now_ns(CLOCK_REALTIME);
                if (r2 - r1 < best_gap) {
                        best_gap = r2 - r1;
                        off = r1 + (r2 - r1) / 2 - m;
                }
        }
        return off;
}

struct timespec timespec_from_now(clockid_t clock, int64_t ns) {
        int64_t t = now_ns(clock) + ns;
        return (struct timespec){ .tv_sec = (time_t) (t / (int64_t) NSEC_PER_SEC),
                                  .tv_nsec = (long) (t % (int64_t) NSEC_PER_SEC) };
}

static int parse_fixed_digits(const char **p, int n, int *ret) {
        int v = 0;
        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char) (*p)[i]))
                        return -EINVAL;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

static int days_in_month(int year, int month) {
        static const int d[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        return month == 2 && leap ? 29 : d[month - 1];
}

static int parse_rfc3339(const char *s, int64_t *ret_ns, const char **ret_reason) {
        const char *p = s;
        int year, mon, day, hour = 0, min = 0, sec = 0;
        int64_t frac_ns = 0;
        bool have_offset = false;
        int offset_s = 0;

        if (parse_fixed_digits(&p, 4, &year) < 0 || *p++ != '-' ||
            parse_fixed_digits(&p, 2, &mon) < 0 || *p++ != '-' ||
            parse_fixed_digits(&p, 2, &day) < 0)
                return fail(ret_reason, "expected a date like 2026-12-03", -EINVAL);
        if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon))
                return fail(ret_reason, "no such date", -EINVAL);

        if (*p == 'T' || *p == 't' || *p == ' ') {
                p++;
                if (parse_fixed_digits(&p, 2, &hour) < 0 || *p++ != ':' ||
                    parse_fixed_digits(&p, 2, &min) < 0)
                        return fail(ret_reason, "expected a time like 08:00:00", -EINVAL);
                if (*p == ':') {
                        p++;
                        if (parse_fixed_digits(&p, 2, &sec) < 0)
                                return fail(ret_reason, "expected seconds after ':'", -EINVAL);
                        if (*p == '.' || *p == ',') {
                                int64_t scale = NSEC_PER_SEC / 10;
                                p++;
                                if (!isdigit((unsigned char) *p))
                                        return fail(ret_reason, "expected digits after '.'",
                                                    -EINVAL);
                                for (; isdigit((unsigned char) *p); p++, scale /= 10)
                                        frac_ns += (*p - '0') * scale;
                        }
                }
                /* 60 is allowed for a leap second, as RFC 3339 does; it folds into the next. */
                if (hour > 23 || min > 59 || sec > 60)
                        return fail(ret_reason, "no such time of day", -EINVAL);

                if (*p == 'Z' || *p == 'z') {
                        have_offset = true;
                        p++;
                } else if (*p == '+' || *p == '-') {
                        int sign = *p == '-' ? -1 : 1, oh, om;
                        p++;
                        if (parse_fixed_digits(&p, 2, &oh) < 0 || *p++ != ':' ||
                            parse_fixed_digits(&p, 2, &om) < 0 || oh > 23 || om > 59)
                                return fail(ret_reason, "expected an offset like +01:00", -EINVAL);
                        have_offset = true;
                        offset_s = sign * (oh * 3600 + om * 60);
                }
        }
        if (*p != '\0')
                return fail(ret_reason, "unexpected text after the time", -EINVAL);

        struct tm tm = {
                .tm_year = year - 1900,
                .tm_mon = mon - 1,
                .tm_mday = day,
                .tm_hour = hour,
                .tm_min = min,
                .tm_sec = sec,
                .tm_isdst = -1,
        };
        time_t t;
        if (have_offset)
                t = timegm(&tm) - offset_s;
        else
                t = mktime(&tm);
        if (t == (time_t) -1 && !(year == 1969 && mon == 12 && day == 31))
                return fail(ret_reason, "time out of range", -ERANGE);

        int64_t v;
        if (__builtin_mul_overflow((int64_t) t, (int64_t) NSEC_PER_SEC, &v) ||
            __builtin_add_overflow(v, frac_ns, &v))
                return fail(ret_reason, "time out of range", -ERANGE);
        *ret_ns = v;
        return 0;
}

int parse_timestamp(const char *s, int64_t now, int64_t *ret_ns, const char **ret_reason) {
        size_t n;

        if (!s || !*s)
                return fail(ret_reason, "empty time", -EINVAL);

        if (strcmp(s, "now") == 0) {
                *ret_ns = now;
                return 0;
        }

        if (s[0] == '@') {
                /* @SECONDS[.FRACTION], as date(1) accepts. */
                char *end;
                const char *digits = s + 1;
                bool negative = *digits == '-';
                if (negative)
                        digits++;
                /* The sign comes from the text: strtoll would read "-0.5" as 0 and lose it,
                 * and would skip spaces and a '+' we do not want to accept. */
                if (!isdigit((unsigned char) *digits))
                        return fail(ret_reason, "expected seconds after '@'", -EINVAL);
                errno = 0;
                long long secs = strtoll(digits, &end, 10);
                int64_t frac = 0, scale = NSEC_PER_SEC / 10;
                if (errno == ERANGE)
                        return fail(ret_reason, "time out of range", -ERANGE);
                if (*end == '.')
                        for (end++; isdigit((unsigned char) *end); end++, scale /= 10)
                                frac += (*end - '0') * scale;
                if (*end != '\0')
                        return fail(ret_reason, "unexpected text after the seconds", -EINVAL);
                int64_t v;
                if (__builtin_mul_overflow((int64_t) secs, (int64_t) NSEC_PER_SEC, &v) ||
                    __builtin_add_overflow(v, frac, &v) || (negative && v == INT64_MIN))
                        return fail(ret_reason, "time out of range", -ERANGE);
                *ret_ns = negative ? -v : v;
                return 0;
        }

        n = strspn(s, "0123456789");
        if (n == strlen(s)) {
                /* Plain integers are Unix nanoseconds, like the farm API.  Short ones are
                 * almost certainly seconds: refuse rather than read them as 1970. */
                if (n < 16)
                        return fail(
                                ret_reason,
                                "a plain number is Unix nanoseconds; for seconds write @SECONDS",
                                -EINVAL);
                char *end;
                errno = 0;
                unsigned long long v = strtoull(s, &end, 10);
                if (errno == ERANGE || v > INT64_MAX)
                        return fail(ret_reason, "time out of range", -ERANGE);
                *ret_ns = (int64_t) v;
                return 0;
        }

        if (n == 4 && s[4] == '-')
                return parse_rfc3339(s, ret_ns, ret_reason);

        /* A span in the past: "2h ago", "-2h" or "2h". */
        {
                char buf[128];
                const char *span = s;
                size_t l = strlen(s);
                bool future = false;

                if (l >= sizeof(buf))
                        return fail(ret_reason, "time too long", -EINVAL);
                memcpy(buf, s, l + 1);
                if (l > 4 && strcmp(buf + l - 4, " ago") == 0) {
                        buf[l - 4] = '\0';
                        span = buf;
                } else if (s[0] == '-') {
                        span = s + 1;
                } else if (s[0] == '+') {
                        span = s + 1;
                        future = true;
                }
                uint64_t d;
                const char *reason;
                if (parse_timespan(span, &d, &reason) < 0 || d > INT64_MAX)
                        return fail(ret_reason,
                                    "not a time: use RFC 3339 (2026-12-03T08:00:00Z), @SECONDS, "
                                    "Unix nanoseconds, \"now\" or a span like \"2h ago\"",
                                    -EINVAL);
                int64_t v;
                if (future ? __builtin_add_overflow(now, (int64_t) d, &v)
                           : __builtin_sub_overflow(now, (int64_t) d, &v))
                        return fail(ret_reason, "time out of range", -ERANGE);
                *ret_ns = v;
                return 0;
        }
}

static void split_ns(int64_t ns, time_t *ret_sec, int64_t *ret_frac) {
        int64_t sec = ns / (int64_t) NSEC_PER_SEC, frac = ns % (int64_t) NSEC_PER_SEC;
        if (frac < 0) {
                frac += NSEC_PER_SEC;
                sec--;
        }
        *ret_sec = (time_t) sec;
        *ret_frac = frac;
}

char *format_timestamp_utc(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        time_t sec;
        int64_t frac;
        struct tm tm;
        size_t l;

        split_ns(ns, &sec, &frac);
        gmtime_r(&sec, &tm);
        l = strftime(buf, TIMESTAMP_MAX_LEN, "%Y-%m-%dT%H:%M:%S", &tm);
        if (frac == 0)
                snprintf(buf + l, TIMESTAMP_MAX_LEN - l, "Z");
        else if (frac % NSEC_PER_MSEC == 0)
                snprintf(buf + l, TIMESTAMP_MAX_LEN - l, ".%03lldZ",
                         (long long) (frac / (int64_t) NSEC_PER_MSEC));
        else if (frac % NSEC_PER_USEC == 0)
                snprintf(buf + l, TIMESTAMP_MAX_LEN - l, ".%06lldZ",
                         (long long) (frac / (int64_t) NSEC_PER_USEC));
        else
                snprintf(buf + l, TIMESTAMP_MAX_LEN - l, ".%09lldZ", (long long) frac);
        return buf;
}

char *format_timestamp_local(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        time_t sec;
        int64_t frac;
        struct tm tm;

        split_ns(ns, &sec, &frac);
        localtime_r(&sec, &tm);
        /* With the zone: a time read off a terminal in one place is compared with another's. */
        strftime(buf, TIMESTAMP_MAX_LEN, "%Y-%m-%d %H:%M:%S %Z", &tm);
        return buf;
}
