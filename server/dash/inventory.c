/* SPDX-License-Identifier: MIT */
/* The inventory section of a machine's page: what the machine is now, as its latest run
 * found it, and each change before, newest first ("dmi.bios_version 1.2.3 → 1.2.5"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "dash-internal.h"
#include "comparison.h"
#include "machines.h"

int dash_inventory_load(struct dash *x, const char *id, struct farm_inventory_history *ret) {
        char err[FARM_ERROR_MAX];
        struct farm_clock_view cv = dash_clock_view(x);
        int r = farm_machine_inventory(x->db, id, &(struct farm_page){ LIST_MAX, 0 }, &cv, ret,
                                       err);
        return dash_machine_read(x, r, err);
}

static void put_value(FILE *f, const char *v) {
        if (v) {
                fputs("<code>", f);
                dash_esc(f, v);
                fputs("</code>", f);
        } else
                fputs("<span class=\"note\">absent</span>", f);
}

/* Each field that differs: "<code>name</code> old BETWEEN new AFTER", separated by "; ". */
static void put_changes(FILE *f, const struct inventory_change *v, size_t n, const char *between,
                        const char *after) {
        for (size_t i = 0; i < n; i++) {
                fputs(i ? "; <code>" : "<code>", f);
                dash_esc(f, v[i].name);
                fputs("</code> ", f);
                put_value(f, v[i].old_value);
                fputs(between, f);
                put_value(f, v[i].new_value);
                fputs(after, f);
        }
}

static void put_change(struct dash *x, const struct farm_inventory_history *h,
                       const struct farm_inventory_change *c) {
        FILE *f = x->f;
        const struct farm_inventory_version *to = &h->versions[c->to];
        fputs("<li>", f);
        dash_put_stamp(x, to->time_ns, to->received_ns);
        fprintf(f, " <span class=\"note\">(run %" PRId64 ", version %" PRIu64 ")</span>: ", to->run,
                to->version);
        put_changes(f, c->v, c->n, " → ", "");
        fputs("</li>\n", f);
}

void dash_inventory_section(struct dash *x, const struct farm_inventory_history *h) {
        FILE *f = x->f;
        fputs("<h2 id=\"inventory\">Inventory</h2>\n", f);
        if (!h->nversions) {
                fputs("<p>No inventory reported yet (an rtsoakd older than the inventory sends "
                      "none).</p>\n",
                      f);
                return;
        }
        const struct farm_inventory_version *cur = &h->versions[h->nversions - 1];
        fprintf(f, "<p>As run %" PRId64 " found it (version %" PRIu64 ", ", cur->run, cur->version);
        dash_put_stamp(x, cur->time_ns, cur->received_ns);
        fprintf(f,
                "): %zu field%s.</p>\n<details><summary>Fields</summary><div class=\"scroll\">"
                "<table class=\"inventory\"><tr><th>field</th><th>value</th></tr>\n",
                cur->fields.n, cur->fields.n == 1 ? "" : "s");
        for (size_t i = 0; i < cur->fields.n; i++) {
                fputs("<tr><td><code>", f);
                dash_esc(f, cur->fields.fields[i].name);
                fputs("</code></td><td><code>", f);
                dash_esc(f, cur->fields.fields[i].value);
                fputs("</code></td></tr>\n", f);
        }
        fputs("</table></div></details>\n", f);
        fprintf(f, "<h3 id=\"inventory-changes\">Changes (%" PRIu64 ")</h3>\n", h->total_changes);
        if (!h->total_changes) {
                fputs("<p>None since its first report.</p>\n", f);
                return;
        }
        fputs("<ul class=\"changes\">\n", f);
        for (size_t i = 0; i < h->nchanges; i++)
                put_change(x, h, &h->changes[i]);
        fputs("</ul>\n", f);
        if (h->total_changes > h->nchanges)
                fprintf(f,
                        "<p class=\"note\">%" PRIu64 " earlier change(s) not shown: see "
                        "<code>/api/v1/machines/ID/inventory</code>.</p>\n",
                        h->total_changes - h->nchanges);
}

void dash_inventory_differences(struct dash *x, const struct farm_verdict *v,
                                const struct farm_comparison *cmp) {
        FILE *f = x->f;
        char nb[16];
        fprintf(f, "<h3 id=\"inventory-differences\">Inventory differences (%zu machine%s)</h3>\n",
                cmp->ndiff, cmp->ndiff == 1 ? "" : "s");
        if (!cmp->ndiff) {
                fputs("<p>None: each machine that ran both kernels was the same system (as far as "
                      "its runs sent an inventory).</p>\n",
                      f);
                return;
        }
        fputs("<ul class=\"changes\">\n", f);
        for (size_t i = 0; i < cmp->ndiff; i++) {
                const struct farm_inventory_difference *d = &cmp->diff[i];
                const char *id = cmp->inv[0][d->a].machine;
                const struct farm_verdict_machine *vm = dash_verdict_machine(v, id);
                fputs("<li>", f);
                dash_esc(f, dash_name(id, vm ? vm->hostname : NULL, nb));
                fputs(": ", f);
                put_changes(f, d->v, d->n, " here, ", " in the other");
                fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
}
