/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's machine inventory: the fields each run sends at its start (--inventory), and
 * the changes found while a run is up (--inventory-change), as rtsoakd records them: a new
 * version of the run with an inventory_changed event naming the fields. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

/* How long before finding a change rtsoakd's check before it ran: [Inventory] Check='s
 * default. */
#define CHECK_NS ((int64_t) 300 * (int64_t) NSEC_PER_SEC)

/* NAME=VALUE (or -NAME when removal is allowed) into *name and *value (NULL: removed). */
static int split_field(const char *option, const char *s, bool removal, char **name, char **value) {
        char why[INVENTORY_WHY_MAX];
        const char *eq = strchr(s, '=');
        bool gone = removal && s[0] == '-' && !eq;
        if (!eq && !gone)
                return replay_usage_error(option, "'%s': expected NAME=VALUE%s", s,
                                          removal ? " or -NAME" : "");
        *name = gone ? strdup(s + 1) : strndup(s, (size_t) (eq - s));
        *value = gone ? NULL : strdup(eq + 1);
        if (!*name || (!gone && !*value))
                return replay_usage_error(option, "out of memory");
        /* The field must be one the summary's check takes. */
        struct inventory one = {};
        int r = inventory_set(&one, *name, gone ? "" : *value);
        bool cut = r >= 0 && strcmp(inventory_get(&one, *name) ?: "", gone ? "" : *value) != 0;
        inventory_done(&one);
        if (r < 0 || !name_ok(&inventory_name_field, *name, why))
                return replay_usage_error(option, "'%s': not a field name: %s", s,
                                          r == -ENOMEM ? "out of memory" : why);
        if (cut)
                return replay_usage_error(option, "'%s': not a line of at most %d bytes of text", s,
                                          INVENTORY_MAX_VALUE);
        return 0;
}

static int cmp_change(const void *a, const void *b) {
        const struct inv_change *x = a, *y = b;
        return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

int replay_parse_inventory(void) {
        const char *const *fields = replay_opt.inventory_args,
                          *const *changes = replay_opt.inventory_change_args;
        size_t nfields = replay_opt.ninventory_args, nchanges = replay_opt.ninventory_change_args;
        int64_t now = replay_opt.now_ns;
        int r;
        for (size_t i = 0; i < nfields; i++) {
                _cleanup_free_ char *name = NULL, *value = NULL;
                if ((r = split_field("--inventory", fields[i], false, &name, &value)) < 0)
                        return r;
                if (inventory_get(&replay_opt.inventory, name))
                        return replay_usage_error("--inventory", "'%s': %s given twice", fields[i],
                                                  name);
                if ((r = inventory_set(&replay_opt.inventory, name, value)) < 0 ||
                    replay_opt.inventory.dropped)
                        return replay_usage_error("--inventory",
                                                  "'%s': past the bounds of an "
                                                  "inventory (%d fields, %d bytes)",
                                                  fields[i], INVENTORY_MAX_FIELDS,
                                                  INVENTORY_MAX_TOTAL);
        }
        replay_opt.inv_changes = nchanges ? calloc(nchanges, sizeof(*replay_opt.inv_changes))
                                          : NULL;
        if (nchanges && !replay_opt.inv_changes)
                return replay_usage_error("--inventory-change", "out of memory");
        for (size_t i = 0; i < nchanges; i++) {
                struct inv_change *c = &replay_opt.inv_changes[replay_opt.ninv_changes++];
                const char *comma = strchr(changes[i], ',');
                char when[128];
                if (!comma || (size_t) (comma - changes[i]) >= sizeof(when))
                        return replay_usage_error("--inventory-change",
                                                  "'%s': expected TIME,NAME=VALUE or TIME,-NAME",
                                                  changes[i]);
                snprintf(when, sizeof(when), "%.*s", (int) (comma - changes[i]), changes[i]);
                if ((r = replay_parse_time("--inventory-change", when, now, &c->time_ns)) < 0 ||
                    (r = split_field("--inventory-change", comma + 1, true, &c->name, &c->value)) <
                            0)
                        return r;
        }
        if (replay_opt.ninv_changes)
                qsort(replay_opt.inv_changes, replay_opt.ninv_changes,
                      sizeof(*replay_opt.inv_changes), cmp_change);
        replay_opt.send_inventory = nfields > 0 || nchanges > 0;
        return 0;
}

/* Applies the changes before end to the machine's inventory; the time of the last applied. */
static int apply_until(struct mstate *ms, int64_t end, int64_t *ret_last) {
        *ret_last = INT64_MIN;
        while (ms->next_inv_change < replay_opt.ninv_changes &&
               replay_opt.inv_changes[ms->next_inv_change].time_ns < end) {
                const struct inv_change *c = &replay_opt.inv_changes[ms->next_inv_change++];
                if (!c->value)
                        inventory_remove(&ms->inv, c->name);
                else if (inventory_set(&ms->inv, c->name, c->value) < 0)
                        return -ENOMEM;
                *ret_last = c->time_ns;
        }
        return 0;
}

/* A new version of the run's inventory into the batch: the machine's as it is now. */
static int add_version(struct worker *w, struct mstate *ms, int64_t found_ns, int64_t after_ns) {
        struct summary_inventory *v = &w->invs[w->ninvs];
        *v = (struct summary_inventory){
                .version = ++ms->inv_version,
                .time_ns = found_ns + replay_clock_shift(found_ns),
                .after_ns = after_ns ? after_ns + replay_clock_shift(after_ns) : 0,
        };
        if (inventory_merge(&v->fields, &ms->inv) < 0) {
                inventory_done(&v->fields);
                return -ENOMEM;
        }
        w->ninvs++;
        ms->inv_found_ns = found_ns;
        return 0;
}

int replay_inventory_run_start(struct worker *w, struct mstate *ms) {
        int64_t last;
        if (!replay_opt.send_inventory)
                return 0;
        if (!ms->inv_begun && inventory_merge(&ms->inv, &replay_opt.inventory) < 0)
                return -ENOMEM;
        ms->inv_begun = true;
        ms->inv_version = 0;
        if (apply_until(ms, ms->run_start_ns, &last) < 0 ||
            add_version(w, ms, ms->run_start_ns, 0) < 0)
                return -ENOMEM;
        return replay_add_event(w, ms, ms->run_start_ns + replay_clock_shift(ms->run_start_ns),
                                "inventory", -1, -1, "version 1, %zu fields", ms->inv.n);
}

int replay_inventory_changes(struct worker *w, struct mstate *ms, int64_t end) {
        _cleanup_inventory_ struct inventory before = {};
        _cleanup_free_ char *msg = NULL;
        int64_t last;
        size_t n;
        if (!replay_opt.send_inventory || ms->next_inv_change >= replay_opt.ninv_changes ||
            replay_opt.inv_changes[ms->next_inv_change].time_ns >= end)
                return 0;
        if (inventory_merge(&before, &ms->inv) < 0 || apply_until(ms, end, &last) < 0)
                return -ENOMEM;
        if (inventory_equal(&before, &ms->inv))
                return 0;
        if (!(msg = malloc(4096)) ||
            inventory_describe_changes(&before, &ms->inv, ms->inv_version + 1, msg, 4096, &n) < 0)
                return -ENOMEM;
        /* Found by the check that follows the last of them; the check before ran CHECK_NS
         * earlier, or found the version before. */
        int64_t after = last - CHECK_NS > ms->inv_found_ns ? last - CHECK_NS : ms->inv_found_ns;
        if (add_version(w, ms, last, after) < 0)
                return -ENOMEM;
        return replay_add_event(w, ms, last + replay_clock_shift(last), "inventory_changed", -1, -1,
                                "%s", msg);
}

void replay_inventory_batch_clear(struct worker *w) {
        for (size_t i = 0; i < w->ninvs; i++)
                inventory_done(&w->invs[i].fields);
        w->ninvs = 0;
}
