/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include "user-lookup.h"

int user_lookup(const char *name, uid_t *ret_uid, gid_t *ret_gid) {
        long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
        size_t size = hint > 0 ? (size_t) hint : 4096;
        for (;;) {
                struct passwd pw, *found = NULL;
                char *buf = malloc(size);
                if (!buf)
                        return -ENOMEM;
                int r = getpwnam_r(name, &pw, buf, size, &found);
                if (r == 0 && found) {
                        if (ret_uid)
                                *ret_uid = pw.pw_uid;
                        if (ret_gid)
                                *ret_gid = pw.pw_gid;
                }
                free(buf);
                if (r == ERANGE && size < (1u << 20)) {
                        size *= 2;
                        continue;
                }
                /* No entry is 0 with no result; some NSS modules say so with an error. */
                if (r == 0 || r == ENOENT || r == ESRCH || r == EBADF || r == EPERM)
                        return found ? 0 : -ENOENT;
                return -r;
        }
}
