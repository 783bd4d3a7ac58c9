/* SPDX-License-Identifier: MIT */
/* The "latest stable" verdict (docs/verdict.md): whether a kernel release qualifies, computed
 * from what the farm database holds about a given moment, with the evidence of every problem
 * and of everything still missing. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "kernel-model.h"
#include "params.h"
#include "rule.h"
#include "verdict-model.h"

#define FARM_PROBLEM_ID_MAX 200
/* Problems listed in full per verdict; beyond that they are only counted. */
#define FARM_VERDICT_PROBLEMS_LISTED 500
/* Data received up to this far ahead of the server's clock is not "in the future" for ?at=. */
#define FARM_AT_FUTURE_SLACK_NS INT64_C(1000000000)

/* Told every counted, unwaived problem a verdict finds, all of them (the answer lists the
 * first FARM_VERDICT_PROBLEMS_LISTED): the notifications' view.  problem is borrowed. */
struct farm_problem_sink {
        void (*problem)(void *userdata, const char *release, const struct farm_problem *problem);
        void *userdata;
};

/* A question: the verdict of release about moment at_ns, from the data received by known_ns
 * (INT64_MAX: whatever has been received), asked at asked_ns; sink (or NULL) is told its
 * problems. */
struct farm_question {
        const char *release;
        int64_t at_ns, known_ns, asked_ns;
        const struct farm_problem_sink *sink;
};

/* The runs a question sees, as SQL over the columns of runs (prefixed R: "r." or ""), with AT
 * and KNOWN its moment and what it knows as SQL parameters: received by KNOWN, and started by
 * AT or received by then (a start stamped after its arrival counts from the arrival).  The
 * verdict, the kernel list and the series list all see a release by this one rule, so that
 * none lists a release whose verdict the same question does not have. */
#define FARM_SQL_RUN_SEEN(R, AT, KNOWN)                                                        \
        R "first_report_ns <= " KNOWN " AND (" R "start_ns <= " AT " OR " R "first_report_ns " \
          "<= " AT ")"

/* rule is the rule configured now; the verdict judges with the version recorded for at_ns
 * (farm_rule_record()), or with rule when none is recorded.  *ret is the caller's to free
 * (farm_verdict_free()).  -ENOENT when no machine ever ran the release (by then). */
int farm_verdict_ask(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                     struct farm_verdict **ret, char err[static FARM_ERROR_MAX]);
/* The verdict as the server gives it at now_ns: about now_ns, from what it has received. */
int farm_verdict(farm_db *db, const struct farm_rule *rule, const char *release, int64_t now_ns,
                 struct farm_verdict **ret, char err[static FARM_ERROR_MAX]);

/* The question of ?at= and ?known_at= (either may be NULL): without either, the verdict now; with
 * at only, data stamped by then, received whenever; with known_at, what was received by then.
 * -EINVAL with err naming the parameter for a time that does not parse, lies in the future
 * (by more than FARM_AT_FUTURE_SLACK_NS), or an at after known_at. */
int farm_question_parse(const char *release, const char *at, const char *known_at, int64_t now_ns,
                        struct farm_question *ret, char err[static FARM_PARAM_ERROR_MAX]);

/* Records rule as the version in force from now_ns on, unless it is the version in force. */
int farm_rule_record(farm_db *db, const struct farm_rule *rule, int64_t now_ns,
                     char err[static FARM_ERROR_MAX]);

/* Whether the current verdict of release (at now_ns) has the unwaived problem id. */
int farm_verdict_has_problem(farm_db *db, const struct farm_rule *rule, const char *release,
                             const char *problem, int64_t now_ns, bool *ret,
                             char err[static FARM_ERROR_MAX]);

/* Every release seen by q's moment, newest first (by the latest start of a run of it), a page
 * of them, each with the machines that ran it, its coverage and its verdict as q asks it
 * (q->release is not used).  *ret is the caller's (farm_kernel_page_done()). */
int farm_kernels(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                 const struct farm_page *page, struct farm_kernel_page *ret,
                 char err[static FARM_ERROR_MAX]);
/* Every release with a run, by name: *ret_n names in *ret, the caller's (farm_strv_free()). */
int farm_release_names(farm_db *db, char ***ret, size_t *ret_n, char err[static FARM_ERROR_MAX]);
