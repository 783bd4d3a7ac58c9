/* SPDX-License-Identifier: MIT */
/* The verdict engine.  A verdict reads its own snapshot of the farm database through a
 * connection of its own (so that a verdict over a month of a farm never holds up the uploads'
 * token checks), machine by machine: the coverage from the day rollups that the uploads keep
 * (falling back to the intervals for a day that is not complete at the moment asked about, or
 * whose intervals arrived out of order), the problems from the indexes on latency, events and
 * generator down time. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server-db-internal.h"
#include "server-verdict.h"
#include "server-trace.h"
#include "timeutil.h"

/* ---- the rule ----------------------------------------------------------------------------- */

int farm_rule_parse_scenarios(const char *text, struct farm_rule *rule, char *err, size_t errlen) {
        _cleanup_free_ char *copy = strdup(text);
        size_t n = 0;
        if (!copy)
                return -ENOMEM;
        const char *t = text;
        while (*t == ' ' || *t == '\t')
                t++;
        if (!*t || strcmp(t, "none") == 0) {
                rule->nscenarios = 0;
                return 0;
        }
        char *rest = copy;
        for (char *item; (item = strsep(&rest, ","));) {
                char name[FARM_SCENARIO_NAME_MAX], span[64], extra;
                while (*item == ' ' || *item == '\t')
                        item++;
                /* "NAME SPAN": the span may hold spaces itself ("1d 12h"). */
                char *sp = strpbrk(item, " \t");
                if (!sp || (size_t) (sp - item) >= sizeof(name) || sp == item) {
                        snprintf(err, errlen,
                                 "\"%s\": expected \"SCENARIO MINIMUM\" such as \"mixed 1d\"",
                                 item);
                        return -EINVAL;
                }
                memcpy(name, item, (size_t) (sp - item));
                name[sp - item] = '\0';
                while (*sp == ' ' || *sp == '\t')
                        sp++;
                if (sscanf(sp, "%63[^\n]%c", span, &extra) != 1) {
                        snprintf(err, errlen, "\"%s\": the minimum time is missing", item);
                        return -EINVAL;
                }
                for (size_t i = strlen(span); i > 0 && (span[i - 1] == ' ' || span[i - 1] == '\t');
                     i--)
                        span[i - 1] = '\0';
                uint64_t ns;
                const char *why = NULL;
                if (parse_timespan(span, &ns, &why) < 0 || ns == 0) {
                        snprintf(err, errlen, "\"%s\": %s: %s", item, span,
                                 why ?: "must be longer than 0");
                        return -EINVAL;
                }
                for (size_t i = 0; i < n; i++)
                        if (strcmp(rule->scenarios[i].name, name) == 0) {
                                snprintf(err, errlen, "scenario \"%s\" is listed twice", name);
                                return -EINVAL;
                        }
                if (n == FARM_RULE_SCENARIOS_MAX) {
                        snprintf(err, errlen, "more than %d scenarios", FARM_RULE_SCENARIOS_MAX);
                        return -EINVAL;
                }
                snprintf(rule->scenarios[n].name, sizeof(rule->scenarios[n].name), "%s", name);
                rule->scenarios[n++].min_ns = ns;
        }
        rule->nscenarios = n;
        return 0;
}

void farm_rule_default(struct farm_rule *rule) {
        char err[256];
        *rule = (struct farm_rule){};
        parse_timespan(FARM_RULE_PERIOD_DEFAULT, &rule->period_ns, NULL);
        parse_timespan(FARM_RULE_MAX_GAP_DEFAULT, &rule->max_gap_ns, NULL);
        parse_timespan(FARM_RULE_LOAD_DOWN_MAX_DEFAULT, &rule->load_down_max_ns, NULL);
        farm_rule_parse_scenarios(FARM_RULE_SCENARIOS_DEFAULT, rule, err, sizeof(err));
}

/* ---- a verdict's own connection and statements ---------------------------------------------- */

#define VSTMT_MAX 24

struct waiver {
        int64_t id, created_ns;
        char *problem, *reason, *by;
};

struct scen_cov {
        char name[FARM_SCENARIO_NAME_MAX];
        int64_t covered_ns;
};

/* A stretch of the machine's data on the release: one day of one run, or part of it. */
struct entry {
        int64_t run, first_ns, last_ns;
};

struct gap {
        int64_t run, start_ns, end_ns; /* run of the data before the gap */
};

struct machine {
        const char *id, *hostname;
        int64_t threshold_ns;
        int64_t covered_ns, first_ns, last_ns;
        int64_t last_problem_ns; /* the end of the latest unwaived problem; INT64_MIN: none */
        int64_t clean_ns;        /* coverage after it */
        unsigned runs, problems, waived;
        struct scen_cov *scen;
        size_t nscen;
        struct entry *entries;
        size_t nentries;
        struct gap *gaps; /* holes inside a day of a run */
        size_t ngaps;
};

struct vctx {
        farm_db *db;
        sqlite3 *c;
        const struct farm_rule *rule;
        const char *release;
        int64_t at;
        char *err;
        const char *sql[VSTMT_MAX];
        sqlite3_stmt *st[VSTMT_MAX];
        unsigned nst;
        struct waiver *waivers;
        size_t nwaivers;
        const char *find; /* a problem id looked for (waive), or NULL */
        bool found;
        json_t *problems, *waived, *missing, *reasons;
        uint64_t nproblems;
        uint64_t kind_counts[4];
};

static const char *const kinds[] = { "violation", "unclean_end", "gap", "load_down" };
enum { K_VIOLATION, K_UNCLEAN, K_GAP, K_LOAD_DOWN };

static void vctx_done(struct vctx *v) {
        for (unsigned i = 0; i < v->nst; i++)
                sqlite3_finalize(v->st[i]);
        if (v->c) {
                sqlite3_exec(v->c, "COMMIT", NULL, NULL, NULL);
                sqlite3_close_v2(v->c);
        }
        for (size_t i = 0; i < v->nwaivers; i++) {
                free(v->waivers[i].problem);
                free(v->waivers[i].reason);
                free(v->waivers[i].by);
        }
        free(v->waivers);
        json_decref(v->problems);
        json_decref(v->waived);
        json_decref(v->missing);
        json_decref(v->reasons);
}

static int vfail(struct vctx *v, int rc, const char *what) {
        return farm_fail_on(v->db, v->c, rc, what, v->err);
}

/* The statement for sql (a literal), prepared once per verdict, reset and unbound. */
static int vprep(struct vctx *v, const char *sql, sqlite3_stmt **ret) {
        for (unsigned i = 0; i < v->nst; i++)
                if (v->sql[i] == sql) {
                        sqlite3_reset(v->st[i]);
                        sqlite3_clear_bindings(v->st[i]);
                        *ret = v->st[i];
                        return 0;
                }
        if (v->nst == VSTMT_MAX)
                return farm_failf(v->db, -ENOSPC, v->err, "verdict statement cache full");
        int rc = sqlite3_prepare_v3(v->c, sql, -1, SQLITE_PREPARE_PERSISTENT, &v->st[v->nst], NULL);
        if (rc != SQLITE_OK)
                return vfail(v, rc, "cannot prepare a verdict query");
        v->sql[v->nst] = sql;
        *ret = v->st[v->nst++];
        return 0;
}

static int vopen(struct vctx *v) {
        int rc = sqlite3_open_v2(farm_db_path(v->db), &v->c,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK)
                return vfail(v, rc, "cannot open the database for a verdict");
        sqlite3_busy_timeout(v->c, 10000);
        /* One read transaction: every query of the verdict sees the same snapshot. */
        rc = sqlite3_exec(v->c, "BEGIN", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return vfail(v, rc, "cannot begin the verdict's snapshot");
        v->problems = json_array();
        v->waived = json_array();
        v->missing = json_array();
        v->reasons = json_array();
        if (!v->problems || !v->waived || !v->missing || !v->reasons)
                return -ENOMEM;
        return 0;
}

static char *dup_col(sqlite3_stmt *st, int col) {
        const char *t = (const char *) sqlite3_column_text(st, col);
        return strdup(t ?: "");
}

static int load_waivers(struct vctx *v) {
        sqlite3_stmt *st;
        int r = vprep(v,
                      "SELECT id, problem, reason, by, created_ns FROM waivers "
                      "WHERE kernel_release = ?1 AND created_ns <= ?2 "
                      "AND (withdrawn_ns IS NULL OR withdrawn_ns > ?2) ORDER BY id",
                      &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, v->release, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, v->at);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct waiver *w = realloc(v->waivers, (v->nwaivers + 1) * sizeof(*w));
                if (!w)
                        return -ENOMEM;
                v->waivers = w;
                w = &v->waivers[v->nwaivers++];
                *w = (struct waiver){ .id = sqlite3_column_int64(st, 0),
                                      .problem = dup_col(st, 1),
                                      .reason = dup_col(st, 2),
                                      .by = dup_col(st, 3),
                                      .created_ns = sqlite3_column_int64(st, 4) };
                if (!w->problem || !w->reason || !w->by)
                        return -ENOMEM;
        }
        return rc == SQLITE_DONE ? 0 : vfail(v, rc, "cannot read the waivers");
}

/* ---- formatting ------------------------------------------------------------------------------ */

static const char *ts(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        return format_timestamp_utc(buf, ns);
}

/* A duration for people: "29d 23h 59min", "250us". */
static const char *span(char buf[static TIMESPAN_MAX_LEN], int64_t ns) {
        if (ns <= 0)
                return "0s";
        uint64_t u = (uint64_t) ns;
        if (u < 60 * NSEC_PER_SEC)
                return format_timespan(buf, u < 1000 ? u
                                            : u < NSEC_PER_MSEC
                                                    ? u / 1000 * 1000
                                                    : u / NSEC_PER_MSEC * NSEC_PER_MSEC);
        /* "29d 23h 59min": whole minutes, the zero parts left out. */
        uint64_t min = u / (60 * NSEC_PER_SEC), d = min / 1440, h = min / 60 % 24, m = min % 60;
        int n = 0;
        buf[0] = '\0';
        if (d)
                n += snprintf(buf + n, TIMESPAN_MAX_LEN - (size_t) n, "%" PRIu64 "d", d);
        if (h)
                n += snprintf(buf + n, TIMESPAN_MAX_LEN - (size_t) n, "%s%" PRIu64 "h",
                              n ? " " : "", h);
        if (m)
                snprintf(buf + n, TIMESPAN_MAX_LEN - (size_t) n, "%s%" PRIu64 "min", n ? " " : "",
                         m);
        return buf;
}

static const char *host_of(const struct machine *m) {
        return *m->hostname ? m->hostname : m->id;
}

/* ---- problems ---------------------------------------------------------------------------------
 */

/* Files a problem (p has its "id"; taken over): waived, counted, listed up to the limit. */
static int add_problem(struct vctx *v, struct machine *m, int kind, json_t *p) {
        if (!p)
                return -ENOMEM;
        const char *id = json_string_value(json_object_get(p, "id"));
        for (size_t i = 0; i < v->nwaivers; i++)
                if (strcmp(v->waivers[i].problem, id) == 0) {
                        const struct waiver *w = &v->waivers[i];
                        char t[TIMESTAMP_MAX_LEN];
                        json_t *wj = json_pack("{s:I, s:s, s:s, s:I, s:s}", "id",
                                               (json_int_t) w->id, "reason", w->reason, "by", w->by,
                                               "created_ns", (json_int_t) w->created_ns, "created",
                                               ts(t, w->created_ns));
                        if (!wj || json_object_set_new(p, "waiver", wj) < 0 ||
                            json_array_append_new(v->waived, p) < 0)
                                return -ENOMEM;
                        m->waived++;
                        return 0;
                }
        if (v->find && strcmp(v->find, id) == 0)
                v->found = true;
        /* Where the problem ends: a gap or a generator down at its end, a violation at the end
         * of its interval, an unclean end at its time. */
        json_t *iv = json_object_get(p, "interval");
        int64_t end = json_integer_value(json_object_get(p, "time_ns"));
        if (json_is_integer(json_object_get(p, "end_ns")))
                end = json_integer_value(json_object_get(p, "end_ns"));
        else if (kind == K_VIOLATION && json_is_object(iv))
                end = json_integer_value(json_object_get(iv, "start_ns")) +
                      json_integer_value(json_object_get(iv, "length_ns"));
        m->last_problem_ns = MAX(m->last_problem_ns, end);
        m->problems++;
        v->nproblems++;
        v->kind_counts[kind]++;
        if (json_array_size(v->problems) < FARM_VERDICT_PROBLEMS_LISTED)
                return json_array_append_new(v->problems, p) < 0 ? -ENOMEM : 0;
        json_decref(p);
        return 0;
}

static json_t *interval_json(int64_t seq, int64_t start, int64_t length, const char *scenario) {
        char t[TIMESTAMP_MAX_LEN];
        return json_pack("{s:I, s:I, s:s, s:I, s:s?}", "seq", (json_int_t) seq, "start_ns",
                         (json_int_t) start, "start", ts(t, start), "length_ns",
                         (json_int_t) length, "scenario", scenario && *scenario ? scenario : NULL);
}

/* The last interval of run that started before t (evidence of what came before a gap or an
 * unclean end): seq < 0 when there is none. */
static int interval_before(struct vctx *v, int64_t run, int64_t t, json_t **ret) {
        sqlite3_stmt *st;
        int r = vprep(v,
                      "SELECT seq, start_ns, length_ns, scenario FROM intervals "
                      "WHERE run = ? AND start_ns < ? ORDER BY start_ns DESC LIMIT 1",
                      &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, t);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
                *ret = json_null();
                return 0;
        }
        if (rc != SQLITE_ROW)
                return vfail(v, rc, "cannot read an interval");
        *ret = interval_json(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                             sqlite3_column_int64(st, 2),
                             (const char *) sqlite3_column_text(st, 3));
        sqlite3_reset(st);
        return *ret ? 0 : -ENOMEM;
}

/* ---- coverage ---------------------------------------------------------------------------------
 */

static int add_scenario(struct machine *m, const char *name, int64_t ns) {
        for (size_t i = 0; i < m->nscen; i++)
                if (strcmp(m->scen[i].name, name) == 0) {
                        m->scen[i].covered_ns += ns;
                        return 0;
                }
        struct scen_cov *s = realloc(m->scen, (m->nscen + 1) * sizeof(*s));
        if (!s)
                return -ENOMEM;
        m->scen = s;
        snprintf(s[m->nscen].name, sizeof(s[m->nscen].name), "%s", name);
        s[m->nscen++].covered_ns = ns;
        return 0;
}

static int add_entry(struct machine *m, int64_t run, int64_t first, int64_t last) {
        struct entry *e = realloc(m->entries, (m->nentries + 1) * sizeof(*e));
        if (!e)
                return -ENOMEM;
        m->entries = e;
        e[m->nentries++] = (struct entry){ run, first, last };
        m->first_ns = m->nentries == 1 ? first : MIN(m->first_ns, first);
        m->last_ns = MAX(m->last_ns, last);
        return 0;
}

static int add_gap(struct machine *m, int64_t run, int64_t start, int64_t end) {
        struct gap *g = realloc(m->gaps, (m->ngaps + 1) * sizeof(*g));
        if (!g)
                return -ENOMEM;
        m->gaps = g;
        g[m->ngaps++] = (struct gap){ run, start, end };
        return 0;
}

/* Reads the intervals of run that start in [from, to) and ended by the verdict's moment, in
 * time order: their coverage (with coverage true) and the holes longer than the allowed gap
 * between them. */
static int scan_intervals(struct vctx *v, struct machine *m, int64_t run, int64_t from, int64_t to,
                          bool coverage) {
        sqlite3_stmt *st;
        int r = vprep(v,
                      "SELECT start_ns, length_ns, coalesce(scenario, '') FROM intervals "
                      "WHERE run = ?1 AND start_ns >= ?2 AND start_ns < ?3 "
                      "AND start_ns + length_ns <= ?4 ORDER BY start_ns",
                      &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, from);
        sqlite3_bind_int64(st, 3, to);
        sqlite3_bind_int64(st, 4, v->at);
        int64_t first = 0, last = INT64_MIN;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t s = sqlite3_column_int64(st, 0), len = sqlite3_column_int64(st, 1);
                if (last != INT64_MIN && s - last > (int64_t) v->rule->max_gap_ns &&
                    (r = add_gap(m, run, last, s)) < 0)
                        return r;
                if (last == INT64_MIN)
                        first = s;
                last = MAX(last, s + len);
                if (coverage) {
                        m->covered_ns += len;
                        if ((r = add_scenario(m, (const char *) sqlite3_column_text(st, 2), len)) <
                            0)
                                return r;
                }
        }
        if (rc != SQLITE_DONE)
                return vfail(v, rc, "cannot read the intervals");
        if (coverage && last != INT64_MIN)
                return add_entry(m, run, first, last);
        return 0;
}

/* Coverage of run after t (intervals starting at t or later, ended by at): whole days from
 * the rollups, the day of t and days still open at at from the intervals. */
static int run_coverage_since(struct vctx *v, int64_t run, int64_t t, int64_t *sum) {
        sqlite3_stmt *st, *iv;
        int64_t t_day = t >= 0 ? t / FARM_DAY_NS : -1;
        int r = vprep(v,
                      "SELECT day, covered_ns, last_end_ns, gaps_known FROM run_days "
                      "WHERE run = ? AND day >= ? AND first_start_ns < ? ORDER BY day",
                      &st);
        if (r < 0)
                return r;
        r = vprep(v,
                  "SELECT coalesce(sum(length_ns), 0) FROM intervals WHERE run = ?1 AND "
                  "start_ns >= ?2 AND start_ns < ?3 AND start_ns + length_ns <= ?4",
                  &iv);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, MAX(t_day, 0));
        sqlite3_bind_int64(st, 3, v->at);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t day = sqlite3_column_int64(st, 0);
                if (day > t_day && sqlite3_column_int64(st, 2) <= v->at &&
                    sqlite3_column_int(st, 3)) {
                        *sum += sqlite3_column_int64(st, 1);
                        continue;
                }
                sqlite3_bind_int64(iv, 1, run);
                sqlite3_bind_int64(iv, 2, MAX(t, day * FARM_DAY_NS));
                sqlite3_bind_int64(iv, 3, (day + 1) * FARM_DAY_NS);
                sqlite3_bind_int64(iv, 4, v->at);
                int irc = sqlite3_step(iv);
                if (irc != SQLITE_ROW) {
                        sqlite3_reset(st);
                        return vfail(v, irc, "cannot sum the intervals");
                }
                *sum += sqlite3_column_int64(iv, 0);
                sqlite3_reset(iv);
        }
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : vfail(v, rc, "cannot read the day rollups");
}

static int cmp_i64(const void *a, const void *b) {
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
        return x < y ? -1 : x > y;
}

/* Coverage of one run of the release: whole days from the rollups, the rest from intervals. */
static int run_coverage(struct vctx *v, struct machine *m, int64_t run) {
        _cleanup_free_ int64_t *rolled = NULL;
        size_t nrolled = 0, cap = 0;
        sqlite3_stmt *st;
        int r, rc;

        r = vprep(v,
                  "SELECT day, covered_ns, first_start_ns, last_end_ns, max_gap_ns, gaps_known "
                  "FROM run_days WHERE run = ? AND first_start_ns < ? ORDER BY day",
                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, v->at);
        /* The rows are read first: scanning intervals reuses nothing of this statement, but a
         * day read from intervals must not be counted from its rollup too. */
        struct dayrow {
                int64_t day, covered, first, last, max_gap;
                bool known;
        } *rows = NULL;
        size_t nrows = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct dayrow *d = realloc(rows, (nrows + 1) * sizeof(*d));
                if (!d) {
                        free(rows);
                        return -ENOMEM;
                }
                rows = d;
                rows[nrows++] = (struct dayrow){
                        sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                        sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                        sqlite3_column_int64(st, 4), sqlite3_column_int(st, 5) != 0
                };
        }
        if (rc != SQLITE_DONE) {
                free(rows);
                return vfail(v, rc, "cannot read the day rollups");
        }
        sqlite3_reset(st);
        for (size_t i = 0; i < nrows && r >= 0; i++) {
                const struct dayrow *d = &rows[i];
                int64_t from = d->day * FARM_DAY_NS, to = from + FARM_DAY_NS;
                if (d->last <= v->at && d->known) {
                        m->covered_ns += d->covered;
                        r = add_entry(m, run, d->first, d->last);
                        if (r >= 0 && d->max_gap > (int64_t) v->rule->max_gap_ns)
                                r = scan_intervals(v, m, run, from, to, false);
                        if (r >= 0 && nrolled == cap) {
                                cap = MAX(cap * 2, 16);
                                int64_t *n = realloc(rolled, cap * sizeof(*n));
                                if (!n)
                                        r = -ENOMEM;
                                else
                                        rolled = n;
                        }
                        if (r >= 0)
                                rolled[nrolled++] = d->day;
                } else
                        r = scan_intervals(v, m, run, from, to, true);
        }
        free(rows);
        if (r < 0 || nrolled == 0)
                return r;

        r = vprep(v, "SELECT day, scenario, covered_ns FROM run_day_scenarios WHERE run = ?", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t day = sqlite3_column_int64(st, 0);
                if (!bsearch(&day, rolled, nrolled, sizeof(*rolled), cmp_i64))
                        continue;
                r = add_scenario(m, (const char *) sqlite3_column_text(st, 1),
                                 sqlite3_column_int64(st, 2));
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : vfail(v, rc, "cannot read the scenario rollups");
}

/* ---- the problems of one run ------------------------------------------------------------------
 */

static int run_violations(struct vctx *v, struct machine *m, int64_t run, int64_t run_id) {
        sqlite3_stmt *st, *cs;
        int r = vprep(v,
                      "SELECT id, seq, start_ns, length_ns, scenario FROM intervals "
                      "WHERE run = ?1 AND max_ns > ?2 AND start_ns + length_ns <= ?3 "
                      "ORDER BY start_ns",
                      &st);
        if (r < 0)
                return r;
        r = vprep(v,
                  "SELECT cpu, max_ns, max_time_ns FROM interval_cpus "
                  "WHERE interval = ? AND max_ns > ? ORDER BY cpu",
                  &cs);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, m->threshold_ns);
        sqlite3_bind_int64(st, 3, v->at);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t seq = sqlite3_column_int64(st, 1), start = sqlite3_column_int64(st, 2),
                        len = sqlite3_column_int64(st, 3);
                const char *scen = (const char *) sqlite3_column_text(st, 4);
                sqlite3_reset(cs);
                sqlite3_bind_int64(cs, 1, sqlite3_column_int64(st, 0));
                sqlite3_bind_int64(cs, 2, m->threshold_ns);
                int crc;
                while ((crc = sqlite3_step(cs)) == SQLITE_ROW) {
                        int cpu = sqlite3_column_int(cs, 0);
                        int64_t value = sqlite3_column_int64(cs, 1),
                                when = sqlite3_column_int64(cs, 2);
                        char id[FARM_PROBLEM_ID_MAX], msg[512], t[TIMESTAMP_MAX_LEN];
                        char a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
                        snprintf(id, sizeof(id), "violation:%s:%" PRId64 ":%" PRId64 ":%d", m->id,
                                 run_id, seq, cpu);
                        snprintf(msg, sizeof(msg),
                                 "%s CPU %d: latency %s over the bound of %s at %s (scenario %s, "
                                 "run %" PRId64 ", interval %" PRId64 ")",
                                 host_of(m), cpu, span(a, value), span(b, m->threshold_ns),
                                 ts(t, when), scen ?: "none", run_id, seq);
                        json_t *pj = json_pack(
                                "{s:s, s:s, s:s, s:s, s:I, s:s, s:i, s:I, s:I, s:s?, s:I, s:o, "
                                "s:s}",
                                "id", id, "kind", "violation", "machine", m->id, "hostname",
                                m->hostname, "time_ns", (json_int_t) when, "time", t, "cpu", cpu,
                                "value_ns", (json_int_t) value, "threshold_ns",
                                (json_int_t) m->threshold_ns, "scenario", scen, "run",
                                (json_int_t) run_id, "interval",
                                interval_json(seq, start, len, scen), "message", msg);
                        /* What the flight recorder says ran instead: the culprit line. */
                        farm_trace_annotate_problem(v->c, pj, run, cpu, start, start + len, when);
                        r = add_problem(v, m, K_VIOLATION, pj);
                        if (r < 0)
                                return r;
                }
                if (crc != SQLITE_DONE)
                        return vfail(v, crc, "cannot read the CPUs of an interval");
        }
        return rc == SQLITE_DONE ? 0 : vfail(v, rc, "cannot look for violations");
}

static int run_unclean(struct vctx *v, struct machine *m, int64_t run, int64_t run_id) {
        sqlite3_stmt *st;
        int r = vprep(v,
                      "SELECT event_id, time_ns, message FROM events "
                      "WHERE run = ? AND type = 'unclean_end' AND time_ns <= ? ORDER BY time_ns",
                      &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, v->at);
        /* The events are few: read them before looking up their intervals. */
        struct ev {
                int64_t id, time;
                char *message;
        } *evs = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct ev *e = realloc(evs, (n + 1) * sizeof(*e));
                if (!e)
                        break;
                evs = e;
                evs[n++] = (struct ev){ sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                                        dup_col(st, 2) };
        }
        r = rc == SQLITE_DONE ? 0 : rc == SQLITE_ROW ? -ENOMEM : vfail(v, rc, "cannot read events");
        for (size_t i = 0; i < n; i++) {
                if (r >= 0) {
                        char id[FARM_PROBLEM_ID_MAX], msg[512], t[TIMESTAMP_MAX_LEN];
                        json_t *iv = NULL;
                        snprintf(id, sizeof(id), "unclean_end:%s:%" PRId64 ":%" PRId64, m->id,
                                 run_id, evs[i].id);
                        snprintf(msg, sizeof(msg),
                                 "%s: run %" PRId64
                                 " did not end cleanly (crash, reset or power loss); its last "
                                 "data is from %s",
                                 host_of(m), run_id, ts(t, evs[i].time));
                        r = interval_before(v, run, evs[i].time + 1, &iv);
                        if (r >= 0)
                                r = add_problem(v, m, K_UNCLEAN,
                                                json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, "
                                                          "s:o, s:s, s:s}",
                                                          "id", id, "kind", "unclean_end",
                                                          "machine", m->id, "hostname", m->hostname,
                                                          "time_ns", (json_int_t) evs[i].time,
                                                          "time", t, "run", (json_int_t) run_id,
                                                          "interval", iv, "message", msg, "detail",
                                                          evs[i].message ?: ""));
                }
                free(evs[i].message);
        }
        free(evs);
        return r;
}

static int flush_down(struct vctx *v, struct machine *m, int64_t run_id, const char *generator,
                      const char *scenario, int64_t seq, int64_t start, int64_t len,
                      int64_t down_ns, int64_t last_end) {
        if (down_ns <= (int64_t) v->rule->load_down_max_ns)
                return 0;
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[TIMESTAMP_MAX_LEN], a[TIMESPAN_MAX_LEN],
                b[TIMESPAN_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        snprintf(id, sizeof(id), "load_down:%s:%" PRId64 ":%" PRId64 ":%s", m->id, run_id, seq,
                 generator);
        snprintf(msg, sizeof(msg),
                 "%s: generator %s did not run its load for %s between %s and %s (scenario %s; "
                 "allowed %s)",
                 host_of(m), generator, span(a, down_ns), ts(t, start), ts(t2, last_end),
                 *scenario ? scenario : "none", span(b, (int64_t) v->rule->load_down_max_ns));
        return add_problem(
                v, m, K_LOAD_DOWN,
                json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s?, s:I, s:I, s:I, "
                          "s:o, s:s}",
                          "id", id, "kind", "load_down", "machine", m->id, "hostname", m->hostname,
                          "time_ns", (json_int_t) start, "time", t, "generator", generator,
                          "scenario", *scenario ? scenario : NULL, "value_ns", (json_int_t) down_ns,
                          "end_ns", (json_int_t) last_end, "run", (json_int_t) run_id, "interval",
                          interval_json(seq, start, len, scenario), "message", msg));
}

/* Generators that failed to run their load: stretches of consecutive intervals in which the
 * same generator was down, longer in sum than the rule allows. */
static int run_load_downs(struct vctx *v, struct machine *m, int64_t run, int64_t run_id) {
        sqlite3_stmt *st;
        int r = vprep(v,
                      "SELECT seq, load_idx, generator, start_ns, length_ns, "
                      "coalesce(scenario, ''), down_ns FROM load_downs "
                      "WHERE run = ? AND start_ns + length_ns <= ? ORDER BY load_idx, seq",
                      &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, run);
        sqlite3_bind_int64(st, 2, v->at);
        char gen[128] = "", scen[FARM_SCENARIO_NAME_MAX] = "";
        int64_t idx = -1, first_seq = 0, last_seq = -2, first_start = 0, first_len = 0, down = 0,
                last_end = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int64_t seq = sqlite3_column_int64(st, 0), li = sqlite3_column_int64(st, 1);
                const char *g = (const char *) sqlite3_column_text(st, 2);
                int64_t start = sqlite3_column_int64(st, 3), len = sqlite3_column_int64(st, 4);
                if (li != idx || seq != last_seq + 1 || strcmp(g, gen) != 0) {
                        if ((r = flush_down(v, m, run_id, gen, scen, first_seq, first_start,
                                            first_len, down, last_end)) < 0)
                                return r;
                        idx = li;
                        first_seq = seq;
                        first_start = start;
                        first_len = len;
                        down = 0;
                        snprintf(gen, sizeof(gen), "%s", g);
                        snprintf(scen, sizeof(scen), "%s",
                                 (const char *) sqlite3_column_text(st, 5));
                }
                down += sqlite3_column_int64(st, 6);
                last_seq = seq;
                last_end = start + len;
        }
        if (rc != SQLITE_DONE)
                return vfail(v, rc, "cannot read generator down times");
        return flush_down(v, m, run_id, gen, scen, first_seq, first_start, first_len, down,
                          last_end);
}

/* ---- gaps -------------------------------------------------------------------------------------
 */

/* Whether the machine reported on another release in [from, to): then it was not silent, it
 * ran something else. */
static int other_release_between(struct vctx *v, struct machine *m, int64_t from, int64_t to,
                                 bool *ret) {
        sqlite3_stmt *st;
        int r = vprep(
                v,
                "SELECT 1 FROM runs r WHERE r.machine_id = ?1 AND r.kernel_release <> ?2 "
                "AND EXISTS (SELECT 1 FROM intervals i WHERE i.run = r.id "
                "AND i.start_ns >= ?3 AND i.start_ns < ?4 AND i.start_ns + i.length_ns <= ?5) "
                "LIMIT 1",
                &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, m->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, v->release, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, from);
        sqlite3_bind_int64(st, 4, to);
        sqlite3_bind_int64(st, 5, v->at);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return vfail(v, rc, "cannot look for other releases");
        *ret = rc == SQLITE_ROW;
        sqlite3_reset(st);
        return 0;
}

static int gap_problem(struct vctx *v, struct machine *m, int64_t run, int64_t start, int64_t end,
                       bool ongoing) {
        char id[FARM_PROBLEM_ID_MAX], msg[512], t[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN],
                a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN];
        json_t *iv = NULL;
        int r = interval_before(v, run, start, &iv);
        if (r < 0)
                return r;
        snprintf(id, sizeof(id), "gap:%s:%" PRId64, m->id, start);
        if (ongoing)
                snprintf(msg, sizeof(msg), "%s: silent since %s (%s, allowed %s)", host_of(m),
                         ts(t, start), span(a, end - start),
                         span(b, (int64_t) v->rule->max_gap_ns));
        else
                snprintf(msg, sizeof(msg), "%s: no report for %s, from %s to %s (allowed %s)",
                         host_of(m), span(a, end - start), ts(t, start), ts(t2, end),
                         span(b, (int64_t) v->rule->max_gap_ns));
        return add_problem(v, m, K_GAP,
                           json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:b, s:o, s:s}",
                                     "id", id, "kind", "gap", "machine", m->id, "hostname",
                                     m->hostname, "time_ns", (json_int_t) start, "time",
                                     ts(t, start), "end_ns", (json_int_t) end, "value_ns",
                                     (json_int_t) (end - start), "ongoing", ongoing, "interval", iv,
                                     "message", msg));
}

static int cmp_entry(const void *a, const void *b) {
        const struct entry *x = a, *y = b;
        return x->first_ns < y->first_ns ? -1 : x->first_ns > y->first_ns;
}

static int cmp_gap(const void *a, const void *b) {
        const struct gap *x = a, *y = b;
        return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int machine_gaps(struct vctx *v, struct machine *m) {
        int64_t allowed = (int64_t) v->rule->max_gap_ns;
        int r;

        qsort(m->entries, m->nentries, sizeof(*m->entries), cmp_entry);
        /* Holes between stretches: inside one run the machine cannot have run anything else;
         * between runs it may have run another release meanwhile. */
        int64_t end = INT64_MIN, end_run = 0;
        for (size_t i = 0; i < m->nentries; i++) {
                const struct entry *e = &m->entries[i];
                if (end != INT64_MIN && e->first_ns - end > allowed) {
                        bool other = false;
                        if (e->run != end_run &&
                            (r = other_release_between(v, m, end, e->first_ns, &other)) < 0)
                                return r;
                        if (!other && (r = add_gap(m, end_run, end, e->first_ns)) < 0)
                                return r;
                }
                if (e->last_ns > end) {
                        end = e->last_ns;
                        end_run = e->run;
                }
        }
        if (m->ngaps)
                qsort(m->gaps, m->ngaps, sizeof(*m->gaps), cmp_gap);
        for (size_t i = 0; i < m->ngaps; i++)
                if ((r = gap_problem(v, m, m->gaps[i].run, m->gaps[i].start_ns, m->gaps[i].end_ns,
                                     false)) < 0)
                        return r;
        /* Silent now: nothing since the release's last data, on this release or another. */
        if (end != INT64_MIN && v->at - end > allowed) {
                bool other = false;
                if ((r = other_release_between(v, m, end, v->at, &other)) < 0)
                        return r;
                if (!other)
                        return gap_problem(v, m, end_run, end, v->at, true);
        }
        return 0;
}

/* ---- one machine ------------------------------------------------------------------------------
 */

static int missing_item(struct vctx *v, const struct machine *m, const char *what,
                        const char *scenario, int64_t covered, int64_t required, const char *msg) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:I, s:I, s:I, s:s}", "machine", m->id,
                              "hostname", m->hostname, "what", what, "scenario", scenario,
                              "covered_ns", (json_int_t) covered, "required_ns",
                              (json_int_t) required, "missing_ns",
                              (json_int_t) MAX(required - covered, 0), "message", msg);
        return j && json_array_append_new(v->missing, j) == 0 ? 0 : -ENOMEM;
}

static void machine_done(struct machine *m) {
        free(m->scen);
        free(m->entries);
        free(m->gaps);
}

static int judge_machine(struct vctx *v, struct machine *m, json_t **ret) {
        struct run {
                int64_t row, id;
        } *runs = NULL;
        size_t nruns = 0;
        sqlite3_stmt *st;
        int r, rc;

        r = vprep(v,
                  "SELECT id, run_id FROM runs WHERE machine_id = ? AND kernel_release = ? "
                  "AND start_ns <= ? ORDER BY start_ns",
                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, m->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, v->release, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, v->at);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct run *n = realloc(runs, (nruns + 1) * sizeof(*n));
                if (!n) {
                        free(runs);
                        return -ENOMEM;
                }
                runs = n;
                runs[nruns++] = (struct run){ sqlite3_column_int64(st, 0),
                                              sqlite3_column_int64(st, 1) };
        }
        if (rc != SQLITE_DONE) {
                free(runs);
                return vfail(v, rc, "cannot read the runs");
        }
        sqlite3_reset(st);
        m->runs = (unsigned) nruns;
        for (size_t i = 0; i < nruns && r >= 0; i++) {
                r = run_coverage(v, m, runs[i].row);
                if (r >= 0)
                        r = run_violations(v, m, runs[i].row, runs[i].id);
                if (r >= 0)
                        r = run_unclean(v, m, runs[i].row, runs[i].id);
                if (r >= 0)
                        r = run_load_downs(v, m, runs[i].row, runs[i].id);
        }
        if (r >= 0 && m->nentries > 0)
                r = machine_gaps(v, m);
        /* Clean coverage: all of it without a problem, else what came after the last one. */
        m->clean_ns = m->problems ? 0 : m->covered_ns;
        for (size_t i = 0; i < nruns && r >= 0 && m->problems; i++)
                r = run_coverage_since(v, runs[i].row, m->last_problem_ns, &m->clean_ns);
        free(runs);
        if (r < 0)
                return r;

        /* What is still missing. */
        char msg[512], a[TIMESPAN_MAX_LEN], b[TIMESPAN_MAX_LEN], c[TIMESPAN_MAX_LEN];
        bool pending = false;
        int64_t period = (int64_t) v->rule->period_ns;
        if (m->nentries == 0) {
                snprintf(msg, sizeof(msg), "%s has not run %s%s", host_of(m), v->release,
                         m->runs ? " long enough to report an interval" : "");
                r = missing_item(v, m, "not_run", NULL, 0, period, msg);
                pending = true;
        } else if (m->covered_ns < period) {
                snprintf(msg, sizeof(msg), "%s: %s of %s covered, %s still missing", host_of(m),
                         span(a, m->covered_ns), span(b, period), span(c, period - m->covered_ns));
                r = missing_item(v, m, "coverage", NULL, m->covered_ns, period, msg);
                pending = true;
        }
        json_auto_t *scen = json_array();
        if (!scen)
                return -ENOMEM;
        for (size_t i = 0; i < v->rule->nscenarios && r >= 0; i++) {
                const char *name = v->rule->scenarios[i].name;
                int64_t need = (int64_t) v->rule->scenarios[i].min_ns, got = 0;
                for (size_t k = 0; k < m->nscen; k++)
                        if (strcmp(m->scen[k].name, name) == 0)
                                got = m->scen[k].covered_ns;
                if (json_array_append_new(scen, json_pack("{s:s, s:I, s:I}", "name", name,
                                                          "covered_ns", (json_int_t) got,
                                                          "required_ns", (json_int_t) need)) < 0)
                        return -ENOMEM;
                if (got < need && m->nentries > 0) {
                        if (got == 0)
                                snprintf(msg, sizeof(msg), "%s: scenario %s never ran (needs %s)",
                                         host_of(m), name, span(a, need));
                        else
                                snprintf(msg, sizeof(msg),
                                         "%s: scenario %s covered %s of %s, %s still missing",
                                         host_of(m), name, span(a, got), span(b, need),
                                         span(c, need - got));
                        r = missing_item(v, m, "scenario", name, got, need, msg);
                        pending = true;
                }
        }
        if (r < 0)
                return r;
        for (size_t k = 0; k < m->nscen; k++) {
                bool required = false;
                for (size_t i = 0; i < v->rule->nscenarios; i++)
                        required |= strcmp(m->scen[k].name, v->rule->scenarios[i].name) == 0;
                if (!required &&
                    json_array_append_new(
                            scen,
                            json_pack("{s:s, s:I, s:n}", "name",
                                      *m->scen[k].name ? m->scen[k].name : "(none)", "covered_ns",
                                      (json_int_t) m->scen[k].covered_ns, "required_ns")) < 0)
                        return -ENOMEM;
        }
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        bool ran = m->nentries > 0;
        char t3[TIMESTAMP_MAX_LEN];
        *ret = json_pack(
                "{s:s, s:s, s:I, s:b, s:i, s:I, s:I, s:o, s:o, s:I, s:o, s:o, s:O, s:i, "
                "s:i, s:s}",
                "id", m->id, "hostname", m->hostname, "threshold_ns", (json_int_t) m->threshold_ns,
                "ran", ran, "runs", (int) m->runs, "covered_ns", (json_int_t) m->covered_ns,
                "clean_ns", (json_int_t) m->clean_ns, "last_problem_ns",
                m->problems ? json_integer(m->last_problem_ns) : json_null(), "last_problem",
                m->problems ? json_string(ts(t3, m->last_problem_ns)) : json_null(), "missing_ns",
                (json_int_t) MAX(period - m->covered_ns, 0), "first",
                ran ? json_string(ts(t1, m->first_ns)) : json_null(), "last",
                ran ? json_string(ts(t2, m->last_ns)) : json_null(), "scenarios", scen, "problems",
                (int) m->problems, "waived", (int) m->waived, "status",
                m->problems ? "failed"
                : pending   ? "pending"
                            : "complete");
        return *ret ? 0 : -ENOMEM;
}

/* ---- the verdict ------------------------------------------------------------------------------
 */

static int release_known(struct vctx *v, bool *ret) {
        sqlite3_stmt *st;
        int r = vprep(v, "SELECT 1 FROM runs WHERE kernel_release = ? LIMIT 1", &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, v->release, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return vfail(v, rc, "cannot look up the release");
        *ret = rc == SQLITE_ROW;
        sqlite3_reset(st);
        return 0;
}

static json_t *rule_json(const struct farm_rule *rule) {
        json_t *sc = json_array();
        for (size_t i = 0; sc && i < rule->nscenarios; i++)
                json_array_append_new(sc,
                                      json_pack("{s:s, s:I}", "name", rule->scenarios[i].name,
                                                "min_ns", (json_int_t) rule->scenarios[i].min_ns));
        return json_pack("{s:I, s:I, s:I, s:o}", "period_ns", (json_int_t) rule->period_ns,
                         "max_gap_ns", (json_int_t) rule->max_gap_ns, "load_down_max_ns",
                         (json_int_t) rule->load_down_max_ns, "scenarios", sc);
}

static int reason(struct vctx *v, const char *text) {
        return json_array_append_new(v->reasons, json_string(text)) < 0 ? -ENOMEM : 0;
}

static int verdict_run(struct vctx *v, json_t **ret) {
        json_auto_t *machines = json_array(), *others = json_array();
        bool known = false;
        sqlite3_stmt *st;
        int r, rc;

        if (!machines || !others)
                return -ENOMEM;
        if ((r = vopen(v)) < 0 || (r = release_known(v, &known)) < 0)
                return r;
        if (!known)
                return farm_failf(v->db, -ENOENT, v->err, "no machine ever ran release %s",
                                  v->release);
        if ((r = load_waivers(v)) < 0)
                return r;

        /* The gating set: gating machines whose token was not revoked by then. */
        r = vprep(v,
                  "SELECT id, coalesce(hostname, ''), threshold_ns, gating FROM machines "
                  "WHERE revoked_ns IS NULL OR revoked_ns > ? ORDER BY id",
                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, v->at);
        struct mrow {
                char *id, *host;
                int64_t threshold;
        } *gating = NULL;
        size_t ngating = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (!sqlite3_column_int(st, 3))
                        continue;
                struct mrow *n = realloc(gating, (ngating + 1) * sizeof(*n));
                if (!n)
                        break;
                gating = n;
                gating[ngating++] = (struct mrow){ dup_col(st, 0), dup_col(st, 1),
                                                   sqlite3_column_int64(st, 2) };
        }
        r = rc == SQLITE_DONE  ? 0
            : rc == SQLITE_ROW ? -ENOMEM
                               : vfail(v, rc, "cannot read the machines");
        sqlite3_reset(st);
        unsigned ran = 0, complete = 0;
        for (size_t i = 0; i < ngating; i++) {
                if (r >= 0) {
                        struct machine m = { .id = gating[i].id,
                                             .hostname = gating[i].host,
                                             .threshold_ns = gating[i].threshold,
                                             .last_problem_ns = INT64_MIN };
                        json_t *mj = NULL;
                        r = judge_machine(v, &m, &mj);
                        if (r >= 0 && json_array_append_new(machines, mj) < 0)
                                r = -ENOMEM;
                        ran += m.nentries > 0;
                        complete += r >= 0 && m.nentries > 0 &&
                                    strcmp(json_string_value(json_object_get(mj, "status")),
                                           "complete") == 0;
                        machine_done(&m);
                }
                free(gating[i].id);
                free(gating[i].host);
        }
        free(gating);
        if (r < 0)
                return r;

        /* Machines outside the gating set that ran it are listed, not judged. */
        r = vprep(v,
                  "SELECT m.id, coalesce(m.hostname, ''), count(*) FROM runs r "
                  "JOIN machines m ON m.id = r.machine_id WHERE r.kernel_release = ?1 "
                  "AND r.start_ns <= ?2 AND (m.gating = 0 OR (m.revoked_ns IS NOT NULL "
                  "AND m.revoked_ns <= ?2)) GROUP BY m.id ORDER BY m.id",
                  &st);
        if (r < 0)
                return r;
        sqlite3_bind_text(st, 1, v->release, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, v->at);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if (json_array_append_new(
                            others, json_pack("{s:s, s:s, s:i}", "id",
                                              (const char *) sqlite3_column_text(st, 0), "hostname",
                                              (const char *) sqlite3_column_text(st, 1), "runs",
                                              sqlite3_column_int(st, 2))) < 0)
                        return -ENOMEM;
        if (rc != SQLITE_DONE)
                return vfail(v, rc, "cannot read the other machines");
        sqlite3_reset(st);

        const char *status;
        char line[512], a[TIMESPAN_MAX_LEN];
        if (v->nproblems > 0) {
                status = "failed";
                snprintf(line, sizeof(line),
                         "%" PRIu64 " problem(s): %" PRIu64 " violation(s), %" PRIu64
                         " unclean end(s), %" PRIu64 " reporting gap(s), %" PRIu64
                         " generator failure(s)",
                         v->nproblems, v->kind_counts[K_VIOLATION], v->kind_counts[K_UNCLEAN],
                         v->kind_counts[K_GAP], v->kind_counts[K_LOAD_DOWN]);
                r = reason(v, line);
                for (size_t i = 0; r >= 0 && i < json_array_size(v->problems); i++)
                        r = reason(v, json_string_value(json_object_get(
                                              json_array_get(v->problems, i), "message")));
                if (r >= 0 && v->nproblems > json_array_size(v->problems)) {
                        snprintf(line, sizeof(line), "... and %" PRIu64 " more",
                                 v->nproblems - json_array_size(v->problems));
                        r = reason(v, line);
                }
        } else if (ngating == 0) {
                status = "pending";
                r = reason(v, "no gating machine is enrolled: nothing can qualify a release");
                if (r >= 0 &&
                    json_array_append_new(
                            v->missing, json_pack("{s:s, s:s}", "what", "gating_machines",
                                                  "message", "no gating machine is enrolled")) < 0)
                        r = -ENOMEM;
        } else if (json_array_size(v->missing) > 0) {
                status = "pending";
                for (size_t i = 0; r >= 0 && i < json_array_size(v->missing); i++)
                        r = reason(v, json_string_value(json_object_get(
                                              json_array_get(v->missing, i), "message")));
        } else {
                status = "qualified";
                snprintf(line, sizeof(line),
                         "all %u gating machine(s) ran %s for at least %s with every required "
                         "scenario and no problem",
                         complete, v->release, span(a, (int64_t) v->rule->period_ns));
                r = reason(v, line);
        }
        if (r >= 0 && json_array_size(v->waived) > 0) {
                snprintf(line, sizeof(line), "%zu problem(s) waived:", json_array_size(v->waived));
                r = reason(v, line);
                for (size_t i = 0; r >= 0 && i < json_array_size(v->waived); i++) {
                        json_t *p = json_array_get(v->waived, i), *w = json_object_get(p, "waiver");
                        snprintf(line, sizeof(line), "waived by %s (%s): %s",
                                 json_string_value(json_object_get(w, "by")),
                                 json_string_value(json_object_get(w, "reason")),
                                 json_string_value(json_object_get(p, "message")));
                        r = reason(v, line);
                }
        }
        if (r < 0)
                return r;

        json_t *counts = json_object();
        for (size_t i = 0; counts && i < ELEMENTSOF(kinds); i++)
                if (json_object_set_new(counts, kinds[i],
                                        json_integer((json_int_t) v->kind_counts[i])) < 0)
                        return -ENOMEM;
        char t[TIMESTAMP_MAX_LEN];
        *ret = json_pack("{s:s, s:s, s:I, s:s, s:o, s:i, s:i, s:O, s:O, s:I, s:o, s:I, s:O, "
                         "s:O, s:O, s:O}",
                         "release", v->release, "verdict", status, "at_ns", (json_int_t) v->at,
                         "at", ts(t, v->at), "rule", rule_json(v->rule), "gating_machines",
                         (int) ngating, "machines_ran", (int) ran, "machines", machines,
                         "other_machines", others, "problems_total", (json_int_t) v->nproblems,
                         "problem_counts", counts, "problems_listed",
                         (json_int_t) json_array_size(v->problems), "problems", v->problems,
                         "waived", v->waived, "missing", v->missing, "reasons", v->reasons);
        return *ret ? 0 : -ENOMEM;
}

int farm_verdict(farm_db *db, const struct farm_rule *rule, const char *release, int64_t at_ns,
                 json_t **ret, char err[static FARM_ERROR_MAX]) {
        struct vctx v = { .db = db, .rule = rule, .release = release, .at = at_ns, .err = err };
        int r = verdict_run(&v, ret);
        vctx_done(&v);
        return r;
}

const char *farm_verdict_status(const json_t *verdict) {
        return json_string_value(json_object_get(verdict, "verdict"));
}

/* ---- kernels ----------------------------------------------------------------------------------
 */

int farm_kernel_list(farm_db *db, json_t **ret, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        json_auto_t *list = json_array();
        int r = farm_prepare_r(db, "SELECT DISTINCT kernel_release FROM runs ORDER BY 1", &st, err);
        if (r < 0)
                return r;
        if (!list)
                return -ENOMEM;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if (json_array_append_new(list, farm_json_col_text(st, 0)) < 0)
                        return -ENOMEM;
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot list the releases", err);
        *ret = json_incref(list);
        return 0;
}

int farm_kernels_json(farm_db *db, const struct farm_rule *rule, int64_t at_ns,
                      const struct farm_page *page, json_t **ret, char err[static FARM_ERROR_MAX]) {
        json_auto_t *list = json_array();
        int64_t total = 0;
        struct krow {
                char *release;
                int machines, runs;
                int64_t first, last, covered;
        } *rows = NULL;
        size_t n = 0;
        int r = 0, rc;

        if (!list)
                return -ENOMEM;
        {
                _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
                _cleanup_reset_ sqlite3_stmt *st = NULL, *cnt = NULL;
                if ((r = farm_prepare_r(db,
                                        "SELECT count(DISTINCT kernel_release) FROM runs "
                                        "WHERE start_ns <= ?",
                                        &cnt, err)) < 0)
                        return r;
                sqlite3_bind_int64(cnt, 1, at_ns);
                if ((rc = sqlite3_step(cnt)) != SQLITE_ROW)
                        return farm_fail_on(db, farm_db_reader(db), rc, "cannot count the releases",
                                            err);
                total = sqlite3_column_int64(cnt, 0);
                r = farm_prepare_r(
                        db,
                        "SELECT r.kernel_release, count(DISTINCT r.machine_id), count(*), "
                        "min(r.start_ns), max(r.start_ns), (SELECT coalesce(sum(d.covered_ns), 0) "
                        "FROM run_days d JOIN runs q ON d.run = q.id "
                        "WHERE q.kernel_release = r.kernel_release AND d.last_end_ns <= ?1) "
                        "FROM runs r WHERE r.start_ns <= ?1 GROUP BY r.kernel_release "
                        "ORDER BY max(r.start_ns) DESC, r.kernel_release LIMIT ?2 OFFSET ?3",
                        &st, err);
                if (r < 0)
                        return r;
                sqlite3_bind_int64(st, 1, at_ns);
                sqlite3_bind_int64(st, 2, (int64_t) page->limit);
                sqlite3_bind_int64(st, 3, (int64_t) page->offset);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                        struct krow *k = realloc(rows, (n + 1) * sizeof(*k));
                        if (!k)
                                break;
                        rows = k;
                        rows[n++] = (struct krow){ dup_col(st, 0),
                                                   sqlite3_column_int(st, 1),
                                                   sqlite3_column_int(st, 2),
                                                   sqlite3_column_int64(st, 3),
                                                   sqlite3_column_int64(st, 4),
                                                   sqlite3_column_int64(st, 5) };
                }
                if (rc != SQLITE_DONE)
                        r = rc == SQLITE_ROW ? -ENOMEM
                                             : farm_fail_on(db, farm_db_reader(db), rc,
                                                            "cannot list the releases", err);
        }
        /* The verdicts are computed without the reader's lock: each has its own snapshot. */
        for (size_t i = 0; i < n; i++) {
                if (r >= 0) {
                        json_t *verdict = NULL, *missing = NULL;
                        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
                        r = farm_verdict(db, rule, rows[i].release, at_ns, &verdict, err);
                        if (r >= 0) {
                                missing = json_object_get(verdict, "missing");
                                json_t *k = json_pack(
                                        "{s:s, s:i, s:i, s:s, s:s, s:I, s:s, s:O, s:O, s:O}",
                                        "release", rows[i].release, "machines", rows[i].machines,
                                        "runs", rows[i].runs, "first_run", ts(t1, rows[i].first),
                                        "last_run", ts(t2, rows[i].last), "covered_ns",
                                        (json_int_t) rows[i].covered, "verdict",
                                        farm_verdict_status(verdict), "problems",
                                        json_object_get(verdict, "problems_total"), "missing",
                                        missing, "reasons", json_object_get(verdict, "reasons"));
                                if (!k || json_array_append_new(list, k) < 0)
                                        r = -ENOMEM;
                                json_decref(verdict);
                        }
                }
                free(rows[i].release);
        }
        free(rows);
        if (r < 0)
                return r;
        *ret = json_pack("{s:O, s:I, s:I, s:I}", "kernels", list, "total", (json_int_t) total,
                         "limit", (json_int_t) page->limit, "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

/* ---- waivers, audit, staff --------------------------------------------------------------------
 */

static int audit(farm_db *db, int64_t now_ns, const char *who, const char *action,
                 const char *release, const char *problem, int64_t waiver, const char *detail,
                 char *err) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = farm_prepare_w(db,
                               "INSERT INTO audit (time_ns, who, action, kernel_release, problem, "
                               "waiver, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
                               &st, err);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, now_ns);
        sqlite3_bind_text(st, 2, who, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, action, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, release, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, problem, -1, SQLITE_STATIC);
        if (waiver > 0)
                sqlite3_bind_int64(st, 6, waiver);
        sqlite3_bind_text(st, 7, detail, -1, SQLITE_STATIC);
        return farm_step_done(db, st, "cannot write the audit trail", err);
}

int farm_waive(farm_db *db, const struct farm_rule *rule, const char *release, const char *problem,
               const char *reason, const char *who, int64_t now_ns, int64_t *ret_id,
               char err[static FARM_ERROR_MAX]) {
        size_t rl = strlen(reason);
        if (rl == 0 || rl > FARM_WAIVER_REASON_MAX) {
                snprintf(err, FARM_ERROR_MAX, "reason: %s",
                         rl == 0 ? "a waiver needs a reason" : "longer than 1000 characters");
                return -EINVAL;
        }
        if (strlen(problem) >= FARM_PROBLEM_ID_MAX) {
                snprintf(err, FARM_ERROR_MAX, "problem: no such problem id");
                return -ENOENT;
        }
        /* The problem must be one of the current verdict, not yet waived. */
        struct vctx v = { .db = db,
                          .rule = rule,
                          .release = release,
                          .at = now_ns,
                          .err = err,
                          .find = problem };
        json_t *verdict = NULL;
        int r = verdict_run(&v, &verdict);
        bool found = v.found;
        vctx_done(&v);
        json_decref(verdict);
        if (r < 0)
                return r;
        if (!found) {
                snprintf(err, FARM_ERROR_MAX,
                         "problem: release %s has no unwaived problem \"%s\" (see the problems' "
                         "\"id\" in its verdict)",
                         release, problem);
                return -ENOENT;
        }

        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_writer_idle(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        if ((r = farm_exec_w(db, "BEGIN IMMEDIATE", err)) < 0)
                return r;
        r = farm_prepare_w(db,
                           "INSERT INTO waivers (kernel_release, problem, reason, by, created_ns) "
                           "VALUES (?, ?, ?, ?, ?)",
                           &st, err);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, release, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 2, problem, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 4, who, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 5, now_ns);
                r = farm_step_done(db, st, "cannot store the waiver", err);
        }
        int64_t id = r >= 0 ? sqlite3_last_insert_rowid(farm_db_writer(db)) : 0;
        if (r >= 0)
                r = audit(db, now_ns, who, "waive", release, problem, id, reason, err);
        if (r >= 0)
                r = farm_exec_w(db, "COMMIT", err);
        if (r < 0) {
                farm_rollback(db);
                return r;
        }
        *ret_id = id;
        return 0;
}

int farm_unwaive(farm_db *db, int64_t waiver_id, const char *who, const char *reason,
                 int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_writer_idle(db);
        _cleanup_reset_ sqlite3_stmt *sel = NULL, *st = NULL;
        int r;
        if ((r = farm_exec_w(db, "BEGIN IMMEDIATE", err)) < 0)
                return r;
        r = farm_prepare_w(db,
                           "SELECT kernel_release, problem FROM waivers "
                           "WHERE id = ? AND withdrawn_ns IS NULL",
                           &sel, err);
        if (r >= 0)
                r = farm_prepare_w(db,
                                   "UPDATE waivers SET withdrawn_ns = ?2, withdrawn_by = ?3 "
                                   "WHERE id = ?1",
                                   &st, err);
        if (r >= 0) {
                sqlite3_bind_int64(sel, 1, waiver_id);
                int rc = sqlite3_step(sel);
                if (rc == SQLITE_DONE)
                        r = farm_failf(db, -ENOENT, err, "no waiver %" PRId64 " is in force",
                                       waiver_id);
                else if (rc != SQLITE_ROW)
                        r = farm_fail_on(db, farm_db_writer(db), rc, "cannot read the waiver", err);
        }
        if (r >= 0) {
                sqlite3_bind_int64(st, 1, waiver_id);
                sqlite3_bind_int64(st, 2, now_ns);
                sqlite3_bind_text(st, 3, who, -1, SQLITE_STATIC);
                r = farm_step_done(db, st, "cannot withdraw the waiver", err);
        }
        if (r >= 0)
                r = audit(db, now_ns, who, "unwaive", (const char *) sqlite3_column_text(sel, 0),
                          (const char *) sqlite3_column_text(sel, 1), waiver_id, reason, err);
        if (r >= 0)
                r = farm_exec_w(db, "COMMIT", err);
        if (r < 0)
                farm_rollback(db);
        return r;
}

static int page_json(farm_db *db, const char *count_sql, const char *sql, const char *release,
                     const struct farm_page *page, const char *key,
                     json_t *(*row)(sqlite3_stmt *st), json_t **ret, char *err) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_reader(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL, *cnt = NULL;
        json_auto_t *list = json_array();
        int r, rc;
        if (!list)
                return -ENOMEM;
        if ((r = farm_prepare_r(db, count_sql, &cnt, err)) < 0 ||
            (r = farm_prepare_r(db, sql, &st, err)) < 0)
                return r;
        sqlite3_bind_text(cnt, 1, release, -1, SQLITE_STATIC);
        if ((rc = sqlite3_step(cnt)) != SQLITE_ROW)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot count", err);
        sqlite3_bind_text(st, 1, release, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (int64_t) page->limit);
        sqlite3_bind_int64(st, 3, (int64_t) page->offset);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                if (json_array_append_new(list, row(st)) < 0)
                        return -ENOMEM;
        if (rc != SQLITE_DONE)
                return farm_fail_on(db, farm_db_reader(db), rc, "cannot list", err);
        *ret = json_pack("{s:O, s:I, s:I, s:I}", key, list, "total",
                         (json_int_t) sqlite3_column_int64(cnt, 0), "limit",
                         (json_int_t) page->limit, "offset", (json_int_t) page->offset);
        return *ret ? 0 : -ENOMEM;
}

static json_t *waiver_row(sqlite3_stmt *st) {
        return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                         "release", farm_json_col_text(st, 1), "problem", farm_json_col_text(st, 2),
                         "reason", farm_json_col_text(st, 3), "by", farm_json_col_text(st, 4),
                         "created_ns", farm_json_col_int(st, 5), "withdrawn_ns",
                         farm_json_col_int(st, 6), "withdrawn_by", farm_json_col_text(st, 7));
}

int farm_waivers_json(farm_db *db, const char *release, const struct farm_page *page, json_t **ret,
                      char err[static FARM_ERROR_MAX]) {
        return page_json(db, "SELECT count(*) FROM waivers WHERE ?1 IS NULL OR kernel_release = ?1",
                         "SELECT id, kernel_release, problem, reason, by, created_ns, "
                         "withdrawn_ns, withdrawn_by FROM waivers "
                         "WHERE ?1 IS NULL OR kernel_release = ?1 ORDER BY id DESC "
                         "LIMIT ?2 OFFSET ?3",
                         release, page, "waivers", waiver_row, ret, err);
}

static json_t *audit_row(sqlite3_stmt *st) {
        return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", farm_json_col_int(st, 0),
                         "time_ns", farm_json_col_int(st, 1), "who", farm_json_col_text(st, 2),
                         "action", farm_json_col_text(st, 3), "release", farm_json_col_text(st, 4),
                         "problem", farm_json_col_text(st, 5), "waiver", farm_json_col_int(st, 6),
                         "detail", farm_json_col_text(st, 7));
}

int farm_audit_json(farm_db *db, const struct farm_page *page, json_t **ret,
                    char err[static FARM_ERROR_MAX]) {
        return page_json(db, "SELECT count(*) FROM audit WHERE ?1 IS NULL",
                         "SELECT id, time_ns, who, action, kernel_release, problem, waiver, detail "
                         "FROM audit WHERE ?1 IS NULL ORDER BY id DESC LIMIT ?2 OFFSET ?3",
                         NULL, page, "audit", audit_row, ret, err);
}

bool farm_admin_name_valid(const char *name) {
        size_t n = strlen(name);
        if (n == 0 || n > FARM_ADMIN_NAME_MAX)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || strchr("._@-", *p)))
                        return false;
        return true;
}

int farm_admin_add(farm_db *db, const char *name, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                   int64_t now_ns, char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_writer_idle(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r;
        if ((r = farm_exec_w(db, "BEGIN IMMEDIATE", err)) < 0)
                return r;
        r = farm_prepare_w(db,
                           "INSERT INTO admins (name, token_hash, created_ns) VALUES (?1, ?2, ?3) "
                           "ON CONFLICT (name) DO UPDATE SET token_hash = ?2, created_ns = ?3, "
                           "revoked_ns = NULL",
                           &st, err);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
                sqlite3_bind_blob(st, 2, token_hash, SHA256_DIGEST_SIZE, SQLITE_STATIC);
                sqlite3_bind_int64(st, 3, now_ns);
                r = farm_step_done(db, st, "cannot store the staff token", err);
        }
        if (r >= 0)
                r = audit(db, now_ns, name, "admin_token", NULL, NULL, 0, NULL, err);
        if (r >= 0)
                r = farm_exec_w(db, "COMMIT", err);
        if (r < 0)
                farm_rollback(db);
        return r;
}

int farm_admin_revoke(farm_db *db, const char *name, int64_t now_ns,
                      char err[static FARM_ERROR_MAX]) {
        _cleanup_unlock_ pthread_mutex_t *lock = farm_lock_writer_idle(db);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r;
        if ((r = farm_exec_w(db, "BEGIN IMMEDIATE", err)) < 0)
                return r;
        r = farm_prepare_w(
                db, "UPDATE admins SET revoked_ns = ?2 WHERE name = ?1 AND revoked_ns IS NULL", &st,
                err);
        if (r >= 0) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, now_ns);
                r = farm_step_done(db, st, "cannot revoke the staff token", err);
        }
        if (r >= 0 && sqlite3_changes(farm_db_writer(db)) == 0)
                r = farm_failf(db, -ENOENT, err, "no staff token of %s is in force", name);
        if (r >= 0)
                r = audit(db, now_ns, name, "admin_revoke", NULL, NULL, 0, NULL, err);
        if (r >= 0)
                r = farm_exec_w(db, "COMMIT", err);
        if (r < 0)
                farm_rollback(db);
        return r;
}

int farm_admin_authenticate(farm_db *db, const uint8_t token_hash[SHA256_DIGEST_SIZE],
                            char ret_name[static FARM_ADMIN_NAME_MAX + 1]) {
        return farm_token_lookup(
                db, "SELECT name, token_hash, revoked_ns IS NULL FROM admins WHERE token_hash = ?",
                token_hash, ret_name, FARM_ADMIN_NAME_MAX + 1);
}
