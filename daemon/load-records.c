/* SPDX-License-Identifier: MIT */
/* The loads' records of the intervals not yet stored.  A record is done with only once its
 * interval was written: one whose interval was never stored (no CPU measured in it, or it was
 * dropped while storage failed) passes its generators' starts and exits on, so that a
 * restart is never lost with an interval. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "load-records.h"
#include "log.h"
#include "macro.h"

struct load_record *load_records_add(struct load_records *lr, uint64_t k) {
        if (lr->n >= LOAD_RECORDS_MAX) {
                memmove(lr->r, lr->r + 1, (lr->n - 1) * sizeof(*lr->r));
                lr->n--;
        }
        if (lr->n == lr->cap) {
                size_t cap = MIN(MAX(lr->cap * 2, (size_t) 4), (size_t) LOAD_RECORDS_MAX);
                struct load_record *a = realloc(lr->r, cap * sizeof(*a));
                if (!a)
                        return NULL;
                lr->r = a;
                lr->cap = cap;
        }
        lr->r[lr->n] = (struct load_record){ .k = k };
        return &lr->r[lr->n++];
}

const struct load_record *load_records_last(const struct load_records *lr) {
        return lr->n ? &lr->r[lr->n - 1] : NULL;
}

/* Lets go of the records of intervals before k, passing on what an unstored one counted. */
static void let_go_before(struct load_records *lr, uint64_t k) {
        size_t drop = 0;
        while (drop < lr->n && lr->r[drop].k < k) {
                if (!lr->r[drop].stored && drop + 1 < lr->n &&
                    !loadsup_record_carry(&lr->r[drop], &lr->r[drop + 1]))
                        log_notice("Interval %" PRIu64 " was not stored: its load starts and "
                                   "exits are only in the events (the scenario changed after it)",
                                   lr->r[drop].k);
                drop++;
        }
        if (drop > 0) {
                memmove(lr->r, lr->r + drop, (lr->n - drop) * sizeof(*lr->r));
                lr->n -= drop;
        }
}

void load_records_annotate(struct load_records *lr, uint64_t k, bool again,
                           struct store_interval *iv) {
        let_go_before(lr, k);
        if (lr->n == 0 || lr->r[0].k != k)
                return;
        struct load_record *rec = &lr->r[0];
        /* The records moved: point the loads at their metrics again. */
        for (size_t i = 0; i < rec->nloads; i++)
                rec->loads[i].metrics = rec->metrics[i];
        iv->scenario = rec->scenario;
        iv->loads = rec->loads;
        iv->nloads = rec->nloads;
        if (again) {
                /* A late CPU's row of an interval already stored: the loads' starts and
                 * exits went with the first row. */
                memcpy(lr->again, rec->loads, rec->nloads * sizeof(*rec->loads));
                for (size_t i = 0; i < rec->nloads; i++)
                        lr->again[i].starts = lr->again[i].exits = 0;
                iv->loads = lr->again;
        }
}

void load_records_written(struct load_records *lr, uint64_t k) {
        for (size_t i = 0; i < lr->n; i++)
                if (lr->r[i].k == k)
                        lr->r[i].stored = true;
}

void load_records_free(struct load_records *lr) {
        free(lr->r);
        *lr = (struct load_records){};
}
