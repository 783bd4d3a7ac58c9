/* SPDX-License-Identifier: MIT */
/* Fuzz target for the load generator lines ("cpu --load 40%", a scenario's Load= and
 * rtsoak-load's command line): any line is refused with a message, or parsed into a spec
 * whose text parses again to the same spec. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char err[LOADGEN_ERROR_MAX] = "";
        struct loadgen_spec s, t;

        /* A line is text: up to the first NUL, as the configuration parser hands it over. */
        char *line = strndup((const char *) data, size);
        if (!line)
                abort();
        int r = loadgen_parse_line(line, &s, err);
        free(line);
        if (r < 0) {
                if (err[0] == '\0')
                        abort();
                return 0;
        }
        /* The spec's text (what --check-config prints) is a line that gives the same spec. */
        r = loadgen_parse_line(s.text, &t, err);
        if (r < 0) {
                fprintf(stderr, "'%s' refused: %s\n", s.text, err);
                abort();
        }
        if (strcmp(s.text, t.text) != 0) {
                fprintf(stderr, "'%s' became '%s'\n", s.text, t.text);
                abort();
        }
        loadgen_spec_done(&t);
        loadgen_spec_done(&s);
        return 0;
}
