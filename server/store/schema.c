/* SPDX-License-Identifier: MIT */
/* The farm database's schema on each store: SQLite's migrations from the first version, and
 * PostgreSQL's schema made at once at the version where that store began (its tables of
 * intervals partitioned by month), with the migrations after it; the checks at open. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "day-hists.h"
#include "db-internal.h"
#include "partitions.h"

/* 'rtsf': marks the file as the farm database, so the machines' own database (and any other
 * SQLite file) is refused by name.  PostgreSQL keeps it in farm_meta. */
#define FARM_APPLICATION_ID 0x72747366
#define FARM_APPLICATION_NAME "rtsoak-farm"
#define FARM_SCHEMA_VERSION 12
/* The version at which the PostgreSQL store began: its schema is made at this version at
 * once, and pg_migrations[0] takes it to the next. */
#define FARM_PG_BASELINE_VERSION 6

/* Migration N takes the schema from version N to N+1.  Never edit a released entry: add one. */
static const char *const sqlite_migrations[] = {
        /* 0 -> 1: the first schema. */
        "CREATE TABLE machines ("
        "  id TEXT PRIMARY KEY CHECK (length(id) = 32),"
        "  token_hash BLOB NOT NULL CHECK (length(token_hash) = 32),"
        "  threshold_ns INTEGER NOT NULL CHECK (threshold_ns >= 0),"
        "  gating INTEGER NOT NULL CHECK (gating IN (0, 1)),"
        "  enrolled_ns INTEGER NOT NULL, rekeyed_ns INTEGER, revoked_ns INTEGER,"
        "  last_report_ns INTEGER, hostname TEXT, cpu_model TEXT, cpus INTEGER);"
        "CREATE TABLE runs ("
        "  id INTEGER PRIMARY KEY,"
        "  machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  run_id INTEGER NOT NULL CHECK (run_id >= 1),"
        "  boot_id TEXT NOT NULL, kernel_release TEXT NOT NULL, kernel_version TEXT NOT NULL,"
        "  kernel_cmdline TEXT NOT NULL, preempt_model TEXT NOT NULL,"
        "  daemon_version TEXT NOT NULL, config_digest TEXT NOT NULL,"
        "  start_ns INTEGER NOT NULL, threshold_ns INTEGER NOT NULL,"
        "  probe_interval_ns INTEGER NOT NULL, interval_ns INTEGER NOT NULL,"
        "  first_report_ns INTEGER NOT NULL,"
        "  UNIQUE (machine_id, run_id));"
        "CREATE INDEX runs_kernel ON runs(kernel_release);"
        "CREATE TABLE intervals ("
        "  id INTEGER PRIMARY KEY,"
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL CHECK (seq >= 0),"
        "  start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL CHECK (length_ns > 0),"
        "  scenario TEXT,"
        "  max_ns INTEGER NOT NULL," /* the worst of its CPUs, for the queries */
        "  UNIQUE (run, seq));"
        "CREATE INDEX intervals_start ON intervals(start_ns);"
        "CREATE TABLE interval_cpus ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  cpu INTEGER NOT NULL CHECK (cpu >= 0),"
        "  samples INTEGER NOT NULL, min_ns INTEGER NOT NULL, avg_ns INTEGER NOT NULL,"
        "  max_ns INTEGER NOT NULL, max_time_ns INTEGER NOT NULL,"
        "  violations INTEGER NOT NULL, missed INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  UNIQUE (interval, cpu));"
        "CREATE TABLE interval_loads ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  idx INTEGER NOT NULL CHECK (idx >= 0),"
        "  generator TEXT NOT NULL, up_ns INTEGER NOT NULL,"
        "  starts INTEGER NOT NULL, exits INTEGER NOT NULL,"
        "  UNIQUE (interval, idx));"
        "CREATE TABLE interval_load_metrics ("
        "  interval INTEGER NOT NULL REFERENCES intervals(id),"
        "  load_idx INTEGER NOT NULL, idx INTEGER NOT NULL,"
        "  name TEXT NOT NULL, unit TEXT NOT NULL, value REAL NOT NULL,"
        "  UNIQUE (interval, load_idx, idx));"
        "CREATE TABLE events ("
        "  id INTEGER PRIMARY KEY,"
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  event_id INTEGER NOT NULL CHECK (event_id >= 1),"
        "  time_ns INTEGER NOT NULL, type TEXT NOT NULL, cpu INTEGER, value INTEGER,"
        "  message TEXT NOT NULL,"
        "  UNIQUE (run, event_id));"
        "CREATE INDEX events_time ON events(time_ns);"
        "CREATE TABLE uploads ("
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL CHECK (seq >= 0),"
        "  received_ns INTEGER NOT NULL,"
        "  intervals INTEGER NOT NULL, events INTEGER NOT NULL,"
        "  UNIQUE (run, seq));",
        /* 1 -> 2: a token is looked up by its hash instead of compared with every machine's. */
        "CREATE INDEX machines_token ON machines(token_hash);",
        /* 2 -> 3: what the verdict and the queries need.  Per run and UTC day, the coverage and
         * the widest hole between intervals that arrived in time order (gaps_known = 0 once one
         * arrived out of order: that day is then read from its intervals), kept up to date as
         * uploads are stored, so that a verdict over a month of a farm reads thousands of rows,
         * not millions; the intervals in which a generator was down, and for how long;
         * per-machine counters for /metrics; staff tokens, waivers and their audit trail. */
        "CREATE TABLE run_days ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  intervals INTEGER NOT NULL, covered_ns INTEGER NOT NULL,"
        "  first_start_ns INTEGER NOT NULL, last_end_ns INTEGER NOT NULL,"
        "  max_gap_ns INTEGER NOT NULL, gaps_known INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run, day)) WITHOUT ROWID;"
        "CREATE TABLE run_day_scenarios ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  scenario TEXT NOT NULL, covered_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run, day, scenario)) WITHOUT ROWID;"
        "INSERT INTO run_days SELECT run, start_ns / 86400000000000, count(*), sum(length_ns),"
        "  min(start_ns), max(start_ns + length_ns), 0, 0, max(max_ns)"
        "  FROM intervals GROUP BY 1, 2;"
        "INSERT INTO run_day_scenarios SELECT run, start_ns / 86400000000000,"
        "  coalesce(scenario, ''), sum(length_ns) FROM intervals GROUP BY 1, 2, 3;"
        "CREATE TABLE load_downs ("
        "  run INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,"
        "  load_idx INTEGER NOT NULL, generator TEXT NOT NULL,"
        "  start_ns INTEGER NOT NULL, length_ns INTEGER NOT NULL, scenario TEXT,"
        "  down_ns INTEGER NOT NULL CHECK (down_ns > 0),"
        "  PRIMARY KEY (run, seq, load_idx)) WITHOUT ROWID;"
        "INSERT INTO load_downs SELECT i.run, i.seq, l.idx, l.generator, i.start_ns,"
        "  i.length_ns, i.scenario, i.length_ns - l.up_ns"
        "  FROM interval_loads l JOIN intervals i ON i.id = l.interval"
        "  WHERE l.up_ns < i.length_ns;"
        "CREATE INDEX intervals_run_start ON intervals(run, start_ns);"
        "CREATE INDEX intervals_run_max ON intervals(run, max_ns);"
        "CREATE INDEX events_run_type ON events(run, type, time_ns);"
        "CREATE INDEX runs_machine ON runs(machine_id, start_ns);"
        "ALTER TABLE machines ADD COLUMN violations_total INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE machines ADD COLUMN last_interval_start_ns INTEGER;"
        "ALTER TABLE machines ADD COLUMN last_worst_ns INTEGER;"
        "UPDATE machines SET violations_total = (SELECT coalesce(sum(c.violations), 0)"
        "  FROM interval_cpus c JOIN intervals i ON c.interval = i.id JOIN runs r ON i.run = r.id"
        "  WHERE r.machine_id = machines.id);"
        "CREATE TABLE admins ("
        "  name TEXT PRIMARY KEY, token_hash BLOB NOT NULL CHECK (length(token_hash) = 32),"
        "  created_ns INTEGER NOT NULL, revoked_ns INTEGER);"
        "CREATE INDEX admins_token ON admins(token_hash);"
        "CREATE TABLE waivers ("
        "  id INTEGER PRIMARY KEY, kernel_release TEXT NOT NULL, problem TEXT NOT NULL,"
        "  reason TEXT NOT NULL CHECK (length(reason) > 0), by TEXT NOT NULL,"
        "  created_ns INTEGER NOT NULL, withdrawn_ns INTEGER, withdrawn_by TEXT);"
        "CREATE INDEX waivers_kernel ON waivers(kernel_release, problem);"
        "CREATE TABLE audit ("
        "  id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, who TEXT NOT NULL,"
        "  action TEXT NOT NULL, kernel_release TEXT, problem TEXT, waiver INTEGER,"
        "  detail TEXT);",
        /* 3 -> 4: for the query API (server-query.c).  Each interval keeps the totals of its
         * CPUs (samples, violations, which CPU had the worst case and when), so that a month
         * of a machine's intervals per step reads one row per interval; merged histograms
         * per run, UTC day, scenario and CPU are cached in hist_days, filled by the queries
         * and dropped for a day when an interval of it is stored. */
        "ALTER TABLE intervals ADD COLUMN samples INTEGER;"
        "ALTER TABLE intervals ADD COLUMN violations INTEGER;"
        "ALTER TABLE intervals ADD COLUMN max_cpu INTEGER;"
        "ALTER TABLE intervals ADD COLUMN max_time_ns INTEGER;"
        "UPDATE intervals SET"
        "  samples = (SELECT sum(samples) FROM interval_cpus WHERE interval = intervals.id),"
        "  violations = (SELECT sum(violations) FROM interval_cpus"
        "    WHERE interval = intervals.id),"
        "  max_cpu = (SELECT cpu FROM interval_cpus WHERE interval = intervals.id"
        "    ORDER BY max_ns DESC, cpu LIMIT 1),"
        "  max_time_ns = (SELECT max_time_ns FROM interval_cpus WHERE interval = intervals.id"
        "    ORDER BY max_ns DESC, cpu LIMIT 1);"
        "CREATE TABLE hist_days ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  scenario TEXT NOT NULL, cpu INTEGER NOT NULL,"
        "  samples INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
        "  max_time_ns INTEGER NOT NULL, violations INTEGER NOT NULL,"
        "  hist_limit_us INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  PRIMARY KEY (run, day, scenario, cpu)) WITHOUT ROWID;"
        /* Covers the intervals query: a month of a machine's intervals is read from the
         * index alone, without a lookup of each row (a quarter less CPU per query). */
        "CREATE INDEX intervals_query ON intervals(run, start_ns, length_ns, max_ns, max_cpu,"
        "  max_time_ns, samples, violations, scenario);",
        /* 4 -> 5: an event's structured details (the forensics of an unclean end), JSON. */
        "ALTER TABLE events ADD COLUMN details TEXT;",
        /* 5 -> 6: the verdict's invariants (docs/verdict.md).  Runs: the name they are judged
         * under, the host and the probed CPUs they reported, the span of their intervals.
         * Intervals and events: when they were received (NULL: stored before this version,
         * taken as received when they ended); per interval what the rule needs that no
         * configured number changes: the span every probed CPU measured (m_start_ns,
         * m_end_ns; NULL: none), the smallest share of the wake-ups its period allows that a
         * probed CPU delivered (per mille; 0 for a probed CPU missing, -1 for more than the
         * period allows), and the part of the measured span no earlier-stored interval of the
         * machine covered (counted_ns).  Rollups of those per run and day (and scenario, with
         * the generators present in every interval and the time generators were down).
         * Overlaps of two runs of a machine; machine settings with their history; maintenance
         * windows; the rule's versions; the verdict log.  Derived values of the intervals
         * stored before are filled by migrate_6() below. */
        "ALTER TABLE runs ADD COLUMN release TEXT;"
        "ALTER TABLE runs ADD COLUMN hostname TEXT;"
        "ALTER TABLE runs ADD COLUMN probed_cpus TEXT;"
        "ALTER TABLE runs ADD COLUMN first_start_ns INTEGER;"
        "ALTER TABLE runs ADD COLUMN last_end_ns INTEGER;"
        "ALTER TABLE runs ADD COLUMN max_length_ns INTEGER NOT NULL DEFAULT 0;"
        "UPDATE runs SET release = kernel_release,"
        "  hostname = (SELECT hostname FROM machines WHERE machines.id = runs.machine_id),"
        "  first_start_ns = (SELECT min(start_ns) FROM intervals WHERE run = runs.id),"
        "  last_end_ns = (SELECT max(start_ns + length_ns) FROM intervals WHERE run = runs.id),"
        "  max_length_ns = coalesce((SELECT max(length_ns) FROM intervals"
        "    WHERE run = runs.id), 0);"
        "CREATE INDEX runs_release ON runs(release, start_ns);"
        "CREATE INDEX runs_machine_end ON runs(machine_id, last_end_ns);"
        "ALTER TABLE intervals ADD COLUMN received_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN m_start_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN m_end_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN min_ratio_pm INTEGER;"
        "ALTER TABLE intervals ADD COLUMN min_ratio_cpu INTEGER;"
        "ALTER TABLE intervals ADD COLUMN counted_ns INTEGER;"
        "ALTER TABLE intervals ADD COLUMN missing_ns INTEGER;"
        "ALTER TABLE interval_cpus ADD COLUMN span_start_ns INTEGER;"
        "ALTER TABLE interval_cpus ADD COLUMN span_length_ns INTEGER;"
        "ALTER TABLE events ADD COLUMN received_ns INTEGER;"
        "CREATE INDEX events_run_received ON events(run, received_ns);"
        "ALTER TABLE run_days ADD COLUMN counted_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN min_ratio_pm INTEGER NOT NULL DEFAULT 1000;"
        "ALTER TABLE run_days ADD COLUMN max_skew_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN max_received_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_days ADD COLUMN max_missing_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_day_scenarios ADD COLUMN counted_ns INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE run_day_scenarios ADD COLUMN gens_all TEXT;"
        "ALTER TABLE run_day_scenarios ADD COLUMN down_ns INTEGER NOT NULL DEFAULT 0;"
        "CREATE TABLE overlaps ("
        "  machine_id TEXT NOT NULL, run_a INTEGER NOT NULL REFERENCES runs(id),"
        "  run_b INTEGER NOT NULL REFERENCES runs(id), start_ns INTEGER NOT NULL,"
        "  end_ns INTEGER NOT NULL, received_ns INTEGER NOT NULL, CHECK (run_a < run_b));"
        "CREATE INDEX overlaps_a ON overlaps(run_a);"
        "CREATE INDEX overlaps_b ON overlaps(run_b);"
        "CREATE TABLE machine_settings ("
        "  id INTEGER PRIMARY KEY, machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  from_ns INTEGER NOT NULL, threshold_ns INTEGER NOT NULL CHECK (threshold_ns >= 0),"
        "  gating INTEGER NOT NULL CHECK (gating IN (0, 1)), groups TEXT NOT NULL,"
        "  labels TEXT NOT NULL, revoked INTEGER NOT NULL CHECK (revoked IN (0, 1)),"
        "  by TEXT NOT NULL, reason TEXT NOT NULL);"
        "CREATE INDEX machine_settings_machine ON machine_settings(machine_id, from_ns);"
        "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, gating, groups, labels,"
        "  revoked, by, reason) SELECT id, enrolled_ns, threshold_ns, gating, 'default', '{}', 0,"
        "  'migration', 'settings as they were when the history began' FROM machines;"
        "INSERT INTO machine_settings (machine_id, from_ns, threshold_ns, gating, groups, labels,"
        "  revoked, by, reason) SELECT id, revoked_ns, threshold_ns, gating, 'default', '{}', 1,"
        "  'migration', 'revoked' FROM machines WHERE revoked_ns IS NOT NULL;"
        "CREATE TABLE maintenance ("
        "  id INTEGER PRIMARY KEY, machine_id TEXT NOT NULL REFERENCES machines(id),"
        "  from_ns INTEGER NOT NULL, to_ns INTEGER NOT NULL CHECK (to_ns > from_ns),"
        "  reason TEXT NOT NULL, by TEXT NOT NULL, created_ns INTEGER NOT NULL,"
        "  cancelled_ns INTEGER, cancelled_by TEXT);"
        "CREATE INDEX maintenance_machine ON maintenance(machine_id, from_ns);"
        "CREATE TABLE rule_versions (id INTEGER PRIMARY KEY, from_ns INTEGER NOT NULL,"
        "  rule TEXT NOT NULL);"
        "CREATE TABLE verdict_log ("
        "  id INTEGER PRIMARY KEY, release TEXT NOT NULL, series TEXT NOT NULL,"
        "  status TEXT NOT NULL, at_ns INTEGER NOT NULL, problems INTEGER NOT NULL,"
        "  missing INTEGER NOT NULL);"
        "CREATE INDEX verdict_log_release ON verdict_log(release, at_ns);"
        "CREATE INDEX verdict_log_series ON verdict_log(series, at_ns);"
        "ALTER TABLE audit ADD COLUMN machine_id TEXT;",
        /* 6 -> 7: read tokens (server-access.c), hashed like the staff tokens. */
        "CREATE TABLE readers ("
        "  name TEXT PRIMARY KEY, token_hash BLOB NOT NULL CHECK (length(token_hash) = 32),"
        "  created_ns INTEGER NOT NULL, revoked_ns INTEGER);"
        "CREATE INDEX readers_token ON readers(token_hash);",
        /* 7 -> 8: the trace flight recorder's captures of violations (server-trace.c), with the
         * interval that carried them; one per run, CPU and due time. */
        "CREATE TABLE traces ("
        "  id INTEGER PRIMARY KEY,"
        "  run INTEGER NOT NULL REFERENCES runs(id),"
        "  seq INTEGER NOT NULL CHECK (seq >= 0),"
        "  cpu INTEGER NOT NULL CHECK (cpu >= 0),"
        "  time_ns INTEGER NOT NULL, latency_ns INTEGER NOT NULL,"
        "  summary TEXT NOT NULL, culprit_kind TEXT NOT NULL, culprit_name TEXT NOT NULL,"
        "  culprit_pid INTEGER, culprit_ns INTEGER NOT NULL,"
        "  analysis TEXT NOT NULL, raw BLOB,"
        "  UNIQUE (run, cpu, time_ns));"
        "CREATE INDEX traces_time ON traces(time_ns);",
        /* 8 -> 9: notifications (server-notify-store.c).  A notification is made once per key
         * (a silence's start, a verdict's change, a group of problems): server instances on
         * one database make it once between them.  Its deliveries, one per channel, are leased
         * to the instance that sends them (lease_owner until lease_until_ns); a lease that runs
         * out (the instance died) lets another take the delivery.  notify_seen holds every
         * problem id already announced; notify_state the engine's small state (silences
         * announced, the latest stable told, the audit rows read). */
        "CREATE TABLE notifications ("
        "  id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,"
        "  status TEXT NOT NULL, grp TEXT, machine_id TEXT, hostname TEXT, release TEXT,"
        "  series TEXT, groups TEXT NOT NULL, event_ns INTEGER NOT NULL,"
        "  last_ns INTEGER NOT NULL, created_ns INTEGER NOT NULL,"
        "  not_before_ns INTEGER NOT NULL, sealed INTEGER NOT NULL DEFAULT 0,"
        "  count INTEGER NOT NULL DEFAULT 1, detail TEXT NOT NULL, path TEXT NOT NULL);"
        "CREATE INDEX notifications_grp ON notifications(grp, id);"
        "CREATE INDEX notifications_created ON notifications(created_ns);"
        "CREATE TABLE notification_deliveries ("
        "  id INTEGER PRIMARY KEY,"
        "  notification INTEGER NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,"
        "  channel TEXT NOT NULL,"
        "  state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),"
        "  attempts INTEGER NOT NULL DEFAULT 0, next_ns INTEGER NOT NULL,"
        "  lease_owner TEXT, lease_until_ns INTEGER, done_ns INTEGER, last_error TEXT,"
        "  UNIQUE (notification, channel));"
        "CREATE INDEX notification_deliveries_due ON notification_deliveries(channel, state,"
        "  next_ns);"
        "CREATE INDEX notification_deliveries_state ON notification_deliveries(state,"
        "  notification);"
        "CREATE TABLE notify_seen (problem TEXT PRIMARY KEY, release TEXT NOT NULL,"
        "  seen_ns INTEGER NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE notify_state (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        "  updated_ns INTEGER NOT NULL) WITHOUT ROWID;",
        /* 9 -> 10: the merged histogram of all CPUs per run, UTC day and scenario, kept by
         * ingest (day-hists.h) for the regression check and the kernel comparison; hist NULL:
         * not kept for that day (its intervals are merged instead).  The rows of the days
         * stored before are merged from their intervals by farm_migrate_10(). */
        "CREATE TABLE run_day_hists ("
        "  run INTEGER NOT NULL REFERENCES runs(id), day INTEGER NOT NULL,"
        "  scenario TEXT NOT NULL, samples INTEGER NOT NULL, min_ns INTEGER NOT NULL,"
        "  max_ns INTEGER NOT NULL, max_time_ns INTEGER NOT NULL,"
        "  violations INTEGER NOT NULL, hist_limit_us INTEGER NOT NULL, hist BLOB,"
        "  PRIMARY KEY (run, day, scenario)) WITHOUT ROWID;",
        /* 10 -> 11: the versions of the machines' inventories (inventories.h), each stored
         * once per run and version; fields: the compact JSON object in name order, digest its
         * SHA-256. */
        "CREATE TABLE inventories ("
        "  run INTEGER NOT NULL REFERENCES runs(id), version INTEGER NOT NULL,"
        "  time_ns INTEGER NOT NULL, after_ns INTEGER, received_ns INTEGER NOT NULL,"
        "  digest TEXT NOT NULL, fields TEXT NOT NULL,"
        "  PRIMARY KEY (run, version)) WITHOUT ROWID;",
        /* 11 -> 12: hist_days, the histogram cache filled by queries before, kept by ingest
         * for every day (day-hists.h); cpu_hists 0: not kept for that day (a count saturated,
         * a histogram did not decode: its intervals are merged instead).  The days the cache
         * did not hold are merged by farm_migrate_12(). */
        "ALTER TABLE run_days ADD COLUMN cpu_hists INTEGER NOT NULL DEFAULT 0;"
        "UPDATE run_days SET cpu_hists = 1;",
};

_Static_assert(ELEMENTSOF(sqlite_migrations) == FARM_SCHEMA_VERSION, "one migration per version");

/* Text compares and sorts byte by byte on PostgreSQL too, as on SQLite, whatever the
 * database's locale. */
#define TEXT_C "TEXT COLLATE \"C\""

/* The PostgreSQL schema at FARM_PG_BASELINE_VERSION: SQLite's tables with PostgreSQL's types.
 * The intervals, with their CPUs, loads and load metrics, are partitioned by the month of
 * their start (server-partitions.c makes the partitions), so that retention drops whole
 * partitions; their rows keep the interval's start for that, and their keys include it (a
 * partitioned table's unique keys must).  An interval stays unique by (run, seq): ingest holds
 * the machine's row lock while it looks for one. */
static const char *const pg_baseline =
        "CREATE TABLE farm_meta (key " TEXT_C " PRIMARY KEY, value " TEXT_C " NOT NULL);"
        "CREATE TABLE machines ("
        "  id " TEXT_C " PRIMARY KEY CHECK (length(id) = 32),"
        "  token_hash BYTEA NOT NULL CHECK (length(token_hash) = 32),"
        "  threshold_ns BIGINT NOT NULL CHECK (threshold_ns >= 0),"
        "  gating BIGINT NOT NULL CHECK (gating IN (0, 1)),"
        "  enrolled_ns BIGINT NOT NULL, rekeyed_ns BIGINT, revoked_ns BIGINT,"
        "  last_report_ns BIGINT, hostname " TEXT_C ", cpu_model " TEXT_C ", cpus BIGINT,"
        "  violations_total BIGINT NOT NULL DEFAULT 0, last_interval_start_ns BIGINT,"
        "  last_worst_ns BIGINT);"
        "CREATE INDEX machines_token ON machines(token_hash);"
        "CREATE TABLE runs ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  machine_id " TEXT_C " NOT NULL REFERENCES machines(id),"
        "  run_id BIGINT NOT NULL CHECK (run_id >= 1),"
        "  boot_id " TEXT_C " NOT NULL, kernel_release " TEXT_C " NOT NULL,"
        "  kernel_version " TEXT_C " NOT NULL, kernel_cmdline " TEXT_C " NOT NULL,"
        "  preempt_model " TEXT_C " NOT NULL, daemon_version " TEXT_C " NOT NULL,"
        "  config_digest " TEXT_C " NOT NULL, start_ns BIGINT NOT NULL,"
        "  threshold_ns BIGINT NOT NULL, probe_interval_ns BIGINT NOT NULL,"
        "  interval_ns BIGINT NOT NULL, first_report_ns BIGINT NOT NULL, release " TEXT_C ","
        "  hostname " TEXT_C ", probed_cpus " TEXT_C ", first_start_ns BIGINT,"
        "  last_end_ns BIGINT, max_length_ns BIGINT NOT NULL DEFAULT 0,"
        "  UNIQUE (machine_id, run_id));"
        "CREATE INDEX runs_kernel ON runs(kernel_release);"
        "CREATE INDEX runs_machine ON runs(machine_id, start_ns);"
        "CREATE INDEX runs_release ON runs(release, start_ns);"
        "CREATE INDEX runs_machine_end ON runs(machine_id, last_end_ns);"
        "CREATE SEQUENCE intervals_id_seq;"
        "CREATE TABLE intervals ("
        "  id BIGINT NOT NULL DEFAULT nextval('intervals_id_seq'),"
        "  run BIGINT NOT NULL REFERENCES runs(id), seq BIGINT NOT NULL CHECK (seq >= 0),"
        "  start_ns BIGINT NOT NULL, length_ns BIGINT NOT NULL CHECK (length_ns > 0),"
        "  scenario " TEXT_C ", max_ns BIGINT NOT NULL, samples BIGINT, violations BIGINT,"
        "  max_cpu BIGINT, max_time_ns BIGINT, received_ns BIGINT, m_start_ns BIGINT,"
        "  m_end_ns BIGINT, min_ratio_pm BIGINT, min_ratio_cpu BIGINT, counted_ns BIGINT,"
        "  missing_ns BIGINT,"
        "  PRIMARY KEY (id, start_ns), UNIQUE (run, seq, start_ns)"
        ") PARTITION BY RANGE (start_ns);"
        "CREATE INDEX intervals_start ON intervals(start_ns);"
        "CREATE INDEX intervals_run_max ON intervals(run, max_ns);"
        /* Covers the intervals query, as on SQLite. */
        "CREATE INDEX intervals_query ON intervals(run, start_ns) INCLUDE (length_ns, max_ns,"
        "  max_cpu, max_time_ns, samples, violations, scenario);"
        "CREATE TABLE interval_cpus ("
        "  interval BIGINT NOT NULL, start_ns BIGINT NOT NULL,"
        "  cpu BIGINT NOT NULL CHECK (cpu >= 0),"
        "  samples BIGINT NOT NULL, min_ns BIGINT NOT NULL, avg_ns BIGINT NOT NULL,"
        "  max_ns BIGINT NOT NULL, max_time_ns BIGINT NOT NULL,"
        "  violations BIGINT NOT NULL, missed BIGINT NOT NULL,"
        "  hist_limit_us BIGINT NOT NULL, hist BYTEA NOT NULL, span_start_ns BIGINT,"
        "  span_length_ns BIGINT, PRIMARY KEY (interval, cpu, start_ns)"
        ") PARTITION BY RANGE (start_ns);"
        "CREATE TABLE interval_loads ("
        "  interval BIGINT NOT NULL, start_ns BIGINT NOT NULL,"
        "  idx BIGINT NOT NULL CHECK (idx >= 0), generator " TEXT_C " NOT NULL,"
        "  up_ns BIGINT NOT NULL, starts BIGINT NOT NULL, exits BIGINT NOT NULL,"
        "  PRIMARY KEY (interval, idx, start_ns)"
        ") PARTITION BY RANGE (start_ns);"
        "CREATE TABLE interval_load_metrics ("
        "  interval BIGINT NOT NULL, start_ns BIGINT NOT NULL,"
        "  load_idx BIGINT NOT NULL, idx BIGINT NOT NULL,"
        "  name " TEXT_C " NOT NULL, unit " TEXT_C " NOT NULL, value DOUBLE PRECISION NOT NULL,"
        "  PRIMARY KEY (interval, load_idx, idx, start_ns)"
        ") PARTITION BY RANGE (start_ns);"
        "CREATE TABLE events ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  run BIGINT NOT NULL REFERENCES runs(id),"
        "  event_id BIGINT NOT NULL CHECK (event_id >= 1),"
        "  time_ns BIGINT NOT NULL, type " TEXT_C " NOT NULL, cpu BIGINT, value BIGINT,"
        "  message " TEXT_C " NOT NULL, details " TEXT_C ", received_ns BIGINT,"
        "  UNIQUE (run, event_id));"
        "CREATE INDEX events_time ON events(time_ns);"
        "CREATE INDEX events_run_type ON events(run, type, time_ns);"
        "CREATE INDEX events_run_received ON events(run, received_ns);"
        "CREATE TABLE uploads ("
        "  run BIGINT NOT NULL REFERENCES runs(id), seq BIGINT NOT NULL CHECK (seq >= 0),"
        "  received_ns BIGINT NOT NULL, intervals BIGINT NOT NULL, events BIGINT NOT NULL,"
        "  UNIQUE (run, seq));"
        "CREATE TABLE run_days ("
        "  run BIGINT NOT NULL REFERENCES runs(id), day BIGINT NOT NULL,"
        "  intervals BIGINT NOT NULL, covered_ns BIGINT NOT NULL,"
        "  first_start_ns BIGINT NOT NULL, last_end_ns BIGINT NOT NULL,"
        "  max_gap_ns BIGINT NOT NULL, gaps_known BIGINT NOT NULL, max_ns BIGINT NOT NULL,"
        "  counted_ns BIGINT NOT NULL DEFAULT 0, min_ratio_pm BIGINT NOT NULL DEFAULT 1000,"
        "  max_skew_ns BIGINT NOT NULL DEFAULT 0, max_received_ns BIGINT NOT NULL DEFAULT 0,"
        "  max_missing_ns BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (run, day));"
        "CREATE TABLE run_day_scenarios ("
        "  run BIGINT NOT NULL REFERENCES runs(id), day BIGINT NOT NULL,"
        "  scenario " TEXT_C " NOT NULL, covered_ns BIGINT NOT NULL,"
        "  counted_ns BIGINT NOT NULL DEFAULT 0, gens_all " TEXT_C ","
        "  down_ns BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (run, day, scenario));"
        "CREATE TABLE load_downs ("
        "  run BIGINT NOT NULL REFERENCES runs(id), seq BIGINT NOT NULL,"
        "  load_idx BIGINT NOT NULL, generator " TEXT_C " NOT NULL,"
        "  start_ns BIGINT NOT NULL, length_ns BIGINT NOT NULL, scenario " TEXT_C ","
        "  down_ns BIGINT NOT NULL CHECK (down_ns > 0), PRIMARY KEY (run, seq, load_idx));"
        "CREATE TABLE admins ("
        "  name " TEXT_C " PRIMARY KEY,"
        "  token_hash BYTEA NOT NULL CHECK (length(token_hash) = 32),"
        "  created_ns BIGINT NOT NULL, revoked_ns BIGINT);"
        "CREATE INDEX admins_token ON admins(token_hash);"
        "CREATE TABLE waivers ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  kernel_release " TEXT_C " NOT NULL, problem " TEXT_C " NOT NULL,"
        "  reason " TEXT_C " NOT NULL CHECK (length(reason) > 0), by " TEXT_C " NOT NULL,"
        "  created_ns BIGINT NOT NULL, withdrawn_ns BIGINT, withdrawn_by " TEXT_C ");"
        "CREATE INDEX waivers_kernel ON waivers(kernel_release, problem);"
        "CREATE TABLE audit ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, time_ns BIGINT NOT NULL,"
        "  who " TEXT_C " NOT NULL, action " TEXT_C " NOT NULL, kernel_release " TEXT_C ","
        "  problem " TEXT_C ", waiver BIGINT, detail " TEXT_C ", machine_id " TEXT_C ");"
        "CREATE TABLE hist_days ("
        "  run BIGINT NOT NULL REFERENCES runs(id), day BIGINT NOT NULL,"
        "  scenario " TEXT_C " NOT NULL, cpu BIGINT NOT NULL,"
        "  samples BIGINT NOT NULL, min_ns BIGINT NOT NULL, max_ns BIGINT NOT NULL,"
        "  max_time_ns BIGINT NOT NULL, violations BIGINT NOT NULL,"
        "  hist_limit_us BIGINT NOT NULL, hist BYTEA NOT NULL,"
        "  PRIMARY KEY (run, day, scenario, cpu));"
        "CREATE TABLE \"overlaps\" ("
        "  machine_id " TEXT_C " NOT NULL, run_a BIGINT NOT NULL REFERENCES runs(id),"
        "  run_b BIGINT NOT NULL REFERENCES runs(id), start_ns BIGINT NOT NULL,"
        "  end_ns BIGINT NOT NULL, received_ns BIGINT NOT NULL, CHECK (run_a < run_b));"
        "CREATE INDEX overlaps_a ON \"overlaps\"(run_a);"
        "CREATE INDEX overlaps_b ON \"overlaps\"(run_b);"
        "CREATE TABLE machine_settings ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  machine_id " TEXT_C " NOT NULL REFERENCES machines(id),"
        "  from_ns BIGINT NOT NULL, threshold_ns BIGINT NOT NULL CHECK (threshold_ns >= 0),"
        "  gating BIGINT NOT NULL CHECK (gating IN (0, 1)), groups " TEXT_C " NOT NULL,"
        "  labels " TEXT_C " NOT NULL, revoked BIGINT NOT NULL CHECK (revoked IN (0, 1)),"
        "  by " TEXT_C " NOT NULL, reason " TEXT_C " NOT NULL);"
        "CREATE INDEX machine_settings_machine ON machine_settings(machine_id, from_ns);"
        "CREATE TABLE maintenance ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  machine_id " TEXT_C " NOT NULL REFERENCES machines(id),"
        "  from_ns BIGINT NOT NULL, to_ns BIGINT NOT NULL CHECK (to_ns > from_ns),"
        "  reason " TEXT_C " NOT NULL, by " TEXT_C " NOT NULL, created_ns BIGINT NOT NULL,"
        "  cancelled_ns BIGINT, cancelled_by " TEXT_C ");"
        "CREATE INDEX maintenance_machine ON maintenance(machine_id, from_ns);"
        "CREATE TABLE rule_versions ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, from_ns BIGINT NOT NULL,"
        "  rule " TEXT_C " NOT NULL);"
        "CREATE TABLE verdict_log ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  release " TEXT_C " NOT NULL, series " TEXT_C " NOT NULL, status " TEXT_C " NOT NULL,"
        "  at_ns BIGINT NOT NULL, problems BIGINT NOT NULL, missing BIGINT NOT NULL);"
        "CREATE INDEX verdict_log_release ON verdict_log(release, at_ns);"
        "CREATE INDEX verdict_log_series ON verdict_log(series, at_ns);"
        /* The upload rate limit's buckets, shared by the farm's servers (server-ratelimit.c);
         * unlogged: after a crash of the database they start full. */
        "CREATE UNLOGGED TABLE rate_buckets ("
        "  machine_id " TEXT_C " PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL,"
        "  at_us BIGINT NOT NULL);";

/* Migration N takes PostgreSQL's schema from FARM_PG_BASELINE_VERSION + N to the next
 * version: the same change as sqlite_migrations[FARM_PG_BASELINE_VERSION + N], in
 * PostgreSQL's types.  Never edit a released entry: add one. */
static const char *const pg_migrations[] = {
        /* 6 -> 7: read tokens. */
        "CREATE TABLE readers ("
        "  name " TEXT_C " PRIMARY KEY,"
        "  token_hash BYTEA NOT NULL CHECK (length(token_hash) = 32),"
        "  created_ns BIGINT NOT NULL, revoked_ns BIGINT);"
        "CREATE INDEX readers_token ON readers(token_hash);",
        /* 7 -> 8: the trace captures.  Not partitioned: they are few (rate-limited per CPU),
         * and the verdict's problems name their culprits for as long as it keeps the runs. */
        "CREATE TABLE traces ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  run BIGINT NOT NULL REFERENCES runs(id),"
        "  seq BIGINT NOT NULL CHECK (seq >= 0),"
        "  cpu BIGINT NOT NULL CHECK (cpu >= 0),"
        "  time_ns BIGINT NOT NULL, latency_ns BIGINT NOT NULL,"
        "  summary " TEXT_C " NOT NULL, culprit_kind " TEXT_C " NOT NULL,"
        "  culprit_name " TEXT_C " NOT NULL, culprit_pid BIGINT, culprit_ns BIGINT NOT NULL,"
        "  analysis " TEXT_C " NOT NULL, raw BYTEA,"
        "  UNIQUE (run, cpu, time_ns));"
        "CREATE INDEX traces_time ON traces(time_ns);",
        /* 8 -> 9: notifications, as sqlite_migrations[8]. */
        "CREATE TABLE notifications ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  key " TEXT_C " NOT NULL UNIQUE, kind " TEXT_C " NOT NULL,"
        "  status " TEXT_C " NOT NULL, grp " TEXT_C ", machine_id " TEXT_C ","
        "  hostname " TEXT_C ", release " TEXT_C ", series " TEXT_C ","
        "  groups " TEXT_C " NOT NULL, event_ns BIGINT NOT NULL, last_ns BIGINT NOT NULL,"
        "  created_ns BIGINT NOT NULL, not_before_ns BIGINT NOT NULL,"
        "  sealed BIGINT NOT NULL DEFAULT 0, count BIGINT NOT NULL DEFAULT 1,"
        "  detail " TEXT_C " NOT NULL, path " TEXT_C " NOT NULL);"
        "CREATE INDEX notifications_grp ON notifications(grp, id);"
        "CREATE INDEX notifications_created ON notifications(created_ns);"
        "CREATE TABLE notification_deliveries ("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        "  notification BIGINT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,"
        "  channel " TEXT_C " NOT NULL,"
        "  state " TEXT_C " NOT NULL CHECK (state IN ('pending', 'sent', 'failed')),"
        "  attempts BIGINT NOT NULL DEFAULT 0, next_ns BIGINT NOT NULL,"
        "  lease_owner " TEXT_C ", lease_until_ns BIGINT, done_ns BIGINT,"
        "  last_error " TEXT_C ", UNIQUE (notification, channel));"
        "CREATE INDEX notification_deliveries_due ON notification_deliveries(channel, state,"
        "  next_ns);"
        "CREATE INDEX notification_deliveries_state ON notification_deliveries(state,"
        "  notification);"
        "CREATE TABLE notify_seen (problem " TEXT_C " PRIMARY KEY,"
        "  release " TEXT_C " NOT NULL, seen_ns BIGINT NOT NULL);"
        "CREATE TABLE notify_state (key " TEXT_C " PRIMARY KEY, value " TEXT_C " NOT NULL,"
        "  updated_ns BIGINT NOT NULL);",
        /* 9 -> 10: as sqlite_migrations[9]. */
        "CREATE TABLE run_day_hists ("
        "  run BIGINT NOT NULL REFERENCES runs(id), day BIGINT NOT NULL,"
        "  scenario " TEXT_C " NOT NULL, samples BIGINT NOT NULL, min_ns BIGINT NOT NULL,"
        "  max_ns BIGINT NOT NULL, max_time_ns BIGINT NOT NULL,"
        "  violations BIGINT NOT NULL, hist_limit_us BIGINT NOT NULL, hist BYTEA,"
        "  PRIMARY KEY (run, day, scenario));",
        /* 10 -> 11: as sqlite_migrations[10]. */
        "CREATE TABLE inventories ("
        "  run BIGINT NOT NULL REFERENCES runs(id), version BIGINT NOT NULL,"
        "  time_ns BIGINT NOT NULL, after_ns BIGINT, received_ns BIGINT NOT NULL,"
        "  digest " TEXT_C " NOT NULL, fields " TEXT_C " NOT NULL,"
        "  PRIMARY KEY (run, version));",
        /* 11 -> 12: as sqlite_migrations[11]. */
        "ALTER TABLE run_days ADD COLUMN cpu_hists BIGINT NOT NULL DEFAULT 0;"
        "UPDATE run_days SET cpu_hists = 1;",
        NULL, /* the end */
};
_Static_assert(ELEMENTSOF(pg_migrations) == FARM_SCHEMA_VERSION - FARM_PG_BASELINE_VERSION + 1,
               "one PostgreSQL migration per version after the baseline");

/* ---- SQLite -------------------------------------------------------------------------------- */

static int query_int(sql_conn *c, const char *sql, int64_t *ret, char *err) {
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(c, sql, &st);
        if (r < 0)
                return farm_fail(c, r, "cannot read the database header", err);
        r = sql_step(st);
        if (r != SQL_ROW)
                return farm_fail(c, r, "cannot read the database header", err);
        *ret = sql_column_int64(st, 0);
        return 0;
}

static int sqlite_migrate(sql_conn *c, int64_t version, char *err) {
        for (int64_t v = version; v < FARM_SCHEMA_VERSION; v++) {
                char sql[64], what[64];
                int r = farm_begin_write(c, err);
                if (r < 0)
                        return r;
                snprintf(what, sizeof(what), "cannot migrate the schema to version %lld",
                         (long long) v + 1);
                r = sql_exec(c, sqlite_migrations[v]);
                if (r < 0)
                        r = farm_fail(c, r, what, err);
                if (r >= 0 && v == 5)
                        r = farm_migrate_6(c, err);
                if (r >= 0 && v == 9)
                        r = farm_migrate_10(c, err);
                if (r >= 0 && v == 11)
                        r = farm_migrate_12(c, err);
                if (r >= 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA user_version = %lld", (long long) v + 1);
                        r = farm_exec(c, sql, err);
                }
                if (r >= 0 && v == 0) {
                        snprintf(sql, sizeof(sql), "PRAGMA application_id = %d",
                                 FARM_APPLICATION_ID);
                        r = farm_exec(c, sql, err);
                }
                if (r >= 0)
                        r = farm_commit(c, err);
                if (r < 0) {
                        sql_rollback(c);
                        return r;
                }
        }
        return 0;
}

/* PostgreSQL checks its pages as it reads them (with data checksums, initdb -k): every table
 * read once, as SQLite's quick_check reads the whole file. */
static int pg_check(sql_conn *c, char *err) {
        _cleanup_sql_finalize_ sql_stmt *list = NULL;
        int r = sql_prepare_once(c,
                                 "SELECT tablename FROM pg_tables WHERE schemaname = "
                                 "current_schema() ORDER BY 1",
                                 &list);
        while (r >= 0 && (r = sql_step(list)) == SQL_ROW) {
                char sql[256];
                snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", sql_column_text(list, 0));
                _cleanup_sql_finalize_ sql_stmt *st = NULL;
                int q = sql_prepare_once(c, sql, &st);
                if (q >= 0)
                        q = sql_step(st);
                if (q != SQL_ROW)
                        return farm_fail(c, q, sql, err);
        }
        return r < 0 ? farm_fail(c, r, "integrity check failed", err) : 0;
}

int farm_db_check(farm_db *db, char err[static FARM_ERROR_MAX]) {
        _cleanup_release_ sql_conn *c = farm_writer(db);
        if (farm_is_pg(db))
                return pg_check(c, err);
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(c, "PRAGMA quick_check", &st);
        if (r >= 0)
                r = sql_step(st);
        if (r != SQL_ROW)
                return farm_fail(c, r, "integrity check failed", err);
        const char *res = sql_column_text(st, 0);
        if (!res || strcmp(res, "ok") != 0)
                return farm_failf(db, -EBADMSG, err,
                                  "database is corrupt (quick_check: %s); keep the file for "
                                  "analysis and move it aside",
                                  res ?: "no result");
        return 0;
}

static int sqlite_open_schema(farm_db *db, sql_conn *c, char *err) {
        int64_t version, appid, tables, pages, page_size;
        int r;

        /* The first read fails with SQLITE_NOTADB for a file that is not SQLite at all. */
        if ((r = query_int(c, "PRAGMA application_id", &appid, err)) < 0 ||
            (r = query_int(c, "PRAGMA user_version", &version, err)) < 0 ||
            (r = query_int(c, "SELECT count(*) FROM sqlite_schema", &tables, err)) < 0)
                return r;
        if (appid == 0 && version == 0 && tables > 0)
                return farm_failf(db, -EBADMSG, err,
                                  "SQLite database of another program (no farm schema); refusing "
                                  "to touch it");
        if (appid != 0 && appid != FARM_APPLICATION_ID)
                return farm_failf(db, -EBADMSG, err,
                                  "SQLite database of another program (application_id %#llx); "
                                  "refusing to touch it",
                                  (unsigned long long) appid);
        if (version > FARM_SCHEMA_VERSION)
                return farm_failf(db, -EPROTONOSUPPORT, err,
                                  "farm database schema version %lld is newer than this "
                                  "rtsoak-server understands (%d); upgrade rtsoak-server",
                                  (long long) version, FARM_SCHEMA_VERSION);

        /* WAL lets the queries read while an upload is written; FULL syncs the WAL on every
         * commit, so an upload answered "stored" survives power loss. */
        if ((r = farm_exec(c, "PRAGMA journal_mode = WAL", err)) < 0 ||
            (r = farm_exec(c, "PRAGMA synchronous = FULL", err)) < 0 ||
            (r = farm_exec(c, "PRAGMA foreign_keys = ON", err)) < 0)
                return r;

        /* quick_check reads the whole file: seconds for a small farm, many minutes for one
         * of tens of GiB, longer than a service manager waits for a start.  Above the limit
         * it is left to "rtsoak-server check"; SQLite still refuses damaged pages it meets. */
        if ((r = query_int(c, "PRAGMA page_count", &pages, err)) < 0 ||
            (r = query_int(c, "PRAGMA page_size", &page_size, err)) < 0)
                return r;
        db->size_bytes = pages * page_size;
        if (db->size_bytes <= FARM_CHECK_AT_OPEN_MAX_BYTES) {
                if ((r = farm_db_check(db, err)) < 0)
                        return r;
        } else
                db->check_skipped = true;
        return sqlite_migrate(c, version, err);
}

/* ---- PostgreSQL ---------------------------------------------------------------------------- */

/* What farm_meta says (NULL: no such key; text of at most size bytes). */
static int pg_meta(sql_conn *c, const char *key, char *ret, size_t size, char *err) {
        _cleanup_reset_ sql_stmt *st = NULL;
        int r = farm_prepare(c, "SELECT value FROM farm_meta WHERE key = ?", &st, err);
        if (r < 0)
                return r;
        sql_bind_text(st, 1, key);
        r = sql_step(st);
        if (r < 0)
                return farm_fail(c, r, "cannot read farm_meta", err);
        snprintf(ret, size, "%s", r == SQL_ROW ? sql_column_text(st, 0) ?: "" : "");
        return r == SQL_ROW;
}

/* Whether the schema holds farm_meta, and how many other tables. */
static int pg_tables(sql_conn *c, bool *ret_meta, int64_t *ret_others, char *err) {
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(c,
                                 "SELECT count(*) FILTER (WHERE tablename = 'farm_meta'), "
                                 "count(*) FILTER (WHERE tablename <> 'farm_meta') "
                                 "FROM pg_tables WHERE schemaname = current_schema()",
                                 &st);
        if (r >= 0)
                r = sql_step(st);
        if (r != SQL_ROW)
                return farm_fail(c, r, "cannot list the tables", err);
        *ret_meta = sql_column_int64(st, 0) > 0;
        *ret_others = sql_column_int64(st, 1);
        return 0;
}

static int pg_create(sql_conn *c, char *err) {
        char sql[256];
        int r = farm_exec(c, pg_baseline, err);
        if (r < 0)
                return r;
        snprintf(sql, sizeof(sql),
                 "INSERT INTO farm_meta (key, value) VALUES ('application', '%s'), "
                 "('schema_version', '%d')",
                 FARM_APPLICATION_NAME, FARM_PG_BASELINE_VERSION);
        return farm_exec(c, sql, err);
}

/* Creates the schema in an empty database, or migrates it; inside a transaction that holds
 * the schema lock, so that servers started at once do it once. */
static int pg_schema_locked(farm_db *db, sql_conn *c, char *err) {
        char text[64];
        bool meta = false;
        int64_t others = 0;
        int r = farm_exec(c, "SELECT pg_advisory_xact_lock(" FARM_LOCK_SCHEMA ")", err);
        if (r < 0 || (r = pg_tables(c, &meta, &others, err)) < 0)
                return r;
        if (!meta && others > 0)
                return farm_failf(db, -EBADMSG, err,
                                  "the database holds %lld tables of another program (no "
                                  "farm_meta); refusing to touch it",
                                  (long long) others);
        if (!meta && (r = pg_create(c, err)) < 0)
                return r;
        if ((r = pg_meta(c, "application", text, sizeof(text), err)) < 0)
                return r;
        if (strcmp(text, FARM_APPLICATION_NAME) != 0)
                return farm_failf(db, -EBADMSG, err,
                                  "database of another program (farm_meta application '%s'); "
                                  "refusing to touch it",
                                  text);
        if ((r = pg_meta(c, "schema_version", text, sizeof(text), err)) < 0)
                return r;
        long long version = strtoll(text, NULL, 10);
        if (version < FARM_PG_BASELINE_VERSION)
                return farm_failf(db, -EBADMSG, err, "farm_meta has no valid schema_version");
        if (version > FARM_SCHEMA_VERSION)
                return farm_failf(db, -EPROTONOSUPPORT, err,
                                  "farm database schema version %lld is newer than this "
                                  "rtsoak-server understands (%d); upgrade rtsoak-server",
                                  version, FARM_SCHEMA_VERSION);
        for (long long v = version; v < FARM_SCHEMA_VERSION; v++) {
                char sql[128];
                if ((r = farm_exec(c, pg_migrations[v - FARM_PG_BASELINE_VERSION], err)) < 0 ||
                    (v == 9 && (r = farm_migrate_10(c, err)) < 0) ||
                    (v == 11 && (r = farm_migrate_12(c, err)) < 0))
                        return r;
                snprintf(sql, sizeof(sql),
                         "UPDATE farm_meta SET value = '%lld' WHERE key = 'schema_version'", v + 1);
                if ((r = farm_exec(c, sql, err)) < 0)
                        return r;
        }
        return 0;
}

static int pg_open_schema(farm_db *db, sql_conn *c, char *err) {
        int r = sql_begin(c, SQL_TXN_WRITE);
        if (r < 0)
                return farm_fail(c, r, "cannot begin", err);
        r = pg_schema_locked(db, c, err);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0) {
                sql_rollback(c);
                return r;
        }
        /* The partitions of this month and the next are there before the first upload. */
        return farm_partitions_ahead(c, err);
}

int farm_schema_open(farm_db *db, sql_conn *c, char *err) {
        return farm_is_pg(db) ? pg_open_schema(db, c, err) : sqlite_open_schema(db, c, err);
}
