/* SPDX-License-Identifier: MIT */
/* SQLite result codes as negative errno values, for the parts that speak SQL (storage/ and
 * server/): one mapping, so that both report a full disk or a locked database alike. */
#pragma once

#include <errno.h>
#include <sqlite3.h>

static inline int sqlite_errno(int rc) {
        switch (rc & 0xff) {
        case SQLITE_OK:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
        case SQLITE_FORMAT:
                return -EBADMSG;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_TOOBIG:
        case SQLITE_RANGE:
                return -E2BIG;
        default:
                return -EIO;
        }
}
