/* SPDX-License-Identifier: MIT */
/* Keeping the local database bounded for months: retention in small batches, incremental
 * vacuum, and WAL checkpoints. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "macro.h"
#include "store-internal.h"

/* The WAL is cut back to this when a checkpoint lets it restart. */
#define WAL_SIZE_LIMIT (4 * 1024 * 1024)

static int pragma_value(store *s, const char *sql, int64_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, sql, &st);
        if (r < 0)
                return r;
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
                return store_fail(s, rc, sql);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

int store_setup_vacuum(store *s) {
        char sql[64];
        int64_t mode;
        struct stat st;
        int r;

        snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %d", WAL_SIZE_LIMIT);
        r = store_exec(s, sql);
        if (r < 0)
                return r;
        r = pragma_value(s, "PRAGMA auto_vacuum", &mode);
        if (r < 0)
                return r;
        if (mode == 0 && stat(s->path, &st) == 0 &&
            (unsigned long long) st.st_size <= STORE_VACUUM_CONVERT_MAX) {
                /* Changing auto_vacuum on a database with tables takes a VACUUM, which
                 * rewrites the file (needing its size again in free space). */
                r = store_exec(s, "PRAGMA auto_vacuum = INCREMENTAL");
                if (r >= 0 && store_exec(s, "VACUUM") < 0) {
                        /* No room for the copy (a full disk) must not keep rtsoakd from
                         * starting: the file stays as it was, and the next start tries again. */
                        r = store_exec(s, "PRAGMA auto_vacuum = NONE");
                }
                if (r < 0)
                        return r;
                r = pragma_value(s, "PRAGMA auto_vacuum", &mode);
                if (r < 0)
                        return r;
        }
        s->auto_vacuum = (int) mode;
        return 0;
}

bool store_vacuum_incremental(const store *s) {
        return s->auto_vacuum == 2;
}

static int exec_bound(store *s, const char *sql, int64_t before_ns, int64_t batch,
                      uint64_t *count) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, sql, &st);
        if (r < 0)
                return r;
        int n = sqlite3_bind_parameter_count(st);
        if (n >= 1)
                sqlite3_bind_int64(st, 1, before_ns);
        if (n >= 2)
                sqlite3_bind_int64(st, 2, batch);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
                return store_fail(s, rc, "cannot delete old rows");
        if (count)
                *count += (uint64_t) sqlite3_changes(s->db);
        return 0;
}

int store_prune(store *s, int64_t before_ns, size_t batch, unsigned vacuum_pages,
                struct store_prune_result *ret) {
        struct store_prune_result got = {};
        int r;

        /* Rows still waiting for the farm server are never deleted. */
        static const char *const steps[] = {
                "DELETE FROM temp.prune_intervals",
                "DELETE FROM temp.prune_events",
                "INSERT INTO temp.prune_intervals SELECT i.id FROM intervals i "
                "WHERE i.start_ns < ?1 AND NOT EXISTS (SELECT 1 FROM outbox o "
                "WHERE o.state = 'pending' AND o.interval_id = i.id) ORDER BY i.start_ns LIMIT ?2",
                "INSERT INTO temp.prune_events SELECT e.id FROM events e "
                "WHERE e.interval_id IN (SELECT id FROM temp.prune_intervals)",
                "INSERT INTO temp.prune_events SELECT e.id FROM events e "
                "WHERE e.interval_id IS NULL AND e.time_ns < ?1 AND NOT EXISTS (SELECT 1 FROM "
                "outbox o WHERE o.state = 'pending' AND o.event_id = e.id) "
                "ORDER BY e.time_ns LIMIT ?2",
                "DELETE FROM interval_load_metrics WHERE interval_id IN "
                "(SELECT id FROM temp.prune_intervals)",
                "DELETE FROM interval_loads WHERE interval_id IN (SELECT id FROM "
                "temp.prune_intervals)",
                "DELETE FROM interval_cpus WHERE interval_id IN (SELECT id FROM "
                "temp.prune_intervals)",
                "DELETE FROM traces WHERE interval_id IN (SELECT id FROM temp.prune_intervals)",
        };
        r = store_exec(s,
                       "CREATE TEMP TABLE IF NOT EXISTS prune_intervals (id INTEGER PRIMARY KEY);"
                       "CREATE TEMP TABLE IF NOT EXISTS prune_events (id INTEGER PRIMARY KEY)");
        if (r < 0)
                return r;
        if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        r = store_exec(s, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        /* Then the rows that are counted. */
        const struct {
                const char *sql;
                uint64_t *count;
        } counted[] = {
                { "DELETE FROM outbox WHERE event_id IN (SELECT id FROM temp.prune_events)",
                  &got.outbox },
                { "DELETE FROM outbox WHERE interval_id IN (SELECT id FROM temp.prune_intervals)",
                  &got.outbox },
                { "DELETE FROM events WHERE id IN (SELECT id FROM temp.prune_events)",
                  &got.events },
                { "DELETE FROM intervals WHERE id IN (SELECT id FROM temp.prune_intervals)",
                  &got.intervals },
        };
        for (size_t i = 0; i < ELEMENTSOF(steps) && r >= 0; i++)
                r = exec_bound(s, steps[i], before_ns, (int64_t) batch, NULL);
        for (size_t i = 0; i < ELEMENTSOF(counted) && r >= 0; i++)
                r = exec_bound(s, counted[i].sql, 0, 0, counted[i].count);
        if (r >= 0)
                r = store_exec(s, "COMMIT");
        if (r < 0) {
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                return r;
        }

        if (vacuum_pages > 0 && s->auto_vacuum == 2) {
                int64_t before = 0, after = 0;
                char sql[64];
                snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%u)", vacuum_pages);
                r = pragma_value(s, "PRAGMA freelist_count", &before);
                if (r >= 0)
                        r = store_exec(s, sql);
                if (r >= 0)
                        r = pragma_value(s, "PRAGMA freelist_count", &after);
                if (r < 0)
                        return r;
                if (before > after)
                        got.pages_freed = (uint64_t) (before - after);
        }
        ret->intervals += got.intervals;
        ret->events += got.events;
        ret->outbox += got.outbox;
        ret->pages_freed += got.pages_freed;
        return (int) MIN(got.intervals + got.events, (uint64_t) INT32_MAX);
}

int store_checkpoint(store *s) {
        int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
                return store_fail(s, rc, "cannot checkpoint the WAL");
        return 0;
}
