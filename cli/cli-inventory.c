/* SPDX-License-Identifier: MIT */
/* rtsoak inventory: what the machine was in a run (its newest version, every field) and how it
 * changed during it (each version's changes and when they took effect); its line in status. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-inventory.h"
#include "cli-output.h"
#include "log.h"
#include "timeutil.h"

static json_t *changes_json(const struct inventory *a, const struct inventory *b) {
        struct inventory_change *ch;
        size_t n;
        json_t *list = json_array();
        if (!list || inventory_diff(a, b, &ch, &n) < 0) {
                json_decref(list);
                return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_object();
                json_object_set_new(c, "field", json_string(ch[i].name));
                json_object_set_new(c, "old",
                                    ch[i].old_value ? json_string(ch[i].old_value) : json_null());
                json_object_set_new(c, "new",
                                    ch[i].new_value ? json_string(ch[i].new_value) : json_null());
                json_array_append_new(list, c);
        }
        free(ch);
        return list;
}

static int print_inventory_json(const struct store_inventory_row *v, size_t n) {
        const struct store_inventory_row *last = &v[n - 1];
        json_t *doc = json_object(), *history = json_array();
        json_object_set_new(doc, "run", json_integer(last->run_id));
        json_object_set_new(doc, "version", json_u64(last->version));
        json_set_time(doc, "time_ns", last->time_ns);
        json_object_set_new(doc, "fields", inventory_to_json(&last->fields));
        for (size_t i = 0; i < n; i++) {
                json_t *h = json_object();
                json_object_set_new(h, "version", json_u64(v[i].version));
                json_set_time(h, "time_ns", v[i].time_ns);
                json_set_time(h, "after_ns", v[i].after_ns ?: JSON_TIME_NONE);
                json_object_set_new(h, "changes",
                                    i ? changes_json(&v[i - 1].fields, &v[i].fields)
                                      : json_array());
                json_array_append_new(history, h);
        }
        json_object_set_new(doc, "history", history);
        int r = print_json(doc);
        json_decref(doc);
        return r;
}

static void print_changes(const struct store_inventory_row *a,
                          const struct store_inventory_row *b) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        struct inventory_change *ch;
        size_t n;
        if (inventory_diff(&a->fields, &b->fields, &ch, &n) < 0) {
                log_oom();
                return;
        }
        printf("  version %" PRIu64 ", between %s and %s:\n", b->version,
               format_timestamp_local(t1, b->after_ns ?: a->time_ns),
               format_timestamp_local(t2, b->time_ns));
        for (size_t i = 0; i < n; i++)
                printf("    %s: %s -> %s\n", ch[i].name,
                       ch[i].old_value ? cli_text(ch[i].old_value) : "(none)",
                       ch[i].new_value ? cli_text(ch[i].new_value) : "(none)");
        free(ch);
}

int cli_inventory(store *s, int64_t run_id, bool json) {
        struct store_inventory_row last, *v = NULL;
        char t[TIMESTAMP_MAX_LEN];
        size_t n = 0, width = 0;
        /* The newest run that has one, unless the command line named a run. */
        int r = store_get_inventory(s, run_id, &last);
        if (r >= 0) {
                run_id = last.run_id;
                store_inventory_row_done(&last);
                r = store_list_inventory(s, run_id, &v, &n);
        }
        if (r < 0) {
                log_error("%s", store_error(s));
                return r;
        }
        if (json) {
                r = print_inventory_json(v, n);
                store_inventory_rows_free(v, n);
                return r;
        }
        const struct store_inventory_row *cur = &v[n - 1];
        printf("Run %" PRId64 ": inventory version %" PRIu64 " of %zu fields, found %s\n",
               cur->run_id, cur->version, cur->fields.n, format_timestamp_local(t, cur->time_ns));
        for (size_t i = 0; i < cur->fields.n; i++)
                width = MAX(width, strlen(cur->fields.fields[i].name));
        for (size_t i = 0; i < cur->fields.n; i++)
                printf("  %-*s  %s\n", (int) width, cur->fields.fields[i].name,
                       cli_text(cur->fields.fields[i].value));
        printf("\n%s\n", n > 1 ? "Changes during the run:" : "No change during the run.");
        for (size_t i = 1; i < n; i++)
                print_changes(&v[i - 1], &v[i]);
        store_inventory_rows_free(v, n);
        return 0;
}

json_t *cli_inventory_status_json(store *s, int64_t run_id) {
        struct store_inventory_row cur;
        char digest[65];
        if (store_get_inventory(s, run_id, &cur) < 0 || inventory_digest(&cur.fields, digest) < 0)
                return json_null();
        json_t *o = json_object();
        json_object_set_new(o, "version", json_u64(cur.version));
        json_set_time(o, "time_ns", cur.time_ns);
        json_object_set_new(o, "fields", json_u64(cur.fields.n));
        json_object_set_new(o, "digest", json_string(digest));
        store_inventory_row_done(&cur);
        return o;
}

void cli_inventory_status_print(store *s, int64_t run_id) {
        struct store_inventory_row cur;
        char t[TIMESTAMP_MAX_LEN];
        if (store_get_inventory(s, run_id, &cur) < 0) {
                printf("  Inventory: not recorded\n");
                return;
        }
        printf("  Inventory: version %" PRIu64 " of %zu fields, found %s (%s%s)\n", cur.version,
               cur.fields.n, format_timestamp_local(t, cur.time_ns),
               cur.version > 1 ? "changed during the run; " : "", "rtsoak inventory");
        store_inventory_row_done(&cur);
}
