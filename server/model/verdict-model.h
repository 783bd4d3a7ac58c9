/* SPDX-License-Identifier: MIT */
/* A verdict as the engine makes it (docs/verdict.md): its problems by kind, what it still
 * misses, each gating machine's answer, the builds; owned by the verdict and freed with it.
 * The API encodes it as JSON; the dashboard, the notifications and the verdict log read it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "rule.h"

/* The kinds of problem, in the order the answer counts them. */
enum farm_problem_kind {
        FARM_PROBLEM_VIOLATION,
        FARM_PROBLEM_UNCLEAN_END,
        FARM_PROBLEM_GAP,
        FARM_PROBLEM_LOAD_DOWN,
        FARM_PROBLEM_PROBE_DOWN,
        FARM_PROBLEM_CLOCK,
        FARM_PROBLEM_OVERLAP,
        FARM_PROBLEM_MIXED_BUILDS,
        FARM_PROBLEM_REGRESSION,
        FARM_PROBLEM_DROPPED,
        FARM_PROBLEM_MACHINE_CHANGED,
        FARM_PROBLEM_NKINDS
};
/* "violation", "unclean_end", ... */
const char *farm_problem_kind_name(enum farm_problem_kind kind);

enum farm_verdict_status { FARM_VERDICT_QUALIFIED, FARM_VERDICT_PENDING, FARM_VERDICT_FAILED };
const char *farm_verdict_status_name(enum farm_verdict_status status);

/* The interval a problem points at as its evidence. */
struct farm_evidence {
        bool given; /* false: none (null) */
        int64_t seq, start_ns, length_ns;
        char *scenario; /* NULL: none */
};

/* One kernel build (uname -v) of the release and the gating machines that ran it. */
struct farm_build {
        char *kernel_version;
        char **machines;
        size_t nmachines;
};
struct farm_builds {
        struct farm_build *v;
        size_t n;
};

struct farm_latency_stats {
        int64_t p99_9_ns, worst_ns;
};

/* What each kind of problem says beyond what they all say. */
struct farm_violation {
        int cpu;
        int64_t value_ns, threshold_ns, run;
        char *scenario; /* as the interval named it; NULL: none */
        struct farm_evidence interval;
        bool traced;   /* the flight recorder was asked (culprit and trace are told) */
        char *culprit; /* its capture's summary; NULL: none found */
        int64_t trace; /* that capture, when culprit */
};

struct farm_unclean_end {
        int64_t run;
        struct farm_evidence interval; /* the last before the end */
        char *detail;
};

struct farm_gap {
        int64_t value_ns;
        bool ongoing;
        struct farm_evidence interval; /* the last before the silence */
};

/* A probe (probe_down) or a generator (load_down) that did not measure or run. */
enum farm_down_shape {
        FARM_DOWN_STRETCH, /* consecutive intervals of one probe or generator */
        FARM_DOWN_RUN,     /* a run whose probe period does not measure: all of it */
        FARM_DOWN_TOTAL,   /* one generator over all the release's data of the machine */
};
struct farm_down {
        enum farm_down_shape shape;
        int64_t run, value_ns;
        char *scenario; /* NULL: none */
        struct farm_evidence interval;
        int cpu;         /* a probe's (stretch) */
        char *generator; /* a generator's (stretch, total) */
};

struct farm_clock_skew {
        int64_t run, value_ns, intervals;
};

struct farm_overlap {
        int64_t value_ns, run, runs[2];
};

struct farm_regression {
        char *scenario, *baseline;
        struct farm_latency_stats release_stats, baseline_stats;
        /* The counted inventory fields in which the machine's version for the release differs
         * from its version for the baseline; not known when either sent none. */
        bool inventory_known;
        char **inventory_fields;
        size_t ninventory_fields;
};

struct farm_dropped {
        int64_t run, intervals;
};

/* A machine's inventory that changed in fields the rule counts, between two versions of the
 * release's runs on it. */
struct farm_machine_change {
        int64_t run, previous_run; /* the machine's own numbers of the runs */
        uint64_t version, previous_version;
        int64_t after_ns; /* the check before that still found the version before; FARM_NONE */
        char **fields;    /* the counted fields that differ, ascending */
        size_t nfields;
};

struct farm_problem {
        enum farm_problem_kind kind;
        char *id, *machine;
        char *hostname; /* NULL: the machine has not told it */
        char *message;
        int64_t time_ns;
        bool has_end;
        int64_t end_ns;
        union {
                struct farm_violation violation;    /* FARM_PROBLEM_VIOLATION */
                struct farm_unclean_end unclean;    /* FARM_PROBLEM_UNCLEAN_END */
                struct farm_gap gap;                /* FARM_PROBLEM_GAP */
                struct farm_down down;              /* FARM_PROBLEM_LOAD_DOWN, _PROBE_DOWN */
                struct farm_clock_skew clock;       /* FARM_PROBLEM_CLOCK */
                struct farm_overlap overlap;        /* FARM_PROBLEM_OVERLAP */
                struct farm_builds builds;          /* FARM_PROBLEM_MIXED_BUILDS */
                struct farm_regression regression;  /* FARM_PROBLEM_REGRESSION */
                struct farm_dropped dropped;        /* FARM_PROBLEM_DROPPED */
                struct farm_machine_change changed; /* FARM_PROBLEM_MACHINE_CHANGED */
        };
};

/* The waiver that covers a problem. */
struct farm_waiver_brief {
        int64_t id, created_ns;
        char *reason, *by;
};
struct farm_waived_problem {
        struct farm_problem problem;
        struct farm_waiver_brief waiver;
};
/* A problem of a machine that did not gate the release then. */
struct farm_uncounted_problem {
        struct farm_problem problem;
        char *why;
};

/* Something the verdict still waits for. */
enum farm_missing_what {
        FARM_MISSING_NOT_RUN,
        FARM_MISSING_COVERAGE,
        FARM_MISSING_SCENARIO,
        FARM_MISSING_GATING_MACHINES, /* of the group: only what and message */
};
const char *farm_missing_what_name(enum farm_missing_what what);
struct farm_missing {
        enum farm_missing_what what;
        char *machine, *hostname; /* hostname NULL: not told */
        char *scenario;           /* NULL: not about one */
        int64_t covered_ns, required_ns;
        char *message;
};

/* A scenario a gating machine ran, or that the rule requires. */
struct farm_scenario_cover {
        char *name;
        int64_t covered_ns;
        bool required;
        int64_t required_ns;
        char **loads; /* the generators it must contain */
        size_t nloads;
};

enum farm_machine_status { FARM_MACHINE_COMPLETE, FARM_MACHINE_PENDING, FARM_MACHINE_FAILED };
const char *farm_machine_status_name(enum farm_machine_status status);

/* A gating machine's answer. */
struct farm_verdict_machine {
        char *id, *hostname; /* hostname NULL: not told */
        int64_t threshold_ns;
        char **groups;
        size_t ngroups;
        bool ran;
        unsigned runs;
        int64_t covered_ns, clean_ns, missing_ns;
        bool has_problem;
        int64_t last_problem_ns;   /* when has_problem */
        int64_t first_ns, last_ns; /* of its data, when ran */
        struct farm_scenario_cover *scenarios;
        size_t nscenarios;
        unsigned problems, waived, not_counted;
        enum farm_machine_status status;
};

/* A machine that ran the release without gating it. */
struct farm_other_machine {
        char *id, *hostname;
        unsigned runs;
        const char *why; /* a constant text */
};

enum farm_group_source { FARM_GROUP_CONFIGURED, FARM_GROUP_SERIES, FARM_GROUP_DEFAULT };
const char *farm_group_source_name(enum farm_group_source source);

struct farm_verdict {
        char *release;
        char series[FARM_SERIES_NAME_MAX], group[FARM_GROUP_NAME_MAX];
        enum farm_group_source group_source;
        enum farm_verdict_status status;
        int64_t at_ns, asked_ns;
        struct {
                uint64_t intervals, events;
                int64_t covered_ns;
        } late;                /* stamped by at_ns, received after it */
        struct farm_rule rule; /* in force at at_ns */
        unsigned gating_machines, machines_ran;
        struct farm_verdict_machine *machines;
        size_t nmachines;
        struct farm_other_machine *others;
        size_t nothers;
        struct farm_builds builds;
        char *baseline; /* the release regressions are judged against; NULL: none */
        uint64_t problems_total, problem_counts[FARM_PROBLEM_NKINDS];
        struct farm_problem *problems; /* the first FARM_VERDICT_PROBLEMS_LISTED */
        size_t nproblems;
        uint64_t not_counted_total;
        struct farm_uncounted_problem *not_counted; /* as many listed */
        size_t nnot_counted;
        struct farm_waived_problem *waived;
        size_t nwaived;
        struct farm_missing *missing;
        size_t nmissing;
        char **reasons;
        size_t nreasons;
};

/* The interval a problem points at as its evidence, or NULL for a kind without one. */
const struct farm_evidence *farm_problem_evidence(const struct farm_problem *p);

void farm_evidence_done(struct farm_evidence *e);
void farm_builds_done(struct farm_builds *b);
/* A deep copy of b into ret: 0, or -ENOMEM (ret empty). */
int farm_builds_copy(const struct farm_builds *b, struct farm_builds *ret);
void farm_problem_done(struct farm_problem *p);
void farm_missing_done(struct farm_missing *m);
void farm_missing_list_free(struct farm_missing *v, size_t n);
void farm_verdict_machine_done(struct farm_verdict_machine *m);
void farm_strv_free(char **v, size_t n);
/* Frees v and all it holds (NULL: nothing). */
void farm_verdict_free(struct farm_verdict *v);

static inline void farm_verdict_freep(struct farm_verdict **v) {
        farm_verdict_free(*v);
}
#define _cleanup_verdict_ _cleanup_(farm_verdict_freep)
