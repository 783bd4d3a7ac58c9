/* SPDX-License-Identifier: MIT */
/* Helpers for the integration tests: temporary directories, running the real binaries with
 * captured output and timeouts, and reading their JSON. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct tu_result {
        int status; /* exit code, or 128 + signal */
        char *out, *err;
};
void tu_result_done(struct tu_result *r);

/* A fresh directory under /tmp, removed by tu_rmdir(). */
char *tu_mkdtemp(const char *name);
void tu_rmdir(char *dir);

/* The path of a built binary from the environment (set by meson), e.g. "RTSOAKD". */
const char *tu_bin(const char *env);

/* Runs argv to completion (killed after timeout_ms), capturing stdout and stderr. A
 * setup function, if given, runs in the child before exec (for limits, users, cgroups). */
int tu_run(char *const argv[], int timeout_ms, void (*setup)(void *), void *data,
           struct tu_result *ret);
/* Starts argv in the background with stdout and stderr to the given files (NULL: /dev/null). */
pid_t tu_spawn(char *const argv[], const char *out_path, const char *err_path);
/* Waits for pid up to timeout_ms; kills it with SIGKILL after that. Returns the status as in
 * tu_result. */
int tu_wait(pid_t pid, int timeout_ms);

/* argv for rtsoakd with no configuration file, the given "Storage.Path=..." assignment,
 * 1 s intervals, no load (Schedule.Rotation=idle 1h) run by the build's rtsoak-load, no trace
 * flight recorder, the
 * sanitizer build's extra setting (RTSOAKD_TEST_SET) and then extra (NULL-terminated).
 * argv must hold 48 entries. */
void tu_daemon_argv(char **argv, char *set_db, const char *const *extra);

void tu_sleep_ms(int ms);
/* Waits up to timeout_ms until found(the text of the file at path, arg) is true; false if it
 * never was. */
bool tu_wait_for(const char *path, bool (*found)(const char *text, void *arg), void *arg,
                 int timeout_ms);
/* Waits up to timeout_ms until the file at path contains text; false if it never did. */
bool tu_wait_for_text(const char *path, const char *text, int timeout_ms);
/* Parses JSON text or fails the test with the text shown. */
json_t *tu_json(const char *text);
char *tu_read_file(const char *path);
/* The integer member key of a JSON object (fails the test if it is not an integer). */
long long tu_jint(json_t *o, const char *key);
/* Counts lines of s that start with prefix. */
size_t tu_count_lines(const char *s, const char *prefix);

/* rtsoak-server --db DB enroll ID [extra1 [extra2]]: the token it printed (64 hex digits). */
void tu_server_enroll(const char *db, const char *id, const char *extra1, const char *extra2,
                      char token[static 80]);
/* rtsoak-server --db DB admin-token NAME: the staff token it printed. */
void tu_server_admin_token(const char *db, const char *name, char token[static 80]);
/* Enrolls this machine (tu_machine_id()) in the farm database db and writes its token, with
 * a newline, to token_file: what rtsoakd's [Upload] TokenFile= reads. */
void tu_enroll_this_machine(const char *db, const char *token_file);
/* SIGTERM to rtsoak-server pid; fails the test unless it exits with 0 within 10 s. */
void tu_server_stop(pid_t pid);
/* Removes an SQLite database with its -wal, -shm and rtsoakd's .lock file. */
void tu_remove_db(const char *path);
/* Starts rtsoak-server on listen (e.g. "127.0.0.1:0": a port the kernel picks) with its log in
 * log, waits for the line that says where it listens and puts its base URL in url. */
pid_t tu_server_start(const char *db, const char *log, const char *listen, const char *const *extra,
                      char *url, size_t url_size);
/* A self-signed certificate for 127.0.0.1 made with openssl into cert and key (PEM); skips
 * the test when openssl is not installed. */
void tu_make_cert(const char *cert, const char *key);
/* The machine's own ID (/etc/machine-id), as rtsoakd reports it. */
const char *tu_machine_id(void);

/* CPU time (ns) used so far by every thread of process pid, from the scheduler's own
 * accounting (/proc/PID/task/TID/schedstat); -1 if the process is gone. */
int64_t tu_process_cpu_ns(pid_t pid);

/* argv for rtsoak-load: its own options pre (NULL-terminated, may be NULL), then the
 * generator and its options gen_argv.  argv must hold 64 entries. */
void tu_load_argv(char **argv, const char *const *pre, const char *const *gen_argv);
/* rtsoak-load with gen_argv started in the background (output to /dev/null). */
pid_t tu_load_spawn(const char *const *gen_argv);
/* Sends SIGTERM to a running rtsoak-load, checks that it exits with status 0 within a
 * second, and returns how many milliseconds that took. */
int64_t tu_load_stop_ms(pid_t pid);
/* Runs rtsoak-load with gen_argv and checks that it refuses with exit status 78 and msg in
 * what it prints on stderr. */
void tu_load_refused(const char *const *gen_argv, const char *msg);

/* rtsoak-load [-d duration] generator options..., run to completion (timeout 30 s) with
 * "--json"; returns the parsed JSON object (fails the test on a non-zero exit). */
json_t *tu_load_json(const char *duration, const char *const *gen_argv);
/* The "rate" of the named metric in rtsoak-load's JSON output (fails if absent). */
double tu_load_rate(json_t *j, const char *metric);
/* The "count" of the named metric. */
uint64_t tu_load_count(json_t *j, const char *metric);

/* Take a farm database of schema 12 back to 11 (before the day histograms of each CPU kept at
 * ingest), to 10 (before the inventories) and to 9 (before the day histograms of all CPUs). */
#define TU_FARM_SCHEMA_12_DROP "ALTER TABLE run_days DROP COLUMN cpu_hists;"
#define TU_FARM_SCHEMA_12_DOWN TU_FARM_SCHEMA_12_DROP "PRAGMA user_version = 11;"
#define TU_FARM_PG_SCHEMA_12_DOWN \
        TU_FARM_SCHEMA_12_DROP "UPDATE farm_meta SET value = '11' WHERE key = 'schema_version';"
#define TU_FARM_SCHEMA_11_DOWN \
        TU_FARM_SCHEMA_12_DROP "DROP TABLE inventories; PRAGMA user_version = 10;"
#define TU_FARM_PG_SCHEMA_11_DOWN                         \
        TU_FARM_SCHEMA_12_DROP "DROP TABLE inventories; " \
                               "UPDATE farm_meta SET value = '10' WHERE key = 'schema_version';"
#define TU_FARM_SCHEMA_10_DOWN                                                      \
        TU_FARM_SCHEMA_12_DROP "DROP TABLE inventories; DROP TABLE run_day_hists; " \
                               "PRAGMA user_version = 9;"
#define TU_FARM_PG_SCHEMA_10_DOWN                                                   \
        TU_FARM_SCHEMA_12_DROP "DROP TABLE inventories; DROP TABLE run_day_hists; " \
                               "UPDATE farm_meta SET value = '9' WHERE key = 'schema_version';"
/* Take a farm database of schema 9 back to 8 (before the notifications), 8 back to 7 (before
 * the trace captures), 7 back to 6 (before the read tokens) and 6 back to 5, as the releases
 * before left them: for the migration tests, applied in turn. */
#define TU_FARM_SCHEMA_9_DROPS                                                                  \
        "DROP TABLE notification_deliveries; DROP TABLE notifications; DROP TABLE notify_seen;" \
        "DROP TABLE notify_state;"
#define TU_FARM_SCHEMA_9_DOWN TU_FARM_SCHEMA_9_DROPS "PRAGMA user_version = 8;"
#define TU_FARM_SCHEMA_8_DOWN "DROP TABLE traces; PRAGMA user_version = 7;"
/* The same on PostgreSQL, whose schema began at version 6. */
#define TU_FARM_PG_SCHEMA_9_DOWN \
        TU_FARM_SCHEMA_9_DROPS "UPDATE farm_meta SET value = '8' WHERE key = 'schema_version';"
#define TU_FARM_PG_SCHEMA_8_DOWN \
        "DROP TABLE traces; UPDATE farm_meta SET value = '7' WHERE key = 'schema_version';"
#define TU_FARM_SCHEMA_7_DOWN "DROP TABLE readers; PRAGMA user_version = 6;"
#define TU_FARM_SCHEMA_6_DOWN                                                                    \
        "DROP INDEX runs_release; DROP INDEX runs_machine_end; DROP INDEX events_run_received;"  \
        "DROP TABLE overlaps; DROP TABLE machine_settings; DROP TABLE maintenance;"              \
        "DROP TABLE rule_versions; DROP TABLE verdict_log;"                                      \
        "ALTER TABLE runs DROP COLUMN release; ALTER TABLE runs DROP COLUMN hostname;"           \
        "ALTER TABLE runs DROP COLUMN probed_cpus; ALTER TABLE runs DROP COLUMN first_start_ns;" \
        "ALTER TABLE runs DROP COLUMN last_end_ns; ALTER TABLE runs DROP COLUMN max_length_ns;"  \
        "ALTER TABLE intervals DROP COLUMN received_ns; ALTER TABLE intervals DROP COLUMN "      \
        "m_start_ns; ALTER TABLE intervals DROP COLUMN m_end_ns; ALTER TABLE intervals DROP "    \
        "COLUMN min_ratio_pm; ALTER TABLE intervals DROP COLUMN min_ratio_cpu; ALTER TABLE "     \
        "intervals DROP COLUMN counted_ns; ALTER TABLE intervals DROP COLUMN missing_ns;"        \
        "ALTER TABLE interval_cpus DROP COLUMN span_start_ns;"                                   \
        "ALTER TABLE interval_cpus DROP COLUMN span_length_ns; ALTER TABLE events DROP COLUMN "  \
        "received_ns; ALTER TABLE run_days DROP COLUMN counted_ns; ALTER TABLE run_days DROP "   \
        "COLUMN min_ratio_pm; ALTER TABLE run_days DROP COLUMN max_skew_ns; ALTER TABLE "        \
        "run_days DROP COLUMN max_received_ns; ALTER TABLE run_days DROP COLUMN max_missing_ns;" \
        "ALTER TABLE run_day_scenarios DROP COLUMN "                                             \
        "counted_ns; ALTER TABLE run_day_scenarios DROP COLUMN gens_all; ALTER TABLE "           \
        "run_day_scenarios DROP COLUMN down_ns; ALTER TABLE audit DROP COLUMN machine_id;"       \
        "PRAGMA user_version = 5;"
