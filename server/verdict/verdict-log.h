/* SPDX-License-Identifier: MIT */
/* "Which release is latest stable?" (docs/verdict.md, invariant 10): per series, the newest
 * release by kernel version order whose verdict is qualified; and the verdict log, kept by a
 * thread that re-judges the releases with recent data, from which "since when" is answered. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "db.h"
#include "rule.h"
#include "series-model.h"
#include "verdict.h"

/* Every series with a release run by q's moment, by name: its latest stable, since when, its
 * newest release and that one's verdict. */
int farm_series(farm_db *db, const struct farm_rule *rule, const struct farm_question *q,
                struct farm_series_list *ret, char err[static FARM_ERROR_MAX]);
/* One series (-ENOENT: no release of it was run by then): its entry as farm_series() has it,
 * and the history of the latest stable from the verdict log. */
int farm_latest_stable(farm_db *db, const struct farm_rule *rule, const char *series,
                       const struct farm_question *q, struct farm_latest_stable *ret,
                       char err[static FARM_ERROR_MAX]);

/* What a verdict log pass tells whoever watches it (the notifications); every member but
 * userdata may be NULL. */
struct farm_verdict_hooks {
        void *userdata;
        /* Every counted, unwaived problem of each verdict the pass makes (borrowed). */
        void (*problem)(void *userdata, const char *release, const struct farm_problem *problem);
        /* The moment by which the data whose problems go to problem was received (NULL: the
         * pass's).  Earlier than the pass: problem is told those of a verdict from the data
         * received by then, and the pass leaves its mark, so that the next one judges every
         * release again with all the data. */
        int64_t (*problems_known)(void *userdata, int64_t now_ns);
        /* A release judged: its verdict, the status logged for it before the pass (NULL:
         * none) and that log row's id, whether the pass logged a change, and (in a pass whose
         * problems_known is earlier than the pass) whether data received after that moment
         * changed the verdict: without it the release would have had another status. */
        void (*judged)(void *userdata, const struct farm_verdict *verdict, const char *prev_status,
                       int64_t prev_id, bool changed, bool late, int64_t now_ns);
        /* The pass judged every release it had to. */
        void (*pass_done)(void *userdata, int64_t now_ns);
};

/* What a pass of the verdict log had seen: the last interval, event and audit row ({} before
 * the first pass). */
struct farm_log_mark {
        int64_t interval_id, event_id, audit_id;
        bool started;
        int64_t pass_ns; /* when that pass began */
};

/* Judges every release whose verdict may have changed since the pass that left *seen (every
 * release for the first), records each change of verdict in the verdict log, telling hooks (or
 * NULL), and moves *seen on; returns how many changed.  Ends early, between two releases, once
 * the worker (NULL: none) is stopping, and then leaves *seen as it was (and tells no pass_done). */
struct worker;
int farm_verdict_log_pass(farm_db *db, const struct farm_rule *rule, int64_t now_ns,
                          struct farm_log_mark *seen, const struct farm_verdict_hooks *hooks,
                          struct worker *worker, char err[static FARM_ERROR_MAX]);

/* The log's share of the time, in percent: a pass is followed by a wait of at least
 * (100 / FARM_WATCH_SHARE - 1) times its own length. */
#define FARM_WATCH_SHARE 5
/* The wait after a pass of pass_ns (once the first pass after a start is done): watch_ns, or
 * longer when the pass took more than FARM_WATCH_SHARE percent of it (a pass's statements and the
 * database's work for them run one after another: the log's thread then uses at most that share of
 * one CPU, however many releases have recent data and however slow the database). */
uint64_t farm_watch_wait_ns(uint64_t watch_ns, uint64_t pass_ns);

struct farm_watcher;
/* A thread running farm_verdict_log_pass() every rule->watch_ns (none when it is 0), or
 * farm_watch_wait_ns() after a long pass, telling hooks (or NULL; they must outlive the
 * watcher). */
int farm_watcher_start(farm_db *db, const struct farm_rule *rule,
                       const struct farm_verdict_hooks *hooks, struct farm_watcher **ret);
void farm_watcher_stop(struct farm_watcher *w);
