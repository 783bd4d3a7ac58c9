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

enum reload_when reload_applies(const char *section, const char *key) {
        if (strcmp(section, "Probe") == 0)
                return strcmp(key, "Threshold") == 0 ? RELOAD_NEXT_INTERVAL : RELOAD_RESTART;
        /* The release is a run's own: the next run has the new one. */
        if (strcmp(section, "Upload") == 0)
                return strcmp(key, "Release") == 0 ? RELOAD_RESTART : RELOAD_AT_ONCE;
        if (strcmp(section, "Schedule") == 0)
                return RELOAD_NEXT_INTERVAL;
        /* The check's timer is set again at once. */
        if (strcmp(section, "Inventory") == 0)
                return RELOAD_AT_ONCE;
        /* [Storage], [Load], [Trace], and [Forensics], which is read at start (the flight
         * recorder is opened then, the previous run examined then); a section added later
         * needs a restart until rtsoakd applies it live. */
        return RELOAD_RESTART;
}

void reload_result_done(struct reload_result *r) {
        daemon_config_free(&r->cfg);
        free(r->changed);
        free(r->kept);
        free(r->applies);
        r->changed = r->kept = r->applies = NULL;
}

/* The keys that changed, each in the list of when it applies. */
struct changes {
        FILE *all, *by_when[RELOAD_RESTART];
        char *all_text, *by_when_text[RELOAD_RESTART];
        size_t all_len, by_when_len[RELOAD_RESTART];
};

static void changes_add(struct changes *ch, enum reload_when w, const char *what) {
        fprintf(ch->all, "%s%s", ftell(ch->all) ? ", " : "", what);
        fprintf(ch->by_when[w], "%s%s", ftell(ch->by_when[w]) ? ", " : "", what);
}

/* "at once: A, B; from the next interval boundary: C", or "". */
static char *applies_text(struct changes *ch) {
        static const char *const phrase[RELOAD_RESTART] = {
                [RELOAD_AT_ONCE] = "at once",
                [RELOAD_NEXT_INTERVAL] = "from the next interval boundary",
        };
        char *t = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&t, &len);
        if (!f)
                return NULL;
        for (int w = 0; w < RELOAD_RESTART; w++)
                if (*ch->by_when_text[w])
                        fprintf(f, "%s%s: %s", ftell(f) ? "; " : "", phrase[w],
                                ch->by_when_text[w]);
        if (fclose(f) != 0) {
                free(t);
                return NULL;
        }
        return t;
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

static int changes_open(struct changes *ch) {
        *ch = (struct changes){};
        ch->all = open_memstream(&ch->all_text, &ch->all_len);
        for (int w = 0; w < RELOAD_RESTART; w++)
                ch->by_when[w] = open_memstream(&ch->by_when_text[w], &ch->by_when_len[w]);
        bool ok = ch->all && ch->by_when[RELOAD_AT_ONCE] && ch->by_when[RELOAD_NEXT_INTERVAL];
        return ok ? 0 : -ENOMEM;
}

/* Closes the lists; with ret set, gives the list of all and the text of when they apply. */
static int changes_close(struct changes *ch, struct reload_result *ret) {
        int r = 0;
        if (ch->all && fclose(ch->all) != 0)
                r = -ENOMEM;
        for (int w = 0; w < RELOAD_RESTART; w++)
                if (ch->by_when[w] && fclose(ch->by_when[w]) != 0)
                        r = -ENOMEM;
        if (r >= 0 && ret) {
                ret->applies = applies_text(ch);
                ret->changed = ch->all_text;
                ch->all_text = NULL;
                if (!ret->applies)
                        r = -ENOMEM;
        }
        free(ch->all_text);
        for (int w = 0; w < RELOAD_RESTART; w++)
                free(ch->by_when_text[w]);
        *ch = (struct changes){};
        return r;
}

/* Each key that differs: listed by when it applies, or (one that needs a restart) in kf, with
 * its running value pinned as a "Section.Key=value" assignment appended to pins. */
static int compare_keys(const struct daemon_config *cur, const struct daemon_config *next,
                        struct changes *ch, FILE *kf, char **pins, size_t *npins) {
        const struct conf_table *t = &daemon_config_table;
        char a[4096], b[4096], what[128];
        for (size_t i = 0; i < t->n; i++) {
                const struct conf_item *it = &t->items[i];
                format_item(it, cur, a, sizeof(a));
                format_item(it, next, b, sizeof(b));
                if (strcmp(a, b) == 0)
                        continue;
                enum reload_when w = reload_applies(it->section, it->key);
                snprintf(what, sizeof(what), "%s.%s", it->section, it->key);
                if (w != RELOAD_RESTART) {
                        changes_add(ch, w, what);
                        continue;
                }
                fprintf(kf, "%s%s=%s (running: %s)", ftell(kf) ? ", " : "", what, b, a);
                if (asprintf(&pins[*npins], "%s=%s", what, a) < 0) {
                        pins[*npins] = NULL;
                        return -ENOMEM;
                }
                ++*npins;
        }
        _cleanup_free_ char *sa = scenarios_text(cur), *sb = scenarios_text(next);
        if (!sa || !sb)
                return -ENOMEM;
        if (strcmp(sa, sb) != 0)
                changes_add(ch, RELOAD_NEXT_INTERVAL, "Scenario definitions");
        return 0;
}

int reload_config(const struct daemon_config *cur, const char *path, bool explicit_path,
                  char *const *sets, struct reload_result *ret, char err[static CONF_ERROR_MAX]) {
        char **pins = NULL, *kept = NULL;
        size_t nsets = 0, npins = 0, kept_len = 0;
        struct changes ch = {};
        FILE *kf = NULL;
        int r;

        *ret = (struct reload_result){};
        r = daemon_config_load(&ret->cfg, path, explicit_path, sets, NULL, err);
        if (r < 0)
                goto out;

        while (sets && sets[nsets])
                nsets++;
        pins = calloc(nsets + daemon_config_table.n + 1, sizeof(char *));
        kf = open_memstream(&kept, &kept_len);
        if (!pins || !kf || changes_open(&ch) < 0) {
                r = -ENOMEM;
                goto oom;
        }
        for (size_t i = 0; i < nsets; i++)
                pins[i] = sets[i];
        r = compare_keys(cur, &ret->cfg, &ch, kf, pins + nsets, &npins);
        if (r < 0)
                goto oom;
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
        if (changes_close(&ch, r >= 0 ? ret : NULL) < 0 && r >= 0) {
                snprintf(err, CONF_ERROR_MAX, "out of memory");
                r = -ENOMEM;
        }
        if (pins)
                for (size_t i = nsets; i < nsets + npins; i++)
                        free(pins[i]);
        free(pins);
        if (r < 0) {
                free(kept);
                reload_result_done(ret);
                return r;
        }
        ret->kept = kept;
        return 0;
}
