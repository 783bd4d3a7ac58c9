/* SPDX-License-Identifier: MIT */
/* rtsoak-server verdict, waive, unwaive and waivers: a release judged from the command line
 * (its exit status says how), its problems waived with a reason, and the waivers listed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode-verdict.h"
#include "kcidb.h"
#include "log.h"
#include "macro.h"
#include "releases.h"
#include "text-safe.h"
#include "timeutil.h"
#include "verdict.h"
#include "waivers.h"

int cli_verdict(const struct server_options *o, char **args, int n) {
        const char *release = args[0];
        char err[FARM_ERROR_MAX], perr[FARM_PARAM_ERROR_MAX];
        struct farm_question q;
        farm_db *db = NULL;
        _cleanup_verdict_ struct farm_verdict *v = NULL;

        (void) n;
        if (farm_question_parse(release, o->at, o->known_at, now_ns(CLOCK_REALTIME), &q, perr) <
            0) {
                log_error("Invalid --%s", perr);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_verdict_ask(db, &o->rule, &q, &v, err);
        farm_db_close(db);
        json_t *j = r >= 0 ? farm_verdict_to_json(v) : NULL;
        if (r >= 0 && !j)
                r = -ENOMEM;
        if (r < 0) {
                log_error_errno(r, "Cannot judge %s: %s", release, err);
                return r == -ENOENT ? 3 : EXIT_FAILURE;
        }
        r = v->status == FARM_VERDICT_QUALIFIED ? 0 : v->status == FARM_VERDICT_FAILED ? 1 : 2;
        if (cli_print_json(j) != EXIT_SUCCESS)
                r = EXIT_FAILURE;
        json_decref(j);
        return r;
}

int cli_kcidb(const struct server_options *o, char **args, int n) {
        const char *release = n > 0 ? args[0] : NULL,
                   *origin = o->origin ?: FARM_KCIDB_ORIGIN_DEFAULT;
        char err[FARM_ERROR_MAX], perr[FARM_PARAM_ERROR_MAX];
        struct farm_question q;
        farm_db *db = NULL;
        json_t *j = NULL;

        (void) n;
        if (!farm_kcidb_origin_ok(origin)) {
                log_error("Invalid --origin '%s': 1 to %d of a-z, 0-9 and _, as KCIDB takes",
                          origin, FARM_KCIDB_ORIGIN_MAX);
                return EXIT_USAGE;
        }
        if (!release != !!o->watch) {
                log_error("kcidb needs a RELEASE, or --watch DIRECTORY without one");
                return EXIT_USAGE;
        }
        if (o->watch) {
                if (o->at || o->known_at) {
                        log_error("--watch reports each release as of its change: no --at or "
                                  "--known-at");
                        return EXIT_USAGE;
                }
                return cli_kcidb_watch(o, o->watch, origin);
        }
        if (farm_question_parse(release, o->at, o->known_at, now_ns(CLOCK_REALTIME), &q, perr) <
            0) {
                log_error("Invalid --%s", perr);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_kcidb_report(db, &o->rule, &q, origin, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot report %s: %s", release, err);
                return r == -ENOENT ? 3 : EXIT_FAILURE;
        }
        r = cli_print_json(j);
        json_decref(j);
        return r;
}

/* --reason and --by are one line of plain text each. */
static bool why_ok(const struct server_options *o) {
        char why[TEXT_WHY_MAX];
        if (text_ok(o->reason ?: "", false, why) && text_ok(cli_who(o), false, why))
                return true;
        log_error("Invalid --reason or --by: %s (one line of plain text)", why);
        return false;
}

int cli_waive(const struct server_options *o, char **args, int n) {
        const char *release = args[0], *problem = args[1];
        char err[FARM_ERROR_MAX];
        farm_db *db = NULL;
        int64_t id;

        (void) n;
        if (!o->reason || !*o->reason) {
                log_error("waive needs --reason TEXT: a waiver without a reason is not accepted");
                return EXIT_USAGE;
        }
        if (!why_ok(o))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waive(db, &o->rule, release, problem, o->reason, cli_who(o),
                           now_ns(CLOCK_REALTIME), &id, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot waive: %s", err);
                return r == -EINVAL ? EXIT_USAGE : EXIT_FAILURE;
        }
        printf("%lld\n", (long long) id);
        log_info("Waiver %lld by %s: %s of %s", (long long) id, cli_who(o), problem, release);
        return EXIT_SUCCESS;
}

int cli_unwaive(const struct server_options *o, char **args, int n) {
        const char *id_text = args[0];
        char err[FARM_ERROR_MAX], *end;
        farm_db *db = NULL;

        (void) n;
        errno = 0;
        long long id = strtoll(id_text, &end, 10);
        if (errno || *end || id <= 0) {
                log_error("Invalid waiver id '%s': expected the number that waive printed",
                          id_text);
                return EXIT_USAGE;
        }
        if (!why_ok(o))
                return EXIT_USAGE;
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_unwaive(db, id, cli_who(o), o->reason ?: "", now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot withdraw waiver %lld: %s", id, err);
                return EXIT_FAILURE;
        }
        log_info("Withdrew waiver %lld", id);
        return EXIT_SUCCESS;
}

int cli_waivers(const struct server_options *o, char **args, int n) {
        const char *release = n > 0 ? args[0] : NULL;
        char err[FARM_ERROR_MAX];
        struct farm_page page = { .limit = UINT32_MAX, .offset = 0 };
        farm_db *db = NULL;
        json_t *j = NULL;

        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        int r = farm_waivers_json(db, release, &page, &j, err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot list the waivers: %s", err);
                return EXIT_FAILURE;
        }
        r = cli_print_json(j);
        json_decref(j);
        return r;
}
