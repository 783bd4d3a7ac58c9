/* SPDX-License-Identifier: MIT */
/* Implementation of the stderr logger: level filter, optional journald level prefix,
 * program name, and %m expansion for an explicit error number. */
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "text-safe.h"

/* Every thread logs, and a reload changes the level meanwhile: atomics, so that no thread
 * reads a value half written (relaxed: no other memory hangs on them). */
static _Atomic int max_level = LOG_LEVEL_INFO;
static _Atomic int prefix_level = -1; /* -1: decide on first use */
static const char *program = NULL;

void log_set_max_level(int level) {
        atomic_store_explicit(&max_level, level, memory_order_relaxed);
}

int log_get_max_level(void) {
        return atomic_load_explicit(&max_level, memory_order_relaxed);
}

void log_set_prefix_level(bool on) {
        atomic_store_explicit(&prefix_level, on, memory_order_relaxed);
}

void log_set_program(const char *name) {
        program = name;
}

void log_getopt_error(int c, char *const argv[]) {
        char shortopt[3] = { '-', (char) optopt, '\0' };
        const char *last = optind > 0 ? argv[optind - 1] : NULL;
        /* A long option as it was written; a short one by its letter. */
        const char *opt = last && strncmp(last, "--", 2) == 0 ? last : optopt ? shortopt : "?";
        /* "--opt=value" given to an option that takes none: name the option alone. */
        size_t len = strcspn(opt, "=");
        if (c == ':')
                log_error("%.*s: requires an argument (see --help)", (int) len, opt);
        else
                log_error("%.*s: unknown option (see --help)", (int) len, opt);
}

int log_internal(int level, int error, const char *file, int line_no, const char *fmt, ...) {
        int saved_errno = errno;
        int e = error < 0 ? -error : error;

        if (level <= log_get_max_level()) {
                char msg[2048];
                va_list ap;

                /* systemd sets JOURNAL_STREAM when stderr goes to the journal: only then
                 * are "<N>" prefixes read as levels rather than shown to a person. */
                int prefix = atomic_load_explicit(&prefix_level, memory_order_relaxed);
                if (prefix < 0) {
                        prefix = getenv("JOURNAL_STREAM") != NULL;
                        atomic_store_explicit(&prefix_level, prefix, memory_order_relaxed);
                }

                /* glibc's %m reads errno: point it at the error we were given. */
                errno = e;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof(msg), fmt, ap);
                va_end(ap);
                /* A message is one line, whatever it quotes: a newline, an escape sequence or
                 * a bidirectional override from a machine's upload, a request or a server's
                 * answer is shown escaped, so it cannot forge lines or hide text. */
                char line[sizeof(msg)];
                text_escape(msg, line, sizeof(line));

                char tag[8] = "";
                if (prefix)
                        snprintf(tag, sizeof(tag), "<%d>", level);

                if (level >= LOG_LEVEL_DEBUG)
                        fprintf(stderr, "%s%s%s(%s:%d) %s\n", tag, program ?: "",
                                program ? ": " : "", file, line_no, line);
                else
                        fprintf(stderr, "%s%s%s%s\n", tag, program ?: "", program ? ": " : "",
                                line);
        }

        errno = saved_errno;
        return -e;
}
