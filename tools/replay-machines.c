/* SPDX-License-Identifier: MIT */
/* rtsoak-replay's machines: one from --machine with --token or --token-file, or many from
 * --tokens, each token checked. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "replay.h"

struct machine *replay_machines;
size_t replay_nmachines;

static int valid_token(const char *option, const char *where, const char *t) {
        size_t l = strlen(t);
        if (l == 0)
                return replay_usage_error(option, "%s: the token is empty", where);
        if (l > 512)
                return replay_usage_error(option, "%s: the token is longer than 512 bytes", where);
        for (const char *p = t; *p; p++)
                if ((unsigned char) *p <= ' ' || (unsigned char) *p >= 0x7f)
                        return replay_usage_error(option,
                                                  "%s: the token has a space or control "
                                                  "character",
                                                  where);
        return 0;
}

static void strip(char *s) {
        size_t l = strlen(s);
        while (l > 0 && isspace((unsigned char) s[l - 1]))
                s[--l] = 0;
}

/* --machine, with --token or the first line of --token-file. */
static int load_one(void) {
        char line[1024], where[600];
        replay_machines = calloc(1, sizeof(*replay_machines));
        if (!replay_machines)
                return log_oom();
        replay_nmachines = 1;
        snprintf(replay_machines[0].id, sizeof(replay_machines[0].id), "%s", replay_opt.machine);
        if (replay_opt.token) {
                replay_machines[0].token = strdup(replay_opt.token);
                snprintf(where, sizeof(where), "'%s'", "--token");
        } else {
                _cleanup_fclose_ FILE *f = fopen(replay_opt.token_file, "re");
                if (!f)
                        return replay_usage_error("--token-file", "cannot read '%s': %s",
                                                  replay_opt.token_file, strerror(errno));
                if (!fgets(line, sizeof(line), f))
                        line[0] = 0;
                strip(line);
                replay_machines[0].token = strdup(line);
                snprintf(where, sizeof(where), "%s, line 1", replay_opt.token_file);
                explicit_bzero(line, sizeof(line));
        }
        if (!replay_machines[0].token)
                return log_oom();
        return valid_token(replay_opt.token ? "--token" : "--token-file", where,
                           replay_machines[0].token);
}

/* One line of --tokens ("MACHINE_ID TOKEN", blank or a # comment), where names it. */
static int add_tokens_line(char *line, const char *where) {
        strip(line);
        char *p = line;
        while (isspace((unsigned char) *p))
                p++;
        if (!*p || *p == '#')
                return 0;
        char *id = p;
        while (*p && !isspace((unsigned char) *p))
                p++;
        if (!*p)
                return replay_usage_error("--tokens", "%s: expected \"MACHINE_ID TOKEN\"", where);
        *p++ = 0;
        while (isspace((unsigned char) *p))
                p++;
        if (!valid_id(id))
                return replay_usage_error("--tokens",
                                          "%s: '%s' is not a machine id (32 lowercase hex digits)",
                                          where, id);
        int r = valid_token("--tokens", where, p);
        if (r < 0)
                return r;
        for (size_t i = 0; i < replay_nmachines; i++)
                if (strcmp(replay_machines[i].id, id) == 0)
                        return replay_usage_error("--tokens", "%s: machine %s is listed twice",
                                                  where, id);
        struct machine *m = realloc(replay_machines, (replay_nmachines + 1) * sizeof(*m));
        if (!m)
                return log_oom();
        replay_machines = m;
        m = &replay_machines[replay_nmachines++];
        snprintf(m->id, sizeof(m->id), "%s", id);
        m->token = strdup(p);
        if (!m->token)
                return log_oom();
        return 0;
}

/* --tokens: a line per machine. */
static int load_tokens(void) {
        char line[1024], where[600];
        _cleanup_fclose_ FILE *f = fopen(replay_opt.tokens_file, "re");
        if (!f)
                return replay_usage_error("--tokens", "cannot read '%s': %s",
                                          replay_opt.tokens_file, strerror(errno));
        unsigned lineno = 0;
        int r = 0;
        while (r >= 0 && fgets(line, sizeof(line), f)) {
                lineno++;
                snprintf(where, sizeof(where), "%s, line %u", replay_opt.tokens_file, lineno);
                if (!strchr(line, '\n') && !feof(f))
                        r = replay_usage_error("--tokens", "%s: the line is too long", where);
                else
                        r = add_tokens_line(line, where);
        }
        explicit_bzero(line, sizeof(line));
        if (r < 0)
                return r;
        if (ferror(f))
                return replay_usage_error("--tokens", "cannot read '%s': %s",
                                          replay_opt.tokens_file, strerror(errno));
        if (replay_nmachines == 0)
                return replay_usage_error("--tokens", "'%s' lists no machine",
                                          replay_opt.tokens_file);
        return 0;
}

int replay_load_machines(void) {
        return replay_opt.tokens_file ? load_tokens() : load_one();
}
