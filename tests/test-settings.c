/* SPDX-License-Identifier: MIT */
/* Unit tests of machine settings and maintenance windows against a temporary farm database:
 * every check with its message, versions with who/when/why, the token left alone, the
 * machine's own columns in step, the audit trail, and the windows' rules and states. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"
#include "macro.h"
#include "server-maintenance.h"
#include "server-settings.h"

#define T0 INT64_C(1796300000000000000)
#define S_NS INT64_C(1000000000)
#define MIN_NS (60 * S_NS)
#define H_NS (60 * MIN_NS)
#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "fedcba9876543210fedcba9876543210"

static char dir[] = "/tmp/test-settings-XXXXXX";
static char path[600];
static farm_db *db;
static char err[FARM_ERROR_MAX];

static void open_fresh(void) {
        static unsigned n;
        if (db)
                farm_db_close(db);
        snprintf(path, sizeof(path), "%s/farm-%u.db", dir, n++);
        assert_int_equal(farm_db_open(path, &db, err), 0);
}

static void hash_of(uint8_t hash[SHA256_DIGEST_SIZE], int n) {
        memset(hash, 0, SHA256_DIGEST_SIZE);
        hash[0] = (uint8_t) n;
        hash[31] = 0xa5;
}

/* A value of one row of the database, read on a connection of its own. */
static long long sql_int(const char *sql) {
        sqlite3 *c;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        if (sqlite3_prepare_v2(c, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(c));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        long long v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(c);
        return v;
}

static char *sql_text(const char *sql) {
        sqlite3 *c;
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        if (sqlite3_prepare_v2(c, sql, -1, &st, NULL) != SQLITE_OK)
                fail_msg("%s: %s", sql, sqlite3_errmsg(c));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        char *v = strdup((const char *) sqlite3_column_text(st, 0) ?: "(null)");
        sqlite3_finalize(st);
        sqlite3_close(c);
        return v;
}

static void expect_text(const char *sql, const char *want) {
        char *v = sql_text(sql);
        if (strcmp(v, want) != 0)
                fail_msg("%s: expected '%s', got '%s'", sql, want, v);
        free(v);
}

static void expect_err(int r, int want, const char *needle) {
        if (r != want || !strstr(err, needle))
                fail_msg("expected %d and '%s', got %d: %s", want, needle, r, err);
}

static void enroll_a(void) {
        uint8_t hash[SHA256_DIGEST_SIZE];
        hash_of(hash, 1);
        assert_int_equal(farm_enroll(db, ID_A, hash, NULL, "alice", NULL, T0, err), 1);
}

/* ---- checks ---------------------------------------------------------------------------- */

static void test_checks(void **state) {
        (void) state;
        static const struct {
                int64_t bound;
                bool ok;
        } bounds[] = { { 0, false },         { -1, false },         { 1, true },
                       { 1000000000, true }, { 1000000001, false }, { INT64_MAX, false } };
        for (size_t i = 0; i < ELEMENTSOF(bounds); i++) {
                int r = farm_check_bound("bound", bounds[i].bound, err);
                if ((r == 0) != bounds[i].ok)
                        fail_msg("bound %lld: %d (%s)", (long long) bounds[i].bound, r, err);
                if (r < 0)
                        assert_non_null(strstr(err, "bound: "));
        }

        static const struct {
                const char *text;
                bool ok;
        } reasons[] = {
                { "hypervisor stall", true }, { "", false },
                { "tab\there", false },       { "new\nline", false },
                { "del\x7f", false },         { "c1 \xc2\x85 next line", false },
                { "bad \xff utf-8", false },  { "Zürich lab, ticket #42", true },
        };
        for (size_t i = 0; i < ELEMENTSOF(reasons); i++) {
                int r = farm_check_text("reason", reasons[i].text, FARM_REASON_MAX, err);
                if ((r == 0) != reasons[i].ok)
                        fail_msg("reason '%s': %d (%s)", reasons[i].text, r, err);
        }
        assert_int_equal(farm_check_text("reason", NULL, 10, err), -EINVAL);
        /* 1000 characters are allowed, not 1001; ü is one character of two bytes. */
        char long_reason[2100];
        for (int i = 0; i < 1000; i++)
                memcpy(long_reason + 2 * i, "\xc3\xbc", 2);
        long_reason[2000] = '\0';
        assert_int_equal(farm_check_text("reason", long_reason, FARM_REASON_MAX, err), 0);
        strcat(long_reason, "x");
        expect_err(farm_check_text("reason", long_reason, FARM_REASON_MAX, err), -EINVAL,
                   "reason: 1001 characters, more than 1000");

        assert_int_equal(farm_check_who("by", "ops.team@lab-7", err), 0);
        expect_err(farm_check_who("by", "two words", err), -EINVAL, "by: 'two words'");
        expect_err(farm_check_who("by", "", err), -EINVAL, "is not a name");
}

static void test_change_parsing(void **state) {
        (void) state;
        struct farm_settings_change c;
        farm_settings_change_init(&c);
        assert_true(farm_settings_change_empty(&c));

        assert_int_equal(farm_change_groups(&c, "--groups", "rack-b,rack-a,6.6-rt", err), 0);
        assert_int_equal(c.ngroups, 3);
        assert_string_equal(c.groups[0], "6.6-rt"); /* sorted */
        assert_string_equal(c.groups[2], "rack-b");
        expect_err(farm_change_groups(&c, "--groups", "a,,b", err), -EINVAL, "empty group name");
        expect_err(farm_change_groups(&c, "--groups", "", err), -EINVAL, "empty group name");
        expect_err(farm_change_groups(&c, "--groups", "a,b,", err), -EINVAL, "empty group name");
        expect_err(farm_change_groups(&c, "--groups", "Rack", err), -EINVAL,
                   "--groups: 'Rack' is not a group name");
        expect_err(farm_change_groups(&c, "--groups", "a b", err), -EINVAL, "not a group name");
        expect_err(farm_change_groups(&c, "--groups", "a,b,a", err), -EINVAL, "a is listed twice");
        char name65[66];
        memset(name65, 'g', 65);
        name65[65] = '\0';
        expect_err(farm_change_groups(&c, "--groups", name65, err), -EINVAL, "not a group name");
        name65[64] = '\0';
        assert_int_equal(farm_change_groups(&c, "--groups", name65, err), 0);
        char many[33 * 4 + 1] = "";
        for (int i = 0; i < 33; i++)
                snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sg%d", i ? "," : "",
                         i);
        expect_err(farm_change_groups(&c, "--groups", many, err), -EINVAL, "more than 32 groups");
        *strrchr(many, ',') = '\0';
        assert_int_equal(farm_change_groups(&c, "--groups", many, err), 0);
        assert_int_equal(c.ngroups, 32);

        farm_settings_change_init(&c);
        assert_int_equal(farm_change_label_arg(&c, "--label", "room=b2", err), 0);
        assert_int_equal(farm_change_label_arg(&c, "--label", "note=a=b", err), 0);
        assert_string_equal(c.edits[1].label.value, "a=b");
        assert_int_equal(farm_change_label_arg(&c, "--label", "empty=", err), 0);
        expect_err(farm_change_label_arg(&c, "--label", "novalue", err), -EINVAL,
                   "--label: 'novalue': expected KEY=VALUE");
        expect_err(farm_change_label_arg(&c, "--label", "=x", err), -EINVAL, "not a label key");
        expect_err(farm_change_label_arg(&c, "--label", "Room=x", err), -EINVAL,
                   "'Room' is not a label key");
        expect_err(farm_change_label_arg(&c, "--label", "k=line\nbreak", err), -EINVAL,
                   "the value of label k: a control character U+000A");
        char value[300];
        memset(value, 'v', 257);
        value[257] = '\0';
        char arg[400];
        snprintf(arg, sizeof(arg), "k=%s", value);
        expect_err(farm_change_label_arg(&c, "--label", arg, err), -EINVAL,
                   "longer than 256 bytes");
        arg[2 + 256] = '\0';
        assert_int_equal(farm_change_label_arg(&c, "--label", arg, err), 0);
        assert_int_equal(farm_change_label(&c, "--unlabel", "room", NULL, err), 0);
        assert_true(c.edits[c.nedits - 1].remove);
        assert_false(farm_settings_change_empty(&c));
}

static json_t *json_of(const char *text) {
        json_t *j = json_loads(text, 0, NULL);
        if (!j)
                fail_msg("not JSON: %s", text);
        return j;
}

static void test_change_from_json(void **state) {
        (void) state;
        static const struct {
                const char *body, *error; /* NULL: accepted */
        } cases[] = {
                { "{\"bound_ns\": 150000, \"reason\": \"VM\"}", NULL },
                { "{\"gating\": false, \"groups\": [\"rack-a\"], \"labels\": {\"room\": \"b2\", "
                  "\"old\": null}, \"reason\": \"moved\"}",
                  NULL },
                { "{\"bound_ns\": 150000}", "reason: missing" },
                { "{\"bound_ns\": 150000, \"reason\": \"\"}", "reason: required" },
                { "{\"bound_ns\": \"150us\", \"reason\": \"x\"}", "bound_ns: expected an integer" },
                { "{\"bound_ns\": 0, \"reason\": \"x\"}", "bound_ns: 0 ns is not a latency bound" },
                { "{\"bound_ns\": 1000000001, \"reason\": \"x\"}", "at most 1s" },
                { "{\"gating\": \"yes\", \"reason\": \"x\"}", "gating: expected true or false" },
                { "{\"groups\": \"a,b\", \"reason\": \"x\"}", "groups: expected an array" },
                { "{\"groups\": [], \"reason\": \"x\"}", "groups: empty" },
                { "{\"groups\": [7], \"reason\": \"x\"}", "groups: entry 0 is not a string" },
                { "{\"labels\": [\"a\"], \"reason\": \"x\"}", "labels: expected an object" },
                { "{\"labels\": {\"a\": 1}, \"reason\": \"x\"}", "labels.a: expected a string" },
                { "{\"labels\": {\"A\": \"x\"}, \"reason\": \"x\"}", "'A' is not a label key" },
                { "{\"bound\": 1, \"reason\": \"x\"}", "bound: unknown field" },
                { "{\"reason\": 5}", "reason: expected a string" },
                { "[]", "body: expected a JSON object" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct farm_settings_change c;
                const char *reason = NULL;
                json_t *j = json_of(cases[i].body);
                int r = farm_change_from_json(j, &c, &reason, err);
                if (cases[i].error ? r != -EINVAL || !strstr(err, cases[i].error) : r != 0)
                        fail_msg("%s: got %d '%s', expected %s", cases[i].body, r, err,
                                 cases[i].error ?: "success");
                json_decref(j);
        }
        /* The merge patch of labels: null removes. */
        struct farm_settings_change c;
        const char *reason;
        json_t *j = json_of("{\"labels\": {\"old\": null, \"room\": \"b2\"}, \"reason\": \"r\"}");
        assert_int_equal(farm_change_from_json(j, &c, &reason, err), 0);
        assert_int_equal(c.nedits, 2);
        assert_true(c.edits[0].remove);
        assert_string_equal(c.edits[0].label.key, "old");
        assert_false(c.edits[1].remove);
        assert_string_equal(reason, "r");
        json_decref(j);
}

static void test_apply_and_diff(void **state) {
        (void) state;
        struct farm_settings cur = { .bound_ns = 100000, .gating = true, .ngroups = 1 }, next;
        strcpy(cur.groups[0], "default");
        struct farm_settings_change c;
        char diff[1024];

        farm_settings_change_init(&c);
        assert_int_equal(farm_settings_apply(&cur, &c, &next, err), 0);
        farm_settings_diff(&cur, &next, diff, sizeof(diff));
        assert_string_equal(diff, "");

        c.bound_ns = 150000;
        c.gating = 0;
        assert_int_equal(farm_change_groups(&c, "groups", "rack-a,default", err), 0);
        assert_int_equal(farm_change_label_arg(&c, "label", "room=b2", err), 0);
        assert_int_equal(farm_change_label_arg(&c, "label", "os=debian", err), 0);
        assert_int_equal(farm_change_label(&c, "unlabel", "absent", NULL, err), 0);
        assert_int_equal(farm_settings_apply(&cur, &c, &next, err), 0);
        assert_int_equal(next.nlabels, 2);
        assert_string_equal(next.labels[0].key, "os"); /* sorted by key */
        farm_settings_diff(&cur, &next, diff, sizeof(diff));
        assert_string_equal(diff, "bound 100us -> 150us; gating yes -> no; groups default -> "
                                  "default,rack-a; label os = \"debian\"; label room = \"b2\"");

        /* Set, then remove in the same change: the order of the edits holds. */
        farm_settings_change_init(&c);
        assert_int_equal(farm_change_label_arg(&c, "label", "room=b3", err), 0);
        assert_int_equal(farm_change_label(&c, "unlabel", "os", NULL, err), 0);
        cur = next;
        assert_int_equal(farm_settings_apply(&cur, &c, &next, err), 0);
        farm_settings_diff(&cur, &next, diff, sizeof(diff));
        assert_string_equal(diff, "label os removed (was \"debian\"); label room \"b2\" -> \"b3\"");

        /* 32 labels at most, after the change. */
        farm_settings_change_init(&c);
        for (int i = 0; i < 31; i++) {
                char kv[32];
                snprintf(kv, sizeof(kv), "k%d=v", i);
                assert_int_equal(farm_change_label_arg(&c, "label", kv, err), 0);
        }
        assert_int_equal(farm_settings_apply(&next, &c, &cur, err), 0);
        assert_int_equal(cur.nlabels, 32);
        farm_settings_change_init(&c);
        assert_int_equal(farm_change_label_arg(&c, "label", "one=more", err), 0);
        expect_err(farm_settings_apply(&cur, &c, &next, err), -EINVAL, "more than 32 labels");
        assert_int_equal(farm_change_label(&c, "unlabel", "k0", NULL, err), 0);
        expect_err(farm_settings_apply(&cur, &c, &next, err), -EINVAL, "more than 32 labels");
        farm_settings_change_init(&c);
        assert_int_equal(farm_change_label(&c, "unlabel", "k0", NULL, err), 0);
        assert_int_equal(farm_change_label_arg(&c, "label", "one=more", err), 0);
        assert_int_equal(farm_settings_apply(&cur, &c, &next, err), 0);
        assert_int_equal(next.nlabels, 32);
}

/* ---- versions in the database -------------------------------------------------------------- */

static void test_enroll_and_set(void **state) {
        (void) state;
        uint8_t hash[SHA256_DIGEST_SIZE];
        struct farm_settings_change c;
        int64_t version = 0;
        char id[FARM_MACHINE_ID_LEN + 1];

        open_fresh();
        farm_settings_change_init(&c);
        c.bound_ns = 150000;
        assert_int_equal(farm_change_groups(&c, "groups", "rack-a", err), 0);
        hash_of(hash, 1);
        assert_int_equal(farm_enroll(db, ID_A, hash, &c, "alice", NULL, T0, err), 1);
        expect_text("SELECT group_concat(threshold_ns || ' ' || gating || ' ' || groups || ' ' || "
                    "labels || ' ' || revoked || ' ' || by || ' ' || reason, '|') "
                    "FROM machine_settings",
                    "150000 1 rack-a {} 0 alice enrolled");
        assert_int_equal(sql_int("SELECT from_ns FROM machine_settings"), T0);
        expect_text("SELECT action || ' ' || who || ' ' || machine_id || ' ' || detail FROM audit",
                    "machine_enroll alice " ID_A " settings version 1: bound 150us, gating yes, "
                    "groups rack-a, labels none: enrolled");
        assert_int_equal(farm_authenticate(db, hash, id), 0);

        /* A change: a new version, the token as it was, the machine's columns in step. */
        farm_settings_change_init(&c);
        c.bound_ns = 300000;
        c.gating = 0;
        assert_int_equal(
                farm_machine_set(db, ID_A, &c, "bob", "VM stalls", T0 + H_NS, &version, err), 1);
        assert_int_equal(version, 2);
        assert_int_equal(farm_authenticate(db, hash, id), 0);
        assert_int_equal(sql_int("SELECT count(*) FROM machines WHERE rekeyed_ns IS NOT NULL"), 0);
        expect_text("SELECT threshold_ns || ' ' || gating FROM machines", "300000 0");
        expect_text("SELECT detail FROM audit WHERE action = 'machine_set'",
                    "bound 150us -> 300us; gating yes -> no: VM stalls");
        expect_text("SELECT who || ' ' || machine_id FROM audit WHERE action = 'machine_set'",
                    "bob " ID_A);

        /* The same again changes nothing and adds no version. */
        assert_int_equal(
                farm_machine_set(db, ID_A, &c, "bob", "again", T0 + 2 * H_NS, &version, err), 0);
        assert_int_equal(version, 2);
        assert_int_equal(sql_int("SELECT count(*) FROM machine_settings"), 2);
        assert_int_equal(sql_int("SELECT count(*) FROM audit"), 2);

        /* Refusals leave everything as it was. */
        farm_settings_change_init(&c);
        expect_err(farm_machine_set(db, ID_A, &c, "bob", "x", T0, &version, err), -EINVAL,
                   "nothing to change");
        c.gating = 1;
        expect_err(farm_machine_set(db, ID_A, &c, "bob", "", T0, &version, err), -EINVAL,
                   "reason: required");
        expect_err(farm_machine_set(db, ID_A, &c, "b o b", "x", T0, &version, err), -EINVAL,
                   "by: ");
        expect_err(farm_machine_set(db, ID_B, &c, "bob", "x", T0, &version, err), -ENOENT,
                   "no machine " ID_B " is enrolled");
        assert_int_equal(sql_int("SELECT count(*) FROM machine_settings"), 2);
        assert_int_equal(sql_int("SELECT count(*) FROM audit"), 2);

        /* A clock stepped back: the new version does not start before the one it follows. */
        assert_int_equal(farm_machine_set(db, ID_A, &c, "bob", "back", T0 - H_NS, &version, err),
                         1);
        assert_int_equal(sql_int("SELECT max(from_ns) FROM machine_settings"), T0 + H_NS);
        assert_int_equal(sql_int("SELECT from_ns FROM machine_settings WHERE reason = 'back'"),
                         T0 + H_NS);
}

static void test_rekey_and_revoke(void **state) {
        (void) state;
        uint8_t h1[SHA256_DIGEST_SIZE], h2[SHA256_DIGEST_SIZE], h3[SHA256_DIGEST_SIZE];
        struct farm_settings_change c;
        char id[FARM_MACHINE_ID_LEN + 1];

        open_fresh();
        enroll_a();
        hash_of(h1, 1);
        hash_of(h2, 2);
        hash_of(h3, 3);

        /* Re-enrolment without options: a new token, audited, and no new version. */
        assert_int_equal(farm_enroll(db, ID_A, h2, NULL, "alice", NULL, T0 + MIN_NS, err), 0);
        assert_int_equal(farm_authenticate(db, h1, id), -EACCES);
        assert_int_equal(farm_authenticate(db, h2, id), 0);
        assert_int_equal(sql_int("SELECT count(*) FROM machine_settings"), 1);
        assert_int_equal(sql_int("SELECT count(*) FROM audit WHERE action = 'machine_rekey'"), 1);

        /* With options: a settings version as well. */
        farm_settings_change_init(&c);
        c.gating = 0;
        assert_int_equal(farm_enroll(db, ID_A, h3, &c, "alice", "new disk", T0 + 2 * MIN_NS, err),
                         0);
        assert_int_equal(sql_int("SELECT count(*) FROM machine_settings"), 2);
        expect_text("SELECT reason FROM machine_settings ORDER BY id DESC LIMIT 1", "new disk");

        /* Revocation: a version with revoked set; the token stops working. */
        assert_int_equal(farm_revoke(db, ID_A, "carol", "retired", T0 + 3 * MIN_NS, err), 1);
        assert_int_equal(farm_authenticate(db, h3, id), -EACCES);
        assert_int_equal(sql_int("SELECT revoked FROM machine_settings ORDER BY id DESC LIMIT 1"),
                         1);
        assert_int_equal(sql_int("SELECT revoked_ns FROM machines"), T0 + 3 * MIN_NS);
        expect_text("SELECT detail FROM audit WHERE action = 'machine_revoke'",
                    "revoked no -> yes: retired");
        /* Again: nothing new. */
        assert_int_equal(farm_revoke(db, ID_A, "carol", NULL, T0 + 4 * MIN_NS, err), 0);
        assert_int_equal(sql_int("SELECT count(*) FROM machine_settings"), 3);
        expect_err(farm_revoke(db, ID_B, "carol", NULL, T0, err), -ENOENT, "no machine");

        /* Settings of a revoked machine may change; it stays revoked. */
        farm_settings_change_init(&c);
        c.bound_ns = 50000;
        int64_t v;
        assert_int_equal(
                farm_machine_set(db, ID_A, &c, "carol", "archive", T0 + 5 * MIN_NS, &v, err), 1);
        assert_int_equal(sql_int("SELECT revoked FROM machine_settings ORDER BY id DESC LIMIT 1"),
                         1);
        assert_int_equal(sql_int("SELECT revoked_ns FROM machines"), T0 + 3 * MIN_NS);

        /* Re-enrolment lifts it, as a version of its own. */
        assert_int_equal(farm_enroll(db, ID_A, h1, NULL, "alice", NULL, T0 + 6 * MIN_NS, err), 0);
        assert_int_equal(farm_authenticate(db, h1, id), 0);
        assert_int_equal(sql_int("SELECT revoked FROM machine_settings ORDER BY id DESC LIMIT 1"),
                         0);
        assert_int_equal(sql_int("SELECT revoked_ns IS NULL FROM machines"), 1);
        expect_text("SELECT detail FROM audit ORDER BY id DESC LIMIT 1",
                    "revoked yes -> no: re-enrolled");

        /* Enrolment refuses what breaks a rule, and stores nothing. */
        farm_settings_change_init(&c);
        c.bound_ns = 2 * S_NS;
        expect_err(farm_enroll(db, ID_B, h2, &c, "alice", NULL, T0, err), -EINVAL, "at most 1s");
        expect_err(farm_enroll(db, "nothex", h2, NULL, "alice", NULL, T0, err), -EINVAL,
                   "machine: 'nothex' is not a machine id");
        assert_int_equal(sql_int("SELECT count(*) FROM machines"), 1);
}

static void test_settings_json(void **state) {
        (void) state;
        struct farm_settings_change c;
        struct farm_page page = { .limit = 2, .offset = 0 };
        int64_t v;
        json_t *j;

        open_fresh();
        enroll_a();
        for (int i = 0; i < 3; i++) {
                char kv[32];
                farm_settings_change_init(&c);
                snprintf(kv, sizeof(kv), "step=%d", i);
                assert_int_equal(farm_change_label_arg(&c, "label", kv, err), 0);
                assert_int_equal(
                        farm_machine_set(db, ID_A, &c, "bob", "step", T0 + i * H_NS + 1, &v, err),
                        1);
        }
        assert_int_equal(farm_settings_json(db, ID_A, &page, &j, err), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "total")), 4);
        json_t *cur = json_object_get(j, "settings"), *h = json_object_get(j, "history");
        assert_int_equal(json_integer_value(json_object_get(cur, "version")), 4);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(cur, "labels"), "step")), "2");
        assert_int_equal(json_integer_value(json_object_get(cur, "from_ns")), T0 + 2 * H_NS + 1);
        assert_string_equal(json_string_value(json_object_get(cur, "from")),
                            "2026-12-03T14:13:20.000000001Z");
        assert_int_equal(json_array_size(h), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(h, 1), "version")), 3);
        assert_string_equal(json_string_value(json_object_get(j, "machine")), ID_A);
        json_decref(j);

        /* The last page: the oldest, version 1, and still the one in force as "settings". */
        page.offset = 3;
        assert_int_equal(farm_settings_json(db, ID_A, &page, &j, err), 0);
        h = json_object_get(j, "history");
        assert_int_equal(json_array_size(h), 1);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(h, 0), "version")), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(h, 0), "by")),
                            "alice");
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "settings"), "version")), 4);
        json_decref(j);
        assert_int_equal(farm_settings_json(db, ID_B, &page, &j, err), -ENOENT);
}

/* The groups and labels in force as the machine list shows them. */
static void test_brief_json(void **state) {
        (void) state;
        json_t *j = farm_settings_brief_json(NULL);
        char *t = json_dumps(j, JSON_COMPACT);
        assert_string_equal(t, "{\"groups\":[\"default\"],\"labels\":{}}");
        free(t);
        json_decref(j);
        j = farm_settings_brief_json("6.6-rt,rack-a\n{\"room\":\"b2\"}");
        t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(t, "{\"groups\":[\"6.6-rt\",\"rack-a\"],\"labels\":{\"room\":\"b2\"}}");
        free(t);
        json_decref(j);
}

/* A database whose machines were enrolled before the history was kept (schema 6 migrated
 * them; an older tool may still have written a machine without a version): what is in force
 * comes from the machine's own columns, and the first change starts the history. */
static void test_machine_without_versions(void **state) {
        (void) state;
        struct farm_settings_change c;
        int64_t v;
        open_fresh();
        enroll_a();
        sqlite3 *w;
        assert_int_equal(sqlite3_open(path, &w), SQLITE_OK);
        assert_int_equal(sqlite3_exec(w,
                                      "DELETE FROM machine_settings; UPDATE machines SET "
                                      "threshold_ns = 70000, gating = 0",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(w);
        farm_settings_change_init(&c);
        assert_int_equal(farm_change_label_arg(&c, "label", "a=b", err), 0);
        assert_int_equal(farm_machine_set(db, ID_A, &c, "bob", "first", T0 + H_NS, &v, err), 1);
        assert_int_equal(v, 1);
        expect_text("SELECT threshold_ns || ' ' || gating || ' ' || groups FROM machine_settings",
                    "70000 0 default");
}

/* ---- maintenance windows ------------------------------------------------------------------- */

static void test_window_rules(void **state) {
        (void) state;
        int64_t id = 0, now = T0;
        open_fresh();
        enroll_a();
        static const struct {
                int64_t from, to;
                const char *reason, *error;
        } cases[] = {
                { T0 - 61 * S_NS, T0 + H_NS, "r",
                  "from: 2026-12-03T12:12:19Z is more than a minute "
                  "in the past" },
                { T0 - 60 * S_NS, T0 + H_NS, "r", NULL },
                { T0 + H_NS, T0 + H_NS, "r", "to: 2026-12-03T13:13:20Z is not after from" },
                { T0 + H_NS, T0, "r", "is not after from" },
                { T0, T0 + 31 * 24 * H_NS, "r", NULL },
                { T0, T0 + 31 * 24 * H_NS + 1, "r", "more than 31d" },
                { T0 + 367 * 24 * H_NS, T0 + 368 * 24 * H_NS, "r", "more than a year ahead" },
                { T0, T0 + H_NS, "", "reason: required" },
                { T0, T0 + H_NS, "a\nb", "reason: a control character U+000A at byte 1" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int r = farm_maintenance_add(db, ID_A, cases[i].from, cases[i].to, cases[i].reason,
                                             "ops", now, &id, err);
                if (cases[i].error ? r != -EINVAL || !strstr(err, cases[i].error) : r != 0)
                        fail_msg("case %zu: got %d '%s'", i, r, err);
        }
        assert_int_equal(sql_int("SELECT count(*) FROM maintenance"), 2);
        expect_err(farm_maintenance_add(db, ID_B, T0, T0 + H_NS, "r", "ops", now, &id, err),
                   -ENOENT, "no machine " ID_B);
        expect_err(farm_maintenance_add(db, ID_A, T0, T0 + H_NS, "r", "", now, &id, err), -EINVAL,
                   "by: ");
        expect_text("SELECT action || ' ' || who || ' ' || machine_id FROM audit WHERE action LIKE "
                    "'maint%' LIMIT 1",
                    "maintenance_add ops " ID_A);
        assert_int_equal(sql_int("SELECT count(*) FROM audit WHERE action = 'maintenance_add'"), 2);
}

static const char *state_of(int64_t id, int64_t now) {
        static char buf[32];
        json_t *j;
        assert_int_equal(farm_maintenance_get(db, id, now, &j, err), 0);
        snprintf(buf, sizeof(buf), "%s", json_string_value(json_object_get(j, "state")));
        json_decref(j);
        return buf;
}

static int64_t effective_to(int64_t id) {
        json_t *j;
        assert_int_equal(farm_maintenance_get(db, id, T0, &j, err), 0);
        int64_t v = json_integer_value(json_object_get(j, "effective_to_ns"));
        json_decref(j);
        return v;
}

static void test_window_states_and_cancel(void **state) {
        (void) state;
        int64_t a, b, c;
        open_fresh();
        enroll_a();
        assert_int_equal(farm_maintenance_add(db, ID_A, T0 + H_NS, T0 + 3 * H_NS, "rack move",
                                              "ops", T0, &a, err),
                         0);
        assert_int_equal(farm_maintenance_add(db, ID_A, T0 + H_NS, T0 + 3 * H_NS, "second", "ops",
                                              T0, &b, err),
                         0);
        assert_int_equal(farm_maintenance_add(db, ID_A, T0, T0 + H_NS, "third", "ops", T0, &c, err),
                         0);
        assert_string_equal(state_of(a, T0), "scheduled");
        assert_string_equal(state_of(a, T0 + H_NS), "active");
        assert_string_equal(state_of(a, T0 + 3 * H_NS - 1), "active");
        assert_string_equal(state_of(a, T0 + 3 * H_NS), "over");

        /* Cancelled before it began: it never does. */
        expect_err(farm_maintenance_cancel(db, a, "ops", "", T0 + MIN_NS, err), -EINVAL,
                   "reason: required");
        assert_int_equal(farm_maintenance_cancel(db, a, "ops", "moved to Friday", T0 + MIN_NS, err),
                         0);
        assert_string_equal(state_of(a, T0 + 2 * H_NS), "cancelled");
        assert_int_equal(effective_to(a), T0 + H_NS);
        /* Cancelled while it runs: it ends then. */
        assert_int_equal(farm_maintenance_cancel(db, b, "ops", "done early", T0 + 2 * H_NS, err),
                         0);
        assert_int_equal(effective_to(b), T0 + 2 * H_NS);
        expect_text("SELECT cancelled_by FROM maintenance WHERE id = 2", "ops");
        expect_text("SELECT detail FROM audit WHERE action = 'maintenance_cancel' ORDER BY id "
                    "DESC LIMIT 1",
                    "window 2 ended early: done early");
        /* Twice, over, or unknown: refused with why. */
        expect_err(farm_maintenance_cancel(db, b, "ops", "again", T0 + 2 * H_NS, err), -EALREADY,
                   "was cancelled already");
        expect_err(farm_maintenance_cancel(db, c, "ops", "late", T0 + H_NS, err), -EALREADY,
                   "is over");
        expect_err(farm_maintenance_cancel(db, 99, "ops", "x", T0, err), -ENOENT,
                   "no maintenance window 99");

        /* The list: latest start first, per machine or all, paginated. */
        struct farm_page page = { .limit = 2, .offset = 0 };
        json_t *j;
        assert_int_equal(farm_maintenance_json(db, NULL, &page, T0, &j, err), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "total")), 3);
        json_t *w = json_object_get(j, "windows");
        assert_int_equal(json_array_size(w), 2);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(w, 0), "id")), b);
        json_decref(j);
        assert_int_equal(farm_maintenance_json(db, ID_B, &page, T0, &j, err), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "total")), 0);
        json_decref(j);
}

static void test_window_json_body(void **state) {
        (void) state;
        static const struct {
                const char *body, *error;
                int64_t from;
        } cases[] = {
                { "{\"from\":\"2026-12-05T08:00:00Z\",\"to\":\"2026-12-05T12:00:00Z\","
                  "\"reason\":\"r\"}",
                  NULL, INT64_C(1796457600000000000) },
                { "{\"from\":\"2026-12-05T09:00:00+01:00\",\"to\":1796472000000000000,"
                  "\"reason\":\"r\"}",
                  NULL, INT64_C(1796457600000000000) },
                { "{\"from\":1796457600000000000,\"to\":\"2026-12-05T12:00:00Z\","
                  "\"reason\":\"r\"}",
                  NULL, INT64_C(1796457600000000000) },
                { "{\"from\":\"2026-12-05\",\"to\":\"2026-12-06T00:00:00Z\",\"reason\":\"r\"}",
                  "from: expected RFC 3339 time with an offset", 0 },
                { "{\"from\":\"2026-12-05T08:00:00\",\"to\":1,\"reason\":\"r\"}",
                  "from: expected RFC 3339", 0 },
                { "{\"from\":\"2h ago\",\"to\":1,\"reason\":\"r\"}", "from: expected RFC 3339", 0 },
                { "{\"from\":\"2026-13-05T08:00:00Z\",\"to\":1,\"reason\":\"r\"}", "from: ", 0 },
                { "{\"to\":1,\"reason\":\"r\"}", "from: missing", 0 },
                { "{\"from\":1,\"reason\":\"r\"}", "to: missing", 0 },
                { "{\"from\":1,\"to\":2}", "reason: required", 0 },
                { "{\"from\":1,\"to\":2,\"reason\":[]}", "reason: expected a string", 0 },
                { "{\"from\":1,\"to\":2,\"reason\":\"r\",\"machine\":\"x\"}",
                  "machine: unknown field", 0 },
                { "{\"from\":1.5,\"to\":2,\"reason\":\"r\"}", "from: expected RFC 3339", 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int64_t from = 0, to = 0;
                const char *reason;
                json_t *j = json_of(cases[i].body);
                int r = farm_maintenance_from_json(j, &from, &to, &reason, err);
                if (cases[i].error ? r != -EINVAL || !strstr(err, cases[i].error)
                                   : r != 0 || from != cases[i].from)
                        fail_msg("%s: got %d '%s' (from %lld)", cases[i].body, r, err,
                                 (long long) from);
                json_decref(j);
        }
        int64_t t;
        const char *why = NULL;
        assert_int_equal(farm_maintenance_parse_time("+2h", T0, &t, &why), 0);
        assert_int_equal(t, T0 + 2 * H_NS);
        assert_int_equal(farm_maintenance_parse_time("in 30min", T0, &t, &why), 0);
        assert_int_equal(t, T0 + 30 * MIN_NS);
        assert_int_equal(farm_maintenance_parse_time("2h ago", T0, &t, &why), 0);
        assert_int_equal(t, T0 - 2 * H_NS);
        assert_true(farm_maintenance_parse_time("+soon", T0, &t, &why) < 0);
        assert_non_null(why);
}

static int teardown(void **state) {
        (void) state;
        farm_db_close(db);
        db = NULL;
        return 0;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_checks),
                cmocka_unit_test(test_change_parsing),
                cmocka_unit_test(test_change_from_json),
                cmocka_unit_test(test_apply_and_diff),
                cmocka_unit_test(test_enroll_and_set),
                cmocka_unit_test(test_rekey_and_revoke),
                cmocka_unit_test(test_settings_json),
                cmocka_unit_test(test_machine_without_versions),
                cmocka_unit_test(test_brief_json),
                cmocka_unit_test(test_window_rules),
                cmocka_unit_test(test_window_states_and_cancel),
                cmocka_unit_test(test_window_json_body),
        };
        if (!mkdtemp(dir))
                return 1;
        int r = RUN_TESTS_WITH(tests, NULL, teardown);
        return tests_remove_dir(dir) != 0 ? 1 : r;
}
