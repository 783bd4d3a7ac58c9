/* SPDX-License-Identifier: MIT */
/* The JSON that the query routes' answers share: a refusal's error object, a 200 with its
 * object, the fields of a page (with the path of the next one) and of a machine's window. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer-json.h"
#include "json-time.h"
#include "query-internal.h"
#include "text-safe.h"
#include "text-stream.h"

json_t *farm_error_json(const char *msg) {
        char safe[FARM_ERROR_MAX];
        return json_pack("{s:s}", "error", text_copy_utf8(msg, safe, sizeof(safe)));
}

void farm_api_json(struct farm_answer *a, json_t *j) {
        if (!j) {
                snprintf(a->err, sizeof(a->err), "out of memory building the answer");
                query_internal(a, -ENOMEM);
                return;
        }
        a->status = 200;
        a->json = j;
}

/* A growing string: on failure it becomes NULL and stays so. */
struct sbuf {
        char *s;
        size_t len, size;
};

static void sb_put(struct sbuf *b, const char *s, bool encode) {
        for (const unsigned char *p = (const unsigned char *) s; b->s && *p; p++) {
                if (b->len + 4 >= b->size) {
                        size_t n = b->size * 2 + 64;
                        char *t = realloc(b->s, n);
                        if (!t) {
                                free(b->s);
                                b->s = NULL;
                                return;
                        }
                        b->s = t;
                        b->size = n;
                }
                if (!encode || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~')
                        b->s[b->len++] = (char) *p;
                else
                        b->len += (size_t) snprintf(b->s + b->len, b->size - b->len, "%%%02X", *p);
                b->s[b->len] = '\0';
        }
}

/* Adds "total", "limit", "offset" and "next" to o: next is the path and query of the next
 * page (the same parameters, percent-encoded, with the offset moved on), or null on the last
 * page. */
int farm_api_add_page(json_t *o, const char *path, const struct farm_args *args,
                      const struct farm_page *page, uint64_t total) {
        json_t *next;
        if (page->offset + page->limit < total) {
                struct sbuf b = { .s = calloc(1, 64), .size = 64 };
                char num[96];
                sb_put(&b, path, false);
                sb_put(&b, "?", false);
                for (unsigned i = 0; i < args->n; i++) {
                        if (strcmp(args->a[i].name, "limit") == 0 ||
                            strcmp(args->a[i].name, "offset") == 0)
                                continue;
                        sb_put(&b, args->a[i].name, true);
                        sb_put(&b, "=", false);
                        sb_put(&b, args->a[i].value ?: "", true);
                        sb_put(&b, "&", false);
                }
                snprintf(num, sizeof(num), "limit=%" PRIu64 "&offset=%" PRIu64, page->limit,
                         page->offset + page->limit);
                sb_put(&b, num, false);
                if (!b.s)
                        return -ENOMEM;
                next = json_string(b.s);
                free(b.s);
        } else
                next = json_null();
        if (json_object_set_new(o, "total", json_integer((json_int_t) total)) < 0 ||
            json_object_set_new(o, "limit", json_integer((json_int_t) page->limit)) < 0 ||
            json_object_set_new(o, "offset", json_integer((json_int_t) page->offset)) < 0 ||
            json_object_set_new(o, "next", next) < 0)
                return -ENOMEM;
        return 0;
}

void farm_api_list_answer(struct farm_answer *a, json_t *o, const char *key, json_t *list,
                          const char *path, const struct farm_args *args,
                          const struct farm_page *page, uint64_t total) {
        if (!o || !list || json_object_set_new(o, key, list) < 0 ||
            farm_api_add_page(o, path, args, page, total) < 0) {
                if (!o)
                        json_decref(list);
                json_decref(o);
                farm_api_json(a, NULL);
                return;
        }
        farm_api_json(a, o);
}

int farm_api_window_fields(json_t *o, const char *machine, int64_t from, int64_t to, int64_t cpu,
                           const char *scenario) {
        return json_object_update_new(
                o, json_pack("{s:s, s:I, s:o, s:I, s:o, s:o, s:o}", "machine", machine, "from_ns",
                             (json_int_t) from, "from", json_time(from), "to_ns", (json_int_t) to,
                             "to", json_time(to), "cpu", cpu >= 0 ? json_integer(cpu) : json_null(),
                             "scenario", scenario ? json_string(scenario) : json_null()));
}

void farm_api_json_spliced(struct farm_answer *a, json_t *o, const struct farm_api_splice *splices,
                           size_t n) {
        char *head = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        char *text = NULL;
        size_t len = 0;
        FILE *f = head ? text_stream_open(&text, &len) : NULL;
        bool ok = f != NULL;
        const char *p = head;
        for (size_t i = 0; ok && i < n; i++) {
                /* Strings in the head are escaped: "key":null can only be the value's place. */
                char marker[128];
                snprintf(marker, sizeof(marker), "\"%s\":null", splices[i].key);
                const char *at = strstr(p, marker);
                if (!at) {
                        ok = false;
                        break;
                }
                fprintf(f, "%.*s\"%s\":", (int) (at - p), p, splices[i].key);
                if (splices[i].list)
                        fprintf(f, "[%s]", splices[i].text ?: "");
                else
                        fputs(splices[i].text ?: "null", f);
                p = at + strlen(marker);
        }
        if (ok)
                fputs(p, f);
        if (f && fclose(f) != 0)
                ok = false;
        free(head);
        if (!ok) {
                free(text);
                farm_api_json(a, NULL);
                return;
        }
        a->status = 200;
        a->text = text;
        a->content_type = "application/json";
}
