/* SPDX-License-Identifier: MIT */
/* Machines and their settings with history (tables machines and machine_settings): the checks
 * of every value, enrolment, re-keying, revocation and changes as versions, audited, their
 * JSON, whether a machine is enrolled and which one an upload's token is. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "audit.h"
#include "db-internal.h"
#include "rule.h"
#include "settings.h"
#include "text-safe.h"
#include "timeutil.h"

/* ---- checks -------------------------------------------------------------------------------- */

_printf_(2, 3) static int invalid(char *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, FARM_ERROR_MAX, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int farm_check_bound(const char *what, int64_t bound_ns, char err[static FARM_ERROR_MAX]) {
        if (bound_ns <= 0 || bound_ns > FARM_BOUND_MAX_NS)
                return invalid(err,
                               "%s: %" PRId64 " ns is not a latency bound (more than 0, at most "
                               "1s)",
                               what, bound_ns);
        return 0;
}

/* One line of free text (text_ok()); the number of its characters in ret_chars. */
static bool plain_text(const char *s, size_t *ret_chars, char why[static TEXT_WHY_MAX]) {
        if (!text_ok(s, false, why))
                return false;
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                n += (*p & 0xc0) != 0x80;
        *ret_chars = n;
        return true;
}

int farm_check_text(const char *what, const char *text, size_t max,
                    char err[static FARM_ERROR_MAX]) {
        char why[TEXT_WHY_MAX];
        size_t n = 0;
        if (!text || !*text)
                return invalid(err, "%s: required (1 to %zu characters)", what, max);
        if (!plain_text(text, &n, why))
                return invalid(err, "%s: %s", what, why);
        if (n > max)
                return invalid(err, "%s: %zu characters, more than %zu", what, n, max);
        return 0;
}

int farm_check_who(const char *what, const char *who, char err[static FARM_ERROR_MAX]) {
        char why[NAME_WHY_MAX], shown[4 * 80];
        if (!name_ok(&farm_name_person, who ?: "", why))
                return invalid(err, "%s: '%s' is not a name (%s)", what,
                               text_escape(who ?: "", shown, sizeof(shown)), why);
        return 0;
}

/* Label keys: as group names (farm_name_group). */
static const struct name_rule label_key = { "a label key", NAME_LOWER | NAME_DIGITS, "._-", 1,
                                            FARM_LABEL_KEY_MAX };

static int cmp_str(const void *a, const void *b) {
        return strcmp(a, b);
}

void farm_settings_change_init(struct farm_settings_change *c) {
        memset(c, 0, sizeof(*c));
        c->bound_ns = -1;
        c->gating = -1;
}

bool farm_settings_change_empty(const struct farm_settings_change *c) {
        return c->bound_ns < 0 && c->gating < 0 && !c->groups_given && c->nedits == 0;
}

int farm_change_add_group(struct farm_settings_change *c, const char *what, const char *name,
                          char err[static FARM_ERROR_MAX]) {
        char why[NAME_WHY_MAX], shown[4 * 80];
        if (!name_ok(&farm_name_group, name, why))
                return invalid(err, "%s: '%s' is not a group name (%s)", what,
                               text_escape(name, shown, sizeof(shown)), why);
        if (!c->groups_given)
                c->ngroups = 0;
        c->groups_given = true;
        for (size_t i = 0; i < c->ngroups; i++)
                if (strcmp(c->groups[i], name) == 0)
                        return invalid(err, "%s: group %s is listed twice", what, name);
        if (c->ngroups == FARM_GROUPS_MAX)
                return invalid(err, "%s: more than %d groups", what, FARM_GROUPS_MAX);
        snprintf(c->groups[c->ngroups++], sizeof(c->groups[0]), "%s", name);
        qsort(c->groups, c->ngroups, sizeof(c->groups[0]), cmp_str);
        return 0;
}

int farm_change_groups(struct farm_settings_change *c, const char *what, const char *list,
                       char err[static FARM_ERROR_MAX]) {
        char name[FARM_GROUP_LEN_MAX + 2];
        c->groups_given = true;
        c->ngroups = 0;
        for (const char *p = list;;) {
                size_t n = strcspn(p, ",");
                if (n == 0)
                        return invalid(err,
                                       "%s: '%.200s': an empty group name (a machine belongs to "
                                       "at least one group; names are separated by commas)",
                                       what, list);
                snprintf(name, sizeof(name), "%.*s", (int) MIN(n, sizeof(name) - 1), p);
                int r = farm_change_add_group(c, what, name, err);
                if (r < 0)
                        return r;
                if (!p[n])
                        return 0;
                p += n + 1;
        }
}

int farm_change_label(struct farm_settings_change *c, const char *what, const char *key,
                      const char *value, char err[static FARM_ERROR_MAX]) {
        char why[MAX(NAME_WHY_MAX, TEXT_WHY_MAX)], shown[4 * 80];
        size_t chars = 0;
        if (!name_ok(&label_key, key, why))
                return invalid(err, "%s: '%s' is not a label key (%s)", what,
                               text_escape(key, shown, sizeof(shown)), why);
        if (value && !plain_text(value, &chars, why))
                return invalid(err, "%s: the value of label %s: %s", what, key, why);
        if (value && strlen(value) > FARM_LABEL_VALUE_MAX)
                return invalid(err, "%s: the value of label %s is longer than %d bytes", what, key,
                               FARM_LABEL_VALUE_MAX);
        if (c->nedits == FARM_LABEL_EDITS_MAX)
                return invalid(err, "%s: more than %d label changes at once", what,
                               FARM_LABEL_EDITS_MAX);
        c->edits[c->nedits].remove = !value;
        snprintf(c->edits[c->nedits].label.key, sizeof(c->edits[0].label.key), "%s", key);
        snprintf(c->edits[c->nedits].label.value, sizeof(c->edits[0].label.value), "%s",
                 value ?: "");
        c->nedits++;
        return 0;
}

int farm_change_label_arg(struct farm_settings_change *c, const char *what, const char *arg,
                          char err[static FARM_ERROR_MAX]) {
        const char *eq = strchr(arg, '=');
        char key[FARM_LABEL_KEY_MAX + 2];
        if (!eq)
                return invalid(err, "%s: '%.80s': expected KEY=VALUE", what, arg);
        snprintf(key, sizeof(key), "%.*s", (int) MIN((size_t) (eq - arg), sizeof(key) - 1), arg);
        if ((size_t) (eq - arg) >= sizeof(key) - 1)
                return invalid(err, "%s: '%.80s...' is not a label key (at most %d characters)",
                               what, arg, FARM_LABEL_KEY_MAX);
        return farm_change_label(c, what, key, eq + 1, err);
}

static int change_groups_json(struct farm_settings_change *c, json_t *v, char *err) {
        size_t i;
        json_t *g;
        if (!json_is_array(v))
                return invalid(err, "groups: expected an array of group names");
        if (json_array_size(v) == 0)
                return invalid(err, "groups: empty (a machine belongs to at least one group)");
        c->groups_given = true;
        c->ngroups = 0;
        json_array_foreach (v, i, g) {
                int r = json_is_string(g)
                                ? farm_change_add_group(c, "groups", json_string_value(g), err)
                                : invalid(err, "groups: entry %zu is not a string", i);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int change_labels_json(struct farm_settings_change *c, json_t *v, char *err) {
        const char *key;
        json_t *x;
        if (!json_is_object(v))
                return invalid(err, "labels: expected an object of labels (a string sets one, "
                                    "null removes it)");
        json_object_foreach (v, key, x) {
                char what[FARM_LABEL_KEY_MAX + 16];
                snprintf(what, sizeof(what), "labels.%.*s", FARM_LABEL_KEY_MAX, key);
                if (!json_is_string(x) && !json_is_null(x))
                        return invalid(err, "%s: expected a string or null", what);
                int r = farm_change_label(c, "labels", key, json_string_value(x), err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int farm_change_from_json(json_t *body, struct farm_settings_change *c, const char **ret_reason,
                          char err[static FARM_ERROR_MAX]) {
        const char *key;
        json_t *v;
        int r = 0;

        farm_settings_change_init(c);
        *ret_reason = NULL;
        if (!json_is_object(body))
                return invalid(err, "body: expected a JSON object");
        json_object_foreach (body, key, v) {
                if (strcmp(key, "bound_ns") == 0) {
                        if (!json_is_integer(v))
                                return invalid(err, "bound_ns: expected an integer (ns)");
                        c->bound_ns = json_integer_value(v);
                        r = farm_check_bound("bound_ns", c->bound_ns, err);
                } else if (strcmp(key, "gating") == 0) {
                        if (!json_is_boolean(v))
                                return invalid(err, "gating: expected true or false");
                        c->gating = json_is_true(v);
                } else if (strcmp(key, "groups") == 0)
                        r = change_groups_json(c, v, err);
                else if (strcmp(key, "labels") == 0)
                        r = change_labels_json(c, v, err);
                else if (strcmp(key, "reason") == 0) {
                        if (!json_is_string(v))
                                return invalid(err, "reason: expected a string");
                        *ret_reason = json_string_value(v);
                } else
                        return invalid(err,
                                       "%.64s: unknown field (expected bound_ns, gating, groups, "
                                       "labels, reason)",
                                       key);
                if (r < 0)
                        return r;
        }
        if (!*ret_reason)
                return invalid(err, "reason: missing (every change of settings needs one)");
        return farm_check_text("reason", *ret_reason, FARM_REASON_MAX, err);
}

/* ---- versions ------------------------------------------------------------------------------ */

static int cmp_label(const void *a, const void *b) {
        return strcmp(((const struct farm_label *) a)->key, ((const struct farm_label *) b)->key);
}

static void settings_default(struct farm_settings *s) {
        memset(s, 0, sizeof(*s));
        s->bound_ns = (int64_t) FARM_DEFAULT_THRESHOLD_NS;
        s->gating = true;
        s->ngroups = 1;
        snprintf(s->groups[0], sizeof(s->groups[0]), FARM_DEFAULT_GROUP);
}

int farm_settings_apply(const struct farm_settings *cur, const struct farm_settings_change *c,
                        struct farm_settings *ret, char err[static FARM_ERROR_MAX]) {
        *ret = *cur;
        if (!c)
                return 0;
        if (c->bound_ns >= 0) {
                int r = farm_check_bound("bound", c->bound_ns, err);
                if (r < 0)
                        return r;
                ret->bound_ns = c->bound_ns;
        }
        if (c->gating >= 0)
                ret->gating = c->gating;
        if (c->groups_given) {
                if (c->ngroups == 0)
                        return invalid(err, "groups: a machine belongs to at least one group");
                memcpy(ret->groups, c->groups, sizeof(ret->groups));
                ret->ngroups = c->ngroups;
        }
        for (size_t e = 0; e < c->nedits; e++) {
                const struct farm_label *l = &c->edits[e].label;
                size_t i = 0;
                while (i < ret->nlabels && strcmp(ret->labels[i].key, l->key) != 0)
                        i++;
                if (c->edits[e].remove) {
                        if (i < ret->nlabels)
                                ret->labels[i] = ret->labels[--ret->nlabels];
                        continue;
                }
                if (i == ret->nlabels && ret->nlabels == FARM_LABELS_MAX)
                        return invalid(err, "labels: more than %d labels (remove some first)",
                                       FARM_LABELS_MAX);
                ret->labels[i] = *l;
                if (i == ret->nlabels)
                        ret->nlabels++;
        }
        qsort(ret->labels, ret->nlabels, sizeof(ret->labels[0]), cmp_label);
        return 0;
}

static void groups_text(const struct farm_settings *s, char *buf, size_t size) {
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < s->ngroups && o < size; i++)
                o += (size_t) snprintf(buf + o, size - o, "%s%s", i ? "," : "", s->groups[i]);
}

static const struct farm_label *label_find(const struct farm_settings *s, const char *key) {
        for (size_t i = 0; i < s->nlabels; i++)
                if (strcmp(s->labels[i].key, key) == 0)
                        return &s->labels[i];
        return NULL;
}

/* "bound 100us, gating yes, groups default, labels room=b2 rack=7" */
static void settings_describe(const struct farm_settings *s, char *buf, size_t size) {
        char groups[FARM_GROUPS_MAX * (FARM_GROUP_LEN_MAX + 1) + 1], span[TIMESPAN_MAX_LEN];
        groups_text(s, groups, sizeof(groups));
        size_t o = (size_t) snprintf(buf, size, "bound %s, gating %s, groups %s, labels",
                                     format_timespan(span, (uint64_t) s->bound_ns),
                                     s->gating ? "yes" : "no", groups);
        for (size_t i = 0; i < s->nlabels && o < size; i++)
                o += (size_t) snprintf(buf + o, size - o, " %s=%s", s->labels[i].key,
                                       s->labels[i].value);
        if (s->nlabels == 0 && o < size)
                snprintf(buf + o, size - o, " none");
}

/* Appends "; " and the formatted text to buf, which holds o bytes. */
_printf_(4, 5) static size_t add_part(char *buf, size_t size, size_t o, const char *fmt, ...) {
        va_list ap;
        if (o >= size)
                return o;
        if (o > 0)
                o += (size_t) snprintf(buf + o, size - o, "; ");
        if (o >= size)
                return o;
        va_start(ap, fmt);
        o += (size_t) vsnprintf(buf + o, size - o, fmt, ap);
        va_end(ap);
        return o;
}

void farm_settings_diff(const struct farm_settings *a, const struct farm_settings *b, char *buf,
                        size_t size) {
        char x[FARM_GROUPS_MAX * (FARM_GROUP_LEN_MAX + 1) + 1],
                y[FARM_GROUPS_MAX * (FARM_GROUP_LEN_MAX + 1) + 1];
        char s1[TIMESPAN_MAX_LEN], s2[TIMESPAN_MAX_LEN];
        size_t o = 0;

        buf[0] = '\0';
        if (a->bound_ns != b->bound_ns)
                o = add_part(buf, size, o, "bound %s -> %s",
                             format_timespan(s1, (uint64_t) a->bound_ns),
                             format_timespan(s2, (uint64_t) b->bound_ns));
        if (a->gating != b->gating)
                o = add_part(buf, size, o, "gating %s -> %s", a->gating ? "yes" : "no",
                             b->gating ? "yes" : "no");
        groups_text(a, x, sizeof(x));
        groups_text(b, y, sizeof(y));
        if (strcmp(x, y) != 0)
                o = add_part(buf, size, o, "groups %s -> %s", x, y);
        for (size_t i = 0; i < a->nlabels; i++) {
                const struct farm_label *l = label_find(b, a->labels[i].key);
                if (!l)
                        o = add_part(buf, size, o, "label %s removed (was \"%s\")",
                                     a->labels[i].key, a->labels[i].value);
                else if (strcmp(l->value, a->labels[i].value) != 0)
                        o = add_part(buf, size, o, "label %s \"%s\" -> \"%s\"", l->key,
                                     a->labels[i].value, l->value);
        }
        for (size_t i = 0; i < b->nlabels; i++)
                if (!label_find(a, b->labels[i].key))
                        o = add_part(buf, size, o, "label %s = \"%s\"", b->labels[i].key,
                                     b->labels[i].value);
        if (a->revoked != b->revoked)
                o = add_part(buf, size, o, "revoked %s -> %s", a->revoked ? "yes" : "no",
                             b->revoked ? "yes" : "no");
}

/* The groups column ("a,b") and the labels column (a JSON object) of a version. */
static char *labels_text(const struct farm_settings *s) {
        json_auto_t *o = json_object();
        for (size_t i = 0; o && i < s->nlabels; i++)
                if (json_object_set_new(o, s->labels[i].key, json_string(s->labels[i].value)) < 0)
                        return NULL;
        return o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* The groups ("a,b", glen bytes) and labels (a JSON object, or NULL) columns of a version into
 * s.  Rows are written only by this file; anything else in them is taken as it comes, never
 * trusted to fit: extra groups or labels are left out. */
static void settings_parse_columns(struct farm_settings *s, const char *groups, size_t glen,
                                   const char *labels_text) {
        s->ngroups = 0;
        s->nlabels = 0;
        for (const char *g = groups, *gend = groups + glen;
             g < gend && s->ngroups < FARM_GROUPS_MAX;) {
                size_t n = strcspn(g, ",\n");
                n = MIN(n, (size_t) (gend - g));
                if (n > 0 && n <= FARM_GROUP_LEN_MAX)
                        snprintf(s->groups[s->ngroups++], sizeof(s->groups[0]), "%.*s", (int) n, g);
                g += n + 1;
        }
        json_auto_t *labels = labels_text ? json_loads(labels_text, 0, NULL) : NULL;
        const char *key;
        json_t *v;
        json_object_foreach (labels, key, v) {
                if (s->nlabels == FARM_LABELS_MAX || !json_is_string(v))
                        continue;
                struct farm_label *l = &s->labels[s->nlabels++];
                snprintf(l->key, sizeof(l->key), "%s", key);
                snprintf(l->value, sizeof(l->value), "%s", json_string_value(v));
        }
        qsort(s->labels, s->nlabels, sizeof(s->labels[0]), cmp_label);
}

/* Reads the columns threshold_ns, gating, groups, labels, revoked from col on. */
static void settings_from_row(sql_stmt *st, int col, struct farm_settings *ret) {
        memset(ret, 0, sizeof(*ret));
        ret->bound_ns = sql_column_int64(st, col);
        ret->gating = sql_column_int(st, col + 1) != 0;
        ret->revoked = sql_column_int(st, col + 4) != 0;
        const char *g = sql_column_text(st, col + 2) ?: "";
        settings_parse_columns(ret, g, strlen(g), sql_column_text(st, col + 3));
}

int farm_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                      char ret_machine_id[static FARM_MACHINE_ID_LEN + 1]) {
        return farm_token_lookup(
                db, "SELECT id, token_hash, revoked_ns IS NULL FROM machines WHERE token_hash = ?",
                token_hash, ret_machine_id, FARM_MACHINE_ID_LEN + 1);
}

/* The version in force (the newest) of an enrolled machine, on the writer: 0, or -ENOENT for
 * a machine without any (enrolled before versions were kept and not migrated: its own
 * columns then say what is in force).  ret_from_ns: when it began. */
static int current_version(sql_conn *c, const char *machine_id, struct farm_settings *ret,
                           int64_t *ret_from_ns, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT threshold_ns, gating, groups, labels, revoked, from_ns "
                             "FROM machine_settings WHERE machine_id = ? "
                             "ORDER BY from_ns DESC, id DESC LIMIT 1",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return -ENOENT;
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot read the settings", err);
        settings_from_row(st, 0, ret);
        *ret_from_ns = sql_column_int64(st, 5);
        return 0;
}

/* Steps st, which selects machine_id's row from machines: 0 on the row, -ENOENT when no such
 * machine is enrolled; what names a failure of the database. */
static int machine_step(sql_conn *c, sql_stmt *st, const char *machine_id, const char *what,
                        char *err) {
        sql_bind_text(st, 1, machine_id);
        int rc = sql_step(st);
        if (rc == SQL_DONE)
                return farm_failf(farm_of(c), -ENOENT, err, "no machine %s is enrolled",
                                  machine_id);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, what, err);
        return 0;
}

int farm_machine_exists(sql_conn *c, const char *machine_id, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT 1 FROM machines WHERE id = ?", &st, err);
        return r < 0 ? r : machine_step(c, st, machine_id, "cannot look up the machine", err);
}

/* The machine's own columns: 0 and whether it is revoked, or -ENOENT. */
static int machine_row(sql_conn *c, const char *machine_id, struct farm_settings *ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT threshold_ns, gating, revoked_ns IS NOT NULL FROM machines "
                             "WHERE id = ?",
                             &st, err);
        if (r < 0 || (r = machine_step(c, st, machine_id, "cannot look up the machine", err)) < 0)
                return r;
        settings_default(ret);
        ret->bound_ns = sql_column_int64(st, 0);
        ret->gating = sql_column_int(st, 1) != 0;
        ret->revoked = sql_column_int(st, 2) != 0;
        return 0;
}

/* What is in force for an enrolled machine: its newest version, or its own columns. */
static int settings_in_force(sql_conn *c, const char *machine_id, struct farm_settings *ret,
                             int64_t *ret_from_ns, char *err) {
        struct farm_settings own;
        int r = machine_row(c, machine_id, &own, err);
        if (r < 0)
                return r;
        r = current_version(c, machine_id, ret, ret_from_ns, err);
        if (r == -ENOENT) {
                *ret = own;
                *ret_from_ns = INT64_MIN;
                return 0;
        }
        return r;
}

/* Adds version s from max(now, the last version's start) on (a clock stepped back must not
 * put a version before the one it follows), and keeps the machine's own columns in step. */
static int add_version(sql_conn *c, const char *machine_id, const struct farm_settings *s,
                       int64_t from_ns, const char *who, const char *reason, char *err) {
        _cleanup_reset_ sql_stmt *ins = NULL, *upd = NULL;
        char groups[FARM_GROUPS_MAX * (FARM_GROUP_LEN_MAX + 1) + 1];
        _cleanup_free_ char *labels = labels_text(s);
        int r;

        if (!labels)
                return -ENOMEM;
        groups_text(s, groups, sizeof(groups));
        if ((r = farm_prepare(c,
                              "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, "
                              "gating, groups, labels, revoked, by, reason) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              &ins, err)) < 0 ||
            (r = farm_prepare(c,
                              "UPDATE machines SET threshold_ns = ?2, gating = ?3, "
                              "revoked_ns = CASE WHEN ?4 <> 0 THEN coalesce(revoked_ns, ?5) END "
                              "WHERE id = ?1",
                              &upd, err)) < 0)
                return r;
        sql_bind_text(ins, 1, machine_id);
        sql_bind_int64(ins, 2, from_ns);
        sql_bind_int64(ins, 3, s->bound_ns);
        sql_bind_int64(ins, 4, s->gating);
        sql_bind_text(ins, 5, groups);
        sql_bind_text(ins, 6, labels);
        sql_bind_int64(ins, 7, s->revoked);
        sql_bind_text(ins, 8, who);
        sql_bind_text(ins, 9, reason);
        if ((r = farm_step_done(ins, "cannot store the settings", err)) < 0)
                return r;
        sql_bind_text(upd, 1, machine_id);
        sql_bind_int64(upd, 2, s->bound_ns);
        sql_bind_int64(upd, 3, s->gating);
        sql_bind_int64(upd, 4, s->revoked);
        sql_bind_int64(upd, 5, from_ns);
        return farm_step_done(upd, "cannot update the machine", err);
}

/* The number of versions the machine has (the newest one's number). */
static int count_versions(sql_conn *c, const char *machine_id, int64_t *ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT count(*) FROM machine_settings WHERE machine_id = ?", &st,
                             err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        int rc = sql_step(st);
        if (rc != SQL_ROW)
                return farm_fail(c, rc, "cannot count the settings", err);
        *ret = sql_column_int64(st, 0);
        return 0;
}

/* Moves from cur to next as a new version when they differ, audited as action with the
 * difference and the reason.  1 when a version was added, 0 when nothing changed. */
static int change_to(sql_conn *c, const char *machine_id, const struct farm_settings *cur,
                     int64_t cur_from_ns, const struct farm_settings *next, const char *who,
                     const char *reason, const char *action, int64_t now_ns, char *err) {
        char diff[4096], detail[4096 + 4 * FARM_REASON_MAX + 16];
        farm_settings_diff(cur, next, diff, sizeof(diff));
        if (!diff[0])
                return 0;
        int r = add_version(c, machine_id, next, MAX(now_ns, cur_from_ns), who, reason, err);
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail), "%s: %s", diff, reason);
        r = farm_audit_machine(c, now_ns, who, action, machine_id, detail, err);
        return r < 0 ? r : 1;
}

static int enroll_new(sql_conn *c, const char *machine_id, const uint8_t *token_hash,
                      const struct farm_settings *s, const char *who, const char *reason,
                      int64_t now_ns, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        char detail[4096 + 4 * FARM_REASON_MAX + 32], desc[4096];
        int r = farm_prepare(c,
                             "INSERT INTO machines (id, token_hash, threshold_ns, gating, "
                             "enrolled_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
                             &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_blob(st, 2, token_hash, SHA256_DIGEST_SIZE);
        sql_bind_int64(st, 3, s->bound_ns);
        sql_bind_int64(st, 4, s->gating);
        sql_bind_int64(st, 5, now_ns);
        if ((r = farm_step_done(st, "cannot store the machine", err)) < 0 ||
            (r = add_version(c, machine_id, s, now_ns, who, reason, err)) < 0)
                return r;
        settings_describe(s, desc, sizeof(desc));
        snprintf(detail, sizeof(detail), "settings version 1: %s: %s", desc, reason);
        return farm_audit_machine(c, now_ns, who, "machine_enroll", machine_id, detail, err);
}

static int enroll_locked(sql_conn *c, const char *machine_id, const uint8_t *token_hash,
                         const struct farm_settings_change *ch, const char *who, const char *reason,
                         int64_t now_ns, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        struct farm_settings cur, next;
        int64_t from_ns;
        int r = settings_in_force(c, machine_id, &cur, &from_ns, err);
        if (r == -ENOENT) {
                settings_default(&cur);
                if ((r = farm_settings_apply(&cur, ch, &next, err)) < 0)
                        return r;
                r = enroll_new(c, machine_id, token_hash, &next, who, reason ?: "enrolled", now_ns,
                               err);
                return r < 0 ? r : 1;
        }
        if (r < 0 || (r = farm_settings_apply(&cur, ch, &next, err)) < 0)
                return r;
        next.revoked = false; /* a new token for a revoked machine lifts the revocation */
        r = farm_prepare(c, "UPDATE machines SET token_hash = ?2, rekeyed_ns = ?3 WHERE id = ?1",
                         &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, machine_id);
        sql_bind_blob(st, 2, token_hash, SHA256_DIGEST_SIZE);
        sql_bind_int64(st, 3, now_ns);
        if ((r = farm_step_done(st, "cannot store the token", err)) < 0 ||
            (r = farm_audit_machine(c, now_ns, who, "machine_rekey", machine_id,
                                    reason ?: "a new token", err)) < 0 ||
            (r = change_to(c, machine_id, &cur, from_ns, &next, who, reason ?: "re-enrolled",
                           "machine_set", now_ns, err)) < 0)
                return r;
        return 0;
}

int farm_enroll(farm_db *db, const char *machine_id, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                const struct farm_settings_change *ch, const char *who, const char *reason,
                int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        int r;
        if (!farm_machine_id_valid(machine_id))
                return invalid(err,
                               "machine: '%.64s' is not a machine id (32 lowercase hex "
                               "digits)",
                               machine_id);
        if ((r = farm_check_who("by", who, err)) < 0 ||
            (reason && (r = farm_check_text("reason", reason, FARM_REASON_MAX, err)) < 0))
                return r;
        return FARM_WRITE_TRANSACTION(
                db, w, err, enroll_locked(w, machine_id, token_hash, ch, who, reason, now_ns, err));
}

static int revoke_locked(sql_conn *c, const char *machine_id, const char *who, const char *reason,
                         int64_t now_ns, char *err) {
        struct farm_settings cur, next;
        int64_t from_ns;
        int r = settings_in_force(c, machine_id, &cur, &from_ns, err);
        if (r < 0)
                return r;
        next = cur;
        next.revoked = true;
        return change_to(c, machine_id, &cur, from_ns, &next, who, reason ?: "revoked",
                         "machine_revoke", now_ns, err);
}

int farm_revoke(farm_db *db, const char *machine_id, const char *who, const char *reason,
                int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        int r;
        if ((r = farm_check_who("by", who, err)) < 0 ||
            (reason && (r = farm_check_text("reason", reason, FARM_REASON_MAX, err)) < 0))
                return r;
        return FARM_WRITE_TRANSACTION(db, w, err,
                                      revoke_locked(w, machine_id, who, reason, now_ns, err));
}

static int set_locked(sql_conn *c, const char *machine_id, const struct farm_settings_change *ch,
                      const char *who, const char *reason, int64_t now_ns, int64_t *ret_version,
                      char *err) {
        struct farm_settings cur, next;
        int64_t from_ns;
        int r = settings_in_force(c, machine_id, &cur, &from_ns, err);
        if (r < 0 || (r = farm_settings_apply(&cur, ch, &next, err)) < 0)
                return r;
        int changed = change_to(c, machine_id, &cur, from_ns, &next, who, reason, "machine_set",
                                now_ns, err);
        if (changed < 0)
                return changed;
        r = count_versions(c, machine_id, ret_version, err);
        return r < 0 ? r : changed;
}

int farm_machine_set(farm_db *db, const char *machine_id, const struct farm_settings_change *ch,
                     const char *who, const char *reason, int64_t now_ns, int64_t *ret_version,
                     char err[static FARM_ERROR_MAX]) {
        int r;
        if ((r = farm_check_who("by", who, err)) < 0 ||
            (r = farm_check_text("reason", reason, FARM_REASON_MAX, err)) < 0)
                return r;
        if (farm_settings_change_empty(ch))
                return invalid(err, "nothing to change (give a bound, gating, groups or labels)");
        return FARM_WRITE_TRANSACTION(
                db, w, err, set_locked(w, machine_id, ch, who, reason, now_ns, ret_version, err));
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *settings_json(const struct farm_settings *s) {
        json_t *groups = json_array(), *labels = json_object();
        for (size_t i = 0; groups && i < s->ngroups; i++)
                json_array_append_new(groups, json_string(s->groups[i]));
        for (size_t i = 0; labels && i < s->nlabels; i++)
                json_object_set_new(labels, s->labels[i].key, json_string(s->labels[i].value));
        return json_pack("{s:I, s:b, s:o, s:o, s:b}", "bound_ns", (json_int_t) s->bound_ns,
                         "gating", s->gating, "groups", groups, "labels", labels, "revoked",
                         s->revoked);
}

/* One version from a row of (threshold_ns, gating, groups, labels, revoked, from_ns, by,
 * reason), numbered version. */
static json_t *version_json(sql_stmt *st, int64_t version) {
        struct farm_settings s;
        settings_from_row(st, 0, &s);
        int64_t from = sql_column_int64(st, 5);
        json_t *o = json_pack("{s:I, s:o, s:I}", "version", (json_int_t) version, "from",
                              json_time(from), "from_ns", (json_int_t) from);
        if (o && (json_object_update_new(o, settings_json(&s)) < 0 ||
                  json_object_set_new(o, "by", farm_json_col_text(st, 6)) < 0 ||
                  json_object_set_new(o, "reason", farm_json_col_text(st, 7)) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

void farm_settings_brief(const char *groups_nl_labels, struct farm_settings *ret) {
        settings_default(ret);
        if (groups_nl_labels) {
                const char *nl = strchr(groups_nl_labels, '\n');
                settings_parse_columns(ret, groups_nl_labels,
                                       nl ? (size_t) (nl - groups_nl_labels)
                                          : strlen(groups_nl_labels),
                                       nl ? nl + 1 : NULL);
        }
}

json_t *farm_settings_brief_json(const char *groups_nl_labels) {
        struct farm_settings s;
        farm_settings_brief(groups_nl_labels, &s);
        json_t *full = settings_json(&s), *o = NULL;
        if (full)
                o = json_pack("{s:O, s:O}", "groups", json_object_get(full, "groups"), "labels",
                              json_object_get(full, "labels"));
        json_decref(full);
        return o;
}

#define VERSION_COLUMNS "threshold_ns, gating, groups, labels, revoked, from_ns, by, reason"

/* The machine's row as JSON (-ENOENT when it is not enrolled). */
static int machine_head_json(sql_conn *c, const char *machine_id, json_t **ret, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c,
                             "SELECT hostname, enrolled_ns, rekeyed_ns, threshold_ns, gating, "
                             "revoked_ns FROM machines WHERE id = ?",
                             &st, err);
        if (r < 0 || (r = machine_step(c, st, machine_id, "cannot read the machine", err)) < 0)
                return r;
        int64_t enrolled = sql_column_int64(st, 1);
        *ret = json_pack("{s:s, s:o, s:o, s:I, s:o, s:o}", "machine", machine_id, "hostname",
                         farm_json_col_text(st, 0), "enrolled", json_time(enrolled), "enrolled_ns",
                         (json_int_t) enrolled, "rekeyed_ns", farm_json_col_int(st, 2),
                         "revoked_ns", farm_json_col_int(st, 5));
        if (*ret && !sql_column_null(st, 2))
                json_object_set_new(*ret, "rekeyed", json_time(sql_column_int64(st, 2)));
        return *ret ? 0 : -ENOMEM;
}

int farm_settings_json(farm_db *db, const char *machine_id, const struct farm_page *page,
                       json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_reader(db);
        _cleanup_reset_ sql_stmt *cnt = NULL, *st = NULL;
        json_auto_t *o = NULL, *history = json_array();
        json_t *current = NULL;
        int r, rc;

        if (!history)
                return -ENOMEM;
        if ((r = machine_head_json(c, machine_id, &o, err)) < 0 ||
            (r = farm_prepare(c, "SELECT count(*) FROM machine_settings WHERE machine_id = ?", &cnt,
                              err)) < 0 ||
            (r = farm_prepare(c,
                              "SELECT " VERSION_COLUMNS " FROM machine_settings "
                              "WHERE machine_id = ?1 ORDER BY from_ns DESC, id DESC "
                              "LIMIT ?2 OFFSET ?3",
                              &st, err)) < 0)
                return r;
        sql_bind_text(cnt, 1, machine_id);
        if ((rc = sql_step(cnt)) != SQL_ROW)
                return farm_fail(c, rc, "cannot count the settings", err);
        int64_t total = sql_column_int64(cnt, 0);
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, (int64_t) MIN(page->limit, (uint64_t) INT64_MAX));
        sql_bind_int64(st, 3, (int64_t) MIN(page->offset, (uint64_t) INT64_MAX));
        for (int64_t v = total - (int64_t) MIN(page->offset, (uint64_t) total);
             (rc = sql_step(st)) == SQL_ROW; v--)
                if (json_array_append_new(history, version_json(st, v)) < 0)
                        return -ENOMEM;
        if (rc != SQL_DONE)
                return farm_fail(c, rc, "cannot read the settings", err);

        /* In force: the newest version (the first of the first page), read again for any
         * other page. */
        sql_reset(st);
        sql_bind_text(st, 1, machine_id);
        sql_bind_int64(st, 2, 1);
        sql_bind_int64(st, 3, 0);
        if ((rc = sql_step(st)) == SQL_ROW)
                current = version_json(st, total);
        else if (rc == SQL_DONE)
                current = json_null();
        else
                return farm_fail(c, rc, "cannot read the settings", err);
        if (!current || json_object_set_new(o, "settings", current) < 0 ||
            json_object_set(o, "history", history) < 0 ||
            json_object_update_new(o, json_pack("{s:I, s:I, s:I}", "total", (json_int_t) total,
                                                "limit", (json_int_t) page->limit, "offset",
                                                (json_int_t) page->offset)) < 0)
                return -ENOMEM;
        *ret = json_incref(o);
        return 0;
}
