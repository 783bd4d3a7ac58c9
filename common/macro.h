/* SPDX-License-Identifier: MIT */
/* Small macros shared by every part: cleanup attributes, unit constants, compiler hints.
 * Nothing here allocates or logs. */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _cacheline_aligned_ __attribute__((aligned(64)))

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define NSEC_PER_USEC UINT64_C(1000)
#define NSEC_PER_MSEC UINT64_C(1000000)
#define NSEC_PER_SEC UINT64_C(1000000000)
#define USEC_PER_SEC UINT64_C(1000000)

/* The exit statuses every rtsoak program shares (sysexits.h's numbers): 0 success, 1
 * (EXIT_FAILURE) a failure at run time, and these.  systemd units list the last three in
 * RestartPreventExitStatus=: restarting does not fix them.  "rtsoak verdict" and "rtsoak
 * latest-stable" answer with 0/1/2/3 instead, for gating scripts (docs/exit-status.md). */
#define EXIT_USAGE 64 /* bad command line: unknown option, missing or malformed value */
#define EXIT_UNAVAILABLE                                                                  \
        69             /* cannot run here: real-time scheduling refused, a generator that \
                        * cannot work on this machine, an address that cannot be bound */
#define EXIT_CONFIG 78 /* bad configuration: a file, a drop-in or a --set assignment */

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

static inline void strv_freep(char ***strv) {
        if (!*strv)
                return;
        for (char **s = *strv; *s; s++)
                free(*s);
        free(*strv);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Hand a pointer out of a cleanup scope. */
#define TAKE_PTR(p)                       \
        ({                                \
                __typeof__(p) _tp_ = (p); \
                (p) = NULL;               \
                _tp_;                     \
        })

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}
