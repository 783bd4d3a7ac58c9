/* SPDX-License-Identifier: MIT */
/* A user account by name, safe to call with other threads running (getpwnam_r, never the
 * shared buffer of getpwnam). */
#pragma once

#include <sys/types.h>

/* 0 and the account's uid and gid (either pointer may be NULL); -ENOENT when there is no
 * such user; another -errno when the lookup itself failed (NSS unreachable ...). */
int user_lookup(const char *name, uid_t *ret_uid, gid_t *ret_gid);
