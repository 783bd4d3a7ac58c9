/* SPDX-License-Identifier: MIT */
/* rtsoak-server migrate: a farm copied table by table into another store (PostgreSQL's COPY),
 * the intervals with their CPUs, loads and metrics in chunks of their own transaction each, so
 * that a copy interrupted and run again goes on after the last chunk it committed; then every
 * table of both compared row by row, in the order of its key. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "farm-copy.h"
#include "db-internal.h"
#include "partitions.h"
#include "timeutil.h"

/* Intervals per transaction of the copy: with 8 CPUs, some 100,000 rows. */
#define CHUNK_INTERVALS 10000
/* Rows per FETCH of a cursor that reads PostgreSQL. */
#define FETCH_ROWS "5000"
#define COLUMNS_MAX 32

/* The farm's tables, in the order a copy fills them (what a row refers to comes first), with the
 * key they are compared in.  child: a table of the intervals' (its rows carry the interval's
 * start on PostgreSQL, taken from the interval). */
static const struct table {
        const char *name, *key;
        bool child;
} tables[] = {
        { "machines", "id" },
        { "admins", "name" },
        { "readers", "name" },
        { "runs", "id" },
        { "intervals", "id" },
        { "interval_cpus", "\"interval\", cpu", true },
        { "interval_loads", "\"interval\", idx", true },
        { "interval_load_metrics", "\"interval\", load_idx, idx", true },
        { "events", "id" },
        { "traces", "id" },
        { "uploads", "run, seq" },
        { "run_days", "run, day" },
        { "run_day_scenarios", "run, day, scenario" },
        { "load_downs", "run, seq, load_idx" },
        { "hist_days", "run, day, scenario, cpu" },
        { "run_day_hists", "run, day, scenario" },
        { "inventories", "run, version" },
        { "overlaps", "run_a, run_b, start_ns, end_ns, received_ns, machine_id" },
        { "machine_settings", "id" },
        { "maintenance", "id" },
        { "waivers", "id" },
        { "audit", "id" },
        { "rule_versions", "id" },
        { "verdict_log", "id" },
        { "notifications", "id" },
        { "notification_deliveries", "id" },
        { "notify_seen", "problem" },
        { "notify_state", "key" },
};

enum ctype { C_INT, C_DOUBLE, C_TEXT, C_BLOB };

/* The columns both stores have, with the type they take. */
struct columns {
        const char *name[COLUMNS_MAX];
        char names[COLUMNS_MAX][64];
        enum ctype type[COLUMNS_MAX];
        size_t n;
};

struct side {
        farm_db *db;
        sql_conn *c;
};

/* ---- reading a table ----------------------------------------------------------------------- */

/* Rows of a SELECT, streamed: SQLite steps through them; PostgreSQL fetches them in pieces
 * from a cursor in a snapshot. */
struct reader {
        sql_conn *c;
        sql_stmt *st;
        bool cursor, any;
};

static int reader_open(struct reader *rd, sql_conn *c, const char *select, char *err) {
        *rd = (struct reader){ .c = c, .cursor = sql_dialect(c) == SQL_PG };
        int r;
        if (!rd->cursor) {
                r = sql_prepare_once(c, select, &rd->st);
                return r < 0 ? farm_fail(c, r, "cannot read", err) : 0;
        }
        _cleanup_free_ char *declare = NULL;
        if (asprintf(&declare, "DECLARE rtsoak_copy NO SCROLL CURSOR FOR %s", select) < 0)
                return -ENOMEM;
        if ((r = sql_begin(c, SQL_TXN_SNAPSHOT)) < 0 || (r = sql_exec(c, declare)) < 0 ||
            (r = sql_prepare_once(c, "FETCH " FETCH_ROWS " FROM rtsoak_copy", &rd->st)) < 0) {
                sql_rollback(c);
                return farm_fail(c, r, "cannot read", err);
        }
        return 0;
}

static int reader_next(struct reader *rd) {
        int r = sql_step(rd->st);
        if (!rd->cursor || r != SQL_DONE) {
                rd->any |= r == SQL_ROW;
                return r;
        }
        if (!rd->any)
                return SQL_DONE; /* the last FETCH came back empty */
        rd->any = false;
        return reader_next(rd); /* stepped past its end, the FETCH runs again */
}

static void reader_close(struct reader *rd) {
        sql_finalize(rd->st);
        rd->st = NULL;
        if (rd->cursor)
                sql_rollback(rd->c);
}

static int query_int(sql_conn *c, const char *sql, int64_t *ret, char *err) {
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(c, sql, &st);
        if (r >= 0)
                r = sql_step(st);
        if (r != SQL_ROW)
                return farm_fail(c, r, sql, err);
        *ret = sql_column_int64(st, 0);
        return 0;
}

static enum ctype ctype_of(const char *type) {
        if (strcasecmp(type, "bytea") == 0 || strcasecmp(type, "blob") == 0)
                return C_BLOB;
        if (strcasecmp(type, "double precision") == 0 || strcasecmp(type, "real") == 0)
                return C_DOUBLE;
        if (strcasecmp(type, "bigint") == 0 || strcasecmp(type, "integer") == 0)
                return C_INT;
        return C_TEXT;
}

/* The columns of table with their types (as declared: SQLite's affinity names, PostgreSQL's
 * types), less the intervals' start that the children carry on PostgreSQL. */
static int columns_of(sql_conn *pg, const struct table *t, struct columns *ret, char *err) {
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(
                pg,
                sql_dialect(pg) == SQL_PG
                        ? "SELECT column_name, data_type FROM "
                          "information_schema.columns WHERE table_schema = "
                          "current_schema() AND table_name = ? "
                          "ORDER BY ordinal_position"
                        : "SELECT name, type FROM pragma_table_info(?) ORDER BY cid",
                &st);
        if (r < 0)
                return farm_fail(pg, r, "cannot list the columns", err);
        sql_bind_text(st, 1, t->name);
        *ret = (struct columns){};
        while ((r = sql_step(st)) == SQL_ROW && ret->n < COLUMNS_MAX) {
                const char *name = sql_column_text(st, 0), *type = sql_column_text(st, 1);
                if (t->child && strcmp(name, "start_ns") == 0)
                        continue;
                snprintf(ret->names[ret->n], sizeof(ret->names[0]), "%s", name);
                ret->name[ret->n] = ret->names[ret->n];
                ret->type[ret->n++] = ctype_of(type ?: "");
        }
        if (r < 0)
                return farm_fail(pg, r, "cannot list the columns", err);
        if (ret->n == 0)
                return farm_failf(farm_of(pg), -ENOENT, err, "no table %s", t->name);
        return 0;
}

/* "SELECT t."a", t."b" ... FROM t": the table's columns (and for a child the interval's
 * start, from a join) with the condition where and the order order. */
static char *select_of(const struct table *t, const struct columns *cols, bool with_start,
                       const char *where, const char *order) {
        char *s = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);
        if (!f)
                return NULL;
        fputs("SELECT ", f);
        for (size_t i = 0; i < cols->n; i++)
                fprintf(f, "%st.\"%s\"", i ? ", " : "", cols->name[i]);
        if (with_start)
                fputs(", i.start_ns", f);
        fprintf(f, " FROM \"%s\" t", t->name);
        if (with_start)
                fputs(" JOIN intervals i ON i.id = t.\"interval\"", f);
        if (where)
                fprintf(f, " WHERE %s", where);
        if (order)
                fprintf(f, " ORDER BY %s", order);
        return fclose(f) == 0 ? s : NULL;
}

/* ---- copying ------------------------------------------------------------------------------- */

/* The rows of the reader into table on dst (a copy begun by the caller's columns). */
static int copy_rows(struct reader *rd, sql_conn *dst, const struct columns *cols, bool start,
                     uint64_t *ret_rows, char *err) {
        int r;
        uint64_t n = 0;
        while ((r = reader_next(rd)) == SQL_ROW) {
                for (size_t i = 0; i < cols->n + start; i++) {
                        sql_stmt *st = rd->st;
                        size_t len;
                        const void *blob;
                        if (sql_column_null(st, (int) i)) {
                                sql_copy_null(dst);
                                continue;
                        }
                        switch (i < cols->n ? cols->type[i] : C_INT) {
                        case C_INT:
                                sql_copy_int64(dst, sql_column_int64(st, (int) i));
                                break;
                        case C_DOUBLE:
                                sql_copy_double(dst, sql_column_double(st, (int) i));
                                break;
                        case C_TEXT:
                                sql_copy_text(dst, sql_column_text(st, (int) i));
                                break;
                        case C_BLOB:
                                blob = sql_column_blob(st, (int) i, &len);
                                sql_copy_blob(dst, blob, len);
                                break;
                        }
                }
                if ((r = sql_copy_row(dst)) < 0)
                        return farm_fail(dst, r, "cannot copy a row", err);
                n++;
        }
        if (r < 0)
                return farm_fail(rd->c, r, "cannot read the rows to copy", err);
        *ret_rows += n;
        return 0;
}

/* Copies the rows of src's SELECT into table on dst, in dst's open transaction. */
static int copy_select(struct side *src, struct side *dst, const struct table *t,
                       const struct columns *cols, const char *where, uint64_t *ret_rows,
                       char *err) {
        bool start = t->child && sql_dialect(dst->c) == SQL_PG;
        _cleanup_free_ char *select = select_of(t, cols, t->child, where, NULL);
        const char *names[COLUMNS_MAX + 1];
        memcpy(names, cols->name, cols->n * sizeof(*names));
        names[cols->n] = "start_ns";
        if (!select)
                return -ENOMEM;
        struct reader rd;
        int r = reader_open(&rd, src->c, select, err);
        if (r < 0)
                return r;
        r = sql_copy_begin(dst->c, t->name, names, cols->n + start);
        if (r < 0)
                r = farm_fail(dst->c, r, "cannot copy", err);
        else {
                r = copy_rows(&rd, dst->c, cols, start, ret_rows, err);
                int q = sql_copy_end(dst->c);
                if (q < 0 && r >= 0)
                        r = farm_fail(dst->c, q, t->name, err);
        }
        reader_close(&rd);
        return r;
}

/* One chunk of intervals, (lo, hi], with their rows of every child table, in one transaction
 * (its partitions made before). */
static int copy_chunk(struct side *src, struct side *dst, const struct columns *cols, int64_t lo,
                      int64_t hi, uint64_t *ret_rows, char *err) {
        char where[160], child_where[160], sql[256];
        int64_t first, last;
        snprintf(where, sizeof(where), "t.id > %lld AND t.id <= %lld", (long long) lo,
                 (long long) hi);
        snprintf(child_where, sizeof(child_where),
                 "t.\"interval\" > %lld AND t.\"interval\" <= %lld", (long long) lo,
                 (long long) hi);
        snprintf(sql, sizeof(sql),
                 "SELECT coalesce(min(start_ns), 0) FROM intervals WHERE id > %lld AND id <= %lld",
                 (long long) lo, (long long) hi);
        int r = query_int(src->c, sql, &first, err);
        if (r >= 0) {
                snprintf(sql, sizeof(sql),
                         "SELECT coalesce(max(start_ns), 0) FROM intervals "
                         "WHERE id > %lld AND id <= %lld",
                         (long long) lo, (long long) hi);
                r = query_int(src->c, sql, &last, err);
        }
        if (r < 0 || (r = farm_partitions_span(dst->c, first, last, err)) < 0 ||
            (r = farm_begin_write(dst->c, err)) < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(tables); i++) {
                const struct table *t = &tables[i];
                struct columns tc;
                if (strcmp(t->name, "intervals") != 0 && !t->child)
                        continue;
                r = strcmp(t->name, "intervals") == 0 ? 0 : columns_of(dst->c, t, &tc, err);
                if (r >= 0)
                        r = copy_select(src, dst, t, strcmp(t->name, "intervals") == 0 ? cols : &tc,
                                        t->child ? child_where : where, ret_rows, err);
        }
        if (r >= 0)
                r = farm_commit(dst->c, err);
        if (r < 0)
                sql_rollback(dst->c);
        return r;
}

/* The intervals and their children, chunk by chunk after the last one copied before. */
static int copy_intervals(struct side *src, struct side *dst, int64_t chunk, uint64_t *ret_rows,
                          char *err) {
        const struct table *t = tables;
        while (strcmp(t->name, "intervals") != 0)
                t++;
        struct columns cols;
        int64_t max, done, total;
        int r = columns_of(dst->c, t, &cols, err);
        if (r < 0 ||
            (r = query_int(src->c, "SELECT coalesce(max(id), 0) FROM intervals", &max, err)) < 0 ||
            (r = query_int(src->c, "SELECT count(*) FROM intervals", &total, err)) < 0 ||
            (r = query_int(dst->c, "SELECT coalesce(max(id), 0) FROM intervals", &done, err)) < 0)
                return r;
        if (done > 0)
                log_info("intervals: going on after interval %" PRId64 " of %" PRId64, done, max);
        int64_t t0 = now_ns(CLOCK_MONOTONIC), last_log = t0;
        uint64_t rows = 0;
        for (int64_t lo = done; lo < max && r >= 0; lo += chunk) {
                r = copy_chunk(src, dst, &cols, lo, MIN(lo + chunk, max), &rows, err);
                int64_t now = now_ns(CLOCK_MONOTONIC);
                if (r >= 0 && now - last_log > 10 * (int64_t) NSEC_PER_SEC) {
                        log_info("intervals: up to id %" PRId64 " of %" PRId64 " (%.0f %%), "
                                 "%.0f rows/s",
                                 MIN(lo + chunk, max), max,
                                 100.0 * (double) MIN(lo + chunk, max) / (double) max,
                                 (double) rows * 1e9 / (double) (now - t0));
                        last_log = now;
                }
        }
        *ret_rows += rows;
        (void) total;
        return r;
}

/* A table other than the intervals': copied whole in one transaction, or left when the target
 * holds as many rows (copied by an earlier run).  Anything else in the target is not ours. */
static int copy_table(struct side *src, struct side *dst, const struct table *t, uint64_t *ret_rows,
                      char *err) {
        char sql[128];
        int64_t n_src, n_dst;
        struct columns cols;
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\"", t->name);
        int r = columns_of(dst->c, t, &cols, err);
        if (r < 0 || (r = query_int(src->c, sql, &n_src, err)) < 0 ||
            (r = query_int(dst->c, sql, &n_dst, err)) < 0)
                return r;
        if (n_dst == n_src)
                return 0;
        if (n_dst != 0)
                return farm_failf(dst->db, -EEXIST, err,
                                  "%s holds %" PRId64 " rows, the source %" PRId64 ": not an "
                                  "interrupted copy of this farm (was the source changed "
                                  "since? stop its server) ; use an empty database",
                                  t->name, n_dst, n_src);
        if ((r = farm_begin_write(dst->c, err)) < 0)
                return r;
        r = copy_select(src, dst, t, &cols, NULL, ret_rows, err);
        if (r >= 0)
                r = farm_commit(dst->c, err);
        if (r < 0)
                sql_rollback(dst->c);
        return r;
}

/* The identities go on after the ids copied. */
static int restart_ids(sql_conn *c, char *err) {
        if (sql_dialect(c) != SQL_PG)
                return 0;
        int r = farm_exec(c,
                          "SELECT setval('intervals_id_seq', coalesce(max(id), 0) + 1, false) "
                          "FROM intervals",
                          err);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(tables); i++) {
                char sql[256];
                if (strcmp(tables[i].key, "id") != 0 || strcmp(tables[i].name, "machines") == 0 ||
                    strcmp(tables[i].name, "intervals") == 0)
                        continue;
                snprintf(sql, sizeof(sql),
                         "SELECT setval(pg_get_serial_sequence('%s', 'id'), coalesce(max(id), "
                         "0) + 1, false) FROM \"%s\"",
                         tables[i].name, tables[i].name);
                r = farm_exec(c, sql, err);
        }
        return r;
}

static int open_sides(const char *from, const char *to, struct side *src, struct side *dst,
                      char *err) {
        int r = farm_db_open(from, &src->db, err);
        if (r < 0)
                return r;
        if ((r = farm_db_open(to, &dst->db, err)) < 0) {
                farm_db_close(src->db);
                return r;
        }
        src->c = farm_reader(src->db);
        dst->c = farm_writer(dst->db);
        return 0;
}

static void close_sides(struct side *src, struct side *dst) {
        farm_release(src->c);
        farm_release(dst->c);
        farm_db_close(src->db);
        farm_db_close(dst->db);
}

/* Every table of the source must be one the copy knows: a table added to the schema and not
 * to tables[] would be left behind. */
static int known_tables(struct side *src, char *err) {
        _cleanup_sql_finalize_ sql_stmt *st = NULL;
        int r = sql_prepare_once(src->c,
                                 sql_dialect(src->c) == SQL_PG
                                         ? "SELECT tablename FROM pg_tables WHERE schemaname = "
                                           "current_schema() AND tablename NOT LIKE '%\\_p______' "
                                           "AND tablename NOT IN ('farm_meta', 'rate_buckets')"
                                         : "SELECT name FROM sqlite_schema WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
                                 &st);
        while (r >= 0 && (r = sql_step(st)) == SQL_ROW) {
                const char *name = sql_column_text(st, 0);
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(tables) && !known; i++)
                        known = strcmp(tables[i].name, name) == 0;
                if (!known)
                        return farm_failf(src->db, -EPROTO, err,
                                          "table %s is not one this copy knows", name);
        }
        return r < 0 ? farm_fail(src->c, r, "cannot list the tables", err) : 0;
}

int farm_copy(const char *from, const char *to, unsigned chunk, struct farm_copy_stats *ret,
              char err[static FARM_ERROR_MAX]) {
        struct side src, dst;
        *ret = (struct farm_copy_stats){};
        int r = open_sides(from, to, &src, &dst, err);
        if (r < 0)
                return r;
        r = known_tables(&src, err);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(tables); i++) {
                const struct table *t = &tables[i];
                if (t->child)
                        continue; /* with the intervals */
                uint64_t before = ret->rows_copied;
                r = strcmp(t->name, "intervals") == 0
                            ? copy_intervals(&src, &dst, chunk ?: CHUNK_INTERVALS,
                                             &ret->rows_copied, err)
                            : copy_table(&src, &dst, t, &ret->rows_copied, err);
                if (r >= 0 && ret->rows_copied > before)
                        log_info("%s: %" PRIu64 " rows copied%s", t->name,
                                 ret->rows_copied - before,
                                 strcmp(t->name, "intervals") == 0
                                         ? " (with their CPUs, loads and load metrics)"
                                         : "");
                ret->tables++;
        }
        if (r >= 0)
                r = restart_ids(dst.c, err);
        close_sides(&src, &dst);
        return r;
}

/* ---- verifying ----------------------------------------------------------------------------- */

/* The value of column i as text, for comparing and for messages. */
static void value_text(sql_stmt *st, int i, enum ctype type, char *buf, size_t size) {
        size_t len;
        if (sql_column_null(st, i)) {
                snprintf(buf, size, "NULL");
                return;
        }
        switch (type) {
        case C_INT:
                snprintf(buf, size, "%" PRId64, sql_column_int64(st, i));
                break;
        case C_DOUBLE:
                snprintf(buf, size, "%.17g", sql_column_double(st, i));
                break;
        case C_TEXT:
                snprintf(buf, size, "'%s'", sql_column_text(st, i) ?: "");
                break;
        case C_BLOB: {
                const unsigned char *p = sql_column_blob(st, i, &len);
                uint64_t h = 1469598103934665603u; /* FNV-1a: a blob compared by its hash */
                for (size_t k = 0; k < len; k++)
                        h = (h ^ p[k]) * 1099511628211u;
                snprintf(buf, size, "blob(%zu bytes, %016" PRIx64 ")", len, h);
                break;
        }
        }
}

static int compare_rows(struct reader *a, struct reader *b, const struct table *t,
                        const struct columns *cols, uint64_t *ret_rows, char *err) {
        for (uint64_t row = 0;; row++) {
                int ra = reader_next(a), rb = reader_next(b);
                if (ra < 0 || rb < 0)
                        return farm_fail(ra < 0 ? a->c : b->c, ra < 0 ? ra : rb,
                                         "cannot read the rows to compare", err);
                if (ra != rb) {
                        snprintf(err, FARM_ERROR_MAX,
                                 "%s: the %s has more rows (%" PRIu64 " the same)", t->name,
                                 ra == SQL_ROW ? "source" : "copy", row);
                        return -EBADMSG;
                }
                if (ra == SQL_DONE) {
                        *ret_rows += row;
                        return 0;
                }
                for (size_t i = 0; i < cols->n; i++) {
                        char va[160], vb[160];
                        value_text(a->st, (int) i, cols->type[i], va, sizeof(va));
                        value_text(b->st, (int) i, cols->type[i], vb, sizeof(vb));
                        if (strcmp(va, vb) != 0) {
                                snprintf(err, FARM_ERROR_MAX,
                                         "%s: row %" PRIu64 " (in the order of %s) differs in "
                                         "%s: %s in the source, %s in the copy",
                                         t->name, row + 1, t->key, cols->name[i], va, vb);
                                return -EBADMSG;
                        }
                }
        }
}

static int verify_table(struct side *src, struct side *dst, const struct table *t,
                        uint64_t *ret_rows, char *err) {
        struct columns cols;
        int r = columns_of(sql_dialect(dst->c) == SQL_PG ? dst->c : src->c, t, &cols, err);
        if (r < 0)
                return r;
        /* In the order of the key, the same on both: text sorts byte by byte on both stores. */
        _cleanup_free_ char *select = select_of(t, &cols, false, NULL, t->key);
        if (!select)
                return -ENOMEM;
        struct reader a, b;
        if ((r = reader_open(&a, src->c, select, err)) < 0)
                return r;
        if ((r = reader_open(&b, dst->c, select, err)) < 0) {
                reader_close(&a);
                return r;
        }
        r = compare_rows(&a, &b, t, &cols, ret_rows, err);
        reader_close(&a);
        reader_close(&b);
        return r;
}

int farm_copy_verify(const char *from, const char *to, struct farm_copy_stats *ret,
                     char err[static FARM_ERROR_MAX]) {
        struct side src, dst;
        *ret = (struct farm_copy_stats){};
        int r = open_sides(from, to, &src, &dst, err);
        if (r < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(tables); i++) {
                uint64_t before = ret->rows_compared;
                int64_t t0 = now_ns(CLOCK_MONOTONIC);
                r = verify_table(&src, &dst, &tables[i], &ret->rows_compared, err);
                if (r >= 0)
                        log_info("%s: %" PRIu64 " rows the same (%.1f s)", tables[i].name,
                                 ret->rows_compared - before,
                                 (double) (now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
                ret->tables++;
        }
        close_sides(&src, &dst);
        return r;
}
