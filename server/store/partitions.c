/* SPDX-License-Identifier: MIT */
/* The intervals' partitions on PostgreSQL: one per UTC month for each of the four tables of
 * intervals, made under the farm's partition lock (servers started at once make each once) and
 * remembered by the server once seen. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "db-internal.h"
#include "partitions.h"

const char *const farm_partitioned[FARM_PARTITIONED_TABLES] = { "intervals", "interval_cpus",
                                                                "interval_loads",
                                                                "interval_load_metrics" };

int64_t farm_month_of(int64_t ns) {
        int64_t s = ns / (int64_t) NSEC_PER_SEC - (ns % (int64_t) NSEC_PER_SEC < 0);
        time_t t = (time_t) s;
        struct tm tm;
        if (!gmtime_r(&t, &tm))
                return 0;
        return ((int64_t) tm.tm_year - 70) * 12 + tm.tm_mon;
}

int64_t farm_month_start(int64_t month) {
        int64_t y = month >= 0 ? month / 12 : -((-month + 11) / 12);
        struct tm tm = { .tm_year = (int) (70 + y),
                         .tm_mon = (int) (month - y * 12),
                         .tm_mday = 1 };
        return (int64_t) timegm(&tm) * (int64_t) NSEC_PER_SEC;
}

static bool known(farm_db *db, int64_t month) {
        pthread_mutex_lock(&db->months.lock);
        bool found = false;
        for (size_t i = 0; i < db->months.n && !found; i++)
                found = db->months.v[i] == month;
        pthread_mutex_unlock(&db->months.lock);
        return found;
}

static void remember(farm_db *db, int64_t month) {
        pthread_mutex_lock(&db->months.lock);
        if (db->months.n == db->months.cap) {
                size_t cap = db->months.cap ? db->months.cap * 2 : 32;
                int64_t *v = realloc(db->months.v, cap * sizeof(*v));
                if (v) {
                        db->months.v = v;
                        db->months.cap = cap;
                }
        }
        if (db->months.n < db->months.cap)
                db->months.v[db->months.n++] = month;
        pthread_mutex_unlock(&db->months.lock);
}

void farm_partitions_forget(farm_db *db, int64_t month) {
        pthread_mutex_lock(&db->months.lock);
        for (size_t i = 0; i < db->months.n; i++)
                if (db->months.v[i] == month)
                        db->months.v[i--] = db->months.v[--db->months.n];
        pthread_mutex_unlock(&db->months.lock);
}

/* Forgets every month: partitions dropped by another server are made again when data of
 * theirs arrives. */
void farm_partitions_forget_all(farm_db *db) {
        pthread_mutex_lock(&db->months.lock);
        db->months.n = 0;
        pthread_mutex_unlock(&db->months.lock);
}

static int make_locked(sql_conn *c, int64_t month, char *err) {
        int64_t from = farm_month_start(month), to = farm_month_start(month + 1);
        time_t s = (time_t) (from / (int64_t) NSEC_PER_SEC);
        struct tm tm;
        gmtime_r(&s, &tm);
        int r = farm_exec(c, "SELECT pg_advisory_xact_lock(" FARM_LOCK_PARTITIONS ")", err);
        for (size_t i = 0; i < ELEMENTSOF(farm_partitioned) && r >= 0; i++) {
                char sql[512];
                snprintf(sql, sizeof(sql),
                         "CREATE TABLE IF NOT EXISTS %s_p%04d%02d PARTITION OF %s "
                         "FOR VALUES FROM (%lld) TO (%lld)",
                         farm_partitioned[i], tm.tm_year + 1900, tm.tm_mon + 1, farm_partitioned[i],
                         (long long) from, (long long) to);
                r = farm_exec(c, sql, err);
        }
        return r;
}

/* The partitions of one month, made if they are not there. */
static int make(sql_conn *c, int64_t month, char *err) {
        farm_db *db = farm_of(c);
        if (known(db, month))
                return 0;
        int r = sql_begin(c, SQL_TXN_WRITE);
        if (r < 0)
                return farm_fail(c, r, "cannot begin", err);
        r = make_locked(c, month, err);
        if (r >= 0)
                r = farm_commit(c, err);
        if (r < 0) {
                sql_rollback(c);
                return r;
        }
        remember(db, month);
        return 0;
}

int farm_partitions_span(sql_conn *c, int64_t from_ns, int64_t to_ns, char *err) {
        if (sql_dialect(c) != SQL_PG)
                return 0;
        int r = 0;
        for (int64_t m = farm_month_of(from_ns); m <= farm_month_of(to_ns) && r >= 0; m++)
                r = make(c, m, err);
        return r;
}

int farm_partitions_ahead(sql_conn *c, char *err) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t now = (int64_t) ts.tv_sec * (int64_t) NSEC_PER_SEC;
        return farm_partitions_span(c, now, farm_month_start(farm_month_of(now) + 1), err);
}

int farm_partitions_for(sql_conn *c, const struct summary *s, char *err) {
        int r = 0;
        for (size_t i = 0; i < s->nintervals && r >= 0; i++)
                r = farm_partitions_span(c, s->intervals[i].start_ns, s->intervals[i].start_ns,
                                         err);
        return r;
}
