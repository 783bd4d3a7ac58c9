/* SPDX-License-Identifier: MIT */
/* Reloading the configuration: the new files are read and checked like at start; keys that
 * only take effect at start are pinned to their running values so that the checks across keys
 * (a rotation against the interval length) see what will really run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "reload.h"

bool reload_needs_restart(const char *section, const char *key) {
        if (strcmp(section, "Probe") == 0)
                return strcmp(key, "Threshold") != 0;
        /* The release is a run's own: the next run has the new one. */
        if (strcmp(section, "Upload") == 0)
                return strcmp(key, "Release") == 0;
        return strcmp(section, "Storage") == 0 || strcmp(section, "Load") == 0 ||
               strcmp(section, "Trace") == 0;
}

void reload_result_done(struct reload_result *r) {
        daemon_config_free(&r->cfg);
        free(r->changed);
        free(r->kept);
        r->changed = r->kept = NULL;
}

static char *scenarios_text(const struct daemon_config *c) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        if (daemon_config_table.dynamic_print)
                daemon_config_table.dynamic_print(c, f);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static void format_item(const struct conf_item *it, const struct daemon_config *c, char *buf,
                        size_t len) {
        it->type->format(it, (const char *) c + it->offset, buf, len);
}

int reload_config(const struct daemon_config *cur, const char *path, bool explicit_path,
                  char *const *sets, struct reload_result *ret, char err[static CONF_ERROR_MAX]) {
        const struct conf_table *t = &daemon_config_table;
        char **pins = NULL, *kept = NULL, *changed = NULL, *sa = NULL, *sb = NULL;
        size_t nsets = 0, npins = 0, kept_len = 0, changed_len = 0;
        FILE *kf = NULL, *cf = NULL;
        char a[4096], b[4096];
        int r;

        *ret = (struct reload_result){};
        r = daemon_config_load(&ret->cfg, path, explicit_path, sets, NULL, err);
        if (r < 0)
                goto out;

        while (sets && sets[nsets])
                nsets++;
        pins = calloc(nsets + t->n + 1, sizeof(char *));
        kf = open_memstream(&kept, &kept_len);
        cf = open_memstream(&changed, &changed_len);
        if (!pins || !kf || !cf) {
                r = -ENOMEM;
                goto oom;
        }
        for (size_t i = 0; i < nsets; i++)
                pins[i] = sets[i];
        for (size_t i = 0; i < t->n; i++) {
                const struct conf_item *it = &t->items[i];
                format_item(it, cur, a, sizeof(a));
                format_item(it, &ret->cfg, b, sizeof(b));
                if (strcmp(a, b) == 0)
                        continue;
                if (!reload_needs_restart(it->section, it->key)) {
                        fprintf(cf, "%s%s.%s", ftell(cf) ? ", " : "", it->section, it->key);
                        continue;
                }
                fprintf(kf, "%s%s.%s=%s (running: %s)", ftell(kf) ? ", " : "", it->section, it->key,
                        b, a);
                if (asprintf(&pins[nsets + npins], "%s.%s=%s", it->section, it->key, a) < 0) {
                        pins[nsets + npins] = NULL;
                        r = -ENOMEM;
                        goto oom;
                }
                npins++;
        }
        sa = scenarios_text(cur);
        sb = scenarios_text(&ret->cfg);
        if (!sa || !sb) {
                r = -ENOMEM;
                goto oom;
        }
        if (strcmp(sa, sb) != 0)
                fprintf(cf, "%sScenario definitions", ftell(cf) ? ", " : "");

        if (npins > 0) {
                /* Again, with the running values of the keys that need a restart. */
                daemon_config_free(&ret->cfg);
                r = daemon_config_load(&ret->cfg, path, explicit_path, pins, NULL, err);
                if (r < 0) {
                        char inner[CONF_ERROR_MAX];
                        memcpy(inner, err, CONF_ERROR_MAX);
                        snprintf(err, CONF_ERROR_MAX,
                                 "%s (with the running values of keys that need a restart)", inner);
                        goto out;
                }
        }
        r = 0;
oom:
        if (r == -ENOMEM)
                snprintf(err, CONF_ERROR_MAX, "out of memory");
out:
        if (kf && fclose(kf) != 0 && r >= 0) {
                snprintf(err, CONF_ERROR_MAX, "out of memory");
                r = -ENOMEM;
        }
        if (cf && fclose(cf) != 0 && r >= 0) {
                snprintf(err, CONF_ERROR_MAX, "out of memory");
                r = -ENOMEM;
        }
        if (pins)
                for (size_t i = nsets; i < nsets + npins; i++)
                        free(pins[i]);
        free(pins);
        free(sa);
        free(sb);
        if (r < 0) {
                free(kept);
                free(changed);
                daemon_config_free(&ret->cfg);
                return r;
        }
        ret->kept = kept;
        ret->changed = changed;
        return 0;
}
