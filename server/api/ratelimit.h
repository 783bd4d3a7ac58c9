/* SPDX-License-Identifier: MIT */
/* The request-rate limit of uploads: one token bucket per machine, refilled at a steady rate
 * up to a burst size. */
#pragma once

#include <stdint.h>

#include "db.h"

#define FARM_RATE_DEFAULT 10.0 /* requests per second, per machine */
#define FARM_BURST_DEFAULT 120 /* a backlog of two hours of 1-minute intervals at once */

typedef struct farm_ratelimit farm_ratelimit;

int farm_ratelimit_new(double rate_per_s, unsigned burst, farm_ratelimit **ret);
void farm_ratelimit_free(farm_ratelimit *rl);
/* Keeps the buckets in the farm database when it is PostgreSQL, so that every server of the
 * farm takes from the same bucket of a machine (the database's clock refills them); on SQLite
 * (one server) they stay in memory. */
void farm_ratelimit_share(farm_ratelimit *rl, farm_db *db);

/* Takes one token from key's bucket at time now_ns (CLOCK_MONOTONIC; a shared bucket goes by
 * the database's clock).  Returns 0 when the request may go ahead, otherwise how many whole
 * seconds (at least 1) until it may, for Retry-After; -ENOMEM, or the database's error. */
int farm_ratelimit_take(farm_ratelimit *rl, const char *key, int64_t now_ns);
/* An upload's token checked (farm_authenticate()) and, for its machine, a token taken from the
 * bucket (farm_ratelimit_take()): -EACCES for a token of no enrolled, unrevoked machine, else
 * what farm_ratelimit_take() returns, the machine's id in ret_machine_id.  On PostgreSQL in one
 * statement. */
int farm_ratelimit_admit(farm_ratelimit *rl, farm_db *db,
                         const uint8_t token_hash[SHA256_DIGEST_SIZE],
                         char ret_machine_id[static FARM_MACHINE_ID_LEN + 1], int64_t now_ns);
