/* SPDX-License-Identifier: MIT */
/* Fuzz target for the checks of a request head's fields: a head is either refused with 400 or
 * 501 and an error that is UTF-8 without control characters (it goes into JSON and the log),
 * or its names are tokens, its values hold no control character, and its framing is one. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server-head.h"
#include "text-safe.h"

#define FIELDS_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_served(const struct farm_field *f, size_t n) {
        unsigned hosts = 0, lengths = 0, codings = 0;
        for (size_t i = 0; i < n; i++) {
                if (!f[i].name[0])
                        abort();
                for (const unsigned char *p = (const unsigned char *) f[i].name; *p; p++)
                        if (*p <= ' ' || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p))
                                abort();
                for (const unsigned char *p = (const unsigned char *) f[i].value; *p; p++)
                        if ((*p < ' ' && *p != '\t') || *p == 0x7f)
                                abort();
                hosts += strcasecmp(f[i].name, "Host") == 0;
                lengths += strcasecmp(f[i].name, "Content-Length") == 0;
                codings += strcasecmp(f[i].name, "Transfer-Encoding") == 0;
        }
        if (hosts > 1 || lengths > 1 || codings > 1 || (lengths && codings))
                abort();
}

/* The input: the version on the first line, then one field a line, "name:value" as
 * libmicrohttpd splits it (at the first colon, the value's leading blanks left out). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = strndup((const char *) data, size), *save = NULL;
        struct farm_field f[FIELDS_MAX];
        size_t n = 0;
        if (!text)
                abort();
        char *version = strtok_r(text, "\n", &save);
        for (char *line; n < FIELDS_MAX && (line = strtok_r(NULL, "\n", &save));) {
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon++ = '\0';
                f[n++] = (struct farm_field){ .name = line, .value = colon + strspn(colon, " \t") };
        }
        char err[FARM_HEAD_ERROR_MAX], why[TEXT_WHY_MAX];
        unsigned status = farm_head_check(version, f, n, err);
        if (status == 0)
                check_served(f, n);
        else if ((status != 400 && status != 501) || !err[0] || !text_ok(err, false, why))
                abort();
        free(text);
        return 0;
}
