/* SPDX-License-Identifier: MIT */
/* Walks a JSON document's strings and member names: checking, escaping or repairing them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text-json.h"

static bool walk_ok(json_t *v, bool multiline, char *path, size_t at, char *why) {
        const char *key;
        json_t *x;
        size_t i;
        if (json_is_string(v))
                return text_ok(json_string_value(v), multiline, why);
        if (json_is_array(v)) {
                json_array_foreach (v, i, x) {
                        snprintf(path + at, TEXT_JSON_PATH_MAX - at, "[%zu]", i);
                        if (!walk_ok(x, multiline, path, strlen(path), why))
                                return false;
                }
        } else if (json_is_object(v)) {
                json_object_foreach (v, key, x) {
                        snprintf(path + at, TEXT_JSON_PATH_MAX - at, "%s{name}", at ? "." : "");
                        if (!text_ok(key, multiline, why))
                                return false;
                        /* A key shown as it is would be what the check refuses. */
                        snprintf(path + at, TEXT_JSON_PATH_MAX - at, "%s%s", at ? "." : "", key);
                        if (!walk_ok(x, multiline, path, strlen(path), why))
                                return false;
                }
        }
        path[at] = '\0';
        return true;
}

bool text_json_ok(json_t *v, bool multiline, char path[static TEXT_JSON_PATH_MAX],
                  char why[static TEXT_WHY_MAX]) {
        path[0] = '\0';
        return walk_ok(v, multiline, path, 0, why);
}

/* What fix makes of s: NULL when s stays as it is (or without memory: *oom). */
typedef char *(*fix_fn)(const char *s, bool *oom);

static char *escaped(const char *s, bool *oom) {
        char why[TEXT_WHY_MAX];
        if (text_ok(s, true, why))
                return NULL;
        char *e = text_escape_lines_dup(s);
        *oom = !e;
        return e;
}

static char *repaired(const char *s, bool *oom) {
        char why[TEXT_WHY_MAX];
        if (text_ok(s, false, why))
                return NULL;
        size_t size = strlen(s) + 1; /* a '?' never takes more room than what it stands for */
        char *buf = malloc(size);
        *oom = !buf;
        return buf ? text_copy_utf8(s, buf, size) : NULL;
}

static int walk_fix(json_t *v, fix_fn fix) {
        bool oom = false;
        const char *key;
        json_t *x;
        void *tmp;
        size_t i;
        int r = 0;
        if (json_is_string(v)) {
                char *s = fix(json_string_value(v), &oom);
                r = s && json_string_set(v, s) < 0 ? -ENOMEM : 0;
                free(s);
                return oom ? -ENOMEM : r;
        }
        if (json_is_array(v))
                json_array_foreach (v, i, x)
                        if ((r = walk_fix(x, fix)) < 0)
                                return r;
        if (!json_is_object(v))
                return 0;
        /* Renamed members are set again once the walk is done with the object. */
        json_t *renamed = NULL;
        json_object_foreach_safe(v, tmp, key, x) {
                if ((r = walk_fix(x, fix)) < 0)
                        break;
                char *k = fix(key, &oom);
                if (oom) {
                        r = -ENOMEM;
                        break;
                }
                if (!k)
                        continue;
                if (!renamed)
                        renamed = json_object();
                r = !renamed || json_object_set(renamed, k, x) < 0 ? -ENOMEM : 0;
                free(k);
                if (r < 0)
                        break;
                json_object_del(v, key);
        }
        if (r >= 0 && renamed && json_object_update(v, renamed) < 0)
                r = -ENOMEM;
        json_decref(renamed);
        return r < 0 ? r : 0;
}

int text_json_escape(json_t *v) {
        return walk_fix(v, escaped);
}

int text_json_repair(json_t *v) {
        return walk_fix(v, repaired);
}
