/* SPDX-License-Identifier: MIT */
/* The staff's tokens (staff actions and every read) and the readers' (reads only): stored
 * hashed, each made and revoked in the audit trail, and checked for a request. */
#pragma once

#include <stdint.h>

#include "db.h"
#include "sha256.h"

/* A staff member's or a reader's name follows farm_name_person. */
#define FARM_ADMIN_NAME_MAX FARM_PERSON_NAME_MAX
#define FARM_READER_NAME_MAX FARM_ADMIN_NAME_MAX

/* Staff tokens: adding a name again gives it a new token; -ENOENT revoking one not in force. */
int farm_admin_add(farm_db *db, const char *name, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                   int64_t now_ns, char err[static FARM_ERROR_MAX]);
int farm_admin_revoke(farm_db *db, const char *name, int64_t now_ns,
                      char err[static FARM_ERROR_MAX]);
/* 0 and the staff member's name, or -EACCES. */
int farm_admin_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                            char ret_name[static FARM_ADMIN_NAME_MAX + 1]);

/* Read tokens, the same way. */
int farm_reader_add(farm_db *db, const char *name, const uint8_t hash[static SHA256_DIGEST_SIZE],
                    int64_t now_ns, char err[static FARM_ERROR_MAX]);
int farm_reader_revoke(farm_db *db, const char *name, int64_t now_ns,
                       char err[static FARM_ERROR_MAX]);
/* 0 with the name, -EACCES for an unknown or revoked token. */
int farm_reader_authenticate(farm_db *db, const uint8_t hash[static SHA256_DIGEST_SIZE],
                             char ret_name[static FARM_READER_NAME_MAX + 1]);
