/* SPDX-License-Identifier: MIT */
/* The staff's and the readers' tokens made and revoked from the command line, and a new token
 * printed once, naming where it went ("the token above" is wrong when the administrator wrote
 * it to a file, as the README's enrolment does). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "macro.h"
#include "staff-tokens.h"
#include "timeutil.h"
#include "token.h"

static void token_where(char ret[static CLI_TOKEN_WHERE_MAX]) {
        struct stat st;
        char path[PATH_MAX];
        ssize_t n;
        if (isatty(STDOUT_FILENO)) {
                snprintf(ret, CLI_TOKEN_WHERE_MAX, "the token above");
                return;
        }
        /* A file or a device (/dev/null), named by its path; a pipe or socket has none. */
        if (fstat(STDOUT_FILENO, &st) == 0 && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode) &&
            (n = readlink("/proc/self/fd/1", path, sizeof(path) - 1)) > 0 && path[0] == '/') {
                path[n] = '\0';
                snprintf(ret, CLI_TOKEN_WHERE_MAX, "the token in %s", path);
                return;
        }
        snprintf(ret, CLI_TOKEN_WHERE_MAX, "the token on standard output");
}

int cli_token_print(char *token, char ret_where[static CLI_TOKEN_WHERE_MAX]) {
        token_where(ret_where);
        printf("%s\n", token);
        explicit_bzero(token, strlen(token));
        return fflush(stdout) == 0 ? 0 : -errno;
}

/* The staff's tokens and the readers': the same commands on two tables. */
struct token_kind {
        const char *what;  /* "staff", "read": the token of the messages */
        const char *title; /* "Staff", "Read" */
        const char *name;  /* "staff name", "reader name": what NAME is */
        int (*add)(farm_db *db, const char *name, const uint8_t hash[SHA256_DIGEST_SIZE],
                   int64_t now_ns, char err[static FARM_ERROR_MAX]);
        int (*revoke)(farm_db *db, const char *name, int64_t now_ns,
                      char err[static FARM_ERROR_MAX]);
};

static const struct token_kind staff = { "staff", "Staff", "staff name", farm_admin_add,
                                         farm_admin_revoke };
static const struct token_kind reader = { "read", "Read", "reader name", farm_reader_add,
                                          farm_reader_revoke };

static int token_cmd(const struct server_options *o, const struct token_kind *k, const char *name,
                     bool revoke) {
        char token[FARM_TOKEN_LEN + 1], err[FARM_ERROR_MAX];
        uint8_t hash[SHA256_DIGEST_SIZE];
        farm_db *db = NULL;
        int r;

        if (farm_check_who(k->name, name, err) < 0) {
                log_error("Invalid %s", err);
                return EXIT_USAGE;
        }
        if (cli_open_db(o->db_path, &db) < 0)
                return EXIT_FAILURE;
        if (revoke)
                r = k->revoke(db, name, now_ns(CLOCK_REALTIME), err);
        else if ((r = farm_token_new(token, hash)) < 0)
                snprintf(err, sizeof(err), "cannot read random bytes for the token");
        else
                r = k->add(db, name, hash, now_ns(CLOCK_REALTIME), err);
        farm_db_close(db);
        if (r < 0) {
                log_error_errno(r, "Cannot %s the %s token of %s: %s", revoke ? "revoke" : "create",
                                k->what, name, err);
                return EXIT_FAILURE;
        }
        if (revoke) {
                log_info("Revoked the %s token of %s", k->what, name);
                return EXIT_SUCCESS;
        }
        char where[CLI_TOKEN_WHERE_MAX];
        if ((r = cli_token_print(token, where)) < 0)
                return log_error_errno(r, "Cannot print the token: %m"), EXIT_FAILURE;
        log_info("%s token of %s created; %s is shown only this once", k->title, name, where);
        return EXIT_SUCCESS;
}

int cli_admin_token(const struct server_options *o, char **args, int n) {
        (void) n;
        return token_cmd(o, &staff, args[0], false);
}

int cli_admin_revoke(const struct server_options *o, char **args, int n) {
        (void) n;
        return token_cmd(o, &staff, args[0], true);
}

int cli_read_token(const struct server_options *o, char **args, int n) {
        (void) n;
        return token_cmd(o, &reader, args[0], false);
}

int cli_read_revoke(const struct server_options *o, char **args, int n) {
        (void) n;
        return token_cmd(o, &reader, args[0], true);
}
