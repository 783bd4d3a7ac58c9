/* SPDX-License-Identifier: MIT */
/* A notification in words: its title and text for every kind, made from the row the farm
 * database keeps, with the dashboard link that shows what it is about. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "channel.h"
#include "timeutil.h"

#define ITEMS_SHOWN 20

const char *notify_span(char buf[static 32], int64_t ns) {
        static const struct {
                const char *unit;
                int64_t ns;
        } units[] = {
                { "d", 86400 * (int64_t) NSEC_PER_SEC }, { "h", 3600 * (int64_t) NSEC_PER_SEC },
                { "min", 60 * (int64_t) NSEC_PER_SEC },  { "s", (int64_t) NSEC_PER_SEC },
                { "ms", (int64_t) NSEC_PER_MSEC },       { "us", (int64_t) NSEC_PER_USEC }
        };
        if (ns <= 0)
                return snprintf(buf, 32, "0s"), buf;
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (ns < units[i].ns)
                        continue;
                int64_t a = ns / units[i].ns, rest = ns % units[i].ns;
                if (i + 1 < ELEMENTSOF(units) && rest / units[i + 1].ns > 0 && i < 3)
                        snprintf(buf, 32, "%" PRId64 "%s %" PRId64 "%s", a, units[i].unit,
                                 rest / units[i + 1].ns, units[i + 1].unit);
                else
                        snprintf(buf, 32, "%" PRId64 "%s", a, units[i].unit);
                return buf;
        }
        snprintf(buf, 32, "%" PRId64 "ns", ns);
        return buf;
}

void notify_text_done(struct notify_text *t) {
        free(t->title);
        free(t->text);
        free(t->url);
        *t = (struct notify_text){};
}

static const char *s_of(const json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

static int64_t i_of(const json_t *o, const char *key) {
        return json_integer_value(json_object_get(o, key));
}

static const char *ts(char buf[static TIMESTAMP_MAX_LEN], int64_t ns) {
        return format_timestamp_utc(buf, ns);
}

/* "lab7", or the machine id when it has not told its name. */
static const char *host_of(const json_t *row) {
        const char *h = s_of(row, "hostname");
        return h && *h ? h : s_of(row, "machine") ?: "?";
}

static void groups_text(const json_t *row, FILE *f) {
        json_t *g;
        size_t i;
        json_array_foreach (json_object_get(row, "groups"), i, g)
                fprintf(f, "%s%s", i ? ", " : "", json_string_value(g));
}

static void silence(const json_t *row, const json_t *d, FILE *title, FILE *text) {
        char a[TIMESTAMP_MAX_LEN], b[TIMESTAMP_MAX_LEN], s1[32], s2[32];
        const char *host = host_of(row);
        int64_t since = i_of(d, "since_ns"), until = i_of(d, "until_ns");
        if (strcmp(s_of(row, "status") ?: "", "resolved") == 0) {
                bool ungated = strcmp(s_of(d, "why") ?: "", "ungated") == 0;
                fprintf(title, "%s %s after %s of silence", host,
                        ungated ? "no longer gates" : "reported again",
                        notify_span(s1, until - since));
                fprintf(text, "%s (machine %s) %s at %s; it had been silent since %s (%s).\n", host,
                        s_of(row, "machine"),
                        ungated ? "no longer gates releases (un-gated or revoked)"
                                : "reported again",
                        ts(a, until), ts(b, since), notify_span(s2, until - since));
                return;
        }
        int64_t silent = i_of(d, "detected_ns") - since;
        fprintf(title, "%s silent for %s", host, notify_span(s1, silent));
        fprintf(text,
                "%s (machine %s), a gating machine, has sent nothing since %s: %s by %s, longer "
                "than the allowed gap of %s.\n",
                host, s_of(row, "machine"), ts(a, since), notify_span(s1, silent),
                ts(b, i_of(d, "detected_ns")), notify_span(s2, i_of(d, "max_gap_ns")));
        if (json_is_true(json_object_get(d, "never_reported")))
                fprintf(text, "It has not reported at all since it was enrolled.\n");
        else if (i_of(d, "last_report_ns") != since)
                fprintf(text, "Its last report: %s; a maintenance window ended at %s.\n",
                        ts(a, i_of(d, "last_report_ns")), ts(b, since));
        fprintf(text, "Silence over the allowed gap fails the releases its groups judge.\n");
}

static const char *problem_noun(const char *kind, bool many) {
        static const char *const nouns[][3] = {
                { "violation", "latency violation", "latency violations" },
                { "unclean_end", "unclean end", "unclean ends" },
                { "load_down", "load generator failure", "load generator failures" },
                { "probe_down", "probe failure", "probe failures" },
                { "clock", "clock ahead of the server", "clocks ahead of the server" },
                { "overlap", "overlapping run", "overlapping runs" },
        };
        for (size_t i = 0; i < ELEMENTSOF(nouns); i++)
                if (strcmp(kind, nouns[i][0]) == 0)
                        return nouns[i][many ? 2 : 1];
        return many ? "problems" : "problem";
}

static void problems(const json_t *row, const json_t *d, FILE *title, FILE *text) {
        char a[TIMESTAMP_MAX_LEN], b[TIMESTAMP_MAX_LEN];
        int64_t count = i_of(row, "count");
        const char *noun = problem_noun(s_of(row, "kind") ?: "", count != 1);
        fprintf(title, "%s: %" PRId64 " %s on %s", host_of(row), count, noun, s_of(row, "release"));
        fprintf(text, "%" PRId64 " new %s of %s (machine %s) on %s (series %s, gating group ",
                count, noun, host_of(row), s_of(row, "machine"), s_of(row, "release"),
                s_of(row, "series"));
        groups_text(row, text);
        fprintf(text, "), from %s to %s:\n", ts(a, i_of(row, "time_ns")),
                ts(b, i_of(row, "last_ns")));
        json_t *it;
        size_t i;
        json_array_foreach (json_object_get(d, "items"), i, it) {
                fprintf(text, "  - %s\n", s_of(it, "message"));
                if (s_of(it, "culprit"))
                        fprintf(text, "    culprit: %s\n", s_of(it, "culprit"));
        }
        size_t shown = json_array_size(json_object_get(d, "items"));
        if ((uint64_t) count > shown)
                fprintf(text, "  ... and %" PRId64 " more\n", count - (int64_t) shown);
        fprintf(text, "Each is a problem of the release's verdict until it is waived.\n");
}

static void verdict(const json_t *row, const json_t *d, FILE *title, FILE *text) {
        const char *from = s_of(d, "from"), *to = s_of(d, "to");
        fprintf(title, "%s: %s -> %s", s_of(row, "release"), from ?: "new", to);
        fprintf(text, "The verdict of %s (series %s, gating group ", s_of(row, "release"),
                s_of(row, "series"));
        groups_text(row, text);
        fprintf(text, ") is now %s%s%s.\n", to, from ? ", was " : "", from ?: "");
        json_t *r;
        size_t i;
        json_array_foreach (json_object_get(d, "reasons"), i, r)
                fprintf(text, "  %s\n", json_string_value(r));
        if (i_of(d, "reasons_total") > (json_int_t) json_array_size(json_object_get(d, "reasons")))
                fprintf(text, "  ... (%" PRId64 " lines in all)\n", i_of(d, "reasons_total"));
}

static void waiver(const json_t *row, const json_t *d, FILE *title, FILE *text) {
        bool granted = strcmp(s_of(row, "status") ?: "", "granted") == 0;
        fprintf(title, "%s: waiver %" PRId64 " %s by %s", s_of(row, "release"), i_of(d, "waiver"),
                granted ? "granted" : "withdrawn", s_of(d, "by"));
        fprintf(text, "%s %s waiver %" PRId64 " of problem %s of %s: %s\n", s_of(d, "by"),
                granted ? "granted" : "withdrew", i_of(d, "waiver"), s_of(d, "problem"),
                s_of(row, "release"), s_of(d, "reason"));
        if (s_of(d, "verdict"))
                fprintf(text, "The verdict of %s is now %s.\n", s_of(row, "release"),
                        s_of(d, "verdict"));
}

static void stable(const json_t *row, const json_t *d, FILE *title, FILE *text) {
        const char *from = s_of(d, "from"), *to = s_of(d, "to"), *series = s_of(row, "series");
        if (to)
                fprintf(title, "Latest stable of %s: %s (was %s)", series, to, from ?: "none");
        else
                fprintf(title, "%s has no latest stable any more (was %s)", series, from);
        if (to)
                fprintf(text, "%s is now the latest stable release of series %s%s%s.\n", to, series,
                        from ? "; before it, " : "", from ?: "");
        else
                fprintf(text, "No release of series %s qualifies any more; %s did before.\n",
                        series, from);
}

static int render_into(const json_t *row, FILE *title, FILE *text) {
        const char *kind = s_of(row, "kind") ?: "";
        const json_t *d = json_object_get(row, "detail");
        if (strcmp(kind, "silence") == 0)
                silence(row, d, title, text);
        else if (strcmp(kind, "verdict") == 0)
                verdict(row, d, title, text);
        else if (strcmp(kind, "waiver") == 0)
                waiver(row, d, title, text);
        else if (strcmp(kind, "latest_stable") == 0)
                stable(row, d, title, text);
        else if (strcmp(kind, "test") == 0) {
                fprintf(title, "Test notification from rtsoak-server");
                fprintf(text, "A test of channel %s, asked for by %s.\n", s_of(d, "channel"),
                        s_of(d, "by"));
        } else
                problems(row, d, title, text);
        return 0;
}

int notify_render(const json_t *row, const char *base_url, struct notify_text *ret) {
        size_t tl = 0, xl = 0;
        *ret = (struct notify_text){};
        FILE *title = open_memstream(&ret->title, &tl), *text = open_memstream(&ret->text, &xl);
        if (title && text) {
                render_into(row, title, text);
                fprintf(text, "\nDashboard: %s%s\n", base_url, s_of(row, "path") ?: "/");
        }
        /* Both streams closed, whichever failed. */
        int title_rc = title ? fclose(title) : EOF, text_rc = text ? fclose(text) : EOF;
        int r = title_rc == 0 && text_rc == 0 ? 0 : -ENOMEM;
        if (r >= 0 && asprintf(&ret->url, "%s%s", base_url, s_of(row, "path") ?: "/") < 0) {
                ret->url = NULL;
                r = -ENOMEM;
        }
        if (r < 0)
                notify_text_done(ret);
        return r;
}
