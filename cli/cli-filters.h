/* SPDX-License-Identifier: MIT */
/* Checks rtsoak's filters against the database: an unknown run, CPU, scenario or event type is
 * an error that names the known ones. */
#pragma once

#include "store.h"

/* 0 when every filter names something the database knows; -ENOENT (logged, with the known
 * values) when one does not; -EIO when the database could not be read.  type may be NULL. */
int cli_check_filters(store *s, const struct store_filter *f, const char *type);
