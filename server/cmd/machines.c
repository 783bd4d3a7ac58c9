/* SPDX-License-Identifier: MIT */
/* rtsoak-server's commands about machines: enrol (printing the token once), revoke, change and
 * show settings, and maintenance windows, with text for people and --json for scripts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "auth.h"
#include "machines.h"
#include "token.h"
#include "maintenance.h"
#include "timeutil.h"

/* -EINVAL from the database layer is a value of the command line that breaks a rule. */
static int status_of(int r) {
        return r == -EINVAL ? EXIT_USAGE : EXIT_FAILURE;
}

static bool machine_id_ok(const char *machine_id) {
        if (farm_machine_id_valid(machine_id))
                return true;
        log_error("Invalid machine id '%s': expected 32 lowercase hex digits, as in "
                  "/etc/machine-id",
                  machine_id);
        return false;
}

int cli_enroll(const struct server_options *o, char **args, int n) {
        const char *machine_id = args[0];
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;

        (void) n;
        if (!machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_token_new(token, hash);
        if (r < 0) {
                farm_db_close(db);
                log_error_errno(r, "Cannot read random bytes for the token: %m");
                return EXIT_FAILURE;
        }
        r = farm_enroll(db, machine_id, hash, &o->change, cli_who(o), o->reason,
                        now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                explicit_bzero(token, sizeof(token));
                log_error_errno(r, "Cannot enroll %s: %s", machine_id, err);
                return status_of(r);
        }
        char where[CLI_TOKEN_WHERE_MAX];
        int rp = cli_token_print(token, where);
        if (rp < 0) {
                log_error_errno(rp, "Cannot print the token: %m");
                return EXIT_FAILURE;
        }
        log_info("%s machine %s; %s is shown only this once (see \"rtsoak-server machine show "
                 "%s\" for its settings)",
                 r > 0 ? "Enrolled" : "Re-keyed", machine_id, where, machine_id);
        return EXIT_SUCCESS;
}

int cli_revoke(const struct server_options *o, char **args, int n) {
        const char *machine_id = args[0];
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;

        (void) n;
        if (!machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_revoke(db, machine_id, cli_who(o), o->reason, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot revoke %s: %s", machine_id, err);
                return status_of(r);
        }
        if (r == 0)
                log_info("Machine %s was revoked already", machine_id);
        else
                log_info("Revoked machine %s: its token no longer uploads, and it gates nothing "
                         "from now on",
                         machine_id);
        return EXIT_SUCCESS;
}

int cli_machine_set(const struct server_options *o, char **args, int n) {
        const char *machine_id = args[0];
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        int64_t version = 0;

        (void) n;
        if (farm_settings_change_empty(&o->change)) {
                log_error("machine set needs at least one of --bound, --gating, --groups, --label "
                          "and --unlabel");
                return EXIT_USAGE;
        }
        if (!o->reason) {
                log_error("machine set needs --reason TEXT: every change of settings is kept "
                          "with why");
                return EXIT_USAGE;
        }
        if (!machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_machine_set(db, machine_id, &o->change, cli_who(o), o->reason,
                                 now_ns(CLOCK_REALTIME), &version, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot change the settings of %s: %s", machine_id, err);
                return status_of(r);
        }
        if (r == 0)
                log_info("Nothing changed: machine %s has these settings already (version %" PRId64
                         ")",
                         machine_id, version);
        else
                log_info("Machine %s: settings version %" PRId64 " in force from now on",
                         machine_id, version);
        return EXIT_SUCCESS;
}

/* "bound 150us, gating yes, groups a,b, labels k=v" of a settings version's JSON. */
static void describe(json_t *v, char *buf, size_t size) {
        char span[TIMESPAN_MAX_LEN];
        size_t i, o;
        json_t *x;
        const char *key;
        o = (size_t) snprintf(buf, size, "bound %s, gating %s, groups ",
                              format_timespan(span, (uint64_t) json_integer_value(
                                                            json_object_get(v, "bound_ns"))),
                              json_is_true(json_object_get(v, "gating")) ? "yes" : "no");
        json_array_foreach (json_object_get(v, "groups"), i, x)
                if (o < size)
                        o += (size_t) snprintf(buf + o, size - o, "%s%s", i ? "," : "",
                                               json_string_value(x));
        if (o < size)
                o += (size_t) snprintf(buf + o, size - o, ", labels");
        json_object_foreach (json_object_get(v, "labels"), key, x)
                if (o < size)
                        o += (size_t) snprintf(buf + o, size - o, " %s=%s", key,
                                               json_string_value(x));
        if (json_object_size(json_object_get(v, "labels")) == 0 && o < size)
                o += (size_t) snprintf(buf + o, size - o, " none");
        if (json_is_true(json_object_get(v, "revoked")) && o < size)
                snprintf(buf + o, size - o, ", REVOKED");
}

/* The time of member key (nanoseconds) of o, to the second, for people. */
static const char *when(json_t *o, const char *key, char buf[static TIMESTAMP_MAX_LEN]) {
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                return "-";
        int64_t ns = json_integer_value(v);
        return format_timestamp_utc(buf, ns - ns % (int64_t) NSEC_PER_SEC);
}

static void print_settings(json_t *j) {
        char desc[8192], t[TIMESTAMP_MAX_LEN];
        json_t *cur = json_object_get(j, "settings"), *v;
        size_t i;
        printf("Machine %s (%s)\n", json_string_value(json_object_get(j, "machine")),
               json_string_value(json_object_get(j, "hostname")) ?: "no report yet");
        printf("Enrolled %s", when(j, "enrolled_ns", t));
        if (json_is_integer(json_object_get(j, "rekeyed_ns")))
                printf(", new token %s", when(j, "rekeyed_ns", t));
        printf("\n");
        if (json_is_object(cur)) {
                describe(cur, desc, sizeof(desc));
                printf("In force (version %lld, since %s):\n  %s\n",
                       (long long) json_integer_value(json_object_get(cur, "version")),
                       when(cur, "from_ns", t), desc);
        }
        printf("History (newest first):\n");
        json_array_foreach (json_object_get(j, "history"), i, v) {
                describe(v, desc, sizeof(desc));
                printf("  v%-3lld %s by %s: %s\n       %s\n",
                       (long long) json_integer_value(json_object_get(v, "version")),
                       when(v, "from_ns", t), json_string_value(json_object_get(v, "by")),
                       json_string_value(json_object_get(v, "reason")), desc);
        }
}

int cli_machine_show(const struct server_options *o, char **args, int n) {
        const char *machine_id = args[0];
        char err[FARM_ERROR_MAX];
        struct farm_page page = { .limit = UINT32_MAX, .offset = 0 };
        farm_db *db = NULL;
        json_t *j = NULL;

        (void) n;
        if (!machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_settings_json(db, machine_id, &page, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot show machine %s: %s", machine_id, err);
                return EXIT_FAILURE;
        }
        if (o->json)
                r = cli_print_json(j);
        else {
                print_settings(j);
                r = fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
        }
        json_decref(j);
        return r;
}

int cli_maintenance_add(const struct server_options *o, char **args, int n) {
        const char *machine_id = args[0];
        char err[FARM_ERROR_MAX];
        int64_t now = now_ns(CLOCK_REALTIME), from, to, id;
        const char *why = NULL;
        farm_db *db = NULL;

        (void) n;
        const char *missing = !o->from ? "--from TIME" : !o->to ? "--to TIME" : NULL;
        if (!missing && !o->reason)
                missing = "--reason TEXT";
        if (missing) {
                log_error("maintenance add needs %s", missing);
                return EXIT_USAGE;
        }
        if (!machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (farm_maintenance_parse_time(o->from, now, &from, &why) < 0) {
                log_error("Invalid --from '%s': %s", o->from, why ?: "not a point in time");
                return EXIT_USAGE;
        }
        if (farm_maintenance_parse_time(o->to, now, &to, &why) < 0) {
                log_error("Invalid --to '%s': %s", o->to, why ?: "not a point in time");
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_maintenance_add(db, machine_id, from, to, o->reason, cli_who(o), now, &id,
                                     err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot declare the maintenance window: %s%s",
                                r == -EINVAL ? "--" : "", err);
                return status_of(r);
        }
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        printf("%" PRId64 "\n", id);
        log_info("Maintenance window %" PRId64 " of machine %s from %s to %s", id, machine_id,
                 format_timestamp_utc(t1, from), format_timestamp_utc(t2, to));
        return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static void print_windows(json_t *j) {
        char t1[TIMESTAMP_MAX_LEN], t2[TIMESTAMP_MAX_LEN];
        json_t *w;
        size_t i;
        printf("%5s  %-32s  %-20s  %-20s  %-9s  %s\n", "ID", "MACHINE", "FROM", "TO", "STATE",
               "BY: REASON");
        json_array_foreach (json_object_get(j, "windows"), i, w)
                printf("%5lld  %-32s  %-20s  %-20s  %-9s  %s: %s\n",
                       (long long) json_integer_value(json_object_get(w, "id")),
                       json_string_value(json_object_get(w, "machine")), when(w, "from_ns", t1),
                       when(w, "effective_to_ns", t2),
                       json_string_value(json_object_get(w, "state")),
                       json_string_value(json_object_get(w, "by")),
                       json_string_value(json_object_get(w, "reason")));
}

int cli_maintenance_list(const struct server_options *o, char **args, int n) {
        const char *machine_id = n > 0 ? args[0] : NULL;
        char err[FARM_ERROR_MAX];
        struct farm_page page = { .limit = UINT32_MAX, .offset = 0 };
        farm_db *db = NULL;
        json_t *j = NULL;

        if (machine_id && !machine_id_ok(machine_id))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_maintenance_json(db, machine_id, &page, now_ns(CLOCK_REALTIME), &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot list the maintenance windows: %s", err);
                return EXIT_FAILURE;
        }
        if (o->json)
                r = cli_print_json(j);
        else {
                print_windows(j);
                r = fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
        }
        json_decref(j);
        return r;
}

int cli_maintenance_cancel(const struct server_options *o, char **args, int n) {
        const char *window_id = args[0];
        char err[FARM_ERROR_MAX], *end;
        farm_db *db = NULL;

        (void) n;
        if (!o->reason) {
                log_error("maintenance cancel needs --reason TEXT (kept in the audit trail)");
                return EXIT_USAGE;
        }
        errno = 0;
        long long id = strtoll(window_id, &end, 10);
        if (errno || end == window_id || *end || id <= 0) {
                log_error("Invalid window id '%s': expected the number that \"maintenance add\" "
                          "printed",
                          window_id);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_maintenance_cancel(db, id, cli_who(o), o->reason, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot cancel maintenance window %lld: %s%s", id,
                                r == -EINVAL ? "--" : "", err);
                return status_of(r);
        }
        log_info("Cancelled maintenance window %lld", id);
        return EXIT_SUCCESS;
}
