/* SPDX-License-Identifier: MIT */
/* Shared test support.  cmocka 1.1.5 (Debian 12) reports a skipped test as "not ok N # SKIP",
 * which TAP consumers, meson among them, count as a failure: the test program forks, the child
 * runs the tests, the parent rewrites that one line shape to "ok N # SKIP". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"

void tap_filter_begin(void) {
        int fds[2];
        if (pipe(fds) < 0)
                return; /* run unfiltered rather than not at all */
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                return;
        if (pid == 0) {
                dup2(fds[1], STDOUT_FILENO);
                close(fds[0]);
                close(fds[1]);
                return;
        }
        close(fds[1]);
        FILE *in = fdopen(fds[0], "r");
        char *line = NULL;
        size_t cap = 0;
        while (in && getline(&line, &cap, in) >= 0) {
                const char *skip = strstr(line, " # SKIP");
                if (strncmp(line, "not ok ", 7) == 0 && skip)
                        printf("ok %s", line + 7);
                else
                        fputs(line, stdout);
                fflush(stdout);
        }
        free(line);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                ;
        exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int tests_remove_dir(const char *dir) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}
