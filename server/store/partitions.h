/* SPDX-License-Identifier: MIT */
/* The partitions of the intervals on PostgreSQL, one per UTC month of their start (with their
 * CPUs, loads and load metrics), made before data needs them. */
#pragma once

#include <stdint.h>

#include "db.h"
#include "sql.h"
#include "summary.h"

/* The tables partitioned by the month of the interval's start, in the order a partition of each
 * is made (a table whose rows belong to an interval comes after "intervals"). */
#define FARM_PARTITIONED_TABLES 4
extern const char *const farm_partitioned[FARM_PARTITIONED_TABLES];

/* The partitions of this month and the next (nothing on SQLite). */
int farm_partitions_ahead(sql_conn *c, char *err);
/* The partitions that the intervals of s go to; c must not be in a transaction (a partition is
 * made in one of its own). */
int farm_partitions_for(sql_conn *c, const struct summary *s, char *err);
/* The partitions of [from_ns, to_ns]. */
int farm_partitions_span(sql_conn *c, int64_t from_ns, int64_t to_ns, char *err);

/* Forgets that the partitions of month exist (they were dropped). */
void farm_partitions_forget(farm_db *db, int64_t month);
/* Forgets every month (another server may have dropped some). */
void farm_partitions_forget_all(farm_db *db);

/* The UTC month (months since January 1970) of a time, and the time its month begins. */
int64_t farm_month_of(int64_t ns);
int64_t farm_month_start(int64_t month);
