/* SPDX-License-Identifier: MIT */
/* A small scanner of JSON text that keeps the stack of objects and arrays it is in. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "json-path.h"
#include "macro.h"

#define DEPTH_MAX 32
#define KEY_MAX 64

struct level {
        bool object;
        bool want_key; /* in an object: a member name comes next */
        size_t index;  /* in an array: of the element being read */
        char key[KEY_MAX];
};

struct scan {
        struct level v[DEPTH_MAX];
        size_t depth, deeper; /* levels kept, and those past DEPTH_MAX */
        bool in_name;         /* the position is inside a member name */
};

/* Reads the string at text[*i] ('"') up to its end or end; a member name is kept in key, each
 * byte but printable ASCII as '?' (a path goes into messages). */
static void read_string(const char *text, size_t end, size_t *i, char *key) {
        size_t k = 0;
        for ((*i)++; *i < end && text[*i] != '"'; (*i)++) {
                unsigned char c = (unsigned char) text[*i];
                if (c == '\\' && *i + 1 < end) {
                        /* An escape is one character, shown as '?'. */
                        c = '?';
                        *i += text[*i + 1] == 'u' ? MIN((size_t) 5, end - *i - 1) : 1;
                }
                if (key && k + 1 < KEY_MAX)
                        key[k++] = c >= 0x20 && c < 0x7f ? (char) c : '?';
        }
        if (key)
                key[k] = '\0';
}

static void open_level(struct scan *s, bool object) {
        if (s->depth == DEPTH_MAX) {
                s->deeper++;
                return;
        }
        s->v[s->depth++] = (struct level){ .object = object, .want_key = object };
}

static void close_level(struct scan *s) {
        if (s->deeper)
                s->deeper--;
        else if (s->depth)
                s->depth--;
}

static void scan_to(struct scan *s, const char *text, size_t end) {
        for (size_t i = 0; i < end; i++) {
                struct level *top = s->depth && !s->deeper ? &s->v[s->depth - 1] : NULL;
                switch (text[i]) {
                case '{':
                case '[':
                        open_level(s, text[i] == '{');
                        break;
                case '}':
                case ']':
                        close_level(s);
                        break;
                case ',':
                        if (top && top->object)
                                top->want_key = true;
                        else if (top)
                                top->index++;
                        break;
                case '"': {
                        bool name = top && top->object && top->want_key;
                        read_string(text, end, &i, name ? top->key : NULL);
                        if (name) {
                                top->want_key = false;
                                s->in_name = i >= end;
                        }
                        break;
                }
                default:
                        break;
                }
        }
}

char *json_path_at(const char *text, size_t len, size_t position, char path[static JSON_PATH_MAX]) {
        struct scan s = {};
        size_t o = 0;
        scan_to(&s, text, position < len ? position : len);
        path[0] = '\0';
        for (size_t l = 0; l < s.depth && o < JSON_PATH_MAX; l++) {
                const struct level *v = &s.v[l];
                bool last = l + 1 == s.depth;
                if (!v->object)
                        o += (size_t) snprintf(path + o, JSON_PATH_MAX - o, "[%zu]", v->index);
                else if (last && s.in_name)
                        o += (size_t) snprintf(path + o, JSON_PATH_MAX - o, "%s{name}",
                                               o ? "." : "");
                else if (!v->want_key || !last)
                        o += (size_t) snprintf(path + o, JSON_PATH_MAX - o, "%s%s", o ? "." : "",
                                               v->key);
        }
        if (s.deeper && o < JSON_PATH_MAX)
                snprintf(path + o, JSON_PATH_MAX - o, "...");
        return path;
}
