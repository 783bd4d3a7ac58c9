/* SPDX-License-Identifier: MIT */
/* rtsoak-server notifications: the notifications the server made, each with where it went
 * and what became of it, as text for people or --json; retry and test. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "notifications.h"
#include "channel.h"
#include "notify-store.h"
#include "notifier.h"
#include "timeutil.h"

static bool filter_ok(const struct cli_notify_filter *f, struct farm_page *page) {
        char perr[FARM_PARAM_ERROR_MAX];
        if (f->state && strcmp(f->state, "pending") != 0 && strcmp(f->state, "sent") != 0 &&
            strcmp(f->state, "failed") != 0) {
                log_error("Invalid --state '%s': expected pending, sent or failed", f->state);
                return false;
        }
        if (f->kind && notify_kind_from_name(f->kind) < 0) {
                log_error("Invalid --kind '%s': expected silence, violation, unclean_end, "
                          "load_down, probe_down, clock, overlap, verdict, waiver, latest_stable "
                          "or test",
                          f->kind);
                return false;
        }
        if (f->machine && !farm_machine_id_valid(f->machine)) {
                log_error("Invalid --machine '%s': expected 32 lowercase hex digits", f->machine);
                return false;
        }
        if (farm_param_page(f->limit ?: "50", NULL, page, perr) < 0) {
                log_error("Invalid --%s", perr);
                return false;
        }
        return true;
}

static void print_one(json_t *n) {
        struct notify_text text;
        json_t *d;
        size_t i;
        const char *created = json_string_value(json_object_get(n, "created"));
        bool ok = notify_render(n, "", &text) >= 0;
        printf("%6lld  %.19s  %-13s %-9s %s\n",
               (long long) json_integer_value(json_object_get(n, "id")), created ?: "",
               json_string_value(json_object_get(n, "kind")),
               json_string_value(json_object_get(n, "status")), ok ? text.title : "?");
        if (ok)
                notify_text_done(&text);
        json_array_foreach (json_object_get(n, "deliveries"), i, d) {
                const char *err = json_string_value(json_object_get(d, "error"));
                printf("        delivery %lld to %s: %s after %lld attempt(s)%s%s\n",
                       (long long) json_integer_value(json_object_get(d, "id")),
                       json_string_value(json_object_get(d, "channel")),
                       json_string_value(json_object_get(d, "state")),
                       (long long) json_integer_value(json_object_get(d, "attempts")),
                       err ? ": " : "", err ?: "");
        }
        if (json_array_size(json_object_get(n, "deliveries")) == 0)
                printf("        no channel takes it\n");
}

int cli_notifications_list(const struct server_options *o, char **args, int n) {
        const struct cli_notify_filter *f = &o->notify_filter;
        char err[FARM_ERROR_MAX];
        struct farm_page page;
        struct notify_filter nf = { f->state, f->kind, f->machine, f->release };
        farm_db *db = NULL;
        json_t *j = NULL, *x;
        size_t i;
        (void) args, (void) n;
        if (!filter_ok(f, &page))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = notify_store_list(db, &nf, &page, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot list the notifications: %s", err);
                return EXIT_FAILURE;
        }
        if (o->json) {
                r = cli_print_json(j);
                json_decref(j);
                return r;
        }
        json_array_foreach (json_object_get(j, "notifications"), i, x)
                print_one(x);
        long long total = json_integer_value(json_object_get(j, "total"));
        if ((size_t) total > json_array_size(json_object_get(j, "notifications")))
                printf("(%zu of %lld shown; --limit shows more)\n",
                       json_array_size(json_object_get(j, "notifications")), total);
        json_decref(j);
        return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int cli_notifications_retry(const struct server_options *o, char **args, int n) {
        const char *id_text = args[0];
        char err[FARM_ERROR_MAX], *end;
        farm_db *db = NULL;
        long long id = 0;
        if (strcmp(id_text, "failed") != 0) {
                errno = 0;
                id = strtoll(id_text, &end, 10);
                if (errno || *end || id <= 0) {
                        log_error("Invalid delivery '%s': expected a delivery's id (see "
                                  "rtsoak-server notifications --state failed) or \"failed\"",
                                  id_text);
                        return EXIT_USAGE;
                }
        }
        (void) n;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = notify_store_retry(db, id, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot send the deliveries again: %s", err);
                return EXIT_FAILURE;
        }
        if (r == 0 && id) {
                log_error("Delivery %lld is not a failed one", id);
                return EXIT_FAILURE;
        }
        log_info("%d failed deliver%s queued again; the server sends %s", r, r == 1 ? "y" : "ies",
                 r == 1 ? "it" : "them");
        return EXIT_SUCCESS;
}

int cli_notifications_test(const struct server_options *o, char **args, int n) {
        const char *channel = args[0];
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        int64_t id = 0;
        (void) n;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_notify_test(db, o->notify, channel, cli_who(o), now_ns(CLOCK_REALTIME), &id,
                                 err);
        farm_db_close(db);
        if (r == -ENOENT) {
                log_error("%s", err);
                return EXIT_USAGE;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot queue a test notification: %s", err);
                return EXIT_FAILURE;
        }
        printf("%" PRId64 "\n", id);
        log_info("Test notification %" PRId64 " queued for %s; the running server sends it (see "
                 "rtsoak-server notifications)",
                 id, channel);
        return EXIT_SUCCESS;
}
