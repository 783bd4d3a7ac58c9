/* SPDX-License-Identifier: MIT */
/* Which changes of a machine's inventory the rule counts (InventoryFields=, rule.h). */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "rule.h"

/* A pattern: 1-64 of the characters of a field name (letters, digits, . _ -) and * ? [ ] !. */
static bool pattern_ok(const char *p, size_t n) {
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-*?[]"
                            "!",
                            p[i]))
                        return false;
        return true;
}

int farm_rule_parse_inventory_fields(const char *text, struct farm_rule *rule, char *err,
                                     size_t errlen) {
        char out[FARM_INVENTORY_GLOBS_MAX] = "";
        size_t used = 0;
        const char *p = text;
        while (*p) {
                p += strspn(p, " \t");
                size_t n = strcspn(p, " \t");
                if (n == 0)
                        break;
                if (n == 4 && strncmp(p, "none", 4) == 0 && !*(p + n + strspn(p + n, " \t")) &&
                    used == 0) {
                        p += n;
                        continue;
                }
                if (!pattern_ok(p, n)) {
                        snprintf(err, errlen,
                                 "'%.*s' is not a pattern of field names (1-64 of letters, "
                                 "digits, . _ - * ? [ ] !)",
                                 (int) (n > 80 ? 80 : n), p);
                        return -EINVAL;
                }
                if (used + n + 1 >= sizeof(out)) {
                        snprintf(err, errlen, "longer than %zu characters", sizeof(out) - 1);
                        return -EINVAL;
                }
                if (used)
                        out[used++] = ' ';
                memcpy(out + used, p, n);
                used += n;
                out[used] = 0;
                p += n;
        }
        snprintf(rule->inventory_fields, sizeof(rule->inventory_fields), "%s", out);
        return 0;
}

bool farm_rule_inventory_counts(const struct farm_rule *rule, const char *field) {
        char globs[FARM_INVENTORY_GLOBS_MAX], *rest = globs;
        snprintf(globs, sizeof(globs), "%s", rule->inventory_fields);
        for (char *g; (g = strsep(&rest, " "));)
                if (*g && fnmatch(g, field, 0) == 0)
                        return true;
        return false;
}
