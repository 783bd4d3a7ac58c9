/* SPDX-License-Identifier: MIT */
/* The farm database: machines and their tokens, and what they uploaded, in an SQLite file or
 * a PostgreSQL database.  Only server/ speaks SQL to it; every function here is safe to call
 * from any thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sha256.h"
#include "summary.h"

#define FARM_DB_FILE_MODE 0600

#define FARM_ERROR_MAX 1024
#define FARM_MACHINE_ID_LEN 32
#define FARM_DEFAULT_THRESHOLD_NS UINT64_C(100000)
#define FARM_DAY_NS INT64_C(86400000000000)

typedef struct farm_db farm_db;

/* Opens (creating and migrating) the farm database at target: an SQLite file's path, or a
 * postgresql:// URI.  On failure err says why, naming the target (never a password). */
int farm_db_open(const char *target, farm_db **ret, char err[static FARM_ERROR_MAX]);
/* The same for a server of threads HTTP threads: on PostgreSQL, that many connections and a few
 * more (threads 0: a default). */
int farm_db_open_with(const char *target, unsigned threads, farm_db **ret,
                      char err[static FARM_ERROR_MAX]);
void farm_db_close(farm_db *db);
/* Stopping: the reads of snapshots (verdicts) and of SQLite's reading connection fail from now
 * on with -EBUSY, one that runs too (on SQLite, within a moment), so that no long verdict or
 * query holds up the end of the program.  Writes finish: they are short, and a delivery's
 * state or an upload must be stored whole. */
void farm_db_stop(farm_db *db);
bool farm_db_stopping(farm_db *db);

/* SQLite databases up to this size get PRAGMA quick_check at every open; larger ones only on
 * request (farm_db_check), since it reads the whole file. */
#define FARM_CHECK_AT_OPEN_MAX_BYTES (INT64_C(1) << 30)
/* Whether the check at open was skipped, and the file's size then. */
bool farm_db_check_skipped(farm_db *db, int64_t *ret_size_bytes);
/* SQLite: PRAGMA quick_check of the whole file, -EBADMSG (err says what) when it is damaged;
 * PostgreSQL: every table read once (its pages are checked as they are read). */
int farm_db_check(farm_db *db, char err[static FARM_ERROR_MAX]);

/* Finds the enrolled, unrevoked machine whose token has this hash (looked up in an index of the
 * hashes).  0 and the id in ret_machine_id, or -EACCES. */
int farm_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char ret_machine_id[static FARM_MACHINE_ID_LEN + 1]);

struct farm_stored {
        bool duplicate;     /* nothing new: the upload (or all it holds) was already stored */
        uint64_t intervals; /* intervals stored by this request */
        uint64_t events;    /* events stored by this request */
        uint64_t dup_intervals, dup_events; /* already stored before, skipped */
};

/* Stores a decoded summary of machine_id atomically and returns once it is committed (on disk),
 * or with the error that undid it: on SQLite in its own savepoint of a transaction that the
 * uploads stored at the same time share (group commit), on PostgreSQL in a transaction of its
 * own.  -EEXIST (with err) when the run is already stored with a different identity (boot id or
 * kernel), -EBUSY when the database could not be reached or locked in time. */
int farm_store_summary(farm_db *db, const struct summary *s, int64_t now_ns,
                       struct farm_stored *ret, char err[static FARM_ERROR_MAX]);
/* How many group commits stored uploads, and how many uploads they held. */
void farm_db_commit_stats(farm_db *db, uint64_t *ret_commits, uint64_t *ret_uploads);

/* How the API and the pages take the times a machine stamps, against the server's clock:
 * data stamped more than clock_tolerance_ns after it was received is shown with its stamp and
 * flagged, and counts as received (never as later) where a time stands for "now" or "latest": a
 * machine's last data, its latest run; a machine is silent once its last data is older than its
 * interval and max_gap_ns. */
struct farm_clock_view {
        int64_t now_ns, clock_tolerance_ns, max_gap_ns;
};

/* True for 32 lowercase hex digits, the form of /etc/machine-id (summary_name_id). */
bool farm_machine_id_valid(const char *s);

/* The names of people in the audit trail: staff members, readers, who made a change. */
#define FARM_PERSON_NAME_MAX 64
extern const struct name_rule farm_name_person;
