/* SPDX-License-Identifier: MIT */
/* Unit tests of the notifications' parts: HMAC-SHA256 (RFC 4231's vectors) and the webhook's
 * signature, the [Notify.NAME] keys with their errors, routing by kind and group, the text of
 * every kind, the mail as sendmail reads it (no header made of a name), and the deliveries'
 * leases in a real farm database (SQLite, or PostgreSQL under pg-run.sh). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests.h"
#include "base64.h"
#include "macro.h"
#include "channel.h"
#include "notify-store.h"
#include "notifier.h"
#include "sha256.h"
#include "test-farmdb.h"
#include "test-util.h"

#define S_NS INT64_C(1000000000)
#define T0 INT64_C(1796300000000000000)

static char dir[] = "/tmp/test-notification-parts-XXXXXX";

static void hex_is(const uint8_t mac[SHA256_DIGEST_SIZE], const char *want) {
        char hex[2 * SHA256_DIGEST_SIZE + 1];
        assert_string_equal(sha256_digest_hex(mac, hex), want);
}

static void test_hmac_rfc4231(void **state) {
        uint8_t key1[20], key6[131], mac[SHA256_DIGEST_SIZE];
        memset(key1, 0x0b, sizeof(key1));
        memset(key6, 0xaa, sizeof(key6));
        const char *m1 = "Hi There", *m2 = "what do ya want for nothing?",
                   *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        hmac_sha256(key1, sizeof(key1), (const void *[]){ m1 }, (size_t[]){ strlen(m1) }, 1, mac);
        hex_is(mac, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        hmac_sha256("Jefe", 4, (const void *[]){ m2 }, (size_t[]){ strlen(m2) }, 1, mac);
        hex_is(mac, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        /* A key longer than a block is hashed first; the message may come in parts. */
        hmac_sha256(key6, sizeof(key6), (const void *[]){ m6, m6 + 10, m6 + 11 },
                    (size_t[]){ 10, 1, strlen(m6) - 11 }, 3, mac);
        hex_is(mac, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        (void) state;
}

static void test_webhook_signature(void **state) {
        char sig[72];
        const char *secret = "0123456789abcdef-secret";
        notify_webhook_signature((const uint8_t *) secret, strlen(secret), "1700000000",
                                 "{\"kind\":\"test\"}", sig);
        assert_string_equal(sig, "sha256=53b509f49fdcf0162a383058c1d943cbdcb166da1e0b4692f06b3336"
                                 "a51981f8");
        (void) state;
}

/* ---- the configuration ---- */

static const struct {
        const char *name, *key, *value;
        int r;
        const char *err; /* a part of the message */
} keys[] = {
        { "hook", "Webhook", "https://hooks.example/rtsoak", 0, NULL },
        { "hook", "Webhook", "ftp://x", -EINVAL, "http:// or https://" },
        { "hook", "Webhook", "http://a b/", -EINVAL, "no spaces" },
        { "hook", "SecretFile", "relative/path", -EINVAL, "absolute path" },
        { "hook", "Timeout", "5s", 0, NULL },
        { "hook", "Timeout", "5", -EINVAL, "" },
        { "hook", "Timeout", "1h", -EINVAL, "out of range" },
        { "hook", "Retries", "101", -EINVAL, "0 to 100" },
        { "hook", "Retries", "-1", -EINVAL, "0 to 100" },
        { "hook", "Kinds", "silence, violation verdict", 0, NULL },
        { "hook", "Kinds", "test", -EINVAL, "not a kind" },
        { "hook", "Kinds", " , ", -EINVAL, "no kind given" },
        { "hook", "Groups", "rack-a rack_b.2", 0, NULL },
        { "hook", "Groups", "Rack", -EINVAL, "not a group name" },
        { "hook", "Colour", "red", -EINVAL, "unknown key" },
        { "mail", "Mail", "a@b.example,c@d.example", 0, NULL },
        { "mail", "Mail", "a@b.example, <x>@y", -EINVAL, "not a mail address" },
        { "mail", "Mail", "a@b.example\nBcc: victim@x", -EINVAL, "not a mail address" },
        { "mail", "From", "rtsoak@farm", 0, NULL },
        { "mail", "SubjectPrefix", "[lab]\r", -EINVAL, "a control character U+000D" },
        { "mail", "SubjectPrefix", "[lab\xe2\x80\xae]", -EINVAL, "U+202E" },
        { "mail", "SMTP", "http://localhost:25", -EINVAL, "smtp:// or smtps://" },
        { "BAD", "Mail", "a@b", -EINVAL, "a channel name may hold only" },
};

static void test_channel_keys(void **state) {
        struct notify_config c = {};
        char err[CONF_ERROR_MAX];
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                err[0] = '\0';
                int r = notify_channel_assign(&c, "x.conf:1", keys[i].name, keys[i].key,
                                              keys[i].value, err);
                if (r != keys[i].r || (keys[i].err && !strstr(err, keys[i].err)))
                        fail_msg("%s=%s: %d %s", keys[i].key, keys[i].value, r, err);
        }
        const struct notify_channel *h = notify_channel_find(&c, "hook");
        assert_non_null(h);
        assert_string_equal(h->url, "https://hooks.example/rtsoak");
        assert_int_equal(h->timeout_ns, 5 * S_NS);
        assert_int_equal(h->ngroups, 2);
        assert_string_equal(notify_channel_find(&c, "mail")->to, "a@b.example, c@d.example");
        assert_int_equal(notify_config_check(&c, "x.conf:9", err), 0);
        assert_int_equal(h->transport, NOTIFY_WEBHOOK);
        assert_string_equal(notify_channel_find(&c, "mail")->sendmail, "/usr/sbin/sendmail");
        notify_config_free(&c);
        (void) state;
}

static void test_channel_check(void **state) {
        static const struct {
                const char *k1, *v1, *k2, *v2, *err;
        } cases[] = {
                { "Kinds", "all", NULL, NULL, "x.conf:1: [Notify.c]: needs Webhook=URL or Mail=" },
                { "Webhook", "http://h/", "Mail", "a@b", "either Webhook= or Mail=, not both" },
                { "Webhook", "http://h/", "Sendmail", "/bin/true",
                  "Sendmail= is not a key of a "
                  "webhook channel" },
                { "Mail", "a@b", "CAFile", "/etc/ca.pem", "CAFile= is not a key of a mail" },
                { "Webhook", "http://h/", "RetryDelay", "2h", "RetryMax= is shorter" },
                { "Webhook", "http://h/", "SMTP", "smtp://localhost",
                  "SMTP= is not a key of a "
                  "webhook" },
        };
        char err[CONF_ERROR_MAX];
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct notify_config c = {};
                assert_int_equal(
                        notify_channel_assign(&c, "x.conf:1", "c", cases[i].k1, cases[i].v1, err),
                        0);
                if (cases[i].k2)
                        assert_int_equal(notify_channel_assign(&c, "x.conf:2", "c", cases[i].k2,
                                                               cases[i].v2, err),
                                         0);
                assert_int_equal(notify_config_check(&c, NULL, err), -EINVAL);
                if (!strstr(err, cases[i].err))
                        fail_msg("case %zu: %s", i, err);
                notify_config_free(&c);
        }
        struct notify_config two = {};
        assert_int_equal(notify_channel_assign(&two, "w", "c", "Mail", "a@b", err), 0);
        assert_int_equal(notify_channel_assign(&two, "w", "c", "Sendmail", "/bin/true", err), 0);
        assert_int_equal(notify_channel_assign(&two, "w", "c", "SMTP", "smtp://mta", err), 0);
        assert_int_equal(notify_config_check(&two, NULL, err), -EINVAL);
        assert_non_null(strstr(err, "either Sendmail= or SMTP=, not both"));
        notify_config_free(&two);
        struct notify_config c = { .dashboard_url = (char *) "farm:80" };
        assert_int_equal(notify_config_check(&c, "y.conf:3", err), -EINVAL);
        assert_non_null(strstr(err, "y.conf:3: [Notifications] DashboardURL=farm:80"));
        (void) state;
}

static void test_routing(void **state) {
        struct notify_config c = {};
        char err[CONF_ERROR_MAX];
        assert_int_equal(notify_channel_assign(&c, "w", "a", "Groups", "rack-a lab", err), 0);
        assert_int_equal(notify_channel_assign(&c, "w", "a", "Kinds", "silence verdict", err), 0);
        assert_int_equal(notify_channel_assign(&c, "w", "all", "Webhook", "http://h/", err), 0);
        const struct notify_channel *a = notify_channel_find(&c, "a"),
                                    *all = notify_channel_find(&c, "all");
        static const struct {
                enum notify_kind kind;
                const char *groups;
                bool a, all;
        } cases[] = {
                { NK_SILENCE, "rack-a", true, true },
                { NK_SILENCE, "default,rack-a", true, true },
                { NK_SILENCE, "rack-ab", false, true }, /* whole names only */
                { NK_SILENCE, "rack", false, true },
                { NK_SILENCE, "x,lab", true, true },
                { NK_VIOLATION, "rack-a", false, true },
                { NK_VERDICT, "lab", true, true },
                { NK_SILENCE, "", false, true },
                { NK_TEST, "rack-a", false, false }, /* only to the channel named */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                if (notify_channel_wants(a, cases[i].kind, cases[i].groups) != cases[i].a ||
                    notify_channel_wants(all, cases[i].kind, cases[i].groups) != cases[i].all)
                        fail_msg("case %zu", i);
        }
        notify_config_free(&c);
        (void) state;
}

/* ---- the words ---- */

static json_t *row(const char *json) {
        json_error_t e;
        json_t *j = json_loads(json, 0, &e);
        if (!j)
                fail_msg("%s: %s", json, e.text);
        return j;
}

static void title_is(const char *json, const char *title, const char *in_text) {
        json_auto_t *r = row(json);
        struct notify_text t;
        assert_int_equal(notify_render(r, "https://farm", &t), 0);
        assert_string_equal(t.title, title);
        if (!strstr(t.text, in_text))
                fail_msg("'%s' not in:\n%s", in_text, t.text);
        assert_non_null(strstr(t.text, "Dashboard: https://farm"));
        notify_text_done(&t);
}

static void test_render(void **state) {
        title_is("{\"kind\":\"silence\",\"status\":\"firing\",\"machine\":\"m1\",\"hostname\":"
                 "\"lab7\",\"path\":\"/machines/m1\",\"detail\":{\"since_ns\":0,\"detected_ns\":"
                 "960000000000,\"max_gap_ns\":900000000000,\"last_report_ns\":0}}",
                 "lab7 silent for 16min", "longer than the allowed gap of 15min");
        title_is("{\"kind\":\"silence\",\"status\":\"resolved\",\"machine\":\"m1\",\"hostname\":"
                 "null,\"detail\":{\"since_ns\":0,\"until_ns\":10920000000000,\"why\":"
                 "\"reported\"}}",
                 "m1 reported again after 3h 2min of silence", "(3h 2min)");
        title_is("{\"kind\":\"violation\",\"status\":\"firing\",\"machine\":\"m1\",\"hostname\":"
                 "\"lab7\",\"release\":\"6.6.1-rt1\",\"series\":\"6.6-rt\",\"groups\":[\"a\"],"
                 "\"count\":25,\"time_ns\":0,\"last_ns\":0,\"detail\":{\"items\":[{\"message\":"
                 "\"lab7 CPU 1: latency 500us\",\"culprit\":\"irq/42-eth0 (pid 311) ran 480us\"}"
                 "]}}",
                 "lab7: 25 latency violations on 6.6.1-rt1",
                 "  - lab7 CPU 1: latency 500us\n    culprit: irq/42-eth0 (pid 311) ran 480us\n"
                 "  ... and 24 more");
        title_is("{\"kind\":\"probe_down\",\"machine\":\"m1\",\"hostname\":\"lab7\",\"release\":"
                 "\"r\",\"count\":1,\"detail\":{\"items\":[]}}",
                 "lab7: 1 probe failure on r", "1 new probe failure");
        title_is("{\"kind\":\"verdict\",\"release\":\"6.6.1-rt1\",\"series\":\"6.6-rt\",\"detail\":"
                 "{\"from\":\"pending\",\"to\":\"failed\",\"reasons\":[\"1 problem(s)\"]}}",
                 "6.6.1-rt1: pending -> failed", "is now failed, was pending.\n  1 problem(s)");
        title_is("{\"kind\":\"waiver\",\"status\":\"withdrawn\",\"release\":\"r\",\"detail\":{"
                 "\"waiver\":7,\"by\":\"alice\",\"problem\":\"gap:x\",\"reason\":\"no\","
                 "\"verdict\":\"failed\"}}",
                 "r: waiver 7 withdrawn by alice", "The verdict of r is now failed.");
        title_is("{\"kind\":\"latest_stable\",\"series\":\"6.6-rt\",\"detail\":{\"from\":null,"
                 "\"to\":\"6.6.1-rt1\"}}",
                 "Latest stable of 6.6-rt: 6.6.1-rt1 (was none)", "is now the latest stable");
        char b[32];
        assert_string_equal(notify_span(b, 0), "0s");
        assert_string_equal(notify_span(b, 45 * S_NS), "45s");
        assert_string_equal(notify_span(b, 90 * S_NS), "1min 30s");
        assert_string_equal(notify_span(b, 26 * 3600 * S_NS), "1d 2h");
        assert_string_equal(notify_span(b, 250000), "250us");
        (void) state;
}

static void test_mail(void **state) {
        struct notify_channel ch = { .name = "m",
                                     .to = (char *) "a@b.example",
                                     .from = (char *) "rtsoak@farm",
                                     .subject_prefix = (char *) "[rtsoak]" };
        /* A host name with a line end must not make a header of its own. */
        struct notify_text t = { .title = (char *) "l\xc3\xa4"
                                                   "b7\nBcc: victim@example: 3 "
                                                   "latency violations of le\xe2\x80\xae"
                                                   "gacy",
                                 .text = (char *) "line one\nline\ttwo\x01\n"
                                                  "culprit le\xe2\x80\xaegacy\xc2\x85\n",
                                 .url = (char *) "https://farm/" };
        json_auto_t *r = row("{\"id\":42,\"kind\":\"violation\"}");
        struct notify_message m = { .row = r,
                                    .text = &t,
                                    .delivery = 7,
                                    .attempt = 2,
                                    .channel = "m",
                                    .host = "farm\r\nX: y" };
        _cleanup_free_ char *mail = notify_mail_compose(&ch, &m, T0);
        assert_non_null(mail);
        assert_null(strstr(mail, "\nBcc:"));
        assert_null(strstr(mail, "\nX: y"));
        assert_non_null(strstr(mail, "From: rtsoak@farm\nTo: a@b.example\nSubject: =?UTF-8?B?"));
        assert_non_null(strstr(mail, "\nMessage-ID: <rtsoak.42.7@farm  X: y>\n"));
        assert_non_null(strstr(mail, "\nDate: Thu, 03 Dec 2026 12:13:20 +0000\n"));
        assert_non_null(strstr(mail, "\nAuto-Submitted: auto-generated\n"));
        assert_non_null(strstr(mail, "\n\nline one\nline\ttwo\\x01\n"));
        /* A task's name stored before the text rule is escaped, never raw (headers and body). */
        assert_non_null(strstr(mail, "\nculprit le\\u202egacy\\u0085\n"));
        assert_null(strstr(mail, "\xe2\x80\xae"));
        assert_null(strstr(mail, "\xc2\x85"));
        /* The encoded subject decodes to the title, control characters made spaces. */
        const char *s = strstr(mail, "=?UTF-8?B?") + 10;
        uint8_t *dec = NULL;
        size_t n;
        assert_int_equal(base64_decode(s, strcspn(s, "?"), &dec, &n), 0);
        assert_memory_equal(dec,
                            "[rtsoak] l\xc3\xa4"
                            "b7 Bcc: ",
                            16);
        free(dec);
        /* Every encoded word decoded: the override in the title is escaped there too. */
        char subject[512] = "";
        for (const char *w = strstr(mail, "=?UTF-8?B?"); w && w < strstr(mail, "\nDate:");
             w = strstr(w + 1, "=?UTF-8?B?")) {
                w += 10;
                assert_int_equal(base64_decode(w, strcspn(w, "?"), &dec, &n), 0);
                strncat(subject, (const char *) dec, MIN(n, sizeof(subject) - strlen(subject) - 1));
                free(dec);
        }
        assert_non_null(strstr(subject, "violations of le\\u202egacy"));
        (void) state;
}

static void test_url_escape(void **state) {
        _cleanup_free_ char *a = notify_url_escape("/kernels/", "6.6.30-rt31+lab~1"),
                            *b = notify_url_escape("", "a b/c?d&e");
        assert_string_equal(a, "/kernels/6.6.30-rt31%2Blab~1");
        assert_string_equal(b, "a%20b%2Fc%3Fd%26e");
        (void) state;
}

/* ---- the deliveries in a farm database ---- */

struct insert_args {
        struct notify_new *n;
        int64_t now, due;
        int result;
};

static int insert_in(sql_conn *c, void *userdata, char *err) {
        struct insert_args *a = userdata;
        return a->result = notify_store_insert(c, a->n, a->now, a->due, NULL, err);
}

static void test_leases(void **state) {
        char path[600], err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        tu_farm_target(dir, "notify_leases", path, sizeof(path));
        if (farm_db_open(path, &db, err) < 0)
                fail_msg("%s", err);
        const char *channels[] = { "hook" };
        json_auto_t *detail = json_object();
        struct notify_new n = { .key = "k1",
                                .kind = NK_TEST,
                                .status = "test",
                                .groups = "",
                                .event_ns = T0,
                                .path = "/",
                                .detail = detail,
                                .channels = channels,
                                .nchannels = 1 };
        struct insert_args a = { &n, T0, T0 + 10 * S_NS, 0 };
        assert_int_equal(notify_store_write(db, insert_in, &a, err), 1);
        assert_int_equal(notify_store_write(db, insert_in, &a, err), 0); /* made once */
        struct notify_claim c;
        int64_t lease = 60 * S_NS, due;
        /* Not before it is due; then to one owner until its lease runs out. */
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + S_NS, lease, &c, err), 0);
        assert_int_equal(notify_store_next_due(db, "hook", &due, err), 0);
        assert_int_equal(due, T0 + 10 * S_NS);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 10 * S_NS, lease, &c, err), 1);
        assert_int_equal(c.attempts, 0);
        assert_string_equal(json_string_value(json_object_get(c.row, "kind")), "test");
        notify_claim_done(&c);
        assert_int_equal(notify_store_claim(db, "hook", "B", T0 + 11 * S_NS, lease, &c, err), 0);
        assert_int_equal(notify_store_claim(db, "other", "B", T0 + 99 * S_NS, lease, &c, err), 0);
        /* A's lease ran out: B takes it, and A can no longer record it. */
        assert_int_equal(notify_store_claim(db, "hook", "B", T0 + 71 * S_NS, lease, &c, err), 1);
        notify_claim_done(&c);
        assert_int_equal(
                notify_store_finish(db, c.delivery, "A", NOTIFY_SENT, T0 + 72 * S_NS, 0, NULL, err),
                -ESTALE);
        assert_int_equal(notify_store_finish(db, c.delivery, "B", NOTIFY_RETRY, T0 + 72 * S_NS,
                                             T0 + 80 * S_NS, "HTTP 500", err),
                         0);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 79 * S_NS, lease, &c, err), 0);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 80 * S_NS, lease, &c, err), 1);
        assert_int_equal(c.attempts, 1);
        notify_claim_done(&c);
        assert_int_equal(notify_store_finish(db, c.delivery, "A", NOTIFY_FAILED, T0 + 81 * S_NS, 0,
                                             "HTTP 404", err),
                         0);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 999 * S_NS, lease, &c, err), 0);
        assert_int_equal(notify_store_retry(db, 0, T0 + 100 * S_NS, err), 1);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 100 * S_NS, lease, &c, err), 1);
        assert_int_equal(c.attempts, 0);
        notify_claim_done(&c);
        /* Given back while stopping: no attempt counted, due again at once. */
        assert_int_equal(notify_store_finish(db, c.delivery, "A", NOTIFY_GIVEN_BACK,
                                             T0 + 101 * S_NS, 0, NULL, err),
                         0);
        assert_int_equal(notify_store_claim(db, "hook", "B", T0 + 101 * S_NS, lease, &c, err), 1);
        assert_int_equal(c.attempts, 0);
        notify_claim_done(&c);
        assert_int_equal(notify_store_finish(db, c.delivery, "B", NOTIFY_SENT, T0 + 102 * S_NS, 0,
                                             NULL, err),
                         0);
        /* Kept until Keep= is over, then pruned with its deliveries. */
        n.key = "k2"; /* still to be delivered: kept whatever its age */
        assert_int_equal(notify_store_write(db, insert_in, &a, err), 1);
        assert_int_equal(notify_store_prune(db, T0 + 10 * S_NS, err), 0); /* due then */
        assert_int_equal(notify_store_prune(db, T0 + 999 * S_NS, err), 1);
        assert_int_equal(notify_store_claim(db, "hook", "A", T0 + 999 * S_NS, lease, &c, err), 1);
        notify_claim_done(&c);
        farm_db_close(db);
        tu_farm_drop(path);
        (void) state;
}

/* Schema 8 -> 9 on either store: a farm taken back to 8 gets the notifications' tables again
 * when it is opened, and they work. */
static void test_migration_9(void **state) {
        char path[600], err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        tu_farm_target(dir, "notify_migration", path, sizeof(path));
        if (farm_db_open(path, &db, err) < 0)
                fail_msg("%s", err);
        farm_db_close(db);
        tu_farm_exec(path, tu_pg() ? TU_FARM_PG_SCHEMA_10_DOWN : TU_FARM_SCHEMA_10_DOWN);
        tu_farm_exec(path, tu_pg() ? TU_FARM_PG_SCHEMA_9_DOWN : TU_FARM_SCHEMA_9_DOWN);
        const char *version = tu_pg() ? "SELECT CAST(value AS BIGINT) FROM farm_meta WHERE key = "
                                        "'schema_version'"
                                      : "PRAGMA user_version";
        assert_int_equal(tu_farm_int(path, version), 8);
        if (farm_db_open(path, &db, err) < 0)
                fail_msg("%s: %s", tu_backend_name(), err);
        assert_int_equal(tu_farm_int(path, version), 12);
        const char *channels[] = { "hook" };
        json_auto_t *detail = json_object();
        struct notify_new n = { .key = "after-migration",
                                .kind = NK_TEST,
                                .status = "test",
                                .event_ns = T0,
                                .detail = detail,
                                .channels = channels,
                                .nchannels = 1 };
        struct insert_args a = { &n, T0, T0, 0 };
        assert_int_equal(notify_store_write(db, insert_in, &a, err), 1);
        farm_db_close(db);
        assert_int_equal(tu_farm_int(path, "SELECT count(*) FROM notification_deliveries"), 1);
        tu_farm_drop(path);
        (void) state;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hmac_rfc4231), cmocka_unit_test(test_webhook_signature),
                cmocka_unit_test(test_channel_keys), cmocka_unit_test(test_channel_check),
                cmocka_unit_test(test_routing),      cmocka_unit_test(test_render),
                cmocka_unit_test(test_mail),         cmocka_unit_test(test_url_escape),
                cmocka_unit_test(test_leases),       cmocka_unit_test(test_migration_9),
        };
        return RUN_TESTS_IN_TMPDIR(tests, dir);
}
