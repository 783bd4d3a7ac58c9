/* SPDX-License-Identifier: MIT */
/* The rule a kernel release must pass: parsing its configuration, the series of a release,
 * kernel version order, and the rule's canonical JSON. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "rule.h"
#include "summary.h"
#include "timeutil.h"

static const char *skip_blank(const char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

static void trim_end(char *s) {
        for (size_t i = strlen(s); i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t'); i--)
                s[i - 1] = '\0';
}

static bool none_text(const char *text) {
        const char *t = skip_blank(text);
        return !*t || strcmp(t, "none") == 0;
}

int farm_rule_parse_scenarios(const char *text, struct farm_rule *rule, char *err, size_t errlen) {
        _cleanup_free_ char *copy = strdup(text);
        size_t n = 0;
        if (!copy)
                return -ENOMEM;
        if (none_text(text)) {
                rule->nscenarios = 0;
                return 0;
        }
        char *rest = copy;
        for (char *item; (item = strsep(&rest, ","));) {
                char name[FARM_SCENARIO_NAME_MAX], span[64], extra;
                item = (char *) skip_blank(item);
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
                char bad_name[NAME_WHY_MAX];
                if (!name_ok(&summary_name_scenario, name, bad_name)) {
                        snprintf(err, errlen, "\"%s\": not a scenario name (%s)", name, bad_name);
                        return -EINVAL;
                }
                sp = (char *) skip_blank(sp);
                if (sscanf(sp, "%63[^\n]%c", span, &extra) != 1) {
                        snprintf(err, errlen, "\"%s\": the minimum time is missing", item);
                        return -EINVAL;
                }
                trim_end(span);
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

static int cmp_gen(const void *a, const void *b) {
        return strcmp(a, b);
}

/* One "SCENARIO: GEN GEN" entry into l. */
static int parse_loads_entry(char *item, struct farm_rule_loads *l, char *err, size_t errlen) {
        char *colon = strchr(item, ':');
        if (!colon) {
                snprintf(err, errlen, "\"%s\": expected \"SCENARIO: GENERATOR ...\"", item);
                return -EINVAL;
        }
        *colon = '\0';
        trim_end(item);
        char why[NAME_WHY_MAX];
        if (!name_ok(&summary_name_scenario, item, why)) {
                snprintf(err, errlen, "\"%s\": not a scenario name (%s)", item, why);
                return -EINVAL;
        }
        snprintf(l->scenario, sizeof(l->scenario), "%s", item);
        l->ngens = 0;
        char *rest = colon + 1;
        for (char *g; (g = strsep(&rest, " \t"));) {
                if (!*g)
                        continue;
                if (!name_ok(&summary_name_generator, g, why)) {
                        snprintf(err, errlen, "%s: \"%s\": not a generator name (%s)", l->scenario,
                                 g, why);
                        return -EINVAL;
                }
                for (size_t i = 0; i < l->ngens; i++)
                        if (strcmp(l->gens[i], g) == 0) {
                                snprintf(err, errlen, "%s: generator %s is listed twice",
                                         l->scenario, g);
                                return -EINVAL;
                        }
                if (l->ngens == FARM_RULE_GENS_MAX) {
                        snprintf(err, errlen, "%s: more than %d generators", l->scenario,
                                 FARM_RULE_GENS_MAX);
                        return -EINVAL;
                }
                snprintf(l->gens[l->ngens++], FARM_GENERATOR_NAME_MAX, "%s", g);
        }
        qsort(l->gens, l->ngens, sizeof(l->gens[0]), cmp_gen);
        return 0;
}

int farm_rule_parse_loads(const char *text, struct farm_rule *rule, char *err, size_t errlen) {
        _cleanup_free_ char *copy = strdup(text);
        size_t n = 0;
        if (!copy)
                return -ENOMEM;
        if (none_text(text)) {
                rule->nloads = 0;
                return 0;
        }
        char *rest = copy;
        for (char *item; (item = strsep(&rest, ";"));) {
                item = (char *) skip_blank(item);
                trim_end(item);
                if (!*item)
                        continue;
                if (n == FARM_RULE_SCENARIOS_MAX) {
                        snprintf(err, errlen, "more than %d scenarios", FARM_RULE_SCENARIOS_MAX);
                        return -EINVAL;
                }
                struct farm_rule_loads l = {};
                int r = parse_loads_entry(item, &l, err, errlen);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (strcmp(rule->loads[i].scenario, l.scenario) == 0) {
                                snprintf(err, errlen, "scenario \"%s\" is listed twice",
                                         l.scenario);
                                return -EINVAL;
                        }
                rule->loads[n++] = l;
        }
        rule->nloads = n;
        return 0;
}

/* A decimal number of at most three decimals, times 10^scale_digits (without overflow). */
static int parse_fixed(const char *text, unsigned scale_digits, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;
        unsigned decimals = 0;
        bool dot = false, digit = false;
        for (const char *p = text; *p; p++) {
                if (*p == '.' && !dot) {
                        dot = true;
                        continue;
                }
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                if (dot && ++decimals > scale_digits)
                        return -EINVAL;
                digit = true;
                v = v * 10 + (uint64_t) (*p - '0');
                if (v > max * 1000)
                        return -ERANGE;
        }
        if (!digit)
                return -EINVAL;
        for (; decimals < scale_digits; decimals++)
                v *= 10;
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

int farm_rule_parse_share(const char *text, uint32_t *ret_pm, char *err, size_t errlen) {
        char buf[32];
        uint64_t v;
        const char *t = skip_blank(text);
        snprintf(buf, sizeof(buf), "%s", t);
        trim_end(buf);
        size_t n = strlen(buf);
        int r;
        if (n > 0 && buf[n - 1] == '%') {
                buf[n - 1] = '\0';
                /* Percent with one decimal: per mille. */
                r = parse_fixed(buf, 1, 1000, &v);
        } else
                r = parse_fixed(buf, 3, 1000, &v); /* a fraction 0-1 with three decimals */
        if (strlen(t) >= sizeof(buf) || r < 0) {
                snprintf(err, errlen,
                         "\"%s\": expected a share such as 90%% or 0.9 (0 to 100 %%, at most "
                         "0.1 %% finer)",
                         text);
                return -EINVAL;
        }
        *ret_pm = (uint32_t) v;
        return 0;
}

int farm_rule_parse_percent(const char *text, uint32_t *ret_pct, char *err, size_t errlen) {
        char buf[32];
        uint64_t v;
        const char *t = skip_blank(text);
        snprintf(buf, sizeof(buf), "%s", t);
        trim_end(buf);
        size_t n = strlen(buf);
        if (n > 0 && buf[n - 1] == '%')
                buf[n - 1] = '\0';
        if (strlen(t) >= sizeof(buf) || parse_fixed(buf, 0, 1000, &v) < 0) {
                snprintf(err, errlen, "\"%s\": expected a whole percentage 0-1000 (10 or 10%%)",
                         text);
                return -EINVAL;
        }
        *ret_pct = (uint32_t) v;
        return 0;
}

const struct name_rule farm_name_series = { "a series name", NAME_LOWER | NAME_UPPER | NAME_DIGITS,
                                            "._+~-", 1, FARM_SERIES_NAME_MAX - 1 };
const struct name_rule farm_name_group = { "a group name", NAME_LOWER | NAME_DIGITS, "._-", 1,
                                           FARM_GROUP_NAME_MAX - 1 };

static int cmp_series(const void *a, const void *b) {
        return strcmp(((const struct farm_rule_series *) a)->name,
                      ((const struct farm_rule_series *) b)->name);
}

int farm_rule_series_set(struct farm_rule *rule, const char *name, const char *key,
                         const char *value, char *err, size_t errlen) {
        char why[NAME_WHY_MAX];
        if (!name_ok(&farm_name_series, name, why)) {
                snprintf(err, errlen, "\"%s\": %s", name, why);
                return -EINVAL;
        }
        struct farm_rule_series *s = NULL;
        for (size_t i = 0; i < rule->nseries; i++)
                if (strcmp(rule->series[i].name, name) == 0)
                        s = &rule->series[i];
        if (!s) {
                if (rule->nseries == FARM_RULE_SERIES_MAX) {
                        snprintf(err, errlen, "more than %d series", FARM_RULE_SERIES_MAX);
                        return -EINVAL;
                }
                s = &rule->series[rule->nseries++];
                *s = (struct farm_rule_series){};
                snprintf(s->name, sizeof(s->name), "%s", name);
        }
        if (strcmp(key, "Releases") == 0) {
                const char *v = skip_blank(value);
                if (strlen(v) >= sizeof(s->globs)) {
                        snprintf(err, errlen, "Releases=: longer than %zu characters",
                                 sizeof(s->globs) - 1);
                        return -EINVAL;
                }
                /* Text as any configuration value (conf-parser.h); a release has no '/'. */
                if (strchr(v, '/')) {
                        snprintf(err, errlen, "Releases=: a pattern may not hold '/'");
                        return -EINVAL;
                }
                snprintf(s->globs, sizeof(s->globs), "%s", v);
                trim_end(s->globs);
        } else if (strcmp(key, "Group") == 0) {
                const char *v = skip_blank(value);
                if (*v && !name_ok(&farm_name_group, v, why)) {
                        snprintf(err, errlen, "Group=%s: %s", v, why);
                        return -EINVAL;
                }
                snprintf(s->group, sizeof(s->group), "%s", v);
        } else {
                snprintf(err, errlen, "unknown key %s (a series takes Releases= and Group=)", key);
                return -ENOENT;
        }
        qsort(rule->series, rule->nseries, sizeof(rule->series[0]), cmp_series);
        return 0;
}

void farm_rule_default(struct farm_rule *rule) {
        char err[FARM_RULE_ERROR_MAX];
        *rule = (struct farm_rule){ .regression = true };
        parse_timespan(FARM_RULE_PERIOD_DEFAULT, &rule->period_ns, NULL);
        parse_timespan(FARM_RULE_MAX_GAP_DEFAULT, &rule->max_gap_ns, NULL);
        parse_timespan(FARM_RULE_LOAD_DOWN_MAX_DEFAULT, &rule->load_down_max_ns, NULL);
        parse_timespan(FARM_RULE_LOAD_DOWN_TOTAL_DEFAULT, &rule->load_down_total_ns, NULL);
        parse_timespan(FARM_RULE_PROBE_DOWN_MAX_DEFAULT, &rule->probe_down_max_ns, NULL);
        parse_timespan(FARM_RULE_MAX_PROBE_INTERVAL_DEFAULT, &rule->max_probe_interval_ns, NULL);
        parse_timespan(FARM_RULE_CLOCK_TOLERANCE_DEFAULT, &rule->clock_tolerance_ns, NULL);
        parse_timespan(FARM_RULE_REGRESSION_MIN_DIFF_DEFAULT, &rule->regression_min_diff_ns, NULL);
        parse_timespan(FARM_RULE_WATCH_DEFAULT, &rule->watch_ns, NULL);
        farm_rule_parse_share(FARM_RULE_MIN_SAMPLES_DEFAULT, &rule->min_samples_pm, err,
                              sizeof(err));
        farm_rule_parse_percent(FARM_RULE_REGRESSION_TOLERANCE_DEFAULT,
                                &rule->regression_tolerance_pct, err, sizeof(err));
        farm_rule_parse_scenarios(FARM_RULE_SCENARIOS_DEFAULT, rule, err, sizeof(err));
        farm_rule_parse_loads(FARM_RULE_LOADS_DEFAULT, rule, err, sizeof(err));
        farm_rule_parse_inventory_fields(FARM_RULE_INVENTORY_FIELDS_DEFAULT, rule, err,
                                         sizeof(err));
}

const struct farm_rule_loads *farm_rule_loads_of(const struct farm_rule *rule,
                                                 const char *scenario) {
        for (size_t i = 0; scenario && i < rule->nloads; i++)
                if (strcmp(rule->loads[i].scenario, scenario) == 0)
                        return &rule->loads[i];
        return NULL;
}

/* ---- versions and series ------------------------------------------------------------------- */

/* The next token of a version: a run of digits (ret_num set) or of letters; separators are
 * skipped.  Returns the position after it, or NULL at the end. */
static const char *next_token(const char *p, bool *ret_digits, uint64_t *ret_num,
                              const char **ret_start, size_t *ret_len) {
        while (*p && !isalnum((unsigned char) *p))
                p++;
        if (!*p)
                return NULL;
        const char *s = p;
        bool digits = isdigit((unsigned char) *p);
        uint64_t v = 0;
        while (*p && isalnum((unsigned char) *p) && (isdigit((unsigned char) *p) != 0) == digits) {
                if (digits && v < UINT64_MAX / 10 - 10)
                        v = v * 10 + (uint64_t) (*p - '0');
                p++;
        }
        *ret_digits = digits;
        *ret_num = v;
        *ret_start = s;
        *ret_len = (size_t) (p - s);
        return p;
}

static bool is_rc(bool digits, const char *s, size_t len) {
        return !digits && len == 2 && strncasecmp(s, "rc", 2) == 0;
}

int farm_version_cmp(const char *a, const char *b) {
        const char *pa = a, *pb = b;
        for (;;) {
                bool da = false, db = false;
                uint64_t na = 0, nb = 0;
                const char *sa = NULL, *sb = NULL;
                size_t la = 0, lb = 0;
                pa = pa ? next_token(pa, &da, &na, &sa, &la) : NULL;
                pb = pb ? next_token(pb, &db, &nb, &sb, &lb) : NULL;
                if (!pa && !pb)
                        break;
                /* A release candidate comes before what has no candidate at its place. */
                bool ra = pa && is_rc(da, sa, la), rb = pb && is_rc(db, sb, lb);
                if (ra != rb)
                        return ra ? -1 : 1;
                if (!pa || !pb)
                        return pa ? 1 : -1; /* more parts: later (6.6.30-rt31 after 6.6.30) */
                if (da != db)
                        return da ? 1 : -1;
                if (da && na != nb)
                        return na < nb ? -1 : 1;
                if (!da) {
                        int c = strncmp(sa, sb, MIN(la, lb));
                        if (c || la != lb)
                                return c ? c : la < lb ? -1 : 1;
                }
        }
        return strcmp(a, b);
}

void farm_rule_series_of(const struct farm_rule *rule, const char *release,
                         char ret_series[static FARM_SERIES_NAME_MAX],
                         char ret_group[static FARM_GROUP_NAME_MAX]) {
        ret_group[0] = '\0';
        for (size_t i = 0; i < rule->nseries; i++) {
                char globs[FARM_SERIES_GLOBS_MAX], *rest = globs;
                snprintf(globs, sizeof(globs), "%s", rule->series[i].globs);
                for (char *g; (g = strsep(&rest, " \t"));)
                        if (*g && fnmatch(g, release, 0) == 0) {
                                snprintf(ret_series, FARM_SERIES_NAME_MAX, "%s",
                                         rule->series[i].name);
                                snprintf(ret_group, FARM_GROUP_NAME_MAX, "%s",
                                         rule->series[i].group);
                                return;
                        }
        }
        /* "MAJOR.MINOR", and "-rt" for a real-time release: an "rt" part, numbered as the
         * patch set names it (6.6.30-rt31) or not, as Debian names its RT kernels
         * (6.1.0-18-rt-amd64). */
        unsigned long major, minor;
        int used = 0;
        if (sscanf(release, "%lu.%lu%n", &major, &minor, &used) == 2 && used > 0 &&
            isdigit((unsigned char) release[0])) {
                bool rt = false;
                for (const char *p = release + used; (p = strstr(p, "rt")); p += 2)
                        if (!isalnum((unsigned char) p[-1]) &&
                            (isdigit((unsigned char) p[2]) || !isalpha((unsigned char) p[2])))
                                rt = true;
                snprintf(ret_series, FARM_SERIES_NAME_MAX, "%lu.%lu%s", major, minor,
                         rt ? "-rt" : "");
                return;
        }
        snprintf(ret_series, FARM_SERIES_NAME_MAX, "%.*s", FARM_SERIES_NAME_MAX - 1, release);
}

/* ---- canonical JSON -------------------------------------------------------------------------- */

json_t *farm_rule_to_json(const struct farm_rule *rule) {
        json_t *sc = json_array(), *loads = json_array(), *series = json_array();
        for (size_t i = 0; sc && i < rule->nscenarios; i++)
                json_array_append_new(sc,
                                      json_pack("{s:s, s:I}", "name", rule->scenarios[i].name,
                                                "min_ns", (json_int_t) rule->scenarios[i].min_ns));
        for (size_t i = 0; loads && i < rule->nloads; i++) {
                json_t *g = json_array();
                for (size_t k = 0; g && k < rule->loads[i].ngens; k++)
                        json_array_append_new(g, json_string(rule->loads[i].gens[k]));
                json_array_append_new(loads, json_pack("{s:s, s:o}", "scenario",
                                                       rule->loads[i].scenario, "generators", g));
        }
        for (size_t i = 0; series && i < rule->nseries; i++)
                json_array_append_new(series,
                                      json_pack("{s:s, s:s, s:s}", "name", rule->series[i].name,
                                                "releases", rule->series[i].globs, "group",
                                                rule->series[i].group));
        return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b, s:i, s:I, s:I, s:o, s:o, "
                         "s:o, s:s}",
                         "period_ns", (json_int_t) rule->period_ns, "max_gap_ns",
                         (json_int_t) rule->max_gap_ns, "load_down_max_ns",
                         (json_int_t) rule->load_down_max_ns, "load_down_total_ns",
                         (json_int_t) rule->load_down_total_ns, "probe_down_max_ns",
                         (json_int_t) rule->probe_down_max_ns, "max_probe_interval_ns",
                         (json_int_t) rule->max_probe_interval_ns, "clock_tolerance_ns",
                         (json_int_t) rule->clock_tolerance_ns, "min_samples_permille",
                         (int) rule->min_samples_pm, "regression", rule->regression,
                         "regression_tolerance_percent", (int) rule->regression_tolerance_pct,
                         "regression_min_difference_ns", (json_int_t) rule->regression_min_diff_ns,
                         "watch_ns", (json_int_t) rule->watch_ns, "scenarios", sc, "scenario_loads",
                         loads, "series", series, "inventory_fields", rule->inventory_fields);
}

static int get_u64(json_t *j, const char *key, uint64_t *ret) {
        json_t *v = json_object_get(j, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return -EINVAL;
        *ret = (uint64_t) json_integer_value(v);
        return 0;
}

int farm_rule_from_json(json_t *j, struct farm_rule *rule, char *err, size_t errlen) {
        struct farm_rule r = {};
        uint64_t pm = 0, pct = 0;
        json_t *x;
        size_t i;
        if (get_u64(j, "period_ns", &r.period_ns) < 0 ||
            get_u64(j, "max_gap_ns", &r.max_gap_ns) < 0 ||
            get_u64(j, "load_down_max_ns", &r.load_down_max_ns) < 0 ||
            get_u64(j, "load_down_total_ns", &r.load_down_total_ns) < 0 ||
            get_u64(j, "probe_down_max_ns", &r.probe_down_max_ns) < 0 ||
            get_u64(j, "max_probe_interval_ns", &r.max_probe_interval_ns) < 0 ||
            get_u64(j, "clock_tolerance_ns", &r.clock_tolerance_ns) < 0 ||
            get_u64(j, "min_samples_permille", &pm) < 0 || pm > 1000 ||
            get_u64(j, "regression_tolerance_percent", &pct) < 0 || pct > 1000 ||
            get_u64(j, "regression_min_difference_ns", &r.regression_min_diff_ns) < 0 ||
            get_u64(j, "watch_ns", &r.watch_ns) < 0 ||
            !json_is_boolean(json_object_get(j, "regression")))
                goto bad;
        r.min_samples_pm = (uint32_t) pm;
        r.regression_tolerance_pct = (uint32_t) pct;
        r.regression = json_is_true(json_object_get(j, "regression"));
        json_array_foreach (json_object_get(j, "scenarios"), i, x) {
                const char *n = json_string_value(json_object_get(x, "name"));
                if (!n || i >= FARM_RULE_SCENARIOS_MAX ||
                    get_u64(x, "min_ns", &r.scenarios[i].min_ns) < 0)
                        goto bad;
                snprintf(r.scenarios[i].name, FARM_SCENARIO_NAME_MAX, "%s", n);
                r.nscenarios = i + 1;
        }
        json_array_foreach (json_object_get(j, "scenario_loads"), i, x) {
                const char *n = json_string_value(json_object_get(x, "scenario"));
                json_t *g;
                size_t k;
                if (!n || i >= FARM_RULE_SCENARIOS_MAX)
                        goto bad;
                snprintf(r.loads[i].scenario, FARM_SCENARIO_NAME_MAX, "%s", n);
                json_array_foreach (json_object_get(x, "generators"), k, g) {
                        if (!json_is_string(g) || k >= FARM_RULE_GENS_MAX)
                                goto bad;
                        snprintf(r.loads[i].gens[k], FARM_GENERATOR_NAME_MAX, "%s",
                                 json_string_value(g));
                        r.loads[i].ngens = k + 1;
                }
                r.nloads = i + 1;
        }
        json_array_foreach (json_object_get(j, "series"), i, x) {
                const char *n = json_string_value(json_object_get(x, "name")),
                           *g = json_string_value(json_object_get(x, "releases")),
                           *gr = json_string_value(json_object_get(x, "group"));
                if (!n || !g || !gr || i >= FARM_RULE_SERIES_MAX)
                        goto bad;
                snprintf(r.series[i].name, FARM_SERIES_NAME_MAX, "%s", n);
                snprintf(r.series[i].globs, FARM_SERIES_GLOBS_MAX, "%s", g);
                snprintf(r.series[i].group, FARM_GROUP_NAME_MAX, "%s", gr);
                r.nseries = i + 1;
        }
        /* A version recorded before the inventory judges with the default. */
        json_t *inv = json_object_get(j, "inventory_fields");
        if (inv && (!json_is_string(inv) ||
                    farm_rule_parse_inventory_fields(json_string_value(inv), &r, err, errlen) < 0))
                goto bad;
        if (!inv && farm_rule_parse_inventory_fields(FARM_RULE_INVENTORY_FIELDS_DEFAULT, &r, err,
                                                     errlen) < 0)
                goto bad;
        *rule = r;
        return 0;
bad:
        snprintf(err, errlen, "a recorded version of the rule does not parse");
        return -EBADMSG;
}
