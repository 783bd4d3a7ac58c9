/* SPDX-License-Identifier: MIT */
/* The KCIDB v5.3 report of a release, made from the typed verdict and the release's latency
 * statistics per machine and scenario.  docs/kcidb.md holds the mapping; this file is it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comparison.h"
#include "machines.h"
#include "kcidb.h"
#include "macro.h"
#include "sha256.h"
#include "timeutil.h"

struct report {
        const struct farm_verdict *v;
        /* Each machine's inventory as of the question (v->machines' order; run 0: none). */
        struct farm_inventory_version *inv;
        const char *origin;
        json_t *checkout_id;
        struct farm_release_stat *stats;
        size_t nstats;
        bool truncated; /* the verdict lists only the first of its problems */
};

bool farm_kcidb_origin_ok(const char *origin) {
        size_t n = strlen(origin);
        return n > 0 && n <= FARM_KCIDB_ORIGIN_MAX &&
               strspn(origin, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* "origin:" and 32 hex digits of a digest of what the object is: the same object, the same id
 * in every report (a resubmission updates it), another object another id. */
static json_t *id_json(const struct report *r, const char *kind, const char *build,
                       const char *machine, const char *path) {
        const char *parts[] = { kind, r->v->release, build, machine, path };
        struct sha256_ctx h;
        uint8_t d[SHA256_DIGEST_SIZE];
        char hex[2 * SHA256_DIGEST_SIZE + 1], id[FARM_KCIDB_ORIGIN_MAX + 40];
        sha256_init(&h);
        for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                sha256_update(&h, parts[i] ?: "", strlen(parts[i] ?: "") + 1);
        sha256_final(&h, d);
        snprintf(id, sizeof(id), "%s:%.32s", r->origin, sha256_digest_hex(d, hex));
        return json_string(id);
}

static json_t *time_json(int64_t ns) {
        char t[TIMESTAMP_MAX_LEN];
        return json_string(format_timestamp_utc(t, ns));
}

/* A latency as KCIDB's number: seconds, shown with a metric prefix. */
static json_t *latency_json(uint64_t ns) {
        return json_pack("{s:f, s:s, s:s}", "value", (double) ns / 1e9, "unit", "s", "prefix",
                         "metric");
}

/* Sets key to value (stolen) unless value is NULL, which clears ok. */
static void put(json_t *o, const char *key, json_t *value, bool *ok) {
        if (!value || json_object_set_new(o, key, value) < 0)
                *ok = false;
}

/* The statistics of a machine in one scenario, or over all its scenarios (scenario NULL). */
static bool stat_of(const struct report *r, const char *machine, const char *scenario,
                    struct farm_release_stat *ret) {
        bool found = false;
        *ret = (struct farm_release_stat){};
        for (size_t i = 0; i < r->nstats; i++) {
                const struct farm_release_stat *s = &r->stats[i];
                if (strcmp(s->machine, machine) != 0 ||
                    (scenario && strcmp(s->scenario, scenario) != 0))
                        continue;
                found = true;
                ret->worst_ns = MAX(ret->worst_ns, s->worst_ns);
                ret->p99_9_ns = MAX(ret->p99_9_ns, s->p99_9_ns); /* the worst scenario's */
                ret->samples += s->samples;
        }
        return found;
}

/* The scenario a problem is in, for the kinds that name one. */
static const char *problem_scenario(const struct farm_problem *p) {
        switch (p->kind) {
        case FARM_PROBLEM_VIOLATION:
                return p->violation.scenario;
        case FARM_PROBLEM_LOAD_DOWN:
        case FARM_PROBLEM_PROBE_DOWN:
                return p->down.scenario;
        case FARM_PROBLEM_REGRESSION:
                return p->regression.scenario;
        default:
                return NULL;
        }
}

/* The ids of the counted problems the verdict lists for a machine (in one scenario, unless
 * scenario is NULL). */
static json_t *problem_ids(const struct report *r, const char *machine, const char *scenario) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < r->v->nproblems; i++) {
                const struct farm_problem *p = &r->v->problems[i];
                const char *s = problem_scenario(p);
                if (strcmp(p->machine, machine) != 0 || (scenario && (!s || strcmp(s, scenario))))
                        continue;
                if (json_array_append_new(list, json_string(p->id)) < 0) {
                        json_decref(list);
                        return NULL;
                }
        }
        return list;
}

/* The fields of a machine's inventory that a KCIDB reader sees in a test's environment; the
 * digest names the whole version (GET /api/v1/machines/{id}/inventory). */
static const char *const summary_fields[] = {
        "uname.machine",     "dmi.sys_vendor",     "dmi.product_name",   "dmi.bios_version",
        "cpu.model_name",    "cpu.microcode",      "cpu.sockets",        "cpu.cores",
        "cpu.threads",       "memory.total_kib",   "cmdline.isolcpus",   "cmdline.nohz_full",
        "cmdline.rcu_nocbs", "kconfig.PREEMPT_RT", "kconfig.HZ",         "clocksource.current",
        "cpufreq.governor",  "thp.enabled",        "service.irqbalance", "tuned.profile",
};

static json_t *inventory_json(const struct farm_inventory_version *v) {
        if (!v->run)
                return json_null();
        json_t *fields = json_object();
        for (size_t i = 0; fields && i < ELEMENTSOF(summary_fields); i++) {
                const char *x = inventory_get(&v->fields, summary_fields[i]);
                if (x && json_object_set_new(fields, summary_fields[i], json_string(x)) < 0)
                        json_decref(fields), fields = NULL;
        }
        return fields ? json_pack("{s:I, s:I, s:s, s:o}", "run", (json_int_t) v->run, "version",
                                  (json_int_t) v->version, "digest", v->digest, "fields", fields)
                      : NULL;
}

static json_t *environment_json(const struct report *r, const struct farm_verdict_machine *m) {
        char comment[256];
        if (m->hostname)
                snprintf(comment, sizeof(comment), "%s (machine %s)", m->hostname, m->id);
        else
                snprintf(comment, sizeof(comment), "machine %s", m->id);
        json_t *groups = json_array();
        for (size_t i = 0; groups && i < m->ngroups; i++)
                if (json_array_append_new(groups, json_string(m->groups[i])) < 0) {
                        json_decref(groups);
                        groups = NULL;
                }
        return json_pack("{s:s, s:{s:s, s:s?, s:o, s:I, s:o}}", "comment", comment, "misc",
                         "machine", m->id, "hostname", m->hostname, "groups", groups,
                         "threshold_ns", (json_int_t) m->threshold_ns, "inventory",
                         inventory_json(&r->inv[m - r->v->machines]));
}

/* What every test has: id, build, origin, path, status and its machine's environment. */
static json_t *test_head(const struct report *r, json_t *build_id, const char *build,
                         const struct farm_verdict_machine *m, const char *path,
                         const char *status) {
        json_t *t = json_pack("{s:o, s:O, s:s, s:s, s:s}", "id",
                              id_json(r, "test", build, m ? m->id : NULL, path), "build_id",
                              build_id, "origin", r->origin, "path", path, "status", status);
        if (t && m && json_object_set_new(t, "environment", environment_json(r, m)) < 0) {
                json_decref(t);
                return NULL;
        }
        return t;
}

static const char *machine_status(const struct farm_verdict_machine *m) {
        return m->status == FARM_MACHINE_COMPLETE ? "PASS"
               : m->status == FARM_MACHINE_FAILED ? "FAIL"
                                                  : "MISS";
}

/* The machine's own test (rtsoak.soak): its answer in the verdict. */
static json_t *machine_test(const struct report *r, json_t *build_id, const char *build,
                            const struct farm_verdict_machine *m) {
        struct farm_release_stat st;
        bool ok = true, have = stat_of(r, m->id, NULL, &st);
        json_t *t = test_head(r, build_id, build, m, "rtsoak.soak", machine_status(m));
        if (!t)
                return NULL;
        json_t *misc = json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:i, s:i, s:o}", "machine", m->id,
                                 "status", farm_machine_status_name(m->status), "covered_ns",
                                 (json_int_t) m->covered_ns, "clean_ns", (json_int_t) m->clean_ns,
                                 "missing_ns", (json_int_t) m->missing_ns, "problems",
                                 (int) m->problems, "waived", (int) m->waived, "not_counted",
                                 (int) m->not_counted, "problem_ids", problem_ids(r, m->id, NULL));
        put(t, "misc", misc, &ok);
        if (m->ran) {
                put(t, "start_time", time_json(m->first_ns), &ok);
                put(t, "duration", json_real((double) m->covered_ns / 1e9), &ok);
        }
        if (ok && have) {
                put(t, "number", latency_json(st.worst_ns), &ok);
                put(misc, "worst_ns", json_integer((json_int_t) st.worst_ns), &ok);
                put(misc, "p99_9_ns", json_integer((json_int_t) st.p99_9_ns), &ok);
        }
        if (!ok) {
                json_decref(t);
                return NULL;
        }
        return t;
}

/* A scenario's status: FAIL with a counted problem in it, MISS while its required time is
 * not covered, DONE when the machine failed and the verdict does not list every problem (this
 * scenario may hold one), PASS otherwise. */
static const char *scenario_status(const struct report *r, const struct farm_verdict_machine *m,
                                   const struct farm_scenario_cover *sc, size_t nproblems) {
        if (nproblems > 0)
                return "FAIL";
        if (sc->required && sc->covered_ns < sc->required_ns)
                return "MISS";
        if (m->status == FARM_MACHINE_FAILED && r->truncated)
                return "DONE";
        return "PASS";
}

/* rtsoak.soak.SCENARIO: a machine in one scenario (a character a path does not take is "_"). */
static json_t *scenario_test(const struct report *r, json_t *build_id, const char *build,
                             const struct farm_verdict_machine *m,
                             const struct farm_scenario_cover *sc) {
        char path[16 + 128];
        int n = snprintf(path, sizeof(path), "rtsoak.soak.%.127s", sc->name);
        for (int i = 12; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
                            path[i]))
                        path[i] = '_';
        json_t *ids = problem_ids(r, m->id, sc->name);
        if (!ids)
                return NULL;
        struct farm_release_stat st;
        bool ok = true, have = stat_of(r, m->id, sc->name, &st);
        json_t *t = test_head(r, build_id, build, m, path,
                              scenario_status(r, m, sc, json_array_size(ids)));
        json_t *misc = json_pack("{s:s, s:s, s:I, s:o, s:o}", "machine", m->id, "scenario",
                                 sc->name, "covered_ns", (json_int_t) sc->covered_ns, "required_ns",
                                 sc->required ? json_integer((json_int_t) sc->required_ns)
                                              : json_null(),
                                 "problem_ids", ids);
        if (!t) {
                json_decref(misc);
                return NULL;
        }
        put(t, "misc", misc, &ok);
        put(t, "duration", json_real((double) sc->covered_ns / 1e9), &ok);
        if (ok && have) {
                put(t, "number", latency_json(st.worst_ns), &ok);
                put(misc, "worst_ns", json_integer((json_int_t) st.worst_ns), &ok);
                put(misc, "p99_9_ns", json_integer((json_int_t) st.p99_9_ns), &ok);
                put(misc, "samples", json_integer((json_int_t) st.samples), &ok);
        }
        if (!ok) {
                json_decref(t);
                return NULL;
        }
        return t;
}

/* The verdict itself (path rtsoak), under each build. */
static json_t *verdict_test(const struct report *r, json_t *build_id, const char *build) {
        const struct farm_verdict *v = r->v;
        const char *status = v->status == FARM_VERDICT_QUALIFIED ? "PASS"
                             : v->status == FARM_VERDICT_FAILED  ? "FAIL"
                                                                 : "MISS";
        json_t *reasons = json_array();
        for (size_t i = 0; reasons && i < v->nreasons; i++)
                if (json_array_append_new(reasons, json_string(v->reasons[i])) < 0) {
                        json_decref(reasons);
                        reasons = NULL;
                }
        json_t *t = test_head(r, build_id, build, NULL, "rtsoak", status);
        json_t *misc = json_pack("{s:s, s:o, s:s?, s:I, s:I, s:I, s:o}", "verdict",
                                 farm_verdict_status_name(v->status), "at", time_json(v->at_ns),
                                 "baseline", v->baseline, "problems_total",
                                 (json_int_t) v->problems_total, "waived", (json_int_t) v->nwaived,
                                 "not_counted_total", (json_int_t) v->not_counted_total, "reasons",
                                 reasons);
        bool ok = t != NULL;
        if (t)
                put(t, "misc", misc, &ok);
        else
                json_decref(misc);
        if (!ok) {
                json_decref(t);
                return NULL;
        }
        return t;
}

static bool in_build(const struct farm_build *b, const char *machine) {
        for (size_t i = 0; i < b->nmachines; i++)
                if (strcmp(b->machines[i], machine) == 0)
                        return true;
        return false;
}

/* The architecture of a build: the first of its machines' inventories that tells it. */
static const char *build_architecture(const struct report *r, const struct farm_build *b) {
        for (size_t i = 0; i < r->v->nmachines; i++) {
                const char *a = inventory_get(&r->inv[i].fields, "uname.machine");
                if (a && in_build(b, r->v->machines[i].id))
                        return a;
        }
        return NULL;
}

/* A build and its tests: the verdict, then each gating machine that ran it (or ran nothing:
 * its results are missing on every build), as a whole and per scenario. */
static int add_build(const struct report *r, const struct farm_build *b, json_t *builds,
                     json_t *tests) {
        json_t *bid = id_json(r, "build", b->kernel_version, NULL, NULL);
        json_t *machines = json_array();
        for (size_t i = 0; machines && i < b->nmachines; i++)
                if (json_array_append_new(machines, json_string(b->machines[i])) < 0) {
                        json_decref(machines);
                        machines = NULL;
                }
        char comment[320];
        snprintf(comment, sizeof(comment), "%s %.256s", r->v->release, b->kernel_version);
        json_t *build = json_pack("{s:O, s:O, s:s, s:s, s:s, s:{s:s, s:o}}", "id", bid,
                                  "checkout_id", r->checkout_id, "origin", r->origin, "comment",
                                  comment, "status", "PASS", "misc", "kernel_version",
                                  b->kernel_version, "machines", machines);
        const char *arch = build_architecture(r, b);
        if (build && arch && json_object_set_new(build, "architecture", json_string(arch)) < 0)
                json_decref(build), build = NULL;
        int rc = build && bid ? json_array_append_new(builds, build) : -1;
        if (rc >= 0)
                rc = json_array_append_new(tests, verdict_test(r, bid, b->kernel_version));
        for (size_t i = 0; rc >= 0 && i < r->v->nmachines; i++) {
                const struct farm_verdict_machine *m = &r->v->machines[i];
                if (m->ran && !in_build(b, m->id))
                        continue;
                rc = json_array_append_new(tests, machine_test(r, bid, b->kernel_version, m));
                for (size_t k = 0; rc >= 0 && k < m->nscenarios; k++)
                        rc = json_array_append_new(tests, scenario_test(r, bid, b->kernel_version,
                                                                        m, &m->scenarios[k]));
        }
        json_decref(bid);
        return rc < 0 ? -ENOMEM : 0;
}

/* Each machine's inventory for the release as the question sees it, into r->inv (run 0 for a
 * machine whose runs of it sent none). */
static int read_inventories(farm_db *db, const struct farm_rule *rule, int64_t at, int64_t known,
                            struct report *r, char *err) {
        struct farm_machine_inventory *all = NULL;
        size_t n = 0;
        if (!(r->inv = calloc(r->v->nmachines + 1, sizeof(*r->inv))))
                return -ENOMEM;
        int rc = farm_release_inventories(db, r->v->release, at, known,
                                          (int64_t) rule->clock_tolerance_ns, &all, &n, err);
        for (size_t i = 0; rc >= 0 && i < r->v->nmachines; i++)
                for (size_t k = 0; k < n; k++)
                        if (strcmp(all[k].machine, r->v->machines[i].id) == 0) {
                                r->inv[i] = all[k].v;
                                all[k].v = (struct farm_inventory_version){};
                        }
        farm_machine_inventories_free(all, n);
        return rc;
}

/* The tested tree the machines' inventories name (kernel.git_url, kernel.git_commit): into the
 * checkout when they agree, each machine's in misc when they do not. */
static int checkout_git(const struct report *r, json_t *c) {
        const char *url = NULL, *commit = NULL;
        bool agree = true;
        json_t *each = json_array();
        for (size_t i = 0; each && i < r->v->nmachines; i++) {
                const char *u = inventory_get(&r->inv[i].fields, "kernel.git_url"),
                           *k = inventory_get(&r->inv[i].fields, "kernel.git_commit");
                if (!u && !k)
                        continue;
                agree = agree && (!url || !u || strcmp(url, u) == 0) &&
                        (!commit || !k || strcmp(commit, k) == 0);
                url = url ?: u, commit = commit ?: k;
                if (json_array_append_new(each, json_pack("{s:s, s:s?, s:s?}", "machine",
                                                          r->v->machines[i].id, "url", u, "commit",
                                                          k)) < 0)
                        json_decref(each), each = NULL;
        }
        if (!each)
                return -ENOMEM;
        if (json_array_size(each) == 0) {
                json_decref(each);
                return 0;
        }
        if (agree) {
                json_decref(each);
                if ((url && json_object_set_new(c, "git_repository_url", json_string(url)) < 0) ||
                    (commit && json_object_set_new(c, "git_commit_hash", json_string(commit)) < 0))
                        return -ENOMEM;
                return 0;
        }
        return json_object_set_new(json_object_get(c, "misc"), "git_disagree", each) < 0 ? -ENOMEM
                                                                                         : 0;
}

static json_t *checkout_json(const struct report *r) {
        const struct farm_verdict *v = r->v;
        json_t *c = json_pack("{s:O, s:s, s:s, s:b, s:{s:s, s:s, s:s, s:s, s:o}}", "id",
                              r->checkout_id, "origin", r->origin, "comment", v->release, "valid",
                              1, "misc", "release", v->release, "series", v->series, "group",
                              v->group, "verdict", farm_verdict_status_name(v->status), "at",
                              time_json(v->at_ns));
        int64_t first = INT64_MAX;
        for (size_t i = 0; i < v->nmachines; i++)
                if (v->machines[i].ran)
                        first = MIN(first, v->machines[i].first_ns);
        bool ok = c != NULL && checkout_git(r, c) >= 0;
        if (ok && first != INT64_MAX)
                put(c, "start_time", time_json(first), &ok);
        if (!ok) {
                json_decref(c);
                return NULL;
        }
        return c;
}

static int report_json(struct report *r, json_t **ret) {
        json_t *builds = json_array(), *tests = json_array();
        int rc = builds && tests ? 0 : -ENOMEM;
        for (size_t i = 0; rc >= 0 && i < r->v->builds.n; i++)
                rc = add_build(r, &r->v->builds.v[i], builds, tests);
        json_t *doc = rc >= 0 ? json_pack("{s:{s:i, s:i}, s:[o], s:o, s:o}", "version", "major", 5,
                                          "minor", 3, "checkouts", checkout_json(r), "builds",
                                          builds, "tests", tests)
                              : NULL;
        if (rc < 0) {
                json_decref(builds);
                json_decref(tests);
        }
        if (!doc)
                return -ENOMEM;
        *ret = doc;
        return 0;
}

int farm_kcidb_report(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                      const char *origin, json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_verdict_ struct farm_verdict *v = NULL;
        int r = farm_verdict_ask(db, rule, q, &v, err);
        if (r < 0)
                return r;
        const char **ids = calloc(v->nmachines + 1, sizeof(*ids));
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < v->nmachines; i++)
                ids[i] = v->machines[i].id;
        struct report rep = { .v = v,
                              .origin = origin,
                              .truncated = v->problems_total > v->nproblems };
        r = farm_release_stats(db, v->release, ids, v->nmachines, v->at_ns, q->known_ns, &rep.stats,
                               &rep.nstats, err);
        free(ids);
        if (r >= 0)
                r = read_inventories(db, rule, v->at_ns, q->known_ns, &rep, err);
        if (r >= 0 && !(rep.checkout_id = id_json(&rep, "checkout", NULL, NULL, NULL)))
                r = -ENOMEM;
        if (r >= 0)
                r = report_json(&rep, ret);
        json_decref(rep.checkout_id);
        free(rep.stats);
        for (size_t i = 0; rep.inv && i < v->nmachines; i++)
                farm_inventory_version_done(&rep.inv[i]);
        free(rep.inv);
        if (r == -ENOMEM)
                snprintf(err, FARM_ERROR_MAX, "out of memory");
        return r;
}
