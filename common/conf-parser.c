/* SPDX-License-Identifier: MIT */
/* Implementation of the INI reader and of the value types.  Unknown sections and keys are
 * errors that list what the table takes: a misspelt key silently ignored would leave a farm
 * machine measuring something other than what its owner believes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "conf-parser.h"
#include "text-safe.h"
#include "cpuset.h"
#include "macro.h"
#include "timeutil.h"

#define LINE_MAX_LEN 4096
#define PATH_MAX_WHERE 4200

_printf_(2, 3) static int seterr(char err[static CONF_ERROR_MAX], const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, CONF_ERROR_MAX, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* ---- value types ---- */

static int check_span_bounds(const struct conf_item *item, uint64_t v, const char **ret_reason) {
        static __thread char reason[160];
        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        if (v < item->min || v > item->max) {
                snprintf(reason, sizeof(reason), "out of range (%s to %s)",
                         format_timespan(a, item->min), format_timespan(b, item->max));
                *ret_reason = reason;
                return -ERANGE;
        }
        return 0;
}

/* A span that is a whole number of unit (1: any), said as not_whole otherwise, and within the
 * item's bounds. */
static int parse_span_of(const struct conf_item *item, const char *value, void *field,
                         uint64_t unit, const char *not_whole, const char **ret_reason) {
        uint64_t v;
        int r = parse_timespan(value, &v, ret_reason);
        if (r < 0)
                return r;
        if (v % unit != 0) {
                *ret_reason = not_whole;
                return -EINVAL;
        }
        r = check_span_bounds(item, v, ret_reason);
        if (r < 0)
                return r;
        *(uint64_t *) field = v;
        return 0;
}

static int parse_span(const struct conf_item *item, const char *value, void *field,
                      const char **ret_reason) {
        return parse_span_of(item, value, field, 1, NULL, ret_reason);
}

static int parse_span_us(const struct conf_item *item, const char *value, void *field,
                         const char **ret_reason) {
        return parse_span_of(item, value, field, NSEC_PER_USEC,
                             "must be a whole number of microseconds", ret_reason);
}

static int parse_span_s(const struct conf_item *item, const char *value, void *field,
                        const char **ret_reason) {
        return parse_span_of(item, value, field, NSEC_PER_SEC, "must be a whole number of seconds",
                             ret_reason);
}

static void format_span(const struct conf_item *item, const void *field, char *buf, size_t len) {
        char t[TIMESPAN_MAX_LEN];
        (void) item;
        snprintf(buf, len, "%s", format_timespan(t, *(const uint64_t *) field));
}

static int parse_span_off(const struct conf_item *item, const char *value, void *field,
                          const char **ret_reason) {
        uint64_t v;
        if (strcmp(value, "off") == 0) {
                *(int64_t *) field = -1;
                return 0;
        }
        int r = parse_timespan(value, &v, ret_reason);
        if (r < 0)
                return r;
        if (v % NSEC_PER_USEC != 0) {
                *ret_reason = "must be a whole number of microseconds";
                return -EINVAL;
        }
        r = check_span_bounds(item, v, ret_reason);
        if (r < 0)
                return r;
        *(int64_t *) field = (int64_t) v;
        return 0;
}

static void format_span_off(const struct conf_item *item, const void *field, char *buf,
                            size_t len) {
        char t[TIMESPAN_MAX_LEN];
        int64_t v = *(const int64_t *) field;
        (void) item;
        snprintf(buf, len, "%s", v < 0 ? "off" : format_timespan(t, (uint64_t) v));
}

static int parse_uint(const struct conf_item *item, const char *value, void *field,
                      const char **ret_reason) {
        static __thread char reason[160];
        char *end;
        unsigned long long v;

        if (!isdigit((unsigned char) value[0])) {
                *ret_reason = "not a whole number";
                return -EINVAL;
        }
        errno = 0;
        v = strtoull(value, &end, 10);
        if (*end != '\0') {
                *ret_reason = "not a whole number";
                return -EINVAL;
        }
        if (errno == ERANGE || v < item->min || v > item->max) {
                snprintf(reason, sizeof(reason), "out of range (%llu to %llu)",
                         (unsigned long long) item->min, (unsigned long long) item->max);
                *ret_reason = reason;
                return -ERANGE;
        }
        *(uint64_t *) field = v;
        return 0;
}

static void format_uint(const struct conf_item *item, const void *field, char *buf, size_t len) {
        (void) item;
        snprintf(buf, len, "%llu", (unsigned long long) *(const uint64_t *) field);
}

static int parse_bool(const struct conf_item *item, const char *value, void *field,
                      const char **ret_reason) {
        static const char *const yes[] = { "yes", "true", "on", "1" };
        static const char *const no[] = { "no", "false", "off", "0" };
        (void) item;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(value, yes[i]) == 0) {
                        *(bool *) field = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(value, no[i]) == 0) {
                        *(bool *) field = false;
                        return 0;
                }
        *ret_reason = "not a boolean (use yes or no)";
        return -EINVAL;
}

static void format_bool(const struct conf_item *item, const void *field, char *buf, size_t len) {
        (void) item;
        snprintf(buf, len, "%s", *(const bool *) field ? "yes" : "no");
}

static void done_nothing(void *field) {
        (void) field;
}

static int parse_string(const struct conf_item *item, const char *value, void *field,
                        const char **ret_reason) {
        char *c;
        if (strlen(value) > item->max) {
                *ret_reason = "too long";
                return -ERANGE;
        }
        if (strlen(value) < item->min) {
                *ret_reason = "must not be empty";
                return -EINVAL;
        }
        c = strdup(value);
        if (!c)
                return -ENOMEM;
        free(*(char **) field);
        *(char **) field = c;
        return 0;
}

static void format_string(const struct conf_item *item, const void *field, char *buf, size_t len) {
        (void) item;
        snprintf(buf, len, "%s", *(char *const *) field ?: "");
}

static void done_string(void *field) {
        free(*(char **) field);
        *(char **) field = NULL;
}

/* A path, or "off" (kept as ""): for a key whose default is a path, where an empty
 * assignment means the default like everywhere else. */
static int parse_path_off(const struct conf_item *item, const char *value, void *field,
                          const char **ret_reason) {
        return parse_string(item, strcmp(value, "off") == 0 ? "" : value, field, ret_reason);
}

static void format_path_off(const struct conf_item *item, const void *field, char *buf,
                            size_t len) {
        const char *v = *(char *const *) field;
        (void) item;
        snprintf(buf, len, "%s", v && *v ? v : "off");
}

static int parse_cpus(const struct conf_item *item, const char *value, void *field,
                      const char **ret_reason) {
        struct cpuset s;
        (void) item;
        int r = cpuset_parse(value, &s, ret_reason);
        if (r < 0)
                return r;
        cpuset_done(field);
        *(struct cpuset *) field = s;
        return 0;
}

static void format_cpus(const struct conf_item *item, const void *field, char *buf, size_t len) {
        (void) item;
        if (cpuset_format(field, buf, len) < 0)
                snprintf(buf, len, "(too long)");
}

static void done_cpus(void *field) {
        cpuset_done(field);
}

/* A size in bytes with an optional K, M or G (powers of 1024), or "auto" (0) where the key
 * allows it (min 0). */
static int parse_size(const struct conf_item *item, const char *value, void *field,
                      const char **ret_reason) {
        static __thread char reason[160];
        static const char units[] = "KMG";
        char *end;
        unsigned long long v;
        if (strcmp(value, "auto") == 0 && item->min == 0) {
                *(uint64_t *) field = 0;
                return 0;
        }
        if (!isdigit((unsigned char) value[0])) {
                *ret_reason = item->min == 0 ? "not a size (e.g. 512K, 4M) or auto"
                                             : "not a size (e.g. 512K, 4M)";
                return -EINVAL;
        }
        errno = 0;
        v = strtoull(value, &end, 10);
        const char *u = *end ? strchr(units, toupper((unsigned char) *end)) : NULL;
        if (*end &&
            (!u || (end[1] && strcasecmp(end + 1, "iB") != 0 && strcasecmp(end + 1, "B") != 0))) {
                *ret_reason = "unknown unit (use K, M or G)";
                return -EINVAL;
        }
        for (int shift = u ? (int) (u - units + 1) * 10 : 0; shift > 0; shift -= 10)
                v = v > (ULLONG_MAX >> 10) ? ULLONG_MAX : v << 10;
        if (errno == ERANGE || v < MAX(item->min, 1) || v > item->max) {
                snprintf(reason, sizeof(reason), "out of range (%lluK to %lluK)",
                         (unsigned long long) MAX(item->min, 1024) / 1024,
                         (unsigned long long) item->max / 1024);
                *ret_reason = reason;
                return -ERANGE;
        }
        *(uint64_t *) field = v;
        return 0;
}

static void format_size(const struct conf_item *item, const void *field, char *buf, size_t len) {
        uint64_t v = *(const uint64_t *) field;
        (void) item;
        if (v == 0)
                snprintf(buf, len, "auto");
        else if (v % (1u << 30) == 0)
                snprintf(buf, len, "%lluG", (unsigned long long) (v >> 30));
        else if (v % (1u << 20) == 0)
                snprintf(buf, len, "%lluM", (unsigned long long) (v >> 20));
        else if (v % 1024 == 0)
                snprintf(buf, len, "%lluK", (unsigned long long) (v >> 10));
        else
                snprintf(buf, len, "%llu", (unsigned long long) v);
}

const struct conf_type conf_type_timespan = { "a time span", parse_span, format_span,
                                              done_nothing };
const struct conf_type conf_type_timespan_us = { "a time span", parse_span_us, format_span,
                                                 done_nothing };
const struct conf_type conf_type_timespan_s = { "a time span", parse_span_s, format_span,
                                                done_nothing };
const struct conf_type conf_type_timespan_off = { "a time span or \"off\"", parse_span_off,
                                                  format_span_off, done_nothing };
const struct conf_type conf_type_uint = { "a number", parse_uint, format_uint, done_nothing };
const struct conf_type conf_type_bool = { "a boolean", parse_bool, format_bool, done_nothing };
const struct conf_type conf_type_string = { "a string", parse_string, format_string, done_string };
const struct conf_type conf_type_path_off = { "a path or \"off\"", parse_path_off, format_path_off,
                                              done_string };
const struct conf_type conf_type_cpuset = { "a CPU list", parse_cpus, format_cpus, done_cpus };
const struct conf_type conf_type_size = { "a size", parse_size, format_size, done_nothing };

/* ---- tables ---- */

static void *field_of(const struct conf_item *item, void *obj) {
        return (char *) obj + item->offset;
}

int conf_defaults(const struct conf_table *t, void *obj, char err[static CONF_ERROR_MAX]) {
        for (size_t i = 0; i < t->n; i++) {
                const struct conf_item *it = &t->items[i];
                const char *reason = NULL;
                int r = it->type->parse(it, it->def, field_of(it, obj), &reason);
                if (r < 0)
                        /* A broken default is a bug in the table; tests catch it. */
                        return seterr(err, "built-in default of [%s] %s= is invalid: %s",
                                      it->section, it->key, reason ?: strerror(-r));
        }
        return 0;
}

void conf_free(const struct conf_table *t, void *obj) {
        for (size_t i = 0; i < t->n; i++)
                t->items[i].type->done(field_of(&t->items[i], obj));
}

static const char *after_prefix(const char *prefix, const char *section) {
        size_t l = prefix ? strlen(prefix) : 0;
        if (l == 0 || strncmp(section, prefix, l) != 0)
                return NULL;
        return section + l;
}

/* The NAME of a "<prefix>NAME" section, and (ret_dyn) which of the further kinds it is (NULL:
 * the table's own dynamic_prefix). */
static const char *dynamic_name_of(const struct conf_table *t, const char *section,
                                   const struct conf_dynamic **ret_dyn) {
        const char *name = after_prefix(t->dynamic_prefix, section);
        *ret_dyn = NULL;
        for (size_t i = 0; !name && i < t->ndynamics; i++)
                if ((name = after_prefix(t->dynamics[i].prefix, section)))
                        *ret_dyn = &t->dynamics[i];
        return name;
}

static const char *dynamic_name(const struct conf_table *t, const char *section) {
        const struct conf_dynamic *d;
        return dynamic_name_of(t, section, &d);
}

static bool section_known(const struct conf_table *t, const char *section) {
        if (dynamic_name(t, section))
                return true;
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->items[i].section, section) == 0)
                        return true;
        return false;
}

static const struct conf_item *find_item(const struct conf_table *t, const char *section,
                                         const char *key) {
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->items[i].section, section) == 0 && strcmp(t->items[i].key, key) == 0)
                        return &t->items[i];
        return NULL;
}

/* Edit distance, for "did you mean" hints on misspelt keys; keys are short. */
static size_t distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];
        if (la >= 64 || lb >= 64)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                prev[j] = j;
        for (size_t i = 1; i <= la; i++) {
                cur[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t sub = prev[j - 1] + (tolower((unsigned char) a[i - 1]) !=
                                                    tolower((unsigned char) b[j - 1]));
                        cur[j] = MIN(MIN(prev[j] + 1, cur[j - 1] + 1), sub);
                }
                memcpy(prev, cur, (lb + 1) * sizeof(size_t));
        }
        return prev[lb];
}

static const char *closest(const struct conf_table *t, const char *section, const char *key) {
        const char *best = NULL;
        size_t best_d = 3; /* only suggest what is at most two edits away */
        for (size_t i = 0; i < t->n; i++) {
                const char *name = section ? t->items[i].key : t->items[i].section;
                if (section && strcmp(t->items[i].section, section) != 0)
                        continue;
                size_t d = distance(key, name);
                if (d < best_d) {
                        best_d = d;
                        best = name;
                }
        }
        return best;
}

/* Appends ", NAME" (or NAME first) to the list in buf, bounded by len. */
static void list_add(char *buf, size_t len, const char *before, const char *name,
                     const char *after) {
        size_t used = strlen(buf);
        if (used < len)
                snprintf(buf + used, len - used, "%s%s%s%s", used ? ", " : "", before, name, after);
}

/* Whether items[0..i) has a row of section s. */
static bool section_seen(const struct conf_table *t, size_t i, const char *s) {
        while (i-- > 0)
                if (strcmp(t->items[i].section, s) == 0)
                        return true;
        return false;
}

/* An unknown section: the nearest known one, and every section the table takes, those named
 * by the owner as PREFIX.NAME ("[Scenario.NAME]"). */
static int unknown_section(const struct conf_table *t, const char *where, const char *section,
                           char err[static CONF_ERROR_MAX]) {
        const char *hint = closest(t, NULL, section);
        char known[CONF_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < t->n; i++)
                if (!section_seen(t, i, t->items[i].section))
                        list_add(known, sizeof(known), "[", t->items[i].section, "]");
        if (t->dynamic_prefix)
                list_add(known, sizeof(known), "[", t->dynamic_prefix, "NAME]");
        for (size_t i = 0; i < t->ndynamics; i++)
                list_add(known, sizeof(known), "[", t->dynamics[i].prefix, "NAME]");
        return seterr(err, "%s: unknown section [%s]%s%s%s; the sections: %s", where, section,
                      hint ? " (did you mean [" : "", hint ?: "", hint ? "]?)" : "", known);
}

/* An unknown key of a known section: the nearest key, and every key the section takes. */
static int unknown_key(const struct conf_table *t, const char *where, const char *section,
                       const char *key, char err[static CONF_ERROR_MAX]) {
        const char *hint = closest(t, section, key);
        char known[CONF_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->items[i].section, section) == 0)
                        list_add(known, sizeof(known), "", t->items[i].key, "=");
        return seterr(err, "%s: unknown key %s= in section [%s]%s%s%s; [%s] takes %s", where, key,
                      section, hint ? " (did you mean " : "", hint ?: "", hint ? "=?)" : "",
                      section, known);
}

static char *strip(char *s) {
        while (isspace((unsigned char) *s))
                s++;
        size_t l = strlen(s);
        while (l > 0 && isspace((unsigned char) s[l - 1]))
                s[--l] = '\0';
        return s;
}

/* Whether s is one line of free text (text_ok(); a tab counts as a blank): what a
 * configuration says goes into logs, pages and uploads.  why says what is wrong. */
static bool line_ok(const char *s, char why[static TEXT_WHY_MAX]) {
        if (!text_ok(s, true, why))
                return false;
        const char *nl = strchr(s, '\n');
        if (nl)
                snprintf(why, TEXT_WHY_MAX, "a control character U+000A at byte %zu",
                         (size_t) (nl - s));
        return !nl;
}

/* Applies one assignment; where is "file:line" or "--set" for messages. */
static int assign(const struct conf_table *t, const char *where, const char *section,
                  const char *key, const char *value, void *obj, char **origins,
                  char err[static CONF_ERROR_MAX]) {
        const struct conf_item *it;
        const char *reason = NULL;
        char why[TEXT_WHY_MAX], shown[CONF_ERROR_MAX / 4];
        int r;

        if (!line_ok(section, why) || !line_ok(key, why))
                return seterr(err, "%s: [%s] %s=: the section or the key: %s", where,
                              text_escape(section, shown, sizeof(shown) / 2),
                              text_escape(key, shown + sizeof(shown) / 2, sizeof(shown) / 2), why);
        if (!line_ok(value, why))
                return seterr(err, "%s: [%s] %s=: %s", where, section, key, why);

        if (!section_known(t, section))
                return unknown_section(t, where, section, err);
        const struct conf_dynamic *kind;
        const char *dyn = dynamic_name_of(t, section, &kind);
        if (dyn) {
                char msg[CONF_ERROR_MAX];
                r = kind ? kind->assign(obj, where, dyn, key, value, msg)
                         : t->dynamic_assign(obj, where, dyn, key, value, msg);
                if (r < 0)
                        return seterr(err, "%s: [%s] %s=: %s", where, section, key, msg);
                return 0;
        }
        it = find_item(t, section, key);
        if (!it)
                return unknown_key(t, where, section, key, err);

        /* An empty assignment resets the key to its default, as in systemd units. */
        r = it->type->parse(it, *value ? value : it->def, field_of(it, obj), &reason);
        if (r == -ENOMEM)
                return seterr(err, "%s: [%s] %s=: out of memory", where, section, key);
        if (r < 0)
                return seterr(err, "%s: [%s] %s=%s: %s", where, section, key, value,
                              reason ?: "invalid value");
        if (origins) {
                size_t i = (size_t) (it - t->items);
                char *o = strdup(where);
                if (!o)
                        return seterr(err, "%s: out of memory", where);
                free(origins[i]);
                origins[i] = o;
        }
        return 0;
}

int conf_parse_file(const struct conf_table *t, const char *path, void *obj, char **origins,
                    char err[static CONF_ERROR_MAX]) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char section[128] = "";
        size_t cap = 0;
        unsigned lineno = 0;
        ssize_t l;

        f = fopen(path, "re");
        if (!f) {
                int e = errno;
                seterr(err, "%s: cannot open: %s", path, strerror(e));
                return -e;
        }

        while ((l = getline(&line, &cap, f)) >= 0) {
                char where[PATH_MAX_WHERE];
                char *s, *eq;

                lineno++;
                snprintf(where, sizeof(where), "%s:%u", path, lineno);
                if (l > LINE_MAX_LEN)
                        return seterr(err, "%s: line too long (more than %d bytes)", where,
                                      LINE_MAX_LEN);
                if (memchr(line, '\0', (size_t) l))
                        return seterr(err, "%s: NUL byte in line", where);

                s = strip(line);
                if (*s == '\0' || *s == '#' || *s == ';')
                        continue;

                if (*s == '[') {
                        size_t n = strlen(s);
                        if (s[n - 1] != ']')
                                return seterr(err, "%s: section header without closing ']'", where);
                        s[n - 1] = '\0';
                        s = strip(s + 1);
                        if (*s == '\0' || strlen(s) >= sizeof(section))
                                return seterr(err, "%s: invalid section name", where);
                        if (!section_known(t, s))
                                return unknown_section(t, where, s, err);
                        snprintf(section, sizeof(section), "%s", s);
                        continue;
                }

                eq = strchr(s, '=');
                if (!eq)
                        return seterr(err, "%s: expected Key=Value, got \"%s\"", where, s);
                *eq = '\0';
                char *key = strip(s), *value = strip(eq + 1);
                if (*key == '\0')
                        return seterr(err, "%s: missing key before '='", where);
                if (section[0] == '\0')
                        return seterr(err, "%s: %s= appears before any [Section] header", where,
                                      key);
                int r = assign(t, where, section, key, value, obj, origins, err);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return seterr(err, "%s: read error: %s", path, strerror(errno));
        return 0;
}

int conf_parse_assignment(const struct conf_table *t, const char *assignment, const char *origin,
                          void *obj, char **origins, char err[static CONF_ERROR_MAX]) {
        _cleanup_free_ char *copy = strdup(assignment);
        char where[PATH_MAX_WHERE], shown[PATH_MAX_WHERE - 64];
        char *dot, *eq;

        if (!copy)
                return -ENOMEM;
        /* Shown in messages and --check-config as the text rule allows. */
        snprintf(where, sizeof(where), "%s %s", origin,
                 text_escape(assignment, shown, sizeof(shown)));
        eq = strchr(copy, '=');
        if (!eq)
                return seterr(err, "%s: expected Section.Key=Value", where);
        *eq = '\0';
        dot = strrchr(copy, '.');
        if (!dot || dot == copy || dot[1] == '\0')
                return seterr(err, "%s: expected Section.Key=Value", where);
        *dot = '\0';
        return assign(t, where, strip(copy), strip(dot + 1), strip(eq + 1), obj, origins, err);
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static int strv_push(char ***strv, size_t *n, char *s) {
        char **v = realloc(*strv, (*n + 2) * sizeof(char *));
        if (!v) {
                free(s);
                return -ENOMEM;
        }
        v[(*n)++] = s;
        v[*n] = NULL;
        *strv = v;
        return 0;
}

int conf_load(const struct conf_table *t, const char *main_path, bool required,
              char *const *assignments, void *obj, char **origins, char ***ret_sources,
              char err[static CONF_ERROR_MAX]) {
        _cleanup_strv_free_ char **sources = NULL, **dropins = NULL;
        _cleanup_free_ char *dir = NULL;
        size_t nsources = 0, ndropins = 0;
        int r;

        r = conf_defaults(t, obj, err);
        if (r < 0)
                return r;

        if (access(main_path, F_OK) == 0 || required) {
                r = conf_parse_file(t, main_path, obj, origins, err);
                if (r < 0)
                        return r;
                r = strv_push(&sources, &nsources, strdup(main_path));
                if (r < 0)
                        return r;
        }

        if (asprintf(&dir, "%s.d", main_path) < 0)
                return -ENOMEM;
        DIR *d = opendir(dir);
        if (d) {
                struct dirent *de;
                while ((de = readdir(d))) {
                        size_t l = strlen(de->d_name);
                        if (de->d_name[0] == '.' || l < 6 ||
                            strcmp(de->d_name + l - 5, ".conf") != 0)
                                continue;
                        char *p;
                        if (asprintf(&p, "%s/%s", dir, de->d_name) < 0 ||
                            strv_push(&dropins, &ndropins, p) < 0) {
                                closedir(d);
                                return -ENOMEM;
                        }
                }
                closedir(d);
                if (ndropins > 0)
                        qsort(dropins, ndropins, sizeof(char *), name_cmp);
                for (size_t i = 0; i < ndropins; i++) {
                        r = conf_parse_file(t, dropins[i], obj, origins, err);
                        if (r < 0)
                                return r;
                        r = strv_push(&sources, &nsources, strdup(dropins[i]));
                        if (r < 0)
                                return r;
                }
        } else if (errno != ENOENT && errno != ENOTDIR)
                return seterr(err, "%s: cannot open drop-in directory: %s", dir, strerror(errno));

        for (char *const *a = assignments; a && *a; a++) {
                r = conf_parse_assignment(t, *a, "--set", obj, origins, err);
                if (r < 0)
                        return r;
        }

        if (ret_sources)
                *ret_sources = TAKE_PTR(sources);
        return 0;
}

void conf_print(const struct conf_table *t, const void *obj, FILE *f) {
        const char *section = NULL;
        for (size_t i = 0; i < t->n; i++) {
                const struct conf_item *it = &t->items[i];
                char buf[4096];
                if (!section || strcmp(section, it->section) != 0) {
                        fprintf(f, "%s[%s]\n", section ? "\n" : "", it->section);
                        section = it->section;
                }
                it->type->format(it, (const char *) obj + it->offset, buf, sizeof(buf));
                /* A control character of a value escaped: this goes to terminals. */
                fprintf(f, "%s=", it->key);
                text_fputs(buf, f);
                fputc('\n', f);
        }
        if (t->dynamic_print)
                t->dynamic_print(obj, f);
        for (size_t i = 0; i < t->ndynamics; i++)
                if (t->dynamics[i].print)
                        t->dynamics[i].print(obj, f);
}

const char *conf_origin(const struct conf_table *t, char *const *origins, size_t offset) {
        for (size_t i = 0; i < t->n; i++)
                if (t->items[i].offset == offset)
                        return origins && origins[i] ? origins[i] : "default";
        return "default";
}

void conf_origins_free(const struct conf_table *t, char **origins) {
        if (!origins)
                return;
        for (size_t i = 0; i < t->n; i++) {
                free(origins[i]);
                origins[i] = NULL;
        }
}
