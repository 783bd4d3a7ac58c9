/* SPDX-License-Identifier: MIT */
/* machine_changed (docs/verdict.md): a gating machine whose inventory changed, in a field the
 * rule counts (InventoryFields=), between two versions of the release's runs on it.  Its data
 * before and after are of two systems under one name, not one system's period: the problem
 * names the change, and a waiver of it says the operator takes the two as one. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventories.h"
#include "verdict-internal.h"

#define CHANGE_MESSAGE_MAX 1024

/* The fields of a and b that the rule counts, into ra and rb (for the message); across two
 * kernels, not those of the kernel itself. */
static int counted_only(const struct farm_rule *rule, bool across_kernels,
                        const struct inventory *a, const struct inventory *b, struct inventory *ra,
                        struct inventory *rb) {
        const struct inventory *src[2] = { a, b };
        struct inventory *dst[2] = { ra, rb };
        for (int k = 0; k < 2; k++)
                for (size_t i = 0; i < src[k]->n; i++)
                        if (farm_rule_inventory_counts(rule, src[k]->fields[i].name) &&
                            !(across_kernels &&
                              farm_inventory_field_of_kernel(src[k]->fields[i].name)) &&
                            inventory_set(dst[k], src[k]->fields[i].name, src[k]->fields[i].value) <
                                    0)
                                return -ENOMEM;
        return 0;
}

void vinventories_done(struct vctx *v) {
        for (int k = 0; k < 2; k++) {
                farm_machine_inventories_free(v->inv[k], v->ninv[k]);
                v->inv[k] = NULL;
                v->ninv[k] = 0;
        }
        free(v->inv_baseline);
        v->inv_baseline = NULL;
}

/* The inventories of the release and of baseline, read once per baseline (a release that
 * regressed on every machine and scenario read them per problem: problems x machines). */
static int inventories_against(struct vctx *v, const char *baseline) {
        if (v->inv_baseline && strcmp(v->inv_baseline, baseline) == 0)
                return 0;
        vinventories_done(v);
        for (int k = 0; k < 2; k++) {
                int r = farm_inventories_of_release(v->c, k ? baseline : v->release, v->at,
                                                    v->known, (int64_t) v->rule.clock_tolerance_ns,
                                                    &v->inv[k], &v->ninv[k], v->err);
                if (r < 0) {
                        vinventories_done(v);
                        return r;
                }
        }
        if (!(v->inv_baseline = strdup(baseline))) {
                vinventories_done(v);
                return -ENOMEM;
        }
        return 0;
}

int vinventory_against(struct vctx *v, const char *machine, const char *baseline,
                       struct farm_regression *ret, char *buf, size_t size) {
        size_t at[2] = { SIZE_MAX, SIZE_MAX };
        buf[0] = '\0';
        int r = inventories_against(v, baseline);
        for (int k = 0; r >= 0 && k < 2; k++)
                for (size_t i = 0; i < v->ninv[k]; i++)
                        if (strcmp(v->inv[k][i].machine, machine) == 0)
                                at[k] = i;
        const struct farm_machine_inventory *side[2] = { v->inv[0], v->inv[1] };
        if (r >= 0 && at[0] != SIZE_MAX && at[1] != SIZE_MAX) {
                _cleanup_inventory_ struct inventory ra = {}, rb = {};
                struct inventory_change *ch = NULL;
                size_t nch = 0, nchanged;
                const struct farm_inventory_version *now = &side[0][at[0]].v,
                                                    *base = &side[1][at[1]].v;
                ret->inventory_known = true;
                r = counted_only(&v->rule, true, &base->fields, &now->fields, &ra, &rb);
                if (r >= 0)
                        r = inventory_diff(&ra, &rb, &ch, &nch);
                if (r >= 0 && nch &&
                    !(ret->inventory_fields = calloc(nch, sizeof(*ret->inventory_fields))))
                        r = -ENOMEM;
                for (size_t i = 0; r >= 0 && i < nch; i++) {
                        if (!(ret->inventory_fields[i] = strdup(ch[i].name)))
                                r = -ENOMEM;
                        else
                                ret->ninventory_fields++;
                }
                free(ch);
                if (r >= 0 && nch &&
                    inventory_describe_changes(&ra, &rb, now->version, buf, size, &nchanged) < 0)
                        r = -ENOMEM;
                /* The fields alone: "dmi.bios_version: 1.2.3 -> 1.2.5". */
                const char *list = r >= 0 ? strstr(buf, "changed: ") : NULL;
                if (list)
                        memmove(buf, list + 9, strlen(list + 9) + 1);
        }
        return r;
}

/* The problem of the change from a to b, when it changed a counted field. */
static int change(struct vctx *v, struct vmachine *m, const struct farm_inventory_version *a,
                  const struct farm_inventory_version *b) {
        _cleanup_inventory_ struct inventory ra = {}, rb = {};
        char id[FARM_PROBLEM_ID_MAX], msg[CHANGE_MESSAGE_MAX], what[CHANGE_MESSAGE_MAX - 256];
        char t[VTEXT_MAX];
        struct inventory_change *ch = NULL;
        size_t n = 0, nchanged = 0;
        if (counted_only(&v->rule, false, &a->fields, &b->fields, &ra, &rb) < 0 ||
            inventory_diff(&ra, &rb, &ch, &n) < 0) {
                free(ch);
                return -ENOMEM;
        }
        if (n == 0) {
                free(ch);
                return 0;
        }
        struct farm_problem p;
        bool ok = inventory_describe_changes(&ra, &rb, b->version, what, sizeof(what), &nchanged) >=
                  0;
        snprintf(id, sizeof(id), "machine_changed:%s:%" PRId64 ":%" PRIu64, m->id, b->run,
                 b->version);
        int64_t found = farm_inventory_time(b, (int64_t) v->rule.clock_tolerance_ns);
        snprintf(msg, sizeof(msg),
                 "%s: the machine changed during the release's data: run %" PRId64
                 ", found %s (%s)",
                 vhost(m), b->run, vts(t, found), ok ? what : "?");
        vproblem_head(&p, FARM_PROBLEM_MACHINE_CHANGED, m, found, id, msg, &ok);
        p.changed = (struct farm_machine_change){ .run = b->run,
                                                  .previous_run = a->run,
                                                  .version = b->version,
                                                  .previous_version = a->version,
                                                  .after_ns = b->after_ns };
        p.changed.fields = calloc(n, sizeof(*p.changed.fields));
        ok = ok && p.changed.fields;
        for (size_t i = 0; ok && i < n; i++) {
                ok = (p.changed.fields[i] = strdup(ch[i].name)) != NULL;
                p.changed.nfields += ok;
        }
        free(ch);
        return vproblem(v, m, found, found, &p, ok);
}

static bool in_runs(int64_t run, const struct vrelrun *runs, size_t nruns) {
        for (size_t i = 0; i < nruns; i++)
                if (runs[i].id == run)
                        return true;
        return false;
}

int vjudge_inventory(struct vctx *v, struct vmachine *m, const struct vrelrun *runs, size_t nruns) {
        struct farm_inventory_version *vs = NULL;
        size_t n = 0;
        if (nruns == 0 || !v->rule.inventory_fields[0])
                return 0;
        int r = farm_inventories_of(v->c, m->id, v->release, v->known,
                                    (int64_t) v->rule.clock_tolerance_ns, &vs, &n, v->err);
        if (r < 0)
                return r;
        const struct farm_inventory_version *prev = NULL;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                const struct farm_inventory_version *x = &vs[i];
                if (!in_runs(x->run, runs, nruns) ||
                    farm_inventory_time(x, (int64_t) v->rule.clock_tolerance_ns) > v->at)
                        continue;
                if (prev && strcmp(prev->digest, x->digest) != 0)
                        r = change(v, m, prev, x);
                prev = x;
        }
        for (size_t i = 0; i < n; i++)
                farm_inventory_version_done(&vs[i]);
        free(vs);
        return r;
}
