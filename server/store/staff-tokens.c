/* SPDX-License-Identifier: MIT */
/* The staff's and the readers' tokens (tables admins and readers): one statement and its
 * audit row in a write transaction to make or revoke one, a look-up by hash to check one. */
#include <errno.h>

#include "audit.h"
#include "db-internal.h"
#include "staff-tokens.h"

/* The tokens of one table, for its messages. */
struct token_table {
        const char *add_sql, *revoke_sql; /* ?1 name, ?2 now, ?3 the token's hash */
        const char *add_action, *revoke_action;
        const char *noun; /* "staff", "read" */
};

static const struct token_table admins = {
        .add_sql = "INSERT INTO admins (name, token_hash, created_ns) VALUES (?1, ?3, ?2) "
                   "ON CONFLICT (name) DO UPDATE SET token_hash = ?3, created_ns = ?2, "
                   "revoked_ns = NULL",
        .revoke_sql = "UPDATE admins SET revoked_ns = ?2 WHERE name = ?1 AND revoked_ns IS NULL",
        .add_action = "admin_token",
        .revoke_action = "admin_revoke",
        .noun = "staff",
};

static const struct token_table readers = {
        .add_sql = "INSERT INTO readers (name, created_ns, token_hash) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (name) DO UPDATE SET token_hash = ?3, created_ns = ?2, "
                   "revoked_ns = NULL",
        .revoke_sql = "UPDATE readers SET revoked_ns = ?2 WHERE name = ?1 AND revoked_ns IS NULL",
        .add_action = "read_token",
        .revoke_action = "read_revoke",
        .noun = "read",
};

/* Adds (with hash) or revokes (hash NULL) name's token of table t, audited. */
static int token_change(farm_db *db, const struct token_table *t, const char *name,
                        const uint8_t *hash, int64_t now_ns, char *err) {
        _cleanup_release_ sql_conn *c = farm_writer(db);
        _cleanup_reset_ sql_stmt *st = NULL;
        char what[64];
        int r = farm_begin_write(c, err);
        if (r < 0)
                return r;
        r = farm_prepare(c, hash ? t->add_sql : t->revoke_sql, &st, err);
        if (r >= 0) {
                sql_bind_text(st, 1, name);
                sql_bind_int64(st, 2, now_ns);
                if (hash)
                        sql_bind_blob(st, 3, hash, SHA256_DIGEST_SIZE);
                snprintf(what, sizeof(what), "cannot %s the %s token", hash ? "store" : "revoke",
                         t->noun);
                r = farm_step_done(st, what, err);
        }
        if (r >= 0 && sql_changes(st) == 0)
                r = farm_failf(db, -ENOENT, err, "no %s token of %s is in force", t->noun, name);
        if (r >= 0)
                r = farm_audit_write(c,
                                     &(struct farm_audit_row){ .time_ns = now_ns,
                                                               .who = name,
                                                               .action = hash ? t->add_action
                                                                              : t->revoke_action },
                                     err);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0)
                sql_rollback(c);
        return r;
}

int farm_admin_add(farm_db *db, const char *name, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                   int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        return token_change(db, &admins, name, token_hash, now_ns, err);
}

int farm_admin_revoke(farm_db *db, const char *name, int64_t now_ns,
                      char err[static FARM_ERROR_MAX]) {
        return token_change(db, &admins, name, NULL, now_ns, err);
}

int farm_admin_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                            char ret_name[static FARM_ADMIN_NAME_MAX + 1]) {
        return farm_token_lookup(
                db, "SELECT name, token_hash, revoked_ns IS NULL FROM admins WHERE token_hash = ?",
                token_hash, ret_name, FARM_ADMIN_NAME_MAX + 1);
}

int farm_reader_add(farm_db *db, const char *name, const uint8_t hash[static SHA256_DIGEST_SIZE],
                    int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        return token_change(db, &readers, name, hash, now_ns, err);
}

int farm_reader_revoke(farm_db *db, const char *name, int64_t now_ns,
                       char err[static FARM_ERROR_MAX]) {
        return token_change(db, &readers, name, NULL, now_ns, err);
}

int farm_reader_authenticate(farm_db *db, const uint8_t hash[static SHA256_DIGEST_SIZE],
                             char ret_name[static FARM_READER_NAME_MAX + 1]) {
        return farm_token_lookup(
                db, "SELECT name, token_hash, revoked_ns IS NULL FROM readers WHERE token_hash = ?",
                hash, ret_name, FARM_READER_NAME_MAX + 1);
}
