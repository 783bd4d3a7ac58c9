/* SPDX-License-Identifier: MIT */
/* The inventory's field map: a sorted array of name and value, set from what the machine says
 * (made safe on the way in), compared, and read and written as a JSON object with every field
 * checked. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventory.h"
#include "sha256.h"

const struct name_rule inventory_name_field = {
        "an inventory field's name", NAME_LOWER | NAME_UPPER | NAME_DIGITS, "._-", 1,
        INVENTORY_MAX_NAME,
};

#define CUT_MARK "..."

void inventory_done(struct inventory *inv) {
        if (!inv)
                return;
        for (size_t i = 0; i < inv->n; i++) {
                free(inv->fields[i].name);
                free(inv->fields[i].value);
        }
        free(inv->fields);
        *inv = (struct inventory){};
}

/* Where name is, or where it would go (*found false). */
static size_t find(const struct inventory *inv, const char *name, bool *found) {
        size_t lo = 0, hi = inv->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(inv->fields[mid].name, name);
                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

const char *inventory_get(const struct inventory *inv, const char *name) {
        bool found;
        size_t i = find(inv, name, &found);
        return found ? inv->fields[i].value : NULL;
}

void inventory_remove(struct inventory *inv, const char *name) {
        bool found;
        size_t i = find(inv, name, &found);
        if (!found)
                return;
        inv->bytes -= strlen(inv->fields[i].name) + strlen(inv->fields[i].value);
        free(inv->fields[i].name);
        free(inv->fields[i].value);
        memmove(&inv->fields[i], &inv->fields[i + 1], (inv->n - i - 1) * sizeof(*inv->fields));
        inv->n--;
}

/* Puts name = value (value taken over) at its place, within the bounds. */
static int put(struct inventory *inv, const char *name, char *value) {
        bool found;
        size_t i = find(inv, name, &found), vlen = strlen(value);
        size_t old = found ? strlen(inv->fields[i].value) + strlen(name) : 0;
        if ((!found && inv->n >= INVENTORY_MAX_FIELDS) ||
            inv->bytes - old + strlen(name) + vlen > INVENTORY_MAX_TOTAL) {
                free(value);
                return -E2BIG;
        }
        if (found) {
                free(inv->fields[i].value);
                inv->fields[i].value = value;
                inv->bytes = inv->bytes - old + strlen(name) + vlen;
                return 0;
        }
        if (inv->n == inv->cap) {
                size_t cap = inv->cap ? inv->cap * 2 : 64;
                struct inventory_field *f = realloc(inv->fields, cap * sizeof(*f));
                if (!f) {
                        free(value);
                        return -ENOMEM;
                }
                inv->fields = f;
                inv->cap = cap;
        }
        char *n = strdup(name);
        if (!n) {
                free(value);
                return -ENOMEM;
        }
        memmove(&inv->fields[i + 1], &inv->fields[i], (inv->n - i) * sizeof(*inv->fields));
        inv->fields[i] = (struct inventory_field){ n, value };
        inv->n++;
        inv->bytes += strlen(name) + vlen;
        return 0;
}

int inventory_set(struct inventory *inv, const char *name, const char *value) {
        char why[NAME_WHY_MAX];
        if (!name_ok(&inventory_name_field, name, why))
                return -EINVAL;
        /* text_copy_utf8() makes each refused byte one '?' and cuts between characters: the
         * copy is never longer than the value, or than the bound with the mark after it. */
        size_t len = strlen(value);
        bool cut = len > INVENTORY_MAX_VALUE;
        char *v = malloc(cut ? INVENTORY_MAX_VALUE + 1 : len + 1);
        if (!v)
                return -ENOMEM;
        text_copy_utf8(value, v, cut ? INVENTORY_MAX_VALUE - strlen(CUT_MARK) + 1 : len + 1);
        if (cut)
                strcat(v, CUT_MARK);
        int r = put(inv, name, v);
        if (r == -E2BIG) {
                inv->dropped++;
                return 0;
        }
        return r;
}

int inventory_setf(struct inventory *inv, const char *name, const char *fmt, ...) {
        char *v = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&v, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        r = inventory_set(inv, name, v);
        free(v);
        return r;
}

int inventory_merge(struct inventory *inv, const struct inventory *src) {
        for (size_t i = 0; i < src->n; i++) {
                char *v = strdup(src->fields[i].value);
                int r = v ? put(inv, src->fields[i].name, v) : -ENOMEM;
                if (r < 0)
                        return r;
        }
        return 0;
}

bool inventory_equal(const struct inventory *a, const struct inventory *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->fields[i].name, b->fields[i].name) != 0 ||
                    strcmp(a->fields[i].value, b->fields[i].value) != 0)
                        return false;
        return true;
}

int inventory_diff(const struct inventory *a, const struct inventory *b,
                   struct inventory_change **ret, size_t *ret_n) {
        struct inventory_change *v = calloc(a->n + b->n + 1, sizeof(*v));
        size_t i = 0, j = 0, n = 0;
        if (!v)
                return -ENOMEM;
        /* Both are sorted by name: one merge. */
        while (i < a->n || j < b->n) {
                int c = i == a->n   ? 1
                        : j == b->n ? -1
                                    : strcmp(a->fields[i].name, b->fields[j].name);
                if (c < 0) {
                        v[n++] = (struct inventory_change){ a->fields[i].name, a->fields[i].value,
                                                            NULL };
                        i++;
                } else if (c > 0) {
                        v[n++] = (struct inventory_change){ b->fields[j].name, NULL,
                                                            b->fields[j].value };
                        j++;
                } else {
                        if (strcmp(a->fields[i].value, b->fields[j].value) != 0)
                                v[n++] = (struct inventory_change){ a->fields[i].name,
                                                                    a->fields[i].value,
                                                                    b->fields[j].value };
                        i++;
                        j++;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* A text being written into a buffer of fixed size. */
struct bounded {
        char *buf;
        size_t size, used;
        bool cut;
};

/* Appends text; once it does not fit, cut between characters with "...", and nothing more
 * after that. */
static void bounded_add(struct bounded *b, const char *text) {
        size_t len = strlen(text), mark = strlen(CUT_MARK);
        if (b->cut)
                return;
        if (b->used + len + mark < b->size) {
                memcpy(b->buf + b->used, text, len + 1);
                b->used += len;
                return;
        }
        size_t room = b->size - 1 - mark - b->used;
        while (room > 0 && ((unsigned char) text[room] & 0xc0) == 0x80)
                room--; /* not inside a UTF-8 character */
        memcpy(b->buf + b->used, text, room);
        memcpy(b->buf + b->used + room, CUT_MARK, mark + 1);
        b->used += room + mark;
        b->cut = true;
}

int inventory_describe_changes(const struct inventory *a, const struct inventory *b,
                               uint64_t version, char *buf, size_t size, size_t *ret_n) {
        struct bounded t = { buf, size, 0, false };
        struct inventory_change *ch;
        size_t n;
        char head[64];
        if (size < sizeof(head))
                return -ENOBUFS;
        int r = inventory_diff(a, b, &ch, &n);
        if (r < 0)
                return r;
        snprintf(head, sizeof(head),
                 "version %llu, %zu field(s) changed: ", (unsigned long long) version, n);
        buf[0] = '\0';
        bounded_add(&t, head);
        for (size_t i = 0; i < n; i++) {
                bounded_add(&t, i ? "; " : "");
                bounded_add(&t, ch[i].name);
                bounded_add(&t, ": ");
                bounded_add(&t, ch[i].old_value ?: "(none)");
                bounded_add(&t, " -> ");
                bounded_add(&t, ch[i].new_value ?: "(none)");
        }
        free(ch);
        *ret_n = n;
        return 0;
}

json_t *inventory_to_json(const struct inventory *inv) {
        json_t *o = json_object();
        for (size_t i = 0; o && i < inv->n; i++)
                if (json_object_set_new(o, inv->fields[i].name, json_string(inv->fields[i].value)) <
                    0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

char *inventory_to_text(const struct inventory *inv) {
        json_t *o = inventory_to_json(inv);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return t;
}

int inventory_digest(const struct inventory *inv, char ret[static 65]) {
        _cleanup_free_ char *t = inventory_to_text(inv);
        if (!t)
                return -ENOMEM;
        sha256_hex(t, strlen(t), ret);
        return 0;
}

/* One member of an object being read: its name and value checked. */
static int take(struct inventory *inv, const char *name, json_t *v, char *why) {
        char w[NAME_WHY_MAX > TEXT_WHY_MAX ? NAME_WHY_MAX : TEXT_WHY_MAX], shown[96];
        if (!name_ok(&inventory_name_field, name, w)) {
                snprintf(why, INVENTORY_WHY_MAX, "{%s}: %s", text_escape(name, shown, 64), w);
                return -EBADMSG;
        }
        if (!json_is_string(v)) {
                snprintf(why, INVENTORY_WHY_MAX, "%s: not a string", name);
                return -EBADMSG;
        }
        if (!text_ok(json_string_value(v), false, w)) {
                snprintf(why, INVENTORY_WHY_MAX, "%s: %s", name, w);
                return -EBADMSG;
        }
        if (json_string_length(v) > INVENTORY_MAX_VALUE) {
                snprintf(why, INVENTORY_WHY_MAX, "%s: length %zu is more than %d", name,
                         json_string_length(v), INVENTORY_MAX_VALUE);
                return -EBADMSG;
        }
        char *value = strdup(json_string_value(v));
        if (!value)
                return -ENOMEM;
        int r = put(inv, name, value);
        if (r == -E2BIG)
                snprintf(why, INVENTORY_WHY_MAX,
                         "%s: the fields hold more than %d bytes of names and values", name,
                         INVENTORY_MAX_TOTAL);
        return r == -E2BIG ? -EBADMSG : r;
}

int inventory_from_json(json_t *o, struct inventory *ret, char why[static INVENTORY_WHY_MAX]) {
        struct inventory inv = {};
        const char *name;
        json_t *v;
        if (!json_is_object(o)) {
                snprintf(why, INVENTORY_WHY_MAX, "not an object");
                return -EBADMSG;
        }
        if (json_object_size(o) > INVENTORY_MAX_FIELDS) {
                snprintf(why, INVENTORY_WHY_MAX, "%zu fields, at most %d allowed",
                         json_object_size(o), INVENTORY_MAX_FIELDS);
                return -EBADMSG;
        }
        json_object_foreach (o, name, v) {
                int r = take(&inv, name, v, why);
                if (r < 0) {
                        inventory_done(&inv);
                        return r;
                }
        }
        *ret = inv;
        return 0;
}

int inventory_from_text(const char *text, struct inventory *ret,
                        char why[static INVENTORY_WHY_MAX]) {
        json_error_t je;
        json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (!o) {
                snprintf(why, INVENTORY_WHY_MAX, "not JSON: %.80s", je.text);
                return -EBADMSG;
        }
        int r = inventory_from_json(o, ret, why);
        json_decref(o);
        return r;
}

static json_t *string_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

json_t *inventory_changes_to_json(const struct inventory_change *v, size_t n, const char *from_key,
                                  const char *to_key) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, json_pack("{s:s, s:o, s:o}", "name", v[i].name,
                                                       from_key, string_or_null(v[i].old_value),
                                                       to_key, string_or_null(v[i].new_value))) <
                    0) {
                        json_decref(a);
                        a = NULL;
                }
        return a;
}
