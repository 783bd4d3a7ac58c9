/* SPDX-License-Identifier: MIT */
/* Logging for the programs (daemon, server, CLI): one line per message on stderr with a
 * "<N>" syslog level prefix that journald understands.  Libraries below the programs only
 * log at debug level and return errors instead. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>

#include "macro.h"

enum {
        LOG_LEVEL_ERR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

void log_set_max_level(int level);
int log_get_max_level(void);
/* Prefix lines with "<N>" (for journald); on by default when $JOURNAL_STREAM is set. */
void log_set_prefix_level(bool on);
void log_set_program(const char *name);

/* Logs the message and returns -abs(error) (or 0 when error is 0), so that callers can
 * "return log_error_errno(r, ...)".  %m in the format expands to strerror(error). */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
        _printf_(5, 6);

#define log_full_errno(level, error, ...) \
        log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_LEVEL_ERR, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_LEVEL_WARNING, error, __VA_ARGS__)
#define log_debug_errno(error, ...) log_full_errno(LOG_LEVEL_DEBUG, error, __VA_ARGS__)
#define log_error(...) (void) log_full_errno(LOG_LEVEL_ERR, 0, __VA_ARGS__)
#define log_warning(...) (void) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_notice(...) (void) log_full_errno(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_info(...) (void) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) (void) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "Out of memory")

/* The message of a getopt_long() error in the words every rtsoak program uses ("--bogus:
 * unknown option (see --help)", "--duration: requires an argument (see --help)"): c is the ':'
 * or '?' it returned, with an option string that starts with ':' (or "+:"). */
void log_getopt_error(int c, char *const argv[]);
