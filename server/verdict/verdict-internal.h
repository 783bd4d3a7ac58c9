/* SPDX-License-Identifier: MIT */
/* Inside the verdict engine: one verdict's context (its own snapshot of the farm database,
 * the rule and settings in force, what has been found so far) and one machine's judgement,
 * shared by server-verdict*.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "db-internal.h"
#include "grow.h"
#include "rule.h"
#include "verdict.h"
#include "verdict-model.h"

#define VTEXT_MAX 64 /* a timestamp or a span as text */

struct vspan {
        int64_t start, end; /* [start, end) */
};

struct vsetting {
        int64_t from_ns, bound_ns;
        bool gating, revoked;
        char *groups; /* "a,b" */
};

struct vwaiver {
        int64_t id, created_ns;
        char *problem, *reason, *by;
};

struct vscen {
        char name[FARM_SCENARIO_NAME_MAX];
        int64_t covered_ns;
};

/* A stretch of the release's data on the machine (for its silences). */
struct ventry {
        int64_t run, start, end;
};

/* Coverage counted from a day (fast) or an interval (raw), for the clean coverage. */
struct vseg {
        int64_t run, day, start, counted;
        bool fast;
};

/* Intervals in which a probe (cpu >= 0) or a generator (name) did not measure or run: a
 * generator's one interval, or a probe's consecutive intervals as they were read (seq to
 * last_seq, start to end, missing summed); stretches are merged when flushed. */
struct vdown {
        int64_t run, run_id, seq, last_seq, start, len, end, missing_ns;
        uint64_t missing_wakeups;
        int cpu;
        char name[FARM_GENERATOR_NAME_MAX];
        char scenario[FARM_SCENARIO_NAME_MAX];
};

struct vclock {
        int64_t run_id, first_received_ns, max_skew_ns;
        uint64_t intervals;
};

struct vmachine {
        char id[FARM_MACHINE_ID_LEN + 1];
        char *hostname;
        struct vsetting *set; /* the first applies from INT64_MIN: to all it sent before */
        size_t nset;
        int64_t enrolled_ns; /* when the first was recorded */
        struct vspan *gate;  /* when it gated the release's group, up to at */
        size_t ngate;
        bool gating; /* at `at` */
        const char *why_not;
        unsigned runs;
        int64_t covered_ns, first_ns, last_ns;
        struct vscen *scen;
        size_t nscen;
        json_t *scen_index; /* name: index in scen */
        struct ventry *entries;
        size_t nentries;
        struct vseg *segs;
        size_t nsegs;
        struct vdown *downs;
        size_t ndowns;
        /* The probes' downs that end at interval open_seq of run open_run, by CPU (indices in
         * downs): the next interval's extend them rather than add one each. */
        size_t *open, *open_next, nopen;
        int64_t open_run, open_seq;
        struct vclock *clocks;
        size_t nclocks;
        struct vspan *windows; /* maintenance in force */
        size_t nwindows;
        unsigned problems, waived, not_counted;
        int64_t last_problem_ns; /* the end of the latest counted, unwaived problem */
        int64_t clean_ns;
        char **builds; /* kernel versions of its runs while gating */
        size_t nbuilds;
};

struct farm_machine_inventory;

struct vctx {
        farm_db *db;
        sql_conn *c; /* in a read-only snapshot for the whole verdict */
        char *err;
        struct farm_rule rule;
        const char *release;
        char series[FARM_SERIES_NAME_MAX], group[FARM_GROUP_NAME_MAX];
        enum farm_group_source group_source;
        /* group judges from group_from on (the first moment a machine was a member of it);
         * before that, the group "default" did.  INT64_MIN: group judges all along. */
        int64_t group_from;
        int64_t at, known, asked; /* known: INT64_MAX when not bounded */
        struct vwaiver *waivers;
        size_t nwaivers;
        const char *find;                     /* a problem id looked for (waive), or NULL */
        const struct farm_problem_sink *sink; /* told every counted problem, or NULL */
        bool found;
        /* The answer being made: its problems, what is missing, the builds, the late data. */
        struct farm_verdict *out;
        uint64_t not_counted_kinds[FARM_PROBLEM_NKINDS];
        bool raw_only;     /* RTSOAK_VERDICT_RAW=1: every day from its intervals (cross-checks) */
        size_t chunk_rows; /* of a day read interval by interval (RTSOAK_VERDICT_CHUNK=N) */
        /* The newest inventory of each machine of the release and of inv_baseline, read once
         * for all the regressions against that baseline (inventory-check.c); NULL: not yet. */
        char *inv_baseline;
        struct farm_machine_inventory *inv[2];
        size_t ninv[2];
        /* Which runs of the release may have something for a rare per-run check, by row id
         * (run-flags.c); read at the first question. */
        struct vrunflag *runflags;
        size_t nrunflags;
        bool runflags_loaded;
        int64_t min_bound; /* the lowest latency bound of any machine listed, at any time */
        /* The day rollups of the release's runs and their scenarios, by run and day
         * (run-days.c); read at the first question. */
        struct vday *days;
        size_t ndays;
        struct vdayscen *dayscens;
        size_t ndayscens;
        bool days_loaded;
        /* The release's runs, and other releases' runs of its machines, by machine
         * (release-runs.c); read at the first question. */
        struct vrelrun *relruns;
        size_t nrelruns;
        bool relruns_loaded;
        struct vother *others;
        size_t nothers;
        bool others_loaded;
        struct vmoved *moved;
        size_t nmoved;
        bool moved_loaded;
};

/* ---- the runs read once per verdict, by machine (release-runs.c) ---- */
/* A run of the release. */
struct vrelrun {
        char machine[FARM_MACHINE_ID_LEN + 1]; /* first: the rows are found by it */
        int64_t row, id, probe_ns, seq_min;    /* seq_min: -1 without intervals */
        char *probed, *build, *host;           /* probed: the CPU list as stored */
        size_t order;                          /* in the statement's order */
};
/* A run of another release on a machine of the release, with data. */
struct vother {
        char machine[FARM_MACHINE_ID_LEN + 1]; /* first: the rows are found by it */
        int64_t row, max_len, first_start, last_end;
};
/* The release's runs of machine stamped by `at` (or reported by then) and known by `known`,
 * by their start; views into what the context holds. */
int vrelease_runs(struct vctx *v, const char *machine, const struct vrelrun **ret, size_t *ret_n);
/* The runs of other releases of machine known by `known` that end after the release's first
 * data began, by row id. */
int vother_runs(struct vctx *v, const char *machine, const struct vother **ret, size_t *ret_n);
/* A machine of the release that moved on: the start of a run of another release, known by
 * `known`, that began after the end of every run of the release on the machine and holds an
 * interval that counts by `at` and `known` (ended by `at`, received by `known`, not stamped
 * ahead of its arrival beyond the rule's tolerance). */
struct vmoved {
        char machine[FARM_MACHINE_ID_LEN + 1]; /* first: the rows are found by it */
        int64_t first_start;
};
/* Such a start of machine (of any such run) into *ret, FARM_NONE when it has none. */
int vmoved_on(struct vctx *v, const char *machine, int64_t *ret);
void vrelease_runs_done(struct vctx *v);

/* ---- the day rollups of the release's runs (run-days.c) ---- */
struct vday {
        int64_t run; /* the run's row id */
        int64_t day, first, last, max_gap, counted, min_ratio, max_skew, max_received, max_missing;
        int64_t intervals; /* stored: more than are left after retention */
        bool gaps_known;
};
/* A day's coverage per scenario and whether its loads ran. */
struct vdayscen {
        int64_t run; /* the run's row id */
        int64_t day, counted, down;
        char *scenario, *gens;
};
struct vdays {
        const struct vday *v;
        size_t n;
};
struct vdayscens {
        const struct vdayscen *v;
        size_t n;
};
/* The days of the run of row id `run` stamped before `at`, and their scenarios, by day: views
 * into what the context holds (read for every run of the release at the first call). */
int vrun_days(struct vctx *v, int64_t run, struct vdays *ret_days, struct vdayscens *ret_scens);
void vrun_days_done(struct vctx *v);

/* ---- a day read interval by interval (day-cursor.c) ---- */
/* Its rows read in chunks of VDAY_CHUNK_ROWS, unless RTSOAK_VERDICT_CHUNK says otherwise (the
 * tests' small chunks cross their boundaries everywhere). */
#define VDAY_CHUNK_ROWS 16384
struct vload {
        char name[FARM_GENERATOR_NAME_MAX];
        int64_t down_ns; /* 0: it ran its load all along */
};
/* Rows of the intervals of a run's day, in the order (start, seq, a key within the interval):
 * columns 0 the interval's id, 1 its start, 2 its seq, 3 that key, then the rows' own. */
struct vday_cursor {
        const char *sql;
        bool not_measured; /* binds the rule's test of intervals that did not measure */
        sql_stmt *st;
        int rc;                   /* of its last step: SQL_ROW while a row is current */
        int64_t run, day, key[3]; /* key: of the last row read */
        size_t rows;              /* of the current chunk */
};
/* The day's intervals of the run of row id `run` (4 length, 5 scenario, 6 received, 7
 * counted, 8 its CPUs' lowest share of wake-ups, 9 the time its probes missed). */
int vday_intervals_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day);
/* Their generators (3 index, 4 name, 5 the time it did not run its load). */
int vday_loads_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day);
/* Their CPU rows (3 CPU, 4 samples, 5 the time its span covers), of the intervals that did
 * not measure by the rule, or more. */
int vday_cpus_open(struct vctx *v, struct vday_cursor *d, int64_t run, int64_t day);
/* The next row, if any (rc). */
int vday_next(struct vctx *v, struct vday_cursor *d);
/* Past the rows of the intervals read before (start, seq): the current row is then the first
 * of that interval, if it has any (vday_at). */
int vday_seek(struct vctx *v, struct vday_cursor *d, int64_t start, int64_t seq);
bool vday_at(const struct vday_cursor *d, int64_t id);
void vday_close(struct vday_cursor *d);

/* ---- which runs a rare per-run check may find something in (run-flags.c) ---- */
struct vrunflag {
        int64_t row;
        unsigned flags; /* VRUN_* */
};
enum {
        VRUN_CLOCK = 1,    /* a day stamped ahead of its arrival, or an event */
        VRUN_UNCLEAN = 2,  /* an unclean_end event */
        VRUN_OVERLAP = 4,  /* a row of "overlaps" */
        VRUN_OVER = 8,     /* an interval over min_bound */
        VRUN_CHANGED = 16, /* a run of a machine with two inventories of the release */
};
/* Whether the run of row id `row`, of the release, may have what flag names (false: surely
 * not; true: the check must look). */
int vrun_may_have(struct vctx *v, int64_t row, unsigned flag, bool *ret);

/* ---- context (server-verdict-context.c) ---- */
int vfail(struct vctx *v, int rc, const char *what);
/* The statement for sql (a literal) on the verdict's connection, reset and unbound. */
int vprep(struct vctx *v, const char *sql, sql_stmt **ret);
int vctx_open(struct vctx *v, const struct farm_rule *configured);
/* Frees what the context holds (its connection goes back to the pool); what the context's
 * readers loaded into it (inventories, days, runs) is theirs to free first. */
void vctx_done(struct vctx *v);
/* The machines' settings in force by `at` (those each was enrolled with from the beginning of
 * time) and their maintenance windows, for all of ms at once (ids set); then each machine's
 * gating stretches for v->group (vmachine_gate). */
int vmachines_load(struct vctx *v, struct vmachine *ms, size_t n);
int vmachine_gate(struct vctx *v, struct vmachine *m);
const char *vgroup_at(const struct vctx *v, int64_t t);
void vmachine_done(struct vmachine *m);
bool vmachine_gates_at(const struct vmachine *m, int64_t t);
int64_t vmachine_bound_at(const struct vmachine *m, int64_t t);
int64_t vmachine_min_bound(const struct vmachine *m);
/* Whether a machine is in group by the settings in force at t. */
bool vsetting_in_group(const struct vsetting *s, const char *group);
/* The part every problem has: its kind, id, machine (m's id and hostname), time and message,
 * copied into p (emptied first); ok is cleared when a copy failed. */
void vproblem_head(struct farm_problem *p, enum farm_problem_kind kind, const struct vmachine *m,
                   int64_t time_ns, const char *id, const char *msg, bool *ok);
/* Files problem p of m over [t, end] (taken over; freed when not ok, as a copy into it failed):
 * counted when m gated the release at t, waived, listed up to the limit. */
int vproblem(struct vctx *v, struct vmachine *m, int64_t t, int64_t end, struct farm_problem *p,
             bool ok);
const char *vhost(const struct vmachine *m);
const char *vts(char buf[static VTEXT_MAX], int64_t ns);
/* A duration for people: "29d 23h 59min", "250us". */
const char *vspan_text(char buf[static VTEXT_MAX], int64_t ns);
/* An interval as a problem's evidence (its scenario "" is none); ok cleared without memory. */
void vevidence(struct farm_evidence *e, int64_t seq, int64_t start, int64_t length,
               const char *scenario, bool *ok);
/* The last interval of run that started before t (evidence of what came before), as vevidence()
 * has it; all zero when there is none. */
int vinterval_before(struct vctx *v, int64_t run, int64_t t, struct farm_evidence *ret, bool *ok);
int vadd_scenario(struct vmachine *m, const char *name, int64_t ns);
int vspan_append(struct vspan **v, size_t *n, int64_t start, int64_t end);

/* ---- one machine (server-verdict-machine.c, server-verdict-gaps.c) ---- */
int vjudge_data(struct vctx *v, struct vmachine *m);
/* machine_changed problems of m between versions of its runs of the release (runs: those
 * runs, matched by the machine's own numbers of them), inventory-check.c. */
int vjudge_inventory(struct vctx *v, struct vmachine *m, const struct vrelrun *runs, size_t nruns);
/* For a regression of machine against baseline: the counted inventory fields in which its
 * version for the release differs from its version for the baseline, into ret's inventory_*;
 * the change described into buf ("" when none, or not known). */
int vinventory_against(struct vctx *v, const char *machine, const char *baseline,
                       struct farm_regression *ret, char *buf, size_t size);
/* Frees the inventories vinventory_against() read for the context. */
void vinventories_done(struct vctx *v);
int vjudge_gaps(struct vctx *v, struct vmachine *m);
int vjudge_clean(struct vctx *v, struct vmachine *m);

/* ---- the answer (verdict-answer.c): each adds to v->out ---- */
/* A gating machine's answer and what it misses; a machine that ran the release otherwise. */
int vanswer_machine(struct vctx *v, const struct vmachine *m);
int vanswer_other(struct vctx *v, const struct vmachine *m);
/* The verdict of the release, once every machine is answered, and why. */
int vanswer_release(struct vctx *v, unsigned ngating, unsigned ran, unsigned complete);

/* ---- regression (server-verdict-regress.c) ---- */
int vjudge_regressions(struct vctx *v, struct vmachine *machines, size_t n);
