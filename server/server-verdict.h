/* SPDX-License-Identifier: MIT */
/* The "latest stable" verdict: whether a kernel release qualifies, computed from what the farm
 * database holds at a given moment, with the evidence of every problem and of everything still
 * missing; the waivers that farm staff give for single problems, and the staff's tokens. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server-db.h"
#include "server-params.h"

#define FARM_RULE_SCENARIOS_MAX 32
#define FARM_SCENARIO_NAME_MAX 64
#define FARM_ADMIN_NAME_MAX 64
#define FARM_PROBLEM_ID_MAX 160
#define FARM_WAIVER_REASON_MAX 1000
/* Problems listed in full per verdict; beyond that they are only counted. */
#define FARM_VERDICT_PROBLEMS_LISTED 500

/* The rule a release must pass; every number comes from the server's configuration. */
struct farm_rule {
        uint64_t period_ns;        /* coverage every gating machine needs (30 days) */
        uint64_t max_gap_ns;       /* longest silence allowed (15 minutes) */
        uint64_t load_down_max_ns; /* longest time a generator may fail to run its load */
        size_t nscenarios;
        struct {
                char name[FARM_SCENARIO_NAME_MAX];
                uint64_t min_ns;
        } scenarios[FARM_RULE_SCENARIOS_MAX];
};

#define FARM_RULE_PERIOD_DEFAULT "30d"
#define FARM_RULE_MAX_GAP_DEFAULT "15min"
#define FARM_RULE_LOAD_DOWN_MAX_DEFAULT "10min"
#define FARM_RULE_SCENARIOS_DEFAULT "idle 1d, cpu 1d, io 1d, net 1d, hackbench 1d, mixed 1d"

/* Parses the required scenarios, "NAME SPAN, NAME SPAN ..." ("" or "none": none required), into
 * rule.  err names the entry that is wrong. */
int farm_rule_parse_scenarios(const char *text, struct farm_rule *rule, char *err, size_t errlen);
/* The rule with every default. */
void farm_rule_default(struct farm_rule *rule);

/* The verdict of release as it was at at_ns, judged only on data that existed by then (intervals
 * that had ended, events that had happened, waivers that had been given).  -ENOENT when no
 * machine ever ran the release. */
int farm_verdict(farm_db *db, const struct farm_rule *rule, const char *release, int64_t at_ns,
                 json_t **ret, char err[static FARM_ERROR_MAX]);
/* "qualified", "pending" or "failed" of a verdict made by farm_verdict(). */
const char *farm_verdict_status(const json_t *verdict);

/* Every release seen, newest first (by the latest start of a run of it), a page of them, each
 * with the machines that ran it, its coverage and its verdict at at_ns. */
int farm_kernels_json(farm_db *db, const struct farm_rule *rule, int64_t at_ns,
                      const struct farm_page *page, json_t **ret, char err[static FARM_ERROR_MAX]);
/* Every release with a run, for the metrics: a JSON array of strings. */
int farm_kernel_list(farm_db *db, json_t **ret, char err[static FARM_ERROR_MAX]);

/* Waives one problem of release's current verdict (its "id").  -ENOENT when the current
 * verdict has no such unwaived problem, -EINVAL for an empty or too long reason.  Recorded in the
 * audit trail with who and when. */
int farm_waive(farm_db *db, const struct farm_rule *rule, const char *release, const char *problem,
               const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
               char err[static FARM_ERROR_MAX]);
/* Withdraws a waiver (-ENOENT: no such waiver in force); audited as well. */
int farm_unwaive(farm_db *db, int64_t waiver_id, const char *who, const char *reason,
                 int64_t now_ns, char err[static FARM_ERROR_MAX]);
/* The waivers of release (all releases when NULL), newest first, and the audit trail. */
int farm_waivers_json(farm_db *db, const char *release, const struct farm_page *page, json_t **ret,
                      char err[static FARM_ERROR_MAX]);
int farm_audit_json(farm_db *db, const struct farm_page *page, json_t **ret,
                    char err[static FARM_ERROR_MAX]);

/* Staff tokens: adding a name again gives it a new token. */
int farm_admin_add(farm_db *db, const char *name, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                   int64_t now_ns, char err[static FARM_ERROR_MAX]);
int farm_admin_revoke(farm_db *db, const char *name, int64_t now_ns,
                      char err[static FARM_ERROR_MAX]);
/* 0 and the staff member's name, or -EACCES. */
int farm_admin_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                            char ret_name[static FARM_ADMIN_NAME_MAX + 1]);
bool farm_admin_name_valid(const char *name);
