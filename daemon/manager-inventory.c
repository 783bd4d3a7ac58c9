/* SPDX-License-Identifier: MIT */
/* The machine's inventory in the run: read at its start (version 1, an "inventory" event), checked
 * every [Inventory] Check= and at each reload, a change recorded as the next version with an
 * "inventory_changed" event naming the fields; each version reaches the farm with its event. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "timeutil.h"

/* What an event's message says of a change, within the summary's bound on a message. */
#define CHANGE_MESSAGE_MAX 4000

int manager_inventory_read_boot(struct manager *m) {
        int r = inventory_read_boot(NULL, &m->inv.boot);
        if (r < 0)
                return log_error_errno(r, "Failed to read the machine's inventory: %m");
        return 0;
}

/* The inventory now: what was read at the start, and what can change read again. */
static int read_now(struct manager *m, struct inventory *ret) {
        int r = inventory_read_live(NULL, ret);
        if (r >= 0)
                r = inventory_merge(ret, &m->inv.boot);
        /* What the operator declares of the tested tree. */
        if (r >= 0 && *m->cfg.upload_git_url)
                r = inventory_set(ret, "kernel.git_url", m->cfg.upload_git_url);
        if (r >= 0 && *m->cfg.upload_git_commit)
                r = inventory_set(ret, "kernel.git_commit", m->cfg.upload_git_commit);
        if (r >= 0 && ret->dropped + m->inv.boot.dropped > 0 && !m->inv.told_dropped) {
                log_notice("The machine's inventory holds more than %d fields or %d bytes: %zu "
                           "field(s) left out",
                           INVENTORY_MAX_FIELDS, INVENTORY_MAX_TOTAL,
                           ret->dropped + m->inv.boot.dropped);
                m->inv.told_dropped = true;
        }
        return r;
}

/* Stores inv as the next version, found at now (the check before at after), with its event. */
static int record(struct manager *m, struct inventory *inv, int64_t now, int64_t after,
                  const char *type, const char *message) {
        char digest[65], details[160];
        int r = inventory_digest(inv, digest);
        if (r < 0)
                return log_oom();
        struct store_inventory_row row = {
                .run_id = m->run.id,
                .version = m->inv.version + 1,
                .time_ns = now,
                .after_ns = after,
                .fields = *inv,
        };
        snprintf(details, sizeof(details),
                 "{\"version\":%" PRIu64 ",\"fields\":%zu,\"digest\":\"%s\"}", row.version, inv->n,
                 digest);
        struct store_event ev = {
                .time_ns = now,
                .type = type,
                .cpu = -1,
                .value_ns = -1,
                .message = message,
                .details = details,
        };
        heartbeat_enter(&m->sd.hb_storage);
        r = store_add_inventory(m->run.store, &row, &ev);
        heartbeat_leave(&m->sd.hb_storage);
        if (r < 0) {
                log_error("Failed to store the machine's inventory: %s", store_error(m->run.store));
                return r;
        }
        inventory_done(&m->inv.current);
        m->inv.current = *inv;
        *inv = (struct inventory){};
        m->inv.version = row.version;
        m->inv.last_check_ns = now;
        return 0;
}

int manager_inventory_record_first(struct manager *m) {
        struct inventory inv = {};
        char msg[128];
        int r = read_now(m, &inv);
        if (r < 0) {
                inventory_done(&inv);
                return log_error_errno(r, "Failed to read the machine's inventory: %m");
        }
        snprintf(msg, sizeof(msg), "version 1, %zu fields", inv.n);
        r = record(m, &inv, now_ns(CLOCK_REALTIME), 0, "inventory", msg);
        inventory_done(&inv);
        if (r >= 0)
                log_info("Machine inventory: %zu fields (rtsoak inventory shows them)",
                         m->inv.current.n);
        /* A run without its inventory still measures: the next check records it. */
        return 0;
}

void manager_inventory_check(struct manager *m, const char *why) {
        _cleanup_free_ char *msg = malloc(CHANGE_MESSAGE_MAX);
        struct inventory inv = {};
        int64_t now = now_ns(CLOCK_REALTIME);
        size_t n = 0;
        int r = msg ? read_now(m, &inv) : -ENOMEM;
        if (r < 0) {
                log_warning_errno(r, "Failed to read the machine's inventory (%s), ignoring: %m",
                                  why);
                goto out;
        }
        if (m->inv.version > 0 && inventory_equal(&inv, &m->inv.current)) {
                m->inv.last_check_ns = now;
                goto out;
        }
        if (m->inv.version == 0) {
                /* The start could not store it: this is the first. */
                snprintf(msg, CHANGE_MESSAGE_MAX, "version 1, %zu fields", inv.n);
                (void) record(m, &inv, now, 0, "inventory", msg);
                goto out;
        }
        r = inventory_describe_changes(&m->inv.current, &inv, m->inv.version + 1, msg,
                                       CHANGE_MESSAGE_MAX, &n);
        if (r < 0) {
                log_oom();
                goto out;
        }
        log_notice("The machine's inventory changed (found at %s): %s", why, msg);
        (void) record(m, &inv, now, m->inv.last_check_ns, "inventory_changed", msg);
out:
        inventory_done(&inv);
}

static int on_inventory_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        manager_inventory_check(m, "a periodic check");
        int r = sd_event_source_set_time(s, usec + m->cfg.inventory_check_ns / 1000);
        return r < 0 ? r : sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

int manager_inventory_arm(struct manager *m) {
        m->inv.timer = sd_event_source_disable_unref(m->inv.timer);
        if (m->cfg.inventory_check_ns == 0)
                return 0;
        /* A check costs the main thread a few milliseconds: its second is good enough. */
        int r = sd_event_add_time_relative(m->loop.event, &m->inv.timer, CLOCK_MONOTONIC,
                                           m->cfg.inventory_check_ns / 1000, 1000 * 1000,
                                           on_inventory_timer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the inventory check: %m");
        return 0;
}

void manager_inventory_free(struct manager *m) {
        m->inv.timer = sd_event_source_disable_unref(m->inv.timer);
        inventory_done(&m->inv.boot);
        inventory_done(&m->inv.current);
}
