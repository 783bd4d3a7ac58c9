/* SPDX-License-Identifier: MIT */
/* Files that hold a farm's or a machine's data are created with exactly the mode asked for,
 * whatever the umask of whoever starts the program (an interactive 022 gives 0644). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Creates path with mode when it does not exist (SQLite then opens it, and gives its WAL and
 * shared-memory files the same mode): 1 when created, 0 when it existed, -errno.  For a file
 * that existed, *ret_loose (optional) says whether it grants more than mode. */
int file_create_mode(const char *path, mode_t mode, bool *ret_loose);
