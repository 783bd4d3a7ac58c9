/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace-symbols.h"

void trace_symbols_init(struct trace_symbols *s) {
        memset(s, 0, sizeof(*s));
        pthread_mutex_init(&s->lock, NULL);
}

void trace_symbols_done(struct trace_symbols *s) {
        pthread_mutex_destroy(&s->lock);
}

/* Looks up the addresses not known yet in one pass over /proc/kallsyms (under the lock). */
static void learn(struct trace_symbols *s, const uint64_t *want, size_t n) {
        size_t first = s->n;
        for (size_t i = 0; i < n && s->n < TRACE_SYMBOLS_MAX; i++)
                s->sym[s->n++] = (struct trace_symbol){ .addr = want[i] };
        if (first == s->n)
                return;
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[256];
        size_t left = s->n - first;
        /* "ffffffff8142d170 t hrtimer_wakeup": 120,000 lines here, so only the address is
         * read of each until one matches. */
        while (f && left > 0 && fgets(line, sizeof(line), f)) {
                char *end;
                uint64_t addr = strtoull(line, &end, 16);
                if (!addr || end[0] != ' ' || !end[1] || end[2] != ' ')
                        continue;
                for (size_t i = first; i < s->n; i++)
                        if (s->sym[i].addr == addr && !s->sym[i].name[0]) {
                                snprintf(s->sym[i].name, sizeof(s->sym[i].name), "%.*s",
                                         (int) strcspn(end + 3, " \t\n"), end + 3);
                                left--;
                        }
        }
        if (f)
                fclose(f);
}

static bool known(const struct trace_symbols *s, uint64_t addr) {
        for (size_t i = 0; i < s->n; i++)
                if (s->sym[i].addr == addr)
                        return true;
        return false;
}

void trace_symbols_name_hrtimers(struct trace_symbols *s, struct trace_analysis *a) {
        uint64_t want[TRACE_CONTRIB_MAX];
        size_t n = 0;
        pthread_mutex_lock(&s->lock);
        for (size_t k = 0; k < a->ncontribs; k++) {
                unsigned long long addr;
                if (sscanf(a->contribs[k].name, "hrtimer %llx", &addr) == 1 && !known(s, addr))
                        want[n++] = addr;
        }
        learn(s, want, n);
        for (size_t k = 0; k < a->ncontribs; k++) {
                unsigned long long addr;
                if (sscanf(a->contribs[k].name, "hrtimer %llx", &addr) != 1)
                        continue;
                for (size_t i = 0; i < s->n; i++)
                        if (s->sym[i].addr == addr && s->sym[i].name[0])
                                snprintf(a->contribs[k].name, sizeof(a->contribs[k].name),
                                         "hrtimer %s", s->sym[i].name);
        }
        pthread_mutex_unlock(&s->lock);
}
