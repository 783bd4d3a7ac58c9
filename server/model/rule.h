/* SPDX-License-Identifier: MIT */
/* The rule a kernel release must pass to qualify (docs/verdict.md): its numbers, the required
 * scenarios and their generators, the release series, kernel version order, and the rule's
 * canonical JSON, by which its versions are recorded in the farm database. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "name-rule.h"

#define FARM_RULE_SCENARIOS_MAX 32
#define FARM_SCENARIO_NAME_MAX 64
#define FARM_RULE_GENS_MAX 8
#define FARM_GENERATOR_NAME_MAX 33
#define FARM_RULE_SERIES_MAX 32
#define FARM_SERIES_NAME_MAX 64
#define FARM_GROUP_NAME_MAX 65
#define FARM_SERIES_GLOBS_MAX 512
#define FARM_RULE_ERROR_MAX 256
#define FARM_INVENTORY_GLOBS_MAX 1024

struct farm_rule_scenario {
        char name[FARM_SCENARIO_NAME_MAX];
        uint64_t min_ns;
};

/* The generators a scenario must contain while it counts. */
struct farm_rule_loads {
        char scenario[FARM_SCENARIO_NAME_MAX];
        size_t ngens;
        char gens[FARM_RULE_GENS_MAX][FARM_GENERATOR_NAME_MAX];
};

/* A [Series.NAME] section: the releases it claims and the group that judges them. */
struct farm_rule_series {
        char name[FARM_SERIES_NAME_MAX];
        char globs[FARM_SERIES_GLOBS_MAX]; /* space-separated shell patterns */
        char group[FARM_GROUP_NAME_MAX];   /* "" : the series' own name */
};

/* Every number comes from the server's configuration; the struct is plain data (copied,
 * compared and stored as JSON). */
struct farm_rule {
        uint64_t period_ns;          /* coverage every gating machine needs */
        uint64_t max_gap_ns;         /* longest silence that is not a problem */
        uint64_t load_down_max_ns;   /* generator down, consecutively */
        uint64_t load_down_total_ns; /* generator down, in total per machine */
        uint64_t probe_down_max_ns;  /* wake-ups missed over consecutive intervals */
        uint64_t max_probe_interval_ns;
        uint64_t clock_tolerance_ns;
        uint32_t min_samples_pm; /* per mille of the wake-ups a period allows */
        bool regression;
        uint32_t regression_tolerance_pct;
        uint64_t regression_min_diff_ns;
        uint64_t watch_ns; /* the verdict log's period; 0: no log */
        size_t nscenarios;
        struct farm_rule_scenario scenarios[FARM_RULE_SCENARIOS_MAX];
        size_t nloads;
        struct farm_rule_loads loads[FARM_RULE_SCENARIOS_MAX];
        size_t nseries;
        struct farm_rule_series series[FARM_RULE_SERIES_MAX];
        /* The inventory fields whose change on a gating machine during a release's data is a
         * machine_changed problem: space-separated shell patterns ("": none). */
        char inventory_fields[FARM_INVENTORY_GLOBS_MAX];
};

#define FARM_RULE_PERIOD_DEFAULT "30d"
#define FARM_RULE_MAX_GAP_DEFAULT "15min"
#define FARM_RULE_LOAD_DOWN_MAX_DEFAULT "10min"
#define FARM_RULE_LOAD_DOWN_TOTAL_DEFAULT "1h"
#define FARM_RULE_PROBE_DOWN_MAX_DEFAULT "1s"
#define FARM_RULE_MAX_PROBE_INTERVAL_DEFAULT "10ms"
#define FARM_RULE_CLOCK_TOLERANCE_DEFAULT "2min"
#define FARM_RULE_MIN_SAMPLES_DEFAULT "90%"
#define FARM_RULE_REGRESSION_TOLERANCE_DEFAULT "10%"
#define FARM_RULE_REGRESSION_MIN_DIFF_DEFAULT "5us"
#define FARM_RULE_WATCH_DEFAULT "1min"
#define FARM_RULE_SCENARIOS_DEFAULT "idle 1d, cpu 1d, io 1d, net 1d, hackbench 1d, mixed 1d"
/* What the machine is (its hardware, firmware, kernel and the tuning that changes latency);
 * not modules.*, which a plugged device changes, nor memory.hugepages. */
#define FARM_RULE_INVENTORY_FIELDS_DEFAULT                                                  \
        "dmi.* dt.* cpu.* numa.* memory.total_kib cmdline.* kconfig.* clocksource.current " \
        "cpufreq.* cpuidle.* sysctl.* irq.* thp.* service.* tuned.*"
#define FARM_RULE_LOADS_DEFAULT                                      \
        "cpu: cpu; io: fileio; net: network; hackbench: hackbench; " \
        "mixed: cpu fileio memory network"

/* Parses the required scenarios, "NAME SPAN, NAME SPAN ..." ("" or "none": none required), into
 * rule.  err names the entry that is wrong. */
int farm_rule_parse_scenarios(const char *text, struct farm_rule *rule, char *err, size_t errlen);
/* Parses "SCENARIO: GEN GEN; SCENARIO: GEN ..." ("" or "none": no scenario needs a generator). */
int farm_rule_parse_loads(const char *text, struct farm_rule *rule, char *err, size_t errlen);
/* A share such as "90%", "99.5%" or "0.9" as per mille (0-1000). */
int farm_rule_parse_share(const char *text, uint32_t *ret_pm, char *err, size_t errlen);
/* A percentage such as "10%" or "10" (0-1000). */
int farm_rule_parse_percent(const char *text, uint32_t *ret_pct, char *err, size_t errlen);
/* Parses InventoryFields=: shell patterns of inventory field names ("" or "none": no field
 * counts), each 1-64 of the characters of a field name and * ? [ ] !. */
int farm_rule_parse_inventory_fields(const char *text, struct farm_rule *rule, char *err,
                                     size_t errlen);
/* Whether a change of field counts as the machine changing (rule.inventory_fields). */
bool farm_rule_inventory_counts(const struct farm_rule *rule, const char *field);
/* Adds or updates a [Series.NAME] key (Releases= or Group=). */
int farm_rule_series_set(struct farm_rule *rule, const char *name, const char *key,
                         const char *value, char *err, size_t errlen);
/* The rule with every default. */
void farm_rule_default(struct farm_rule *rule);

/* The generators scenario must contain (none: 0 and NULL). */
const struct farm_rule_loads *farm_rule_loads_of(const struct farm_rule *rule,
                                                 const char *scenario);

/* The series of a release: the first [Series.NAME] (in name order) whose patterns match it,
 * else derived from the version ("6.6.30-rt31" -> "6.6-rt", "6.12.0" -> "6.12"; a name that
 * is no version is its own series).  ret_group gets the group that judges the series (""
 * when no section names one: the caller falls back as docs/verdict.md says). */
void farm_rule_series_of(const struct farm_rule *rule, const char *release,
                         char ret_series[static FARM_SERIES_NAME_MAX],
                         char ret_group[static FARM_GROUP_NAME_MAX]);

/* A series' name (1-63 letters, digits and . _ + ~ -) and a gating group's (1-64 of a-z, 0-9
 * and . _ -), as name_ok() checks them. */
extern const struct name_rule farm_name_series, farm_name_group;
/* Kernel version order: <0, 0, >0 like strcmp; numbers compare as numbers, "-rcN" comes
 * before the release it leads to, ties are broken by the text so that the order is total. */
int farm_version_cmp(const char *a, const char *b);

/* The rule as canonical JSON (every field, fixed order), and back (jansson's json_t: the
 * rule's own codec, for its versions in the farm database). */
typedef struct json_t json_t;
json_t *farm_rule_to_json(const struct farm_rule *rule);
int farm_rule_from_json(json_t *j, struct farm_rule *rule, char *err, size_t errlen);
