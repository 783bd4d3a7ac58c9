/* SPDX-License-Identifier: MIT */
/* Retention of the farm's raw intervals: whole UTC months older than a horizon dropped (on
 * PostgreSQL their partitions), the rollups that the verdict reads kept. */
#pragma once

#include <stdint.h>

#include "db.h"

struct farm_rule;

/* Drops the intervals of the UTC months that ended before the month of before_ns, but those
 * the verdict reads one by one by rule (and every rule recorded): on PostgreSQL their
 * partitions (the number of months dropped whole; a month with such intervals keeps them, and
 * ret_intervals counts the others deleted), on SQLite their rows (0, and how many in
 * ret_intervals). */
int farm_retention_pass(farm_db *db, const struct farm_rule *rule, int64_t before_ns,
                        uint64_t *ret_intervals, char err[static FARM_ERROR_MAX]);

/* A thread that runs the pass with the horizon now - retention_ns every hour (0: none). */
struct farm_pruner;
int farm_pruner_start(farm_db *db, const struct farm_rule *rule, uint64_t retention_ns,
                      struct farm_pruner **ret);
void farm_pruner_stop(struct farm_pruner *p);
