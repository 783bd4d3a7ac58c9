/* SPDX-License-Identifier: MIT */
/* Printing a new token once, and naming where it went: "the token above" is wrong when the
 * administrator wrote it to a file, as the README's enrolment does. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server-cli-token.h"

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
