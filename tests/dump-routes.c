/* SPDX-License-Identifier: MIT */
/* Prints the server's route table (server/api/routes.c) as one JSON object a line: methods,
 * pattern, access class, format and parameters, for tests/test-routes.py. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "routes.h"

static const char *class_name(enum farm_route_class c) {
        static const char *const names[] = {
                [FARM_CLASS_API] = "api",         [FARM_CLASS_DASHBOARD] = "dashboard",
                [FARM_CLASS_METRICS] = "metrics", [FARM_CLASS_AUDIT] = "audit",
                [FARM_CLASS_UPLOAD] = "upload",   [FARM_CLASS_STAFF] = "staff",
        };
        return names[c];
}

int main(void) {
        for (unsigned i = 0; i < farm_routes_n; i++) {
                const struct farm_route *r = &farm_routes[i];
                char allow[64];
                json_t *params = json_array();
                for (const struct farm_route_param *p = r->params; p->name; p++)
                        json_array_append_new(
                                params,
                                json_pack("{s:s, s:s, s:I, s:I, s:b}", "name", p->name, "type",
                                          farm_param_type_name(p->type), "min", (json_int_t) p->min,
                                          "max", (json_int_t) p->max, "repeatable", p->repeatable));
                json_t *row =
                        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "methods", r->methods,
                                  "allow", farm_route_allow(r, allow, sizeof(allow)), "pattern",
                                  r->pattern, "access", class_name(r->access), "post_access",
                                  class_name(farm_route_access(r, "POST")), "format",
                                  r->format == FARM_ROUTE_HTML ? "html" : "json", "params", params);
                if (!row || json_dumpf(row, stdout, JSON_COMPACT) < 0)
                        return EXIT_FAILURE;
                putchar('\n');
                json_decref(row);
        }
        return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
