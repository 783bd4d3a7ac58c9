/* SPDX-License-Identifier: MIT */
/* The inventory section of a machine's page: what the machine is now, as its latest run
 * found it, and each change before, newest first ("dmi.bios_version 1.2.3 → 1.2.5"). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "dash-internal.h"
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

static void put_change(struct dash *x, const struct farm_inventory_history *h,
                       const struct farm_inventory_change *c) {
        FILE *f = x->f;
        const struct farm_inventory_version *to = &h->versions[c->to];
        fputs("<li>", f);
        dash_put_stamp(x, to->time_ns, to->received_ns);
        fprintf(f, " <span class=\"note\">(run %" PRId64 ", version %" PRIu64 ")</span>: ", to->run,
                to->version);
        for (size_t i = 0; i < c->n; i++) {
                fputs(i ? "; <code>" : "<code>", f);
                dash_esc(f, c->v[i].name);
                fputs("</code> ", f);
                put_value(f, c->v[i].old_value);
                fputs(" → ", f);
                put_value(f, c->v[i].new_value);
        }
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
