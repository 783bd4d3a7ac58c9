/* SPDX-License-Identifier: MIT */
/* Machine settings with their history: enrolment, re-keying, bound, gating, groups, labels and
 * revocation, each change a new version with who, when and why, in the audit trail. */
#pragma once

#include "json-time.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "params.h"
#include "rule.h"

#define FARM_BOUND_MAX_NS INT64_C(1000000000)        /* a latency bound is at most 1 s */
#define FARM_GROUP_LEN_MAX (FARM_GROUP_NAME_MAX - 1) /* server-rule.h */
#define FARM_GROUPS_MAX 32
#define FARM_LABEL_KEY_MAX 64
#define FARM_LABEL_VALUE_MAX 256 /* bytes */
#define FARM_LABELS_MAX 32
#define FARM_LABEL_EDITS_MAX 64 /* label changes in one request */
#define FARM_REASON_MAX 1000    /* characters */
#define FARM_WHO_MAX FARM_PERSON_NAME_MAX
#define FARM_DEFAULT_GROUP "default"

struct farm_label {
        char key[FARM_LABEL_KEY_MAX + 1];
        char value[FARM_LABEL_VALUE_MAX + 1];
};

/* One version of a machine's settings.  Groups and labels are kept sorted (labels by key). */
struct farm_settings {
        int64_t bound_ns;
        bool gating, revoked;
        size_t ngroups, nlabels;
        char groups[FARM_GROUPS_MAX][FARM_GROUP_LEN_MAX + 1];
        struct farm_label labels[FARM_LABELS_MAX];
};

/* A change of settings: what is not given stays as it is in the version in force. */
struct farm_settings_change {
        int64_t bound_ns; /* -1: unchanged */
        int gating;       /* -1: unchanged */
        bool groups_given;
        size_t ngroups; /* the new groups, replacing the old ones */
        char groups[FARM_GROUPS_MAX][FARM_GROUP_LEN_MAX + 1];
        size_t nedits; /* labels set (remove false) or removed, in order */
        struct {
                struct farm_label label;
                bool remove;
        } edits[FARM_LABEL_EDITS_MAX];
};

/* An empty change (nothing given). */
void farm_settings_change_init(struct farm_settings_change *c);
bool farm_settings_change_empty(const struct farm_settings_change *c);

/* The checks of single values; each error names the field (as given in what) and says what
 * is allowed.  0 or -EINVAL. */
int farm_check_bound(const char *what, int64_t bound_ns, char err[static FARM_ERROR_MAX]);
/* Text of 1 to max characters (UTF-8) without control characters: a reason, a name. */
int farm_check_text(const char *what, const char *text, size_t max,
                    char err[static FARM_ERROR_MAX]);
/* Who made a change: 1-64 letters, digits or . _ @ - (as staff names). */
int farm_check_who(const char *what, const char *who, char err[static FARM_ERROR_MAX]);
/* "a,b,c" into c's groups (every name checked, none twice, at most FARM_GROUPS_MAX). */
int farm_change_groups(struct farm_settings_change *c, const char *what, const char *list,
                       char err[static FARM_ERROR_MAX]);
/* Adds one group name to c's groups (groups_given is set). */
int farm_change_add_group(struct farm_settings_change *c, const char *what, const char *name,
                          char err[static FARM_ERROR_MAX]);
/* Sets label key to value, or removes it (value NULL). */
int farm_change_label(struct farm_settings_change *c, const char *what, const char *key,
                      const char *value, char err[static FARM_ERROR_MAX]);
/* "KEY=VALUE" of the command line. */
int farm_change_label_arg(struct farm_settings_change *c, const char *what, const char *arg,
                          char err[static FARM_ERROR_MAX]);
/* The body of POST /api/v1/machines/{id}/settings: {"bound_ns", "gating", "groups", "labels",
 * "reason"}, every field but reason optional; labels is a merge patch (RFC 7396: a string sets
 * the label, null removes it).  ret_reason points into body. */
int farm_change_from_json(json_t *body, struct farm_settings_change *c, const char **ret_reason,
                          char err[static FARM_ERROR_MAX]);

/* The settings after change c to cur, in ret: -EINVAL (with err) when they break a limit. */
int farm_settings_apply(const struct farm_settings *cur, const struct farm_settings_change *c,
                        struct farm_settings *ret, char err[static FARM_ERROR_MAX]);
/* What differs between a and b, for the audit trail ("bound 100us -> 150us; groups default ->
 * rack-a"); "" when nothing does. */
void farm_settings_diff(const struct farm_settings *a, const struct farm_settings *b, char *buf,
                        size_t size);

/* Creates the machine with its token (token_hash), settings version 1 (the defaults with
 * change c, which may be NULL) and an audited enrolment, and returns 1; or, for a machine
 * enrolled already, gives it the new token (audited as machine_rekey), lifts a revocation
 * and applies c as a new settings version (audited as machine_set), and returns 0.  who made
 * it, reason may be NULL. */
int farm_enroll(farm_db *db, const char *machine_id, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                const struct farm_settings_change *ch, const char *who, const char *reason,
                int64_t now_ns, char err[static FARM_ERROR_MAX]);
/* Revokes the machine: its token no longer uploads, and a settings version with revoked set
 * is added (audited).  1 when revoked now, 0 when it was revoked already, -ENOENT when no such
 * machine is enrolled.  reason may be NULL. */
int farm_revoke(farm_db *db, const char *machine_id, const char *who, const char *reason,
                int64_t now_ns, char err[static FARM_ERROR_MAX]);
/* Applies change c as a new settings version from now on, with who and why (reason
 * required), and keeps the machine's own threshold, gating and revocation columns in step;
 * the token is never touched.  1 and the new version's number in *ret_version, or 0 when c
 * changes nothing (no version is added; *ret_version is the one in force); -ENOENT when no
 * such machine is enrolled, -EINVAL when c or reason break a rule (err says which). */
int farm_machine_set(farm_db *db, const char *machine_id, const struct farm_settings_change *ch,
                     const char *who, const char *reason, int64_t now_ns, int64_t *ret_version,
                     char err[static FARM_ERROR_MAX]);

/* The settings in force now and a page of their history (newest first):
 * {"machine", "hostname", "enrolled", "enrolled_ns", "settings": {...}, "history": [...],
 * "total", "limit", "offset"}.  -ENOENT when no such machine is enrolled. */
int farm_settings_json(farm_db *db, const char *machine_id, const struct farm_page *page,
                       json_t **ret, char err[static FARM_ERROR_MAX]);

/* The groups and labels of the columns groups and labels of a version, joined by a newline
 * (NULL: the defaults), into ret (the rest of it the defaults). */
void farm_settings_brief(const char *groups_nl_labels, struct farm_settings *ret);
/* {"groups": [...], "labels": {...}} of the columns groups and labels of a version, joined
 * by a newline (NULL: the defaults), for the machine list. */
json_t *farm_settings_brief_json(const char *groups_nl_labels);
