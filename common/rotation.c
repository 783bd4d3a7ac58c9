/* SPDX-License-Identifier: MIT */
/* The rotation's parser, and which of its steps runs at a given time. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "rotation.h"
#include "timeutil.h"

/* Splits "NAME SPAN" in place: *ret_span after the first run of spaces.  Leading spaces are
 * skipped; the name ends at the first space. */
static char *split_item(char *tok, char **ret_span) {
        while (isspace((unsigned char) *tok))
                tok++;
        char *sp = tok;
        while (*sp && !isspace((unsigned char) *sp))
                sp++;
        char *span = sp;
        if (*sp)
                *sp++ = 0, span = sp;
        while (isspace((unsigned char) *span))
                span++;
        *ret_span = span;
        return tok;
}

/* One "NAME SPAN" item into *ret: 0, or -EINVAL / -E2BIG after telling p->problem. */
static int parse_item(char *tok, const struct rotation_params *p, size_t nsteps,
                      struct schedule_step *ret) {
        char *span;
        const char *reason = NULL;
        uint64_t d;

        tok = split_item(tok, &span);
        if (!*tok || !*span)
                return p->problem(p->userdata, ROTATION_SYNTAX, tok, span, NULL), -EINVAL;
        const struct scenario *sc = p->lookup(p->userdata, tok);
        if (!sc)
                return p->problem(p->userdata, ROTATION_UNKNOWN, tok, span, NULL), -EINVAL;
        if (parse_timespan(span, &d, &reason) < 0 || d == 0)
                return p->problem(p->userdata, ROTATION_BAD_SPAN, tok, span, reason), -EINVAL;
        if (d % p->interval_ns != 0) {
                if (!p->round_up)
                        return p->problem(p->userdata, ROTATION_NOT_WHOLE, tok, span, NULL),
                               -EINVAL;
                d += p->interval_ns - d % p->interval_ns;
        }
        if (nsteps >= ROTATION_STEPS_MAX)
                return p->problem(p->userdata, ROTATION_TOO_MANY, tok, span, NULL), -E2BIG;
        if (p->max_step_ns > 0 && d > p->max_step_ns)
                return p->problem(p->userdata, ROTATION_TOO_LONG, tok, span, NULL), -EINVAL;
        *ret = (struct schedule_step){ sc, d };
        return 0;
}

int rotation_parse(const char *text, const struct rotation_params *p,
                   struct schedule_step **ret_steps, size_t *ret_n, uint64_t *ret_cycle_ns) {
        _cleanup_free_ char *copy = strdup(text);
        struct schedule_step *steps = NULL;
        size_t n = 0;
        uint64_t cycle = 0;
        char *save = NULL;
        int r = 0;

        if (!copy)
                return -ENOMEM;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                struct schedule_step st;
                r = parse_item(tok, p, n, &st);
                if (r < 0)
                        break;
                struct schedule_step *a = realloc(steps, (n + 1) * sizeof(*a));
                if (!a) {
                        r = -ENOMEM;
                        break;
                }
                steps = a;
                steps[n++] = st;
                cycle += st.duration_ns;
        }
        if (r >= 0 && n == 0) {
                p->problem(p->userdata, ROTATION_EMPTY, "", "", NULL);
                r = -EINVAL;
        }
        if (r < 0) {
                free(steps);
                return r;
        }
        *ret_steps = steps;
        *ret_n = n;
        *ret_cycle_ns = cycle;
        return 0;
}

const struct schedule_step *rotation_at(const struct schedule_step *steps, size_t n,
                                        uint64_t cycle_ns, int64_t t, int64_t *ret_start_ns,
                                        int64_t *ret_end_ns) {
        int64_t cycle = (int64_t) cycle_ns;
        int64_t pos = t % cycle;
        if (pos < 0)
                pos += cycle;
        int64_t base = t - pos;
        for (size_t i = 0; i < n; i++) {
                int64_t d = (int64_t) steps[i].duration_ns;
                if (pos < d) {
                        if (ret_start_ns)
                                *ret_start_ns = base;
                        if (ret_end_ns)
                                *ret_end_ns = base + d;
                        return &steps[i];
                }
                pos -= d;
                base += d;
        }
        return &steps[n - 1]; /* not reached */
}
