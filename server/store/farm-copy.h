/* SPDX-License-Identifier: MIT */
/* Moving a farm from one store to another (rtsoak-server migrate): every table copied and then
 * compared row by row; a copy interrupted and run again goes on where it stopped. */
#pragma once

#include <stdint.h>

#include "db.h"

struct farm_copy_stats {
        uint64_t rows_copied, rows_compared;
        unsigned tables;
};

/* Copies the farm at from (an SQLite path, or a postgresql:// URI) into the one at to, which is
 * empty or holds an interrupted copy of the same farm, chunk intervals per transaction (0: a
 * default); progress is logged.  -EEXIST (err says which table) when to holds other data. */
int farm_copy(const char *from, const char *to, unsigned chunk, struct farm_copy_stats *ret,
              char err[static FARM_ERROR_MAX]);
/* Compares every table of the two farms row by row: -EBADMSG (err names the table and the
 * first row that differs) when they do not hold the same. */
int farm_copy_verify(const char *from, const char *to, struct farm_copy_stats *ret,
                     char err[static FARM_ERROR_MAX]);
