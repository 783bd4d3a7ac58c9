/* SPDX-License-Identifier: MIT */
/* Tokens: new random ones (a machine's at enrolment, a staff member's, a reader's), and the
 * "Authorization" header of a request turned into the hash that the farm database stores. */
#pragma once

#include <stdint.h>

#include "sha256.h"

#define FARM_TOKEN_BYTES 32
#define FARM_TOKEN_LEN (2 * FARM_TOKEN_BYTES) /* lowercase hex */

/* A new token from the kernel's random pool, and its hash. */
int farm_token_new(char ret_token[static FARM_TOKEN_LEN + 1],
                   uint8_t ret_hash[static SHA256_DIGEST_SIZE]);

/* The hash of the token in an Authorization header value ("Bearer <64 hex digits>"); -EINVAL
 * for a missing (NULL) or malformed one. */
int farm_token_from_header(const char *authorization, uint8_t ret_hash[static SHA256_DIGEST_SIZE]);
/* The same, also for "Basic" credentials with the token as the password (the user name is not
 * looked at): what a browser sends once its user typed the token in. */
int farm_token_from_authorization(const char *authorization,
                                  uint8_t ret_hash[static SHA256_DIGEST_SIZE]);
