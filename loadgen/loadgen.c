/* SPDX-License-Identifier: MIT */
/* The registry of load generators and their options, parsed with bounds from a command line
 * or a scenario's line (what a generator calls while it runs is in loadgen-run.c). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loadgen.h"
#include "macro.h"
#include "timeutil.h"

#define LOADGEN_ENTRY(n) &loadgen_##n##_info,
const struct loadgen_info *const loadgen_registry[] = { LOADGENS(LOADGEN_ENTRY) };
#undef LOADGEN_ENTRY
const size_t loadgen_registry_size = ELEMENTSOF(loadgen_registry);

const struct loadgen_info *loadgen_find(const char *name) {
        for (size_t i = 0; i < loadgen_registry_size; i++)
                if (strcmp(loadgen_registry[i]->name, name) == 0)
                        return loadgen_registry[i];
        return NULL;
}

/* ---- option values ---- */

static const char *skip_space(const char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

/* A non-negative decimal number with an optional fraction; *end points after it. */
static int parse_decimal(const char *s, double *ret, const char **end) {
        char *e;
        if (!(*s >= '0' && *s <= '9') && *s != '.')
                return -EINVAL;
        errno = 0;
        double v = strtod(s, &e);
        if (errno != 0 || e == s || !isfinite(v) || v < 0)
                return -EINVAL;
        *ret = v;
        *end = e;
        return 0;
}

static bool suffix_is(const char *s, const char *const *list) {
        for (; *list; list++)
                if (strcasecmp(s, *list) == 0)
                        return true;
        return false;
}

/* A number and its unit: the unit copied into suf (at most 15 characters), without a
 * trailing "/s" when per_second is set. */
static int split_number(const char *value, bool per_second, double *ret, char suf[static 16],
                        size_t *ret_len, const char **reason) {
        const char *end;
        if (parse_decimal(value, ret, &end) < 0) {
                *reason = "not a number";
                return -EINVAL;
        }
        size_t n = strlen(end);
        if (n >= 16) {
                *reason = "unknown unit";
                return -EINVAL;
        }
        memcpy(suf, end, n + 1);
        if (per_second && n >= 2 && strcmp(suf + n - 2, "/s") == 0)
                suf[n -= 2] = 0;
        *ret_len = n;
        return 0;
}

/* Sizes and byte rates: K, M, G, T are powers of 1024 ("KiB" and "KB" alike; a load
 * generator's "1M" is a mebibyte, as in dd and stress-ng). */
static int parse_bytes(const char *value, bool rate, uint64_t *ret, const char **reason) {
        double v, mult = 1;
        char suf[16];
        size_t n;
        int r = split_number(value, rate, &v, suf, &n, reason);
        if (r < 0)
                return r;
        static const char *const b[] = { "", "b", NULL }, *const k[] = { "k", "kb", "kib", NULL },
                                 *const m[] = { "m", "mb", "mib", NULL },
                                 *const g[] = { "g", "gb", "gib", NULL },
                                 *const t[] = { "t", "tb", "tib", NULL };
        if (suffix_is(suf, b))
                mult = 1;
        else if (suffix_is(suf, k))
                mult = 1024.0;
        else if (suffix_is(suf, m))
                mult = 1024.0 * 1024;
        else if (suffix_is(suf, g))
                mult = 1024.0 * 1024 * 1024;
        else if (suffix_is(suf, t))
                mult = 1024.0 * 1024 * 1024 * 1024;
        else {
                *reason = rate ? "unknown unit (use K, M or G bytes per second, e.g. \"1M\")"
                               : "unknown unit (use K, M, G or T, e.g. \"64K\")";
                return -EINVAL;
        }
        double x = v * mult;
        if (x >= 1.8e19) {
                *reason = "too large";
                return -ERANGE;
        }
        if (x != floor(x)) {
                *reason = "not a whole number of bytes";
                return -EINVAL;
        }
        *ret = (uint64_t) x;
        return 0;
}

/* Bit rates: k, M, G are powers of 1000, as network people count. */
static int parse_bits(const char *value, uint64_t *ret, const char **reason) {
        double v, mult = 1;
        char suf[16];
        size_t n;
        int r = split_number(value, true, &v, suf, &n, reason);
        if (r < 0)
                return r;
        if (n >= 3 && strcasecmp(suf + n - 3, "bit") == 0)
                suf[n -= 3] = 0;
        else if (n >= 3 && strcasecmp(suf + n - 3, "bps") == 0)
                suf[n -= 3] = 0;
        if (n == 0)
                mult = 1;
        else if (n == 1 && (suf[0] == 'k' || suf[0] == 'K'))
                mult = 1e3;
        else if (n == 1 && suf[0] == 'M')
                mult = 1e6;
        else if (n == 1 && suf[0] == 'G')
                mult = 1e9;
        else {
                *reason = "unknown unit (use kbit, Mbit or Gbit per second, e.g. \"1Mbit\")";
                return -EINVAL;
        }
        double x = v * mult;
        if (x >= 1.8e19) {
                *reason = "too large";
                return -ERANGE;
        }
        *ret = (uint64_t) llround(x);
        return 0;
}

static int parse_percent(const char *value, uint64_t *ret, const char **reason) {
        const char *end;
        double v;
        if (parse_decimal(value, &v, &end) < 0 || (strcmp(end, "") != 0 && strcmp(end, "%") != 0)) {
                *reason = "not a percentage (e.g. \"40%\")";
                return -EINVAL;
        }
        if (v > 100.0) {
                *reason = "more than 100%";
                return -ERANGE;
        }
        *ret = (uint64_t) llround(v * 100.0);
        return 0;
}

static int parse_uint_value(const char *value, uint64_t *ret, const char **reason) {
        char *end;
        if (!(*value >= '0' && *value <= '9')) {
                *reason = "not a whole number";
                return -EINVAL;
        }
        errno = 0;
        unsigned long long v = strtoull(value, &end, 10);
        if (errno == ERANGE) {
                *reason = "too large";
                return -ERANGE;
        }
        if (*end) {
                *reason = "not a whole number";
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int parse_bool_value(const char *value, bool *ret) {
        static const char *const yes[] = { "1", "yes", "true", "on", NULL }, *const no[] = {
                "0", "no", "false", "off", NULL
        };
        if (suffix_is(value, yes))
                *ret = true;
        else if (suffix_is(value, no))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

/* v in the largest of the n units (each base times the one before) that keeps it whole. */
static void format_scaled(uint64_t v, uint64_t base, const char *const *units, size_t n, char *buf,
                          size_t len) {
        size_t u = 0;
        while (u + 1 < n && v != 0 && v % base == 0) {
                v /= base;
                u++;
        }
        snprintf(buf, len, "%" PRIu64 "%s", v, units[u]);
}

static void format_value(const struct loadgen_opt *o, uint64_t v, char *buf, size_t len) {
        if (v == 0 && (o->type == LOADGEN_OPT_BYTERATE || o->type == LOADGEN_OPT_BITRATE)) {
                snprintf(buf, len, "0"); /* flat out */
                return;
        }
        switch (o->type) {
        case LOADGEN_OPT_SIZE:
        case LOADGEN_OPT_BYTERATE: {
                static const char *const units[] = { "", "K", "M", "G", "T" };
                format_scaled(v, 1024, units, ELEMENTSOF(units), buf, len);
                break;
        }
        case LOADGEN_OPT_BITRATE: {
                static const char *const units[] = { "bit", "kbit", "Mbit", "Gbit" };
                format_scaled(v, 1000, units, ELEMENTSOF(units), buf, len);
                break;
        }
        case LOADGEN_OPT_PERCENT:
                if (v % 100 == 0)
                        snprintf(buf, len, "%" PRIu64 "%%", v / 100);
                else
                        snprintf(buf, len, "%" PRIu64 ".%02" PRIu64 "%%", v / 100, v % 100);
                break;
        case LOADGEN_OPT_TIMESPAN: {
                char span[TIMESPAN_MAX_LEN];
                snprintf(buf, len, "%s", format_timespan(span, v));
                break;
        }
        default:
                snprintf(buf, len, "%" PRIu64, v);
        }
}

static int set_option(const struct loadgen_info *info, const struct loadgen_opt *o,
                      const char *value, void *opts, char err[static LOADGEN_ERROR_MAX]) {
        void *field = (uint8_t *) opts + o->offset;
        const char *reason = NULL;
        uint64_t v = 0;
        int r;

        switch (o->type) {
        case LOADGEN_OPT_UINT:
                r = parse_uint_value(value, &v, &reason);
                break;
        case LOADGEN_OPT_SIZE:
                r = parse_bytes(value, false, &v, &reason);
                break;
        case LOADGEN_OPT_BYTERATE:
                r = parse_bytes(value, true, &v, &reason);
                break;
        case LOADGEN_OPT_BITRATE:
                r = parse_bits(value, &v, &reason);
                break;
        case LOADGEN_OPT_PERCENT:
                r = parse_percent(value, &v, &reason);
                break;
        case LOADGEN_OPT_TIMESPAN:
                r = parse_timespan(value, &v, &reason);
                break;
        case LOADGEN_OPT_BOOL:
                r = parse_bool_value(value, field);
                if (r < 0)
                        reason = "not a boolean (yes or no)";
                break;
        case LOADGEN_OPT_ENUM: {
                r = -EINVAL;
                for (unsigned i = 0; o->choices[i]; i++)
                        if (strcmp(o->choices[i], value) == 0) {
                                *(unsigned *) field = i;
                                r = 0;
                        }
                if (r < 0) {
                        char list[200] = "";
                        for (unsigned i = 0; o->choices[i]; i++)
                                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                                         i ? ", " : "", o->choices[i]);
                        snprintf(err, LOADGEN_ERROR_MAX, "%s: --%s=%s: must be one of %s",
                                 info->name, o->name, value, list);
                        return r;
                }
                break;
        }
        case LOADGEN_OPT_STRING: {
                if (strlen(value) > 4000) {
                        reason = "longer than 4000 characters";
                        r = -ERANGE;
                        break;
                }
                char *s = strdup(value);
                if (!s)
                        return -ENOMEM;
                free(*(char **) field);
                *(char **) field = s;
                r = 0;
                break;
        }
        default:
                r = -EINVAL;
                reason = "unknown option type";
        }
        if (r < 0) {
                snprintf(err, LOADGEN_ERROR_MAX, "%s: --%s=%s: %s", info->name, o->name, value,
                         reason ?: "invalid value");
                return r;
        }

        if (o->type <= LOADGEN_OPT_TIMESPAN) {
                if (v < o->min || (o->max != 0 && v > o->max)) {
                        char a[64], b[64];
                        format_value(o, o->min, a, sizeof(a));
                        format_value(o, o->max, b, sizeof(b));
                        if (o->max != 0)
                                snprintf(err, LOADGEN_ERROR_MAX,
                                         "%s: --%s=%s: out of range, must be between %s and %s",
                                         info->name, o->name, value, a, b);
                        else
                                snprintf(err, LOADGEN_ERROR_MAX,
                                         "%s: --%s=%s: out of range, must be at least %s",
                                         info->name, o->name, value, a);
                        return -ERANGE;
                }
                *(uint64_t *) field = v;
        }
        return 0;
}

static void format_option(const struct loadgen_opt *o, const void *opts, char *buf, size_t len) {
        const void *field = (const uint8_t *) opts + o->offset;
        switch (o->type) {
        case LOADGEN_OPT_BOOL:
                snprintf(buf, len, "%s", *(const bool *) field ? "yes" : "no");
                break;
        case LOADGEN_OPT_ENUM:
                snprintf(buf, len, "%s", o->choices[*(const unsigned *) field]);
                break;
        case LOADGEN_OPT_STRING:
                snprintf(buf, len, "%s", *(char *const *) field ?: "");
                break;
        default:
                format_value(o, *(const uint64_t *) field, buf, len);
        }
}

/* ---- specs ---- */

static void free_opts(const struct loadgen_info *info, void *opts) {
        if (!opts)
                return;
        for (size_t i = 0; i < info->nopts; i++)
                if (info->opts[i].type == LOADGEN_OPT_STRING)
                        free(*(char **) ((uint8_t *) opts + info->opts[i].offset));
        free(opts);
}

void loadgen_spec_done(struct loadgen_spec *s) {
        if (s->info)
                free_opts(s->info, s->opts);
        strv_freep(&s->args);
        free(s->text);
        *s = (struct loadgen_spec){};
}

static const struct loadgen_opt *find_opt(const struct loadgen_info *info, const char *name,
                                          size_t len) {
        for (size_t i = 0; i < info->nopts; i++)
                if (strlen(info->opts[i].name) == len &&
                    strncmp(info->opts[i].name, name, len) == 0)
                        return &info->opts[i];
        return NULL;
}

/* Quotes an argument for the canonical text if it needs quoting. */
static int append_word(FILE *f, const char *w) {
        bool plain = *w != 0;
        for (const char *p = w; *p; p++)
                if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
                      ('0' <= *p && *p <= '9') || strchr("-_./:=%,+@", *p)))
                        plain = false;
        if (plain)
                return fputs(w, f);
        fputc('\'', f);
        for (const char *p = w; *p; p++)
                if (*p == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*p, f);
        return fputc('\'', f);
}

static char *spec_text(const struct loadgen_spec *s) {
        char *buf = NULL, val[4200];
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        fputs(s->info->name, f);
        for (size_t i = 0; i < s->info->nopts; i++) {
                const struct loadgen_opt *o = &s->info->opts[i];
                format_option(o, s->opts, val, sizeof(val));
                fprintf(f, " --%s=", o->name);
                append_word(f, val);
        }
        if (s->args[0]) {
                fputs(" --", f);
                for (char **a = s->args; *a; a++) {
                        fputc(' ', f);
                        append_word(f, *a);
                }
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* The generator named, with its options' defaults. */
static int spec_begin(const char *name, struct loadgen_spec *s,
                      char err[static LOADGEN_ERROR_MAX]) {
        s->info = loadgen_find(name);
        if (!s->info) {
                char list[200] = "";
                for (size_t k = 0; k < loadgen_registry_size; k++)
                        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                                 k ? ", " : "", loadgen_registry[k]->name);
                snprintf(err, LOADGEN_ERROR_MAX, "unknown load generator '%s' (known: %s)", name,
                         list);
                return -EINVAL;
        }
        s->opts = calloc(1, s->info->opts_size);
        if (!s->opts)
                return -ENOMEM;
        for (size_t k = 0; k < s->info->nopts; k++) {
                const struct loadgen_opt *o = &s->info->opts[k];
                if (!o->def)
                        continue;
                int r = set_option(s->info, o, o->def, s->opts, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The option argv[*i] ("--name VALUE", "--name=VALUE", "--flag", "--no-flag"); *i moves past
 * its value. */
static int spec_option(struct loadgen_spec *s, int argc, char *const *argv, int *i,
                       char err[static LOADGEN_ERROR_MAX]) {
        const char *a = argv[*i];
        if (strncmp(a, "--", 2) != 0) {
                snprintf(err, LOADGEN_ERROR_MAX,
                         "%s: unexpected argument '%s' (options are given as --name VALUE%s)",
                         s->info->name, a,
                         s->info->args_help ? "; a command goes after \"--\"" : "");
                return -EINVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t) (eq - name) : strlen(name);
        const struct loadgen_opt *o = find_opt(s->info, name, nlen);
        const char *value = eq ? eq + 1 : NULL;
        if (!o && !eq && nlen > 3 && strncmp(name, "no-", 3) == 0) {
                o = find_opt(s->info, name + 3, nlen - 3);
                if (o && o->type == LOADGEN_OPT_BOOL)
                        value = "no";
                else
                        o = NULL;
        }
        if (!o) {
                char list[300] = "";
                for (size_t k = 0; k < s->info->nopts; k++)
                        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s--%s",
                                 k ? ", " : "", s->info->opts[k].name);
                snprintf(err, LOADGEN_ERROR_MAX, "%s: unknown option '--%.*s' (known: %s)",
                         s->info->name, (int) nlen, name, s->info->nopts ? list : "none");
                return -EINVAL;
        }
        if (!value) {
                if (o->type == LOADGEN_OPT_BOOL)
                        value = "yes";
                else if (*i + 1 < argc)
                        value = argv[++*i];
                else {
                        snprintf(err, LOADGEN_ERROR_MAX, "%s: --%s needs a value", s->info->name,
                                 o->name);
                        return -EINVAL;
                }
        }
        return set_option(s->info, o, value, s->opts, err);
}

/* The arguments from argv[i] on (after "--"): the command of a generator that takes one. */
static int spec_args(struct loadgen_spec *s, int argc, char *const *argv, int i,
                     char err[static LOADGEN_ERROR_MAX]) {
        if (i < argc && !s->info->args_help) {
                snprintf(err, LOADGEN_ERROR_MAX, "%s: takes no arguments after \"--\"",
                         s->info->name);
                return -EINVAL;
        }
        s->args = calloc((size_t) (argc - MIN(i, argc)) + 1, sizeof(char *));
        if (!s->args)
                return -ENOMEM;
        for (int k = 0; i + k < argc; k++) {
                s->args[k] = strdup(argv[i + k]);
                if (!s->args[k])
                        return -ENOMEM;
        }
        return 0;
}

int loadgen_parse_argv(int argc, char *const *argv, struct loadgen_spec *ret,
                       char err[static LOADGEN_ERROR_MAX]) {
        struct loadgen_spec s = {};
        int r, i;

        if (argc < 1 || !argv[0]) {
                snprintf(err, LOADGEN_ERROR_MAX, "no load generator named");
                return -EINVAL;
        }
        r = spec_begin(argv[0], &s, err);
        if (r < 0 && !s.opts)
                return r; /* no such generator, or no memory for its options */
        for (i = 1; r >= 0 && i < argc; i++) {
                if (strcmp(argv[i], "--") == 0) {
                        i++;
                        break;
                }
                r = spec_option(&s, argc, argv, &i, err);
        }
        if (r >= 0)
                r = spec_args(&s, argc, argv, i, err);
        if (r >= 0)
                r = s.info->check(s.opts, s.args, err);
        if (r >= 0 && !(s.text = spec_text(&s)))
                r = -ENOMEM;
        if (r < 0) {
                if (r == -ENOMEM)
                        snprintf(err, LOADGEN_ERROR_MAX, "out of memory");
                loadgen_spec_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

int loadgen_split(const char *line, char ***ret, char err[static LOADGEN_ERROR_MAX]) {
        size_t n = 0, cap = 8, len = strlen(line);
        _cleanup_free_ char *word = malloc(len + 1);
        char **v = calloc(cap, sizeof(char *));
        const char *p = line;
        int r = -ENOMEM;

        if (!word || !v)
                goto fail;
        for (;;) {
                p = skip_space(p);
                if (!*p)
                        break;
                size_t w = 0;
                char quote = 0;
                for (; *p; p++) {
                        if (quote) {
                                if (*p == quote)
                                        quote = 0;
                                else if (*p == '\\' && quote == '"' && p[1])
                                        word[w++] = *++p;
                                else
                                        word[w++] = *p;
                        } else if (*p == '\'' || *p == '"')
                                quote = *p;
                        else if (*p == '\\' && p[1])
                                word[w++] = *++p;
                        else if (*p == ' ' || *p == '\t')
                                break;
                        else
                                word[w++] = *p;
                }
                if (quote) {
                        snprintf(err, LOADGEN_ERROR_MAX, "unterminated %c quote in '%s'", quote,
                                 line);
                        r = -EINVAL;
                        goto fail;
                }
                word[w] = 0;
                if (n + 2 > cap) {
                        char **nv = realloc(v, (cap *= 2) * sizeof(char *));
                        if (!nv)
                                goto fail;
                        v = nv;
                }
                v[n] = strdup(word);
                if (!v[n])
                        goto fail;
                v[++n] = NULL;
        }
        *ret = v;
        return 0;
fail:
        if (r == -ENOMEM)
                snprintf(err, LOADGEN_ERROR_MAX, "out of memory");
        strv_freep(&v);
        return r;
}

int loadgen_parse_line(const char *line, struct loadgen_spec *ret,
                       char err[static LOADGEN_ERROR_MAX]) {
        _cleanup_strv_free_ char **v = NULL;
        int r = loadgen_split(line, &v, err);
        if (r < 0)
                return r;
        int n = 0;
        while (v[n])
                n++;
        if (n == 0) {
                snprintf(err, LOADGEN_ERROR_MAX, "empty load generator line");
                return -EINVAL;
        }
        return loadgen_parse_argv(n, v, ret, err);
}

void loadgen_print_help(const struct loadgen_info *info, FILE *f) {
        char def[128], a[64], b[64];
        fprintf(f, "%s: %s\n\nOptions:\n", info->name, info->summary);
        for (size_t i = 0; i < info->nopts; i++) {
                const struct loadgen_opt *o = &info->opts[i];
                char range[200] = "";
                if (o->type <= LOADGEN_OPT_TIMESPAN) {
                        format_value(o, o->min, a, sizeof(a));
                        format_value(o, o->max, b, sizeof(b));
                        if (o->max)
                                snprintf(range, sizeof(range), "; %s..%s", a, b);
                        else
                                snprintf(range, sizeof(range), "; at least %s", a);
                } else if (o->type == LOADGEN_OPT_ENUM) {
                        snprintf(range, sizeof(range), "; one of");
                        for (unsigned k = 0; o->choices[k]; k++)
                                snprintf(range + strlen(range), sizeof(range) - strlen(range),
                                         " %s", o->choices[k]);
                }
                snprintf(def, sizeof(def), "%s", o->def ?: "");
                fprintf(f, "  --%-16s %s (default %s%s)\n", o->name, o->help, *def ? def : "none",
                        range);
        }
        if (info->args_help)
                fprintf(f, "  -- %s\n", info->args_help);
        fprintf(f, "\nReports:\n");
        for (size_t i = 0; i < info->nmetrics; i++)
                fprintf(f, "  %-12s in %s\n", info->metrics[i].name, info->metrics[i].unit);
}

char *loadgen_format_rate(char *buf, size_t len, double value, const char *unit) {
        if (value >= 100)
                snprintf(buf, len, "%.0f %s", value, unit);
        else if (value >= 10)
                snprintf(buf, len, "%.1f %s", value, unit);
        else
                snprintf(buf, len, "%.2f %s", value, unit);
        return buf;
}
